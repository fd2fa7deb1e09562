package transfer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
)

// Download streams: an archive written by the server's tar -c and
// checked, entry by entry, here.

// downloadStream asks a tar -c in root's source for the files s is
// handed, and writes them below root's target, each to a temporary file
// that is renamed once tar has exited 0. On failure every temporary file
// is removed. n numbers the stream (protocol.TarOptions.Stream).
func (run *tarRun) downloadStream(ctx context.Context, s *feedStream, n int) (err error) {
	c := run.c
	root, po := run.root, run.po
	po.Stream = n
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		if err != nil {
			run.removeTemps(s.files())
		}
	}()
	// The names go to tar as the stream takes them in: a plan holds
	// every file of the tree at once, and the other streams take what
	// this one does not.
	names := s.names(sctx)
	rc, err := run.end.TarCreate(sctx, root.src().Path, names, po)
	if err != nil {
		return err
	}
	var r io.Reader = rc
	switch po.Compress {
	case "zstd":
		zr, zerr := newZstdReader(rc)
		if zerr != nil {
			cancel()
			_ = rc.Close()
			return zerr
		}
		defer zr.Close()
		r = zr
	case "gzip":
		gr, gerr := gzip.NewReader(rc)
		if gerr != nil {
			cancel()
			_ = rc.Close()
			return fmt.Errorf("read the tar stream: %w", gerr)
		}
		r = gr
	}
	want := &tarWant{more: s.files, passed: s.arrived}
	if po.Compress != "" {
		want.bound = &expansion{r: r, left: expansionSlack}
		r = want.bound
	}
	start := time.Now()
	rerr := receiveWant(ctx, r, want, run.m)
	if rerr != nil {
		cancel()
	}
	cerr := rc.Close()
	bound := decompressionBound(rerr)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case bound != nil:
		// The server's tar was stopped for it: what it says of that
		// says nothing.
		return &Error{Op: fmt.Sprintf("decompress tar stream %d of", n), Path: root.src().String(),
			Err: bound, Hint: "copy without -C: a stream that is not compressed needs no such bound"}
	case rerr != nil:
		// tar's own message, when it failed, says more than a cut stream.
		if cerr != nil {
			return fmt.Errorf("%w (%v)", cerr, rerr)
		}
		return rerr
	}
	files := s.files()
	if cerr != nil && !tarSkipped(cerr, files) {
		return cerr
	}
	received := time.Now()
	defer func() {
		c.logf("tar stream of %d files: received in %s, renamed in %s", len(files),
			received.Sub(start).Round(time.Millisecond), time.Since(received).Round(time.Millisecond))
	}()
	slots.ForEach(len(files), metaWorkers, func(i int) {
		f := files[i]
		if f.err != nil {
			return
		}
		if !f.done {
			f.err = &Error{Op: "copy " + f.src().String() + " to", Path: f.dst().String(),
				Err: errors.New("missing from the tar stream")}
			return
		}
		// receiveTar checked the size; the mode and times are the
		// engine's, with the archive's modification time.
		dst := f.dst()
		attrs := func() fileAttrs {
			src := attrsOf(f.info)
			src.mtime = time.Unix(f.mtime, int64(f.mnsec))
			return finalAttrs(c.opts.Preserve, src, f.existing, func() fs.FileMode {
				return c.newFileMode(ctx, dst, f.info.Mode().Perm())
			})
		}
		t := tempFile{dst: dst, tmp: f.tmpBeside(dst), op: "copy " + f.src().String() + " to"}
		if err := t.finish(ctx, -1, nil, attrs, nil); err != nil {
			f.err = err
			_ = t.dst.FS.Remove(t.tmp)
		}
	})
	return nil
}

// zstdMaxWindow bounds the window a zstd frame of a download may ask
// for: the decoder keeps that much of the stream's past in memory, and
// a frame may claim up to 3.75 TB (klauspost/compress accepts 512 MiB by
// default, about 545 MB of RSS per stream, and a copy runs many
// streams). The server's zstd compresses with a window of 8 MiB or less
// at every level up to 19 (2 MiB at its default level 3), and hpncp's
// own encoder (zstdWriter) with 4 MiB: 16 MiB leaves room for a newer
// zstd's tables and refuses only --ultra levels and --long, which tar
// does not ask for.
const zstdMaxWindow = 16 << 20

// newZstdReader decodes a download's zstd stream in one goroutine and
// within zstdMaxWindow.
func newZstdReader(r io.Reader) (*zstd.Decoder, error) {
	// MaxMemory bounds only the window of a streaming decode, not its
	// length: a stream of any length decodes.
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(zstdMaxWindow))
}

// A compressed stream's bytes cost the server little to send and the
// receiver much to decompress: a few kilobytes of gzip or zstd expand to
// gigabytes. What tar may send is bounded by what the listing promised:
// the files the stream took, each its listed size rounded to tar's
// blocks plus expansionPerEntry for its headers (GNU tar's long names
// and PAX records), and expansionSlack once, for the first header and
// for files that grew after they were listed (they fail alone, but
// their bytes are read through).
const (
	expansionSlack    = 64 << 20
	expansionPerEntry = 16 << 10
)

// errExpanded ends a compressed stream that held more than its bound.
var errExpanded = errors.New("the stream expands to more than the listing promised")

// expansion is a compressed stream's archive, bounded as the constants
// above say: left grows as each file is taken and shrinks as bytes are
// read.
type expansion struct {
	r    io.Reader
	left int64
}

func (e *expansion) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, errExpanded
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	return n, err
}

// promise allows the bytes a file of size listed may take in the
// archive.
func (e *expansion) promise(listed int64) {
	e.left += (listed+511)/512*512 + expansionPerEntry
}

// decompressionBound returns, when err ended a stream for one of the
// bounds on decompression, what to tell the user; nil otherwise.
func decompressionBound(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return fmt.Errorf("a zstd frame asks for a window larger than hpncp's bound of %d MiB", zstdMaxWindow>>20)
	case errors.Is(err, errExpanded):
		return errExpanded
	}
	return nil
}

// tarSkipped reports whether a tar -c that failed sent every file it did
// not complain of whole, and gives each file it complained of its
// message. GNU tar exits 2 when it cannot open or stat a file, leaves it
// out of the archive and goes on with the others; those, checked against
// their sizes, are complete. Every complaint must name a file missing
// from the archive: any other (a file that shrank is padded with zeros)
// fails the whole stream, as does a message tar cut short or one not
// told apart.
func tarSkipped(err error, files []*tarFile) bool {
	var te *protocol.TarExitError
	if !errors.As(err, &te) || te.Status != 2 || te.Truncated {
		return false
	}
	missing := map[string]*tarFile{}
	for _, f := range files {
		if !f.seen {
			missing["./"+f.rel] = f // as TarCreate names them
		}
	}
	why := map[*tarFile]string{}
	for line := range strings.Lines(te.Stderr) {
		// "tar: ./name: Cannot open: Permission denied"; tar names itself
		// as it was run.
		prog, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		if !ok || !strings.HasSuffix(prog, "tar") {
			return false
		}
		if rest == "Exiting with failure status due to previous errors" {
			continue
		}
		var f *tarFile
		for i := 0; f == nil; i++ {
			j := strings.Index(rest[i:], ": ")
			if j < 0 {
				return false
			}
			i += j
			if f = missing[rest[:i]]; f != nil {
				why[f] = rest[i+2:]
			}
		}
	}
	if len(why) == 0 {
		return false
	}
	for f, msg := range why {
		var cause error = errors.New(msg)
		if strings.HasSuffix(msg, ": Permission denied") {
			cause = fs.ErrPermission // as SFTP mode says it
		}
		f.err = &Error{Op: "read", Path: f.src().String(), Err: cause}
	}
	return true
}

// receiveTar reads an archive the server sent for files, asked for in
// that order, and writes each entry to a fresh temporary file beside its
// target. Every entry must be a regular file the copy asked for, once,
// in the order asked, under a clean relative name: anything else (links,
// devices, names leading out of the tree, unasked names) ends the stream
// with an error, since a server sending it cannot be trusted with the
// rest. A file whose size differs from the listing's fails alone. Its
// bytes go through m, which ends the stream once ctx is done.
func receiveTar(ctx context.Context, r io.Reader, files []*tarFile, m pipeline.Meter) error {
	return receiveWant(ctx, r, &tarWant{files: files}, m)
}

// receiveWant is receiveTar for the files want holds, and those it is
// handed as the stream goes on.
func receiveWant(ctx context.Context, r io.Reader, want *tarWant, m pipeline.Meter) error {
	tr := tar.NewReader(r)
	// One buffer for the whole stream, as on upload (writeArchive).
	buf := make([]byte, 32<<10)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// Whatever tar was sent and left out, it passed.
			want.passAll()
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the tar stream: %w", err)
		}
		name, err := tarEntryName(h.Name)
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("tar stream: refusing %q: not a regular file (type %q)", h.Name, h.Typeflag)
		}
		f, err := want.take(name)
		if err == nil && want.bound != nil {
			want.bound.promise(f.info.Size())
		}
		switch {
		case err != nil:
			return fmt.Errorf("tar stream: refusing %q: %w", h.Name, err)
		case h.Size != f.info.Size():
			f.err = &Error{Op: "read", Path: f.src().String(),
				Err: fmt.Errorf("file changed size during the copy: expected %d bytes, the archive has %d", f.info.Size(), h.Size)}
			f.seen = true
			want.arrived()
			continue
		}
		f.seen = true
		dst := f.dst()
		dstFS := dst.FS
		out, tmp, err := createTemp(dstFS, dstFS.Dir(dst.Path), dstFS.Base(dst.Path))
		if err != nil {
			return &Error{Op: "copy " + f.src().String() + " to", Path: dst.String(), Err: err, Hint: hintFor(err)}
		}
		// A copy of the name alone: a substring would keep the whole path.
		f.tmp = strings.Clone(dstFS.Base(tmp))
		// Hiding the file's ReadFrom has the copy use buf: from a tar
		// reader it would fall back to io.Copy and a buffer of its own.
		n, err := io.CopyBuffer(struct{ io.Writer }{out}, m.Reader(ctx, tr), buf)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("read the tar stream: cut short in %q: %w", h.Name, err)
			}
			return &Error{Op: "copy " + f.src().String() + " to", Path: dst.String(), Err: err, Hint: hintFor(err)}
		}
		if n != h.Size {
			return fmt.Errorf("read the tar stream: %q: %d bytes of %d", h.Name, n, h.Size)
		}
		f.done = true
		f.mtime, f.mnsec = h.ModTime.Unix(), int32(h.ModTime.Nanosecond())
		want.arrived()
	}
}

// tarEntryName returns an archive entry's name as the relative,
// slash-separated path it stands for, or an error when it is not a clean
// path inside the tree: absolute, with "..", empty or odd elements.
func tarEntryName(name string) (string, error) {
	rel := strings.TrimPrefix(name, "./")
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("tar stream: refusing %q: %s", name, why)
	}
	switch {
	case rel == "":
		return bad("empty name")
	case strings.HasPrefix(rel, "/"):
		return bad("absolute path")
	case path.Clean(rel) != rel:
		return bad("not a clean path")
	}
	for _, el := range strings.Split(rel, "/") {
		if err := ValidName(el); err != nil {
			return bad(err.Error())
		}
	}
	return rel, nil
}

// tarWant matches a download's archive to the files it asked for. GNU
// tar -c writes its entries in the order of the names it was given, and
// leaves out a file it cannot read (tarSkipped): so each entry is the
// next file asked for or a later one, never one already passed. Matched
// in order, a plan of a million files needs no index of their names.
type tarWant struct {
	files []*tarFile
	next  int // files[:next] are passed: matched or left out
	// more, when not nil, returns files with the ones handed out since
	// appended: the names a stream was sent so far (feedStream.files).
	more func() []*tarFile
	// passed, when not nil, is told of next as it moves on.
	passed func(next int)
	// bound, when not nil, is a compressed stream's archive, told of
	// each file taken.
	bound *expansion
}

// take returns the file an entry named name is for.
func (w *tarWant) take(name string) (*tarFile, error) {
	for {
		for i := w.next; i < len(w.files); i++ {
			if f := w.files[i]; f.rel == name {
				w.next = i + 1
				return f, nil
			}
		}
		// A name is sent before its entry can come: one not among the
		// files known here may be among those handed out since.
		if w.more == nil {
			break
		}
		if all := w.more(); len(all) > len(w.files) {
			w.files = all
			continue
		}
		break
	}
	for _, f := range w.files[:w.next] {
		switch {
		case f.rel != name:
		case f.seen:
			return nil, errors.New("sent twice")
		default:
			return nil, errors.New("not in the order asked for")
		}
	}
	return nil, errors.New("not a file that was asked for")
}

// arrived tells passed that the files up to the last one taken are in.
func (w *tarWant) arrived() {
	if w.passed != nil {
		w.passed(w.next)
	}
}

// passAll marks every file sent as passed: the archive has ended.
func (w *tarWant) passAll() {
	if w.more != nil {
		w.files = w.more()
	}
	w.next = len(w.files)
	w.arrived()
}
