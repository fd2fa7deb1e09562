package protocol

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
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
		out, err := runCommand(ctx, conn, tool+" -- "+QuoteArg(name))
		if err != nil {
			lastErr = err
			continue
		}
		return parseSum(out)
	}
	return nil, fmt.Errorf("hash %s%s on the server: %w", s.label, name, lastErr)
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
	if conn == nil {
		return nil, &ConnError{Err: errors.New("the first connection is lost")}
	}
	sess, err := conn.NewSession()
	if err != nil {
		if connGone(err) {
			err = fmt.Errorf("%w: %w", ErrStreamLost, err)
		}
		return nil, err
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) || (err != nil && connGone(err)) {
		// The channel closed without the command's exit status: cut.
		err = fmt.Errorf("%w: %w", ErrStreamLost, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
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
