package delta

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/zeebo/xxh3"
)

// index finds the basis blocks a window may be: a bit filter on the weak
// sum, consulted at every byte, and the blocks sorted by weak sum, for the
// few windows that pass it.
type index struct {
	sig    *Signature
	filter []uint64
	shift  uint
	lo, hi int64 // the blocks indexed
	// keys are the blocks' weak sums above their numbers, sorted: by
	// weak sum, then by block.
	keys []uint64
}

func newIndex(s *Signature) *index { return newRangeIndex(s, 0, len(s.Weak)) }

// newRangeIndex indexes blocks lo to hi of s only: a range's own blocks,
// the only ones a delta written in place copies from (InPlaceOK), or the
// blocks near a range, those of the signature that has arrived.
func newRangeIndex(s *Signature, lo, hi int) *index {
	n := hi - lo
	// 64 filter bits a block or more: a window that no block has passes
	// the filter about once in sixty-four.
	logBits := max(10, bits.Len(uint(n*64)))
	x := &index{sig: s, filter: make([]uint64, 1<<logBits/64), shift: uint(32 - logBits), lo: int64(lo), hi: int64(hi), keys: make([]uint64, n)}
	for i, w := range s.Weak[lo:hi] {
		x.keys[i] = uint64(w)<<32 | uint64(lo+i)
		h := x.slot(w)
		x.filter[h/64] |= 1 << (h % 64)
	}
	slices.Sort(x.keys)
	return x
}

func (x *index) slot(w uint32) uint32 { return (w * 0x9e3779b1) >> x.shift }

func (x *index) maybe(w uint32) bool {
	h := x.slot(w)
	return x.filter[h/64]&(1<<(h%64)) != 0
}

// has says whether block b is among those indexed.
func (x *index) has(b int64) bool { return b >= x.lo && b < x.hi }

// find returns a block whose sums are window's, preferring block prefer
// (the one after the last match, so that runs of blocks stay runs), and
// taking only a block usable says may be used, when usable is not nil.
func (x *index) find(w uint32, window []byte, prefer int64, usable func(block int64) bool) (int64, bool) {
	i, _ := slices.BinarySearch(x.keys, uint64(w)<<32)
	var (
		sum   uint64
		have  bool
		found int64 = -1
	)
	for ; i < len(x.keys) && uint32(x.keys[i]>>32) == w; i++ {
		b := int(uint32(x.keys[i]))
		if x.sig.blockLenAt(b) != len(window) {
			continue
		}
		if !have {
			sum, have = strong(window), true
		}
		if x.sig.Strong[b] != sum || usable != nil && !usable(int64(b)) {
			continue
		}
		if int64(b) == prefer {
			return prefer, true
		}
		if found < 0 {
			found = int64(b)
		}
	}
	return found, found >= 0
}

// DiffOptions tune Diff.
type DiffOptions struct {
	// Workers is how many ranges are diffed at once (GOMAXPROCS when 0).
	Workers int
	// RangeLen is the length of a range, rounded up to a multiple of the
	// block length (32 MiB when 0).
	RangeLen int64
	// InPlace makes a delta for rebuilding the file over its basis
	// (rsync's --inplace): it refers only to blocks no earlier write will
	// have changed (InPlaceOK), and prefers a block at the offset it is
	// needed at, which the writer then leaves alone. Each range is
	// matched against its own blocks only (not those past the new file's
	// end, which InPlaceOK would allow too).
	InPlace bool
	// Blocks is the signature as it arrives (a SignatureReader's Wait):
	// sig then gives only the block length and the basis size. With
	// InPlace, a range is diffed as soon as its own blocks are there,
	// while the rest of the signature is still on its way. Without, a
	// range is diffed first against the blocks near it (its own and a
	// range's worth on each side: what an insertion or a deletion of
	// less than a range moved) as soon as they are there; a range that
	// matched less than 7/8 of its bytes that way waits for the whole
	// signature and is diffed again against all of it, so that what
	// moved farther is still found. A range taken once the signature is
	// all there is diffed against all of it at once.
	Blocks func(ctx context.Context, n int64) (*Signature, error)
	// Ahead, with Blocks and not InPlace, says the far end takes bytes
	// sent ahead ('A' and 'S' records): the literal bytes a range put
	// off found against the blocks near it are sent at once, while the
	// signature is still on its way and the stream has little else to
	// carry, rather than once the whole signature is there; the range's
	// records then say which of them to write. Only while the signature
	// is not all there, and at most MaxAhead bytes, so that what a
	// range matched farther away wastes little.
	Ahead bool
	// Share, when its N is more than 1, has Diff send only the ranges
	// of that share, the delta's header still the whole file's: a
	// delta striped over several streams, each diffed apart
	// (ApplyShares).
	Share Share
}

// A Share is the ranges r of a delta with r % N == I: a delta of N
// shares goes over N streams at once, each with its own window, and
// ApplyShares rebuilds the file from them. Ranges taken in turn spread
// a change of several ranges over the streams. The zero Share, or one
// of N 1, is every range.
type Share struct{ N, I int }

// ShareOf is share i of a delta in n shares: the zero Share, every
// range, where n is 1 or less, so that the same delta's share is always
// the same value.
func ShareOf(n, i int) Share {
	if n <= 1 {
		return Share{}
	}
	return Share{N: n, I: i}
}

// Whole says the share is every range.
func (s Share) Whole() bool { return s.N <= 1 }

// of is how many of n ranges are the share's.
func (s Share) of(n int64) int64 {
	if s.Whole() {
		return n
	}
	if int64(s.I) >= n {
		return 0
	}
	return (n-int64(s.I)-1)/int64(s.N) + 1
}

// has says whether range r is the share's.
func (s Share) has(r int64) bool { return s.Whole() || r%int64(s.N) == int64(s.I) }

// MaxShares bounds a delta's shares.
const MaxShares = 16

// valid says whether s is a share a delta can be cut into.
func (s Share) valid() bool {
	return s.N == 0 && s.I == 0 || s.N >= 1 && s.N <= MaxShares && s.I >= 0 && s.I < s.N
}

// InPlaceMark is the size a file being rewritten in place (--inplace) is
// given before the first write, old its size then and size the new
// file's: a byte longer than both, so that the old bytes a delta may
// still read stay, and it is cut to size only once every byte is
// written. A run cut in between leaves a file whose size is not the
// source's, so that no later run's quick check takes it, part
// rewritten, for a copy made (its time may well be the source's to the
// second: a source written while it was copied).
func InPlaceMark(old, size int64) int64 { return max(old, size) + 1 }

// InPlaceOK says whether a delta applied over its basis may copy the
// basis's n bytes at off to at, in the range of the new file that ends at
// rangeEnd, the new file being size bytes: the bytes are already there
// (off == at), or no write will have reached them before they are read,
// the ranges being written at once, each from its start on. Bytes at or
// past size are never written; those from at to rangeEnd only by this
// range's later writes.
func InPlaceOK(off, n, at, rangeEnd, size int64) bool {
	return off == at || off >= size || off >= at && min(off+n, size) <= rangeEnd
}

// DefaultRangeLen is the length of a range when DiffOptions does not say;
// SharedRangeLen of a delta in shares, cut finer so that a change a few
// ranges long spreads over them.
const (
	DefaultRangeLen = 32 << 20
	SharedRangeLen  = 8 << 20
)

// litChunk is how many unmatched bytes a matcher holds before it sends
// them.
const litChunk = 256 << 10

// Diff reads the new file src of size bytes and writes to w the delta
// that rebuilds it from the basis sig describes. The ranges are diffed
// on several goroutines, each sending whole records to w, which is
// written by one goroutine at a time.
func Diff(ctx context.Context, sig *Signature, src io.ReaderAt, size int64, w io.Writer, o DiffOptions) (Stats, error) {
	if size < 0 || size > MaxSize {
		return Stats{}, fmt.Errorf("delta: size %d out of bounds", size)
	}
	if !o.Share.valid() {
		return Stats{}, fmt.Errorf("delta: share %d of %d", o.Share.I, o.Share.N)
	}
	bl := int64(sig.BlockLen)
	rl := o.RangeLen
	switch {
	case rl > 0:
	case !o.Share.Whole():
		rl = SharedRangeLen
	default:
		rl = DefaultRangeLen
	}
	rl = max((rl+bl-1)/bl*bl, bl)
	h := Header{Size: size, BlockLen: sig.BlockLen, BasisSize: sig.Size, RangeLen: rl}
	if h.Ranges() > MaxRanges {
		rl = (size + MaxRanges - 1) / MaxRanges
		h.RangeLen = (rl + bl - 1) / bl * bl
	}
	var mu sync.Mutex
	write := func(p []byte) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := w.Write(p)
		return err
	}
	if err := write(appendHeader(nil, h)); err != nil {
		return Stats{}, err
	}
	var x *index
	if !o.InPlace && o.Blocks == nil {
		x = newIndex(sig)
	}
	// whole is the index of the whole signature, made once, where it
	// streams (Blocks).
	var (
		wholeOnce sync.Once
		whole     *index
		wholeErr  error
	)
	wholeIndex := func() (*index, error) {
		wholeOnce.Do(func() {
			full, err := o.Blocks(ctx, Blocks(sig.Size, sig.BlockLen))
			if err != nil {
				wholeErr = err
				return
			}
			whole = newIndex(full)
		})
		return whole, wholeErr
	}
	n := h.Ranges()
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = int(min(int64(workers), max(o.Share.of(n), 1)))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		total Stats
	)
	q := &rangeQueue{n: n, whole: make(chan struct{}), step: 1}
	if !o.Share.Whole() {
		q.next, q.step = int64(o.Share.I), int64(o.Share.N)
	}
	// Once a range was put off, the whole signature's index is made as
	// soon as the signature is all there, which the ranges put off are
	// then taken first for.
	var waitWhole sync.Once
	// sentAhead is what each range put off sent ahead, aheadLeft what a
	// range may send still.
	var (
		amu       sync.Mutex
		sentAhead = map[int64][]span{}
		aheadLeft = int64(MaxAhead)
	)
	if !o.Ahead || o.InPlace {
		aheadLeft = 0
	}
	aheadBudget := func() int64 {
		amu.Lock()
		defer amu.Unlock()
		return aheadLeft
	}
	// takeAhead takes up to n bytes of what may still be sent ahead.
	takeAhead := func(n int64) int64 {
		amu.Lock()
		defer amu.Unlock()
		n = min(n, aheadLeft)
		aheadLeft -= n
		return n
	}
	putOff := func(r int64, lits []aheadSpan) error {
		waitWhole.Do(func() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wholeIndex()
				close(q.whole)
			}()
		})
		sent, err := sendAhead(ctx, r, lits, q.whole, takeAhead, write)
		amu.Lock()
		sentAhead[r] = sent
		for _, sp := range sent {
			total.Literal += sp.n
		}
		amu.Unlock()
		q.putOff(r)
		return err
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := matcher{x: x, src: src, size: size, inPlace: o.InPlace, buf: make([]byte, 0, litChunk+2*sig.BlockLen+(4<<20))}
			m.out.flush = write
			for {
				r, again, ok := q.take(ctx)
				if !ok {
					return
				}
				start := r * h.RangeLen
				length := min(h.RangeLen, size-start)
				if o.InPlace {
					// The range's own blocks, as far as the basis has
					// them.
					nb := Blocks(sig.Size, sig.BlockLen)
					lo, hi := min(start/bl, nb), min((start+length+bl-1)/bl, nb)
					view := sig
					if o.Blocks != nil {
						var err error
						if view, err = o.Blocks(ctx, hi); err != nil {
							cancel(err)
							continue
						}
					}
					m.x = newRangeIndex(view, int(lo), int(hi))
				}
				var (
					st  Stats
					err error
				)
				switch {
				case again:
					amu.Lock()
					m.ahead = sentAhead[r]
					delete(sentAhead, r)
					amu.Unlock()
					if m.x, err = wholeIndex(); err == nil {
						st, err = m.diffRange(ctx, r, start, length)
					}
					m.ahead = nil
				case !o.InPlace && o.Blocks != nil:
					var (
						later bool
						lits  []aheadSpan
					)
					st, later, lits, err = m.diffNear(ctx, sig, r, start, length, h.RangeLen, wholeIndex, o.Blocks, write, aheadBudget())
					if later && err == nil {
						if err := putOff(r, lits); err != nil {
							cancel(err)
						}
						continue
					}
				default:
					st, err = m.diffRange(ctx, r, start, length)
				}
				if err != nil {
					cancel(err)
					continue
				}
				amu.Lock()
				total.Add(st)
				amu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return Stats{}, err
	}
	if err := write([]byte{recDone}); err != nil {
		return Stats{}, err
	}
	return total, nil
}

// diffNear diffs range r (length bytes from start) for a fresh file as
// the signature (sig its block length and basis size) streams in
// (DiffOptions.Blocks): against the blocks near it once they are there,
// its records held, and sent if they matched 7/8 of its bytes or more;
// else (later) it is to be diffed again against the whole signature once
// that is there, and nothing of it is sent. Where the signature is all
// there already, it is diffed against all of it, its records sent as
// they come.
//
// A range put off gives, with budget more than 0, its literal bytes as
// they were against the blocks near it, up to budget bytes: what may be
// sent ahead (DiffOptions.Ahead).
func (m *matcher) diffNear(ctx context.Context, sig *Signature, r, start, length, rangeLen int64, wholeIndex func() (*index, error), blocks func(context.Context, int64) (*Signature, error), write func([]byte) error, budget int64) (st Stats, later bool, lits []aheadSpan, err error) {
	bl := int64(sig.BlockLen)
	nb := Blocks(sig.Size, sig.BlockLen)
	near := rangeLen / bl
	lo, hi := max(start/bl-near, 0), min((start+length+bl-1)/bl+near, nb)
	lo = min(lo, hi)
	view, err := blocks(ctx, hi)
	if err != nil {
		return Stats{}, false, nil, err
	}
	if int64(len(view.Weak)) < nb {
		var held []byte
		m.x = newRangeIndex(view, int(lo), int(hi))
		m.out.flush = func(p []byte) error {
			held = append(held, p...)
			return nil
		}
		if budget > 0 {
			m.lits = func(at int64, p []byte) {
				if n := min(int64(len(p)), budget); n > 0 {
					lits = append(lits, aheadSpan{at: at, data: append([]byte(nil), p[:n]...)})
					budget -= n
				}
			}
		}
		st, err := m.diffRange(ctx, r, start, length)
		m.out.flush, m.lits = write, nil
		if err != nil {
			return st, false, nil, err
		}
		if st.Literal*8 <= length {
			return st, false, nil, write(held)
		}
		return Stats{}, true, lits, nil
	}
	if m.x, err = wholeIndex(); err != nil {
		return Stats{}, false, nil, err
	}
	st, err = m.diffRange(ctx, r, start, length)
	return st, false, nil, err
}

// A span is n bytes of a range from at.
type span struct{ at, n int64 }

// addSpan adds sp to spans, in order and each past the last, joining it
// to the last where it follows on.
func addSpan(spans []span, sp span) []span {
	if k := len(spans); k > 0 && spans[k-1].at+spans[k-1].n == sp.at {
		spans[k-1].n += sp.n
		return spans
	}
	return append(spans, sp)
}

// sendAhead sends lits, range r's literal bytes as a diff against the
// blocks near it found them, in 'A' records, until whole is closed (the
// signature is all there: the range is then diffed again at once) or
// take gives no more bytes to send; it returns the spans it sent.
func sendAhead(ctx context.Context, r int64, lits []aheadSpan, whole <-chan struct{}, take func(int64) int64, write func([]byte) error) (sent []span, err error) {
	var rec []byte
	for _, l := range lits {
		for at, p := l.at, l.data; len(p) > 0; {
			select {
			case <-whole:
				return sent, nil
			case <-ctx.Done():
				return sent, context.Cause(ctx)
			default:
			}
			n := take(min(int64(len(p)), aheadRecord))
			if n == 0 {
				return sent, nil
			}
			rec = appendAhead(rec[:0], r, at, p[:n])
			if err := write(rec); err != nil {
				return sent, err
			}
			sent = addSpan(sent, span{at, n})
			at, p = at+n, p[n:]
		}
	}
	return sent, nil
}

// A rangeQueue hands a delta's ranges to its workers: each in order, and
// the ranges put off until the whole signature is there (diffNear's
// later) once it is, before any other; or, with no other left, to wait
// for it. A worker stops once there is none left: a range is put off
// only by a worker, which then comes back for more.
type rangeQueue struct {
	mu    sync.Mutex
	next  int64 // the next range in order
	step  int64 // from one range to the next: a share's N
	n     int64
	later []int64
	whole chan struct{} // closed once the whole signature's index is made
}

func (q *rangeQueue) take(ctx context.Context) (r int64, again, ok bool) {
	if ctx.Err() != nil {
		return 0, false, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	ready := false
	select {
	case <-q.whole:
		ready = true
	default:
	}
	if len(q.later) > 0 && (ready || q.next >= q.n) {
		r, q.later = q.later[0], q.later[1:]
		return r, true, true
	}
	if q.next < q.n {
		q.next += q.step
		return q.next - q.step, false, true
	}
	return 0, false, false
}

func (q *rangeQueue) putOff(r int64) {
	q.mu.Lock()
	q.later = append(q.later, r)
	q.mu.Unlock()
}

// A matcher diffs ranges one after another, keeping its buffer.
type matcher struct {
	x       *index
	src     io.ReaderAt
	size    int64 // the new file's
	inPlace bool  // DiffOptions.InPlace
	buf     []byte
	out     recordWriter
	// ahead is what the far end holds of the range, sent ahead: literal
	// bytes there go as 'S' records. lits, where set, is given the
	// range's literal bytes and where they are in it.
	ahead []span
	lits  func(at int64, p []byte)
}

// literal writes p, range r's bytes from at, as 'S' records where the
// far end holds them (ahead) and as literal records elsewhere, and
// returns how many went as literal records.
func (m *matcher) literal(r, at int64, p []byte) (int64, error) {
	var lit int64
	for len(p) > 0 {
		n, held := int64(len(p)), false
		for _, sp := range m.ahead {
			switch {
			case sp.at+sp.n <= at:
				continue
			case sp.at <= at:
				n, held = min(n, sp.at+sp.n-at), true
			default:
				n = min(n, sp.at-at)
			}
			break
		}
		var err error
		if held {
			err = m.out.sent(r, n)
		} else {
			err = m.out.literal(r, p[:n])
			lit += n
		}
		if err != nil {
			return lit, err
		}
		at, p = at+n, p[n:]
	}
	return lit, nil
}

// diffRange writes the records of range r, which is the new file's
// length bytes from start.
func (m *matcher) diffRange(ctx context.Context, r, start, length int64) (Stats, error) {
	var (
		sig   = m.x.sig
		bl    = sig.BlockLen
		h     = xxh3.New()
		data  = m.buf[:0] // the range's bytes from base on
		base  int64       // range offset of data[0]
		read  int64       // range offset read up to
		pos   int         // window's start in data
		lit   int         // unsent bytes' start in data
		a, b  uint32
		valid bool
		run   struct{ block, count int64 }
		st    = Stats{Ranges: 1}
		// usable, over the basis in place, says whether a block may be
		// copied to the window's place (InPlaceOK).
		usable func(block int64) bool
	)
	if m.inPlace {
		usable = func(block int64) bool {
			at := start + base + int64(pos)
			return InPlaceOK(block*int64(bl), int64(sig.blockLenAt(int(block))), at, start+length, m.size)
		}
	}
	sendRun := func() error {
		if run.count == 0 {
			return nil
		}
		err := m.out.copyBlocks(r, run.block, run.count)
		run.count = 0
		return err
	}
	sendLiteral := func(end int) error {
		if end == lit {
			return nil
		}
		if err := sendRun(); err != nil {
			return err
		}
		if m.lits != nil {
			m.lits(base+int64(lit), data[lit:end])
		}
		n, err := m.literal(r, base+int64(lit), data[lit:end])
		st.Literal += n
		lit = end
		return err
	}
	// fill keeps data from lit on and reads on until want bytes are in
	// data from pos or the range is all read.
	fill := func(want int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if lit > 0 {
			kept := copy(data[:cap(data)], data[lit:])
			data = data[:kept]
			base += int64(lit)
			pos -= lit
			lit = 0
		}
		for len(data)-pos < want && read < length {
			room := data[len(data):cap(data)]
			room = room[:min(int64(len(room)), length-read)]
			got, err := m.src.ReadAt(room, start+read)
			if got < len(room) && (err == nil || err == io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			h.Write(room[:got])
			data = data[:len(data)+got]
			read += int64(got)
			if err != nil && got < len(room) {
				return fmt.Errorf("delta: read at %d: %w", start+read, err)
			}
		}
		return nil
	}
	for {
		rest := length - (base + int64(pos))
		if rest < int64(bl) {
			break
		}
		if len(data)-pos < bl+1 && read < length {
			if err := fill(bl + 1); err != nil {
				return Stats{}, err
			}
			valid = false
			continue
		}
		window := data[pos : pos+bl]
		prefer := run.block + run.count
		blk, found := int64(-1), false
		if !valid && run.count > 0 && lit == pos && m.x.has(prefer) && sig.blockLenAt(int(prefer)) == bl &&
			(usable == nil || usable(prefer)) && sig.Strong[prefer] == strong(window) {
			// A run of blocks goes on where the window is the block
			// after the last one matched, which is checked on its strong
			// sum alone: the weak sum and the index are for finding a
			// block, and the range's hash checks every byte whatever
			// matched.
			blk, found = prefer, true
		}
		if !found {
			if !valid {
				a, b = weak(window)
				valid = true
			}
			if w := pack(a, b); m.x.maybe(w) {
				if at := start + base + int64(pos); m.inPlace && run.count == 0 && at%int64(bl) == 0 {
					prefer = at / int64(bl) // the block already in place
				}
				blk, found = m.x.find(w, window, prefer, usable)
			}
		}
		if found {
			if err := sendLiteral(pos); err != nil {
				return Stats{}, err
			}
			if run.count > 0 && blk == prefer {
				run.count++
			} else {
				if err := sendRun(); err != nil {
					return Stats{}, err
				}
				run.block, run.count = blk, 1
			}
			st.Matched += int64(bl)
			pos += bl
			lit = pos
			valid = false
			continue
		}
		// No block here: roll on, byte by byte, to the next window the
		// filter lets through, the buffer's end or a chunk's worth of
		// bytes to send.
		end := min(len(data)-bl, lit+litChunk)
		for {
			if pos >= end {
				valid = pos+bl < len(data)
				if valid {
					a, b = roll(a, b, uint32(bl), data[pos], data[pos+bl])
				}
				pos++
				break
			}
			a, b = roll(a, b, uint32(bl), data[pos], data[pos+bl])
			pos++
			if m.x.maybe(pack(a, b)) {
				break
			}
		}
		if pos-lit >= litChunk {
			if err := sendLiteral(pos); err != nil {
				return Stats{}, err
			}
		}
	}
	// The tail, shorter than a block: the basis's short last block, or
	// bytes to send.
	rest := int(length - (base + int64(pos)))
	if err := fill(rest); err != nil {
		return Stats{}, err
	}
	if rest > 0 {
		tail := data[pos : pos+rest]
		prefer := int64(-1)
		if at := start + base + int64(pos); m.inPlace && at%int64(bl) == 0 {
			prefer = at / int64(bl)
		}
		if blk, ok := m.x.find(pack(weak(tail)), tail, prefer, usable); ok {
			if err := sendLiteral(pos); err != nil {
				return Stats{}, err
			}
			if err := sendRun(); err != nil {
				return Stats{}, err
			}
			run.block, run.count = blk, 1
			st.Matched += int64(rest)
			lit = pos + rest
		}
		pos += rest
	}
	if err := sendLiteral(pos); err != nil {
		return Stats{}, err
	}
	if err := sendRun(); err != nil {
		return Stats{}, err
	}
	if read != length {
		return Stats{}, fmt.Errorf("delta: range %d read %d of %d bytes", r, read, length)
	}
	return st, m.out.end(r, h.Sum128().Bytes())
}
