//go:build linux

package transfer_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/protocol/scp"
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

// linkTree makes, below root, a tree of the links rsync -a keeps: a link
// to its own directory, links that stay inside the tree and links that
// leave it (absolute, and climbing above the top), a dangling one, and
// a file with two names; enough small files for tar mode besides.
func linkTree(t *testing.T, root string) string {
	t.Helper()
	src := filepath.Join(root, "src")
	for _, d := range []string{"src/sub/deep", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("f", "first")
	for i := range 8 {
		write(filepath.Join("sub", "small"+strconv.Itoa(i)), strings.Repeat("x", i))
	}
	if err := os.Link(filepath.Join(src, "f"), filepath.Join(src, "sub", "f again")); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"self":              ".",
		"sub/up":            "../f",
		"sub/deep/top":      "../../../src/f", // depth 3: just inside
		"abs":               "/etc",
		"sub/out":           "../../outside", // climbs out through the top's name: inside for rsync
		"sub/deep/escape":   "../../../../x",
		"dangling":          "no such file",
		"sub/-leading dash": "sub with space/ü",
	} {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// shape describes the tree below dir as a user would check it: each
// entry's type, a file's content and the first of its names that share
// its inode, a link's target.
func shape(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	first := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			k := [2]uint64{uint64(st.Dev), st.Ino}
			if _, ok := first[k]; !ok {
				first[k] = rel
			}
			out[rel] = "file " + strconv.Quote(string(data)) + " as " + first[k]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rsyncShape is the tree rsync makes of src with flags, the oracle of
// what --links, --safe-links and --hard-links mean.
func rsyncShape(t *testing.T, src string, flags ...string) map[string]string {
	t.Helper()
	if _, err := exec.LookPath("rsync"); err != nil {
		if os.Getenv("HPNCP_E2E") == "require" {
			t.Fatalf("rsync, the oracle of this test, is missing: %v", err)
		}
		t.Skipf("no rsync to compare with: %v", err)
	}
	dst := t.TempDir()
	out, err := exec.Command("rsync", append(append([]string{"-r"}, flags...), src, dst+"/")...).CombinedOutput()
	if err != nil {
		t.Fatalf("rsync: %v\n%s", err, out)
	}
	return shape(t, dst)
}

// linkCopyEnds are the ways of copying that keep links: local, SFTP and
// tar mode, both ways, on the in-process server and a real sshd.
func linkCopyEnds(t *testing.T) []end {
	ends := []end{localEnd()}
	ends = append(ends, sftpEnds(inProcess(t), withParallel, "sftp")...)
	ends = append(ends, countedTarEnds()...)
	if s, _ := realSSHD(t); s.dial != nil {
		ends = append(ends, sftpEnds(s, withParallel, "sftp")...)
		ends = append(ends, sftpEnds(s, withTar, "tar")...)
	}
	return ends
}

func TestCopyLinks(t *testing.T) {
	for _, e := range linkCopyEnds(t) {
		t.Run(e.name, func(t *testing.T) {
			src := linkTree(t, t.TempDir())
			remoteSource := !e.up && e.name != "local"
			o := transfer.Options{Recursive: true, Links: transfer.LinkOptions{Symlinks: true, Safe: true, Hard: !remoteSource}}
			flags := []string{"-l", "--safe-links"}
			if o.Links.Hard {
				flags = append(flags, "-H")
			}
			want := rsyncShape(t, src, flags...)
			cp := e.open(t)
			dst := t.TempDir()
			for run := 1; run <= 2; run++ {
				res, err := cp(context.Background(), []string{src}, dst, o)
				if run == 2 && res != nil {
					// A re-run over the tree it made sends its files
					// over SFTP, tar mode or not (tar.go): not this
					// test's concern.
					res.Errors = slices.DeleteFunc(res.Errors, func(err error) bool {
						return strings.Contains(err.Error(), "without a tar stream")
					})
				}
				if err != nil || len(res.Errors) > 0 {
					t.Fatalf("run %d: %v %v", run, err, res.Errors)
				}
				// Two links leave the tree: abs and sub/deep/escape.
				if res.Skipped < 2 {
					t.Errorf("run %d: %d skipped, want at least the 2 unsafe links", run, res.Skipped)
				}
				got := shape(t, dst)
				for k, w := range want {
					if got[k] != w {
						t.Errorf("run %d: %s is %q, rsync made %q", run, k, got[k], w)
					}
				}
				for k, g := range got {
					if _, ok := want[k]; !ok {
						t.Errorf("run %d: %s (%s) is not in rsync's copy", run, k, g)
					}
				}
			}
		})
	}
}

func TestCopyLinksRefused(t *testing.T) {
	s := inProcess(t)
	src := linkTree(t, t.TempDir())
	fsys := openSFTP(t, s)
	t.Run("hard links from a remote source", func(t *testing.T) {
		dst := t.TempDir()
		_, err := transfer.Copy(context.Background(), []transfer.Endpoint{{FS: fsys, Path: src}}, transfer.Endpoint{FS: transfer.Local{}, Path: dst},
			transfer.Options{Recursive: true, Links: transfer.LinkOptions{Hard: true}})
		var oe *transfer.OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), "local sources only") {
			t.Fatalf("err = %v, want an OptionError saying --hard-links needs local sources", err)
		}
		if entries, _ := os.ReadDir(dst); len(entries) != 0 {
			t.Errorf("the refused copy wrote %d entries", len(entries))
		}
	})
	for _, lo := range []transfer.LinkOptions{{Symlinks: true}, {Hard: true}} {
		t.Run("legacy scp", func(t *testing.T) {
			o := transfer.Options{Recursive: true, Links: lo}
			if err := o.ValidateSCP(); err == nil || !strings.Contains(err.Error(), "legacy scp") {
				t.Errorf("ValidateSCP with %+v: %v, want a refusal naming the legacy scp protocol", lo, err)
			}
			_, err := scpCopy(scp.NewHost(s.connect(t), "inproc:"), true)(context.Background(), []string{src}, t.TempDir(), o)
			if err == nil {
				t.Errorf("Copy over scp with %+v copied", lo)
			}
		})
	}
}

// Without --links the walk follows links, as scp does: self -> . is a
// loop, reported, and the rest is copied; --safe-links alone leaves out
// the links that leave the tree and follows the others.
func TestCopySafeLinksFollowed(t *testing.T) {
	src := linkTree(t, t.TempDir())
	for _, l := range []string{"self", "sub/out", "dangling", "sub/-leading dash"} {
		os.Remove(filepath.Join(src, l))
	}
	dst := t.TempDir()
	var reports []transfer.FileReport
	res, err := transfer.Copy(context.Background(), []transfer.Endpoint{{FS: transfer.Local{}, Path: src}}, transfer.Endpoint{FS: transfer.Local{}, Path: dst},
		transfer.Options{Recursive: true, Links: transfer.LinkOptions{Safe: true}, Report: func(f transfer.FileReport) { reports = append(reports, f) }})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("%v %v", err, res.Errors)
	}
	got := shape(t, filepath.Join(dst, "src"))
	for k, w := range map[string]string{"sub/up": `file "first" as sub/up`, "sub/deep/top": `file "first" as sub/deep/top`} {
		if got[k] != w {
			t.Errorf("%s is %q, want %q (the link followed)", k, got[k], w)
		}
	}
	for _, k := range []string{"abs", "sub/deep/escape"} {
		if g, ok := got[k]; ok {
			t.Errorf("%s, a link leading outside, was copied as %s", k, g)
		}
	}
	unsafe := 0
	for _, f := range reports {
		if f.Status == transfer.StatusSkipped && f.Reason == transfer.ReasonUnsafeLink {
			unsafe++
		}
	}
	if unsafe != 2 {
		t.Errorf("%d links reported skipped as unsafe, want 2: %+v", unsafe, reports)
	}
}

func TestUnsafeSymlink(t *testing.T) {
	for _, c := range []struct {
		target string
		depth  int
		unsafe bool
	}{
		{"", 1, true},
		{"/etc", 5, true},
		{"f", 0, false},
		{"..", 0, true},
		{"..", 1, false},
		{"../x", 1, false},
		{"../../x", 1, true},
		{"..//../x/./y/", 2, false},
		// rsync 3.4: a ".." after a name or "." is unsafe at any depth.
		{"up/../outside", 1, true},
		{"a/../../x", 5, true},
		{"./.././x", 5, true},
		{"x/..//../..", 5, true},
		{"x/..", 5, true},
		{"../x/../y", 5, true},
		// A target of several elements ending in ".." too, but not one
		// ending in "../".
		{"../..", 5, true},
		{"../../", 5, false},
	} {
		if got := transfer.UnsafeSymlink(c.target, c.depth); got != c.unsafe {
			t.Errorf("UnsafeSymlink(%q, %d) = %v, want %v", c.target, c.depth, got, c.unsafe)
		}
	}
}

// TestUnsafeSymlinkAgainstRsync makes links of many targets at several
// depths and checks that UnsafeSymlink calls unsafe exactly the links
// rsync -r --links --safe-links leaves out, with the source's contents
// as the transfer (src/) and with the source directory itself (src).
func TestUnsafeSymlinkAgainstRsync(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	levels := []string{"", "a", "a/b", "a/b/c"}
	for _, l := range levels {
		if err := os.MkdirAll(filepath.Join(src, l), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Every target of up to four elements, an empty element making a
	// doubled, leading or trailing slash.
	targets := []string{""}
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		if n == 0 {
			return
		}
		for _, e := range []string{"..", ".", "x", ""} {
			t := e
			if prefix != "" || len(targets) > 0 && e == "" {
				t = prefix + "/" + e
			}
			targets = append(targets, t)
			grow(t, n-1)
		}
	}
	grow("", 4)
	links := map[string]string{} // rsync name below src -> target
	for _, l := range levels {
		for i, target := range targets {
			if target == "" {
				continue // no symlink can have it
			}
			name := strings.TrimPrefix(l+"/l"+strconv.Itoa(i), "/")
			if _, ok := links[name]; ok {
				continue
			}
			if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
				t.Fatal(err)
			}
			links[name] = target
		}
	}
	for _, operand := range []string{"src/", "src"} {
		kept := rsyncShape(t, dir+"/"+operand, "--links", "--safe-links")
		for name, target := range links {
			rel := name
			if operand == "src" {
				rel = "src/" + name
			}
			rsyncUnsafe := kept[rel] == ""
			if got := transfer.UnsafeSymlink(target, strings.Count(rel, "/")); got != rsyncUnsafe {
				t.Errorf("operand %s: link %s -> %q: UnsafeSymlink says unsafe=%v, rsync says %v", operand, rel, target, got, rsyncUnsafe)
			}
		}
	}
}

// noHardlinks is an SFTP end whose server offers no hardlink@openssh.com,
// as protocol.SFTP.Link reports it.
type noHardlinks struct{ *protocol.SFTP }

func (noHardlinks) Link(oldname, newname string) error {
	return &fs.PathError{Op: "hard link", Path: newname, Err: errors.ErrUnsupported}
}

// Where the target cannot make hard links, the second name of a file is
// copied as a file of its own: nothing is missing, only the sharing.
func TestHardLinksWithoutExtension(t *testing.T) {
	src := linkTree(t, t.TempDir())
	fsys := noHardlinks{openSFTP(t, inProcess(t))}
	dst := t.TempDir()
	res, err := transfer.Copy(context.Background(), []transfer.Endpoint{{FS: transfer.Local{}, Path: src}}, transfer.Endpoint{FS: fsys, Path: dst},
		transfer.Options{Recursive: true, Links: transfer.LinkOptions{Hard: true, Symlinks: true}})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("%v %v", err, res.Errors)
	}
	got := shape(t, dst)
	if a, b := got["src/f"], got["src/sub/f again"]; a != `file "first" as src/f` || b != `file "first" as src/sub/f again` {
		t.Errorf("the two names arrived as %q and %q, want two files of the same content", a, b)
	}
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
