package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/internal/filter"
	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/mirror"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/transfer"
)

// hpncp sync exits with rsync's codes, which scripts written for rsync
// test.
const (
	syncExitUsage       = 1  // syntax or usage error
	syncExitPartial     = 23 // some files or deletions failed
	syncExitMaxDelete   = 25 // --max-delete stopped deletions
	syncExitInterrupted = 20 // SIGINT or SIGTERM
)

// syncError is a failure of hpncp sync with the exit code rsync would
// give it.
type syncError struct {
	code  int
	err   error
	hint  string
	quiet bool // already printed
}

func (e *syncError) Error() string { return e.err.Error() }
func (e *syncError) Unwrap() error { return e.err }

func syncUsagef(hint, format string, args ...any) error {
	return &syncError{code: syncExitUsage, err: fmt.Errorf(format, args...), hint: hint}
}

func syncCommand(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:            "sync",
		Usage:           "rsync's command line and semantics on hpncp's engine",
		SkipFlagParsing: true,
		HideHelp:        true,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return syncMain(ctx, cmd.Args().Slice(), stdin, stdout, stderr)
		},
	}
}

// syncMain runs `hpncp sync ARGS`.
func syncMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseSyncArgs(args)
	if err == nil && o.help {
		_, err = io.WriteString(stdout, syncHelpText)
		return err
	}
	if err != nil {
		return err
	}
	if !o.json {
		return asSyncError(runSync(ctx, o, stdin, stdout, stderr, &copyRecord{}))
	}
	rec := copyRecord{started: time.Now(), operands: o.operands, perFile: true}
	err = runSync(ctx, o, stdin, io.Discard, stderr, &rec)
	rep := rec.report(err, time.Now())
	rep.ExitCode = syncExitCode(err)
	rep.Planned = rec.planned
	if werr := writeReport(stdout, rep); werr != nil && err == nil {
		return werr
	}
	return asSyncError(err)
}

// asSyncError gives err rsync's exit code.
func asSyncError(err error) error {
	var se *syncError
	if err == nil || errors.As(err, &se) {
		return err
	}
	return &syncError{code: syncExitCode(err), err: err}
}

// syncExitCode is the exit code hpncp sync ends with for err.
func syncExitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var se *syncError
	if errors.As(err, &se) {
		return se.code
	}
	switch o := outcomeOf(err); o.code {
	case exitInterrupted:
		return syncExitInterrupted
	case exitUsage:
		return syncExitUsage
	case exitConnection:
		return exitConnection
	}
	return syncExitPartial
}

// syncOperand is a source or the destination as given.
type syncOperand struct {
	loc transfer.Location
	// contents says a source's trailing slash (or "." as its last
	// element) copies what the directory holds, not the directory.
	contents bool
	slash    bool // the operand ends with a slash
}

func parseSyncOperand(s string) (syncOperand, error) {
	l, err := transfer.ParseLocation(s)
	if err != nil {
		return syncOperand{}, syncUsagef("", "%v", err)
	}
	if l.Remote() && strings.HasPrefix(l.Path, ":") {
		return syncOperand{}, syncUsagef("hpncp sync speaks to sshd: write host:path", "%s: rsync daemon operands (host::module) are not supported", s)
	}
	p := l.Path
	op := syncOperand{loc: l, slash: strings.HasSuffix(p, "/")}
	op.contents = op.slash || p == "" || p == "." || strings.HasSuffix(p, "/.")
	if p == "" {
		op.loc.Path = "."
	}
	return op, nil
}

func runSync(ctx context.Context, o *syncOptions, stdin io.Reader, stdout, stderr io.Writer, rec *copyRecord) error {
	if len(o.operands) < 2 {
		return syncUsagef("hpncp sync [flags] SRC... DEST, as rsync", "need a source and a destination")
	}
	co := defaultCopyOptions()
	co.Quiet, co.Verbose = o.quiet, o.verbose > 1
	if err := o.rshOptions(co); err != nil {
		return err
	}
	rules, err := o.rules(stdin)
	if err != nil {
		return err
	}
	mo := mirror.Options{
		Recursive: o.recursive, Links: o.links, Perms: o.perms, Times: o.times,
		Owner: o.owner, Group: o.group, Devices: o.devices || o.specials, HardLinks: o.hardLinks,
		Checksum: o.checksum, SizeOnly: o.sizeOnly, IgnoreTimes: o.ignoreTimes, Update: o.update,
		Existing: o.existing, IgnoreExisting: o.ignoreExisting, MinSize: o.minSize, MaxSize: o.maxSize,
		Delete: o.delete, DeleteExcluded: o.deleteExcluded, MaxDelete: o.maxDelete,
		DryRun: o.dryRun, SafeLinks: o.safeLinks,
	}
	if !rules.Empty() {
		mo.Filter = rules
	}
	if o.filesFrom != "" {
		if len(o.operands) != 2 {
			return syncUsagef("give the directory the listed names are relative to, then DEST", "--files-from needs exactly one source")
		}
		list, err := o.fileList(stdin)
		if err != nil {
			return err
		}
		// As rsync's: the names are relative to the source directory,
		// and -a does not recurse into listed directories, -r does.
		mo.Filter = mirror.NewListFilter(list, o.explicitR, mo.Filter)
		mo.Recursive = true
		if !strings.HasSuffix(o.operands[0], "/") {
			o.operands[0] += "/"
		}
	}
	var srcs []syncOperand
	for _, s := range o.operands[:len(o.operands)-1] {
		op, err := parseSyncOperand(s)
		if err != nil {
			return err
		}
		srcs = append(srcs, op)
	}
	dest, err := parseSyncOperand(o.operands[len(o.operands)-1])
	if err != nil {
		return err
	}
	remote := dest.loc.Remote()
	for _, s := range srcs {
		if s.loc.Remote() && remote {
			return syncUsagef("copy to this machine first, or run hpncp sync on one of the hosts",
				"hpncp sync copies between a local and a remote end, or locally: %s and %s are both remote", s.loc, dest.loc)
		}
		remote = remote || s.loc.Remote()
	}
	mo.Push = dest.loc.Remote()

	limit, err := units.ParseBWLimit(o.bwlimit)
	if o.bwlimit != "" && err != nil {
		return syncUsagef("a bare number is KiB/s, as rsync's; 10M is 10 MiB/s", "--bwlimit=%s: %v", o.bwlimit, err)
	}
	tune, err := co.tuning(mo.Push)
	if err != nil {
		return err
	}
	eo := transfer.Options{
		Verify:   o.verify,
		Sparse:   o.sparse,
		Resume:   o.partial,
		Limiter:  pipeline.NewLimiter(limit),
		Parallel: tune.parallel,
		Report:   rec.reporter(),
	}
	if o.verbose > 1 {
		eo.Logf = logTo(stderr)
	}
	if err := ends.UseJournal(&eo); err != nil {
		return optionUsage(err)
	}
	// rsync's progress formats, told the plan's totals; as rsync's, only
	// when asked for.
	var prog interface {
		transfer.Progress
		Plan(files int, bytes int64)
		Finish()
	}
	switch {
	case o.quiet || o.dryRun:
	case o.progress2:
		prog = newRsyncTotal(stderr)
	case o.progress:
		prog = newRsyncFiles(stderr)
	}
	if prog != nil {
		eo.Progress = prog
		defer prog.Finish()
	}

	hosts := ends.New(ends.Options{SSH: co.connOptions(stderr), RcvBuf: tune.rcvbuf, SndBuf: tune.sndbuf,
		CC: tune.cc, CCBestEffort: tune.ccBestEffort})
	defer hosts.Close()
	defer hosts.AbortOnCancel(ctx)()
	open := func(l transfer.Location) (transfer.Endpoint, error) {
		e, err := hosts.Endpoint(ctx, l)
		if err == nil {
			// The trees are listed first, then small files sent in
			// batches: the sessions for both open now, meanwhile.
			if p, ok := e.FS.(interface{ PrepareList(context.Context) }); ok {
				p.PrepareList(ctx)
			}
			if p, ok := e.FS.(interface{ PrepareSmall(context.Context) }); ok {
				p.PrepareSmall(ctx)
			}
		}
		if errors.Is(err, ends.ErrNoSFTP) {
			return e, &syncError{code: syncExitPartial, err: err,
				hint: "hpncp sync needs the server's SFTP subsystem (Subsystem sftp in sshd_config)"}
		}
		return e, err
	}
	dst, err := open(dest.loc)
	if err != nil {
		return err
	}
	if dst.FS.Label() != "" {
		dst.Path = ends.RemotePath(dst.Path)
	}
	print := func(line string) {
		if o.itemize {
			fmt.Fprintln(stdout, vis.String(line))
		} else if o.verbose > 0 {
			fmt.Fprintln(stdout, vis.String(verboseLine(line)))
		}
	}
	start := time.Now()
	st := syncStats{}
	planFiles, planBytes := 0, int64(0)
	var failures []error
	srcEnds := make([]transfer.Endpoint, len(srcs))
	for i, s := range srcs {
		if srcEnds[i], err = open(s.loc); err != nil {
			return err
		}
		if srcEnds[i].FS.Label() != "" {
			srcEnds[i].Path = ends.RemotePath(srcEnds[i].Path)
		}
	}
	destIsDir, created, err := o.prepareDest(dst, dest, srcs, srcEnds[0], print)
	if err != nil {
		return &syncError{code: syncExitPartial, err: err, hint: hintOf(err)}
	}
	for i, s := range srcs {
		src := srcEnds[i]
		listed := time.Now()
		p, err := syncOne(ctx, mo, src, s, dst, destIsDir, created)
		if eo.Logf != nil {
			eo.Logf("sync: listed and planned in %v", time.Since(listed).Round(time.Millisecond))
		}
		if err != nil {
			failures = append(failures, err)
			printError(stderr, err.Error(), hintOf(err))
			continue
		}
		for _, c := range p.Changes {
			rec.planned = append(rec.planned, report.PlannedChange{Item: c.Item, Name: c.Name, Line: c.Line()})
		}
		for _, e := range p.Errors {
			failures = append(failures, e)
			printError(stderr, e.Error(), hintOf(e))
		}
		st.add(p)
		if prog != nil {
			planFiles += p.Files
			planBytes += p.Bytes
			prog.Plan(planFiles, planBytes)
		}
		if o.dryRun {
			for _, c := range p.Changes {
				if c.Item != "" || c.Printed() || c.Verbose() && o.verbose > 0 {
					print(c.Line())
				}
			}
			st.skipped += p.DeleteSkipped
			continue
		}
		for _, c := range p.Changes {
			if c.Printed() || c.Verbose() && o.verbose > 0 {
				print(c.Line())
			}
		}
		res, err := p.Run(ctx, mo, mirror.RunOptions{Engine: eo, Print: print, RemoveSource: o.removeSource})
		st.ran(res)
		st.skipped += p.DeleteSkipped
		for _, e := range res.Errors {
			if ctx.Err() != nil && errors.Is(e, context.Canceled) {
				continue
			}
			failures = append(failures, e)
			printError(stderr, e.Error(), hintOf(e))
		}
		if rec.res == nil {
			rec.res = res.Engine
		}
		if err != nil {
			return &syncError{code: syncExitInterrupted, err: err}
		}
	}
	rec.elapsed = time.Since(start)
	if o.stats {
		st.print(stdout, time.Since(start))
	}
	if o.verbose > 0 && !o.stats {
		fmt.Fprintf(stdout, "\nsent %s bytes  total size is %s\n", commas(st.sentBytes), commas(st.totalBytes))
	}
	if st.skipped > 0 {
		fmt.Fprintf(stderr, "hpncp: Deletions stopped due to --max-delete limit (%d skipped)\n", st.skipped)
	}
	if len(failures) > 0 {
		if lost := hosts.Lost(); lost != nil {
			return lost
		}
		return &syncError{code: syncExitPartial, quiet: true,
			err: fmt.Errorf("%d file(s) or directories could not be synced", len(failures))}
	}
	if st.skipped > 0 {
		return &syncError{code: syncExitMaxDelete, quiet: true, err: fmt.Errorf("--max-delete stopped %d deletion(s)", st.skipped)}
	}
	return nil
}

// verboseLine is an itemized line as -v without -i prints it: the name,
// or "deleting NAME".
func verboseLine(line string) string {
	if rest, ok := strings.CutPrefix(line, "*deleting   "); ok {
		return "deleting " + rest
	}
	if len(line) > 12 && line[11] == ' ' {
		return line[12:]
	}
	return line
}

// rules builds the filter rules from the flags, in their order.
func (o *syncOptions) rules(stdin io.Reader) (*filter.Rules, error) {
	r := &filter.Rules{}
	for _, f := range o.filters {
		var err error
		switch f.flag {
		case "exclude":
			err = r.Exclude(f.value)
		case "include":
			err = r.Include(f.value)
		case "filter":
			err = r.Add(f.value)
		case "exclude-from", "include-from":
			err = readRules(r, f.value, stdin, f.flag == "include-from")
		}
		if err != nil {
			return nil, syncUsagef("", "--%s=%s: %v", f.flag, f.value, err)
		}
	}
	return r, nil
}

// fileList reads --files-from (a file, or "-" for stdin; --from0 for
// NUL-separated names).
func (o *syncOptions) fileList(stdin io.Reader) ([]string, error) {
	list, err := readFileList(o.filesFrom, o.from0, stdin)
	if err != nil {
		return nil, syncUsagef("", "%v", err)
	}
	return list, nil
}

func readRules(r *filter.Rules, name string, stdin io.Reader, include bool) error {
	if name == "-" {
		return r.AddFrom(stdin, "stdin", include)
	}
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return r.AddFrom(f, name, include)
}

// prepareDest decides whether DEST is a directory the sources go into,
// and creates it when missing (rsync's "created directory"), but not in a
// dry run.
//
// It reports whether DEST is a directory and whether this run creates it.
func (o *syncOptions) prepareDest(dst transfer.Endpoint, dest syncOperand, srcs []syncOperand, first transfer.Endpoint, print func(string)) (isDir, created bool, err error) {
	fi, err := dst.FS.Stat(dst.Path)
	switch {
	case err == nil && fi.IsDir():
		return true, false, nil
	case err == nil:
		if len(srcs) > 1 || dest.slash {
			return false, false, &transfer.Error{Op: "sync to", Path: dst.String(), Err: transfer.ErrNotDirectory}
		}
		return false, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, false, &transfer.Error{Op: "stat", Path: dst.String(), Err: err}
	}
	dir := len(srcs) > 1 || dest.slash
	if !dir {
		// One source: DEST is a directory when the source is one.
		fi, err := first.FS.Stat(first.Path)
		dir = srcs[0].contents || err == nil && fi.IsDir() && o.recursive
	}
	if !dir {
		return false, false, nil
	}
	if !o.dryRun {
		if err := dst.FS.Mkdir(dst.Path); err != nil {
			return false, false, &transfer.Error{Op: "create directory", Path: dst.String(), Err: err,
				Hint: "hpncp sync creates the destination, not its parents"}
		}
	}
	if o.itemize || o.verbose > 0 {
		print("created directory " + strings.TrimSuffix(dest.loc.Path, "/"))
	}
	return true, true, nil
}

// syncOne lists one source and its place in the destination and plans
// the changes.
func syncOne(ctx context.Context, mo mirror.Options, src transfer.Endpoint, s syncOperand, dst transfer.Endpoint, destIsDir, created bool) (*mirror.Plan, error) {
	name := "."
	target := dst
	if !s.contents {
		name = src.FS.Base(strings.TrimSuffix(src.Path, "/"))
		if destIsDir {
			target = transfer.Endpoint{FS: dst.FS, Path: dst.FS.Join(dst.Path, name)}
		}
	}
	return mirror.Sync(ctx, src, target, name, s.contents, created, mo)
}

// syncStats are rsync's --stats counts.
type syncStats struct {
	files, dirs, links            int
	created, createdDirs, deleted int
	sent                          int
	totalBytes, sentBytes         int64
	skipped                       int
}

func (s *syncStats) add(p *mirror.Plan) {
	f, d, l := p.Src.Counts()
	s.files += f
	s.dirs += d
	s.links += l
	s.totalBytes += p.Src.Bytes()
}

func (s *syncStats) ran(r *mirror.Result) {
	if r.Engine != nil {
		s.sent += r.Engine.Files
		s.sentBytes += r.Engine.Bytes
	}
	s.createdDirs += r.Dirs
	s.created += r.Dirs + r.Links
	if r.Engine != nil {
		s.created += r.Engine.Files
	}
	s.deleted += r.Deleted
}

func (s *syncStats) print(w io.Writer, took time.Duration) {
	fmt.Fprintf(w, "\nNumber of files: %s (reg: %s, dir: %s, link: %s)\n", commas(int64(s.files+s.dirs+s.links)), commas(int64(s.files)), commas(int64(s.dirs)), commas(int64(s.links)))
	fmt.Fprintf(w, "Number of created files: %s\n", commas(int64(s.created)))
	fmt.Fprintf(w, "Number of deleted files: %s\n", commas(int64(s.deleted)))
	fmt.Fprintf(w, "Number of regular files transferred: %s\n", commas(int64(s.sent)))
	fmt.Fprintf(w, "Total file size: %s bytes\n", commas(s.totalBytes))
	fmt.Fprintf(w, "Total transferred file size: %s bytes\n", commas(s.sentBytes))
	secs := took.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(s.sentBytes) / secs
	}
	fmt.Fprintf(w, "\nsent %s bytes in %.2f seconds (%s bytes/sec)\n", commas(s.sentBytes), secs, commas(int64(rate)))
	fmt.Fprintf(w, "total size is %s\n", commas(s.totalBytes))
}
