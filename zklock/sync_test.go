package zklock_test

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/testserver"
	"github.com/distlock-go/distlock/zklock"
)

// ZooKeeper request opcodes the recorder names.
const (
	opSync         = 9
	opGetChildren2 = 12
)

// request is one request a client sent: its opcode and, for the ones the
// tests look at, its path.
type request struct {
	op    int32
	path  string
	watch bool // a listing that sets a watch
}

// recorder is a zk.Dialer that records the requests sent on its
// connections.
type recorder struct {
	mu   sync.Mutex
	reqs []request
}

func (r *recorder) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, r: r}, nil
}

// since returns the requests recorded from index i on.
func (r *recorder) since(i int) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.reqs[i:]...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// recordingConn parses the frames written on it: a length, then (after
// the connect request that opens a connection) xid, opcode and body.
type recordingConn struct {
	net.Conn
	r         *recorder
	buf       []byte
	connected bool
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= 4 {
		n := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < 4+n {
			break
		}
		frame := c.buf[4 : 4+n]
		c.buf = c.buf[4+n:]
		if !c.connected {
			c.connected = true
			continue
		}
		if len(frame) < 8 {
			continue
		}
		req := request{op: int32(binary.BigEndian.Uint32(frame[4:]))}
		if body := frame[8:]; (req.op == opSync || req.op == opGetChildren2) && len(body) >= 4 {
			if l := int(binary.BigEndian.Uint32(body)); len(body) >= 4+l {
				req.path = string(body[4 : 4+l])
				req.watch = req.op == opGetChildren2 && len(body) > 4+l && body[4+l] != 0
			}
		}
		c.r.mu.Lock()
		c.r.reqs = append(c.r.reqs, req)
		c.r.mu.Unlock()
	}
	return c.Conn.Write(p)
}

// testLocateSyncs: after a create whose reply was lost, the retry that
// looks for the owner's node syncs the server it reads from with the
// leader before it lists the key's children. Without the sync, a server
// that lags behind (one the client reconnected to) may not show the node
// yet, and the retry would make a second one.
func testLocateSyncs(t *testing.T, addrs []string) {
	p := testserver.StartProxy(t, addrs[0])
	rec := &recorder{}
	conn, events, err := zk.Connect([]string{p.Addr()}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(rec.dial))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	b := zklock.New(conn, sessionTimeout)
	t.Cleanup(func() { _ = b.Close() })
	key := "locate-syncs"
	owner := "owner-locate-syncs-0123456789abcdef"
	first := driver.Request{Lease: driver.Lease{Key: key, Owner: "owner-before"}, TTL: 20 * time.Second}
	if g, err := b.Acquire(ctxFor(t, 10*time.Second), first); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	if err := b.Release(ctxFor(t, 10*time.Second), first.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	req := driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 20 * time.Second}
	dropped := p.DropReply(zklock.OwnerHash(owner))
	if g, err := b.Acquire(ctxFor(t, 10*time.Second), req); err == nil {
		t.Fatalf("Acquire with its reply dropped: %+v, nil error", g)
	}
	select {
	case <-dropped:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy saw no create of the owner's node")
	}
	mark := rec.len()
	var g driver.Grant
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if g, err = b.Acquire(ctxFor(t, 5*time.Second), req); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil || !g.Acquired {
		t.Fatalf("retried Acquire: %+v, %v; want granted", g, err)
	}
	defer func() { _ = b.Release(ctxFor(t, 10*time.Second), req.Lease) }()
	synced := false
	for _, r := range rec.since(mark) {
		switch {
		case r.op == opSync && r.path == keyPath(key):
			synced = true
		case r.op == opGetChildren2 && r.path == keyPath(key):
			if !synced {
				t.Fatalf("the retry listed %s without a sync first: %v", r.path, rec.since(mark))
			}
			return
		}
	}
	t.Fatalf("the retry never listed %s: %v", keyPath(key), rec.since(mark))
}

// testLostReleaseReply: the reply to a release is lost; its repeat
// reports success. For a re-entrant lease, whose release of one hold
// rewrites the list of the others, the reply to that write is lost.
func testLostReleaseReply(t *testing.T, addrs []string) {
	p := testserver.StartProxy(t, addrs[0])
	b := newBackend(t, []string{p.Addr()}, sessionTimeout)
	for _, reentry := range []string{"", "identity-lost-release"} {
		key := "lost-release-reply-" + reentry
		req := func(owner string) driver.Request {
			return driver.Request{Lease: driver.Lease{Key: key, Owner: owner}, TTL: 20 * time.Second, Reentry: reentry}
		}
		released, kept := req("owner-released-0123456789abcdef"), req("owner-kept-0123456789abcdef")
		holds := []driver.Request{released}
		match := zklock.OwnerHash(released.Owner) // in the name of the node deleted
		if reentry != "" {
			holds = append(holds, kept)
			match = zklock.OwnerHash(kept.Owner) // in the list of holds rewritten
		}
		for _, r := range holds {
			if g, err := b.Acquire(ctxFor(t, 10*time.Second), r); err != nil || !g.Acquired {
				t.Fatalf("Acquire: %+v, %v", g, err)
			}
		}
		dropped := p.DropReply(match)
		if err := b.Release(ctxFor(t, 10*time.Second), released.Lease); err == nil {
			t.Fatalf("Release (reentry %q) with its reply dropped: nil error", reentry)
		}
		select {
		case <-dropped:
		case <-time.After(5 * time.Second):
			t.Fatal("the proxy saw no request to drop the reply of")
		}
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			err := b.Release(ctxFor(t, 5*time.Second), released.Lease)
			if err == nil {
				break
			}
			if errors.Is(err, driver.ErrNotHeld) || time.Now().After(end) {
				t.Fatalf("repeated Release (reentry %q): %v; want nil", reentry, err)
			}
		}
		info, err := b.Inspect(ctxFor(t, 10*time.Second), key)
		if want := len(holds) - 1; err != nil || info.Held != (want > 0) || want > 0 && info.Holds != want {
			t.Errorf("Inspect after the release (reentry %q): %+v, %v; want %d holds left", reentry, info, err, want)
		}
		if reentry != "" {
			if err := b.Release(ctxFor(t, 10*time.Second), kept.Lease); err != nil {
				t.Errorf("Release of the other hold: %v", err)
			}
		}
	}
}
