package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Command is a command running on the server on a session channel of its
// own: its stdin and stdout are the caller's streams, and its stderr is
// kept, bounded, for the messages of its failure. Legacy scp, tar streams
// and remote hashing all run their commands so.
type Command struct {
	Stdin  io.WriteCloser
	Stdout io.Reader

	ctx    context.Context
	sess   *ssh.Session
	stderr *stderrBuffer
	stop   func() bool // ends the watch on ctx
	once   sync.Once
	err    error // Wait's result
}

// CommandOptions say how much of a command's stderr is kept.
type CommandOptions struct {
	// StderrMax bounds the bytes of stderr kept; 1 KiB when 0.
	StderrMax int
	// StderrHead keeps the first StderrMax bytes rather than the last: a
	// tool that fails file after file says what matters first, one that
	// stops says why last.
	StderrHead bool
}

// ChannelError is a command that could not start because no session
// channel could be opened for it; Err wraps ErrStreamLost when the
// connection under it is gone.
type ChannelError struct {
	Err error
}

func (e *ChannelError) Error() string { return e.Err.Error() }

func (e *ChannelError) Unwrap() error { return e.Err }

// StartCommand runs cmd on conn. When ctx ends, the channel is closed,
// which ends the remote command and every read and write on its streams.
// An error is a *ChannelError when no channel could be opened, and
// otherwise the server's refusal to run cmd.
func StartCommand(ctx context.Context, conn *ssh.Client, cmd string, o CommandOptions) (*Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, &ChannelError{Err: &ConnError{Err: errors.New("the connection is lost")}}
	}
	sess, err := conn.NewSession()
	if err != nil {
		if connGone(err) {
			err = fmt.Errorf("%w: %w", ErrStreamLost, err)
		}
		return nil, &ChannelError{Err: err}
	}
	c := &Command{ctx: ctx, sess: sess, stderr: &stderrBuffer{max: o.StderrMax, head: o.StderrHead}}
	if c.stderr.max == 0 {
		c.stderr.max = 1 << 10
	}
	sess.Stderr = c.stderr
	if c.Stdin, err = sess.StdinPipe(); err == nil {
		if c.Stdout, err = sess.StdoutPipe(); err == nil {
			err = sess.Start(cmd)
		}
	}
	if err != nil {
		_ = sess.Close()
		return nil, err
	}
	c.stop = context.AfterFunc(ctx, func() { _ = sess.Close() })
	return c, nil
}

// Wait waits for the command to exit, once; later calls return the same.
// It returns nil when the command exited 0, an *ssh.ExitError when it
// exited otherwise or was killed, ctx's error when ctx ended it, and an
// error wrapping ErrStreamLost when the channel closed with neither exit
// status nor signal: sshd always sends one, so the channel was cut.
func (c *Command) Wait() error {
	c.once.Do(func() {
		err := c.sess.Wait()
		c.stop()
		_ = c.sess.Close()
		var exit *ssh.ExitError
		var missing *ssh.ExitMissingError
		switch {
		case err == nil:
		case c.ctx.Err() != nil && !errors.As(err, &exit):
			err = c.ctx.Err()
		case errors.As(err, &missing) || connGone(err):
			err = fmt.Errorf("%w: %w", ErrStreamLost, err)
		}
		c.err = err
	})
	return c.err
}

// Close ends the command at once, without waiting for its exit: the
// channel closes, and the remote command with it.
func (c *Command) Close() {
	c.stop()
	_ = c.sess.Close()
}

// Stderr returns what the command wrote to stderr, as far as kept, and
// whether more was written than kept.
func (c *Command) Stderr() (string, bool) { return c.stderr.contents() }

// stderrBuffer keeps the first or the last max bytes written to it.
type stderrBuffer struct {
	mu   sync.Mutex
	b    []byte
	max  int
	head bool // keep the first bytes, not the last
	cut  bool // more was written than kept
}

func (s *stderrBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head {
		room := max(s.max-len(s.b), 0)
		s.b = append(s.b, p[:min(len(p), room)]...)
		s.cut = s.cut || len(p) > room
		return len(p), nil
	}
	s.b = append(s.b, p...)
	if over := len(s.b) - s.max; over > 0 {
		s.b = append(s.b[:0], s.b[over:]...)
		s.cut = true
	}
	return len(p), nil
}

func (s *stderrBuffer) contents() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b), s.cut
}

// QuoteArg quotes s as one word for the remote user's shell, which runs
// every command an exec request names.
func QuoteArg(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PathArg quotes the path p as one word for the remote shell (QuoteArg)
// that no command can take for an option: every path hpncp puts in a
// remote command goes through it. A relative path starting with "-" gets
// "./" in front, which names the same file; "--" alone would not do, as
// find takes no "--" before its paths and reads "-delete" as an action.
// An absolute path never starts with "-".
func PathArg(p string) string { return QuoteArg(NotOption(p)) }

// NotOption is p as PathArg gives it, before quoting: for callers that
// quote it otherwise (scp's glob patterns).
func NotOption(p string) string {
	if strings.HasPrefix(p, "-") {
		return "./" + p
	}
	return p
}
