package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/report"
)

// logTo returns a Logf that prints each line to w as "hpncp: ...",
// escaped (vis): the lines name files and repeat what servers said, and
// neither may reach the terminal raw.
func logTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		line := fmt.Sprintf("hpncp: %s\n", vis.String(fmt.Sprintf(format, args...)))
		logMu.Lock()
		defer logMu.Unlock()
		io.WriteString(w, line)
	}
}

// logMu has the -v lines written one at a time, whole: the connections,
// the engine and a sync's plan (its helper's walk and sums) log from
// goroutines of their own.
var logMu sync.Mutex

// warnTo returns a Warnf that prints each warning to w as it is worded,
// ssh's way, escaped but for its line breaks: a warning may name a host
// or a key as the server or the config gave them.
func warnTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		line := vis.Text(fmt.Sprintf(format, args...)) + "\n"
		logMu.Lock()
		defer logMu.Unlock()
		io.WriteString(w, line)
	}
}

// report is the --json report of a copy that ended with err (nil for
// success) at ended.
func (r *copyRecord) report(err error, ended time.Time) report.Report {
	rep := report.New(r.files, r.res, r.elapsed)
	if r.legacy && r.res != nil {
		rep = legacyReport(rep, r.res)
	}
	bi, _ := debug.ReadBuildInfo()
	rep.HPNCP = strings.TrimPrefix(versionLine(version, commit, date, bi), "hpncp ")
	rep.Started, rep.Ended = report.Time(r.started), report.Time(ended)
	rep.ExitCode, rep.Error = runError(err)
	if n := len(r.operands); n >= 2 {
		rep.Sources, rep.Target = r.operands[:n-1], r.operands[n-1]
	}
	if r.shard.Count > 0 {
		rep.Shards = []string{r.shard.String()}
	}
	return rep
}

// runError is the exit code err ends hpncp with, and the error as the
// report gives it: the message and hint stderr says (outcomeOf), and the
// code's kind. Both are 0 and nil for success.
func runError(err error) (int, *report.RunError) {
	if err == nil {
		return exitOK, nil
	}
	o := outcomeOf(err)
	if o.code == exitOK {
		return o.code, nil
	}
	return o.code, &report.RunError{Message: o.msg, Hint: o.hint, Kind: exitKind(o.code)}
}

// exitKind names what an exit code of a copy means, for scripts that
// read the report rather than $?.
func exitKind(code int) string {
	switch code {
	case exitUsage:
		return report.KindUsage
	case exitPartial:
		return report.KindPartial
	case exitInterrupted:
		return report.KindInterrupted
	case exitConnection:
		return report.KindConnection
	}
	return report.KindFailed
}

// writeReport prints rep on w as indented JSON.
func writeReport(w io.Writer, rep report.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Names and itemized lines stay readable: <, > and & as they are.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write the JSON report: %w", err)
	}
	return nil
}
