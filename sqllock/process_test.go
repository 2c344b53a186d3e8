package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// The SQLite conformance run spreads its clients over several processes
// sharing one database file: the test binary runs again as a helper that
// serves backends over net/rpc on its stdin and stdout.

const helperEnv = "SQLLOCK_TEST_HELPER_DSN"

func TestMain(m *testing.M) {
	if dsn := os.Getenv(helperEnv); dsn != "" {
		serveBackends(dsn)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Call and Reply are the helper's messages. Err carries an error's text
// and Kind which sentinel it wraps, so that errors.Is works across.
type Call struct {
	ID      int
	Timeout time.Duration
	Req     driver.Request
	Lease   driver.Lease
	TTL     time.Duration
	Key     string
	Prefix  string
}

// Reply is the answer to a Call.
type Reply struct {
	ID       int
	Grant    driver.Grant
	ValidFor time.Duration
	Info     driver.Info
	List     []driver.KeyInfo
	Caps     driver.Capabilities
	Err      string
	Kind     string
	Mismatch *driver.KindError // the KindError that Err wraps, if any
}

// Helper is the helper process's RPC service: backends by id.
type Helper struct {
	dsn      string
	mu       sync.Mutex
	backends map[int]*sqllock.Backend
}

func serveBackends(dsn string) {
	srv := rpc.NewServer()
	if err := srv.Register(&Helper{dsn: dsn, backends: map[int]*sqllock.Backend{}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv.ServeConn(struct {
		io.Reader
		io.WriteCloser
	}{os.Stdin, os.Stdout})
}

func (h *Helper) backend(id int) *sqllock.Backend {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.backends[id]
}

func (c Call) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.Timeout)
}

func (r *Reply) fail(err error) {
	if err == nil {
		return
	}
	r.Err = err.Error()
	var ke *driver.KindError
	if errors.As(err, &ke) {
		r.Mismatch = ke
	}
	for kind, target := range sentinels {
		if errors.Is(err, target) {
			r.Kind = kind
		}
	}
}

var sentinels = map[string]error{
	"notheld":        driver.ErrNotHeld,
	"invalidkey":     driver.ErrInvalidKey,
	"invalidrequest": driver.ErrInvalidRequest,
	"unsupported":    errors.ErrUnsupported,
}

// New opens a backend on the shared file.
func (h *Helper) New(_ Call, r *Reply) error {
	db, err := sql.Open("sqlite", h.dsn)
	if err != nil {
		r.fail(err)
		return nil
	}
	b, err := sqllock.New(db, sqllock.WithOwnedDB())
	if err != nil {
		db.Close()
		r.fail(err)
		return nil
	}
	h.mu.Lock()
	r.ID = len(h.backends) + 1
	h.backends[r.ID] = b
	h.mu.Unlock()
	r.Caps = b.Capabilities()
	return nil
}

// Acquire calls the backend's Acquire.
func (h *Helper) Acquire(c Call, r *Reply) error {
	ctx, cancel := c.ctx()
	defer cancel()
	g, err := h.backend(c.ID).Acquire(ctx, c.Req)
	g.Lost = nil
	r.Grant = g
	r.fail(err)
	return nil
}

// Release calls the backend's Release.
func (h *Helper) Release(c Call, r *Reply) error {
	ctx, cancel := c.ctx()
	defer cancel()
	r.fail(h.backend(c.ID).Release(ctx, c.Lease))
	return nil
}

// Refresh calls the backend's Refresh.
func (h *Helper) Refresh(c Call, r *Reply) error {
	ctx, cancel := c.ctx()
	defer cancel()
	d, err := h.backend(c.ID).Refresh(ctx, c.Lease, c.TTL)
	r.ValidFor = d
	r.fail(err)
	return nil
}

// Inspect calls the backend's Inspect.
func (h *Helper) Inspect(c Call, r *Reply) error {
	ctx, cancel := c.ctx()
	defer cancel()
	info, err := h.backend(c.ID).Inspect(ctx, c.Key)
	r.Info = info
	r.fail(err)
	return nil
}

// List calls the backend's List.
func (h *Helper) List(c Call, r *Reply) error {
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := h.backend(c.ID).List(ctx, c.Prefix)
	r.List = list
	r.fail(err)
	return nil
}

// Break calls the backend's Break.
func (h *Helper) Break(c Call, r *Reply) error {
	ctx, cancel := c.ctx()
	defer cancel()
	info, err := h.backend(c.ID).Break(ctx, c.Key)
	r.Info = info
	r.fail(err)
	return nil
}

// Close closes the backend.
func (h *Helper) Close(c Call, r *Reply) error {
	h.mu.Lock()
	b := h.backends[c.ID]
	delete(h.backends, c.ID)
	h.mu.Unlock()
	if b != nil {
		r.fail(b.Close())
	}
	return nil
}

// helperProcess is a running helper.
type helperProcess struct {
	client *rpc.Client
	db     database // the file it shares
}

// startHelper runs the test binary as a helper on the SQLite file of d.
func startHelper(t testing.TB, d database) *helperProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+d.dsn)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the helper process: %v", err)
	}
	p := &helperProcess{client: rpc.NewClient(struct {
		io.Reader
		io.WriteCloser
	}{out, in}), db: d}
	t.Cleanup(func() {
		p.client.Close() // the helper's stdin closes: it exits
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// backend opens a backend in the helper process, closed at the end of t.
func (p *helperProcess) backend(t testing.TB) driver.Backend {
	t.Helper()
	var r Reply
	if err := p.client.Call("Helper.New", Call{}, &r); err != nil || r.Err != "" {
		t.Fatalf("helper: New: %v %s", err, r.Err)
	}
	b := &remoteBackend{p: p, id: r.ID, caps: r.Caps, watcher: p.db.backend(t)}
	t.Cleanup(func() { b.Close() })
	return b
}

// remoteBackend is a driver.Backend in a helper process.
type remoteBackend struct {
	p    *helperProcess
	id   int
	caps driver.Capabilities
	// watcher watches in this process, where the waiting Lock runs: a
	// watch is the waiter's, not the backend's state.
	watcher driver.Backend
}

func (b *remoteBackend) call(ctx context.Context, method string, c Call) (Reply, error) {
	c.ID = b.id
	c.Timeout = 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		c.Timeout = time.Until(dl)
	}
	if err := ctx.Err(); err != nil {
		return Reply{}, err
	}
	var r Reply
	if err := b.p.client.Call("Helper."+method, c, &r); err != nil {
		return r, err
	}
	if r.Err == "" {
		return r, nil
	}
	if r.Mismatch != nil {
		return r, fmt.Errorf("%s (in the helper process): %w", r.Err, r.Mismatch)
	}
	if target, ok := sentinels[r.Kind]; ok {
		return r, fmt.Errorf("%s (in the helper process): %w", r.Err, target)
	}
	return r, errors.New(r.Err + " (in the helper process)")
}

func (b *remoteBackend) Capabilities() driver.Capabilities { return b.caps }

func (b *remoteBackend) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	r, err := b.call(ctx, "Acquire", Call{Req: req})
	return r.Grant, err
}

func (b *remoteBackend) Release(ctx context.Context, l driver.Lease) error {
	_, err := b.call(ctx, "Release", Call{Lease: l})
	return err
}

func (b *remoteBackend) Refresh(ctx context.Context, l driver.Lease, ttl time.Duration) (time.Duration, error) {
	r, err := b.call(ctx, "Refresh", Call{Lease: l, TTL: ttl})
	return r.ValidFor, err
}

func (b *remoteBackend) Watch(ctx context.Context, key, owner string) (driver.Watch, error) {
	return b.watcher.Watch(ctx, key, owner)
}

func (b *remoteBackend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	r, err := b.call(ctx, "Inspect", Call{Key: key})
	return r.Info, err
}

func (b *remoteBackend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	r, err := b.call(ctx, "List", Call{Prefix: prefix})
	return r.List, err
}

func (b *remoteBackend) Break(ctx context.Context, key string) (driver.Info, error) {
	r, err := b.call(ctx, "Break", Call{Key: key})
	return r.Info, err
}

func (b *remoteBackend) Close() error {
	_, err := b.call(context.Background(), "Close", Call{})
	return err
}
