//go:build linux

package transfer_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/transfer"
)

// TestDashPathsOverCommands: a tree named "-src" in the login's
// directory is downloaded over tar streams, uploaded back into "-dst"
// over tar streams, and uploaded into "-verified" with --verify, which
// hashes each file with the server's sha256sum: every file lands under
// its own name, and nothing else in the login's directory changes. The server's commands run in its SFTP directory,
// so that a relative path names one file in both.
func TestDashPathsOverCommands(t *testing.T) {
	var home atomic.Pointer[string]
	var mu sync.Mutex
	var cmds []string
	srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		mu.Lock()
		cmds = append(cmds, cmd)
		mu.Unlock()
		return sshtest.ShellExec(*home.Load())(cmd, stdin, stdout, stderr)
	}})
	home.Store(&srv.Root)
	files := []string{"-f", "--null", "sub/-C", "ok"}
	var entries []string
	for _, f := range files {
		entries = append(entries, f+"="+f)
	}
	mkTree(t, filepath.Join(srv.Root, "-src"), entries...)
	mkTree(t, srv.Root, "keep=keep")
	fsys := openSFTP(t, sshtestServer(t, "inproc", srv))
	o := transfer.Options{Recursive: true, Parallel: parallel(),
		Tar: transfer.TarOptions{Mode: transfer.TarForce}}
	ctx := context.Background()

	local := filepath.Join(t.TempDir(), "copy")
	res, err := transfer.Copy(ctx, []transfer.Endpoint{{FS: fsys, Path: "-src"}},
		transfer.Endpoint{FS: transfer.Local{}, Path: local}, o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("download -src: %v %v", err, res.Errors)
	}
	res, err = transfer.Copy(ctx, []transfer.Endpoint{{FS: transfer.Local{}, Path: local}},
		transfer.Endpoint{FS: fsys, Path: "-dst"}, o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("upload to -dst: %v %v", err, res.Errors)
	}
	// --verify copies over SFTP alone.
	res, err = transfer.Copy(ctx, []transfer.Endpoint{{FS: transfer.Local{}, Path: local}},
		transfer.Endpoint{FS: fsys, Path: "-verified"}, transfer.Options{Recursive: true, Verify: true, Parallel: parallel()})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("upload to -verified: %v %v", err, res.Errors)
	}
	for _, dir := range []string{local, filepath.Join(srv.Root, "-src"), filepath.Join(srv.Root, "-dst"), filepath.Join(srv.Root, "-verified")} {
		for _, f := range files {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != f {
				t.Errorf("%s: %q, %v; want %q", filepath.Join(dir, f), b, err, f)
			}
		}
		if got := strings.Join(walk(t, dir), " "); got != "--null -f ok sub sub/-C" {
			t.Errorf("%s holds %s", dir, got)
		}
	}
	var want []string
	for _, dir := range []string{"-dst", "-src", "-verified"} {
		want = append(want, dir, dir+"/--null", dir+"/-f", dir+"/ok", dir+"/sub", dir+"/sub/-C")
	}
	if got := walk(t, srv.Root); !slices.Equal(got, append(want, "keep")) {
		t.Errorf("the login's directory holds %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tool := range []string{"tar -c", "tar -x", "sha256sum"} {
		if !slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, tool) }) {
			t.Errorf("no %s among the commands run: %q", tool, cmds)
		}
	}
}

// walk returns the paths below root, relative to it, in lexical order.
func walk(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out = append(out, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
