package stripe

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultFrame is the most a data frame carries when the sender is not
// told otherwise: large enough that a frame's header and its channel
// message cost nothing beside it, small enough that a connection that
// took one and stalls holds up little.
const DefaultFrame = 256 << 10

// A Sender cuts what it reads from one source into the data frames of one
// stream and hands them to the connections that ask (Run, one call per
// connection): each takes the next frame when its last one is written, so
// that the connections carry what each can. The connection that finds the
// source's end sends the stream's EOF frame.
//
// The source is read ahead into a buffer of a few frames, by a goroutine
// of its own, and a connection that asks takes all that is there, up to a
// frame: where the connections are the bottleneck, frames are whole
// whatever the size of the source's writes (rsync writes 32 KiB at a
// time, which as frames of their own would cost the receiver eight times
// the frames, and the memory of eight buffers held for one); where the
// source is, what it wrote goes at once, as small as it came.
type Sender struct {
	src    io.Reader
	stream uint8
	size   int
	start  sync.Once
	ready  func() bool // SetReady's

	mu   sync.Mutex
	cond *sync.Cond
	ring []byte // read ahead: len(ring) is aheadFrames frames
	head int    // where the bytes not yet taken start
	n    int    // how many there are
	seq  uint64
	eof  bool  // src ended: once the ring is empty, the next to ask sends the EOF frame
	rerr error // src failed: the stream fails
	done bool  // the EOF frame is taken, or the stream failed
	err  error // why the stream failed
}

// aheadFrames is how many frames' worth of the source a Sender reads ahead.
const aheadFrames = 4

// NewSender is a Sender of src as stream, in data frames of at most size
// bytes (DefaultFrame when 0).
func NewSender(src io.Reader, stream uint8, size int) *Sender {
	if size <= 0 || size > MaxPayload {
		size = DefaultFrame
	}
	s := &Sender{src: src, stream: stream, size: size}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// SetReady tells the Sender how to ask whether its source has bytes
// ready to read at once (a pipe's poll): a connection then sends less
// than a frame only when the source has nothing more ready, rather than
// each of the source's writes as a frame of its own. Call it before Run.
func (s *Sender) SetReady(ready func() bool) { s.ready = ready }

// ErrSenderFailed is what Run returns on the connections that did not fail
// themselves once the stream failed on another or at its source.
var ErrSenderFailed = errors.New("stripe: the stream failed on another connection")

// fill reads the source into the ring until it ends or fails, or the
// stream is done. Only fill writes past the bytes held, so it reads
// without the lock.
func (s *Sender) fill() {
	buf := make([]byte, aheadFrames*s.size)
	s.mu.Lock()
	s.ring = buf
	for {
		for s.n == len(s.ring) && !s.done {
			s.cond.Wait()
		}
		if s.done {
			s.mu.Unlock()
			return
		}
		// The free bytes from the end of those held, up to the ring's
		// end: one read.
		tail := (s.head + s.n) % len(s.ring)
		free := len(s.ring) - s.n
		if tail+free > len(s.ring) {
			free = len(s.ring) - tail
		}
		s.mu.Unlock()
		k, err := s.src.Read(buf[tail : tail+free])
		s.mu.Lock()
		s.n += k
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			s.rerr = err
		}
		if k > 0 || err != nil {
			s.cond.Broadcast()
		}
		if err != nil {
			s.mu.Unlock()
			return
		}
	}
}

// Run writes frames to w, one frame per Write, until the stream's EOF
// frame is taken (by this connection or another: nil) or it fails. A
// failed write fails the whole stream: the frame it held is lost, and a
// stream is never sent with one missing. A failed read of the source
// fails it too, and the error is returned on the connection that finds
// it.
func (s *Sender) Run(w io.Writer) error {
	s.start.Do(func() { go s.fill() })
	buf := make([]byte, HeaderLen+s.size)
	for {
		s.mu.Lock()
		for s.n == 0 && !s.eof && s.rerr == nil && s.err == nil && !s.done {
			s.cond.Wait()
		}
		switch {
		case s.err != nil:
			s.mu.Unlock()
			return ErrSenderFailed
		case s.done:
			s.mu.Unlock()
			return nil
		case s.rerr != nil:
			// What was read before the failure is not sent: the
			// stream fails rather than end early.
			err := fmt.Errorf("read stream %d: %w", s.stream, s.rerr)
			s.err, s.done = err, true
			s.cond.Broadcast()
			s.mu.Unlock()
			return err
		case s.n == 0: // the source's end, all of it sent
			s.done = true
			seq := s.seq
			s.cond.Broadcast()
			s.mu.Unlock()
			PutHeader(buf, KindEOF, s.stream, seq, 0)
			if _, err := w.Write(buf[:HeaderLen]); err != nil {
				return s.fail(fmt.Errorf("send the end of stream %d: %w", s.stream, err))
			}
			return nil
		}
		if s.n < s.size && !s.eof && s.ready != nil && s.ready() {
			// More is on its way: the frame waits for the read that
			// takes it.
			s.cond.Wait()
			s.mu.Unlock()
			continue
		}
		// Taking the bytes and their number under the lock keeps the
		// frames in the source's order.
		k := min(s.n, s.size)
		first := copy(buf[HeaderLen:HeaderLen+k], s.ring[s.head:min(s.head+k, len(s.ring))])
		copy(buf[HeaderLen+first:HeaderLen+k], s.ring)
		s.head = (s.head + k) % len(s.ring)
		s.n -= k
		seq := s.seq
		s.seq++
		s.cond.Broadcast()
		s.mu.Unlock()
		PutHeader(buf, KindData, s.stream, seq, k)
		if _, err := w.Write(buf[:HeaderLen+k]); err != nil {
			return s.fail(fmt.Errorf("send frame %d of stream %d: %w", seq, s.stream, err))
		}
	}
}

// fail marks the stream failed for err and returns err.
func (s *Sender) fail(err error) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.done = true
	s.cond.Broadcast()
	s.mu.Unlock()
	return err
}

// Serial makes w take each Write whole, one at a time, for the senders that
// share a connection (a stream's Run and a control frame): a channel
// splits a Write into messages, and two at once would mix their frames.
func Serial(w io.Writer) io.Writer { return &serial{w: w} }

type serial struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *serial) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// WriteClose sends a connection's Close frame: nothing more comes on it.
func WriteClose(w io.Writer) error { return WriteFrame(w, Frame{Kind: KindClose}) }
