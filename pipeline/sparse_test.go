package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestDataSpans(t *testing.T) {
	const B = SparseBlock
	data := func(n int) []byte { return bytes.Repeat([]byte{7}, n) }
	zeros := func(n int) []byte { return make([]byte, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name string
		b    []byte
		at   int64
		want []span
	}{
		{"empty", nil, 0, nil},
		{"all zeros", zeros(3 * B), 0, nil},
		{"no zeros is one run", data(3*B + 5), 0, []span{{0, 3*B + 5}}},
		{"data in one block", cat(zeros(B), zeros(10), data(1), zeros(B-11), zeros(B)), 0, []span{{B, B}}},
		{"runs split by a zero block", cat(data(B), zeros(B), data(2*B)), 0, []span{{0, B}, {2 * B, 2 * B}}},
		{"a zero tail shorter than a block is left out", cat(data(B), zeros(100)), 0, []span{{0, B}}},
		{"a block of zeros but for one byte is written", cat(zeros(B-1), data(1)), 0, []span{{0, B}}},
		// At offset 100 the file's blocks end at B-100 in the buffer: the
		// zeros before the data fill the rest of the file's first block.
		{"blocks are the file's, not the buffer's", cat(zeros(B-100), zeros(B), data(1)), 100, []span{{2*B - 100, 1}}},
		{"a file block partly in the buffer", cat(data(1), zeros(2*B)), B - 1, []span{{0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dataSpans(tc.b, tc.at)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("dataSpans = %v, want %v", got, tc.want)
			}
		})
	}
}

// recorder is a file that records every write made to it.
type recorder struct {
	memFile
	wmu    sync.Mutex
	writes [][2]int64 // offset, end
}

func (r *recorder) WriteAt(p []byte, off int64) (int, error) {
	r.wmu.Lock()
	r.writes = append(r.writes, [2]int64{off, off + int64(len(p))})
	r.wmu.Unlock()
	return r.memFile.WriteAt(p, off)
}

// readAs returns what the file reads as once its size is set to size:
// what was written, and zeros after.
func (r *recorder) readAs(size int64) []byte {
	b := make([]byte, size)
	copy(b, r.b)
	return b
}

// sparseSource is 1 MiB and a bit: data in its first block, at 512 KiB,
// and across a block boundary, zeros elsewhere, and a trailing hole.
func sparseSource() (b []byte, dataEnd int64) {
	b = make([]byte, 1<<20+123)
	copy(b, noise(100))
	copy(b[512<<10:], noise(SparseBlock))
	copy(b[700<<10-10:], noise(20))
	return b, 700<<10 + SparseBlock
}

// checkSparse fails t unless no write to dst covered a block of zeros of
// src (blocks aligned in the file) and the file reads as src once its
// size is set.
func checkSparse(t *testing.T, dst *recorder, src []byte) {
	t.Helper()
	for _, w := range dst.writes {
		for b := w[0] / SparseBlock * SparseBlock; b < w[1]; b += SparseBlock {
			block := src[b:min(b+SparseBlock, int64(len(src)))]
			if bytes.Equal(block, make([]byte, len(block))) {
				t.Fatalf("the block of zeros at %d was written (write %d..%d)", b, w[0], w[1])
			}
		}
	}
	if !bytes.Equal(dst.readAs(int64(len(src))), src) {
		t.Fatal("the file does not read as the source")
	}
}

func TestCopySparseLeavesZeroBlocksUnwritten(t *testing.T) {
	src, wantEnd := sparseSource()
	dst := &recorder{}
	var progress int64
	n, dataEnd, err := CopySparse(context.Background(), dst, 0, bytes.NewReader(src),
		Options{BufferSize: 64 << 10, Progress: func(n int) { progress += int64(n) }})
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(src)) || progress != n {
		t.Errorf("copied %d bytes, progress %d, want %d: zeros left out count as copied", n, progress, len(src))
	}
	if dataEnd != wantEnd || int64(len(dst.b)) != dataEnd {
		t.Errorf("dataEnd %d, file holds %d bytes, want %d for both", dataEnd, len(dst.b), wantEnd)
	}
	checkSparse(t, dst, src)
}

func TestCopySparseFromAnOffset(t *testing.T) {
	src, wantEnd := sparseSource()
	const from = 300<<10 + 17 // a resumed copy, not on a block boundary
	dst := &recorder{}
	_, _ = dst.memFile.WriteAt(src[:from], 0)
	n, dataEnd, err := CopySparse(context.Background(), dst, from, bytes.NewReader(src[from:]), Options{BufferSize: 10000})
	if err != nil {
		t.Fatal(err)
	}
	// Buffers not on block boundaries may end inside the last block of
	// data: its zeros past the buffer are left out too.
	const lastByte = 700<<10 + 10
	if n != int64(len(src)-from) || dataEnd < lastByte || dataEnd > wantEnd || int64(len(dst.b)) != dataEnd {
		t.Errorf("copied %d bytes to data end %d, file of %d bytes, want %d to between %d and %d",
			n, dataEnd, len(dst.b), len(src)-from, lastByte, wantEnd)
	}
	checkSparse(t, dst, src)

	// Nothing but zeros after the offset: the file's data ends where the
	// copy started.
	zeros := &recorder{}
	_, dataEnd, err = CopySparse(context.Background(), zeros, from, bytes.NewReader(make([]byte, 5*SparseBlock)), Options{})
	if err != nil || dataEnd != from || len(zeros.writes) != 0 {
		t.Errorf("a copy of zeros: dataEnd %d (want %d), %d writes, err %v", dataEnd, from, len(zeros.writes), err)
	}
}

// shortAt is a file that takes fewer bytes than it is given.
type shortAt struct{}

func (shortAt) WriteAt(p []byte, _ int64) (int, error) { return len(p) - 1, nil }

func TestCopySparseShortWriteIsAnError(t *testing.T) {
	src, _ := sparseSource()
	_, _, err := CopySparse(context.Background(), shortAt{}, 0, bytes.NewReader(src), Options{})
	if !errors.Is(err, ErrShortWrite) {
		t.Fatalf("err = %v, want ErrShortWrite", err)
	}
}

// TestCopySparseFileKeepsHoles copies into a real file, sets its size as
// the copy's caller does, and checks that it reads as the source while
// its holes take no disk.
func TestCopySparseFileKeepsHoles(t *testing.T) {
	src := make([]byte, 64<<20)
	copy(src, noise(SparseBlock))
	copy(src[32<<20:], noise(SparseBlock))
	name := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, dataEnd, err := CopySparse(context.Background(), f, 0, bytes.NewReader(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if dataEnd != 32<<20+SparseBlock {
		t.Fatalf("dataEnd %d", dataEnd)
	}
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("the file does not read as the source")
	}
	fi, _ := f.Stat()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 > 1<<20 {
		t.Errorf("the file takes %d bytes of disk for 8 KiB of data", st.Blocks*512)
	}
}

// holeReads is a source that counts the reads made of it.
type holeReads struct {
	*bytes.Reader
	mu    sync.Mutex
	reads []int64
}

func (h *holeReads) ReadAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	h.reads = append(h.reads, off)
	h.mu.Unlock()
	return h.Reader.ReadAt(p, off)
}

func TestParallelSparse(t *testing.T) {
	src, wantEnd := sparseSource()
	const chunk = 32 << 10
	// The source says where its holes are: everything but the chunks
	// that hold data.
	isData := func(off int64, n int) bool {
		return !bytes.Equal(src[off:off+int64(n)], make([]byte, n))
	}
	for _, tc := range []struct {
		name   string
		hole   func(int64, int) bool
		offset int64
	}{
		{"holes unknown", nil, 0},
		{"holes known", func(off int64, n int) bool { return !isData(off, n) }, 0},
		{"resumed", func(off int64, n int) bool { return !isData(off, n) }, 200<<10 + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := &recorder{}
			_, _ = dst.memFile.WriteAt(src[:tc.offset], 0)
			in := &holeReads{Reader: bytes.NewReader(src)}
			var done atomic.Int64
			var progress atomic.Int64
			open := func(context.Context, int) (*Stream, error) {
				return &Stream{Src: in, Dst: dst, Close: func(bool) error { return nil }}, nil
			}
			res, err := Parallel(context.Background(), open, ParallelOptions{
				Size: int64(len(src)), Offset: tc.offset, Chunk: chunk, Depth: 2, Controller: fixed(3),
				Sparse: true, Hole: tc.hole,
				Progress: func(n int) { progress.Add(int64(n)) },
				Done:     func(_ int64, n int) { done.Add(int64(n)) },
			})
			if err != nil {
				t.Fatal(err)
			}
			want := int64(len(src)) - tc.offset
			if res.Bytes != want || progress.Load() != want || done.Load() != want {
				t.Errorf("copied %d, progress %d, done %d, want %d: holes count as copied",
					res.Bytes, progress.Load(), done.Load(), want)
			}
			if res.DataEnd != wantEnd || int64(len(dst.b)) != wantEnd {
				t.Errorf("DataEnd %d, the file holds %d bytes, want %d", res.DataEnd, len(dst.b), wantEnd)
			}
			checkSparse(t, dst, src)
			if tc.hole != nil {
				sort.Slice(in.reads, func(i, j int) bool { return in.reads[i] < in.reads[j] })
				for _, off := range in.reads {
					if n := int(min(chunk, int64(len(src))-off)); !isData(off, n) {
						t.Errorf("the hole at %d was read (reads %v)", off, in.reads)
					}
				}
			}
		})
	}
}

func TestParallelWithoutSparseWritesZeros(t *testing.T) {
	src, _ := sparseSource()
	dst := &recorder{}
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: bytes.NewReader(src), Dst: dst, Close: func(bool) error { return nil }}, nil
	}
	res, err := Parallel(context.Background(), open, ParallelOptions{
		Size: int64(len(src)), Chunk: 32 << 10, Depth: 2, Controller: fixed(2),
		// A hole map alone changes nothing: only Sparse leaves bytes out.
		Hole: func(int64, int) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.b, src) || res.DataEnd != int64(len(src)) {
		t.Fatalf("without Sparse the whole file is written: %d bytes, DataEnd %d", len(dst.b), res.DataEnd)
	}
}

// oneAtATime is a file that fails a write made while another is under
// way, as a writer not safe for concurrent use might misbehave.
type oneAtATime struct {
	recorder
	busy atomic.Bool
}

func (o *oneAtATime) WriteAt(p []byte, off int64) (int, error) {
	if !o.busy.CompareAndSwap(false, true) {
		return 0, errors.New("two writes at once")
	}
	defer o.busy.Store(false)
	// Long enough for a second write started beside this one to show.
	time.Sleep(time.Millisecond)
	return o.recorder.WriteAt(p, off)
}

// Copy never asked its target to take writes from several goroutines,
// and CopySparse does not either, however many runs a buffer holds.
func TestCopySparseWritesOneAtATime(t *testing.T) {
	src := make([]byte, 1<<20)
	for off := 0; off < len(src); off += 2 * SparseBlock {
		src[off] = 1
	}
	dst := &oneAtATime{}
	if _, _, err := CopySparse(context.Background(), dst, 0, bytes.NewReader(src), Options{}); err != nil {
		t.Fatal(err)
	}
	checkSparse(t, &dst.recorder, src)
}
