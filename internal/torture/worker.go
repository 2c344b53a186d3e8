package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"github.com/distlock-go/distlock"
)

// Why a holding's Done closed, as workers report it.
const (
	doneReleased = "released"
	doneLost     = "lost"
	doneExpired  = "expired"
)

// opTimeout bounds a register operation: the harness answers at once
// unless it is gone.
const opTimeout = 30 * time.Second

// WorkerConfig tells a worker process what to do. The harness passes it
// on the command line (see [WorkerArgs]).
type WorkerConfig struct {
	Harness string // the harness's address
	Secret  string // proves to the harness that the worker is its own
	Slot    int
	Inc     int
	Key     string
	TTL     time.Duration
	Seed    uint64
	// SlowPercent is the share of holdings, in percent, that run without
	// auto-refresh and sleep past their TTL before writing.
	SlowPercent int
}

// worker is the state of one worker process.
type worker struct {
	cfg   WorkerConfig
	out   *lineWriter
	rng   *rand.Rand
	hold  *distlock.Mutex // auto-refreshed
	slow  *distlock.Mutex // not refreshed
	seq   uint64
	mu    sync.Mutex
	calls map[uint64]chan reply
	next  uint64
	gone  chan struct{} // closed when the harness connection ends
}

// RunWorker is the body of a worker process: it connects to the harness
// and takes the lock on cfg.Key from client over and over, writing to the
// harness's register under it, until the harness says stop or ctx ends.
// It returns nil after a stop, an error if the harness went away.
func RunWorker(ctx context.Context, cfg WorkerConfig, client *distlock.Client) error {
	conn, err := net.DialTimeout("tcp", cfg.Harness, 10*time.Second)
	if err != nil {
		return fmt.Errorf("torture worker: reaching the harness: %w", err)
	}
	defer conn.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	w := &worker{
		cfg:   cfg,
		out:   &lineWriter{w: conn},
		rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Slot)<<32|uint64(cfg.Inc))),
		hold:  client.Mutex(cfg.Key, distlock.WithTTL(cfg.TTL)),
		slow:  client.Mutex(cfg.Key, distlock.WithTTL(cfg.TTL), distlock.WithoutAutoRefresh()),
		calls: map[uint64]chan reply{},
		gone:  make(chan struct{}),
	}
	if err := w.out.send(msg{Kind: msgHello, Slot: cfg.Slot, Inc: cfg.Inc, Pid: os.Getpid(), Secret: cfg.Secret}); err != nil {
		return err
	}
	go w.listen(conn, stop)
	var watchers sync.WaitGroup
	defer watchers.Wait()
	for ctx.Err() == nil {
		if err := w.round(ctx, &watchers); err != nil {
			return err
		}
		w.sleep(ctx, w.upTo(cfg.TTL/10))
	}
	select {
	case <-w.gone:
		return errors.New("torture worker: the harness went away")
	default:
		return nil
	}
}

// listen reads the harness's replies until the connection ends; a stop
// cancels the worker's context.
func (w *worker) listen(conn net.Conn, stop context.CancelFunc) {
	defer close(w.gone)
	defer stop()
	lr := newLineReader(conn)
	for {
		var r reply
		if err := lr.next(&r); err != nil {
			return
		}
		if r.Stop {
			stop()
			continue
		}
		w.mu.Lock()
		c := w.calls[r.ID]
		delete(w.calls, r.ID)
		w.mu.Unlock()
		if c != nil {
			c <- r
		}
	}
}

// call sends a register operation and waits for its answer.
func (w *worker) call(m msg) (reply, error) {
	c := make(chan reply, 1)
	w.mu.Lock()
	w.next++
	m.ID = w.next
	w.calls[m.ID] = c
	w.mu.Unlock()
	if err := w.out.send(m); err != nil {
		return reply{}, err
	}
	t := time.NewTimer(opTimeout)
	defer t.Stop()
	select {
	case r := <-c:
		return r, nil
	case <-w.gone:
		return reply{}, errors.New("torture worker: the harness went away")
	case <-t.C:
		return reply{}, errors.New("torture worker: the register did not answer")
	}
}

// report sends an event; a lost harness is noticed by the next call.
func (w *worker) report(m msg) {
	if m.T == 0 {
		m.T = time.Now().UnixNano()
	}
	_ = w.out.send(m)
}

// round takes the lock once, works under it and releases it.
func (w *worker) round(ctx context.Context, watchers *sync.WaitGroup) error {
	slow := w.rng.IntN(100) < w.cfg.SlowPercent
	m := w.hold
	if slow {
		m = w.slow
	}
	w.report(msg{Kind: msgAttempt})
	// A bounded wait: a worker that never gets the lock still reports,
	// and a stop is noticed.
	lctx, cancel := context.WithTimeout(ctx, max(20*w.cfg.TTL, 10*time.Second))
	l, err := m.Lock(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil { // not just told to stop
			w.report(msg{Kind: msgNotHeld, Err: err.Error()})
			w.sleep(ctx, w.cfg.TTL/5)
		}
		return nil
	}
	w.seq++
	h := w.seq
	vu := wall(l.ValidUntil())
	w.report(msg{Kind: msgAcquired, H: h, Token: l.Token(), VU: vu, Slow: slow})
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		<-l.Done()
		t := time.Now().UnixNano()
		w.report(msg{Kind: msgDone, T: t, H: h, VU: wall(l.ValidUntil()), Err: doneReason(l.Err())})
	}()
	err = w.work(ctx, l, h, slow, &vu)
	w.report(msg{Kind: msgRelease, H: h, VU: vu})
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	uerr := l.Unlock(uctx)
	cancel()
	w.report(msg{Kind: msgReleased, H: h, Err: errString(uerr)})
	return err
}

// work reads the register, then writes to it once or a few times under
// the lock; a slow holding first sleeps past its lease.
func (w *worker) work(ctx context.Context, l *distlock.Lock, h uint64, slow bool, vu *int64) error {
	id := fmt.Sprintf("%s.%d", workerID(w.cfg.Slot, w.cfg.Inc), h)
	if _, err := w.call(msg{Kind: msgRead, H: h}); err != nil {
		return err
	}
	steps := 1 + w.rng.IntN(3)
	if slow {
		// The classic pause: the work took longer than the lease, and the
		// holder does not look at Done before it writes.
		w.sleep(ctx, w.cfg.TTL+w.upTo(w.cfg.TTL/2))
		steps = 1
	}
	for i := range steps {
		if !slow {
			w.sleep(ctx, w.upTo(w.cfg.TTL/10))
		}
		if ctx.Err() != nil {
			return nil
		}
		if v := wall(l.ValidUntil()); v != *vu {
			*vu = v
			w.report(msg{Kind: msgValid, H: h, VU: v})
		}
		late := isClosed(l.Done())
		if _, err := w.call(msg{Kind: msgWrite, T: time.Now().UnixNano(), H: h, Token: l.Token(),
			Value: fmt.Sprintf("%s#%d", id, i), Late: late}); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) upTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(w.rng.Int64N(int64(d)))
}

func (w *worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// wall converts a time with a monotonic reading to the real-time clock
// as of now, so that a deadline measured on the monotonic clock compares
// with the other processes' readings.
func wall(t time.Time) int64 {
	now := time.Now()
	return now.UnixNano() + int64(t.Sub(now))
}

func doneReason(err error) string {
	switch {
	case errors.Is(err, distlock.ErrLockReleased):
		return doneReleased
	case errors.Is(err, distlock.ErrLockExpired):
		return doneExpired
	case errors.Is(err, distlock.ErrLockLost):
		return doneLost
	}
	return errString(err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
