package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// TestBandwidthLimitUnits times one upload per way of writing the limit:
// -l in scp's Kbit/s, --bwlimit in rsync's units (a number alone is KiB/s)
// or in tc's bits. Each limit is 2 MiB/s or 2 MB/s, so a 2 MiB file takes
// about a second, less the limiter's burst of a quarter second; a flag read
// in the wrong unit is 1000 times off, or 8 times, either way far outside
// the bounds.
func TestBandwidthLimitUnits(t *testing.T) {
	slow(t)
	srv := sshtest.Start(t, sshtest.Options{})
	work := t.TempDir()
	src := filepath.Join(work, "f")
	const size = 2 << 20
	if err := writeNoise(src, size); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(src)
	for i, tc := range []struct {
		flags []string
		rate  float64 // bytes per second
	}{
		{[]string{"-l", "16384"}, 2 << 20},       // 16384 Kbit/s, K = 1024
		{[]string{"--bwlimit", "2048"}, 2 << 20}, // KiB/s, as rsync
		{[]string{"--bwlimit", "2M"}, 2 << 20},
		{[]string{"--bwlimit", "2MB/s"}, 2e6},
		{[]string{"--bwlimit", "16mbit"}, 2e6},
	} {
		dst := filepath.Join(work, "copy-"+string(rune('a'+i)))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := append(append([]string{"hpncp", "-F", srv.ConfigFile, "-q"}, tc.flags...), src, "testhost:"+dst)
		start := time.Now()
		var stderr bytes.Buffer
		err := run(ctx, args, nil, io.Discard, &stderr)
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Errorf("%q: %v after %v: %s", tc.flags, err, took.Round(time.Millisecond), stderr.String())
			continue
		}
		if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
			t.Errorf("%q: the copy differs from the source", tc.flags)
		}
		burst := max(tc.rate/4, 32<<10)
		low := time.Duration(0.8 * (size - burst) / tc.rate * float64(time.Second))
		high := time.Duration(3 * size / tc.rate * float64(time.Second))
		t.Logf("%q: 2 MiB in %v", tc.flags, took.Round(time.Millisecond))
		if took < low || took > high {
			t.Errorf("%q: 2 MiB took %v, want %v to %v at %.0f bytes/s", tc.flags, took.Round(time.Millisecond), low.Round(time.Millisecond), high.Round(time.Millisecond), tc.rate)
		}
	}
}
