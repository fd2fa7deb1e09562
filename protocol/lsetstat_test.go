//go:build linux

package protocol

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
)

// openSSHD opens an SFTP end on a real OpenSSH sshd, whose sftp-server
// offers lsetstat@openssh.com since 8.0.
func openSSHD(t *testing.T) *SFTP {
	t.Helper()
	srv := sshdtest.Start(t, sshdtest.Options{})
	conn, err := ssh.Dial("tcp", srv.Addr(), srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	end, err := OpenSFTP(conn, Options{Label: "e2e:", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	return end
}

// onDisk is what os.Lstat or os.Stat reads of name: times to the second
// and owner.
type onDisk struct {
	atime, mtime time.Time
	uid, gid     int
}

func readDisk(t *testing.T, name string, stat func(string) (fs.FileInfo, error)) onDisk {
	t.Helper()
	fi, err := stat(name)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return onDisk{
		atime: time.Unix(st.Atim.Sec, 0).UTC(), mtime: time.Unix(st.Mtim.Sec, 0).UTC(),
		uid: int(st.Uid), gid: int(st.Gid),
	}
}

// TestLsetstatSetsTheLinkItself sets a symbolic link's times and owner
// over SFTP, as rsync -t's lutimes and -o's lchown, and checks on disk
// that the link changed and its target did not, through the in-process
// server and OpenSSH's sftp-server.
func TestLsetstatSetsTheLinkItself(t *testing.T) {
	ends := []struct {
		name string
		open func(t *testing.T) *SFTP
	}{
		{"inproc", func(t *testing.T) *SFTP { return openEnd(t, sshtest.Start(t, sshtest.Options{}), false) }},
		{"sshd", openSSHD},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			end := e.open(t)
			if !end.CanLchtimes() {
				t.Fatal("CanLchtimes is false on a server that offers lsetstat@openssh.com")
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "file")
			link := filepath.Join(dir, "link")
			dangling := filepath.Join(dir, "dangling")
			if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			if err := os.Chtimes(file, old, old); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("file", link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("no such", dangling); err != nil {
				t.Fatal(err)
			}
			target := readDisk(t, file, os.Stat)

			at := time.Date(2012, 1, 2, 3, 4, 5, 0, time.UTC)
			mt := time.Date(2011, 3, 4, 5, 6, 7, 0, time.UTC)
			for _, l := range []string{link, dangling} {
				if err := end.Lchtimes(l, at, mt); err != nil {
					t.Fatalf("Lchtimes(%s): %v", l, err)
				}
				if got := readDisk(t, l, os.Lstat); !got.mtime.Equal(mt) || !got.atime.Equal(at) {
					t.Errorf("%s on disk: mtime %v atime %v, want %v and %v", l, got.mtime, got.atime, mt, at)
				}
			}
			if got := readDisk(t, file, os.Stat); got != target {
				t.Errorf("Lchtimes of a link changed its target: %+v, was %+v", got, target)
			}
			if fi, err := end.Lstat(link); err != nil || !fi.ModTime().Equal(mt) {
				t.Errorf("Lstat of the link over SFTP: %v (%v), want mtime %v", fi.ModTime(), err, mt)
			}

			if err := end.Lchtimes(filepath.Join(dir, "missing"), at, mt); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Lchtimes of a missing name: %v, want fs.ErrNotExist", err)
			}
			// SFTP's times are unsigned seconds: 1969 would arrive as 2106.
			if err := end.Lchtimes(link, at, time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "1970 to 2106") {
				t.Errorf("Lchtimes to 1969: %v, want an error naming the range SFTP carries", err)
			}
			if got := readDisk(t, link, os.Lstat); !got.mtime.Equal(mt) {
				t.Errorf("a refused Lchtimes changed the link's mtime to %v", got.mtime)
			}

			t.Run("owner", func(t *testing.T) {
				if os.Geteuid() != 0 {
					t.Skip("setting owners needs root")
				}
				if err := os.Chown(file, 4321, 8765); err != nil {
					t.Fatal(err)
				}
				target := readDisk(t, file, os.Stat)
				if err := end.Lchown(link, 1111, 2222); err != nil {
					t.Fatalf("Lchown of a link: %v", err)
				}
				if got := readDisk(t, link, os.Lstat); got.uid != 1111 || got.gid != 2222 {
					t.Errorf("link owned by %d:%d, want 1111:2222", got.uid, got.gid)
				}
				// -1 leaves the owner as it is, as chown(2) and mirror's -g.
				if err := end.Lchown(link, -1, 3333); err != nil {
					t.Fatalf("Lchown of a link, group only: %v", err)
				}
				if got := readDisk(t, link, os.Lstat); got.uid != 1111 || got.gid != 3333 {
					t.Errorf("after a group-only Lchown the link is owned by %d:%d, want 1111:3333", got.uid, got.gid)
				}
				if got := readDisk(t, file, os.Stat); got != target {
					t.Errorf("Lchown of a link changed its target: %+v, was %+v", got, target)
				}
				if err := end.Lchown(file, 5555, 6666); err != nil {
					t.Fatalf("Lchown of a file: %v", err)
				}
				if got := readDisk(t, file, os.Stat); got.uid != 5555 || got.gid != 6666 {
					t.Errorf("file owned by %d:%d, want 5555:6666", got.uid, got.gid)
				}
			})
		})
	}
}

// TestLsetstatWithoutTheExtension: a server without lsetstat@openssh.com
// (OpenSSH before 8.0, most others) gets no request that would follow
// the link; the errors wrap ErrUnsupported, which callers skip, and name
// the extension. The same where the server allows no session beside the
// main one, whose pkg/sftp client cannot send it. A file's owner is set
// all the same.
func TestLsetstatWithoutTheExtension(t *testing.T) {
	for name, o := range map[string]sshtest.Options{
		"not offered": {NoLsetstat: true},
		"one session": {MaxSessions: 1},
		"neither":     {NoLsetstat: true, MaxSessions: 1},
	} {
		t.Run(name, func(t *testing.T) {
			end := openEnd(t, sshtest.Start(t, o), false)
			if got, want := end.CanLchtimes(), !o.NoLsetstat; got != want {
				t.Errorf("CanLchtimes = %v, want %v", got, want)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "file")
			link := filepath.Join(dir, "link")
			if err := os.WriteFile(file, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("file", link); err != nil {
				t.Fatal(err)
			}
			linkWas, fileWas := readDisk(t, link, os.Lstat), readDisk(t, file, os.Stat)
			mt := time.Date(2011, 3, 4, 5, 6, 7, 0, time.UTC)
			err := end.Lchtimes(link, mt, mt)
			if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), lsetstatExt) {
				t.Errorf("Lchtimes: %v, want an error wrapping ErrUnsupported naming %s", err, lsetstatExt)
			}
			if os.Geteuid() == 0 {
				err = end.Lchown(link, 1111, 2222)
				if !errors.Is(err, errors.ErrUnsupported) {
					t.Errorf("Lchown of a link: %v, want an error wrapping ErrUnsupported", err)
				}
				if err := end.Lchown(file, 4321, 8765); err != nil {
					t.Errorf("Lchown of a file: %v", err)
				} else if got := readDisk(t, file, os.Stat); got.uid != 4321 || got.gid != 8765 {
					t.Errorf("file owned by %d:%d, want 4321:8765", got.uid, got.gid)
				}
				fileWas.uid, fileWas.gid = 4321, 8765
			}
			if got := readDisk(t, link, os.Lstat); got != linkWas {
				t.Errorf("the link changed: %+v, was %+v", got, linkWas)
			}
			if got := readDisk(t, file, os.Stat); got.mtime != fileWas.mtime || got.uid != fileWas.uid || got.gid != fileWas.gid {
				t.Errorf("the target changed: %+v, was %+v", got, fileWas)
			}
		})
	}
}
