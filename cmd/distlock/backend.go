package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
)

// Bounds of backend calls. A command never waits for a backend past the
// deadline it set for a call, whether or not the client library honours it
// (see bounded).
const (
	// contactTimeout bounds opening a backend and the first exchange with
	// it: a backend that has not answered by then is reported unavailable.
	contactTimeout = 5 * time.Second
	// callTimeout bounds each backend call that has no earlier deadline,
	// such as an attempt of a wait that lasts forever.
	callTimeout = 5 * time.Second
	// listTimeout bounds a list, which may scan the whole store.
	listTimeout = time.Minute
	// cleanupTimeout bounds best-effort clean-ups: giving up an attempt
	// whose outcome is unknown, closing the client.
	cleanupTimeout = time.Second
	// replyGrace is how long a call may overrun its deadline to return on
	// its own, with an error that names the cause, before it is abandoned.
	replyGrace = 100 * time.Millisecond
)

// backendURL returns the URL given with --url, or else the one in the
// environment.
func (c *cli) backendURL(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return c.getenv(urlEnv)
}

// redactHost returns a scheme-less URL with any password replaced, as
// url.URL.Redacted does.
func redactHost(raw string) string {
	if u, err := url.Parse("x://" + raw); err == nil {
		return strings.TrimPrefix(u.Redacted(), "x://")
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return "xxxxx@" + raw[i+1:]
	}
	return raw
}

// checkURL reports, as a one-line message, why rawURL cannot name a
// backend of this build; "" means it may. It catches what can be told
// without the backend so that the message is precise and never echoes a
// password.
func checkURL(rawURL string) string {
	if strings.TrimSpace(rawURL) == "" {
		return fmt.Sprintf("no backend URL: give --url or set %s, e.g. --url redis://localhost:6379/0", urlEnv)
	}
	if !strings.Contains(rawURL, "://") && !strings.Contains(rawURL, ":/") && !strings.HasPrefix(rawURL, "//") {
		// "localhost", "127.0.0.1:6379": a host, not a URL. url.Parse
		// fails on the second with a message about path segments.
		guess := "redis://" + redactHost(rawURL)
		if strings.HasPrefix(rawURL, "/") || strings.HasPrefix(rawURL, ".") {
			guess = "sqlite://" + redactHost(rawURL) // a file
		}
		return fmt.Sprintf("backend URL %q has no scheme: did you mean %s? A URL starts with its backend's scheme (this build knows: %s)",
			redactHost(rawURL), guess, strings.Join(distlock.Schemes(), ", "))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, credentials included; its
		// inner error says what is wrong without them.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("malformed backend URL: %v", err)
	}
	if u.Scheme == "" {
		return fmt.Sprintf("backend URL %q has no scheme: want e.g. redis://localhost:6379/0 (schemes in this build: %s)", u.Redacted(), strings.Join(distlock.Schemes(), ", "))
	}
	scheme := strings.ToLower(u.Scheme)
	for _, s := range distlock.Schemes() {
		if s == scheme {
			return ""
		}
	}
	hint := ""
	if u.Opaque != "" && strings.Trim(u.Opaque, "0123456789") == "" {
		// "localhost:6379" parses as scheme "localhost".
		hint = fmt.Sprintf("; did you mean redis://%s?", rawURL)
	}
	return fmt.Sprintf("unknown backend URL scheme %q (this build knows: %s)%s", u.Scheme, strings.Join(distlock.Schemes(), ", "), hint)
}

// open opens the backend named by rawURL for command cmd, by deadline at
// the latest. On failure it prints one line and returns the exit status:
// 64 for a URL that cannot work, 69 for a backend that could not be opened.
func (c *cli) open(ctx context.Context, cmd, rawURL string, deadline time.Time) (*backend, int) {
	if msg := checkURL(rawURL); msg != "" {
		return nil, c.usageError(cmd, "%s", msg)
	}
	// Opening contacts the backend (distlock.Open pings it). run tries
	// again until the first contact's deadline, as it does its first
	// attempt (see tryUntilAnswered): a cold connection may fail.
	ctx, stop := watchTLS(ctx, rawURL)
	defer stop()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pause := 50 * time.Millisecond
	var telling error // the latest error that says more than "time ran out"
	for {
		client, err := bounded(ctx, deadline, func(ctx context.Context) (*distlock.Client, error) {
			return distlock.Open(ctx, rawURL)
		}, func(late *distlock.Client) { _ = late.Close() })
		if cause := context.Cause(ctx); err != nil && ctx.Err() != nil && configProblem(cause) != "" {
			err = cause // the TLS check found why
		}
		switch {
		case err == nil:
			return &backend{Backend: client.Backend(), client: client, url: rawURL}, exitOK
		case errors.Is(err, distlock.ErrInvalidURL), errors.Is(err, distlock.ErrUnknownScheme):
			return nil, c.usageError(cmd, "%s", errText(err))
		case configProblem(err) != "":
			return nil, c.backendFailed(cmd, "cannot open backend", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			telling = err
		}
		if cmd != "run" || time.Until(deadline) <= pause {
			if errors.Is(err, context.DeadlineExceeded) && telling != nil {
				err = telling
			}
			return nil, c.backendFailed(cmd, "backend unavailable", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		pause = min(2*pause, time.Second)
	}
}

// backendFailed prints why a backend could not do what cmd asked, after
// what, and returns exitUnavailable. A configuration that cannot work
// (see configProblem) is named as such, with what to check.
func (c *cli) backendFailed(cmd, what string, err error) int {
	if hint := configProblem(err); hint != "" {
		return c.fail(exitUnavailable, cmd, "cannot use the backend: %s (%s)", errText(err), hint)
	}
	return c.fail(exitUnavailable, cmd, "%s: %s", what, errText(err))
}

// errText returns err's message without the "distlock: " prefix of the
// library's errors, which would only repeat the command's own prefix.
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "distlock: ")
}

// backend is an opened backend as a command uses it. It bounds every call
// (see bounded): by the call's ctx, by callTimeout, and by a context that
// the command may set to limit a phase such as the first contact, so that
// clean-ups which distlock detaches from ctx end with the phase too. It also
// remembers whether the latest acquisition attempt failed, so that a wait
// that ran out can be told apart from one during which the backend could
// not be reached, and reports the first failure of a streak while
// [distlock.Mutex.Lock] keeps retrying. It embeds the backend, so that
// every capability passes through, and overrides the calls it bounds.
type backend struct {
	driver.Backend
	client  *distlock.Client
	url     string
	onError func(error) // called for the first failed attempt after a success

	mu      sync.Mutex
	lastErr error
	limit   context.Context // nil: none
}

// mutex returns the lock on key, over b.
func (b *backend) mutex(key string, opts ...distlock.Option) *distlock.Mutex {
	return distlock.New(b).Mutex(key, append([]distlock.Option{distlock.WithReleaseTimeout(cleanupTimeout)}, opts...)...)
}

// close closes the client, giving up on it after cleanupTimeout.
func (b *backend) close() {
	_, _ = bounded(context.Background(), time.Now().Add(cleanupTimeout), func(context.Context) (struct{}, error) {
		return struct{}{}, b.client.Close()
	}, nil)
}

// limitTo makes every call from now on end by limit's deadline, and at
// once when limit is done, until remove is called.
func (b *backend) limitTo(limit context.Context) (remove func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limit = limit
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.limit = nil
	}
}

// deadline returns when a call made now with ctx must end.
func (b *backend) deadline(ctx context.Context) time.Time {
	now := time.Now()
	d := now.Add(callTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(d) {
		d = t
	}
	b.mu.Lock()
	limit := b.limit
	b.mu.Unlock()
	if limit != nil {
		if limit.Err() != nil {
			return now
		}
		if t, ok := limit.Deadline(); ok && t.Before(d) {
			d = t
		}
	}
	return d
}

func (b *backend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, err := bounded(ctx, b.deadline(ctx), func(ctx context.Context) (driver.Grant, error) {
		return b.Backend.Acquire(ctx, req)
	}, nil)
	if err != nil && ended(ctx) {
		// The wait ended during the attempt: that says nothing about
		// the backend.
		return g, err
	}
	err = b.asConfigError(err)
	b.mu.Lock()
	first := err != nil && b.lastErr == nil
	b.lastErr = err
	b.mu.Unlock()
	if first && b.onError != nil {
		b.onError(err)
	}
	return g, err
}

func (b *backend) Release(ctx context.Context, l driver.Lease) error {
	_, err := bounded(ctx, b.deadline(ctx), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.Backend.Release(ctx, l)
	}, nil)
	return b.asConfigError(err)
}

// ended reports whether ctx is done or its deadline has passed. A call
// bounded by that deadline may fail before ctx itself is marked done: its
// own timer and ctx's fire at the same instant, in either order.
func ended(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}

// configError is an error of the backend that shows it can never work as
// configured (see configProblem). It also wraps distlock.ErrInvalidBackend,
// so that the library does not repeat the call: it would only meet the
// same refusal until its time ran out.
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{e.err, distlock.ErrInvalidBackend} }

// asConfigError returns err, the error of a call, as a configError if it
// is one, or the cause that ended the current phase (see limitTo) if that
// is one; else err.
func (b *backend) asConfigError(err error) error {
	if err == nil {
		return nil
	}
	if configProblem(err) != "" {
		return configError{err}
	}
	b.mu.Lock()
	limit := b.limit
	b.mu.Unlock()
	if limit != nil {
		if cause := context.Cause(limit); configProblem(cause) != "" {
			return configError{cause}
		}
	}
	return err
}

func (b *backend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	return bounded(ctx, b.deadline(ctx), func(ctx context.Context) (time.Duration, error) {
		return b.Backend.Refresh(ctx, l, ttl)
	}, nil)
}

// failing returns the error of the latest attempt, or nil if it succeeded.
func (b *backend) failing() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

func (b *backend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	return bounded(ctx, b.deadline(ctx), func(ctx context.Context) (driver.Watch, error) {
		return b.Backend.Watch(ctx, key, owner)
	}, func(late driver.Watch) { _ = late.Close() })
}

func (b *backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return bounded(ctx, b.deadline(ctx), func(ctx context.Context) (driver.Info, error) {
		return b.Backend.Inspect(ctx, key)
	}, nil)
}

// List is bounded by listTimeout, not callTimeout: it may scan a large
// store.
func (b *backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	d := time.Now().Add(listTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(d) {
		d = t
	}
	return bounded(ctx, d, func(ctx context.Context) ([]driver.KeyInfo, error) {
		return b.Backend.List(ctx, prefix)
	}, nil)
}

func (b *backend) Break(ctx context.Context, key string) (driver.Info, error) {
	return bounded(ctx, b.deadline(ctx), func(ctx context.Context) (driver.Info, error) {
		return b.Backend.Break(ctx, key)
	}, nil)
}

// bounded calls call with a context that ends at deadline, or earlier with
// ctx, and returns what call returns. If call has not returned replyGrace
// after that context ended, bounded returns an error instead and leaves
// call to finish in the background, handing a late result to discard (if
// not nil) unless call failed. So a client library that does not honour
// deadlines cannot stretch the command's own. A request abandoned this way
// may still be applied; the command soon exits, and a lease it was granted
// expires on its own.
func bounded[T any](ctx context.Context, deadline time.Time, call func(context.Context) (T, error), discard func(T)) (T, error) {
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call(cctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-cctx.Done():
	}
	t := time.NewTimer(replyGrace)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
	}
	if discard != nil {
		go func() {
			if r := <-done; r.err == nil {
				discard(r.v)
			}
		}()
	}
	var zero T
	return zero, fmt.Errorf("no reply from the backend: %w", context.Cause(cctx))
}
