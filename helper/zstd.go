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
	sent  bool // a frame went: a stream holds at least one
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
	_, err := z.w.Write(z.frame)
	z.gov.record(compress, len(z.buf), len(z.frame), time.Since(start))
	z.buf, z.sent = z.buf[:0], true
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

// zgov decides, frame by frame, whether a compressed delta's next frame
// goes compressed, by what each way has cost lately: the time to make a
// frame and write it, for each byte of the delta. Written where the link
// is full, a frame waits for it, longer the more bytes it has; where the
// link has room, only the making counts, and storing costs next to
// nothing. The governor runs a window of zwindow frames one way, and
// every zprobe windows one the other way to see what that costs now; it
// turns when the other way cost less than zturn of this one's.
type zgov struct {
	mu     sync.Mutex
	stored bool // the current way: storing, not compressing
	probe  bool // the current window is a probe of the other way
	frames int  // of the current window
	in     int64
	cost   time.Duration
	// per is each way's last cost a byte (compressed, stored), known
	// once it has had a window; since counts windows since the last
	// probe.
	per   [2]float64
	known [2]bool
	since int
	// bytes in and out of each way, for the counts a -v report gives.
	totalIn, totalOut [2]int64
}

const (
	zwindow = 16 // frames: 4 MiB of the delta
	zprobe  = 8  // windows between probes
	zturn   = 0.9
)

// compress says how the next frame goes.
func (g *zgov) compress() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stored == g.probe
}

// record tells the governor of a frame of in bytes sent as out, which
// took took to make and write.
func (g *zgov) record(compressed bool, in, out int, took time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	way := 0
	if !compressed {
		way = 1
	}
	g.totalIn[way] += int64(in)
	g.totalOut[way] += int64(out)
	if compressed != (g.stored == g.probe) {
		return // decided before the governor turned
	}
	g.frames++
	g.in += int64(in)
	g.cost += took
	if g.frames < zwindow {
		return
	}
	per := float64(g.cost) / float64(max(g.in, 1))
	g.frames, g.in, g.cost = 0, 0, 0
	g.per[way], g.known[way] = per, true
	other := 1 - way
	if g.probe {
		// The probe's way is the cheaper: it becomes the way.
		g.probe = false
		if per < zturn*g.per[other] {
			g.stored = !g.stored
		}
		g.since = 0
		return
	}
	if g.since++; !g.known[other] || g.since >= zprobe {
		g.probe = true
	}
}

// Counts are the delta bytes the governor's frames took in and sent,
// compressed and stored.
func (g *zgov) Counts() (compressedIn, compressedOut, stored int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totalIn[0], g.totalOut[0], g.totalIn[1]
}
