package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/window"
)

// corruptingFS is the local file system, except that reading back a
// temporary file gives other bytes than were written: a target that
// corrupts data behind the copy's back.
type corruptingFS struct{ Local }

func (corruptingFS) Open(name string) (io.ReadCloser, error) {
	if !strings.HasPrefix(filepath.Base(name), tempPrefix) {
		return os.Open(name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 {
		b[len(b)/2] ^= 0x01
	}
	return io.NopCloser(strings.NewReader(string(b))), nil
}

// summingFS is the local file system with a Sum256 that returns sum, or
// fails when sum is nil, as a remote without sha256sum does.
type summingFS struct {
	Local
	sum   []byte
	calls *int
}

func (s summingFS) Sum256(context.Context, string) ([]byte, error) {
	*s.calls++
	if s.sum == nil {
		return nil, errors.New("sha256sum: command not found")
	}
	return s.sum, nil
}

func TestVerify(t *testing.T) {
	content := strings.Repeat("verify me ", 10000)
	good := sha256.Sum256([]byte(content))
	calls := 0
	tests := []struct {
		name    string
		dst     FS
		wantErr bool
		summed  bool // the target's Sum256 was asked
	}{
		{"read back, intact", Local{}, false, false},
		{"read back, corrupted", corruptingFS{}, true, false},
		{"remote hash agrees", summingFS{sum: good[:], calls: &calls}, false, true},
		{"remote hash differs", summingFS{sum: make([]byte, sha256.Size), calls: &calls}, true, true},
		{"no remote hash, read back", summingFS{calls: &calls}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls = 0
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			write(t, src, content)
			write(t, filepath.Join(dir, "out", "old"), "previous")
			dst := filepath.Join(dir, "out", "old")
			var reports []FileReport
			res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{FS: tt.dst, Path: dst},
				Options{Verify: true, Report: func(f FileReport) { reports = append(reports, f) }})
			if err != nil {
				t.Fatal(err)
			}
			if tt.summed != (calls > 0) {
				t.Errorf("Sum256 called %d times, want called: %v", calls, tt.summed)
			}
			if len(reports) != 1 {
				t.Fatalf("reports = %+v, want one", reports)
			}
			got, _ := os.ReadFile(dst)
			leftovers, _ := filepath.Glob(filepath.Join(dir, "out", tempPrefix+"*"))
			if len(leftovers) > 0 {
				t.Errorf("temporary files left: %q", leftovers)
			}
			if tt.wantErr {
				if len(res.Errors) != 1 || !errors.Is(res.Errors[0], errChecksumMismatch) {
					t.Fatalf("errors = %v, want a checksum mismatch", res.Errors)
				}
				if string(got) != "previous" {
					t.Errorf("target replaced despite the mismatch: %.20q", got)
				}
				if reports[0].Status != StatusFailed || reports[0].Error == "" {
					t.Errorf("report = %+v, want failed with an error", reports[0])
				}
				return
			}
			if len(res.Errors) > 0 {
				t.Fatalf("errors = %v", res.Errors)
			}
			if string(got) != content {
				t.Errorf("target holds %d bytes, want the source's %d", len(got), len(content))
			}
			want := FileReport{Path: src, Bytes: int64(len(content)), Status: StatusCopied, SHA256: hex.EncodeToString(good[:]), Target: dst}
			if reports[0] != want {
				t.Errorf("report = %+v, want %+v", reports[0], want)
			}
		})
	}
}

func TestVerifyCancelled(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f"), "data")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sum256(ctx, local(filepath.Join(dir, "f"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("sum256 with a cancelled context: %v, want context.Canceled", err)
	}
}

// gatedSource is a source that hashes its files where they lie (Sum256,
// as a remote's helper does) and whose streams' readers open only once
// that hash has been asked for: a copy that asks for the source's hash
// only after its streams are done never gets its bytes.
type gatedSource struct {
	Local
	sum   []byte
	asked chan struct{}
	once  *sync.Once
}

func (g gatedSource) Sum256(context.Context, string) ([]byte, error) {
	g.once.Do(func() { close(g.asked) })
	return g.sum, nil
}

func (g gatedSource) OpenReaderAt(ctx context.Context, name string, conns int) (protocol.ReaderAtCloser, error) {
	select {
	case <-g.asked:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(20 * time.Second):
		return nil, errors.New("the source's hash was not asked for while its streams read it")
	}
	return g.Local.OpenReaderAt(ctx, name, conns)
}

// TestVerifyHashesTheSourceBesideTheStreams: with --verify, a file the
// parallel streams copy has its source hashed where it lies while they
// copy it, so that only the written file's hash is left for the end; the
// sums still have to agree.
func TestVerifyHashesTheSourceBesideTheStreams(t *testing.T) {
	const size = 3 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	good := sha256.Sum256(data)
	for _, tc := range []struct {
		name    string
		sum     []byte
		wantErr bool
	}{
		{"agree", good[:], false},
		{"differ", make([]byte, sha256.Size), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			write(t, src, string(data))
			var log []string
			var sizeAt int64
			dst := Endpoint{settingFS{log: &log, size: &sizeAt}, filepath.Join(dir, "dst")}
			g := gatedSource{sum: tc.sum, asked: make(chan struct{}), once: new(sync.Once)}
			o := Options{Verify: true, Parallel: ParallelOptions{MinSize: 1 << 20, Chunk: 256 << 10,
				Controller: func() *window.Controller { return window.New(window.Config{Fixed: 3}) }}}
			res, err := Copy(context.Background(), []Endpoint{{g, src}}, dst, o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr {
				if len(res.Errors) != 1 || !errors.Is(res.Errors[0], errChecksumMismatch) {
					t.Fatalf("errors %v, want a checksum mismatch", res.Errors)
				}
				if _, err := os.Stat(dst.Path); err == nil {
					t.Errorf("a target was put in place despite the mismatch")
				}
				return
			}
			if len(res.Errors) > 0 {
				t.Fatalf("errors %v", res.Errors)
			}
			if got, _ := os.ReadFile(dst.Path); sha256.Sum256(got) != good {
				t.Errorf("the target differs from the source")
			}
		})
	}
}

// countingFS is the local file system whose readers count the bytes they
// read.
type countingFS struct {
	Local
	read *atomic.Int64
}

func (c countingFS) Open(name string) (io.ReadCloser, error) {
	r, err := c.Local.Open(name)
	if err != nil {
		return nil, err
	}
	return countingReader{r, c.read}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// TestFollowerHashesBehind: a follower hashes the written start of a
// file as it grows, the chunks acknowledged in any order, and no further
// than the start written all through; its sum is the whole file's.
func TestFollowerHashesBehind(t *testing.T) {
	const chunk = followStep
	data := make([]byte, 3*chunk+1234)
	for i := range data {
		data[i] = byte(i * 13)
	}
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var read atomic.Int64
	c := &copier{}
	fol := c.follow(context.Background(), Endpoint{countingFS{read: &read}, path}, int64(len(data)), 0)
	if fol == nil {
		t.Fatal("no follower for a local file")
	}
	defer fol.stop()
	put := func(off, n int) {
		f.WriteAt(data[off:off+n], int64(off))
		fol.written(int64(off), n)
	}
	// The second chunk first: nothing is hashed past the hole before it.
	put(chunk, chunk)
	put(0, chunk)
	deadline := time.Now().Add(20 * time.Second)
	for read.Load() < 2*chunk {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes hashed of the %d written all through", read.Load(), 2*chunk)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := read.Load(); got > 2*chunk {
		t.Fatalf("%d bytes read with %d written", got, 2*chunk)
	}
	put(2*chunk, len(data)-2*chunk)
	sum, err := fol.wait()
	if want := sha256.Sum256(data); err != nil || !bytes.Equal(sum, want[:]) {
		t.Fatalf("sum %x (%v), want %x", sum, err, want)
	}
}

// TestFollowerGivesUpOnAChunkCopiedTwice: once a chunk is copied twice
// at once, its second copy may land after the first was hashed, with
// bytes read from the source again: the hash behind is not used.
func TestFollowerGivesUpOnAChunkCopiedTwice(t *testing.T) {
	data := make([]byte, 2*followStep)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fol := (&copier{}).follow(context.Background(), local(path), int64(len(data)), 0)
	defer fol.stop()
	fol.written(0, followStep)
	fol.twice()
	fol.written(followStep, followStep)
	if sum, err := fol.wait(); err == nil {
		t.Fatalf("a chunk copied twice, and the hash behind was used: %x", sum)
	}
}

// TestFollowerStopsMidCopy: a copy that fails part way stops its
// follower, which returns though the hash was told of no end.
func TestFollowerStopsMidCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, followStep), 0o600); err != nil {
		t.Fatal(err)
	}
	fol := (&copier{}).follow(context.Background(), local(path), 3*followStep, 0)
	fol.written(0, followStep)
	stopped := make(chan struct{})
	go func() { fol.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("stop did not return")
	}
}
