package delta

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
)

// Basis is what Apply rebuilds from: the basis file and the block length
// and size its Signature was made with. A delta made against another
// signature is refused before anything is written.
type Basis struct {
	R        io.ReaderAt
	Size     int64
	BlockLen int
}

// Apply reads a delta from r and writes the new file it describes to out,
// rebuilding its blocks from b. size is the new file's size the caller
// expects (the one it listed), or -1 for any. It returns the delta's
// header, which gives the size written.
//
// Each range is checked against the SHA-256 its sender read; a range
// that does not match is ErrMismatch, and out then holds bytes that are
// not the new file. out is written at offsets below the header's size
// only, and Apply never truncates or extends it otherwise: the caller
// gives it a fresh file.
func Apply(ctx context.Context, r io.Reader, b Basis, out io.WriterAt, size int64) (Header, Stats, error) {
	d := decoder{r: asByteReader(r)}
	h, err := d.header()
	if err != nil {
		return Header{}, Stats{}, fmt.Errorf("apply delta: %w", err)
	}
	switch {
	case h.BlockLen != b.BlockLen || h.BasisSize != b.Size:
		return h, Stats{}, fmt.Errorf("apply delta: %w: made against %d bytes in blocks of %d, basis is %d in blocks of %d",
			ErrFormat, h.BasisSize, h.BlockLen, b.Size, b.BlockLen)
	case size >= 0 && h.Size != size:
		return h, Stats{}, fmt.Errorf("apply delta: %w: for %d bytes, expected %d", ErrFormat, h.Size, size)
	}
	a := applier{h: h, b: b, out: out, open: map[int64]*rangeState{}, done: make([]uint64, (h.Ranges()+63)/64)}
	a.blocks = Blocks(b.Size, b.BlockLen)
	for {
		if err := ctx.Err(); err != nil {
			return h, a.st, err
		}
		rec, err := d.next()
		if err != nil {
			return h, a.st, fmt.Errorf("apply delta: %w", err)
		}
		if rec.kind == recDone {
			if a.ended != h.Ranges() {
				return h, a.st, fmt.Errorf("apply delta: %w: ended with %d of %d ranges", ErrFormat, a.ended, h.Ranges())
			}
			return h, a.st, nil
		}
		if err := a.apply(rec); err != nil {
			return h, a.st, fmt.Errorf("apply delta: %w", err)
		}
	}
}

type rangeState struct {
	at, end int64 // the next byte's offset in the new file, and the range's end
	h       hash.Hash
}

type applier struct {
	h      Header
	b      Basis
	blocks int64
	out    io.WriterAt
	open   map[int64]*rangeState
	done   []uint64
	ended  int64
	buf    []byte
	st     Stats
}

func (a *applier) state(r int64) (*rangeState, error) {
	if r >= a.h.Ranges() {
		return nil, formatErr("range %d of %d", r, a.h.Ranges())
	}
	if a.done[r/64]&(1<<(r%64)) != 0 {
		return nil, formatErr("range %d after its end", r)
	}
	if s := a.open[r]; s != nil {
		return s, nil
	}
	if len(a.open) >= MaxOpen {
		return nil, formatErr("more than %d ranges open", MaxOpen)
	}
	start := r * a.h.RangeLen
	s := &rangeState{at: start, end: min(start+a.h.RangeLen, a.h.Size), h: sha256.New()}
	a.open[r] = s
	a.st.Ranges++
	return s, nil
}

func (a *applier) write(s *rangeState, p []byte) error {
	s.h.Write(p)
	if _, err := a.out.WriteAt(p, s.at); err != nil {
		return fmt.Errorf("write at %d: %w", s.at, err)
	}
	s.at += int64(len(p))
	return nil
}

func (a *applier) apply(rec record) error {
	s, err := a.state(rec.rng)
	if err != nil {
		return err
	}
	switch rec.kind {
	case recLiteral:
		if int64(len(rec.data)) > s.end-s.at {
			return formatErr("range %d: %d literal bytes past its end", rec.rng, len(rec.data))
		}
		a.st.Literal += int64(len(rec.data))
		return a.write(s, rec.data)
	case recCopy:
		block, count := rec.a, rec.b
		if count < 1 || block >= a.blocks || count > a.blocks-block {
			return formatErr("range %d: blocks %d+%d of %d", rec.rng, block, count, a.blocks)
		}
		off := block * int64(a.b.BlockLen)
		n := min((block+count)*int64(a.b.BlockLen), a.b.Size) - off
		if n > s.end-s.at {
			return formatErr("range %d: %d bytes of blocks past its end", rec.rng, n)
		}
		if a.buf == nil {
			a.buf = make([]byte, 1<<20)
		}
		a.st.Matched += n
		for n > 0 {
			p := a.buf[:min(n, int64(len(a.buf)))]
			got, err := a.b.R.ReadAt(p, off)
			if got < len(p) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("read basis at %d: %w", off, err)
			}
			if err := a.write(s, p); err != nil {
				return err
			}
			off += int64(len(p))
			n -= int64(len(p))
		}
		return nil
	case recEnd:
		if s.at != s.end {
			return formatErr("range %d ended %d bytes short", rec.rng, s.end-s.at)
		}
		if [32]byte(s.h.Sum(nil)) != rec.sum {
			return fmt.Errorf("range %d (bytes %d to %d): %w", rec.rng, rec.rng*a.h.RangeLen, s.end, ErrMismatch)
		}
		delete(a.open, rec.rng)
		a.done[rec.rng/64] |= 1 << (rec.rng % 64)
		a.ended++
		return nil
	}
	return formatErr("record kind %#x", rec.kind)
}
