package helper

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"testing"
	"time"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/filter"
	"github.com/klauspost/compress/zstd"
)

// replyConn is a channel whose far end says reply, whatever is written.
type replyConn struct{ io.Reader }

func (replyConn) Write(p []byte) (int, error) { return len(p), nil }
func (replyConn) Close() error                { return nil }

// FuzzDeltaReplies: whatever a helper answers, the client's requests end
// without panicking, and a signature or delta they hand on is one the
// delta package read whole and checked.
func FuzzDeltaReplies(f *testing.F) {
	ctx := context.Background()
	basis := bytes.Repeat([]byte("basis "), 500)
	sig, _ := delta.Sign(ctx, bytes.NewReader(basis), int64(len(basis)), 700)
	var sigWire, deltaWire bytes.Buffer
	delta.WriteSignature(&sigWire, sig)
	delta.Diff(ctx, sig, bytes.NewReader(basis[7:]), int64(len(basis)-7), &deltaWire, delta.DiffOptions{})
	chunked := func(p []byte, status string) []byte {
		var b bytes.Buffer
		w := chunkWriter{w: bufio.NewWriter(&b)}
		w.Write(p)
		w.end()
		w.w.Flush()
		return append(b.Bytes(), status...)
	}
	f.Add(uint8(0), chunked(sigWire.Bytes(), "K\x00\x00\x00"))
	// A push's answer: the counts, then the rebuilt file's stat.
	f.Add(uint8(0), chunked(sigWire.Bytes(), "K\x00\x00\x00"+string(appendMade(nil, madeOf(10, 0o644)))))
	f.Add(uint8(1), chunked(nil, "X\x05nope!"))
	f.Add(uint8(2), chunked(deltaWire.Bytes(), "K\x07\x80\x17\x01"))
	f.Add(uint8(1), chunked(nil, "K\x00\x00\x00"))
	zenc, _ := zstd.NewWriter(nil)
	f.Add(uint8(4), chunked(zenc.EncodeAll([]byte("E\x00\x03top\xa4\x03\x03\x01\x01\x00\x00\x00E\x00\x04link\x80\x80\x80\x40\x00\x00\x00\x00\x00\x02..X\x01d\x04nope"), nil), "K\x00\x00\x00"))
	f.Add(uint8(3), chunked(append(append([]byte{0}, make([]byte, 16)...), append([]byte{1, 4, 'g', 'o', 'n', 'e', 0}, make([]byte, 16)...)...), "K\x00\x00\x00"))
	f.Add(uint8(5), chunked(make([]byte, 32), "K\x00\x00\x00"))
	// -z: the delta compressed.
	f.Add(uint8(6), chunked(zenc.EncodeAll(deltaWire.Bytes(), nil), "K\x07\x80\x17\x01"))
	// A pull asked ahead: the same reply as a pull's.
	f.Add(uint8(7), chunked(deltaWire.Bytes(), "K\x07\x80\x17\x01"))
	// A sign-ahead's answer (the path signed, the part, the status),
	// then sums'.
	var part bytes.Buffer
	delta.SignPartTo(ctx, bytes.NewReader(basis), int64(len(basis)), delta.Share{N: 1}, &part)
	sumsReply := "\x00" + string(make([]byte, 16)) + "K\x00\x00\x00"
	f.Add(uint8(8), append(appendString(nil, "f"), chunked(part.Bytes(), "K\x00\x00\x00"+sumsReply)...))
	f.Add(uint8(8), append(appendString(nil, ""), chunked(nil, "X\x04none"+sumsReply)...))
	f.Fuzz(func(t *testing.T, op uint8, reply []byte) {
		c, err := NewDeltaClient(ctx, replyConn{io.MultiReader(bytes.NewReader([]byte(deltaHello)), bytes.NewReader(reply))})
		if err != nil {
			t.Fatal(err)
		}
		switch op % 9 {
		case 8:
			parts, _ := delta.NewSignatureParts(1)
			c.ReadSignedAhead(parts, func(string) {})
			c.Sums(ctx, []string{"a"}, []int64{1})
			if s, err := parts.Wait(ctx, delta.MaxSize); err == nil && int64(len(s.Weak)) != delta.Blocks(s.Size, s.BlockLen) {
				t.Fatalf("a signature of %d bytes in blocks of %d, whole with %d", s.Size, s.BlockLen, len(s.Weak))
			}
		case 7:
			sign := func(w io.Writer) error { return delta.WriteSignature(w, sig) }
			if err := c.DiffAhead("f", sign, false, delta.Share{}); err != nil {
				t.Fatal(err)
			}
			c.DiffStream(ctx, "f", int64(len(basis)-7), sign, false, delta.Share{}, func(r io.Reader) error {
				_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(basis), Size: sig.Size, BlockLen: sig.BlockLen}, discardAt{}, int64(len(basis)-7))
				return err
			})
		case 6:
			c.Compress(true)
			c.Diff(ctx, "f", int64(len(basis)-7), sig, false, func(r io.Reader) error {
				_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(basis), Size: sig.Size, BlockLen: sig.BlockLen}, discardAt{}, int64(len(basis)-7))
				return err
			})
		case 5:
			written := make(chan int64, 1)
			written <- 10
			close(written)
			if sum, err := c.FollowSHA256(ctx, "f", 10, written); err == nil && len(sum) != 32 {
				t.Fatalf("a SHA-256 of %d bytes", len(sum))
			}
		case 4:
			dirs, _, err := c.Walk(ctx, "root", 100, 4096, filter.Prune{})
			n := 0
			for _, es := range dirs {
				n += len(es)
			}
			if err == nil && n > 100 {
				t.Fatalf("a walk bounded at 100 entries gave %d", n)
			}
		case 0:
			c.SignPatch(ctx, "f", int64(len(basis)), "t", 10, Attrs{}, func(s *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
				if s.Size != int64(len(basis)) {
					t.Fatalf("a signature of %d bytes for a file of %d", s.Size, len(basis))
				}
				_, err := delta.Diff(ctx, s, bytes.NewReader(basis[:10]), 10, w, delta.DiffOptions{Blocks: blocks})
				return err
			})
		case 1:
			c.SignPatch(ctx, "f", int64(len(basis)), "", 10, Attrs{}, func(_ *delta.Signature, _ func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
				_, err := w.Write([]byte("delta"))
				return err
			})
		case 3:
			sums, errs, err := c.Sums(ctx, []string{"a", "b", "c"}, []int64{1, 2, 3})
			if err == nil && (len(sums) != 3 || len(errs) != 3) {
				t.Fatalf("sums of 3 files: %d sums, %d errors", len(sums), len(errs))
			}
		case 2:
			c.Diff(ctx, "f", int64(len(basis)-7), sig, false, func(r io.Reader) error {
				_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(basis), Size: sig.Size, BlockLen: sig.BlockLen}, discardAt{}, int64(len(basis)-7))
				return err
			})
		}
	})
}

// madeOf is a regular file's stat of size and mode, owned by 1000:1000.
func madeOf(size int64, mode fs.FileMode) fs.FileInfo {
	return &Made{name: "t", size: size, mode: mode, mtime: time.Unix(1700000000, 5), uid: 1000, gid: 1000}
}

type discardAt struct{}

func (discardAt) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
