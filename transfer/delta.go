package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/clone"
	"github.com/hpncp/hpncp/internal/filter"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
)

// A DeltaSession is a helper at a remote end, doing there what rsync's
// delta transfer needs done where the file lies (helper.DeltaClient).
type DeltaSession interface {
	// Broken says the session was given up part way through a request:
	// what the far end did of it is not known.
	Broken() bool
	// SignPatch rebuilds a file from basis, the regular file of
	// basisSize bytes there, and the delta diff writes, into tmp, which
	// it makes, or ("") over basis itself, with a delta made for that
	// (delta.DiffOptions.InPlace): the far end signs basis and sends the
	// signature as it is made, and diff, handed its header and its
	// blocks as they arrive, writes the delta of the file of size
	// bytes meanwhile. Once the file is whole it is given a's mode and
	// times (SetMode, SetTimes) and, final not "", renamed from tmp to
	// final; its stat is returned. With shares (a new file only), diff
	// writes share 0 and shares.Others has the rest applied
	// (helper.Shares).
	SignPatch(ctx context.Context, basis string, basisSize int64, tmp, final string, size int64, a protocol.PutAttrs, shares PushShares,
		diff func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error) (delta.Stats, fs.FileInfo, error)
	// PatchShare applies share sh of a push's delta in shares into tmp,
	// the new file the push made (under: a clone of basis), send writing
	// the share's delta.
	PatchShare(ctx context.Context, basis string, basisSize int64, tmp string, size int64, under bool, sh delta.Share, send func(w io.Writer) error) (delta.Stats, error)
	// Diff hands apply the delta that rebuilds the regular file of size
	// bytes at path from the basis sig describes, made to be applied over
	// the basis when inPlace.
	Diff(ctx context.Context, path string, size int64, sig *delta.Signature, inPlace bool, apply func(io.Reader) error) (delta.Stats, error)
	// DiffStream is Diff with the signature written by sign as it is
	// made, while the delta is read; an error of sign's is returned as
	// it is. share says which of the delta's ranges are asked for, the
	// others on other sessions at once (delta.ApplyShares).
	DiffStream(ctx context.Context, path string, size int64, sign func(io.Writer) error, inPlace bool, share delta.Share, apply func(io.Reader) error) (delta.Stats, error)
	// Sums are the content sums (delta.SumOf) of the regular files at
	// paths, of sizes, hashed where they lie; errs says, in its place, why
	// a file has none.
	Sums(ctx context.Context, paths []string, sizes []int64) (sums []delta.RangeSum, errs []error, err error)
	// SHA256s are the files' SHA-256s, as Sums gives its sums.
	SHA256s(ctx context.Context, paths []string, sizes []int64) (sums [][]byte, errs []error, err error)
	// FollowSHA256 is the SHA-256 of the file of size bytes at path,
	// which the copy is writing: each value from written says how many
	// of its first bytes are written; the sum comes once written is
	// closed, having said size.
	FollowSHA256(ctx context.Context, path string, size int64, written <-chan int64) ([]byte, error)
	// Walk lists the tree at root in one request: each directory's
	// entries by its path below root ("" for root; a link's target by
	// the entry's LinkTarget method), and the directories that could not
	// be read, with the server's words; at most maxEntries entries and
	// maxBytes of names. What prune's rules exclude may be left out, an
	// excluded directory not read.
	Walk(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (dirs map[string][]fs.FileInfo, errs map[string]string, err error)
}

// ContentSum is the content sum (delta.SumOf) of the regular file e of
// size bytes, read through its end with buf: what the local side of
// sync -c compares with a helper's sums.
func ContentSum(ctx context.Context, e Endpoint, size int64, buf []byte) (delta.RangeSum, error) {
	f, closer, err := openAt(e.FS, e.Path, size)
	if err != nil {
		return delta.RangeSum{}, err
	}
	defer closer.Close()
	return delta.SumOf(ctx, f, size, buf)
}

// DeltaHosts gives the copy a DeltaSession on a remote end's host, and
// takes it back with release; an error says why there is none, and the
// file goes whole.
type DeltaHosts interface {
	DeltaSession(ctx context.Context, end FS) (s DeltaSession, release func(), err error)
}

// DeltaMinSize is the smallest target a delta is tried for: below it,
// the signature's round trip costs more than the file.
const DeltaMinSize = 64 << 10

// deltaOK says whether src goes to dst, which holds existing, as a delta:
// one end is remote and has a helper, the other local, and the target is
// a regular file large enough to be worth it.
func (c *copier) deltaOK(src, dst Endpoint, si, existing fs.FileInfo) bool {
	return c.opts.Delta != nil && existing != nil && existing.Mode().IsRegular() &&
		existing.Size() >= DeltaMinSize && si.Size() > 0 && !c.opts.Sparse &&
		isRemote(src.FS) != isRemote(dst.FS)
}

// copyDelta copies src to dst by rsync's delta transfer: the end that
// has the target signs it, the end that has the source sends what
// differs, and the target's end rebuilds the file under a temporary name
// (or, with --inplace, over the target), each range checked against the
// source's hash, before it is finished as any other copy. A delta in place
// that fails part way leaves the target part rewritten, as rsync's does,
// until the file goes whole. done false means the file was not copied this way (no
// helper, or one that failed: -v says why) and goes whole, from scratch.
func (c *copier) copyDelta(ctx context.Context, src, dst Endpoint, si, existing fs.FileInfo, start time.Time) (done bool, err error) {
	push := isRemote(dst.FS)
	far := src.FS
	if push {
		far = dst.FS
	}
	s, release, err := c.opts.Delta.DeltaSession(ctx, far)
	if err != nil {
		c.logf("delta: %s goes whole: %v", src, err)
		return false, nil
	}
	defer release()
	if z, ok := s.(compressor); ok {
		z.Compress(c.opts.Compress)
	}
	op := "copy " + src.String() + " to"
	prog := fileProgress(c.opts.Progress)
	if prog != nil {
		prog.StartFile(src.FS.Base(src.Path), si.Size())
		defer prog.EndFile()
	}
	var (
		st       delta.Stats
		tmp      = dst.Path // over the target in place (--inplace)
		finished bool
		made     fs.FileInfo // a push's new file, as the helper found it
		renamed  bool        // the helper renamed it into place
	)
	attrs := func() fileAttrs {
		return c.finalAttrs(attrsOf(si), existing, func() fs.FileMode {
			return c.newFileMode(ctx, dst, si.Mode().Perm())
		})
	}
	// A push's helper gives the file its mode and times once it is
	// whole, and the finish has only the rename left to ask for; but not
	// a file rewritten in place that --verify has yet to check, which
	// must not look finished (the source's size and time) should the
	// check fail.
	var applied *fileAttrs
	if push && !(c.opts.InPlace && c.opts.Verify) {
		a := attrs()
		applied = &a
	}
	switch {
	case c.opts.InPlace && push:
		st, made, err = c.pushDelta(ctx, s, src, dst, si, existing, "", "", applied)
	case c.opts.InPlace:
		var f UpdateFile
		if f, err = openUpdate(dst.FS, dst.Path, existing.Size()); err != nil {
			c.logf("delta: %s goes whole: cannot write it in place: %v", dst, err)
			return false, nil
		}
		st, err = c.pullDelta(ctx, s, src, dst, si, existing, f, f, false)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = &localDeltaError{cerr}
		}
	case push:
		// The helper makes the temporary file (owner-only, never one
		// that was there) as it begins, a round trip sooner than this
		// end could over SFTP, and removes it if it fails. Given up
		// part way, it may have left it.
		tmp = dst.FS.Join(dst.FS.Dir(dst.Path), TempName(dst.FS.Base(dst.Path)))
		// With nothing left to check, the helper gives the file the
		// target's name too, as the finish would have.
		final := ""
		if !c.opts.Verify {
			final = dst.Path
		}
		st, made, err = c.pushDelta(ctx, s, src, dst, si, existing, tmp, final, applied)
		renamed = err == nil && final != ""
		if err == nil || s.Broken() {
			defer func() {
				if !finished {
					dst.FS.Remove(tmp)
				}
			}()
		}
	default:
		var out io.WriteCloser
		out, tmp, err = createTemp(dst.FS, dst.FS.Dir(dst.Path), dst.FS.Base(dst.Path))
		if err != nil {
			return true, &Error{Op: op, Path: dst.String(), Err: err, Hint: hintFor(err)}
		}
		defer func() {
			if !finished {
				dst.FS.Remove(tmp)
			}
		}()
		wa, ok := out.(io.WriterAt)
		if !ok {
			out.Close()
			c.logf("delta: %s goes whole: the temporary file cannot be written at offsets", src)
			return false, nil
		}
		basis, closer, oerr := openAt(dst.FS, dst.Path, existing.Size())
		if oerr != nil {
			out.Close()
			return true, &Error{Op: op, Path: dst.String(), Err: oerr}
		}
		// Where the file system shares blocks (XFS, Btrfs), the
		// temporary file starts as a clone of the target, and only what
		// moved or changed is written; the blocks already there are
		// hashed as the target holds them, which must then not have
		// changed since the clone.
		cl := clone.Of(out, closer)
		st, err = c.pullDelta(ctx, s, src, dst, si, existing, basis, wa, cl != nil)
		if cl != nil && err == nil {
			if ferr := cl.Finish(si.Size()); ferr != nil {
				err = &localDeltaError{ferr}
			} else {
				c.logf("delta: %s: rebuilt over a clone of the target", dst)
			}
		}
		closer.Close()
		if cerr := out.Close(); err == nil && cerr != nil {
			err = &localDeltaError{cerr}
		}
	}
	if ch, ok := dst.FS.(changer); ok && push {
		// The helper wrote there: a stat the end kept from its start,
		// of the target rewritten in place, is the old file's.
		ch.Changed()
	}
	if err != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		var local *localDeltaError
		if errors.As(err, &local) {
			return true, &Error{Op: op, Path: dst.String(), Err: local.err}
		}
		c.logf("delta: %s goes whole: %s", src, vis.String(err.Error()))
		return false, nil
	}
	if prog != nil {
		prog.Add(int(si.Size()))
	}
	var sum string
	var check func() error
	if c.opts.Verify {
		check = func() error {
			var verr error
			sum, verr = c.verify(ctx, src, dst, Endpoint{dst.FS, tmp}, nil, nil, si.Size())
			return verr
		}
	}
	// A push's helper answered with the new file's stat, taken once it
	// was whole: the finish need not ask for it, and the run learns
	// from it who owns the files it makes there.
	if made != nil {
		c.record(func(r *Result) {
			if r.Made == nil {
				r.Made = made
			}
		})
	}
	finish := tempFile{dst: dst, tmp: tmp, op: op, applied: applied}
	if renamed {
		finish.tmp = dst.Path // in place now: nothing to rename
	}
	if err := finish.finish(ctx, si.Size(), made, attrs, check); err != nil {
		return true, err
	}
	finished = true
	c.record(func(r *Result) {
		r.DeltaFiles++
		r.Literal += st.Literal
		r.Matched += st.Matched
	})
	c.logf("delta: %s: %d bytes sent, %d matched", src, st.Literal, st.Matched)
	c.done(src, dst, si.Size(), 0, sum, start)
	return true, nil
}

// compressor is a delta session whose deltas may go compressed.
type compressor interface{ Compress(on bool) }

// changer is an end that keeps answers of its own (protocol.SFTP's early
// stats), told when a helper changed its files.
type changer interface{ Changed() }

// localDeltaError is a failure of this end's files in a delta: not a
// reason to send the file whole, which would fail the same way.
type localDeltaError struct{ err error }

func (e *localDeltaError) Error() string { return e.err.Error() }

// OpenSigner opens the regular file e, of size bytes, to be signed by
// sign as a pull's delta is asked for against it (delta.SignTo, the block
// length by the file's size), once or not at all, and closed by close:
// opened now, it is the file as it is now, whatever the run then does to
// the name (an in-place copy's first write makes it longer).
func OpenSigner(e Endpoint, size int64) (sign func(ctx context.Context, w io.Writer) error, close func() error, err error) {
	f, closer, err := openAt(e.FS, e.Path, size)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, w io.Writer) error {
		return delta.SignTo(ctx, f, size, delta.BlockSize(size), w)
	}, closer.Close, nil
}

// openAt opens name on fsys for reading at offsets, checking it is still
// size bytes.
func openAt(fsys FS, name string, size int64) (io.ReaderAt, io.Closer, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, nil, err
	}
	ra, ok := f.(interface {
		io.ReaderAt
		Stat() (fs.FileInfo, error)
	})
	if !ok {
		f.Close()
		return nil, nil, errors.New("not a file that can be read at offsets")
	}
	fi, err := ra.Stat()
	if err == nil && fi.Size() != size {
		err = fmt.Errorf("%d bytes, not the %d listed: it changed", fi.Size(), size)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return ra, f, nil
}

// pushDelta has the helper sign the target and rebuild the file into
// tmp, which it makes, or over the target in place when tmp is "", from
// the delta of the local source against the signature: made and sent as
// the signature arrives (in place, each range against its own blocks
// only, as soon as they are there; for a fresh file, each range first
// against the blocks near it: delta.DiffOptions.Blocks), and applied as
// it comes.
func (c *copier) pushDelta(ctx context.Context, s DeltaSession, src, dst Endpoint, si, existing fs.FileInfo, tmp, final string, a *fileAttrs) (delta.Stats, fs.FileInfo, error) {
	f, closer, err := openAt(src.FS, src.Path, si.Size())
	if err != nil {
		return delta.Stats{}, nil, &localDeltaError{err}
	}
	defer closer.Close()
	// The diff fails for this end's file (which the file going whole
	// would too) or for the signature (the helper's failure, for which
	// it goes whole): local tells which.
	local := &readsOf{r: f, size: si.Size()}
	var put protocol.PutAttrs
	if a != nil {
		put = protocol.PutAttrs{SetMode: true, Mode: a.mode, SetTimes: a.times, Atime: a.atime, Mtime: a.mtime}
	}
	// A new file's delta goes in shares, each on a channel of its own,
	// as a pull's does; not in place, nor compressed. The other shares'
	// sessions are asked for while the push begins, and taken once the
	// helper has made the file.
	var shares PushShares
	if n := DeltaShares(existing.Size()); n > 1 && tmp != "" && !c.opts.Compress {
		var (
			ss      []DeltaSession
			release = func() {}
			got     = make(chan struct{})
		)
		go func() {
			defer close(got)
			ss, release = c.moreSessions(ctx, dst, n)
		}()
		defer func() { <-got; release() }()
		c.logf("delta: %s: sent in %d shares, on a channel each", src, n)
		shares = PushShares{N: n, Others: func(ctx context.Context, under bool, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error) {
			return c.pushShares(ctx, n, func() []DeltaSession { <-got; return ss }, local, dst.Path, existing.Size(), tmp, si.Size(), under, sig, blocks)
		}}
	}
	share := delta.ShareOf(shares.N, 0)
	st, made, err := s.SignPatch(ctx, dst.Path, existing.Size(), tmp, final, si.Size(), put, shares, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		_, err := delta.Diff(ctx, sig, local, si.Size(), w, delta.DiffOptions{InPlace: tmp == "", Ahead: tmp != "", Blocks: blocks, Share: share})
		return err
	})
	if lerr := local.failed(); lerr != nil {
		return st, nil, &localDeltaError{lerr}
	}
	return st, made, err
}

// moreSessions are up to n-1 sessions at far's end besides the one a
// delta has, with release for them: asked for at once, each a channel
// opened where none is idle.
func (c *copier) moreSessions(ctx context.Context, far Endpoint, n int) (ss []DeltaSession, release func()) {
	got := make([]DeltaSession, max(n-1, 0))
	releases := make([]func(), len(got))
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			s, rel, err := c.opts.Delta.DeltaSession(ctx, far.FS)
			if err != nil {
				errs[i] = err
				return
			}
			if z, ok := s.(compressor); ok {
				z.Compress(c.opts.Compress)
			}
			got[i], releases[i] = s, rel
		})
	}
	wg.Wait()
	for i, s := range got {
		if s != nil {
			ss = append(ss, s)
		} else if len(ss) == i {
			c.logf("delta: %s: a session for a share: %v", far, errs[i])
		}
	}
	return ss, func() {
		for _, rel := range releases {
			if rel != nil {
				rel()
			}
		}
	}
}

// pushShares has the shares of a push's delta in n after the first
// applied, on the sessions sessions gives (each share i on the (i-1)th
// in turn, one after another where there are fewer), each diffed from
// local as the signature arrives.
func (c *copier) pushShares(ctx context.Context, n int, sessions func() []DeltaSession, local io.ReaderAt, basis string, basisSize int64, tmp string, size int64, under bool,
	sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error) {
	ss := sessions()
	if len(ss) == 0 {
		return delta.Stats{}, errors.New("no session for the other shares")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu  sync.Mutex
		all delta.Stats
		wg  sync.WaitGroup
	)
	for k, s := range ss {
		wg.Go(func() {
			for i := 1 + k; i < n && ctx.Err() == nil; i += len(ss) {
				sh := delta.Share{N: n, I: i}
				st, err := s.PatchShare(ctx, basis, basisSize, tmp, size, under, sh, func(w io.Writer) error {
					_, err := delta.Diff(ctx, sig, local, size, w, delta.DiffOptions{Blocks: blocks, Ahead: true, Share: sh})
					return err
				})
				if err != nil {
					cancel(fmt.Errorf("share %d of %d: %w", sh.I, sh.N, err))
					return
				}
				mu.Lock()
				all.Add(st)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all, context.Cause(ctx)
}

// readsOf reads r, a file of size bytes, keeping its first failure: an
// error, or the file ending before size.
type readsOf struct {
	r    io.ReaderAt
	size int64
	mu   sync.Mutex
	err  error
}

func (l *readsOf) ReadAt(p []byte, off int64) (int, error) {
	n, err := l.r.ReadAt(p, off)
	if err != nil && (err != io.EOF || off+int64(n) < l.size) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		l.mu.Lock()
		if l.err == nil {
			l.err = err
		}
		l.mu.Unlock()
	}
	return n, err
}

func (l *readsOf) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// DeltaShares is how many shares (delta.Share) the delta of a file whose
// basis is basisSize bytes goes in, each on a channel of its own, on
// connections of their own where the end has several: one channel
// carries a window (2 MiB) a round trip, about 20 MB/s at 100 ms,
// however much of the file changed, and a file large enough to have
// ranges to spread takes two (section 8c of docs/DESIGN.md).
func DeltaShares(basisSize int64) int {
	if basisSize < 2*delta.DefaultRangeLen {
		return 1
	}
	return 4
}

// PushShares has a push's delta go in N shares, Others applying all but
// the first (helper.Shares).
type PushShares struct {
	N      int
	Others func(ctx context.Context, under bool, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error)
}

// aheadShares is a delta session that may hold a pull asked ahead: the
// share of it asked for the file at path, if one was.
type aheadShares interface {
	AheadShare(path string) (delta.Share, bool)
}

// pullSessions is s and the sessions the shares of src's pull go on
// besides, with release for them: as many as DeltaShares says and the
// far end gives, each in the place of the share of its pull asked ahead
// where it holds one.
func (c *copier) pullSessions(ctx context.Context, s DeltaSession, src Endpoint, basisSize int64) (ss []DeltaSession, release func()) {
	more, release := c.moreSessions(ctx, src, DeltaShares(basisSize))
	ss = append([]DeltaSession{s}, more...)
	placed := make([]DeltaSession, len(ss))
	var rest []DeltaSession
	for _, s := range ss {
		a, ok := s.(aheadShares)
		if !ok {
			rest = append(rest, s)
			continue
		}
		if sh, ok := a.AheadShare(src.Path); ok && sh.N == len(ss) && sh.I < len(ss) && placed[sh.I] == nil {
			placed[sh.I] = s
		} else {
			rest = append(rest, s)
		}
	}
	for i := range placed {
		if placed[i] == nil {
			placed[i], rest = rest[0], rest[1:]
		}
	}
	return placed, release
}

// pullDelta signs the local target, read through basis, has the helper
// diff the source against it, and rebuilds the file into out: a fresh
// file, or a clone of the target (under), which the caller then checks
// and cuts to the new size, or with --inplace the target itself (basis
// and out the same file), which it cuts. A large file's delta comes in
// shares over several channels at once (DeltaShares), the target signed
// once for all of them.
func (c *copier) pullDelta(ctx context.Context, s DeltaSession, src, dst Endpoint, si, existing fs.FileInfo, basis io.ReaderAt, out io.WriterAt, under bool) (delta.Stats, error) {
	inPlace := c.opts.InPlace
	if inPlace {
		if err := out.(UpdateFile).Truncate(delta.InPlaceMark(existing.Size(), si.Size())); err != nil {
			return delta.Stats{}, &localDeltaError{err}
		}
	}
	ss, release := c.pullSessions(ctx, s, src, existing.Size())
	defer release()
	n := len(ss)
	if n > 1 {
		c.logf("delta: %s: asked for in %d shares, on a channel each", src, n)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The target is signed as the delta comes back and is applied: the
	// helper diffs each range once the blocks it is matched against are
	// there (in place its own, for a fresh file those near it), and in
	// place a range is rewritten only after its blocks were read here.
	// It is signed once, into a log each share's request sends from; a
	// share asked ahead sent its own.
	bl := delta.BlockSize(existing.Size())
	log := delta.SignLog(func(w io.Writer) error { return delta.SignTo(ctx, basis, existing.Size(), bl, w) })
	// Each share's request hands its delta over as it comes; the
	// shares are applied together once all have come.
	b := delta.Basis{R: basis, Size: existing.Size(), BlockLen: bl, InPlace: inPlace, Under: under}
	g := delta.Gather(ctx, n, b, out, si.Size())
	var wg sync.WaitGroup
	for i, s := range ss {
		share := delta.ShareOf(n, i)
		wg.Go(func() {
			if _, err := s.DiffStream(ctx, src.Path, si.Size(), log.CopyTo, inPlace, share, g.Apply(i)); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	got, _ := g.Wait()
	err := context.Cause(ctx)
	cancel(nil)
	log.Unused()
	serr := log.Err()
	var pe *fs.PathError
	if serr != nil && (errors.As(serr, &pe) || errors.Is(serr, io.ErrUnexpectedEOF)) {
		return got, &localDeltaError{serr}
	}
	if err == nil && inPlace {
		if err = out.(UpdateFile).Truncate(si.Size()); err != nil {
			err = &localDeltaError{err}
		}
	}
	// What this end rebuilt and checked counts, not what the far end says
	// it sent.
	return got, err
}

// An UpdateFile is a target opened to be rewritten in place (--inplace).
type UpdateFile interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	io.Closer
}

// updater is an end that can open an existing regular file to be
// rewritten in place.
type updater interface {
	OpenUpdate(name string) (UpdateFile, error)
}

// openUpdate opens name on fsys to be rewritten in place, checking it is
// still size bytes.
func openUpdate(fsys FS, name string, size int64) (UpdateFile, error) {
	u, ok := fsys.(updater)
	if !ok {
		return nil, errors.New("this end cannot rewrite a file in place")
	}
	f, err := u.OpenUpdate(name)
	if err != nil {
		return nil, err
	}
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err == nil && fi.Size() != size {
			err = fmt.Errorf("%d bytes, not the %d listed: it changed", fi.Size(), size)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
