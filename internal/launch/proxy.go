package launch

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the proxy's connection to its target.
const dialTimeout = 5 * time.Second

// Proxy is a TCP proxy on a free port of 127.0.0.1 that forwards each
// connection to a target address and injects network faults on command. Its
// methods may be called from any goroutine.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close, to abort dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	hold  chan struct{} // non-nil while blackholed; closed by Restore
	pairs map[*pair]struct{}
}

// pair is one proxied connection: the client's and the proxy's own to the
// target.
type pair struct {
	client, server net.Conn
	once           sync.Once
	closed         chan struct{}
}

// close resets both connections: a reset makes the peer's next read or
// write fail at once, where an orderly close would let writes vanish.
func (c *pair) close() {
	c.once.Do(func() {
		close(c.closed)
		abort(c.client)
		if c.server != nil {
			abort(c.server)
		}
	})
}

func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// StartProxy starts a proxy in front of target (host:port). The target is
// dialled for each accepted connection, so it need not be up yet. The caller
// must Close the proxy.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, pairs: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut resets every open connection and, until Restore, every new one as
// soon as it is accepted: clients see "connection reset" errors.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	pairs := p.takePairs()
	p.mu.Unlock()
	for _, c := range pairs {
		c.close()
	}
}

// Blackhole stops forwarding in both directions while keeping every
// connection open, so clients see timeouts rather than errors. Bytes sent
// meanwhile are held, as TCP would retransmit them over a partitioned
// network, and delivered after Restore unless the connection is closed
// first. New connections are accepted and stay silent too.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold == nil {
		p.hold = make(chan struct{})
	}
}

// Restore ends Cut and Blackhole: connections are forwarded again and held
// bytes flow.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.hold != nil {
		close(p.hold)
		p.hold = nil
	}
}

// Close stops the proxy, resets its connections and waits for its
// goroutines to end.
func (p *Proxy) Close() error {
	p.cancel()
	err := p.ln.Close()
	p.mu.Lock()
	pairs := p.takePairs()
	p.mu.Unlock()
	for _, c := range pairs {
		c.close()
	}
	p.wg.Wait()
	return err
}

// takePairs empties the set of connections; p.mu is held.
func (p *Proxy) takePairs() []*pair {
	out := make([]*pair, 0, len(p.pairs))
	for c := range p.pairs {
		out = append(out, c)
	}
	clear(p.pairs)
	return out
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: do not spin
			continue
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			abort(c)
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward dials the target for client c and copies both ways.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	var d net.Dialer
	s, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		abort(c) // the target is down: the client sees a reset
		return
	}
	cp := &pair{client: c, server: s, closed: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.ctx.Err() != nil { // cut or closed while dialling
		p.mu.Unlock()
		cp.close()
		return
	}
	p.pairs[cp] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.copy(cp, s, c)
	go p.copy(cp, c, s)
}

// copy copies src to dst until either fails, then closes the pair.
func (p *Proxy) copy(cp *pair, dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		cp.close()
		p.mu.Lock()
		delete(p.pairs, cp)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.open(cp) {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// open waits while the proxy is blackholed and reports whether the pair is
// still open afterwards.
func (p *Proxy) open(cp *pair) bool {
	for {
		p.mu.Lock()
		hold := p.hold
		p.mu.Unlock()
		if hold == nil {
			return true
		}
		select {
		case <-hold: // check again: a new Blackhole may have followed
		case <-cp.closed:
			return false
		}
	}
}
