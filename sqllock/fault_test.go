package sqllock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// eachDatabase runs f on PostgreSQL, MariaDB and SQLite.
func eachDatabase(t *testing.T, f func(t *testing.T, d database)) {
	t.Run("postgres", func(t *testing.T) { _, d := startPostgres(t); f(t, d) })
	t.Run("mariadb", func(t *testing.T) { _, d := startMariaDB(t); f(t, d) })
	t.Run("sqlite", func(t *testing.T) { f(t, sqliteFile(t)) })
}

// TestConcurrentAttemptsOneWinner: many pools attempt the same free key at
// the same moment, round after round: exactly one is granted each round
// and the tokens never repeat.
func TestConcurrentAttemptsOneWinner(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		const pools, rounds = 16, 15
		backends := make([]*sqllock.Backend, pools)
		for i := range backends {
			backends[i] = d.backend(t)
		}
		ctx := context.Background()
		key := "contended"
		var errs attemptErrors
		var last uint64
		for r := range rounds {
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []driver.Lease
				tokens  []uint64
			)
			start := make(chan struct{})
			for i, b := range backends {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := driver.Lease{Key: key, Owner: "owner-" + string(rune('a'+i)) + "-" + string(rune('a'+r))}
					<-start
					for {
						g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: 30 * time.Second})
						if err != nil {
							if errs.add(t, err) {
								continue
							}
							return
						}
						if g.Acquired {
							mu.Lock()
							winners, tokens = append(winners, l), append(tokens, g.Token)
							mu.Unlock()
						}
						return
					}
				}()
			}
			close(start)
			wg.Wait()
			errs.check(t, "round "+strconv.Itoa(r))
			if len(winners) != 1 {
				t.Fatalf("round %d: %d of %d concurrent attempts granted (tokens %v); want exactly 1", r, len(winners), pools, tokens)
			}
			if tokens[0] <= last {
				t.Fatalf("round %d: token %d not above the previous %d", r, tokens[0], last)
			}
			last = tokens[0]
			if err := backends[0].Release(ctx, winners[0]); err != nil {
				t.Fatalf("round %d: Release: %v", r, err)
			}
		}
	})
}

// attemptErrors counts the errors of concurrent attempts. The backend
// retries a deadlock, a serialisation failure or a busy file once itself,
// so an attempt should answer granted or refused: a few errors are
// tolerated, reported all the same, and more end the test.
type attemptErrors struct {
	mu    sync.Mutex
	n     int
	first error
}

// maxAttemptErrors is the bound on errors in a test.
const maxAttemptErrors = 3

// add counts err and reports whether the attempt may be made again.
func (e *attemptErrors) add(t *testing.T, err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == nil {
		e.first = err
	}
	t.Logf("attempt error %d: %v", e.n, err)
	return e.n <= maxAttemptErrors
}

// check ends the test once the errors passed the bound.
func (e *attemptErrors) check(t *testing.T, when string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n > maxAttemptErrors {
		t.Fatalf("%s: %d or more errors from concurrent attempts (at most %d tolerated); the first: %v", when, e.n, maxAttemptErrors, e.first)
	}
}

// TestTokensSurviveRestart: tokens come from the table, so a database
// killed with SIGKILL and restarted goes on above the last one issued.
func TestTokensSurviveRestart(t *testing.T) {
	type server interface{ Restart() }
	for _, tc := range []struct {
		name  string
		start func(t testing.TB) (server, database)
	}{
		{"postgres", func(t testing.TB) (server, database) { return startPostgres(t) }},
		{"mariadb", func(t testing.TB) (server, database) { return startMariaDB(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := tc.start(t)
			key := "durable"
			c := distlock.New(d.backend(t))
			var last uint64
			for range 5 {
				l := lock(t, c.Mutex(key))
				last = l.Token()
				if err := l.Unlock(context.Background()); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
			srv.Restart() // SIGKILL, then start on the same data
			l := lock(t, distlock.New(d.backend(t)).Mutex(key))
			defer l.Unlock(context.Background())
			if l.Token() <= last {
				t.Fatalf("token after kill -9 and restart: %d; want above the last one issued, %d", l.Token(), last)
			}
		})
	}
}

// TestPausedDatabase: a database stalled past the TTL ends the holder's
// handle by its ValidUntil (renewals cannot be confirmed), and once the
// database answers again another client takes the key with a higher token,
// because the lease ran out by the database's clock meanwhile.
func TestPausedDatabase(t *testing.T) {
	type server interface {
		Pause()
		Resume()
	}
	for _, tc := range []struct {
		name  string
		start func(t testing.TB) (server, database)
	}{
		{"postgres", func(t testing.TB) (server, database) { return startPostgres(t) }},
		{"mariadb", func(t testing.TB) (server, database) { return startMariaDB(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := tc.start(t)
			const ttl = time.Second
			key := "paused"
			holder := lock(t, distlock.New(d.backend(t), distlock.WithTTL(ttl)).Mutex(key))
			other := distlock.New(d.backend(t), distlock.WithTTL(10*time.Second)).Mutex(key)
			if l, err := other.TryLock(ctxFor(t, 5*time.Second)); !errors.Is(err, distlock.ErrNotObtained) {
				if l != nil {
					l.Unlock(context.Background())
				}
				t.Fatalf("TryLock of a held key: %v", err)
			}
			srv.Pause()
			paused := true
			defer func() {
				if paused {
					srv.Resume()
				}
			}()
			select {
			case <-holder.Done():
				if late := time.Since(holder.ValidUntil()); late > 500*time.Millisecond {
					t.Errorf("Done closed %v after ValidUntil", late)
				}
			case <-time.After(3 * ttl):
				t.Fatalf("holder's Done not closed %v into the stall (TTL %v)", 3*ttl, ttl)
			}
			time.Sleep(ttl) // past the lease by any clock
			srv.Resume()
			paused = false
			l, err := other.Lock(ctxFor(t, 20*time.Second))
			if err != nil {
				t.Fatalf("Lock after the stall: %v", err)
			}
			defer l.Unlock(context.Background())
			if l.Token() <= holder.Token() {
				t.Errorf("token after the stall %d; want above the lost holder's %d", l.Token(), holder.Token())
			}
		})
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func lock(t testing.TB, m *distlock.Mutex) *distlock.Lock {
	t.Helper()
	l, err := m.Lock(ctxFor(t, 20*time.Second))
	if err != nil {
		t.Fatalf("Lock(%q): %v", m.Key(), err)
	}
	return l
}

// TestConcurrentPermitsNoOvergrant: many pools ask for the permits of one
// semaphore at the same moment, round after round: exactly Limit are
// granted each round, with distinct tokens.
func TestConcurrentPermitsNoOvergrant(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		const pools, rounds, limit = 12, 8, 3
		backends := make([]*sqllock.Backend, pools)
		for i := range backends {
			backends[i] = d.backend(t)
		}
		ctx := context.Background()
		key := "permits"
		var errs attemptErrors
		for r := range rounds {
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				granted []driver.Lease
				tokens  = map[uint64]bool{}
			)
			start := make(chan struct{})
			for i, b := range backends {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := driver.Lease{Key: key, Owner: "permit-" + string(rune('a'+i)) + "-" + string(rune('a'+r)), Kind: driver.Permit}
					<-start
					for {
						g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: 30 * time.Second, Limit: limit})
						if err != nil {
							if errs.add(t, err) {
								continue
							}
							return
						}
						if g.Acquired {
							mu.Lock()
							granted = append(granted, l)
							tokens[g.Token] = true
							mu.Unlock()
						}
						return
					}
				}()
			}
			close(start)
			wg.Wait()
			errs.check(t, "round "+strconv.Itoa(r))
			if len(granted) != limit || len(tokens) != limit {
				t.Fatalf("round %d: %d of %d concurrent attempts granted a permit of %d (%d distinct tokens)", r, len(granted), pools, limit, len(tokens))
			}
			for _, l := range granted {
				if err := backends[0].Release(ctx, l); err != nil {
					t.Fatalf("round %d: Release: %v", r, err)
				}
			}
		}
	})
}

// TestConcurrentSharedAttempts: many pools take and release read locks,
// write locks and permits of a few keys, and of new ones, all at once.
// The transactions of different keys touch neighbouring rows of the holds
// table, which InnoDB may report as a deadlock; the backend retries such
// an attempt, so callers see grants and refusals, not errors.
func TestConcurrentSharedAttempts(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		const pools, attempts = 16, 60
		ctx := ctxFor(t, 2*time.Minute)
		var (
			wg   sync.WaitGroup
			errs attemptErrors
		)
		for i := range pools {
			b := d.backend(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range attempts {
					kind := []driver.Kind{driver.Read, driver.Write, driver.Permit}[j%3]
					// A key is used by one family: read-write locks and
					// semaphores each have their own keys.
					key := "shared-rw-" + strconv.Itoa((i+j)%4)
					if kind == driver.Permit {
						key = "shared-permit-" + strconv.Itoa((i+j)%4)
					}
					if j%4 == 0 {
						key = "fresh-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
					}
					l := driver.Lease{Key: key, Owner: "o-" + strconv.Itoa(i) + "-" + strconv.Itoa(j), Kind: kind}
					g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute, Limit: 2})
					if err != nil {
						if !errs.add(t, err) {
							return
						}
						continue
					}
					if g.Acquired {
						if err := release(ctx, b, l); err != nil {
							t.Errorf("Release: %v", err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		errs.check(t, "after the attempts")
	})
}

// release repeats Release until its outcome is known, as distlock's
// Unlock does: a release that met a busy SQLite file, or a conflict, is
// made again, and succeeds once the database lets it through.
func release(ctx context.Context, b driver.Backend, l driver.Lease) error {
	for {
		err := b.Release(ctx, l)
		if err == nil || errors.Is(err, driver.ErrNotHeld) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}
