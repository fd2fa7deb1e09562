package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/transfer"
)

// reportHelpText is hpncp report --help (a template: no double braces).
const reportHelpText = `hpncp report merge combines the --json reports of one job's runs (the
shards of a --shard i/n split, and any re-runs of them) into one report of
the same schema, as one run of the whole job would have printed it.

Usage:
  hpncp report merge [-o FILE] REPORT...   REPORT - reads standard input

Examples:
  parallel hpncp -rp --shard {}/4 --json data/ h:d/ '>' shard{}.json ::: 0 1 2 3
  hpncp report merge -o all.json shard*.json

The merged report lists every file of every report once: where several
runs list a file (a re-run), the entry of the run that started last. Its
totals add up the runs' (seconds: the time during which any run was
copying); started is the earliest start, ended the latest end; shards the
runs' shards. exit_code is the worst over the job's parts (each shard, or
the whole job), taking each part's latest run, in the order
0 < 3 (partial) < 1 (failed) < 255 (connection) < 130 (interrupted) <
2 (usage); failed counts as partial when other files were copied or
skipped. The error joins the failed parts' messages, each after its shard.

hpncp report merge refuses a report that is not one (naming the file),
reports of runs of different jobs (other sources or target), shards of
different splits (0/4 and 1/3), and a file two shards both copied or
skipped. A split missing shards is merged with a warning naming them. It
exits 0 when it wrote the merged report, whatever the job's exit_code.
  -o, --output FILE    write the report to FILE (complete or not at all)
                       instead of standard output
`

// reportOptions are the settings of hpncp report merge.
type reportOptions struct {
	Output  string   // -o: "" for stdout
	Reports []string // file names; "-" is stdin
}

const reportHint = "run hpncp report --help for usage"

func reportCommand(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	var o reportOptions
	usage := func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
		msg := err.Error()
		if flag, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
			// The parser names it with one dash, however it was typed.
			if name := strings.TrimLeft(flag, "-"); len(name) > 1 {
				flag = "--" + name
			}
			msg = "unknown flag " + flag
		}
		return usagef(reportHint, "%s: %s", strings.TrimPrefix(cmd.FullName(), "hpncp "), msg)
	}
	return &cli.Command{
		Name:               "report",
		Usage:              "combine the --json reports of a job's shards",
		CustomHelpTemplate: reportHelpText,
		OnUsageError:       usage,
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() == 0 {
				return usagef(reportHint, "report: which? hpncp report merge REPORT...")
			}
			return usagef(reportHint, "report: unknown command %q; there is merge", cmd.Args().First())
		},
		Commands: []*cli.Command{{
			Name: "merge",
			// Hidden, so that hpncp report --help is reportHelpText too:
			// the CLI library shows its own list for a command with
			// visible subcommands.
			Hidden:             true,
			Usage:              "combine reports into one",
			CustomHelpTemplate: reportHelpText,
			OnUsageError:       usage,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Destination: &o.Output},
			},
			Action: func(_ context.Context, cmd *cli.Command) error {
				o.Reports = cmd.Args().Slice()
				return runReportMerge(&o, stdin, stdout, stderr)
			},
		}},
	}
}

// runReportMerge reads o.Reports, merges them and writes the result.
func runReportMerge(o *reportOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(o.Reports) == 0 {
		return usagef("hpncp report merge shard0.json shard1.json > all.json", "report merge: no report to merge")
	}
	if i := slices.Index(o.Reports, "-"); i >= 0 && slices.Contains(o.Reports[i+1:], "-") {
		return usagef(reportHint, "report merge: - twice: standard input holds one report")
	}
	var reports []report.Named
	for _, name := range o.Reports {
		var data []byte
		var err error
		if name == "-" {
			name = "standard input"
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return &transfer.Error{Op: "read report", Path: name, Err: err}
		}
		r, err := report.Parse(data)
		if err != nil {
			return &transfer.Error{Op: "read report", Path: name, Err: err,
				Hint: "hpncp report merge takes the JSON reports hpncp --json printed"}
		}
		reports = append(reports, report.Named{Name: name, Report: r})
	}
	merged, err := report.Merge(reports)
	if err != nil {
		return err
	}
	if missing := report.MissingShards(merged); len(missing) > 0 {
		fmt.Fprintf(stderr, "hpncp: warning: no report of shard %s: the merged report lacks its files\n",
			strings.Join(missing, ", "))
	}
	if o.Output == "" {
		return writeReport(stdout, merged)
	}
	var buf bytes.Buffer
	if err := writeReport(&buf, merged); err != nil {
		return err
	}
	return writeWhole(o.Output, buf.Bytes())
}

// writeWhole writes data, all of it known before the file is created, to
// path; a write that fails removes the file, so that path is the whole
// report or nothing.
func writeWhole(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o666); err != nil {
		_ = os.Remove(path)
		return &transfer.Error{Op: "write report", Path: path, Err: err}
	}
	return nil
}
