package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"
)

// run is hpncp as a function: tests call it with their own arguments and
// streams. It returns the error that report maps to an exit code.
//
// hpncp reads its command line as scp does, with subcommands in front: a
// subcommand's name counts only as the first word, so that every word
// after a flag or an operand is an operand (`hpncp -r bench h:` copies a
// directory named bench), and `version`, which takes no operands, is one
// only alone (`hpncp version h:/x` copies a file named version).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// Under the name hpnssh, hpncp is its ssh command, for programs that
	// take a bare program name as their remote shell.
	if len(args) > 0 && filepath.Base(args[0]) == "hpnssh" {
		return sshMain(ctx, args[1:], stdin, stdout, stderr)
	}
	words := args[min(1, len(args)):]
	var opts copyOptions
	subcommands := []*cli.Command{versionCommand(stdout), sshCommand(stdin, stdout, stderr), syncCommand(stdin, stdout, stderr), benchCommand(stdout, stderr), reportCommand(stdin, stdout, stderr), traceCommand(stdout), docsCommand(), serveCommand(stdout), helperCommand(stdout, stderr)}
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
				return showUsage(stderr)
			}
			if err := notSubcommand(subcommands, words, opts.Operands); err != nil {
				return err
			}
			return runCopy(ctx, &opts, stdin, stdout, stderr)
		},
		Commands: subcommands,
	}
	if len(words) == 0 {
		return showUsage(stderr)
	}
	if isSubcommand(app, words) {
		return app.Run(ctx, append([]string{"hpncp"}, words...))
	}
	valued := takesValue(app.Flags)
	flags, operands := splitGetopt(words, valued)
	for _, f := range flags {
		switch f.name {
		case "-h", "--help":
			// Help wins over the rest of the line, as it does for
			// getopt programs: `hpncp -h ssh` is ssh's help, and
			// `hpncp -rh a b` copies nothing.
			if len(operands) > 0 && app.Command(operands[0]) != nil {
				return app.Run(ctx, []string{"hpncp", operands[0], "--help"})
			}
			return app.Run(ctx, []string{"hpncp", "--help"})
		case "--version":
			return app.Run(ctx, []string{"hpncp", "version"})
		}
		if !knownFlag(app.Flags, f.name) {
			return usagef("", "unknown flag %s", f.name)
		}
	}
	// From here every word is a flag or an operand: without subcommands
	// the parser cannot take an operand for one.
	app.Commands = nil
	return app.Run(ctx, append([]string{"hpncp"}, getoptArgs(words, valued)...))
}

// isSubcommand returns whether a command line (without the program name)
// runs a subcommand: its first word names one, and, for version, which
// takes no operands, no operand follows.
func isSubcommand(app *cli.Command, words []string) bool {
	sub := app.Command(words[0])
	switch {
	case sub == nil:
		return false
	case sub.Name == "version":
		return len(words) == 1 || strings.HasPrefix(words[1], "-")
	case sub.Name == "serve":
		// The helper, as hpncp ssh starts it; a file named serve is
		// copied.
		return len(words) > 1 && strings.HasPrefix(words[1], "--protocol")
	case sub.Name == "helper":
		// A file named helper is copied unless an action follows.
		return len(words) > 1 && (helperActions[words[1]] || words[1] == "--help" || words[1] == "-h")
	case sub.Name == "trace":
		// A file named trace (strace's output) is copied, as before the
		// subcommand was, unless plot follows.
		if len(words) == 1 || words[1] == "plot" || strings.HasPrefix(words[1], "-") {
			return true
		}
		_, err := os.Lstat(words[0])
		return errors.Is(err, fs.ErrNotExist)
	}
	return true
}

// notSubcommand refuses a first operand that names a subcommand and no
// local file: `hpncp -F cfg bench h` would otherwise fail as a copy of a
// missing file named bench, when what was meant is bench with -F. A file
// of that name is copied, as scp would. words is the command line, for the
// hint, which gives it with the subcommand in front.
func notSubcommand(subcommands []*cli.Command, words, operands []string) error {
	operand := operands[0]
	named := false
	for _, sub := range subcommands {
		named = named || sub.Name == operand && !sub.Hidden
	}
	if !named {
		return nil
	}
	if _, err := os.Lstat(operand); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if operand == "version" {
		return usagef("hpncp version alone prints the version; ./version names a file of that name",
			"version takes no operands, and there is no local file version to copy")
	}
	flags := words[:len(words)-len(operands)]
	if n := len(flags); n > 0 && flags[n-1] == "--" {
		flags = flags[:n-1]
	}
	line := append(append([]string{"hpncp", operand}, flags...), operands[1:]...)
	for i, w := range line {
		line[i] = shellQuote(w)
	}
	return usagef(fmt.Sprintf("to run %s, give it first: %s (see hpncp %s --help)", operand, strings.Join(line, " "), operand),
		"%s is a subcommand only as the first word, and there is no local file %s to copy", operand, operand)
}

// shellQuote returns w as a shell reads it back: as it is when it holds
// nothing the shell treats specially, else in single quotes.
func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// showUsage prints the usage lines on stderr, as scp does when it is given
// nothing to copy, and returns the usage error that exits 2.
func showUsage(stderr io.Writer) error {
	fmt.Fprint(stderr, usageText+"\nRun hpncp --help for the flags, examples and exit codes.\n")
	return &usageError{}
}

// knownFlag returns whether a flag name with its dashes ("-r",
// "--streams") belongs to one of flags.
func knownFlag(flags []cli.Flag, name string) bool {
	name = strings.TrimLeft(name, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
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
