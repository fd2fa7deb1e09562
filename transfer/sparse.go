package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/hpncp/hpncp/pipeline"
)

// Sparse copies (--sparse): the sending side reads only a local source's
// data, asking the file system where its holes are (extentAt, with
// SEEK_DATA and SEEK_HOLE where there are), and the receiving side leaves
// every block of zeros unwritten (pipeline.CopySparse, the parallel
// pipeline's Sparse), which keeps holes it cannot see at an SFTP source
// too. What is never written reads as zeros only in a file that never
// held anything there: the temporary file is fresh, and a resumed one is
// cut back to its watermark (checkPartial) first. A file that ends in a
// hole is short of its size until finishSparse sets it.

// sizer is an end that can set a file's size (os.Truncate, an SFTP
// setstat of the size).
type sizer interface {
	Truncate(name string, size int64) error
}

func (l Local) Truncate(name string, size int64) error {
	if l.root != nil {
		return l.root.truncate(name, size)
	}
	return os.Truncate(name, size)
}

// finishSparse gives tmp, the temporary file of a sparse copy of size
// bytes whose written bytes end at dataEnd, its size. The file must hold
// dataEnd bytes first: a short one lost bytes that were written, which
// setting the size would turn into zeros.
func finishSparse(fsys FS, tmp string, dataEnd, size int64) error {
	if dataEnd >= size {
		return nil
	}
	fi, err := fsys.Stat(tmp)
	if err != nil {
		return err
	}
	if fi.Size() != dataEnd {
		return fmt.Errorf("%w: %d bytes arrived of %d written", pipeline.ErrShortWrite, fi.Size(), dataEnd)
	}
	return setSize(fsys, tmp, size)
}

// setSize sets the size of name on fsys.
func setSize(fsys FS, name string, size int64) error {
	s, ok := fsys.(sizer)
	if !ok {
		return errors.New("the end cannot set a file's size, which a sparse copy needs")
	}
	if err := s.Truncate(name, size); err != nil {
		return fmt.Errorf("set the size of %s to %d: %w", name, size, err)
	}
	return nil
}

// copyStream copies in to out, the temporary file from offset from on,
// front to back, and returns the bytes copied and where the file's
// written bytes end. With sparse, blocks of zeros are left unwritten,
// where out can be written at offsets.
func copyStream(ctx context.Context, out io.Writer, in io.Reader, from int64, sparse bool, po pipeline.Options) (n, dataEnd int64, err error) {
	if wa, ok := out.(io.WriterAt); ok && sparse {
		return pipeline.CopySparse(ctx, wa, from, in, po)
	}
	n, err = pipeline.Copy(ctx, out, in, po)
	return n, from + n, err
}

// holeReader reads a local file front to back from an offset, as
// io.Reader, without reading its holes: their zeros are made here.
type holeReader struct {
	f    *os.File
	off  int64
	data bool  // off is in data, not in a hole
	end  int64 // where the data or hole off is in ends
}

// openHoleReader opens the local file name to be read from offset from
// on, its holes not read.
func openHoleReader(name string, from int64) (io.ReadCloser, error) {
	f, err := openRegular(name, false)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&holeReader{f: f, off: from, end: from}, f}, nil
}

func (r *holeReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.off >= r.end {
		r.data, r.end = extentAt(r.f, r.off)
		if r.end <= r.off {
			return 0, io.EOF
		}
	}
	p = p[:min(int64(len(p)), r.end-r.off)]
	if !r.data {
		clear(p)
		r.off += int64(len(p))
		return len(p), nil
	}
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		// The file ended early: the next read says so.
		err = nil
	}
	return n, err
}

// holeFinder tells the parallel pipeline which chunks of a local file are
// holes.
type holeFinder struct{ f *os.File }

// openHoles opens the local file name to look for its holes; nil when
// it cannot be opened, which leaves every chunk to be read.
func openHoles(name string) *holeFinder {
	f, err := openRegular(name, false)
	if err != nil {
		return nil
	}
	return &holeFinder{f}
}

// hole reports whether the n bytes at off are all in one hole. A file
// that ends before them has none there: their read will find it short.
func (h *holeFinder) hole(off int64, n int) bool {
	data, end := extentAt(h.f, off)
	return !data && end >= off+int64(n)
}

func (h *holeFinder) close() {
	if h != nil {
		_ = h.f.Close()
	}
}

// everything is the extent of a file whose holes are not known: data to
// the end.
const everything = math.MaxInt64

// hasHoles reports whether fi, a local file's, takes less disk than its
// size: whether it has holes to keep.
func hasHoles(fi fs.FileInfo) bool {
	blocks, ok := allocated(fi)
	return ok && blocks < fi.Size()
}
