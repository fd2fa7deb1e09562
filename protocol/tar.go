package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// TarSupport is what a server offers for tar streams, learnt with one
// command (TarProbe).
type TarSupport struct {
	// GNU is set when the server's tar is GNU tar: the streams use its
	// flags (--hard-dereference, --no-same-permissions), which busybox
	// and bsdtar lack or spell otherwise.
	GNU bool
	// Zstd is set when tar can compress with zstd (GNU tar 1.31 and later,
	// with a zstd program on the PATH); Gzip when it can with gzip.
	Zstd, Gzip bool
	// Version is the first line of tar --version, for messages.
	Version string
}

// errNoExec reports a server that refuses to run commands.
var errNoExec = errors.New("the server runs no commands")

// tarProbe asks in one command for the compressors and tar's version; it
// exits 0 whatever is missing, so that the output alone tells.
const tarProbe = `for t in zstd gzip; do command -v "$t" >/dev/null 2>&1 && echo "has $t"; done; tar --version 2>/dev/null | head -n 1; true`

// TarProbe runs one command on the server to learn which tar it has.
func (s *SFTP) TarProbe(ctx context.Context) (TarSupport, error) {
	out, err := runCommand(ctx, s.pool.firstConn(), tarProbe)
	var exit *ssh.ExitError
	switch {
	case err == nil:
	case Lost(err):
		return TarSupport{}, fmt.Errorf("probe tar on %s: %w", strings.TrimSuffix(s.label, ":"), ErrStreamLost)
	case errors.As(err, &exit) || ctx.Err() != nil:
		return TarSupport{}, fmt.Errorf("probe tar on %s: %w", strings.TrimSuffix(s.label, ":"), err)
	default:
		// x/crypto's message would only repeat the probe's text.
		return TarSupport{}, fmt.Errorf("probe tar on %s: %w", strings.TrimSuffix(s.label, ":"), errNoExec)
	}
	return parseTarProbe(out), nil
}

// parseTarProbe reads tarProbe's output.
func parseTarProbe(out []byte) TarSupport {
	var t TarSupport
	var zstd, gzip bool
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "has zstd":
			zstd = true
		case line == "has gzip":
			gzip = true
		case strings.Contains(line, "tar"):
			t.Version = line
		}
	}
	const gnu = "tar (GNU tar) "
	if v, ok := strings.CutPrefix(t.Version, gnu); ok {
		t.GNU = true
		major, minor := parseVersion(v)
		// --zstd arrived in GNU tar 1.31.
		t.Zstd = zstd && (major > 1 || major == 1 && minor >= 31)
		t.Gzip = gzip
	}
	return t
}

// parseVersion reads "1.34" as 1, 34; 0, 0 when it cannot.
func parseVersion(v string) (int, int) {
	a, b, _ := strings.Cut(strings.Fields(v + " ")[0], ".")
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(strings.SplitN(b, ".", 2)[0])
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return major, minor
}

// TarOptions say how a tar stream runs on the server.
type TarOptions struct {
	// Compress is "", "zstd" or "gzip": tar compresses or decompresses
	// the stream itself, so that its exit status covers the compressor.
	Compress string
	// Preserve (-p) has tar -x set the archive's modes and modification
	// times; otherwise new files get the archive's permissions under the
	// server's umask and the time of the copy, as SFTP mode gives them.
	Preserve bool
	// Stream numbers a tar -c stream among its copy's: the first runs on
	// the tar streams' own connection, the others in turn on it and on
	// the copy's other live connections (TarCreate).
	Stream int
}

func (o TarOptions) compressFlag() string {
	switch o.Compress {
	case "zstd":
		return " --zstd"
	case "gzip":
		return " -z"
	}
	return ""
}

// tarExtractCommand is the command that unpacks an archive from stdin
// into dir. -k refuses to replace any file: the archive names only fresh
// temporary files, so an existing one means something is wrong. The
// owner is never taken from the archive, also when the login is root.
func tarExtractCommand(dir string, o TarOptions) string {
	cmd := "tar -x -f - -k --no-same-owner"
	if o.Preserve {
		cmd += " -p"
	} else {
		cmd += " --no-same-permissions -m"
	}
	return cmd + o.compressFlag() + " -C " + PathArg(dir)
}

// tarCreateCommand is the command that writes an archive of the files
// named on stdin (NUL-terminated, relative to dir) to stdout. Links are
// followed, as scp follows them, and never sent as links: -h for symbolic
// links, --hard-dereference for files linked twice; --no-recursion so
// that a name which became a directory since the listing adds nothing
// unasked.
func tarCreateCommand(dir string, o TarOptions) string {
	return "tar -c -f - -h --hard-dereference --no-recursion" + o.compressFlag() +
		" -C " + PathArg(dir) + " --null -T -"
}

// tarConn is the connection tar streams run on: one of their own, so that
// they take none of the first connection's channels (sshd's MaxSessions,
// 10 by default) from the SFTP sessions, and get a TCP connection and an
// sshd process of their own.
type tarConn struct {
	mu   sync.Mutex
	done chan struct{} // closed when the dial ended; nil before it began
	c    *ssh.Client   // nil when the dial failed
	// ahead holds the tar -c commands started before their names, by
	// stream (TarCreateAhead).
	ahead map[int]*tarAhead
}

// tarAhead is a tar -c command started before its names were known.
type tarAhead struct {
	dir    string
	o      TarOptions
	done   chan struct{} // closed once the fields below are set
	t      *tarCommand
	stdin  io.WriteCloser
	stdout io.Reader
	err    error
}

// PrepareTar starts opening the connection tar streams will use, so that
// it is ready by the time they start.
func (s *SFTP) PrepareTar(ctx context.Context) {
	// The size check after an upload lists the target.
	s.PrepareList(ctx)
	s.tar.mu.Lock()
	defer s.tar.mu.Unlock()
	if s.tar.done != nil || s.pool.dial == nil {
		return
	}
	done := make(chan struct{})
	s.tar.done = done
	go func() {
		defer close(done)
		c, ready, err := s.pool.dial(ctx)
		if err != nil {
			s.pool.logf("tar streams share the first connection: %v", err)
			return
		}
		if ready.Wait != nil {
			// Tar streams are commands, not SFTP: the sessions opened
			// ahead are closed as they come.
			go func() {
				for _, r := range ready.Wait() {
					_ = r.ch.Close()
				}
			}()
		}
		s.tar.mu.Lock()
		s.tar.c = c
		s.tar.mu.Unlock()
		s.pool.logf("tar streams on a connection of their own")
	}()
}

// tarClient returns the connection for a tar stream.
func (s *SFTP) tarClient(ctx context.Context) *ssh.Client {
	s.PrepareTar(ctx)
	s.tar.mu.Lock()
	done := s.tar.done
	s.tar.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil
		}
		s.tar.mu.Lock()
		c := s.tar.c
		s.tar.mu.Unlock()
		if c != nil {
			return c
		}
	}
	return s.pool.firstConn()
}

// closeTar closes the tar streams' connection.
func (s *SFTP) closeTar() {
	s.DropTarAhead()
	s.tar.mu.Lock()
	done := s.tar.done
	s.tar.mu.Unlock()
	if done == nil {
		return
	}
	<-done
	if s.tar.c != nil {
		_ = s.tar.c.Close()
	}
}

// maxStderr bounds the stderr kept from a remote command for its error.
const maxStderr = 8 << 10

// tarCommand is a tar command running on the server over an exec
// channel of its own.
type tarCommand struct {
	cmd   *Command
	what  string // "tar -x in host:dir", for messages
	label string
	once  sync.Once
	err   error // wait's result
}

// startTar runs cmd on conn, or on the tar streams' connection when conn
// is nil. When ctx ends the channel is closed, which ends the remote
// command.
func (s *SFTP) startTar(ctx context.Context, conn *ssh.Client, cmd, what string) (*tarCommand, io.WriteCloser, io.Reader, error) {
	if conn == nil {
		conn = s.tarClient(ctx)
	}
	if conn == nil {
		return nil, nil, nil, fmt.Errorf("run tar on %s: %w", s.label, ErrStreamLost)
	}
	c, err := StartCommand(ctx, conn, cmd, CommandOptions{StderrMax: maxStderr, StderrHead: true})
	var ce *ChannelError
	switch {
	case errors.As(err, &ce):
		return nil, nil, nil, fmt.Errorf("run tar on %s: open a channel: %w", s.label, ce.Err)
	case err != nil:
		return nil, nil, nil, fmt.Errorf("run tar on %s: %w", s.label, err)
	}
	return &tarCommand{cmd: c, what: what, label: s.label}, c.Stdin, c.Stdout, nil
}

// streamConn returns the connection a tar -c stream numbered n runs on:
// the tar streams' own for the first, and the others in turn on it and
// on the pool's live connections that have a channel to spare, so that
// one connection the server's congestion control holds back does not
// hold back every stream: a connection whose first round trips met the
// queue the others built can leave slow start at a small window, and
// the streams it carried alone would take several times as long. A
// stream on another connection takes files from the same download
// (transfer's feed), so the slow one carries less.
func (s *SFTP) streamConn(ctx context.Context, n int) *ssh.Client {
	own := s.tarClient(ctx)
	if n == 0 || own == nil {
		return own
	}
	conns := []*ssh.Client{own}
	for _, c := range s.pool.spareConns() {
		if c != own {
			conns = append(conns, c)
		}
	}
	return conns[n%len(conns)]
}

// wait waits for the command to exit and returns an error carrying its
// stderr unless it exited 0.
func (t *tarCommand) wait() error {
	t.once.Do(func() {
		err := t.cmd.Wait()
		if err == nil {
			return
		}
		stderr, cut := t.cmd.Stderr()
		te := &TarExitError{What: t.what, Err: err, Status: -1, Stderr: stderr, Truncated: cut}
		var exit *ssh.ExitError
		if errors.As(err, &exit) && exit.Signal() == "" {
			te.Status = exit.ExitStatus()
		}
		t.err = te
	})
	return t.err
}

// TarExitError is a tar command that failed: how, and what it wrote to
// stderr, which says which files it could not read.
type TarExitError struct {
	What   string // "tar -c in host:dir"
	Err    error
	Status int // the exit status; -1 when tar did not exit (a signal, a lost channel)
	Stderr string
	// Truncated is set when Stderr holds only the start of what tar
	// wrote (maxStderr).
	Truncated bool
}

func (e *TarExitError) Error() string {
	msg := firstLines(strings.TrimSpace(e.Stderr), 4)
	if msg == "" {
		return fmt.Sprintf("%s: %v", e.What, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.What, e.Err, msg)
}

func (e *TarExitError) Unwrap() error { return e.Err }

// TarExtract starts tar -x in the existing directory dir on the server.
// The archive is written to the returned writer; its Close ends the
// input and returns tar's failure, if any, with tar's own message.
func (s *SFTP) TarExtract(ctx context.Context, dir string, o TarOptions) (io.WriteCloser, error) {
	s.early.drop()
	t, stdin, stdout, err := s.startTar(ctx, nil, tarExtractCommand(dir, o), "tar -x in "+s.label+dir)
	if err != nil {
		return nil, err
	}
	// tar -x writes nothing to stdout, but an unread stdout would stall
	// the channel should it ever do so.
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return &tarSink{t: t, stdin: stdin}, nil
}

type tarSink struct {
	t     *tarCommand
	stdin io.WriteCloser
}

func (w *tarSink) Write(p []byte) (int, error) {
	n, err := w.stdin.Write(p)
	if err != nil {
		// tar went away: its exit status and message say why.
		if werr := w.t.wait(); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (w *tarSink) Close() error {
	cerr := w.stdin.Close()
	if err := w.t.wait(); err != nil {
		return err
	}
	return cerr
}

// TarCreate starts tar -c in dir on the server for names, paths of
// regular files relative to dir, which come in batches: each is sent as
// it comes, so that names can be handed out as the stream takes them.
// The archive is read from the returned reader; Close reads what
// remains, waits for tar and returns its failure, if any. Each name is
// sent as "./name", so that one starting with "-" is not taken for an
// option. o.Stream picks the connection (streamConn); should that one
// refuse a channel, the stream runs on the tar streams' own.
func (s *SFTP) TarCreate(ctx context.Context, dir string, names iter.Seq[[]string], o TarOptions) (io.ReadCloser, error) {
	var t *tarCommand
	var stdin io.WriteCloser
	var stdout io.Reader
	if a := s.takeAhead(dir, o); a != nil {
		t, stdin, stdout = a.t, a.stdin, a.stdout
		// Started under the copy's context: ending ctx ends it too, as
		// it ends a command started here.
		context.AfterFunc(ctx, t.cmd.Close)
	} else {
		var err error
		if t, stdin, stdout, err = s.startCreate(ctx, dir, o); err != nil {
			return nil, err
		}
	}
	go func() {
		var b bytes.Buffer
		for batch := range names {
			for _, n := range batch {
				appendTarName(&b, n)
				if b.Len() >= 32<<10 {
					if _, err := stdin.Write(b.Bytes()); err != nil {
						return
					}
					b.Reset()
				}
			}
			if _, err := stdin.Write(b.Bytes()); err != nil {
				return
			}
			b.Reset()
		}
		_ = stdin.Close()
	}()
	return &tarSource{t: t, r: stdout}, nil
}

// appendTarName adds name, a path relative to tar's -C directory, to a
// list tar -c reads with --null -T -. GNU tar reads a listed name that
// starts with "-" as an option unless --verbatim-files-from is in force
// (1.34 takes --null for it; not every version need), and busybox and
// bsdtar have no such option: every name goes as "./name", which starts
// with no dash on any tar and names the same file; the archive then
// names it so too (tarSkipped, receiveTar). A name holding a NUL, which
// no file on the server can have, is left out rather than split into
// two names: the copy then reports it missing from the stream.
func appendTarName(b *bytes.Buffer, name string) {
	if strings.IndexByte(name, 0) >= 0 {
		return
	}
	b.WriteString("./")
	b.WriteString(name)
	b.WriteByte(0)
}

// startCreate starts the tar -c of TarCreate, on the connection of
// o.Stream.
func (s *SFTP) startCreate(ctx context.Context, dir string, o TarOptions) (*tarCommand, io.WriteCloser, io.Reader, error) {
	cmd, what := tarCreateCommand(dir, o), "tar -c in "+s.label+dir
	conn := s.streamConn(ctx, o.Stream)
	t, stdin, stdout, err := s.startTar(ctx, conn, cmd, what)
	if err != nil && o.Stream > 0 && conn != s.tarClient(ctx) && ctx.Err() == nil {
		s.pool.logf("tar stream %d on the tar streams' connection: %v", o.Stream, err)
		t, stdin, stdout, err = s.startTar(ctx, nil, cmd, what)
	}
	return t, stdin, stdout, err
}

// TarCreateAhead starts the tar -c that TarCreate with the same dir and
// o would start, before its names are known: a command waits for the
// login shell the server starts for it, and that shell may read files
// that take it a good part of a second (root's ~/.bashrc here: 0.65 s).
// Started while the tree is being listed, a download's streams have
// their tar reading names by the time the plan is made. TarCreate takes
// it; DropTarAhead ends those none took. ctx bounds the command's life.
func (s *SFTP) TarCreateAhead(ctx context.Context, dir string, o TarOptions) {
	s.tar.mu.Lock()
	if _, ok := s.tar.ahead[o.Stream]; ok {
		s.tar.mu.Unlock()
		return
	}
	if s.tar.ahead == nil {
		s.tar.ahead = map[int]*tarAhead{}
	}
	a := &tarAhead{dir: dir, o: o, done: make(chan struct{})}
	s.tar.ahead[o.Stream] = a
	s.tar.mu.Unlock()
	go func() {
		defer close(a.done)
		a.t, a.stdin, a.stdout, a.err = s.startCreate(ctx, dir, o)
	}()
}

// takeAhead returns the command started ahead for TarCreate's dir and
// o, once it started; nil when there is none or it failed to start.
func (s *SFTP) takeAhead(dir string, o TarOptions) *tarAhead {
	s.tar.mu.Lock()
	a := s.tar.ahead[o.Stream]
	if a == nil || a.dir != dir || a.o != o {
		s.tar.mu.Unlock()
		return nil
	}
	delete(s.tar.ahead, o.Stream)
	s.tar.mu.Unlock()
	<-a.done
	if a.err != nil {
		s.pool.logf("tar stream %d started ahead: %v", o.Stream, a.err)
		return nil
	}
	return a
}

// DropTarAhead ends the commands TarCreateAhead started that TarCreate
// did not take.
func (s *SFTP) DropTarAhead() {
	s.tar.mu.Lock()
	ahead := s.tar.ahead
	s.tar.ahead = nil
	s.tar.mu.Unlock()
	for _, a := range ahead {
		go func() {
			<-a.done
			if a.err == nil {
				a.t.cmd.Close()
			}
		}()
	}
}

type tarSource struct {
	t *tarCommand
	r io.Reader
}

func (r *tarSource) Read(p []byte) (int, error) { return r.r.Read(p) }

func (r *tarSource) Close() error {
	// tar pads the archive to whole records after its end marker; it
	// exits only once that padding is read.
	_, cerr := io.Copy(io.Discard, r.r)
	if err := r.t.wait(); err != nil {
		return err
	}
	if cerr != nil && !errors.Is(cerr, io.EOF) {
		return fmt.Errorf("read tar stream from %s: %w", r.t.label, cerr)
	}
	return nil
}

// firstLines returns the first n lines of s, and how many it left out: a
// failing tar repeats its complaint for every file after the first.
func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return fmt.Sprintf("%s (and %d more lines)", strings.Join(lines[:n], "\n"), len(lines)-n)
}
