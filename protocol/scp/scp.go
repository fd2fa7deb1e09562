// Package scp speaks the legacy scp protocol, as OpenSSH's scp speaks it
// with -O, over a command run on the server: a Receiver for downloads
// ("scp -f"), a Sender for uploads ("scp -t"), and the strict parser of
// the protocol's lines both rely on.
package scp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
)

// The protocol: the client runs "scp -t TARGET" (to) or "scp -f SOURCE"
// (from) on the server and the two ends exchange lines and file bytes over
// the command's stdin and stdout. Every line and every file's bytes are answered by the other end
// with a byte: 0 for yes, or 1 (a problem with one file) or 2 (fatal)
// followed by a message line.
//
// The receiving end writes where the sender's names say, so a sender is
// never trusted: every line is parsed strictly and every name must be one
// path element (the CVE-2018-20685 and CVE-2019-6111 class of attacks).

// The first byte of each line says what the line is.
const (
	File    byte = 'C' // a regular file: mode, size and name; its bytes follow
	Dir     byte = 'D' // a directory: mode and name; its entries follow, then End
	End     byte = 'E' // the end of the current directory
	Time    byte = 'T' // times of the file or directory on the next line
	Warning byte = 1   // an error about one file; the copy goes on
	Fatal   byte = 2   // an error after which the sender stops
)

const (
	// MaxFileSize bounds the size a file line may announce. 1 PiB is
	// more than any file a server holds: a larger size is garbage, or a
	// way to make the receiver wait for bytes that never come.
	MaxFileSize = 1 << 50
	// maxSCPName is NAME_MAX on the file systems hpncp writes to; a longer
	// name could not be created anyway.
	maxSCPName = 255
	// maxSCPLine bounds one line. OpenSSH's scp reads lines of at most
	// 2 KiB, so a longer one does not come from an scp.
	maxSCPLine = 4096
	// maxSCPTime is the last second of the year 9999; later times are
	// garbage.
	maxSCPTime = 253402300799
	// maxStderr bounds the stderr kept of a remote scp: the end of it
	// says why it stopped.
	maxStderr = 1024
	// scpExitWait bounds the wait for a remote scp to exit once the
	// protocol is over, so that a server that never closes cannot hang a
	// copy that has finished.
	scpExitWait = 10 * time.Second
)

// ErrProtocol marks a line, or an order of lines, that no correct scp
// sends. The session that received it is over.
var ErrProtocol = errors.New("scp protocol error")

// ErrUnavailable marks a server that would not run scp.
var ErrUnavailable = errors.New("the server would not run scp")

// Record is one line of the scp protocol.
type Record struct {
	Type byte
	// Mode holds a file's or directory's permission bits and
	// fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky.
	Mode fs.FileMode
	Size int64  // of a file
	Name string // of a file or directory: one path element
	// Times is set when Mtime and Atime hold times: in an Time record,
	// and in the file or directory record a time line came before.
	Times        bool
	Mtime, Atime time.Time
	// Message is the text of an Warning or Fatal line, with control
	// characters escaped so that it is safe to print.
	Message string
}

// parseLine parses one line of the protocol, without its newline. It
// is strict: a mode is four octal digits, a size decimal digits up to
// MaxFileSize, times decimal seconds up to the year 9999 and
// microseconds below a million, a name one path element with no control
// characters, fields separated by single spaces. An error wraps
// ErrProtocol.
func parseLine(line string) (Record, error) {
	switch {
	case line == "":
		return Record{}, fmt.Errorf("%w: empty line", ErrProtocol)
	case len(line) > maxSCPLine:
		return Record{}, fmt.Errorf("%w: line of %d bytes", ErrProtocol, len(line))
	case strings.IndexByte(line, '\n') >= 0:
		return Record{}, fmt.Errorf("%w: newline inside line %s", ErrProtocol, quoteLine(line))
	}
	switch line[0] {
	case Warning, Fatal:
		return Record{Type: line[0], Message: boundMessage(vis.String(line[1:]))}, nil
	case End:
		if line != "E" {
			return Record{}, fmt.Errorf("%w: end of directory with trailing text %s", ErrProtocol, quoteLine(line))
		}
		return Record{Type: End}, nil
	case Time:
		return parseTimes(line)
	case File, Dir:
		return parseEntry(line)
	}
	return Record{}, fmt.Errorf("%w: unexpected line %s", ErrProtocol, quoteLine(line))
}

// boundMessage cuts an escaped message, whole runes at a time, to what
// fits on one line: escaping can make a message longer than the line it
// came on.
func boundMessage(m string) string {
	for len(m) > maxSCPLine-1 {
		_, size := utf8.DecodeLastRuneInString(m)
		m = m[:len(m)-size]
	}
	return m
}

// parseTimes reads "Tmtime usec atime usec".
func parseTimes(line string) (Record, error) {
	f := strings.Split(line[1:], " ")
	if len(f) != 4 {
		return Record{}, fmt.Errorf("%w: malformed time line %s", ErrProtocol, quoteLine(line))
	}
	var v [4]uint64
	for i, s := range f {
		n, ok := decimal(s)
		limit := uint64(maxSCPTime)
		if i%2 == 1 {
			limit = 999999
		}
		if !ok || n > limit {
			return Record{}, fmt.Errorf("%w: time out of range in %s", ErrProtocol, quoteLine(line))
		}
		v[i] = n
	}
	return Record{
		Type:  Time,
		Times: true,
		Mtime: time.Unix(int64(v[0]), int64(v[1])*1000),
		Atime: time.Unix(int64(v[2]), int64(v[3])*1000),
	}, nil
}

// parseEntry reads "Cmode size name" or "Dmode size name".
func parseEntry(line string) (Record, error) {
	if len(line) < 6 || line[5] != ' ' {
		return Record{}, fmt.Errorf("%w: mode is not four octal digits in %s", ErrProtocol, quoteLine(line))
	}
	var m uint32
	for _, c := range []byte(line[1:5]) {
		if c < '0' || c > '7' {
			return Record{}, fmt.Errorf("%w: mode is not four octal digits in %s", ErrProtocol, quoteLine(line))
		}
		m = m<<3 | uint32(c-'0')
	}
	sizeText, name, ok := strings.Cut(line[6:], " ")
	if !ok {
		return Record{}, fmt.Errorf("%w: no name in %s", ErrProtocol, quoteLine(line))
	}
	size, ok := decimal(sizeText)
	if !ok || size > MaxFileSize {
		return Record{}, fmt.Errorf("%w: size %q is not a number of bytes up to %d", ErrProtocol, sizeText, int64(MaxFileSize))
	}
	if err := checkSCPName(name); err != nil {
		return Record{}, err
	}
	rec := Record{Type: line[0], Mode: protocol.FileMode(m), Name: name}
	if rec.Type == File {
		rec.Size = int64(size)
	}
	return rec, nil
}

// decimal parses unsigned decimal digits, and nothing else: no sign, no
// space, no prefix.
func decimal(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// checkSCPName refuses a name that is not exactly one path element that
// can be printed: anything else could place a file outside the directory
// it is received in, or hide what it is from the user.
func checkSCPName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty file name", ErrProtocol)
	case name == "." || name == "..":
		return fmt.Errorf("%w: file name %q", ErrProtocol, name)
	case len(name) > maxSCPName:
		return fmt.Errorf("%w: file name of %d bytes (at most %d)", ErrProtocol, len(name), maxSCPName)
	case strings.IndexByte(name, '/') >= 0:
		return fmt.Errorf("%w: file name %q contains a slash", ErrProtocol, name)
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: file name %q contains a control character", ErrProtocol, name)
		}
	}
	return nil
}

// Line returns the record as a protocol line, without its newline.
func (r Record) Line() string {
	switch r.Type {
	case File:
		return fmt.Sprintf("C%04o %d %s", protocol.UnixMode(r.Mode), r.Size, r.Name)
	case Dir:
		return fmt.Sprintf("D%04o 0 %s", protocol.UnixMode(r.Mode), r.Name)
	case End:
		return "E"
	case Time:
		ms, mu := scpTime(r.Mtime)
		as, au := scpTime(r.Atime)
		return fmt.Sprintf("T%d %d %d %d", ms, mu, as, au)
	case Warning, Fatal:
		return string(rune(r.Type)) + vis.String(r.Message)
	}
	return ""
}

// scpTime returns t as seconds and microseconds within what the protocol
// carries; like OpenSSH, times before 1970 are sent as 1970.
func scpTime(t time.Time) (sec int64, usec int) {
	sec = t.Unix()
	switch {
	case sec < 0:
		return 0, 0
	case sec > maxSCPTime:
		return maxSCPTime, 0
	}
	return sec, t.Nanosecond() / 1000
}

// quoteLine quotes a line for an error message, shortened.
func quoteLine(line string) string {
	const max = 80
	if len(line) > max {
		return strconv.Quote(line[:max]) + "..."
	}
	return strconv.Quote(line)
}

// Error is an error message the remote scp sent.
type Error struct {
	Fatal bool   // the remote scp stopped after it
	Msg   string // printable
}

func (e *Error) Error() string {
	return "remote scp: " + strings.TrimPrefix(e.Msg, "scp: ")
}

// Host is a host reached with the legacy scp protocol: each copy runs the
// server's scp on a session channel of its own, so several can run at
// once on one connection.
type Host struct {
	client *ssh.Client
	label  string
}

// NewHost returns the scp end of client; label ("host:") prefixes paths in
// messages.
func NewHost(client *ssh.Client, label string) *Host {
	return &Host{client: client, label: label}
}

// Label returns the prefix of the host's paths in messages.
func (s *Host) Label() string { return s.label }

// Options say how the remote scp runs.
type Options struct {
	Recursive bool // -r: directories and what they hold
	Preserve  bool // -p: modes and times
	// TargetIsDir makes the remote "scp -t" refuse a target that is not
	// an existing directory (its -d), as a copy of several sources needs.
	TargetIsDir bool
}

func (o Options) flags() string {
	var f string
	if o.Recursive {
		f += " -r"
	}
	if o.Preserve {
		f += " -p"
	}
	if o.TargetIsDir {
		f += " -d"
	}
	return f
}

// quoteRemotePattern quotes s for the remote shell except for the glob
// characters * ? [ ], which stay bare so that the shell expands them, as
// scp users expect of host:'logs/*.gz'. Nothing else of the shell's
// syntax (variables, command substitution, spaces) takes effect.
func quoteRemotePattern(s string) string {
	var b strings.Builder
	open := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if strings.IndexByte("*?[]", c) >= 0 {
			if open {
				b.WriteByte('\'')
				open = false
			}
			b.WriteByte(c)
			continue
		}
		if !open {
			b.WriteByte('\'')
			open = true
		}
		if c == '\'' {
			b.WriteString(`'\''`)
		} else {
			b.WriteByte(c)
		}
	}
	if open {
		b.WriteByte('\'')
	}
	if b.Len() == 0 {
		return "''"
	}
	return b.String()
}

// receiveCommand is the command Receive runs for p. A relative pattern
// gets "./" in front, so that no name the shell expands it to starts
// with "-", and any other path goes as protocol.PathArg puts it; the
// "--" before it ends scp's options all the same.
func receiveCommand(p string, o Options) string {
	if !strings.HasPrefix(p, "/") && strings.ContainsAny(p, "*?[") {
		p = "./" + p
	}
	return "scp" + o.flags() + " -f -- " + quoteRemotePattern(protocol.NotOption(p))
}

// sendCommand is the command Send runs for target.
func sendCommand(target string, o Options) string {
	return "scp" + o.flags() + " -t -- " + protocol.PathArg(target)
}

// scpConn is one remote scp command and its streams.
type scpConn struct {
	ctx   context.Context
	cmd   *protocol.Command
	stdin io.WriteCloser
	r     *bufio.Reader
	label string
	// reported is set once either end sent an error message: the remote
	// scp's exit status then says nothing new.
	reported  bool
	closeOnce sync.Once
	closeErr  error
}

func (s *Host) start(ctx context.Context, cmd string) (*scpConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Closing the session on ctx's end unblocks every read and write on
	// it: that is how a cancelled copy stops at once.
	c, err := protocol.StartCommand(ctx, s.client, cmd, protocol.CommandOptions{StderrMax: maxStderr})
	var ce *protocol.ChannelError
	switch {
	case errors.As(err, &ce):
		return nil, fmt.Errorf("open session channel to %s %w", s.label, ce.Err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &scpConn{
		ctx:   ctx,
		cmd:   c,
		stdin: c.Stdin,
		r:     bufio.NewReaderSize(c.Stdout, 64<<10),
		label: s.label,
	}, nil
}

// said is the end of what the remote scp wrote to stderr, on one line and
// safe to print.
func (c *scpConn) said() string {
	stderr, _ := c.cmd.Stderr()
	return vis.String(strings.Join(strings.Fields(stderr), " "))
}

// ended explains why the stream ended where the protocol did not allow it.
func (c *scpConn) ended(err error) error {
	if cerr := c.ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if said := c.said(); said != "" {
		return fmt.Errorf("the remote scp stopped (it said: %s): %w", said, err)
	}
	return fmt.Errorf("the remote scp stopped: %w", err)
}

// readLine reads a line without its newline; io.EOF only when the stream
// ends between lines.
func (c *scpConn) readLine() (string, error) {
	line, err := c.r.ReadSlice('\n')
	switch {
	case err == nil:
	case errors.Is(err, bufio.ErrBufferFull):
		return "", fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, maxSCPLine)
	case err == io.EOF && len(line) == 0:
		if cerr := c.ctx.Err(); cerr != nil {
			return "", cerr
		}
		return "", io.EOF
	default:
		return "", c.ended(err)
	}
	if len(line) > maxSCPLine+1 {
		return "", fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, maxSCPLine)
	}
	return string(line[:len(line)-1]), nil
}

// response reads the other end's answer: nil for yes, an *Error for
// its message.
func (c *scpConn) response() error {
	b, err := c.r.ReadByte()
	if err != nil {
		return c.ended(err)
	}
	switch b {
	case 0:
		return nil
	case Warning, Fatal:
		line, err := c.readLine()
		if err == io.EOF {
			err = c.ended(err)
		}
		if err != nil {
			return err
		}
		c.reported = true
		return &Error{Fatal: b == Fatal, Msg: vis.String(line)}
	}
	// Not scp speaking: most often a login script printing text.
	_ = c.r.UnreadByte()
	line, _ := c.readLine()
	return fmt.Errorf("%w: unexpected answer %s; does the remote login print text?", ErrProtocol, quoteLine(line))
}

func (c *scpConn) write(s string) error {
	if _, err := io.WriteString(c.stdin, s); err != nil {
		return c.ended(err)
	}
	return nil
}

// refuse answers no, with why.
func (c *scpConn) refuse(why error) error {
	c.reported = true
	return c.write("\x01scp: " + vis.String(why.Error()) + "\n")
}

// close ends the remote command. After a complete exchange (clean) it
// waits for the command's exit and reports a failure the command did not
// explain already; otherwise it just closes the channel.
func (c *scpConn) close(clean bool) error {
	c.closeOnce.Do(func() {
		if !clean {
			c.cmd.Close()
			return
		}
		_ = c.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(scpExitWait):
			c.cmd.Close()
			c.closeErr = fmt.Errorf("the remote scp on %s did not exit %s after the copy", c.label, scpExitWait)
			return
		}
		var ee *ssh.ExitError
		switch {
		case err == nil:
		case errors.Is(err, protocol.ErrStreamLost):
			// A stream that ended between records may have been cut short
			// of the files still to come.
			c.closeErr = fmt.Errorf("the connection to %s closed before the remote scp's exit status: %w",
				strings.TrimSuffix(c.label, ":"), protocol.ErrStreamLost)
		case errors.As(err, &ee) && c.reported:
		case errors.As(err, &ee):
			c.closeErr = fmt.Errorf("the remote scp on %s exited with status %d", c.label, ee.ExitStatus())
			if said := c.said(); said != "" {
				c.closeErr = fmt.Errorf("%w: %s", c.closeErr, said)
			}
		default:
			c.closeErr = fmt.Errorf("the remote scp on %s: %w", c.label, err)
		}
	})
	return c.closeErr
}

// Receiver is the receiving end of a download: it runs "scp -f" on
// the server and checks every line the server sends before handing it on.
// Its methods are called in the protocol's order from one goroutine:
//
//	Next; then Reply(nil) to take the entry or Reply(err) to refuse it;
//	for a file taken: Read its bytes, FinishBody, Reply with the outcome.
//
// Whatever the server sends, Next returns names that are one path element
// with no control characters; at the top level only the name asked for
// (or, for a pattern, names matching it); directories only with Recursive.
type Receiver struct {
	c     *scpConn
	o     Options
	want  string // the name, or pattern, the top-level entries must have
	glob  bool   // several top-level entries may come
	top   int    // top-level entries received
	depth int
	state recvState
	rec   Record
	left  int64 // bytes of the current file still to read
	err   error // why the session broke
}

type recvState int

const (
	recvRecord recvState = iota // Next is due
	recvReply                   // Reply to the entry Next returned
	recvBody                    // Read the file's bytes, then FinishBody
	recvResult                  // Reply with the file's outcome
	recvDone                    // the server sent everything
	recvBroken                  // the session is over
)

// Receive runs "scp -f" for the remote path p. p may hold glob patterns,
// which the remote shell expands; nothing else in it is interpreted.
func (s *Host) Receive(ctx context.Context, p string, o Options) (*Receiver, error) {
	want := path.Base(p)
	if err := checkSCPName(want); err != nil {
		return nil, fmt.Errorf("%q does not end in a name scp can send (one path element without control characters)", p)
	}
	o.TargetIsDir = false
	c, err := s.start(ctx, receiveCommand(p, o))
	if err != nil {
		return nil, err
	}
	r := &Receiver{c: c, o: o, want: want, glob: strings.ContainsAny(p, "*?[")}
	// The remote scp waits for this byte before it sends anything.
	if err := c.write("\x00"); err != nil {
		c.close(false)
		return nil, err
	}
	return r, nil
}

func (r *Receiver) fail(err error) error {
	if r.state != recvBroken {
		r.state, r.err = recvBroken, err
	}
	return err
}

func (r *Receiver) outOfTurn(call string) error {
	if r.state == recvBroken {
		return r.err
	}
	return r.fail(fmt.Errorf("scp: Receiver.%s called out of turn", call))
}

// Next returns the next file, directory or end of directory the server
// sends, with the times of a preceding time line folded in. It returns
// io.EOF once the server has sent everything. An *Error that is not
// Fatal is the server's message about one entry, and the session goes on;
// any other error ends the session.
func (r *Receiver) Next() (Record, error) {
	if r.state != recvRecord {
		return Record{}, r.outOfTurn("Next")
	}
	var times *Record
	for {
		line, err := r.c.readLine()
		if err == io.EOF && times == nil && r.depth == 0 {
			r.state = recvDone
			return Record{}, io.EOF
		}
		if err == io.EOF {
			err = r.c.ended(err)
		}
		if err != nil {
			return Record{}, r.fail(err)
		}
		rec, err := parseLine(line)
		if err != nil {
			return Record{}, r.fail(err)
		}
		switch rec.Type {
		case Warning:
			r.c.reported = true
			return Record{}, &Error{Msg: rec.Message}
		case Fatal:
			r.c.reported = true
			return Record{}, r.fail(&Error{Fatal: true, Msg: rec.Message})
		case Time:
			if times != nil {
				return Record{}, r.fail(fmt.Errorf("%w: two time lines in a row", ErrProtocol))
			}
			if err := r.c.write("\x00"); err != nil {
				return Record{}, r.fail(err)
			}
			times = &rec
			continue
		case End:
			if times != nil {
				return Record{}, r.fail(fmt.Errorf("%w: a time line before the end of a directory", ErrProtocol))
			}
			if r.depth == 0 {
				return Record{}, r.fail(fmt.Errorf("%w: the end of a directory that was never sent", ErrProtocol))
			}
			if err := r.c.write("\x00"); err != nil {
				return Record{}, r.fail(err)
			}
			r.depth--
			return rec, nil
		}
		if rec.Type == Dir && !r.o.Recursive {
			return Record{}, r.fail(fmt.Errorf("%w: the server sent directory %q where a file was asked for (no -r)", ErrProtocol, rec.Name))
		}
		if r.depth == 0 {
			if !r.matches(rec.Name) {
				return Record{}, r.fail(fmt.Errorf("%w: the server sent %q where %q was asked for", ErrProtocol, rec.Name, r.want))
			}
			r.top++
			if r.top > 1 && !r.glob {
				return Record{}, r.fail(fmt.Errorf("%w: the server sent a second entry %q after the one asked for", ErrProtocol, rec.Name))
			}
		}
		if times != nil {
			rec.Times, rec.Mtime, rec.Atime = true, times.Mtime, times.Atime
		}
		r.rec, r.state = rec, recvReply
		return rec, nil
	}
}

// matches reports whether a top-level name is what was asked for: the
// name itself, or a name the pattern matches, as OpenSSH's scp checks.
func (r *Receiver) matches(name string) bool {
	if name == r.want {
		return true
	}
	if !r.glob {
		return false
	}
	ok, err := path.Match(r.want, name)
	return err == nil && ok
}

// Depth is how many directories deep the next entry will be.
func (r *Receiver) Depth() int { return r.depth }

// Reply answers the entry Next returned: nil takes it (a directory's
// entries come next, or a file's bytes), an error refuses it and the server
// skips it. After FinishBody it tells the server the file's outcome.
func (r *Receiver) Reply(err error) error {
	switch r.state {
	case recvReply:
		if err != nil {
			r.state = recvRecord
			if werr := r.c.refuse(err); werr != nil {
				return r.fail(werr)
			}
			return nil
		}
		if werr := r.c.write("\x00"); werr != nil {
			return r.fail(werr)
		}
		if r.rec.Type == Dir {
			r.depth++
			r.state = recvRecord
		} else {
			r.state, r.left = recvBody, r.rec.Size
		}
		return nil
	case recvResult:
		r.state = recvRecord
		var werr error
		if err != nil {
			werr = r.c.refuse(err)
		} else {
			werr = r.c.write("\x00")
		}
		if werr != nil {
			return r.fail(werr)
		}
		return nil
	}
	return r.outOfTurn("Reply")
}

// Read reads the bytes of the file taken with Reply(nil), and returns
// io.EOF after exactly its size. A stream that ends sooner is an error,
// never a short file.
func (r *Receiver) Read(p []byte) (int, error) {
	if r.state != recvBody {
		return 0, r.outOfTurn("Read")
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.c.r.Read(p)
	r.left -= int64(n)
	if err != nil && (r.left > 0 || err != io.EOF) {
		return n, r.fail(fmt.Errorf("%w after %d of %d bytes", r.c.ended(err), r.rec.Size-r.left, r.rec.Size))
	}
	return n, nil
}

// FinishBody skips what is left of the file's bytes and reads the server's
// word on them: nil, or an *Error when it could not read the file whole
// (its bytes are then not the file's). Reply must follow, unless the
// error is not an *Error: then the session is over.
func (r *Receiver) FinishBody() error {
	if r.state != recvBody {
		return r.outOfTurn("FinishBody")
	}
	if r.left > 0 {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
	}
	err := r.c.response()
	var se *Error
	if err != nil && !(errors.As(err, &se) && !se.Fatal) {
		return r.fail(err)
	}
	r.state = recvResult
	return err
}

// Close ends the session. After Next returned io.EOF it waits for the
// remote scp to exit and returns an error if it failed without saying why;
// otherwise it just closes the channel.
func (r *Receiver) Close() error {
	return r.c.close(r.state == recvDone)
}

// Sender is the sending end of an upload: it runs "scp -t" on the
// server, which writes each file it is sent in place, under its final
// name (the protocol has no way to ask for a temporary name and a rename).
// Its methods are called in the protocol's order from one goroutine:
// StartFile, Write the file's bytes, EndFile; StartDir, its entries,
// EndDir. An *Error that is not Fatal is the server refusing one entry,
// and the session goes on; any other error ends it.
type Sender struct {
	c      *scpConn
	o      Options
	depth  int
	inFile bool
	size   int64
	sent   int64
	err    error // why the session broke
}

// Send runs "scp -t" for the remote target and waits until it is ready.
func (s *Host) Send(ctx context.Context, target string, o Options) (*Sender, error) {
	if target == "" {
		target = "."
	}
	c, err := s.start(ctx, sendCommand(target, o))
	if err != nil {
		return nil, err
	}
	// The remote scp starts with a yes, or with why it cannot receive.
	if err := c.response(); err != nil {
		c.close(false)
		return nil, err
	}
	return &Sender{c: c, o: o}, nil
}

// check returns err, marking the session over unless err is the server
// refusing one entry.
func (s *Sender) check(err error) error {
	var se *Error
	if err != nil && !(errors.As(err, &se) && !se.Fatal) && s.err == nil {
		s.err = err
	}
	return err
}

func (s *Sender) ready(call string) error {
	switch {
	case s.err != nil:
		return s.err
	case s.inFile:
		return s.check(fmt.Errorf("scp: Sender.%s called inside a file", call))
	}
	return nil
}

// checkSendName refuses a name the receiving scp would take for something
// else: the protocol is line-based and names are one path element.
func checkSendName(name string) error {
	switch {
	case name == "", name == ".", name == "..", strings.IndexByte(name, '/') >= 0:
		return fmt.Errorf("%q is not a file name the scp protocol can send", name)
	case strings.IndexByte(name, '\n') >= 0:
		return fmt.Errorf("the name %q holds a newline, which the scp protocol cannot send", name)
	}
	return nil
}

// line sends a record, after its time line when times are preserved, and
// reads the answers.
func (s *Sender) line(rec Record) error {
	if s.o.Preserve && rec.Times {
		t := Record{Type: Time, Mtime: rec.Mtime, Atime: rec.Atime}
		if err := s.c.write(t.Line() + "\n"); err != nil {
			return s.check(err)
		}
		if err := s.c.response(); err != nil {
			return s.check(err)
		}
	}
	if err := s.c.write(rec.Line() + "\n"); err != nil {
		return s.check(err)
	}
	return s.check(s.c.response())
}

// StartFile announces a file (File: Name, Mode, Size, and times when
// Times is set). Its Size bytes follow with Write, then EndFile.
func (s *Sender) StartFile(rec Record) error {
	if err := s.ready("StartFile"); err != nil {
		return err
	}
	if err := checkSendName(rec.Name); err != nil {
		return err
	}
	if rec.Type != File || rec.Size < 0 || rec.Size > MaxFileSize {
		return fmt.Errorf("send %q: not a file of up to %d bytes", rec.Name, int64(MaxFileSize))
	}
	if err := s.line(rec); err != nil {
		return err
	}
	s.inFile, s.size, s.sent = true, rec.Size, 0
	return nil
}

// Write sends bytes of the file started, no more than its size in all.
func (s *Sender) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if !s.inFile || int64(len(p)) > s.size-s.sent {
		return 0, s.check(errors.New("scp: Sender.Write beyond the file's size"))
	}
	n, err := s.c.stdin.Write(p)
	s.sent += int64(n)
	if err != nil {
		return n, s.check(s.c.ended(err))
	}
	return n, nil
}

// zeros pads a file that could not be read whole.
var zeros [32 << 10]byte

// EndFile ends the file started. readErr, when not nil, says why its bytes
// could not all be read: the rest is sent as zeros, as the receiver counts
// bytes to find the next line, and the receiver is told the file is bad.
// It returns the receiver's answer.
func (s *Sender) EndFile(readErr error) error {
	if s.err != nil {
		return s.err
	}
	if !s.inFile {
		return s.check(errors.New("scp: Sender.EndFile without StartFile"))
	}
	for s.sent < s.size {
		n := min(s.size-s.sent, int64(len(zeros)))
		if _, err := s.c.stdin.Write(zeros[:n]); err != nil {
			return s.check(s.c.ended(err))
		}
		s.sent += n
	}
	s.inFile = false
	status := "\x00"
	if readErr != nil {
		status = "\x01scp: " + vis.String(readErr.Error()) + "\n"
	}
	if err := s.c.write(status); err != nil {
		return s.check(err)
	}
	return s.check(s.c.response())
}

// StartDir announces a directory (Dir: Name, Mode, and times when Times
// is set); its entries follow, then EndDir. It needs Recursive.
func (s *Sender) StartDir(rec Record) error {
	if err := s.ready("StartDir"); err != nil {
		return err
	}
	if err := checkSendName(rec.Name); err != nil {
		return err
	}
	if rec.Type != Dir || !s.o.Recursive {
		return fmt.Errorf("send directory %q: not a recursive copy", rec.Name)
	}
	if err := s.line(rec); err != nil {
		return err
	}
	s.depth++
	return nil
}

// EndDir ends the directory started last.
func (s *Sender) EndDir() error {
	if err := s.ready("EndDir"); err != nil {
		return err
	}
	if s.depth == 0 {
		return s.check(errors.New("scp: Sender.EndDir without StartDir"))
	}
	s.depth--
	if err := s.c.write("E\n"); err != nil {
		return s.check(err)
	}
	return s.check(s.c.response())
}

// Close ends the session: after a complete exchange it waits for the
// remote scp to exit and returns an error if it failed without saying why.
func (s *Sender) Close() error {
	return s.c.close(s.err == nil && !s.inFile && s.depth == 0)
}
