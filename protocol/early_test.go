package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func openEndStat(t *testing.T, srv *sshtest.Server, names ...string) *SFTP {
	t.Helper()
	first, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	end, err := OpenSFTP(first, Options{Label: "testhost:", Logf: t.Logf, Stat: names})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	return end
}

// TestEarlyStatAnswersFirstStat: the stat asked for with the start
// answers the end's first Stat of that name, as pkg/sftp's would have,
// and no other.
func TestEarlyStatAnswersFirstStat(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name := filepath.Join(srv.Root, "f")
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.WriteFile(name, []byte("four"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	end := openEndStat(t, srv, name, filepath.Join(srv.Root, "missing"))
	// Grown after the start: the first Stat still tells what the start
	// saw, which proves it took no round trip of its own.
	if err := os.WriteFile(name, []byte("longer"), 0o640); err != nil {
		t.Fatal(err)
	}
	fi, err := end.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name() != "f" || fi.Size() != 4 || fi.Mode() != 0o640 || !fi.ModTime().Equal(mtime) {
		t.Errorf("early stat: %s %d bytes %v %v, want f 4 bytes -rw-r----- %v", fi.Name(), fi.Size(), fi.Mode(), fi.ModTime(), mtime)
	}
	// A second Stat of the name, nothing between, takes it too.
	if fi, err := end.Stat(name); err != nil || fi.Size() != 4 {
		t.Errorf("second stat: %v, %v; want the start's 4 bytes", fi, err)
	}
	// The first Stat spent the others: "missing" is asked again.
	if err := os.WriteFile(filepath.Join(srv.Root, "missing"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := end.Stat(filepath.Join(srv.Root, "missing")); err != nil {
		t.Errorf("stat after the first: %v, want the file made since", err)
	}
	// That one went to the server: the name is asked again too.
	if fi, err := end.Stat(name); err != nil || fi.Size() != 6 {
		t.Errorf("stat after another: %v, %v; want the file's 6 bytes now", fi, err)
	}
}

// TestEarlyLstat: the start's LSTAT of a name answers the end's first
// Lstat of it, before or after its Stats, the link itself and not what
// it points to; another request first, and it is asked again.
func TestEarlyLstat(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name, link := filepath.Join(srv.Root, "f"), filepath.Join(srv.Root, "l")
	if err := os.WriteFile(name, []byte("four"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", link); err != nil {
		t.Fatal(err)
	}
	end := openEndStat(t, srv, link)
	// Replaced after the start: the answers are the start's.
	os.Remove(link)
	if err := os.WriteFile(link, []byte("a file now"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := end.Stat(link); err != nil || fi.Size() != 4 || !fi.Mode().IsRegular() {
		t.Errorf("stat of the link: %v, %v; want the start's 4-byte file it pointed to", fi, err)
	}
	if fi, err := end.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 || fi.Name() != "l" {
		t.Errorf("lstat of the link: %v, %v; want the start's link", fi, err)
	}
	if fi, err := end.Stat(link); err != nil || fi.Size() != 4 {
		t.Errorf("stat after the lstat: %v, %v; want the start's answer still", fi, err)
	}
	if err := end.Mkdir(filepath.Join(srv.Root, "d")); err != nil {
		t.Fatal(err)
	}
	if fi, err := end.Lstat(link); err != nil || !fi.Mode().IsRegular() || fi.Size() != 10 {
		t.Errorf("lstat after a mkdir: %v, %v; want the file there now", fi, err)
	}
}

func TestEarlyStatMissing(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name := filepath.Join(srv.Root, "missing")
	end := openEndStat(t, srv, name)
	if _, err := end.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestEarlyStatDroppedByChange: a request that may change the server's
// files comes first, so the early answer may be stale and is not given.
func TestEarlyStatDroppedByChange(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	for name, change := range map[string]func(end *SFTP, p string) error{
		"mkdir":      func(end *SFTP, p string) error { return end.Mkdir(p) },
		"mkdir mode": func(end *SFTP, p string) error { return end.MkdirMode(context.Background(), p, 0o755) },
		"put small": func(end *SFTP, p string) error {
			return end.PutSmall(context.Background(), p+".tmp", p, []byte("x"), PutAttrs{Perm: 0o644})
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(srv.Root, filepath.Base(t.Name()))
			end := openEndStat(t, srv, p)
			if err := change(end, p); err != nil {
				t.Fatal(err)
			}
			if _, err := end.Stat(p); err != nil {
				t.Errorf("stat after %s: %v, want what the change made", name, err)
			}
		})
	}
}

// TestReadStartInAnyOrder: a server may answer the early stat before the
// limits question; both are read either way.
func TestReadStartInAnyOrder(t *testing.T) {
	h := hello{ext: appendString(appendString(nil, limitsExtension), "1")}
	limits := binary.BigEndian.AppendUint32(nil, 1)
	for _, v := range []uint64{1 << 20, 256 << 10, 128 << 10, 64} {
		limits = binary.BigEndian.AppendUint64(limits, v)
	}
	noFile := func(id uint32) []byte {
		b := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, id), fxNoSuchFile)
		return sftpPacket(fxpStatus, appendString(appendString(b, "no such file"), ""))
	}
	stat, lstat := noFile(earlyID), noFile(earlyID+1)
	cat := func(p ...[]byte) []byte { return bytes.Join(p, nil) }
	for name, replies := range map[string][]byte{
		"in order":    cat(sftpPacket(fxpExtendedReply, limits), stat, lstat),
		"stat first":  cat(stat, lstat, sftpPacket(fxpExtendedReply, limits)),
		"lstat first": cat(lstat, sftpPacket(fxpExtendedReply, limits), stat),
	} {
		lim, early, _, err := readStart(bytes.NewReader(replies), h, []string{"x"}, startFiles{})
		if err != nil || lim.MaxRead != 256<<10 || lim.MaxWrite != 128<<10 {
			t.Errorf("%s: limits %+v, %v; want read 256 KiB, write 128 KiB", name, lim, err)
		}
		for _, link := range []bool{false, true} {
			if a, ok := early[earlyKey{"x", link}]; !ok || !errors.Is(a.err, fs.ErrNotExist) {
				t.Errorf("%s: early stat (link %v) %+v, %t; want fs.ErrNotExist", name, link, a, ok)
			}
		}
	}
}
