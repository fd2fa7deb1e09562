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
	noFile := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, earlyID), fxNoSuchFile)
	noFile = appendString(appendString(noFile, "no such file"), "")
	for name, replies := range map[string][]byte{
		"in order":   append(sftpPacket(fxpExtendedReply, limits), sftpPacket(fxpStatus, noFile)...),
		"stat first": append(sftpPacket(fxpStatus, noFile), sftpPacket(fxpExtendedReply, limits)...),
	} {
		lim, early, _, err := readStart(bytes.NewReader(replies), h, []string{"x"}, startFiles{})
		if err != nil || lim.MaxRead != 256<<10 || lim.MaxWrite != 128<<10 {
			t.Errorf("%s: limits %+v, %v; want read 256 KiB, write 128 KiB", name, lim, err)
		}
		if a, ok := early["x"]; !ok || !errors.Is(a.err, fs.ErrNotExist) {
			t.Errorf("%s: early stat %+v, %t; want fs.ErrNotExist", name, a, ok)
		}
	}
}
