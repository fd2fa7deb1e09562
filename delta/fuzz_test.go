package delta

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

// fuzzBasis is the basis every fuzzed delta is applied to: three blocks
// and a short one.
var fuzzBasis = func() []byte {
	p := make([]byte, 3*700+300)
	for i := range p {
		p[i] = byte(i * 7)
	}
	return p
}()

// boundedFile records where it was written, refusing writes past limit.
type boundedFile struct {
	memFile
	limit int64
	t     *testing.T
}

func (b *boundedFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > b.limit {
		// Errorf: Apply's workers write, not the test's goroutine.
		b.t.Errorf("write of %d bytes at %d, past the new file's %d", len(p), off, b.limit)
		return 0, io.ErrShortWrite
	}
	return b.memFile.WriteAt(p, off)
}

// FuzzApply: whatever a delta's bytes, Apply ends without panicking,
// writes only inside the size its header gives, and succeeds only with
// every range written and hashing to the sum its end record carries.
func FuzzApply(f *testing.F) {
	ctx := context.Background()
	sig, err := Sign(ctx, bytes.NewReader(fuzzBasis), int64(len(fuzzBasis)), 700)
	if err != nil {
		f.Fatal(err)
	}
	addDeltas(f, sig, false, fuzzBasis, nil,
		append([]byte("front"), fuzzBasis[1000:]...),
		append(bytes.Clone(fuzzBasis[:1400]), "tail"...))
	f.Add(aheadDelta(append([]byte("front"), fuzzBasis[1000:]...), 700))
	f.Fuzz(func(t *testing.T, p []byte) { fuzzApply(t, [][]byte{p}, false) })
}

// FuzzApplyInPlace is FuzzApply over the basis itself (--inplace): the
// same bounds, and a delta that copies a block a write may have changed
// already is refused (the sums would catch it; the check says which).
func FuzzApplyInPlace(f *testing.F) {
	ctx := context.Background()
	sig, err := Sign(ctx, bytes.NewReader(fuzzBasis), int64(len(fuzzBasis)), 700)
	if err != nil {
		f.Fatal(err)
	}
	addDeltas(f, sig, true, fuzzBasis,
		append([]byte("front"), fuzzBasis[1000:]...),
		append(bytes.Clone(fuzzBasis[1400:]), fuzzBasis[:1400]...))
	f.Fuzz(func(t *testing.T, p []byte) { fuzzApply(t, [][]byte{p}, true) })
}

// FuzzApplyShares is FuzzApply of a delta in two shares, read at once:
// whatever their bytes, the same bounds, and success only with every
// range of the file written, by the share it is of, and hashing to its
// sum.
func FuzzApplyShares(f *testing.F) {
	ctx := context.Background()
	sig, err := Sign(ctx, bytes.NewReader(fuzzBasis), int64(len(fuzzBasis)), 700)
	if err != nil {
		f.Fatal(err)
	}
	for _, next := range [][]byte{fuzzBasis, append([]byte("front"), fuzzBasis[1000:]...),
		append(bytes.Clone(fuzzBasis[:1400]), "tail"...)} {
		var d [2]bytes.Buffer
		for i := range d {
			o := DiffOptions{RangeLen: 1000, Workers: 2, Share: Share{N: 2, I: i}}
			if _, err := Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), &d[i], o); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(d[0].Bytes(), d[1].Bytes())
	}
	f.Fuzz(func(t *testing.T, a, b []byte) { fuzzApply(t, [][]byte{a, b}, false) })
}

// aheadDelta is a delta of next, in ranges of 1000 bytes, against a
// basis in blocks of blockLen, that sends every range's bytes ahead
// ('A', in two records where there are two or more bytes) and then
// takes them ('S').
func aheadDelta(next []byte, blockLen int) []byte {
	h := Header{Size: int64(len(next)), BlockLen: blockLen, BasisSize: int64(len(fuzzBasis)), RangeLen: 1000}
	p := appendHeader(nil, h)
	for r := int64(0); r < h.Ranges(); r++ {
		b := next[r*1000 : min(r*1000+1000, int64(len(next)))]
		half := len(b) / 2
		if half > 0 {
			p = appendAhead(p, r, 0, b[:half])
		}
		p = appendAhead(p, r, int64(half), b[half:])
	}
	w := recordWriter{flush: func(b []byte) error { p = append(p, b...); return nil }}
	for r := int64(0); r < h.Ranges(); r++ {
		b := next[r*1000 : min(r*1000+1000, int64(len(next)))]
		w.sent(r, int64(len(b)))
		w.end(r, xxh3.Hash128(b).Bytes())
	}
	return append(p, recDone)
}

// addDeltas adds to f's corpus the deltas of nexts against sig.
func addDeltas(f *testing.F, sig *Signature, inPlace bool, nexts ...[]byte) {
	for _, next := range nexts {
		var d bytes.Buffer
		o := DiffOptions{RangeLen: 1000, Workers: 2, InPlace: inPlace}
		if _, err := Diff(context.Background(), sig, bytes.NewReader(next), int64(len(next)), &d, o); err != nil {
			f.Fatal(err)
		}
		f.Add(d.Bytes())
	}
}

// fuzzApply applies the delta whose shares are ps (one: all of it).
func fuzzApply(t *testing.T, ps [][]byte, inPlace bool) {
	ctx := context.Background()
	d := decoder{r: asByteReader(bytes.NewReader(ps[0]))}
	h, err := d.header()
	if err != nil {
		return
	}
	out := &boundedFile{limit: h.Size, t: t}
	b := Basis{R: bytes.NewReader(fuzzBasis), Size: int64(len(fuzzBasis)), BlockLen: 700}
	if inPlace {
		out.b = bytes.Clone(fuzzBasis)
		b.R, b.InPlace = &out.memFile, true
	}
	rs := make([]io.Reader, len(ps))
	for i, p := range ps {
		rs[i] = bytes.NewReader(p)
	}
	got, _, err := ApplyShares(ctx, rs, b, out, -1)
	if err != nil {
		return
	}
	if inPlace && int64(len(out.b)) > got.Size {
		out.b = out.b[:got.Size]
	}
	if int64(len(out.b)) != got.Size {
		t.Fatalf("applied a delta of %d bytes, wrote %d", got.Size, len(out.b))
	}
	// Each range hashes to its end record's sum, in the share it is
	// of: find them again.
	sums := map[int64]RangeSum{}
	for i, p := range ps {
		d = decoder{r: asByteReader(bytes.NewReader(p))}
		d.header()
		for {
			rec, err := d.next()
			if err != nil || rec.kind == recDone {
				break
			}
			if rec.kind == recEnd {
				if len(ps) > 1 && rec.rng%int64(len(ps)) != int64(i) {
					t.Fatalf("applied range %d from share %d of %d", rec.rng, i, len(ps))
				}
				sums[rec.rng] = rec.sum
			}
		}
	}
	for r := int64(0); r < got.Ranges(); r++ {
		start := r * got.RangeLen
		end := min(start+got.RangeLen, got.Size)
		if xxh3.Hash128(out.b[start:end]).Bytes() != sums[r] {
			t.Fatalf("range %d applied, but its bytes do not hash to its sum", r)
		}
	}
}

// FuzzReadSignature: whatever the bytes, ReadSignature ends without
// panicking, and a signature it reads has the blocks its size asks for
// and reads back the same once written.
func FuzzReadSignature(f *testing.F) {
	sig, err := Sign(context.Background(), bytes.NewReader(fuzzBasis), int64(len(fuzzBasis)), 700)
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	WriteSignature(&b, sig)
	f.Add(b.Bytes())
	f.Add([]byte("HDS1\xbc\x05\x00"))
	f.Fuzz(func(t *testing.T, p []byte) {
		s, err := ReadSignature(bytes.NewReader(p), -1)
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := WriteSignature(&again, s); err != nil {
			t.Fatal(err)
		}
		if int64(len(s.Weak)) != Blocks(s.Size, s.BlockLen) || len(s.Strong) != len(s.Weak) {
			t.Fatalf("a signature of %d bytes in blocks of %d with %d blocks", s.Size, s.BlockLen, len(s.Weak))
		}
		s2, err := ReadSignature(&again, s.Size)
		if err != nil {
			t.Fatal(err)
		}
		if s2.BlockLen != s.BlockLen || !slices.Equal(s2.Weak, s.Weak) || !slices.Equal(s2.Strong, s.Strong) {
			t.Fatalf("a signature read back otherwise")
		}
	})
}
