package depstest

import (
	"fmt"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of hpncp; the table names its packages by
// their path inside it.
const module = "github.com/hpncp/hpncp"

// row is one package of the layering and what its non-test files may
// import: the module's packages by their path inside it, third-party code
// by module path (which allows every package of that module), and of the
// standard library only the names in restrictedStd, which no other row
// may import. The rest of the standard library is open to every package.
type row struct {
	pkg string
	may []string
}

// layers is hpncp's layering, from the bottom up: a row may allow only
// packages of rows above it, so that the arrows never point back up.
// docs/DESIGN.md, section 2, describes the same layers.
var layers = []row{
	// Leaves: each does one job and imports nothing of hpncp, so that the
	// packages above share them without importing each other.
	{"internal/units", nil},
	{"internal/vis", nil},
	{"internal/slots", nil},
	{"internal/sleep", nil},
	{"internal/bufpool", nil},
	{"internal/starttrace", nil},
	{"internal/svg", nil},
	{"internal/filter", nil},
	{"internal/clone", []string{"golang.org/x/sys"}},
	{"internal/recommend", nil},
	{"internal/hostconfig", []string{"github.com/kevinburke/ssh_config"}},
	{"internal/faultnet", nil},
	{"internal/syncoracle", []string{"golang.org/x/sys"}},
	{"internal/depstest", nil},
	// rsync's delta transfer: sums, diff and rebuild over io.ReaderAt and
	// io.WriterAt, no SSH.
	{"delta", []string{"github.com/zeebo/xxh3", "golang.org/x/sys"}},

	// One byte stream over several connections: frames over any
	// io.Reader and io.Writer, no SSH.
	{"stripe", []string{}},
	// hpncp at the far end (hpncp serve: striped commands, the delta
	// service) and the client's side of it, over channels it is handed.
	{"helper", []string{"stripe", "delta", "internal/clone", "internal/filter", "github.com/klauspost/compress", "golang.org/x/sys"}},

	// Test servers and harnesses: only they may import testing outside
	// a test file, and only tests may import them (testHelpers).
	{"internal/testenv", []string{"testing"}},
	{"internal/sshdtest", []string{"internal/testenv", "testing", "golang.org/x/crypto"}},
	{"internal/sshtest", []string{"testing", "github.com/pkg/sftp", "golang.org/x/crypto", "golang.org/x/sys"}},
	{"internal/hostile", []string{"internal/sshtest", "helper", "testing",
		"github.com/klauspost/compress", "github.com/pkg/sftp", "golang.org/x/crypto"}},

	// The window controller: arithmetic on samples, no I/O.
	{"window", []string{"internal/units"}},
	{"internal/trace", []string{"window", "internal/svg"}},

	// A host name to an authenticated *ssh.Client; it knows nothing of SFTP.
	{"sshconn", []string{"internal/sleep", "internal/starttrace", "internal/units", "internal/vis",
		"github.com/kevinburke/ssh_config", "github.com/skeema/knownhosts",
		"golang.org/x/crypto", "golang.org/x/sys", "golang.org/x/term"}},

	// The wire: SFTP over an *ssh.Client it is handed (it dials through
	// functions ends gives it, not through sshconn), and legacy scp over
	// protocol's remote commands. protocol is the only client of pkg/sftp.
	{"protocol", []string{"internal/bufpool", "internal/slots", "internal/sleep", "internal/starttrace",
		"github.com/pkg/sftp", "golang.org/x/crypto"}},
	{"protocol/scp", []string{"protocol", "internal/vis", "golang.org/x/crypto"}},

	// Moving bytes, over protocol's ends (and ErrStreamLost, which
	// protocol owns), as the window controller plans.
	{"pipeline", []string{"protocol", "window", "internal/bufpool", "golang.org/x/time"}},

	// The one copy engine.
	{"transfer", []string{"pipeline", "protocol", "protocol/scp", "window", "delta",
		"internal/clone", "internal/filter", "internal/slots", "internal/starttrace", "internal/vis",
		"github.com/klauspost/compress", "golang.org/x/sys", "golang.org/x/time"}},

	// The --json report, its merge and a job's shards: built from what
	// the engine tells of each file; the engine never imports it.
	{"report", []string{"transfer", "internal/vis"}},

	// sync's semantics over the engine, and a run's ends opened.
	{"mirror", []string{"transfer", "protocol", "delta", "internal/filter", "internal/slots", "internal/vis"}},
	{"ends", []string{"transfer", "protocol", "protocol/scp", "sshconn", "window", "helper", "delta",
		"internal/filter", "internal/starttrace", "internal/vis", "golang.org/x/crypto"}},

	// What one run is, under the CLI: a copy, a sync or a remote shell
	// from one value; the engine policy (tuning, congestion control,
	// start-up) and the assembly of a run.
	{"job", []string{"ends", "transfer", "mirror", "report", "pipeline", "protocol", "sshconn", "window",
		"helper", "internal/hostconfig", "internal/recommend", "internal/starttrace", "internal/vis", "golang.org/x/crypto", "golang.org/x/sys"}},

	// hpncp bench: copies through the job layer, as a user's; its
	// embedded demo serves SFTP with pkg/sftp's server. Nothing on a
	// copy's path imports it.
	{"bench", []string{"job", "transfer",
		"internal/recommend", "internal/svg", "internal/units",
		"github.com/pkg/sftp", "golang.org/x/crypto"}},
	{"bench/wanem", []string{"internal/units", "golang.org/x/sys"}},
	{"bench/cmd/units", []string{"internal/units"}},

	// The CLI, which nothing imports: flags to a job, its end to output
	// and an exit status. No protocol, pipeline, window, sshconn or
	// pkg/sftp: the job layer holds what needs them.
	{"cmd/hpncp", []string{"bench", "job", "mirror", "report", "transfer",
		"internal/filter", "internal/recommend", "internal/trace",
		"internal/units", "internal/vis",
		"github.com/schollz/progressbar/v3", "github.com/urfave/cli/v3", "golang.org/x/term"}},
}

// restrictedStd are the standard packages a row must name to import.
// A binary that links testing carries its flags and its runner.
var restrictedStd = []string{"testing"}

// Test files may import, besides what their package's row allows, any
// package below their own (reachable through the table), their own
// package (an external test), the test servers and harnesses, and the
// test-only modules: testscript, and pkg/sftp as a client that looks at
// what a server holds.
var (
	testHelpers = []string{"internal/testenv", "internal/sshtest", "internal/sshdtest",
		"internal/hostile", "internal/faultnet", "internal/syncoracle"}
	testModules = []string{"github.com/rogpeppe/go-internal", "github.com/pkg/sftp"}
)

// TestLayering checks every import of every Go file of the module
// against layers.
func TestLayering(t *testing.T) {
	pkgs, err := readPackages(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < len(layers)/2 {
		t.Fatalf("found %d packages, the table lists %d: is the module root right?", len(pkgs), len(layers))
	}
	for _, p := range check(pkgs, layers) {
		t.Error(p)
	}
}

// TestNoLoopBetweenFolders: no folder's packages import a package of
// another folder that, through the table, imports back: protocol once
// imported pipeline/bufpool while pipeline imported protocol. Each
// directory under internal/ counts as a folder of its own.
func TestNoLoopBetweenFolders(t *testing.T) {
	if loop := folderLoop(layers); loop != nil {
		t.Errorf("the table allows a loop between folders: %s", strings.Join(loop, " -> "))
	}
}

// TestCheckSaysWhatBroke runs the checks on a made-up module, so that a
// failure of TestLayering is known to name the file, the import and the
// rule, and the loop that pipeline/bufpool made is known to be caught.
func TestCheckSaysWhatBroke(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"low/low.go":        `package low; import _ "` + module + `/high"`,
		"high/high.go":      `package high; import (_ "` + module + `/low"; _ "example.com/other/pkg"; _ "testing")`,
		"high/x_test.go":    `package high_test; import (_ "` + module + `/high"; _ "` + module + `/internal/sshtest")`,
		"low/low_test.go":   `package low; import _ "` + module + `/high"`,
		"extra/extra.go":    `package extra`,
		"skip/skip.go":      "//go:build ignore\n\npackage main; import _ \"" + module + "/high\"",
		"low/testdata/x.go": `package x; import _ "` + module + `/high"`,
	}
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgs, err := readPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	table := []row{{"low", nil}, {"high", []string{"low"}}, {"skip", nil}, {"internal/sshtest", nil}}
	got := check(pkgs, table)
	want := []string{
		"extra: a package the layering table does not list",
		"high/high.go: high imports example.com/other/pkg; high's row allows low",
		"high/high.go: high imports testing; high's row allows low",
		"low/low.go: low imports high; low's row allows nothing of hpncp or third parties",
		"low/low_test.go: a test of low imports high",
		"row internal/sshtest: no such package in the module",
		"row skip: no such package in the module",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("no problem starts with %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}

	loop := folderLoop([]row{{"pipeline/bufpool", nil}, {"protocol", []string{"pipeline/bufpool"}}, {"pipeline", []string{"protocol"}}})
	if !slices.Equal(loop, []string{"pipeline", "protocol", "pipeline"}) && !slices.Equal(loop, []string{"protocol", "pipeline", "protocol"}) {
		t.Errorf("folderLoop of the old bufpool = %v, want the loop between pipeline and protocol", loop)
	}
	if loop := folderLoop([]row{{"internal/bufpool", nil}, {"protocol", []string{"internal/bufpool"}}, {"pipeline", []string{"protocol", "internal/bufpool"}}}); loop != nil {
		t.Errorf("folderLoop with bufpool under internal/ = %v, want none", loop)
	}
}

// file is one Go file of a package: its path from the module root, and
// the imports it names.
type file struct {
	name    string
	test    bool
	imports []string
}

// readPackages reads the imports of every Go file under root, by package
// directory (its path inside the module), leaving out testdata, hidden
// directories and files built only with the ignore tag.
func readPackages(root string) (map[string][]file, error) {
	pkgs := map[string][]file{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			if g.Pos() > f.Package {
				break
			}
			for _, c := range g.List {
				if x, err := constraint.Parse(c.Text); err == nil && x.String() == "ignore" {
					return nil
				}
			}
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi := file{name: rel, test: strings.HasSuffix(name, "_test.go")}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %v", rel, err)
			}
			fi.imports = append(fi.imports, p)
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		pkgs[dir] = append(pkgs[dir], fi)
		return nil
	})
	return pkgs, err
}

// check returns every package without a row, every row without a
// package, every row that allows a package not above it, and every
// import the table does not allow, each naming the file and the rule.
func check(pkgs map[string][]file, table []row) []string {
	var problems []string
	rows := map[string]row{}
	for i, r := range table {
		for _, m := range r.may {
			if kind(m) != ours {
				continue
			}
			if !slices.ContainsFunc(table[:i], func(up row) bool { return up.pkg == m }) {
				problems = append(problems, fmt.Sprintf("row %s allows %s, which is not a row above it: the table goes from the bottom up", r.pkg, m))
			}
		}
		rows[r.pkg] = r
		if _, ok := pkgs[r.pkg]; !ok {
			problems = append(problems, fmt.Sprintf("row %s: no such package in the module", r.pkg))
		}
	}
	for _, pkg := range sortedKeys(pkgs) {
		r, ok := rows[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: a package the layering table does not list; add its row to internal/depstest/deps_test.go and its place to docs/DESIGN.md, section 2", pkg))
			continue
		}
		below := reach(rows, pkg)
		for _, f := range pkgs[pkg] {
			for _, imp := range f.imports {
				if f.test {
					if !testMay(r, below, imp) {
						problems = append(problems, fmt.Sprintf("%s: a test of %s imports %s; a test may import what its package's row allows, the packages below it, its own package, testHelpers and testModules (internal/depstest/deps_test.go)",
							f.name, pkg, strings.TrimPrefix(imp, module+"/")))
					}
					continue
				}
				if !may(r, imp) {
					problems = append(problems, fmt.Sprintf("%s: %s imports %s; %s's row allows %s (internal/depstest/deps_test.go)",
						f.name, pkg, strings.TrimPrefix(imp, module+"/"), pkg, rule(r)))
				}
			}
		}
	}
	return problems
}

// Kinds of entry in a row.
const (
	ours = iota
	thirdParty
	std
)

// kind tells an entry of a row: one of the module's packages (named
// without the module's path), a third-party module, or a restricted
// standard package.
func kind(entry string) int {
	first, _, _ := strings.Cut(entry, "/")
	switch {
	case strings.Contains(first, "."):
		return thirdParty
	case slices.Contains(restrictedStd, entry):
		return std
	}
	return ours
}

// may reports whether a non-test file of r's package may import imp.
func may(r row, imp string) bool {
	if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
		return slices.Contains(r.may, rest)
	}
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return !slices.Contains(restrictedStd, imp) || slices.Contains(r.may, imp)
	}
	return slices.ContainsFunc(r.may, func(m string) bool { return inModule(imp, m) })
}

// testMay reports whether a test file of r's package may import imp;
// below is what r's package may reach through the table.
func testMay(r row, below reached, imp string) bool {
	if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
		return rest == r.pkg || below.pkgs[rest] || slices.Contains(testHelpers, rest)
	}
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return true
	}
	inAny := func(mods []string) bool {
		return slices.ContainsFunc(mods, func(m string) bool { return inModule(imp, m) })
	}
	return inAny(r.may) || inAny(testModules) || inAny(sortedKeys(below.modules))
}

// reached is what a package may reach through the table: the module's
// packages its row allows, those their rows allow and so on, and the
// third-party modules all those rows allow.
type reached struct {
	pkgs, modules map[string]bool
}

func reach(rows map[string]row, pkg string) reached {
	below := reached{pkgs: map[string]bool{}, modules: map[string]bool{}}
	var walk func(p string)
	walk = func(p string) {
		for _, m := range rows[p].may {
			switch kind(m) {
			case ours:
				if !below.pkgs[m] {
					below.pkgs[m] = true
					walk(m)
				}
			case thirdParty:
				below.modules[m] = true
			}
		}
	}
	walk(pkg)
	return below
}

// inModule reports whether the import path imp is a package of module m.
func inModule(imp, m string) bool {
	return imp == m || strings.HasPrefix(imp, m+"/")
}

// rule says what r allows, for a failure's message.
func rule(r row) string {
	if len(r.may) == 0 {
		return "nothing of hpncp or third parties"
	}
	return strings.Join(r.may, ", ")
}

// folder is the part of the tree a package belongs to: its first
// directory, or its own directory under internal/.
func folder(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	if parts[0] == "internal" && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// folderLoop returns a loop of folders the table allows, first folder
// last again, or nil.
func folderLoop(table []row) []string {
	edges := map[string][]string{}
	for _, r := range table {
		for _, m := range r.may {
			if kind(m) == ours && folder(m) != folder(r.pkg) && !slices.Contains(edges[folder(r.pkg)], folder(m)) {
				edges[folder(r.pkg)] = append(edges[folder(r.pkg)], folder(m))
			}
		}
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(f string) []string
	visit = func(f string) []string {
		state[f] = open
		path = append(path, f)
		for _, next := range edges[f] {
			switch state[next] {
			case open:
				i := slices.Index(path, next)
				return append(slices.Clone(path[i:]), next)
			case unseen:
				if loop := visit(next); loop != nil {
					return loop
				}
			}
		}
		path = path[:len(path)-1]
		state[f] = done
		return nil
	}
	for _, f := range sortedKeys(edges) {
		if state[f] == unseen {
			if loop := visit(f); loop != nil {
				return loop
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
