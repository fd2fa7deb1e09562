package helper

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/hpncp/hpncp/delta"
)

// A push of one file (hpncp sync of a local file to a remote one) has
// the helpers of its delta's other shares, in their command lines, sign
// the file it will most likely push over (opSignAhead), before the
// client has listed it: each signs a part of the signature
// (delta.SignPartTo) and sends it as it is made, from its start, over
// its own connection, while the client's SFTP start and its look at the
// target go on. The push then asks its own helper for none (patchSigned):
// the signature is there, or on its way, over several connections at
// once rather than one, whose first round trips carry little.
//
// The request names a path and a name: the file at the path, or, the
// path being a directory, the file of that name in it (the destination
// the client gives and the source's name, as the client's copy decides
// between them once it has looked). It gives the source's size and
// modification time: a file with both is one the client's quick check
// will find unchanged and not push, and is not signed. Then the part, as
// a share (N, I). The answer is the path of the file signed ("" for
// none), the part as a chunked stream (empty for none), and the status:
// why none was signed, or a part cut short.
//
// What the client then pushes is checked range by range against the
// source's hashes whatever the signature was of, as every push's is: a
// file replaced between the signing and the push makes a delta that
// fails, and the file goes whole.

// SignAheadArg is the serve arguments that ask, in the helper's command
// line, for part of the signature of the file at p (or named name in p,
// a directory) ahead of the push of a source of size bytes, modified at
// mtime. It is "" where the request is too long for a command line.
func SignAheadArg(p, name string, size int64, mtime time.Time, part delta.Share) string {
	req := appendString([]byte{opSignAhead}, p)
	req = appendString(req, name)
	req = binary.AppendUvarint(req, uint64(max(size, 0)))
	req = binary.AppendVarint(req, mtime.Unix())
	req = appendShare(req, part)
	return requestArg(req)
}

// errUnchanged is why a file the quick check passes is not signed.
var errUnchanged = errors.New("the file has the source's size and modification time")

// serveSignAhead answers a sign-ahead request: the path of the file
// signed, and its part of the signature as it is made.
func serveSignAhead(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles) (rerr, err error) {
	fr := fields{r: r}
	p, name := fr.path(), fr.path()
	size, mtime := fr.uint(delta.MaxSize), fr.int()
	part := fr.share()
	if fr.err != nil {
		return nil, fr.err
	}
	f, fi, signed, rerr := openSignAhead(files, p, name, size, mtime)
	if rerr == nil && part.N < 1 {
		rerr = errors.New("a sign-ahead of no parts")
	}
	if rerr != nil {
		signed = ""
	}
	if _, err := w.Write(appendString(nil, signed)); err != nil {
		return nil, err
	}
	if rerr == nil {
		defer f.Close()
		ew := &errWriter{w: flushWriter{w: w}}
		rerr = delta.SignPartTo(ctx, f, fi.Size(), part, ew)
		if ew.err != nil {
			return nil, ew.err
		}
	} else if f != nil {
		f.Close()
	}
	return rerr, chunkWriter{w: w}.end()
}

// openSignAhead opens the file a sign-ahead names: at p, or named name
// in p, and not one with the source's size and modification time.
func openSignAhead(files DeltaFiles, p, name string, size, mtime int64) (f ReadAtCloser, fi fs.FileInfo, signed string, err error) {
	signed = p
	f, err = files.Open(p, -1)
	if err != nil && name != "" && name != "." && name != ".." && !strings.Contains(name, "/") {
		signed = path.Join(p, name)
		f, err = files.Open(signed, -1)
	}
	if err != nil {
		return nil, nil, "", err
	}
	st, ok := f.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		f.Close()
		return nil, nil, "", errors.New("cannot stat the file here")
	}
	if fi, err = st.Stat(); err == nil && fi.Size() == size && fi.ModTime().Unix() == mtime {
		err = errUnchanged
	}
	if err != nil {
		f.Close()
		return nil, nil, "", err
	}
	return f, fi, signed, nil
}

// ReadSignedAhead reads, on a goroutine of its own, the answer to the
// sign-ahead the helper's command line asked for (SignAheadArg): signed
// is told the path of the file signed ("" for none) as soon as it is
// in, and the part goes into parts as it comes; a part that does not
// come whole, or none, fails parts. Every other answer on the channel
// comes after this one: a request waits for it to be read (settled).
// Call it once the hello is in, before any request.
func (c *DeltaClient) ReadSignedAhead(parts *delta.SignatureParts, signed func(path string)) {
	done := make(chan struct{})
	c.mu.Lock()
	c.signing = done
	c.mu.Unlock()
	go func() {
		err := c.readSignedAhead(parts, signed)
		c.signErr = err // read once done is closed
		close(done)
	}()
}

func (c *DeltaClient) readSignedAhead(parts *delta.SignatureParts, signed func(path string)) error {
	p, err := readString(c.r, maxPathLen)
	if err != nil {
		signed("")
		parts.Fail(err)
		return err
	}
	signed(p)
	in := &chunkReader{r: c.r}
	if p != "" {
		if err := parts.ReadPart(in); err != nil && !in.done {
			if errors.Is(err, delta.ErrFormat) {
				return fmt.Errorf("%w: %v", ErrDeltaProtocol, err)
			}
			// Cut short by the helper, whose status says why; or
			// the channel failed.
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				return err
			}
		}
	}
	// The part's stream ends right after its last block.
	if err := in.ended("a signature's part"); err != nil {
		parts.Fail(err)
		return err
	}
	_, err = c.status()
	var de *DeltaError
	if errors.As(err, &de) {
		parts.Fail(de) // none signed, or the signing failed: why
		return nil
	}
	if err == nil && p == "" {
		err = fmt.Errorf("%w: a sign-ahead of no file succeeded", ErrDeltaProtocol)
	}
	if err != nil {
		parts.Fail(err)
	}
	return err
}

// settled waits for the sign-ahead's answer to be read, where one was
// asked for (ReadSignedAhead): a channel out of step after it is given
// up. ctx's end gives up the channel.
func (c *DeltaClient) settled(ctx context.Context) error {
	if c.signing == nil {
		return nil
	}
	select {
	case <-c.signing:
	case <-ctx.Done():
		return c.breaks(ctx.Err())
	}
	return c.breaks(c.signErr)
}
