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
// that the connections carry what each can. The connection that reads the
// source's end sends the stream's EOF frame.
type Sender struct {
	mu     sync.Mutex
	src    io.Reader
	stream uint8
	size   int
	seq    uint64
	eof    bool  // src ended: the next to ask sends the EOF frame
	done   bool  // the EOF frame is taken, or the stream failed
	err    error // why the stream failed
}

// NewSender is a Sender of src as stream, in data frames of at most size
// bytes (DefaultFrame when 0).
func NewSender(src io.Reader, stream uint8, size int) *Sender {
	if size <= 0 || size > MaxPayload {
		size = DefaultFrame
	}
	return &Sender{src: src, stream: stream, size: size}
}

// ErrSenderFailed is what Run returns on the connections that did not fail
// themselves once the stream failed on another or at its source.
var ErrSenderFailed = errors.New("stripe: the stream failed on another connection")

// Run writes frames to w, one frame per Write, until the stream's EOF
// frame is taken (by this connection or another: nil) or it fails. A
// failed write fails the whole stream: the frame it held is lost, and a
// stream is never sent with one missing. A failed read of the source
// fails it too, and the error is returned on this connection.
func (s *Sender) Run(w io.Writer) error {
	buf := make([]byte, HeaderLen+s.size)
	for {
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return ErrSenderFailed
		}
		if s.done {
			s.mu.Unlock()
			return nil
		}
		if s.eof {
			s.done = true
			seq := s.seq
			s.mu.Unlock()
			PutHeader(buf, KindEOF, s.stream, seq, 0)
			if _, err := w.Write(buf[:HeaderLen]); err != nil {
				return s.fail(fmt.Errorf("send the end of stream %d: %w", s.stream, err))
			}
			return nil
		}
		// Reading under the lock keeps the frames in the source's order:
		// the one that reads takes the next number.
		n, err := s.src.Read(buf[HeaderLen:])
		seq := s.seq
		if n > 0 {
			s.seq++
		}
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			s.err = err
		}
		s.mu.Unlock()
		if err != nil && err != io.EOF {
			return fmt.Errorf("read stream %d: %w", s.stream, err)
		}
		if n == 0 {
			continue
		}
		PutHeader(buf, KindData, s.stream, seq, n)
		if _, err := w.Write(buf[:HeaderLen+n]); err != nil {
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
