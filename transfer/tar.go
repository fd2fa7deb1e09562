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
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/time/rate"

	"github.com/hpncp/hpncp/protocol"
)

// Tar mode: a tree of many small files goes to or from a server that has
// GNU tar as tar streams over a few exec channels, one archive each,
// instead of file by file over SFTP, where every small file costs several
// round trips. Large files still take the parallel SFTP pipeline.
//
// Nothing appears under a final name before all of it arrived: on upload
// the archive names only temporary files (.hpncp.NAME.XXXX.part), renamed
// into place after tar exited 0 and their sizes were checked; on download
// every entry is checked against the files asked for and written to a
// temporary file, renamed once the remote tar exited 0. A stream that
// fails leaves its temporary files removed and directories created, as
// SFTP mode does.

// TarMode says when a directory tree goes over tar streams.
type TarMode int

const (
	// TarOff copies every file over SFTP.
	TarOff TarMode = iota
	// TarAuto uses tar streams for a tree with at least
	// TarOptions.MinFiles small new files, when the server has GNU tar.
	TarAuto
	// TarForce uses tar streams for every tree copied between this host
	// and a server (--tar); a server without GNU tar fails the copy.
	TarForce
)

// TarOptions say when and how trees go over tar streams.
type TarOptions struct {
	Mode TarMode
	// Compress has the streams compressed: zstd where the server's tar
	// has it, otherwise gzip (-C).
	Compress bool
	// Streams is the most tar streams (exec channels) at once; 0 for 4.
	Streams int
	// MaxSize is the size from which a file goes over SFTP rather than
	// tar; 0 for 1 MiB.
	MaxSize int64
	// MinFiles is how many small new files make TarAuto choose tar; 0
	// for 64.
	MinFiles int
}

const (
	defaultTarStreams  = 4
	defaultTarMaxSize  = 1 << 20
	defaultTarMinFiles = 64
	// tarStreamFiles is the fewest files worth a stream of their own:
	// each stream costs a command start on the server.
	tarStreamFiles = 32
	// metaWorkers bounds the SFTP requests in flight at once for
	// listings, renames and removals.
	metaWorkers = 64
	// otherWorkers is how many files copyOthers copies at once.
	otherWorkers = uploadParallelFiles
	// uploadParallelFiles bounds the large files of a tar mode upload on
	// the parallel pipeline at once, in place of parallelFiles. Each file
	// costs about a dozen round trips around its bytes (create, open the
	// streams, close, stat, chmod, rename): at 50 ms, five files of
	// 10 MiB at once beside the tar streams finished 0.3-0.5 s sooner
	// than two at a time, while downloads did better with two
	// (bench/many.sh, README).
	uploadParallelFiles = 5
)

// tarEnd is a server that runs tar commands (protocol.SFTP).
type tarEnd interface {
	TarProbe(ctx context.Context) (protocol.TarSupport, error)
	TarExtract(ctx context.Context, dir string, o protocol.TarOptions) (io.WriteCloser, error)
	TarCreate(ctx context.Context, dir string, names []string, o protocol.TarOptions) (io.ReadCloser, error)
}

// tarProbes remembers each server's answer, so that it is asked once.
type tarProbes map[tarEnd]*tarProbe

type tarProbe struct {
	done chan struct{} // closed when s and err are set
	s    protocol.TarSupport
	err  error
}

// tarFor returns the server that would run tar for a copy from src to
// dst, and whether it is the target (an upload).
func (c *copier) tarFor(src, dst Endpoint) (end tarEnd, upload, ok bool) {
	t := c.opts.Tar
	if t.Mode == TarOff || c.opts.Verify || c.opts.FilesFrom != nil {
		return nil, false, false
	}
	srcLocal, dstLocal := src.FS.Label() == "", dst.FS.Label() == ""
	switch {
	case srcLocal && !dstLocal:
		end, ok = dst.FS.(tarEnd)
		return end, true, ok
	case !srcLocal && dstLocal:
		end, ok = src.FS.(tarEnd)
		return end, false, ok
	}
	return nil, false, false
}

// tarFile is a file that goes over a tar stream.
type tarFile struct {
	*tarNode
	tmp   string    // its temporary name, a full path on the target
	mtime time.Time // from the archive, on download
	err   error     // the file's own failure
	done  bool      // every byte arrived under tmp
	seen  bool      // the archive had an entry for it
}

// copyDirTar copies the tree at src to dst with tar streams for its
// small new files, and reports whether it did: false leaves the tree to
// copyDir (TarAuto found too few small files or no tar on the server).
// Each step works on the tree's own tarRun: decide, list, make the
// directories, stream beside the side copies, finish a new tree, account.
func (c *copier) copyDirTar(ctx context.Context, src, dst Endpoint, si fs.FileInfo) bool {
	end, upload, ok := c.tarFor(src, dst)
	if !ok {
		return false
	}
	// Tar mode keeps its own account of the tree (results, held reports)
	// from this goroutine: the jobs still running for earlier operands
	// finish first.
	c.wg.Wait()
	root := &tarNode{src: src, dst: dst, info: si}
	switch di, err := dst.FS.Stat(dst.Path); {
	case err == nil && !di.IsDir():
		c.fail(&Error{Op: "copy " + src.String() + " to", Path: dst.String(), Err: ErrNotDirectory})
		return true
	case err == nil:
		root.existing = di
	case !errors.Is(err, fs.ErrNotExist):
		c.fail(&Error{Op: "stat", Path: dst.String(), Err: err})
		return true
	}
	run := &tarRun{c: c, end: end, upload: upload, root: root, base: dst.Path, parallel: c.parallel}
	p := run.list(ctx)
	if ctx.Err() != nil {
		return true
	}
	support, use, err := run.choose(p)
	switch {
	case err != nil:
		c.fail(err)
		return true
	case !use:
		return false
	}
	for _, e := range p.errs {
		c.fail(e)
	}
	if !run.makeBase(ctx) {
		return true
	}
	run.compress(support)
	newDirs := p.newDirs()
	early, late := p.other, []*tarNode(nil)
	if upload {
		// The large files go over SFTP while the streams run: the new
		// directories they go into are made over SFTP first and left out
		// of the archives; the files of one that could not be made wait
		// until the streams made it.
		var made int
		newDirs, made, early, late = run.makeOtherDirs(ctx, p.other, newDirs)
		c.res.Dirs += made
		run.parallel = make(chan struct{}, uploadParallelFiles)
	} else {
		// The local end makes its directories itself, as copyDir does.
		run.makeLocalDirs(newDirs)
	}
	// In a new tree every file is in the temporary tree until it takes
	// the target's name: what is reported of it waits for that.
	run.hold = run.whole
	batches, errs := run.streamBeside(ctx, p.small, newDirs, early)
	if run.whole {
		run.finishTree(ctx, batches, errs, late)
		late = nil
	}
	run.account(batches, errs, len(newDirs))
	run.copyOthers(ctx, late, c.opts.Progress)
	if c.opts.Preserve && ctx.Err() == nil {
		run.preserveDirs(append([]*tarNode{root}, p.dirs...))
	}
	return true
}

// choose decides whether the listed tree goes over tar and returns what
// the server's tar offers. TarAuto falls back to SFTP (false, no error)
// where tar would not pay or is missing; TarForce fails on a server
// without GNU tar.
func (r *tarRun) choose(p *tarPlan) (protocol.TarSupport, bool, error) {
	c, t := r.c, r.c.opts.Tar
	minFiles := int(cmp0(int64(t.MinFiles), defaultTarMinFiles))
	if t.Mode == TarAuto && len(p.small) < minFiles {
		return protocol.TarSupport{}, false, nil
	}
	// A new tree's large files go into its temporary tree, where a killed
	// run leaves nothing --resume can find: a tree with a file worth
	// resuming keeps to SFTP mode unless --tar says otherwise.
	if t.Mode == TarAuto && r.upload && r.root.existing == nil {
		for _, f := range p.other {
			if f.info.Size() >= journalMinSize {
				c.logf("tar mode not used: %s is large enough to be resumed if the copy is cut", f.src)
				return protocol.TarSupport{}, false, nil
			}
		}
	}
	support, err := c.tarSupport(r.end)
	if err == nil && !support.GNU {
		err = fmt.Errorf("the server's tar is not GNU tar (%q)", support.Version)
	}
	if err == nil {
		return support, true, nil
	}
	if t.Mode == TarAuto {
		c.logf("tar mode not used: %v", err)
		return support, false, nil
	}
	remote := r.root.dst
	if !r.upload {
		remote = r.root.src
	}
	hint := "tar mode needs GNU tar on the server; copy without --tar to use SFTP"
	if protocol.Lost(err) {
		hint = ""
	}
	return support, false, &Error{Op: "tar mode on", Path: remote.String(), Err: err, Hint: hint}
}

// makeBase creates the tree's root when the target lacks it. A new tree
// on the server is made under a temporary name and renamed into place
// whole: one rename instead of one a file, which over a long path is the
// difference between a round trip and thousands. It reports false when
// the copy cannot go on.
func (r *tarRun) makeBase(ctx context.Context) bool {
	c, root := r.c, r.root
	dst := root.dst
	r.whole = r.upload && root.existing == nil
	if r.whole {
		r.base = dst.FS.Join(dst.FS.Dir(dst.Path), TempName(dst.FS.Base(dst.Path)))
	}
	if root.existing != nil {
		return true
	}
	base := Endpoint{dst.FS, r.base}
	var err error
	if r.whole {
		err = c.mkdirPrivate(ctx, base)
	} else {
		err = dst.FS.Mkdir(r.base)
	}
	if err != nil {
		c.fail(&Error{Op: "create directory", Path: dst.String(), Err: err})
		return false
	}
	c.res.Dirs++
	c.logf("created directory %s", base)
	if !c.opts.Preserve && !r.whole {
		if err := c.setMode(base, root.info.Mode().Perm()|0o700); err != nil {
			c.fail(err)
		}
	}
	return true
}

// compress sets the streams' compression from -C and what the server's
// tar has.
func (r *tarRun) compress(support protocol.TarSupport) {
	r.po = protocol.TarOptions{Preserve: r.c.opts.Preserve}
	if !r.c.opts.Tar.Compress {
		return
	}
	switch {
	case support.Zstd:
		r.po.Compress = "zstd"
	case support.Gzip:
		r.po.Compress = "gzip"
	default:
		r.c.logf("-C: the server's tar has neither zstd nor gzip: the stream goes uncompressed")
	}
}

// makeLocalDirs creates a download's new directories, parents first.
func (r *tarRun) makeLocalDirs(newDirs []*tarNode) {
	c := r.c
	for _, d := range newDirs {
		if err := d.dst.FS.Mkdir(d.dst.Path); err != nil {
			c.fail(&Error{Op: "create directory", Path: d.dst.String(), Err: err})
			continue
		}
		c.res.Dirs++
		if !c.opts.Preserve {
			if err := c.setMode(d.dst, d.info.Mode().Perm()|0o700); err != nil {
				c.fail(err)
			}
		}
	}
}

// streamBeside runs the tar streams of small, and on upload of newDirs,
// while the files of early go over SFTP. The streams and the side copies
// share the run's Progress, which shows one of them at a time.
func (r *tarRun) streamBeside(ctx context.Context, small, newDirs, early []*tarNode) ([][]*tarFile, []error) {
	var streams, side Progress
	if p := r.c.opts.Progress; p != nil {
		shared := &sharedProgress{p: p}
		streams, side = shared.view(), shared.view()
	}
	var batches [][]*tarFile
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		batches, errs = r.c.runTarStreams(ctx, r, small, newDirs, streams)
	}()
	r.copyOthers(ctx, early, side)
	<-done
	return batches, errs
}

// finishTree gives a new tree, once every stream succeeded, the files
// that waited for the streams, its root's mode and its final name. When
// any of that fails, or ctx is done, the temporary tree is removed and
// every file of it reported failed, those that waited too. The reports
// held meanwhile go out at the end.
func (r *tarRun) finishTree(ctx context.Context, batches [][]*tarFile, errs []error, late []*tarNode) {
	c, src, dst := r.c, r.root.src, r.root.dst
	err := errors.Join(errs...)
	if err == nil {
		r.copyOthers(ctx, late, c.opts.Progress)
		late = nil
	}
	if err == nil && ctx.Err() == nil {
		err = r.setRootMode(ctx)
	}
	if err == nil && ctx.Err() == nil {
		if rerr := dst.FS.Rename(r.base, dst.Path); rerr != nil {
			e := &Error{Op: "copy " + src.String() + " to", Path: dst.String(), Err: rerr}
			r.fail(e)
			err = e
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// The removal must happen even when ctx was cancelled.
		removeTree(dst.FS, r.base)
		notDone := fmt.Errorf("%s was not complete: %w", dst, err)
		for _, b := range batches {
			for _, f := range b {
				if f.err == nil {
					f.err = notDone
				}
			}
		}
		for i, h := range r.held {
			if h.Status == StatusCopied {
				c.res.Files--
				c.res.Bytes -= h.Bytes
				r.held[i] = FileReport{Path: h.Path, Status: StatusFailed, Error: notDone.Error()}
			}
		}
		for _, f := range late {
			r.held = append(r.held, FileReport{Path: f.src.String(), Status: StatusFailed, Error: notDone.Error()})
		}
	}
	r.hold = false
	for _, h := range r.held {
		c.report(h)
	}
	r.held = nil
}

// report tells Options.Report what became of a file, or holds it while
// the file is in a new tree that has not taken its name.
func (r *tarRun) report(f FileReport) {
	if r.hold {
		r.held = append(r.held, f)
		return
	}
	r.c.report(f)
}

// fail records err, a failure at the tree's target, as c.fail does, its
// report held as report holds it.
func (r *tarRun) fail(err *Error) {
	if !r.hold {
		r.c.fail(err)
		return
	}
	r.c.record(func(res *Result) { res.Errors = append(res.Errors, err) })
	r.held = append(r.held, FileReport{Path: err.Path, Status: StatusFailed, Error: err.Error()})
}

// mkdirPrivate creates the temporary directory of a new tree owner-only
// (0700): nothing below it can be reached until setRootMode opens it,
// just before it takes its final name. Files then go in under their final
// names and modes.
func (c *copier) mkdirPrivate(ctx context.Context, dir Endpoint) error {
	c.learnUmask(ctx, dir)
	err := protocol.ErrNoBatch
	if m, ok := dir.FS.(modeMkdirer); ok {
		err = m.MkdirMode(ctx, dir.Path, 0o700)
	}
	if errors.Is(err, protocol.ErrNoBatch) {
		err = dir.FS.Mkdir(dir.Path)
	}
	if err != nil {
		return err
	}
	// Set too when the mode went with the mkdir: a server may ignore it
	// (pkg/sftp's does).
	if err := dir.FS.Chmod(dir.Path, 0o700); err != nil {
		_ = dir.FS.Remove(dir.Path)
		return err
	}
	return nil
}

// setRootMode gives the temporary directory of a new tree the mode the
// tree's root gets (-p sets the source's exactly once the files are in).
func (r *tarRun) setRootMode(ctx context.Context) error {
	c, dst := r.c, r.root.dst
	mode := r.root.info.Mode().Perm() | 0o700
	if !c.opts.Preserve {
		mode = c.newFileMode(ctx, dst, mode)
	}
	if mode == 0o700 {
		return nil
	}
	if err := dst.FS.Chmod(r.base, mode); err != nil {
		e := &Error{Op: "set mode of", Path: dst.String(), Err: err}
		r.fail(e)
		return e
	}
	return nil
}

// makeOtherDirs creates over SFTP, parents first, the new directories
// below run.base that the files of other go into, so that those files
// start beside the tar streams rather than after them: in a new tree they
// are directories of the temporary tree, so nothing takes a final name
// early. It returns the new directories left for the archives to make,
// how many it made, the files that can start now and those that wait for
// the streams: the files of a directory it could not make, which a stream
// may yet make (and report on if it cannot).
func (run *tarRun) makeOtherDirs(ctx context.Context, other, newDirs []*tarNode) (rest []*tarNode, made int, early, late []*tarNode) {
	c := run.c
	need := map[*tarNode]bool{}
	for _, f := range other {
		for d := f.parent; d != run.root && d.existing == nil && !need[d]; d = d.parent {
			need[d] = true
		}
	}
	if len(need) == 0 {
		return newDirs, 0, other, nil
	}
	// newDirs lists parents before children: a level at a time, the
	// directories of one level are made at once.
	var levels [][]*tarNode
	for _, d := range newDirs {
		if !need[d] {
			continue
		}
		depth := strings.Count(d.rel, "/")
		for len(levels) <= depth {
			levels = append(levels, nil)
		}
		levels[depth] = append(levels[depth], d)
	}
	failed := map[*tarNode]bool{}
	dstFS := run.root.dst.FS
	for _, level := range levels {
		errs := make([]error, len(level))
		forEach(len(level), metaWorkers, func(i int) {
			d := level[i]
			switch {
			case ctx.Err() != nil:
				errs[i] = ctx.Err()
				return
			case failed[d.parent]:
				errs[i] = errors.New("its parent was not made")
				return
			}
			at := Endpoint{dstFS, dstFS.Join(run.base, d.rel)}
			hasMode, err := c.mkdir(ctx, at, d.info)
			if err == nil && !hasMode && !c.opts.Preserve {
				err = c.setMode(at, d.info.Mode().Perm()|0o700)
			}
			errs[i] = err
		})
		for i, d := range level {
			if errs[i] != nil {
				failed[d] = true
				c.logf("tar: %s not created over SFTP (%v): its large files wait for the tar streams", d.dst, errs[i])
				continue
			}
			made++
			c.logf("created directory %s", Endpoint{dstFS, dstFS.Join(run.base, d.rel)})
		}
	}
	for _, d := range newDirs {
		if !need[d] || failed[d] {
			rest = append(rest, d)
		}
	}
	for _, f := range other {
		if failed[f.parent] {
			late = append(late, f)
		} else {
			early = append(early, f)
		}
	}
	return rest, made, early, late
}

// copyOthers copies the files tar streams do not carry over SFTP, a few
// at once (into the temporary tree when the whole tree is new), telling
// progress, when not nil, of their bytes: each costs round trips of its
// own before and after its bytes, and a large file's first stream alone
// fills no long path.
func (r *tarRun) copyOthers(ctx context.Context, files []*tarNode, progress Progress) {
	c := r.c
	var todo []*tarNode
	for _, f := range files {
		if f.existing != nil && !f.existing.IsDir() && r.skipListed(f) {
			continue
		}
		todo = append(todo, f)
	}
	type outcome struct {
		res     Result
		reports []FileReport
	}
	outs := make([]outcome, len(todo))
	shared := &sharedProgress{p: progress}
	forEach(len(todo), otherWorkers, func(i int) {
		if ctx.Err() != nil {
			return
		}
		// A copier of its own for each file: copyFile records into it,
		// and the outcomes are merged in order below. Its large files
		// take the run's slots on the parallel pipeline.
		sub := &copier{opts: c.opts, res: &Result{}, sched: c.sched, parallel: r.parallel}
		sub.opts.Report = func(f FileReport) { outs[i].reports = append(outs[i].reports, f) }
		sub.opts.Progress = nil
		if progress != nil {
			sub.opts.Progress = shared.view()
		}
		f := todo[i]
		dst := f.dst
		if r.whole {
			dst.Path = dst.FS.Join(r.base, f.rel)
		}
		// A file of the temporary tree or of a directory this run made
		// cannot exist yet: copyFile need not look.
		fresh := r.whole || f.parent != r.root && f.parent.existing == nil
		if err := sub.copyFile(ctx, f.src, dst, f.info, fresh); err != nil {
			sub.failFile(f.src, err)
		}
		outs[i].res = *sub.res
	})
	for _, o := range outs {
		c.res.Files += o.res.Files
		c.res.Bytes += o.res.Bytes
		c.res.Skipped += o.res.Skipped
		c.res.Errors = append(c.res.Errors, o.res.Errors...)
		c.res.MaxStreams = max(c.res.MaxStreams, o.res.MaxStreams)
		c.res.Conns = max(c.res.Conns, o.res.Conns)
		for _, f := range o.reports {
			r.report(f)
		}
	}
}

// skipListed decides from the target's listing alone what the quick
// check and --ignore-existing would: it saves the round trip of copyFile's
// own look at the target. Other cases are left to copyFile.
func (r *tarRun) skipListed(f *tarNode) bool {
	c := r.c
	skip := false
	switch c.opts.Skip {
	case SkipExisting:
		skip = true
	case SkipQuick:
		skip = f.info.Size() == f.existing.Size() && f.info.ModTime().Unix() == f.existing.ModTime().Unix()
	}
	if skip {
		c.res.Skipped++
		r.report(FileReport{Path: f.src.String(), Status: StatusSkipped})
		c.logf("skipped %s: %s has it already", f.src, f.dst)
	}
	return skip
}

// startTarProbe asks end, once per run, what tar it has.
func (c *copier) startTarProbe(ctx context.Context, end tarEnd) {
	if c.tarProbes == nil {
		c.tarProbes = tarProbes{}
	}
	if _, ok := c.tarProbes[end]; ok {
		return
	}
	p := &tarProbe{done: make(chan struct{})}
	c.tarProbes[end] = p
	go func() {
		defer close(p.done)
		p.s, p.err = end.TarProbe(ctx)
	}()
}

// tarSupport waits for the answer of end's probe.
func (c *copier) tarSupport(end tarEnd) (protocol.TarSupport, error) {
	p := c.tarProbes[end]
	<-p.done
	return p.s, p.err
}

func cmp0[T int64 | int](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// preserveDirs gives directories their source's mode and times (-p),
// deepest first, once nothing more is written into them.
func (run *tarRun) preserveDirs(dirs []*tarNode) {
	c := run.c
	errs := make([]error, len(dirs))
	forEach(len(dirs), metaWorkers, func(i int) {
		d := dirs[len(dirs)-1-i]
		if err := d.dst.FS.Chmod(d.dst.Path, d.info.Mode()&modeBits); err != nil {
			errs[i] = &Error{Op: "set mode of", Path: d.dst.String(), Err: err}
			return
		}
		if err := d.dst.FS.Chtimes(d.dst.Path, atimeOf(d.info), d.info.ModTime()); err != nil {
			errs[i] = &Error{Op: "set times of", Path: d.dst.String(), Err: err}
		}
	})
	for _, err := range errs {
		if err != nil {
			c.fail(err)
		}
	}
}

// forEach runs f(0) to f(n-1), up to workers at once.
func forEach(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, workers) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// tarRun is one tree's copy in tar mode: what its steps, streams and
// side copies share. Each tree has its own, passed to every step: nothing
// of it is set in the copier.
type tarRun struct {
	c      *copier
	end    tarEnd
	upload bool
	root   *tarNode
	po     protocol.TarOptions
	// base is the directory tar works in on the server, on upload: the
	// target, or with whole set a temporary directory that becomes the
	// target once every stream succeeded. Files then go under their own
	// names; otherwise each under a temporary name beside its target.
	base  string
	whole bool
	m     *meter
	// parallel bounds the side copies' files on the parallel pipeline.
	parallel chan struct{}
	// hold has report keep the reports in held, while the files of a new
	// tree are in its temporary tree.
	hold bool
	held []FileReport
}

// runTarStreams moves small over up to Streams tar streams at once,
// telling prog (when not nil) of the bytes. On
// upload the new directories travel in the archives too, each stream
// carrying the ones its files need and the first stream all of them. It
// returns the files of each stream and the stream's failure.
func (c *copier) runTarStreams(ctx context.Context, run *tarRun, small, newDirs []*tarNode, prog Progress) ([][]*tarFile, []error) {
	if len(small) == 0 && (!run.upload || len(newDirs) == 0) {
		return nil, nil
	}
	batches := splitBatches(small, cmp0(c.opts.Tar.Streams, defaultTarStreams))
	files := make([][]*tarFile, len(batches))
	var total int64
	for i, b := range batches {
		for _, n := range b {
			files[i] = append(files[i], &tarFile{tarNode: n})
			total += n.info.Size()
		}
	}
	c.logf("tar: %d files in %d stream(s) to %s (compression %q)", len(small), len(batches), run.root.dst, run.po.Compress)
	run.m = &meter{ctx: ctx, lim: c.opts.Limiter, add: func(int) {}}
	if prog != nil {
		// prog is safe for use by the streams at once.
		run.m.add = prog.Add
		prog.StartFile(fmt.Sprintf("%d files (tar)", len(small)), total)
		defer prog.EndFile()
	}
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i := range batches {
		var dirs []*tarNode
		if run.upload {
			dirs = dirsFor(files[i], newDirs, i == 0)
		}
		wg.Go(func() {
			if run.upload {
				errs[i] = c.uploadTar(ctx, run, dirs, files[i])
			} else {
				errs[i] = c.downloadTar(ctx, run, files[i])
			}
		})
	}
	wg.Wait()
	return files, errs
}

// account records the outcome of every file of the streams.
func (run *tarRun) account(files [][]*tarFile, errs []error, newDirs int) {
	c := run.c
	for i, batch := range files {
		if err := errs[i]; err != nil {
			c.fail(&Error{Op: fmt.Sprintf("copy %d files over tar to", len(batch)), Path: run.root.dst.String(), Err: err})
		} else if run.upload && i == 0 {
			c.res.Dirs += newDirs
		}
		for _, f := range batch {
			err := f.err
			if err == nil {
				err = errs[i]
			}
			if err != nil {
				// A file's own failure counts apart from its stream's.
				if _, own := f.err.(*Error); own {
					c.res.Errors = append(c.res.Errors, f.err)
				}
				c.report(FileReport{Path: f.src.String(), Status: StatusFailed, Error: err.Error()})
				continue
			}
			c.res.Files++
			c.res.Bytes += f.info.Size()
			c.report(FileReport{Path: f.src.String(), Bytes: f.info.Size(), Status: StatusCopied})
			c.logf("copied %s to %s: %d bytes (tar)", f.src, f.dst, f.info.Size())
		}
	}
}

// removeTree removes a temporary tree the copy made, files first.
func removeTree(fsys FS, dir string) {
	list, _ := fsys.ReadDir(dir)
	forEach(len(list), metaWorkers, func(i int) {
		p := fsys.Join(dir, list[i].Name())
		if list[i].IsDir() {
			removeTree(fsys, p)
		} else {
			_ = fsys.Remove(p)
		}
	})
	_ = fsys.Remove(dir)
}

// splitBatches cuts files, in order, into up to n runs of about the same
// bytes, none of fewer than tarStreamFiles files but the last.
func splitBatches(files []*tarNode, n int) [][]*tarNode {
	n = max(1, min(n, len(files)/tarStreamFiles))
	// Each file costs a header and padding besides its bytes.
	const overhead = 1024
	var total int64
	for _, f := range files {
		total += f.info.Size() + overhead
	}
	per := total/int64(n) + 1
	var out [][]*tarNode
	var cur []*tarNode
	var sum int64
	for _, f := range files {
		cur = append(cur, f)
		sum += f.info.Size() + overhead
		if sum >= per && len(out) < n-1 {
			out = append(out, cur)
			cur, sum = nil, 0
		}
	}
	return append(out, cur)
}

// dirsFor returns the new directories a stream must create before its
// files, parents first: all of them for the first stream.
func dirsFor(files []*tarFile, newDirs []*tarNode, all bool) []*tarNode {
	if all {
		return newDirs
	}
	need := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.rel); d != "."; d = path.Dir(d) {
			need[d] = true
		}
	}
	var out []*tarNode
	for _, d := range newDirs {
		if need[d.rel] {
			out = append(out, d)
		}
	}
	return out
}

// uploadTar sends files, and the directories dirs, in one archive to a
// tar -x in run.base. Unless the whole tree is new, each file goes under
// a temporary name, renamed into place once tar has exited 0 and its size
// is checked, and on failure every temporary file is removed.
func (c *copier) uploadTar(ctx context.Context, run *tarRun, dirs []*tarNode, files []*tarFile) (err error) {
	dstFS := run.root.dst.FS
	for _, f := range files {
		if run.whole {
			f.tmp = dstFS.Join(run.base, f.rel)
		} else {
			f.tmp = dstFS.Join(dstFS.Dir(f.dst.Path), TempName(path.Base(f.rel)))
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		if err != nil && !run.whole {
			removeTemps(dstFS, files)
		}
	}()
	start := time.Now()
	w, err := run.end.TarExtract(sctx, run.base, run.po)
	if err != nil {
		return err
	}
	werr := c.writeArchive(w, dirs, files, run)
	if werr != nil {
		// Stop tar before its exit is awaited: it must not take a cut
		// archive for a whole one.
		cancel()
	}
	if cerr := w.Close(); werr == nil {
		werr = cerr
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
	if err := checkUploaded(dstFS, run.root, files); err != nil {
		return err
	}
	checked := time.Now()
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
	forEach(len(files), metaWorkers, func(i int) {
		f := files[i]
		if f.err != nil {
			return
		}
		if rerr := dstFS.Rename(f.tmp, f.dst.Path); rerr != nil {
			f.err = &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(), Err: rerr}
			_ = dstFS.Remove(f.tmp)
		}
	})
	return nil
}

// checkUploaded lists every directory that received temporary files, so
// that each file's size on the server is checked before it takes its
// name: a listing per directory, not a round trip per file.
func checkUploaded(dstFS FS, root *tarNode, files []*tarFile) error {
	byDir := map[string][]*tarFile{}
	var order []string
	for _, f := range files {
		d := dstFS.Dir(f.tmp)
		if _, ok := byDir[d]; !ok {
			order = append(order, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	errs := make([]error, len(order))
	// Every listing at once: they cost round trips, not bandwidth.
	forEach(len(order), 4*metaWorkers, func(i int) {
		list, err := dstFS.ReadDir(order[i])
		if err != nil {
			errs[i] = &Error{Op: "read directory", Path: root.dst.FS.Label() + order[i], Err: err}
			return
		}
		size := make(map[string]int64, len(list))
		for _, e := range list {
			if e.Mode().IsRegular() {
				size[e.Name()] = e.Size()
			}
		}
		for _, f := range byDir[order[i]] {
			got, ok := size[dstFS.Base(f.tmp)]
			switch {
			case f.err != nil:
				// Left out of the archive (writeArchive).
			case !ok:
				f.err = &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(),
					Err: errors.New("tar reported success but the file is missing")}
			case got != f.info.Size():
				f.err = &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(),
					Err: fmt.Errorf("short write: %d bytes arrived of %d sent", got, f.info.Size())}
				_ = dstFS.Remove(f.tmp)
			}
		}
	})
	return errors.Join(errs...)
}

// removeTemps removes the temporary files of a failed stream.
func removeTemps(fsys FS, files []*tarFile) {
	forEach(len(files), metaWorkers, func(i int) {
		if files[i].tmp != "" {
			_ = fsys.Remove(files[i].tmp)
		}
	})
}

// writeArchive writes the archive of dirs and files, compressed as
// compress says, to w.
func (c *copier) writeArchive(w io.Writer, dirs []*tarNode, files []*tarFile, run *tarRun) error {
	// Small writes would each become an SSH packet of their own.
	bw := bufio.NewWriterSize(w, 256<<10)
	var out io.Writer = bw
	var comp io.WriteCloser
	switch run.po.Compress {
	case "zstd":
		zw, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest))
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
		in, err := f.src.FS.Open(f.src.Path)
		if err != nil {
			// Left out of the archive, as SFTP mode leaves it out of the
			// copy: the tree's other files still go.
			f.err = &Error{Op: "read", Path: f.src.String(), Err: err}
			continue
		}
		err = c.writeEntry(tw, f, in, run)
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
// temporary name.
func (c *copier) writeEntry(tw *tar.Writer, f *tarFile, in io.Reader, run *tarRun) error {
	name := f.rel
	if !run.whole {
		name = path.Join(path.Dir(f.rel), run.root.dst.FS.Base(f.tmp))
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: f.info.Size(),
		Mode: int64(protocol.UnixMode(f.info.Mode())),
		// Whole seconds, as SFTP mode sets them: archive/tar would round.
		ModTime: f.info.ModTime().Truncate(time.Second)}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, run.m.reader(in))
	switch {
	case errors.Is(err, tar.ErrWriteTooLong):
		n = f.info.Size() + 1
	case err != nil:
		return &Error{Op: "read", Path: f.src.String(), Err: err}
	}
	if n != f.info.Size() {
		// The archive cannot carry the file's bytes as they are now.
		return &Error{Op: "read", Path: f.src.String(),
			Err: fmt.Errorf("file changed size during the copy: expected %d bytes", f.info.Size())}
	}
	return nil
}

// meter counts the bytes of the streams for Progress and holds them to
// the run's bandwidth limit.
type meter struct {
	ctx context.Context
	lim *rate.Limiter // nil for no limit
	add func(int)
}

// reader returns r, metered.
func (m *meter) reader(r io.Reader) io.Reader { return &meteredReader{r: r, m: m} }

type meteredReader struct {
	r io.Reader
	m *meter
}

func (mr *meteredReader) Read(b []byte) (int, error) {
	if mr.m.lim != nil {
		// WaitN refuses more than the burst at once.
		b = b[:min(len(b), max(mr.m.lim.Burst(), 1))]
	}
	n, err := mr.r.Read(b)
	if n > 0 {
		mr.m.add(n)
		if mr.m.lim != nil {
			if werr := mr.m.lim.WaitN(mr.m.ctx, n); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return n, err
}

// downloadTar asks a tar -c in root's source for files and writes them
// below root's target, each to a temporary file that is renamed once tar
// has exited 0. On failure every temporary file is removed.
func (c *copier) downloadTar(ctx context.Context, run *tarRun, files []*tarFile) (err error) {
	root, po := run.root, run.po
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		if err != nil {
			removeTemps(root.dst.FS, files)
		}
	}()
	names := make([]string, len(files))
	want := make(map[string]*tarFile, len(files))
	for i, f := range files {
		names[i] = f.rel
		want[f.rel] = f
	}
	rc, err := run.end.TarCreate(sctx, root.src.Path, names, po)
	if err != nil {
		return err
	}
	var r io.Reader = rc
	switch po.Compress {
	case "zstd":
		zr, zerr := zstd.NewReader(rc, zstd.WithDecoderConcurrency(1))
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
	start := time.Now()
	rerr := receiveTar(r, want, run.m)
	if rerr != nil {
		cancel()
	}
	cerr := rc.Close()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case rerr != nil:
		// tar's own message, when it failed, says more than a cut stream.
		if cerr != nil {
			return fmt.Errorf("%w (%v)", cerr, rerr)
		}
		return rerr
	case cerr != nil && !tarSkipped(cerr, files):
		return cerr
	}
	received := time.Now()
	defer func() {
		c.logf("tar stream of %d files: received in %s, renamed in %s", len(files),
			received.Sub(start).Round(time.Millisecond), time.Since(received).Round(time.Millisecond))
	}()
	forEach(len(files), metaWorkers, func(i int) {
		f := files[i]
		if f.err != nil {
			return
		}
		if !f.done {
			f.err = &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(),
				Err: errors.New("missing from the tar stream")}
			return
		}
		if err := c.finishDownload(f); err != nil {
			f.err = err
			_ = f.dst.FS.Remove(f.tmp)
		}
	})
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
		f.err = &Error{Op: "read", Path: f.src.String(), Err: cause}
	}
	return true
}

// finishDownload gives a received file its mode and times and its final
// name.
func (c *copier) finishDownload(f *tarFile) error {
	tmp := Endpoint{f.dst.FS, f.tmp}
	if c.opts.Preserve {
		if err := tmp.FS.Chmod(f.tmp, f.info.Mode()&modeBits); err != nil {
			return &Error{Op: "set mode of", Path: f.dst.String(), Err: err}
		}
		if err := tmp.FS.Chtimes(f.tmp, atimeOf(f.info), f.mtime); err != nil {
			return &Error{Op: "set times of", Path: f.dst.String(), Err: err}
		}
	} else if err := tmp.FS.Chmod(f.tmp, c.newFileMode(context.Background(), f.dst, f.info.Mode().Perm())); err != nil {
		// The temporary file was created owner-only.
		return &Error{Op: "set mode of", Path: f.dst.String(), Err: err}
	}
	if err := f.dst.FS.Rename(f.tmp, f.dst.Path); err != nil {
		return &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(), Err: err}
	}
	return nil
}

// receiveTar reads an archive the server sent and writes each entry to a
// fresh temporary file beside its target. Every entry must be a regular
// file the copy asked for, once, under a clean relative name: anything
// else (links, devices, names leading out of the tree, unasked names) ends
// the stream with an error, since a server sending it cannot be trusted
// with the rest. A file whose size differs from the listing's fails alone.
func receiveTar(r io.Reader, want map[string]*tarFile, m *meter) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
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
		f := want[name]
		switch {
		case f == nil:
			return fmt.Errorf("tar stream: refusing %q: not a file that was asked for", h.Name)
		case f.seen:
			return fmt.Errorf("tar stream: refusing %q: sent twice", h.Name)
		case h.Size != f.info.Size():
			f.err = &Error{Op: "read", Path: f.src.String(),
				Err: fmt.Errorf("file changed size during the copy: expected %d bytes, the archive has %d", f.info.Size(), h.Size)}
			f.seen = true
			continue
		}
		f.seen = true
		dstFS := f.dst.FS
		out, tmp, err := createTemp(dstFS, dstFS.Dir(f.dst.Path), dstFS.Base(f.dst.Path))
		if err != nil {
			return &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(), Err: err, Hint: hintFor(err)}
		}
		f.tmp = tmp
		n, err := io.Copy(out, m.reader(tr))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("read the tar stream: cut short in %q: %w", h.Name, err)
			}
			return &Error{Op: "copy " + f.src.String() + " to", Path: f.dst.String(), Err: err, Hint: hintFor(err)}
		}
		if n != h.Size {
			return fmt.Errorf("read the tar stream: %q: %d bytes of %d", h.Name, n, h.Size)
		}
		f.done = true
		f.mtime = h.ModTime
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
