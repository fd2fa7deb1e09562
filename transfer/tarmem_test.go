package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// A tar mode tree is listed whole before its streams start (tarplan.go),
// so what the plan keeps of each file decides whether a tree of a million
// small files fits in hpncp's memory bound (issue 14: 512 MiB of RSS at
// 1,000,000 files). With the walk's own FileInfo (a stat with its
// Stat_t) kept per file, a copy buffer per file and each batch a copy of
// its slice, this run peaked at about 1,200 bytes of live heap a file;
// with the compact plan at about 700.
func TestTarUploadHeapPerFile(t *testing.T) {
	if testing.Short() {
		t.Skip("creates and copies 200,000 files")
	}
	const dirs, perDir = 200, 1000
	const files = dirs * perDir
	// Bytes of live heap a file may cost at the run's peak: the plan's
	// node, its name, its compact info and its stream's record (about
	// 250 bytes), what the collector marks of the walk's garbage (336
	// measured), with a fifth to spare for the collector's timing.
	const perFileBound = 560
	base := scratchDir(t)
	src := filepath.Join(base, "src", "tree")
	for d := range dirs {
		dir := filepath.Join(src, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perDir {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%04d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("x"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	target := filepath.Join(base, "dst")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	before := liveHeap()
	peak := watchLiveHeap(t)
	o := Options{Recursive: true, Tar: TarOptions{Mode: TarForce}}
	start := time.Now()
	res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{FS: &waitingTar{}, Path: target}, o)
	high := peak()
	if p := gcPercent(); p == bigPlanGC {
		t.Errorf("GOGC left at %d after the copy", p)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("copy failed: %v", errors.Join(res.Errors[:min(3, len(res.Errors))]...))
	}
	if res.Files != files {
		t.Fatalf("copied %d files, want %d", res.Files, files)
	}
	// The copy is the tree: a sample of files, both ends of each
	// directory, with their byte.
	for _, rel := range []string{"d000/f0000", "d199/f0999", "d100/f0500"} {
		b, err := os.ReadFile(filepath.Join(target, "tree", filepath.FromSlash(rel)))
		if err != nil || string(b) != "x" {
			t.Fatalf("%s: %q, %v", rel, b, err)
		}
	}
	grown := int64(high) - int64(before)
	t.Logf("%d files in %s: live heap peaked %d MB above the start, %d bytes a file",
		files, time.Since(start).Round(time.Millisecond), grown>>20, grown/files)
	if grown > perFileBound*files {
		t.Errorf("live heap grew by %d bytes for %d files (%d a file), want at most %d a file",
			grown, files, grown/files, perFileBound)
	}
}

// scratchDir is a directory for a test's large tree: on tmpfs where the
// machine has one, so that creating the files is not what the test times.
func scratchDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "hpncp-test-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// liveHeap is the heap the last collection found reachable.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchLiveHeap samples liveHeap until the returned function is called,
// which returns the highest value seen.
func watchLiveHeap(t *testing.T) (peak func() uint64) {
	t.Helper()
	var (
		mu   sync.Mutex
		high uint64
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			v := liveHeap()
			mu.Lock()
			high = max(high, v)
			mu.Unlock()
		}
	}()
	var once sync.Once
	peak = func() uint64 {
		once.Do(func() { close(stop); <-done })
		mu.Lock()
		defer mu.Unlock()
		return high
	}
	t.Cleanup(func() { peak() })
	return peak
}

// gcPercent is the collector's GOGC setting now.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// A big plan has the collector run at bigPlanGC while any big plan runs,
// restores the setting after the last, and leaves a GOGC the user set.
func TestBigPlanLowersGC(t *testing.T) {
	t.Setenv("GOGC", "")
	before := gcPercent()
	if before == bigPlanGC {
		t.Fatalf("GOGC is %d already", before)
	}
	first, second := lowerGC(), lowerGC()
	if p := gcPercent(); p != bigPlanGC {
		t.Fatalf("GOGC %d under two plans, want %d", p, bigPlanGC)
	}
	first()
	first()
	if p := gcPercent(); p != bigPlanGC {
		t.Fatalf("GOGC %d with one plan left, want %d", p, bigPlanGC)
	}
	second()
	if p := gcPercent(); p != before {
		t.Fatalf("GOGC %d after the plans, want %d back", p, before)
	}
	t.Setenv("GOGC", "300")
	restore := lowerGC()
	if p := gcPercent(); p != before {
		t.Errorf("GOGC %d with GOGC set in the environment, want %d untouched", p, before)
	}
	restore()
}
