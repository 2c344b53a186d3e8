package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the proxy's connection to its target.
const dialTimeout = 5 * time.Second

// Proxy is a TCP proxy on a free port of 127.0.0.1 that forwards every
// connection to a target address and can inject network faults. Its
// methods may be called from any goroutine.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled on close, to abort dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	gate  chan struct{} // non-nil while blackholed; closed to release
	links map[*link]struct{}
	drop  *dropArm // armed by DropReply; nil otherwise
	hold  *holdArm // armed by HoldRequest; nil otherwise
}

// holdArm is one HoldRequest: the request to look for, a channel closed
// once it is held, and one closed to let it go.
type holdArm struct {
	match []byte
	held  chan struct{}
	let   chan struct{}
	sent  chan struct{} // closed once the request went on, or was dropped
}

// dropArm is one DropReply: the request to look for, and a channel closed
// once its reply has been dropped.
type dropArm struct {
	match   []byte
	dropped chan struct{}
}

// link is one proxied connection pair.
type link struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{}

	mu   sync.Mutex
	drop *dropArm      // a request of this link awaits its reply, to be dropped
	sent chan struct{} // a held request's; set and closed by the client's pipe
}

// close resets both sides: an RST makes the peer's next read or write fail
// at once, where a FIN would let writes succeed into the void.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		reset(l.client)
		if l.server != nil {
			reset(l.server)
		}
	})
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// StartProxy starts a proxy in front of target (host:port). The target is
// dialed once per accepted connection, so it need not be up yet. The
// caller must Close the proxy.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("launch: proxy listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients should dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut resets every open connection and, until Restore, resets new ones as
// soon as they are accepted, so clients see "connection reset" errors.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinks()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Blackhole stops forwarding in both directions while keeping every
// connection open, so clients see timeouts rather than errors. Bytes sent
// meanwhile are held, like TCP retransmissions over a partitioned network,
// and delivered after Restore unless the connection is closed first. New
// connections are accepted but stay silent as well.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
}

// DropReply arms the proxy to lose one reply: the next request that
// contains match is forwarded to the target, and when the target answers,
// the answer is discarded and the client's connection closed (a FIN, so the
// client reads EOF). The client cannot tell whether its request was applied
// — it was. The returned channel is closed once a reply has been dropped.
// A later DropReply replaces one that has not fired yet.
func (p *Proxy) DropReply(match string) <-chan struct{} {
	arm := &dropArm{match: []byte(match), dropped: make(chan struct{})}
	p.mu.Lock()
	p.drop = arm
	p.mu.Unlock()
	return arm.dropped
}

// HoldRequest arms the proxy to delay one request, as a network that holds
// a packet back for long: the next request that contains match is not
// forwarded until the returned deliver is called, which returns once the
// request has been written to the target (or dropped with the proxy).
// held is closed once such a request is being held. The client may
// meanwhile give up on it and close its connection: the request still
// reaches the target on deliver, like the bytes of a closed connection
// still in flight. Closing the proxy drops it. A later HoldRequest
// replaces one that has not fired yet.
func (p *Proxy) HoldRequest(match string) (held <-chan struct{}, deliver func()) {
	arm := &holdArm{match: []byte(match), held: make(chan struct{}), let: make(chan struct{}), sent: make(chan struct{})}
	p.mu.Lock()
	p.hold = arm
	p.mu.Unlock()
	var once sync.Once
	return arm.held, func() {
		once.Do(func() { close(arm.let) })
		select {
		case <-arm.sent:
		case <-p.ctx.Done():
		}
	}
}

// Restore ends Cut and Blackhole: new connections are forwarded again and
// held bytes flow.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// takeLinks empties the link set; p.mu must be held.
func (p *Proxy) takeLinks() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	clear(p.links)
	return links
}

// Close stops the proxy and resets its connections. All its goroutines
// have exited by the time it returns. Closing a closed proxy does nothing.
func (p *Proxy) Close() error {
	p.cancel()
	err := p.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	p.mu.Lock()
	links := p.takeLinks()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or the like: back off rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.connect(c)
	}
}

// connect dials the target for client c and starts forwarding.
func (p *Proxy) connect(c net.Conn) {
	defer p.wg.Done()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	s, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		// The target is down: pass that on as a reset.
		reset(c)
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.ctx.Err() != nil {
		// Cut or closed while dialing: this link missed the sweep.
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipe(l, s, c, p.watchRequest)
	go p.pipe(l, c, s, p.dropReply)
}

// watchRequest runs on each chunk a client sends: a chunk matching an armed
// HoldRequest waits for its delivery, even if the link closes meanwhile;
// one matching an armed DropReply marks its link, before the chunk reaches
// the target.
func (p *Proxy) watchRequest(l *link, chunk []byte) bool {
	p.mu.Lock()
	hold := p.hold
	if hold != nil && bytes.Contains(chunk, hold.match) {
		p.hold = nil
	} else {
		hold = nil
	}
	p.mu.Unlock()
	if hold != nil {
		close(hold.held)
		select {
		case <-hold.let:
			l.sent = hold.sent // pipe closes it once the chunk is written
		case <-p.ctx.Done():
			return false
		}
	}
	p.mu.Lock()
	arm := p.drop
	if arm != nil && bytes.Contains(chunk, arm.match) {
		p.drop = nil
	} else {
		arm = nil
	}
	p.mu.Unlock()
	if arm != nil {
		l.mu.Lock()
		l.drop = arm
		l.mu.Unlock()
	}
	return true
}

// dropReply runs on each chunk the target sends: on a marked link the chunk
// is discarded, the client gets a FIN and the target a reset.
func (p *Proxy) dropReply(l *link, _ []byte) bool {
	l.mu.Lock()
	arm := l.drop
	l.mu.Unlock()
	if arm == nil {
		return true
	}
	close(arm.dropped) // before the client can see the EOF
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		reset(l.server)
	})
	return false
}

// pipe copies src to dst until either side fails, then closes the link.
// inspect sees each chunk first; it returns false to drop the chunk and
// stop.
func (p *Proxy) pipe(l *link, dst, src net.Conn, inspect func(*link, []byte) bool) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(l) || !inspect(l, buf[:n]) {
				return
			}
			_, werr := dst.Write(buf[:n])
			if dst == l.server && l.sent != nil { // only the client's pipe uses sent
				close(l.sent)
				l.sent = nil
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass blocks while the proxy is blackholed and reports whether the link
// is still open afterwards.
func (p *Proxy) pass(l *link) bool {
	for {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		if gate == nil {
			return true
		}
		select {
		case <-gate:
			// Re-check: a new Blackhole may have followed the Restore.
		case <-l.done:
			return false
		}
	}
}
