package main

import (
	"bytes"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
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
	r := rand.New(rand.NewSource(size))
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
