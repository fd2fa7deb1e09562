package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// tree returns every path below root with "/" appended to directories and
// ":content" to files, for comparing layouts.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			out = append(out, rel+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, rel+":"+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func local(p string) Endpoint { return Endpoint{FS: Local{}, Path: p} }

func copyLocal(t *testing.T, o Options, args ...string) (*Result, error) {
	t.Helper()
	var srcs []Endpoint
	for _, a := range args[:len(args)-1] {
		srcs = append(srcs, local(a))
	}
	return Copy(context.Background(), srcs, local(args[len(args)-1]), o)
}

func TestCopyFailingSourceDoesNotStopOthers(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "good1"), "1")
	write(t, filepath.Join(src, "good2"), "2")
	os.Mkdir(filepath.Join(src, "adir"), 0o755)
	res, err := copyLocal(t, Options{},
		filepath.Join(src, "good1"), filepath.Join(src, "missing"), filepath.Join(src, "adir"),
		filepath.Join(src, "good2"), dst)
	if err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dst); strings.Join(got, " ") != "good1:1 good2:2" {
		t.Errorf("target tree %q", got)
	}
	if len(res.Errors) != 2 {
		t.Fatalf("errors = %v, want 2", res.Errors)
	}
	if msg := res.Errors[0].Error(); !strings.Contains(msg, "missing: no such file or directory") {
		t.Errorf("missing source error = %q", msg)
	}
	if msg := res.Errors[1].Error(); !strings.Contains(msg, "adir: is a directory") {
		t.Errorf("directory without -r error = %q", msg)
	}
}

func TestCopySeveralSourcesNeedDirectory(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "a"), "a")
	write(t, filepath.Join(src, "b"), "b")
	_, err := copyLocal(t, Options{}, filepath.Join(src, "a"), filepath.Join(src, "b"), filepath.Join(dst, "nope"))
	if !errors.Is(err, ErrNotDirectory) {
		t.Fatalf("err = %v, want ErrNotDirectory", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "nope")); !os.IsNotExist(err) {
		t.Error("target was created")
	}
}

// failingFS wraps Local and fails writes after a number of bytes.
type failingFS struct {
	Local
	failAfter int64
	names     []string // when set, what ReadDir calls the entries it lists
}

type failingWriter struct {
	io.WriteCloser
	left int64
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.left {
		n, _ := w.WriteCloser.Write(p[:w.left])
		w.left = 0
		return n, errors.New("injected write failure")
	}
	w.left -= int64(len(p))
	return w.WriteCloser.Write(p)
}

func (f failingFS) CreateExclusive(name string) (io.WriteCloser, error) {
	w, err := f.Local.CreateExclusive(name)
	if err != nil {
		return w, err
	}
	return &failingWriter{w, f.failAfter}, nil
}

func TestCopyFailureLeavesTargetIntact(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	big := bytes.Repeat([]byte("x"), 3<<20)
	os.WriteFile(filepath.Join(src, "f"), big, 0o644)
	write(t, filepath.Join(dst, "f"), "previous")
	res, err := Copy(context.Background(), []Endpoint{local(filepath.Join(src, "f"))},
		Endpoint{failingFS{failAfter: 1 << 20}, filepath.Join(dst, "f")}, Options{BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "injected write failure") {
		t.Fatalf("errors = %v", res.Errors)
	}
	if got := tree(t, dst); strings.Join(got, " ") != "f:previous" {
		t.Errorf("target dir after failure = %q, want only the previous file", got)
	}
}

type cancelAfter struct {
	n      int
	cancel func()
}

func (c *cancelAfter) StartFile(string, int64) {}
func (c *cancelAfter) EndFile()                {}
func (c *cancelAfter) Add(n int) {
	if c.n -= n; c.n <= 0 {
		c.cancel()
	}
}

func TestCopyNewFileModeFollowsUmask(t *testing.T) {
	for _, tt := range []struct {
		umask      int
		file, want fs.FileMode
	}{
		{0o022, 0o777, 0o755},
		{0o077, 0o755, 0o700},
		{0o002, 0o640, 0o640},
	} {
		old := syscall.Umask(tt.umask)
		src, dst := t.TempDir(), t.TempDir()
		write(t, filepath.Join(src, "x"), "x")
		os.Chmod(filepath.Join(src, "x"), tt.file)
		_, err := copyLocal(t, Options{}, filepath.Join(src, "x"), dst)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(dst, "x"))
		if fi.Mode().Perm() != tt.want {
			t.Errorf("umask %03o, source %v: mode = %v, want %v", tt.umask, tt.file, fi.Mode().Perm(), tt.want)
		}
	}
}

// tempModes records, at every Add, the permission bits of the temporary
// files in dir.
type tempModes struct {
	dir   string
	modes map[fs.FileMode]bool
}

func (m *tempModes) StartFile(string, int64) {}
func (m *tempModes) EndFile()                {}
func (m *tempModes) Add(int) {
	parts, _ := filepath.Glob(filepath.Join(m.dir, tempPrefix+"*.part"))
	for _, p := range parts {
		// Files only: the directory that learns the umask may be there.
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			m.modes[fi.Mode().Perm()] = true
		}
	}
}

func TestTempFileOwnerOnlyUntilRenamed(t *testing.T) {
	for _, tt := range []struct {
		name      string
		src, want fs.FileMode
		o         Options
	}{
		{"0644 source", 0o644, 0o644, Options{}},
		{"0755 source", 0o755, 0o755, Options{}},
		{"0600 source", 0o600, 0o600, Options{}},
		{"-p 0664 source", 0o664, 0o664, Options{Preserve: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := syscall.Umask(0o022)
			defer syscall.Umask(old)
			src, dst := filepath.Join(t.TempDir(), "f"), t.TempDir()
			write(t, src, strings.Repeat("x", 3<<20))
			if err := os.Chmod(src, tt.src); err != nil {
				t.Fatal(err)
			}
			m := &tempModes{dir: dst, modes: map[fs.FileMode]bool{}}
			tt.o.Progress, tt.o.BufferSize = m, 64<<10
			if _, err := copyLocal(t, tt.o, src, dst); err != nil {
				t.Fatal(err)
			}
			if len(m.modes) != 1 || !m.modes[0o600] {
				t.Errorf("temporary file modes while copying: %v, want 0600 alone", m.modes)
			}
			fi, err := os.Stat(filepath.Join(dst, "f"))
			if err != nil || fi.Mode().Perm() != tt.want {
				t.Fatalf("target mode %v (%v), want %v", fi.Mode().Perm(), err, tt.want)
			}
			if got := tree(t, dst); len(got) != 1 {
				t.Errorf("target directory holds %q, want the file alone", got)
			}
		})
	}
}

func (f failingFS) ReadDir(name string) ([]fs.FileInfo, error) {
	infos, err := f.Local.ReadDir(name)
	if err != nil || f.names == nil {
		return infos, err
	}
	for i := range infos {
		infos[i] = renamed{infos[i], f.names[i%len(f.names)]}
	}
	return infos, nil
}

type renamed struct {
	fs.FileInfo
	name string
}

func (r renamed) Name() string { return r.name }
