package helper

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hpncp/hpncp/delta"
)

// The delta service (hpncp serve --delta) runs on one exec channel: the
// client asks, one request at a time, for what needs the file where it
// lies: a file there rebuilt from its old version, which the helper
// signs, and a delta against the signature (a push), or a delta of a
// file there against the client's signature (a pull). The channel
// carries, after the helper's hello line:
//
//	request: op, then its fields (strings and numbers as uvarints), then
//	         for 'A' and 'D' a chunked stream (the delta, the signature);
//	         an 'A' naming no temporary file rewrites the basis in place,
//	         a 'D' flagged diffInPlace makes a delta for that
//	reply:   a chunked stream (the signature, the delta), then 'K' and
//	         the delta's counts (an 'A's then the rebuilt file's stat:
//	         appendMade), or 'X' and a message
//
// An 'A' and a 'D' are both ways at once: the signature streams one way
// while the delta, made of the blocks that have arrived, streams the
// other. An 'A' ends with flags, a 'D' has them after its size:
// patchZstd and diffZstd say the delta's stream carries a zstd stream of
// it (-z).
//
// An 'A' may carry after its flags the mode and times the rebuilt file
// is given before the status, and the name it then takes in place of
// the temporary one: the client's finish then has nothing left to ask
// for.
//
// An 'S' (sign ahead), asked in the command line, names the basis of a
// push to come and a part of its signature, which the helper signs and
// sends at once: the reply is the path signed, the part as a chunked
// stream, then the status (signahead.go). A push flagged patchSigned
// then gets no signature in its reply.
//
// A 'W' (follow) names a file and its size, then streams uvarints, each
// how many of the file's first bytes are written by now; the reply is
// the SHA-256 of them all, once the stream has said the whole file.
//
// A chunked stream is chunks of a uvarint length (at most maxChunk) and
// that many bytes, ended by a chunk of none: an end that fails part way
// through still ends its stream, and the channel stays in step.

// deltaHello is the delta service's first line. Version 3: the first
// request may come in the command line (RequestArg); 4: a delta may go
// compressed (patchZstd, diffZstd); 5: a walk carries filter rules; 6: a
// push is one request ('A'), the signature and the delta streaming both
// ways at once, the temporary file made by the helper; 7: a pull may
// leave the file's size to the helper (diffAnySize); 8: a pull may ask for
// a share of the delta's ranges (diffShare), and a push may go in shares
// (patchShares, opPatchShare); 9: a delta not in place may send bytes
// ahead (delta.DiffOptions.Ahead), both ways; 10: a push's signature may
// come ahead, in parts, from the helpers of its other shares
// (opSignAhead, patchSigned).
const deltaHello = "hpncp-delta 10\n"

const (
	opSignPatch = 'A'
	// opPatchShare applies a share of a push's delta into the new file
	// the push's own request made (patchShares).
	opPatchShare = 'P'
	opDiff       = 'D'
	opSums       = 'H'
	opSHA        = 'G' // sums as SHA-256, for --verify and scp-style --checksum
	opWalk       = 'L'
	// opFollow: the SHA-256 of a file others are writing, hashed as the
	// client says how much of its start is written (--verify).
	opFollow = 'W'
	// opSignAhead: a part of the signature of the basis of a push to
	// come, signed and sent before the push asks (SignAheadArg).
	opSignAhead = 'S'

	statusOK   = 'K'
	statusFail = 'X'

	// diffInPlace, in a diff request's flags, asks for a delta to be
	// applied over its basis (delta.DiffOptions.InPlace).
	diffInPlace = 1
	// diffZstd, in a diff request's flags, asks for the delta compressed;
	// patchZstd, in a push's, says it comes so.
	diffZstd  = 2
	patchZstd = 1
	// diffAnySize, in a diff request's flags, says the size it gives is
	// not known: the file is diffed at the size it has, which the
	// delta's header says (a pull asked before the file was listed,
	// DiffAhead).
	diffAnySize = 4
	// diffShare, in a diff request's flags, says a share of the delta's
	// ranges is asked for (delta.Share: its N, then its I, follow the
	// flags), the others going on other channels at once.
	diffShare = 8
	// patchMode and patchTimes, in a push's flags, say a mode, and an
	// access and a modification time (seconds, as SFTP sets them),
	// follow them, which the helper gives the file once it is whole.
	patchMode  = 2
	patchTimes = 4
	// patchRename, in a push's flags, says a path follows its times,
	// which the helper renames the new file to once it is whole.
	patchRename = 8
	// patchShares, in a push's flags, says its delta goes in shares (N
	// follows the rename's path): the request's channel carries share
	// 0, and the others go on channels of their own (opPatchShare). The
	// reply begins with a byte saying what the helper made: a fresh
	// file (shareFresh), a clone of the basis (shareClone), or nothing
	// (shareNone: the request failed). The client's delta is followed
	// by its verdict, statusOK once every other share was applied, and
	// the helper finishes the file (its mode, times, name) only then.
	patchShares = 16
	// patchSigned, in a push's flags (one in shares), says the helper
	// sends no signature: it came ahead, in parts, on the channels of
	// the other shares (opSignAhead, Shares.Signed).
	patchSigned = 32
	// shareUnder, in a share's flags, says the new file is a clone of
	// the basis, whose blocks at their own offsets are not written.
	shareUnder = 1

	shareFresh = 'F'
	shareClone = 'C'
	shareNone  = 'N'

	maxChunk   = 1 << 20
	maxPathLen = 64 << 10
	// maxSums bounds the files of one sums request.
	maxSums = 1 << 20
)

// RequestFlag is hpncp serve's flag whose value, base64url, is the delta
// service's first request, read as if it came first on the channel: its
// answer then follows the hello without the round trip of a request sent
// once the channel has started. (The command line is in the server's
// process list, as rsync's paths are in its.) MaxRequestArg bounds the
// flag's value.
const (
	RequestFlag   = "request"
	MaxRequestArg = 8 << 10
)

// RequestInput is the delta service's input where a RequestFlag's value
// arg came in the command line: its request read first, then in. An
// empty arg gives in itself.
func RequestInput(arg string, in io.Reader) (io.Reader, error) {
	if arg == "" {
		return in, nil
	}
	if len(arg) > MaxRequestArg {
		return nil, fmt.Errorf("--%s: %d bytes, more than %d", RequestFlag, len(arg), MaxRequestArg)
	}
	req, err := base64.RawURLEncoding.DecodeString(arg)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", RequestFlag, err)
	}
	return io.MultiReader(bytes.NewReader(req), in), nil
}

// requestArg is the serve arguments that carry req in the command line,
// or "" where it is too long to.
func requestArg(req []byte) string {
	if base64.RawURLEncoding.EncodedLen(len(req)) > MaxRequestArg {
		return ""
	}
	return "--" + RequestFlag + " " + base64.RawURLEncoding.EncodeToString(req)
}

// ErrDeltaProtocol is wrapped by errors about bytes that are not the
// delta service's.
var ErrDeltaProtocol = errors.New("malformed delta service stream")

// chunkWriter writes a chunked stream.
type chunkWriter struct{ w *bufio.Writer }

func (c chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), maxChunk)
		c.w.Write(binary.AppendUvarint(nil, uint64(k)))
		if _, err := c.w.Write(p[:k]); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

func (c chunkWriter) end() error {
	return c.w.WriteByte(0)
}

// chunkReader reads a chunked stream, returning io.EOF at its end.
type chunkReader struct {
	r    *bufio.Reader
	left int
	done bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for c.left == 0 {
		if c.done {
			return 0, io.EOF
		}
		n, err := binary.ReadUvarint(c.r)
		if err != nil {
			return 0, eofIsUnexpected(err)
		}
		if n > maxChunk {
			return 0, fmt.Errorf("%w: chunk of %d bytes", ErrDeltaProtocol, n)
		}
		if n == 0 {
			c.done = true
			return 0, io.EOF
		}
		c.left = int(n)
	}
	k, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= k
	if err != nil && k == 0 {
		return 0, eofIsUnexpected(err)
	}
	return k, nil
}

// ended checks that the stream ends here, as one whose records are all
// read must: what comes after what (the signature, the delta) is not
// the protocol's.
func (c *chunkReader) ended(what string) error {
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return fmt.Errorf("%w: bytes after %s", ErrDeltaProtocol, what)
	}
	return nil
}

// drain reads the rest of the stream, so that what follows it can be.
func (c *chunkReader) drain() error {
	_, err := io.Copy(io.Discard, c)
	return err
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func appendString(p []byte, s string) []byte {
	p = binary.AppendUvarint(p, uint64(len(s)))
	return append(p, s...)
}

// appendShare appends a share of a delta's ranges (a request's
// diffShare, or a share of a push's): its N, then its I.
func appendShare(p []byte, sh delta.Share) []byte {
	p = binary.AppendUvarint(p, uint64(sh.N))
	return binary.AppendUvarint(p, uint64(sh.I))
}

func readString(r *bufio.Reader, limit int) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", eofIsUnexpected(err)
	}
	if n > uint64(limit) {
		return "", fmt.Errorf("%w: a string of %d bytes", ErrDeltaProtocol, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return "", eofIsUnexpected(err)
	}
	return string(p), nil
}

func readUint(r *bufio.Reader, limit uint64) (int64, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, eofIsUnexpected(err)
	}
	if n > limit {
		return 0, fmt.Errorf("%w: %d past %d", ErrDeltaProtocol, n, limit)
	}
	return int64(n), nil
}

// appendMade appends to b what a push's answer says of the file it
// rebuilt: its size, mode, modification time, owner and group.
func appendMade(b []byte, fi fs.FileInfo) []byte {
	uid, gid, _ := fileOwner(fi)
	b = binary.AppendUvarint(b, uint64(fi.Size()))
	b = binary.AppendUvarint(b, uint64(fi.Mode()))
	b = binary.AppendVarint(b, fi.ModTime().Unix())
	b = binary.AppendUvarint(b, uint64(fi.ModTime().Nanosecond()))
	b = binary.AppendUvarint(b, uint64(uid))
	return binary.AppendUvarint(b, uint64(gid))
}

// readMade reads what appendMade wrote of the file at name.
func readMade(r *bufio.Reader, name string) (*Made, error) {
	fr := fields{r: r}
	m := &Made{name: path.Base(name)}
	m.size = fr.uint(delta.MaxSize)
	m.mode = fs.FileMode(fr.uint(math.MaxUint32))
	sec, nsec := fr.int(), fr.uint(999_999_999)
	m.mtime = time.Unix(sec, nsec)
	m.uid, m.gid = int(fr.uint(math.MaxUint32)), int(fr.uint(math.MaxUint32))
	if fr.err != nil {
		return nil, fr.err
	}
	if !m.mode.IsRegular() {
		return nil, fmt.Errorf("%w: a push made a file of mode %v", ErrDeltaProtocol, m.mode)
	}
	return m, nil
}

// Made is the stat of the file a push rebuilt, as the helper took it
// once the file was whole. Its Sys is itself, whose Owner gives the
// file's owner and group.
type Made struct {
	name     string
	size     int64
	mode     fs.FileMode
	mtime    time.Time
	uid, gid int
}

func (m *Made) Name() string                   { return m.name }
func (m *Made) Size() int64                    { return m.size }
func (m *Made) Mode() fs.FileMode              { return m.mode }
func (m *Made) ModTime() time.Time             { return m.mtime }
func (m *Made) IsDir() bool                    { return false }
func (m *Made) Sys() any                       { return m }
func (m *Made) Owner() (uid, gid int, ok bool) { return m.uid, m.gid, true }

// DeltaError is the helper's message for a request it could not do. Its
// text is the server's: escape it before it reaches a terminal.
type DeltaError struct{ Message string }

func (e *DeltaError) Error() string { return "the helper: " + e.Message }

// A DeltaClient asks a helper's delta service for one thing at a time.
type DeltaClient struct {
	mu       sync.Mutex
	r        *bufio.Reader
	w        *bufio.Writer
	c        io.Closer
	broken   bool       // a reply was not read to its end: the channel is out of step
	compress bool       // deltas go zstd-compressed both ways (-z)
	ahead    *pullAhead // a pull asked ahead, its delta not read yet
	gov      zgov       // how the pushed deltas' frames go
	// signing, when not nil, is closed once the answer to the
	// sign-ahead the helper's command line asked for is read
	// (ReadSignedAhead), signErr then saying whether the channel is
	// still in step: every other answer comes after it.
	signing chan struct{}
	signErr error
}

// Compress has the deltas of the requests after it go compressed with
// zstd, both ways (rsync's -z): the literal data of a delta is what a
// slow link pays for, and the helper's CPU and this end's what it costs.
// Each end sends a frame stored rather than compressed while that has
// cost it less of late (zgov): where the CPU binds, not the link.
func (c *DeltaClient) Compress(on bool) {
	c.mu.Lock()
	c.compress = on
	c.mu.Unlock()
}

// Compressing says whether the deltas go compressed (Compress).
func (c *DeltaClient) Compressing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compress
}

// Broken says the client can ask nothing more: a reply was refused part
// way through, or the channel failed.
func (c *DeltaClient) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// breaks marks the client broken when err is not nil, and closes it.
func (c *DeltaClient) breaks(err error) error {
	if err != nil && !c.broken {
		c.broken = true
		c.c.Close()
	}
	return err
}

// NewDeltaClient reads the delta service's hello on ch, whose Close ends
// the service. An error means no delta service answered.
func NewDeltaClient(ctx context.Context, ch io.ReadWriteCloser) (*DeltaClient, error) {
	return StartDeltaClient(ctx, ch, nil)
}

// StartDeltaClient is NewDeltaClient, with first, when not nil, called
// before the hello is read: what it asks (DiffAhead) goes out behind the
// command that starts the helper, which reads it once it is up, rather
// than once its hello has come back.
func StartDeltaClient(ctx context.Context, ch io.ReadWriteCloser, first func(*DeltaClient)) (*DeltaClient, error) {
	stop := context.AfterFunc(ctx, func() { ch.Close() })
	defer stop()
	c := &DeltaClient{r: bufio.NewReaderSize(ch, 256<<10), w: bufio.NewWriterSize(ch, 256<<10), c: ch}
	if first != nil {
		first(c)
	}
	line := make([]byte, len(deltaHello))
	if _, err := io.ReadFull(c.r, line); err != nil {
		return nil, fmt.Errorf("delta service: no hello: %w", err)
	}
	if string(line) != deltaHello {
		return nil, fmt.Errorf("%w: hello %q", ErrDeltaProtocol, line)
	}
	return c, nil
}

// Close ends the service.
func (c *DeltaClient) Close() error { return c.c.Close() }

// Attrs are the mode and times a push gives the file it rebuilt, once it
// is whole: times to the second, as an SFTP SETSTAT gives them.
type Attrs struct {
	SetMode      bool
	Mode         fs.FileMode // of modeBits
	SetTimes     bool
	Atime, Mtime time.Time
	// RenameTo, when not "", is the name the new file then takes in
	// place of the temporary one, replacing what is there.
	RenameTo string
}

// modeBits are the mode bits Attrs set.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// SignPatch rebuilds a file on the helper's host from basis there (a
// regular file of basisSize bytes) and a delta against it: into tmp, a
// temporary file the helper makes (owner-only; one there already is an
// error), or, tmp "", over basis itself (--inplace). The helper signs
// basis and sends the signature as it is made; diff is handed its header
// and blocks (delta.DiffOptions.Blocks: each call returns once the
// signature's first n blocks are in) and writes the delta of the new
// file, of size bytes, while the rest of the signature arrives. The
// helper applies the delta as it comes, and gives the file a's mode and
// times once it is whole. It returns the counts the helper applied, and
// the rebuilt file's stat as the helper took it then (Made). An error of
// diff's that is not the signature's is returned as it is, and the
// channel is given up: a delta cut short is not applied.
func (c *DeltaClient) SignPatch(ctx context.Context, basis string, basisSize int64, tmp string, size int64, a Attrs,
	diff func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error) (delta.Stats, fs.FileInfo, error) {
	return c.SignPatchShares(ctx, basis, basisSize, tmp, size, a, Shares{}, diff)
}

// Shares has a push's delta go in N shares (delta.Share): the push's
// channel carries share 0, which diff writes, and Others the rest, each
// on a channel of its own (PatchShare), once the helper has made the new
// file, a fresh one or (under) a clone of the basis: Others is handed
// the signature's header and blocks as diff is, and returns once every
// other share is applied, or one failed. The helper finishes the file
// only then, and removes it where one failed. N below 2 is one share.
type Shares struct {
	N      int
	Others func(ctx context.Context, under bool, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error)
	// Signed, when not nil, is the basis's signature, signed ahead in
	// parts by the helpers of the other shares' channels (SignAheadArg,
	// ReadSignedAhead): the push asks for none (patchSigned), and its
	// delta is diffed against this one as it comes.
	Signed *delta.SignatureParts
}

// SignPatchShares is SignPatch with the delta in shares (a new file
// only, not in place); the counts returned are all the shares'.
func (c *DeltaClient) SignPatchShares(ctx context.Context, basis string, basisSize int64, tmp string, size int64, a Attrs, shares Shares,
	diff func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error) (delta.Stats, fs.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return delta.Stats{}, nil, errBroken
	}
	if err := c.ready(ctx); err != nil {
		return delta.Stats{}, nil, err
	}
	st, made, err := c.signPatch(ctx, basis, basisSize, tmp, size, a, shares, diff)
	var de *DeltaError
	if !errors.As(err, &de) {
		c.breaks(err)
	}
	if err != nil {
		return st, nil, err
	}
	return st, made, nil
}

func (c *DeltaClient) signPatch(ctx context.Context, basis string, basisSize int64, tmp string, size int64, a Attrs, shares Shares,
	diff func(*delta.Signature, func(context.Context, int64) (*delta.Signature, error), io.Writer) error) (delta.Stats, *Made, error) {
	stop := context.AfterFunc(ctx, func() { c.c.Close() })
	defer stop()
	shared := shares.N > 1 && tmp != ""
	// The other shares' requests end before this does, whatever becomes
	// of it: their sessions are the caller's to give back.
	octx, ocancel := context.WithCancel(ctx)
	othersDone := make(chan error, 1)
	var others delta.Stats
	othersRun := false
	defer func() {
		ocancel()
		if othersRun {
			<-othersDone
		}
	}()
	req := appendString([]byte{opSignPatch}, basis)
	req = binary.AppendUvarint(req, uint64(basisSize))
	req = appendString(req, tmp)
	req = binary.AppendUvarint(req, uint64(size))
	var flags uint64
	if c.compress {
		flags |= patchZstd
	}
	if a.SetMode {
		flags |= patchMode
	}
	if a.SetTimes {
		flags |= patchTimes
	}
	if a.RenameTo != "" && tmp != "" {
		flags |= patchRename
	}
	if shared {
		flags |= patchShares
	}
	signedAhead := shared && shares.Signed != nil
	if signedAhead {
		flags |= patchSigned
	}
	req = binary.AppendUvarint(req, flags)
	if a.SetMode {
		req = binary.AppendUvarint(req, uint64(a.Mode&modeBits))
	}
	if a.SetTimes {
		req = binary.AppendVarint(req, a.Atime.Unix())
		req = binary.AppendVarint(req, a.Mtime.Unix())
	}
	if flags&patchRename != 0 {
		req = appendString(req, a.RenameTo)
	}
	if shared {
		req = binary.AppendUvarint(req, uint64(shares.N))
	}
	if _, err := c.w.Write(req); err != nil {
		return delta.Stats{}, nil, err
	}
	if err := c.w.Flush(); err != nil {
		return delta.Stats{}, nil, err
	}
	newFile := byte(shareNone)
	if shared {
		var err error
		if newFile, err = c.r.ReadByte(); err != nil {
			return delta.Stats{}, nil, eofIsUnexpected(err)
		}
		if newFile != shareNone && newFile != shareFresh && newFile != shareClone {
			return delta.Stats{}, nil, fmt.Errorf("%w: a push made %#x", ErrDeltaProtocol, newFile)
		}
	}
	// The signature is read on a goroutine of its own while the delta
	// goes out from here; one signed ahead comes on other channels.
	in := &chunkReader{r: c.r}
	header := make(chan signatureSource, 1)
	read := make(chan error, 1)
	if signedAhead {
		header <- shares.Signed
		read <- nil
	} else {
		go func() {
			sr, err := delta.NewSignatureReader(in, basisSize)
			if sr != nil {
				header <- sr
			} else {
				header <- nil
			}
			if err == nil {
				_, err = sr.Read()
			}
			if err == nil {
				// A signature read whole is one the stream ends right
				// after.
				err = in.ended("the signature")
			}
			read <- err
		}()
	}
	out := chunkWriter{w: c.w}
	var derr error
	var waited atomic.Bool // a wait for blocks failed: the signature ended
	if sr := <-header; sr != nil {
		var to io.Writer = out
		var z *framedOut
		if c.compress {
			z, derr = newFramedOut(out, &c.gov)
			to = z
		}
		blocks := func(ctx context.Context, n int64) (*delta.Signature, error) {
			sig, err := sr.Wait(ctx, n)
			if err != nil {
				waited.Store(true)
			}
			return sig, err
		}
		if shared && newFile != shareNone {
			othersRun = true
			go func() {
				var err error
				others, err = shares.Others(octx, newFile == shareClone, sr.Header(), blocks)
				othersDone <- err
			}()
		}
		if derr == nil {
			derr = diff(sr.Header(), blocks, to)
		}
		if derr == nil && z != nil {
			derr = z.Close()
		}
	}
	if derr != nil && !waited.Load() {
		// A delta cut short must not be applied: the channel goes.
		c.c.Close()
		<-read
		return delta.Stats{}, nil, derr
	}
	serr := <-read
	if serr != nil && !in.done || serr == nil && derr != nil {
		// Not the helper's end of it: the channel goes.
		c.c.Close()
		return delta.Stats{}, nil, cmp.Or(serr, derr)
	}
	// The delta's stream ends (a delta that wanted blocks the helper
	// never sent, short), and the status says what became of it.
	if err := out.end(); err != nil {
		return delta.Stats{}, nil, err
	}
	if err := c.w.Flush(); err != nil {
		return delta.Stats{}, nil, err
	}
	if shared {
		// The verdict: every other share applied, or not.
		oerr := errors.New("the helper made no file")
		if othersRun {
			oerr, othersRun = <-othersDone, false
		}
		verdict := byte(statusOK)
		if oerr != nil {
			verdict = statusFail
		}
		if err := c.w.WriteByte(verdict); err != nil {
			return delta.Stats{}, nil, err
		}
		if err := c.w.Flush(); err != nil {
			return delta.Stats{}, nil, err
		}
		if oerr != nil {
			st, err := c.status()
			if err == nil {
				err = fmt.Errorf("%w: a push finished with a share failed", ErrDeltaProtocol)
			}
			var de *DeltaError
			if errors.As(err, &de) && newFile != shareNone {
				// The helper's answer is to the verdict; the share's
				// own error says why.
				de.Message = "a share of the delta: " + oerr.Error()
			}
			return st, nil, err
		}
	}
	st, err := c.status()
	if err != nil {
		return st, nil, err
	}
	if serr != nil {
		return st, nil, fmt.Errorf("%w: a patch applied without its whole signature", ErrDeltaProtocol)
	}
	st.Add(others)
	name := tmp
	switch {
	case flags&patchRename != 0:
		name = a.RenameTo
	case name == "":
		name = basis
	}
	made, err := readMade(c.r, name)
	return st, made, err
}

// A signatureSource is a signature as it arrives: on the push's channel
// (delta.SignatureReader), or ahead, in parts, on others
// (delta.SignatureParts).
type signatureSource interface {
	Header() *delta.Signature
	Wait(ctx context.Context, n int64) (*delta.Signature, error)
}

// PatchShare applies share sh of a push's delta (one in shares,
// SignPatchShares' Others) into tmp, the new file the push's request
// made (under: a clone of basis, of basisSize bytes), the new file being
// size bytes; send writes the share's delta, as it is made.
func (c *DeltaClient) PatchShare(ctx context.Context, basis string, basisSize int64, tmp string, size int64, under bool, sh delta.Share,
	send func(w io.Writer) error) (delta.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return delta.Stats{}, errBroken
	}
	if err := c.unahead(); err != nil {
		return delta.Stats{}, err
	}
	st, err := c.patchShare(ctx, basis, basisSize, tmp, size, under, sh, send)
	var de *DeltaError
	if !errors.As(err, &de) {
		c.breaks(err)
	}
	return st, err
}

func (c *DeltaClient) patchShare(ctx context.Context, basis string, basisSize int64, tmp string, size int64, under bool, sh delta.Share,
	send func(w io.Writer) error) (delta.Stats, error) {
	stop := context.AfterFunc(ctx, func() { c.c.Close() })
	defer stop()
	req := appendString([]byte{opPatchShare}, basis)
	req = binary.AppendUvarint(req, uint64(basisSize))
	req = appendString(req, tmp)
	req = binary.AppendUvarint(req, uint64(size))
	var flags uint64
	if under {
		flags |= shareUnder
	}
	req = binary.AppendUvarint(req, flags)
	req = appendShare(req, sh)
	if _, err := c.w.Write(req); err != nil {
		return delta.Stats{}, err
	}
	if err := send(flushWriter{w: c.w}); err != nil {
		// A share cut short must not be applied: the channel goes.
		c.c.Close()
		return delta.Stats{}, err
	}
	if err := (chunkWriter{w: c.w}).end(); err != nil {
		return delta.Stats{}, err
	}
	if err := c.w.Flush(); err != nil {
		return delta.Stats{}, err
	}
	// Its answer follows the sign-ahead's, which its command line may
	// have asked for.
	if err := c.settled(ctx); err != nil {
		return delta.Stats{}, err
	}
	return c.status()
}

// Diff asks the helper for the delta that rebuilds the file at path on
// its host (a regular file of size bytes) from the basis sig describes,
// made to be applied over the basis when inPlace, and hands the delta to
// apply as it comes.
func (c *DeltaClient) Diff(ctx context.Context, path string, size int64, sig *delta.Signature, inPlace bool, apply func(io.Reader) error) (delta.Stats, error) {
	return c.DiffStream(ctx, path, size, func(w io.Writer) error { return delta.WriteSignature(w, sig) }, inPlace, delta.Share{}, apply)
}

// DiffStream is Diff with the signature written by sign as it is made:
// sent as it comes, while the delta is read, so that a delta made for
// writing in place (which the helper diffs range by range as their
// blocks arrive) flows back while the basis is still being signed. An
// error of sign's is returned as it is; the channel is given up then.
//
// A pull asked ahead (DiffAhead) of the same file, made the same way, is
// the one whose delta is read then: its own signature went out, and sign
// is not called. One of another file is given up with the channel.
func (c *DeltaClient) DiffStream(ctx context.Context, path string, size int64, sign func(io.Writer) error, inPlace bool, share delta.Share, apply func(io.Reader) error) (delta.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return delta.Stats{}, errBroken
	}
	if err := c.settled(ctx); err != nil {
		return delta.Stats{}, err
	}
	var st delta.Stats
	var err error
	switch a := c.ahead; {
	case a == nil:
		st, err = c.diff(ctx, path, size, sign, inPlace, share, apply)
	case a.path == path && a.inPlace == inPlace && a.compress == c.compress && a.share == share:
		c.ahead = nil
		st, err = c.diffEnd(ctx, a.signed, apply)
	default:
		err = c.unahead()
	}
	var de *DeltaError
	if !errors.As(err, &de) {
		c.breaks(err)
	}
	return st, err
}

// ErrAheadUnused is the error of a request made while a pull asked
// ahead (DiffAhead) of another file, or made another way, was on its
// way, or of a request of another kind then: the channel is given up,
// and the request may be asked again on another.
var ErrAheadUnused = errors.New("delta service: the pull asked ahead was not the one asked for")

// A pull asked ahead: its file, how it was made, its share of the
// delta, and its signature's end.
type pullAhead struct {
	path              string
	inPlace, compress bool
	share             delta.Share
	signed            chan error
}

// DiffAhead asks for the delta of the file at path on the helper's host,
// whatever its size, against the basis sign signs, before the file was
// listed: the request and the signature go out now, and the delta waits
// in the channel (its window's worth) until DiffStream is asked for the
// same file, made the same way, which reads it and checks it against the
// size listed by then. The client asks nothing else meanwhile: any other
// request gives the channel up. Its reply to a request asked in the
// command line may still be read (WalkAsked): it comes first.
func (c *DeltaClient) DiffAhead(path string, sign func(io.Writer) error, inPlace bool, share delta.Share) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken || c.ahead != nil {
		return errBroken
	}
	signed, err := c.diffStart(path, -1, sign, inPlace, share)
	if err != nil {
		return c.breaks(err)
	}
	c.ahead = &pullAhead{path: path, inPlace: inPlace, compress: c.compress, share: share, signed: signed}
	return nil
}

// Ahead says the file and the share of the pull asked ahead on the
// channel whose delta is still to be read, if there is one.
func (c *DeltaClient) Ahead() (path string, share delta.Share, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ahead == nil {
		return "", delta.Share{}, false
	}
	return c.ahead.path, c.ahead.share, true
}

// ready readies the channel for a request: a pull asked ahead on it is
// given up (unahead), and the answer to the sign-ahead its command line
// asked for is read (settled), so that the request's answer is the next
// thing on it.
func (c *DeltaClient) ready(ctx context.Context) error {
	if err := c.unahead(); err != nil {
		return err
	}
	return c.settled(ctx)
}

// unahead gives the channel up where a pull asked ahead is on its way,
// before a request of another kind.
func (c *DeltaClient) unahead() error {
	if c.ahead == nil {
		return nil
	}
	a := c.ahead
	c.ahead = nil
	return c.breaks(fmt.Errorf("%w: %s", ErrAheadUnused, a.path))
}

func (c *DeltaClient) diff(ctx context.Context, path string, size int64, sign func(io.Writer) error, inPlace bool, share delta.Share, apply func(io.Reader) error) (delta.Stats, error) {
	signed, err := c.diffStart(path, size, sign, inPlace, share)
	if err != nil {
		return delta.Stats{}, err
	}
	return c.diffEnd(ctx, signed, apply)
}

// diffStart sends a diff request for the file at path of size bytes (-1:
// whatever its size) and the signature sign writes, on a goroutine of
// its own, whose end signed says.
func (c *DeltaClient) diffStart(path string, size int64, sign func(io.Writer) error, inPlace bool, share delta.Share) (signed chan error, err error) {
	req := appendString([]byte{opDiff}, path)
	req = binary.AppendUvarint(req, uint64(max(size, 0)))
	var flags uint64
	if inPlace {
		flags |= diffInPlace
	}
	if c.compress {
		flags |= diffZstd
	}
	if size < 0 {
		flags |= diffAnySize
	}
	if !share.Whole() {
		flags |= diffShare
	}
	req = binary.AppendUvarint(req, flags)
	if !share.Whole() {
		req = appendShare(req, share)
	}
	if _, err := c.w.Write(req); err != nil {
		return nil, err
	}
	// The signature goes out on a goroutine of its own while the reply
	// is read. A signature that fails part way is ended short, which the
	// helper takes for the end of the service.
	signed = make(chan error, 1)
	go func() {
		err := sign(flushWriter{w: c.w})
		if err == nil {
			err = chunkWriter{w: c.w}.end()
			if err == nil {
				err = c.w.Flush()
			}
		} else {
			chunkWriter{w: c.w}.end()
			c.w.Flush()
			err = &signError{err}
		}
		signed <- err
	}()
	return signed, nil
}

// diffEnd reads a diff request's reply, the delta handed to apply, and
// its status, once its signature (whose end signed says) is out too.
func (c *DeltaClient) diffEnd(ctx context.Context, signed chan error, apply func(io.Reader) error) (delta.Stats, error) {
	stop := context.AfterFunc(ctx, func() { c.c.Close() })
	defer stop()
	in := &chunkReader{r: c.r}
	var from io.Reader = in
	if c.compress {
		z, err := zstdIn(in)
		if err != nil {
			c.c.Close()
			<-signed
			return delta.Stats{}, err
		}
		defer z.Close()
		from = z
	}
	aerr := apply(from)
	if aerr == nil && from != io.Reader(in) {
		// The compressed stream holds the delta and nothing after it.
		if n, err := io.Copy(io.Discard, from); n != 0 || err != nil {
			aerr = fmt.Errorf("%w: bytes after the delta", ErrDeltaProtocol)
		}
	}
	cut := false
	switch {
	case aerr != nil && in.done:
		// The helper ended the delta early: its status says why.
		if _, serr := c.status(); serr != nil {
			aerr = serr
		}
	case aerr != nil:
		// The rest of the delta is not read: the channel goes, and the
		// signature's writes with it, whose error then says nothing.
		c.c.Close()
		cut = true
	}
	if serr := <-signed; serr != nil && !cut {
		var se *signError
		if errors.As(serr, &se) {
			return delta.Stats{}, se.err
		}
		return delta.Stats{}, serr
	}
	if aerr != nil {
		return delta.Stats{}, aerr
	}
	if err := in.ended("the delta"); err != nil {
		return delta.Stats{}, err
	}
	return c.status()
}

// signError is an error of the client's own signing, handed back as is.
type signError struct{ err error }

func (e *signError) Error() string { return e.err.Error() }

var errBroken = errors.New("the delta service's channel is out of step")

// Sums asks the helper for the content sum (delta.SumOf) of each regular
// file paths names, of the size sizes gives; errs holds, in its place, why
// a file had none. err is about the request as a whole.
func (c *DeltaClient) Sums(ctx context.Context, paths []string, sizes []int64) (sums []delta.RangeSum, errs []error, err error) {
	raw, errs, err := c.sumsOf(ctx, opSums, len(delta.RangeSum{}), paths, sizes)
	if err != nil {
		return nil, nil, err
	}
	sums = make([]delta.RangeSum, len(raw))
	for i, r := range raw {
		copy(sums[i][:], r)
	}
	return sums, errs, nil
}

// SHA256s is Sums with each file's SHA-256: what --verify and the
// scp-style --checksum compare, hashed by the helper in place of the
// server's sha256sum.
func (c *DeltaClient) SHA256s(ctx context.Context, paths []string, sizes []int64) (sums [][]byte, errs []error, err error) {
	return c.sumsOf(ctx, opSHA, sha256.Size, paths, sizes)
}

func (c *DeltaClient) sumsOf(ctx context.Context, op byte, size int, paths []string, sizes []int64) (sums [][]byte, errs []error, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return nil, nil, errBroken
	}
	if err := c.ready(ctx); err != nil {
		return nil, nil, err
	}
	sums, errs, err = c.sums(ctx, op, size, paths, sizes)
	var de *DeltaError
	if !errors.As(err, &de) {
		c.breaks(err)
	}
	return sums, errs, err
}

func (c *DeltaClient) sums(ctx context.Context, op byte, size int, paths []string, sizes []int64) ([][]byte, []error, error) {
	if len(paths) > maxSums || len(sizes) != len(paths) {
		return nil, nil, fmt.Errorf("sums of %d files (%d sizes): at most %d a request", len(paths), len(sizes), maxSums)
	}
	stop := context.AfterFunc(ctx, func() { c.c.Close() })
	defer stop()
	req := binary.AppendUvarint([]byte{op}, uint64(len(paths)))
	for i, p := range paths {
		req = appendString(req, p)
		req = binary.AppendUvarint(req, uint64(sizes[i]))
		if len(req) > 256<<10 {
			if _, err := c.w.Write(req); err != nil {
				return nil, nil, err
			}
			req = req[:0]
		}
	}
	if _, err := c.w.Write(req); err != nil {
		return nil, nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, nil, err
	}
	in := &chunkReader{r: c.r}
	br := bufio.NewReader(in)
	sums := make([][]byte, len(paths))
	errs := make([]error, len(paths))
	for i := range paths {
		kind, err := br.ReadByte()
		if err != nil {
			if in.done {
				// The helper ended the stream early: its status says why.
				if _, serr := c.status(); serr != nil {
					return nil, nil, serr
				}
			}
			return nil, nil, fmt.Errorf("sums: %d of %d: %w", i, len(paths), eofIsUnexpected(err))
		}
		switch kind {
		case 0:
			sums[i] = make([]byte, size)
			if _, err := io.ReadFull(br, sums[i]); err != nil {
				return nil, nil, fmt.Errorf("sums: %w", eofIsUnexpected(err))
			}
		case 1:
			msg, err := readString(br, 4096)
			if err != nil {
				return nil, nil, fmt.Errorf("sums: %w", err)
			}
			errs[i] = &DeltaError{Message: msg}
		default:
			return nil, nil, fmt.Errorf("%w: sum record %#x", ErrDeltaProtocol, kind)
		}
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return nil, nil, fmt.Errorf("%w: bytes after the sums", ErrDeltaProtocol)
	}
	if _, err := c.status(); err != nil {
		return nil, nil, err
	}
	return sums, errs, nil
}

// status reads a reply's status.
func (c *DeltaClient) status() (delta.Stats, error) {
	b, err := c.r.ReadByte()
	if err != nil {
		return delta.Stats{}, eofIsUnexpected(err)
	}
	switch b {
	case statusOK:
		var v [3]int64
		for i := range v {
			if v[i], err = readUint(c.r, delta.MaxSize); err != nil {
				return delta.Stats{}, err
			}
		}
		return delta.Stats{Literal: v[0], Matched: v[1], Ranges: int(v[2])}, nil
	case statusFail:
		msg, err := readString(c.r, 4096)
		if err != nil {
			return delta.Stats{}, err
		}
		return delta.Stats{}, &DeltaError{Message: msg}
	}
	return delta.Stats{}, fmt.Errorf("%w: status %#x", ErrDeltaProtocol, b)
}

// FollowSHA256 is the SHA-256 of the file of size bytes at path on the
// helper's host, hashed while others write it: each value from written
// says how many of its first bytes are written and will not change (never
// fewer than the one before); the helper hashes them as they are said.
// Once written is closed, having said size, the sum comes back: the
// written file's hash costs the time of its last bytes, not of all of
// them. ctx's end gives up, and the channel with it.
func (c *DeltaClient) FollowSHA256(ctx context.Context, path string, size int64, written <-chan int64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return nil, errBroken
	}
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	sum, err := c.follow(ctx, path, size, written)
	var de *DeltaError
	if !errors.As(err, &de) {
		c.breaks(err)
	}
	return sum, err
}

func (c *DeltaClient) follow(ctx context.Context, path string, size int64, written <-chan int64) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { c.c.Close() })
	defer stop()
	req := appendString([]byte{opFollow}, path)
	req = binary.AppendUvarint(req, uint64(size))
	if _, err := c.w.Write(req); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	out := chunkWriter{w: c.w}
	for n := range written {
		if _, err := out.Write(binary.AppendUvarint(nil, uint64(n))); err != nil {
			return nil, err
		}
		if err := c.w.Flush(); err != nil {
			return nil, err
		}
	}
	if err := out.end(); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	in := &chunkReader{r: c.r}
	sum, err := io.ReadAll(io.LimitReader(in, sha256.Size+1))
	if err != nil {
		return nil, fmt.Errorf("follow: %w", err)
	}
	if err := in.drain(); err != nil {
		return nil, fmt.Errorf("follow: %w", err)
	}
	if _, err := c.status(); err != nil {
		return nil, err
	}
	if len(sum) != sha256.Size {
		return nil, fmt.Errorf("%w: a sum of %d bytes", ErrDeltaProtocol, len(sum))
	}
	return sum, nil
}
