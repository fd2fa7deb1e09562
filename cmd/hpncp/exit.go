package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// Exit codes, documented in the help text and the README.
const (
	exitOK          = 0
	exitFailed      = 1 // nothing could be copied
	exitUsage       = 2
	exitPartial     = 3 // some files were copied, others failed
	exitInterrupted = 130
	exitConnection  = 255 // connection, host key or authentication failure, as ssh
)

// usageError is a command line hpncp cannot run. One without a message
// stands for a usage text already printed.
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

func usagef(hint, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: hint}
}

// partialError reports that a run went to the end but some files failed;
// each failure has been printed already. done counts the files copied or
// found already at the target; lost says a failure was the connection's.
type partialError struct {
	failed, done int
	lost         bool
}

func (e *partialError) Error() string {
	return fmt.Sprintf("%d file(s) or directories could not be copied", e.failed)
}

// report prints err as hpncp's error and hint lines and returns the exit
// code it maps to.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var pe *partialError
	var ce *sshconn.Error
	var re *remoteExitError
	switch {
	case errors.As(err, &re):
		// hpncp ssh: the remote command's status is ours, as with ssh.
		return re.ExitCode()
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "hpncp: interrupted")
		return exitInterrupted
	case errors.As(err, &ue) && ue.msg == "":
		return exitUsage
	case errors.As(err, &ue):
		printError(stderr, ue.msg, ue.hint)
		if ue.hint == "" {
			fmt.Fprintln(stderr, "hpncp: hint: run hpncp --help for usage")
		}
		return exitUsage
	case errors.As(err, &pe) && pe.lost:
		// The files that failed may well copy on a re-run: what failed
		// is the connection, and the status says so, as ssh's does.
		return exitConnection
	case errors.As(err, &pe) && pe.done > 0:
		return exitPartial
	case errors.As(err, &pe):
		return exitFailed
	case errors.As(err, &ce):
		printError(stderr, ce.Error(), ce.Hint)
		return exitConnection
	}
	printError(stderr, err.Error(), hintOf(err))
	if protocol.Lost(err) {
		return exitConnection
	}
	return exitFailed
}

func printError(w io.Writer, msg, hint string) {
	// The message names files and repeats what servers said: escaped.
	fmt.Fprintf(w, "hpncp: error: %s\n", vis.String(msg))
	if hint != "" {
		fmt.Fprintf(w, "hpncp: hint: %s\n", vis.String(hint))
	}
}

func hintOf(err error) string {
	var te *transfer.Error
	if errors.As(err, &te) {
		return te.Hint
	}
	return ""
}
