package pipeline

import (
	"context"
	"io"
)

// ReaderAtCloser and WriterAtCloser are a file opened on a stream of its
// own, for one lane of a parallel copy.
type ReaderAtCloser interface {
	io.ReaderAt
	io.Closer
}

type WriterAtCloser interface {
	io.WriterAt
	io.Closer
}

// OpenReaderAt and OpenWriterAt open one end's file again on a stream of
// its own, spread over up to conns connections.
type (
	OpenReaderAt func(ctx context.Context, conns int) (ReaderAtCloser, error)
	OpenWriterAt func(ctx context.Context, conns int) (WriterAtCloser, error)
)

// Lanes returns an OpenStream whose lanes each open the source with src
// and then the target with dst. A lane whose target cannot be opened
// closes its source at once; closing a lane closes both, and reports the
// target's failure first, since that is where a byte may be missing.
func Lanes(src OpenReaderAt, dst OpenWriterAt) OpenStream {
	return func(ctx context.Context, conns int) (*Stream, error) {
		in, err := src(ctx, conns)
		if err != nil {
			return nil, err
		}
		out, err := dst(ctx, conns)
		if err != nil {
			_ = in.Close()
			return nil, err
		}
		// broken is not told to the ends: each knows from its own
		// failures whether its stream may be used again.
		st := &Stream{Src: in, Dst: out, Conn: connOf(in, out), Close: func(bool) error {
			ierr := in.Close()
			if err := out.Close(); err != nil {
				return err
			}
			return ierr
		}}
		if a, ok := in.(interface{ Abort() }); ok {
			st.Abort = a.Abort
		}
		return st, nil
	}
}

// connOf is the connection number of the first of ends that tells one
// (a remote end's file), -1 when none does.
func connOf(ends ...any) int {
	for _, e := range ends {
		if c, ok := e.(interface{ Conn() int }); ok {
			return c.Conn()
		}
	}
	return -1
}
