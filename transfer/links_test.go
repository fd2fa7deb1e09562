//go:build linux

package transfer_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/transfer"
)

// linkEnd is an end with every link and owner method, on this machine's
// file system (the servers serve it too), so that what a method did is
// checked on disk.
type linkEnd interface {
	transfer.FS
	transfer.LinkReader
	transfer.Symlinker
	transfer.HardLinker
	transfer.Chowner
	transfer.LinkTimer
}

// linkEnds are Local, the in-process server and a real sshd.
func linkEnds() []struct {
	name   string
	remote bool
	open   func(t *testing.T) linkEnd
} {
	return []struct {
		name   string
		remote bool
		open   func(t *testing.T) linkEnd
	}{
		{"local", false, func(*testing.T) linkEnd { return transfer.Local{} }},
		{"inproc", true, func(t *testing.T) linkEnd { return openSFTP(t, inProcess(t)) }},
		{"sshd", true, func(t *testing.T) linkEnd { s, _ := realSSHD(t); return openSFTP(t, s) }},
	}
}

func TestLinkMethods(t *testing.T) {
	for _, e := range linkEnds() {
		t.Run(e.name, func(t *testing.T) {
			end := e.open(t)
			dir := t.TempDir()
			file := filepath.Join(dir, "file")
			if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}

			t.Run("symlink", func(t *testing.T) {
				// A relative target must be stored as given: OpenSSH's
				// swapped arguments, or a server that resolves the target
				// against its home, would make another link.
				for name, target := range map[string]string{"rel": "file", "abs": file, "up": "../x/y", "dangling": "no such"} {
					link := filepath.Join(dir, name)
					if err := end.Symlink(target, link); err != nil {
						t.Fatalf("Symlink(%q, %q): %v", target, link, err)
					}
					if got, err := os.Readlink(link); err != nil || got != target {
						t.Errorf("on disk %s -> %q (%v), want -> %q", name, got, err, target)
					}
					if got, err := end.ReadLink(link); err != nil || got != target {
						t.Errorf("ReadLink(%s) = %q, %v; want %q", name, got, err, target)
					}
					fi, err := end.Lstat(link)
					if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
						t.Errorf("Lstat(%s) = %v, %v; want a symbolic link", name, fi, err)
					}
				}
				if fi, err := end.Lstat(file); err != nil || !fi.Mode().IsRegular() || fi.Size() != 4 {
					t.Errorf("Lstat(file) = %v, %v; want the regular file of 4 bytes", fi, err)
				}
				if err := end.Symlink("file", filepath.Join(dir, "rel")); err == nil {
					t.Error("Symlink over an existing name succeeded")
				}
			})

			t.Run("hardlink", func(t *testing.T) {
				other := filepath.Join(dir, "other name")
				if err := end.Link(file, other); err != nil {
					t.Fatalf("Link: %v", err)
				}
				a, _ := os.Stat(file)
				b, err := os.Stat(other)
				if err != nil || !os.SameFile(a, b) {
					t.Fatalf("%s is not %s on disk (%v)", other, file, err)
				}
				for _, name := range []string{file, other} {
					fi, err := os.Stat(name)
					if err != nil {
						t.Fatal(err)
					}
					_, _, nlink, ok := transfer.FileID(fi)
					if !ok || nlink != 2 {
						t.Errorf("FileID(%s): %d names, ok %v; want 2", name, nlink, ok)
					}
				}
				fa, _ := end.Stat(file)
				fb, _ := end.Stat(other)
				da, ia, _, oka := transfer.FileID(fa)
				db, ib, _, okb := transfer.FileID(fb)
				switch {
				case e.remote && (oka || okb):
					t.Errorf("FileID of a remote Stat is ok; SFTP has no inodes")
				case !e.remote && (!oka || !okb || da != db || ia != ib):
					t.Errorf("FileID: %d/%d and %d/%d, want one file", da, ia, db, ib)
				}
			})

			t.Run("link times", func(t *testing.T) {
				if !transfer.CanLchtimes(end) {
					t.Fatal("CanLchtimes is false")
				}
				link := filepath.Join(dir, "timed link")
				if err := os.Symlink("file", link); err != nil {
					t.Fatal(err)
				}
				before, err := os.Stat(file)
				if err != nil {
					t.Fatal(err)
				}
				mt := time.Date(2011, 3, 4, 5, 6, 7, 0, time.UTC)
				if err := end.Lchtimes(link, mt, mt); err != nil {
					t.Fatalf("Lchtimes: %v", err)
				}
				if fi, err := os.Lstat(link); err != nil || !fi.ModTime().Equal(mt) {
					t.Errorf("the link's mtime on disk: %v (%v), want %v", fi.ModTime(), err, mt)
				}
				if after, err := os.Stat(file); err != nil || !after.ModTime().Equal(before.ModTime()) {
					t.Errorf("Lchtimes of a link changed its target's mtime to %v (%v)", after.ModTime(), err)
				}
			})

			t.Run("owner", func(t *testing.T) {
				if os.Geteuid() != 0 {
					t.Skip("setting owners needs root")
				}
				const uid, gid = 4321, 8765
				if err := end.Lchown(file, uid, gid); err != nil {
					t.Fatalf("Lchown: %v", err)
				}
				if u, g := diskOwner(t, file, os.Stat); u != uid || g != gid {
					t.Errorf("on disk %d:%d, want %d:%d", u, g, uid, gid)
				}
				check := func(how string, fi fs.FileInfo) {
					t.Helper()
					u, g, ok := transfer.OwnerOf(fi)
					if !ok || u != uid || g != gid {
						t.Errorf("OwnerOf(%s) = %d:%d (ok %v), want %d:%d", how, u, g, ok, uid, gid)
					}
				}
				fi, err := end.Stat(file)
				if err != nil {
					t.Fatal(err)
				}
				check("Stat", fi)
				if fi, err = end.Lstat(file); err != nil {
					t.Fatal(err)
				}
				check("Lstat", fi)
				list, err := end.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, fi := range list {
					if fi.Name() == "file" {
						found = true
						check("ReadDir", fi)
					}
				}
				if !found {
					t.Errorf("ReadDir(%s) has no entry file", dir)
				}

				link := filepath.Join(dir, "owned link")
				if err := os.Symlink("file", link); err != nil {
					t.Fatal(err)
				}
				err = end.Lchown(link, 1111, 2222)
				lu, lg := diskOwner(t, link, os.Lstat)
				if u, g := diskOwner(t, file, os.Stat); u != uid || g != gid {
					t.Errorf("Lchown of a link changed its target's owner to %d:%d", u, g)
				}
				// Both servers offer lsetstat@openssh.com, as OpenSSH's
				// has since 8.0; protocol's tests cover one without.
				if err != nil || lu != 1111 || lg != 2222 {
					t.Errorf("Lchown of a link: %v, link owned by %d:%d, want 1111:2222", err, lu, lg)
				}
			})
		})
	}
}

// diskOwner is name's owner and group as stat (os.Stat or os.Lstat)
// reads them.
func diskOwner(t *testing.T, name string, stat func(string) (fs.FileInfo, error)) (int, int) {
	t.Helper()
	fi, err := stat(name)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// TestCanLchtimes: an SFTP end whose server lacks lsetstat@openssh.com
// has Lchtimes but cannot set a link's times, and says so; an end
// without the method cannot either.
func TestCanLchtimes(t *testing.T) {
	without := openSFTP(t, sshtestServer(t, "old", sshtest.Start(t, sshtest.Options{NoLsetstat: true})))
	for name, c := range map[string]struct {
		end  transfer.FS
		want bool
	}{
		"local":               {transfer.Local{}, true},
		"sftp with lsetstat":  {openSFTP(t, inProcess(t)), true},
		"sftp without":        {without, false},
		"an end without them": {struct{ transfer.FS }{transfer.Local{}}, false},
	} {
		if got := transfer.CanLchtimes(c.end); got != c.want {
			t.Errorf("%s: CanLchtimes = %v, want %v", name, got, c.want)
		}
	}
}
