package helper

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"sync"
	"time"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/clone"
)

// ReadAtCloser and WriteAtCloser are the files DeltaFiles open.
type (
	ReadAtCloser interface {
		io.ReaderAt
		io.Closer
	}
	WriteAtCloser interface {
		io.WriterAt
		io.Closer
	}
	// An UpdateFile is a file rewritten in place (--inplace): read as the
	// basis, written, and cut to the new file's size.
	UpdateFile interface {
		io.ReaderAt
		io.WriterAt
		Truncate(size int64) error
		io.Closer
	}
)

// DeltaFiles are the files the delta service reads and writes.
type DeltaFiles interface {
	// Open opens the regular file at path, which must be size bytes,
	// or of any size where size is -1 (a pull asked ahead, diffAnySize);
	// the file then has a Stat or a Size method, which tells it.
	Open(path string, size int64) (ReadAtCloser, error)
	// CreateTemp makes the temporary file at path for writing, its mode
	// 0600; one there already is an error. Remove removes it.
	CreateTemp(path string) (WriteAtCloser, error)
	Remove(path string) error
	// Chtimes sets the times of the file at path, not following a link.
	Chtimes(path string, atime, mtime time.Time) error
	// Rename renames the file at oldpath to newpath, replacing what is
	// there.
	Rename(oldpath, newpath string) error
	// OpenUpdate opens the regular file at path, which must be size
	// bytes, to be rewritten in place.
	OpenUpdate(path string, size int64) (UpdateFile, error)
	// OpenWritten opens for reading the regular file at path, which
	// others are writing (a follow request's).
	OpenWritten(path string) (ReadAtCloser, error)
	// ReadDir lists the directory at path without following links in
	// it; Readlink reads a link.
	ReadDir(path string) ([]fs.FileInfo, error)
	Readlink(path string) (string, error)
}

// ServeDeltaFiles is the delta service on in and out, the stdin and
// stdout of an exec channel, over files: requests one after another until
// in ends. A request it cannot do is answered with why, and the service
// goes on; a stream that is not the protocol's ends it.
func ServeDeltaFiles(ctx context.Context, in io.Reader, out io.Writer, files DeltaFiles) error {
	return serveDelta(ctx, in, out, files, nil)
}

// serveDelta is ServeDeltaFiles, with warm, when not nil, started once
// the hello is out: it grows the connection's window toward the client
// (ServeDeltaWarmed) until the function it returns is called, which is
// done as the service ends, or as it reads a request whose answer is
// small (a share of a push, sums): padding would then be all that went
// that way.
func serveDelta(ctx context.Context, in io.Reader, out io.Writer, files DeltaFiles, warm func() (stop func())) error {
	r := bufio.NewReaderSize(in, 256<<10)
	w := bufio.NewWriterSize(out, 256<<10)
	if _, err := w.WriteString(deltaHello); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	cool := func() {}
	if warm != nil {
		var once sync.Once
		stop := warm()
		cool = func() { once.Do(stop) }
		defer cool()
	}
	var gov zgov // how compressed deltas' frames go, learnt request by request
	for {
		op, err := r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch op {
		case opPatchShare, opSums, opSHA, opFollow, opSignAhead:
			// A sign-ahead's part flows at once, as it is made.
			cool()
		}
		var st delta.Stats
		var made fs.FileInfo // the file a push rebuilt
		var rerr error
		var after func() error // what a request still does once answered
		switch op {
		case opSignPatch:
			st, made, after, rerr, err = serveSignPatch(ctx, r, w, files)
		case opPatchShare:
			st, rerr, err = servePatchShare(ctx, r, w, files)
		case opDiff:
			st, rerr, err = serveDiff(ctx, r, w, files, &gov)
		case opSums, opSHA:
			rerr, err = serveSums(ctx, r, w, files, op == opSHA)
		case opWalk:
			rerr, err = serveWalk(ctx, r, w, files)
		case opFollow:
			rerr, err = serveFollow(ctx, r, w, files)
		case opSignAhead:
			rerr, err = serveSignAhead(ctx, r, w, files)
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
			if op == opSignPatch {
				w.Write(appendMade(nil, made))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if after != nil {
			if err := after(); err != nil {
				return err
			}
		}
	}
}

// serveSignPatch answers a push's request: the helper signs the basis
// and sends the signature run by run as it is made, while it reads the
// client's delta against it and rebuilds the new file as the delta
// comes: into a temporary file it makes (named by the client, owner-only,
// never one that was there), or, when the request names none, over the
// basis itself (--inplace). The client diffs each range once the blocks
// it is matched against have arrived, so that the delta flows while the
// rest of the basis is signed; in place, a range's blocks are read here
// before its delta, made of them, can come back and write over them.
//
// A push in shares is finished once the client's verdict says the other
// shares are applied, or, sooner, once each of their helpers has said so
// itself (listenShares): the verdict is then read after the answer
// (after), and the file, every range of it checked, stands whatever it
// says.
func serveSignPatch(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles) (st delta.Stats, made fs.FileInfo, after func() error, rerr, err error) {
	fr := fields{r: r}
	basis, basisSize := fr.path(), fr.uint(delta.MaxSize)
	tmp, size, flags := fr.path(), fr.uint(delta.MaxSize), fr.uint(patchZstd|patchMode|patchTimes|patchRename|patchShares|patchSigned)
	var a Attrs
	if flags&patchMode != 0 {
		a.SetMode, a.Mode = true, fs.FileMode(fr.uint(uint64(modeBits)))&modeBits
	}
	if flags&patchTimes != 0 {
		a.SetTimes, a.Atime, a.Mtime = true, time.Unix(fr.int(), 0), time.Unix(fr.int(), 0)
	}
	final := "" // where the new file goes once whole
	if flags&patchRename != 0 {
		final = fr.path()
	}
	shares := 1
	if flags&patchShares != 0 {
		shares = int(fr.uint(delta.MaxShares))
	}
	if fr.err != nil {
		return st, nil, nil, nil, fr.err
	}
	in := &chunkReader{r: r}
	var p *patch
	switch {
	case shares < 1 || shares > 1 && tmp == "":
		rerr = fmt.Errorf("a push in %d shares, in place", shares)
	default:
		p, rerr = openPatch(files, basis, basisSize, tmp, size)
	}
	var reported <-chan struct{} // every other share applied, as their helpers say
	if shares > 1 && rerr == nil {
		var stop func()
		reported, stop = listenShares(tmp, shares)
		defer stop()
	}
	if shares > 1 {
		// What the shares on other channels write into.
		made := byte(shareNone)
		switch {
		case rerr != nil:
		case p.clone != nil:
			made = shareClone
		default:
			made = shareFresh
		}
		w.WriteByte(made)
		if flags&patchSigned != 0 {
			// No signature follows to take it out: the other
			// shares wait for it.
			if err := w.Flush(); err != nil {
				p.close(false, false)
				return st, nil, nil, nil, err
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The signature goes out on a goroutine of its own, and is ended
	// whatever becomes of it (short where it failed: the status says
	// why); the status waits for it. A push whose signature came ahead
	// in parts on other channels (patchSigned) has none.
	signed := make(chan error, 1)
	ew := &errWriter{w: flushWriter{w: w}}
	opened := rerr == nil
	if flags&patchSigned != 0 {
		signed <- nil
	} else {
		go func() {
			var serr error
			if opened {
				serr = delta.SignTo(ctx, p.basis, basisSize, delta.BlockSize(basisSize), ew)
			}
			if ew.err == nil {
				chunkWriter{w: w}.end()
				w.Flush()
			}
			signed <- serr
		}()
	}
	var from io.Reader = in
	if rerr == nil && flags&patchZstd != 0 {
		z, zerr := zstdIn(in)
		if rerr = zerr; rerr == nil {
			defer z.Close()
			from = z
		}
	}
	if rerr == nil {
		st, rerr = p.apply(ctx, from, size, delta.ShareOf(shares, 0))
	}
	if rerr == nil && shares == 1 {
		rerr = p.setAttrs(a)
	}
	if rerr != nil {
		cancel() // the signature is of no use now
	}
	// The delta's stream is read to its end whatever became of the
	// request, and the signature's ended, so that the channel stays in
	// step.
	derr := in.drain()
	serr := <-signed
	if serr != nil && !errors.Is(serr, context.Canceled) {
		// The basis could not be signed: the delta, cut short by the
		// client for want of its blocks, failed for that.
		rerr = serr
	}
	if shares > 1 && derr == nil && ew.err == nil {
		// The client's verdict on the other shares, unless their
		// helpers say first that they are applied.
		verdict, early := byte(statusOK), false
		if rerr == nil && reported != nil {
			got := make(chan error, 1)
			go func() {
				var err error
				verdict, err = r.ReadByte()
				got <- err
			}()
			select {
			case <-reported:
				early = true
				after = func() error { return <-got }
			case derr = <-got:
			}
		} else {
			verdict, derr = r.ReadByte()
		}
		if !early && derr == nil && verdict != statusOK && rerr == nil {
			rerr = errors.New("another share of the push failed")
		}
		if rerr == nil {
			if rerr = p.finish(size); rerr == nil {
				rerr = p.setAttrs(a)
			}
		}
	}
	if derr != nil || ew.err != nil {
		// The channel failed: the service ends.
		p.close(false, false)
		return st, nil, nil, nil, cmp.Or(derr, ew.err)
	}
	if rerr == nil {
		made, rerr = p.stat()
	}
	// Where the new file is to take the target's name, the basis (the
	// target) is closed once the answer is out: its last close frees
	// the blocks of the file replaced (16 ms for a GiB on XFS, traced),
	// which the client need not wait for.
	replaces := rerr == nil && final != "" && tmp != ""
	if cerr := p.close(rerr == nil, replaces); rerr == nil {
		rerr = cerr
	}
	if rerr == nil && replaces {
		// Whole, its mode and times given: it takes the target's name,
		// as the client's finish would have given it.
		if rerr = files.Rename(tmp, final); rerr != nil {
			files.Remove(tmp)
		}
	}
	if replaces {
		verdict := after
		after = func() error {
			p.basis.Close()
			if verdict != nil {
				return verdict()
			}
			return nil
		}
	}
	return st, made, after, rerr, nil
}

// servePatchShare answers a request for a share of a push's delta (one
// in shares, patchShares): the share is applied into tmp, the new file
// the push's own request made (a clone of the basis where the flags
// say so), from the basis, as it comes. The push's request finishes the
// file once the client says every share is in.
func servePatchShare(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles) (st delta.Stats, rerr, err error) {
	fr := fields{r: r}
	basis, basisSize := fr.path(), fr.uint(delta.MaxSize)
	tmp, size, flags := fr.path(), fr.uint(delta.MaxSize), fr.uint(shareUnder)
	sh := fr.share()
	if fr.err != nil {
		return st, nil, fr.err
	}
	in := &chunkReader{r: r}
	var (
		b   ReadAtCloser
		out UpdateFile
	)
	if sh.Whole() {
		rerr = fmt.Errorf("share %d of %d", sh.I, sh.N)
	}
	if rerr == nil {
		b, rerr = files.Open(basis, basisSize)
	}
	if rerr == nil {
		// The file the push made: there, and not made here.
		if out, rerr = files.OpenUpdate(tmp, -1); rerr != nil {
			b.Close()
		}
	}
	if rerr == nil {
		bs := delta.Basis{R: b, Size: basisSize, BlockLen: delta.BlockSize(basisSize), Under: flags&shareUnder != 0}
		_, st, rerr = delta.ApplyShare(ctx, in, sh, bs, out, size)
		b.Close()
		if cerr := out.Close(); rerr == nil {
			rerr = cerr
		}
		if rerr == nil {
			// Every range of the share written and checked: the push's
			// helper may finish the file without the client's verdict.
			reportShare(tmp, sh.I)
		}
	}
	// The share's stream is read to its end whatever became of it.
	if err := in.drain(); err != nil {
		return st, nil, err
	}
	return st, rerr, nil
}

// A patch is a push's files open on the helper: the basis, and where the
// new file goes (the temporary file made for it, a clone of the basis
// where the file system shares blocks, or the basis itself in place).
type patch struct {
	files     DeltaFiles
	basis     ReadAtCloser
	inPlace   UpdateFile
	out       WriteAtCloser
	tmp       string
	clone     *clone.Clone
	size      int64  // the basis's
	basisName string // the basis's path
}

// openPatch opens the basis of size basisSize, and makes tmp, or ("")
// marks the basis to be rewritten in place as a file of size bytes.
func openPatch(files DeltaFiles, basis string, basisSize int64, tmp string, size int64) (*patch, error) {
	p := &patch{files: files, tmp: tmp, size: basisSize, basisName: basis}
	if tmp == "" {
		f, err := files.OpenUpdate(basis, basisSize)
		if err != nil {
			return nil, err
		}
		// Marked until the new file is whole: a cut patch leaves a
		// size no quick check takes for the source's.
		if err := f.Truncate(delta.InPlaceMark(basisSize, size)); err != nil {
			f.Close()
			return nil, err
		}
		p.basis, p.inPlace = f, f
		return p, nil
	}
	f, err := files.Open(basis, basisSize)
	if err != nil {
		return nil, err
	}
	t, err := files.CreateTemp(tmp)
	if err != nil {
		f.Close()
		return nil, err
	}
	p.basis, p.out = f, t
	// Where the file system shares blocks (XFS, Btrfs), the temporary
	// file starts as a clone of the basis, and only what moved or
	// changed is written; the blocks already there are hashed as the
	// basis holds them, which must then not have changed since the
	// clone.
	p.clone = clone.Of(t, f)
	return p, nil
}

// apply rebuilds the new file, of size bytes, from the delta read from
// r: the whole of it, or, sh not whole, share sh, the file to be
// finished once the others are in too (finish).
func (p *patch) apply(ctx context.Context, r io.Reader, size int64, sh delta.Share) (delta.Stats, error) {
	b := delta.Basis{R: p.basis, Size: p.size, BlockLen: delta.BlockSize(p.size)}
	if p.inPlace != nil {
		b.InPlace = true
		h, st, err := delta.Apply(ctx, r, b, p.inPlace, size)
		if err == nil {
			err = p.inPlace.Truncate(h.Size)
		}
		return st, err
	}
	b.Under = p.clone != nil
	if !sh.Whole() {
		_, st, err := delta.ApplyShare(ctx, r, sh, b, p.out, size)
		return st, err
	}
	h, st, err := delta.Apply(ctx, r, b, p.out, size)
	if err == nil {
		err = p.finish(h.Size)
	}
	return st, err
}

// finish ends a new file of size bytes made as a clone of the basis: the
// basis checked unchanged since the clone, the clone cut to size.
func (p *patch) finish(size int64) error {
	if p.clone == nil {
		return nil
	}
	if err := p.clone.Finish(size); err != nil {
		return fmt.Errorf("%s: %w", p.tmp, err)
	}
	return nil
}

// written is the file the new one is written into, and its path.
func (p *patch) written() (any, string) {
	if p.inPlace != nil {
		return p.inPlace, p.basisName
	}
	return p.out, p.tmp
}

// setAttrs gives the new file a's mode and times.
func (p *patch) setAttrs(a Attrs) error {
	f, name := p.written()
	if a.SetMode {
		ch, ok := f.(interface{ Chmod(fs.FileMode) error })
		if !ok {
			return fmt.Errorf("%s: cannot set its mode here", name)
		}
		if err := ch.Chmod(a.Mode); err != nil {
			return err
		}
	}
	if a.SetTimes {
		return p.files.Chtimes(name, a.Atime, a.Mtime)
	}
	return nil
}

// stat is the new file's stat, once it is whole.
func (p *patch) stat() (fs.FileInfo, error) {
	f, _ := p.written()
	st, ok := f.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return nil, errors.New("cannot stat the new file here")
	}
	return st.Stat()
}

// close closes the files but the basis where keepBasis says so, and,
// unless the new file was made (ok), removes the temporary file this end
// made.
func (p *patch) close(ok, keepBasis bool) error {
	if p == nil {
		return nil
	}
	var err error
	if !keepBasis {
		err = p.basis.Close()
	}
	if p.out != nil {
		if cerr := p.out.Close(); err == nil {
			err = cerr
		}
		if !ok || err != nil {
			p.files.Remove(p.tmp)
		}
	}
	return err
}

// serveDiff answers a diff request: the delta of a file here against the
// client's signature, made for a fresh file or, flagged diffInPlace, for
// writing over the basis, as the signature arrives (diffStream).
func serveDiff(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles, gov *zgov) (st delta.Stats, rerr, err error) {
	fr := fields{r: r}
	path, size, flags := fr.path(), fr.uint(delta.MaxSize), fr.uint(diffInPlace|diffZstd|diffAnySize|diffShare)
	var share delta.Share
	if flags&diffShare != 0 {
		share = fr.share()
	}
	if fr.err != nil {
		return st, nil, fr.err
	}
	if flags&diffAnySize != 0 {
		size = -1
	}
	in := &chunkReader{r: r}
	var z *zgov // compressed, frames as it decides
	if flags&diffZstd != 0 {
		z = gov
	}
	return diffStream(ctx, in, w, files, path, size, flags&diffInPlace != 0, share, z)
}

// deltaOut is where a delta for the client goes: out itself, or (z not
// nil, the client's -z) a zstd stream into it, framed as z decides, that
// done ends.
func deltaOut(out io.Writer, z *zgov) (to io.Writer, done func() error, err error) {
	if z == nil {
		return out, func() error { return nil }, nil
	}
	e, err := newFramedOut(out, z)
	if err != nil {
		return nil, nil, err
	}
	return e, e.Close, nil
}

// diffStream diffs the file at path, of size bytes (-1: whatever its
// size, which the delta's header then says), as the client's signature
// arrives on in (share of its ranges), for writing
// in place (inPlace: each range as soon as its blocks are there) or for a
// fresh file (each range first against the blocks near it, as soon as
// they are there: delta.DiffOptions.Blocks), the delta going out
// meanwhile: the client signs its target while it is diffed here, and
// applies the delta as it comes.
func diffStream(ctx context.Context, in *chunkReader, w *bufio.Writer, files DeltaFiles, path string, size int64, inPlace bool, share delta.Share, z *zgov) (st delta.Stats, rerr, err error) {
	sr, rerr := delta.NewSignatureReader(in, -1)
	if rerr != nil {
		if derr := in.drain(); derr != nil {
			return st, nil, derr
		}
		if errors.Is(rerr, io.ErrUnexpectedEOF) {
			return st, nil, rerr
		}
		return st, rerr, chunkWriter{w: w}.end()
	}
	read := make(chan error, 1)
	go func() {
		_, err := sr.Read()
		if derr := in.drain(); err == nil {
			err = derr
		}
		read <- err
	}()
	// Compressed, the delta goes out a frame at a time (framedOut),
	// and whole once it is closed.
	out, done, rerr := deltaOut(flushWriter{w: w}, z)
	var f ReadAtCloser
	if rerr == nil {
		f, rerr = files.Open(path, size)
	}
	if rerr == nil && size < 0 {
		if size, rerr = sizeOf(f); rerr != nil {
			f.Close()
		}
	}
	if rerr == nil {
		st, rerr = delta.Diff(ctx, sr.Header(), f, size, out, delta.DiffOptions{InPlace: inPlace, Ahead: !inPlace, Blocks: sr.Wait, Share: share})
		f.Close()
	}
	if done != nil {
		if zerr := done(); rerr == nil {
			rerr = zerr
		}
	}
	// The signature's stream is read to its end whatever became of the
	// diff; one cut short ends the service.
	if serr := <-read; serr != nil {
		if errors.Is(serr, io.ErrUnexpectedEOF) {
			return st, nil, serr
		}
		if rerr == nil {
			rerr = serr
		}
	}
	return st, rerr, chunkWriter{w: w}.end()
}

// sizeOf is the size of f, a file DeltaFiles opened at any size.
func sizeOf(f ReadAtCloser) (int64, error) {
	switch f := f.(type) {
	case interface{ Stat() (fs.FileInfo, error) }:
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	case interface{ Size() int64 }:
		return f.Size(), nil
	}
	return 0, errors.New("the file's size cannot be told")
}

// flushWriter writes a chunked stream and flushes each write: a delta
// made as its signature arrives goes out as it is made, and so does a
// signature as it is made.
type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := chunkWriter{w: f.w}.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// errWriter keeps the first error of its writer: the channel's, which
// ends the service, as against the file's, which ends a request.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// serveSums answers a sums request: the content sum of each file named,
// in order, hashed on every CPU; a file that cannot be read gets its
// error in its place.
func serveSums(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles, sha bool) (rerr, err error) {
	n, err := readUint(r, maxSums)
	if err != nil {
		return nil, err
	}
	paths := make([]string, n)
	sizes := make([]int64, n)
	fr := fields{r: r}
	for i := range paths {
		paths[i], sizes[i] = fr.path(), fr.uint(delta.MaxSize)
	}
	if fr.err != nil {
		return nil, fr.err
	}
	type result struct {
		sum []byte
		err error
	}
	results := make([]chan result, n)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	next := make(chan int)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(runtime.GOMAXPROCS(0), int(n)) {
		go func() {
			buf := make([]byte, 1<<20)
			for i := range next {
				sum, err := sumFile(ctx, files, paths[i], sizes[i], buf, sha)
				results[i] <- result{sum, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range results {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	out := chunkWriter{w: w}
	for i := range results {
		res := <-results[i]
		var rec []byte
		if res.err != nil {
			msg := res.err.Error()
			rec = appendString([]byte{1}, msg[:min(len(msg), 4000)])
		} else {
			rec = append([]byte{0}, res.sum...)
		}
		if _, err := out.Write(rec); err != nil {
			return nil, err
		}
	}
	return nil, out.end()
}

// serveFollow answers a follow request: the file is hashed as far as each
// mark of the client's stream says it is written. A request that cannot
// be done (no such file, a mark past the size or behind the last) still
// reads the client's stream to its end, so that the channel stays in step.
func serveFollow(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles) (rerr, err error) {
	fr := fields{r: r}
	path, size := fr.path(), fr.uint(delta.MaxSize)
	if fr.err != nil {
		return nil, fr.err
	}
	f, rerr := files.OpenWritten(path)
	if f != nil {
		defer f.Close()
	}
	h := sha256.New()
	hashed := int64(0)
	buf := make([]byte, 1<<20)
	marks := bufio.NewReader(&chunkReader{r: r})
	for {
		m, err := binary.ReadUvarint(marks)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, eofIsUnexpected(err)
		}
		if rerr != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			rerr = err
			continue
		}
		if m > uint64(size) || int64(m) < hashed {
			rerr = fmt.Errorf("%s: told %d bytes written, after %d, of %d", path, m, hashed, size)
			continue
		}
		for hashed < int64(m) {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), int64(m)-hashed)], hashed)
			h.Write(buf[:n])
			hashed += int64(n)
			if n == 0 {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				rerr = fmt.Errorf("%s: read at %d: %w", path, hashed, err)
				break
			}
		}
	}
	if rerr == nil && hashed != size {
		rerr = fmt.Errorf("%s: told only %d bytes of %d written", path, hashed, size)
	}
	out := chunkWriter{w: w}
	if rerr == nil {
		if _, err := out.Write(h.Sum(nil)); err != nil {
			return nil, err
		}
	}
	return rerr, out.end()
}

// sumFile is the content sum of the regular file of size bytes at path,
// or its SHA-256 (sha).
func sumFile(ctx context.Context, files DeltaFiles, path string, size int64, buf []byte, sha bool) ([]byte, error) {
	f, err := files.Open(path, size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if sha {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, size), buf); err != nil {
			return nil, err
		}
		return h.Sum(nil), nil
	}
	sum, err := delta.SumOf(ctx, f, size, buf)
	return sum[:], err
}

// fields reads a request's fields, keeping the first error: a caller
// reads them all and checks once.
type fields struct {
	r   *bufio.Reader
	err error
}

func (f *fields) path() string {
	if f.err != nil {
		return ""
	}
	var s string
	s, f.err = readString(f.r, maxPathLen)
	return s
}

// share reads a share of a delta's ranges (appendShare): N at most
// delta.MaxShares, I below N.
func (f *fields) share() delta.Share {
	n := int(f.uint(delta.MaxShares))
	return delta.Share{N: n, I: int(f.uint(uint64(max(n, 1) - 1)))}
}

func (f *fields) int() int64 {
	if f.err != nil {
		return 0
	}
	n, err := binary.ReadVarint(f.r)
	if err != nil {
		f.err = eofIsUnexpected(err)
	}
	return n
}

func (f *fields) uint(limit uint64) int64 {
	if f.err != nil {
		return 0
	}
	var n int64
	n, f.err = readUint(f.r, limit)
	return n
}
