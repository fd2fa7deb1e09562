package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// sentinel is a directory outside a confined end's root whose state a
// test takes before and compares after: nothing a confined end does may
// change it.
type sentinel struct {
	dir   string
	state map[string]string
}

func newSentinel(t *testing.T) *sentinel {
	t.Helper()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "outside\n")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "sub", "inner"), "inner\n")
	s := &sentinel{dir: dir}
	s.state = s.snapshot(t)
	return s
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot records every name below the sentinel with its type, mode,
// link count, size, times and content.
func (s *sentinel) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fi.Mode().String() + " " + fi.ModTime().String()
		v += fmt.Sprintf(" nlink=%d", st.Nlink)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *sentinel) check(t *testing.T) {
	t.Helper()
	now := s.snapshot(t)
	for p, v := range s.state {
		if now[p] != v {
			t.Errorf("outside the target, %s changed: %q, was %q", p, now[p], v)
		}
	}
	for p := range now {
		if _, ok := s.state[p]; !ok {
			t.Errorf("outside the target, %s appeared", p)
		}
	}
}

// withWalk runs f once with openat2 and once with the element-by-element
// walk that older kernels get.
func withWalk(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		was := noOpenat2.Load()
		noOpenat2.Store(true)
		defer noOpenat2.Store(was)
		f(t)
	})
}

func confined(t *testing.T, dir string) Local {
	t.Helper()
	e, err := Confine(Endpoint{FS: Local{}, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !Confined(e.FS) {
		t.Fatal("Confine returned an end that is not confined")
	}
	return e.FS.(Local)
}

// TestConfinedRefusesLinkInPath: every operation whose path passes
// through a link below the root fails, and the link's target is left as
// it was.
func TestConfinedRefusesLinkInPath(t *testing.T) {
	withWalk(t, func(t *testing.T) {
		out := newSentinel(t)
		root := t.TempDir()
		if err := os.Symlink(out.dir, filepath.Join(root, "d")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, "real"), 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(root, "real", "f"), "mine\n")
		l := confined(t, root)
		via := func(n string) string { return filepath.Join(root, "d", n) }
		mine := filepath.Join(root, "real", "f")
		ops := map[string]func() error{
			"create":   func() error { _, err := l.CreateExclusive(via("new")); return err },
			"open":     func() error { _, err := l.Open(via("file")); return err },
			"write":    func() error { _, err := l.OpenWriterAt(context.Background(), via("file"), 0); return err },
			"read":     func() error { _, err := l.OpenReaderAt(context.Background(), via("file"), 0); return err },
			"stat":     func() error { _, err := l.Stat(via("file")); return err },
			"lstat":    func() error { _, err := l.Lstat(via("file")); return err },
			"readdir":  func() error { _, err := l.ReadDir(via("sub")); return err },
			"readlink": func() error { _, err := l.ReadLink(via("file")); return err },
			"mkdir":    func() error { return l.Mkdir(via("newdir")) },
			"remove":   func() error { return l.Remove(via("file")) },
			"removedir": func() error {
				return l.Remove(filepath.Join(root, "d", "sub", "inner"))
			},
			"chmod":      func() error { return l.Chmod(via("file"), 0o777) },
			"chtimes":    func() error { return l.Chtimes(via("file"), time.Unix(1, 0), time.Unix(1, 0)) },
			"lchtimes":   func() error { return l.Lchtimes(via("file"), time.Unix(1, 0), time.Unix(1, 0)) },
			"lchown":     func() error { return l.Lchown(via("file"), os.Getuid(), os.Getgid()) },
			"truncate":   func() error { return l.Truncate(via("file"), 0) },
			"symlink":    func() error { return l.Symlink("/etc", via("ln")) },
			"link":       func() error { return l.Link(mine, via("hard")) },
			"linkfrom":   func() error { return l.Link(via("file"), filepath.Join(root, "real", "h")) },
			"rename":     func() error { return l.Rename(mine, via("moved")) },
			"renamefrom": func() error { return l.Rename(via("file"), filepath.Join(root, "real", "m")) },
		}
		for name, op := range ops {
			err := op()
			if !errors.Is(err, ErrLinkInPath) {
				t.Errorf("%s through a link: %v, want ErrLinkInPath", name, err)
			}
		}
		out.check(t)
		if b, err := os.ReadFile(mine); err != nil || string(b) != "mine\n" {
			t.Errorf("the file inside the root: %q, %v", b, err)
		}
	})
}

// TestConfinedFinalLink: a link as the last element is acted on as a link:
// not opened, not written through, not chmod'ed; removed and renamed
// over as itself.
func TestConfinedFinalLink(t *testing.T) {
	withWalk(t, func(t *testing.T) {
		out := newSentinel(t)
		root := t.TempDir()
		ln := filepath.Join(root, "l")
		if err := os.Symlink(filepath.Join(out.dir, "file"), ln); err != nil {
			t.Fatal(err)
		}
		l := confined(t, root)
		if _, err := l.Open(ln); err == nil {
			t.Error("Open of a link opened it")
		}
		if _, err := l.OpenWriterAt(context.Background(), ln, 0); err == nil {
			t.Error("OpenWriterAt of a link opened it")
		}
		if _, err := l.CreateExclusive(ln); !errors.Is(err, fs.ErrExist) {
			t.Errorf("CreateExclusive over a link: %v, want fs.ErrExist", err)
		}
		if err := l.Chmod(ln, 0o777); err == nil {
			t.Error("Chmod of a link succeeded")
		}
		if err := l.Truncate(ln, 0); err == nil {
			t.Error("Truncate of a link succeeded")
		}
		if err := l.Chtimes(ln, time.Unix(5, 0), time.Unix(5, 0)); err != nil {
			t.Errorf("Chtimes of a link: %v", err)
		}
		fi, err := l.Stat(ln)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 || !fi.ModTime().Equal(time.Unix(5, 0)) {
			t.Errorf("Stat of a link: %v %v, want the link itself with its own new time", fi, err)
		}
		if target, err := l.ReadLink(ln); err != nil || target != filepath.Join(out.dir, "file") {
			t.Errorf("ReadLink: %q, %v", target, err)
		}
		out.check(t)

		f, err := l.CreateExclusive(filepath.Join(root, "tmp"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write([]byte("new\n"))
		_ = f.Close()
		if err := l.Rename(filepath.Join(root, "tmp"), ln); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(ln); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("rename over a link: %v %v, want a regular file in its place", fi, err)
		}
		if err := os.Symlink(out.dir, filepath.Join(root, "dl")); err != nil {
			t.Fatal(err)
		}
		if err := l.Remove(filepath.Join(root, "dl")); err != nil {
			t.Errorf("Remove of a link to a directory: %v", err)
		}
		out.check(t)
	})
}

// TestConfinedOutsideRoot: a path that is not below the root is refused
// before anything is opened.
func TestConfinedOutsideRoot(t *testing.T) {
	out := newSentinel(t)
	root := t.TempDir()
	l := confined(t, root)
	for _, p := range []string{
		filepath.Join(out.dir, "file"),
		filepath.Join(root, "..", filepath.Base(out.dir), "file"),
		"/etc/passwd",
	} {
		if err := l.Chmod(p, 0o777); !errors.Is(err, ErrOutsideTarget) {
			t.Errorf("Chmod %s: %v, want ErrOutsideTarget", p, err)
		}
		if _, err := l.CreateExclusive(p + ".new"); !errors.Is(err, ErrOutsideTarget) {
			t.Errorf("CreateExclusive %s: %v, want ErrOutsideTarget", p, err)
		}
	}
	out.check(t)
}

// TestConfinedNoFIFO: a FIFO where a file is read or written is refused
// at once, without waiting for a peer that never comes.
func TestConfinedNoFIFO(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	l := confined(t, root)
	if _, err := l.Open(p); !errors.Is(err, errNotRegular) {
		t.Errorf("Open of a FIFO: %v, want errNotRegular", err)
	}
	if _, err := l.OpenWriterAt(context.Background(), p, 0); err == nil {
		t.Error("OpenWriterAt of a FIFO opened it")
	}
}

// TestConfinedRelativeRoot: a root given relative to the working
// directory takes both relative and absolute names below it.
func TestConfinedRelativeRoot(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	if err := os.Mkdir("t", 0o755); err != nil {
		t.Fatal(err)
	}
	l := confined(t, "t")
	if err := l.Mkdir(filepath.Join("t", "a")); err != nil {
		t.Fatal(err)
	}
	if err := l.Mkdir(filepath.Join(root, "t", "a", "b")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "t", "a", "b")); err != nil || !fi.IsDir() {
		t.Errorf("t/a/b: %v %v", fi, err)
	}
	if err := l.Mkdir("a"); !errors.Is(err, ErrOutsideTarget) {
		t.Errorf("Mkdir a beside the root: %v, want ErrOutsideTarget", err)
	}
}

// TestCopyReplacesLinkWhereDirGoes: a link in the target where the source
// has a directory (as an earlier --links run can leave) is replaced by a
// directory, as rsync replaces it, and nothing is written through it.
func TestCopyReplacesLinkWhereDirGoes(t *testing.T) {
	out := newSentinel(t)
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "top", "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(src, "top", "d", "file"), "from the source\n")
	dst := t.TempDir()
	if err := os.Mkdir(filepath.Join(dst, "top"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out.dir, filepath.Join(dst, "top", "d")); err != nil {
		t.Fatal(err)
	}
	res, err := Copy(context.Background(), []Endpoint{{Local{}, filepath.Join(src, "top")}},
		Endpoint{Local{}, dst}, Options{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("failed: %v", res.Errors)
	}
	out.check(t)
	fi, err := os.Lstat(filepath.Join(dst, "top", "d"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("top/d: %v %v, want a directory in the link's place", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "top", "d", "file")); err != nil || !bytes.Equal(b, []byte("from the source\n")) {
		t.Errorf("top/d/file: %q %v", b, err)
	}
}

// TestSourceSwapped: a local source that is a FIFO or a device when it is
// opened fails at once, and one swapped for a link is refused where the
// walk copies links as links, never read through the link.
func TestSourceSwapped(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Local{}.Open(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, errNotRegular) {
			t.Errorf("Open of a FIFO: %v, want errNotRegular", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Open of a FIFO still blocked after a minute")
	}
	if _, err := (Local{}).OpenReaderAt(context.Background(), "/dev/null", 1); !errors.Is(err, errNotRegular) {
		t.Errorf("OpenReaderAt of a device: %v, want errNotRegular", err)
	}

	secret := filepath.Join(t.TempDir(), "secret")
	mustWrite(t, secret, "not to be sent\n")
	ln := filepath.Join(dir, "file")
	if err := os.Symlink(secret, ln); err != nil {
		t.Fatal(err)
	}
	src := NoFollow(Endpoint{Local{}, ln})
	if _, err := src.FS.Open(ln); !errors.Is(err, errSwappedForLink) {
		t.Errorf("Open of a file swapped for a link: %v, want errSwappedForLink", err)
	}
	if _, err := src.FS.(streamReader).OpenReaderAt(context.Background(), ln, 1); !errors.Is(err, errSwappedForLink) {
		t.Errorf("OpenReaderAt of a file swapped for a link: %v, want errSwappedForLink", err)
	}
	// scp's walk follows links: the same open reads through it.
	f, err := Local{}.Open(ln)
	if err != nil {
		t.Fatalf("Open through a link without NoFollow: %v", err)
	}
	_ = f.Close()
}

// TestConfineMissingTarget: a target that does not exist yet, named with
// a trailing slash or not, is confined to its parent, where it will be
// made.
func TestConfineMissingTarget(t *testing.T) {
	for _, name := range []string{"new", "new/", "new/."} {
		dir := t.TempDir()
		e, err := Confine(Endpoint{Local{}, filepath.Join(dir, "x") + "/../" + name})
		if err != nil {
			t.Errorf("Confine %q: %v", name, err)
			continue
		}
		if err := e.FS.Mkdir(filepath.Join(dir, "new")); err != nil {
			t.Errorf("Mkdir below the target %q: %v", name, err)
		}
	}
}
