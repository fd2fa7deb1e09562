package recommend

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestOnlyBenchCommandImportsBench: the store is its own package so that
// the packages a copy runs on never pull in the benchmark. The layering
// table (internal/depstest) keeps bench out of every package below the
// CLI; within cmd/hpncp, a file other than the bench command's
// (bench*.go) that imports bench fails here.
func TestOnlyBenchCommandImportsBench(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	const module = "github.com/hpncp/hpncp/"
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
