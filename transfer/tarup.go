package transfer

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/protocol"
)

// Upload streams: an archive written here and unpacked by the server's
// tar -x.

// tarStopGrace bounds the wait for a server's tar -x to exit once a
// stream has failed or been interrupted, before its files are removed.
const tarStopGrace = 2 * time.Second

// uploadStream sends files, and the directories dirs, in one archive to a
// tar -x in run.base. Unless the whole tree is new, each file goes under
// a temporary name, renamed into place once tar has exited 0 and its size
// is checked, and on failure every temporary file is removed.
func (run *tarRun) uploadStream(ctx context.Context, dirs []*tarNode, files []*tarFile) (err error) {
	c := run.c
	dstFS := run.root.dst().FS
	if !run.whole {
		for _, f := range files {
			f.tmp = TempName(path.Base(f.rel))
		}
	}
	// The server's tar outlives ctx by up to tarStopGrace: a stream that
	// fails or is interrupted ends tar's input and waits for tar to exit
	// before its temporary files (or the new tree) are removed. A tar
	// still unpacking what the channel held would otherwise make files
	// after their removal. Only a server that does not answer within the
	// grace has its channel closed under it (writes blocked on it end
	// then too).
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(tarStopGrace, cancel) })()
	defer func() {
		if err != nil && !run.whole {
			run.removeTemps(files)
		}
	}()
	start := time.Now()
	w, err := run.end.TarExtract(sctx, run.base, run.po)
	if err != nil {
		return err
	}
	werr := run.writeArchive(ctx, w, dirs, files)
	if werr != nil {
		// The archive is cut: whatever tar's exit says, the stream
		// failed (tar may take a cut archive for a whole one).
		stop := time.AfterFunc(tarStopGrace, cancel)
		_ = w.Close()
		stop.Stop()
	} else {
		werr = w.Close()
	}
	if werr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return werr
	}
	sent := time.Now()
	// Each stream checks its own files as soon as it is done, while the
	// others still run: a directory two streams share is listed twice.
	if err := run.checkUploaded(files); err != nil {
		return err
	}
	checked := time.Now()
	// A file's listing is needed only for its rename: kept for every
	// file of a stream, a million-file tree would hold a million of them.
	defer func() {
		for _, f := range files {
			f.listed = nil
		}
	}()
	if run.whole {
		c.logf("tar stream of %d files: sent in %s, sizes checked in %s", len(files),
			sent.Sub(start).Round(time.Millisecond), checked.Sub(sent).Round(time.Millisecond))
		return nil
	}
	defer func() {
		c.logf("tar stream of %d files: sent in %s, sizes checked in %s, renamed in %s", len(files),
			sent.Sub(start).Round(time.Millisecond), checked.Sub(sent).Round(time.Millisecond),
			time.Since(checked).Round(time.Millisecond))
	}()
	slots.ForEach(len(files), metaWorkers, func(i int) {
		f := files[i]
		if f.err != nil {
			return
		}
		// checkUploaded checked the size; tar -x gave the file its mode
		// and times, which the listing shows, so finish only renames.
		attrs := func() fileAttrs { return fileAttrs{mode: f.listed.Mode() & modeBits} }
		dst := f.dst()
		t := tempFile{dst: dst, tmp: f.tmpBeside(dst), op: "copy " + f.src().String() + " to"}
		err := t.finish(ctx, -1, f.listed, attrs, nil)
		f.listed = nil
		if err != nil {
			f.err = err
			_ = dstFS.Remove(t.tmp)
		}
	})
	return nil
}

// checkUploaded lists every directory that received temporary files, so
// that each file's size on the server is checked before it takes its
// name: a listing per directory, not a round trip per file.
func (run *tarRun) checkUploaded(files []*tarFile) error {
	root, dstFS := run.root, run.root.dst().FS
	byDir := map[string][]*tarFile{}
	var order []string
	for _, f := range files {
		d := dstFS.Dir(run.tmpPath(f))
		if _, ok := byDir[d]; !ok {
			order = append(order, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	errs := make([]error, len(order))
	// Every listing at once: they cost round trips, not bandwidth.
	slots.ForEach(len(order), 4*metaWorkers, func(i int) {
		list, err := dstFS.ReadDir(order[i])
		if err != nil {
			errs[i] = &Error{Op: "read directory", Path: root.dst().FS.Label() + order[i], Err: err}
			return
		}
		listed := make(map[string]fs.FileInfo, len(list))
		for _, e := range list {
			if e.Mode().IsRegular() {
				listed[e.Name()] = e
			}
		}
		for _, f := range byDir[order[i]] {
			e, ok := listed[run.tmpName(f)]
			switch {
			case f.err != nil:
				// Left out of the archive (writeArchive).
			case !ok:
				f.err = &Error{Op: "copy " + f.src().String() + " to", Path: f.dst().String(),
					Err: errors.New("tar reported success but the file is missing")}
			default:
				t := tempFile{dst: f.dst(), tmp: run.tmpPath(f), op: "copy " + f.src().String() + " to"}
				if err := t.checkSize(f.info.Size(), e); err != nil {
					f.err = err
					_ = dstFS.Remove(t.tmp)
					continue
				}
				f.listed = e
			}
		}
	})
	return errors.Join(errs...)
}

// zstdWriter compresses an upload's stream. At its fastest level the
// encoder's window is 4 MiB, within what hpncp's own decoder accepts
// (zstdMaxWindow).
func zstdWriter(w io.Writer) (*zstd.Encoder, error) {
	return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
}

// writeArchive writes the archive of dirs and files, compressed as
// compress says, to w, its bytes metered until ctx is done.
func (run *tarRun) writeArchive(ctx context.Context, w io.Writer, dirs []*tarNode, files []*tarFile) error {
	// Small writes would each become an SSH packet of their own.
	bw := bufio.NewWriterSize(w, 256<<10)
	var out io.Writer = bw
	var comp io.WriteCloser
	switch run.po.Compress {
	case "zstd":
		zw, err := zstdWriter(bw)
		if err != nil {
			return err
		}
		comp = zw
	case "gzip":
		comp, _ = gzip.NewWriterLevel(bw, gzip.BestSpeed)
	}
	if comp != nil {
		out = comp
	}
	tw := tar.NewWriter(out)
	// One buffer for every file of the stream: io.Copy would make one
	// per file, garbage that a tree of a million files turns into
	// gigabytes for the collector.
	buf := make([]byte, 32<<10)
	for _, d := range dirs {
		// The copy must be able to write into every directory; -p sets
		// the source's mode once it is done, as in SFTP mode.
		h := &tar.Header{Typeflag: tar.TypeDir, Name: d.rel + "/", Mode: int64(d.info.Mode().Perm() | 0o700),
			ModTime: d.info.ModTime()}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	for _, f := range files {
		src := f.src()
		in, err := src.FS.Open(src.Path)
		if err != nil {
			// Left out of the archive, as SFTP mode leaves it out of the
			// copy: the tree's other files still go.
			f.err = &Error{Op: "read", Path: src.String(), Err: err}
			continue
		}
		err = run.writeEntry(ctx, tw, f, in, buf)
		_ = in.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if comp != nil {
		if err := comp.Close(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeEntry adds one file, open as in, to the archive under its
// temporary name, its bytes copied through buf.
func (run *tarRun) writeEntry(ctx context.Context, tw *tar.Writer, f *tarFile, in io.Reader, buf []byte) error {
	name := f.rel
	if !run.whole {
		name = path.Join(path.Dir(f.rel), f.tmp)
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: f.info.Size(),
		Mode: int64(protocol.UnixMode(f.info.Mode())),
		// Whole seconds, as SFTP mode sets them: archive/tar would round.
		ModTime: f.info.ModTime().Truncate(time.Second)}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.CopyBuffer(tw, run.m.Reader(ctx, in), buf)
	switch {
	case errors.Is(err, tar.ErrWriteTooLong):
		n = f.info.Size() + 1
	case err != nil:
		return &Error{Op: "read", Path: f.src().String(), Err: err}
	}
	if n != f.info.Size() {
		// The archive cannot carry the file's bytes as they are now.
		return &Error{Op: "read", Path: f.src().String(),
			Err: fmt.Errorf("file changed size during the copy: expected %d bytes", f.info.Size())}
	}
	return nil
}
