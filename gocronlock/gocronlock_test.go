package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/gocronlock"
	"github.com/distlock-go/distlock/internal/testserver"
	_ "github.com/distlock-go/distlock/memlock"
	_ "github.com/distlock-go/distlock/redislock"
	_ "github.com/distlock-go/distlock/redlock"
	_ "github.com/distlock-go/distlock/sqllock/sqlurl"
	_ "github.com/distlock-go/distlock/zklock"
)

// stores returns a URL per backend the schedulers share, each on a server
// of its own.
func stores(t *testing.T) map[string]string {
	return map[string]string{
		"memory": "mem://gocron-" + t.Name(),
		"redis":  "redis://" + testserver.StartRedis(t).Addr(),
		"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "locks.db"),
	}
}

// ticks counts the runs of each tick of a job, across schedulers.
type ticks struct {
	mu   sync.Mutex
	runs map[time.Time][]string
}

func (k *ticks) run(scheduler string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	tick := time.Now().Truncate(time.Second)
	k.runs[tick] = append(k.runs[tick], scheduler)
}

// check fails t unless each tick ran exactly once, and some ran.
func (k *ticks) check(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.runs) < 2 {
		t.Errorf("%d ticks ran in the test's seconds; want at least 2", len(k.runs))
	}
	for tick, who := range k.runs {
		if len(who) != 1 {
			t.Errorf("tick %s ran %d times, by %v; want once", tick.Format(time.TimeOnly), len(who), who)
		}
	}
}

// openFresh opens a client of url for one scheduler, closed when the test
// ends, and declares the store fresh: each test's server is new.
func openFresh(t *testing.T, ctx context.Context, url string) *distlock.Client {
	t.Helper()
	c, err := distlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.DeclareFresh(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// runSchedulers starts three schedulers, each with its own client of url
// and the options opt returns, all running one job every second, for
// about four seconds.
func runSchedulers(t *testing.T, url string, opt func(c *distlock.Client) gocron.SchedulerOption) *ticks {
	k := &ticks{runs: make(map[time.Time][]string)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var scheds []gocron.Scheduler
	for i := range 3 {
		c := openFresh(t, ctx, url)
		s, err := gocron.NewScheduler(opt(c))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprint("scheduler-", i)
		_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
			k.run(name)
			time.Sleep(10 * time.Millisecond) // a run much shorter than its tick
		}), gocron.WithName("report"))
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	time.Sleep(4500 * time.Millisecond)
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	return k
}

// TestLockerRunsEachTickOnce: three schedulers sharing a store through a
// Locker run each tick of a job once between them.
func TestLockerRunsEachTickOnce(t *testing.T) {
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			k := runSchedulers(t, url, func(c *distlock.Client) gocron.SchedulerOption {
				return gocron.WithDistributedLocker(gocronlock.NewLocker(c, gocronlock.WithLockOptions(distlock.WithTTL(5*time.Second))))
			})
			k.check(t)
		})
	}
}

// TestElectorRunsOnTheLeaderOnly: three schedulers campaigning through an
// Elector: the leader alone runs the job, once per tick.
func TestElectorRunsOnTheLeaderOnly(t *testing.T) {
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			k := runSchedulers(t, url, func(c *distlock.Client) gocron.SchedulerOption {
				e, err := gocronlock.NewElector(context.Background(), c, "schedulers", gocronlock.WithLockOptions(distlock.WithTTL(5*time.Second)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := e.Close(); err != nil {
						t.Errorf("Elector.Close: %v", err)
					}
				})
				return gocron.WithDistributedElector(e)
			})
			k.check(t)
		})
	}
}

// TestMinHoldKeepsTheTick: a run that ended at once keeps its lock for
// the minimum hold, so a scheduler whose clock is behind cannot run the
// same tick; after the hold the lock is free.
func TestMinHoldKeepsTheTick(t *testing.T) {
	ctx := context.Background()
	c, err := distlock.Open(ctx, "mem://minhold")
	if err != nil {
		t.Fatal(err)
	}
	l := gocronlock.NewLocker(c, gocronlock.WithMinHold(800*time.Millisecond))
	taken := time.Now()
	lock, err := l.Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if gocronlock.Lock(lock) == nil || gocronlock.Lock(lock).Token() == 0 {
		t.Error("the distlock handle behind the run's lock is missing")
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if again, err := l.Lock(ctx, "report"); err == nil {
		if time.Since(taken) < 800*time.Millisecond {
			t.Error("the lock of a finished run was free before its minimum hold")
		}
		_ = again.Unlock(ctx)
	} else if !errors.Is(err, distlock.ErrNotObtained) {
		t.Fatalf("Lock during the hold: %v; want ErrNotObtained", err)
	}
	time.Sleep(time.Until(taken.Add(time.Second)))
	again, err := l.Lock(ctx, "report")
	if err != nil {
		t.Fatalf("Lock after the minimum hold: %v", err)
	}
	_ = again.Unlock(ctx)

	if _, err := gocronlock.NewLocker(c, gocronlock.WithMinHold(-time.Second)).Lock(ctx, "x"); !errors.Is(err, distlock.ErrInvalidArgument) {
		t.Errorf("a negative minimum hold: %v; want ErrInvalidArgument", err)
	}
}
