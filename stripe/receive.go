package stripe

import (
	"errors"
	"fmt"
	"io"
)

// ErrConnLost is wrapped by Receive's error when a connection ends without
// its Close frame: the frames it carried are gone.
var ErrConnLost = errors.New("stripe: connection lost")

// Receive reads one connection's frames until its Close frame, handing
// each data and EOF frame to the Merger of its stream (nil: a stream this
// end does not receive, an error) and every other frame to control, which
// may keep the payload. A frame out of the order its connection must keep
// (a stream's frames on one connection come in the stream's order) or
// any other breach of the protocol is an error wrapping ErrFrame, and the
// connection ending before its Close an error wrapping ErrConnLost; either
// fails every stream the connection could carry, since its frames may be
// among those missing.
func Receive(r io.Reader, streams [MaxStreams]*Merger, control func(Frame) error) error {
	err := receive(r, streams, control)
	if err != nil {
		for _, m := range streams {
			if m != nil {
				m.Fail(err)
			}
		}
	}
	return err
}

func receive(r io.Reader, streams [MaxStreams]*Merger, control func(Frame) error) error {
	var last [MaxStreams]uint64
	var seen [MaxStreams]bool
	var ended [MaxStreams]bool
	for {
		f, err := readFrame(r, frameBuf)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return fmt.Errorf("%w: it ended without its close frame", ErrConnLost)
		case err != nil:
			return err
		}
		switch f.Kind {
		case KindClose:
			putFrameBuf(f.Payload)
			return nil
		case KindEOF:
			putFrameBuf(f.Payload)
		case KindData:
			// Its Merger keeps the payload, and gives the buffer back
			// once it is read.
		default:
			if control == nil {
				return frameErr("unexpected %s frame", f.Kind)
			}
			if err := control(f); err != nil {
				return err
			}
			continue
		}
		m := streams[f.Stream]
		if m == nil {
			return frameErr("%s frame of stream %d, which this end does not receive", f.Kind, f.Stream)
		}
		if ended[f.Stream] {
			return frameErr("%s frame of stream %d after its end on this connection", f.Kind, f.Stream)
		}
		if f.Kind == KindEOF {
			if seen[f.Stream] && f.Seq <= last[f.Stream] {
				return frameErr("stream %d ended at %d on a connection that carried its frame %d", f.Stream, f.Seq, last[f.Stream])
			}
			ended[f.Stream] = true
			if err := m.End(f.Seq); err != nil {
				return err
			}
			continue
		}
		if seen[f.Stream] && f.Seq <= last[f.Stream] {
			return frameErr("data frame %d of stream %d after its frame %d on one connection", f.Seq, f.Stream, last[f.Stream])
		}
		seen[f.Stream], last[f.Stream] = true, f.Seq
		if err := m.Put(f.Seq, f.Payload); err != nil {
			return err
		}
	}
}

// Payload buffers are kept from one frame to the next, in two sizes: a
// stream moves a gigabyte in frames, and a buffer each would be garbage
// the collector pays for, and memory it lets grow to twice what the
// budget holds. A frame gets the smaller size that holds it: a Merger's
// budget counts the buffers it holds (a peer's one-byte frames must not
// hold a whole frame's buffer each uncounted), so a source that writes
// 32 KiB at a time (rsync) would otherwise get an eighth of the budget.
//
// The lists are their own rather than sync.Pools, which the collector
// empties: under a memory limit near the budget (the helper's), every
// collection would drop the buffers, the next frames allocate them
// again, and the collector run the more for it. Each keeps at most
// maxFree buffers: more than a 24 MiB budget's worth of whole frames.
var (
	bigFrames   = make(chan []byte, maxFree)
	smallFrames = make(chan []byte, maxFree)
)

const (
	maxFree    = 128
	smallFrame = 64 << 10
)

// frameBuf is a buffer of n bytes: a kept one of the smaller size that
// holds n, or a new one of that size; past DefaultFrame, one of n bytes.
func frameBuf(n int) []byte {
	list, size := smallFrames, smallFrame
	switch {
	case n > DefaultFrame:
		return make([]byte, n)
	case n > smallFrame:
		list, size = bigFrames, DefaultFrame
	}
	select {
	case b := <-list:
		return b[:n]
	default:
		return make([]byte, n, size)
	}
}

// putFrameBuf gives back a buffer frameBuf gave, once its bytes are used;
// any other slice, or one past the list's room, is left to the collector.
func putFrameBuf(b []byte) {
	var list chan []byte
	switch cap(b) {
	case DefaultFrame:
		list = bigFrames
	case smallFrame:
		list = smallFrames
	default:
		return
	}
	select {
	case list <- b[:0]:
	default:
	}
}
