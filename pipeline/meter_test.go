package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// More than the burst at once is waited for in steps, not refused.
func TestMeterWaitBeyondBurst(t *testing.T) {
	l := rate.NewLimiter(rate.Limit(1<<20), 64<<10)
	m := Meter{Limiter: l}
	start := time.Now()
	// The burst is there at once; the other 192 KiB take about 190 ms.
	if err := m.Wait(context.Background(), 256<<10); err != nil {
		t.Fatalf("Wait for 4 bursts: %v", err)
	}
	if d := time.Since(start); d < 120*time.Millisecond {
		t.Errorf("256 KiB at 1 MiB/s with a 64 KiB burst passed in %v; the limit did not hold", d)
	}
}

// A wait the context's deadline cannot cover fails at once: it is never
// taken for bytes that passed.
func TestMeterWaitPastDeadline(t *testing.T) {
	m := Meter{Limiter: rate.NewLimiter(rate.Limit(1<<10), 32<<10)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.Wait(ctx, 64<<10); err == nil {
		t.Fatal("Wait for 32 s of traffic under a 1 s deadline returned nil")
	}
}

type halfWriter struct{ bytes.Buffer }

func (w *halfWriter) Write(p []byte) (int, error) { return w.Buffer.Write(p[:len(p)/2]) }

func TestMeterWriterChecksAndCounts(t *testing.T) {
	counted := 0
	m := Meter{Progress: func(n int) { counted += n }}
	var buf bytes.Buffer
	w := m.Writer(context.Background(), &buf)
	if n, err := w.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if counted != 5 || buf.String() != "hello" {
		t.Errorf("wrote %q, counted %d; want hello, 5", buf.String(), counted)
	}
	w = m.Writer(context.Background(), &halfWriter{})
	if _, err := w.Write([]byte("hello")); !errors.Is(err, ErrShortWrite) {
		t.Errorf("Write to a writer taking half: %v, want ErrShortWrite", err)
	}
	if counted != 5 {
		t.Errorf("a short write was counted: %d bytes in all, want 5", counted)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Writer(ctx, &buf).Write([]byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Write after cancel: %v, want context.Canceled", err)
	}
}

type sizeRecorder struct {
	r    io.Reader
	most int
}

func (s *sizeRecorder) Read(p []byte) (int, error) {
	s.most = max(s.most, len(p))
	return s.r.Read(p)
}

func TestMeterReaderStaysWithinBurstAndCounts(t *testing.T) {
	counted := 0
	m := Meter{Limiter: rate.NewLimiter(rate.Inf, 4<<10), Progress: func(n int) { counted += n }}
	data := bytes.Repeat([]byte("y"), 100<<10)
	src := &sizeRecorder{r: bytes.NewReader(data)}
	got, err := io.ReadAll(io.LimitReader(m.Reader(context.Background(), src), 1<<20))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v; want the 100 KiB", len(got), err)
	}
	if src.most > 4<<10 {
		t.Errorf("a read asked for %d bytes, more than the 4 KiB burst", src.most)
	}
	if counted != len(data) {
		t.Errorf("counted %d bytes, want %d", counted, len(data))
	}
}
