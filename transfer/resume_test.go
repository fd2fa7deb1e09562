package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/window"
)

func TestWatermarkOutOfOrder(t *testing.T) {
	type chunk struct {
		off int64
		n   int
	}
	tests := []struct {
		name   string
		from   int64
		chunks []chunk
		want   int64
	}{
		{"in order", 0, []chunk{{0, 10}, {10, 10}, {20, 5}}, 25},
		{"gap holds it", 0, []chunk{{0, 10}, {20, 10}, {30, 10}}, 10},
		{"gap filled last", 0, []chunk{{20, 10}, {10, 10}, {30, 10}, {0, 10}}, 40},
		{"reversed", 0, []chunk{{40, 10}, {30, 10}, {20, 10}, {10, 10}, {0, 10}}, 50},
		{"resumed start", 100, []chunk{{110, 10}, {100, 10}}, 120},
		{"before the start ignored", 100, []chunk{{50, 10}, {120, 10}}, 100},
		{"retried chunk twice", 0, []chunk{{10, 10}, {10, 10}, {0, 10}}, 20},
		{"nothing at the start", 0, []chunk{{10, 10}, {20, 10}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := watermark{at: tt.from}
			for _, c := range tt.chunks {
				w.add(c.off, c.n)
			}
			if w.at != tt.want {
				t.Errorf("watermark %d, want %d", w.at, tt.want)
			}
		})
	}
}

func TestJournalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	e := journalEntry{Version: journalVersion, Target: "host:/x/y", Temp: "/x/.hpncp.y.01.part",
		Source: "src/y", Size: 1 << 30, MTime: time.Unix(1e9, 5).UnixNano()}
	p := &partial{path: journalPath(dir, "host:/x/y"), logf: t.Logf, e: e}
	p.done(0, 4096)
	p.done(8192, 4096) // beyond a gap: not in the watermark
	if err := p.save(); err != nil {
		t.Fatal(err)
	}
	// The save done started may still be under way: wait for it.
	p.close()
	got, err := readJournal(p.path)
	if err != nil {
		t.Fatal(err)
	}
	want := e
	want.Watermark = 4096
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("journal directory holds %d files, want the entry alone", len(entries))
	}
	p.forget()
	if _, err := os.Stat(p.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("entry still there after forget: %v", err)
	}
}

// pseudoRemote is the local file system under a remote's label, so that
// files take the parallel path as they would between two hosts.
type pseudoRemote struct{ Local }

func (pseudoRemote) Label() string { return "pseudo:" }

const resumeSize = 6<<20 + 12345

// resumeSetup writes a source file and returns it, the target's path and
// options with --resume and the journal in a directory of the test's.
func resumeSetup(t *testing.T, parallel bool) (src, dst string, o Options) {
	src = filepath.Join(t.TempDir(), "f")
	b := make([]byte, resumeSize)
	rand.New(rand.NewSource(1)).Read(b)
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	o = Options{BufferSize: 64 << 10, Resume: true, ResumeDir: t.TempDir(), Logf: t.Logf}
	if parallel {
		o.Parallel = ParallelOptions{MinSize: 1, Chunk: 64 << 10, Depth: 2,
			Controller: func() *window.Controller { return window.New(window.Config{Fixed: 3}) }}
	}
	return src, filepath.Join(t.TempDir(), "f"), o
}

func dstEnd(dst string, parallel bool) Endpoint {
	if parallel {
		return Endpoint{pseudoRemote{}, dst}
	}
	return local(dst)
}

// interrupt copies src to dst and cancels the copy after about half the
// file, and returns the temporary file kept.
func interrupt(t *testing.T, src, dst string, o Options, parallel bool) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Progress = &cancelAfter{n: resumeSize / 2, cancel: cancel}
	_, err := Copy(ctx, []Endpoint{local(src)}, dstEnd(dst, parallel), o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted copy: err = %v, want context.Canceled", err)
	}
	temps, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), tempPrefix+"*"))
	if len(temps) != 1 {
		t.Fatalf("temporary files after the interruption: %q, want one", temps)
	}
	return temps[0]
}

func resumeCopy(t *testing.T, src, dst string, o Options, parallel bool) *Result {
	t.Helper()
	res, err := Copy(context.Background(), []Endpoint{local(src)}, dstEnd(dst, parallel), o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("resumed copy: %v %v", err, res.Errors)
	}
	want, _ := os.ReadFile(src)
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, want) {
		t.Fatal("target differs from the source after resuming")
	}
	if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), tempPrefix+"*")); len(temps) > 0 {
		t.Errorf("temporary files left: %q", temps)
	}
	if entries, _ := os.ReadDir(o.ResumeDir); len(entries) > 0 {
		t.Errorf("journal entries left: %d", len(entries))
	}
	if res.Bytes+res.Resumed != resumeSize {
		t.Errorf("sent %d + resumed %d bytes, want %d in all", res.Bytes, res.Resumed, resumeSize)
	}
	return res
}

func TestResumeContinuesInterruptedFile(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(map[bool]string{false: "sequential", true: "parallel"}[parallel], func(t *testing.T) {
			src, dst, o := resumeSetup(t, parallel)
			interrupt(t, src, dst, o, parallel)
			var files []FileReport
			o.Report = func(f FileReport) { files = append(files, f) }
			res := resumeCopy(t, src, dst, o, parallel)
			// The interrupted run wrote about half; in-flight chunks past
			// the watermark may be sent again.
			if res.Resumed < resumeSize/4 {
				t.Errorf("resumed %d bytes of %d, want at least a quarter", res.Resumed, resumeSize)
			}
			if len(files) != 1 || files[0].ResumedFrom != res.Resumed || files[0].Bytes != res.Bytes {
				t.Errorf("report %+v, want resumed_from %d and bytes %d", files, res.Resumed, res.Bytes)
			}
		})
	}
}

func TestResumeStartsOver(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, src, tmp string)
	}{
		{"overlap differs", func(t *testing.T, src, tmp string) {
			f, err := os.OpenFile(tmp, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Early in the file, inside the last MiB before any watermark
			// past the first.
			if _, err := f.WriteAt([]byte("corrupt"), 64<<10); err != nil {
				t.Fatal(err)
			}
		}},
		{"source changed", func(t *testing.T, src, tmp string) {
			if err := os.Chtimes(src, time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}},
		{"temporary file missing", func(t *testing.T, src, tmp string) {
			if err := os.Remove(tmp); err != nil {
				t.Fatal(err)
			}
		}},
		{"temporary file truncated", func(t *testing.T, src, tmp string) {
			if err := os.Truncate(tmp, 1000); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, dst, o := resumeSetup(t, false)
			o.BufferSize = 32 << 10 // several writes fall in the first MiB
			o.Progress = nil
			ctx, cancel := context.WithCancel(context.Background())
			o.Progress = &cancelAfter{n: 512 << 10, cancel: cancel}
			if _, err := Copy(ctx, []Endpoint{local(src)}, local(dst), o); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v", err)
			}
			temps, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), tempPrefix+"*"))
			if len(temps) != 1 {
				t.Fatalf("temporary files %q, want one", temps)
			}
			tt.change(t, src, temps[0])
			o.Progress = nil
			var log strings.Builder
			o.Logf = func(format string, args ...any) { log.WriteString(strings.TrimSpace(format) + "\n") }
			res := resumeCopy(t, src, dst, o, false)
			if res.Resumed != 0 {
				t.Errorf("resumed %d bytes, want a fresh start", res.Resumed)
			}
			if !strings.Contains(log.String(), "starting %s over") {
				t.Errorf("log does not say why the file started over:\n%s", log.String())
			}
		})
	}
}

func TestResumeOtherFailureRemovesTemp(t *testing.T) {
	src, dst, o := resumeSetup(t, false)
	res, err := Copy(context.Background(), []Endpoint{local(src)},
		Endpoint{failingFS{failAfter: 1 << 20}, dst}, o)
	if err != nil || len(res.Errors) != 1 {
		t.Fatalf("err %v, errors %v: want the injected failure", err, res.Errors)
	}
	if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), tempPrefix+"*")); len(temps) > 0 {
		t.Errorf("temporary files left after a write failure: %q", temps)
	}
	if entries, _ := os.ReadDir(o.ResumeDir); len(entries) > 0 {
		t.Errorf("%d journal entries left after a write failure", len(entries))
	}
}

func TestResumeCountsNewerTargetComplete(t *testing.T) {
	src, dst, o := resumeSetup(t, false)
	b, _ := os.ReadFile(src)
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, tt := range []struct {
		name    string
		src     time.Time
		resume  bool
		skipped int
	}{
		{"target newer, --resume", old, true, 1},
		{"target newer, plain quick check", old, false, 0},
		{"source newer, --resume", time.Now().Add(time.Hour), true, 0},
	} {
		if err := os.Chtimes(src, tt.src, tt.src); err != nil {
			t.Fatal(err)
		}
		o.Skip, o.Resume = SkipQuick, tt.resume
		res, err := Copy(context.Background(), []Endpoint{local(src)}, local(dst), o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped != tt.skipped {
			t.Errorf("%s: skipped %d, want %d", tt.name, res.Skipped, tt.skipped)
		}
		// A copy gives the target a fresh time; put the newer one back.
		if err := os.Chtimes(dst, time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// unremovable is the local file system as a remote whose connection is
// gone when a failed copy tries to remove its temporary file. The
// directory that learns the end's umask (umask.go) goes while it is up.
type unremovable struct{ pseudoRemote }

func (u unremovable) Remove(name string) error {
	if strings.HasPrefix(filepath.Base(name), tempPrefix+"umask.") {
		return u.pseudoRemote.Remove(name)
	}
	return fmt.Errorf("remove %s: %w", name, protocol.ErrStreamLost)
}

func TestJournalWithoutResume(t *testing.T) {
	src := filepath.Join(t.TempDir(), "big")
	b := make([]byte, journalMinSize+12345)
	rand.New(rand.NewSource(2)).Read(b)
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	journal := t.TempDir()
	o := Options{ResumeDir: journal, Logf: t.Logf, Parallel: ParallelOptions{MinSize: 1, Chunk: 1 << 20, Depth: 2,
		Controller: func() *window.Controller { return window.New(window.Config{Fixed: 3}) }}}
	run := func(fsys FS, o Options, cancelAt int) (*Result, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if cancelAt > 0 {
			o.Progress = &cancelAfter{n: cancelAt, cancel: cancel}
		}
		return Copy(ctx, []Endpoint{local(src)}, Endpoint{fsys, filepath.Join(dir, "big")}, o)
	}

	// Interrupted where the temporary file can be removed: nothing stays.
	if _, err := run(pseudoRemote{}, o, len(b)/2); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Fatalf("files left after an interruption without --resume: %d", len(entries))
	}
	if entries, _ := os.ReadDir(journal); len(entries) > 0 {
		t.Fatalf("journal entries left with their temporary file removed: %d", len(entries))
	}

	// Where it stays (as after SIGKILL or a lost connection), its entry
	// stays too, and --resume continues it.
	if _, err := run(unremovable{}, o, len(b)/2); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(journal); len(entries) != 1 {
		t.Fatalf("%d journal entries for the temporary file left, want 1", len(entries))
	}
	o.Resume = true
	res, err := run(pseudoRemote{}, o, 0)
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "big")); !bytes.Equal(got, b) {
		t.Fatal("target differs from the source")
	}
	if res.Resumed < int64(len(b))/4 {
		t.Errorf("resumed %d bytes of %d, want at least a quarter", res.Resumed, len(b))
	}
}

func TestRunWithoutResumeRemovesLeftTemp(t *testing.T) {
	src := filepath.Join(t.TempDir(), "big")
	b := make([]byte, journalMinSize)
	rand.New(rand.NewSource(3)).Read(b)
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, journal := t.TempDir(), t.TempDir()
	o := Options{ResumeDir: journal, BufferSize: 1 << 20}
	ctx, cancel := context.WithCancel(context.Background())
	o.Progress = &cancelAfter{n: len(b) / 2, cancel: cancel}
	dst := filepath.Join(dir, "big")
	if _, err := Copy(ctx, []Endpoint{local(src)}, Endpoint{unremovable{}, dst}, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	cancel()
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files after the cut-off run, want its temporary file", len(entries))
	}
	o.Progress = nil
	if res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{pseudoRemote{}, dst}, o); err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "big" {
		t.Errorf("target directory holds %d entries, want big alone", len(entries))
	}
	if entries, _ := os.ReadDir(journal); len(entries) > 0 {
		t.Errorf("%d journal entries left", len(entries))
	}
}

// BenchmarkJournalSave is the cost of one journal write, which a copy
// pays at most once a second or every journalBytes.
func BenchmarkJournalSave(b *testing.B) {
	p := &partial{path: journalPath(b.TempDir(), "host:/x"), logf: b.Logf,
		e: journalEntry{Version: journalVersion, Target: "host:/x", Temp: "/.hpncp.x.00.part"}}
	for i := range b.N {
		p.wm.at = int64(i)
		if err := p.save(); err != nil {
			b.Fatal(err)
		}
	}
}
