package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/window"
)

// bigTree writes dirs directories of files small files each (sizes varying
// around SFTP's packet size), and the large files given, below root, with
// varied modes and times of the past.
func bigTree(t *testing.T, root string, dirs, files int, large ...int) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", d), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range files {
			b := make([]byte, rng.Intn(3*protocol.SafePacket))
			rng.Read(b)
			name := filepath.Join(dir, fmt.Sprintf("f%03d", f))
			if f%3 == 0 {
				name = filepath.Join(filepath.Dir(dir), fmt.Sprintf("g%03d", f))
			}
			mode := fs.FileMode(0o644)
			if f%5 == 0 {
				mode = 0o755
			}
			if err := os.WriteFile(name, b, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(name, when, when.Add(time.Duration(f)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, n := range large {
		b := make([]byte, n)
		rng.Read(b)
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("large%d", i)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Directory times last: creating their entries changed them.
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chtimes(p, when, when.Add(-time.Hour))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// meta lists every path below root with its mode, size, modification time
// (with times set) and content hash, for comparing trees.
func meta(t *testing.T, root string, times bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d", filepath.ToSlash(rel), fi.Mode(), fi.Size())
		if times && rel != "." {
			line += " " + fi.ModTime().UTC().Format(time.RFC3339)
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", b[:min(len(b), 16)])
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameMeta(t *testing.T, a, b string, times bool) {
	t.Helper()
	ma, mb := meta(t, a, times), meta(t, b, times)
	if strings.Join(ma, "\n") != strings.Join(mb, "\n") {
		for i := range min(len(ma), len(mb)) {
			if ma[i] != mb[i] {
				t.Fatalf("trees differ (%d and %d entries), first at\n%s\n%s", len(ma), len(mb), ma[i], mb[i])
			}
		}
		t.Fatalf("trees differ: %d and %d entries", len(ma), len(mb))
	}
}

func noTempsBelow(t *testing.T, root string) {
	t.Helper()
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

// opensFailing wraps Local and fails to open the files whose name starts
// with "bad".
type openFailing struct{ Local }

func (f openFailing) Open(name string) (io.ReadCloser, error) {
	if strings.HasPrefix(filepath.Base(name), "bad") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("injected failure")}
	}
	return f.Local.Open(name)
}

func TestTreeManyFilesSomeFail(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "src"), t.TempDir()
	for i := range 300 {
		name := fmt.Sprintf("f%03d", i)
		if i%30 == 7 {
			name = fmt.Sprintf("bad%03d", i)
		}
		write(t, filepath.Join(src, fmt.Sprintf("d%d", i%7), name), name)
	}
	var mu sync.Mutex
	reports := map[string]string{}
	o := Options{Recursive: true, Report: func(f FileReport) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := reports[f.Path]; dup {
			t.Errorf("%s reported twice", f.Path)
		}
		reports[f.Path] = f.Status
	}}
	res, err := Copy(context.Background(), []Endpoint{{openFailing{}, src}}, local(dst), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 290 || len(res.Errors) != 10 || len(reports) != 300 {
		t.Errorf("files %d, errors %d, reports %d: want 290, 10, 300", res.Files, len(res.Errors), len(reports))
	}
	for p, st := range reports {
		if bad := strings.HasPrefix(filepath.Base(p), "bad"); bad != (st == StatusFailed) {
			t.Errorf("%s: %s", p, st)
		}
	}
	got := tree(t, filepath.Join(dst, "src"))
	files := 0
	for _, e := range got {
		if name, content, ok := strings.Cut(e, ":"); ok {
			files++
			if filepath.Base(name) != content {
				t.Errorf("%s holds %q", name, content)
			}
		}
	}
	if files != 290 {
		t.Errorf("%d files at the target, want 290", files)
	}
	noTempsBelow(t, dst)
}

func TestTreePreserveSetsDirectoryTimesAfterFiles(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "src"), t.TempDir()
	bigTree(t, src, 4, 30)
	// A directory that only its owner may enter, below one it may only
	// read: the modes are set deepest first, or the inner one could not
	// be reached (for a user other than root).
	if err := os.Chmod(filepath.Join(src, "d01", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "d01"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dst, "src", "d01"), 0o755) })
	when := time.Date(2021, 3, 4, 4, 6, 7, 0, time.UTC)
	for _, d := range []string{src, filepath.Join(src, "d01"), filepath.Join(src, "d01", "sub")} {
		if err := os.Chtimes(d, when, when); err != nil {
			t.Fatal(err)
		}
	}
	res, err := copyLocal(t, Options{Recursive: true, Preserve: true}, src, dst)
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	sameMeta(t, src, filepath.Join(dst, "src"), true)
}

func TestTreeCancelLeavesNoTempOrPartialFile(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := sftpEnd(t, srv)
	src := filepath.Join(t.TempDir(), "src")
	bigTree(t, src, 6, 40, 3<<20)
	ctx, cancel := context.WithCancel(context.Background())
	prog := &cancelAfter{n: 1 << 20, cancel: cancel}
	o := Options{Recursive: true, Progress: prog, Parallel: testParallel()}
	target := filepath.Join(srv.Root, "dst")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Copy(ctx, []Endpoint{local(src)}, Endpoint{end, target}, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	noTempsBelow(t, target)
	// Whatever arrived is whole.
	err = filepath.WalkDir(filepath.Join(target, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(target, "src"), p)
		want, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes under its final name, want %d", rel, len(got), len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTreeOverSFTPBothWays(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := sftpEnd(t, srv)
	src := filepath.Join(t.TempDir(), "src")
	// Small files, one too large for a batch, and one for the parallel
	// pipeline.
	bigTree(t, src, 5, 60, protocol.SmallMax+1, 2<<20)
	var mu sync.Mutex
	var files []FileReport
	o := Options{Recursive: true, Preserve: true, Parallel: testParallel(),
		Report: func(f FileReport) { mu.Lock(); files = append(files, f); mu.Unlock() }}
	up := filepath.Join(srv.Root, "up")
	if err := os.Mkdir(up, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{end, up}, o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if res.Files != 5*60+2 || len(files) != res.Files {
		t.Errorf("upload: %d files, %d reports, want %d", res.Files, len(files), 5*60+2)
	}
	sameMeta(t, src, filepath.Join(up, "src"), true)
	noTempsBelow(t, up)

	down := t.TempDir()
	res, err = Copy(context.Background(), []Endpoint{{end, filepath.Join(up, "src")}}, local(down), o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	sameMeta(t, src, filepath.Join(down, "src"), true)
	noTempsBelow(t, down)

	// Again without -p over what is there: the files are replaced, their
	// modes kept.
	if err := os.Chmod(filepath.Join(up, "src", "d00", "g000"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Preserve = false
	res, err = Copy(context.Background(), []Endpoint{local(src)}, Endpoint{end, up}, o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if fi, err := os.Stat(filepath.Join(up, "src", "d00", "g000")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("replaced file: %v %v, want mode -rw-------", fi.Mode(), err)
	}
	sameMeta(t, filepath.Join(src, "d01"), filepath.Join(up, "src", "d01"), false)
}

func testParallel() ParallelOptions {
	return ParallelOptions{
		Controller: func() *window.Controller { return window.New(window.Config{Fixed: 2}) },
		MinSize:    1 << 20,
		Chunk:      256 << 10,
	}
}

// sftpEnd opens an SFTP end on the test server.
func sftpEnd(t *testing.T, srv *sshtest.Server) *protocol.SFTP {
	t.Helper()
	dial := func(context.Context) (*ssh.Client, protocol.Readying, error) {
		return srv.Dial(t), protocol.Readying{}, nil
	}
	end, err := protocol.OpenSFTP(srv.Dial(t), protocol.Options{Label: "testhost:", Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	return end
}

func TestTreeLaterSourceWinsAsWithScp(t *testing.T) {
	dir, dst := t.TempDir(), t.TempDir()
	for _, s := range []string{"a", "b", "c"} {
		for i := range 50 {
			write(t, filepath.Join(dir, s, "x", fmt.Sprintf("f%02d", i)), s)
		}
	}
	var srcs []Endpoint
	for _, s := range []string{"a", "b", "c"} {
		srcs = append(srcs, local(filepath.Join(dir, s, "x")))
	}
	res, err := Copy(context.Background(), srcs, local(dst), Options{Recursive: true, Skip: CopyAlways})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	for _, e := range tree(t, dst) {
		if name, content, ok := strings.Cut(e, ":"); ok && content != "c" {
			t.Errorf("%s holds %q, want the last source's", name, content)
		}
	}
}
