// Package delta is rsync's delta transfer, written for hpncp: the end
// that holds the old version of a file (the basis) sends a weak and a
// strong checksum of each of its blocks (a Signature); the end that holds
// the new version finds those blocks in it at any offset, with a rolling
// checksum, and sends only block references and the bytes between them
// (Diff); the first end rebuilds the new version from its basis and those
// (Apply).
//
// Unlike rsync, a file is cut into ranges that are diffed and rebuilt at
// once on several cores, and every range carries the hash of its bytes
// (RangeSum): a rebuilt range that does not hash to what its sender read
// is an error, never a file. Both streams come from the far end, which may be
// hostile, so every count and length read is bounded and every reference
// checked against the basis before a byte is read or written.
package delta

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/zeebo/xxh3"
)

const (
	// MinBlock and MaxBlock bound a block's length, as rsync bounds it
	// (700 bytes, 128 KiB).
	MinBlock = 700
	MaxBlock = 128 << 10
	// StrongLen is the length of a block's strong sum on the wire.
	StrongLen = 8
	// MaxSize bounds a file's size on the wire (16 TiB).
	MaxSize = 1 << 44
)

// BlockSize is the block length for a basis of size bytes, by rsync's
// square-root rule: the square root, a multiple of 8, within MinBlock and
// MaxBlock. It balances the signature's size, which falls as blocks grow,
// against the bytes sent around each change, which grow with them.
func BlockSize(size int64) int {
	if size <= MinBlock*MinBlock {
		return MinBlock
	}
	b := isqrt(size) &^ 7
	return int(min(max(b, MinBlock), MaxBlock))
}

func isqrt(n int64) int64 {
	// Newton's method from above; n fits in 44 bits, so no overflow.
	x := n
	y := (x + 1) / 2
	for y < x {
		x = y
		y = (x + n/x) / 2
	}
	return x
}

// weak is rsync's rolling checksum of a window: the sum of its bytes and
// the sum of those sums, each modulo 2^16. Where the CPU has them, vector
// instructions take the window's first multiple of 32 bytes
// (weakVector); weakMore takes the rest, or all of it elsewhere.
func weak(p []byte) (a, b uint32) {
	if n := len(p) &^ 31; n > 0 && haveWeakVector {
		a, b = weakVector(p[:n])
		p = p[n:]
	}
	a, b = weakMore(a, b, p)
	return a & 0xffff, b & 0xffff
}

// weakMore is weak's sums a and b, not yet taken modulo 2^16, grown by
// the bytes of p. It takes eight words of eight bytes at a time, their
// bytes spread in 16-bit lanes (even bytes in one word, odd in another)
// and added lane by lane, so that a few multiplications by a word of
// weights do the rest, their top lane holding the total:
//   - a grows by the sum of the 64 bytes;
//   - b grows by 64 a, by each byte weighted by its place in its word
//     (8 down to 1), and by 8 times each word's sum weighted by the
//     words after it in the 64 (7 down to 0).
//
// No lane carries into the next: the largest, the words' sums weighted
// by the words after them, holds at most 28 × 2 × 255 before the
// multiplication and its running total 4 times that after.
func weakMore(a, b uint32, p []byte) (uint32, uint32) {
	const (
		lanes = 0x00ff00ff00ff00ff
		ones  = 0x0001000100010001
		even  = 2 | 4<<16 | 6<<32 | 8<<48 // bytes 6, 4, 2, 0
		odd   = 1 | 3<<16 | 5<<32 | 7<<48 // bytes 7, 5, 3, 1
	)
	i := 0
	for ; i+64 <= len(p); i += 64 {
		q := p[i : i+64 : i+64]
		var e, o, sum, later uint64
		for w := 0; w < 64; w += 8 {
			x := binary.LittleEndian.Uint64(q[w:])
			ew, ow := x&lanes, x>>8&lanes
			e += ew
			o += ow
			later += sum
			sum += ew + ow
		}
		b += 64*a + 8*uint32((later*ones)>>48) + uint32((e*even)>>48+(o*odd)>>48)
		a += uint32((sum * ones) >> 48)
	}
	for ; i+8 <= len(p); i += 8 {
		x := binary.LittleEndian.Uint64(p[i:])
		e, o := x&lanes, x>>8&lanes
		b += 8*a + uint32((e*even)>>48+(o*odd)>>48)
		a += uint32(((e + o) * ones) >> 48)
	}
	for ; i < len(p); i++ {
		a += uint32(p[i])
		b += a
	}
	return a, b
}

// roll moves a window of n bytes one byte on: out leaves it, in joins.
func roll(a, b uint32, n uint32, out, in byte) (uint32, uint32) {
	a = (a - uint32(out) + uint32(in)) & 0xffff
	b = (b - n*uint32(out) + a) & 0xffff
	return a, b
}

func pack(a, b uint32) uint32 { return a | b<<16 }

// strong is the strong checksum of a block: its 64-bit XXH3 (rsync's own
// hash since 3.2). It need only tell apart blocks that share a weak sum:
// a block taken for another gives a range whose hash is not the
// source's, which Apply refuses. Eight bytes, with the weak sum's four,
// keep a 1 GiB file's signature at 384 KiB, which a connection's first
// round trips carry; SHA-256 cost three times the rest of a signature.
func strong(p []byte) uint64 { return xxh3.Hash(p) }

// A Signature is what the basis end sends: its block length, its size,
// and each block's weak and strong checksum in order (the last block is
// short unless the size is a multiple of the block length).
type Signature struct {
	BlockLen int
	Size     int64
	Weak     []uint32
	Strong   []uint64
}

// Blocks is how many blocks a basis of size has with blocks of blockLen.
func Blocks(size int64, blockLen int) int64 {
	return (size + int64(blockLen) - 1) / int64(blockLen)
}

// blockLenAt is the length of block i.
func (s *Signature) blockLenAt(i int) int {
	if rest := s.Size - int64(i)*int64(s.BlockLen); rest < int64(s.BlockLen) {
		return int(rest)
	}
	return s.BlockLen
}

// Sign reads the basis r of size bytes and returns its Signature with
// blocks of blockLen (BlockSize(size) when 0), on as many goroutines as
// there are CPUs, each reading a run of blocks. A basis that ends early
// is an error: a signature must describe exactly the bytes Apply will
// read.
func Sign(ctx context.Context, r io.ReaderAt, size int64, blockLen int) (*Signature, error) {
	sg, err := newSigner(r, size, blockLen)
	if err != nil {
		return nil, err
	}
	if err := sg.run(ctx); err != nil {
		return nil, err
	}
	return sg.s, nil
}

// SignTo is Sign writing the signature to w as WriteSignature would,
// each run of blocks as soon as it and those before it are summed, so
// that the far end has most of it when the last is done.
func SignTo(ctx context.Context, r io.ReaderAt, size int64, blockLen int, w io.Writer) error {
	sg, err := newSigner(r, size, blockLen)
	if err != nil {
		return err
	}
	return sg.writeTo(ctx, sigHeader(sg.s), w)
}

// writeTo sums the basis, writing header and then the records of the
// runs summed (sg.part's), each run as soon as it and those before it
// are summed.
func (sg *signer) writeTo(ctx context.Context, header []byte, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- sg.run(ctx) }()
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(header)
	var rec [sigRecordLen]byte
	ran := (<-chan error)(result)
	first, step := 0, 1
	if !sg.part.Whole() {
		first, step = sg.part.I, sg.part.N
	}
	for k := first; k < len(sg.done); k += step {
		select {
		case <-sg.done[k]:
		case err := <-ran:
			if err != nil {
				return err
			}
			ran = nil // every run is summed: done is closed
			<-sg.done[k]
		}
		lo, hi := k*sg.per, min((k+1)*sg.per, len(sg.s.Weak))
		for i := lo; i < hi; i++ {
			putSigRecord(rec[:], sg.s, i)
			bw.Write(rec[:])
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if ran != nil {
		return <-ran
	}
	return nil
}

// A signer sums the runs of blocks of a basis into s, closing each run's
// done once it is summed.
type signer struct {
	r    io.ReaderAt
	s    *Signature
	per  int // blocks a run
	done []chan struct{}
	// part, when not whole, is the runs summed: part.I of every
	// part.N (SignPartTo); the others' done stay open.
	part Share
}

func newSigner(r io.ReaderAt, size int64, blockLen int) (*signer, error) {
	if blockLen == 0 {
		blockLen = BlockSize(size)
	}
	if size < 0 || size > MaxSize || blockLen < MinBlock || blockLen > MaxBlock {
		return nil, fmt.Errorf("sign: size %d, block length %d out of bounds", size, blockLen)
	}
	n := int(Blocks(size, blockLen))
	sg := &signer{r: r, s: &Signature{BlockLen: blockLen, Size: size, Weak: make([]uint32, n), Strong: make([]uint64, n)},
		// A run of blocks per read: big reads, and a few runs per CPU
		// so that a slow one does not hold the rest.
		per: runBlocks(blockLen)}
	sg.done = make([]chan struct{}, (n+sg.per-1)/sg.per)
	for i := range sg.done {
		sg.done[i] = make(chan struct{})
	}
	return sg, nil
}

func (sg *signer) run(ctx context.Context) error {
	s, n, bl := sg.s, len(sg.s.Weak), sg.s.BlockLen
	workers := min(runtime.GOMAXPROCS(0), len(sg.done))
	if !sg.part.Whole() {
		workers = min(workers, max(len(sg.done)/sg.part.N, 1))
	}
	var (
		next  = make(chan int)
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, sg.per*bl)
			for run := range next {
				lo := run * sg.per
				hi := min(lo+sg.per, n)
				off := int64(lo) * int64(bl)
				want := int(min(int64(hi-lo)*int64(bl), s.Size-off))
				got, err := sg.r.ReadAt(buf[:want], off)
				if got < want {
					if err == nil || err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("sign: read at %d: %w", off, err)
					}
					mu.Unlock()
					continue
				}
				for i := lo; i < hi; i++ {
					p := buf[(i-lo)*bl : min((i-lo+1)*bl, want)]
					s.Weak[i] = pack(weak(p))
					s.Strong[i] = strong(p)
				}
				close(sg.done[run])
			}
		}()
	}
	for run := range sg.done {
		if !sg.part.has(int64(run)) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- run
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// Stats counts what a delta carried: bytes sent as data, and bytes
// rebuilt from the basis.
type Stats struct {
	Literal int64
	Matched int64
	Ranges  int
}

// Add adds o's counts to s's.
func (s *Stats) Add(o Stats) {
	s.Literal += o.Literal
	s.Matched += o.Matched
	s.Ranges += o.Ranges
}

// A RangeSum is a range's hash: the 128-bit XXH3 of its bytes, as rsync
// checks a file it rebuilt (since 3.2). It is there for what goes wrong by
// accident (a basis that changed under the run, a damaged stream, a bug):
// the far end could send any bytes it liked, so a cryptographic hash
// would guard against no one, and SHA-256 cost more than the rest of a
// delta on both ends together.
type RangeSum = [16]byte

// SumOf is the content sum of the size bytes of r (the 128-bit XXH3 of
// them, as a range's), read with buf: what both ends of a sync -c compare
// where a helper hashes the remote files. A file that ends early is an
// error.
func SumOf(ctx context.Context, r io.ReaderAt, size int64, buf []byte) (RangeSum, error) {
	h := xxh3.New()
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return RangeSum{}, err
		}
		p := buf[:min(int64(len(buf)), size-off)]
		n, err := r.ReadAt(p, off)
		h.Write(p[:n])
		off += int64(n)
		if n < len(p) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return RangeSum{}, fmt.Errorf("read at %d: %w", off, err)
		}
	}
	return h.Sum128().Bytes(), nil
}

// ErrMismatch says a rebuilt range did not hash to what its sender read:
// the basis changed under the run, or the bytes were damaged. What was
// rebuilt is not the new file.
var ErrMismatch = errors.New("rebuilt data does not match the sender's hash")
