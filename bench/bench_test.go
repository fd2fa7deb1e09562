package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRunner "transfers" by copying files in a directory standing for the
// remote, taking a scripted time per call, so the statistics are known.
type fakeRunner struct {
	remote  string
	delays  map[string][]time.Duration // uploads, per config name, in order
	down    map[string]time.Duration   // each download, per config name
	removed []string
	failAt  string
	// replaced counts uploads that found the last run's file still there.
	replaced int
}

func (f *fakeRunner) wait(c Config) error {
	if c.Name == f.failAt {
		return errors.New("injected failure")
	}
	d := f.delays[c.Name]
	if len(d) > 0 {
		time.Sleep(d[0])
		f.delays[c.Name] = d[1:]
	}
	return nil
}

func (f *fakeRunner) Upload(_ context.Context, c Config, local, remote string) error {
	if _, err := os.Stat(filepath.Join(f.remote, remote)); err == nil {
		f.replaced++
	}
	if err := f.wait(c); err != nil {
		return err
	}
	return copyFile(local, filepath.Join(f.remote, remote))
}

func (f *fakeRunner) Download(_ context.Context, c Config, remote, local string) error {
	time.Sleep(f.down[c.Name])
	return copyFile(filepath.Join(f.remote, remote), local)
}

func (f *fakeRunner) Remove(_ context.Context, remote string) error {
	f.removed = append(f.removed, remote)
	return os.Remove(filepath.Join(f.remote, remote))
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func TestRun(t *testing.T) {
	f := &fakeRunner{remote: t.TempDir(), delays: map[string][]time.Duration{
		"hpn":  {10 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond},
		"hpnd": {150 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond},
	}, down: map[string]time.Duration{"hpn": 10 * time.Millisecond, "hpnd": 150 * time.Millisecond}}
	cs, _ := ParseConfigs("hpn,hpnd")
	const size = 1 << 20
	rep, err := Run(context.Background(), f, "h", Options{Size: size, Runs: 3, Configs: cs})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("got %d rows, want 4 (2 configurations × 2 directions)", len(rep.Rows))
	}
	for _, row := range rep.Rows {
		if len(row.Seconds) != 3 || len(row.MBps) != 3 {
			t.Fatalf("%s %s: %d times, %d rates; want 3 runs", row.Config.Name, row.Direction, len(row.Seconds), len(row.MBps))
		}
		var sum float64
		for i, s := range row.Seconds {
			if want := size / s / 1e6; math.Abs(row.MBps[i]-want) > 1e-9 {
				t.Errorf("%s %s run %d: %g MB/s for %gs, want %g", row.Config.Name, row.Direction, i, row.MBps[i], s, want)
			}
			sum += row.MBps[i]
		}
		m := row.MBpsSummary
		if math.Abs(m.Avg-sum/3) > 1e-9 || !(m.Min <= m.Median && m.Median <= m.Max) {
			t.Errorf("%s %s: summary %+v of %v", row.Config.Name, row.Direction, m, row.MBps)
		}
		if row.Direction == Upload && row.Config.Name == "hpnd" && row.SecSummary.Min < 0.15 {
			t.Errorf("hpnd uploads took %v, less than the 150 ms each took", row.Seconds)
		}
	}
	if r := rep.Recommendation; r == nil || r.Config == "hpnd" {
		t.Errorf("recommendation %+v, want hpn (hpnd was far slower)", rep.Recommendation)
	}
	// Before each upload but the first, and at the end.
	if len(f.removed) != 6 {
		t.Errorf("removed %d times, want 6", len(f.removed))
	}
	for _, r := range f.removed {
		if r != f.removed[0] || !strings.HasPrefix(r, ".hpncp-bench-") {
			t.Errorf("removed %q, want the one scratch file", f.removed)
			break
		}
	}
	if f.replaced != 0 {
		t.Errorf("%d uploads found the last run's file in place, want none", f.replaced)
	}
	if rep.Rows[0].Connect != nil {
		t.Errorf("a wall-clock runner's rows hold connection times: %v", rep.Rows[0].Connect)
	}
	if left, _ := os.ReadDir(f.remote); len(left) != 0 {
		t.Errorf("remote left with %d files", len(left))
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"upload", "download", "hpn ", "hpnd", "min", "med", "max", "avg", "sd", "Recommendation for h"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// timedRunner's copies say they took `took`, less than the wall clock saw.
type timedRunner struct {
	*fakeRunner
	took time.Duration
}

func (r timedRunner) LastTransfer() time.Duration { return r.took }

func TestRunTransferTimer(t *testing.T) {
	f := &fakeRunner{remote: t.TempDir(), delays: map[string][]time.Duration{
		"hpn": {40 * time.Millisecond, 40 * time.Millisecond},
	}, down: map[string]time.Duration{"hpn": 40 * time.Millisecond}}
	cs, _ := ParseConfigs("hpn")
	const size = 1e6
	rep, err := Run(context.Background(), timedRunner{f, 10 * time.Millisecond}, "h", Options{Size: size, Runs: 2, Configs: cs})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.Rows {
		for i, s := range row.Seconds {
			if s != 0.01 || row.MBps[i] != 100 {
				t.Errorf("%s run %d: %gs, %g MB/s; want the copy's own 0.01s, 100 MB/s", row.Direction, i, s, row.MBps[i])
			}
		}
		if len(row.Connect) != 2 || row.ConnectSummary == nil {
			t.Fatalf("%s: connection times %v, want 2", row.Direction, row.Connect)
		}
		for _, c := range row.Connect {
			if c < 0.029 {
				t.Errorf("%s: %gs connecting, want the wall clock's 40 ms less the copy's 10", row.Direction, c)
			}
		}
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "connecting (TCP, SSH handshake, authentication, SFTP start) took a further") {
		t.Errorf("table does not say the set-up is left out:\n%s", table.String())
	}
}

func TestRunFailureCleansUp(t *testing.T) {
	f := &fakeRunner{remote: t.TempDir(), failAt: "s4"}
	cs, _ := ParseConfigs("hpn,s4")
	_, err := Run(context.Background(), f, "h", Options{Size: 1000, Runs: 1, Configs: cs, RemoteDir: ""})
	if err == nil || !strings.Contains(err.Error(), "s4 upload") {
		t.Fatalf("Run = %v, want the s4 upload's error", err)
	}
	// Before s4's upload, then on the way out, whatever that upload left.
	if len(f.removed) != 2 {
		t.Errorf("removed %q after a failure, want the scratch file twice", f.removed)
	}
	if left, _ := os.ReadDir(f.remote); len(left) != 0 {
		t.Errorf("remote left with %d files", len(left))
	}
}

// countingRunner is a fakeRunner that reports the streams of each run.
type countingRunner struct {
	fakeRunner
	streams []int
	last    int
}

func (c *countingRunner) next() {
	c.last, c.streams = c.streams[0], c.streams[1:]
}

func (c *countingRunner) Upload(ctx context.Context, cfg Config, local, remote string) error {
	c.next()
	return c.fakeRunner.Upload(ctx, cfg, local, remote)
}

func (c *countingRunner) Download(ctx context.Context, cfg Config, remote, local string) error {
	c.next()
	return c.fakeRunner.Download(ctx, cfg, remote, local)
}

func (c *countingRunner) LastStreams() int { return c.last }

// TestRecommendationStartStreams: when auto wins, the recommendation
// keeps the most streams its runs got to; a fixed count that wins is its
// own start.
func TestRecommendationStartStreams(t *testing.T) {
	cs, _ := ParseConfigs("hpn,hpnd")
	f := &countingRunner{
		fakeRunner: fakeRunner{remote: t.TempDir(),
			delays: map[string][]time.Duration{"hpnd": {100 * time.Millisecond, 100 * time.Millisecond}},
			down:   map[string]time.Duration{"hpnd": 100 * time.Millisecond}},
		// hpn up, down, up, down; then hpnd's.
		streams: []int{4, 8, 6, 4, 1, 1, 1, 1},
	}
	rep, err := Run(context.Background(), f, "h", Options{Size: 1 << 20, Runs: 2, Configs: cs})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Rows[0].Streams; len(got) != 2 || got[0] != 4 || got[1] != 6 {
		t.Errorf("hpn upload streams %v, want [4 6]", got)
	}
	r := rep.Recommendation
	if r == nil || r.Config != "hpn" || r.Streams != 0 || r.StartStreams != 8 {
		t.Fatalf("recommendation %+v, want hpn starting from 8 streams", r)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "auto got to 8 streams") {
		t.Errorf("table does not say where auto got:\n%s", table.String())
	}

	cs, _ = ParseConfigs("s4,hpnd")
	f.streams = []int{4, 4, 1, 1}
	f.delays = map[string][]time.Duration{"hpnd": {100 * time.Millisecond}}
	rep, err = Run(context.Background(), f, "h", Options{Size: 1 << 20, Runs: 1, Configs: cs})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Recommendation; r == nil || r.Streams != 4 || r.StartStreams != 0 {
		t.Errorf("recommendation %+v, want --streams 4 and no separate start", r)
	}
}
