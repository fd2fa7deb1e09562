package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"strings"
	"sync"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/pipeline"
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
//
// Tar mode is a mover of the one copy engine, not a copy of its own:
// copyDir's walk lists the tree for it (tarplan.go); it chooses what goes
// how (tar.go), makes the directories (tardirs.go), moves the small new
// files in archives (tarstream.go, tarup.go, tardown.go) and hands the
// others to copyFile beside the streams (tarside.go).

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
	// Streams is the most tar streams (exec channels) at once; 0 for
	// what the files are worth (tarStreamsFor), up to 4.
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
)

// tarEnd is a server that runs tar commands (protocol.SFTP).
type tarEnd interface {
	TarProbe(ctx context.Context) (protocol.TarSupport, error)
	TarExtract(ctx context.Context, dir string, o protocol.TarOptions) (io.WriteCloser, error)
	TarCreate(ctx context.Context, dir string, names iter.Seq[[]string], o protocol.TarOptions) (io.ReadCloser, error)
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
	m     pipeline.Meter // the streams' limit and progress
	// parallel bounds the side copies' files on the parallel pipeline.
	parallel slots.Slots
	// hold has report keep the reports in held, while the files of a new
	// tree are in its temporary tree.
	hold bool
	held []FileReport
	// mu orders the merges of copyOthers that run at once.
	mu sync.Mutex
}

// copyDirTar copies the tree at src to dst with tar streams for its
// small new files, and reports whether it did: false leaves the tree to
// copyDir (TarAuto found too few small files or no tar on the server).
// Each step works on the tree's own tarRun: list, choose, make the
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
	root := newTarDir("", src, dst, si)
	switch di, err := dirTarget(dst); {
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
	defer p.release()
	if a, ok := end.(tarAheader); ok {
		// The streams took theirs; the rest, or all when tar mode is
		// not used, end.
		defer a.DropTarAhead()
	}
	if ctx.Err() != nil {
		return true
	}
	// An upload chosen by the listing alone goes ahead before the
	// server's tar is known: the probe is a command, a login shell
	// started on the server, which can take longer than the listing, all
	// of it before the first byte of the large files. Should the server
	// have no GNU tar, the small files go over SFTP instead
	// (streamBeside). A download's listing is remote and ends about when
	// the probe does, so going ahead there gains nothing.
	probeLater := upload && c.opts.Tar.Mode == TarAuto
	var support protocol.TarSupport
	var use bool
	var err error
	if probeLater {
		use = run.worth(p)
	} else {
		support, use, err = run.choose(p)
	}
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
	if !probeLater {
		run.compress(support)
	}
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
	} else {
		// The local end makes its directories itself, as copyDir does.
		run.makeLocalDirs(ctx, newDirs)
	}
	// In a new tree every file is in the temporary tree until it takes
	// the target's name: what is reported of it waits for that.
	run.hold = run.whole
	batches, errs := run.streamBeside(ctx, p.small, newDirs, early, probeLater)
	if run.whole {
		run.finishTree(ctx, batches, errs, late)
		late = nil
	}
	run.account(batches, errs, len(newDirs))
	run.copyOthers(ctx, late, c.opts.Progress, otherWorkers)
	if c.opts.Preserve {
		// -p sets the directories' modes and times once every file is in,
		// deepest first, with the walk's own (finish).
		c.addFix(root.dst(), root.info, 0)
		for _, d := range p.dirs {
			c.addFix(d.dst(), d.info, strings.Count(d.rel, "/")+1)
		}
	}
	return true
}

// worth decides from the listing alone whether the tree would go over
// tar: always with --tar; under TarAuto when it has enough small new
// files, and for a new tree on upload no file worth resuming.
func (run *tarRun) worth(p *tarPlan) bool {
	c, t := run.c, run.c.opts.Tar
	if t.Mode != TarAuto {
		return true
	}
	minFiles := int(cmp0(int64(t.MinFiles), defaultTarMinFiles))
	if len(p.small) < minFiles {
		return false
	}
	// A new tree's large files go into its temporary tree, where a killed
	// run leaves nothing --resume can find: a tree with a file worth
	// resuming keeps to SFTP mode unless --tar says otherwise.
	if run.upload && run.root.existing == nil {
		for _, f := range p.other {
			if f.info.Size() >= journalMinSize {
				c.logf("tar mode not used: %s is large enough to be resumed if the copy is cut", f.src())
				return false
			}
		}
	}
	return true
}

// choose decides whether the listed tree goes over tar and returns what
// the server's tar offers. TarAuto falls back to SFTP (false, no error)
// where tar would not pay or is missing; TarForce fails on a server
// without GNU tar.
func (run *tarRun) choose(p *tarPlan) (protocol.TarSupport, bool, error) {
	if !run.worth(p) {
		return protocol.TarSupport{}, false, nil
	}
	support, err := run.probed()
	if err == nil {
		return support, true, nil
	}
	if run.c.opts.Tar.Mode == TarAuto {
		run.c.logf("tar mode not used: %v", err)
		return support, false, nil
	}
	remote := run.root.dst()
	if !run.upload {
		remote = run.root.src()
	}
	hint := "tar mode needs GNU tar on the server; copy without --tar to use SFTP"
	if protocol.Lost(err) {
		hint = ""
	}
	return support, false, &Error{Op: "tar mode on", Path: remote.String(), Err: err, Hint: hint}
}

// probed waits for the probe's answer: what the server's tar offers, or
// why tar mode cannot be used.
func (run *tarRun) probed() (protocol.TarSupport, error) {
	support, err := run.c.tarSupport(run.end)
	if err == nil && !support.GNU {
		err = fmt.Errorf("the server's tar is not GNU tar (%q)", support.Version)
	}
	return support, err
}

// compress sets the streams' compression from -C and what the server's
// tar has.
func (run *tarRun) compress(support protocol.TarSupport) {
	run.po = protocol.TarOptions{Preserve: run.c.opts.Preserve}
	if !run.c.opts.Tar.Compress {
		return
	}
	switch {
	case support.Zstd:
		run.po.Compress = "zstd"
	case support.Gzip:
		run.po.Compress = "gzip"
	default:
		run.c.logf("-C: the server's tar has neither zstd nor gzip: the stream goes uncompressed")
	}
}

// report tells Options.Report what became of a file, or holds it while
// the file is in a new tree that has not taken its name.
func (run *tarRun) report(f FileReport) {
	if run.hold {
		run.held = append(run.held, f)
		return
	}
	run.c.report(f)
}

// fail records err, a failure at the tree's target, as c.fail does, its
// report held as report holds it.
func (run *tarRun) fail(err *Error) {
	if !run.hold {
		run.c.fail(err)
		return
	}
	run.c.record(func(res *Result) { res.Errors = append(res.Errors, err) })
	run.held = append(run.held, FileReport{Path: err.Path, Status: StatusFailed, Error: err.Error()})
}

// account records the outcome of every file of the streams.
func (run *tarRun) account(files [][]*tarFile, errs []error, newDirs int) {
	c := run.c
	quiet := !c.reporting() && c.opts.Logf == nil
	for i, batch := range files {
		if err := errs[i]; err != nil {
			c.fail(&Error{Op: fmt.Sprintf("copy %d files over tar to", len(batch)), Path: run.root.dst().String(), Err: err})
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
				c.report(FileReport{Path: f.src().String(), Status: StatusFailed, Error: err.Error(), Target: f.dst().String()})
				continue
			}
			c.res.Files++
			c.res.Bytes += f.info.Size()
			// A tree's files' paths are made from their names: a million
			// reports that go nowhere would cost seconds.
			if !quiet {
				src, dst := f.src(), f.dst()
				c.report(FileReport{Path: src.String(), Bytes: f.info.Size(), Status: StatusCopied, Target: dst.String()})
				c.logf("copied %s to %s: %d bytes (tar)", src, dst, f.info.Size())
			}
		}
	}
}
