// Package stripe carries an ordered byte stream over several ordered
// connections at once, as hpncp's helper does with a remote command's
// input and output (hpncp ssh to a host running hpncp serve): the sending
// side cuts the stream into numbered frames, and each connection sends the
// next frame when it can take one, so that a fast connection carries more
// than a slow one; the receiving side puts the frames back in order before
// a byte of them leaves.
//
// The frames come from the far end, which may be hostile: every length is
// bounded, and a frame out of place (repeated, behind the stream, past its
// end, on a connection out of its order) ends the stream with an error. A
// lost connection ends it too: its frames are gone, and the stream is
// never passed on with bytes missing, repeated or out of order.
package stripe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Kind says what a frame carries.
type Kind uint8

const (
	// KindHello opens a connection's frames: Version, then what the
	// two ends exchange at the start (at most MaxMessage bytes).
	KindHello Kind = 1 + iota
	// KindData is a piece of a stream: Seq numbers it within the stream,
	// from 0.
	KindData
	// KindEOF ends a stream: Seq is the number of data frames it had. It
	// has no payload.
	KindEOF
	// KindExit is how the remote command ended (a status or a signal's
	// name; at most MaxMessage bytes).
	KindExit
	// KindError is a message from the far end saying why it gave up
	// (at most MaxMessage bytes of text).
	KindError
	// KindClose is a connection's last frame: its sender sends nothing
	// more on it. A connection that ends without one was lost, and the
	// frames it carried with it.
	KindClose
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindData:
		return "data"
	case KindEOF:
		return "eof"
	case KindExit:
		return "exit"
	case KindError:
		return "error"
	case KindClose:
		return "close"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

const (
	// Version is this package's frame protocol; a Hello names it.
	Version = 1
	// HeaderLen is a frame header's size: kind, stream, flags (zero),
	// payload length, sequence number.
	HeaderLen = 16
	// MaxPayload bounds a data frame's payload, and so what one frame
	// read from the far end may make this end hold.
	MaxPayload = 1 << 20
	// MaxMessage bounds the payload of the frames that are not data (a
	// hello carries the remote command).
	MaxMessage = 64 << 10
	// MaxStreams bounds a frame's stream number.
	MaxStreams = 3
)

// The streams a remote command has.
const (
	Stdin uint8 = iota
	Stdout
	Stderr
)

// Frame is one frame. Payload, for a frame read, is the reader's until the
// next read from the same buffer (ReadFrame).
type Frame struct {
	Kind    Kind
	Stream  uint8
	Seq     uint64
	Payload []byte
}

// ErrFrame is wrapped by every error that says the far end broke the
// frame protocol.
var ErrFrame = errors.New("stripe: bad frame")

func frameErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFrame, fmt.Sprintf(format, args...))
}

// PutHeader writes f's header, for a payload of n bytes, into b[:HeaderLen].
func PutHeader(b []byte, kind Kind, stream uint8, seq uint64, n int) {
	b[0] = byte(kind)
	b[1] = stream
	binary.BigEndian.PutUint16(b[2:4], 0)
	binary.BigEndian.PutUint32(b[4:8], uint32(n))
	binary.BigEndian.PutUint64(b[8:16], seq)
}

// WriteFrame writes f to w in one Write, so that a frame is one message
// on a channel where each write is one.
func WriteFrame(w io.Writer, f Frame) error {
	if err := check(f.Kind, f.Stream, len(f.Payload)); err != nil {
		return err
	}
	b := make([]byte, HeaderLen+len(f.Payload))
	PutHeader(b, f.Kind, f.Stream, f.Seq, len(f.Payload))
	copy(b[HeaderLen:], f.Payload)
	_, err := w.Write(b)
	return err
}

// check says whether a frame of kind on stream with n payload bytes is one
// the protocol allows.
func check(kind Kind, stream uint8, n int) error {
	switch kind {
	case KindData:
		if n > MaxPayload {
			return frameErr("data frame of %d bytes, more than %d", n, MaxPayload)
		}
	case KindEOF, KindClose:
		if n != 0 {
			return frameErr("%s frame with %d bytes", kind, n)
		}
	case KindHello, KindExit, KindError:
		if n > MaxMessage {
			return frameErr("%s frame of %d bytes, more than %d", kind, n, MaxMessage)
		}
	default:
		return frameErr("unknown kind %d", uint8(kind))
	}
	if stream >= MaxStreams {
		return frameErr("stream %d, past the %d there are", stream, MaxStreams)
	}
	if kind != KindData && kind != KindEOF && stream != 0 {
		return frameErr("%s frame on stream %d: only data and eof name a stream", kind, stream)
	}
	return nil
}

// ReadFrame reads one frame from r. Its payload is read into buf when buf
// is large enough, else into a new slice. A frame the protocol does not
// allow is an error wrapping ErrFrame; r ending between frames is io.EOF,
// within one io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte) (Frame, error) {
	return readFrame(r, func(n int) []byte {
		if n <= cap(buf) {
			return buf[:n]
		}
		return make([]byte, n)
	})
}

// readFrame is ReadFrame with the payload's buffer from get, which is
// asked for the payload's size once the header has been checked.
func readFrame(r io.Reader, get func(n int) []byte) (Frame, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Kind: Kind(h[0]), Stream: h[1], Seq: binary.BigEndian.Uint64(h[8:16])}
	if flags := binary.BigEndian.Uint16(h[2:4]); flags != 0 {
		return Frame{}, frameErr("flags %#x, want none", flags)
	}
	n := binary.BigEndian.Uint32(h[4:8])
	if n > MaxPayload {
		return Frame{}, frameErr("%s frame of %d bytes, more than %d", f.Kind, n, MaxPayload)
	}
	if err := check(f.Kind, f.Stream, int(n)); err != nil {
		return Frame{}, err
	}
	f.Payload = get(int(n))
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}
