package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memFile is an in-memory file that grows as it is written at, from
// several goroutines at once (Apply's workers).
type memFile struct {
	mu      sync.Mutex
	b       []byte
	written int64
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written += int64(len(p))
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

func TestBlockSize(t *testing.T) {
	for _, c := range []struct {
		size int64
		want int
	}{
		{0, 700}, {1, 700}, {490000, 700}, {490001, 700}, {1_000_000, 1000},
		{1_000_100, 1000}, {1 << 30, 32768}, {10 << 30, 103616}, {1 << 40, MaxBlock},
	} {
		if got := BlockSize(c.size); got != c.want {
			t.Errorf("BlockSize(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// TestWeak checks weak against its definition, at every length and
// alignment up to a few words.
func TestWeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	data[7], data[8], data[9] = 255, 255, 255
	for from := 0; from < 9; from++ {
		for n := 0; from+n <= len(data); n++ {
			p := data[from : from+n]
			var wa, wb uint32
			for i, c := range p {
				wa += uint32(c)
				wb += uint32(n-i) * uint32(c)
			}
			if a, b := weak(p); a != wa&0xffff || b != wb&0xffff {
				t.Fatalf("weak of %d bytes from %d: %d,%d, want %d,%d", n, from, a, b, wa&0xffff, wb&0xffff)
			}
			if a, b := weakMore(0, 0, p); a&0xffff != wa&0xffff || b&0xffff != wb&0xffff {
				t.Fatalf("weakMore of %d bytes from %d: %d,%d, want %d,%d", n, from, a&0xffff, b&0xffff, wa&0xffff, wb&0xffff)
			}
		}
	}
	all := bytes.Repeat([]byte{255}, 100_000)
	var wa, wb uint32
	for i, c := range all {
		wa += uint32(c)
		wb += uint32(len(all)-i) * uint32(c)
	}
	if a, b := weak(all); a != wa&0xffff || b != wb&0xffff {
		t.Fatalf("weak of 100,000 bytes of 255: %d,%d, want %d,%d", a, b, wa&0xffff, wb&0xffff)
	}
}

// TestWeakVector checks the vector sums against weakMore's, all 32 bits
// of them, over runs of random bytes and of 255s long enough for every
// running total to wrap.
func TestWeakVector(t *testing.T) {
	if !haveWeakVector {
		t.Skip("no vector weak sum on this CPU")
	}
	rng := rand.New(rand.NewPCG(23, 24))
	data := random(rng, 1<<20)
	ff := bytes.Repeat([]byte{255}, 1<<20)
	for _, n := range []int{32, 64, 96, 1024, 32 << 10, 1<<20 - 32, 1 << 20} {
		for _, p := range [][]byte{data[:n], data[len(data)-n:], ff[:n]} {
			a, b := weakVector(p)
			wa, wb := weakMore(0, 0, p)
			if a != wa || b != wb {
				t.Fatalf("%d bytes: vector %#x,%#x, words %#x,%#x", n, a, b, wa, wb)
			}
		}
	}
}

func TestRollMatchesWeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	const n = 731
	a, b := weak(data[:n])
	for i := 0; i+n < len(data); i++ {
		a, b = roll(a, b, n, data[i], data[i+n])
		wa, wb := weak(data[i+1 : i+1+n])
		if a != wa || b != wb {
			t.Fatalf("at %d: rolled %d,%d, computed %d,%d", i+1, a, b, wa, wb)
		}
	}
}

// roundTrip signs basis, diffs next against it and applies the delta,
// and fails unless the result is next.
func roundTrip(t *testing.T, basis, next []byte, blockLen int, o DiffOptions) Stats {
	t.Helper()
	ctx := context.Background()
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), blockLen)
	if err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	if err := WriteSignature(&wire, sig); err != nil {
		t.Fatal(err)
	}
	sig2, err := ReadSignature(&wire, int64(len(basis)))
	if err != nil {
		t.Fatal(err)
	}
	var d bytes.Buffer
	sent, err := Diff(ctx, sig2, bytes.NewReader(next), int64(len(next)), &d, o)
	if err != nil {
		t.Fatal(err)
	}
	out := &memFile{}
	b := Basis{R: bytes.NewReader(basis), Size: int64(len(basis)), BlockLen: sig.BlockLen}
	if o.InPlace {
		// Over the basis itself, as --inplace does.
		out.b = bytes.Clone(basis)
		b.R, b.InPlace = out, true
	}
	h, got, err := Apply(ctx, &d, b, out, int64(len(next)))
	if err != nil {
		t.Fatal(err)
	}
	if o.InPlace {
		out.b = out.b[:h.Size]
		if out.written > got.Literal+got.Matched {
			t.Errorf("wrote %d bytes of a %d-byte file", out.written, h.Size)
		}
		if bytes.Equal(basis, next) && out.written != 0 {
			t.Errorf("wrote %d bytes over an unchanged file", out.written)
		}
	}
	if h.Size != int64(len(next)) || !bytes.Equal(out.b, next) && !(len(out.b) == 0 && len(next) == 0) {
		t.Fatalf("rebuilt %d bytes, not the %d of the new file", len(out.b), len(next))
	}
	if got != sent {
		t.Errorf("receiver counted %+v, sender %+v", got, sent)
	}
	if got.Literal+got.Matched != int64(len(next)) {
		t.Errorf("literal %d + matched %d != %d", got.Literal, got.Matched, len(next))
	}
	return got
}

func random(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	basis := random(rng, 300_000)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(basis)) }
	cases := map[string][]byte{
		"same":       basis,
		"empty":      nil,
		"new":        random(rng, 200_000),
		"append":     append(bytes.Clone(basis), random(rng, 5000)...),
		"truncate":   basis[:123_457],
		"shift":      append([]byte("x"), basis...),
		"front cut":  basis[777:],
		"one byte":   edit(func(b []byte) []byte { b[150_000] ^= 1; return b }),
		"last byte":  edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"insert mid": edit(func(b []byte) []byte { return append(b[:100_000:100_000], append(random(rng, 333), b[100_000:]...)...) }),
		"delete mid": edit(func(b []byte) []byte { return append(b[:100_000:100_000], b[101_500:]...) }),
		"reorder":    append(bytes.Clone(basis[200_000:]), basis[:200_000]...),
		"repeated":   bytes.Repeat(basis[:10_000], 40),
		"small":      []byte("tiny"),
	}
	for name, next := range cases {
		for _, o := range []DiffOptions{{}, {RangeLen: 1, Workers: 3}, {RangeLen: 50_000, Workers: 2},
			{InPlace: true}, {RangeLen: 1, Workers: 3, InPlace: true}, {RangeLen: 50_000, Workers: 2, InPlace: true}} {
			t.Run(fmt.Sprintf("%s/%d/inplace=%v", name, o.RangeLen, o.InPlace), func(t *testing.T) {
				st := roundTrip(t, basis, next, 1000, o)
				if name == "same" && st.Literal != 0 {
					t.Errorf("an unchanged file sent %d literal bytes", st.Literal)
				}
			})
		}
	}
	t.Run("empty basis", func(t *testing.T) {
		st := roundTrip(t, nil, basis[:5000], 0, DiffOptions{})
		if st.Matched != 0 {
			t.Errorf("matched %d bytes of an empty basis", st.Matched)
		}
	})
}

// The block after a run's last one, which a window right after the run
// is checked against first, comes again after literal bytes, where the
// window stops rolling at the end of the buffer and a block is looked
// for anew: the literal bytes before it are sent.
func TestRunGoesOnRightAfterItsLastBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const bl = 1000
	basis := random(rng, 6_000_000)
	// The window stops a block short of the buffer's end, then moves
	// one byte on (diffRange's roll); the buffer holds litChunk, two
	// blocks and 4 MiB.
	q := litChunk + 2*bl + 4<<20 - bl + 1
	p := q - 157_449 // a block boundary, less than litChunk before
	if p%bl != 0 || q-p >= litChunk {
		t.Fatalf("the case's offsets %d and %d are not as meant", p, q)
	}
	next := append(bytes.Clone(basis[:p]), random(rng, q-p)...)
	next = append(next, basis[p:]...)
	st := roundTrip(t, basis, next, bl, DiffOptions{RangeLen: 16 << 20})
	if st.Literal < int64(q-p) {
		t.Errorf("sent %d literal bytes for %d new ones", st.Literal, q-p)
	}
}

// A few scattered changes cost about the changed bytes and a block around
// each, as rsync's do.
func TestScatteredChangesSendLittle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	basis := random(rng, 8<<20)
	next := bytes.Clone(basis)
	const changes, each = 50, 100
	for range changes {
		off := rng.IntN(len(next) - each)
		copy(next[off:], random(rng, each))
	}
	bl := BlockSize(int64(len(basis)))
	st := roundTrip(t, basis, next, 0, DiffOptions{RangeLen: 1 << 20})
	if limit := int64(changes * (each + 2*bl)); st.Literal > limit {
		t.Errorf("sent %d literal bytes for %d changes of %d in blocks of %d (limit %d)", st.Literal, changes, each, bl, limit)
	}
}

// Over the basis in place, a file with a few changes is written only
// where it changed, and a delta made for a fresh file, which may copy a
// block from where a range has written already, is refused.
func TestInPlace(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	basis := random(rng, 4<<20)
	next := bytes.Clone(basis)
	for _, off := range []int{10_000, 1 << 20, 3<<20 + 5} {
		copy(next[off:], random(rng, 100))
	}
	bl := BlockSize(int64(len(basis)))
	st := roundTrip(t, basis, next, 0, DiffOptions{RangeLen: 1 << 20, InPlace: true})
	if st.Literal > int64(3*(100+2*bl)) {
		t.Errorf("sent %d literal bytes for 3 changes of 100", st.Literal)
	}

	// The second half first: a fresh file's delta copies the first half's
	// blocks into the second half, after the first half was written.
	swapped := append(bytes.Clone(basis[len(basis)/2:]), basis[:len(basis)/2]...)
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 0)
	if err != nil {
		t.Fatal(err)
	}
	var d bytes.Buffer
	if _, err := Diff(ctx, sig, bytes.NewReader(swapped), int64(len(swapped)), &d, DiffOptions{RangeLen: int64(len(basis))}); err != nil {
		t.Fatal(err)
	}
	out := &memFile{b: bytes.Clone(basis)}
	_, _, err = Apply(ctx, &d, Basis{R: out, Size: sig.Size, BlockLen: sig.BlockLen, InPlace: true}, out, int64(len(swapped)))
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("a fresh file's delta applied in place: %v, want ErrFormat", err)
	}
	// The same change made for writing in place goes through, sending the
	// half it cannot copy.
	st = roundTrip(t, basis, swapped, 0, DiffOptions{RangeLen: int64(len(basis)), InPlace: true})
	if st.Matched < int64(len(basis)/2)-int64(bl) {
		t.Errorf("matched only %d bytes of a swapped file in place", st.Matched)
	}
}

// Over a clone of the basis (Under), a fresh file's delta rebuilds the
// new file, shifted blocks and all, writing only what is not already at
// its place: a few changes cost their blocks, an insertion what comes
// after it, and a file cut shorter is cut by the caller.
func TestApplyUnder(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	basis := random(rng, 4<<20)
	bl := BlockSize(int64(len(basis)))
	changed := bytes.Clone(basis)
	for _, off := range []int{10_000, 1 << 20, 3<<20 + 5} {
		copy(changed[off:], random(rng, 100))
	}
	inserted := append(append(bytes.Clone(basis[:3<<20]), "inserted"...), basis[3<<20:]...)
	swapped := append(bytes.Clone(basis[len(basis)/2:]), basis[:len(basis)/2]...)
	for _, tc := range []struct {
		name            string
		next            []byte
		maxWritten      int64
		maxLiteralBytes int64
	}{
		{"scattered", changed, int64(3 * 2 * bl), int64(3 * 2 * bl)},
		{"inserted", inserted, 1<<20 + int64(2*bl), int64(2 * bl)},
		{"swapped", swapped, int64(len(basis)), int64(2 * bl)},
		{"cut", basis[:3<<20], 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 0)
			if err != nil {
				t.Fatal(err)
			}
			var d bytes.Buffer
			if _, err := Diff(ctx, sig, bytes.NewReader(tc.next), int64(len(tc.next)), &d, DiffOptions{RangeLen: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			out := &memFile{b: bytes.Clone(basis)}
			h, st, err := Apply(ctx, &d, Basis{R: bytes.NewReader(basis), Size: sig.Size, BlockLen: sig.BlockLen, Under: true}, out, int64(len(tc.next)))
			if err != nil {
				t.Fatal(err)
			}
			out.b = out.b[:min(int64(len(out.b)), h.Size)]
			if !bytes.Equal(out.b, tc.next) {
				t.Fatalf("rebuilt %d bytes, not the new file's %d", len(out.b), len(tc.next))
			}
			if out.written > tc.maxWritten || st.Literal > tc.maxLiteralBytes {
				t.Errorf("wrote %d bytes (at most %d), %d of them literal (at most %d)", out.written, tc.maxWritten, st.Literal, tc.maxLiteralBytes)
			}
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	basis := random(rng, 50_000)
	next := append(bytes.Clone(basis[:20_000]), random(rng, 1000)...)
	next = append(next, basis[20_000:]...)
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 700)
	if err != nil {
		t.Fatal(err)
	}
	var d bytes.Buffer
	if _, err := Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), &d, DiffOptions{RangeLen: 10_000}); err != nil {
		t.Fatal(err)
	}
	good := d.Bytes()
	apply := func(delta, basis []byte, blockLen int, size int64) error {
		_, _, err := Apply(ctx, bytes.NewReader(delta), Basis{R: bytes.NewReader(basis), Size: int64(len(basis)), BlockLen: blockLen}, &memFile{}, size)
		return err
	}
	if err := apply(good, basis, 700, int64(len(next))); err != nil {
		t.Fatalf("the good delta: %v", err)
	}
	changed := bytes.Clone(basis)
	changed[30_000] ^= 0x80
	for name, c := range map[string]struct {
		err  error
		want error
	}{
		"basis changed since signed": {apply(good, changed, 700, -1), ErrMismatch},
		"other block length":         {apply(good, basis, 704, -1), ErrFormat},
		"other basis size":           {apply(good, basis[:49_999], 700, -1), ErrFormat},
		"other size than listed":     {apply(good, basis, 700, int64(len(next))+1), ErrFormat},
		"cut short":                  {apply(good[:len(good)/2], basis, 700, -1), io.ErrUnexpectedEOF},
		"no end":                     {apply(good[:len(good)-1], basis, 700, -1), io.ErrUnexpectedEOF},
		"bad magic":                  {apply(append([]byte("X"), good[1:]...), basis, 700, -1), ErrFormat},
		"range ended twice": {apply(append(bytes.Clone(good[:len(good)-1]),
			append(endRecord(0, RangeSum{}), recDone)...), basis, 700, -1), ErrFormat},
		"block past the basis": {apply(withRecords(good, copyRecord(0, 72, 1)), basis, 700, -1), ErrFormat},
		"zero blocks":          {apply(withRecords(good, copyRecord(0, 0, 0)), basis, 700, -1), ErrFormat},
		"range past the file":  {apply(withRecords(good, copyRecord(999, 0, 1)), basis, 700, -1), ErrFormat},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", name, c.err, c.want)
		}
	}
}

// withRecords puts recs right after good's header.
func withRecords(good []byte, recs ...[]byte) []byte {
	r := bytes.NewReader(good)
	d := decoder{r: r}
	if _, err := d.header(); err != nil {
		panic(err)
	}
	n := len(good) - r.Len()
	out := bytes.Clone(good[:n])
	for _, r := range recs {
		out = append(out, r...)
	}
	return append(out, good[n:]...)
}

func copyRecord(rng, block, count int64) []byte {
	w := recordWriter{flush: func([]byte) error { return nil }}
	w.copyBlocks(rng, block, count)
	return w.p
}

func endRecord(rng int64, sum RangeSum) []byte {
	var p []byte
	w := recordWriter{flush: func(b []byte) error { p = append(p, b...); return nil }}
	w.end(rng, sum)
	return p
}

func TestReadSignatureRefuses(t *testing.T) {
	sig, err := Sign(context.Background(), bytes.NewReader(make([]byte, 5000)), 5000, 700)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	WriteSignature(&b, sig)
	good := b.Bytes()
	for name, c := range map[string]struct {
		p    []byte
		size int64
		want error
	}{
		"other size":  {good, 5001, ErrFormat},
		"cut short":   {good[:len(good)-3], 5000, io.ErrUnexpectedEOF},
		"bad magic":   {append([]byte("Y"), good[1:]...), -1, ErrFormat},
		"tiny blocks": {[]byte{'H', 'D', 'S', '1', 8, 1}, -1, ErrFormat},
	} {
		if _, err := ReadSignature(bytes.NewReader(c.p), c.size); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}

// A basis that ends before the size it was said to have is an error,
// not a signature of fewer bytes.
func TestSignShortBasis(t *testing.T) {
	if _, err := Sign(context.Background(), bytes.NewReader(make([]byte, 3000)), 4000, 700); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v", err)
	}
}

func BenchmarkDiffUnchanged(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	basis := random(rng, 64<<20)
	sig, err := Sign(context.Background(), bytes.NewReader(basis), int64(len(basis)), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(basis)))
	for b.Loop() {
		if _, err := Diff(context.Background(), sig, bytes.NewReader(basis), int64(len(basis)), io.Discard, DiffOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiffNew(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	basis := random(rng, 16<<20)
	next := random(rng, 16<<20)
	sig, err := Sign(context.Background(), bytes.NewReader(basis), int64(len(basis)), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(next)))
	for b.Loop() {
		if _, err := Diff(context.Background(), sig, bytes.NewReader(next), int64(len(next)), io.Discard, DiffOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	basis := random(rng, 64<<20)
	b.SetBytes(int64(len(basis)))
	for b.Loop() {
		if _, err := Sign(context.Background(), bytes.NewReader(basis), int64(len(basis)), 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWeak(b *testing.B) {
	p := random(rand.New(rand.NewPCG(15, 16)), 32768)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		weak(p)
	}
}

// notifyWriter closes first once more than skip bytes were written.
type notifyWriter struct {
	bytes.Buffer
	skip  int
	first chan struct{}
	once  sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if w.Len() > w.skip {
		w.once.Do(func() { close(w.first) })
	}
	return n, err
}

// halfSent streams sig to a SignatureReader, its second half held back
// until released is closed (then waited says nil) or wait has passed
// (then waited says so, as missing), and reads it; read says how the
// reading ended.
func halfSent(t *testing.T, sig *Signature, released <-chan struct{}, wait time.Duration, missing string) (sr *SignatureReader, waited, read <-chan error) {
	t.Helper()
	var wire bytes.Buffer
	WriteSignature(&wire, sig)
	all := wire.Bytes()
	pr, pw := io.Pipe()
	held := make(chan error, 1)
	go func() {
		half := len(all) / 2
		pw.Write(all[:half])
		select {
		case <-released:
			held <- nil
		case <-time.After(wait):
			held <- errors.New(missing)
		}
		pw.Write(all[half:])
		pw.Close()
	}()
	r, err := NewSignatureReader(pr, sig.Size)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.Read(); done <- err }()
	return r, held, done
}

// A delta made in place diffs a range as soon as its blocks of the
// signature are there: the first range's records are out before the
// signature's second half is sent, and the result is the new file.
func TestInPlaceStreamedSignature(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	basis := random(rng, 2<<20)
	next := bytes.Clone(basis)
	copy(next[100_000:], "near the start")
	copy(next[1_900_000:], "near the end")
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := &notifyWriter{skip: 64, first: make(chan struct{})}
	sr, waited, read := halfSent(t, sig, out.first, 30*time.Second, "no record with half the signature sent")
	_, err = Diff(ctx, sr.Header(), bytes.NewReader(next), int64(len(next)), out,
		DiffOptions{RangeLen: 256 << 10, Workers: 1, InPlace: true, Blocks: sr.Wait})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	f := &memFile{b: bytes.Clone(basis)}
	h, st, err := Apply(ctx, &out.Buffer, Basis{R: f, Size: sig.Size, BlockLen: sig.BlockLen, InPlace: true}, f, int64(len(next)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.b[:h.Size], next) {
		t.Fatal("rebuilt in place from a streamed signature: not the new file")
	}
	if st.Literal > 4*int64(sig.BlockLen) {
		t.Errorf("sent %d literal bytes for two small changes", st.Literal)
	}
}

// A fresh file's delta made as the signature streams in (Blocks without
// InPlace): a range goes out against the blocks near it before the whole
// signature is there; what moved farther than a range is still found,
// the range diffed again once the signature is whole; and the delta
// sends about what one made from the whole signature sends.
func TestFreshStreamedSignature(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 14))
	basis := random(rng, 4<<20)
	scattered := bytes.Clone(basis)
	for _, off := range []int{100_000, 1_500_000, 3_900_000} {
		copy(scattered[off:], "changed")
	}
	inserted := append(append(bytes.Clone(basis[:1<<20]), random(rng, 5000)...), basis[1<<20:]...)
	moved := append(bytes.Clone(basis[3<<20:]), basis[:3<<20]...) // the last MiB first: far
	fresh := random(rng, 3<<20)
	for _, tc := range []struct {
		name  string
		next  []byte
		early bool // a record goes out with half the signature sent
	}{
		{"scattered", scattered, true},
		{"inserted", inserted, true},
		{"moved", moved, false},
		{"fresh", fresh, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 0)
			if err != nil {
				t.Fatal(err)
			}
			var whole bytes.Buffer
			want, err := Diff(ctx, sig, bytes.NewReader(tc.next), int64(len(tc.next)), &whole, DiffOptions{RangeLen: 256 << 10})
			if err != nil {
				t.Fatal(err)
			}
			out := &notifyWriter{skip: 64, first: make(chan struct{})}
			sr, waited, read := halfSent(t, sig, out.first, map[bool]time.Duration{true: 30 * time.Second, false: 200 * time.Millisecond}[tc.early], "no record with half the signature sent")
			_, err = Diff(ctx, sr.Header(), bytes.NewReader(tc.next), int64(len(tc.next)), out,
				DiffOptions{RangeLen: 256 << 10, Workers: 1, Blocks: sr.Wait})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-read; err != nil {
				t.Fatal(err)
			}
			if err := <-waited; tc.early && err != nil {
				t.Fatal(err)
			}
			f := &memFile{}
			h, st, err := Apply(ctx, &out.Buffer, Basis{R: bytes.NewReader(basis), Size: sig.Size, BlockLen: sig.BlockLen}, f, int64(len(tc.next)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.b[:h.Size], tc.next) {
				t.Fatal("rebuilt from a streamed signature: not the new file")
			}
			if st.Literal > want.Literal+int64(4*sig.BlockLen) {
				t.Errorf("sent %d literal bytes; from the whole signature, %d", st.Literal, want.Literal)
			}
		})
	}
}

// recordsWriter keeps the delta written to it, closes seen once a
// record when says yes to has been written, and counts the bytes of each
// kind of record (an 'S' record's those it takes).
type recordsWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	when  func(record) bool
	seen  chan struct{}
	once  sync.Once
	bytes map[byte]int64
}

func watch(when func(record) bool) *recordsWriter {
	return &recordsWriter{when: when, seen: make(chan struct{})}
}

func (w *recordsWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	d := decoder{r: asByteReader(bytes.NewReader(w.b.Bytes()))}
	if _, err := d.header(); err != nil {
		return len(p), nil
	}
	w.bytes = map[byte]int64{}
	for {
		rec, err := d.next()
		if err != nil || rec.kind == recDone {
			return len(p), nil
		}
		w.bytes[rec.kind] += int64(len(rec.data))
		if rec.kind == recSent {
			w.bytes[rec.kind] += rec.a
		}
		if w.when(rec) {
			w.once.Do(func() { close(w.seen) })
		}
	}
}

// rebuildHalfSent diffs next against basis's signature as it streams in,
// its second half held back until a record when says yes to is written
// (missing says what failed where none is), applies the delta, fails
// unless it rebuilt next, and returns the apply's counts and the delta.
func rebuildHalfSent(t *testing.T, basis, next []byte, when func(record) bool, missing string, o DiffOptions) (Stats, *recordsWriter) {
	t.Helper()
	ctx := context.Background()
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := watch(when)
	sr, held, read := halfSent(t, sig, out.seen, 30*time.Second, missing)
	o.Blocks = sr.Wait
	if _, err := Diff(ctx, sr.Header(), bytes.NewReader(next), int64(len(next)), out, o); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	f := &memFile{}
	h, st, err := Apply(ctx, &out.b, Basis{R: bytes.NewReader(basis), Size: sig.Size, BlockLen: sig.BlockLen}, f, int64(len(next)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.b[:h.Size], next) {
		t.Fatal("rebuilt from a streamed signature: not the new file")
	}
	return st, out
}

// A range that must wait for the whole signature (most of it new) is put
// off, and holds no worker meanwhile: with one worker, the ranges after
// it are diffed and sent while the signature's second half is held back,
// which it is until they are.
func TestPutOffRangeHoldsNoWorker(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	basis := random(rng, 4<<20)
	next := bytes.Clone(basis)
	copy(next[256<<10:], random(rng, 200<<10)) // range 1 mostly new
	st, _ := rebuildHalfSent(t, basis, next, func(r record) bool { return r.kind == recEnd && r.rng > 2 },
		"no range after the one put off was sent with half the signature there", DiffOptions{RangeLen: 256 << 10, Workers: 1})
	if st.Literal > 200<<10+2*32<<10 {
		t.Errorf("sent %d literal bytes for 200 KiB changed", st.Literal)
	}
}

// A range put off sends its new bytes ahead (DiffOptions.Ahead) while the
// signature is still on its way: they are out before its second half is
// sent, the range's records then take them ('S') rather than send them
// again, and the file is rebuilt. What it matched farther away is still
// found, and the bytes sent ahead for it are then not written.
func TestSentAhead(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	basis := random(rng, 4<<20)
	next := bytes.Clone(basis)
	copy(next[256<<10:], random(rng, 200<<10)) // range 1 mostly new
	moved := append(bytes.Clone(basis[3<<20:]), basis[:3<<20]...)
	region := bytes.Clone(basis)
	copy(region[5000:], random(rng, 450<<10)) // more than a record's
	for _, tc := range []struct {
		name         string
		next         []byte
		rangeLen     int64
		aheadTo      int64 // the signature's second half waits for bytes sent ahead up to here (in range 0 or 1)
		maxLit, maxL int64 // literal bytes in all, and in 'L' records
		wantSent     bool
	}{
		{"new", next, 256 << 10, 200 << 10, 200<<10 + 2*32<<10, 2 * 32 << 10, true},
		{"region", region, 512 << 10, 5000 + 450<<10 - 32<<10, 450<<10 + 2*32<<10, 2 * 32 << 10, true},
		{"moved", moved, 256 << 10, 1, MaxAhead, 4 * 32 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The sending ahead stops once the signature is whole: its
			// second half waits for the bytes sent ahead.
			sentTo := func(r record) bool { return r.kind == recAhead && r.a+int64(len(r.data)) >= tc.aheadTo }
			st, out := rebuildHalfSent(t, basis, tc.next, sentTo,
				"nothing sent ahead with half the signature there", DiffOptions{RangeLen: tc.rangeLen, Workers: 1, Ahead: true})
			if st.Literal > tc.maxLit || out.bytes[recLiteral] > tc.maxL {
				t.Errorf("%d literal bytes, %d of them in 'L' records", st.Literal, out.bytes[recLiteral])
			}
			if st.Literal != out.bytes[recLiteral]+out.bytes[recAhead] {
				t.Errorf("literal %d, sent %d in 'L' and %d ahead", st.Literal, out.bytes[recLiteral], out.bytes[recAhead])
			}
			if got := out.bytes[recSent] > 0; got != tc.wantSent {
				t.Errorf("%d bytes taken from those sent ahead", out.bytes[recSent])
			}
		})
	}
}

// Bytes sent ahead are refused where they could write what no range
// says: in place, after their range began, out of order, past the
// range, more than MaxAhead; so is an 'S' for bytes not sent ahead.
func TestAheadRefused(t *testing.T) {
	ctx := context.Background()
	basis := random(rand.New(rand.NewPCG(25, 26)), 700)
	h := Header{Size: 64 << 20, BlockLen: 700, BasisSize: 700, RangeLen: 8 << 20}
	apply := func(inPlace bool, recs ...[]byte) error {
		p := appendHeader(nil, h)
		for _, r := range recs {
			p = append(p, r...)
		}
		p = append(p, recDone)
		f := &memFile{b: bytes.Clone(basis)}
		_, _, err := Apply(ctx, bytes.NewReader(p), Basis{R: f, Size: 700, BlockLen: 700, InPlace: inPlace}, f, -1)
		return err
	}
	mib := make([]byte, 1<<20)
	var tooMuch [][]byte
	for i := range MaxAhead/len(mib) + 1 {
		tooMuch = append(tooMuch, appendAhead(nil, int64(i/8), int64(i%8)<<20, mib))
	}
	for name, err := range map[string]error{
		"in place":               apply(true, appendAhead(nil, 0, 0, mib[:10])),
		"after its start":        apply(false, copyRecord(0, 0, 1), appendAhead(nil, 0, 700, mib[:10])),
		"after its end":          apply(false, copyRecord(7, 0, 1), appendAhead(nil, 7, 0, mib[:10])),
		"out of order":           apply(false, appendAhead(nil, 0, 100, mib[:10]), appendAhead(nil, 0, 50, mib[:10])),
		"overlapping":            apply(false, appendAhead(nil, 0, 100, mib[:10]), appendAhead(nil, 0, 105, mib[:10])),
		"past the range":         apply(false, appendAhead(nil, 0, 8<<20-5, mib[:10])),
		"empty":                  apply(false, appendAhead(nil, 0, 0, nil)),
		"past the file":          apply(false, appendAhead(nil, 8, 0, mib[:10])),
		"more than allowed":      apply(false, tooMuch...),
		"sent, none ahead":       apply(false, sentRecord(0, 10)),
		"sent, more than ahead":  apply(false, appendAhead(nil, 0, 0, mib[:10]), sentRecord(0, 11)),
		"sent, over a gap":       apply(false, appendAhead(nil, 0, 0, mib[:10]), appendAhead(nil, 0, 11, mib[:10]), sentRecord(0, 21)),
		"sent, not at its place": apply(false, appendAhead(nil, 0, 10, mib[:10]), sentRecord(0, 10)),
	} {
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want %v", name, err, ErrFormat)
		}
	}
}

func sentRecord(rng, n int64) []byte {
	w := recordWriter{flush: func([]byte) error { return nil }}
	w.sent(rng, n)
	return w.p
}

// A delta diffed in shares, each apart, rebuilds the file from all of
// them read at once, in place or not; a share that brings another's
// range, leaves one of its own out, or whose header differs, is refused.
func TestShares(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	basis := random(rng, 400_000)
	next := bytes.Clone(basis)
	copy(next[120_000:], random(rng, 60_000))
	next = append(next[:300_000:300_000], append(random(rng, 777), next[300_000:]...)...)
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	diff := func(o DiffOptions) ([]byte, Stats) {
		var d bytes.Buffer
		st, err := Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), &d, o)
		if err != nil {
			t.Fatal(err)
		}
		return d.Bytes(), st
	}
	apply := func(ds [][]byte, inPlace bool) (*memFile, Stats, error) {
		out := &memFile{}
		b := Basis{R: bytes.NewReader(basis), Size: int64(len(basis)), BlockLen: 1000}
		if inPlace {
			out.b = bytes.Clone(basis)
			b.R, b.InPlace = out, true
		}
		rs := make([]io.Reader, len(ds))
		for i, d := range ds {
			rs[i] = bytes.NewReader(d)
		}
		h, st, err := ApplyShares(ctx, rs, b, out, int64(len(next)))
		if err == nil && inPlace {
			out.b = out.b[:h.Size]
		}
		return out, st, err
	}
	for _, inPlace := range []bool{false, true} {
		for _, n := range []int{2, 3, 7} {
			t.Run(fmt.Sprintf("%d/inplace=%v", n, inPlace), func(t *testing.T) {
				ds := make([][]byte, n)
				var sent Stats
				for i := range n {
					d, st := diff(DiffOptions{RangeLen: 50_000, InPlace: inPlace, Share: Share{N: n, I: i}})
					ds[i] = d
					sent.Add(st)
				}
				out, got, err := apply(ds, inPlace)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.b, next) {
					t.Fatal("rebuilt another file")
				}
				if got != sent || got.Literal+got.Matched != int64(len(next)) {
					t.Errorf("receiver counted %+v, senders %+v", got, sent)
				}
			})
		}
	}
	a, _ := diff(DiffOptions{RangeLen: 50_000, Share: Share{N: 2, I: 0}})
	b, _ := diff(DiffOptions{RangeLen: 50_000, Share: Share{N: 2, I: 1}})
	whole, _ := diff(DiffOptions{RangeLen: 50_000})
	other, _ := diff(DiffOptions{RangeLen: 60_000, Share: Share{N: 2, I: 1}})
	// The second share's header and end, its ranges left out.
	r := bytes.NewReader(b)
	(&decoder{r: r}).header()
	bEmpty := append(bytes.Clone(b[:len(b)-r.Len()]), recDone)
	for name, ds := range map[string][][]byte{
		"another share's range": {withRecords(a, copyRecord(1, 0, 1)), b},
		"a range left out":      {a, bEmpty},
		"whole and a share":     {whole, b},
		"headers differ":        {a, other},
		"shares swapped":        {b, a},
	} {
		if _, _, err := apply(ds, false); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want %v", name, err, ErrFormat)
		}
	}
	if _, err := Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), io.Discard, DiffOptions{Share: Share{N: 2, I: 2}}); err == nil {
		t.Error("Diff took share 2 of 2")
	}
}

// A signature log gives each copy all of the signature from its start,
// however late it begins; the signing waits for the copies, and fails
// once every copy begun has failed.
func TestSignatureLog(t *testing.T) {
	ctx := context.Background()
	basis := random(rand.New(rand.NewPCG(13, 14)), 3<<20)
	var want bytes.Buffer
	if err := SignTo(ctx, bytes.NewReader(basis), int64(len(basis)), 700, &want); err != nil {
		t.Fatal(err)
	}
	var signs atomic.Int32
	l := SignLog(func(w io.Writer) error {
		signs.Add(1)
		return SignTo(ctx, bytes.NewReader(basis), int64(len(basis)), 700, w)
	})
	if signs.Load() != 0 {
		t.Fatal("signed before a copy began")
	}
	var early bytes.Buffer
	if err := l.CopyTo(&early); err != nil || l.Err() != nil {
		t.Fatal(err, l.Err())
	}
	var late bytes.Buffer
	if err := l.CopyTo(&late); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(early.Bytes(), want.Bytes()) || !bytes.Equal(late.Bytes(), want.Bytes()) || signs.Load() != 1 {
		t.Errorf("a copy is not the signature, or it was signed %d times", signs.Load())
	}

	// Unused, nothing is signed, and the log ends.
	unused := SignLog(func(io.Writer) error { t.Error("an unused log signed"); return nil })
	unused.Unused()
	if err := unused.Err(); err != nil {
		t.Errorf("an unused log's signing: %v", err)
	}

	// Every copy fails: the signing stops rather than read the rest.
	big := NewSignatureLog()
	gone := errors.New("channel gone")
	go func() { big.CopyTo(&failAfter{n: 1 << 20, err: gone}) }()
	for begun := false; !begun; time.Sleep(time.Millisecond) {
		big.mu.Lock()
		begun = big.begun
		big.mu.Unlock()
	}
	var wrote int
	var err error
	for wrote < 64<<20 && err == nil {
		var n int
		n, err = big.Write(make([]byte, 64<<10))
		wrote += n
	}
	if !errors.Is(err, errNoCopies) || wrote > 8<<20 {
		t.Errorf("signing with every copy failed: wrote %d bytes, %v", wrote, err)
	}
}

// failAfter takes n bytes in all, and fails the write past them with
// err.
type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	f.n -= len(p)
	return len(p), nil
}

// A delta gathered from its shares is applied once all have come; where
// the context ends first, none is, and each share that came is told.
func TestGather(t *testing.T) {
	ctx := context.Background()
	basis := random(rand.New(rand.NewPCG(15, 16)), 100_000)
	next := append(bytes.Clone(basis[:40_000]), basis[41_000:]...)
	sig, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	b := Basis{R: bytes.NewReader(basis), Size: int64(len(basis)), BlockLen: 1000}
	out := &memFile{}
	g := Gather(ctx, 2, b, out, int64(len(next)))
	var wg sync.WaitGroup
	for i := range 2 {
		var d bytes.Buffer
		if _, err := Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), &d, DiffOptions{RangeLen: 30_000, Share: Share{N: 2, I: i}}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := g.Apply(i)(&d); err != nil {
				t.Errorf("share %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if st, err := g.Wait(); err != nil || !bytes.Equal(out.b, next) || st.Literal+st.Matched != int64(len(next)) {
		t.Fatalf("gathered: %v, %+v", err, st)
	}

	cctx, cancel := context.WithCancelCause(ctx)
	stop := errors.New("a share's request failed")
	g = Gather(cctx, 2, b, &memFile{}, int64(len(next)))
	came := make(chan error)
	go func() { came <- g.Apply(0)(bytes.NewReader(nil)) }()
	cancel(stop)
	if err := <-came; !errors.Is(err, stop) {
		t.Errorf("the share that came: %v, want %v", err, stop)
	}
	if _, err := g.Wait(); !errors.Is(err, stop) {
		t.Errorf("gathered after the context ended: %v", err)
	}
}
