package job

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/mirror"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/transfer"
)

// SyncOperand is a source or the destination of a sync as given.
type SyncOperand struct {
	Location transfer.Location
	// Contents says a source's trailing slash (or "." as its last
	// element) copies what the directory holds, not the directory.
	Contents bool
	Slash    bool // the operand ends with a slash
}

// SyncJob is one run of hpncp sync: rsync's semantics (package mirror)
// over the ends and the engine of a copy.
type SyncJob struct {
	Sources []SyncOperand
	Dest    SyncOperand
	// Mirror are rsync's options; Push is the job's to set.
	Mirror mirror.Options
	// Options are the engine's options for the files sent (verification,
	// sparse files, resume) with the hooks that report them (Progress,
	// Report, Logf); Parallel, Limiter and ResumeDir are the job's to set.
	Options      transfer.Options
	Conn         Conn
	Tuning       Tuning
	Limit        int64 // bytes per second; 0 for none
	RemoveSource bool  // --remove-source-files
	// Verbose (-v, counted) and Itemize (-i) say which changes are
	// printed, as rsync prints them; Print, when not nil, receives each
	// such line.
	Verbose int
	Itemize bool
	Print   func(line string)
	// Failed, when not nil, is told of each file, directory or source
	// that failed, as it fails; the sync goes on with the others.
	Failed func(error)
	// Totals, when not nil, is told the files and bytes the plans so far
	// will send, after each source's plan (rsync's progress formats).
	Totals func(files int, bytes int64)
	// WholeFile is rsync's -W: no file goes as a delta. Otherwise a file
	// whose target exists does where a helper answers at the remote end
	// (Helper), as rsync's default for a remote copy.
	WholeFile bool
	// InPlace is rsync's --inplace: a changed file is written over its
	// target where it lies, as a delta or whole (transfer.Options.InPlace).
	InPlace bool
	// Compress is rsync's -z: deltas go zstd-compressed through the
	// helper (transfer.Options.Compress).
	Compress bool
	Helper   DeltaHelper
}

// SyncStats are rsync's --stats counts.
type SyncStats struct {
	Files, Dirs, Links            int
	Created, CreatedDirs, Deleted int
	Sent                          int
	TotalBytes, SentBytes         int64
	// Literal and Matched are the bytes of the files sent as deltas
	// that went over the wire, and that their targets' old versions
	// gave (rsync's literal and matched data).
	Literal, Matched int64
	Delta            bool // a file went as a delta
}

func (s *SyncStats) add(p *mirror.Plan) {
	f, d, l := p.Src.Counts()
	s.Files += f
	s.Dirs += d
	s.Links += l
	s.TotalBytes += p.Src.Bytes()
}

func (s *SyncStats) ran(r *mirror.Result) {
	if r.Engine != nil {
		s.Sent += r.Engine.Files
		s.SentBytes += r.Engine.Bytes
		s.Created += r.Engine.Files
		s.Literal += r.Engine.Literal
		s.Matched += r.Engine.Matched
		s.Delta = s.Delta || r.Engine.DeltaFiles > 0
	}
	s.CreatedDirs += r.Dirs
	s.Created += r.Dirs + r.Links
	s.Deleted += r.Deleted
}

// SyncResult is what a sync did, as far as it went.
type SyncResult struct {
	Stats SyncStats
	// Planned are the changes the plans held, in order (--json).
	Planned []report.PlannedChange
	// Engine is the first source's engine result; nil before one ran.
	Engine *transfer.Result
	// Took is the sync's time from the connected ends on.
	Took time.Duration
	// Failures counts the files, directories and sources that failed
	// (each told to SyncJob.Failed); DeleteSkipped the deletions
	// --max-delete stopped.
	Failures, DeleteSkipped int
	// Lost, when something failed, is the error of a connection given up
	// because its server stopped responding.
	Lost error
}

// SyncError is a sync given up on the way: a destination or an end it
// cannot use, or (Interrupted) the carrying out of a plan cut short.
type SyncError struct {
	Interrupted bool
	Err         error
	Hint        string
}

func (e *SyncError) Error() string { return e.Err.Error() }
func (e *SyncError) Unwrap() error { return e.Err }

// Sync runs j: it lists each source and its place in the destination,
// plans the changes as rsync would, and carries them out. The result is
// never nil. Errors about the options are *transfer.OptionError; a sync
// given up on the way is a *SyncError.
func Sync(ctx context.Context, j SyncJob) (*SyncResult, error) {
	res := &SyncResult{}
	mo := j.Mirror
	mo.Push = j.Dest.Location.Remote()
	tune, err := j.Tuning.settings(mo.Push)
	if err != nil {
		return res, err
	}
	eo := j.Options
	eo.Limiter = pipeline.NewLimiter(j.Limit)
	eo.Parallel = tune.parallel
	if err := ends.UseJournal(&eo); err != nil {
		return res, err
	}
	print := func(line string) {
		if j.Print != nil {
			j.Print(line)
		}
	}
	failed := func(err error) {
		res.Failures++
		if j.Failed != nil {
			j.Failed(err)
		}
	}

	ho := ends.Options{SSH: j.Conn.ssh(), RcvBuf: tune.rcvbuf, SndBuf: tune.sndbuf,
		CC: tune.cc, CCBestEffort: tune.ccBestEffort}
	if !mo.DryRun {
		// A sync that sends starts as a tree's copy (-r) does: the
		// connections its first plans will want are dialed beside the
		// first, and an upload's warmed, rather than after the listing
		// and the plan.
		locs := make([]transfer.Location, 0, len(j.Sources)+1)
		for _, s := range j.Sources {
			locs = append(locs, s.Location)
		}
		locs = append(locs, j.Dest.Location)
		// Local sources that are all files make no tree: their sync
		// starts as their copy does, its streams' sessions opened
		// ahead and the first connection warmed too.
		tree := !localFiles(locs[:len(locs)-1])
		ho.Predial = predial(locs, eo.Parallel, tree)
		ho.Warm, ho.WarmFirst = warms(locs, eo.Parallel, tree)
	}
	hosts := ends.New(ho)
	defer hosts.Close()
	defer hosts.AbortOnCancel(ctx)()
	{
		logf := func(string, ...any) {}
		if eo.Logf != nil {
			logf = eo.Logf
		}
		// The helper, where one answers, hashes -c's remote files, and
		// (but with -W, or in a dry run) rebuilds changed files from
		// deltas.
		helper := hosts.DeltaHosts(j.Helper.lines(logf))
		mo.Delta, mo.Logf = helper, eo.Logf
		eo.Helper = helper
		if !j.WholeFile && !mo.DryRun {
			eo.Delta = helper
		}
	}
	// --inplace writes over the targets where they lie, whether a file
	// goes as a delta or whole.
	eo.InPlace, eo.Compress = j.InPlace, j.Compress
	open := func(l transfer.Location) (transfer.Endpoint, error) {
		// Its path's stat comes with the SFTP start: the sync stats it
		// to know whether the target is a directory, then lists from it.
		e, err := hosts.EndpointStat(ctx, l)
		if errors.Is(err, ends.ErrNoSFTP) {
			return e, &SyncError{Err: err, Hint: "hpncp sync needs the server's SFTP subsystem (Subsystem sftp in sshd_config)"}
		}
		if err != nil {
			return e, err
		}
		// The trees are listed first, then small files sent in batches:
		// the sessions for both open now, meanwhile (a dry run sends
		// none).
		ends.Prepare(ctx, e, true, !mo.DryRun)
		if e.FS.Label() != "" {
			e.Path = ends.RemotePath(e.Path)
		}
		return e, nil
	}
	if mo.Recursive {
		// The remote tree the lister will have the helper walk is walked
		// as soon as the helper is up, beside the SFTP start.
		entries, nameBytes := mirror.TreeLimits()
		remoteSource := false
		for _, s := range j.Sources {
			if s.Location.Remote() {
				remoteSource = true
				p := ends.RemotePath(s.Location.Path)
				hosts.WalkAhead(s.Location, p, entries, nameBytes, mo.WalkPrune(rootName(p, s.Contents, path.Base), true))
			}
		}
		if !remoteSource && j.Dest.Location.Remote() && len(j.Sources) == 1 && j.Sources[0].Contents {
			hosts.WalkAhead(j.Dest.Location, ends.RemotePath(j.Dest.Location.Path), entries, nameBytes, mo.WalkPrune(".", false))
		}
	}
	if eo.Delta != nil && !mo.Checksum {
		pushAhead(hosts, j, eo)
	}
	dst, err := open(j.Dest.Location)
	if err != nil {
		return res, err
	}
	if eo.Delta != nil && !mo.Checksum {
		defer pullAhead(hosts, j, eo, dst)()
	}
	start := time.Now()
	planFiles, planBytes := 0, int64(0)
	srcEnds := make([]transfer.Endpoint, len(j.Sources))
	for i, s := range j.Sources {
		if srcEnds[i], err = open(s.Location); err != nil {
			return res, err
		}
	}
	destIsDir, created, err := j.prepareDest(dst, srcEnds[0], print)
	if err != nil {
		return res, &SyncError{Err: err, Hint: Hint(err)}
	}
	for i, s := range j.Sources {
		listed := time.Now()
		p, err := syncOne(ctx, mo, srcEnds[i], s, dst, destIsDir, created)
		if eo.Logf != nil {
			eo.Logf("sync: listed and planned in %v", time.Since(listed).Round(time.Millisecond))
		}
		if err != nil {
			failed(err)
			continue
		}
		for _, c := range p.Changes {
			res.Planned = append(res.Planned, report.PlannedChange{Item: c.Item, Name: c.Name, Line: c.Line()})
		}
		for _, e := range p.Errors {
			failed(e)
		}
		res.Stats.add(p)
		planFiles += p.Files
		planBytes += p.Bytes
		if j.Totals != nil {
			j.Totals(planFiles, planBytes)
		}
		if mo.DryRun {
			for _, c := range p.Changes {
				if c.Item != "" || c.Printed() || c.Verbose() && j.Verbose > 0 {
					print(c.Line())
				}
			}
			res.DeleteSkipped += p.DeleteSkipped
			continue
		}
		for _, c := range p.Changes {
			if c.Printed() || c.Verbose() && j.Verbose > 0 {
				print(c.Line())
			}
		}
		r, err := p.Run(ctx, mo, mirror.RunOptions{Engine: eo, Print: print, RemoveSource: j.RemoveSource})
		res.Stats.ran(r)
		res.DeleteSkipped += p.DeleteSkipped
		for _, e := range r.Errors {
			if ctx.Err() != nil && errors.Is(e, context.Canceled) {
				continue
			}
			failed(e)
		}
		if res.Engine == nil {
			res.Engine = r.Engine
		}
		if err != nil {
			return res, &SyncError{Interrupted: true, Err: err}
		}
	}
	res.Took = time.Since(start)
	if res.Failures > 0 {
		res.Lost = hosts.Lost()
	}
	return res, nil
}

// pullAhead has the helper of a sync's one remote source, as soon as it
// is up, diff the source against the local file it would go to, which is
// signed for it meanwhile (ends.Hosts.PullAhead): where that is a
// regular file large enough for a delta, the source's is most likely
// one, as a re-run of a large file's sync finds it. Its delta follows
// the listing without the round trips of asking for it. A source found
// unchanged, or not a file, leaves it unused: the helper's reads and
// this end's until the run ends (a fraction of a second) are its cost.
// Not with --sparse, which sends a file whole. The file is opened here,
// as it is before the run touches it, and closed by the function
// returned, once the run is over.
func pullAhead(hosts *ends.Hosts, j SyncJob, eo transfer.Options, dst transfer.Endpoint) (close func()) {
	none := func() {}
	if len(j.Sources) != 1 || j.Dest.Location.Remote() || eo.Sparse {
		return none
	}
	s := j.Sources[0]
	if !s.Location.Remote() || s.Contents {
		return none
	}
	lst, ok := dst.FS.(transfer.LinkReader)
	if !ok {
		return none
	}
	remote := ends.RemotePath(s.Location.Path)
	target := dst.Path
	// The destination is a directory the file goes into, as
	// prepareDest finds it (a link to one too), or the file itself.
	if fi, err := dst.FS.Stat(target); err == nil && fi.IsDir() {
		target = dst.FS.Join(target, path.Base(remote))
	}
	fi, err := lst.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < transfer.DeltaMinSize {
		return none
	}
	size := fi.Size()
	sign, closeSigned, err := transfer.OpenSigner(transfer.Endpoint{FS: dst.FS, Path: target}, size)
	if err != nil {
		return none
	}
	hosts.PullAhead(s.Location, remote, eo.InPlace, eo.Compress, transfer.DeltaShares(size), sign)
	return func() { closeSigned() }
}

// pushAhead has the helpers of a sync's remote destination, as they
// start, sign the file the sync's one local source would go over
// (ends.Hosts.PushAhead): the destination, or the file of the source's
// name in it where that is a directory, as the helpers find it. Where
// the source is a regular file large enough for a delta, a re-run
// most likely finds a file there that changed, whose push then has its
// signature signed beside the SFTP start and the look at the
// destination, and sent in parts over several connections. Not in
// place (whose basis the push cuts as it begins), with -z (a push in
// one share), nor with --sparse, which sends a file whole.
func pushAhead(hosts *ends.Hosts, j SyncJob, eo transfer.Options) {
	if len(j.Sources) != 1 || !j.Dest.Location.Remote() || eo.Sparse || eo.InPlace {
		return
	}
	s := j.Sources[0]
	if s.Location.Remote() || s.Contents {
		return
	}
	fi, err := os.Lstat(s.Location.Path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < transfer.DeltaMinSize {
		return
	}
	shares := 1
	if !eo.Compress {
		shares = transfer.DeltaShares(fi.Size())
	}
	hosts.PushAhead(j.Dest.Location, ends.RemotePath(j.Dest.Location.Path), filepath.Base(s.Location.Path), fi.Size(), fi.ModTime(), shares)
}

// prepareDest decides whether the destination is a directory the
// sources go into, and creates it when missing (rsync's "created
// directory"), but not in a dry run.
//
// It reports whether the destination is a directory and whether this run
// creates it.
func (j *SyncJob) prepareDest(dst, first transfer.Endpoint, print func(string)) (isDir, created bool, err error) {
	fi, err := dst.FS.Stat(dst.Path)
	switch {
	case err == nil && fi.IsDir():
		return true, false, nil
	case err == nil:
		if len(j.Sources) > 1 || j.Dest.Slash {
			return false, false, &transfer.Error{Op: "sync to", Path: dst.String(), Err: transfer.ErrNotDirectory}
		}
		return false, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, false, &transfer.Error{Op: "stat", Path: dst.String(), Err: err}
	}
	dir := len(j.Sources) > 1 || j.Dest.Slash
	if !dir {
		// One source: the destination is a directory when the source is
		// one.
		fi, err := first.FS.Stat(first.Path)
		dir = j.Sources[0].Contents || err == nil && fi.IsDir() && j.Mirror.Recursive
	}
	if !dir {
		return false, false, nil
	}
	if !j.Mirror.DryRun {
		if err := dst.FS.Mkdir(dst.Path); err != nil {
			return false, false, &transfer.Error{Op: "create directory", Path: dst.String(), Err: err,
				Hint: "hpncp sync creates the destination, not its parents"}
		}
	}
	if j.Itemize || j.Verbose > 0 {
		print("created directory " + strings.TrimSuffix(j.Dest.Location.Path, "/"))
	}
	return true, true, nil
}

// syncOne lists one source and its place in the destination and plans
// the changes.
func syncOne(ctx context.Context, mo mirror.Options, src transfer.Endpoint, s SyncOperand, dst transfer.Endpoint, destIsDir, created bool) (*mirror.Plan, error) {
	name := rootName(src.Path, s.Contents, src.FS.Base)
	target := dst
	if !s.Contents && destIsDir {
		target = transfer.Endpoint{FS: dst.FS, Path: dst.FS.Join(dst.Path, name)}
	}
	return mirror.Sync(ctx, src, target, name, s.Contents, created, mo)
}

// rootName is the rsync name of a source at p on an end whose base names
// base gives: "." for its contents (a trailing slash), its base name
// otherwise.
func rootName(p string, contents bool, base func(string) string) string {
	if contents {
		return "."
	}
	return base(strings.TrimSuffix(p, "/"))
}
