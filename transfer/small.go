package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
)

// smallGetter and smallPutter are ends that move a small file whole in
// one batch of requests (protocol.SFTP).
type smallGetter interface {
	GetSmall(ctx context.Context, name string, size int64) ([]byte, fs.FileInfo, error)
}

type smallPutter interface {
	PutSmall(ctx context.Context, tmp, name string, data []byte, a protocol.PutAttrs) error
}

// modeMkdirer is an end that creates a directory with a mode in one
// request (protocol.SFTP).
type modeMkdirer interface {
	MkdirMode(ctx context.Context, name string, perm fs.FileMode) error
}

// smallPreparer is an end that can open what PutSmall and GetSmall use
// before the first file needs it.
type smallPreparer interface {
	PrepareSmall(ctx context.Context)
}

// mkdir creates the directory dst for a source directory of permissions
// perm, and reports whether it has its mode already: like scp, the
// source's permissions as the receiving end's umask allows, writable for
// the copy (with -p the mode is set once the copy is done).
func (c *copier) mkdir(ctx context.Context, dst Endpoint, perm fs.FileMode) (bool, error) {
	if m, ok := dst.FS.(modeMkdirer); ok && !c.opts.Preserve {
		err := m.MkdirMode(ctx, dst.Path, perm|0o700)
		if !errors.Is(err, protocol.ErrNoBatch) {
			return err == nil, err
		}
	}
	return false, dst.FS.Mkdir(dst.Path)
}

// prepare lets the ends that move small files in batches open what they
// need while the walk begins.
func (c *copier) prepare(ctx context.Context, ends ...FS) {
	if !c.opts.Recursive {
		return
	}
	for _, e := range ends {
		if p, ok := e.(smallPreparer); ok {
			p.PrepareSmall(ctx)
		}
	}
}

// openSource opens src, of info si, to be read front to back. A small
// file of an end that can fetch it in one batch arrives whole.
func (c *copier) openSource(ctx context.Context, src Endpoint, si fs.FileInfo) (io.ReadCloser, error) {
	if g, ok := src.FS.(smallGetter); ok && si.Size() <= protocol.SmallMax {
		data, _, err := g.GetSmall(ctx, src.Path, si.Size())
		switch {
		case err == nil:
			return io.NopCloser(bytes.NewReader(data)), nil
		case protocol.Lost(err) && ctx.Err() == nil:
			// Its session was lost: the ordinary way reads it again, on
			// a connection dialed again where none is left.
		case !errors.Is(err, protocol.ErrNoBatch):
			return nil, err
		}
	}
	return src.FS.Open(src.Path)
}

// budget is a count of bytes that jobs take and give back, in tokens of
// budgetToken bytes.
type budget struct {
	turn   slots.Slots // one taker at a time, so no two hold part of what they need
	tokens slots.Slots
}

const budgetToken = 32 << 10

func newBudget(bytes int) *budget {
	return &budget{turn: slots.New(1), tokens: slots.New(bytes / budgetToken)}
}

// take waits until n bytes are free and takes them; the function it
// returns gives them back.
func (b *budget) take(ctx context.Context, n int64) (func(), error) {
	k := int(max(1, (n+budgetToken-1)/budgetToken))
	if err := b.turn.Acquire(ctx); err != nil {
		return nil, err
	}
	defer b.turn.Release()
	for got := 0; got < k; got++ {
		if err := b.tokens.Acquire(ctx); err != nil {
			for range got {
				b.tokens.Release()
			}
			return nil, err
		}
	}
	return func() {
		for range k {
			b.tokens.Release()
		}
	}, nil
}

// putSmall copies src, a small file, to a remote dst in one batch of
// requests: the bytes into a temporary file, its mode and times, and the
// rename once the server holds every byte. It reports false when dst's
// end cannot take the file that way.
func (c *copier) putSmall(ctx context.Context, src, dst Endpoint, si, existing fs.FileInfo) (bool, int64, error) {
	p, ok := dst.FS.(smallPutter)
	if !ok || si.Size() > protocol.SmallMax || c.opts.Verify || c.inPlace(existing) {
		return false, 0, nil
	}
	op := "copy " + src.String() + " to"
	give, err := c.memory.take(ctx, si.Size())
	if err != nil {
		return true, 0, err
	}
	defer give()
	r, err := c.openSource(ctx, src, si)
	if err != nil {
		if ctx.Err() != nil {
			return true, 0, ctx.Err()
		}
		return true, 0, &Error{Op: "read", Path: src.String(), Err: err}
	}
	// One byte more than the file should hold: a file grown since it was
	// listed shows.
	data := make([]byte, si.Size()+1)
	n, err := io.ReadFull(r, data)
	_ = r.Close()
	data = data[:n]
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return true, 0, &Error{Op: "read", Path: src.String(), Err: err}
	}
	if int64(len(data)) != si.Size() {
		return true, 0, &Error{Op: "read", Path: src.String(),
			Err: fmt.Errorf("file changed size during the copy: expected %d bytes, read %d", si.Size(), len(data))}
	}
	if err := (pipeline.Meter{Limiter: c.opts.Limiter}).Wait(ctx, len(data)); err != nil {
		if ctx.Err() != nil {
			return true, 0, ctx.Err()
		}
		return true, 0, &Error{Op: op, Path: dst.String(), Err: err}
	}
	// The batch finishes the file as tempFile.finish would: the temporary
	// file is owner-only until the setstat after its bytes gives it the
	// mode and times finalAttrs decides. They are asked for once the
	// temporary file is open, so that the umask probe a new file's mode
	// waits on (learnUmask) runs beside the open.
	a := protocol.PutAttrs{Perm: 0o600, Final: func() protocol.PutAttrs {
		return c.finalAttrs(attrsOf(si), existing, func() fs.FileMode {
			return c.newFileMode(ctx, dst, si.Mode().Perm())
		}).put()
	}}
	tmp := dst.FS.Join(dst.FS.Dir(dst.Path), TempName(dst.FS.Base(dst.Path)))
	if existing == nil && c.direct[dst.Path] {
		// Nobody sees the directory until it is renamed into place: the
		// file is made under its own name, a round trip sooner.
		tmp = dst.Path
	} else if tf, ok := dst.FS.(tempFinder); ok {
		if t, ok := tf.TempFor(dst.Path); ok {
			tmp = t // created with the end's start, a round trip sooner
		}
	}
	err = p.PutSmall(ctx, tmp, dst.Path, data, a)
	switch {
	case errors.Is(err, protocol.ErrNoBatch):
		return false, 0, nil
	case err != nil && ctx.Err() != nil:
		return true, 0, ctx.Err()
	case errors.Is(err, protocol.ErrSizeMismatch):
		return true, 0, &Error{Op: op, Path: dst.String(), Err: fmt.Errorf("%w: %w", pipeline.ErrShortWrite, err)}
	case err != nil:
		return true, 0, &Error{Op: op, Path: dst.String(), Err: err, Hint: hintFor(err)}
	}
	// The bytes go in one batch: they are all sent or none is.
	if pr := fileProgress(c.opts.Progress); pr != nil {
		pr.StartFile(src.FS.Base(src.Path), si.Size())
		pr.Add(len(data))
		pr.EndFile()
	}
	return true, int64(len(data)), nil
}

// tempFinder is an end that may have created a file's temporary file
// ahead of the copy (protocol.SFTP, Options.PreCreate).
type tempFinder interface {
	TempFor(final string) (string, bool)
}

// bufferFor returns the pipeline buffer size for a file of size bytes:
// want (the default when 0), or less for a smaller file. Thousands of
// small files each given two buffers of a megabyte spent more time
// clearing memory than copying.
func bufferFor(want int, size int64) int {
	if want <= 0 {
		want = pipeline.DefaultBufferSize
	}
	// One byte more than the file: the read that finds the end needs no
	// second buffer.
	return int(min(int64(want), max(size+1, 4<<10)))
}
