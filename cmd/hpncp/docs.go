package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v3"
)

// docsCommand is the hidden `hpncp __docs DIR` that release builds run
// (goreleaser's before hook) to write the man page and shell completions
// from the help texts and flag definitions, so they never drift from the
// binary they ship with.
func docsCommand() *cli.Command {
	return &cli.Command{
		Name:   "__docs",
		Hidden: true,
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("", "__docs DIR: one output directory")
			}
			return writeDocs(cmd.Args().First())
		},
	}
}

// docFlag is a flag as the man page and completions show it.
type docFlag struct{ name, usage string }

func docFlags() []docFlag {
	var o copyOptions
	var out []docFlag
	for _, f := range o.flags() {
		df, ok := f.(cli.DocGenerationFlag)
		if !ok || df.GetUsage() == "" {
			continue
		}
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			out = append(out, docFlag{n, df.GetUsage()})
		}
	}
	for _, n := range []string{"streams", "connections", "hpn-disabled", "chunk", "window", "tcp-rcvbuf", "tcp-sndbuf", "cc"} {
		if !containsFlag(out, n) {
			out = append(out, docFlag{n, "pipeline flag; see hpncp --help"})
		}
	}
	out = append(out, docFlag{"help", "show help"})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func containsFlag(fs []docFlag, name string) bool {
	for _, f := range fs {
		if f.name == name {
			return true
		}
	}
	return false
}

var docCommands = []string{"bench", "report", "ssh", "sync", "trace", "version"}

// writeDocs writes DIR/hpncp.1 and DIR/completions/hpncp.{bash,zsh,fish}.
func writeDocs(dir string) error {
	files := map[string]string{
		"hpncp.1":                manPage(),
		"completions/hpncp.bash": bashCompletion(),
		"completions/hpncp.zsh":  zshCompletion(),
		"completions/hpncp.fish": fishCompletion(),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write docs: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write docs: %w", err)
		}
	}
	return nil
}

// roff escapes text for a no-fill block of a man page.
func roff(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		line = strings.ReplaceAll(line, `\`, `\e`)
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func manPage() string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH HPNCP 1 %q %q \"User Commands\"\n", date, "hpncp "+version)
	b.WriteString(".SH NAME\nhpncp, hpnssh \\- copy files over SSH at link speed\n")
	for _, s := range []struct{ title, text string }{
		{"DESCRIPTION", helpText}, {"SYNC", syncHelpText}, {"BENCH", benchHelpText}, {"SSH", sshHelpText}, {"REPORT", reportHelpText}, {"TRACE", traceHelpText},
	} {
		fmt.Fprintf(&b, ".SH %s\n.nf\n%s.fi\n", s.title, roff(s.text))
	}
	return b.String()
}

func flagWord(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func bashCompletion() string {
	var words []string
	for _, f := range docFlags() {
		words = append(words, flagWord(f.name))
	}
	return fmt.Sprintf(`# bash completion for hpncp and hpnssh
_hpncp() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	if [[ $COMP_CWORD -eq 1 && $cur != -* ]]; then
		COMPREPLY=($(compgen -W "%s" -- "$cur") $(compgen -f -- "$cur"))
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "%s" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o default -F _hpncp hpncp
complete -o default -F _hpncp hpnssh
`, strings.Join(docCommands, " "), strings.Join(words, " "))
}

func zshCompletion() string {
	var specs []string
	for _, f := range docFlags() {
		specs = append(specs, fmt.Sprintf("'%s[%s]'", flagWord(f.name), zshEscape(f.usage)))
	}
	return fmt.Sprintf(`#compdef hpncp
_arguments -s \
	%s \
	'1:command or file:(%s)' \
	'*:file:_files'
`, strings.Join(specs, " \\\n\t"), strings.Join(docCommands, " "))
}

func zshEscape(s string) string {
	return strings.NewReplacer("'", "'\\''", "[", "\\[", "]", "\\]", ":", "\\:").Replace(s)
}

func fishCompletion() string {
	var b strings.Builder
	b.WriteString("# fish completion for hpncp\n")
	fmt.Fprintf(&b, "complete -c hpncp -n __fish_use_subcommand -a '%s'\n", strings.Join(docCommands, " "))
	for _, f := range docFlags() {
		opt := "-l"
		if len(f.name) == 1 {
			opt = "-s"
		}
		fmt.Fprintf(&b, "complete -c hpncp %s %s -d '%s'\n", opt, f.name, strings.ReplaceAll(f.usage, "'", `\'`))
	}
	return b.String()
}
