package gocronlock_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/gocronlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

// TestGocronDistributed is gocron's own TestScheduler_WithDistributed
// (scheduler_test.go, v2) with its in-memory test Locker and Elector
// replaced by gocronlock's over real stores: three schedulers start the
// same job at once (WithStartImmediately, WithLimitedRuns(1)), each run
// taking 100ms, and the run happens once between them with a scheduler
// Elector, a scheduler Locker or a job Locker, and once per scheduler when
// the job disables the scheduler's Locker. gocron's test locker never
// frees a lock, and gocron retries a skipped run at the job's next tick:
// the locks here are kept (WithMinHold) past the seconds the test watches,
// so that a run at a later tick, which would be right, is not counted.
func TestGocronDistributed(t *testing.T) {
	urls := map[string]string{
		"memory":    "mem://gocron-distributed",
		"redis":     "redis://" + testserver.StartRedis(t).Addr(),
		"redlock":   "redlock://" + testserver.StartRedis(t).Addr() + "," + testserver.StartRedis(t).Addr() + "," + testserver.StartRedis(t).Addr(),
		"postgres":  testserver.StartPostgres(t).URL(),
		"mariadb":   testserver.StartMariaDB(t).URL(),
		"sqlite":    "sqlite://" + filepath.Join(t.TempDir(), "locks.db"),
		"zookeeper": "zk://" + testserver.StartZooKeeper(t).Addr(),
	}
	lockOpts := gocronlock.WithLockOptions(distlock.WithTTL(5 * time.Second))
	hold := gocronlock.WithMinHold(10 * time.Second)
	cases := []struct {
		name  string
		runs  int32
		sched func(t *testing.T, c *distlock.Client, key string) []gocron.SchedulerOption
		job   func(c *distlock.Client, key string) []gocron.JobOption
	}{
		{"3 schedulers with elector", 1,
			func(t *testing.T, c *distlock.Client, key string) []gocron.SchedulerOption {
				e, err := gocronlock.NewElector(context.Background(), c, key, lockOpts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = e.Close() })
				return []gocron.SchedulerOption{gocron.WithDistributedElector(e)}
			}, nil},
		{"3 schedulers with locker", 1,
			func(_ *testing.T, c *distlock.Client, key string) []gocron.SchedulerOption {
				return []gocron.SchedulerOption{gocron.WithDistributedLocker(gocronlock.NewLocker(c, gocronlock.WithKeyPrefix(key+":"), lockOpts, hold))}
			}, nil},
		{"3 schedulers and job with distributed locker", 1, nil,
			func(c *distlock.Client, key string) []gocron.JobOption {
				return []gocron.JobOption{gocron.WithDistributedJobLocker(gocronlock.NewLocker(c, gocronlock.WithKeyPrefix(key+":"), lockOpts, hold))}
			}},
		{"3 schedulers and job with disabled distributed locker", 3,
			func(_ *testing.T, c *distlock.Client, key string) []gocron.SchedulerOption {
				return []gocron.SchedulerOption{gocron.WithDistributedLocker(gocronlock.NewLocker(c, gocronlock.WithKeyPrefix(key+":"), lockOpts, hold))}
			},
			func(*distlock.Client, string) []gocron.JobOption {
				return []gocron.JobOption{gocron.WithDisabledDistributedJobLocker(true)}
			}},
	}
	for store, url := range urls {
		t.Run(store, func(t *testing.T) {
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					key := "distributed-" + string(rune('a'+i))
					var runs atomic.Int32
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					var scheds []gocron.Scheduler
					for range 3 {
						c := openFresh(t, ctx, url)
						var so []gocron.SchedulerOption
						if tc.sched != nil {
							so = tc.sched(t, c, key)
						}
						s, err := gocron.NewScheduler(so...)
						if err != nil {
							t.Fatal(err)
						}
						jo := []gocron.JobOption{gocron.WithStartAt(gocron.WithStartImmediately()), gocron.WithLimitedRuns(1), gocron.WithName("job")}
						if tc.job != nil {
							jo = append(jo, tc.job(c, key)...)
						}
						if _, err := s.NewJob(gocron.DurationJob(time.Second), gocron.NewTask(func() {
							time.Sleep(100 * time.Millisecond)
							runs.Add(1)
						}), jo...); err != nil {
							t.Fatal(err)
						}
						scheds = append(scheds, s)
					}
					for _, s := range scheds {
						s.Start()
					}
					// The expected runs, then long enough for any extra
					// one: each scheduler tries its single run at once.
					deadline := time.Now().Add(30 * time.Second)
					for runs.Load() < tc.runs && time.Now().Before(deadline) {
						time.Sleep(20 * time.Millisecond)
					}
					time.Sleep(2 * time.Second)
					for _, s := range scheds {
						if err := s.Shutdown(); err != nil {
							t.Errorf("Shutdown: %v", err)
						}
					}
					if got := runs.Load(); got != tc.runs {
						t.Errorf("the job ran %d times across 3 schedulers; want %d", got, tc.runs)
					}
				})
			}
		})
	}
}
