package distlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
)

// grantAll grants every request: the bookkeeping under test is the root
// package's (memlock cannot be imported here: it imports this package).
type grantAll struct{}

func (grantAll) Acquire(_ context.Context, req driver.Request) (driver.Grant, error) {
	return driver.Grant{Acquired: true, Token: 1, ValidFor: req.TTL}, nil
}
func (grantAll) Release(context.Context, driver.Lease) error { return nil }
func (grantAll) Refresh(_ context.Context, _ driver.Lease, ttl time.Duration) (time.Duration, error) {
	return ttl, nil
}
func (grantAll) Capabilities() driver.Capabilities { return driver.Capabilities{} }
func (grantAll) Watch(context.Context, string, string) (driver.Watch, error) {
	return nil, errors.ErrUnsupported
}
func (grantAll) Inspect(context.Context, string) (driver.Info, error)   { return driver.Info{}, nil }
func (grantAll) List(context.Context, string) ([]driver.KeyInfo, error) { return nil, nil }
func (grantAll) Break(context.Context, string) (driver.Info, error)     { return driver.Info{}, nil }
func (grantAll) Close() error                                           { return nil }

// TestContextForgetsEndedParents: a context made by Context whose parent
// ended is no longer kept by the handle, so that a lock held for hours by a
// server that derives a context per request does not grow.
func TestContextForgetsEndedParents(t *testing.T) {
	ctx := context.Background()
	c := New(grantAll{})
	l, err := c.Mutex("a").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	ml, err := LockAll(ctx, c.Mutex("b"), c.Mutex("c"))
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Unlock(ctx)
	for name, derive := range map[string]func(context.Context) context.Context{
		"Lock":      l.Context,
		"MultiLock": ml.Context,
	} {
		kept := func() int {
			if name == "Lock" {
				return l.registered()
			}
			return ml.registered()
		}
		base := kept()
		const n = 1000
		for i := range n {
			parent, cancel := context.WithCancel(ctx)
			if i%2 == 0 {
				cancel() // ended before, or after Context
			}
			work := derive(parent)
			cancel()
			<-work.Done()
		}
		deadline := time.Now().Add(5 * time.Second)
		for kept() > base && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := kept(); got > base {
			t.Errorf("%s: %d contexts of ended parents still kept", name, got-base)
		}
	}
	if l.Err() != nil || ml.Err() != nil {
		t.Errorf("ending the parents ended the locks: %v, %v", l.Err(), ml.Err())
	}
}
