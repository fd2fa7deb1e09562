package delta

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// A signature may travel in parts, each on a stream of its own, so that
// a basis's signature comes over several connections at once, each
// sending what its window lets it (a connection's first round trips carry
// little whatever the link). Part I of N holds the runs of blocks I, I+N,
// I+2N, ... (a run being runBlocks blocks: the signer's read), so that
// the parts fill the signature from its start together, and a diff
// waiting for its first blocks (DiffOptions.Blocks) waits for the
// slowest part only as far as those. A part's stream is
//
//	"HDP1", uvarint block length, uvarint size, uvarint N, uvarint I,
//	then its runs' blocks in order, as a signature's are,
//
// its block length always BlockSize of its size: a part is of the
// signature the far end's Apply reads blocks by, not of any other.

var partMagic = [4]byte{'H', 'D', 'P', '1'}

// runBlocks is how many blocks of blockLen a signer reads at once.
func runBlocks(blockLen int) int { return max(1, (8<<20)/blockLen) }

// SignPartTo writes part p of the signature of the basis r, of size
// bytes in blocks of BlockSize(size), to w: its runs summed on every
// CPU and each written once it and those of the part before it are.
func SignPartTo(ctx context.Context, r io.ReaderAt, size int64, p Share, w io.Writer) error {
	if p.N < 1 || !p.valid() {
		return fmt.Errorf("sign: part %d of %d", p.I, p.N)
	}
	sg, err := newSigner(r, size, BlockSize(size))
	if err != nil {
		return err
	}
	sg.part = p
	hdr := append([]byte(nil), partMagic[:]...)
	hdr = binary.AppendUvarint(hdr, uint64(sg.s.BlockLen))
	hdr = binary.AppendUvarint(hdr, uint64(size))
	hdr = binary.AppendUvarint(hdr, uint64(p.N))
	hdr = binary.AppendUvarint(hdr, uint64(p.I))
	return sg.writeTo(ctx, hdr, w)
}

// SignatureParts is a signature read from its parts as they arrive, one
// stream each (ReadPart), for a diff that waits for its first blocks
// (Wait, as DiffOptions.Blocks). The first part's header says the basis's
// size, which every other's must say too. It holds only what has
// arrived.
type SignatureParts struct {
	n int // parts

	mu     sync.Mutex
	more   *sync.Cond
	known  bool      // a part's header is in: header, per and nb are set
	header Signature // block length and size
	per    int       // blocks a run
	nb     int64     // blocks in all
	// weak and strong are the blocks so far, grown as runs arrive;
	// next is, for each part, its first block not in yet (nb once it
	// is whole): the blocks below the least of them are all in, and
	// never written again. begun says which parts' streams have begun.
	weak   []uint32
	strong []uint64
	next   []int64
	begun  []bool
	err    error
}

// NewSignatureParts is a signature coming in n parts.
func NewSignatureParts(n int) (*SignatureParts, error) {
	if n < 1 || n > MaxShares {
		return nil, fmt.Errorf("a signature in %d parts", n)
	}
	sp := &SignatureParts{n: n, next: make([]int64, n), begun: make([]bool, n)}
	sp.more = sync.NewCond(&sp.mu)
	return sp, nil
}

// Size waits for a part's header and returns the size of the basis the
// signature is of.
func (sp *SignatureParts) Size(ctx context.Context) (int64, error) {
	stop := context.AfterFunc(ctx, sp.wake)
	defer stop()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for !sp.known && sp.err == nil && ctx.Err() == nil {
		sp.more.Wait()
	}
	switch {
	case sp.known:
		return sp.header.Size, nil
	case sp.err != nil:
		return 0, sp.err
	}
	return 0, ctx.Err()
}

func (sp *SignatureParts) wake() {
	sp.mu.Lock()
	sp.more.Broadcast()
	sp.mu.Unlock()
}

// Header is the signature's block length and size, without blocks, once
// Size has said them.
func (sp *SignatureParts) Header() *Signature {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	h := sp.header
	return &h
}

// Fail ends the signature with err (a part that will not come), unless
// it already failed: every wait then returns the first error.
func (sp *SignatureParts) Fail(err error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.err == nil {
		sp.err = err
		sp.more.Broadcast()
	}
}

// ReadPart reads a part's stream from r, up to its last block: the part
// its header names, of the signature's size and block length, and not
// one read before. An error fails the signature.
func (sp *SignatureParts) ReadPart(r io.Reader) error {
	err := sp.readPart(asByteReader(r))
	if err != nil {
		sp.Fail(err)
	}
	return err
}

func (sp *SignatureParts) readPart(br byteReader) error {
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return fmt.Errorf("read signature part: %w", eofErr(err))
	}
	if magic != partMagic {
		return formatErr("signature part begins with %q", magic[:])
	}
	var f [4]uint64
	for i := range f {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("read signature part: %w", eofErr(err))
		}
		f[i] = v
	}
	bl, size, n, k := f[0], f[1], f[2], f[3]
	if size > MaxSize || bl != uint64(BlockSize(int64(size))) || n != uint64(sp.n) || k >= n {
		return formatErr("signature part %d of %d, of %d bytes in blocks of %d, for %d parts", k, n, size, bl, sp.n)
	}
	part := int(k)
	sp.mu.Lock()
	switch {
	case sp.known && int64(size) != sp.header.Size:
		sp.mu.Unlock()
		return formatErr("signature part of %d bytes, another of %d", size, sp.header.Size)
	case sp.begun[part]:
		sp.mu.Unlock()
		return formatErr("signature part %d of %d twice", part, sp.n)
	case !sp.known:
		sp.known = true
		sp.header = Signature{BlockLen: int(bl), Size: int64(size)}
		sp.per, sp.nb = runBlocks(int(bl)), Blocks(int64(size), int(bl))
		for i := range sp.next {
			sp.next[i] = min(int64(i)*int64(sp.per), sp.nb)
		}
	}
	sp.begun[part] = true
	sp.more.Broadcast()
	sp.mu.Unlock()
	recs := make([]byte, sp.per*sigRecordLen)
	for run := int64(part); run*int64(sp.per) < sp.nb; run += int64(sp.n) {
		lo := run * int64(sp.per)
		hi := min(lo+int64(sp.per), sp.nb)
		p := recs[:(hi-lo)*sigRecordLen]
		if _, err := io.ReadFull(br, p); err != nil {
			return fmt.Errorf("read signature part %d: block %d of %d: %w", part, lo, sp.nb, eofErr(err))
		}
		sp.mu.Lock()
		if int64(len(sp.weak)) < hi {
			sp.grow(hi)
		}
		for i := lo; i < hi; i++ {
			rec := p[(i-lo)*sigRecordLen:]
			sp.weak[i] = binary.LittleEndian.Uint32(rec[:4])
			sp.strong[i] = binary.LittleEndian.Uint64(rec[4:sigRecordLen])
		}
		sp.next[part] = min(hi+int64(sp.n-1)*int64(sp.per), sp.nb)
		sp.more.Broadcast()
		sp.mu.Unlock()
	}
	return nil
}

// grow makes the blocks hold at least n, in new arrays: what a wait
// returned keeps the old ones, which are not written again.
func (sp *SignatureParts) grow(n int64) {
	c := min(max(n, 2*int64(len(sp.weak))), sp.nb)
	weak, strong := make([]uint32, c), make([]uint64, c)
	copy(weak, sp.weak)
	copy(strong, sp.strong)
	sp.weak, sp.strong = weak, strong
}

// in is how many of the first blocks are all in.
func (sp *SignatureParts) in() int64 {
	least := sp.nb
	for _, nx := range sp.next {
		least = min(least, nx)
	}
	return least
}

// Wait returns the signature as far as its first n blocks (or all of
// it, when it has fewer), once every part has brought them.
func (sp *SignatureParts) Wait(ctx context.Context, n int64) (*Signature, error) {
	stop := context.AfterFunc(ctx, sp.wake)
	defer stop()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for (!sp.known || sp.in() < min(max(n, 0), sp.nb)) && sp.err == nil && ctx.Err() == nil {
		sp.more.Wait()
	}
	switch {
	case sp.known && sp.in() >= min(max(n, 0), sp.nb):
		s := sp.header
		// Ending at the blocks all in, so that nothing the signature
		// goes on to hold is seen through it.
		got := sp.in()
		s.Weak, s.Strong = sp.weak[:got:got], sp.strong[:got:got]
		return &s, nil
	case sp.err != nil:
		return nil, sp.err
	}
	return nil, ctx.Err()
}
