package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/job"
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

// outcome is what an error ends hpncp with: the exit code, the error's
// message and hint (what stderr and the JSON report say of it), and
// whether stderr says nothing (quiet): a partial run reported each file
// as it failed, a remote command's status speaks for itself, a usage
// error without a message stands for a usage text already printed.
type outcome struct {
	code      int
	msg, hint string
	quiet     bool
}

// outcomeOf decides the outcome of a non-nil err, for report (stderr
// and the exit code) and for the JSON report alike.
func outcomeOf(err error) outcome {
	var ue *usageError
	var pe *partialError
	var re *job.RemoteExit
	var se *syncError
	switch {
	case errors.As(err, &se):
		// hpncp sync: rsync's exit codes.
		o := outcomeOf(se.err)
		o.code, o.quiet = se.code, se.quiet
		if se.hint != "" {
			o.hint = se.hint
		}
		if o.code == syncExitUsage && o.hint == "" {
			o.hint = syncHint
		}
		return o
	case errors.As(err, &re):
		// hpncp ssh: the remote command's status is ours, as with ssh.
		return outcome{code: re.ExitCode(), msg: err.Error(), hint: hintOf(err), quiet: true}
	case errors.Is(err, context.Canceled):
		return outcome{code: exitInterrupted, msg: "interrupted"}
	case errors.As(err, &ue):
		return outcome{code: exitUsage, msg: ue.msg, hint: ue.hint, quiet: ue.msg == ""}
	case errors.As(err, &pe):
		o := outcome{code: exitFailed, msg: err.Error(), hint: hintOf(err), quiet: true}
		switch {
		case pe.lost:
			// The files that failed may well copy on a re-run: what
			// failed is the connection, and the status says so, as
			// ssh's does.
			o.code = exitConnection
		case pe.done > 0:
			o.code = exitPartial
		}
		return o
	}
	if msg, hint, ok := job.ConnError(err); ok {
		return outcome{code: exitConnection, msg: msg, hint: hint}
	}
	o := outcome{code: exitFailed, msg: err.Error(), hint: hintOf(err)}
	if job.Lost(err) {
		o.code = exitConnection
	}
	return o
}

// reportError prints err as hpncp's error and hint lines and returns the exit
// code it maps to.
func reportError(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	o := outcomeOf(err)
	switch {
	case o.quiet:
	case o.code == exitInterrupted:
		fmt.Fprintln(stderr, "hpncp: interrupted")
	default:
		printError(stderr, o.msg, o.hint)
		if o.code == exitUsage && o.hint == "" {
			fmt.Fprintln(stderr, "hpncp: hint: run hpncp --help for usage")
		}
	}
	return o.code
}

func printError(w io.Writer, msg, hint string) {
	// The message names files and repeats what servers said: escaped.
	fmt.Fprintf(w, "hpncp: error: %s\n", vis.String(msg))
	if hint != "" {
		fmt.Fprintf(w, "hpncp: hint: %s\n", vis.String(hint))
	}
}

func hintOf(err error) string { return job.Hint(err) }
