package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// fileEntries returns the JSON text of each of a report's files, in
// order, as the report wrote them.
func fileEntries(t *testing.T, data []byte) []string {
	t.Helper()
	var raw struct{ Files []json.RawMessage }
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range raw.Files {
		out = append(out, string(f))
	}
	return out
}

// Names that are not UTF-8 are carried whole: two names that differ only
// in such bytes give two entries, and both read back byte for byte.
func TestReportNamesNotUTF8(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	names := []string{"a\xff", "a\xfe", `a\377`, "b\xc3"}
	for _, n := range names {
		write(t, filepath.Join(src, n), n)
	}
	dst := filepath.Join(dir, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []transfer.FileReport
	res, err := copyLocal(t, transfer.Options{Recursive: true, Report: func(f transfer.FileReport) { files = append(files, f) }}, src, dst)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("%v %v", err, res.Errors)
	}
	data, err := json.Marshal(New(files, res, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	entries := fileEntries(t, data)
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e] {
			t.Errorf("two files print the same: %s", e)
		}
		seen[e] = true
		if strings.Contains(e, "\ufffd") {
			t.Errorf("an entry lost bytes: %s", e)
		}
	}
	if len(entries) != len(names) {
		t.Fatalf("%d entries, want %d:\n%s", len(entries), len(names), data)
	}
	for _, want := range []string{`"path":"` + src + `/a\\377","bytes":2,`, `"path_b64":"`, `"target_b64":"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the report lacks %s:\n%s", want, data)
		}
	}
	r := checkReportSchema(t, data)
	got := map[string]string{}
	for _, f := range r.Files {
		got[f.Path] = f.Target
	}
	for _, n := range names {
		if target, ok := got[filepath.Join(src, n)]; !ok || target != filepath.Join(dst, "src", n) {
			t.Errorf("%q read back as %+v, target %q; report:\n%s", n, r.Files, target, data)
		}
	}
}

// The merge of two shards' reports keeps the two names apart and whole.
func TestMergeReportsNamesNotUTF8(t *testing.T) {
	var reports []Named
	for i, name := range []string{"src/a\xff", "src/a\xfe"} {
		r := New([]transfer.FileReport{{Path: name, Bytes: 1, Status: transfer.StatusCopied, Target: "h:" + name}}, nil, time.Second)
		r.Sources, r.Target, r.Shards = []string{"src"}, "h:", []string{Shard{i, 2}.String()}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, Named{"shard.json", checkReportSchema(t, data)})
	}
	m := mergeChecked(t, reports...)
	if len(m.Files) != 2 || m.Files[0].Path != "src/a\xfe" || m.Files[1].Path != "src/a\xff" ||
		m.Files[1].Target != "h:src/a\xff" {
		t.Fatalf("merged files %+v", m.Files)
	}
	data, _ := json.Marshal(m)
	if e := fileEntries(t, data); e[0] == e[1] {
		t.Errorf("two files print the same: %s", e[0])
	}
}

// The C1 control characters, which a terminal may read as ESC
// sequences, are escaped, as are DEL, C0's and U+2028/U+2029; other text
// stays as it is.
func TestReportEscapesC1(t *testing.T) {
	name := "c1 \u009b31m \u0085 \u009f \x1b[2J \u2028 \x7f é 名 <&>"
	r := New([]transfer.FileReport{{Path: name, Status: transfer.StatusFailed, Error: "open " + name + ": denied"}}, nil, time.Second)
	r.ExitCode, r.Error = 1, &RunError{Message: name, Kind: KindFailed}
	r.Planned = []PlannedChange{{Item: ">f+++++++++", Name: name, Line: ">f+++++++++ " + name}}
	// As hpncp's writeReport encodes it: <, > and & as they are.
	data, err := marshalText(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"\u009b", "\u0085", "\u009f", "\x1b", "\u2028", "\x7f"} {
		if bytes.Contains(data, []byte(c)) {
			t.Errorf("the report holds %q raw:\n%s", c, data)
		}
	}
	want := `c1 \u009b31m \u0085 \u009f \u001b[2J \u2028 \u007f é 名 <&>`
	if n := bytes.Count(data, []byte(want)); n != 5 {
		t.Errorf("%q found %d times, want 5 (path, error, message, name, line):\n%s", want, n, data)
	}
	back := checkReportSchema(t, data)
	if back.Files[0].Path != name || back.Planned[0].Name != name {
		t.Errorf("read back as %q and %q, want %q", back.Files[0].Path, back.Planned[0].Name, name)
	}
}

// Parse holds a _b64 field to what hpncp writes.
func TestParseReportNameB64(t *testing.T) {
	doc := func(entry string) []byte {
		return []byte(`{"version":1,"exit_code":0,"files":[` + entry + `],"totals":{"files":1,"copied":1,"skipped":0,"failed":0,"bytes":1,"seconds":1,"mb_per_s":0,"streams":0}}`)
	}
	r, err := Parse(doc(`{"path":"a\\377","bytes":1,"status":"copied","path_b64":"Yf8="}`))
	if err != nil || r.Files[0].Path != "a\xff" {
		t.Fatalf("path %q, err %v; want a\\xff", r.Files[0].Path, err)
	}
	for _, tc := range []struct{ entry, want string }{
		{`{"path":"a","bytes":1,"status":"copied","path_b64":"YQ=="}`, "path_b64 holds UTF-8 text"},
		{`{"path":"a","bytes":1,"status":"copied","path_b64":"Yf8="}`, `path "a" is not path_b64 escaped`},
		{`{"path":"a\\377","bytes":1,"status":"copied","path_b64":"!"}`, "path_b64: illegal base64"},
		{`{"path":"a","bytes":1,"status":"copied","target":"t","target_b64":"Yf8="}`, "target"},
		{`{"path":"a","bytes":1,"status":"copied","other":1}`, "unknown field"},
	} {
		if _, err := Parse(doc(tc.entry)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.entry, err, tc.want)
		}
	}
}

// The job's operands are names too: reports of two sources that differ
// only in bytes that are not UTF-8 are of two jobs, and merge refuses
// them.
func TestReportSourcesNotUTF8(t *testing.T) {
	var reports []Named
	for i, src := range []string{"src\xff", "src\xfe"} {
		r := New(nil, nil, time.Second)
		r.Sources, r.Target, r.Shards = []string{"ok", src}, "h:dst\xff", []string{Shard{i, 2}.String()}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back := checkReportSchema(t, data)
		if len(back.Sources) != 2 || back.Sources[1] != src || back.Target != "h:dst\xff" {
			t.Fatalf("sources %q, target %q read back from %s", back.Sources, back.Target, data)
		}
		reports = append(reports, Named{fmt.Sprintf("shard%d.json", i), back})
	}
	if _, err := Merge(reports); err == nil || !strings.Contains(err.Error(), "shard1.json") {
		t.Errorf("merge of two jobs: error %v, want shard1.json refused", err)
	}
}
