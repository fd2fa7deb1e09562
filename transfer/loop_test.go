package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// loopTree writes, below root, the tree of the bug report: d holding a
// file, a directory with a file, and two links to d itself; and a link in
// the directory back up to d. It returns d.
func loopTree(t *testing.T, root string) string {
	t.Helper()
	d := filepath.Join(root, "d")
	write(t, filepath.Join(d, "a"), "a")
	write(t, filepath.Join(d, "sub", "b"), "b")
	for _, l := range []struct{ name, target string }{
		{"d/s1", "."}, {"d/s2", "."}, {"d/sub/up", ".."},
	} {
		if err := os.Symlink(l.target, filepath.Join(root, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// resolvingRemote is the local file system posing as a server whose
// REALPATH resolves links, as OpenSSH's sftp-server does.
type resolvingRemote struct{ Local }

func (resolvingRemote) Label() string { return "fake:" }

func (resolvingRemote) Abs(name string) (string, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// loopErrors checks that errs are a directory loop each, one for each of
// the paths want (relative to d), naming d as the directory it leads
// back to.
func loopErrors(t *testing.T, errs []error, label, d string, want ...string) {
	t.Helper()
	var got []string
	for _, err := range errs {
		if !errors.Is(err, errDirLoop) {
			t.Errorf("unexpected error: %v", err)
			continue
		}
		got = append(got, err.Error())
	}
	sort.Strings(got)
	var wantText []string
	for _, w := range want {
		wantText = append(wantText, "copy "+label+filepath.Join(d, w)+": directory loop: it leads back to "+label+d)
	}
	sort.Strings(wantText)
	if strings.Join(got, "\n") != strings.Join(wantText, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantText, "\n"))
	}
}

// TestTreeLinkLoop: links back up to a directory that holds them are
// reported, each once, and not followed; the rest of the tree is copied
// and the copy ends. Before, two links to "." made a tree that doubled at
// every level, until memory ran out.
func TestTreeLinkLoop(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	remote := sftpEnd(t, srv)
	for _, tc := range []struct {
		name string
		// src is the end the tree is read from; its root is where the
		// tree is written. dst is the end it goes to.
		src, dst func(t *testing.T) (FS, string)
		tar      bool
	}{
		{name: "local", src: localRoot, dst: localRoot},
		{name: "upload", src: localRoot, dst: func(t *testing.T) (FS, string) { return remote, srv.Root }},
		// pkg/sftp's server does not resolve links in REALPATH: the
		// links are read.
		{name: "download", src: func(t *testing.T) (FS, string) { return remote, srv.Root }, dst: localRoot},
		{name: "download resolving", src: func(t *testing.T) (FS, string) { return resolvingRemote{}, t.TempDir() }, dst: localRoot},
		{name: "tar upload", src: localRoot, dst: func(t *testing.T) (FS, string) { return &waitingTar{}, t.TempDir() }, tar: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcFS, srcRoot := tc.src(t)
			srcRoot, err := os.MkdirTemp(srcRoot, "src")
			if err != nil {
				t.Fatal(err)
			}
			d := loopTree(t, srcRoot)
			dstFS, dstRoot := tc.dst(t)
			dstRoot, err = os.MkdirTemp(dstRoot, "dst")
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Recursive: true}
			if tc.tar {
				o.Tar = TarOptions{Mode: TarForce}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := Copy(ctx, []Endpoint{{srcFS, d}}, Endpoint{dstFS, dstRoot}, o)
			if err != nil {
				t.Fatalf("copy: %v", err)
			}
			loopErrors(t, res.Errors, srcFS.Label(), d, "s1", "s2", "sub/up")
			if got, want := strings.Join(tree(t, filepath.Join(dstRoot, "d")), " "), "a:a sub/ sub/b:b"; got != want {
				t.Errorf("copied %q, want %q", got, want)
			}
			if res.Files != 2 {
				t.Errorf("%d files copied, want 2", res.Files)
			}
		})
	}
}

func localRoot(t *testing.T) (FS, string) { return Local{}, t.TempDir() }

// TestTreeLinkLoopSCP: legacy SCP mode walks a local tree on its own;
// it stops at the loop too.
func TestTreeLinkLoopSCP(t *testing.T) {
	h := scpHost(t, realSCP(t))
	d := loopTree(t, t.TempDir())
	dst := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := CopySCP(ctx, []SCPEndpoint{localSCP(d)}, remote(h, dst), Options{Recursive: true})
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	loopErrors(t, res.Errors, "", d, "s1", "s2", "sub/up")
	if got, want := strings.Join(tree(t, filepath.Join(dst, "d")), " "), "a:a sub/ sub/b:b"; got != want {
		t.Errorf("copied %q, want %q", got, want)
	}
}

// TestTreeWideHoldsBoundedJobs: a directory with many more directories
// than the walk starts jobs for is copied whole, the rest depth first by
// the job that found them; before, a goroutine waited for each, which a
// tree endless enough (a loop not caught) turned into unbounded memory.
func TestTreeWideHoldsBoundedJobs(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "src"), t.TempDir()
	const dirs = 1500
	for i := range dirs {
		write(t, filepath.Join(src, fmt.Sprintf("d%04d", i), "f"), fmt.Sprint(i))
	}
	var mu sync.Mutex
	most := 0
	o := Options{Recursive: true, Report: func(FileReport) {
		mu.Lock()
		most = max(most, runtime.NumGoroutine())
		mu.Unlock()
	}}
	res, err := Copy(context.Background(), []Endpoint{local(src)}, local(dst), o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("copy: %v %v", err, res.Errors)
	}
	if res.Files != dirs {
		t.Errorf("%d files copied, want %d", res.Files, dirs)
	}
	for i := range dirs {
		if b, err := os.ReadFile(filepath.Join(dst, "src", fmt.Sprintf("d%04d", i), "f")); err != nil || string(b) != fmt.Sprint(i) {
			t.Fatalf("d%04d/f: %q, %v", i, b, err)
		}
	}
	// The jobs for directories, those for files and the test's own.
	if bound := cap(newSched(false).dirJobs) + localFiles + 50; most > bound {
		t.Errorf("%d goroutines at once, want at most %d", most, bound)
	}
}
