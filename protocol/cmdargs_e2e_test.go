package protocol

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestHardLinkedDashDirOpenSSH: through a real sshd and the login's
// shell, a directory named "-delete" is searched by find, and nothing
// below the login's directory is deleted. sshd runs every command in a
// directory of the test's (ForceCommand cd there, then the command as
// sent), so that relative paths resolve there and not in the home of the
// user running the tests.
func TestHardLinkedDashDirOpenSSH(t *testing.T) {
	var sftpServer string
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			sftpServer = p
			break
		}
	}
	if sftpServer == "" {
		sshdtest.LookTool(t, "sftp-server")
	}
	home := t.TempDir()
	srv := sshdtest.Start(t, sshdtest.Options{ExtraConfig: []string{
		// internal-sftp cannot run under a ForceCommand.
		"Subsystem sftp " + sftpServer,
		`ForceCommand cd ` + QuoteArg(home) + ` && eval "$SSH_ORIGINAL_COMMAND"`,
	}})
	mkFiles(t, home, "keep", "-delete/a", "-delete/sub/c")
	if err := os.Link(filepath.Join(home, "-delete/a"), filepath.Join(home, "-delete/sub/b")); err != nil {
		t.Fatal(err)
	}
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
	// The SFTP session too runs in home: a relative name resolves there.
	if fi, err := end.Stat("keep"); err != nil || fi.Size() != int64(len("keep")) {
		t.Fatalf("stat keep over SFTP: %v, %v; sshd did not run the session in %s", fi, err, home)
	}

	ids, err := end.HardLinked(context.Background(), "-delete")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids["a"] != ids["sub/b"] || ids["a"] == (FileID{}) {
		t.Errorf("HardLinked(-delete) = %v, want a and sub/b, one file", ids)
	}
	exist(t, home, "keep", "-delete/a", "-delete/sub/c")
	holds(t, filepath.Join(home, "-delete/sub/b"), "-delete/a")
	if t.Failed() {
		out, _ := os.ReadDir(home)
		var names []string
		for _, e := range out {
			names = append(names, e.Name())
		}
		t.Logf("the login's directory holds %s", strings.Join(names, ", "))
	}
}
