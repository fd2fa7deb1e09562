package mirror

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// TestSyncHardLinksFromDashDir is sync -aH host:-delete/ dst/, whose
// listing asks the server's find for the hard links below "-delete":
// find must search that directory, not run its -delete action on the
// login's directory. The server runs commands in its SFTP directory, so
// that "-delete" names one directory in both.
func TestSyncHardLinksFromDashDir(t *testing.T) {
	var home atomic.Pointer[string]
	srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		return sshtest.ShellExec(*home.Load())(cmd, stdin, stdout, stderr)
	}})
	root := srv.Root
	home.Store(&root)
	conn, err := ssh.Dial("tcp", srv.Addr, srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	end, err := protocol.OpenSFTP(conn, protocol.Options{Label: "testhost:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	write(t, root, map[string]string{"keep": "keep", "-delete/a": "linked", "-delete/sub/c": "c"})
	if err := os.Link(filepath.Join(root, "-delete/a"), filepath.Join(root, "-delete/sub/b")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	o := archive()
	o.HardLinks = true
	ctx := context.Background()
	p, err := Sync(ctx, transfer.Endpoint{FS: end, Path: "-delete"}, transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, true, o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(ctx, o, RunOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("sync: %v %v", err, res.Errors)
	}
	for dir, files := range map[string]map[string]string{
		root: {"keep": "keep", "-delete/a": "linked", "-delete/sub/b": "linked", "-delete/sub/c": "c"},
		dst:  {"a": "linked", "sub/b": "linked", "sub/c": "c"},
	} {
		for name, want := range files {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
				t.Errorf("%s: %q, %v; want %q", filepath.Join(dir, name), b, err, want)
			}
		}
	}
	a, errA := os.Stat(filepath.Join(dst, "a"))
	b, errB := os.Stat(filepath.Join(dst, "sub/b"))
	if errA != nil || errB != nil || !os.SameFile(a, b) || a.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Errorf("a and sub/b are not one file in the copy: %v, %v", errA, errB)
	}
}
