//go:build linux

package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/window"
)

// writeSparse writes a file of size bytes that holds n bytes of noise at
// each of offs and holes elsewhere, a trailing one included.
func writeSparseFile(t *testing.T, name string, size int64, n int, offs ...int64) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewSource(size))
	for _, off := range offs {
		b := make([]byte, n)
		r.Read(b)
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); !hasHoles(fi) {
		t.Skipf("%s has no holes: the file system keeps none", name)
	}
}

func diskOf(t *testing.T, name string) int64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

func sumOf(t *testing.T, name string) [32]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// sameSparse fails t unless dst reads as src and takes at most limit
// bytes of disk.
func sameSparse(t *testing.T, src, dst string, limit int64) {
	t.Helper()
	if sumOf(t, src) != sumOf(t, dst) {
		t.Fatalf("%s does not read as %s", dst, src)
	}
	if d := diskOf(t, dst); d > limit {
		t.Errorf("%s takes %d bytes of disk, want at most %d", dst, d, limit)
	}
}

func sparseParallel() ParallelOptions {
	return ParallelOptions{MinSize: 1 << 20, Chunk: 256 << 10,
		Controller: func() *window.Controller { return window.New(window.Config{Fixed: 3}) }}
}

func TestSparseCopyKeepsHoles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	const size = 96 << 20
	writeSparseFile(t, src, size, 2048, 0, 48<<20-1000)
	for _, tc := range []struct {
		name     string
		parallel bool
		remote   bool // the target takes the parallel path, as a remote's
		verify   bool
	}{
		{"stream", false, false, false},
		{"stream verify", false, false, true},
		{"parallel", true, true, false},
		{"parallel verify", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			o := Options{Sparse: true, Verify: tc.verify}
			if tc.parallel {
				o.Parallel = sparseParallel()
			}
			res, err := Copy(context.Background(), []Endpoint{local(src)}, dstEnd(dst, tc.remote), o)
			if err != nil || len(res.Errors) > 0 {
				t.Fatalf("copy: %v %v", err, res.Errors)
			}
			sameSparse(t, src, dst, 1<<20)
			if res.Bytes != size {
				t.Errorf("reported %d bytes copied, want the file's %d", res.Bytes, size)
			}
		})
	}
	// Without --sparse the zeros are written: what the checks above
	// would see of a copy that ignored the option.
	t.Run("dense", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "dst")
		if _, err := Copy(context.Background(), []Endpoint{local(src)}, local(dst), Options{}); err != nil {
			t.Fatal(err)
		}
		if d := diskOf(t, dst); d < size {
			t.Errorf("a copy without --sparse takes %d bytes of disk, want the file's %d", d, size)
		}
	})
}

// A source whose holes cannot be seen (a remote's) is read whole, and its
// zeros left unwritten all the same.
func TestSparseCopyFromUnseenHoles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	writeSparseFile(t, src, 40<<20, 4096, 8<<20)
	for _, parallel := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "dst")
		o := Options{Sparse: true}
		if parallel {
			o.Parallel = sparseParallel()
		}
		res, err := Copy(context.Background(), []Endpoint{{pseudoRemote{}, src}}, local(dst), o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("copy: %v %v", err, res.Errors)
		}
		sameSparse(t, src, dst, 1<<20)
	}
}

// An interrupted sparse copy counts the zeros it left out as written: its
// temporary file may end before the watermark. A resumed run, sparse or
// not, continues it, and one resumed sparse from a run that was not cuts
// the file back to the watermark, so that what it leaves out reads as
// zeros.
func TestSparseResume(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second bool // --sparse in the interrupted and the resumed run
	}{
		{"sparse then sparse", true, true},
		{"sparse then dense", true, false},
		{"dense then sparse", false, true},
	} {
		for _, parallel := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: " sequential", true: " parallel"}[parallel], func(t *testing.T) {
				src, dst, o := resumeSetup(t, parallel)
				// resumeSize bytes: a block of data every 640 KiB, the last
				// MiB a hole.
				var offs []int64
				for off := int64(0); off < resumeSize-1<<20; off += 640 << 10 {
					offs = append(offs, off)
				}
				writeSparseFile(t, src, resumeSize, 4096, offs...)
				o.Sparse = tc.first
				tmp := interrupt(t, src, dst, o, parallel)
				if ti, _ := os.Stat(tmp); tc.first && ti.Size() >= resumeSize {
					t.Fatalf("the interrupted sparse copy's file has %d bytes: its tail was written", ti.Size())
				}
				o.Sparse = tc.second
				res := resumeCopy(t, src, dst, o, parallel)
				if res.Resumed == 0 {
					t.Errorf("the copy started over")
				}
				if tc.first && tc.second {
					sameSparse(t, src, dst, 1<<20)
				}
			})
		}
	}
}

// A resumed sparse copy over a temporary file whose bytes past the
// watermark are not the source's (a run that was not sparse may have
// written them) must not leave them: the file is cut back first.
func TestSparseResumeCutsBytesPastWatermark(t *testing.T) {
	src, dst, o := resumeSetup(t, false)
	writeSparseFile(t, src, resumeSize, 4096, 0, 1<<20)
	o.Sparse = true
	tmp := interrupt(t, src, dst, o, false)
	// Garbage past the watermark, where the source has zeros.
	f, err := os.OpenFile(tmp, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xAA}, 64<<10), resumeSize-100<<10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	res := resumeCopy(t, src, dst, o, false)
	if res.Resumed == 0 {
		t.Errorf("the copy started over")
	}
}

func TestFinishSparse(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, bytes.Repeat([]byte{1}, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file must hold what was written before its size is set: a
	// lost tail would otherwise read as zeros.
	err := finishSparse(Local{}, name, 200, 1000)
	if !errors.Is(err, pipeline.ErrShortWrite) {
		t.Fatalf("finishSparse over a short file: %v, want ErrShortWrite", err)
	}
	if fi, _ := os.Stat(name); fi.Size() != 100 {
		t.Fatalf("a short file got size %d", fi.Size())
	}
	if err := finishSparse(Local{}, name, 100, 1000); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(name)
	if want := append(bytes.Repeat([]byte{1}, 100), make([]byte, 900)...); !bytes.Equal(got, want) {
		t.Fatalf("the file reads as %d bytes, not the 100 written and 900 zeros", len(got))
	}
}

func TestHoleReader(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	writeSparseFile(t, name, 10<<20, 5000, 0, 3<<20+7, 9<<20)
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 1, 3 << 20, 10<<20 - 1, 10 << 20} {
		r, err := openHoleReader(name, from)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, want[from:]) {
			t.Errorf("from %d: read %d bytes (%v), want the file's %d", from, len(got), err, len(want)-int(from))
		}
	}
	h := openHoles(name)
	defer h.close()
	for _, tc := range []struct {
		off  int64
		n    int
		hole bool
	}{
		{0, 4096, false},
		{1 << 20, 1 << 20, true},
		{3 << 20, 1 << 20, false},
		{10<<20 - 4096, 4096, true},
		// Past the end is no hole: the read must find the file short.
		{10<<20 - 4096, 8192, false},
	} {
		if got := h.hole(tc.off, tc.n); got != tc.hole {
			t.Errorf("hole(%d, %d) = %v, want %v", tc.off, tc.n, got, tc.hole)
		}
	}
}

// Tar writes every byte of its members: with --sparse a local file with
// holes goes by the pipeline beside the tar streams, which keeps them.
func TestSparseTarSendsFilesWithHolesBeside(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		base := t.TempDir()
		src := filepath.Join(base, "src", "tree")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			write(t, filepath.Join(src, fmt.Sprint("small", i)), "x")
		}
		writeSparseFile(t, filepath.Join(src, "holes"), 900<<10, 100, 0)
		target := filepath.Join(base, "dst")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		fake := &countingTar{}
		o := Options{Recursive: true, Sparse: sparse, Tar: TarOptions{Mode: TarForce, MaxSize: 1 << 20}, Logf: t.Logf}
		res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{FS: fake, Path: target}, o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("sparse %v: %v %v", sparse, err, res.Errors)
		}
		if fake.streams.Load() == 0 || res.Files != 5 {
			t.Fatalf("sparse %v: %d tar streams, %d files copied, want some and 5", sparse, fake.streams.Load(), res.Files)
		}
		dst := filepath.Join(target, "tree", "holes")
		if sumOf(t, dst) != sumOf(t, filepath.Join(src, "holes")) {
			t.Fatalf("sparse %v: %s does not read as its source", sparse, dst)
		}
		if d := diskOf(t, dst); sparse && d > 64<<10 || !sparse && d < 900<<10 {
			t.Errorf("sparse %v: %s takes %d bytes of disk for 100 bytes of data in 900 KiB", sparse, dst, d)
		}
	}
}
