package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"testing"
	"testing/iotest"
	"time"
)

func TestCopyBytesEqual(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 7} {
		src := make([]byte, size)
		rand.New(rand.NewSource(int64(size))).Read(src)
		var dst bytes.Buffer
		var reported int
		n, err := Copy(context.Background(), &dst, iotest.HalfReader(bytes.NewReader(src)),
			Options{BufferSize: 4096, Buffers: 3, Progress: func(n int) { reported += n }})
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if n != int64(size) || reported != size || !bytes.Equal(dst.Bytes(), src) {
			t.Errorf("size %d: copied %d, reported %d, equal %v", size, n, reported, bytes.Equal(dst.Bytes(), src))
		}
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestCopyShortWriteIsAnError(t *testing.T) {
	_, err := Copy(context.Background(), shortWriter{}, bytes.NewReader(make([]byte, 100)), Options{})
	if !errors.Is(err, ErrShortWrite) {
		t.Fatalf("err = %v, want ErrShortWrite", err)
	}
}

func TestCopyReadError(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(bytes.NewReader(make([]byte, 10000)), iotest.ErrReader(boom))
	var dst bytes.Buffer
	n, err := Copy(context.Background(), &dst, src, Options{BufferSize: 4096})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if n != int64(dst.Len()) {
		t.Errorf("reported %d bytes, wrote %d", n, dst.Len())
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestCopyWriteErrorStopsReader(t *testing.T) {
	// An endless source: Copy must stop on the write error, not read on.
	src := infinite{}
	_, err := Copy(context.Background(), &failWriter{after: 1 << 20}, src, Options{BufferSize: 64 << 10})
	if err == nil || err.Error() != "write: disk full" {
		t.Fatalf("err = %v", err)
	}
}

type infinite struct{}

func (infinite) Read(p []byte) (int, error) { return len(p), nil }

func TestCopyCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Copy(ctx, io.Discard, infinite{}, Options{BufferSize: 4096})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Copy did not stop after cancel")
	}
}

func TestLimiterHoldsRate(t *testing.T) {
	// 400 KB at 1 MB/s with a quarter-second burst: at least 0.15 s.
	lim := NewLimiter(1_000_000)
	start := time.Now()
	_, err := Copy(context.Background(), io.Discard, bytes.NewReader(make([]byte, 400_000)), Options{Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Errorf("400 KB at 1 MB/s took %v; the limit did not hold", d)
	}
	if NewLimiter(0) != nil {
		t.Error("NewLimiter(0) should mean no limit")
	}
}
