package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// logTo returns a Logf that prints each line to w as "hpncp: ...",
// escaped (vis): the lines name files and repeat what servers said, and
// neither may reach the terminal raw.
func logTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "hpncp: %s\n", vis.String(fmt.Sprintf(format, args...)))
	}
}

// report is the --json report of a copy that ended with err (nil for
// success) at ended.
func (r *copyRecord) report(err error, ended time.Time) transfer.Report {
	rep := transfer.NewReport(r.files, r.res, r.elapsed)
	if r.legacy && r.res != nil {
		rep = legacyReport(rep, r.res)
	}
	bi, _ := debug.ReadBuildInfo()
	rep.HPNCP = strings.TrimPrefix(versionLine(version, commit, date, bi), "hpncp ")
	rep.Started, rep.Ended = transfer.ReportTime(r.started), transfer.ReportTime(ended)
	rep.ExitCode, rep.Error = runError(err)
	return rep
}

// runError is the exit code err ends hpncp with, and the error as the
// report gives it: the message and hint printed on stderr (exit.go's
// report), and the code's kind. Both are 0 and nil for success.
func runError(err error) (int, *transfer.RunError) {
	code := report(io.Discard, err)
	if code == exitOK {
		return code, nil
	}
	e := &transfer.RunError{Message: err.Error(), Hint: hintOf(err), Kind: exitKind(code)}
	var ue *usageError
	var ce *sshconn.Error
	switch {
	case errors.Is(err, context.Canceled):
		e.Message, e.Hint = "interrupted", ""
	case errors.As(err, &ue):
		e.Message, e.Hint = ue.msg, ue.hint
	case errors.As(err, &ce):
		e.Message, e.Hint = ce.Error(), ce.Hint
	}
	return code, e
}

// exitKind names what an exit code of a copy means, for scripts that
// read the report rather than $?.
func exitKind(code int) string {
	switch code {
	case exitUsage:
		return transfer.KindUsage
	case exitPartial:
		return transfer.KindPartial
	case exitInterrupted:
		return transfer.KindInterrupted
	case exitConnection:
		return transfer.KindConnection
	}
	return transfer.KindFailed
}

// writeReport prints rep on w as indented JSON.
func writeReport(w io.Writer, rep transfer.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write the JSON report: %w", err)
	}
	return nil
}
