package delta

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The two streams, as they travel:
//
//	signature: "HDS1", uvarint block length, uvarint size, then per
//	           block 4 bytes of weak sum (little-endian) and StrongLen
//	           bytes of strong sum; the count follows from the size.
//	delta:     "HDD1", uvarint new size, uvarint block length, uvarint
//	           basis size, uvarint range length, then records until 'Z':
//	             'C' range, block, count    count blocks from block on
//	             'L' range, n, n bytes      bytes to write
//	             'E' range, 16 bytes        the range's hash; it ends
//	             'A' range, at, n, n bytes  bytes sent ahead: the range's
//	                                        from at on, held, not written
//	             'S' range, n               n of the bytes sent ahead, to
//	                                        write at the range's place
//	             'Z'                        the delta ends
//
// Range r is the new file's bytes from r times the range length on. A
// range's records come in its order; the records of different ranges may
// interleave, which lets several goroutines write one stream. A range's
// 'A' records come before its other records, in the order of their
// bytes, each past the last (DiffOptions.Ahead); an 'S' takes the bytes
// at the range's place from the one 'A' that holds them all.

var (
	sigMagic   = [4]byte{'H', 'D', 'S', '1'}
	deltaMagic = [4]byte{'H', 'D', 'D', '1'}
)

const (
	recCopy    = 'C'
	recLiteral = 'L'
	recEnd     = 'E'
	recAhead   = 'A'
	recSent    = 'S'
	recDone    = 'Z'

	// MaxLiteral bounds one literal record, and so what one record read
	// from the far end makes this end hold.
	MaxLiteral = 1 << 20
	// MaxOpen bounds how many ranges a delta may have begun and not
	// ended, and MaxRanges how many it may have in all.
	MaxOpen   = 1024
	MaxRanges = 1 << 24
	// MaxAhead bounds the bytes one stream of a delta sends ahead
	// (DiffOptions.Ahead), and so what the far end makes this end hold
	// for each.
	MaxAhead = 16 << 20
)

// ErrFormat is wrapped by every error about bytes that are not a
// well-formed stream.
var ErrFormat = errors.New("malformed delta stream")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// sigRecordLen is a block's record in a signature.
const sigRecordLen = 4 + StrongLen

func sigHeader(s *Signature) []byte {
	p := append([]byte(nil), sigMagic[:]...)
	p = binary.AppendUvarint(p, uint64(s.BlockLen))
	return binary.AppendUvarint(p, uint64(s.Size))
}

func putSigRecord(rec []byte, s *Signature, i int) {
	binary.LittleEndian.PutUint32(rec[:4], s.Weak[i])
	binary.LittleEndian.PutUint64(rec[4:], s.Strong[i])
}

// WriteSignature writes s to w.
func WriteSignature(w io.Writer, s *Signature) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(sigHeader(s))
	var rec [sigRecordLen]byte
	for i := range s.Weak {
		putSigRecord(rec[:], s, i)
		bw.Write(rec[:])
	}
	return bw.Flush()
}

// ReadSignature reads a Signature from r. size is the basis size the
// reader expects (the one it listed), or -1 for any: a signature of
// another size is refused before its blocks are read, and the blocks are
// held only as they arrive.
func ReadSignature(r io.Reader, size int64) (*Signature, error) {
	sr, err := NewSignatureReader(r, size)
	if err != nil {
		return nil, err
	}
	return sr.Read()
}

// A SignatureReader reads a signature as it arrives, for a diff made
// for writing in place to begin with the ranges whose blocks are there
// (DiffOptions.Blocks).
type SignatureReader struct {
	br     byteReader
	header Signature // block length and size
	n      int64     // blocks in all

	mu   sync.Mutex
	more *sync.Cond
	// got is the signature so far: its slices are only ever appended to
	// by Read, which publishes each longer view here, so that what a
	// waiter was given never changes under it.
	got  Signature
	err  error
	done bool
}

// NewSignatureReader reads a signature's header from r, which must be
// for a basis of size bytes (or any, when size is -1); Read then reads
// its blocks.
func NewSignatureReader(r io.Reader, size int64) (*SignatureReader, error) {
	br := asByteReader(r)
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, fmt.Errorf("read signature: %w", eofErr(err))
	}
	if magic != sigMagic {
		return nil, formatErr("signature begins with %q", magic[:])
	}
	bl, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("read signature: %w", eofErr(err))
	}
	sz, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("read signature: %w", eofErr(err))
	}
	if bl < MinBlock || bl > MaxBlock || sz > MaxSize {
		return nil, formatErr("signature of %d bytes in blocks of %d", sz, bl)
	}
	if size >= 0 && int64(sz) != size {
		return nil, formatErr("signature of %d bytes for a basis of %d", sz, size)
	}
	sr := &SignatureReader{br: br, header: Signature{BlockLen: int(bl), Size: int64(sz)}, n: Blocks(int64(sz), int(bl))}
	sr.got = sr.header
	sr.more = sync.NewCond(&sr.mu)
	return sr, nil
}

// Header is the signature's block length and size, without blocks.
func (sr *SignatureReader) Header() *Signature { h := sr.header; return &h }

// Read reads the blocks, holding them only as they arrive, and returns
// the whole signature; waiters are told of every batch.
func (sr *SignatureReader) Read() (*Signature, error) {
	weak, strong := sr.got.Weak, sr.got.Strong
	var rec [sigRecordLen]byte
	var err error
	for i := int64(0); i < sr.n; i++ {
		if _, err = io.ReadFull(sr.br, rec[:]); err != nil {
			err = fmt.Errorf("read signature: block %d of %d: %w", i, sr.n, eofErr(err))
			break
		}
		weak = append(weak, binary.LittleEndian.Uint32(rec[:4]))
		strong = append(strong, binary.LittleEndian.Uint64(rec[4:]))
		if len(weak)%64 == 0 || i == sr.n-1 {
			sr.mu.Lock()
			sr.got.Weak, sr.got.Strong = weak, strong
			sr.more.Broadcast()
			sr.mu.Unlock()
		}
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	sr.err, sr.done = err, true
	sr.more.Broadcast()
	if err != nil {
		return nil, err
	}
	s := sr.got
	return &s, nil
}

// Wait returns the signature as far as its first n blocks (or all of
// it, when it has fewer), once they have arrived.
func (sr *SignatureReader) Wait(ctx context.Context, n int64) (*Signature, error) {
	stop := context.AfterFunc(ctx, func() {
		sr.mu.Lock()
		sr.more.Broadcast()
		sr.mu.Unlock()
	})
	defer stop()
	sr.mu.Lock()
	defer sr.mu.Unlock()
	n = min(n, sr.n)
	for int64(len(sr.got.Weak)) < n && !sr.done && ctx.Err() == nil {
		sr.more.Wait()
	}
	switch {
	case int64(len(sr.got.Weak)) >= n:
		s := sr.got
		return &s, nil
	case sr.err != nil:
		return nil, sr.err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, io.ErrUnexpectedEOF
}

func eofErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

type byteReader interface {
	io.Reader
	io.ByteReader
}

func asByteReader(r io.Reader) byteReader {
	if br, ok := r.(byteReader); ok {
		return br
	}
	return bufio.NewReaderSize(r, 64<<10)
}

// Header is a delta's first record: the new file's size and the basis it
// was made against.
type Header struct {
	Size      int64
	BlockLen  int
	BasisSize int64
	RangeLen  int64
}

// Ranges is how many ranges the new file is cut into.
func (h Header) Ranges() int64 { return (h.Size + h.RangeLen - 1) / h.RangeLen }

func appendHeader(p []byte, h Header) []byte {
	p = append(p, deltaMagic[:]...)
	p = binary.AppendUvarint(p, uint64(h.Size))
	p = binary.AppendUvarint(p, uint64(h.BlockLen))
	p = binary.AppendUvarint(p, uint64(h.BasisSize))
	return binary.AppendUvarint(p, uint64(h.RangeLen))
}

// A record is one of a delta's records, as the Decoder returns it.
type record struct {
	kind byte
	rng  int64
	a, b int64  // copy: block, count; ahead: at; sent: n
	data []byte // literal, ahead: valid until the next call
	sum  RangeSum
}

// decoder reads a delta's records, bounding each.
type decoder struct {
	r   byteReader
	buf []byte
}

func (d *decoder) header() (Header, error) {
	var magic [4]byte
	if _, err := io.ReadFull(d.r, magic[:]); err != nil {
		return Header{}, eofErr(err)
	}
	if magic != deltaMagic {
		return Header{}, formatErr("delta begins with %q", magic[:])
	}
	var v [4]uint64
	for i := range v {
		x, err := binary.ReadUvarint(d.r)
		if err != nil {
			return Header{}, eofErr(err)
		}
		v[i] = x
	}
	if v[0] > MaxSize || v[1] < MinBlock || v[1] > MaxBlock || v[2] > MaxSize || v[3] < MinBlock || v[3] > MaxSize {
		return Header{}, formatErr("header: size %d, block length %d, basis %d, ranges of %d", v[0], v[1], v[2], v[3])
	}
	h := Header{Size: int64(v[0]), BlockLen: int(v[1]), BasisSize: int64(v[2]), RangeLen: int64(v[3])}
	if h.Ranges() > MaxRanges {
		return Header{}, formatErr("header: %d ranges", h.Ranges())
	}
	return h, nil
}

func (d *decoder) uvarint(limit uint64, what string) (int64, error) {
	x, err := binary.ReadUvarint(d.r)
	if err != nil {
		return 0, eofErr(err)
	}
	if x > limit {
		return 0, formatErr("%s %d past %d", what, x, limit)
	}
	return int64(x), nil
}

func (d *decoder) next() (record, error) {
	kind, err := d.r.ReadByte()
	if err != nil {
		return record{}, eofErr(err)
	}
	rec := record{kind: kind}
	if kind == recDone {
		return rec, nil
	}
	switch kind {
	case recCopy, recLiteral, recEnd, recAhead, recSent:
	default:
		return record{}, formatErr("record kind %#x", kind)
	}
	if rec.rng, err = d.uvarint(MaxRanges, "range"); err != nil {
		return record{}, err
	}
	switch kind {
	case recCopy:
		if rec.a, err = d.uvarint(MaxSize, "offset"); err != nil {
			return record{}, err
		}
		if rec.b, err = d.uvarint(MaxSize, "length"); err != nil {
			return record{}, err
		}
	case recSent:
		if rec.a, err = d.uvarint(MaxSize, "length"); err != nil {
			return record{}, err
		}
	case recLiteral, recAhead:
		if kind == recAhead {
			if rec.a, err = d.uvarint(MaxSize, "offset"); err != nil {
				return record{}, err
			}
		}
		n, err := d.uvarint(MaxLiteral, "literal length")
		if err != nil {
			return record{}, err
		}
		if cap(d.buf) < int(n) {
			d.buf = make([]byte, n)
		}
		rec.data = d.buf[:n]
		if _, err := io.ReadFull(d.r, rec.data); err != nil {
			return record{}, eofErr(err)
		}
	case recEnd:
		if _, err := io.ReadFull(d.r, rec.sum[:]); err != nil {
			return record{}, eofErr(err)
		}
	}
	return rec, nil
}

// recordWriter builds one goroutine's records, handing them to the
// shared stream in whole records.
type recordWriter struct {
	p     []byte
	flush func([]byte) error
}

func (w *recordWriter) maybeFlush(force bool) error {
	if len(w.p) == 0 || !force && len(w.p) < 256<<10 {
		return nil
	}
	err := w.flush(w.p)
	w.p = w.p[:0]
	return err
}

func (w *recordWriter) copyBlocks(rng int64, block, count int64) error {
	w.p = append(w.p, recCopy)
	w.p = binary.AppendUvarint(w.p, uint64(rng))
	w.p = binary.AppendUvarint(w.p, uint64(block))
	w.p = binary.AppendUvarint(w.p, uint64(count))
	return w.maybeFlush(false)
}

func (w *recordWriter) literal(rng int64, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), MaxLiteral)
		w.p = append(w.p, recLiteral)
		w.p = binary.AppendUvarint(w.p, uint64(rng))
		w.p = binary.AppendUvarint(w.p, uint64(n))
		w.p = append(w.p, data[:n]...)
		data = data[n:]
		if err := w.maybeFlush(false); err != nil {
			return err
		}
	}
	return nil
}

// aheadRecord is the most an 'A' record carries: between records, the
// sender looks whether to go on sending ahead.
const aheadRecord = 256 << 10

// appendAhead appends an 'A' record: data, range rng's bytes from at.
func appendAhead(p []byte, rng, at int64, data []byte) []byte {
	p = append(p, recAhead)
	p = binary.AppendUvarint(p, uint64(rng))
	p = binary.AppendUvarint(p, uint64(at))
	p = binary.AppendUvarint(p, uint64(len(data)))
	return append(p, data...)
}

func (w *recordWriter) sent(rng, n int64) error {
	w.p = append(w.p, recSent)
	w.p = binary.AppendUvarint(w.p, uint64(rng))
	w.p = binary.AppendUvarint(w.p, uint64(n))
	return w.maybeFlush(false)
}

func (w *recordWriter) end(rng int64, sum RangeSum) error {
	w.p = append(w.p, recEnd)
	w.p = binary.AppendUvarint(w.p, uint64(rng))
	w.p = append(w.p, sum[:]...)
	return w.maybeFlush(true)
}
