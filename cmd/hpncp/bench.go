package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/bench"
	"github.com/hpncp/hpncp/internal/recommend"
	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/transfer"
)

// benchHelpText is hpncp bench --help (a template: no double braces).
const benchHelpText = `hpncp bench measures hpncp against a host: timed uploads and downloads of a
scratch file with each pipeline configuration, summarised per configuration
as min, median, max, average and standard deviation of MB/s and of seconds.
Each run is timed as scp's and rsync's meters time a file, from the
connected SFTP session to the file in place; connecting is shown apart,
and the remote scratch file is removed before each upload, untimed.
It ends with the best configuration for the host, which it keeps in
$XDG_CACHE_HOME/hpncp/hosts/USER@HOSTNAME_PORT.json for later copies to
start from: USER, HOSTNAME and PORT as ssh -G resolves the host given, so
that copies through any alias of the same destination use it.

Usage:
  hpncp bench [flags] [user@]host[:dir]   scratch file in dir (default /tmp)
  hpncp bench --embedded [--rtt 50ms] [--rate 10gbit]
  hpncp bench --forget [user@]host        drop host's stored recommendation

--embedded runs everything in this process: an SSH/SFTP server on 127.0.0.1
behind a relay that emulates a path with the given round-trip time and rate
(both directions, shared by all connections). No sshd, no root, no network:
the table shows what hpncp gains on a long path over one plain stream. The
default path is a long fat network (50 ms, 10 Gbit/s, as research networks
have), where one stream is held to its window, about 37 MB/s, and hpncp
runs as fast as this machine's CPU can encrypt for both ends.

Configurations (--configs, comma-separated, or all):
  hpn     --streams auto, the default
  hpnd    --hpn-disabled: one stream, as stock scp/sftp
  s2 s4 s8 s16   --streams N
  scp-O   -O: the legacy scp protocol (the remote must have scp)

Examples:
  hpncp bench --embedded                  the demo: 50 ms, 10 Gbit/s
  hpncp bench --embedded --rtt 100ms --rate 1gbit
  hpncp bench alice@nas                   every configuration to nas:/tmp
  hpncp bench --size 256MiB --runs 3 --configs hpn,hpnd,s8 host:/data
  hpncp bench --json host > host.json
  hpncp bench --embedded --svg demo.svg   the demo's table, drawn as bars

Flags:
  --size SIZE        scratch file size [64MiB; 128MiB embedded]
  --runs N           transfers per configuration and direction [5; 3 embedded]
  --configs LIST     configurations [all; hpn,hpnd embedded]
  --json             print the runs and summaries as JSON
  --svg FILE         also draw the table as a bar chart (SVG) in FILE
  --no-save          do not store the recommendation
  --forget           remove the stored recommendation of the host given
  --embedded         the self-contained demo (emulated path)
  --rtt DURATION     embedded: round-trip time [50ms]
  --rate RATE        embedded: link rate, e.g. 100mbit, 1gbit, 0 unlimited [10gbit]
  -P -i -F -o -J -c -B -v -4 -6   as for copies
`

const benchHint = "run hpncp bench --help for usage"

// benchOptions are hpncp bench's settings.
type benchOptions struct {
	// conn holds the connection flags, with a copy's meaning.
	conn     copyOptions
	Size     string
	Runs     int64
	Configs  string
	JSON     bool
	SVG      string // --svg: the table as a bar chart, in this file
	NoSave   bool
	Forget   bool
	Embedded bool
	RTT      time.Duration
	Rate     string
	Target   string
}

func (o *benchOptions) flags() []cli.Flag {
	c := &o.conn
	return []cli.Flag{
		&cli.StringFlag{Name: "size", Destination: &o.Size},
		&cli.Int64Flag{Name: "runs", Destination: &o.Runs},
		&cli.StringFlag{Name: "configs", Destination: &o.Configs},
		&cli.BoolFlag{Name: "json", Destination: &o.JSON},
		&cli.StringFlag{Name: "svg", Destination: &o.SVG},
		&cli.BoolFlag{Name: "no-save", Destination: &o.NoSave},
		&cli.BoolFlag{Name: "forget", Destination: &o.Forget},
		&cli.BoolFlag{Name: "embedded", Destination: &o.Embedded},
		&cli.DurationFlag{Name: "rtt", Value: 50 * time.Millisecond, Destination: &o.RTT},
		&cli.StringFlag{Name: "rate", Value: "10gbit", Destination: &o.Rate},
		&cli.Int64Flag{Name: "P", Destination: &c.Port},
		&cli.StringSliceFlag{Name: "i", Destination: &c.Identities},
		&cli.StringFlag{Name: "F", Destination: &c.ConfigFile},
		&cli.StringSliceFlag{Name: "o", Destination: &c.SSHOptions},
		&cli.StringFlag{Name: "J", Destination: &c.Jump},
		&cli.StringFlag{Name: "c", Destination: &c.Cipher},
		&cli.BoolFlag{Name: "B", Destination: &c.Batch},
		&cli.BoolFlag{Name: "v", Destination: &c.Verbose},
		&cli.BoolFlag{Name: "4", Destination: &c.IPv4},
		&cli.BoolFlag{Name: "6", Destination: &c.IPv6},
	}
}

func benchCommand(stdout, stderr io.Writer) *cli.Command {
	var o benchOptions
	return &cli.Command{
		Name:               "bench",
		Usage:              "measure hpncp's configurations against a host, or the embedded demo",
		Flags:              o.flags(),
		CustomHelpTemplate: benchHelpText,
		OnUsageError: func(_ context.Context, _ *cli.Command, err error, _ bool) error {
			return usagef(benchHint, "bench: %s", strings.TrimPrefix(err.Error(), "flag provided but not defined: "))
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if len(args) > 1 {
				return usagef(benchHint, "bench: one host, got %q", args)
			}
			if len(args) == 1 {
				o.Target = args[0]
			}
			return runBench(ctx, &o, stdout, stderr)
		},
	}
}

// runBench runs hpncp bench with o.
func runBench(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) error {
	if o.Forget {
		return forgetHost(ctx, o, stdout)
	}
	if o.Embedded == (o.Target != "") {
		return usagef("give a host, e.g. hpncp bench user@host, or --embedded for the demo",
			"bench: a host or --embedded, not both and not neither")
	}
	bo, err := o.benchSettings()
	if err != nil {
		return err
	}
	o.conn.Quiet = true

	var loc transfer.Location
	emulated := ""
	demoRoot := ""
	if o.Embedded {
		bits, err := bench.ParseRate(o.Rate)
		if err != nil {
			return usagef(benchHint, "bench: --rate: %v", err)
		}
		if o.RTT < 0 || o.RTT > 10*time.Second {
			return usagef(benchHint, "bench: --rtt %s: want a duration from 0 to 10s", o.RTT)
		}
		demo, err := bench.StartDemo(o.RTT, bits)
		if err != nil {
			return err
		}
		defer demo.Close()
		demoRoot = demo.Root
		o.conn.ConfigFile = demo.ConfigFile
		o.conn.Batch = true
		loc = transfer.Location{Host: bench.DemoHost}
		emulated = fmt.Sprintf("in-process SSH/SFTP server on 127.0.0.1 behind a relay emulating %s RTT at %s (this machine's CPU runs both ends)",
			o.RTT, rateString(bits))
	} else {
		loc, err = benchLocation(o.Target)
		if err != nil {
			return err
		}
		bo.RemoteDir = loc.Path
		if loc.Port != 0 {
			o.conn.Port = int64(loc.Port)
			loc.Port = 0
		}
	}
	if o.conn.IPv4 && o.conn.IPv6 {
		return usagef(benchHint, "-4 and -6 exclude each other")
	}

	if !o.JSON && isTerminal(stderr) {
		bo.Progress = func(c bench.Config, d bench.Direction, run int, secs float64) {
			fmt.Fprintf(stderr, "hpncp: bench %-5s %-8s run %d/%d: %.2fs\n", c.Name, d, run+1, bo.Runs, secs)
		}
	}
	runner := &bench.Copier{Conn: o.conn.conn(stderr), Host: loc, LocalRoot: demoRoot}
	if o.conn.Verbose {
		runner.Logf = logTo(stderr)
		runner.Done = func(res *transfer.Result, took time.Duration) { printSummary(stderr, res, took) }
	}
	rep, err := bench.Run(ctx, runner, strings.TrimSuffix(loc.HostLabel(), ":"), bo)
	if err != nil {
		return err
	}
	rep.Emulated = emulated
	if o.JSON {
		err = bench.WriteJSON(stdout, rep)
	} else {
		err = bench.WriteTable(stdout, rep)
	}
	if err != nil {
		return fmt.Errorf("bench: write the report: %w", err)
	}
	if o.SVG != "" {
		var buf bytes.Buffer
		if err := bench.WriteSVG(&buf, rep); err != nil {
			return err
		}
		if err := os.WriteFile(o.SVG, buf.Bytes(), 0o666); err != nil {
			_ = os.Remove(o.SVG)
			return &transfer.Error{Op: "write chart", Path: o.SVG, Err: err}
		}
	}
	if o.Embedded || o.NoSave || rep.Recommendation == nil {
		return nil
	}
	r := *rep.Recommendation
	r.Host = loc.Host
	key, err := job.RecommendationKey(ctx, o.conn.conn(stderr), loc)
	if err == nil {
		err = recommend.Save(key, r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hpncp: warning: %v\n", err)
		return nil
	}
	if !o.JSON {
		fmt.Fprintf(stderr, "hpncp: stored the recommendation for %s (%s); hpncp bench --forget %s drops it\n", loc.Host, key, loc.Host)
	}
	return nil
}

// benchSettings turns the flags into bench.Options, with the embedded
// demo's smaller defaults where a flag is not given.
func (o *benchOptions) benchSettings() (bench.Options, error) {
	bo := bench.Options{Size: 64 << 20, Runs: 5, Configs: bench.Configs, RemoteDir: "/tmp"}
	if o.Embedded {
		// The demo runs each configuration three times each way, so that
		// its table gives a median and a spread rather than one run a busy
		// moment could make: its two ends share this machine's CPU. The
		// file is large enough for the windows' filling and each copy's
		// own round trips (stat, create, open, close, rename) not to
		// decide the ratio, and small enough for the whole demo to take
		// about a minute; bench/README.md shows what larger files do.
		bo.Size, bo.Runs, bo.RemoteDir = 128<<20, 3, ""
		bo.Configs, _ = bench.ParseConfigs("hpn,hpnd")
	}
	if o.Size != "" {
		n, err := units.ParseSize(o.Size)
		if err != nil || n <= 0 {
			return bo, usagef(benchHint, "bench: --size %s: want a size such as 64MiB", o.Size)
		}
		bo.Size = n
	}
	if o.Runs != 0 {
		if o.Runs < 1 || o.Runs > 1000 {
			return bo, usagef(benchHint, "bench: --runs %d: want 1 to 1000", o.Runs)
		}
		bo.Runs = int(o.Runs)
	}
	if o.Configs != "" {
		cs, err := bench.ParseConfigs(o.Configs)
		if err != nil {
			return bo, usagef(benchHint, "bench: --configs: %v", err)
		}
		bo.Configs = cs
	}
	return bo, nil
}

// benchLocation reads [user@]host[:dir]; without a dir the scratch file
// goes to /tmp, which every Unix host has and cleans.
func benchLocation(target string) (transfer.Location, error) {
	loc, err := transfer.ParseLocation(target)
	if err == nil && !loc.Remote() && !strings.Contains(target, "/") {
		loc, err = transfer.ParseLocation(target + ":")
	}
	const hint = "e.g. hpncp bench user@host or hpncp bench host:/data"
	switch {
	case err != nil:
		// ParseLocation's message hides a password the operand holds.
		return loc, usagef(hint, "bench: %v", err)
	case !loc.Remote():
		return loc, usagef(hint, "bench: %q is not a host", target)
	}
	if loc.Path == "" || loc.Path == "." {
		loc.Path = "/tmp"
	}
	return loc, nil
}

// forgetHost drops what bench stored for target, under the key bench
// saved it with (the destination resolved with the same -F, -o and -P),
// and a file an earlier hpncp stored under the host name as typed.
func forgetHost(ctx context.Context, o *benchOptions, stdout io.Writer) error {
	if o.Target == "" {
		return usagef("e.g. hpncp bench --forget host", "bench --forget: which host?")
	}
	loc, err := benchLocation(o.Target)
	if err != nil {
		return err
	}
	key, err := job.RecommendationKey(ctx, o.conn.conn(io.Discard), loc)
	if err != nil {
		return err
	}
	had, err := recommend.Forget(key)
	if err != nil {
		return err
	}
	hadOld, err := recommend.Forget(loc.Host)
	if err != nil {
		return err
	}
	if had || hadOld {
		fmt.Fprintf(stdout, "hpncp: forgot the recommendation for %s (%s)\n", loc.Host, key)
	} else {
		fmt.Fprintf(stdout, "hpncp: no recommendation stored for %s (%s)\n", loc.Host, key)
	}
	return nil
}

func rateString(bits float64) string {
	switch {
	case bits == 0:
		return "an unlimited rate"
	case bits >= 1e9:
		return fmt.Sprintf("%g Gbit/s", bits/1e9)
	case bits >= 1e6:
		return fmt.Sprintf("%g Mbit/s", bits/1e6)
	}
	return fmt.Sprintf("%g kbit/s", bits/1e3)
}
