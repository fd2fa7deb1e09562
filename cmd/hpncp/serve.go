package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/job"
)

// serveCommand is `hpncp serve`, the helper: hpncp ssh runs it on the far
// side of a login, over the exec channels of several connections, to
// stripe a remote command's stdin and output over them, and hpncp sync
// with --delta on one, for what needs the files where they lie. It is not for
// use by hand, and hidden: a local file named serve is still copied
// unless --protocol follows (isSubcommand).
func serveCommand(stdout io.Writer) *cli.Command {
	var o struct {
		protocol, channels int
		job, request       string
		join, delta        bool
	}
	return &cli.Command{
		Name:   "serve",
		Usage:  "the helper hpncp ssh runs at the far end (not for use by hand)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "protocol", Usage: "the helper protocol the client speaks", Destination: &o.protocol},
			&cli.StringFlag{Name: "job", Usage: "the job's name: 32 hex digits the client made", Destination: &o.job},
			&cli.IntFlag{Name: "channels", Usage: "how many channels the client opens for the job", Value: 1, Destination: &o.channels},
			&cli.BoolFlag{Name: "join", Usage: "hand this channel to the job's first process", Destination: &o.join},
			&cli.BoolFlag{Name: "delta", Usage: "serve delta transfers (signatures, patches, deltas) on this channel", Destination: &o.delta},
			&cli.StringFlag{Name: job.ServeRequestFlag, Usage: "with --delta: the first request, base64url, as if it came first on stdin", Destination: &o.request},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if o.protocol == job.HelperProtocol && (o.channels < 1 || o.channels > maxHelperChannels) {
				return usagef("", "serve: --channels %d: want 1 to %d", o.channels, maxHelperChannels)
			}
			return job.Serve(ctx, job.ServeOptions{Protocol: o.protocol, Job: o.job, Channels: o.channels,
				Join: o.join, Delta: o.delta, Request: o.request, Version: version, Stdout: stdout})
		},
	}
}

// maxHelperChannels bounds the channels of one striped command.
const maxHelperChannels = 64
