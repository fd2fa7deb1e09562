package delta

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/zeebo/xxh3"
)

// Basis is what Apply rebuilds from: the basis file and the block length
// and size its Signature was made with. A delta made against another
// signature is refused before anything is written.
type Basis struct {
	R        io.ReaderAt
	Size     int64
	BlockLen int
	// InPlace says the new file is written over the basis, out being the
	// basis file (rsync's --inplace): the delta must then refer only to
	// blocks InPlaceOK allows, and blocks already at their place are read
	// (for the range's hash) but not written. The caller truncates the
	// file to the header's size afterwards.
	InPlace bool
	// Under says out already holds the basis's bytes at their offsets,
	// out being a clone of it (a temporary file whose blocks the file
	// system shares with the basis): a block copied to its own offset is
	// read from R for the range's hash and not written, so that only
	// what moved or changed is. The delta may refer to any block, R
	// being the basis itself, which out's writes do not change. The
	// caller checks that the basis did not change from the clone until
	// Apply returned (clone.Clone.Finish), for the bytes hashed are the basis's,
	// and truncates out to the header's size.
	Under bool
}

// Apply reads a delta from r and writes the new file it describes to out,
// rebuilding its blocks from b. size is the new file's size the caller
// expects (the one it listed), or -1 for any. It returns the delta's
// header, which gives the size written.
//
// Each range is checked against the hash of what its sender read; a range
// that does not match is ErrMismatch, and out then holds bytes that are
// not the new file. out is written at offsets below the header's size
// only, and Apply never truncates or extends it otherwise: the caller
// gives it a fresh file (or the basis, InPlace, or a clone of it, Under).
//
// The records are read and checked here, in order; the reading of the
// basis, the writing and the hashing are done by a goroutine per CPU,
// each range by one of them.
func Apply(ctx context.Context, r io.Reader, b Basis, out io.WriterAt, size int64) (Header, Stats, error) {
	return ApplyShares(ctx, []io.Reader{r}, b, out, size)
}

// ApplyShares is Apply of a delta striped over the streams rs, rs[i]
// bringing share {len(rs), i} of its ranges (DiffOptions.Share), all read
// at once. Every stream's header must be the same, and each must end
// every range of its share and no other.
func ApplyShares(ctx context.Context, rs []io.Reader, b Basis, out io.WriterAt, size int64) (Header, Stats, error) {
	if len(rs) < 1 || len(rs) > MaxShares {
		return Header{}, Stats{}, fmt.Errorf("apply delta: %d shares", len(rs))
	}
	shares := make([]Share, len(rs))
	for i := range rs {
		shares[i] = ShareOf(len(rs), i)
	}
	return applyStreams(ctx, rs, shares, b, out, size)
}

// ApplyShare is Apply of one share of a delta, read from r: the other
// shares go into out by other means (another process's ApplyShare,
// writing the same file), and r must end every range of share sh and no
// other.
func ApplyShare(ctx context.Context, r io.Reader, sh Share, b Basis, out io.WriterAt, size int64) (Header, Stats, error) {
	if !sh.valid() {
		return Header{}, Stats{}, fmt.Errorf("apply delta: share %d of %d", sh.I, sh.N)
	}
	return applyStreams(ctx, []io.Reader{r}, []Share{sh}, b, out, size)
}

// applyStreams applies the shares of a delta from rs, rs[i] bringing
// shares[i].
func applyStreams(ctx context.Context, rs []io.Reader, shares []Share, b Basis, out io.WriterAt, size int64) (Header, Stats, error) {
	ds := make([]decoder, len(rs))
	hs := make([]Header, len(rs))
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		ds[i] = decoder{r: asByteReader(r)}
		wg.Go(func() { hs[i], errs[i] = ds[i].header() })
	}
	wg.Wait()
	h := hs[0]
	for i, err := range errs {
		switch {
		case err != nil:
			return h, Stats{}, fmt.Errorf("apply delta: %w", err)
		case hs[i] != h:
			return h, Stats{}, fmt.Errorf("apply delta: %w: the shares' headers differ", ErrFormat)
		}
	}
	switch {
	case h.BlockLen != b.BlockLen || h.BasisSize != b.Size:
		return h, Stats{}, fmt.Errorf("apply delta: %w: made against %d bytes in blocks of %d, basis is %d in blocks of %d",
			ErrFormat, h.BasisSize, h.BlockLen, b.Size, b.BlockLen)
	case size >= 0 && h.Size != size:
		return h, Stats{}, fmt.Errorf("apply delta: %w: for %d bytes, expected %d", ErrFormat, h.Size, size)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a := &applier{h: h, b: b, out: out, open: map[int64]*rangeState{}, done: make([]uint64, (h.Ranges()+63)/64),
		blocks: Blocks(b.Size, b.BlockLen), fail: cancel, ahead: map[int64]*aheadRange{}, aheadMax: MaxAhead * int64(len(rs))}
	a.start(ctx, runtime.GOMAXPROCS(0))
	for i := range rs {
		wg.Go(func() {
			if err := a.read(ctx, &ds[i], shares[i]); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	a.stop()
	if err := context.Cause(ctx); err != nil {
		return h, a.st, fmt.Errorf("apply delta: %w", err)
	}
	return h, a.st, nil
}

// read checks the records of share sh and hands them to the workers,
// until the share's end.
func (a *applier) read(ctx context.Context, d *decoder, sh Share) error {
	var ended int64
	for {
		if ctx.Err() != nil {
			return nil // the cause is the workers'
		}
		rec, err := d.next()
		if err != nil {
			return err
		}
		if rec.kind == recDone {
			if want := sh.of(a.h.Ranges()); ended != want {
				return formatErr("ended with %d of %d ranges", ended, want)
			}
			return nil
		}
		if !sh.has(rec.rng) {
			return formatErr("range %d in share %d of %d", rec.rng, sh.I, sh.N)
		}
		if rec.kind == recEnd {
			ended++
		}
		a.mu.Lock()
		j, err := a.check(rec)
		a.mu.Unlock()
		if err != nil {
			return err
		}
		// An 'A' record makes no job: its bytes are held (hold).
		if j.s != nil && !a.send(ctx, j) {
			return nil
		}
	}
}

// A rangeState is a range being rebuilt: at is where the next byte goes
// as the records say (the reader's), h the hash of what was written (its
// worker's).
type rangeState struct {
	at, end int64
	h       *xxh3.Hasher
}

// A job is one record's work: write data, or count bytes of the basis
// from off, at at; or, when sum is set, check the range's hash.
type job struct {
	s    *rangeState
	rng  int64
	at   int64
	data []byte // a literal's bytes, the worker's to give back
	// kept says data is bytes sent ahead, held by the applier (not a
	// literal's buffer).
	kept   bool
	off, n int64
	sum    *RangeSum
}

// aheadRange is what a range's 'A' records brought, held until its 'S'
// records write it: spans in order, each past the last, cur the first
// one an 'S' may still take from.
type aheadRange struct {
	spans []aheadSpan
	cur   int
}

type aheadSpan struct {
	at   int64 // in the range
	data []byte
}

func (s aheadSpan) end() int64 { return s.at + int64(len(s.data)) }

type applier struct {
	h      Header
	b      Basis
	blocks int64
	out    io.WriterAt
	fail   context.CancelCauseFunc

	// mu guards the ranges' states and the counts, which the shares'
	// readers check their records against.
	mu   sync.Mutex
	open map[int64]*rangeState
	done []uint64
	st   Stats
	// ahead holds the bytes sent ahead for ranges not yet ended,
	// aheadHeld bytes in all, up to aheadMax (MaxAhead a stream).
	ahead     map[int64]*aheadRange
	aheadHeld int64
	aheadMax  int64

	jobs []chan job
	free chan []byte // literal buffers, back from the workers
	wg   sync.WaitGroup
	// inFlight counts the literal bytes handed to the workers and not yet
	// written, up to applyBudget: the reader takes the stream off the
	// network as fast as it comes rather than at the pace of the writes,
	// so that a channel's window stays open and its connection's
	// congestion window busy (a stream paced by the writes went idle
	// between bursts, and each burst began from a small window again).
	inFlight   int64
	flightCond *sync.Cond
	flightMu   sync.Mutex
	// wmu has the workers write one at a time: a file's writes hold its
	// inode lock in the kernel, and a second writer spun on it, at twice
	// the CPU of the writes themselves (tmpfs, 1 GiB).
	wmu sync.Mutex
}

// applyBudget bounds the literal bytes Apply holds for its workers.
const applyBudget = 64 << 20

func (a *applier) start(ctx context.Context, n int) {
	a.free = make(chan []byte, 4*n)
	a.flightCond = sync.NewCond(&a.flightMu)
	context.AfterFunc(ctx, func() {
		a.flightMu.Lock()
		a.flightCond.Broadcast()
		a.flightMu.Unlock()
	})
	for range n {
		ch := make(chan job, 1024)
		a.jobs = append(a.jobs, ch)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			buf := make([]byte, 1<<20)
			for j := range ch {
				if ctx.Err() != nil {
					continue
				}
				if err := a.work(j, buf); err != nil {
					a.fail(err)
				}
			}
		}()
	}
}

func (a *applier) stop() {
	for _, ch := range a.jobs {
		close(ch)
	}
	a.wg.Wait()
}

// send hands j to its range's worker; false once the apply has failed.
func (a *applier) send(ctx context.Context, j job) bool {
	if n := int64(len(j.data)); n > 0 && !j.kept {
		a.flightMu.Lock()
		for a.inFlight > 0 && a.inFlight+n > applyBudget && ctx.Err() == nil {
			a.flightCond.Wait()
		}
		a.inFlight += n
		a.flightMu.Unlock()
		if ctx.Err() != nil {
			return false
		}
	}
	select {
	case a.jobs[j.rng%int64(len(a.jobs))] <- j:
		return true
	case <-ctx.Done():
		return false
	}
}

// literal is a buffer of n bytes for a literal's data.
func (a *applier) literal(p []byte) []byte {
	var b []byte
	select {
	case b = <-a.free:
	default:
	}
	if cap(b) < len(p) {
		b = make([]byte, len(p), max(len(p), 64<<10))
	}
	b = b[:len(p)]
	copy(b, p)
	return b
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
	s := &rangeState{at: start, end: min(start+a.h.RangeLen, a.h.Size), h: xxh3.New()}
	a.open[r] = s
	a.st.Ranges++
	return s, nil
}

// check checks rec against the header, the basis and its range's bytes
// so far, and makes its job.
func (a *applier) check(rec record) (job, error) {
	if rec.kind == recAhead {
		return job{}, a.hold(rec)
	}
	s, err := a.state(rec.rng)
	if err != nil {
		return job{}, err
	}
	j := job{s: s, rng: rec.rng, at: s.at}
	switch rec.kind {
	case recSent:
		span, err := a.sentSpan(rec.rng, s.at-rec.rng*a.h.RangeLen, rec.a)
		if err != nil {
			return job{}, err
		}
		if rec.a > s.end-s.at {
			return job{}, formatErr("range %d: %d bytes sent ahead past its end", rec.rng, rec.a)
		}
		from := s.at - rec.rng*a.h.RangeLen - span.at
		j.data, j.kept = span.data[from:from+rec.a], true
		s.at += rec.a
	case recLiteral:
		if int64(len(rec.data)) > s.end-s.at {
			return job{}, formatErr("range %d: %d literal bytes past its end", rec.rng, len(rec.data))
		}
		a.st.Literal += int64(len(rec.data))
		j.data = a.literal(rec.data)
		s.at += int64(len(rec.data))
	case recCopy:
		block, count := rec.a, rec.b
		if count < 1 || block >= a.blocks || count > a.blocks-block {
			return job{}, formatErr("range %d: blocks %d+%d of %d", rec.rng, block, count, a.blocks)
		}
		j.off = block * int64(a.b.BlockLen)
		j.n = min((block+count)*int64(a.b.BlockLen), a.b.Size) - j.off
		if j.n > s.end-s.at {
			return job{}, formatErr("range %d: %d bytes of blocks past its end", rec.rng, j.n)
		}
		if a.b.InPlace && !InPlaceOK(j.off, j.n, s.at, s.end, a.h.Size) {
			return job{}, formatErr("range %d: blocks %d+%d at %d, which writing in place will have changed", rec.rng, block, count, s.at)
		}
		a.st.Matched += j.n
		s.at += j.n
	case recEnd:
		if s.at != s.end {
			return job{}, formatErr("range %d ended %d bytes short", rec.rng, s.end-s.at)
		}
		sum := rec.sum
		j.sum = &sum
		if ar := a.ahead[rec.rng]; ar != nil {
			for _, sp := range ar.spans {
				a.aheadHeld -= int64(len(sp.data))
			}
			delete(a.ahead, rec.rng)
		}
		delete(a.open, rec.rng)
		a.done[rec.rng/64] |= 1 << (rec.rng % 64)
	default:
		return job{}, formatErr("record kind %#x", rec.kind)
	}
	return j, nil
}

// hold keeps an 'A' record's bytes for its range, which must not have
// begun: they are written only where an 'S' record says.
func (a *applier) hold(rec record) error {
	r, n := rec.rng, int64(len(rec.data))
	switch {
	case r >= a.h.Ranges():
		return formatErr("range %d of %d", r, a.h.Ranges())
	case a.b.InPlace:
		return formatErr("range %d: bytes sent ahead of a delta in place", r)
	case a.open[r] != nil || a.done[r/64]&(1<<(r%64)) != 0:
		return formatErr("range %d: bytes sent ahead after its start", r)
	case n == 0:
		return formatErr("range %d: an empty record of bytes sent ahead", r)
	case a.aheadHeld+n > a.aheadMax:
		return formatErr("more than %d bytes sent ahead", a.aheadMax)
	}
	ar := a.ahead[r]
	if ar == nil {
		if len(a.ahead) >= MaxOpen {
			return formatErr("more than %d ranges sent ahead", MaxOpen)
		}
		ar = &aheadRange{}
		a.ahead[r] = ar
	}
	length := min(a.h.RangeLen, a.h.Size-r*a.h.RangeLen)
	if k := len(ar.spans); k > 0 && rec.a < ar.spans[k-1].end() || rec.a > length-n {
		return formatErr("range %d: %d bytes sent ahead at %d, out of order or past its end", r, n, rec.a)
	}
	if k := len(ar.spans); k > 0 && ar.spans[k-1].end() == rec.a {
		ar.spans[k-1].data = append(ar.spans[k-1].data, rec.data...)
	} else {
		ar.spans = append(ar.spans, aheadSpan{at: rec.a, data: append([]byte(nil), rec.data...)})
	}
	a.aheadHeld += n
	a.st.Literal += n
	return nil
}

// sentSpan is the span sent ahead for range r that holds its n bytes
// from at (both in the range).
func (a *applier) sentSpan(r, at, n int64) (aheadSpan, error) {
	ar := a.ahead[r]
	if ar != nil {
		for ar.cur < len(ar.spans) && ar.spans[ar.cur].end() <= at {
			ar.cur++
		}
		if ar.cur < len(ar.spans) && n > 0 {
			if sp := ar.spans[ar.cur]; sp.at <= at && at+n <= sp.end() {
				return sp, nil
			}
		}
	}
	return aheadSpan{}, formatErr("range %d: %d bytes at %d were not sent ahead", r, n, at)
}

// work does j on a worker, with buf for the basis's bytes.
func (a *applier) work(j job, buf []byte) error {
	switch {
	case j.sum != nil:
		if j.s.h.Sum128().Bytes() != *j.sum {
			return fmt.Errorf("range %d (bytes %d to %d): %w", j.rng, j.rng*a.h.RangeLen, j.s.end, ErrMismatch)
		}
	case j.kept:
		return a.write(j.s, j.data, j.at)
	case j.data != nil:
		err := a.write(j.s, j.data, j.at)
		a.flightMu.Lock()
		a.inFlight -= int64(len(j.data))
		a.flightCond.Broadcast()
		a.flightMu.Unlock()
		select {
		case a.free <- j.data:
		default:
		}
		return err
	default:
		at, off := j.at, j.off
		for n := j.n; n > 0; {
			p := buf[:min(n, int64(len(buf)))]
			got, err := a.b.R.ReadAt(p, off)
			if got < len(p) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("read basis at %d: %w", off, err)
			}
			if (a.b.InPlace || a.b.Under) && off == at {
				j.s.h.Write(p) // already there
			} else if err := a.write(j.s, p, at); err != nil {
				return err
			}
			at += int64(len(p))
			off += int64(len(p))
			n -= int64(len(p))
		}
	}
	return nil
}

func (a *applier) write(s *rangeState, p []byte, at int64) error {
	s.h.Write(p)
	a.wmu.Lock()
	_, err := a.out.WriteAt(p, at)
	a.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("write at %d: %w", at, err)
	}
	return nil
}

// Gathered is a delta whose shares come on streams of their own, each
// handed over by the goroutine of its own request (as DiffStream's apply
// is called), applied by ApplyShares once all have come.
type Gathered struct {
	mu        sync.Mutex
	rs        []io.Reader
	in        int
	all, done chan struct{}
	st        Stats
	err       error
}

// Gather waits for the n shares of a delta to come (Gathered.Apply) and
// applies them as ApplyShares would; where ctx ends first, none is.
func Gather(ctx context.Context, n int, b Basis, out io.WriterAt, size int64) *Gathered {
	g := &Gathered{rs: make([]io.Reader, n), all: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		select {
		case <-g.all:
		case <-ctx.Done():
			g.err = context.Cause(ctx)
			return
		}
		_, g.st, g.err = ApplyShares(ctx, g.rs, b, out, size)
	}()
	return g
}

// Apply is share i's: it hands the share's stream over and returns once
// the delta is applied, or failed, with the error; the stream is read
// until then. Each share's is called once.
func (g *Gathered) Apply(i int) func(io.Reader) error {
	return func(r io.Reader) error {
		g.mu.Lock()
		g.rs[i] = r
		if g.in++; g.in == len(g.rs) {
			close(g.all)
		}
		g.mu.Unlock()
		<-g.done
		return g.err
	}
}

// Wait returns what was applied, and the error, once the delta is
// applied or failed.
func (g *Gathered) Wait() (Stats, error) {
	<-g.done
	return g.st, g.err
}
