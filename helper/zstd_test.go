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

// TestGovernorTurns: the governor sends compressed where that costs less
// than storing, with costs from a model of a sender: making a frame takes
// its bytes over the compressor's speed (next to nothing to store), and
// writing it, where the link is full, its bytes over the link's speed.
// On a link slower than the compressor, compressible data goes
// compressed; on a fast link, or data that does not shrink, stored.
func TestGovernorTurns(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name          string
		compress, lnk float64 // bytes a second
		ratio         float64
		full          bool // the link is what the sender waits on
		compressed    bool // how most frames should go
	}{
		{"slow link", 500 * mb, 100 * mb, 0.5, true, true},
		{"slow link, data that does not shrink", 500 * mb, 100 * mb, 1.0, true, false},
		{"slow link, data that shrinks a little", 500 * mb, 100 * mb, 0.95, true, false},
		{"link faster than the compressor", 300 * mb, 1000 * mb, 0.5, true, false},
		{"link with room", 500 * mb, 100 * mb, 0.5, false, false},
		{"slow CPU, slow link", 40 * mb, 100 * mb, 0.3, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, start := range []bool{false, true} {
				g := &zgov{stored: start}
				n, compressed := 0, 0
				for i := range 2000 {
					c := g.compress()
					in, out := zsegment, zsegment
					took := float64(in) / (20000 * mb) // a copy
					if c {
						out = int(float64(in) * tc.ratio)
						took = float64(in) / tc.compress
					}
					if tc.full {
						took += float64(out) / tc.lnk
					}
					// Some noise, as a machine's.
					took *= 1 + 0.1*math2(i)
					g.record(c, in, out, time.Duration(took*float64(time.Second)))
					if i >= 400 {
						n++
						if c {
							compressed++
						}
					}
				}
				share := float64(compressed) / float64(n)
				if tc.compressed && share < 0.8 || !tc.compressed && share > 0.2 {
					t.Errorf("starting stored=%v: %.0f%% of the frames compressed, want most %s", start, 100*share,
						map[bool]string{true: "compressed", false: "stored"}[tc.compressed])
				}
			}
		})
	}
}

// math2 is a repeatable value in [-1, 1) for frame i.
func math2(i int) float64 {
	return float64((i*7919)%200)/100 - 1
}
