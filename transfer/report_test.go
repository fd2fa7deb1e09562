package transfer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// checkReportSchema decodes a --json report strictly: unknown fields are
// an error, and so are missing required ones.
func checkReportSchema(t *testing.T, data []byte) Report {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("report does not match the schema: %v\n%s", err, data)
	}
	var raw struct {
		Version *int             `json:"version"`
		Files   []map[string]any `json:"files"`
		Totals  map[string]any   `json:"totals"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Version == nil || *raw.Version != ReportVersion || raw.Files == nil {
		t.Fatalf("report lacks version %d or files: %s", ReportVersion, data)
	}
	for _, f := range raw.Files {
		for _, k := range []string{"path", "bytes", "status"} {
			if _, ok := f[k]; !ok {
				t.Errorf("file entry %v lacks %q", f, k)
			}
		}
		switch f["status"] {
		case StatusCopied, StatusSkipped, StatusFailed:
		default:
			t.Errorf("file entry %v: unknown status", f)
		}
		if _, ok := f["error"]; ok != (f["status"] == StatusFailed) {
			t.Errorf("file entry %v: error must be there exactly when it failed", f)
		}
	}
	for _, k := range []string{"files", "copied", "skipped", "failed", "bytes", "seconds", "mb_per_s", "streams"} {
		if _, ok := raw.Totals[k]; !ok {
			t.Errorf("totals lack %q: %v", k, raw.Totals)
		}
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
	var files []FileReport
	o := Options{Recursive: true, Skip: SkipQuick, Verify: true, Report: func(f FileReport) { files = append(files, f) }}
	res, err := copyLocal(t, o, src, filepath.Join(dir, "missing"), dst)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(NewReport(files, res, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := checkReportSchema(t, data)
	want := Totals{Files: 3, Copied: 1, Skipped: 1, Failed: 1, Bytes: 4, Seconds: 2, MBPerS: 4 / 2.0 / 1e6, Streams: 1}
	if r.Totals != want {
		t.Errorf("totals = %+v, want %+v", r.Totals, want)
	}
	// Sorted by path: dir/missing, dir/src/a, dir/src/b.
	if r.Files[1].Status != StatusCopied || r.Files[1].SHA256 == "" || filepath.Base(r.Files[1].Path) != "a" {
		t.Errorf("second entry %+v: want a, copied with its sha256", r.Files[1])
	}
	if r.Files[0].Status != StatusFailed || r.Files[2].Status != StatusSkipped {
		t.Errorf("entries %+v: want missing failed first, b skipped last", r.Files)
	}
}

func TestReportEmpty(t *testing.T) {
	data, err := json.Marshal(NewReport(nil, &Result{}, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := checkReportSchema(t, data)
	if len(r.Files) != 0 || r.Totals.MBPerS != 0 {
		t.Errorf("empty run: %s", data)
	}
}
