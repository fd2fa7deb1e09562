package recommend

import (
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCopyPathDoesNotImportBench: the store is its own package so that
// the packages a copy runs on never pull in the benchmark. A new import
// of bench from any of them, directly or through another hpncp package,
// or from a file of cmd/hpncp other than the bench command's (bench*.go),
// fails here.
func TestCopyPathDoesNotImportBench(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	const module = "github.com/hpncp/hpncp/"
	for _, start := range []string{"job", "ends", "mirror", "transfer", "pipeline", "protocol", "window", "sshconn", "internal/recommend", "internal/units"} {
		seen := map[string]bool{}
		var walk func(pkg string, path []string)
		walk = func(pkg string, path []string) {
			if seen[pkg] {
				return
			}
			seen[pkg] = true
			if pkg == "bench" || strings.HasPrefix(pkg, "bench/") {
				t.Errorf("%s imports the benchmark: %s", start, strings.Join(append(path, pkg), " → "))
				return
			}
			p, err := build.ImportDir(filepath.Join(root, pkg), 0)
			if err != nil {
				t.Fatalf("read package %s: %v", pkg, err)
			}
			for _, imp := range p.Imports {
				if rest, ok := strings.CutPrefix(imp, module); ok {
					walk(rest, append(path, pkg))
				}
			}
		}
		walk(start, nil)
	}

	files, err := filepath.Glob(filepath.Join(root, "cmd", "hpncp", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("list cmd/hpncp: %v, %d files", err, len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "bench") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			if imp.Path.Value == `"`+module+`bench"` {
				t.Errorf("cmd/hpncp/%s imports the benchmark; the copy path reads the store through package recommend", name)
			}
		}
	}
}
