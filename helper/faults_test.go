//go:build unix

package helper

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faulty is a client channel that, at a seeded byte of what it sends or
// receives, is cut (both ways, as a connection reset), or stalls once
// for a while and goes on.
type faulty struct {
	*pipeChan
	mu    sync.Mutex
	at    int64 // bytes either way before the fault
	seen  int64
	stall bool
	fired bool
}

func (f *faulty) step(n int) (cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen += int64(n)
	if f.fired || f.seen < f.at {
		return false
	}
	f.fired = true
	if f.stall {
		time.Sleep(150 * time.Millisecond)
		return false
	}
	return true
}

func (f *faulty) Read(p []byte) (int, error) {
	n, err := f.pipeChan.Read(p)
	if f.step(n) {
		f.pipeChan.Close()
	}
	return n, err
}

func (f *faulty) Write(p []byte) (int, error) {
	if f.step(len(p)) {
		f.pipeChan.Close()
	}
	return f.pipeChan.Write(p)
}

// TestStripedFaults: seeded trials of a striped command with one channel
// cut or stalled at a seeded byte, both ways. The command hashes its
// stdin, or prints a file; what hpncp ssh would print is either the right
// bytes with no error, or an error with a prefix of them: never other
// bytes, and never a hash of a stdin that was not whole. Trials:
// HPNCP_STRIPE_FAULT_TRIALS (make faults runs 1,000); seed:
// HPNCP_FAULT_SEED.
func TestStripedFaults(t *testing.T) {
	trials := 40
	if v := os.Getenv("HPNCP_STRIPE_FAULT_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("HPNCP_STRIPE_FAULT_TRIALS=%q", v)
		}
		trials = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("HPNCP_FAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HPNCP_FAULT_SEED=%q", v)
		}
		seed = n
	}
	t.Logf("seed %d (HPNCP_FAULT_SEED), %d trials", seed, trials)
	file := filepath.Join(t.TempDir(), "f")
	content := make([]byte, 3<<20+17)
	fill(content, seed)
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	violations := 0
	for trial := range trials {
		rng := rand.New(rand.NewPCG(seed, uint64(trial)))
		n := 1 + rng.IntN(4)
		victim := rng.IntN(n)
		stall := rng.IntN(4) == 0
		down := rng.IntN(2) == 0
		size := rng.IntN(3 << 20)
		input := make([]byte, size)
		fill(input, seed+uint64(trial))
		at := int64(1 + rng.IntN(max(size, len(content))/n+1))
		wrap := func(i int, c *pipeChan) Channel {
			if i != victim {
				return c
			}
			return &faulty{pipeChan: c, at: at, stall: stall}
		}
		var out string
		var err error
		var want string
		if down {
			want = string(content)
			out, _, _, err = runStripedVia(t, n, "cat "+file, nil, nil, wrap)
		} else {
			sum := sha256.Sum256(input)
			want = hex.EncodeToString(sum[:]) + "  -\n"
			out, _, _, err = runStripedVia(t, n, "sha256sum", bytes.NewReader(input), nil, wrap)
		}
		kind := map[bool]string{true: "stall", false: "cut"}[stall]
		dir := map[bool]string{true: "down", false: "up"}[down]
		outcome := "ok"
		switch {
		case err == nil && out == want:
		case err != nil && strings.HasPrefix(want, out):
			outcome = "failed-clean"
		default:
			outcome = "violation"
			violations++
			t.Errorf("trial %d (seed %d): %s %s on channel %d of %d at byte %d: %d bytes out, err %v, not the command's output or a prefix of it with an error",
				trial, seed, dir, kind, victim, n, at, len(out), err)
		}
		if stall && err != nil {
			// A stall delays; it loses nothing.
			t.Errorf("trial %d (seed %d): a stall of %s on channel %d of %d failed the command: %v", trial, seed, dir, victim, n, err)
		}
		counts[fmt.Sprintf("%s-%s %s", dir, kind, outcome)]++
	}
	var lines []string
	for k, v := range counts {
		lines = append(lines, fmt.Sprintf("%-28s %d", k, v))
	}
	t.Logf("striped faults, %d trials, %d violations:\n%s", trials, violations, strings.Join(lines, "\n"))
}

// fill fills b with bytes of a seeded generator.
func fill(b []byte, seed uint64) {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	rand.NewChaCha8(key).Read(b)
}
