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
// binary they ship with. With --markdown it writes only DIR/hpncp.1.md,
// the page the repository keeps in docs/ (TestDocsMarkdown holds it to
// this build's help texts and flags).
func docsCommand() *cli.Command {
	var markdown bool
	return &cli.Command{
		Name:   "__docs",
		Hidden: true,
		Flags:  []cli.Flag{&cli.BoolFlag{Name: "markdown", Destination: &markdown}},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("", "__docs [--markdown] DIR: one output directory")
			}
			if markdown {
				return writeMarkdown(cmd.Args().First())
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

var docCommands = []string{"bench", "helper", "report", "ssh", "sync", "trace", "version"}

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
		{"DESCRIPTION", helpText}, {"SYNC", syncHelpText}, {"BENCH", benchHelpText}, {"SSH", sshHelpText}, {"HELPER", helperHelpText}, {"REPORT", reportHelpText}, {"TRACE", traceHelpText},
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

// markdownName is the Markdown page's file name in the directory __docs
// writes; the repository keeps it in docs/.
const markdownName = "hpncp.1.md"

// writeMarkdown writes DIR/hpncp.1.md.
func writeMarkdown(dir string) error {
	page, err := markdownPage()
	if err != nil {
		return fmt.Errorf("write docs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, markdownName), []byte(page), 0o644); err != nil {
		return fmt.Errorf("write docs: %w", err)
	}
	return nil
}

// helpEntry is one row of a help text's two-column flag lists: the flag
// column as written (-P port, -4, -6) and its meaning, continuation lines
// joined.
type helpEntry struct{ flags, meaning string }

// helpEntries reads text's flag rows: a line indented two spaces whose
// first word starts with a dash, the meaning after two or more spaces, and
// the lines after it indented to the meaning's column.
func helpEntries(text string) []helpEntry {
	lines := strings.Split(text, "\n")
	var out []helpEntry
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "  -") {
			continue
		}
		gap := strings.Index(l[2:], "  ")
		if gap < 0 {
			continue
		}
		col := 2 + gap + len(l[2+gap:]) - len(strings.TrimLeft(l[2+gap:], " "))
		e := helpEntry{flags: strings.TrimSpace(l[:col]), meaning: strings.TrimSpace(l[col:])}
		indent := strings.Repeat(" ", col)
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], indent) && len(lines[i+1]) > col && lines[i+1][col] != ' ' {
			i++
			e.meaning += " " + strings.TrimSpace(lines[i])
		}
		out = append(out, e)
	}
	return out
}

// names are the flag words of an entry's flag column: -h and --help of
// "-h, --help", --streams of "--streams N|auto".
func (e helpEntry) names() []string {
	var out []string
	for _, item := range strings.Split(e.flags, ", ") {
		out = append(out, strings.Fields(item)[0])
	}
	return out
}

// flagRows are the rows of the copy flags' table: for each visible flag
// of flags, in their order, the row of the help text that names it. A
// flag the text does not describe is an error, so that the page and
// --help cannot leave one out.
func flagRows(text string, flags []cli.Flag) ([]helpEntry, error) {
	entries := helpEntries(text)
	var rows []helpEntry
	seen := map[int]bool{}
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		found := -1
		for i, e := range entries {
			for _, n := range e.names() {
				for _, name := range f.Names() {
					if n == flagWord(name) {
						found = i
					}
				}
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("flag %s has no line in hpncp --help (helpText)", flagWord(f.Names()[0]))
		}
		if !seen[found] {
			seen[found] = true
			rows = append(rows, entries[found])
		}
	}
	return rows, nil
}

// fence is a code fence longer than any run of backquotes in text.
func fence(text string) string {
	n, run := 3, 0
	for _, c := range text {
		if c != '`' {
			run = 0
			continue
		}
		run++
		n = max(n, run+1)
	}
	return strings.Repeat("`", n)
}

// markdownPage is docs/hpncp.1.md: a table of the copy flags drawn from
// their definitions and --help's rows, then each command's help as the
// man page has it.
func markdownPage() (string, error) {
	var o copyOptions
	rows, err := flagRows(helpText, o.flags())
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# hpncp(1)\n\n")
	b.WriteString("hpncp, hpnssh: copy files over SSH at link speed. This page is written by\n" +
		"`go run ./cmd/hpncp __docs --markdown docs/` from the help texts and flag\n" +
		"definitions in cmd/hpncp, which `hpncp --help` and the man page print too;\n" +
		"change those and run it again rather than editing this file.\n\n")
	b.WriteString("- [Copy flags](#copy-flags)\n")
	sections := []struct{ title, cmd, text string }{
		{"hpncp", "hpncp --help", helpText},
		{"hpncp sync", "hpncp sync --help", syncHelpText},
		{"hpncp ssh", "hpncp ssh --help", sshHelpText},
		{"hpncp helper", "hpncp helper --help", helperHelpText},
		{"hpncp bench", "hpncp bench --help", benchHelpText},
		{"hpncp report", "hpncp report --help", reportHelpText},
		{"hpncp trace", "hpncp trace --help", traceHelpText},
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", s.title, strings.ReplaceAll(s.title, " ", "-"))
	}
	b.WriteString("\n## Copy flags\n\n")
	b.WriteString("Every flag of a copy (`hpncp [flags] SOURCE... TARGET`), in the order\n" +
		"hpncp defines them, with its line from `hpncp --help`:\n\n")
	b.WriteString("| flag | meaning |\n|---|---|\n")
	cell := strings.NewReplacer("|", `\|`).Replace
	for _, r := range rows {
		var words []string
		for _, item := range strings.Split(r.flags, ", ") {
			words = append(words, "`"+cell(item)+"`")
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(words, ", "), cell(r.meaning))
	}
	for _, s := range sections {
		f := fence(s.text)
		fmt.Fprintf(&b, "\n## %s\n\n`%s`:\n\n%stext\n%s%s\n", s.title, s.cmd, f, strings.TrimRight(s.text, "\n")+"\n", f)
	}
	return b.String(), nil
}
