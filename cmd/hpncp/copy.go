package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/transfer"
)

// copyOptions are the settings of a copy, scp's flags among them.
type copyOptions struct {
	Recursive  bool
	Preserve   bool
	Quiet      bool
	Verbose    bool
	Batch      bool
	IPv4       bool
	IPv6       bool
	Port       int64
	Identities []string
	ConfigFile string
	SSHOptions []string
	Jump       string
	LimitKbit  int64
	Cipher     string
	Legacy     bool // -O: the legacy scp protocol

	// Pipeline flags, after HPN-SSH's options.
	Streams     string // N or "auto"
	Connections string // N or "auto"
	HPNDisabled bool
	Chunk       string
	Window      string // BYTES in flight per stream, or "auto"
	TCPRcvBuf   string
	TCPSndBuf   string
	CC          string // --cc: auto, system or an algorithm's name

	// Re-runs, verification, file lists and shards, for migrations.
	Force          bool   // copy even what the target has already
	IgnoreExisting bool   // skip every file the target has
	Checksum       bool   // compare hashes instead of size and time
	Verify         bool   // hash source and written file after each copy
	JSON           bool   // a JSON report on stdout
	Shard          string // i/n
	FilesFrom      string // a file listing the paths to copy, "-" for stdin
	From0          bool   // the list is NUL-separated
	BWLimit        string // bytes (or bits with "bit") per second
	Resume         bool   // keep interrupted files' temporaries and continue them
	Sparse         bool   // keep files' holes
	Trace          string // --trace: the window controller's CSV trace (internal/trace)
	// Delta sends a file whose target exists by rsync's delta transfer,
	// through a helper at the far end (Helper, HelperPath, HelperDir).
	Delta                         bool
	Helper, HelperPath, HelperDir string
	// InPlace writes a file over its existing target where it lies, as
	// rsync's --inplace (transfer.Options.InPlace).
	InPlace bool

	// Links, as rsync's long flags (-l is scp's limit, -H unused by scp
	// but kept rsync's long-only here too).
	Links     bool // --links: symbolic links as links
	HardLinks bool // --hard-links: one local file's names as one file
	SafeLinks bool // --safe-links: leave out links that lead outside the tree

	// Tar mode (transfer/tar.go): trees of small files as tar streams.
	Tar        bool  // --tar: always, failing where the server has no GNU tar
	NoTar      bool  // --no-tar: never
	Compress   bool  // -C: compress the tar streams
	TarStreams int64 // --tar-streams: tar streams at once, 0 for the default
	// unsupported holds scp flags hpncp knows but does not implement, so
	// that using one is an error that names it rather than a surprise.
	unsupported map[string]*bool

	Operands []string

	// Starting from hpncp bench's stored recommendation (recommend.go).
	fromCache    bool // no pipeline flag was given on the command line
	startStreams int  // the controller's first stream count; 0: its own guess
}

// unsupportedFlags are scp's flags hpncp does not offer, with what they do.
var unsupportedFlags = []struct{ name, what string }{
	{"A", "agent forwarding"},
	{"R", "copies between two remotes run on the source host"},
	{"T", "relaxed file name checks of the legacy SCP protocol"},
	{"X", "SFTP protocol options"},
}

func (o *copyOptions) flags() []cli.Flag {
	flags := []cli.Flag{
		&cli.BoolFlag{Name: "r", Usage: "copy directories recursively", Destination: &o.Recursive},
		&cli.BoolFlag{Name: "p", Usage: "preserve modes and access and modification times", Destination: &o.Preserve},
		&cli.BoolFlag{Name: "q", Usage: "quiet: no progress, no warnings", Destination: &o.Quiet},
		&cli.BoolFlag{Name: "v", Usage: "verbose: log connection steps and each file", Destination: &o.Verbose},
		&cli.BoolFlag{Name: "B", Usage: "batch mode: never prompt", Destination: &o.Batch},
		&cli.BoolFlag{Name: "4", Usage: "use IPv4 only", Destination: &o.IPv4},
		&cli.BoolFlag{Name: "6", Usage: "use IPv6 only", Destination: &o.IPv6},
		&cli.Int64Flag{Name: "P", Usage: "port to connect to", Destination: &o.Port},
		&cli.StringSliceFlag{Name: "i", Usage: "identity file", Destination: &o.Identities},
		&cli.StringFlag{Name: "F", Usage: "ssh_config file", Destination: &o.ConfigFile},
		&cli.StringSliceFlag{Name: "o", Usage: "ssh_config option Key=Value", Destination: &o.SSHOptions},
		&cli.StringFlag{Name: "J", Usage: "jump host(s)", Destination: &o.Jump},
		&cli.Int64Flag{Name: "l", Usage: "bandwidth limit in Kbit/s", Destination: &o.LimitKbit},
		&cli.StringFlag{Name: "c", Usage: "cipher(s)", Destination: &o.Cipher},
		&cli.BoolFlag{Name: "O", Usage: "use the legacy SCP protocol", Destination: &o.Legacy},
		// scp's -3 relays remote-to-remote copies through this host, which
		// is how hpncp always copies between two remotes.
		&cli.BoolFlag{Name: "3", Usage: "relay copies between two remotes through this host (always so)"},
		&cli.StringFlag{Name: "streams", Value: "auto", Destination: &o.Streams},
		&cli.StringFlag{Name: "connections", Value: "auto", Destination: &o.Connections},
		&cli.BoolFlag{Name: "hpn-disabled", Destination: &o.HPNDisabled},
		&cli.StringFlag{Name: "chunk", Value: "1MiB", Destination: &o.Chunk},
		&cli.StringFlag{Name: "window", Value: "auto", Destination: &o.Window},
		&cli.StringFlag{Name: "tcp-rcvbuf", Destination: &o.TCPRcvBuf},
		&cli.StringFlag{Name: "tcp-sndbuf", Destination: &o.TCPSndBuf},
		&cli.StringFlag{Name: "cc", Value: "auto", Destination: &o.CC},
		&cli.BoolFlag{Name: "force", Destination: &o.Force},
		&cli.BoolFlag{Name: "ignore-existing", Destination: &o.IgnoreExisting},
		&cli.BoolFlag{Name: "checksum", Destination: &o.Checksum},
		&cli.BoolFlag{Name: "verify", Destination: &o.Verify},
		&cli.BoolFlag{Name: "json", Destination: &o.JSON},
		&cli.StringFlag{Name: "trace", Usage: "write the window controller's intervals to FILE as CSV", Destination: &o.Trace},
		&cli.StringFlag{Name: "shard", Destination: &o.Shard},
		&cli.StringFlag{Name: "files-from", Destination: &o.FilesFrom},
		&cli.BoolFlag{Name: "from0", Aliases: []string{"0"}, Destination: &o.From0},
		&cli.StringFlag{Name: "bwlimit", Destination: &o.BWLimit},
		&cli.BoolFlag{Name: "resume", Destination: &o.Resume},
		&cli.BoolFlag{Name: "delta", Destination: &o.Delta},
		&cli.BoolFlag{Name: "inplace", Destination: &o.InPlace},
		&cli.StringFlag{Name: "helper", Destination: &o.Helper},
		&cli.StringFlag{Name: "helper-path", Destination: &o.HelperPath},
		&cli.StringFlag{Name: "helper-dir", Destination: &o.HelperDir},
		&cli.BoolFlag{Name: "links", Destination: &o.Links},
		&cli.BoolFlag{Name: "hard-links", Destination: &o.HardLinks},
		&cli.BoolFlag{Name: "safe-links", Destination: &o.SafeLinks},
		// Long only: scp's -S names the ssh program.
		&cli.BoolFlag{Name: "sparse", Destination: &o.Sparse},
		&cli.BoolFlag{Name: "tar", Destination: &o.Tar},
		&cli.BoolFlag{Name: "no-tar", Destination: &o.NoTar},
		&cli.BoolFlag{Name: "C", Usage: "compress tar streams, and deltas", Destination: &o.Compress},
		&cli.Int64Flag{Name: "tar-streams", Destination: &o.TarStreams},
	}
	o.unsupported = map[string]*bool{}
	for _, u := range unsupportedFlags {
		v := new(bool)
		o.unsupported[u.name] = v
		flags = append(flags, &cli.BoolFlag{Name: u.name, Hidden: true, Destination: v})
	}
	return flags
}

// check refuses flags that contradict each other or are not hpncp's; what
// the copy cannot do with the options they ask for is
// transfer.Options.Validate's to say.
func (o *copyOptions) check() error {
	for _, u := range unsupportedFlags {
		if *o.unsupported[u.name] {
			return usagef("hpncp copies over SFTP; leave the flag out", "scp flag -%s (%s) is not supported", u.name, u.what)
		}
	}
	if o.IPv4 && o.IPv6 {
		return usagef("", "-4 and -6 exclude each other")
	}
	if o.Port < 0 || o.Port > 65535 {
		return usagef("", "-P %d: not a port number", o.Port)
	}
	if o.LimitKbit < 0 {
		return usagef("", "-l %d: the limit must be a positive number of Kbit/s", o.LimitKbit)
	}
	if len(o.Operands) < 2 {
		return usagef("give one or more sources and a target, e.g. hpncp file host:dir/", "missing target")
	}
	n := 0
	for _, b := range []bool{o.Force, o.IgnoreExisting, o.Checksum} {
		if b {
			n++
		}
	}
	if n > 1 {
		return usagef("", "--force, --ignore-existing and --checksum exclude each other")
	}
	if o.BWLimit != "" && o.LimitKbit != 0 {
		return usagef("", "-l and --bwlimit exclude each other")
	}
	switch {
	case o.Delta && o.Legacy:
		return usagef("leave out -O", "--delta goes through a helper beside SFTP, not the legacy scp protocol")
	case o.Delta && o.Tar:
		return usagef("leave out --tar", "--delta sends files one by one; tar streams carry them whole")
	case o.Delta && o.Sparse:
		return usagef("leave out --delta or --sparse", "--delta does not combine with --sparse yet")
	case o.InPlace && o.Legacy:
		return usagef("leave out -O", "--inplace opens targets over SFTP, not the legacy scp protocol")
	case o.InPlace && o.Tar:
		return usagef("leave out --tar", "--inplace writes files one by one; tar streams unpack them beside their targets")
	case o.Helper != "" && o.Helper != job.HelperAuto && o.Helper != job.HelperNever:
		return usagef("install it first: hpncp helper install HOST", "--helper %s: a copy takes auto or never", o.Helper)
	case (o.Helper != "" || o.HelperPath != "" || o.HelperDir != "") && !o.Delta && !o.Verify && !o.Checksum:
		return usagef("add --delta, --verify or --checksum", "--helper, --helper-path and --helper-dir are for --delta, --verify and --checksum")
	}
	if o.HelperDir != "" {
		if err := job.CheckHelperDir(o.HelperDir); err != nil {
			return usagef("the helpers' directory on the server is absolute or under ~/", "--helper-dir: %v", err)
		}
	}
	if o.From0 && o.FilesFrom == "" {
		return usagef("", "-0 goes with --files-from")
	}
	if o.Tar && o.NoTar {
		return usagef("", "--tar and --no-tar exclude each other")
	}
	return nil
}

// skipMode is the transfer.SkipMode the flags ask for: rsync's quick
// check unless one of --force, --ignore-existing or --checksum is given.
func (o *copyOptions) skipMode() transfer.SkipMode {
	switch {
	case o.Force:
		return transfer.CopyAlways
	case o.IgnoreExisting:
		return transfer.SkipExisting
	case o.Checksum:
		return transfer.SkipChecksum
	}
	return transfer.SkipQuick
}

// bytesPerSecond is the run's bandwidth limit, 0 for none: -l in Kbit/s
// as scp's, or --bwlimit as rsync's (see units.ParseBWLimit).
func (o *copyOptions) bytesPerSecond() (int64, error) {
	if o.BWLimit == "" {
		return units.SCPLimit(o.LimitKbit), nil
	}
	n, err := units.ParseBWLimit(o.BWLimit)
	if err != nil {
		return 0, usagef("a rate is a size per second, as rsync's --bwlimit: 500 is 500 KiB/s, 10M is 10 MiB/s, 10MB is 10 MB/s, 100mbit is 100 Mbit/s",
			"--bwlimit %s: not a rate", o.BWLimit)
	}
	return n, nil
}

// fileList reads --files-from, from stdin for "-".
func (o *copyOptions) fileList(stdin io.Reader) ([]string, error) {
	if o.FilesFrom == "" {
		return nil, nil
	}
	list, err := readFileList(o.FilesFrom, o.From0, stdin)
	if err != nil {
		return nil, usagef("", "%v", err)
	}
	if list == nil {
		list = []string{}
	}
	return list, nil
}

// tuning reads the tuning flags.
func (o *copyOptions) tuning() (job.Tuning, error) {
	t := job.Tuning{CC: o.CC, HPNDisabled: o.HPNDisabled, StartStreams: o.startStreams}
	chunk, err := units.ParseSize(o.Chunk)
	if err != nil || chunk < 32<<10 || chunk > 64<<20 {
		return t, usagef("the chunk is the bytes one stream reads or writes at a time", "--chunk %s: want a size from 32KiB to 64MiB", o.Chunk)
	}
	t.Chunk = int(chunk)
	if o.Window != "auto" {
		w, err := units.ParseSize(o.Window)
		if err != nil || w < chunk {
			return t, usagef("the window is the bytes each stream keeps in flight", "--window %s: want auto or a size of at least one chunk (%d bytes)", o.Window, chunk)
		}
		t.Window = w
	}
	for _, b := range []struct {
		flag, val string
		dst       *int
	}{{"--tcp-rcvbuf", o.TCPRcvBuf, &t.RcvBuf}, {"--tcp-sndbuf", o.TCPSndBuf, &t.SndBuf}} {
		if b.val == "" {
			continue
		}
		n, err := units.ParseSize(b.val)
		if err != nil || n <= 0 || n > 1<<30 {
			return t, usagef("", "%s %s: want a size such as 4M", b.flag, b.val)
		}
		*b.dst = int(n)
	}
	if o.CC != "auto" && o.CC != "system" && !job.ValidCongestion(o.CC) {
		return t, usagef("name one of net.ipv4.tcp_available_congestion_control, or auto, or system", "--cc %s: not a congestion control algorithm's name", o.CC)
	}
	if t.Streams, err = countFlag("--streams", o.Streams); err != nil {
		return t, err
	}
	if t.Conns, err = countFlag("--connections", o.Connections); err != nil {
		return t, err
	}
	if o.HPNDisabled && (t.Streams > 1 || t.Conns > 1) {
		return t, usagef("", "--hpn-disabled means one stream; leave out --streams and --connections")
	}
	return t, nil
}

// countFlag reads "auto" as 0, or a count from 1 to 64.
func countFlag(name, v string) (int, error) {
	if v == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 64 {
		return 0, usagef("", "%s %s: want auto or a number from 1 to 64", name, v)
	}
	return n, nil
}

// conn is how the copy reaches its hosts.
func (o *copyOptions) conn(stderr io.Writer) job.Conn {
	c := job.Conn{
		ConfigFile: o.ConfigFile,
		Options:    o.SSHOptions,
		Port:       int(o.Port),
		Identities: o.Identities,
		Jump:       o.Jump,
		Ciphers:    o.Cipher,
		Batch:      o.Batch,
	}
	switch {
	case o.IPv4:
		c.AddressFamily = "inet"
	case o.IPv6:
		c.AddressFamily = "inet6"
	}
	if o.Verbose {
		c.Logf = logTo(stderr)
	}
	if !o.Quiet {
		c.Warnf = warnTo(stderr)
	}
	return c
}

// runCopy copies the operands' sources to their target. With --json it
// prints the report on stdout whatever the run's end, a command line it
// refused or a host it could not reach included (output.go).
func runCopy(ctx context.Context, o *copyOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if !o.JSON {
		return copyFiles(ctx, o, stdin, stderr, &copyRecord{})
	}
	rec := copyRecord{started: time.Now(), operands: o.Operands, perFile: true}
	err := copyFiles(ctx, o, stdin, stderr, &rec)
	if werr := writeReport(stdout, rec.report(err, time.Now())); werr != nil {
		if err == nil {
			return werr
		}
		// The run's own error decides the exit code.
		printError(stderr, werr.Error(), "")
	}
	return err
}

// copyRecord is what a copy tells its JSON report.
type copyRecord struct {
	started time.Time
	files   []transfer.FileReport
	res     *transfer.Result // nil when the copy did not start
	elapsed time.Duration    // from the connected ends on, as the summary's
	legacy  bool
	planned []report.PlannedChange // hpncp sync's plan
	// perFile says files is kept, for --json: a run of a million files
	// without it would hold a million entries nobody reads.
	perFile bool
	// The job, for report merge: the command line's operands and the
	// shard, once --shard was read.
	operands []string
	shard    report.Shard
}

// reporter is the Options.Report that fills in rec's files, nil when
// rec keeps no per-file entries.
func (rec *copyRecord) reporter() func(transfer.FileReport) {
	if !rec.perFile {
		return nil
	}
	return func(f transfer.FileReport) { rec.files = append(rec.files, f) }
}

// copyFiles is runCopy but for the report, which it fills in rec.
func copyFiles(ctx context.Context, o *copyOptions, stdin io.Reader, stderr io.Writer, rec *copyRecord) error {
	if err := o.check(); err != nil {
		return err
	}
	j := job.Job{Legacy: o.Legacy, TraceStart: o.Verbose, Delta: o.Delta,
		Helper: job.DeltaHelper{Helper: o.Helper, HelperPath: o.HelperPath, HelperDir: o.HelperDir}, Options: transfer.Options{
			Tar:       o.tarOptions(),
			Recursive: o.Recursive,
			Preserve:  o.Preserve,
			Skip:      o.skipMode(),
			Verify:    o.Verify,
			Resume:    o.Resume,
			Links:     transfer.LinkOptions{Symlinks: o.Links, Hard: o.HardLinks, Safe: o.SafeLinks},
			Sparse:    o.Sparse,
			InPlace:   o.InPlace,
		}}
	to := &j.Options
	// The list is read once its options are known to go together, so that
	// a refused combination is told before a list that cannot be read.
	if o.FilesFrom != "" {
		to.FilesFrom = []string{}
	}
	if err := to.Validate(); err != nil {
		return optionUsage(err)
	}
	var err error
	if j.Limit, err = o.bytesPerSecond(); err != nil {
		return err
	}
	if o.Shard != "" {
		s, err := report.ParseShard(o.Shard)
		if err != nil {
			return usagef("run n copies with --shard 0/n to --shard n-1/n to split one migration", "--shard: %v", err)
		}
		to.Shard, rec.shard = s, s
	}
	if to.FilesFrom, err = o.fileList(stdin); err != nil {
		return err
	}
	j.Locations = make([]transfer.Location, len(o.Operands))
	for i, s := range o.Operands {
		l, err := transfer.ParseLocation(s)
		if err != nil {
			return usagef("", "%v", err)
		}
		j.Locations[i] = l
		if o.HardLinks && l.Remote() && i < len(o.Operands)-1 {
			return usagef("leave out --hard-links, or run hpncp on the source host",
				"--hard-links works with local sources only: SFTP has no inode numbers to find %s's names by", l)
		}
	}

	o.useRecommendation(ctx, j.Locations, stderr)
	if j.Tuning, err = o.tuning(); err != nil {
		return err
	}
	stopTrace, err := o.startTrace(to, stderr)
	if err != nil {
		return err
	}
	defer stopTrace()
	to.Report = rec.reporter()
	showProgress := !o.Quiet && isTerminal(stderr)
	var line *runLine
	logs := stderr
	if showProgress {
		line = newRunLine(stderr)
		to.Progress, logs = line, line.Above()
		j.Started = line.Begin
	}
	if o.Verbose {
		to.Logf = logTo(logs)
	}
	j.Conn = o.conn(stderr)

	done, err := job.Copy(ctx, j)
	res := done.Engine
	if res == nil {
		return optionUsage(err)
	}
	if line != nil {
		// The line ends before the errors and the summary print below it.
		line.Finish()
	}
	for _, e := range res.Errors {
		if (ctx.Err() != nil || errors.Is(err, context.Canceled)) && errors.Is(e, context.Canceled) {
			// Cut by the interruption, which report prints once.
			continue
		}
		printError(stderr, e.Error(), hintOf(e))
	}
	if err != nil || len(res.Errors) > 0 {
		err = explainLost(stderr, done.Lost, err)
	}
	rec.res, rec.elapsed, rec.legacy = res, done.Took, done.Legacy
	if done.StartSummary != "" {
		to.Logf("%s", done.StartSummary)
	}
	if err != nil {
		return err
	}
	if o.Verbose || showProgress {
		printSummary(stderr, res, done.Took)
	}
	if len(res.Errors) > 0 {
		pe := &partialError{failed: len(res.Errors), done: res.Files + res.Skipped}
		for _, e := range res.Errors {
			pe.lost = pe.lost || job.Lost(e)
		}
		return pe
	}
	return nil
}

// optionUsage turns options that do not go together into a usage error,
// and leaves any other error as it is.
func optionUsage(err error) error {
	var oe *transfer.OptionError
	if errors.As(err, &oe) {
		return usagef(oe.Hint, "%s", oe.Msg)
	}
	return err
}

// printSummary prints the line that ends a copy with -v or a progress
// line, its sizes in the progress line's units.
func printSummary(stderr io.Writer, res *transfer.Result, took time.Duration) {
	secs := took.Seconds()
	fmt.Fprintf(stderr, "hpncp: %d file(s), %s (%d bytes) in %.2fs (%s/s), %d stream(s)",
		res.Files, units.FormatSize(res.Bytes), res.Bytes, secs, units.FormatSize(int64(float64(res.Bytes)/secs)), res.MaxStreams)
	if res.Conns > 0 {
		fmt.Fprintf(stderr, " over %d connection(s)", res.Conns)
	}
	if res.Links > 0 {
		fmt.Fprintf(stderr, ", %d link(s)", res.Links)
	}
	if res.Skipped > 0 {
		fmt.Fprintf(stderr, ", %d skipped", res.Skipped)
	}
	if res.Resumed > 0 {
		fmt.Fprintf(stderr, ", %d bytes resumed", res.Resumed)
	}
	fmt.Fprintln(stderr)
}

// explainLost tells, after a copy failed, that a connection was given
// up because its server stopped responding (lost, job.Result.Lost): the
// copy's own error says only that its streams, or a re-dial, failed.
// When the copy failed as a whole (err), err is printed and lost
// returned in its place, for exit code 255; when files failed one by one
// (err nil), lost is printed.
func explainLost(stderr io.Writer, lost, err error) error {
	switch {
	case lost == nil || errors.Is(err, context.Canceled):
		return err
	case err == nil:
		msg, hint, _ := job.ConnError(lost)
		printError(stderr, msg, hint)
		return nil
	}
	printError(stderr, err.Error(), hintOf(err))
	return lost
}

// legacyReport fills in a report of a legacy-protocol run (-O), which
// tells no files one by one: its files list holds only the failures and
// the totals come from the run's result.
func legacyReport(rep report.Report, res *transfer.Result) report.Report {
	for _, e := range res.Errors {
		rep.Files = append(rep.Files, report.File{Path: pathOf(e), Status: transfer.StatusFailed, Error: e.Error()})
	}
	rep.Totals.Copied = res.Files
	rep.Totals.Failed = len(res.Errors)
	rep.Totals.Files = res.Files + len(res.Errors)
	rep.Totals.Bytes = res.Bytes
	if rep.Totals.Seconds > 0 {
		rep.Totals.MBPerS = float64(res.Bytes) / rep.Totals.Seconds / 1e6
	}
	return rep
}

// pathOf is the path an error names, "" when it names none.
func pathOf(err error) string {
	var te *transfer.Error
	if errors.As(err, &te) {
		return te.Path
	}
	return ""
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// readFileList reads the --files-from list name ("-" for stdin), as
// hpncp and hpncp sync take it; errors say which part failed.
func readFileList(name string, nul bool, stdin io.Reader) ([]string, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("--files-from: %w", err)
		}
		defer f.Close()
		r = f
	}
	list, err := transfer.ReadFileList(r, nul)
	if err != nil {
		return nil, fmt.Errorf("--files-from %s: %w", name, err)
	}
	return list, nil
}

// defaultCopyOptions are the options of a copy given no flags: the
// flags' defaults, for a command that copies without scp's command line
// (hpncp sync).
func defaultCopyOptions() *copyOptions {
	o := &copyOptions{}
	for _, f := range o.flags() {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Destination != nil {
			*sf.Destination = sf.Value
		}
	}
	return o
}
