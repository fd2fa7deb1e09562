package filter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// oracleTree is the tree every rule set is tried on: names a user's tree
// holds (spaces, dots, brackets, wildcard characters, a backslash, UTF-8,
// leading dashes, upper case) at several depths, with names repeated at
// different depths so that anchoring shows. A trailing "/" makes a
// directory.
var oracleTree = []string{
	"top", "top.c", "a.c", "b.o", "x.tmp", "CAPS.C", "noext", ".hidden",
	"file.tar.gz", "name with space.txt", "[brackets].txt", "star*name.txt",
	"q?mark", `back\slash.txt`, "-dash", "unicode é ü.txt", "é", "ab",
	"keep/k.c", "keep/k.tmp", "keep/deep/d.c", "keep/deep/top",
	"sub/s.c", "sub/x/y.o", "sub/x/z.c", "sub/sub/deep.c", "sub/top/t.o",
	"x/a.o", "x/b.c", "x/x/x.o",
	"a/top", "a/b/c.txt", "a/b/x/q.o", "a/b/x/deep/r.c",
	"dir with space/f.c", "dir with space/in side/g.o",
	".dotdir/file", ".dotdir/.inner.c",
	"br[a]ck/inner.c", "ünï/çödé.c", "日本/語.txt",
	"-dashdir/-f.c", "-dashdir/plain",
	"emptydir/", "keep/emptyinside/",
}

func makeOracleTree(t *testing.T, root string) {
	t.Helper()
	for _, name := range oracleTree {
		p := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(name, "/")))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// oracleSets are rule sets as rsync's command line gives them, the man
// page's examples among them. FROM in a --exclude-from or --include-from
// argument names a file of the test's rule files.
var oracleSets = [][]string{
	{}, // no rules: the harness itself must agree with rsync
	{"--include=*/", "--include=*.c", "--exclude=*"},
	{"--include=*.c", "--exclude=*"},
	{"--exclude=/top"},
	{"--exclude=top"},
	{"--exclude=top/"},
	{"--exclude=sub/"},
	{"--exclude=sub/sub"},
	{"--exclude=**/x/*.o"},
	{"--exclude=x/*.o"},
	{"--exclude=a/***"},
	{"--exclude=/a/b/x/***"},
	{"--exclude=keep/**"},
	{"--exclude=sub/**/*.c"},
	{"--exclude=/**/x"},
	{"--exclude=**/deep*"},
	{"--exclude=**.c"},
	{"--exclude=***"},
	{"--exclude=/*"},
	{"--exclude=*/"},
	{"--exclude=a*/"},
	{"--exclude=/a/b"},
	{"--exclude=a/b"},
	{"--exclude=b/x"},
	{"--exclude=x"},
	{"--filter=- *.tmp"},
	{"--filter=+ keep/", "--filter=+ keep/*.c", "--filter=- *"},
	{"--filter=+ /keep/***", "--filter=- *"},
	{"--filter=exclude *.o", "--filter=include */", "--filter=exclude,! *.c"},
	{"--filter=include_*/", "--filter=-!_*.c"},
	{"--filter=-! */"},
	{"--filter=- *.c", "--filter=!", "--filter=- *.o"},
	{"--filter=- *.c", "--filter=clear", "--filter=+ *.o", "--filter=- *"},
	{"--exclude=*.o", "--exclude=*.tmp"},
	{"--exclude=+ *.c", "--exclude=*"},
	{"--include=- *.c"},
	{"--exclude=*.c", "--exclude=!", "--exclude=*.o"},
	{"--exclude=?.c"},
	{"--exclude=??"},
	{"--exclude=?"},
	{"--exclude=[ab].*"},
	{"--exclude=[!a]*.c"},
	{"--exclude=[^a-m]*"},
	{"--exclude=[z-a]*"},
	{"--exclude=[]a]*"},
	{"--exclude=[a-]*"},
	{`--exclude=\[brackets\].txt`},
	{"--exclude=[[]brackets].txt"},
	{"--exclude=br[[]a]ck/"},
	{`--exclude=star\*name.txt`},
	{`--exclude=star*name.txt`},
	{`--exclude=q\?mark`},
	{`--exclude=back\slash.txt`},
	{`--exclude=back\\slash.txt*`},
	{"--exclude=*[[:upper:]]*"},
	{"--exclude=*[[:digit:][:space:]]*"},
	{"--exclude=[[:alpha]*"},
	{"--exclude=[[:foo:]]*"},
	{"--exclude=[abc"},
	{`--exclude=*\`},
	{"--exclude=.*"},
	{"--exclude=-dash*"},
	{"--exclude=name with space.txt"},
	{"--exclude=in side/"},
	{"--exclude=*é*"},
	{"--exclude=日本/***"},
	{"--exclude=*.tar.*"},
	{"--exclude=emptydir"},
	{"--include=/sub/", "--include=/sub/x/", "--include=/sub/x/*.o", "--exclude=*"},
	{"--include=*/", "--exclude=*.c"},
	// With every directory included, a pattern that matches too much
	// below the top shows instead of hiding in an excluded subtree.
	{"--include=*/", "--exclude=/*"},
	{"--include=*/", "--exclude=/a/*"},
	{"--include=*/", "--exclude=sub/*"},
	{"--include=*/", "--exclude=**/x/*"},
	{"--include=*/", "--exclude=/*/*.o"},
	{"--include=*/", "--exclude=/**/*.c"},
	{"--include=*/", "--exclude=?/*"},
	{"--include=*/", "--exclude=x/*/*"},
	{"--include=*/", "--exclude=a**"},
	{"--include=*/", "--exclude=**[!x]top"},
	{"--include=*/", "--exclude=**?top"},
	{"--exclude-from=FROM/excludes"},
	{"--include-from=FROM/includes", "--exclude=*"},
	{"--exclude-from=FROM/crlf"},
}

// oracleFiles are the rule files FROM holds: comments, blank lines, the
// old "+ "/"- " prefixes, a clear, and CRLF and lone-CR line ends.
var oracleFiles = map[string]string{
	"excludes": "# build output\n; also a comment\n\n*.o\n+ keep/k.tmp\n*.tmp\n/top\n",
	"includes": "*/\n*.c\n- *\n",
	"crlf":     "*.o\r\n\r\n*.tmp\rtop\r\n# x\r\n",
}

// TestAgainstRsync runs rsync itself on a tree for each rule set and
// checks that a walk that asks Excluded, and does not descend into the
// directories it excludes, keeps exactly the paths rsync would transfer.
func TestAgainstRsync(t *testing.T) {
	rsync := sshdtest.LookTool(t, "rsync")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	makeOracleTree(t, src)
	from := filepath.Join(dir, "from")
	if err := os.Mkdir(from, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range oracleFiles {
		if err := os.WriteFile(filepath.Join(from, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sets := slices.Clone(oracleSets)
	n := 300
	if testing.Short() {
		n = 40
	}
	rng := rand.New(rand.NewPCG(13, 1))
	for range n {
		sets = append(sets, randomSet(rng))
	}
	// rsync runs for the sets four at a time: each is a process that
	// mostly waits to start and to read the tree.
	type answer struct {
		args           []string
		slash, noSlash []string
		err            error
	}
	answers := make([]answer, len(sets))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				a := &answers[i]
				for _, arg := range sets[i] {
					a.args = append(a.args, strings.ReplaceAll(arg, "FROM", from))
				}
				if a.slash, a.err = rsyncKeeps(rsync, dir, "src/", a.args); a.err != nil {
					continue
				}
				if i < len(oracleSets) {
					a.noSlash, a.err = rsyncKeeps(rsync, dir, "src", a.args)
				}
			}
		})
	}
	for i := range sets {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, set := range sets {
		a := answers[i]
		if a.err != nil {
			t.Fatal(a.err)
		}
		rules := rulesFromArgs(t, a.args)
		got := walkKeeps(t, src, "", rules)
		if !slices.Equal(got, a.slash) {
			t.Errorf("rules %q, source src/:\n  only rsync keeps: %q\n  only Rules keep: %q",
				set, minus(a.slash, got), minus(got, a.slash))
		}
		if i >= len(oracleSets) {
			continue
		}
		// Without the trailing slash the source directory is itself a
		// name of the transfer, "src", and its contents are "src/...".
		got = walkKeeps(t, dir, "src", rules)
		if !slices.Equal(got, a.noSlash) {
			t.Errorf("rules %q, source src:\n  only rsync keeps: %q\n  only Rules keep: %q",
				set, minus(a.noSlash, got), minus(got, a.noSlash))
		}
	}
}

// rsyncKeeps lists, sorted, the names rsync -r -n would transfer from
// the source operand (in dir) with args.
func rsyncKeeps(rsync, dir, source string, args []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rsync, append(append([]string{"-r", "-n", "-8", "--out-format=%n"}, args...), source, "dst/")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("rsync %q: %v\n%s", args, err, stderr)
	}
	var paths []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSuffix(line, "/")
		if line == "" || line == "." {
			continue
		}
		paths = append(paths, line)
	}
	slices.Sort(paths)
	return paths, nil
}

// rulesFromArgs builds Rules from rsync arguments.
func rulesFromArgs(t *testing.T, args []string) *Rules {
	t.Helper()
	var r Rules
	for _, a := range args {
		opt, val, _ := strings.Cut(a, "=")
		var err error
		switch opt {
		case "--exclude":
			err = r.Exclude(val)
		case "--include":
			err = r.Include(val)
		case "--filter":
			err = r.Add(val)
		case "--exclude-from", "--include-from":
			f, oerr := os.Open(val)
			if oerr != nil {
				t.Fatal(oerr)
			}
			err = r.AddFrom(f, val, opt == "--include-from")
			f.Close()
		default:
			t.Fatalf("rule argument %q: unknown option", a)
		}
		if err != nil {
			t.Fatalf("rule argument %q: %v", a, err)
		}
	}
	return &r
}

// walkKeeps walks root as a copy would, naming what it finds relative to
// root: an excluded directory is skipped with everything under it. With
// top, only root/top is walked, itself subject to the rules.
func walkKeeps(t *testing.T, root, top string, r *Rules) []string {
	t.Helper()
	var kept []string
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := e.Name()
			if rel != "" {
				p = rel + "/" + p
			}
			if r.Excluded(p, e.IsDir()) {
				continue
			}
			kept = append(kept, p)
			if e.IsDir() {
				walk(p)
			}
		}
	}
	switch {
	case top == "":
		walk("")
	case !r.Excluded(top, true):
		kept = append(kept, top)
		walk(top)
	}
	slices.Sort(kept)
	return kept
}

func minus(a, b []string) []string {
	var d []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			d = append(d, s)
		}
	}
	return d
}

// randomSet makes one to three rules from pieces of the tree's names and
// of the pattern syntax, so that the rule sets above are not the only
// ones compared.
func randomSet(rng *rand.Rand) []string {
	pieces := []string{
		"a", "b", "x", "sub", "keep", "top", "deep", "c", "é", "ü", "k", "-",
		"*", "*", "**", "***", "?", "??", "[a-c]", "[!x]", "[^.]", "[]k]",
		`\*`, `\?`, "[[:alpha:]]", "[[:punct:]]", "/", "/", "/", ".c", ".o",
		".", " ", "t*", "*.c", "x/", "/**/",
	}
	var set []string
	if rng.IntN(3) == 0 {
		set = append(set, "--include=*/")
	}
	for range 1 + rng.IntN(3) {
		var b strings.Builder
		if rng.IntN(4) == 0 {
			b.WriteString("/")
		}
		for range 1 + rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if rng.IntN(5) == 0 {
			b.WriteString("/")
		}
		pat := b.String()
		if pat == "- " {
			continue // rsync and Add both refuse it: no pattern
		}
		switch rng.IntN(5) {
		case 0:
			set = append(set, "--include="+pat)
		case 1:
			set = append(set, "--filter=-! "+pat)
		case 2:
			set = append(set, "--filter=+ "+pat)
		default:
			set = append(set, "--exclude="+pat)
		}
	}
	return set
}
