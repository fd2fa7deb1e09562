package faultnet

import (
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from a port of 127.0.0.1 to a server,
// each through a wrapper that can fault it, so that a real server's
// connections meet the faults of a Conn: the wrapper gets the accepted
// connection, the client's end, so that a Reset reaches the client as a
// RST.
type Proxy struct {
	Addr string // "127.0.0.1:NNNN"

	ln     net.Listener
	target string
	wrap   func(n int, c net.Conn) net.Conn
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	n      int
	closed bool
	fired  bool // Fire was called: new connections fire at once
}

// NewProxy listens on a free port of 127.0.0.1 and forwards each
// connection to target, which must be a loopback address. wrap, when not
// nil, wraps the n-th connection accepted (from 0).
func NewProxy(target string, wrap func(n int, c net.Conn) net.Conn) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("faultnet: the proxy forwards to loopback addresses only, not " + target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target, wrap: wrap, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Close stops accepting, closes every forwarded connection and waits for
// their goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		n := p.n
		p.n++
		p.mu.Unlock()
		var down net.Conn = c
		if p.wrap != nil {
			down = p.wrap(n, c)
		}
		p.mu.Lock()
		fired := p.fired
		p.mu.Unlock()
		if fc, ok := down.(*Conn); ok && fired {
			fc.fire()
		}
		p.wg.Add(1)
		go p.forward(down)
	}
}

// track adds c to what Close closes, or closes c if Close ran already.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// forward copies between the client's connection and one of its own to
// the target. An end of input is passed on as a half-close; an error in
// either direction, a fault among them, closes both.
func (p *Proxy) forward(down net.Conn) {
	defer p.wg.Done()
	if !p.track(down) {
		return
	}
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil || closeWrite(dst) != nil {
			dst.Close()
			src.Close()
		}
	}
	wg.Add(2)
	go pipe(up, down)
	go pipe(down, up)
	wg.Wait()
}

// closeWrite half-closes c, below its wrapper if it has one.
func closeWrite(c net.Conn) error {
	if fc, ok := c.(*Conn); ok {
		if fc.isClosed() {
			return net.ErrClosed
		}
		c = fc.Conn
	}
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return c.Close()
}

// Fire fires, now, the fault of every connection whose wrapper made it a
// *Conn, those forwarded so far and those to come: a test stalls or cuts
// a path at the moment it chooses (a Fault that would fire on its own
// only past math.MaxInt64 bytes fires only so).
func (p *Proxy) Fire() {
	p.mu.Lock()
	p.fired = true
	var cs []*Conn
	for c := range p.conns {
		if fc, ok := c.(*Conn); ok {
			cs = append(cs, fc)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.fire()
	}
}

// StallProxy is a Proxy to target whose connections stall for good, in
// both directions, when Fire is called: a path whose router stopped
// forwarding, every connection kept open.
func StallProxy(target string) (*Proxy, error) {
	return NewProxy(target, func(_ int, c net.Conn) net.Conn {
		return Wrap(c, Fault{Kind: Stall, AtByte: math.MaxInt64})
	})
}
