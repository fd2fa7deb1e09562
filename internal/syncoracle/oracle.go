package syncoracle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Tool is one implementation of rsync's command line: how to start it and
// how it names a path on the SSH host.
type Tool struct {
	Name string
	// Argv is the command and the flags that come before every case's
	// own: {"rsync", "-e", "ssh -F cfg"}, {"./hpncp", "sync", "-e", "ssh -F cfg"}.
	Argv []string
	// Remote names path on the host the tests' sshd serves.
	Remote func(path string) string
	// Home is the directory the host starts a relative path from (the
	// login's home), for the cases that name their remote operand
	// relative to it.
	Home string
	// Rewrite, when set, changes the flags of each run (-n and -i
	// included): the harness's own test makes a tool that is wrong on
	// purpose with it.
	Rewrite func(flags []string) []string
}

// Direction says which operand is on the SSH host.
type Direction string

const (
	Push Direction = "push" // local SRC, remote DEST
	Pull Direction = "pull" // remote SRC, local DEST
)

// Case is one command line to compare: FLAGS SRC DEST, from a starting
// state of DEST.
type Case struct {
	Name  string
	Flags []string
	// NoSlash names the source directory without a trailing slash, so
	// that it lands inside DEST rather than as DEST.
	NoSlash bool
	Target  State
	// DestSlash names DEST with a trailing slash, as a directory that
	// exists is often named.
	DestSlash bool
	// Relative names the remote operand relative to Tool.Home rather
	// than by its absolute path.
	Relative bool
	// Again runs the command a second time after the real run: a re-run
	// must land in the same place and find nothing left to do.
	Again bool
}

// Outcome is what a user sees of one tool's runs of a case: a dry run
// (-n -i), then a real one (-i), from the same state.
type Outcome struct {
	DryArgv  []string
	DryExit  int
	DryLines []string // stdout, paths of the run's own directories replaced
	// DryWrote is how the tree differs after the dry run from before it.
	DryWrote []string

	Argv  []string
	Exit  int
	Lines []string
	// Tree is the tool's directory after the real run: DEST, and the
	// decoy beside it.
	Tree Tree

	// AgainLines and AgainTree are the second real run's, if Case.Again.
	AgainExit  int
	AgainLines []string
	AgainTree  Tree

	Stderr string // all runs'
}

// runTimeout bounds one run of a tool, so that a run that hangs ends the
// case; it is no measure of speed. The trees are a few hundred KiB, but
// a -c run asks the server for a checksum command per file, each a login
// shell of its own: on a loaded 2-core machine whose root login costs
// seconds, such a run took more than a minute with nothing wrong.
const runTimeout = 4 * time.Minute

// Run prepares dir/dst in state c.Target, runs tool on it in direction d
// with src (a directory built with Source) as the source, and records
// what it did.
func Run(ctx context.Context, tool Tool, c Case, d Direction, src, dir string) (Outcome, error) {
	var o Outcome
	dst, err := prepare(c, src, dir)
	if err != nil {
		return o, err
	}
	srcOp, dstOp := src, dst
	remote := func(p string) (string, error) {
		if c.Relative {
			rel, err := filepath.Rel(tool.Home, p)
			if err != nil || tool.Home == "" {
				return "", fmt.Errorf("name %s relative to the remote home %q: %v", p, tool.Home, err)
			}
			p = rel
		}
		return tool.Remote(p), nil
	}
	switch d {
	case Push:
		dstOp, err = remote(dst)
	case Pull:
		srcOp, err = remote(src)
	default:
		return o, fmt.Errorf("unknown direction %q", d)
	}
	if err != nil {
		return o, err
	}
	if !c.NoSlash {
		srcOp += "/"
	}
	if c.DestSlash {
		dstOp += "/"
	}
	// Paths in the output ("created directory /tmp/…/dst") name the
	// run's own directories, as the command line named them; two tools'
	// runs must read the same.
	pairs := []string{dst, "DST", src, "SRC"}
	if rel, err := filepath.Rel(tool.Home, dst); c.Relative && err == nil {
		pairs = append(pairs, rel, "DST")
	}
	names := strings.NewReplacer(pairs...)

	fresh := time.Now()
	before, err := Snapshot(dir, fresh)
	if err != nil {
		return o, err
	}
	o.DryArgv = command(tool, append([]string{"-n", "-i"}, c.Flags...), srcOp, dstOp)
	var stderr bytes.Buffer
	o.DryExit, o.DryLines, err = runTool(ctx, o.DryArgv, names, &stderr)
	if err != nil {
		return o, err
	}
	after, err := Snapshot(dir, fresh)
	if err != nil {
		return o, err
	}
	o.DryWrote = Diff(before, after)

	o.Argv = command(tool, append([]string{"-i"}, c.Flags...), srcOp, dstOp)
	o.Exit, o.Lines, err = runTool(ctx, o.Argv, names, &stderr)
	if err != nil {
		return o, err
	}
	if o.Tree, err = Snapshot(dir, fresh); err != nil {
		return o, err
	}
	if c.Again {
		if o.AgainExit, o.AgainLines, err = runTool(ctx, o.Argv, names, &stderr); err != nil {
			return o, err
		}
		if o.AgainTree, err = Snapshot(dir, fresh); err != nil {
			return o, err
		}
	}
	o.Stderr = stderr.String()
	return o, nil
}

func command(tool Tool, flags []string, src, dst string) []string {
	if tool.Rewrite != nil {
		flags = tool.Rewrite(flags)
	}
	argv := slices.Clone(tool.Argv)
	argv = append(argv, flags...)
	return append(argv, src, dst)
}

// runTool runs argv and returns its exit status and its stdout's lines,
// with names applied. Only a failure to start it, or a hang, is an error.
func runTool(ctx context.Context, argv []string, names *strings.Replacer, stderr *bytes.Buffer) (int, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	fmt.Fprintf(stderr, "$ %s\n", shellQuote(argv))
	err := cmd.Run()
	if ctx.Err() != nil {
		return 0, nil, fmt.Errorf("run %s: no exit within %v", shellQuote(argv), runTimeout)
	}
	exit := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return 0, nil, fmt.Errorf("run %s: %w", shellQuote(argv), err)
		}
		exit = ee.ExitCode()
	}
	var lines []string
	for l := range strings.Lines(names.Replace(stdout.String())) {
		lines = append(lines, strings.TrimSuffix(l, "\n"))
	}
	return exit, lines, nil
}

// Compare lists every way got differs from want, the reference's outcome,
// as a paragraph for each aspect a user would notice.
func Compare(want, got Outcome) []string {
	var out []string
	add := func(aspect string, diff []string) {
		if len(diff) > 0 {
			out = append(out, aspect+":\n\t"+strings.Join(diff, "\n\t"))
		}
	}
	if want.DryExit != got.DryExit {
		out = append(out, fmt.Sprintf("dry run exit status: want %d, got %d", want.DryExit, got.DryExit))
	}
	add("dry run itemized lines (- only the reference's, + only this tool's)", DiffLines(want.DryLines, got.DryLines))
	add("the dry run changed the tree", got.DryWrote)
	if want.Exit != got.Exit {
		out = append(out, fmt.Sprintf("exit status: want %d, got %d", want.Exit, got.Exit))
	}
	add("itemized lines of the real run (- only the reference's, + only this tool's)", DiffLines(want.Lines, got.Lines))
	add("tree after the run (- only the reference's, + only this tool's, ~ differs)", Diff(want.Tree, got.Tree))
	if want.AgainExit != got.AgainExit {
		out = append(out, fmt.Sprintf("exit status of the second run: want %d, got %d", want.AgainExit, got.AgainExit))
	}
	add("itemized lines of the second run (- only the reference's, + only this tool's)", DiffLines(want.AgainLines, got.AgainLines))
	add("tree after the second run (- only the reference's, + only this tool's, ~ differs)", Diff(want.AgainTree, got.AgainTree))
	return out
}

// shellQuote prints argv as a command line a user can paste.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:+,@%", r))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Command is the real run's command line, as a user would type it.
func (o Outcome) Command() string { return shellQuote(o.Argv) }

// prepare builds c's starting state in dir: DEST (dir/dst) as c.Target
// says and the decoy, every entry with a time of the past. It returns DEST.
func prepare(c Case, src, dir string) (string, error) {
	dst := filepath.Join(dir, "dst")
	contents := dst
	if c.NoSlash {
		contents = filepath.Join(dst, filepath.Base(src))
	}
	// The decoy goes beside the contents, where Clashes's symlink
	// "../decoy" points, but never makes a missing DEST exist.
	decoy := filepath.Join(dir, "decoy")
	// Directories the building wrote into get an old time last, like
	// every other entry, so that building them in the second a run
	// starts reads the same as in the second before.
	restamp := []string{dir}
	if c.Target.Exists {
		decoy = filepath.Join(filepath.Dir(contents), "decoy")
		if err := Build(contents, c.Target.Entries); err != nil {
			return "", err
		}
		if contents != dst {
			restamp = append(restamp, dst)
		}
	}
	if err := Build(decoy, Decoy); err != nil {
		return "", err
	}
	for _, p := range restamp {
		if err := Build(p, []Entry{{Path: ".", Kind: Dir, Mtime: old}}); err != nil {
			return "", err
		}
	}
	return dst, nil
}
