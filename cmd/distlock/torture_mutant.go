//go:build distlock_mutants

package main

// Broken backends for the tests of 'distlock torture', which must catch
// each of them. They are compiled only into a binary built with
// -tags distlock_mutants, never into the command users get.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/redisnode"
	"github.com/distlock-go/distlock/redislock"
)

// Mutants, named by the URL's mutant parameter:
// mutant+redis://host:port/db?mutant=NAME opens redislock on
// redis://host:port/db with one rule broken.
const (
	// mutantNoOwnerCheck releases the lock whoever holds it.
	mutantNoOwnerCheck = "no-owner-check"
	// mutantConstantToken grants every holding the same token.
	mutantConstantToken = "constant-token"
	// mutantNoExpiry stores leases for an hour while reporting the TTL
	// asked for: a holder that dies keeps the lock.
	mutantNoExpiry = "no-expiry"
	// mutantCrash ends the worker's process as soon as it is granted the
	// lock, as a library that panics would.
	mutantCrash = "crash"
)

func init() { distlock.Register("mutant+redis", openMutant) }

func openMutant(ctx context.Context, u *url.URL) (driver.Backend, error) {
	q := u.Query()
	kind := q.Get("mutant")
	switch kind {
	case mutantNoOwnerCheck, mutantConstantToken, mutantNoExpiry, mutantCrash:
	default:
		return nil, fmt.Errorf("%w: mutant %q: want %s, %s, %s or %s", distlock.ErrInvalidURL, kind,
			mutantNoOwnerCheck, mutantConstantToken, mutantNoExpiry, mutantCrash)
	}
	q.Del("mutant")
	inner := *u
	inner.Scheme, inner.RawQuery = "redis", q.Encode()
	b, err := redislock.OpenURL(ctx, &inner)
	if err != nil {
		return nil, err
	}
	m := &mutant{Backend: b, kind: kind}
	if kind == mutantNoOwnerCheck {
		raw := inner // the client of the mutant's own deletes takes no lock options
		raw.RawQuery = ""
		opt, err := redis.ParseURL(raw.String())
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("%w: %v", distlock.ErrInvalidURL, err)
		}
		m.rdb = redis.NewClient(opt)
	}
	return m, nil
}

// mutant is redislock with one rule broken.
type mutant struct {
	driver.Backend
	kind string
	rdb  *redis.Client // no-owner-check: deletes the lock behind redislock's back
}

func (m *mutant) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	ttl := req.TTL
	if m.kind == mutantNoExpiry {
		req.TTL = time.Hour
	}
	g, err := m.Backend.Acquire(ctx, req)
	if !g.Acquired {
		return g, err
	}
	switch m.kind {
	case mutantCrash:
		if slices.Contains(os.Args, tortureWorkerCommand) { // not the harness's own checks
			os.Exit(3)
		}
	case mutantConstantToken:
		g.Token = 7
	case mutantNoExpiry:
		g.ValidFor = ttl - driver.DefaultDrift(ttl)
	}
	return g, err
}

func (m *mutant) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	if m.kind != mutantNoExpiry {
		return m.Backend.Refresh(ctx, l, ttl)
	}
	if _, err := m.Backend.Refresh(ctx, l, time.Hour); err != nil {
		return 0, err
	}
	return ttl - driver.DefaultDrift(ttl), nil
}

func (m *mutant) Release(ctx context.Context, l driver.Lease) error {
	err := m.Backend.Release(ctx, l)
	if m.kind != mutantNoOwnerCheck || !errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	// Not ours: delete it anyway, and wake the waiters as a release does.
	k := redisnode.KeysFor(redislock.DefaultPrefix, l.Key)
	_, err = m.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, k.Lock)
		p.Publish(ctx, k.Channel, "")
		return nil
	})
	return err
}

func (m *mutant) Close() error {
	if m.rdb != nil {
		_ = m.rdb.Close()
	}
	return m.Backend.Close()
}
