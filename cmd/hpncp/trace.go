package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/internal/trace"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/transfer"
)

// traceHelpText is hpncp trace --help (a template: no double braces).
const traceHelpText = `hpncp trace plot draws the file a copy's --trace FILE wrote as an SVG chart,
readable in any browser: goodput (MB/s, 10^6 bytes per second) over time,
a point per controller interval, the plan's streams and connections as
step lines on the right axis, and a marker at the top for each decision of
the window controller. Hover over a marker for the controller's reason,
over a point for the interval's connections: round trip, congestion
window, retransmits, delivery rate and what limited each.

Usage:
  hpncp trace plot [-o OUT.svg] TRACE.csv

Examples:
  hpncp --trace up.csv big.iso host:/data/
  hpncp trace plot -o up.svg up.csv

The trace has one CSV row per connection per interval (a header row names
the columns): interval, time_s, file, goodput (bytes/s), rtt_ms, streams,
conns, decision (the controller's reason when it decided), app_limited
(1: the pipeline could not keep every stream busy, and the controller
skipped the interval), errors (streams lost), conn, srtt_ms, min_rtt_ms,
cwnd (segments), retrans (in the interval), delivery_rate (bytes/s), bytes
(moved in the interval) and limited_by: rwnd (a receive window: the peer's, or this end's on a
download), sndbuf (the local send buffer), loss (retransmits, or on a
download segments that arrived out of order: the server's losses), cwnd (busy
all along: the path or its share of it), app (hpncp did not give the
connection enough to send: too few streams, or the CPU), recv (this end
receives below its window: the sender's limit is at the far end); then
cpu_s (hpncp's CPU seconds in the interval), spurious (of the
retransmits, those the peer already had: not loss) and lost (segments
presumed lost). Each
file's first row is the controller's first plan. Only files that go over
the parallel pipeline are traced: large ones, over SFTP.
  -o, --output FILE    write the chart to FILE (complete or not at all)
                       instead of standard output
`

const traceHint = "run hpncp trace --help for usage"

// traceOptions are the settings of hpncp trace plot.
type traceOptions struct {
	Output string // -o: "" for stdout
	Trace  string
}

func traceCommand(stdout io.Writer) *cli.Command {
	var o traceOptions
	usage := func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
		return usagef(traceHint, "%s: %s", strings.TrimPrefix(cmd.FullName(), "hpncp "),
			strings.TrimPrefix(err.Error(), "flag provided but not defined: "))
	}
	return &cli.Command{
		Name:               "trace",
		Usage:              "draw a copy's --trace file as an SVG chart",
		CustomHelpTemplate: traceHelpText,
		OnUsageError:       usage,
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() == 0 {
				return usagef(traceHint, "trace: which? hpncp trace plot TRACE.csv")
			}
			return usagef(traceHint, "trace: unknown command %q; there is plot", cmd.Args().First())
		},
		Commands: []*cli.Command{{
			Name: "plot",
			// Hidden, so that hpncp trace --help is traceHelpText too.
			Hidden:             true,
			Usage:              "draw a trace as an SVG chart",
			CustomHelpTemplate: traceHelpText,
			OnUsageError:       usage,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Destination: &o.Output},
			},
			Action: func(_ context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() != 1 {
					return usagef("hpncp trace plot -o up.svg up.csv", "trace plot: one trace file, got %d", cmd.Args().Len())
				}
				o.Trace = cmd.Args().First()
				return runTracePlot(&o, stdout)
			},
		}},
	}
}

// runTracePlot reads o.Trace and writes its chart.
func runTracePlot(o *traceOptions, stdout io.Writer) error {
	f, err := os.Open(o.Trace)
	if err != nil {
		return &transfer.Error{Op: "read trace", Path: o.Trace, Err: err}
	}
	t, err := trace.Parse(f)
	f.Close()
	if err != nil {
		return &transfer.Error{Op: "read trace", Path: o.Trace, Err: err,
			Hint: "hpncp trace plot takes the CSV file a copy's --trace FILE wrote"}
	}
	var buf bytes.Buffer
	if err := trace.Plot(&buf, t, filepath.Base(o.Trace)); err != nil {
		return err
	}
	if o.Output == "" {
		_, err := stdout.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(o.Output, buf.Bytes(), 0o666); err != nil {
		_ = os.Remove(o.Output)
		return &transfer.Error{Op: "write chart", Path: o.Output, Err: err}
	}
	return nil
}

// startTrace opens --trace's file, when one is asked for, and has the
// copy's window decisions written to it; stop ends it.
func (o *copyOptions) startTrace(to *transfer.Options, stderr io.Writer) (stop func(), err error) {
	if o.Trace == "" {
		return func() {}, nil
	}
	tr, err := trace.Create(o.Trace)
	if err != nil {
		return nil, err
	}
	to.Trace = tr.Interval
	return func() { closeTrace(tr, o.Trace, o.Quiet, stderr) }, nil
}

// closeTrace ends the --trace file, warning when it could not be written
// or holds no interval: no file went over several streams.
func closeTrace(tr *trace.Writer, path string, quiet bool, stderr io.Writer) {
	if err := tr.Close(); err != nil {
		fmt.Fprintf(stderr, "hpncp: warning: %s\n", vis.String(err.Error()))
		return
	}
	if tr.Intervals() == 0 && !quiet {
		fmt.Fprintf(stderr, "hpncp: warning: --trace %s holds no interval: no file went over several streams (only large files copied over SFTP do)\n", vis.String(path))
	}
}
