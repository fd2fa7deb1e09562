package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
)

// Sparse copies (--sparse) leave a file's blocks of zeros unwritten, so
// that the target keeps the source's holes: a block that is never
// written is a hole, and reads as zeros. That holds only for bytes of
// the target that were never written before, so a sparse copy writes
// into a fresh file, or into one whose bytes from where the copy starts
// were cut off; a block that held something else would keep it.
//
// What is not written does not make the file longer: a file that ends in
// a hole is short of its size until the caller sets it (ftruncate, or an
// SFTP setstat of the size), and the copy reports where its last bytes
// written end so that the caller can check those arrived first.

// SparseBlock is the unit in which a sparse copy looks for zeros: a block
// of this many zero bytes, aligned in the file, is left unwritten. It is
// the page and block size of the common file systems, the most they can
// leave unallocated.
const SparseBlock = 4096

var zeroBlock [SparseBlock]byte

// span is a run of bytes of a buffer, from off for n.
type span struct{ off, n int }

// dataSpans returns the runs of b, the file's bytes from offset at, that
// are not whole aligned blocks of zeros. Adjacent blocks with data make
// one run, so a buffer without zeros is one write, as it would be
// without --sparse.
func dataSpans(b []byte, at int64) []span {
	var spans []span
	for i := 0; i < len(b); {
		end := min(len(b), i+SparseBlock-int((at+int64(i))%SparseBlock))
		if !bytes.Equal(b[i:end], zeroBlock[:end-i]) {
			if k := len(spans) - 1; k >= 0 && spans[k].off+spans[k].n == i {
				spans[k].n += end - i
			} else {
				spans = append(spans, span{i, end - i})
			}
		}
		i = end
	}
	return spans
}

// writeSparse writes the bytes of b other than its blocks of zeros to w
// at offset at, insisting on every byte, and returns where the last
// bytes it wrote end (0 when it wrote none). The bytes written, not the
// zeros left out, are held to m's limit; none are counted, which is the
// caller's to do once the whole of b is in place. With concurrent, for
// a w that may be written from several goroutines (the parallel
// pipeline's targets), the runs are written at once: each write to a
// remote file costs a round trip.
func writeSparse(ctx context.Context, w io.WriterAt, b []byte, at int64, m Meter, concurrent bool) (int64, error) {
	spans := dataSpans(b, at)
	if len(spans) == 0 {
		return 0, nil
	}
	data := 0
	for _, s := range spans {
		data += s.n
	}
	if err := m.Wait(ctx, data); err != nil {
		return 0, err
	}
	write := func(s span) error {
		off := at + int64(s.off)
		n, err := w.WriteAt(b[s.off:s.off+s.n], off)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if n != s.n {
			return fmt.Errorf("write: %w: %d of %d bytes at offset %d", ErrShortWrite, n, s.n, off)
		}
		return nil
	}
	last := spans[len(spans)-1]
	end := at + int64(last.off+last.n)
	if len(spans) == 1 || !concurrent {
		for _, s := range spans {
			if err := write(s); err != nil {
				return 0, err
			}
		}
		return end, nil
	}
	errs := make([]error, len(spans))
	var wg sync.WaitGroup
	for i, s := range spans {
		wg.Go(func() { errs[i] = write(s) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return end, nil
}

// CopySparse is Copy into a file written at offsets from off on, one
// write at a time, that leaves the blocks of zeros of src unwritten. dst must hold no bytes
// from off on (a fresh file, or one cut off at off), so that what is not
// written reads as zeros. It returns the bytes copied, zeros included,
// and dataEnd: where the last bytes written end, or off when none were.
// The file holds dataEnd bytes; when that is short of off+n, its tail is
// a hole whose size the caller must set.
func CopySparse(ctx context.Context, dst io.WriterAt, off int64, src io.Reader, o Options) (n, dataEnd int64, err error) {
	m := o.meter()
	at, dataEnd := off, off
	n, err = copyFront(ctx, src, o, func(b []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		end, err := writeSparse(ctx, dst, b, at, Meter{Limiter: m.Limiter}, false)
		if err != nil {
			return err
		}
		dataEnd = max(dataEnd, end)
		at += int64(len(b))
		m.Count(len(b))
		return nil
	})
	return n, dataEnd, err
}
