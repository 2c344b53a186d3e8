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

// openTimeout bounds opening a backend: openers that connect eagerly must
// not hang the command on an unreachable server.
const openTimeout = 15 * time.Second

// backendURL returns the URL given with --url, or else the one in the
// environment.
func (c *cli) backendURL(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return c.getenv(urlEnv)
}

// checkURL reports, as a one-line message, why rawURL cannot name a
// backend of this build; "" means it may. It catches what can be told
// without the backend so that the message is precise and never echoes a
// password.
func checkURL(rawURL string) string {
	if strings.TrimSpace(rawURL) == "" {
		return fmt.Sprintf("no backend URL: give --url or set %s, e.g. --url redis://localhost:6379/0", urlEnv)
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
		return fmt.Sprintf("malformed backend URL %q: no scheme (want e.g. redis://localhost:6379/0)", u.Redacted())
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

// open opens the backend named by rawURL for command cmd. On failure it
// prints one line and returns the exit status: 64 for a URL that cannot
// work, 69 for a backend that could not be opened.
func (c *cli) open(ctx context.Context, cmd, rawURL string) (*distlock.Client, int) {
	if msg := checkURL(rawURL); msg != "" {
		return nil, c.usageError(cmd, "%s", msg)
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	client, err := distlock.Open(octx, rawURL)
	switch {
	case err == nil:
		return client, exitOK
	case errors.Is(err, distlock.ErrInvalidURL), errors.Is(err, distlock.ErrUnknownScheme):
		return nil, c.usageError(cmd, "%s", errText(err))
	default:
		return nil, c.fail(exitUnavailable, cmd, "cannot open backend: %s", errText(err))
	}
}

// errText returns err's message without the "distlock: " prefix of the
// library's errors, which would only repeat the command's own prefix.
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "distlock: ")
}

// observed wraps a backend to remember whether its latest acquisition
// attempt failed, so that a wait that ran out can be told apart from one
// during which the backend could not be reached, and to report the first
// failure of a streak while [distlock.Mutex.Lock] keeps retrying.
type observed struct {
	driver.Backend
	onError func(error) // called for the first failed attempt after a success

	mu      sync.Mutex
	lastErr error
}

func (o *observed) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.Grant, error) {
	g, err := o.Backend.Acquire(ctx, req)
	if err != nil && ctx.Err() != nil {
		// The wait ended during the attempt: that says nothing about
		// the backend.
		return g, err
	}
	o.mu.Lock()
	first := err != nil && o.lastErr == nil
	o.lastErr = err
	o.mu.Unlock()
	if first && o.onError != nil {
		o.onError(err)
	}
	return g, err
}

// failing returns the error of the latest attempt, or nil if it succeeded.
func (o *observed) failing() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lastErr
}

// Capabilities passes the backend's on, except a notified wait that the
// backend claims but cannot provide.
func (o *observed) Capabilities() driver.Capabilities {
	caps := o.Backend.Capabilities()
	if _, ok := o.Backend.(driver.Waiter); !ok {
		caps.NotifiedWait = false
	}
	return caps
}

// Watch passes waiting on to the backend, so that wrapping it does not
// turn a notified wait into polling.
func (o *observed) Watch(ctx context.Context, key string) (driver.Watch, error) {
	w, ok := o.Backend.(driver.Waiter)
	if !ok {
		return nil, errors.New("backend cannot notify waiters")
	}
	return w.Watch(ctx, key)
}
