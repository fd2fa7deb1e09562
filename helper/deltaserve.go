//go:build unix

package helper

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/hpncp/hpncp/delta"
)

// ServeDelta is the delta service on in and out, the stdin and stdout of
// an exec channel: requests one after another until in ends. A request
// it cannot do is answered with why, and the service goes on; a stream
// that is not the protocol's ends it.
func ServeDelta(ctx context.Context, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 256<<10)
	w := bufio.NewWriterSize(out, 256<<10)
	if _, err := w.WriteString(deltaHello); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for {
		op, err := r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var st delta.Stats
		var rerr error
		switch op {
		case opSign:
			st, rerr, err = serveSign(ctx, r, w)
		case opPatch:
			st, rerr, err = servePatch(ctx, r, w)
		case opDiff:
			st, rerr, err = serveDiff(ctx, r, w)
		default:
			return fmt.Errorf("%w: request %#x", ErrDeltaProtocol, op)
		}
		if err != nil {
			return err
		}
		if rerr != nil {
			msg := rerr.Error()
			if len(msg) > 4000 {
				msg = msg[:4000]
			}
			w.WriteByte(statusFail)
			w.Write(appendString(nil, msg))
		} else {
			w.WriteByte(statusOK)
			for _, v := range []int64{st.Literal, st.Matched, int64(st.Ranges)} {
				w.Write(binary.AppendUvarint(nil, uint64(v)))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// openRegular opens path for reading: a regular file (not a link to one)
// of size bytes.
func openRegular(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s: not a regular file", path)
	case fi.Size() != size:
		err = fmt.Errorf("%s: %d bytes, not the %d listed: it changed", path, fi.Size(), size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// serveSign answers a signature request. rerr is why the request failed,
// err why the service must end.
func serveSign(ctx context.Context, r *bufio.Reader, w *bufio.Writer) (st delta.Stats, rerr, err error) {
	path, err := readString(r, maxPathLen)
	if err != nil {
		return st, nil, err
	}
	size, err := readUint(r, delta.MaxSize)
	if err != nil {
		return st, nil, err
	}
	out := chunkWriter{w: w}
	defer func() {
		if err == nil {
			err = out.end()
		}
	}()
	f, rerr := openRegular(path, size)
	if rerr != nil {
		return st, rerr, nil
	}
	defer f.Close()
	sig, rerr := delta.Sign(ctx, f, size, 0)
	if rerr != nil {
		return st, rerr, nil
	}
	return st, nil, delta.WriteSignature(out, sig)
}

// servePatch answers a patch request: it rebuilds the new file in the
// client's temporary file from the basis and the delta.
func servePatch(ctx context.Context, r *bufio.Reader, w *bufio.Writer) (st delta.Stats, rerr, err error) {
	basis, err := readString(r, maxPathLen)
	if err != nil {
		return st, nil, err
	}
	basisSize, err := readUint(r, delta.MaxSize)
	if err != nil {
		return st, nil, err
	}
	blockLen, err := readUint(r, delta.MaxBlock)
	if err != nil {
		return st, nil, err
	}
	tmp, err := readString(r, maxPathLen)
	if err != nil {
		return st, nil, err
	}
	size, err := readUint(r, delta.MaxSize)
	if err != nil {
		return st, nil, err
	}
	in := &chunkReader{r: r}
	defer func() {
		// Whatever became of the request, the delta's stream is read to
		// its end, and the reply's (empty) stream ended.
		if derr := in.drain(); err == nil {
			err = derr
		}
		if err == nil {
			err = chunkWriter{w: w}.end()
		}
	}()
	f, rerr := openRegular(basis, basisSize)
	if rerr != nil {
		return st, rerr, nil
	}
	defer f.Close()
	// The temporary file is the client's, made empty and owner-only a
	// moment ago: one that is a link, or not empty, is not written.
	t, rerr := os.OpenFile(tmp, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if rerr != nil {
		return st, rerr, nil
	}
	defer t.Close()
	if fi, err := t.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		return st, fmt.Errorf("%s: not the empty temporary file the client made", tmp), nil
	}
	_, st, rerr = delta.Apply(ctx, in, delta.Basis{R: f, Size: basisSize, BlockLen: int(blockLen)}, t, size)
	if rerr == nil {
		rerr = t.Close()
	}
	return st, rerr, nil
}

// serveDiff answers a diff request: the delta of a file here against the
// client's signature.
func serveDiff(ctx context.Context, r *bufio.Reader, w *bufio.Writer) (st delta.Stats, rerr, err error) {
	path, err := readString(r, maxPathLen)
	if err != nil {
		return st, nil, err
	}
	size, err := readUint(r, delta.MaxSize)
	if err != nil {
		return st, nil, err
	}
	in := &chunkReader{r: r}
	sig, rerr := delta.ReadSignature(in, -1)
	if derr := in.drain(); derr != nil {
		return st, nil, derr
	}
	if rerr != nil {
		if errors.Is(rerr, io.ErrUnexpectedEOF) {
			return st, nil, rerr
		}
		return st, rerr, chunkWriter{w: w}.end()
	}
	out := chunkWriter{w: w}
	f, rerr := openRegular(path, size)
	if rerr != nil {
		return st, rerr, out.end()
	}
	defer f.Close()
	st, rerr = delta.Diff(ctx, sig, f, size, out, delta.DiffOptions{})
	return st, rerr, out.end()
}
