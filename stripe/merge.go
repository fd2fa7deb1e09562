package stripe

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultBudget is the most a Merger holds out of order when it is not
// told otherwise: above what a 1 Gbit/s path of 100 ms has in flight
// (12.5 MB), so that frames sent on fast connections wait for the one a
// slow connection carries without stopping the fast ones.
const DefaultBudget = 24 << 20

// A Merger puts one stream's data frames, read from several connections,
// back in order, and is read as the stream (io.Reader). Each connection's
// frames are handed to it in the order they came (Put, End, from one
// goroutine per connection).
//
// It holds at most its budget of frames that came ahead of their turn,
// plus the frame each connection is handing over: a frame ahead of its
// turn waits in Put while the budget is spent. That cannot hold the stream
// up for good: a connection's frames come in the stream's order, so the
// one that carries the frame next in turn has handed over all it had
// before it, and that frame is always taken. Where several streams share
// connections, each must have connections of its own for this to hold
// (stripe's users stripe one stream per direction).
type Merger struct {
	mu      sync.Mutex
	cond    *sync.Cond
	stream  uint8
	budget  int
	held    int // bytes of pending: their buffers', which a frame of a few bytes holds whole
	next    uint64
	pending map[uint64][]byte
	cur     []byte // the frame being read, what is left of it
	done    []byte // the frame being read, whole: its buffer goes back once read
	ended   bool
	end     uint64
	err     error
	closed  bool
}

// NewMerger is a Merger of stream holding at most budget bytes out of
// order (DefaultBudget when 0), counted by the buffers that hold them: a
// peer sending frames of a byte each must not hold a whole buffer per
// byte of the budget.
func NewMerger(stream uint8, budget int) *Merger {
	if budget <= 0 {
		budget = DefaultBudget
	}
	m := &Merger{stream: stream, budget: budget, pending: map[uint64][]byte{}}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// ErrMergerClosed is what Put returns once the reader has closed the
// Merger.
var ErrMergerClosed = errors.New("stripe: stream closed by its reader")

// Put hands over data frame seq's payload, which the Merger keeps (the
// caller gives up p). It waits while the frame is ahead of its turn and
// the budget is spent. A frame already taken, or past the stream's end,
// is an error wrapping ErrFrame, and fails the stream.
func (m *Merger) Put(seq uint64, p []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(); err != nil {
		return err
	}
	if _, dup := m.pending[seq]; dup || seq < m.next {
		return m.failLocked(frameErr("data frame %d of stream %d came twice", seq, m.stream))
	}
	if m.ended && seq >= m.end {
		return m.failLocked(frameErr("data frame %d of stream %d past its end at %d", seq, m.stream, m.end))
	}
	for seq != m.next && m.held > 0 && m.held+cap(p) > m.budget && m.err == nil && !m.closed {
		m.cond.Wait()
	}
	if err := m.usable(); err != nil {
		return err
	}
	m.pending[seq] = p
	m.held += cap(p)
	m.cond.Broadcast()
	return nil
}

// End hands over the stream's EOF frame: the stream has frames 0 to n-1.
func (m *Merger) End(n uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(); err != nil {
		return err
	}
	if m.ended {
		return m.failLocked(frameErr("stream %d ended twice", m.stream))
	}
	if n < m.next {
		return m.failLocked(frameErr("stream %d ended at %d, after frame %d came", m.stream, n, m.next-1))
	}
	for seq := range m.pending {
		if seq >= n {
			return m.failLocked(frameErr("stream %d ended at %d, after frame %d came", m.stream, n, seq))
		}
	}
	m.ended, m.end = true, n
	m.cond.Broadcast()
	return nil
}

// Fail ends the stream with err: a connection it needs is gone, or the far
// end gave up. The reader gets err once it has read the frames in order
// before the gap, never anything past it.
func (m *Merger) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failLocked(err)
}

func (m *Merger) failLocked(err error) error {
	if m.err == nil {
		m.err = err
	}
	m.cond.Broadcast()
	return m.err
}

// usable is why Put or End cannot go on, nil when they can.
func (m *Merger) usable() error {
	if m.closed {
		return ErrMergerClosed
	}
	return m.err
}

// Read reads the stream in order: io.EOF once its EOF frame came and every
// frame before it was read; the error of a failed stream once the frames
// in order before its gap are read.
func (m *Merger) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.waitLocked(); err != nil {
		return 0, err
	}
	n := copy(p, m.cur)
	m.cur = m.cur[n:]
	return n, nil
}

// WriteTo writes the stream to w in order, each frame's bytes in one
// Write, until its end (nil) or its failure, as Read would read it:
// io.Copy from a Merger costs a write per frame rather than per 32 KiB.
func (m *Merger) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		m.mu.Lock()
		err := m.waitLocked()
		// The frame's buffer stays m.done's until the next wait, after
		// this write: only then does it go back for another frame.
		chunk := m.cur
		m.cur = nil
		m.mu.Unlock()
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		n, err := w.Write(chunk)
		total += int64(n)
		if err == nil && n < len(chunk) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return total, err
		}
	}
}

// waitLocked waits until the bytes in turn are in m.cur: nil, or io.EOF
// at the stream's end, or why it failed. The frame read before goes back
// to the buffers first.
func (m *Merger) waitLocked() error {
	for len(m.cur) == 0 {
		if m.closed {
			return ErrMergerClosed
		}
		if m.done != nil {
			putFrameBuf(m.done)
			m.done = nil
		}
		if f, ok := m.pending[m.next]; ok {
			delete(m.pending, m.next)
			m.held -= cap(f)
			m.next++
			m.cur, m.done = f, f
			m.cond.Broadcast()
			continue
		}
		if m.ended && m.next == m.end {
			return io.EOF
		}
		if m.err != nil {
			return fmt.Errorf("stream %d after %d frames: %w", m.stream, m.next, m.err)
		}
		m.cond.Wait()
	}
	return nil
}

// Close gives up reading: Put and End return ErrMergerClosed from then on,
// and what is held is dropped.
func (m *Merger) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.pending, m.held, m.cur, m.done = nil, 0, nil, nil
	m.cond.Broadcast()
	return nil
}

// ErrIncomplete is wrapped by the error of a stream whose connections all
// closed before every frame of it came.
var ErrIncomplete = errors.New("stripe: every connection closed before the stream's end")

// complete reports whether every frame of the stream came: its end is
// known and the frames not yet read are all held.
func (m *Merger) complete() bool {
	return m.ended && m.end-m.next == uint64(len(m.pending))
}

// A Group counts the connections that carry a direction's streams. Once
// the last of them has ended (Done as often as Add), nothing more can come,
// and a stream that did not get all its frames fails with ErrIncomplete
// rather than wait for ever.
type Group struct {
	mu      sync.Mutex
	n       int
	mergers []*Merger
}

// NewGroup is a Group for the streams of mergers.
func NewGroup(mergers ...*Merger) *Group { return &Group{mergers: mergers} }

// Add counts n more connections.
func (g *Group) Add(n int) {
	g.mu.Lock()
	g.n += n
	g.mu.Unlock()
}

// Done counts one connection ended, however it ended.
func (g *Group) Done() {
	g.mu.Lock()
	g.n--
	last := g.n == 0
	g.mu.Unlock()
	if !last {
		return
	}
	for _, m := range g.mergers {
		m.mu.Lock()
		if !m.complete() && !m.closed {
			m.failLocked(ErrIncomplete)
		}
		m.mu.Unlock()
	}
}
