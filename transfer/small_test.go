package transfer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/pipeline"
)

func TestBudgetBoundsBytesHeld(t *testing.T) {
	b := newBudget(4 * budgetToken)
	ctx := context.Background()
	give1, err := b.take(ctx, 3*budgetToken)
	if err != nil {
		t.Fatal(err)
	}
	give2, err := b.take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.take(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take beyond the budget: %v, want it to wait", err)
	}
	give1()
	give3, err := b.take(ctx, 3*budgetToken)
	if err != nil {
		t.Fatal(err)
	}
	give2()
	give3()
}

// A small file held back by -l past the context's deadline is not
// copied, and must not be reported as copied: the rate limiter says so
// before the context itself is done.
func TestPutSmallLimitPastDeadlineFails(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := sftpEnd(t, srv)
	src := filepath.Join(t.TempDir(), "f")
	// More than the limiter's burst, so that the second part must wait.
	data := bytes.Repeat([]byte("x"), 48<<10)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(srv.Root, "f")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// 1 KiB/s: the 16 KiB past the burst would take far past the deadline.
	o := Options{Limiter: pipeline.NewLimiter(1 << 10)}
	res, err := Copy(ctx, []Endpoint{local(src)}, Endpoint{end, dst}, o)
	got, rerr := os.ReadFile(dst)
	switch {
	case rerr == nil && bytes.Equal(got, data):
		// Copied after all: correct, if not what the limit allows.
	case res != nil && res.Files > 0:
		t.Fatalf("Copy reported %d files copied, errors %v, err %v; the target: %v", res.Files, res.Errors, err, rerr)
	case err == nil && (res == nil || len(res.Errors) == 0):
		t.Fatalf("Copy neither copied the file nor said why: %v", rerr)
	}
}
