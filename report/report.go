// Package report is hpncp's --json report: the document a run prints at
// its end (Report, built by New from the files a transfer run told its
// Options.Report), read back strictly (Parse), the merge of the reports
// of one job's runs (Merge), and the split of a job into shards that
// separate runs copy at once (Shard).
package report

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// Version is the version of the JSON report's schema. It changes
// only when a field is removed or changes meaning; new fields may appear
// without a new version.
const Version = 1

// File is what happened to one file, as hpncp --json prints it: a
// transfer.FileReport, whose fields it has, with their JSON names.
type File struct {
	// Path is the source file as messages name it: "host:path" for a
	// remote one. Path and Target hold the names' bytes, UTF-8 or not;
	// JSON carries those that are not in path_b64 and target_b64
	// (json.go).
	Path string `json:"path"`
	// Bytes is the file bytes sent: its size when copied, 0 otherwise.
	Bytes  int64  `json:"bytes"`
	Status string `json:"status"`
	// Error is the failure's message when Status is "failed".
	Error string `json:"error,omitempty"`
	// SHA256 is the hex SHA-256 of the content, present when --verify or
	// --checksum hashed the file.
	SHA256 string `json:"sha256,omitempty"`
	// ResumedFrom is where a resumed file's copy started: the bytes before
	// it were written by an earlier run and not sent again (not in Bytes).
	ResumedFrom int64 `json:"resumed_from,omitempty"`
	// Target is where the file goes, named as Path is; absent when the
	// failure came before the target was known.
	Target string `json:"target,omitempty"`
	// Reason says why a skipped file was left alone: one of transfer's
	// Reason constants. Only skipped files have one.
	Reason string `json:"reason,omitempty"`
}

// Kinds of a run's error, one for each of hpncp's exit codes but 0.
const (
	KindFailed      = "failed"      // 1: nothing could be copied
	KindUsage       = "usage"       // 2: a command line hpncp cannot run
	KindPartial     = "partial"     // 3: some files were copied, others failed
	KindInterrupted = "interrupted" // 130: SIGINT or SIGTERM
	KindConnection  = "connection"  // 255: connection, host key or authentication
)

// RunError is why a run did not succeed, as hpncp printed it on stderr.
type RunError struct {
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// Kind is the exit code's kind: one of the Kind constants.
	Kind string `json:"kind"`
}

// Totals sum up a run.
type Totals struct {
	Files   int     `json:"files"` // entries in Files
	Copied  int     `json:"copied"`
	Skipped int     `json:"skipped"`
	Failed  int     `json:"failed"`
	Bytes   int64   `json:"bytes"` // file bytes sent
	Seconds float64 `json:"seconds"`
	MBPerS  float64 `json:"mb_per_s"` // Bytes / Seconds / 1e6
	Streams int     `json:"streams"`  // the most streams one file used
	// ResumedBytes sums the files' ResumedFrom: bytes not sent again.
	ResumedBytes int64 `json:"resumed_bytes,omitempty"`
}

// Report is the document hpncp --json prints on stdout at the end of a
// run.
type Report struct {
	Version int `json:"version"`
	// HPNCP is the version of hpncp that ran, as hpncp version prints it.
	HPNCP string `json:"hpncp,omitempty"`
	// ExitCode is hpncp's exit status; Error is there exactly when it is
	// not 0.
	ExitCode int       `json:"exit_code"`
	Error    *RunError `json:"error,omitempty"`
	// Started and Ended bound the whole run, connecting included, in
	// RFC 3339 (UTC, to the millisecond).
	Started string `json:"started,omitempty"`
	Ended   string `json:"ended,omitempty"`
	// Sources and Target are the run's operands as its command line gave
	// them: the job, which hpncp report merge checks its reports share.
	Sources []string `json:"sources,omitempty"`
	Target  string   `json:"target,omitempty"`
	// Shards are the shards of the job the report covers, as --shard
	// gives them ("1/4"): one for a --shard run, those of every run for
	// a merged report; absent when the run kept every file.
	Shards []string `json:"shards,omitempty"`
	Files  []File   `json:"files"`
	Totals Totals   `json:"totals"`
	// Planned are hpncp sync's changes as it planned them, each with its
	// itemized line; absent for a copy.
	Planned []PlannedChange `json:"planned,omitempty"`
}

// PlannedChange is one change hpncp sync planned: rsync's itemize code
// (empty for a change that itemizes as nothing, such as a message), the
// rsync name and the line -i prints.
type PlannedChange struct {
	Item string `json:"item,omitempty"`
	Name string `json:"name"`
	Line string `json:"line"`
}

// Time is t as a report's Started and Ended give it.
func Time(t time.Time) string { return t.UTC().Format(timeLayout) }

// timeLayout is RFC 3339 in UTC with milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// New sums up files, the entries a run's transfer.Options.Report
// received, with the streams of res and the run's duration. The entries
// are sorted by path: files are copied many at once and finish in no set
// order.
func New(files []transfer.FileReport, res *transfer.Result, elapsed time.Duration) Report {
	r := Report{Version: Version, Files: make([]File, len(files))}
	for i, f := range files {
		r.Files[i] = File(f)
	}
	slices.SortStableFunc(r.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range r.Files {
		switch f.Status {
		case transfer.StatusCopied:
			r.Totals.Copied++
		case transfer.StatusSkipped:
			r.Totals.Skipped++
		case transfer.StatusFailed:
			r.Totals.Failed++
		}
		r.Totals.Bytes += f.Bytes
		r.Totals.ResumedBytes += f.ResumedFrom
	}
	r.Totals.Files = len(r.Files)
	r.Totals.Seconds = elapsed.Seconds()
	if r.Totals.Seconds > 0 {
		r.Totals.MBPerS = float64(r.Totals.Bytes) / r.Totals.Seconds / 1e6
	}
	if res != nil {
		r.Totals.Streams = res.MaxStreams
	}
	return r
}

// Parse reads a --json report strictly, as its documentation
// promises it: no field unknown to this version, every required field
// present, statuses from the list, an error exactly on failed files, hex
// SHA-256s, and totals that add up. Scripts merging the reports of a
// sharded run can rely on it; the tests check hpncp's output with it.
func Parse(data []byte) (Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("report: %w", err)
	}
	if dec.More() {
		return r, errors.New("report: more than one JSON document")
	}
	var raw struct {
		Version *int             `json:"version"`
		Files   []map[string]any `json:"files"`
		Totals  map[string]any   `json:"totals"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return r, fmt.Errorf("report: %w", err)
	}
	if raw.Version == nil || *raw.Version != Version {
		return r, fmt.Errorf("report: version missing or not %d", Version)
	}
	if raw.Files == nil {
		return r, errors.New("report: files missing")
	}
	var errs []error
	for i, f := range raw.Files {
		for _, k := range []string{"path", "bytes", "status"} {
			if _, ok := f[k]; !ok {
				errs = append(errs, fmt.Errorf("files[%d] lacks %q", i, k))
			}
		}
		e := r.Files[i]
		switch e.Status {
		case transfer.StatusCopied, transfer.StatusSkipped, transfer.StatusFailed:
		default:
			errs = append(errs, fmt.Errorf("files[%d]: unknown status %q", i, e.Status))
		}
		if _, ok := f["error"]; ok != (e.Status == transfer.StatusFailed) {
			errs = append(errs, fmt.Errorf("files[%d]: error must be there exactly when the file failed", i))
		} else if ok && e.Error == "" {
			// hpncp never writes one, and it would not survive being
			// written again (the field is left out when empty).
			errs = append(errs, fmt.Errorf("files[%d]: a failed file's error is empty", i))
		}
		if b, err := hex.DecodeString(e.SHA256); e.SHA256 != "" && (err != nil || len(b) != 32) {
			errs = append(errs, fmt.Errorf("files[%d]: sha256 %q is not a hex SHA-256", i, e.SHA256))
		}
		// Skipped files of older reports, and of -O runs, have no reason.
		// The decoded value is checked as well as the key: encoding/json
		// takes "Reason" or "reAsOn" for reason too.
		if _, key := f["reason"]; key || e.Reason != "" {
			switch {
			case e.Reason == "":
				// hpncp never writes one (the field is left out when
				// empty).
				errs = append(errs, fmt.Errorf("files[%d]: an empty reason", i))
			case e.Status != transfer.StatusSkipped:
				errs = append(errs, fmt.Errorf("files[%d]: only a skipped file has a reason", i))
			case !slices.Contains(skipReasons, e.Reason):
				errs = append(errs, fmt.Errorf("files[%d]: unknown reason %q", i, e.Reason))
			}
		}
	}
	errs = append(errs, checkRun(r)...)
	for _, k := range []string{"files", "copied", "skipped", "failed", "bytes", "seconds", "mb_per_s", "streams"} {
		if _, ok := raw.Totals[k]; !ok {
			errs = append(errs, fmt.Errorf("totals lack %q", k))
		}
	}
	t := r.Totals
	var copied, skipped, failed int
	var sent, resumed int64
	for _, f := range r.Files {
		switch f.Status {
		case transfer.StatusCopied:
			copied++
		case transfer.StatusSkipped:
			skipped++
		case transfer.StatusFailed:
			failed++
		}
		sent += f.Bytes
		resumed += f.ResumedFrom
	}
	// The totals count every file; the entries may be fewer (with -O only
	// the failures are listed), never more.
	if t.Files != t.Copied+t.Skipped+t.Failed || t.Copied < copied || t.Skipped < skipped ||
		t.Failed < failed || t.Bytes < sent || t.ResumedBytes < resumed {
		errs = append(errs, fmt.Errorf("totals %+v do not add up with the %d files listed", t, len(r.Files)))
	}
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("report: %w", err)
	}
	return r, nil
}

var (
	skipReasons = []string{transfer.ReasonQuickCheck, transfer.ReasonChecksum, transfer.ReasonIgnoreExisting, transfer.ReasonResumeComplete, transfer.ReasonUnsafeLink}
	errorKinds  = []string{KindFailed, KindUsage, KindPartial, KindInterrupted, KindConnection}
)

// checkRun checks the fields about the run as a whole, all of which
// older reports lack: an error exactly when the exit code is not 0, of a
// known kind, and times in UTC that do not run backwards.
func checkRun(r Report) []error {
	var errs []error
	if r.ExitCode < 0 || r.ExitCode > 255 {
		errs = append(errs, fmt.Errorf("exit_code %d is not an exit status", r.ExitCode))
	}
	if e := r.Error; e == nil {
		if r.ExitCode != 0 {
			errs = append(errs, fmt.Errorf("exit_code %d without an error", r.ExitCode))
		}
	} else {
		if r.ExitCode == 0 {
			errs = append(errs, errors.New("an error with exit_code 0"))
		}
		if e.Message == "" {
			errs = append(errs, errors.New("the error has no message"))
		}
		if !slices.Contains(errorKinds, e.Kind) {
			errs = append(errs, fmt.Errorf("unknown error kind %q", e.Kind))
		}
	}
	var times [2]time.Time
	for i, v := range []struct{ name, s string }{{"started", r.Started}, {"ended", r.Ended}} {
		if v.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v.s)
		if err != nil || !strings.HasSuffix(v.s, "Z") {
			errs = append(errs, fmt.Errorf("%s %q is not an RFC 3339 time in UTC", v.name, v.s))
			continue
		}
		times[i] = t
	}
	if !times[0].IsZero() && !times[1].IsZero() && times[1].Before(times[0]) {
		errs = append(errs, fmt.Errorf("ended %s before started %s", r.Ended, r.Started))
	}
	if _, err := parseShards(r.Shards); err != nil {
		errs = append(errs, err)
	}
	return errs
}
