package helper

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestFramedStreamIsZstd: a compressed delta's frames, compressed,
// stored or both in turn, read back as the bytes written, through this
// end's reader and through the zstd tool's (the format's reference
// implementation), whatever the size and however the writes are cut.
func TestFramedStreamIsZstd(t *testing.T) {
	zstdTool := sshdtest.LookTool(t, "zstd")
	rng := rand.New(rand.NewPCG(37, 1))
	for _, size := range []int{0, 1, 128<<10 - 1, 128 << 10, 128<<10 + 1, zsegment, zsegment + 1, 3*zsegment + 12345} {
		for _, ways := range []string{"compressed", "stored", "in turn"} {
			t.Run(fmt.Sprintf("%d/%s", size, ways), func(t *testing.T) {
				data := make([]byte, size)
				for i := 0; i < size; {
					// Runs of text and of noise.
					n := min(size-i, 1+rng.IntN(64<<10))
					if rng.IntN(2) == 0 {
						copy(data[i:i+n], bytes.Repeat([]byte("the same words again, "), n/22+1))
					} else {
						for j := i; j < i+n; j++ {
							data[j] = byte(rng.Uint32())
						}
					}
					i += n
				}
				var wire bytes.Buffer
				gov := &zgov{stored: ways == "stored"}
				z, err := newFramedOut(&wire, gov)
				if err != nil {
					t.Fatal(err)
				}
				for rest := data; len(rest) > 0; {
					n := min(len(rest), 1+rng.IntN(100<<10))
					if _, err := z.Write(rest[:n]); err != nil {
						t.Fatal(err)
					}
					rest = rest[n:]
					if ways == "in turn" {
						gov.stored = !gov.stored
					}
				}
				if err := z.Close(); err != nil {
					t.Fatal(err)
				}
				zr, err := zstdIn(bytes.NewReader(wire.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(zr)
				zr.Close()
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
				}
				cmd := exec.Command(zstdTool, "-d", "-c", "-q")
				cmd.Stdin = bytes.NewReader(wire.Bytes())
				out, err := cmd.Output()
				if err != nil || !bytes.Equal(out, data) {
					t.Fatalf("zstd -d: %d bytes (%v), want the %d written", len(out), err, len(data))
				}
				cin, cout, stored := gov.Counts()
				if cin+stored != int64(size) || ways == "compressed" && stored != 0 || ways == "stored" && cin != 0 {
					t.Errorf("counts: %d compressed (to %d), %d stored, of %d", cin, cout, stored, size)
				}
			})
		}
	}
}

// sender is a model of a compressed delta's sender for the governor: the
// diff makes the delta's bytes at 2 GB/s, making a frame takes its bytes
// over the compressor's speed (next to nothing to store), and the frame
// goes into the buffers on the way to the link (8 MiB of them: a
// channel's window, sockets), which drain at the link's speed, a write
// waiting while they are full.
type sender struct {
	g          *zgov
	now, queue float64 // seconds, bytes in the buffers
	i          int
}

const mb = 1 << 20

// send sends frames frames, and says what share of them went compressed.
func (s *sender) send(frames int, compress, link, ratio float64) float64 {
	compressed := 0
	for range frames {
		s.i++
		c := s.g.compress()
		in, out := zsegment, zsegment
		made := float64(in) / (20000 * mb) // a copy
		if c {
			compressed++
			out = int(float64(in) * ratio)
			made = float64(in) / compress
		}
		// Some noise, as a machine's.
		made *= 1 + 0.1*math2(s.i)
		drain := func(d float64) {
			s.now += d
			s.queue = max(0, s.queue-d*link)
		}
		begin := s.now
		drain(float64(in)/(2000*mb) + made)
		wrote := 0.0
		if over := s.queue + float64(out) - 8*mb; over > 0 {
			wrote = over / link
			drain(wrote)
		}
		s.queue += float64(out)
		sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
		s.g.record(c, in, out, sec(made+wrote), sec(wrote), sec(s.now-begin))
	}
	return float64(compressed) / float64(frames)
}

// TestGovernorTurns: the governor sends compressed where that costs less
// than storing, in a model of a sender (sender). Where the link is slower
// than what the sender can make, compressible data goes compressed; on a
// fast link, with a slow CPU or data that does not shrink, stored; and
// the governor turns when the data or the link changes.
func TestGovernorTurns(t *testing.T) {
	for _, tc := range []struct {
		name           string
		compress, link float64 // bytes a second
		ratio          float64
		compressed     bool // how most frames should go
	}{
		{"slow link", 500 * mb, 20 * mb, 0.25, true},
		{"slow link, data that does not shrink", 500 * mb, 20 * mb, 1.0, false},
		{"slow link, data that shrinks a little", 500 * mb, 100 * mb, 0.95, false},
		{"link faster than the compressor", 300 * mb, 1000 * mb, 0.5, false},
		{"link with room", 500 * mb, 100000 * mb, 0.5, false},
		{"slow CPU, slow link", 40 * mb, 100 * mb, 0.3, false},
		// Compressed, the link has room; stored, it would not: the
		// buffers take a window stored without a wait.
		{"link between", 500 * mb, 200 * mb, 0.25, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, start := range []bool{false, true} {
				s := &sender{g: &zgov{stored: start}}
				s.send(400, tc.compress, tc.link, tc.ratio)
				share := s.send(4000, tc.compress, tc.link, tc.ratio)
				if tc.compressed && share < 0.9 || !tc.compressed && share > 0.1 {
					t.Errorf("starting stored=%v: %.1f%% of the frames compressed, want most %s", start, 100*share,
						map[bool]string{true: "compressed", false: "stored"}[tc.compressed])
				}
			}
		})
	}
	// What was right turns wrong: the governor follows, within the
	// longest time between its tries (zevery windows).
	s := &sender{g: &zgov{}}
	s.send(4000, 500*mb, 20*mb, 1.0)
	s.send(zevery*zwindow, 500*mb, 20*mb, 0.25)
	if share := s.send(2000, 500*mb, 20*mb, 0.25); share < 0.9 {
		t.Errorf("data that came to shrink on a slow link: %.1f%% compressed", 100*share)
	}
	s.send(zevery*zwindow, 500*mb, 100000*mb, 0.25)
	if share := s.send(2000, 500*mb, 100000*mb, 0.25); share > 0.1 {
		t.Errorf("a link that came to have room: %.1f%% compressed", 100*share)
	}
}

// math2 is a repeatable value in [-1, 1) for frame i.
func math2(i int) float64 {
	return float64((i*7919)%200)/100 - 1
}
