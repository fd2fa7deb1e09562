package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Relay is a TCP relay on 127.0.0.1 that emulates a long path: each
// direction delays data by RTT/2 and serialises it at Rate, like a link
// shared by every connection through it. Data waits in a bounded queue
// before the link, as in a router's buffer; when it is full the relay stops
// reading and TCP's own flow control pushes back on the sender.
type Relay struct {
	Addr string // "127.0.0.1:NNNN", where clients connect

	target string
	ln     net.Listener
	up     *link // client to server
	down   *link // server to client
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// link is one direction of the emulated path: a departure-time model. A
// segment that arrives when the link is busy leaves when the previous one
// has been serialised; it arrives at the far end half an RTT later.
type link struct {
	delay    time.Duration // one-way
	bytesSec float64       // 0: no rate limit
	maxQueue time.Duration // longest wait before the link

	mu   sync.Mutex
	free time.Time // when the link has sent everything queued so far
}

// schedule books n bytes on the link and returns when they leave it; the
// caller waits until then minus maxQueue before reading more.
func (l *link) schedule(n int) time.Time {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.free.Before(now) {
		l.free = now
	}
	if l.bytesSec > 0 {
		l.free = l.free.Add(time.Duration(float64(n) / l.bytesSec * float64(time.Second)))
	}
	return l.free
}

// startRelay listens on 127.0.0.1 and relays each connection to target
// with the given round-trip time and rate in bits per second (0 for none).
func startRelay(target string, rtt time.Duration, bitsPerSec float64) (*Relay, error) {
	if rtt < 0 || bitsPerSec < 0 {
		return nil, fmt.Errorf("relay to %s: negative RTT or rate", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("relay to %s: listen on 127.0.0.1: %w", target, err)
	}
	// A router buffer of a bandwidth-delay product, at least 5 ms' worth:
	// enough to keep a busy link busy, not so much that queues swamp the RTT.
	maxQueue := max(rtt, 5*time.Millisecond)
	newLink := func() *link {
		return &link{delay: rtt / 2, bytesSec: bitsPerSec / 8, maxQueue: maxQueue}
	}
	r := &Relay{
		Addr:   ln.Addr().String(),
		target: target,
		ln:     ln,
		up:     newLink(),
		down:   newLink(),
		conns:  map[net.Conn]struct{}{},
	}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Close stops the relay and drops every connection through it.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
		c.Close()
	}
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", r.target)
		if err != nil {
			client.Close()
			continue
		}
		if !r.track(client, server) {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(client, server)
			var pumps sync.WaitGroup
			pumps.Add(2)
			go func() { defer pumps.Done(); r.up.pump(server, client) }()
			go func() { defer pumps.Done(); r.down.pump(client, server) }()
			pumps.Wait()
		}()
	}
}

// segment is data read from one side waiting to be written to the other.
type segment struct {
	buf *[]byte // from segmentPool
	n   int
	at  time.Time // when it reaches the far end
}

// segmentSize is what the relay reads at a time: large, so that the relay's
// own CPU stays small next to the SSH ends it sits between.
const segmentSize = 256 << 10

var segmentPool = sync.Pool{New: func() any { b := make([]byte, segmentSize); return &b }}

// pump moves src's data to dst through the link until src ends, then
// half-closes dst so that the far end sees the end of the stream.
func (l *link) pump(dst, src net.Conn) {
	queue := make(chan segment, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for s := range queue {
			if !failed {
				time.Sleep(time.Until(s.at))
				if _, err := dst.Write((*s.buf)[:s.n]); err != nil {
					failed = true
					src.Close()
				}
			}
			segmentPool.Put(s.buf)
		}
	}()
	for {
		buf := segmentPool.Get().(*[]byte)
		n, err := src.Read(*buf)
		if n > 0 {
			leave := l.schedule(n)
			queue <- segment{buf: buf, n: n, at: leave.Add(l.delay)}
			// The queue before the link is full: stop reading until it drains.
			if wait := time.Until(leave) - l.maxQueue; wait > 0 {
				time.Sleep(wait)
			}
		} else {
			segmentPool.Put(buf)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(queue)
	<-done
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
