package sshconn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/term"
)

// errInterrupted is returned by a prompt that the user interrupted.
var errInterrupted = errors.New("interrupted")

// TerminalPrompter returns a Prompter on /dev/tty using golang.org/x/term,
// or nil when there is no terminal. Like ssh, it reads the terminal itself,
// so prompts work while stdin and stdout carry data.
func TerminalPrompter() Prompter {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	if !term.IsTerminal(int(f.Fd())) {
		f.Close()
		return nil
	}
	return &ttyPrompter{tty: f}
}

type ttyPrompter struct {
	mu  sync.Mutex
	tty *os.File
}

// ReadPassword turns echo off while reading. If the user interrupts, the
// terminal is restored before returning, so the shell is not left without
// echo.
func (p *ttyPrompter) ReadPassword(prompt string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fd := int(p.tty.Fd())
	state, err := term.GetState(fd)
	if err != nil {
		return "", fmt.Errorf("read password from terminal: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	if _, err := io.WriteString(p.tty, prompt); err != nil {
		return "", fmt.Errorf("write prompt to terminal: %w", err)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		io.WriteString(p.tty, "\n")
		if res.err != nil {
			return "", fmt.Errorf("read password from terminal: %w", res.err)
		}
		return string(res.b), nil
	case <-sig:
		term.Restore(fd, state)
		io.WriteString(p.tty, "\n")
		return "", errInterrupted
	}
}

// ReadLine reads one echoed line.
func (p *ttyPrompter) ReadLine(prompt string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.tty, prompt); err != nil {
		return "", fmt.Errorf("write prompt to terminal: %w", err)
	}
	// Byte by byte: a buffered reader could swallow input meant for a later
	// prompt.
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := p.tty.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				return strings.TrimSuffix(b.String(), "\r"), nil
			}
			b.WriteByte(buf[0])
		}
		if err != nil {
			if errors.Is(err, io.EOF) && b.Len() > 0 {
				return b.String(), nil
			}
			return "", fmt.Errorf("read from terminal: %w", err)
		}
	}
}
