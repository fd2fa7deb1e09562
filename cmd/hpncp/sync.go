package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/internal/filter"
	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/mirror"
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

func parseSyncOperand(s string) (job.SyncOperand, error) {
	l, err := transfer.ParseLocation(s)
	if err != nil {
		return job.SyncOperand{}, syncUsagef("", "%v", err)
	}
	if l.Remote() && strings.HasPrefix(l.Path, ":") {
		return job.SyncOperand{}, syncUsagef("hpncp sync speaks to sshd: write host:path", "%s: rsync daemon operands (host::module) are not supported", s)
	}
	p := l.Path
	op := job.SyncOperand{Location: l, Slash: strings.HasSuffix(p, "/")}
	op.Contents = op.Slash || p == "" || p == "." || strings.HasSuffix(p, "/.")
	if p == "" {
		op.Location.Path = "."
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
		Checksum: o.checksum, SizeOnly: o.sizeOnly, IgnoreTimes: o.ignoreTimes, Update: o.update, Append: o.appendMode,
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
	j := job.SyncJob{Mirror: mo, Conn: co.conn(stderr), RemoveSource: o.removeSource,
		Verbose: o.verbose, Itemize: o.itemize, WholeFile: o.wholeFile, InPlace: o.inPlace || o.appendMode, Compress: o.compress,
		Helper: job.DeltaHelper{Helper: o.helper, HelperPath: o.helperPath, HelperDir: o.helperDir}}
	for _, s := range o.operands[:len(o.operands)-1] {
		op, err := parseSyncOperand(s)
		if err != nil {
			return err
		}
		j.Sources = append(j.Sources, op)
	}
	if j.Dest, err = parseSyncOperand(o.operands[len(o.operands)-1]); err != nil {
		return err
	}
	remote := j.Dest.Location.Remote()
	for _, s := range j.Sources {
		if s.Location.Remote() && remote {
			return syncUsagef("copy to this machine first, or run hpncp sync on one of the hosts",
				"hpncp sync copies between a local and a remote end, or locally: %s and %s are both remote", s.Location, j.Dest.Location)
		}
		remote = remote || s.Location.Remote()
	}

	if j.Limit, err = units.ParseBWLimit(o.bwlimit); o.bwlimit != "" && err != nil {
		return syncUsagef("a bare number is KiB/s, as rsync's; 10M is 10 MiB/s", "--bwlimit=%s: %v", o.bwlimit, err)
	}
	if j.Tuning, err = co.tuning(); err != nil {
		return err
	}
	j.Options = transfer.Options{Verify: o.verify, Sparse: o.sparse, Resume: o.partial, Report: rec.reporter()}
	if o.verbose > 1 {
		j.Options.Logf = logTo(stderr)
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
		j.Options.Progress, j.Totals = prog, prog.Plan
		defer prog.Finish()
	}
	j.Print = func(line string) {
		if o.itemize {
			fmt.Fprintln(stdout, vis.String(line))
		} else if o.verbose > 0 {
			fmt.Fprintln(stdout, vis.String(verboseLine(line)))
		}
	}
	j.Failed = func(err error) { printError(stderr, err.Error(), hintOf(err)) }

	res, err := job.Sync(ctx, j)
	rec.planned, rec.res = res.Planned, res.Engine
	var se *job.SyncError
	switch {
	case errors.As(err, &se) && se.Interrupted:
		return &syncError{code: syncExitInterrupted, err: se.Err}
	case errors.As(err, &se):
		return &syncError{code: syncExitPartial, err: se.Err, hint: se.Hint}
	case err != nil:
		return optionUsage(err)
	}
	rec.elapsed = res.Took
	if o.stats {
		printSyncStats(stdout, res.Stats, res.Took)
	}
	if o.verbose > 0 && !o.stats {
		fmt.Fprintf(stdout, "\nsent %s bytes  total size is %s\n", commas(res.Stats.SentBytes-res.Stats.Matched), commas(res.Stats.TotalBytes))
	}
	if res.DeleteSkipped > 0 {
		fmt.Fprintf(stderr, "hpncp: Deletions stopped due to --max-delete limit (%d skipped)\n", res.DeleteSkipped)
	}
	if res.Failures > 0 {
		if res.Lost != nil {
			return res.Lost
		}
		return &syncError{code: syncExitPartial, quiet: true,
			err: fmt.Errorf("%d file(s) or directories could not be synced", res.Failures)}
	}
	if res.DeleteSkipped > 0 {
		return &syncError{code: syncExitMaxDelete, quiet: true, err: fmt.Errorf("--max-delete stopped %d deletion(s)", res.DeleteSkipped)}
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

// printSyncStats prints rsync's --stats.
func printSyncStats(w io.Writer, s job.SyncStats, took time.Duration) {
	fmt.Fprintf(w, "\nNumber of files: %s (reg: %s, dir: %s, link: %s)\n", commas(int64(s.Files+s.Dirs+s.Links)), commas(int64(s.Files)), commas(int64(s.Dirs)), commas(int64(s.Links)))
	fmt.Fprintf(w, "Number of created files: %s\n", commas(int64(s.Created)))
	fmt.Fprintf(w, "Number of deleted files: %s\n", commas(int64(s.Deleted)))
	fmt.Fprintf(w, "Number of regular files transferred: %s\n", commas(int64(s.Sent)))
	fmt.Fprintf(w, "Total file size: %s bytes\n", commas(s.TotalBytes))
	fmt.Fprintf(w, "Total transferred file size: %s bytes\n", commas(s.SentBytes))
	// What went over the wire: a whole file's bytes, and a delta's
	// literal data; its matched data came from the target's old version.
	sent := s.SentBytes - s.Matched
	fmt.Fprintf(w, "Literal data: %s bytes\n", commas(sent))
	fmt.Fprintf(w, "Matched data: %s bytes\n", commas(s.Matched))
	secs := took.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(sent) / secs
	}
	fmt.Fprintf(w, "\nsent %s bytes in %.2f seconds (%s bytes/sec)\n", commas(sent), secs, commas(int64(rate)))
	fmt.Fprintf(w, "total size is %s\n", commas(s.TotalBytes))
}
