package delta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// partsOf signs basis in n parts, each to a buffer.
func partsOf(t testing.TB, basis []byte, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		var b bytes.Buffer
		if err := SignPartTo(context.Background(), bytes.NewReader(basis), int64(len(basis)), Share{N: n, I: i}, &b); err != nil {
			t.Fatal(err)
		}
		out[i] = b.Bytes()
	}
	return out
}

// TestSignatureParts: a signature signed in parts and read from them at
// once, each on its own stream, is the signature Sign makes; a wait for
// its first blocks ends once the parts that hold them are in, whatever
// the others.
func TestSignatureParts(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	basis := make([]byte, 40<<20+777) // blocks of 6.4 KB, runs of 1,280 blocks: 6 runs
	for i := range basis {
		basis[i] = byte(rng.Uint32())
	}
	want, err := Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 3, 4, 7} {
		parts := partsOf(t, basis, n)
		sp, err := NewSignatureParts(n)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := n - 1; i >= 0; i-- {
			wg.Go(func() {
				if err := sp.ReadPart(bytes.NewReader(parts[i])); err != nil {
					t.Errorf("%d parts: part %d: %v", n, i, err)
				}
			})
		}
		got, err := sp.Wait(ctx, want.Size)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if got.BlockLen != want.BlockLen || got.Size != want.Size || !slices.Equal(got.Weak, want.Weak) || !slices.Equal(got.Strong, want.Strong) {
			t.Errorf("%d parts: the signature read is not Sign's (%d blocks, want %d)", n, len(got.Weak), len(want.Weak))
		}
	}

	// Part 0 alone: its first run is there, and nothing past it.
	per := int64(runBlocks(BlockSize(int64(len(basis)))))
	parts := partsOf(t, basis, 3)
	sp, _ := NewSignatureParts(3)
	if err := sp.ReadPart(bytes.NewReader(parts[0])); err != nil {
		t.Fatal(err)
	}
	first, err := sp.Wait(ctx, per)
	if err != nil || int64(len(first.Weak)) != per || !slices.Equal(first.Weak, want.Weak[:per]) {
		t.Fatalf("the first run, from part 0: %d blocks, %v", len(first.Weak), err)
	}
	if size, err := sp.Size(ctx); size != int64(len(basis)) || err != nil {
		t.Errorf("the size from part 0: %d, %v", size, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sp.Wait(gone, per+1); !errors.Is(err, context.Canceled) {
		t.Errorf("a block of part 1, not in: %v", err)
	}
	// Part 1 cut short fails the signature, and every wait on it.
	if err := sp.ReadPart(bytes.NewReader(parts[1][:len(parts[1])-5])); err == nil {
		t.Errorf("a part cut short was read")
	}
	if _, err := sp.Wait(ctx, want.Size); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("a wait on a failed signature: %v", err)
	}
	// What a wait returned does not change as the signature goes on.
	sp2, _ := NewSignatureParts(2)
	parts2 := partsOf(t, basis, 2)
	sp2.ReadPart(bytes.NewReader(parts2[0]))
	view, _ := sp2.Wait(ctx, per)
	held := slices.Clone(view.Weak)
	sp2.ReadPart(bytes.NewReader(parts2[1]))
	if !slices.Equal(view.Weak, held) || cap(view.Weak) != len(view.Weak) {
		t.Errorf("a view changed, or may grow into what came after it")
	}
}

// TestSignaturePartRefused: a part of another signature, one read
// twice, or bytes that are not a part are refused before its blocks.
func TestSignaturePartRefused(t *testing.T) {
	basis := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	parts := partsOf(t, basis, 2)
	other := partsOf(t, basis[:len(basis)-1], 2)
	three := partsOf(t, basis, 3)
	for _, c := range []struct {
		name string
		p    []byte
	}{
		{"another size", other[1]},
		{"of three parts", three[2]},
		{"not a part", []byte("HDS1\x00\x00")},
		{"empty", nil},
	} {
		sp, _ := NewSignatureParts(2)
		if err := sp.ReadPart(bytes.NewReader(parts[0])); err != nil {
			t.Fatal(err)
		}
		if err := sp.ReadPart(bytes.NewReader(c.p)); err == nil {
			t.Errorf("%s: read", c.name)
		}
	}
	// A header of another block length than the size's.
	bad := bytes.Clone(parts[0])
	bad[4]++
	if sp, _ := NewSignatureParts(2); sp.ReadPart(bytes.NewReader(bad)) == nil {
		t.Errorf("a part in blocks of another length was read")
	}
	sp, _ := NewSignatureParts(2)
	if err := sp.ReadPart(bytes.NewReader(parts[1])); err != nil {
		t.Fatal(err)
	}
	if err := sp.ReadPart(bytes.NewReader(parts[1])); err == nil {
		t.Errorf("a part read twice")
	}
	if err := SignPartTo(context.Background(), bytes.NewReader(basis), int64(len(basis)), Share{N: 2, I: 2}, io.Discard); err == nil {
		t.Errorf("part 2 of 2 signed")
	}
}

// FuzzSignaturePart: whatever the bytes, a part is read or refused,
// holding no more than what came allows.
func FuzzSignaturePart(f *testing.F) {
	for _, p := range partsOf(f, fuzzBasis, 2) {
		f.Add(p)
	}
	f.Add([]byte("HDP1\xbc\x05\xa0\x1f\x02\x01"))
	f.Fuzz(func(t *testing.T, p []byte) {
		sp, err := NewSignatureParts(2)
		if err != nil {
			t.Fatal(err)
		}
		if sp.ReadPart(bytes.NewReader(p)) != nil {
			return
		}
		if int64(len(sp.weak)) > 2*int64(len(p)) {
			t.Fatalf("%d bytes of a part gave %d blocks", len(p), len(sp.weak))
		}
	})
}
