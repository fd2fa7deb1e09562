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
