// Package transfer plans and runs copies: it decides what goes where with
// scp's rules for files, trees and existing or missing targets, and makes
// every file appear under its final name only once all of it has arrived.
// One walk and one scheduler run every copy; the bytes go by a mover: one
// stream, a small-file batch or the parallel pipeline (over SFTP or
// locally), tar streams for a tree of small files, or the legacy scp
// protocol.
package transfer

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/internal/starttrace"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/window"
)

// Endpoint is a path on one end of a copy.
type Endpoint struct {
	FS   FS
	Path string
}

func (e Endpoint) String() string { return e.FS.Label() + e.Path }

// Progress follows the bytes of a run. Its methods are called from the
// copy's jobs, many files being in flight, but one call at a time.
type Progress interface {
	StartFile(name string, size int64)
	Add(n int)
	EndFile()
}

// Options say how to copy.
type Options struct {
	Recursive bool // -r: copy directories and their contents
	Preserve  bool // -p: keep modes, access and modification times
	// Modes and Times keep one half of Preserve alone: the source's
	// mode (rsync's -p) or its access and modification times (rsync's
	// -t). hpncp sync sets them; Preserve implies both.
	Modes, Times bool
	// Limiter caps the run's total bytes per second; nil for no limit.
	Limiter *rate.Limiter
	// BufferSize is the size of each pipeline buffer; 0 for the default.
	BufferSize int
	// Progress, when not nil, is told of every file and byte.
	Progress Progress
	// Logf, when not nil, receives the -v log: a line for each file and
	// directory, and the decisions of the pipeline, tar mode and resume.
	// Calls come one at a time.
	Logf func(format string, args ...any)
	// Parallel says when and how large files use several streams.
	Parallel ParallelOptions
	// Trace, when not nil, is told of every window decision of a file
	// copied over several streams (pipeline.ParallelOptions.Trace), with
	// the file's source path (--trace). Calls may come from several
	// files' copies at once.
	Trace func(file string, s window.Sample, p window.Plan, changed bool)

	// Skip says which files already at the target are left alone; the
	// zero value copies every file, as scp.
	Skip SkipMode
	// Verify compares the SHA-256 of each source with that of the written
	// file before it takes its final name; a mismatch fails the file.
	Verify bool
	// Shard, when not nil, keeps only the files of the run's part of a
	// job split between runs (--shard).
	Shard Part
	// FilesFrom, when not nil, lists the paths (clean, relative,
	// slash-separated, as ReadFileList returns them) to copy from the one
	// source directory to the same paths below the target directory,
	// which is created when missing, as are the directories between.
	FilesFrom []string
	// Report, when not nil, is told what happened to every file: copied,
	// skipped or failed. It is called from the copy's jobs, one call at a
	// time, in the order the files end.
	Report func(FileReport)
	// Resume keeps the temporary file of a copy that is interrupted or
	// loses its connection, with a journal entry in ResumeDir, and
	// continues such files where they stopped (see resume.go). It also
	// counts a target of the source's size and no older than it as
	// complete under the quick check.
	Resume bool
	// ResumeDir holds the journal (ResumeDir()); Resume needs it. Without
	// Resume, files of 64 MiB and more are journaled there when it is set,
	// so that a killed run can be resumed.
	ResumeDir string
	// Tar says when trees go over tar streams (tar.go).
	Tar TarOptions
	// Links says what becomes of symbolic and hard links (links.go).
	Links LinkOptions
	// Sparse keeps files' holes (--sparse, sparse.go): a local source's
	// holes are not read, and no block of zeros is written.
	Sparse bool
	// Delta, when not nil, sends a file whose target exists by rsync's
	// delta transfer (delta.go) through a helper at the remote end: only
	// the bytes the target lacks travel.
	Delta DeltaHosts
	// InPlace writes a file over its existing target where it lies
	// (rsync's --inplace) instead of beside it, renamed into place once
	// whole: a delta writes only what changed, a file that goes whole is
	// written from its start and cut to its size. A target that is not a
	// regular file, or cannot be opened for writing, and every file of a
	// sparse copy, is written beside it and renamed as without it.
	InPlace bool
	// Compress has deltas go zstd-compressed through the helper, both
	// ways (rsync's -z, scp-style -C): their literal data is what a slow
	// link pays for. Files that go whole over SFTP are not compressed.
	Compress bool
	// Helper, when not nil, hashes a remote end's files for --verify and
	// --checksum where a helper answers there (sum256), in place of the
	// server's sha256sum.
	Helper DeltaHosts
}

// Result counts what a run did.
type Result struct {
	Files  int   // regular files copied
	Dirs   int   // directories created
	Bytes  int64 // file bytes sent (a resumed file's tail only)
	Errors []error
	// MaxStreams and Conns are the most streams and connections one file
	// used at once; 1 and 0 when no file went over the parallel pipeline.
	MaxStreams int
	Conns      int
	// Skipped counts the files left alone because the target had them.
	Skipped int
	// Resumed counts the bytes of resumed files that a previous run had
	// written and this one did not send again; Bytes does not count them.
	Resumed int64
	// Links counts the symbolic and hard links made (--links,
	// --hard-links); Files does not count them.
	Links int
	// DeltaFiles counts the files sent as deltas (Files counts them
	// too); Literal is the bytes those sent, Matched the bytes their
	// targets' old versions gave.
	DeltaFiles int
	Literal    int64
	Matched    int64
	// Made, when not nil, is the stat of a file the run made at the
	// target, taken there: whose its new files are.
	Made fs.FileInfo
}

// maxDepth bounds recursion where no loop is seen (loop.go): a server
// whose REALPATH and links say nothing useful, or a tree that is endless
// by design, such as a hostile server's.
const maxDepth = 255

// ErrNotDirectory is returned when several sources are copied to a target
// that is not an existing directory.
var ErrNotDirectory = errors.New("not a directory")

// errNotRegular is a source that is neither a directory nor a regular
// file, which the copy leaves out.
var errNotRegular = errors.New("not a regular file")

// Copy copies every source to target with scp's rules: into target when it
// is an existing directory, otherwise as target (then only one source is
// allowed). A failing source is recorded in the result and the others are
// still copied. The returned error is non-nil only when the run could not
// go on: the target is unusable, or ctx was cancelled.
//
// A source on an SCP end, or any source to an SCP target, goes over the
// legacy scp protocol (scp.go), with the options it can honour
// (ValidateSCP); one end of each such copy must be local. The legacy
// protocol tells no files one by one: such a run calls no Report, and the
// caller builds its report from the result.
func Copy(ctx context.Context, srcs []Endpoint, target Endpoint, o Options) (_ *Result, err error) {
	target, err = Confine(target)
	if err != nil {
		return &Result{}, err
	}
	if overSCP(srcs, target) {
		if err := o.ValidateSCP(); err != nil {
			return &Result{}, err
		}
		o.Report = nil
	}
	if o.Links.Symlinks {
		srcs = slices.Clone(srcs)
		for i := range srcs {
			srcs[i] = NoFollow(srcs[i])
		}
	}
	c := newCopier(o, srcs, target)
	if err := checkHardLinks(srcs, o); err != nil {
		return c.res, err
	}
	for _, s := range srcs {
		c.prepare(ctx, s.FS)
	}
	c.prepare(ctx, target.FS)
	defer func() {
		c.finish(ctx)
		// A probe still running would leave its directory behind.
		c.umask.wait()
		if err == nil {
			err = ctx.Err()
		}
	}()
	var expanded []Endpoint
	for _, s := range srcs {
		names, err := expand(s)
		if err != nil {
			c.fail(err)
			continue
		}
		for _, n := range names {
			expanded = append(expanded, Endpoint{s.FS, n})
		}
	}

	if o.FilesFrom != nil {
		return c.copyList(ctx, expanded, target)
	}

	several := len(srcs) > 1 || len(expanded) > 1
	// The remote scp -t looks at its target itself, told that it must be
	// a directory when several sources go to it.
	targetIsDir := several
	if !isSCP(target.FS) {
		var st *statted
		targetIsDir, st, err = checkTarget(target, several, len(expanded) > 0)
		if err != nil {
			return c.res, err
		}
		c.target = st
	}

	targets := map[string]bool{}
	for _, s := range expanded {
		if err := ctx.Err(); err != nil {
			return c.res, err
		}
		if isSCP(s.FS) || isSCP(target.FS) {
			c.copySCP(ctx, s, target, targetIsDir)
			continue
		}
		si, err := c.statSource(s)
		if err != nil {
			c.fail(&Error{Op: "read", Path: s.String(), Err: err})
			continue
		}
		if !targetIsDir && si.IsDir() && o.Split() {
			c.fail(errShardTarget(s, target))
			continue
		}
		dst := target.Path
		if targetIsDir {
			base, err := sourceBase(s)
			if err != nil {
				c.fail(err)
				continue
			}
			dst = target.FS.Join(target.Path, base)
		}
		c.sameTarget(targets, dst)
		starttrace.From(ctx).Mark(starttrace.Target)
		c.copyAny(ctx, s, Endpoint{target.FS, dst}, si, "", 0, false, nil)
	}
	if err := ctx.Err(); err != nil {
		return c.res, err
	}
	return c.res, nil
}

type copier struct {
	opts      Options
	res       *Result
	tarProbes tarProbes // what tar each server has, asked once per run
	target    *statted  // the target operand as Copy found it (layout.go)
	// parallel bounds the files on the parallel pipeline at once; a tar
	// mode upload gives its side copies a bound of their own (tar.go).
	parallel slots.Slots
	// plan, when set, has the walk list the tree for it instead of
	// copying it.
	plan planner
	// direct holds the targets CopyFiles was told are new files in a
	// directory private to the run (Listed.Direct); read-only once the
	// copies start.
	direct map[string]bool
	// listed holds what CopyFiles was told its targets are
	// (Listed.Target), each taken once by statTarget.
	listed map[string]fs.FileInfo
	// helperStarted has the remote end's helper started once, at the
	// first file --verify hashes there, while that file is copied.
	helperStarted sync.Once
	// helperMissed has -v say once why the remote hashes are the
	// server's sha256sum's rather than a helper's.
	helperMissed sync.Once
	*sched
}

// planner receives a tree from the walk, which lists it as it would
// copy it (names checked, links followed, loops and depth bounded) but
// makes and copies nothing: tar mode chooses from the whole tree what
// goes how (tarplan.go). An error it returns fails the entry, as the
// walk fails one.
type planner interface {
	// dir is called as the walk enters the directory src, rel below the
	// source operand ("" for the operand), before it lists it; with an
	// error the walk leaves its entries out.
	dir(ctx context.Context, src, dst Endpoint, si fs.FileInfo, rel string) error
	// file is called for every regular file the run's shard keeps.
	file(src, dst Endpoint, si fs.FileInfo, rel string) error
}

func (c *copier) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Errors = append(c.res.Errors, err)
	var where string
	var te *Error
	if errors.As(err, &te) {
		where = te.Path
	}
	c.reportLocked(FileReport{Path: where, Status: StatusFailed, Error: err.Error()})
}

// failFile records that the file src could not be copied.
func (c *copier) failFile(src Endpoint, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Errors = append(c.res.Errors, err)
	c.reportLocked(FileReport{Path: src.String(), Status: StatusFailed, Error: err.Error()})
}

func (c *copier) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.opts.Logf(format, args...)
	}
}

// copyAny copies a file or, with -r, a directory whose info (links
// followed) is si, in a job of its own. rel is src's path relative to its
// source operand, "" for the operand itself. fresh says dst's directory
// was created by this run: dst cannot exist. at is the directory src on
// the walk's path, nil for a file or a source operand.
func (c *copier) copyAny(ctx context.Context, src, dst Endpoint, si fs.FileInfo, rel string, depth int, fresh bool, at *walkDir) {
	switch {
	case si.Mode()&fs.ModeSymlink != 0: // --links
		c.copySymlink(ctx, src, dst, rel)
	case si.IsDir():
		if !c.opts.Recursive {
			c.fail(&Error{Op: "copy", Path: src.String(), Err: errors.New("is a directory"),
				Hint: "use -r to copy directories"})
			return
		}
		// Tar mode takes a source operand's whole tree, or leaves it all.
		// Its listing records links for after its streams, forgotten
		// when the walk copies the tree instead.
		if rel == "" {
			m := c.links.mark()
			if c.copyDirTar(ctx, src, dst, si) {
				c.makeLinks(ctx, c.links.takePlanned(m))
				return
			}
			c.links.rollback(m)
		}
		c.goDir(ctx, src, dst, si, rel, depth, fresh, at)
	case si.Mode().IsRegular():
		if rel == "" {
			rel = src.FS.Base(src.Path)
		}
		if !c.opts.keeps(rel) || c.laterName(src, dst, si, fresh) {
			return
		}
		if c.plan != nil {
			if err := c.plan.file(src, dst, si, rel); err != nil {
				c.fail(err)
			}
			return
		}
		c.goFile(ctx, src, dst, si, fresh)
	default:
		c.fail(&Error{Op: "copy", Path: src.String(), Err: errNotRegular})
	}
}

// copyDir copies the directory src to dst. It calls listed once src is
// listed, before its entries are copied. at is src on the walk's path,
// nil for a source operand.
func (c *copier) copyDir(ctx context.Context, src, dst Endpoint, si fs.FileInfo, rel string, depth int, fresh bool, listed func(), at *walkDir) {
	at, walkErr := enterDir(src, si, depth, at)
	if walkErr != nil {
		c.fail(walkErr)
		return
	}
	if c.plan != nil {
		if err := c.plan.dir(ctx, src, dst, si, rel); err != nil {
			c.fail(err)
			return
		}
		c.walkEntries(ctx, src, dst, rel, depth, false, listed, at)
		return
	}
	created, err := c.targetDir(ctx, src.String(), dst, si.Mode().Perm(), fresh)
	if err != nil {
		c.fail(err)
		return
	}
	if c.walkEntries(ctx, src, dst, rel, depth, created, listed, at) && c.opts.Preserve {
		c.addFix(dst, attrsOf(si), depth)
	}
}

// targetDir makes ready the directory dst, where the directory src of
// permissions perm goes, for its entries: dst is made when missing, a
// link there replaced (dirTarget), and an existing directory taken as it
// is. fresh says dst's parent was made by this run: dst cannot exist. It
// reports whether this run made dst; an error says dst cannot take the
// entries. Every mover that writes a tree entry by entry (the walk, an
// scp download) readies its directories here.
func (c *copier) targetDir(ctx context.Context, src string, dst Endpoint, perm fs.FileMode, fresh bool) (created bool, err error) {
	var di fs.FileInfo
	err = fs.ErrNotExist
	if !fresh {
		di, err = dirTarget(dst)
	}
	switch {
	case err == nil && !di.IsDir():
		return false, &Error{Op: "copy " + src + " to", Path: dst.String(), Err: ErrNotDirectory}
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, &Error{Op: "stat", Path: dst.String(), Err: err}
	}
	made, err := c.makeDir(ctx, dst, perm)
	if !made {
		// Shards of one run, and sessions of an scp run, create the same
		// directories at once.
		if di, serr := dst.FS.Stat(dst.Path); serr == nil && di.IsDir() {
			return false, nil
		}
		return false, &Error{Op: "create directory", Path: dst.String(), Err: err, Hint: hintFor(err)}
	}
	c.record(func(r *Result) { r.Dirs++ })
	c.logf("created directory %s", dst)
	if err != nil {
		c.fail(err)
	}
	return true, nil
}

// walkEntries lists the directory src and copies each entry to dst, or
// hands it to the plan. created says dst was made by this run. It
// reports false when ctx ended the walk.
func (c *copier) walkEntries(ctx context.Context, src, dst Endpoint, rel string, depth int, created bool, listed func(), at *walkDir) bool {
	entries, err := readDir(ctx, src.FS, src.Path)
	switch {
	case err != nil && ctx.Err() != nil:
		return false
	case err != nil:
		c.fail(&Error{Op: "read directory", Path: src.String(), Err: err, Hint: listingHint(err)})
	}
	listed()
	for e := range c.dirEntries(ctx, src, entries, at) {
		c.copyAny(ctx, e.src, Endpoint{dst.FS, dst.FS.Join(dst.Path, e.name)}, e.info, path.Join(rel, e.name), depth+1, created, e.at)
	}
	return ctx.Err() == nil
}

// makeDir creates the directory dst for a source directory of
// permissions perm. Like scp, without -p the new directory gets perm as
// the receiving end's umask allows, and stays writable for the copy; -p
// sets the source's mode once every entry is in. It reports whether dst
// was created: its error is then the mode's, otherwise the mkdir's. Every
// mover that makes directories (the walk, tar mode, scp) makes them here.
func (c *copier) makeDir(ctx context.Context, dst Endpoint, perm fs.FileMode) (made bool, err error) {
	modeSet, err := c.mkdir(ctx, dst, perm)
	if err != nil {
		return false, err
	}
	if !c.opts.Preserve && !modeSet {
		return true, c.setMode(dst, perm|0o700)
	}
	return true, nil
}

// modeBits are the mode bits -p carries over.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ModeBits are the mode bits -p carries over, for a caller that keeps
// modes itself (hpncp sync).
const ModeBits = modeBits

// setMode gives a newly created file or directory the permissions perm as
// masked by the receiving end's umask, which it learns from the mode that
// end gave the new entry (SFTP offers no other way to ask).
func (c *copier) setMode(dst Endpoint, perm fs.FileMode) error {
	fi, err := dst.FS.Stat(dst.Path)
	if err != nil {
		return &Error{Op: "stat", Path: dst.String(), Err: err}
	}
	return c.setModeFrom(dst, fi, perm)
}

// setModeFrom is setMode for a dst already stat'ed as fi.
func (c *copier) setModeFrom(dst Endpoint, fi fs.FileInfo, perm fs.FileMode) error {
	created := fi.Mode().Perm()
	base := fs.FileMode(0o666)
	if fi.IsDir() {
		base = 0o777
	}
	mask := base &^ created
	mask |= (mask & 0o444) >> 2 // no exec where read is denied
	want := perm &^ mask
	if want == created {
		return nil
	}
	if err := dst.FS.Chmod(dst.Path, want); err != nil {
		return &Error{Op: "set mode of", Path: dst.String(), Err: err}
	}
	return nil
}

// copyFile copies one regular file. The bytes go to a temporary file beside
// dst, which is renamed to dst only when every byte arrived; on a failure
// an existing dst is left as it was and the temporary file is removed,
// unless --resume keeps it for the next run (resume.go).
func (c *copier) copyFile(ctx context.Context, src, dst Endpoint, si fs.FileInfo, fresh bool) (err error) {
	op := "copy " + src.String() + " to"
	// A file large enough for several streams has them opened now, while
	// the target is looked at and the temporary file created: on a long
	// path each is several round trips. Should the quick check skip the
	// file, they wait idle for the next one. Where the target may be
	// there and the file go as a delta, which needs none, they are opened
	// only once it goes whole.
	mayDelta := c.opts.Delta != nil && !fresh
	if !mayDelta {
		c.prepareStreams(ctx, src.FS, dst.FS, si.Size())
	}
	c.startHelper(ctx, src, dst)
	var existing fs.FileInfo
	var di fs.FileInfo
	serr := fs.ErrNotExist
	if !fresh {
		di, serr = c.statTarget(dst)
	}
	switch err := serr; {
	case err == nil && di.IsDir():
		return &Error{Op: op, Path: dst.String(), Err: errors.New("is a directory")}
	case err == nil:
		existing = di
	case !errors.Is(err, fs.ErrNotExist):
		return &Error{Op: op, Path: dst.String(), Err: err}
	}
	if existing != nil && c.opts.Skip != CopyAlways {
		why, sum, err := c.skip(ctx, src, dst, si, existing)
		if err != nil {
			return err
		}
		if why != "" {
			c.forgetTarget(dst)
			c.record(func(r *Result) { r.Skipped++ })
			c.report(FileReport{Path: src.String(), Status: StatusSkipped, SHA256: sum, Target: dst.String(), Reason: why})
			c.logf("skipped %s: %s has it already", src, dst)
			return nil
		}
	}

	if existing == nil {
		c.learnUmask(ctx, dst)
	}
	start := time.Now()
	if ok, n, err := c.putSmall(ctx, src, dst, si, existing); ok {
		if err != nil {
			return err
		}
		c.done(src, dst, n, 0, "", start)
		return nil
	}
	part, err := c.resumePoint(ctx, src, dst, si)
	if err != nil {
		return err
	}
	from := part.resumed()
	// A copy an earlier run left part done goes on from where it stopped;
	// otherwise a changed file goes as a delta where it can. A delta cut
	// short keeps nothing: the next run's costs as little again.
	if from == 0 && c.deltaOK(src, dst, si, existing) {
		if done, err := c.copyDelta(ctx, src, dst, si, existing, start); done {
			return err
		}
	}
	if mayDelta {
		c.prepareStreams(ctx, src.FS, dst.FS, si.Size())
	}
	big := c.parallelOK(src.FS, dst.FS, si.Size())
	release, err := c.reserve(ctx, src, dst, si, big)
	if err != nil {
		return err
	}
	defer release()
	var f io.ReadCloser
	switch {
	case big && isRemote(src.FS):
		// The streams open the source on sessions of their own: a reader
		// here would cost a round trip and hold a session they want.
		f = io.NopCloser(strings.NewReader(""))
	case c.opts.Sparse && !isRemote(src.FS) && !big:
		f, err = openHoleReader(src.Path, from)
	case from > 0:
		f, err = part.openSource(ctx, src)
	default:
		f, err = c.openSource(ctx, src, si)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Op: "read", Path: src.String(), Err: err}
	}
	defer f.Close()
	var in io.Reader = f
	var srcHash *hashingReader
	// The streams read a big file on handles of their own; its sum is
	// taken beside them (sumAhead).
	if c.opts.Verify && from == 0 && !big {
		srcHash = &hashingReader{r: f, h: sha256.New()}
		in = srcHash
	}

	// --inplace: the file is written over its target where it lies, as
	// rsync writes it, rather than beside it and renamed: no second copy
	// (a large file whose disk has no room for two), and the target's
	// inode, other names and holders with it, takes the new bytes. A cut
	// run leaves it part rewritten until the next. A copy an earlier run
	// left part done goes on in its temporary file instead.
	var out io.WriteCloser
	var tmp string
	unmarked := false // --inplace: the mark came off (every byte written)
	if from == 0 && c.inPlace(existing) {
		if out, err = openInPlace(ctx, dst, existing.Size(), si.Size()); err != nil {
			c.logf("inplace: %s is written beside and renamed: %v", dst, err)
		} else {
			tmp = dst.Path
			part.forget() // no temporary file to keep a journal of
			part = nil
		}
	}
	if tmp == "" {
		if out, tmp, err = part.openTemp(ctx, dst); err != nil {
			return &Error{Op: op, Path: dst.String(), Err: err, Hint: hintFor(err)}
		}
	}
	tmpEnd := Endpoint{dst.FS, tmp}
	closed := false
	defer func() {
		if err == nil {
			return
		}
		if !closed {
			_ = out.Close()
		}
		if tmp == dst.Path {
			// The mark is on still, unless every byte was written and
			// what failed came after (--verify, the attributes): then it
			// is put back where the end still answers.
			if unmarked && setSize(dst.FS, dst.Path, delta.InPlaceMark(0, si.Size())) != nil {
				c.logf("inplace: %s is left rewritten, its mark not put back", dst)
			} else {
				c.logf("inplace: %s is left part rewritten, longer than the source", dst)
			}
			return
		}
		if part.keep(ctx, err) {
			c.logf("resume: kept %s for --resume", tmpEnd)
			return
		}
		// The removal must happen even when ctx was cancelled: that is when
		// a half-written temporary file is most likely.
		part.removed(dst.FS.Remove(tmp))
	}()

	prog := fileProgress(c.opts.Progress)
	if prog != nil {
		prog.StartFile(src.FS.Base(src.Path), si.Size()-from)
		defer prog.EndFile()
	}
	var n, dataEnd int64
	var ahead *summing     // the source's sum, taken beside the streams
	var behind *follower   // the written file's, taken behind them
	var ti fs.FileInfo     // the temporary file's stat, once written
	var applied *fileAttrs // the mode and times ti shows set already
	attrs := func() fileAttrs {
		return c.finalAttrs(attrsOf(si), existing, func() fs.FileMode {
			return c.newFileMode(ctx, dst, si.Mode().Perm())
		})
	}
	// Near enough for -v: the first write goes out now, the first read
	// is asked for now.
	starttrace.From(ctx).Mark(starttrace.FirstByte)
	if big {
		// The streams open the file on handles of their own. This one
		// closes meanwhile: waiting for it would hold every stream back a
		// round trip.
		closed = true
		closeErr := make(chan error, 1)
		go func() { closeErr <- out.Close() }()
		// Its mode and times are set once every byte is acknowledged,
		// with the size check's stat; with --verify, only once the sums
		// compared. The streams read the source on their own: --verify
		// hashes it where it lies meanwhile, so that only the written
		// file's hash is left once they are done.
		// The written file is hashed behind them (follow), so that
		// only their last bytes are left to hash when they are done.
		early := attrs
		if c.opts.Verify || tmp == dst.Path {
			// The mode and times are set once the sums compared, or
			// the mark came off, which sets the time.
			early = nil
		}
		if c.opts.Verify {
			ahead = c.sumAhead(ctx, src, si.Size())
			defer ahead.stop()
			// Holes are not written: a sparse copy's file is hashed
			// once whole.
			if !c.opts.Sparse {
				if behind = c.follow(ctx, tmpEnd, si.Size(), part.resumed()); behind != nil {
					defer behind.stop()
				}
			}
		}
		n, ti, applied, err = c.copyParallel(ctx, src, dst.FS, tmp, si.Size(), part, prog, early, behind)
		if cerr := <-closeErr; cerr != nil && err == nil {
			err = cerr
		}
	} else {
		po := pipeline.Options{BufferSize: bufferFor(c.opts.BufferSize, si.Size()), Limiter: c.opts.Limiter}
		if prog != nil {
			po.Progress = prog.Add
		}
		if part != nil {
			po.Progress = part.appendedThen(po.Progress)
		}
		n, dataEnd, err = copyStream(ctx, out, in, from, c.opts.Sparse, po)
		if err == nil {
			closed = true
			err = out.Close()
		}
		if err == nil && c.opts.Sparse {
			err = finishSparse(dst.FS, tmp, dataEnd, from+n)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Op: op, Path: dst.String(), Err: err, Hint: hintFor(err)}
	}
	if from+n != si.Size() {
		return &Error{Op: "read", Path: src.String(),
			Err: fmt.Errorf("file changed size during the copy: expected %d bytes, read %d", si.Size(), from+n)}
	}
	if tmp == dst.Path {
		// Every byte is written: the mark comes off.
		if err = setSize(dst.FS, dst.Path, si.Size()); err != nil {
			return &Error{Op: op, Path: dst.String(), Err: err}
		}
		unmarked = true
		ti = nil
	}
	var sum string
	var check func() error
	if c.opts.Verify {
		check = func() error {
			var srcSum func() ([]byte, error)
			switch {
			case ahead != nil:
				srcSum = ahead.wait
			case srcHash != nil:
				srcSum = func() ([]byte, error) { return srcHash.h.Sum(nil), nil }
			}
			var verr error
			var tmpSum func() ([]byte, error)
			if behind != nil {
				tmpSum = behind.wait
			}
			sum, verr = c.verify(ctx, src, dst, tmpEnd, srcSum, tmpSum, si.Size())
			return verr
		}
	}
	// ti, when the parallel streams took it, spares the size check a
	// round trip.
	// A SetAttrs tried with the stat (early) and not applied was refused.
	t := tempFile{dst: dst, tmp: tmp, op: op, applied: applied, setRefused: big && !c.opts.Verify && applied == nil}
	if err := t.finish(ctx, from+n, ti, attrs, check); err != nil {
		return err
	}
	part.forget()
	c.done(src, dst, n, from, sum, start)
	return nil
}

// inPlace reports whether a file going whole is written over existing,
// its target, where it lies (--inplace): only a regular file, and not in
// a sparse copy, which writes no block of zeros and would leave the old
// bytes where the new file has a hole.
func (c *copier) inPlace(existing fs.FileInfo) bool {
	return c.opts.InPlace && !c.opts.Sparse && existing != nil && existing.Mode().IsRegular()
}

// openInPlace opens dst, a regular file of old bytes, for writing over
// from its start, and marks it (delta.InPlaceMark) until the copy takes the
// mark off: a failed copy leaves the old bytes past what it wrote, as
// rsync's does. Its writes go front to back; the parallel streams open
// it again on handles of their own.
func openInPlace(ctx context.Context, dst Endpoint, old, size int64) (io.WriteCloser, error) {
	w, ok := dst.FS.(streamWriter)
	l, local := dst.FS.(Local)
	switch {
	case !ok || local && !Confined(l):
		// A local receiving end opens its files below the target, no
		// link followed; one that is not confined writes beside.
		return nil, errors.New("this end cannot write a file in place")
	case !local:
		// A server's open follows a link: the target is looked at
		// first, and a link at it is replaced, as without --inplace,
		// not written through.
		lr, ok := dst.FS.(LinkReader)
		if !ok {
			return nil, errors.New("this end cannot tell a link from a file")
		}
		fi, err := lr.Lstat(dst.Path)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, errors.New("not a regular file: a link there is replaced, not written through")
		}
	}
	f, err := w.OpenWriterAt(ctx, dst.Path, 1)
	if err != nil {
		return nil, err
	}
	if err := setSize(dst.FS, dst.Path, delta.InPlaceMark(old, size)); err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Writer
		io.Closer
	}{io.NewOffsetWriter(f, 0), f}, nil
}

// done records that src was copied to dst: n bytes, with hex SHA-256 sum
// when one was computed.
func (c *copier) done(src, dst Endpoint, n, from int64, sum string, start time.Time) {
	c.record(func(r *Result) {
		r.Files++
		r.Bytes += n
		r.Resumed += from
	})
	c.report(FileReport{Path: src.String(), Bytes: n, Status: StatusCopied, SHA256: sum, ResumedFrom: from, Target: dst.String()})
	c.logf("copied %s to %s: %d bytes in %s", src, dst, n, since(start))
}

// ValidName reports whether name, as listed by the far end, is a single
// path element that cannot lead outside the directory it is joined to.
func ValidName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return fmt.Errorf("invalid name %q", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("invalid name %q: contains a separator", name)
	case strings.ContainsRune(name, '\\') && isWindowsLocal:
		return fmt.Errorf("invalid name %q: contains a separator", name)
	}
	return nil
}

// sourceBase returns the name a source takes inside a target directory.
func sourceBase(s Endpoint) (string, error) {
	base := s.FS.Base(s.Path)
	if err := ValidName(base); err != nil {
		abs, aerr := s.FS.Abs(s.Path)
		if aerr != nil {
			return "", &Error{Op: "resolve", Path: s.String(), Err: aerr}
		}
		base = s.FS.Base(abs)
		if err := ValidName(base); err != nil {
			return "", &Error{Op: "copy", Path: s.String(), Err: errors.New("has no name to copy it under"),
				Hint: "name a directory below it, or give the target's full name"}
		}
	}
	return base, nil
}

// expand turns a source into the paths it names: a remote pattern is
// globbed on the server, as scp does; local patterns were the shell's job.
func expand(s Endpoint) ([]string, error) {
	// The remote scp -f expands its own.
	if s.FS.Label() == "" || isSCP(s.FS) || !strings.ContainsAny(s.Path, "*?[") {
		return []string{s.Path}, nil
	}
	matches, err := s.FS.Glob(s.Path)
	if err != nil {
		return nil, &Error{Op: "expand", Path: s.String(), Err: err}
	}
	if len(matches) == 0 {
		// A name with brackets may be literal; Stat will tell.
		return []string{s.Path}, nil
	}
	sort.Strings(matches)
	for _, m := range matches {
		// The names come from the server: one that is not a plain name
		// would decide where the copy lands.
		if err := ValidName(s.FS.Base(m)); err != nil {
			return nil, &Error{Op: "expand", Path: s.String(), Err: err}
		}
	}
	return matches, nil
}
