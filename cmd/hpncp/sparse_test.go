package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// mksparse PATH SIZE OFFSET... writes a file of SIZE bytes that holds
// 2 KiB of noise at each OFFSET and holes everywhere else, up to its end.
func cmdMksparse(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: mksparse path size offset...")
	}
	size, err := parseSize(args[1])
	ts.Check(err)
	name := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(filepath.Dir(name), 0o755))
	f, err := os.Create(name)
	ts.Check(err)
	defer f.Close()
	r := rand.NewChaCha8([32]byte{byte(size), byte(size >> 8), byte(size >> 16), byte(size >> 24)})
	for _, a := range args[2:] {
		off, err := parseSize(a)
		ts.Check(err)
		b := make([]byte, 2048)
		r.Read(b)
		_, err = f.WriteAt(b, off)
		ts.Check(err)
	}
	ts.Check(f.Truncate(size))
	if allocated(ts, name) >= size {
		ts.Fatalf("%s has no holes: the file system under $WORK keeps none", name)
	}
}

// bigcmp A B is cmp for files too large to hold in memory: it fails
// unless they have the same bytes (and so the same SHA-256), read a MiB at
// a time.
func cmdBigcmp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: bigcmp a b")
	}
	a, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer a.Close()
	b, err := os.Open(ts.MkAbs(args[1]))
	ts.Check(err)
	defer b.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			ts.Fatalf("%s and %s differ in the MiB from byte %d", args[0], args[1], off)
		}
		off += int64(na)
		if ea != nil || eb != nil {
			if ea != eb && !(isEnd(ea) && isEnd(eb)) {
				ts.Fatalf("compare %s and %s at byte %d: %v, %v", args[0], args[1], off, ea, eb)
			}
			return
		}
	}
}

func isEnd(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

// disk PATH MAX fails if PATH takes more than MAX bytes of disk (its
// blocks); ! disk PATH MAX fails unless it takes more.
func cmdDisk(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: disk path max")
	}
	limit, err := parseSize(args[1])
	ts.Check(err)
	got := allocated(ts, ts.MkAbs(args[0]))
	switch {
	case !neg && got > limit:
		ts.Fatalf("%s takes %d bytes of disk, more than %d", args[0], got, limit)
	case neg && got <= limit:
		ts.Fatalf("%s takes %d bytes of disk, not more than %d", args[0], got, limit)
	}
	ts.Logf("%s takes %d bytes of disk", args[0], got)
}

func allocated(ts *testscript.TestScript, name string) int64 {
	fi, err := os.Stat(name)
	ts.Check(err)
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// punchHoles makes holes in the file name, as the fault trials' sparse
// files have them: runs of every length from a block to a few MiB at
// offsets r draws, a trailing one at times, so that chunks are holes,
// data, or both.
func punchHoles(t *testing.T, r *rand.Rand, name string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	for off := int64(0); off < size; {
		n := min(size-off, 4096*(1+r.Int64N(1024)))
		if r.IntN(3) > 0 {
			if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
				t.Skipf("punch a hole in %s: %v", name, err)
			}
		}
		off += n + 4096*r.Int64N(256)
	}
	if r.IntN(2) == 0 {
		tail := min(size, 1<<20+r.Int64N(4<<20))
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, size-tail, tail); err != nil {
			t.Skipf("punch a hole in %s: %v", name, err)
		}
	}
}
