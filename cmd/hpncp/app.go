package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"
)

// run is hpncp as a function: tests call it with their own arguments and
// streams. It returns the error that report maps to an exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// Under the name hpnssh, hpncp is its ssh command, for programs that
	// take a bare program name as their remote shell.
	if len(args) > 0 && filepath.Base(args[0]) == "hpnssh" {
		return sshMain(ctx, args[1:], stdin, stdout, stderr)
	}
	var opts copyOptions
	app := &cli.Command{
		Name:                          "hpncp",
		Usage:                         "copy files over SSH at link speed",
		Flags:                         opts.flags(),
		Reader:                        stdin,
		Writer:                        stdout,
		ErrWriter:                     stderr,
		HideHelpCommand:               true,
		DisableSliceFlagSeparator:     true,
		CustomRootCommandHelpTemplate: helpText,
		OnUsageError: func(_ context.Context, _ *cli.Command, err error, _ bool) error {
			return usagef("", "%s", strings.TrimPrefix(err.Error(), "flag provided but not defined: "))
		},
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			opts.Operands = cmd.Args().Slice()
			opts.fromCache = !cmd.IsSet("streams") && !cmd.IsSet("connections") && !cmd.IsSet("hpn-disabled")
			if len(opts.Operands) == 0 {
				return cli.ShowRootCommandHelp(cmd)
			}
			return runCopy(ctx, &opts, stdin, stdout, stderr)
		},
		Commands: []*cli.Command{versionCommand(stdout), sshCommand(stdin, stdout, stderr), benchCommand(stdout, stderr), docsCommand()},
	}
	argv := []string{"hpncp"}
	if len(args) > 1 && app.Command(args[1]) != nil {
		argv = append(argv, args[1:]...)
	} else if len(args) > 1 {
		argv = append(argv, getoptArgs(args[1:], takesValue(app.Flags))...)
	}
	return app.Run(ctx, argv)
}

// takesValue returns whether a flag name belongs to a flag with a value,
// for getoptArgs.
func takesValue(flags []cli.Flag) func(string) bool {
	valued := map[string]bool{}
	for _, f := range flags {
		if _, isBool := f.(*cli.BoolFlag); isBool {
			continue
		}
		for _, n := range f.Names() {
			valued[n] = true
		}
	}
	return func(name string) bool { return valued[name] }
}
