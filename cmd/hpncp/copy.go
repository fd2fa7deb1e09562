package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/internal/starttrace"
	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
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
		&cli.BoolFlag{Name: "links", Destination: &o.Links},
		&cli.BoolFlag{Name: "hard-links", Destination: &o.HardLinks},
		&cli.BoolFlag{Name: "safe-links", Destination: &o.SafeLinks},
		// Long only: scp's -S names the ssh program.
		&cli.BoolFlag{Name: "sparse", Destination: &o.Sparse},
		&cli.BoolFlag{Name: "tar", Destination: &o.Tar},
		&cli.BoolFlag{Name: "no-tar", Destination: &o.NoTar},
		&cli.BoolFlag{Name: "C", Usage: "compress tar streams", Destination: &o.Compress},
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

// tuning is what the pipeline flags ask for, parsed.
type tuning struct {
	parallel transfer.ParallelOptions
	rcvbuf   int
	sndbuf   int
	// cc is the congestion control the copy's connections get (--cc),
	// "" for the system's; auto is ends.AutoCC's choice for the copy's
	// direction, which may be tried and given up (ccBestEffort).
	cc           string
	ccBestEffort bool
}

// tuning reads the tuning flags for a copy whose data this host sends
// (upload) or receives.
func (o *copyOptions) tuning(upload bool) (tuning, error) {
	var t tuning
	chunk, err := units.ParseSize(o.Chunk)
	if err != nil || chunk < 32<<10 || chunk > 64<<20 {
		return t, usagef("the chunk is the bytes one stream reads or writes at a time", "--chunk %s: want a size from 32KiB to 64MiB", o.Chunk)
	}
	t.parallel.Chunk = int(chunk)
	t.parallel.MinSize = 4 * chunk
	if o.Window != "auto" {
		w, err := units.ParseSize(o.Window)
		if err != nil || w < chunk {
			return t, usagef("the window is the bytes each stream keeps in flight", "--window %s: want auto or a size of at least one chunk (%d bytes)", o.Window, chunk)
		}
		t.parallel.Depth = int((w + chunk - 1) / chunk)
	}
	for _, b := range []struct {
		flag, val string
		dst       *int
	}{{"--tcp-rcvbuf", o.TCPRcvBuf, &t.rcvbuf}, {"--tcp-sndbuf", o.TCPSndBuf, &t.sndbuf}} {
		if b.val == "" {
			continue
		}
		n, err := units.ParseSize(b.val)
		if err != nil || n <= 0 || n > 1<<30 {
			return t, usagef("", "%s %s: want a size such as 4M", b.flag, b.val)
		}
		*b.dst = int(n)
	}
	switch o.CC {
	case "system":
	case "auto":
		t.cc, t.ccBestEffort = ends.AutoCC(upload)
	default:
		if !sshconn.ValidCongestionName(o.CC) {
			return t, usagef("name one of net.ipv4.tcp_available_congestion_control, or auto, or system", "--cc %s: not a congestion control algorithm's name", o.CC)
		}
		t.cc = o.CC
	}
	streams, err := countFlag("--streams", o.Streams)
	if err != nil {
		return t, err
	}
	conns, err := countFlag("--connections", o.Connections)
	if err != nil {
		return t, err
	}
	if o.HPNDisabled {
		if streams > 1 || conns > 1 {
			return t, usagef("", "--hpn-disabled means one stream; leave out --streams and --connections")
		}
		// One stream, one connection, no controller decisions: the stock
		// pipeline's shape, kept full (requests in flight across chunks)
		// as OpenSSH's sftp client keeps its requests in flight.
		streams, conns = 1, 1
	}
	// What one connection's socket buffers carry bounds it as surely as
	// its channels' windows do: on stock kernels (tcp_wmem max 4 MiB) a
	// long path needs several connections from the start.
	cfg := window.Config{Fixed: streams, MaxConns: conns, Start: o.startStreams,
		ConnBytes: sshconn.ConnBytes(t.rcvbuf, t.sndbuf)}
	if streams > 0 && conns > 0 {
		cfg.StreamsPerConn = (streams + conns - 1) / conns
	}
	if t.cc == "bbr" && conns == 0 {
		// A lossy path's plan takes more connections than another's
		// because each loss cuts a cubic connection's window for
		// seconds; bbr's is not cut, and an upload's extra connections
		// only added a slow one at its end, which no second copy can
		// overtake (100 ms, 0.01 % loss: a 3 s tail at 0-4 MB/s).
		cfg.LossyConns = window.DefaultMaxConns
	}
	t.parallel.Controller = func() *window.Controller { return window.New(cfg) }
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

func (o *copyOptions) connOptions(stderr io.Writer) sshconn.Options {
	co := sshconn.Options{
		ConfigFile: o.ConfigFile,
		Options:    o.SSHOptions,
		Port:       int(o.Port),
		Identities: o.Identities,
		JumpHosts:  o.Jump,
		Ciphers:    o.Cipher,
		BatchMode:  o.Batch,
	}
	switch {
	case o.IPv4:
		co.AddressFamily = "inet"
	case o.IPv6:
		co.AddressFamily = "inet6"
	}
	if o.Verbose {
		co.Logf = logTo(stderr)
	}
	if !o.Quiet {
		co.Warnf = warnTo(stderr)
	}
	if !o.Batch {
		co.Prompter = sshconn.TerminalPrompter()
	}
	return co
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
	to := transfer.Options{
		Tar:       o.tarOptions(o.Legacy),
		Recursive: o.Recursive,
		Preserve:  o.Preserve,
		Skip:      o.skipMode(),
		Verify:    o.Verify,
		Resume:    o.Resume,
		Links:     transfer.LinkOptions{Symlinks: o.Links, Hard: o.HardLinks, Safe: o.SafeLinks},
		Sparse:    o.Sparse,
	}
	// The list is read once its options are known to go together, so that
	// a refused combination is told before a list that cannot be read.
	if o.FilesFrom != "" {
		to.FilesFrom = []string{}
	}
	if err := to.Validate(); err != nil {
		return optionUsage(err)
	}
	limit, err := o.bytesPerSecond()
	if err != nil {
		return err
	}
	to.Limiter = pipeline.NewLimiter(limit)
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
	locs := make([]transfer.Location, len(o.Operands))
	for i, s := range o.Operands {
		l, err := transfer.ParseLocation(s)
		if err != nil {
			return usagef("", "%v", err)
		}
		locs[i] = l
		if o.HardLinks && l.Remote() && i < len(o.Operands)-1 {
			return usagef("leave out --hard-links, or run hpncp on the source host",
				"--hard-links works with local sources only: SFTP has no inode numbers to find %s's names by", l)
		}
	}

	o.useRecommendation(ctx, locs, stderr)
	tune, err := o.tuning(uploads(locs))
	if err != nil {
		return err
	}
	to.Parallel = tune.parallel
	stopTrace, err := o.startTrace(&to, stderr)
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
	}
	if o.Verbose {
		to.Logf = logTo(logs)
	}

	// With -v the start is traced, from the dial to the first byte, to
	// tell the round trips it cost.
	var trace *starttrace.Trace
	if o.Verbose {
		trace = starttrace.New(0)
		ctx = starttrace.With(ctx, trace)
	}
	hosts := ends.New(ends.Options{SSH: o.connOptions(stderr), Legacy: o.Legacy, RcvBuf: tune.rcvbuf, SndBuf: tune.sndbuf,
		CC: tune.cc, CCBestEffort: tune.ccBestEffort, Predial: predial(locs, tune.parallel, o.Recursive && !o.Legacy),
		PreOpen: preOpen(locs, o.Recursive), PreCreate: preCreate(locs, to, o.Recursive || o.Legacy),
		Warm: warms(locs, tune.parallel, o.Recursive)})
	defer hosts.Close()
	defer hosts.AbortOnCancel(ctx)()
	run, err := hosts.Open(ctx, locs, to)
	if err != nil {
		return optionUsage(err)
	}
	if o.Compress && run.Options.Tar.Mode == transfer.TarOff && to.Logf != nil {
		to.Logf("-C compresses tar streams only; this copy uses none")
	}

	// The copy is timed from its connected ends on, in both protocols, as
	// scp's and rsync's meters time a file: the connection's set-up is
	// the same whatever the copy does after it.
	start := time.Now()
	if line != nil {
		line.Begin()
	}
	res, err := run.Copy(ctx)
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
		err = explainLost(stderr, hosts, err)
	}
	rec.res, rec.elapsed, rec.legacy = res, time.Since(start), run.Legacy
	if s := trace.Summary(); s != "" {
		to.Logf("%s", s)
	}
	if err != nil {
		return err
	}
	if o.Verbose || showProgress {
		printSummary(stderr, res, time.Since(start))
	}
	if len(res.Errors) > 0 {
		pe := &partialError{failed: len(res.Errors), done: res.Files + res.Skipped}
		for _, e := range res.Errors {
			pe.lost = pe.lost || protocol.Lost(e)
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

// explainLost tells, after a copy failed, that a connection was given up
// because its server stopped responding: the copy's own error says only
// that its streams, or a re-dial, failed. When the copy failed as a whole
// (err), err is printed and the connection's error returned in its place,
// for exit code 255; when files failed one by one (err nil), the
// connection's error is printed.
func explainLost(stderr io.Writer, hosts *ends.Hosts, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	lost := hosts.Lost()
	var ce *sshconn.Error
	switch {
	case lost == nil:
		return err
	case err == nil:
		errors.As(lost, &ce)
		printError(stderr, ce.Error(), ce.Hint)
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

// oneServer reports whether locs copy between this host and one server,
// either way: every source remote and the target local, or the other
// way round, every remote one naming the same host.
func oneServer(locs []transfer.Location) bool {
	srcs, dst := locs[:len(locs)-1], locs[len(locs)-1]
	host := ""
	for _, l := range srcs {
		if l.Remote() == dst.Remote() {
			return false
		}
		if l.Remote() {
			if host != "" && l.HostLabel() != host {
				return false
			}
			host = l.HostLabel()
		}
	}
	return true
}

// uploads reports whether the copy of locs sends from this host: its
// target is remote and no source is.
func uploads(locs []transfer.Location) bool {
	if len(locs) < 2 || !locs[len(locs)-1].Remote() {
		return false
	}
	for _, l := range locs[:len(locs)-1] {
		if l.Remote() {
			return false
		}
	}
	return true
}

// treeConns is how many connections a tree's copy (-r) to or from one
// server is given from the start: the first, the second its batches and
// files spread to (protocol's pool asks for it as soon as SFTP is up),
// and tar mode's own.
const treeConns = 3

// predial returns, for an upload of a large local file, how many
// connections its copy's first plan will open, so that the host's end
// dials them as soon as the first is through its TCP handshake
// (ends.Options.Predial), rather than after the SFTP start and the plan:
// ready 0.35 s sooner at 100 ms; and how many streams the plan puts on
// each, whose SFTP sessions each connection opens once it is up. A tree's
// copy (tree: -r over SFTP) between this host and one server gets
// treeConns, and no sessions ahead (its batches and tar streams take
// their own): at 50 ms its large files started before a second
// connection was up and stayed on the first (1,000 files of 4 KiB and
// five of 10 MiB: 2.7 s where rsync takes 3.2). A download of one file
// asks for the plan of a large file before its size is known: the stat
// that tells it comes with the SFTP start, nine round trips after the TCP
// handshake, and connections dialed only then were up a second later at
// 100 ms. Should the file be small, the spares and their sessions go
// unused and are closed with the others; a short path's plan is one
// connection, and nothing is dialed or opened ahead.
func predial(locs []transfer.Location, p transfer.ParallelOptions, tree bool) func(time.Duration) (conns, sessions int) {
	if p.Controller == nil || len(locs) < 2 {
		return nil
	}
	sized := uploadPlan(locs, p)
	switch {
	case tree && oneServer(locs):
		// A file among the sources has the plan its size asks for when
		// that is more.
		return func(rtt time.Duration) (int, int) {
			n := treeConns
			if sized != nil {
				c, _ := sized(rtt)
				n = max(n, c)
			}
			return n, 0
		}
	case !tree && len(locs) == 2 && locs[0].Remote() && !locs[1].Remote():
		return func(rtt time.Duration) (int, int) { return firstPlan(p.Controller(), rtt) }
	}
	return sized
}

// warms reports whether the connections of a copy grow their congestion
// windows before its first write (ends.Options.Warm): for an upload of a
// tree, or of a file large enough for the parallel pipeline. Downloads
// gain nothing from it: the server sends their bytes.
func warms(locs []transfer.Location, p transfer.ParallelOptions, recursive bool) bool {
	return uploads(locs) && (recursive || uploadPlan(locs, p) != nil)
}

// preOpen is, for a download of one remote file, that file's path on the
// server: the sessions opened ahead for its streams open it as they
// start (ends.Options.PreOpen). Anything else opens nothing ahead.
func preOpen(locs []transfer.Location, recursive bool) string {
	if recursive || len(locs) != 2 || !locs[0].Remote() || locs[1].Remote() {
		return ""
	}
	return ends.RemotePath(locs[0].Path)
}

// preCreate is, for a plain upload of one small local file to a remote
// path that names a file (not a directory: no trailing slash), that path,
// the temporary file the copy will write beside it and the umask probe's
// directory, which the server's SFTP start then makes
// (ends.Options.PreCreate). Anything the copy might not write, or write
// otherwise (a skip likely, --verify, --resume, file lists, shards,
// trees, -O, a link or a large file), makes nothing ahead. A path that is
// a directory after all gets its file elsewhere, and the file made ahead
// is removed.
func preCreate(locs []transfer.Location, to transfer.Options, other bool) protocol.PreCreate {
	// The quick check skips a file whose target has its size and time:
	// without -p the target's time is the last copy's, so the file is
	// sent, and a temporary file made ahead is used. With -p a re-run
	// would skip it, and a file made and removed for nothing would still
	// touch the directory.
	sends := to.Skip == transfer.CopyAlways || to.Skip == transfer.SkipQuick && !to.Preserve
	if other || len(locs) != 2 || locs[0].Remote() || !locs[1].Remote() ||
		!sends || to.Verify || to.Resume || to.FilesFrom != nil || to.Split() {
		return protocol.PreCreate{}
	}
	fi, err := os.Lstat(locs[0].Path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > protocol.SmallMax {
		return protocol.PreCreate{}
	}
	final := ends.RemotePath(locs[1].Path)
	if final == "" || final == "." || strings.HasSuffix(final, "/") || strings.HasSuffix(final, "/.") {
		return protocol.PreCreate{}
	}
	dir := path.Dir(final)
	return protocol.PreCreate{Final: final, Temp: path.Join(dir, transfer.TempName(path.Base(final))),
		Probe: path.Join(dir, transfer.TempName("umask"))}
}

// firstPlan is c's first plan at rtt as predial tells it: its
// connections, and the streams on each where it has more than one.
func firstPlan(c *window.Controller, rtt time.Duration) (conns, sessions int) {
	plan := c.Start(rtt)
	if plan.Conns <= 1 {
		return plan.Conns, 0
	}
	return plan.Conns, (plan.Streams + plan.Conns - 1) / plan.Conns
}

// uploadPlan is predial's answer for an upload of files, by the largest of
// them: nil when none is large enough for the parallel pipeline.
func uploadPlan(locs []transfer.Location, p transfer.ParallelOptions) func(time.Duration) (int, int) {
	if !uploads(locs) {
		return nil
	}
	var largest int64
	for _, l := range locs[:len(locs)-1] {
		if fi, err := os.Stat(l.Path); err == nil && fi.Mode().IsRegular() {
			largest = max(largest, fi.Size())
		}
	}
	if largest < p.MinSize {
		return nil
	}
	return func(rtt time.Duration) (int, int) {
		c := p.Controller()
		c.Size(largest)
		return firstPlan(c, rtt)
	}
}
