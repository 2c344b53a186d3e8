package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock-go/distlock/driver"
)

var (
	errNilClient = fmt.Errorf("etcdlock: nil *Backend or etcd client: %w", driver.ErrInvalidBackend)
	errClosed    = fmt.Errorf("etcdlock: backend closed: %w", driver.ErrInvalidBackend)

	// errLeaseGone says that a request named a lease etcd no longer has:
	// the caller gets a new lease and tries again, once.
	errLeaseGone = errors.New("etcdlock: lease expired or revoked")

	// errKeyGone says that the owner's key ended between the read of an
	// attempt and its grant (its lease ended, a Break deleted it, or it
	// was a permit's key given back to be put again): the caller makes a
	// new attempt, once.
	errKeyGone = errors.New("the owner's key ended during the attempt")
)

// seconds is an etcd lease TTL for ttl: whole seconds, rounded up.
func seconds(ttl time.Duration) int64 {
	return max(1, int64((ttl+time.Second-1)/time.Second))
}

// lease is an etcd lease shared by the backend's keys of one TTL. The
// backend keeps it alive; when etcd says it is gone, or it could not be
// renewed before its deadline, it is dead: lost is closed, and so is the
// Grant.Lost of every holding on it (see leaseEnded), and the next request
// gets a new one.
type lease struct {
	b    *Backend
	id   clientv3.LeaseID
	secs int64 // the TTL asked for

	mu    sync.Mutex
	until time.Time // etcd keeps the lease at least until then
	ttl   int64     // the TTL etcd granted, in seconds
	lost  chan struct{}
	dead  bool

	// stop, for the lease of a re-entrant identity (see reentry.go), is
	// closed when the backend has no hold on it left: its keep-alive ends
	// there, and the lease is left to the other holders. Nil for the
	// backend's shared leases, kept alive as long as it runs. Guarded by
	// b.mu.
	stop    chan struct{}
	stopped bool
}

// lease returns the live lease of TTL secs, granting one if there is none.
func (b *Backend) lease(ctx context.Context, secs int64) (*lease, error) {
	b.mu.Lock()
	l := b.leases[secs]
	b.mu.Unlock()
	if l != nil && l.alive() {
		return l, nil
	}
	l, err := b.grant(ctx, secs)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur := b.leases[secs]; cur != nil && cur.alive() {
		// Another call granted one meanwhile: use it, drop ours.
		l.dropLocked()
		return cur, nil
	}
	if !b.goLocked(func() { b.keepAlive(l) }) {
		return nil, errClosed // l, never kept alive, ends by itself
	}
	b.leases[secs] = l
	return l, nil
}

// grant asks etcd for a new lease of TTL secs.
func (b *Backend) grant(ctx context.Context, secs int64) (*lease, error) {
	sent := time.Now()
	resp, err := b.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: lease grant: %w", err)
	}
	return &lease{b: b, id: resp.ID, secs: secs, ttl: resp.TTL, until: sent.Add(time.Duration(resp.TTL) * time.Second), lost: make(chan struct{})}, nil
}

// receiptLease returns the lease of release receipts, granting a new one
// when the current one is half used.
func (b *Backend) receiptLease(ctx context.Context) (*lease, error) {
	b.mu.Lock()
	l, at := b.receipts, b.granted
	b.mu.Unlock()
	if l != nil && time.Since(at) < receiptTTL*time.Second/2 {
		return l, nil
	}
	at = time.Now()
	l, err := b.grant(ctx, receiptTTL)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.receipts, b.granted = l, at
	b.mu.Unlock()
	return l, nil
}

// dropLocked revokes a lease nobody uses, in the background; b.mu must
// be held.
func (l *lease) dropLocked() {
	l.b.goLocked(func() {
		ctx, cancel := context.WithTimeout(l.b.ctx, 5*time.Second)
		defer cancel()
		_, _ = l.b.cli.Revoke(ctx, l.id)
	})
}

// leaseErr turns a request's error into errLeaseGone, ending l, when etcd
// no longer has the lease.
func (b *Backend) leaseErr(err error, l *lease, op, key string) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		if l != nil {
			l.kill()
		}
		b.mu.Lock()
		if b.receipts == l {
			b.receipts = nil
		}
		b.mu.Unlock()
		return errLeaseGone
	}
	return fmt.Errorf("etcdlock: %s %q: %w", op, key, err)
}

func (l *lease) alive() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.dead && time.Now().Before(l.until)
}

// gone reports whether l ended: etcd said so, or it was not renewed by
// its deadline.
func (l *lease) gone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

func (l *lease) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// validFor is how long after start a holding of TTL ttl on l can be
// trusted: ttl or what is left of the lease, less the drift allowance.
func (l *lease) validFor(start time.Time, ttl time.Duration, drift func(time.Duration) time.Duration) (time.Duration, error) {
	l.mu.Lock()
	left := l.until.Sub(start)
	l.mu.Unlock()
	v := min(ttl, left) - drift(ttl)
	if v <= 0 {
		return 0, fmt.Errorf("etcdlock: the lease ends before the holding can be used (%v left of it)", left)
	}
	return v, nil
}

// kill ends l: it is gone, or no longer known to be alive.
func (l *lease) kill() {
	l.mu.Lock()
	if !l.dead {
		l.dead = true
		close(l.lost)
	}
	l.mu.Unlock()
	l.b.mu.Lock()
	if l.b.leases[l.secs] == l {
		delete(l.b.leases, l.secs)
	}
	l.b.mu.Unlock()
	l.b.leaseEnded(l)
}

// renew keeps l alive once, its request hedged (see hedge). It kills l if etcd
// no longer has it, or if its deadline passed before etcd answered.
func (l *lease) renew(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(ctx, l.deadline())
	defer cancel()
	type renewal struct {
		sent time.Time
		resp *clientv3.LeaseKeepAliveResponse
	}
	r, err := hedge(ctx, func(ctx context.Context) (renewal, error) {
		sent := time.Now()
		resp, err := l.b.cli.KeepAliveOnce(ctx, l.id)
		return renewal{sent, resp}, err
	})
	sent, resp := r.sent, r.resp
	switch {
	case err == nil && resp.TTL > 0:
		l.mu.Lock()
		if until := sent.Add(time.Duration(resp.TTL) * time.Second); until.After(l.until) {
			l.until = until
		}
		l.mu.Unlock()
		return nil
	case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
		l.kill()
		return errLeaseGone
	case !time.Now().Before(l.deadline()):
		l.kill()
		return fmt.Errorf("etcdlock: lease not renewed by its deadline: %w", err)
	}
	return err
}

// keepAlive renews l every third of its TTL until it dies or the backend
// is closed; after a failure it tries again sooner.
func (b *Backend) keepAlive(l *lease) {
	every := time.Duration(l.ttl) * time.Second / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-l.lost:
			return
		case <-l.stop:
			return
		case <-t.C:
		}
		next := every
		if err := l.renew(b.ctx); err != nil {
			if errors.Is(err, errLeaseGone) || !l.alive() {
				l.kill()
				return
			}
			next = min(every, 200*time.Millisecond)
		}
		t.Reset(next)
	}
}
