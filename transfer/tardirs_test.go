package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// searchOnly is the local file system as a user who is not root sees
// it: a directory's mode or times cannot be set once the directory that
// holds it is no longer searchable (the tests run as root, who can). The
// deeper a directory, the longer its change takes, so that a change to a
// parent made beside it lands first.
type searchOnly struct{ Local }

func (s searchOnly) check(name string, depth int) error {
	time.Sleep(time.Duration(depth) * 15 * time.Millisecond)
	if fi, err := os.Stat(filepath.Dir(name)); err == nil && fi.Mode().Perm()&0o100 == 0 {
		return &fs.PathError{Op: "chmod", Path: name, Err: fs.ErrPermission}
	}
	return nil
}

func depthOf(name string) int { return strings.Count(name, string(filepath.Separator)) }

func (s searchOnly) Chmod(name string, mode fs.FileMode) error {
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		if err := s.check(name, depthOf(name)); err != nil {
			return err
		}
	}
	return s.Local.Chmod(name, mode)
}

func (s searchOnly) Chtimes(name string, atime, mtime time.Time) error {
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		if err := s.check(name, depthOf(name)); err != nil {
			return err
		}
	}
	return s.Local.Chtimes(name, atime, mtime)
}

// With -p, a directory that its owner may not search gets its mode only
// after those below it got theirs, in tar mode as in SFTP mode: set
// first, it would refuse their changes.
func TestTarPreserveUnsearchableDirectory(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	for _, rel := range []string{"f", "a/g", "a/b/h", "a/b/c/i"} {
		write(t, filepath.Join(src, filepath.FromSlash(rel)), rel)
	}
	modes := map[string]fs.FileMode{"a": 0o600, "a/b": 0o750, "a/b/c": 0o700}
	for _, rel := range []string{"a/b/c", "a/b", "a"} {
		if err := os.Chmod(filepath.Join(src, filepath.FromSlash(rel)), modes[rel]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "a"), 0o755) })
	for _, mode := range []TarMode{TarOff, TarForce} {
		target := filepath.Join(t.TempDir(), "tree")
		var logs []string
		o := Options{Recursive: true, Preserve: true, Tar: TarOptions{Mode: mode},
			Logf: func(f string, a ...any) { logs = append(logs, f) }}
		res, err := Copy(context.Background(), []Endpoint{{&slowLister{}, src}}, Endpoint{searchOnly{}, target}, o)
		if err != nil {
			t.Fatal(err)
		}
		if used := strings.Contains(strings.Join(logs, "\n"), "(tar)"); used != (mode == TarForce) {
			t.Fatalf("mode %d: tar streams used %v", mode, used)
		}
		if len(res.Errors) > 0 || res.Files != 4 {
			t.Errorf("mode %d: %d files copied, errors %v; want 4 and none", mode, res.Files, errors.Join(res.Errors...))
		}
		for rel, want := range modes {
			fi, err := os.Stat(filepath.Join(target, filepath.FromSlash(rel)))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("mode %d: %s: mode %v, want %v", mode, rel, fi.Mode().Perm(), want)
			}
		}
		_ = os.Chmod(filepath.Join(target, "a"), 0o755)
	}
}
