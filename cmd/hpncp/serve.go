package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/stripe"
)

// serveCommand is `hpncp serve`, the helper: hpncp ssh runs it on the far
// side of a login, over the exec channels of several connections, to
// stripe a remote command's stdin and output over them. It is not for
// use by hand, and hidden: a local file named serve is still copied
// unless --protocol follows (isSubcommand).
func serveCommand(stdout, stderr io.Writer) *cli.Command {
	var o struct {
		protocol, channels int
		job                string
		join               bool
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
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if o.protocol != helper.Protocol {
				// The client reads this in place of a hello, and runs
				// the command the plain way.
				msg := fmt.Sprintf("this hpncp (%s) speaks helper protocol %d, not %d", version, helper.Protocol, o.protocol)
				stripe.WriteFrame(stdout, stripe.Frame{Kind: stripe.KindError, Payload: []byte(msg)})
				return fmt.Errorf("serve: %s", msg)
			}
			if o.channels < 1 || o.channels > maxHelperChannels {
				return usagef("", "serve: --channels %d: want 1 to %d", o.channels, maxHelperChannels)
			}
			if o.join {
				return helper.Join(ctx, o.job, os.Stdin, os.Stdout)
			}
			return helper.Lead(ctx, helper.LeadOptions{Job: o.job, Channels: o.channels,
				In: os.Stdin, Out: os.Stdout, Stderr: stderr})
		},
	}
}

// maxHelperChannels bounds the channels of one striped command.
const maxHelperChannels = 64
