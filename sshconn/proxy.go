package sshconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// startProxyCommand runs ProxyCommand with the user's shell, as ssh does,
// and returns its stdin/stdout as the connection.
func startProxyCommand(cfg *Config) (net.Conn, error) {
	tok := tokens{'%': "%", 'h': cfg.HostName, 'p': strconv.Itoa(cfg.Port), 'r': cfg.User, 'n': cfg.Host}
	command, err := tok.expand(cfg.ProxyCommand)
	if err != nil {
		return nil, fmt.Errorf("ProxyCommand: %w", err)
	}
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	// exec avoids a lingering shell between ssh and the command.
	cmd := exec.Command(shell, "-c", "exec "+command)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("ProxyCommand: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("ProxyCommand: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ProxyCommand %q: %w", command, err)
	}
	return &cmdConn{cmd: cmd, r: stdout, w: stdin}, nil
}

// cmdConn is a net.Conn over a command's stdout and stdin.
type cmdConn struct {
	cmd  *exec.Cmd
	r    io.ReadCloser
	w    io.WriteCloser
	once sync.Once
}

func (c *cmdConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *cmdConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the command: ssh kills its ProxyCommand when the connection
// ends too.
func (c *cmdConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return nil
}

// proxyAddr stands for the unknown address at the far end of the command;
// known_hosts checking needs a parsable one, as with a jump host's channel.
var proxyAddr = &net.TCPAddr{IP: net.IPv4zero}

func (c *cmdConn) LocalAddr() net.Addr  { return proxyAddr }
func (c *cmdConn) RemoteAddr() net.Addr { return proxyAddr }

var errNoDeadline = errors.New("ProxyCommand connection: deadlines not supported")

func (c *cmdConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return errNoDeadline }
