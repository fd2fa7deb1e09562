package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/protocol/scp"
)

// SCP is a remote end reached over the legacy scp protocol (-O). The
// protocol has no requests to stat, list, open or rename a file: its
// files move only by the streams of the server's scp, one session for
// each source operand. Copy moves a source from an SCP end by an
// "scp -f" (a download) and a source to one by an "scp -t" (an upload),
// never by the FS's calls, which fail with errors.ErrUnsupported. Its
// paths are the server's, slash-separated.
type SCP struct {
	Host *scp.Host
}

// errSCPStreams is what an SCP end answers the FS's calls with.
var errSCPStreams = fmt.Errorf("%w: the legacy scp protocol moves files only by its scp -f and scp -t streams", errors.ErrUnsupported)

func (s SCP) Label() string { return s.Host.Label() }

func (s SCP) unsupported(op, name string) error {
	return &fs.PathError{Op: op, Path: s.Label() + name, Err: errSCPStreams}
}

func (s SCP) Stat(name string) (fs.FileInfo, error)      { return nil, s.unsupported("stat", name) }
func (s SCP) ReadDir(name string) ([]fs.FileInfo, error) { return nil, s.unsupported("list", name) }
func (s SCP) Glob(pattern string) ([]string, error)      { return nil, s.unsupported("expand", pattern) }
func (s SCP) Open(name string) (io.ReadCloser, error)    { return nil, s.unsupported("open", name) }
func (s SCP) CreateExclusive(name string) (io.WriteCloser, error) {
	return nil, s.unsupported("create", name)
}
func (s SCP) Mkdir(name string) error                   { return s.unsupported("create directory", name) }
func (s SCP) Rename(oldname, _ string) error            { return s.unsupported("rename", oldname) }
func (s SCP) Remove(name string) error                  { return s.unsupported("remove", name) }
func (s SCP) Chmod(name string, _ fs.FileMode) error    { return s.unsupported("set mode of", name) }
func (s SCP) Chtimes(name string, _, _ time.Time) error { return s.unsupported("set times of", name) }
func (s SCP) Abs(name string) (string, error)           { return "", s.unsupported("resolve", name) }
func (SCP) Join(elem ...string) string                  { return path.Join(elem...) }
func (SCP) Dir(name string) string                      { return path.Dir(name) }
func (SCP) Base(name string) string                     { return path.Base(name) }

// isSCP reports whether f is reached over the legacy scp protocol.
func isSCP(f FS) bool {
	_, ok := f.(SCP)
	return ok
}

// overSCP reports whether a run from srcs to target has an end reached
// over the legacy scp protocol.
func overSCP(srcs []Endpoint, target Endpoint) bool {
	for _, s := range srcs {
		if isSCP(s.FS) {
			return true
		}
	}
	return isSCP(target.FS)
}

// scpSessions bounds the scp sessions a run has open at once, each on a
// channel of its own: enough to overlap the per-file round trips of
// several sources, well below sshd's default MaxSessions of 10.
const scpSessions = 4

// scpModeBits are the mode bits an upload sends: OpenSSH's scp sends no
// sticky bit, and -p must give what "scp -O -p" gives.
const scpModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid

// The legacy protocol's movers. Copy hands each source operand with an
// SCP end to one: the source's session runs beside up to scpSessions-1
// others, on the copier every other file of the run goes through, whose
// result, log, progress, umasks and -p directory fixes it uses as the
// walk's files do.
//
// A download writes the records the server sends through the local end's
// FS, confined to the target as every receiving end (Confine): every name
// the server sends is checked before it touches the disk (one path
// element; at the top level, the name asked for), a name sent twice in a
// directory is refused, a link where a directory goes is replaced
// (dirTarget), a file with a setuid or setgid mode is refused without -p,
// and every file is written under a temporary name and finished as the
// walk's files are (tempFile.finish). An upload sends what the engine's
// walk of the source reaches (enterDir, dirEntries) as the protocol's
// records, in the walk's order. It cannot write under a temporary name:
// the remote scp writes each file in place, under its final name, as the
// protocol has no way to ask it for anything else. The result's
// MaxStreams is the most sessions that were open at once.

// scpSession starts job as one scp session of the run, once fewer than
// scpSessions are open.
func (c *copier) scpSession(ctx context.Context, job func(*scpJob)) {
	if c.sessions.Acquire(ctx) != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.sessions.Release()
		c.mu.Lock()
		c.active++
		c.res.MaxStreams = max(c.res.MaxStreams, c.active)
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.active--
			c.mu.Unlock()
		}()
		j := &scpJob{copier: c, progress: newRunProgress(nil, nil, true).job()}
		if p, ok := c.opts.Progress.(*jobProgress); ok {
			// A session shows its files one after another.
			j.progress = p.r.job()
		}
		job(j)
	}()
}

// copySCP hands the source operand s, to dst, to a session of its own:
// a download when s is on an SCP end, else an upload to an SCP target.
// targetIsDir says dst is a directory, or must be one (several sources).
func (c *copier) copySCP(ctx context.Context, s, dst Endpoint, targetIsDir bool) {
	if isRemote(s.FS) && isRemote(dst.FS) {
		c.fail(&Error{Op: "copy", Path: s.String(), Err: errors.New("a copy between two remote hosts needs SFTP"),
			Hint: "leave out -O, or copy through a local directory"})
		return
	}
	if isSCP(s.FS) {
		c.scpSession(ctx, func(j *scpJob) { j.download(ctx, s, dst, targetIsDir) })
		return
	}
	si, err := s.FS.Stat(s.Path)
	if err != nil {
		c.fail(&Error{Op: "read", Path: s.String(), Err: err})
		return
	}
	switch {
	case si.IsDir() && !c.opts.Recursive:
		c.fail(&Error{Op: "copy", Path: s.String(), Err: errors.New("is a directory"), Hint: "use -r to copy directories"})
		return
	case !si.IsDir() && !si.Mode().IsRegular():
		c.fail(&Error{Op: "copy", Path: s.String(), Err: errNotRegular})
		return
	}
	name, err := sourceBase(s)
	if err != nil {
		c.fail(err)
		return
	}
	c.scpSession(ctx, func(j *scpJob) { j.upload(ctx, s, name, si, dst, targetIsDir) })
}

// scpJob is one session's view of the run.
type scpJob struct {
	*copier
	progress *jobProgress
}

func (j *scpJob) addDir() { j.record(func(r *Result) { r.Dirs++ }) }

// pipelineOptions are the pipeline's options for one file of this job.
func (j *scpJob) pipelineOptions() pipeline.Options {
	po := pipeline.Options{BufferSize: j.opts.BufferSize, Limiter: j.opts.Limiter}
	if j.opts.Progress != nil {
		po.Progress = j.progress.Add
	}
	return po
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

// download fetches one source from an SCP end into the local target.
func (j *scpJob) download(ctx context.Context, src, target Endpoint, targetIsDir bool) {
	o := j.opts
	rcv, err := src.FS.(SCP).Host.Receive(ctx, src.Path, scp.Options{Recursive: o.Recursive, Preserve: o.Preserve})
	if err != nil {
		if ctx.Err() == nil {
			j.fail(&Error{Op: "copy", Path: src.String(), Err: err, Hint: scpHint(err)})
		}
		return
	}
	d := &scpDownload{scpJob: j, rcv: rcv, src: src}
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
	rcv *scp.Receiver
	src Endpoint // the remote path asked for
}

// at is the remote path rpath on the source's end.
func (d *scpDownload) at(rpath string) Endpoint { return Endpoint{d.src.FS, rpath} }

// run receives the top-level entries the server sends: one, or those a
// pattern matched. A returned error ends the session.
func (d *scpDownload) run(ctx context.Context, target Endpoint, targetIsDir bool) error {
	entries := 0
	for {
		rec, err := d.rcv.Next()
		if err == io.EOF {
			return nil
		}
		if d.remoteWarning(err, "copy", d.src.String()) {
			continue
		}
		if err != nil {
			return err
		}
		rpath := d.src.Path
		if strings.ContainsAny(rpath, "*?[") {
			rpath = path.Join(path.Dir(rpath), rec.Name)
		}
		dst := target
		switch {
		case targetIsDir:
			dst.Path = target.FS.Join(target.Path, rec.Name)
		case entries > 0:
			if err := d.refuse(&Error{Op: "copy " + d.at(rpath).String() + " to", Path: target.String(), Err: ErrNotDirectory,
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
		return d.refuse(&Error{Op: "copy", Path: d.at(rpath).String(), Err: err,
			Hint: "the server sent a name that could escape the target; it was skipped"})
	}
	if rec.Type == scp.Dir {
		return d.dir(ctx, rec, rpath, dst, depth)
	}
	return d.file(ctx, rec, rpath, dst)
}

func (d *scpDownload) dir(ctx context.Context, rec scp.Record, rpath string, dst Endpoint, depth int) error {
	src := d.at(rpath).String()
	if depth >= maxDepth {
		return d.refuse(&Error{Op: "copy", Path: src,
			Err:  fmt.Errorf("more than %d levels of directories", maxDepth),
			Hint: "a symbolic link on the server may point to one of its own parent directories"})
	}
	if _, err := d.targetDir(ctx, src, dst, rec.Mode.Perm(), false); err != nil {
		return d.refuse(err)
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
	if d.opts.Preserve {
		d.addFix(dst, recAttrs(rec), depth)
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
	src := d.at(rpath)
	op := "copy " + src.String() + " to"
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
		fileErr = &Error{Op: "copy", Path: src.String(), Err: ferr}
	default:
		fileErr = d.finish(ctx, rec, op, tmp, dst, n, existing)
	}
	renamed = fileErr == nil
	if fileErr != nil {
		d.fail(fileErr)
	}
	if err := d.rcv.Reply(fileErr); err != nil {
		return err
	}
	if fileErr == nil {
		d.done(src, dst, n, 0, "", start)
	}
	return nil
}

// finish checks that a received temporary file holds every byte the
// server announced, and has the engine give it its mode and times and
// its final name (tempFile.finish).
func (d *scpDownload) finish(ctx context.Context, rec scp.Record, op, tmp string, dst Endpoint, n int64, existing fs.FileInfo) error {
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

// upload sends the local source src, of info si, to the SCP target
// under name.
func (j *scpJob) upload(ctx context.Context, src Endpoint, name string, si fs.FileInfo, target Endpoint, several bool) {
	o := j.opts
	snd, err := target.FS.(SCP).Host.Send(ctx, target.Path,
		scp.Options{Recursive: o.Recursive, Preserve: o.Preserve, TargetIsDir: several})
	if err != nil {
		if ctx.Err() == nil {
			j.fail(&Error{Op: "copy " + src.String() + " to", Path: target.String(), Err: err, Hint: scpHint(err)})
		}
		return
	}
	u := &scpUpload{scpJob: j, snd: snd, target: target}
	err = u.entry(ctx, src, name, si, 0, nil)
	cerr := snd.Close()
	switch {
	case ctx.Err() != nil:
	case err != nil:
		j.fail(&Error{Op: "copy " + src.String() + " to", Path: target.String(), Err: err, Hint: scpHint(err)})
	case cerr != nil:
		j.fail(&Error{Op: "copy " + src.String() + " to", Path: target.String(), Err: cerr})
	}
}

// scpUpload is one "scp -t" session: a mover that sends what the walk
// of the source reaches as the protocol's records, in the walk's order.
type scpUpload struct {
	*scpJob
	snd    *scp.Sender
	target Endpoint
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
	return u.remoteWarning(err, "copy "+src.String()+" to", u.target.String())
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
	u.done(src, u.target, n, 0, "", start)
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
