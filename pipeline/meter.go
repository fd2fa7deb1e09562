package pipeline

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/time/rate"
)

// Meter holds bytes to a run's bandwidth limit and counts them for its
// progress. Every way a run moves bytes (the pipeline, its parallel
// streams, small files in one batch, tar and scp streams) goes through
// one, sharing the Limiter, so that -l limits the run as a whole. The zero
// value neither limits nor counts.
type Meter struct {
	// Limiter caps the bytes per second; nil for no limit.
	Limiter *rate.Limiter
	// Progress, when not nil, is told of bytes once they have passed.
	Progress func(n int)
}

// Wait blocks until n bytes may pass under the limit, or returns an error
// when ctx is done first or its deadline comes before they may. n may be
// larger than the limiter's burst: the wait is taken in steps of at most
// that, which is all rate.Limiter grants at once.
func (m Meter) Wait(ctx context.Context, n int) error {
	l := m.Limiter
	if l == nil {
		return nil
	}
	for n > 0 {
		step := min(n, max(l.Burst(), 1))
		if err := l.WaitN(ctx, step); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("bandwidth limit: %w", err)
		}
		n -= step
	}
	return nil
}

// Count tells Progress of n bytes that have passed.
func (m Meter) Count(n int) {
	if m.Progress != nil && n > 0 {
		m.Progress(n)
	}
}

// Writer returns w with every write held to the limit before it is made,
// insisting on every byte (a short count is ErrShortWrite), and counted
// once written.
func (m Meter) Writer(ctx context.Context, w io.Writer) io.Writer {
	return &meteredWriter{ctx: ctx, w: w, m: m}
}

type meteredWriter struct {
	ctx context.Context
	w   io.Writer
	m   Meter
}

func (mw *meteredWriter) Write(p []byte) (int, error) {
	if err := mw.ctx.Err(); err != nil {
		return 0, err
	}
	if err := mw.m.Wait(mw.ctx, len(p)); err != nil {
		return 0, err
	}
	n, err := mw.w.Write(p)
	if err != nil {
		return n, fmt.Errorf("write: %w", err)
	}
	if n != len(p) {
		return n, fmt.Errorf("write: %w: %d of %d bytes", ErrShortWrite, n, len(p))
	}
	mw.m.Count(n)
	return n, nil
}

// Reader returns r with its reads held to the limit and counted. A read
// asks r for at most the limiter's burst, so that a slow limit stays
// smooth rather than bursty.
func (m Meter) Reader(ctx context.Context, r io.Reader) io.Reader {
	return &meteredReader{ctx: ctx, r: r, m: m}
}

type meteredReader struct {
	ctx context.Context
	r   io.Reader
	m   Meter
}

func (mr *meteredReader) Read(p []byte) (int, error) {
	if l := mr.m.Limiter; l != nil {
		p = p[:min(len(p), max(l.Burst(), 1))]
	}
	n, err := mr.r.Read(p)
	if n > 0 {
		if werr := mr.m.Wait(mr.ctx, n); werr != nil && err == nil {
			err = werr
		}
		mr.m.Count(n)
	}
	return n, err
}
