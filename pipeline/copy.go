// Package pipeline moves bytes fast and in bounded memory: a stream front
// to back (Copy), reading ahead into a few large buffers while the
// previous one is written, or a file's chunks over many lanes at once
// (Parallel, Lanes). It checks every byte count, and holds the bytes to
// a shared bandwidth limit and counts them for progress (Meter).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/time/rate"
)

// DefaultBufferSize is large enough for an SFTP end to split one Write
// into many pipelined requests (protocol's own data path, not pkg/sftp),
// which is what keeps a channel's window full.
const DefaultBufferSize = 1 << 20

// Options tune one copy. The zero value is usable.
type Options struct {
	// BufferSize is the size of each buffer; DefaultBufferSize when zero.
	BufferSize int
	// Buffers is how many buffers may be in flight between the reader and
	// the writer (2 when zero): one being filled while one is drained.
	Buffers int
	// Limiter, when not nil, caps the bytes per second written. It is shared
	// by every copy of a run so that -l limits the run as a whole.
	Limiter *rate.Limiter
	// Progress, when not nil, is called after each write with its size.
	Progress func(n int)
}

// ErrShortWrite reports a writer that accepted fewer bytes than it was given
// without saying why: never trusted, since a silent truncation is exactly
// what must not reach a final name.
var ErrShortWrite = errors.New("short write")

// Copy copies src to dst until EOF on src, an error, or ctx is done, and
// returns the number of bytes written. Reading and writing overlap: the
// reader fills the next buffer while the writer drains the previous one.
func Copy(ctx context.Context, dst io.Writer, src io.Reader, o Options) (int64, error) {
	w := o.meter().Writer(ctx, dst)
	return copyFront(ctx, src, o, func(b []byte) error {
		_, err := w.Write(b)
		return err
	})
}

// copyFront reads src front to back into buffers and hands each to
// write, which must have written all of it or fail, while the next is
// read. It returns the bytes write took.
func copyFront(ctx context.Context, src io.Reader, o Options, write func([]byte) error) (int64, error) {
	size := o.BufferSize
	if size <= 0 {
		size = DefaultBufferSize
	}
	nbuf := o.Buffers
	if nbuf <= 0 {
		nbuf = 2
	}
	if o.Limiter != nil && o.Limiter.Burst() < size {
		// WaitN refuses requests larger than the burst; smaller buffers also
		// keep a slow limit smooth instead of bursty.
		size = max(o.Limiter.Burst(), 1)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, size)
	}
	type filled struct {
		buf []byte
		n   int
	}
	full := make(chan filled, nbuf)
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(full)
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			n, err := io.ReadFull(src, buf)
			if n > 0 {
				select {
				case full <- filled{buf, n}:
				case <-ctx.Done():
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return
			}
			if err != nil {
				readErr = fmt.Errorf("read: %w", err)
				return
			}
		}
	}()

	var written int64
	var writeErr error
	for f := range full {
		if writeErr == nil {
			writeErr = write(f.buf[:f.n])
			if writeErr == nil {
				written += int64(f.n)
			} else {
				cancel()
			}
		}
		free <- f.buf
	}
	wg.Wait()
	switch {
	case writeErr != nil:
		return written, writeErr
	case readErr != nil:
		return written, readErr
	}
	return written, ctx.Err()
}

// meter is the Meter of the copy's limit and progress.
func (o Options) meter() Meter { return Meter{Limiter: o.Limiter, Progress: o.Progress} }

// NewLimiter returns a limiter for bytesPerSecond, or nil for no limit.
// The burst is a quarter second of traffic (at least 32 KiB) so that the
// limit holds over short spans as well as on average.
func NewLimiter(bytesPerSecond int64) *rate.Limiter {
	if bytesPerSecond <= 0 {
		return nil
	}
	burst := max(bytesPerSecond/4, 32<<10)
	burst = min(burst, DefaultBufferSize)
	return rate.NewLimiter(rate.Limit(bytesPerSecond), int(burst))
}
