package protocol

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func TestCommandStreamsStatusAndStderr(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		in, _ := io.ReadAll(stdin)
		io.WriteString(stdout, cmd+":"+string(in))
		io.WriteString(stderr, "first complaint\n"+strings.Repeat("x", 100)+"\nlast words\n")
		return 3
	}})
	conn := srv.Dial(t)
	for _, head := range []bool{false, true} {
		c, err := StartCommand(context.Background(), conn, "echo", CommandOptions{StderrMax: 16, StderrHead: head})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c.Stdin, "input")
		c.Stdin.Close()
		out, err := io.ReadAll(c.Stdout)
		if err != nil || string(out) != "echo:input" {
			t.Errorf("stdout = %q, %v; want the command and its input back", out, err)
		}
		var exit *ssh.ExitError
		if err := c.Wait(); !errors.As(err, &exit) || exit.ExitStatus() != 3 || Lost(err) {
			t.Errorf("Wait = %v, want exit status 3, not a lost connection", err)
		}
		stderr, cut := c.Stderr()
		want := "xxxx\nlast words\n"
		if head {
			want = "first complaint\n"
		}
		if stderr != want || !cut {
			t.Errorf("StderrHead=%v: stderr kept %q, cut %v; want %q, cut", head, stderr, cut, want)
		}
	}
}

// A channel that closes without an exit status was cut: sshd always
// sends one.
func TestCommandLostConnection(t *testing.T) {
	running := make(chan struct{})
	srv := sshtest.Start(t, sshtest.Options{Exec: func(_ string, stdin io.Reader, _, _ io.Writer) int {
		close(running)
		io.Copy(io.Discard, stdin)
		return 0
	}})
	c, err := StartCommand(context.Background(), srv.Dial(t), "sleep", CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	srv.KillConnections()
	if err := waitWithin(t, c, 10*time.Second); !Lost(err) {
		t.Errorf("Wait after the connection was cut = %v, want a lost connection", err)
	}
}

func TestCommandRefused(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	var ce *ChannelError
	if _, err := StartCommand(context.Background(), srv.Dial(t), "x", CommandOptions{}); err == nil || errors.As(err, &ce) {
		t.Errorf("StartCommand on a server that runs no commands = %v, want its refusal", err)
	}
}

func TestCommandCancel(t *testing.T) {
	running := make(chan struct{})
	srv := sshtest.Start(t, sshtest.Options{Exec: func(_ string, stdin io.Reader, _, _ io.Writer) int {
		close(running)
		io.Copy(io.Discard, stdin)
		return 0
	}})
	conn := srv.Dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCommand(ctx, conn, "sleep", CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	cancel()
	if err := waitWithin(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait after cancel = %v, want context.Canceled", err)
	}
	if _, err := StartCommand(ctx, conn, "sleep", CommandOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("StartCommand with a cancelled context = %v", err)
	}
	var ce *ChannelError
	if _, err := StartCommand(context.Background(), nil, "x", CommandOptions{}); !errors.As(err, &ce) || !Lost(err) {
		t.Errorf("StartCommand without a connection = %v, want a lost connection", err)
	}
}

// waitWithin returns c.Wait's result, failing the test if it takes longer
// than d.
func waitWithin(t *testing.T, c *Command, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		c.Close()
		t.Fatalf("Wait did not return within %s", d)
		return nil
	}
}
