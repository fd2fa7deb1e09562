package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// The fuzz targets of the SFTP replies a server sends. Their seed corpora
// in testdata/fuzz are replies captured from OpenSSH's sftp-server and
// pkg/sftp's server (the one internal/sshtest runs), to the requests each
// target's comment lists. Run one with, for example:
//
//	go test -run='^$' -fuzz='^FuzzStreamReplies$' -fuzztime=60s ./protocol
//
// scripts/fuzz.sh runs them all.

// streamCall is a request a FuzzStreamReplies session has in flight: the
// reply it wants and, for a read, how much it asked for.
type streamCall struct {
	id   uint32
	want byte
	read int
}

// streamCalls are the requests in flight when the replies of
// FuzzStreamReplies arrive; the seeds answer them as sftp-server did.
var streamCalls = []streamCall{
	{1, fxpData, 32 << 10}, // a read of 32 KiB at 0 of a 3300-byte file
	{2, fxpData, 10},       // a read past its end
	{3, fxpAttrs, 0},       // its fstat
	{4, fxpStatus, 0},      // its close
	{5, fxpHandle, 0},      // its open
	{6, fxpName, 0},        // a readdir
	{7, fxpHandle, 0},      // the opendir
}

// maxReplyAlloc bounds what one fuzzed exchange may allocate besides its
// input: every call's reply at its largest, with room for the decoding.
const maxReplyAlloc = 4 << 20

// FuzzStreamReplies feeds a byte stream to a raw session's receiver as
// the replies to streamCalls, then checks what each call got: no reply
// may make the session panic or allocate without bound, a DATA reply
// never reports more bytes than asked, nor any when the reply was cut
// short, and every failure is a lost stream or a status about the file.
func FuzzStreamReplies(f *testing.F) {
	data := func(id uint32, b []byte) []byte {
		return sftpPacket(fxpData, appendString(binary.BigEndian.AppendUint32(nil, id), string(b)))
	}
	status := func(id, code uint32, msg string) []byte {
		return sftpPacket(fxpStatus, appendString(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, id), code), msg))
	}
	f.Add(data(2, []byte("abc")))
	f.Add(append(status(2, fxEOF, "EOF"), status(4, 4, "Failure")...))
	f.Add(append(status(5, fxPermissionDenied, "Permission denied"), status(7, 99, "")...))
	f.Add(data(2, []byte("more than ten bytes")))
	f.Add(data(2, []byte("abc"))[:10])
	// A listing that promises the most a NAME reply may hold, then ends.
	f.Add(append(binary.BigEndian.AppendUint32(nil, maxNameReply+5), fxpName, 0, 0, 0, 6))
	f.Fuzz(func(t *testing.T, in []byte) {
		ch := &pipeChannel{Reader: bytes.NewReader(in), Writer: io.Discard, close: func() {}}
		s := &rawSession{ch: ch, pending: map[uint32]*call{}}
		calls := make([]*call, len(streamCalls))
		for i, sc := range streamCalls {
			calls[i] = getCall(make([]byte, sc.read))
			s.pending[sc.id] = calls[i]
		}
		before := allocated()
		s.receive()
		for i, sc := range streamCalls {
			c := calls[i]
			err := wait(c, sc.want)
			switch {
			case c.n > sc.read:
				t.Fatalf("request %d: a read of %d bytes got %d", sc.id, sc.read, c.n)
			case err != nil && c.n != 0:
				t.Fatalf("request %d: %d bytes reported by a reply that failed: %v", sc.id, c.n, err)
			case err != nil:
				checkReplyError(t, sc.id, err)
			case sc.want == fxpData && c.n == 0:
				t.Fatalf("request %d: a DATA reply of no bytes was taken", sc.id)
			case sc.want == fxpHandle:
				_, _, _ = readString(c.body)
			case sc.want == fxpAttrs:
				_, _ = parseAttrs(c.body, "f")
			case sc.want == fxpName:
				_, _, _ = appendNames(nil, c.body)
			}
			putCall(c)
		}
		if n := allocated() - before; n > maxReplyAlloc+2*uint64(len(in)) {
			t.Fatalf("%d bytes of replies made the session allocate %d bytes", len(in), n)
		}
		if s.err == nil || !errors.Is(s.err, ErrStreamLost) {
			t.Fatalf("the replies ended with the session's error %v, want a lost stream", s.err)
		}
	})
}

// allocated returns the bytes allocated on the heap so far, without
// stopping the world as runtime.ReadMemStats does.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// checkReplyError fails t unless err is a lost stream or what a status
// says about one file.
func checkReplyError(t *testing.T, id uint32, err error) {
	t.Helper()
	var se *StatusError
	if errors.Is(err, ErrStreamLost) || errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, fs.ErrPermission) || errors.As(err, &se) {
		return
	}
	t.Fatalf("request %d: error %v is neither a lost stream nor a status", id, err)
}

// FuzzReadAttrs decodes the ATTRS of STAT, LSTAT and FSTAT replies (the
// seeds are sftp-server's for a file, a directory and a symbolic link).
func FuzzReadAttrs(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, attrPermissions), 0o020644))
	f.Add(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, attrExtended), 0xffffffff))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseAttrs(b, "dir/f")
		if err != nil {
			return
		}
		if a.Name() != "f" {
			t.Fatalf("attributes of dir/f named %q", a.Name())
		}
		if a.Mode()&^(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky|fs.ModeDir|fs.ModeSymlink|fs.ModeIrregular) != 0 {
			t.Fatalf("mode %v: bits beyond the permissions and one type", a.Mode())
		}
		if types := a.Mode() & (fs.ModeDir | fs.ModeSymlink | fs.ModeIrregular); types != 0 && types&(types-1) != 0 {
			t.Fatalf("mode %v: more than one type", a.Mode())
		}
		// What readAttrs took is what it read: the same bytes with more
		// after them decode to the same attributes.
		b2, rest, err := readAttrs(append(bytes.Clone(b), "tail"...))
		if err != nil || string(rest[len(rest)-4:]) != "tail" || *b2 != (attrInfo{size: a.size, mode: a.mode, atime: a.atime, mtime: a.mtime, uid: a.uid, gid: a.gid, owned: a.owned}) {
			t.Fatalf("with bytes after them the attributes read %+v, %v (rest %q); alone %+v", b2, err, rest, a)
		}
	})
}

// FuzzAppendNames decodes the NAME replies of READDIR (the seeds are
// listings by sftp-server and pkg/sftp of a directory of files, a
// subdirectory and a link) and of REALPATH.
func FuzzAppendNames(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		list, n, err := appendNames(nil, b)
		if err != nil {
			// The entries before the failure are in list; readDir drops
			// them with the listing.
			if n != 0 {
				t.Fatalf("a reply that failed counted %d entries", n)
			}
			return
		}
		// Each entry takes at least 12 bytes: name, ls line and flags.
		if n < 0 || n > len(b)/12 || len(list) > n {
			t.Fatalf("%d bytes held %d entries, %d listed", len(b), n, len(list))
		}
		for _, fi := range list {
			if fi.Name() == "." || fi.Name() == ".." {
				t.Fatalf("%q listed", fi.Name())
			}
		}
	})
}

// FuzzStartReplies feeds the two replies a session's start reads: the
// VERSION to INIT and the answer to limits@openssh.com, asked for right
// behind it (the seeds are OpenSSH's, which has the extension, and
// pkg/sftp's, which answers with a status).
func FuzzStartReplies(f *testing.F) {
	limits := func(read, write uint64) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1)
		b = binary.BigEndian.AppendUint64(b, 256<<10)
		b = binary.BigEndian.AppendUint64(b, read)
		b = binary.BigEndian.AppendUint64(b, write)
		return sftpPacket(fxpExtendedReply, binary.BigEndian.AppendUint64(b, 0))
	}
	version := sftpPacket(fxpVersion, appendString(appendString(binary.BigEndian.AppendUint32(nil, 3), limitsExtension), "1"))
	f.Add(version, limits(0, 0))
	f.Add(version, limits(1, 1<<40))
	f.Add(sftpPacket(fxpVersion, []byte{0, 0, 0, 3}), limits(32<<10, 32<<10))
	f.Fuzz(func(t *testing.T, version, reply []byte) {
		h, err := readHello(bytes.NewReader(version), time.Now())
		if err != nil {
			return
		}
		lim, err := readLimits(bytes.NewReader(reply), h, 1)
		if err != nil {
			return
		}
		if p := lim.Packet(); p <= 0 || p > maxPacketCap {
			t.Fatalf("limits %+v give a packet of %d bytes", lim, p)
		}
		if lim.MaxRead < 0 || lim.MaxWrite < 0 {
			t.Fatalf("negative limits %+v", lim)
		}
	})
}

// FuzzParseTarProbe reads what a server's shell answered to tarProbe
// (the seed is this machine's Debian answer: zstd, gzip, GNU tar 1.34).
func FuzzParseTarProbe(f *testing.F) {
	f.Add([]byte("has gzip\ntar (busybox) 1.36.1\n"))
	f.Add([]byte("bsdtar 3.7.2 - libarchive 3.7.2 zlib/1.3 liblzma/5.4.5 bz2lib/1.0.8\n"))
	f.Add([]byte("has zstd\ntar (GNU tar) 1.30\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		s := parseTarProbe(out)
		if (s.Zstd || s.Gzip) && !s.GNU {
			t.Fatalf("%q: compression %+v without GNU tar", out, s)
		}
		if s.Zstd && !bytes.Contains(out, []byte("has zstd")) || s.Gzip && !bytes.Contains(out, []byte("has gzip")) {
			t.Fatalf("%q: a compressor the server did not have: %+v", out, s)
		}
		// Messages quote the version (%q): a stray \r in it is harmless.
		if strings.Contains(s.Version, "\n") {
			t.Fatalf("%q: version %q is more than one line", out, s.Version)
		}
	})
}

// FuzzReadyReplies feeds the replies a session taken over at its INIT
// reads first (OpenReady): VERSION, then the reply to the OPEN that went
// behind INIT, then a READ's made with the guessed handle. Anything but
// a VERSION and a handle must fail the file rather than open it, with a
// lost stream or what a status says; a handle is never longer than the
// bytes, and a read reports no more than it asked for.
func FuzzReadyReplies(f *testing.F) {
	version := sftpPacket(fxpVersion, appendString(appendString(binary.BigEndian.AppendUint32(nil, 3), "limits@openssh.com"), "1"))
	id := binary.BigEndian.AppendUint32(nil, preOpenID)
	handle := sftpPacket(fxpHandle, appendString(id, openSSHFirstHandle))
	data := sftpPacket(fxpData, appendString(binary.BigEndian.AppendUint32(nil, preOpenID+1), "abc"))
	f.Add(append(append(append([]byte{}, version...), handle...), data...))
	f.Add(append(append([]byte{}, version...), sftpPacket(fxpStatus, appendString(appendString(binary.BigEndian.AppendUint32(id, 2), "No such file"), ""))...))
	f.Add(append(append([]byte{}, version...), sftpPacket(fxpHandle, appendString(id, "1"))...))
	f.Add(append(append([]byte{}, handle...), data...)) // no VERSION
	f.Fuzz(func(t *testing.T, in []byte) {
		ch := &pipeChannel{Reader: bytes.NewReader(in), Writer: io.Discard, close: func() {}}
		s := newRawSession(ch, 1<<10, sessionStart{versionDue: true, sent: "/f", guess: openSSHFirstHandle})
		file, err := s.openAhead("/f")
		if err != nil {
			t.Fatalf("a file opened behind INIT was not taken: %v", err)
		}
		b := make([]byte, 3)
		n, err := file.ReadAt(b, 0)
		if n > len(b) {
			t.Fatalf("a read of %d bytes got %d", len(b), n)
		}
		op := file.opening
		<-op.done
		switch {
		case op.err != nil:
			var pe *fs.PathError
			if !errors.As(op.err, &pe) || pe.Op != "open" || pe.Path != "/f" {
				t.Fatalf("the open failed with %v, not an open error on /f", op.err)
			}
			checkReplyError(t, preOpenID, pe.Err)
		case len(op.handle) > len(in):
			t.Fatalf("a handle of %d bytes from %d", len(op.handle), len(in))
		case len(in) < 5 || in[4] != fxpVersion:
			t.Fatalf("the file opened without a VERSION first (%q)", in)
		}
		if err != nil {
			checkReplyError(t, preOpenID+1, err)
		}
		s.Close()
	})
}

// FuzzStartAnswers feeds readStart the replies to a start that asks the
// limits, stats the target and makes its temporary file and umask probe
// (PreCreate), in any order and of any shape: it must fail or give what
// the bytes hold, never a handle longer than they are.
func FuzzStartAnswers(f *testing.F) {
	id, status, attrs := replyID, statusReply, attrsReply
	limits := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(id(1), 256<<10), 261120), 261120)
	ok := sftpPacket(fxpExtendedReply, binary.BigEndian.AppendUint64(limits, 0))
	var all []byte
	for _, p := range [][]byte{ok, status(2, 2), status(3, 2), sftpPacket(fxpHandle, appendString(id(4), "\x00\x00\x00\x00")),
		status(5, 0), attrs(6, 0o40755), status(7, 0)} {
		all = append(all, p...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, replies []byte) {
		h := hello{ext: appendString(appendString(nil, limitsExtension), "1")}
		_, _, made, err := readStart(bytes.NewReader(replies), h, []string{"/t"}, startFiles{create: "/c", probe: "/p"})
		if err != nil {
			return
		}
		if len(made.handle) > len(replies) {
			t.Fatalf("handle of %d bytes from %d", len(made.handle), len(replies))
		}
		if made.maskKnown && made.mask&^0o777 != 0 {
			t.Fatalf("umask %o", made.mask)
		}
		if made.maskKnown && made.probeLeft {
			t.Fatal("umask known although the probe's directory is left")
		}
	})
}
