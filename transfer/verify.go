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

// sum256 is the package's sum256, asking a helper at e's end where one
// answers (Options.Helper): Go's SHA-256 on the server's CPU rather than
// its sha256sum, which took 2.5 s a GiB on the test machine.
func (c *copier) sum256(ctx context.Context, e Endpoint, size int64) ([]byte, error) {
	if c.opts.Helper != nil && isRemote(e.FS) && size >= 0 {
		s, release, err := c.opts.Helper.DeltaSession(ctx, e.FS)
		if err != nil && ctx.Err() == nil {
			c.helperMissed.Do(func() { c.logf("hash %s: no helper: %v; asking the server's sha256sum", e, err) })
		}
		if err == nil {
			sums, errs, err := s.SHA256s(ctx, []string{e.Path}, []int64{size})
			release()
			switch {
			case err == nil && errs[0] == nil && len(sums[0]) == sha256.Size:
				return sums[0], nil
			case err == nil && errs[0] != nil:
				c.logf("hash %s: the helper: %v; asking the server's sha256sum", e, errs[0])
			case err != nil && ctx.Err() == nil:
				c.logf("hash %s: the helper: %v; asking the server's sha256sum", e, err)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sum256(ctx, e)
}

// startHelper starts, with --verify, the helper of the copy's remote end
// beside the first file's copy, so that the hash asked of it at the
// end does not wait a process's start and two round trips more.
func (c *copier) startHelper(ctx context.Context, src, dst Endpoint) {
	if c.opts.Helper == nil || !c.opts.Verify {
		return
	}
	end := dst.FS
	if !isRemote(end) {
		end = src.FS
	}
	if !isRemote(end) {
		return
	}
	c.helperStarted.Do(func() {
		go func() {
			if _, release, err := c.opts.Helper.DeltaSession(ctx, end); err == nil {
				release() // idle, for the hash to take
			}
		}()
	})
}

// verify compares the SHA-256 of the source, srcSum's when the copy
// has it taken or under way, with that of the written temporary file tmp,
// and returns the hex hash when they agree.
//
// Where the source's sum is still to be taken, the two are taken at once:
// one end each (a file of a long copy hashes in about a second a GiB on
// either), so --verify costs the slower of the two, not their sum.
func (c *copier) verify(ctx context.Context, src, dst, tmp Endpoint, srcSum func() ([]byte, error), size int64) (string, error) {
	if srcSum == nil {
		ahead := c.sumAhead(ctx, src, size)
		defer ahead.stop()
		srcSum = ahead.wait
	}
	got, err := c.sum256(ctx, tmp, size)
	want, srcErr := srcSum()
	if srcErr != nil {
		return "", srcErr
	}
	if err != nil {
		return "", err
	}
	if !bytes.Equal(want, got) {
		return "", &Error{Op: "verify", Path: dst.String(),
			Err:  fmt.Errorf("%w: source sha256 %x, written file %x", errChecksumMismatch, want, got),
			Hint: "the written file was removed and the target left as it was; check the target's disk and run the copy again"}
	}
	return hex.EncodeToString(got), nil
}

// A summing is the SHA-256 of a file being taken on a goroutine of its
// own (sumAhead).
type summing struct {
	cancel context.CancelFunc
	done   chan struct{}
	sum    []byte
	err    error
}

// sumAhead starts hashing the file at e, of size bytes, where it lies
// (c.sum256): a copy's source is hashed so while the streams copy it, and
// only the written file's hash is left for the end.
func (c *copier) sumAhead(ctx context.Context, e Endpoint, size int64) *summing {
	ctx, cancel := context.WithCancel(ctx)
	s := &summing{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.sum, s.err = c.sum256(ctx, e, size)
	}()
	return s
}

// wait returns the sum once taken.
func (s *summing) wait() ([]byte, error) {
	<-s.done
	return s.sum, s.err
}

// stop gives up the sum where it is still being taken, and returns once
// its goroutine has.
func (s *summing) stop() {
	s.cancel()
	<-s.done
}

// Sum256 returns the SHA-256 of the file e, asking its end for it where
// the end can hash on its own side (hpncp sync's --checksum).
func Sum256(ctx context.Context, e Endpoint) ([]byte, error) { return sum256(ctx, e) }
