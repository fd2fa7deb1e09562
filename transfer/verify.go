package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// summer is an end that can hash one of its files where it lives, without
// sending the bytes: a remote end running sha256sum or shasum -a 256.
// Ends that are not Summers, or whose Sum256 fails, are read back instead.
type summer interface {
	Sum256(ctx context.Context, name string) ([]byte, error)
}

// errChecksumMismatch is the cause of a --verify failure: the written file
// does not hold what was read from the source.
var errChecksumMismatch = errors.New("checksum mismatch")

// sum256 returns the SHA-256 of the file at e.
func sum256(ctx context.Context, e Endpoint) ([]byte, error) {
	if s, ok := e.FS.(summer); ok {
		if sum, err := s.Sum256(ctx, e.Path); err == nil && len(sum) == sha256.Size {
			return sum, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	f, err := e.FS.Open(e.Path)
	if err != nil {
		return nil, &Error{Op: "hash", Path: e.String(), Err: err}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Op: "hash", Path: e.String(), Err: err}
	}
	return h.Sum(nil), nil
}

// ctxReader stops a read loop once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// hashingReader hashes what passes through it, so that --verify need not
// read the source a second time.
type hashingReader struct {
	r io.Reader
	h hash.Hash
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	return n, err
}

// verify compares the SHA-256 of the source, srcSum when the copy already
// computed it, with that of the written temporary file tmp, and returns
// the hex hash when they agree.
func verify(ctx context.Context, src, dst, tmp Endpoint, srcSum []byte) (string, error) {
	if srcSum == nil {
		var err error
		if srcSum, err = sum256(ctx, src); err != nil {
			return "", err
		}
	}
	got, err := sum256(ctx, tmp)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(srcSum, got) {
		return "", &Error{Op: "verify", Path: dst.String(),
			Err:  fmt.Errorf("%w: source sha256 %x, written file %x", errChecksumMismatch, srcSum, got),
			Hint: "the written file was removed and the target left as it was; check the target's disk and run the copy again"}
	}
	return hex.EncodeToString(got), nil
}

// Sum256 returns the SHA-256 of the file e, asking its end for it where
// the end can hash on its own side (hpncp sync's --checksum).
func Sum256(ctx context.Context, e Endpoint) ([]byte, error) { return sum256(ctx, e) }
