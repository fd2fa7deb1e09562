// Package faultnet injects network faults into connections for tests: a
// net.Conn wrapper that cuts, resets, stalls or slows its connection at a
// chosen byte or time, and a TCP proxy on 127.0.0.1 that applies it to the
// connections of a real server. Faults are plain values, so that a test can
// derive them from a seed and print them with the seed when a trial fails.
package faultnet

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Kind is what happens to a connection when its fault fires.
type Kind int

const (
	// None passes every byte; the Conn only counts them.
	None Kind = iota
	// Cut closes the connection: the peer reads EOF, as when a
	// middlebox or the server's process goes away cleanly.
	Cut
	// Reset closes a TCP connection with SO_LINGER 0, so that the peer
	// gets a RST and "connection reset by peer".
	Reset
	// Stall stops passing bytes in both directions for Duration, or
	// until the connection is closed when Duration is 0: a black hole.
	Stall
	// Slow passes at most Rate bytes per second in each direction for
	// Duration, or until the connection is closed when Duration is 0.
	Slow
)

func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case Cut:
		return "cut"
	case Reset:
		return "reset"
	case Stall:
		return "stall"
	case Slow:
		return "slow"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Dir is a direction of a connection, as its holder sees it.
type Dir int

const (
	Read  Dir = iota // bytes the peer sent
	Write            // bytes sent to the peer
)

func (d Dir) String() string {
	if d == Read {
		return "read"
	}
	return "write"
}

// Fault says what happens to a connection and when. It fires once AtByte
// bytes have passed in direction Dir, or, when AtTime is positive, AtTime
// after the connection was wrapped.
type Fault struct {
	Kind     Kind
	Dir      Dir
	AtByte   int64
	AtTime   time.Duration
	Duration time.Duration // Stall and Slow: how long; 0 for good
	Rate     int64         // Slow: bytes per second in each direction
}

func (f Fault) String() string {
	if f.Kind == None {
		return "none"
	}
	s := f.Kind.String()
	if f.AtTime > 0 {
		s += fmt.Sprintf(" at %v", f.AtTime)
	} else {
		s += fmt.Sprintf(" at %s byte %d", f.Dir, f.AtByte)
	}
	if f.Kind == Slow {
		s += fmt.Sprintf(" to %d B/s", f.Rate)
	}
	if f.Kind == Stall || f.Kind == Slow {
		if f.Duration > 0 {
			s += fmt.Sprintf(" for %v", f.Duration)
		} else {
			s += " for good"
		}
	}
	return s
}

// ErrFault is the error of a read or write that a Cut or Reset ended.
var ErrFault = errors.New("faultnet: connection cut by the test")

// maxPiece bounds the bytes one Read or Write passes to the connection
// below, so that a stall or a rate limit takes hold within a large write.
const maxPiece = 32 << 10

// Conn is a connection with a Fault. It counts the bytes that pass in each
// direction, faulted or not.
type Conn struct {
	net.Conn
	f Fault

	closed    chan struct{}
	closeOnce sync.Once
	timer     *time.Timer

	mu    sync.Mutex
	n     [2]int64
	fired bool
	until time.Time // end of a Stall or Slow; zero for none
}

// Wrap returns c with fault f.
func Wrap(c net.Conn, f Fault) *Conn {
	fc := &Conn{Conn: c, f: f, closed: make(chan struct{})}
	if f.Kind != None && f.AtTime > 0 {
		fc.timer = time.AfterFunc(f.AtTime, fc.fire)
	}
	return fc
}

// Bytes is how many bytes have passed in direction d.
func (c *Conn) Bytes(d Dir) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[d]
}

// Fired reports whether the fault has fired.
func (c *Conn) Fired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

// Close closes the connection and ends a stall.
func (c *Conn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.timer != nil {
			c.timer.Stop()
		}
		err = c.Conn.Close()
	})
	return err
}

// fire makes the fault happen now, if it has not yet.
func (c *Conn) fire() {
	c.mu.Lock()
	if c.fired {
		c.mu.Unlock()
		return
	}
	c.fired = true
	if (c.f.Kind == Stall || c.f.Kind == Slow) && c.f.Duration > 0 {
		c.until = time.Now().Add(c.f.Duration)
	}
	c.mu.Unlock()
	switch c.f.Kind {
	case Reset:
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	case Cut:
		c.Close()
	}
}

// active reports whether a fired Stall or Slow still holds.
func (c *Conn) active(k Kind) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired && c.f.Kind == k && (c.until.IsZero() || time.Now().Before(c.until))
}

// isClosed reports whether Close ran, by the fault or by the holder.
func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// hold blocks while a Stall holds, and fails once the connection is closed.
func (c *Conn) hold() error {
	for {
		if c.isClosed() {
			if c.Fired() && (c.f.Kind == Cut || c.f.Kind == Reset) {
				return ErrFault
			}
			return net.ErrClosed
		}
		if !c.active(Stall) {
			return nil
		}
		wait := time.Hour
		c.mu.Lock()
		if !c.until.IsZero() {
			wait = time.Until(c.until)
		}
		c.mu.Unlock()
		select {
		case <-c.closed:
		case <-time.After(wait):
		}
	}
}

// room is how many of want bytes may pass in direction d before the fault
// fires; it fires the fault when its byte has been reached.
func (c *Conn) room(d Dir, want int) int {
	want = min(want, maxPiece)
	c.mu.Lock()
	f, fired, n := c.f, c.fired, c.n[d]
	c.mu.Unlock()
	if fired || f.Kind == None || f.AtTime > 0 || f.Dir != d {
		return want
	}
	if left := f.AtByte - n; left < int64(want) {
		if left <= 0 {
			c.fire()
			return want
		}
		return int(left)
	}
	return want
}

// passed counts n bytes in direction d, fires the fault if they reach its
// byte, and paces them under a Slow.
func (c *Conn) passed(d Dir, n int) {
	c.mu.Lock()
	c.n[d] += int64(n)
	reached := !c.fired && c.f.Kind != None && c.f.AtTime <= 0 && c.f.Dir == d && c.n[d] >= c.f.AtByte
	c.mu.Unlock()
	if reached {
		c.fire()
	}
	if n > 0 && c.f.Rate > 0 && c.active(Slow) {
		select {
		case <-c.closed:
		case <-time.After(time.Duration(int64(n) * int64(time.Second) / c.f.Rate)):
		}
	}
}

func (c *Conn) Read(p []byte) (int, error) {
	if err := c.hold(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return c.Conn.Read(p)
	}
	k := c.room(Read, len(p))
	if err := c.hold(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p[:k])
	c.passed(Read, n)
	// Bytes that arrived while a timed stall began are held back with it;
	// those up to a fault's byte are the holder's.
	if c.f.Kind == Stall && c.f.AtTime > 0 {
		if herr := c.hold(); herr != nil {
			return 0, herr
		}
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) || len(p) == 0 {
		if err := c.hold(); err != nil {
			return written, err
		}
		k := c.room(Write, len(p)-written)
		if err := c.hold(); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written : written+k])
		written += n
		c.passed(Write, n)
		if err != nil || len(p) == 0 {
			return written, err
		}
	}
	return written, nil
}
