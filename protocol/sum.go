package protocol

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Sum256 hashes name where it lives, with the server's sha256sum (or
// shasum -a 256 where that is what it has), so that --verify and
// --checksum need not read the file back over the network. It fails when
// the server runs no commands or has neither tool; callers then read back.
func (s *SFTP) Sum256(ctx context.Context, name string) ([]byte, error) {
	conn := s.pool.firstConn()
	var lastErr error
	for _, tool := range []string{"sha256sum", "shasum -a 256"} {
		out, err := runCommand(ctx, conn, sumCommand(tool, name))
		if err != nil {
			lastErr = err
			continue
		}
		return parseSum(out)
	}
	return nil, fmt.Errorf("hash %s%s on the server: %w", s.label, name, lastErr)
}

// sumCommand is the command that hashes name with tool: the name only
// is read from its output (parseSum), which "./" before it leaves alone.
func sumCommand(tool, name string) string {
	return tool + " -- " + PathArg(name)
}

// parseSum reads the hash from a "HEX  NAME" line.
func parseSum(out []byte) ([]byte, error) {
	field, _, _ := strings.Cut(string(bytes.TrimSpace(out)), " ")
	field = strings.TrimPrefix(field, "\\") // names with odd characters
	sum, err := hex.DecodeString(field)
	if err != nil || len(sum) != 32 {
		return nil, fmt.Errorf("unexpected hash output %q", out)
	}
	return sum, nil
}

// runCommand runs cmd on conn and returns its stdout; a non-zero exit is an
// error carrying the command's stderr.
func runCommand(ctx context.Context, conn *ssh.Client, cmd string) ([]byte, error) {
	return runCommandMax(ctx, conn, cmd, maxCommandOutput)
}

// maxCommandOutput bounds what runCommand holds of a command's stdout.
const maxCommandOutput = 1 << 20

// runCommandMax is runCommand for a command whose stdout may be up to
// max bytes; more is an error.
func runCommandMax(ctx context.Context, conn *ssh.Client, cmd string, max int64) ([]byte, error) {
	if conn == nil {
		return nil, &ConnError{Err: errors.New("the first connection is lost")}
	}
	c, err := StartCommand(ctx, conn, cmd, CommandOptions{StderrMax: maxStderr, StderrHead: true})
	var ce *ChannelError
	switch {
	case errors.As(err, &ce):
		return nil, ce.Err
	case err != nil:
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	// The command reads no input: EOF at once, as for ssh -n.
	_ = c.Stdin.Close()
	out, rerr := io.ReadAll(io.LimitReader(c.Stdout, max+1))
	if rerr == nil && int64(len(out)) > max {
		rerr = fmt.Errorf("more than %d bytes", max)
	}
	if err := c.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		stderr, _ := c.Stderr()
		return nil, fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(stderr))
	}
	if rerr != nil {
		return nil, fmt.Errorf("%s: read its output: %w", cmd, rerr)
	}
	return out, nil
}

// firstConn returns the connection the end was opened on.
func (p *pool) firstConn() *ssh.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) == 0 || p.conns[0].dead {
		return nil
	}
	return p.conns[0].c
}

// Output runs cmd on conn and returns its stdout, of at most max bytes;
// a non-zero exit is an error carrying the start of the command's stderr.
func Output(ctx context.Context, conn *ssh.Client, cmd string, max int64) ([]byte, error) {
	return runCommandMax(ctx, conn, cmd, max)
}
