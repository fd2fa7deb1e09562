package helper

import (
	"encoding/binary"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// A delta sent compressed (-z) is a zstd stream of frames of its own, one
// for every zsegment bytes of the delta: each frame either compressed or
// stored (raw blocks, the delta's bytes as they are), as a governor
// (zgov) at the sending end decides frame by frame. Compression pays where
// the link is what the delta waits on and costs where the CPU is: on a
// fast link, or when the sender's cores are busy diffing, the delta goes
// stored. The reader reads one zstd stream whatever the mix (zstdIn):
// zstd's frames follow one another in a stream, and a stored one is
// the format's own.
const zsegment = 256 << 10

// zstdOut compresses a walk's records into w; Close ends the compressed
// stream (and not the chunked one, which w's end ends).
func zstdOut(w io.Writer) (*zstd.Encoder, error) {
	return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
}

// zstdIn reads a compressed delta or walk from r within bounds: a
// hostile server's stream cannot make it hold more than 64 MiB.
func zstdIn(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecoderMaxMemory(64<<20))
}

// framedOut is a delta's compressed stream into w, a frame every
// zsegment bytes, compressed or stored as gov says; Close sends the last.
type framedOut struct {
	w     io.Writer
	enc   *zstd.Encoder // for EncodeAll only
	gov   *zgov
	buf   []byte // what the next frame holds
	frame []byte
	sent  bool      // a frame went: a stream holds at least one
	last  time.Time // when the frame before was sent
}

func newFramedOut(w io.Writer, gov *zgov) (*framedOut, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zsegment))
	if err != nil {
		return nil, err
	}
	return &framedOut{w: w, enc: enc, gov: gov, buf: make([]byte, 0, zsegment)}, nil
}

func (z *framedOut) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), zsegment-len(z.buf))
		z.buf = append(z.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(z.buf) == zsegment {
			if err := z.send(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// Close sends what is left as the stream's last frame.
func (z *framedOut) Close() error {
	if len(z.buf) > 0 || !z.sent {
		return z.send()
	}
	return nil
}

// send sends the buffered bytes as one frame, compressed or stored, and
// tells the governor what it cost: the frame's making and its write,
// which waits where the link is full.
func (z *framedOut) send() error {
	compress := z.gov.compress()
	start := time.Now()
	if compress {
		z.frame = z.enc.EncodeAll(z.buf, z.frame[:0])
	} else {
		z.frame = appendStoredFrame(z.frame[:0], z.buf)
	}
	made := time.Now()
	_, err := z.w.Write(z.frame)
	end := time.Now()
	all := end.Sub(start)
	if z.sent {
		all = end.Sub(z.last)
	}
	z.gov.record(compress, len(z.buf), len(z.frame), end.Sub(start), end.Sub(made), all)
	z.buf, z.sent, z.last = z.buf[:0], true, end
	return err
}

// appendStoredFrame appends a zstd frame (RFC 8878, section 3.1.1) that
// holds p as it is: the magic number, a header naming a window of
// zsegment bytes and no content size, and p in raw blocks of at most
// 128 KiB, the last one flagged.
func appendStoredFrame(dst, p []byte) []byte {
	const (
		maxBlock = 128 << 10
		// Window_Descriptor: exponent 8 (windowLog 18, 256 KiB),
		// mantissa 0.
		window = (18 - 10) << 3
	)
	dst = binary.LittleEndian.AppendUint32(dst, 0xFD2FB528)
	dst = append(dst, 0, window) // Frame_Header_Descriptor: nothing but the window
	for {
		n := min(len(p), maxBlock)
		last := 0
		if n == len(p) {
			last = 1
		}
		h := uint32(n)<<3 | uint32(last) // Block_Type 0: raw
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, p[:n]...)
		p = p[n:]
		if last == 1 {
			return dst
		}
	}
}

// zgov decides, window by window (zwindow frames), whether a compressed
// delta's frames go compressed or stored, by what each way would cost a
// byte of the delta: the larger of what making it costs the sender (the
// diff, and the compressor or a copy) and what its bytes out cost the
// link, where the link is what the sender waits on. A frame's write waits
// where the buffers on the way (a channel's window, sockets) are full: a
// window that spent a quarter of its time or more writing tells what a
// byte costs the link (its write time over its bytes out); one that did
// not, that the link carried its bytes in the time they took. Until a
// write has waited, the link is taken to cost nothing, and storing wins.
// The governor turns where the other way would cost less than zturn of
// this one. Where the link has bound, it tries the other way for a window
// now and then, after one window, then after twice as many each time (up
// to zevery): the data may have come to shrink more or less, and the link
// to have more room.
type zgov struct {
	mu     sync.Mutex
	stored bool // the way: storing, not compressing
	trying bool // the current window tries the other way
	// the current window
	frames            int
	in, out           int64
	took, wrote, all  time.Duration
	making, ratio     [2]float64 // a byte's making, and bytes out an in, each way (compressed, stored)
	known             [2]bool
	diff              float64  // the time between frames a byte, not sending them
	link              float64  // a byte out's time on the link where it binds; 0 until it has
	windows, every    int      // since the last try, and between tries
	totalIn, totalOut [2]int64 // what each way took in and sent (Counts)
}

const (
	zwindow = 16 // frames: 4 MiB of the delta
	zevery  = 64
	zturn   = 0.9
)

// compress says how the next frame goes.
func (g *zgov) compress() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stored == g.trying
}

// record tells the governor of a frame of in bytes sent as out, which
// took took to make and write, wrote of it the write, and all since the
// frame before (the making of what it holds too: the delta's diff).
func (g *zgov) record(compressed bool, in, out int, took, wrote, all time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	way := 0
	if !compressed {
		way = 1
	}
	g.totalIn[way] += int64(in)
	g.totalOut[way] += int64(out)
	if compressed != (g.stored == g.trying) {
		return // decided before the governor turned
	}
	g.frames++
	g.in += int64(in)
	g.out += int64(out)
	g.took += took
	g.wrote += wrote
	g.all += max(all, took)
	if g.frames < zwindow {
		return
	}
	in64, out64 := float64(max(g.in, 1)), float64(max(g.out, 1))
	g.making[way] = float64(g.took-g.wrote) / in64
	g.ratio[way] = out64 / in64
	g.known[way] = true
	g.diff = float64(g.all-g.took) / in64
	if 4*g.wrote >= g.all {
		g.link = float64(g.wrote) / out64
	} else if g.link > 0 {
		g.link = min(g.link, float64(g.all)/out64)
	}
	g.frames, g.in, g.out, g.took, g.wrote, g.all = 0, 0, 0, 0, 0, 0

	cost := func(w int) float64 {
		if !g.known[w] {
			if w == 0 {
				return 0 // unknown: to be learnt
			}
			return g.diff + g.link // a copy costs next to nothing
		}
		return max(g.diff+g.making[w], g.ratio[w]*g.link)
	}
	here, there := 0, 1
	if g.stored {
		here, there = 1, 0
	}
	if cost(there) < zturn*cost(here) {
		g.stored = !g.stored
	}
	if g.trying {
		g.trying = false
		g.windows, g.every = 0, min(2*max(g.every, 1), zevery)
		return
	}
	if g.windows++; g.link > 0 && g.windows >= max(g.every, 1) {
		g.trying = true
	}
}

// Counts are the delta bytes the governor's frames took in and sent,
// compressed and stored.
func (g *zgov) Counts() (compressedIn, compressedOut, stored int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totalIn[0], g.totalOut[0], g.totalIn[1]
}
