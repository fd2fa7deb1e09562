package stripe

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, f := range []Frame{
		{Kind: KindHello, Payload: []byte("v1")},
		{Kind: KindData, Stream: Stdout, Seq: 1<<40 + 7, Payload: bytes.Repeat([]byte{0xa5}, 1000)},
		{Kind: KindData, Stream: Stdin, Seq: 0, Payload: []byte{}},
		{Kind: KindEOF, Stream: Stderr, Seq: 12},
		{Kind: KindExit, Payload: []byte("status 3")},
		{Kind: KindError, Payload: []byte("cannot start rsync")},
		{Kind: KindClose},
	} {
		var b bytes.Buffer
		if err := WriteFrame(&b, f); err != nil {
			t.Fatalf("write %v: %v", f.Kind, err)
		}
		if b.Len() != HeaderLen+len(f.Payload) {
			t.Errorf("%v frame: %d bytes on the wire, want %d", f.Kind, b.Len(), HeaderLen+len(f.Payload))
		}
		got, err := ReadFrame(&b, nil)
		if err != nil {
			t.Fatalf("read %v: %v", f.Kind, err)
		}
		if got.Kind != f.Kind || got.Stream != f.Stream || got.Seq != f.Seq || !bytes.Equal(got.Payload, f.Payload) {
			t.Errorf("read back %+v, wrote %+v", got, f)
		}
	}
}

func header(kind Kind, stream uint8, flags uint16, n uint32, seq uint64) []byte {
	b := make([]byte, HeaderLen)
	PutHeader(b, kind, stream, seq, int(n))
	b[2], b[3] = byte(flags>>8), byte(flags)
	return b
}

// TestReadFrameRefuses: every frame the protocol does not allow is an
// error wrapping ErrFrame, read before its payload is.
func TestReadFrameRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"unknown kind", header(0, 0, 0, 0, 0)},
		{"kind past the last", header(KindClose+1, 0, 0, 0, 0)},
		{"flags", header(KindData, Stdin, 1, 0, 0)},
		{"data past MaxPayload", header(KindData, Stdout, 0, MaxPayload+1, 0)},
		{"length near 4 GiB", header(KindData, Stdout, 0, 1<<32-1, 0)},
		{"hello past MaxMessage", header(KindHello, 0, 0, MaxMessage+1, 0)},
		{"error past MaxMessage", header(KindError, 0, 0, MaxMessage+1, 0)},
		{"eof with a payload", header(KindEOF, Stdout, 0, 1, 0)},
		{"close with a payload", header(KindClose, 0, 0, 1, 0)},
		{"stream past the last", header(KindData, MaxStreams, 0, 0, 0)},
		{"exit naming a stream", header(KindExit, Stdout, 0, 0, 0)},
	} {
		_, err := ReadFrame(bytes.NewReader(c.b), nil)
		if !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v, want ErrFrame", c.name, err)
		}
	}
	// Cut short: within a header or a payload.
	full := append(header(KindData, Stdin, 0, 4, 0), 1, 2, 3, 4)
	for n := 1; n < len(full); n++ {
		if _, err := ReadFrame(bytes.NewReader(full[:n]), nil); err != io.ErrUnexpectedEOF {
			t.Errorf("frame cut at %d bytes: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	if _, err := ReadFrame(bytes.NewReader(nil), nil); err != io.EOF {
		t.Errorf("no frame: %v, want io.EOF", err)
	}
}

// random fills b with bytes of a seeded generator.
func random(b []byte, seed uint64) {
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
}

// throttled is one connection of a test: a pipe whose writer waits a
// little per write, as a slow or lossy connection does, and fails once
// cut bytes are written (a connection reset mid-stream).
type throttled struct {
	w     *io.PipeWriter
	delay time.Duration
	cut   int // bytes after which writes fail and the reader sees the end; 0: never
	sent  int
}

var errCut = errors.New("connection reset (test)")

func (c *throttled) Write(p []byte) (int, error) {
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	if c.cut > 0 && c.sent+len(p) >= c.cut {
		n := c.cut - c.sent
		c.sent = c.cut
		c.w.Write(p[:n]) // what got out before the reset
		c.w.Close()
		return n, errCut
	}
	c.sent += len(p)
	return c.w.Write(p)
}

// chunky reads its source a random few bytes to a frame's worth at a
// time, as a pipe from a program does.
type chunky struct {
	r   io.Reader
	rng *rand.Rand
	max int
}

func (c *chunky) Read(p []byte) (int, error) {
	n := 1 + c.rng.IntN(min(len(p), c.max))
	return c.r.Read(p[:n])
}

// stripeRun sends src over conns connections as one stream and reads it
// back through a Merger of budget bytes; each connection has a write
// delay from delays and, where cuts gives one, fails after that many
// bytes. It returns what the reader read and its error.
func stripeRun(t *testing.T, seed uint64, src []byte, delays []time.Duration, cuts []int, budget, frame int) ([]byte, error) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	s := NewSender(&chunky{bytes.NewReader(src), rng, cmp.Or(frame, DefaultFrame)}, Stdin, frame)
	m := NewMerger(Stdin, budget)
	var wg sync.WaitGroup
	for i := range delays {
		pr, pw := io.Pipe()
		c := &throttled{w: pw, delay: delays[i]}
		if i < len(cuts) {
			c.cut = cuts[i]
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := s.Run(c); err == nil {
				WriteClose(c)
			}
			pw.Close()
		}()
		go func() {
			defer wg.Done()
			Receive(pr, [MaxStreams]*Merger{Stdin: m}, nil)
			pr.Close()
		}()
	}
	got, err := io.ReadAll(m)
	m.Close()
	wg.Wait()
	return got, err
}

func TestStripedStreamArrivesWhole(t *testing.T) {
	src := make([]byte, 3<<20+12345)
	random(src, 7)
	for _, c := range []struct {
		name   string
		delays []time.Duration
		budget int
		frame  int
	}{
		{"one connection", []time.Duration{0}, 0, 0},
		{"four even connections", []time.Duration{0, 0, 0, 0}, 0, 64 << 10},
		{"a slow one among fast", []time.Duration{0, 0, 2 * time.Millisecond, 0}, 0, 32 << 10},
		{"a budget of two frames", []time.Duration{0, time.Millisecond, 0}, 64 << 10, 32 << 10},
		{"tiny frames", []time.Duration{0, 0}, 0, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(src)
			if c.frame > 0 && c.frame < 1024 {
				n = 200 << 10 // many frames of a few bytes: keep it short
			}
			got, err := stripeRun(t, 1, src[:n], c.delays, nil, c.budget, c.frame)
			if err != nil {
				t.Fatal(err)
			}
			if sha256.Sum256(got) != sha256.Sum256(src[:n]) {
				t.Fatalf("%d bytes came out of %d sent, not the same", len(got), n)
			}
		})
	}
}

// TestCutConnectionNeverPassesWrongBytes: a connection reset at a seeded
// byte ends the stream with an error that says so, after a prefix of the
// source and nothing else: never a byte out of order, twice or past a gap.
func TestCutConnectionNeverPassesWrongBytes(t *testing.T) {
	src := make([]byte, 1<<20)
	random(src, 9)
	trials := 200
	if testing.Short() {
		trials = 40
	}
	failed := 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 2))
		conns := 1 + rng.IntN(4)
		delays := make([]time.Duration, conns)
		cuts := make([]int, conns)
		delays[rng.IntN(conns)] = time.Duration(rng.IntN(500)) * time.Microsecond
		victim := rng.IntN(conns)
		cuts[victim] = 1 + rng.IntN(len(src)/conns)
		got, err := stripeRun(t, seed, src, delays, cuts, 128<<10, 16<<10)
		if !bytes.Equal(got, src[:len(got)]) {
			t.Fatalf("seed %d: %d bytes out, not a prefix of the source", seed, len(got))
		}
		if err == nil {
			// The cut fell after the connection's last frame, or the
			// stream ended before it: then every byte must be there.
			if len(got) != len(src) {
				t.Fatalf("seed %d: %d of %d bytes and no error", seed, len(got), len(src))
			}
			continue
		}
		if !errors.Is(err, ErrConnLost) && !errors.Is(err, ErrFrame) {
			t.Fatalf("seed %d: %v, want a lost connection", seed, err)
		}
		failed++
	}
	// Most cuts fall within the victim's share of the stream.
	if failed < trials/2 {
		t.Errorf("%d of %d trials saw their cut, want most", failed, trials)
	}
}

// feed hands a Receive the frames as one connection would carry them.
func feed(t *testing.T, m *Merger, frames ...Frame) error {
	t.Helper()
	var b bytes.Buffer
	for _, f := range frames {
		if err := WriteFrame(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return Receive(&b, [MaxStreams]*Merger{Stdout: m}, nil)
}

func data(seq uint64, s string) Frame {
	return Frame{Kind: KindData, Stream: Stdout, Seq: seq, Payload: []byte(s)}
}

func eof(n uint64) Frame { return Frame{Kind: KindEOF, Stream: Stdout, Seq: n} }

var closeFrame = Frame{Kind: KindClose}

// TestHostileFrames: frames a broken or hostile far end may send end the
// stream with an error, for the reader or for the connection that brought
// them (either fails a command), and the reader never gets bytes past the
// point where they went wrong.
func TestHostileFrames(t *testing.T) {
	for _, c := range []struct {
		name   string
		conns  [][]Frame
		prefix string // what the reader may have read: a prefix of it
		or     string // or of this, where the order the connections came in decides
	}{
		{"repeated on one connection", [][]Frame{{data(0, "a"), data(0, "a"), closeFrame}}, "a", ""},
		{"repeated on two", [][]Frame{{data(0, "a"), data(1, "b"), closeFrame}, {data(1, "X"), closeFrame}}, "ab", "aX"},
		{"backwards on one connection", [][]Frame{{data(1, "b"), data(0, "a"), closeFrame}}, "", ""},
		{"data past the end", [][]Frame{{data(0, "a"), eof(1), closeFrame}, {data(1, "X"), closeFrame}}, "a", "aX"},
		{"an end before frames that came", [][]Frame{{data(0, "a"), data(1, "b"), closeFrame}, {eof(1), closeFrame}}, "ab", ""},
		{"two ends", [][]Frame{{data(0, "a"), eof(2), closeFrame}, {eof(2), closeFrame}}, "a", ""},
		{"an end before its connection's frame", [][]Frame{{data(3, "d"), eof(2), closeFrame}}, "", ""},
		{"a gap, then no close", [][]Frame{{data(0, "a"), data(2, "c"), eof(3)}}, "a", ""},
		{"no close frame", [][]Frame{{data(0, "a"), data(1, "b"), eof(2)}}, "ab", ""},
		{"a stream not received here", [][]Frame{{{Kind: KindData, Stream: Stdin, Payload: []byte("x")}, closeFrame}}, "", ""},
		{"exit without a control handler", [][]Frame{{{Kind: KindExit, Payload: []byte("0")}, closeFrame}}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMerger(Stdout, 1<<20)
			g := NewGroup(m)
			g.Add(len(c.conns))
			errs := make(chan error, len(c.conns))
			for _, frames := range c.conns {
				go func() {
					defer g.Done()
					errs <- feed(t, m, frames...)
				}()
			}
			done := make(chan struct{})
			var got []byte
			var err error
			go func() {
				got, err = io.ReadAll(m)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the reader still waits after every connection ended")
			}
			failed := err != nil
			for range c.conns {
				failed = failed || <-errs != nil
			}
			if !failed {
				t.Errorf("read %q and no error, for the reader or a connection", got)
			}
			if !bytes.HasPrefix([]byte(c.prefix), got) && (c.or == "" || !bytes.HasPrefix([]byte(c.or), got)) {
				t.Errorf("read %q, want at most %q", got, c.prefix)
			}
		})
	}
}

// TestEveryConnectionClosedWithoutEnd: connections that close properly
// while the stream has not ended leave the reader with an error, not
// waiting for ever.
func TestEveryConnectionClosedWithoutEnd(t *testing.T) {
	m := NewMerger(Stdout, 0)
	g := NewGroup(m)
	for range 2 {
		g.Add(1)
	}
	go func() {
		defer g.Done()
		feed(t, m, data(0, "a"), closeFrame)
	}()
	go func() {
		defer g.Done()
		feed(t, m, closeFrame)
	}()
	got, err := io.ReadAll(m)
	if err == nil || string(got) != "a" {
		t.Fatalf("read %q, %v; want \"a\" and an error", got, err)
	}
}

// TestMergerHoldsItsBudget: frames that come ahead of their turn wait once
// the budget is held, and go on once the reader takes the frame in turn.
func TestMergerHoldsItsBudget(t *testing.T) {
	m := NewMerger(Stdout, 10)
	for seq := uint64(1); seq <= 2; seq++ {
		if err := m.Put(seq, []byte("12345")); err != nil {
			t.Fatal(err)
		}
	}
	put := make(chan error, 1)
	go func() { put <- m.Put(3, []byte("12345")) }()
	select {
	case err := <-put:
		t.Fatalf("a frame past the budget was taken at once (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	// The frame in turn is always taken.
	if err := m.Put(0, []byte("abcde")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(m, buf); err != nil || string(buf) != "abcde12345" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if err := m.End(4); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(m)
	if err != nil || string(rest) != "1234512345" {
		t.Fatalf("read %q, %v", rest, err)
	}
}

func ExampleSender() {
	src := bytes.NewReader([]byte("one stream over two connections"))
	s := NewSender(src, Stdout, 4)
	m := NewMerger(Stdout, 0)
	for range 2 {
		pr, pw := io.Pipe()
		go func() {
			if err := s.Run(pw); err == nil {
				WriteClose(pw)
			}
			pw.Close()
		}()
		go Receive(pr, [MaxStreams]*Merger{Stdout: m}, nil)
	}
	out, err := io.ReadAll(m)
	fmt.Printf("%s %v\n", out, err)
	// Output: one stream over two connections <nil>
}

// TestMergerCountsBuffersNotBytes: a peer that sends frames of a byte
// each, ahead of their turn, holds a buffer with each; the budget counts
// the buffers, so that it bounds the memory held, not a byte count a
// million buffers could hold.
func TestMergerCountsBuffersNotBytes(t *testing.T) {
	const frames = 4
	m := NewMerger(Stdout, frames*smallFrame)
	for seq := uint64(1); seq <= frames; seq++ {
		b := frameBuf(1)
		b[0] = 'x'
		if err := m.Put(seq, b); err != nil {
			t.Fatal(err)
		}
	}
	put := make(chan error, 1)
	go func() { put <- m.Put(frames+1, xFrame()) }()
	select {
	case err := <-put:
		t.Fatalf("a one-byte frame past %d buffers was taken at once (%v)", frames, err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := m.Put(0, xFrame()); err != nil {
		t.Fatal(err)
	}
	if err := m.End(frames + 2); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := m.WriteTo(&out); err != nil || out.String() != strings.Repeat("x", frames+2) {
		t.Fatalf("WriteTo: %q, %v", out.String(), err)
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
}

// xFrame is a one-byte frame "x" in a buffer as Receive gets one.
func xFrame() []byte {
	b := frameBuf(1)
	b[0] = 'x'
	return b
}

// TestSenderFillsFramesFromSmallWrites: a source that writes 32 KiB at a
// time (rsync) goes out in whole frames while the connection is slower
// than the source, and every byte arrives in order.
func TestSenderFillsFramesFromSmallWrites(t *testing.T) {
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	pr, pw := io.Pipe()
	go func() {
		for off := 0; off < len(data); off += 32 << 10 {
			pw.Write(data[off : off+32<<10])
		}
		pw.Close()
	}()
	s := NewSender(pr, Stdout, 0)
	// A connection that lets the source run ahead: it takes a frame only
	// once the sender's read-ahead is full or the source has ended.
	conn := &frameRecorder{s: s}
	if err := s.Run(conn); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, f := range conn.frames {
		got = append(got, f...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the frames carry %d bytes, not the source's %d in order", len(got), len(data))
	}
	if len(conn.frames) > len(data)/DefaultFrame+1 {
		t.Errorf("%d frames for %d bytes: small writes went out as small frames", len(conn.frames), len(data))
	}
}

// frameRecorder is a connection that, before each frame, waits until the
// Sender holds a full read-ahead or its source ended: a connection slower
// than the source.
type frameRecorder struct {
	s      *Sender
	frames [][]byte
}

func (r *frameRecorder) Write(p []byte) (int, error) {
	f, err := ReadFrame(bytes.NewReader(p), nil)
	if err != nil {
		return 0, err
	}
	if f.Kind == KindData {
		r.frames = append(r.frames, f.Payload)
	}
	r.s.mu.Lock()
	for r.s.ring == nil || r.s.n < len(r.s.ring) && !r.s.eof {
		r.s.cond.Wait()
	}
	r.s.mu.Unlock()
	return len(p), nil
}
