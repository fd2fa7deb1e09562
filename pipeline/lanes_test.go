package pipeline

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

type closeRecorder struct {
	*bytes.Reader
	memFile
	name   string
	err    error
	closed *[]string
}

func (c *closeRecorder) Close() error {
	*c.closed = append(*c.closed, c.name)
	return c.err
}

func TestLanesOpenBothAndCloseBoth(t *testing.T) {
	var closed []string
	srcErr, dstErr := errors.New("source close"), errors.New("target close")
	src := &closeRecorder{Reader: bytes.NewReader([]byte("abc")), name: "src", err: srcErr, closed: &closed}
	dst := &closeRecorder{name: "dst", err: dstErr, closed: &closed}
	var conns []int
	open := Lanes(
		func(_ context.Context, n int) (ReaderAtCloser, error) { conns = append(conns, n); return src, nil },
		func(_ context.Context, n int) (WriterAtCloser, error) { conns = append(conns, n); return dst, nil })
	st, err := open(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if st.Src != src || st.Dst != dst || len(conns) != 2 || conns[0] != 3 || conns[1] != 3 {
		t.Fatalf("lane of %v and %v opened on %v connections", st.Src, st.Dst, conns)
	}
	if err := st.Close(false); !errors.Is(err, dstErr) {
		t.Errorf("Close: %v, want the target's failure first", err)
	}
	if len(closed) != 2 {
		t.Errorf("closed %v, want both ends", closed)
	}
	dst.err = nil
	if err := st.Close(false); !errors.Is(err, srcErr) {
		t.Errorf("Close with the target closed fine: %v, want the source's failure", err)
	}
}

func TestLanesTargetFailsSourceClosed(t *testing.T) {
	var closed []string
	src := &closeRecorder{Reader: bytes.NewReader(nil), name: "src", closed: &closed}
	refused := errors.New("refused")
	open := Lanes(
		func(context.Context, int) (ReaderAtCloser, error) { return src, nil },
		func(context.Context, int) (WriterAtCloser, error) { return nil, refused })
	if st, err := open(context.Background(), 1); !errors.Is(err, refused) || st != nil {
		t.Fatalf("open with the target refused: %v, %v", st, err)
	}
	if len(closed) != 1 || closed[0] != "src" {
		t.Errorf("closed %v, want the source closed", closed)
	}
	opened := false
	open = Lanes(
		func(context.Context, int) (ReaderAtCloser, error) { return nil, refused },
		func(context.Context, int) (WriterAtCloser, error) { opened = true; return nil, nil })
	if _, err := open(context.Background(), 1); !errors.Is(err, refused) || opened {
		t.Errorf("open with the source refused: %v, target opened %v", err, opened)
	}
}
