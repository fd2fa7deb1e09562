package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
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

// settingFS is the local file system under a remote's label that sets
// modes and times with its stat (attrSetter), recording what it is asked.
type settingFS struct {
	Local
	fail bool
	log  *[]string
	size *int64 // the file's size when SetAttrs was asked
}

func (s settingFS) Label() string { return "pseudo:" }

func (s settingFS) SetAttrs(_ context.Context, name string, a protocol.PutAttrs) (fs.FileInfo, error) {
	*s.log = append(*s.log, "setattrs")
	if fi, err := os.Stat(name); err == nil {
		*s.size = fi.Size()
	}
	if s.fail {
		return nil, errors.New("setstat refused")
	}
	if a.SetMode {
		if err := os.Chmod(name, a.Mode); err != nil {
			return nil, err
		}
	}
	if a.SetTimes {
		if err := os.Chtimes(name, a.Atime, a.Mtime); err != nil {
			return nil, err
		}
	}
	return os.Stat(name)
}

func (s settingFS) Chmod(name string, mode fs.FileMode) error {
	*s.log = append(*s.log, "chmod")
	return s.Local.Chmod(name, mode)
}

func (s settingFS) Chtimes(name string, atime, mtime time.Time) error {
	*s.log = append(*s.log, "chtimes")
	return s.Local.Chtimes(name, atime, mtime)
}

// TestParallelCopySetsAttrsWithItsStat: once every byte of a parallel
// copy is acknowledged, the temporary file's mode and times are set in
// the round trip of the size check's stat, and nothing is set after it;
// with --verify, only once the sums compared; where the early setstat
// fails, one at a time as before.
func TestParallelCopySetsAttrsWithItsStat(t *testing.T) {
	const size = 2 << 20
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		preserve, fail bool
		verify         bool
		want           []string
	}{
		{"mode", false, false, false, []string{"setattrs"}},
		{"mode and times", true, false, false, []string{"setattrs"}},
		{"verify", true, false, true, []string{"setattrs"}},
		{"refused", true, true, false, []string{"setattrs", "chmod", "chtimes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			if err := os.WriteFile(src, make([]byte, size), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(src, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(src, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			var log []string
			var sizeAt int64 = -1
			dst := Endpoint{settingFS{fail: tc.fail, log: &log, size: &sizeAt}, filepath.Join(dir, "dst")}
			o := Options{Preserve: tc.preserve, Verify: tc.verify, Parallel: ParallelOptions{MinSize: 1 << 20, Chunk: 256 << 10,
				Controller: func() *window.Controller { return window.New(window.Config{Fixed: 3}) }}}
			res, err := Copy(context.Background(), []Endpoint{local(src)}, dst, o)
			if err != nil || len(res.Errors) > 0 {
				t.Fatalf("copy: %v %v", err, res.Errors)
			}
			if !slices.Equal(log, tc.want) {
				t.Errorf("asked %v, want %v", log, tc.want)
			}
			if slices.Contains(log, "setattrs") && sizeAt != size {
				t.Errorf("mode set early with %d bytes of %d there", sizeAt, size)
			}
			fi, err := os.Stat(dst.Path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != size || fi.Mode().Perm() != 0o640 {
				t.Errorf("target: %d bytes, mode %v; want %d, -rw-r-----", fi.Size(), fi.Mode(), size)
			}
			if tc.preserve && !fi.ModTime().Equal(mtime) {
				t.Errorf("target's time %v, want %v", fi.ModTime(), mtime)
			}
		})
	}
}
