package protocol

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestReadDirOpenSSH lists directories through OpenSSH's sftp-server,
// which answers 100 names a READDIR and sends the error statuses the
// callers meet in the field.
func TestReadDirOpenSSH(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{})
	conn, err := ssh.Dial("tcp", srv.Addr(), srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	end, err := OpenSFTP(conn, Options{Label: "e2e:", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()

	root := t.TempDir()
	for _, n := range []int{0, 1, 99, 100, 101, 250, 1000} {
		dir := filepath.Join(root, fmt.Sprint(n))
		mkEntries(t, dir, n, func(i int) string { return fmt.Sprintf("f %04d ü", i) })
		got, err := end.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		sameListing(t, dir, got)
	}
	long := filepath.Join(root, "long")
	mkEntries(t, long, 250, func(i int) string { return fmt.Sprintf("%03d%s", i, strings.Repeat("é", 126)) })
	got, err := end.ReadDir(long)
	if err != nil {
		t.Fatal(err)
	}
	sameListing(t, long, got)
	if end.lister.s == nil || end.lister.gone {
		t.Error("the listings went through pkg/sftp, not the listing session")
	}

	missing := filepath.Join(root, "missing")
	if _, err := end.ReadDir(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("listing a missing directory: %v, want fs.ErrNotExist", err)
	}
	if _, err := end.ReadDir(filepath.Join(root, "1", "f 0000 ü")); err == nil {
		t.Error("listing a file succeeded")
	}
}
