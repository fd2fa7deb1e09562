package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/internal/testenv"
)

// mkEntries fills dir with n entries: files of distinct sizes and, every
// seventh, a directory, named by name(i).
func mkEntries(t testing.TB, dir string, n int, name func(int) string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := filepath.Join(dir, name(i))
		var err error
		if i%7 == 6 {
			err = os.Mkdir(p, 0o750)
		} else {
			err = os.WriteFile(p, make([]byte, i), 0o640)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sameListing checks that got lists what the local file system holds in
// dir: the same names, sizes, types, permissions and times.
func sameListing(t *testing.T, dir string, got []fs.FileInfo) {
	t.Helper()
	want, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries listed, want %d", dir, len(got), len(want))
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Name() < got[j].Name() })
	for i, w := range want {
		wi, err := w.Info()
		if err != nil {
			t.Fatal(err)
		}
		g := got[i]
		if g.Name() != wi.Name() || g.IsDir() != wi.IsDir() || g.Mode() != wi.Mode() ||
			(!wi.IsDir() && g.Size() != wi.Size()) || !g.ModTime().Equal(wi.ModTime().Truncate(time.Second)) {
			t.Fatalf("%s: entry %d is %q %v %d bytes %v, want %q %v %d bytes %v", dir, i,
				g.Name(), g.Mode(), g.Size(), g.ModTime(), wi.Name(), wi.Mode(), wi.Size(), wi.ModTime())
		}
	}
}

func TestReadDirSizes(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	// pkg/sftp's server answers 128 names a READDIR, OpenSSH's 100: the
	// sizes straddle both, and the first batch of READDIRs.
	for _, n := range []int{0, 1, 100, 101, 128, 129, 250, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := filepath.Join(srv.Root, fmt.Sprintf("d%d", n))
			mkEntries(t, dir, n, func(i int) string { return fmt.Sprintf("f%04d", i) })
			got, err := end.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			sameListing(t, dir, got)
		})
	}
	if end.lister.s == nil || end.lister.gone {
		t.Error("the listings went through pkg/sftp, not the listing session")
	}
}

func TestReadDirNames(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	odd := []string{"with space", " lead", "trail ", "ünïcödé", "日本語のファイル", "tab\there", "new\nline", "-dash", "%s%d"}
	dir := filepath.Join(srv.Root, "odd")
	mkEntries(t, dir, len(odd), func(i int) string { return odd[i] })
	got, err := end.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameListing(t, dir, got)

	// Names of 255 bytes with their ls -l lines make NAME replies larger
	// than any other small reply.
	long := filepath.Join(srv.Root, "long")
	mkEntries(t, long, 300, func(i int) string { return fmt.Sprintf("%03d%s", i, strings.Repeat("é", 126)) })
	got, err = end.ReadDir(long)
	if err != nil {
		t.Fatal(err)
	}
	sameListing(t, long, got)
	if end.lister.s == nil {
		t.Error("the listing session was lost on long names; pkg/sftp listed instead")
	}
}

// TestAppendNames decodes a NAME reply as OpenSSH's sftp-server sends
// it, with an access time of its own (pkg/sftp's server sends the
// modification time), and one with extended attributes, which must be
// skipped to find the next entry.
func TestAppendNames(t *testing.T) {
	atime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	mtime := time.Date(2011, 2, 3, 4, 5, 6, 0, time.UTC)
	entry := func(b []byte, name string, flags uint32, ext ...string) []byte {
		b = appendString(b, name)
		b = appendString(b, "-rw-r--r--    1 u g 5 Feb  3  2011 "+name)
		b = binary.BigEndian.AppendUint32(b, flags)
		if flags&attrSize != 0 {
			b = binary.BigEndian.AppendUint64(b, 5)
		}
		if flags&attrUIDGID != 0 {
			b = binary.BigEndian.AppendUint64(b, 1000<<32|1000)
		}
		if flags&attrPermissions != 0 {
			b = binary.BigEndian.AppendUint32(b, 0o100644)
		}
		if flags&attrACModTime != 0 {
			b = binary.BigEndian.AppendUint32(b, uint32(atime.Unix()))
			b = binary.BigEndian.AppendUint32(b, uint32(mtime.Unix()))
		}
		if flags&attrExtended != 0 {
			b = binary.BigEndian.AppendUint32(b, uint32(len(ext)/2))
			for _, e := range ext {
				b = appendString(b, e)
			}
		}
		return b
	}
	all := uint32(attrSize | attrUIDGID | attrPermissions | attrACModTime)
	b := binary.BigEndian.AppendUint32(nil, 4)
	b = entry(b, ".", all)
	b = entry(b, "a", all)
	b = entry(b, "..", all)
	b = entry(b, "b", all|attrExtended, "x@example.com", "data", "y@example.com", "")
	list, n, err := appendNames(nil, b)
	if err != nil || n != 4 || len(list) != 2 {
		t.Fatalf("appendNames: %d of %d entries, %v; want 2 of 4", len(list), n, err)
	}
	for i, want := range []string{"a", "b"} {
		fi := list[i]
		a, ok := fi.Sys().(interface{ AccessTime() time.Time })
		if fi.Name() != want || fi.Size() != 5 || fi.Mode() != 0o644 || !fi.ModTime().Equal(mtime) ||
			!ok || !a.AccessTime().Equal(atime) {
			t.Errorf("entry %d: %q %d %v %v (access time: %v); want %q 5 -rw-r--r-- %v, %v",
				i, fi.Name(), fi.Size(), fi.Mode(), fi.ModTime(), ok, want, mtime, atime)
		}
	}
	for cut := 4; cut < len(b); cut += 7 {
		if _, _, err := appendNames(nil, b[:cut]); err == nil {
			t.Fatalf("a reply cut at %d of %d bytes decoded without error", cut, len(b))
		}
	}
}

func TestReadDirFailures(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	missing := filepath.Join(srv.Root, "missing")
	if got, err := end.ReadDir(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("listing a missing directory: %v, %v; want an error naming it, like fs.ErrNotExist", got, err)
	}
	file := filepath.Join(srv.Root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := end.ReadDir(file); err == nil {
		t.Errorf("listing a file: %v, want an error", got)
	}
	// The session survives failures: a directory still lists.
	dir := filepath.Join(srv.Root, "d")
	mkEntries(t, dir, 3, func(i int) string { return fmt.Sprint(i) })
	got, err := end.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameListing(t, dir, got)
}

// TestReadDirConcurrent lists more directories at once than the listing
// session takes, while the server's handles of earlier listings close.
func TestReadDirConcurrent(t *testing.T) {
	testenv.SkipSlow(t)
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	const dirs = 3 * listerMax
	for d := range dirs {
		mkEntries(t, filepath.Join(srv.Root, fmt.Sprint(d)), d%150, func(i int) string { return fmt.Sprint(i) })
	}
	var wg sync.WaitGroup
	lists := make([][]fs.FileInfo, dirs)
	errs := make([]error, dirs)
	for d := range dirs {
		wg.Go(func() { lists[d], errs[d] = end.ReadDir(filepath.Join(srv.Root, fmt.Sprint(d))) })
	}
	wg.Wait()
	for d := range dirs {
		if errs[d] != nil {
			t.Fatal(errs[d])
		}
		sameListing(t, filepath.Join(srv.Root, fmt.Sprint(d)), lists[d])
	}
}

// TestReadDirFallback lists through pkg/sftp where the server allows no
// session beside the main one.
func TestReadDirFallback(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{MaxSessions: 1})
	end := openEnd(t, srv, false)
	dir := filepath.Join(srv.Root, "d")
	mkEntries(t, dir, 150, func(i int) string { return fmt.Sprint(i) })
	got, err := end.ReadDirContext(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	sameListing(t, dir, got)
	if !end.lister.gone {
		t.Error("the listing session is not marked unavailable")
	}
}

// TestReadDirEndless: a listing that never ends stops at MaxDirEntries
// with an error naming the directory, and once ctx is done at once; the
// session lists other directories afterwards.
func TestReadDirEndless(t *testing.T) {
	testenv.SkipSlow(t)
	const dir = "/endless"
	srv := sshtest.Start(t, sshtest.Options{ListDir: sshtest.EndlessListing(func(p string) bool { return p == dir })})
	end := openEnd(t, srv, false)

	start := time.Now()
	got, err := end.ReadDirContext(context.Background(), dir)
	if !errors.Is(err, ErrTooManyEntries) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("endless listing: %d entries, %v; want ErrTooManyEntries naming %s", len(got), err, dir)
	}
	t.Logf("stopped at the bound after %v", time.Since(start))

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	got, err = end.ReadDirContext(ctx, dir)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("endless listing cancelled after 200ms: %d entries, %v after %v; want the context's error within 1s", len(got), err, took)
	}

	real := filepath.Join(srv.Root, "d")
	mkEntries(t, real, 150, func(i int) string { return fmt.Sprint(i) })
	list, err := end.ReadDirContext(context.Background(), real)
	if err != nil {
		t.Fatal(err)
	}
	sameListing(t, real, list)
}
