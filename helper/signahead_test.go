package helper

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/filter"
)

// signAheadPair is deltaPair with arg, SignAheadArg's, in the command
// line, its answer read into parts; signed is told the path signed.
func signAheadPair(t *testing.T, arg string, parts *delta.SignatureParts) (c *DeltaClient, signed chan string) {
	t.Helper()
	value, ok := strings.CutPrefix(arg, "--"+RequestFlag+" ")
	if !ok {
		t.Fatalf("SignAheadArg: %q", arg)
	}
	a, b := net.Pipe()
	in, err := RequestInput(value, b)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ServeDelta(context.Background(), in, b); b.Close(); close(done) }()
	c, err = NewDeltaClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-done })
	signed = make(chan string, 1)
	c.ReadSignedAhead(parts, func(p string) { signed <- p })
	return c, signed
}

// TestPushSignedAhead: the helpers of a push's other shares, asked in
// their command lines, sign the basis (the file of the name given, in
// the directory given) in parts and send them from their start; the
// push, asking its own helper for no signature, diffs against them, and
// the file is rebuilt right. The channels go on in step.
func TestPushSignedAhead(t *testing.T) {
	ctx := context.Background()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := t.TempDir()
	old := randomBytes(5, 20<<20)
	next := bytes.Clone(old)
	copy(next[3<<20:], randomBytes(6, 100_000))
	copy(next[15<<20:], randomBytes(7, 100_000))
	basis := filepath.Join(dir, "f")
	os.WriteFile(basis, old, 0o644)
	srcTime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 3 // shares: the push's own channel and two that sign
	parts, err := delta.NewSignatureParts(n - 1)
	if err != nil {
		t.Fatal(err)
	}
	var others []*DeltaClient
	for i := range n - 1 {
		c, signed := signAheadPair(t, SignAheadArg(dir, "f", int64(len(next)), srcTime, delta.Share{N: n - 1, I: i}), parts)
		if p := <-signed; p != basis {
			t.Fatalf("part %d signed %q, want %q", i, p, basis)
		}
		others = append(others, c)
	}
	if size, err := parts.Size(ctx); size != int64(len(old)) || err != nil {
		t.Fatalf("the parts say a basis of %d bytes (%v), want %d", size, err, len(old))
	}
	sig, err := parts.Wait(ctx, int64(len(old)))
	want, _ := delta.Sign(ctx, bytes.NewReader(old), int64(len(old)), 0)
	if err != nil || !slices.Equal(sig.Weak, want.Weak) || !slices.Equal(sig.Strong, want.Strong) {
		t.Fatalf("the signature from its parts: %v, or not the basis's", err)
	}

	c := deltaPair(t)
	final := filepath.Join(dir, "final")
	diff := func(w io.Writer, sh delta.Share, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) error {
		_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks, Share: sh, Ahead: true})
		return err
	}
	st, _, err := c.SignPatchShares(ctx, basis, int64(len(old)), filepath.Join(dir, ".f.tmp"), int64(len(next)), Attrs{RenameTo: final}, Shares{N: n, Signed: parts,
		Others: func(ctx context.Context, under bool, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error) {
			var all delta.Stats
			for i, o := range others {
				sh := delta.Share{N: n, I: i + 1}
				st, err := o.PatchShare(ctx, basis, int64(len(old)), filepath.Join(dir, ".f.tmp"), int64(len(next)), under, sh, func(w io.Writer) error {
					return diff(w, sh, sig, blocks)
				})
				if err != nil {
					return all, err
				}
				all.Add(st)
			}
			return all, nil
		}}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		return diff(w, delta.Share{N: n}, sig, blocks)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(final); !bytes.Equal(got, next) || st.Literal > 1<<20 {
		t.Fatalf("the push against the signature signed ahead: %d bytes, want the new file's %d; %+v", len(got), len(next), st)
	}
	for i, o := range append(others, c) {
		if err := inStep(ctx, o, final, int64(len(next))); err != nil {
			t.Errorf("channel %d after the push: %v", i, err)
		}
	}

	// Any request on a channel that signs ahead gets its own answer,
	// read after the part's: a walk, a sum, a follow.
	asks := []func(c *DeltaClient) error{
		func(c *DeltaClient) error { _, _, err := c.Walk(ctx, dir, 100, 1<<20, filter.Prune{}); return err },
		func(c *DeltaClient) error { return inStep(ctx, c, final, int64(len(next))) },
		func(c *DeltaClient) error {
			written := make(chan int64, 1)
			written <- int64(len(next))
			close(written)
			_, err := c.FollowSHA256(ctx, final, int64(len(next)), written)
			return err
		},
	}
	for i, ask := range asks {
		parts, _ := delta.NewSignatureParts(1)
		c, _ := signAheadPair(t, SignAheadArg(basis, "", int64(len(next)), srcTime, delta.Share{N: 1}), parts)
		if err := ask(c); err != nil {
			t.Errorf("request %d on a channel that signs ahead: %v", i, err)
		}
		if _, err := parts.Wait(ctx, delta.MaxSize); err != nil {
			t.Errorf("request %d: the part signed ahead: %v", i, err)
		}
	}
}

// TestSignAheadNone: a file the quick check takes for the source's, one
// not there, and a part of no parts are not signed: the path signed is
// "", the parts fail with the helper's reason, and the channel goes on.
func TestSignAheadNone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(8, 1<<20)
	basis := filepath.Join(dir, "f")
	os.WriteFile(basis, old, 0o644)
	mtime := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	os.Chtimes(basis, mtime, mtime)
	for _, c := range []struct {
		name, p, in string
		size        int64
		mtime       time.Time
		part        delta.Share
		why         string
	}{
		{"the quick check's", dir, "f", int64(len(old)), mtime, delta.Share{N: 2, I: 1}, "size and modification time"},
		{"nothing there", filepath.Join(dir, "none"), "f", 1, mtime, delta.Share{N: 2, I: 1}, "no such file"},
		{"a directory", dir, "", 1, mtime, delta.Share{N: 2, I: 0}, "not a regular file"},
		{"no parts", basis, "", 1, mtime, delta.Share{}, "no parts"},
	} {
		parts, _ := delta.NewSignatureParts(2)
		cl, signed := signAheadPair(t, SignAheadArg(c.p, c.in, c.size, c.mtime, c.part), parts)
		if p := <-signed; p != "" {
			t.Errorf("%s: signed %q", c.name, p)
		}
		if _, err := parts.Wait(ctx, int64(len(old))); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: the parts end with %v, want %q", c.name, err, c.why)
		}
		if err := inStep(ctx, cl, basis, int64(len(old))); err != nil {
			t.Errorf("%s: after it: %v", c.name, err)
		}
	}
}

// TestSignAheadOutOfStep: an answer that is not a sign-ahead's fails the
// parts, and the channel is given up.
func TestSignAheadOutOfStep(t *testing.T) {
	ctx := context.Background()
	for _, reply := range []string{
		"\x01f\x05hello\x00K\x00\x00\x00", // a part that is not one
		"\x01f\x00X",                      // a status cut short
		"\x00\x00K\x00\x00\x00",           // none signed, and yet no error
	} {
		a, b := net.Pipe()
		go func() {
			b.Write([]byte(deltaHello + reply))
			b.Close() // what follows is cut short
		}()
		c, err := NewDeltaClient(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		parts, _ := delta.NewSignatureParts(2)
		c.ReadSignedAhead(parts, func(string) {})
		if _, err := parts.Wait(ctx, 1); err == nil {
			t.Errorf("%q: the parts did not fail", reply)
		}
		_, _, err = c.Sums(ctx, []string{"f"}, []int64{1})
		if err == nil || !c.Broken() {
			t.Errorf("%q: a request after it: %v, broken %v", reply, err, c.Broken())
		}
		var de *DeltaError
		if errors.As(err, &de) {
			t.Errorf("%q: the helper's refusal, not the channel's end: %v", reply, err)
		}
		c.Close()
		b.Close()
	}
}
