package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/job"
)

// helperActions are hpncp helper's: a local file named helper is copied
// unless one of them (or a help flag) follows (isSubcommand).
var helperActions = map[string]bool{"status": true, "install": true, "remove": true}

// helperCommand is `hpncp helper status|install|remove [flags] host`. Its
// flags are hpncp ssh's, read by the same rules.
func helperCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:            "helper",
		Usage:           "show, install or remove the helper hpncp ssh uses on a server",
		SkipFlagParsing: true,
		HideHelp:        true,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return helperMain(ctx, cmd.Args().Slice(), stdout, stderr)
		},
	}
}

func helperMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		_, err := io.WriteString(stdout, helperHelpText)
		return err
	}
	action := args[0]
	if !helperActions[action] {
		return usagef(helperUsageHint, "hpncp helper %s: want status, install or remove", vis.Text(action))
	}
	o, err := parseSSHArgs(args[1:])
	if err != nil && o != nil && o.Host == "" && !o.Help {
		return usagef(helperUsageHint, "hpncp helper %s needs a host", action)
	}
	if err != nil {
		return err
	}
	switch {
	case o.Help:
		_, err := io.WriteString(stdout, helperHelpText)
		return err
	case o.Host == "":
		return usagef(helperUsageHint, "hpncp helper %s needs a host", action)
	case len(o.Command) > 0:
		return usagef(helperUsageHint, "hpncp helper %s takes one host and no command", action)
	case o.HelperPath != "" || o.Channels != 0 || o.NoCommand || o.Subsystem || o.PrintConfig:
		return usagef(helperUsageHint, "hpncp helper takes ssh's connection flags, --helper-dir and --helper-binary only")
	}
	mode, dir, err := job.HelperSettings(o.Host, o.Helper, o.HelperDir)
	if err != nil {
		return err
	}
	p := job.HelperPlace{Conn: o.conn(stderr), Host: o.Host, Dir: dir, Binary: o.HelperBinary, Logf: o.logf(stderr)}
	switch action {
	case "status":
		return job.HelperStatus(ctx, p, mode, stdout)
	case "install":
		where, err := job.InstallHelper(ctx, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "helper installed at %s:%s\n", o.Host, vis.Text(where))
		if mode == job.HelperNever {
			fmt.Fprintf(stdout, "hpncp's configuration says Helper never for %s: hpncp ssh uses it with --helper auto\n", o.Host)
		}
		return nil
	}
	removed, err := job.RemoveHelper(ctx, p)
	for _, r := range removed {
		fmt.Fprintf(stdout, "removed %s:%s\n", o.Host, vis.Text(r))
	}
	if err == nil && len(removed) == 0 {
		fmt.Fprintf(stdout, "no helper installed in %s:%s\n", o.Host, vis.Text(dir))
	}
	return err
}

const helperUsageHint = "run hpncp helper --help for its usage"

const helperHelpText = `hpncp helper shows, installs and removes the helper hpncp ssh uses on a
server: hpncp itself, run there as the login user over the same SSH
connections, which stripes a remote command's streams over several of them
(rsync -e 'hpncp ssh' at link speed on a long path).

Usage:
  hpncp helper status  [flags] [user@]host
  hpncp helper install [flags] [user@]host
  hpncp helper remove  [flags] [user@]host

status   the server's system, the helpers installed there (this hpncp's
         hash checked on the server), and whether one answers.
install  upload this hpncp (or --helper-binary) as the server's helper,
         only where the server's uname -s -m is the system it was built
         for. It goes to DIR/PROTOCOL-HASH/hpncp, directories 0700,
         under a temporary name first, and takes its name only once the
         server's sha256sum (or shasum) of it matches. hpncp ssh checks
         that hash again each time before it runs it: a helper with a
         byte changed is never run.
remove   take away every helper install put in DIR, DIR itself, the
         directories above it install made, and the helpers' empty socket
         directories. Anything else found in DIR is left, and named.

hpncp ssh uses a helper already there (installed, or hpncp on the remote
PATH) and never uploads one unasked: --helper install, or Helper install for
the host in hpncp's configuration file, asks it to.

Flags: hpncp ssh's connection flags (-l -p -i -F -o -J -4 -6 -q -v), and
  --helper-dir DIR      the helpers' directory on the server
                        [~/.cache/hpncp/helper, or HelperDir]
  --helper-binary FILE  the local hpncp to install [this one]

Configuration: $XDG_CONFIG_HOME/hpncp/config (else ~/.config/hpncp/config),
in ssh_config's syntax, first value wins:
  Host build-*.example.org
      Helper install       # auto (the default), never or install
      HelperDir /scratch/me/hpncp-helper

Exit status: 0 done, 1 failed (a server of another system: nothing is
uploaded), 2 usage error, 255 connection or authentication failure.
`
