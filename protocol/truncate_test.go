package protocol

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// A sparse copy writes a created file at offsets, skipping its zeros, and
// sets the size of one that ends in a hole: the file reads as written,
// zeros after, and the hole takes no disk.
func TestCreatedFileWrittenAtOffsetsAndTruncated(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	for _, withDial := range []bool{true, false} {
		end := openEnd(t, srv, withDial)
		name := filepath.Join(srv.Root, "sparse-"+map[bool]string{true: "pool", false: "first"}[withDial])
		w, err := end.CreateExclusive(name)
		if err != nil {
			t.Fatal(err)
		}
		wa, ok := w.(io.WriterAt)
		if !ok {
			t.Fatalf("CreateExclusive returned a %T, which cannot write at offsets", w)
		}
		data := noise(5000)
		const at, size = 8 << 20, 64 << 20
		if n, err := wa.WriteAt(data, at); err != nil || n != len(data) {
			t.Fatalf("WriteAt: %d, %v", n, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := end.Truncate(name, size); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		copy(want[at:], data)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, not the %d written at %d and zeros", name, len(got), len(data), at)
		}
		fi, _ := os.Stat(name)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 > 1<<20 {
			t.Errorf("%s takes %d bytes of disk for %d of data", name, st.Blocks*512, len(data))
		}
	}
}
