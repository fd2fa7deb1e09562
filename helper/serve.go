//go:build unix

// Package helper is hpncp at the far end of an SSH login: `hpncp serve`,
// which the client starts there over exec channels of several
// connections, and the client's side of it. The helper joins what the
// client stripes over those channels (package stripe) into one remote
// command's stdin, and stripes the command's output back. It listens on
// no port: the channels after the first reach the first one's process
// through a socket in a directory only the user can enter, and hand it
// their stdin and stdout, so that it reads and writes every channel
// itself.
package helper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpncp/hpncp/stripe"
)

// Protocol is the helper protocol's version: a client and a helper speak
// only the same one. It names the helper's directory in the user's cache.
const Protocol = 1

// jobLen is the length of a job's name: 128 random bits in hex.
const jobLen = 32

// ValidJob reports whether name can be a job's name, which the client
// makes and which names the job's socket.
func ValidJob(name string) bool {
	if len(name) != jobLen {
		return false
	}
	for _, c := range name {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// runDir is the directory the job sockets of this user go in: made
// owner-only, and refused when it is another user's, a link, or open to
// others (it is where another channel's process is told to hand over
// its stdin).
func runDir() (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("helper directory: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	dir := filepath.Join(base, "hpncp", "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("helper directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("helper directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("helper directory %s: not a directory", dir)
	case !ok || int(st.Uid) != os.Getuid():
		return "", fmt.Errorf("helper directory %s: not this user's", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("helper directory %s: open to others (mode %v); hint: chmod 700 it", dir, fi.Mode().Perm())
	}
	return dir, nil
}

// socketPath is job's socket.
func socketPath(job string) (string, error) {
	dir, err := runDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, job+".sock")
	if len(p) >= 104 { // sun_path, on the systems with the shortest
		return "", fmt.Errorf("helper socket %s: path too long for a socket; hint: set XDG_RUNTIME_DIR", p)
	}
	return p, nil
}

// hello is the payload of the helper's hello: its protocol.
func hello() []byte { return []byte{Protocol >> 8, Protocol & 0xff} }

// A conn is one channel of the job: what the client sends on it (in) and
// what goes back (out, whole frames at a time).
type conn struct {
	in   io.ReadCloser
	out  io.Writer
	done func()        // once the job's frames on it are over: lets its process go
	sent chan struct{} // closed once its senders are through
}

// LeadOptions are the first channel's: the job's name, the command, and
// the channel's stdin and stdout.
type LeadOptions struct {
	Job string
	// Channels is how many channels the client opens for the job, this
	// one with them (1 when 0): stdin is whole only once each of them
	// has joined and closed, or was given up.
	Channels int
	Shell    string // runs the client's command as Shell -c COMMAND; $SHELL, else /bin/sh
	In       io.ReadCloser
	Out      io.Writer
	Budget   int // stdin's reorder budget (stripe.DefaultBudget when 0)
	Frame    int // output frames' size (stripe.DefaultFrame when 0)
	// JoinWait bounds how long the job's socket takes more channels
	// after the command started (0: a minute).
	JoinWait time.Duration
}

// Lead runs the job on its first channel: it opens the job's socket, says
// hello, runs the command with stdin from every channel the client joins
// and its output striped back over them, and ends with the command's
// exit. It returns what the helper's process exits with: 0, since the
// command's own end goes to the client in a frame, or an error before
// the command ran.
func Lead(ctx context.Context, o LeadOptions) error {
	if !ValidJob(o.Job) {
		return fmt.Errorf("helper: invalid job name %q", o.Job)
	}
	path, err := socketPath(o.Job)
	if err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("helper: listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()

	out := stripe.Serial(o.Out)
	if err := stripe.WriteFrame(out, stripe.Frame{Kind: stripe.KindHello, Payload: hello()}); err != nil {
		return fmt.Errorf("helper: say hello: %w", err)
	}
	// The client's hello names the command: it comes as bytes, not
	// through a shell's quoting on the way here.
	f, err := stripe.ReadFrame(o.In, nil)
	if err != nil {
		return fail(out, fmt.Errorf("helper: read the client's hello: %w", err))
	}
	if f.Kind != stripe.KindHello || len(f.Payload) < 2 || int(f.Payload[0])<<8|int(f.Payload[1]) != Protocol {
		return fail(out, fmt.Errorf("helper: the client's first frame is not a hello of protocol %d", Protocol))
	}
	command := string(f.Payload[2:])

	shell := o.Shell
	if shell == "" {
		shell = os.Getenv("SHELL")
	}
	if shell == "" {
		shell = "/bin/sh"
	}
	cmd := exec.Command(shell, "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fail(out, fmt.Errorf("helper: %w", err))
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fail(out, fmt.Errorf("helper: %w", err))
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fail(out, fmt.Errorf("helper: %w", err))
	}
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		stdinW.Close()
		return fail(out, fmt.Errorf("helper: start %s: %w", shell, err))
	}
	stdinR.Close()

	j := &job{
		stdin:  stripe.NewMerger(stripe.Stdin, o.Budget),
		stdout: stripe.NewSender(stdout, stripe.Stdout, o.Frame),
		stderr: stripe.NewSender(stderr, stripe.Stderr, o.Frame),
		pgid:   cmd.Process.Pid,
	}
	j.stdout.SetReady(readyFunc(stdout))
	j.stderr.SetReady(readyFunc(stderr))
	j.group = stripe.NewGroup(j.stdin)
	j.group.Add(max(o.Channels, 1))
	j.joins = max(o.Channels, 1) - 1

	// stdin: the frames in order into the command; a broken stream
	// kills it.
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		_, err := io.Copy(stdinW, j.stdin)
		if err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, stripe.ErrMergerClosed) {
			j.kill(fmt.Errorf("stdin: %w", err))
		}
		stdinW.Close()
	}()

	first := &conn{in: o.In, out: out, done: func() {}, sent: make(chan struct{})}
	j.add(first, true)
	joinWait := o.JoinWait
	if joinWait <= 0 {
		joinWait = time.Minute
	}
	ln.SetDeadline(time.Now().Add(joinWait))
	go j.accept(ln, o.Job)

	// The command's output ends once the first channel's senders are
	// through (each takes its stream's end or sees it taken); then its
	// exit goes on the first channel, and every channel closes once
	// its own senders are through.
	<-first.sent
	werr := cmd.Wait()
	j.mu.Lock()
	j.exited = true
	why := j.why
	j.mu.Unlock()
	ln.Close()
	var serr error
	if why != nil {
		// The client is told why, not only that the command was killed.
		serr = fail(out, fmt.Errorf("helper: the command was stopped: %w", why))
	} else {
		serr = stripe.WriteFrame(out, stripe.Frame{Kind: stripe.KindExit, Payload: exitFrame(cmd.ProcessState, werr)})
	}
	j.closeAll()
	j.stdin.Close()
	<-stdinDone
	return serr
}

// fail tells the client why the helper gave up, and returns err.
func fail(out io.Writer, err error) error {
	msg := err.Error()
	if len(msg) > stripe.MaxMessage {
		msg = msg[:stripe.MaxMessage]
	}
	stripe.WriteFrame(out, stripe.Frame{Kind: stripe.KindError, Payload: []byte(msg)})
	return err
}

// exitFrame is a KindExit payload: "status N" or "signal NAME".
func exitFrame(ps *os.ProcessState, err error) []byte {
	if ps == nil {
		return []byte("status 255")
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return []byte("signal " + signalName(ws.Signal()))
	}
	return fmt.Appendf(nil, "status %d", ps.ExitCode())
}

// signalName is a signal's name as SSH's exit-signal has it (no SIG).
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGABRT: "ABRT", syscall.SIGALRM: "ALRM", syscall.SIGFPE: "FPE",
		syscall.SIGHUP: "HUP", syscall.SIGILL: "ILL", syscall.SIGINT: "INT",
		syscall.SIGKILL: "KILL", syscall.SIGPIPE: "PIPE", syscall.SIGQUIT: "QUIT",
		syscall.SIGSEGV: "SEGV", syscall.SIGTERM: "TERM", syscall.SIGUSR1: "USR1",
		syscall.SIGUSR2: "USR2",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("%d", int(s))
}

// job is a running command and its channels.
type job struct {
	stdin          *stripe.Merger
	stdout, stderr *stripe.Sender
	group          *stripe.Group
	pgid           int // the command's process group

	joins int // channels still to join

	mu     sync.Mutex
	conns  []*conn
	closed bool  // the job's channels are closing: no more join
	exited bool  // the command was waited for: its group may be gone
	why    error // why the command was killed, if it was
}

// kill stops the command once its stdin can no longer be whole or its
// output no longer reach the client: stopped, rather than given an early
// end of its input.
func (j *job) kill(why error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.exited {
		if j.why == nil {
			j.why = why
		}
		syscall.Kill(-j.pgid, syscall.SIGKILL)
	}
}

// add starts the job's frames on c: its stdin frames in, stdout (and on
// the first channel, stderr) out.
func (j *job) add(c *conn, first bool) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		c.in.Close()
		c.done()
		return
	}
	if !first {
		// The client sends a channel its share of stdin once the
		// helper has it: what it sent on one that never joined would be
		// lost, and the command stopped for it.
		if err := stripe.WriteFrame(c.out, stripe.Frame{Kind: stripe.KindHello, Payload: hello()}); err != nil {
			j.mu.Unlock()
			c.in.Close()
			c.done()
			j.group.Done()
			return
		}
	}
	j.conns = append(j.conns, c)
	j.mu.Unlock()
	go func() {
		defer j.group.Done()
		if err := stripe.Receive(c.in, [stripe.MaxStreams]*stripe.Merger{stripe.Stdin: j.stdin}, nil); err != nil {
			j.kill(fmt.Errorf("a channel: %w", err))
		}
	}()
	go func() {
		defer close(c.sent)
		var wg sync.WaitGroup
		if first {
			wg.Go(func() {
				if err := j.stderr.Run(c.out); err != nil {
					j.kill(fmt.Errorf("stderr: %w", err))
				}
			})
		}
		if err := j.stdout.Run(c.out); err != nil {
			j.kill(fmt.Errorf("stdout: %w", err))
		}
		wg.Wait()
	}()
}

// closeAll ends every channel's frames and lets the joined processes go.
func (j *job) closeAll() {
	j.mu.Lock()
	j.closed = true
	conns := j.conns
	j.mu.Unlock()
	for _, c := range conns {
		<-c.sent
		stripe.WriteClose(c.out)
		c.done()
	}
}

// accept takes the channels that join the job until all have, or the
// socket closes or its deadline passes: those that did not join by then
// count as ended, so that a stdin they were to carry part of fails.
func (j *job) accept(ln *net.UnixListener, name string) {
	defer func() {
		for ; j.joins > 0; j.joins-- {
			j.group.Done()
		}
		ln.Close()
	}()
	for j.joins > 0 {
		uc, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		c, err := receiveJoin(uc, name)
		if err != nil {
			uc.Close()
			continue
		}
		j.joins--
		j.add(c, false)
	}
}

// thisUsers says whether the process at the other end of uc runs as
// this process's user (peerUID); one whose user cannot be told is not.
func thisUsers(uc *net.UnixConn) (bool, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return false, err
	}
	uid, cerr := -1, error(nil)
	raw.Control(func(fd uintptr) { uid, cerr = peerUID(int(fd)) })
	return cerr == nil && uid == os.Getuid(), nil
}

// joinHello is what a joining process sends beside its descriptors.
func joinHello(name string) []byte { return []byte("hpncp-join " + name) }

// receiveJoin takes a joining process's stdin and stdout from uc, after
// checking that it runs as this user and names this job.
func receiveJoin(uc *net.UnixConn, name string) (*conn, error) {
	ours, err := thisUsers(uc)
	if err != nil {
		return nil, err
	}
	if !ours {
		return nil, errors.New("helper: a process of another user tried to join")
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	want := joinHello(name)
	buf := make([]byte, len(want)+1)
	oob := make([]byte, syscall.CmsgSpace(2*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("helper: a join without its descriptors")
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, err
	}
	if len(fds) != 2 || string(buf[:n]) != string(want) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, errors.New("helper: a join that does not name this job")
	}
	uc.SetReadDeadline(time.Time{})
	in := os.NewFile(uintptr(fds[0]), "join-stdin")
	out := os.NewFile(uintptr(fds[1]), "join-stdout")
	return &conn{in: in, out: stripe.Serial(out), sent: make(chan struct{}), done: func() {
		in.Close()
		out.Close()
		uc.Close() // the joined process exits
	}}, nil
}

// Join hands this process's stdin and stdout (a channel of job) to the
// job's first process, and waits until it is through with them.
func Join(ctx context.Context, name string, stdin, stdout *os.File) error {
	if !ValidJob(name) {
		return fmt.Errorf("helper: invalid job name %q", name)
	}
	path, err := socketPath(name)
	if err != nil {
		return err
	}
	var uc *net.UnixConn
	// The first channel's process makes the socket; a join that comes
	// first (its connection was dialed beside the first one) waits for
	// it, until the client gives up on this channel or the job is over.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			uc = c
			break
		}
		if time.Now().After(deadline) || hungUp(stdin) {
			return fmt.Errorf("helper: join job %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer uc.Close()
	rights := syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()))
	if _, _, err := uc.WriteMsgUnix(joinHello(name), rights, nil); err != nil {
		return fmt.Errorf("helper: join job %s: %w", name, err)
	}
	// The first process closes the socket once the job is over; until
	// then this process stays, or sshd would stop the channel's input.
	io.Copy(io.Discard, uc)
	return nil
}

// hungUp reports whether f, a channel's stdin, was closed at the far end:
// the client closed the channel. Pending input is left unread.
func hungUp(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd())}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
}
