package transfer

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hpncp/hpncp/window"
)

// preparingFS is the local file system under label, recording the
// streams it is asked to prepare and the stats of its files.
type preparingFS struct {
	Local
	label    string
	prepared *[]int
	stats    *atomic.Int64 // the umask probe stats from a goroutine of its own
}

func (p preparingFS) Label() string { return p.label }

func (p preparingFS) PrepareStreams(_ context.Context, streams, _ int) {
	*p.prepared = append(*p.prepared, streams)
}

func (p preparingFS) Stat(name string) (fs.FileInfo, error) {
	p.stats.Add(1)
	return p.Local.Stat(name)
}

func TestStreamsPreparedOnlyForParallelCopies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		label string
		size  int
		want  int // PrepareStreams calls
	}{
		{"big file to a remote", "pseudo:", 2 << 20, 1},
		{"small file to a remote", "pseudo:", 100, 0},
		{"big file between local paths", "", 2 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			if err := os.WriteFile(src, make([]byte, tc.size), 0o644); err != nil {
				t.Fatal(err)
			}
			var prepared []int
			var stats atomic.Int64
			dst := Endpoint{preparingFS{label: tc.label, prepared: &prepared, stats: &stats}, filepath.Join(dir, "dst")}
			o := Options{Parallel: ParallelOptions{MinSize: 1 << 20, Chunk: 256 << 10,
				Controller: func() *window.Controller { return window.New(window.Config{Fixed: 3}) }}}
			res, err := Copy(context.Background(), []Endpoint{local(src)}, dst, o)
			if err != nil || len(res.Errors) > 0 {
				t.Fatalf("copy: %v %v", err, res.Errors)
			}
			if len(prepared) != tc.want || (tc.want > 0 && prepared[0] != 3) {
				t.Errorf("streams prepared: %v, want %d call(s) for the plan's 3 streams", prepared, tc.want)
			}
			if got, err := os.ReadFile(dst.Path); err != nil || len(got) != tc.size {
				t.Fatalf("target: %d bytes (%v), want %d", len(got), err, tc.size)
			}
		})
	}
}

func TestTargetNameStatOnce(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("abc"), 0o640); err != nil {
		t.Fatal(err)
	}
	var prepared []int
	var stats atomic.Int64
	dstFS := preparingFS{label: "pseudo:", prepared: &prepared, stats: &stats}
	dst := Endpoint{dstFS, filepath.Join(dir, "dst")}
	// The first copy creates the target, the second replaces it: each
	// stats the target once, and the temporary file once for its size.
	// The first also learns the end's umask, for the new file's mode
	// (umask.go).
	for i, want := range []int{3, 2} {
		stats.Store(0)
		res, err := Copy(context.Background(), []Endpoint{local(src)}, dst, Options{})
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("copy %d: %v %v", i, err, res.Errors)
		}
		if got := stats.Load(); got != int64(want) {
			t.Errorf("copy %d: %d stats on the receiving end, want %d (the target, the temporary file, the umask probe of a new file)", i, got, want)
		}
		fi, err := os.Stat(dst.Path)
		if err != nil || fi.Mode().Perm() != 0o640 {
			t.Fatalf("copy %d: target %v (%v), want mode 0640", i, fi.Mode(), err)
		}
	}
}
