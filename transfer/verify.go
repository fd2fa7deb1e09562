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
	"sync"
	"sync/atomic"
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
//
// tmpSum, when not nil, is the written file's sum taken behind the copy
// (follow); where it failed, the file is hashed again.
func (c *copier) verify(ctx context.Context, src, dst, tmp Endpoint, srcSum, tmpSum func() ([]byte, error), size int64) (string, error) {
	if srcSum == nil {
		ahead := c.sumAhead(ctx, src, size)
		defer ahead.stop()
		srcSum = ahead.wait
	}
	var got []byte
	var err error
	if tmpSum != nil {
		switch got, err = tmpSum(); {
		case err == nil:
			c.logf("hash %s: taken behind the copy", tmp)
		case ctx.Err() == nil:
			c.logf("hash %s behind the copy: %v; hashing it again", tmp, err)
		}
	}
	if tmpSum == nil || err != nil {
		got, err = c.sum256(ctx, tmp, size)
	}
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

// A follower hashes the file the parallel streams are writing, behind
// them (--verify): told of every chunk written and acknowledged
// (written), it has the file's written start hashed as it grows, by the
// helper at a remote end or here at a local one, so that once the
// streams are done only their last bytes are left to hash, not the file.
// A chunk acknowledged is not written again.
type follower struct {
	mu    sync.Mutex
	wm    watermark
	moved chan struct{} // a value: wm moved, or the copy ended
	ended bool
	size  int64
	// doubled is set once a chunk was handed out while another copy
	// of it flew (pipeline.ParallelOptions.Twice): that copy may land
	// after the first was hashed, its bytes read from the source again,
	// so the hash behind is given up and the file hashed once whole.
	doubled atomic.Bool

	cancel context.CancelFunc
	done   chan struct{} // the hash and the pump have returned
	sum    []byte
	err    error
}

// followStep is how far the written start moves between the marks sent
// to the hash.
const followStep = 4 << 20

// follow starts hashing behind the copy the file tmp, of size bytes, whose
// first from bytes are there already (a resumed copy); nil where its end
// has no way to (a remote end without a helper).
func (c *copier) follow(ctx context.Context, tmp Endpoint, size, from int64) *follower {
	var hash func(ctx context.Context, written <-chan int64) ([]byte, error)
	switch {
	case !isRemote(tmp.FS):
		hash = func(ctx context.Context, written <-chan int64) ([]byte, error) {
			return followHere(ctx, tmp, written)
		}
	case c.opts.Helper != nil:
		hash = func(ctx context.Context, written <-chan int64) ([]byte, error) {
			s, release, err := c.opts.Helper.DeltaSession(ctx, tmp.FS)
			if err != nil {
				return nil, err
			}
			defer release()
			return s.FollowSHA256(ctx, tmp.Path, size, written)
		}
	default:
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{wm: watermark{at: from}, moved: make(chan struct{}, 1), size: size, cancel: cancel, done: make(chan struct{})}
	written := make(chan int64)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		f.sum, f.err = hash(ctx, written)
	}()
	go func() {
		// The hash reads written to its end: it is closed whatever
		// ends the pump (given up, the hash failed, the copy ended).
		defer func() {
			close(written)
			<-hashed
			close(f.done)
		}()
		sent := int64(-1)
		for {
			select {
			case <-f.moved:
			case <-hashed:
				return
			case <-ctx.Done():
				return
			}
			f.mu.Lock()
			at, ended := f.wm.at, f.ended
			f.mu.Unlock()
			if f.doubled.Load() {
				return // the hash ends short, and is not used
			}
			if at > sent && (at-sent >= followStep || at == size || ended) {
				select {
				case written <- at:
					sent = at
				case <-hashed:
					return
				case <-ctx.Done():
					return
				}
			}
			if ended {
				return
			}
		}
	}()
	return f
}

// written is told of n bytes written and acknowledged at off: quick, as
// the streams' Done must be.
func (f *follower) written(off int64, n int) {
	f.mu.Lock()
	f.wm.add(off, n)
	f.mu.Unlock()
	select {
	case f.moved <- struct{}{}:
	default:
	}
}

// twice is told of a chunk copied twice at once: quick, as the streams'
// Twice must be.
func (f *follower) twice() {
	f.doubled.Store(true)
	select {
	case f.moved <- struct{}{}:
	default:
	}
}

// wait returns the sum, once every byte is written (the copy ended).
func (f *follower) wait() ([]byte, error) {
	f.mu.Lock()
	f.ended = true
	f.mu.Unlock()
	select {
	case f.moved <- struct{}{}:
	default:
	}
	<-f.done
	if f.doubled.Load() {
		return nil, errors.New("a chunk was copied twice at once")
	}
	return f.sum, f.err
}

// stop gives the hash up where it still runs, and returns once it has.
func (f *follower) stop() {
	f.cancel()
	<-f.done
}

// followHere hashes the file at e, on this end, as far as each value of
// written says it is written.
func followHere(ctx context.Context, e Endpoint, written <-chan int64) ([]byte, error) {
	r, err := e.FS.Open(e.Path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := sha256.New()
	hashed := int64(0)
	for at := range written {
		if _, err := io.CopyN(h, ctxReader{ctx, r}, at-hashed); err != nil {
			return nil, fmt.Errorf("read at %d: %w", hashed, err)
		}
		hashed = at
	}
	return h.Sum(nil), nil
}
