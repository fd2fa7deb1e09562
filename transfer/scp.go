package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/protocol/scp"
)

// SCPEndpoint is one operand of a copy over the legacy scp protocol (-O):
// a path on the local end when Host is nil, else a path on Host.
type SCPEndpoint struct {
	Host *scp.Host
	Path string
	// FS is the local end, where Host is nil: Local{} when FS is nil.
	// The scp movers read and write it as Copy does any end.
	FS FS
}

func (e SCPEndpoint) String() string {
	if e.Host == nil {
		return e.local().String()
	}
	return e.Host.Label() + e.Path
}

// local is the endpoint as the engine sees a local one.
func (e SCPEndpoint) local() Endpoint {
	if e.FS == nil {
		return Endpoint{Local{}, e.Path}
	}
	return Endpoint{e.FS, e.Path}
}

// scpSessions bounds the scp sessions a run has open at once, each on a
// channel of its own: enough to overlap the per-file round trips of
// several sources, well below sshd's default MaxSessions of 10.
const scpSessions = 4

// scpModeBits are the mode bits an upload sends: OpenSSH's scp sends no
// sticky bit, and -p must give what "scp -O -p" gives.
const scpModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid

// CopySCP copies every source to target as Copy does, with scp's rules for
// existing and missing targets, over the legacy scp protocol: each remote
// source is fetched by an "scp -f" of its own, each local source sent to
// an "scp -t", up to scpSessions at once, each on its own channel. One end
// must be local; local-to-local copies are plain copies.
//
// Each session is a mover under the engine Copy runs on: an upload sends
// what the engine's walk of the source reaches (enterDir, dirEntries) as
// the protocol's records, in the walk's order; a download writes the
// records it receives through the local end's FS and finishes each file
// as Copy does (tempFile.finish).
//
// Downloads get Copy's guarantees: every name the server sends is checked
// before it touches the disk (one path element; at the top level, the
// name asked for), a file with a setuid or setgid mode is refused without
// -p, and every file is written under a temporary name and renamed only
// once all of it arrived. Uploads cannot have the last: the remote scp
// writes each file in place, under its final name, as the protocol has
// no way to ask it for anything else. The result's MaxStreams is the most
// sessions that were open at once.
func CopySCP(ctx context.Context, srcs []SCPEndpoint, target SCPEndpoint, o Options) (*Result, error) {
	run := newSCPRun(o)
	if err := o.linksSCP(); err != nil {
		return run.res, err
	}
	var jobs []func(context.Context, *scpJob)
	if target.Host == nil {
		dst, err := Confine(target.local())
		if err != nil {
			return run.res, err
		}
		targetIsDir, _, err := checkTarget(dst, len(srcs) > 1, len(srcs) > 0)
		if err != nil {
			return run.res, err
		}
		for _, s := range srcs {
			if s.Host == nil {
				jobs = append(jobs, func(ctx context.Context, j *scpJob) { j.local(ctx, s.local(), dst) })
				continue
			}
			jobs = append(jobs, func(ctx context.Context, j *scpJob) { j.download(ctx, s, dst, targetIsDir) })
		}
	} else {
		for _, s := range srcs {
			if s.Host != nil {
				run.fail(&Error{Op: "copy", Path: s.String(), Err: errors.New("a copy between two remote hosts needs SFTP"),
					Hint: "leave out -O, or copy through a local directory"})
				continue
			}
			several := len(srcs) > 1
			jobs = append(jobs, func(ctx context.Context, j *scpJob) { j.upload(ctx, s.local(), target, several) })
		}
	}

	sessions := slots.New(scpSessions)
	var wg sync.WaitGroup
	for _, job := range jobs {
		if sessions.Acquire(ctx) != nil || ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sessions.Release()
			run.begin()
			defer run.end()
			job(ctx, &scpJob{scpRun: run, progress: run.progress.job()})
		}()
	}
	wg.Wait()
	// A umask probe still running would leave its directory behind.
	run.umask.wait()
	if err := ctx.Err(); err != nil {
		return run.res, err
	}
	return run.res, nil
}

// scpRun is the state the sessions of one CopySCP share: the engine's
// copier, whose result, log, umasks and finishing steps the scp movers
// use as Copy's files do, and the run's progress, which shows one file
// at a time.
type scpRun struct {
	*copier
	orig     Options // as the caller gave them, for the local copies
	progress *runProgress
	active   int // sessions open; c.mu guards it
}

func newSCPRun(o Options) *scpRun {
	co := o
	// The legacy protocol tells no files one by one: the caller builds
	// its report from the result (and a local copy beside it reports
	// its own files).
	co.Report = nil
	co.Progress = nil
	c := &copier{opts: co, res: &Result{MaxStreams: 1}, sched: newSched(false)}
	return &scpRun{copier: c, orig: o, progress: newRunProgress(o.Progress, nil, true)}
}

func (r *scpRun) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active++
	r.res.MaxStreams = max(r.res.MaxStreams, r.active)
}

func (r *scpRun) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
}

// scpJob is one session's view of the run.
type scpJob struct {
	*scpRun
	progress *jobProgress
}

func (j *scpJob) addFile(n int64) {
	j.record(func(r *Result) {
		r.Files++
		r.Bytes += n
	})
}

func (j *scpJob) addDir() { j.record(func(r *Result) { r.Dirs++ }) }

// pipelineOptions are the pipeline's options for one file of this job.
func (j *scpJob) pipelineOptions() pipeline.Options {
	po := pipeline.Options{BufferSize: j.opts.BufferSize, Limiter: j.opts.Limiter}
	if j.orig.Progress != nil {
		po.Progress = j.progress.Add
	}
	return po
}

// local copies a local source to the local target as Copy does, sharing
// the run's progress and log with the sessions beside it.
func (j *scpJob) local(ctx context.Context, src, target Endpoint) {
	o := j.orig
	if o.Progress != nil {
		o.Progress = j.progress
	}
	if o.Logf != nil {
		o.Logf = j.logf
	}
	res, _ := Copy(ctx, []Endpoint{src}, target, o)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.res.Files += res.Files
	j.res.Dirs += res.Dirs
	j.res.Bytes += res.Bytes
	j.res.Errors = append(j.res.Errors, res.Errors...)
}

// scpHint says what to do about a failed scp session.
func scpHint(err error) string {
	switch {
	case errors.Is(err, scp.ErrProtocol):
		return "the server broke the scp protocol, as no correct scp does; this source's copy stopped there and nothing was written outside the target"
	case errors.Is(err, scp.ErrUnavailable):
		return "leave out -O to copy over SFTP, or ask the server's admin to install scp"
	}
	return hintFor(err)
}

// remoteWarning records the server's message about one entry and reports
// whether err was one: the session goes on after it.
func (j *scpJob) remoteWarning(err error, op, p string) bool {
	var se *scp.Error
	if errors.As(err, &se) && !se.Fatal {
		j.fail(&Error{Op: op, Path: p, Err: err})
		return true
	}
	return false
}

// download fetches one remote source into the local target.
func (j *scpJob) download(ctx context.Context, src SCPEndpoint, target Endpoint, targetIsDir bool) {
	o := j.opts
	rcv, err := src.Host.Receive(ctx, src.Path, scp.Options{Recursive: o.Recursive, Preserve: o.Preserve})
	if err != nil {
		if ctx.Err() == nil {
			j.fail(&Error{Op: "copy", Path: src.String(), Err: err, Hint: scpHint(err)})
		}
		return
	}
	d := &scpDownload{scpJob: j, rcv: rcv, label: src.Host.Label(), req: src.Path}
	err = d.run(ctx, target, targetIsDir)
	cerr := rcv.Close()
	switch {
	case ctx.Err() != nil:
	case err != nil:
		j.fail(&Error{Op: "copy", Path: src.String(), Err: err, Hint: scpHint(err)})
	case cerr != nil:
		j.fail(&Error{Op: "copy", Path: src.String(), Err: cerr})
	}
}

// scpDownload is one "scp -f" session: a mover that writes the records
// the server sends through the target's FS, as Copy writes a download.
type scpDownload struct {
	*scpJob
	rcv   *scp.Receiver
	label string // "host:"
	req   string // the remote path asked for
}

// run receives the top-level entries the server sends: one, or those a
// pattern matched. A returned error ends the session.
func (d *scpDownload) run(ctx context.Context, target Endpoint, targetIsDir bool) error {
	entries := 0
	for {
		rec, err := d.rcv.Next()
		if err == io.EOF {
			return nil
		}
		if d.remoteWarning(err, "copy", d.label+d.req) {
			continue
		}
		if err != nil {
			return err
		}
		rpath := d.req
		if strings.ContainsAny(d.req, "*?[") {
			rpath = path.Join(path.Dir(d.req), rec.Name)
		}
		dst := target
		switch {
		case targetIsDir:
			dst.Path = target.FS.Join(target.Path, rec.Name)
		case entries > 0:
			if err := d.refuse(&Error{Op: "copy " + d.label + rpath + " to", Path: target.String(), Err: ErrNotDirectory,
				Hint: "several files match; the target must be an existing directory"}); err != nil {
				return err
			}
			continue
		}
		entries++
		if err := d.entry(ctx, rec, rpath, dst, 0); err != nil {
			return err
		}
	}
}

// refuse records err about one entry and tells the server to skip it.
func (d *scpDownload) refuse(err error) error {
	d.fail(err)
	return d.rcv.Reply(err)
}

// entry receives a file or directory the server announced, to dst.
func (d *scpDownload) entry(ctx context.Context, rec scp.Record, rpath string, dst Endpoint, depth int) error {
	if err := ValidName(rec.Name); err != nil {
		return d.refuse(&Error{Op: "copy", Path: d.label + rpath, Err: err,
			Hint: "the server sent a name that could escape the target; it was skipped"})
	}
	if rec.Type == scp.Dir {
		return d.dir(ctx, rec, rpath, dst, depth)
	}
	return d.file(ctx, rec, rpath, dst)
}

func (d *scpDownload) dir(ctx context.Context, rec scp.Record, rpath string, dst Endpoint, depth int) error {
	o := d.opts
	src := d.label + rpath
	if depth >= maxDepth {
		return d.refuse(&Error{Op: "copy", Path: src,
			Err:  fmt.Errorf("more than %d levels of directories", maxDepth),
			Hint: "a symbolic link on the server may point to one of its own parent directories"})
	}
	di, err := dirTarget(dst)
	switch {
	case err == nil && !di.IsDir():
		return d.refuse(&Error{Op: "copy " + src + " to", Path: dst.String(), Err: ErrNotDirectory})
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		made, err := d.makeDir(ctx, dst, rec.Mode.Perm())
		if !made {
			return d.refuse(&Error{Op: "create directory", Path: dst.String(), Err: err, Hint: hintFor(err)})
		}
		d.addDir()
		d.logf("created directory %s", dst)
		if err != nil {
			d.fail(err)
		}
	default:
		return d.refuse(&Error{Op: "stat", Path: dst.String(), Err: err})
	}
	if err := d.rcv.Reply(nil); err != nil {
		return err
	}
	// A stream is not a listing: a name comes again only after its first
	// entry was received. The second is refused and named; the first
	// stays, written below the target as any entry.
	seen := map[string]bool{}
	for {
		child, err := d.rcv.Next()
		if d.remoteWarning(err, "copy", src) {
			continue
		}
		if err != nil {
			return err
		}
		if child.Type == scp.End {
			break
		}
		if seen[child.Name] {
			if err := d.refuse(DuplicateError(src, child.Name)); err != nil {
				return err
			}
			continue
		}
		seen[child.Name] = true
		at := Endpoint{dst.FS, dst.FS.Join(dst.Path, child.Name)}
		if err := d.entry(ctx, child, path.Join(rpath, child.Name), at, depth+1); err != nil {
			return err
		}
	}
	if o.Preserve {
		// Every entry below is in place: the directory's times stay.
		d.setDirAttrs(dst, recAttrs(rec))
	}
	return nil
}

// recAttrs are the mode and times -p takes from a record the server sent.
func recAttrs(rec scp.Record) fileAttrs {
	return fileAttrs{mode: rec.Mode & modeBits, times: rec.Times, atime: rec.Atime, mtime: rec.Mtime}
}

// file receives a file the server announced into a temporary file beside
// dst, renamed to dst only when every byte arrived and the server vouched
// for them.
func (d *scpDownload) file(ctx context.Context, rec scp.Record, rpath string, dst Endpoint) error {
	src := d.label + rpath
	op := "copy " + src + " to"
	if !d.opts.Preserve && rec.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		return d.refuse(&Error{Op: op, Path: dst.String(),
			Err:  fmt.Errorf("the server sent mode %s, with setuid or setgid bits; refused without -p", octal(rec.Mode)),
			Hint: "a file that runs with its owner's or group's rights is copied only with -p, which takes the server's modes as they are"})
	}
	var existing fs.FileInfo
	switch fi, err := dst.FS.Stat(dst.Path); {
	case err == nil && fi.IsDir():
		return d.refuse(&Error{Op: op, Path: dst.String(), Err: errors.New("is a directory")})
	case err == nil:
		existing = fi
	case !errors.Is(err, fs.ErrNotExist):
		return d.refuse(&Error{Op: op, Path: dst.String(), Err: err})
	}
	out, tmp, err := createTemp(dst.FS, dst.FS.Dir(dst.Path), dst.FS.Base(dst.Path))
	if err != nil {
		return d.refuse(&Error{Op: op, Path: dst.String(), Err: err, Hint: hintFor(err)})
	}
	renamed := false
	defer func() {
		// Even when ctx was cancelled: that is when a partial temporary
		// file is most likely.
		if !renamed {
			_ = dst.FS.Remove(tmp)
		}
	}()
	if err := d.rcv.Reply(nil); err != nil {
		_ = out.Close()
		return err
	}

	start := time.Now()
	d.progress.StartFile(rec.Name, rec.Size)
	n, werr := pipeline.Copy(ctx, out, d.rcv, d.pipelineOptions())
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	d.progress.EndFile()
	ferr := d.rcv.FinishBody()
	var se *scp.Error
	if ferr != nil && !errors.As(ferr, &se) {
		return ferr
	}

	var fileErr error
	switch {
	case werr != nil:
		fileErr = &Error{Op: op, Path: dst.String(), Err: werr, Hint: hintFor(werr)}
	case ferr != nil:
		// The server could not read its file whole: what came is not it.
		fileErr = &Error{Op: "copy", Path: src, Err: ferr}
	default:
		fileErr = d.finish(ctx, rec, src, tmp, dst, n, existing)
	}
	renamed = fileErr == nil
	if fileErr != nil {
		d.fail(fileErr)
	}
	if err := d.rcv.Reply(fileErr); err != nil {
		return err
	}
	if fileErr == nil {
		d.addFile(n)
		d.logf("copied %s to %s: %d bytes in %s", src, dst, n, since(start))
	}
	return nil
}

// finish checks that a received temporary file holds every byte the
// server announced, and has the engine give it its mode and times and
// its final name (tempFile.finish).
func (d *scpDownload) finish(ctx context.Context, rec scp.Record, src, tmp string, dst Endpoint, n int64, existing fs.FileInfo) error {
	op := "copy " + src + " to"
	ti, err := dst.FS.Stat(tmp)
	if err != nil {
		return &Error{Op: op, Path: dst.String(), Err: err}
	}
	// Checked here, not by finish: the server announced the size, and
	// the message says so.
	if n != rec.Size || ti.Size() != rec.Size {
		return &Error{Op: op, Path: dst.String(),
			Err: fmt.Errorf("%w: %d bytes arrived of %d announced", pipeline.ErrShortWrite, ti.Size(), rec.Size)}
	}
	attrs := func() fileAttrs {
		return finalAttrs(d.opts.Preserve, recAttrs(rec), existing, func() fs.FileMode {
			return d.newFileMode(ctx, dst, rec.Mode.Perm())
		})
	}
	return tempFile{dst: dst, tmp: tmp, op: op}.finish(ctx, -1, ti, attrs, nil)
}

// octal writes a mode as chmod takes it.
func octal(mode fs.FileMode) string {
	return fmt.Sprintf("%04o", protocol.UnixMode(mode))
}

// upload sends one local source to the remote target.
func (j *scpJob) upload(ctx context.Context, src Endpoint, target SCPEndpoint, several bool) {
	o := j.opts
	si, err := src.FS.Stat(src.Path)
	if err != nil {
		j.fail(&Error{Op: "read", Path: src.String(), Err: err})
		return
	}
	switch {
	case si.IsDir() && !o.Recursive:
		j.fail(&Error{Op: "copy", Path: src.String(), Err: errors.New("is a directory"), Hint: "use -r to copy directories"})
		return
	case !si.IsDir() && !si.Mode().IsRegular():
		j.fail(&Error{Op: "copy", Path: src.String(), Err: errNotRegular})
		return
	}
	name, err := sourceBase(src)
	if err != nil {
		j.fail(err)
		return
	}
	snd, err := target.Host.Send(ctx, target.Path,
		scp.Options{Recursive: o.Recursive, Preserve: o.Preserve, TargetIsDir: several})
	if err != nil {
		if ctx.Err() == nil {
			j.fail(&Error{Op: "copy " + src.String() + " to", Path: target.String(), Err: err, Hint: scpHint(err)})
		}
		return
	}
	u := &scpUpload{scpJob: j, snd: snd, target: target.String()}
	err = u.entry(ctx, src, name, si, 0, nil)
	cerr := snd.Close()
	switch {
	case ctx.Err() != nil:
	case err != nil:
		j.fail(&Error{Op: "copy " + src.String() + " to", Path: u.target, Err: err, Hint: scpHint(err)})
	case cerr != nil:
		j.fail(&Error{Op: "copy " + src.String() + " to", Path: u.target, Err: cerr})
	}
}

// scpUpload is one "scp -t" session: a mover that sends what the walk
// of the source reaches as the protocol's records, in the walk's order.
type scpUpload struct {
	*scpJob
	snd    *scp.Sender
	target string // "host:path", for messages
}

// entry sends a file or directory of the source; a returned error ends
// the session. at is a directory's place on the walk's path, nil for the
// source operand.
func (u *scpUpload) entry(ctx context.Context, src Endpoint, name string, si fs.FileInfo, depth int, at *walkDir) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.ContainsRune(name, '\n') {
		u.fail(&Error{Op: "copy", Path: src.String(), Err: errors.New("the name holds a newline, which the scp protocol cannot send"),
			Hint: "leave out -O to copy it over SFTP"})
		return nil
	}
	switch {
	case si.IsDir():
		return u.dir(ctx, src, name, si, depth, at)
	case si.Mode().IsRegular():
		return u.file(ctx, src, name, si)
	}
	u.fail(&Error{Op: "copy", Path: src.String(), Err: errNotRegular})
	return nil
}

// refused records the server's refusal of one entry and reports whether
// err was one.
func (u *scpUpload) refused(err error, src Endpoint) bool {
	return u.remoteWarning(err, "copy "+src.String()+" to", u.target)
}

func (u *scpUpload) dir(ctx context.Context, src Endpoint, name string, si fs.FileInfo, depth int, at *walkDir) error {
	at, err := enterDir(src, si, depth, at)
	if err != nil {
		u.fail(err)
		return nil
	}
	listed, err := readDir(ctx, src.FS, src.Path)
	if err != nil {
		// Nothing of the directory is sent, rather than an empty one.
		u.fail(&Error{Op: "read directory", Path: src.String(), Err: err, Hint: listingHint(err)})
		return nil
	}
	rec := scp.Record{Type: scp.Dir, Name: name, Mode: si.Mode() & scpModeBits,
		Times: true, Mtime: si.ModTime(), Atime: atimeOf(si)}
	if err := u.snd.StartDir(rec); err != nil {
		if u.refused(err, src) {
			return nil
		}
		return err
	}
	u.addDir()
	for e := range u.dirEntries(ctx, src, listed, at) {
		if err := u.entry(ctx, e.src, e.name, e.info, depth+1, e.at); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := u.snd.EndDir(); err != nil && !u.refused(err, src) {
		return err
	}
	return nil
}

func (u *scpUpload) file(ctx context.Context, src Endpoint, name string, si fs.FileInfo) error {
	f, err := src.FS.Open(src.Path)
	if err != nil {
		u.fail(&Error{Op: "read", Path: src.String(), Err: err})
		return nil
	}
	defer f.Close()
	rec := scp.Record{Type: scp.File, Name: name, Mode: si.Mode() & scpModeBits, Size: si.Size(),
		Times: true, Mtime: si.ModTime(), Atime: atimeOf(si)}
	if err := u.snd.StartFile(rec); err != nil {
		if u.refused(err, src) {
			return nil
		}
		return err
	}

	start := time.Now()
	in := &readRecorder{r: io.LimitReader(f, si.Size())}
	u.progress.StartFile(name, si.Size())
	n, cerr := pipeline.Copy(ctx, u.snd, in, u.pipelineOptions())
	u.progress.EndFile()
	if cerr != nil && in.err == nil {
		return cerr // the session, not the file
	}
	readErr := in.err
	if readErr == nil {
		var one [1]byte
		if n != si.Size() {
			readErr = fmt.Errorf("file changed size during the copy: expected %d bytes, read %d", si.Size(), n)
		} else if m, _ := f.Read(one[:]); m > 0 {
			readErr = fmt.Errorf("file changed size during the copy: it grew beyond %d bytes", si.Size())
		}
	}
	err = u.snd.EndFile(readErr)
	if readErr != nil {
		u.fail(&Error{Op: "read", Path: src.String(), Err: readErr,
			Hint: "the remote scp writes in place: the file on the server is incomplete; copy it again"})
		var se *scp.Error
		if err != nil && !(errors.As(err, &se) && !se.Fatal) {
			return err
		}
		return nil
	}
	if err != nil {
		if u.refused(err, src) {
			return nil
		}
		return err
	}
	u.addFile(n)
	u.logf("copied %s to %s: %d bytes in %s", src, u.target, n, since(start))
	return nil
}

// readRecorder keeps the error of its reader, so that a failure to read a
// local file can be told from a failure of the session it is sent on.
type readRecorder struct {
	r   io.Reader
	err error
}

func (r *readRecorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
