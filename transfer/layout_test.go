package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCheckTarget(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "file"), "x")
	tests := []struct {
		target        string
		several, some bool
		isDir         bool
		exists        bool   // the statted target found a file
		err           string // a part of the error; "" for none
	}{
		{target: root, several: true, some: true, isDir: true},
		{target: root + "/", some: true, isDir: true},
		{target: filepath.Join(root, "file"), some: true, exists: true},
		{target: filepath.Join(root, "new"), some: true},
		{target: filepath.Join(root, "file"), several: true, some: true, err: "with several sources the target must be an existing directory"},
		{target: filepath.Join(root, "new"), several: true, some: true, err: "with several sources"},
		{target: filepath.Join(root, "new") + "/", some: true, err: "a target ending in / must be an existing directory"},
		{target: filepath.Join(root, "new") + "/"},
		{target: filepath.Join(root, "file", "below"), some: true, err: "stat target"},
	}
	for _, tt := range tests {
		isDir, st, err := checkTarget(local(tt.target), tt.several, tt.some)
		switch {
		case tt.err != "":
			var te *Error
			if !errors.As(err, &te) || !strings.Contains(te.Error()+" "+te.Hint, tt.err) {
				t.Errorf("checkTarget(%q, %v, %v) = %v, want an error saying %q", tt.target, tt.several, tt.some, err, tt.err)
			}
		case err != nil || isDir != tt.isDir:
			t.Errorf("checkTarget(%q, %v, %v) = %v, %v; want directory %v", tt.target, tt.several, tt.some, isDir, err, tt.isDir)
		case isDir && st != nil:
			t.Errorf("checkTarget(%q) kept a stat of a directory target", tt.target)
		case !isDir && (st == nil || st.path != tt.target || (st.fi != nil) != tt.exists ||
			(!tt.exists && !errors.Is(st.err, fs.ErrNotExist))):
			t.Errorf("checkTarget(%q) kept stat %+v; want the file found: %v", tt.target, st, tt.exists)
		}
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
