package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
)

type quietLog struct{}

func (quietLog) Printf(string, ...any) {}

// TestAcquireGivenUpWhileQueued: an attempt whose caller gave up while it
// waited behind another call of the same owner is not made once its turn
// comes. Made then, after the caller's release, it would leave a node that
// nobody releases, holding the key until its lease runs out.
func TestAcquireGivenUpWhileQueued(t *testing.T) {
	srv := testserver.StartZooKeeper(t)
	conn, _, err := zk.Connect([]string{srv.Addr()}, 6*time.Second, zk.WithLogger(quietLog{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := New(conn, 6*time.Second)
	defer b.Close()
	req := driver.Request{Lease: driver.Lease{Key: "queued", Owner: "given-up"}, TTL: time.Minute}

	// Another call of the owner holds its stripe.
	stripe := b.stripe(req.Owner)
	stripe.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		stripe.Unlock()
		t.Fatalf("Acquire while the stripe is held: %v; want its context's deadline", err)
	}
	stripe.Unlock()
	// The queued attempt's turn comes now.
	time.Sleep(200 * time.Millisecond)
	bg, cancelBg := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelBg()
	if _, err := b.Refresh(bg, req.Lease, time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh after the given-up attempt: %v; want ErrNotHeld (no attempt made)", err)
	}
	info, err := b.Inspect(bg, req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Held {
		t.Errorf("the key is held (%+v) by an attempt its caller gave up before it was made", info)
	}
}
