package distlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/redislock"
)

// syncBuffer is a bytes.Buffer safe for the watchdog's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secretKeeper keeps every secret a backend is given.
type secretKeeper struct {
	mu   sync.Mutex
	seen []string
}

func (s *secretKeeper) keep(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range secrets {
		if v != "" {
			s.seen = append(s.seen, v)
		}
	}
}

// TestLoggerLevelsAndSecrets: every event is logged at its level, with
// key and token, and no line carries an owner token, an OwnerID (its
// secret or its digest) or a URL's password.
func TestLoggerLevelsAndSecrets(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// One attempt fails; the first renewal fails, the next is refused.
	var spy secretKeeper
	failAcquire, failRefresh := failAcquires(1, false, errInjected), firstN(1)
	f := memFault()
	f.acquire = func(ctx context.Context, req driver.Request, next acquireFunc) (driver.Grant, error) {
		spy.keep(req.Owner, req.Reentry)
		return failAcquire(ctx, req, next)
	}
	f.refresh = func(ctx context.Context, l driver.Lease, ttl time.Duration, next refreshFunc) (time.Duration, error) {
		spy.keep(l.Owner)
		if failRefresh() {
			return 0, errInjected
		}
		return 0, driver.ErrNotHeld
	}
	id := distlock.NewOwnerID()
	c := distlock.New(f, distlock.WithLogger(logger), distlock.WithTTL(time.Second))
	l, err := c.Mutex("orders:42", distlock.WithOwner(id)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	within(t, l.Done(), 5*time.Second, "the loss")
	// The loss is reported just after Done closes, by the goroutine that
	// closed it: wait for it, so that the order below is the events'.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), "distlock: lease lost"); {
		if time.Now().After(deadline) {
			t.Fatalf("no lease lost logged 5s after Done closed:\n%s", buf.String())
		}
		time.Sleep(time.Millisecond)
	}
	_ = l.Unlock(ctx)

	// A URL with a password, to a port where nothing listens.
	const password = "hunter2-is-secret"
	// Open pings the server: it fails, without the password.
	if uc, err := distlock.Open(ctx, "redis://:"+password+"@127.0.0.1:1/0", distlock.WithLogger(logger)); err == nil {
		uc.Close()
		t.Fatal("Open of a closed port succeeded")
	} else if strings.Contains(err.Error(), password) {
		t.Errorf("Open's error shows the password: %v", err)
	}
	// A client given to New is contacted at the first lock, which logs.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Password: password, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	uc := distlock.New(redislock.New(rdb), distlock.WithLogger(logger))
	defer uc.Close()
	if _, err := uc.Mutex("k").TryLock(ctx); err == nil {
		t.Fatal("TryLock on a closed port succeeded")
	}

	var levels []string
	for line := range strings.Lines(buf.String()) {
		var rec struct {
			Level, Msg, Key, Cause string
			Token                  uint64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		levels = append(levels, rec.Level+" "+rec.Msg)
		if rec.Key == "" {
			t.Errorf("no key in %s", line)
		}
		if rec.Msg == "distlock: lease lost" && (rec.Token == 0 || rec.Cause != "refused") {
			t.Errorf("lost lease logged without its token or cause: %s", line)
		}
	}
	want := []string{
		"DEBUG distlock: attempt",
		"DEBUG distlock: attempt",
		"DEBUG distlock: acquired",
		"INFO distlock: renewal failed",
		"WARN distlock: lease lost",
		"DEBUG distlock: attempt",
		"DEBUG distlock: not acquired",
	}
	if strings.Join(levels, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(levels, "\n"), strings.Join(want, "\n"))
	}
	spy.mu.Lock()
	secrets := append(spy.seen, id.Secret(), id.String(), password)
	spy.mu.Unlock()
	if len(secrets) < 5 {
		t.Fatalf("only %d secrets seen", len(secrets))
	}
	for _, s := range secrets {
		if strings.Contains(buf.String(), s) {
			t.Errorf("the log holds the secret %q:\n%s", s, buf.String())
		}
	}
	if !errors.Is(l.Err(), distlock.ErrLockLost) {
		t.Errorf("Err: %v; want ErrLockLost", l.Err())
	}
}

// TestLoggerSilentByDefault: without WithLogger nothing reaches the
// default logger.
func TestLoggerSilentByDefault(t *testing.T) {
	var buf syncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	f := memFault()
	f.acquire = failAcquires(1, false, errInjected)
	l, err := distlock.New(f).Mutex("k").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(context.Background())
	if buf.String() != "" {
		t.Errorf("logged without a logger: %s", buf.String())
	}
}
