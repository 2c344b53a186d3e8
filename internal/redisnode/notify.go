package redisnode

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("redisnode: notifier closed")

// Notifier multiplexes the release notifications of many locks over ONE
// pub/sub connection per client, however many goroutines wait.
//
// A watch is confirmed before Watch returns: after SUBSCRIBE, a PING with a
// unique payload goes down the same connection, and the server answers in
// order, so its PONG proves the subscription is live. A release published
// after Watch returns is therefore never missed while the connection lives.
// When the connection breaks, go-redis re-subscribes on reconnect, and every
// watcher is woken once, since a release may have been missed meanwhile.
//
// Each channel counts what it has heard: every message, and every break of
// the connection, moves its mark (see [Notifier.Mark]). A waiter that took
// the mark before an attempt learns from [Notifier.WatchSince] whether a
// release may have gone past before its watch was in place, and tries
// again only then.
//
// A plain lock's release wakes one client, not every waiter: the one that
// a refused attempt enlisted first (see [AcquireAs] and [Notifier.ID]).
// Its message, '>' and the client's id, fires that client's watches of the
// channel that name no owner, and moves the channel's mark there alone;
// other clients' notifiers let it pass. A client named with no such watch
// left (its waiter gave up, or took the lock) passes the wake-up on to the
// client enlisted next, so that one waiter gone does not leave the others
// asleep.
type Notifier struct {
	rdb     redis.UniversalClient
	id      string        // names this client in the lock's waiters (see ID)
	named   string        // "+" and id (see Hears)
	timeout time.Duration // bounds the subscription's confirmation

	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]*channel
	pings   map[string]chan struct{}
	grants  map[string]string // fair waiters' handed-over grants, by owner, until taken
	closed  bool
	broken  bool          // the connection failed, and is not known to be back
	marks   uint64        // the last mark given to a channel; marks are never reused
	sweep   *time.Timer   // drops channels idle for longer than linger
	done    chan struct{} // closed when the receive loop ends
	nonce   atomic.Uint64
	stopped context.CancelFunc
}

type channel struct {
	watchers  map[*Watch]struct{}
	confirmed bool
	mark      uint64    // moves on every message and break; 0 until confirmed
	named     bool      // a release named this client since its last attempt (see Hears)
	idleSince time.Time // when the last watcher left; zero while watched
}

// A channel whose last watcher left stays subscribed for linger, so that a
// client which waits for the same lock again and again (a worker loop)
// pays no SUBSCRIBE, PING and UNSUBSCRIBE per wait. At most maxChannels
// stay subscribed; past that an idle channel is dropped at once.
const (
	linger      = 30 * time.Second
	maxChannels = 1024
)

// NewNotifier returns a notifier on rdb. It connects on the first Watch.
func NewNotifier(rdb redis.UniversalClient, confirmTimeout time.Duration) *Notifier {
	var id [9]byte
	_, _ = rand.Read(id[:])
	return &Notifier{
		rdb:     rdb,
		id:      base64.RawURLEncoding.EncodeToString(id[:]),
		named:   "+" + base64.RawURLEncoding.EncodeToString(id[:]),
		timeout: confirmTimeout,
		chans:   make(map[string]*channel),
		pings:   make(map[string]chan struct{}),
		grants:  make(map[string]string),
	}
}

// Watch subscribes to ch and returns once the subscription is confirmed.
// The watch fires on every message.
func (n *Notifier) Watch(ctx context.Context, ch string) (*Watch, error) {
	return n.WatchFor(ctx, ch, "")
}

// WatchFor is Watch for the fair waiter owner: the watch fires on messages
// that name owner or name nobody, not on those naming another waiter.
func (n *Notifier) WatchFor(ctx context.Context, ch, owner string) (*Watch, error) {
	w, _, err := n.watch(ctx, &Watch{n: n, ch: ch, owner: owner, c: make(chan struct{}, 1)}, 0)
	return w, err
}

// ID returns the id by which a refused attempt enlists this client (see
// [AcquireAs]), for a lock whose channel it hears.
func (n *Notifier) ID() string { return n.id }

// Hears returns what an attempt on the lock of channel ch says of this
// client (see [AcquireAs]): "" when ch is not subscribed and live (a
// release would not reach it: the attempt enlists nobody); its id, to be
// enlisted if refused; or "+" and its id when a release has named this
// client since its last attempt: others may still be enlisted, and the
// lease the attempt gets must wake them.
func (n *Notifier) Hears(ch string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.chans[ch]
	if st == nil || !st.confirmed || n.broken || n.closed {
		return ""
	}
	if st.named {
		st.named = false
		return n.named
	}
	return n.id
}

// Mark returns what ch has heard so far, for [Notifier.WatchSince]: a value
// that moves on every message and every break of the connection, and is
// never given again once it moved. It is 0 when ch is not subscribed, or
// not known to be live.
func (n *Notifier) Mark(ch string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if st := n.chans[ch]; st != nil && st.confirmed && !n.broken && !n.closed {
		return st.mark
	}
	return 0
}

// WatchSince is WatchFor for a waiter that took mark from [Notifier.Mark]
// before it sent an attempt. missed reports whether a message may have
// come on ch since then that the watch did not get: ch was not live when
// the mark was taken, or it has heard something since, or its connection
// broke. When missed is false, the subscription was live before the
// attempt was sent, and every message since fires the watch.
func (n *Notifier) WatchSince(ctx context.Context, ch, owner string, mark uint64) (w *Watch, missed bool, err error) {
	return n.watch(ctx, &Watch{n: n, ch: ch, owner: owner, c: make(chan struct{}, 1)}, mark)
}

// nextMark returns a mark no channel had before. n.mu is held.
func (n *Notifier) nextMark() uint64 {
	n.marks++
	return n.marks
}

// WatchMessages is Watch for a waiter that reads what the messages say:
// they arrive on [Watch.Messages] instead of [Watch.C]. When the waiter
// falls behind, the newest message replaces an unread one. After a
// reconnect an empty message stands for the releases that may have been
// missed.
func (n *Notifier) WatchMessages(ctx context.Context, ch string) (*Watch, error) {
	w, _, err := n.watch(ctx, &Watch{n: n, ch: ch, m: make(chan string, 1)}, 0)
	return w, err
}

// watch registers w, subscribing its channel if need be, and reports
// whether the channel may have heard a message since mark (see
// WatchSince) that w did not get.
func (n *Notifier) watch(ctx context.Context, w *Watch, mark uint64) (_ *Watch, missed bool, _ error) {
	ch := w.ch
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, true, ErrClosed
	}
	if n.ps == nil {
		lctx, cancel := context.WithCancel(context.Background())
		n.ps = n.rdb.Subscribe(lctx)
		n.done = make(chan struct{})
		n.stopped = cancel
		go n.loop(lctx, n.ps, n.done)
	}
	st := n.chans[ch]
	if st == nil {
		st = &channel{watchers: make(map[*Watch]struct{})}
		n.chans[ch] = st
		if err := n.ps.Subscribe(ctx, ch); err != nil {
			delete(n.chans, ch)
			// go-redis keeps the channel of a failed SUBSCRIBE, and would
			// subscribe it on every new connection: take it out. On a
			// broken connection the UNSUBSCRIBE itself fails, harmlessly
			// (the channel is dropped from the set first); the wait for it
			// is bounded, as n.mu is held.
			uctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = n.ps.Unsubscribe(uctx, ch)
			cancel()
			n.mu.Unlock()
			return nil, true, err
		}
	}
	st.watchers[w] = struct{}{}
	st.idleSince = time.Time{}
	if st.confirmed {
		// From here on every message of ch fires w. Nothing was missed if
		// ch was live at mark and has heard nothing since.
		missed = mark == 0 || st.mark != mark || n.broken
		n.mu.Unlock()
		return w, missed, nil
	}
	nonce := "distlock:" + strconv.FormatUint(n.nonce.Add(1), 10)
	pong := make(chan struct{})
	n.pings[nonce] = pong
	err := n.ps.Ping(ctx, nonce)
	n.mu.Unlock()

	if err == nil {
		timer := time.NewTimer(n.timeout)
		select {
		case <-pong:
		case <-ctx.Done():
			err = fmt.Errorf("redisnode: subscription not confirmed, no reply from the server before the context ended: %w", ctx.Err())
		case <-timer.C:
			err = errors.New("redisnode: subscription not confirmed in time")
		}
		timer.Stop()
	}
	n.mu.Lock()
	delete(n.pings, nonce)
	if err == nil && !st.confirmed {
		st.confirmed = true
		st.mark = n.nextMark()
	}
	n.mu.Unlock()
	if err != nil {
		w.Close()
		return nil, true, err
	}
	return w, true, nil // ch was not live before: a message may have gone unheard
}

// loop reads the subscription connection until the notifier closes.
func (n *Notifier) loop(ctx context.Context, ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	broken := false
	pause := 10 * time.Millisecond
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !broken {
				broken = true
				// Until it is back, a message may go unheard: no mark
				// holds across the break.
				n.mu.Lock()
				n.broken = true
				for _, st := range n.chans {
					st.mark = n.nextMark()
				}
				n.mu.Unlock()
			}
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 10 * time.Millisecond
		n.mu.Lock()
		if broken {
			// Back after a break: a release may have gone unseen.
			broken = false
			n.broken = false
			for _, st := range n.chans {
				n.wake(st, "")
			}
		}
		switch m := msg.(type) {
		case *redis.Message:
			if st := n.chans[m.Channel]; st != nil {
				if !n.wake(st, m.Payload) {
					go n.pass(m.Channel)
				}
			}
		case *redis.Pong:
			if c := n.pings[m.Payload]; c != nil {
				close(c)
				delete(n.pings, m.Payload)
			}
		}
		n.mu.Unlock()
	}
}

// wake fires the watches of st a message with payload is for: all of them
// when it names nobody, else the one waiter it names and the unfair
// watchers. A message that hands the lock over to a fair waiter ('='
// owner LF grant) leaves the grant for [Notifier.TakeGrant]. A message
// that names a client ('>' id) is for this client's unfair watchers alone,
// and is ignored unless it names this one. It moves the channel's mark,
// whoever the message is for, unless it names another client (which
// leaves this one enlisted). It reports false when the message named this
// client and no watch was there to fire: the wake-up must be passed on.
// n.mu is held.
func (n *Notifier) wake(st *channel, payload string) bool {
	target, grant := payload, ""
	client := false
	switch {
	case strings.HasPrefix(payload, ">"):
		if payload[1:] != n.id {
			return true
		}
		client = true
		st.named = true
	case strings.HasPrefix(payload, "="):
		target, grant, _ = strings.Cut(payload[1:], "\n")
	}
	st.mark = n.nextMark()
	fired := false
	for w := range st.watchers {
		if client && w.owner != "" {
			continue
		}
		if !client && target != "" && w.owner != "" && w.owner != target {
			continue
		}
		fired = true
		if grant != "" && w.owner == target {
			n.grants[target] = grant
		}
		if w.m != nil {
			w.say(payload)
			continue
		}
		select {
		case w.c <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return fired || !client
}

// pass passes on a wake-up that named this client when no watch of ch
// was there to take it (see pass.lua).
func (n *Notifier) pass(ch string) {
	base, ok := strings.CutSuffix(ch, channelSuffix)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	_ = run(ctx, n.rdb, passScript, []any{base, base + waitersSuffix}, ch, n.id).Err() // best effort: the waiters' own polls are the fallback
}

// Close ends the subscription connection. Watches stop receiving.
func (n *Notifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	if n.sweep != nil {
		n.sweep.Stop()
	}
	ps, done, stop := n.ps, n.done, n.stopped
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	stop()
	err := ps.Close()
	<-done
	return err
}

// Watch is one waiter's subscription to a lock's releases.
type Watch struct {
	n     *Notifier
	ch    string
	owner string // a fair waiter's owner; "" for every message
	c     chan struct{}
	m     chan string // WatchMessages' watches: instead of c
	once  sync.Once
}

// C receives after a release (or a reconnect).
func (w *Watch) C() <-chan struct{} { return w.c }

// Messages receives what each release says, for a watch made by
// [Notifier.WatchMessages].
func (w *Watch) Messages() <-chan string { return w.m }

// say hands payload on, replacing an unread message: the newest release is
// the one worth waking for, unless the unread one is empty (releases may
// have been missed), which stays. The notifier's lock is held, so say is
// the only sender: once the channel is drained, the send goes through.
func (w *Watch) say(payload string) {
	select {
	case w.m <- payload:
		return
	default:
	}
	select {
	case old := <-w.m:
		if old == "" {
			payload = ""
		}
	default:
	}
	select {
	case w.m <- payload:
	default:
	}
}

// Close drops the watch. The channel stays subscribed for a while after
// its last watcher leaves (see linger).
func (w *Watch) Close() error {
	w.once.Do(func() {
		n := w.n
		n.mu.Lock()
		defer n.mu.Unlock()
		st := n.chans[w.ch]
		if st == nil {
			return
		}
		delete(st.watchers, w)
		if w.owner != "" {
			delete(n.grants, w.owner)
		}
		if len(st.watchers) > 0 {
			return
		}
		if !st.confirmed || len(n.chans) > maxChannels {
			n.drop(w.ch)
			return
		}
		st.idleSince = time.Now()
		if n.sweep == nil && !n.closed {
			n.sweep = time.AfterFunc(linger, n.sweepIdle)
		}
	})
	return nil
}

// drop unsubscribes ch. n.mu is held.
func (n *Notifier) drop(ch string) {
	delete(n.chans, ch)
	if !n.closed {
		_ = n.ps.Unsubscribe(context.Background(), ch) // best effort; stray messages find no watcher
	}
}

// sweepIdle drops the channels idle for longer than linger.
func (n *Notifier) sweepIdle() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sweep = nil
	if n.closed {
		return
	}
	idle := false
	for ch, st := range n.chans {
		switch {
		case len(st.watchers) > 0:
		case time.Since(st.idleSince) >= linger:
			n.drop(ch)
		default:
			idle = true
		}
	}
	if idle {
		n.sweep = time.AfterFunc(linger, n.sweepIdle)
	}
}

// Handover is a grant that a release handed to a fair waiter (see
// [AcquireFair]).
type Handover struct {
	Token uint64
	// The lease runs out at Sent + Lease at the earliest: the server
	// granted it after it ran the attempt the client stamped at Sent.
	Sent  time.Time
	Lease time.Duration
}

// stampBase is the origin of stamps: a stamp is the time since, on the
// monotonic clock.
var stampBase = time.Now()

// Stamp returns a stamp of the present moment for [AcquireFair].
func Stamp() string {
	return strconv.FormatInt(int64(time.Since(stampBase)), 10)
}

// TakeGrant returns, once, the grant a release has handed over to owner,
// a fair waiter whose watch (made by [Notifier.WatchFor]) is open.
func (n *Notifier) TakeGrant(owner string) (Handover, bool) {
	n.mu.Lock()
	g, ok := n.grants[owner]
	if ok {
		delete(n.grants, owner)
	}
	n.mu.Unlock()
	if !ok {
		return Handover{}, false
	}
	token, rest, _ := strings.Cut(g, "\n")
	ms, stamp, _ := strings.Cut(rest, "\n")
	t, err1 := strconv.ParseUint(token, 10, 64)
	lease, err2 := strconv.ParseInt(ms, 10, 64)
	sent, err3 := strconv.ParseInt(stamp, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || t == 0 || lease <= 0 {
		return Handover{}, false
	}
	return Handover{Token: t, Sent: stampBase.Add(time.Duration(sent)), Lease: time.Duration(lease) * time.Millisecond}, true
}
