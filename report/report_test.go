package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// checkReportSchema decodes a --json report with Parse.
func checkReportSchema(t *testing.T, data []byte) Report {
	t.Helper()
	r, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return r
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	write(t, filepath.Join(src, "a"), "aaaa")
	write(t, filepath.Join(src, "b"), "bb")
	dst := filepath.Join(dir, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	// b is there already, with the source's time: skipped.
	write(t, filepath.Join(dst, "src", "b"), "bb")
	fi, _ := os.Stat(filepath.Join(src, "b"))
	if err := os.Chtimes(filepath.Join(dst, "src", "b"), fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	var files []transfer.FileReport
	o := transfer.Options{Recursive: true, Skip: transfer.SkipQuick, Verify: true, Report: func(f transfer.FileReport) { files = append(files, f) }}
	res, err := copyLocal(t, o, src, filepath.Join(dir, "missing"), dst)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(New(files, res, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := checkReportSchema(t, data)
	want := Totals{Files: 3, Copied: 1, Skipped: 1, Failed: 1, Bytes: 4, Seconds: 2, MBPerS: 4 / 2.0 / 1e6, Streams: 1}
	if r.Totals != want {
		t.Errorf("totals = %+v, want %+v", r.Totals, want)
	}
	// Sorted by path: dir/missing, dir/src/a, dir/src/b.
	if r.Files[1].Status != transfer.StatusCopied || r.Files[1].SHA256 == "" || filepath.Base(r.Files[1].Path) != "a" {
		t.Errorf("second entry %+v: want a, copied with its sha256", r.Files[1])
	}
	if r.Files[0].Status != transfer.StatusFailed || r.Files[2].Status != transfer.StatusSkipped {
		t.Errorf("entries %+v: want missing failed first, b skipped last", r.Files)
	}
	if got, want := r.Files[1].Target, filepath.Join(dst, "src", "a"); got != want {
		t.Errorf("a's target = %q, want %q", got, want)
	}
	if b := r.Files[2]; b.Reason != transfer.ReasonQuickCheck || b.Target != filepath.Join(dst, "src", "b") {
		t.Errorf("b: reason %q, target %q; want %q and its target", b.Reason, b.Target, transfer.ReasonQuickCheck)
	}
}

// A report with the run's fields, as a run that failed to connect
// prints it, reads back as it was written.
func TestReportRun(t *testing.T) {
	start := time.Date(2026, 12, 1, 13, 0, 0, 5e6, time.FixedZone("CET", 3600))
	rep := New(nil, nil, 0)
	rep.HPNCP, rep.ExitCode = "1.2.3", 255
	rep.Started, rep.Ended = Time(start), Time(start.Add(1500*time.Millisecond))
	rep.Error = &RunError{Message: "connect to 127.0.0.1:1: connection refused", Kind: KindConnection}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	r := checkReportSchema(t, data)
	if r.Started != "2026-12-01T12:00:00.005Z" || r.Ended != "2026-12-01T12:00:01.505Z" {
		t.Errorf("times %s, %s: want UTC with milliseconds", r.Started, r.Ended)
	}
	if r.ExitCode != 255 || r.Error == nil || *r.Error != *rep.Error || r.HPNCP != "1.2.3" {
		t.Errorf("read back %+v, want %+v", r, rep)
	}
}

func TestReportEmpty(t *testing.T) {
	data, err := json.Marshal(New(nil, &transfer.Result{}, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := checkReportSchema(t, data)
	if len(r.Files) != 0 || r.Totals.MBPerS != 0 {
		t.Errorf("empty run: %s", data)
	}
}

func TestParseReportRejects(t *testing.T) {
	good := `{"version":1,"hpncp":"1.0","exit_code":3,"error":{"message":"1 failed","kind":"partial"},` +
		`"started":"2026-12-01T12:00:00Z","ended":"2026-12-01T12:00:01.5Z",` +
		`"files":[{"path":"a","bytes":4,"status":"copied","sha256":"` +
		strings.Repeat("ab", 32) + `","target":"h:a"},{"path":"b","bytes":0,"status":"failed","error":"gone"},` +
		`{"path":"c","bytes":0,"status":"skipped","target":"h:c","reason":"quick-check"}],` +
		`"totals":{"files":3,"copied":1,"skipped":1,"failed":1,"bytes":4,"seconds":1,"mb_per_s":0.000004,"streams":1}}`
	// Reports written before the run's fields, targets and reasons are
	// still read.
	old := `{"version":1,"files":[{"path":"a","bytes":4,"status":"copied"},{"path":"c","bytes":0,"status":"skipped"}],` +
		`"totals":{"files":2,"copied":1,"skipped":1,"failed":0,"bytes":4,"seconds":1,"mb_per_s":0.000004,"streams":1}}`
	if _, err := Parse([]byte(old)); err != nil {
		t.Fatalf("a report of an earlier hpncp: %v", err)
	}
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("a valid report: %v", err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"unknown field", `"streams":1}`, `"streams":1,"extra":0}`},
		{"version", `"version":1`, `"version":2`},
		{"no status", `"status":"copied",`, ``},
		{"unknown status", `"status":"copied"`, `"status":"done"`},
		{"error on a copied file", `"status":"copied"`, `"status":"copied","error":"x"`},
		{"no error on a failed file", `,"error":"gone"`, ``},
		{"empty error on a failed file", `"error":"gone"`, `"error":""`},
		{"null error on a failed file", `"error":"gone"`, `"error":null`},
		{"short sha256", strings.Repeat("ab", 32), "abcd"},
		{"totals off", `"copied":1,`, `"copied":2,`},
		{"bytes below the files'", `"bytes":4,"seconds"`, `"bytes":3,"seconds"`},
		{"files not the sum", `"totals":{"files":3`, `"totals":{"files":4`},
		{"unknown reason", `"reason":"quick-check"`, `"reason":"felt like it"`},
		{"empty reason", `"reason":"quick-check"`, `"reason":""`},
		{"reason on a copied file", `"target":"h:a"`, `"target":"h:a","reason":"checksum"`},
		{"error with exit code 0", `"exit_code":3`, `"exit_code":0`},
		{"exit code without an error", `"error":{"message":"1 failed","kind":"partial"},`, ``},
		{"exit code out of range", `"exit_code":3`, `"exit_code":256`},
		{"error without a message", `"message":"1 failed",`, ``},
		{"unknown error kind", `"kind":"partial"`, `"kind":"bad luck"`},
		{"unknown error field", `"kind":"partial"`, `"kind":"partial","code":3`},
		{"time not RFC 3339", `"started":"2026-12-01T12:00:00Z"`, `"started":"1 Dec 2026 12:00"`},
		{"time not UTC", `"started":"2026-12-01T12:00:00Z"`, `"started":"2026-12-01T13:00:00+01:00"`},
		{"ended before started", `"ended":"2026-12-01T12:00:01.5Z"`, `"ended":"2026-12-01T11:59:59Z"`},
		{"totals field missing", `"mb_per_s":0.000004,`, ``},
		{"two documents", `"streams":1}}`, `"streams":1}}{}`},
	} {
		bad := strings.Replace(good, tc.old, tc.new, 1)
		if bad == good {
			t.Fatalf("%s: the replacement changed nothing", tc.name)
		}
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted %s", tc.name, bad)
		}
	}
}

func TestReportSumsResumedBytes(t *testing.T) {
	files := []transfer.FileReport{
		{Path: "a", Bytes: 100, Status: transfer.StatusCopied, ResumedFrom: 900},
		{Path: "b", Bytes: 50, Status: transfer.StatusCopied},
		{Path: "c", Status: transfer.StatusSkipped},
	}
	r := New(files, &transfer.Result{}, time.Second)
	if r.Totals.Bytes != 150 || r.Totals.ResumedBytes != 900 {
		t.Errorf("totals: bytes %d, resumed %d; want 150 and 900", r.Totals.Bytes, r.Totals.ResumedBytes)
	}
	b, err := json.Marshal(New(files[1:], &transfer.Result{}, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "resumed") {
		t.Errorf("a run that resumed nothing reports resumed fields: %s", b)
	}
}
