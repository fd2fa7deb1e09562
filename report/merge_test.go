package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// mergeChecked merges reports and checks that the result passes the
// schema, as it reads back from JSON.
func mergeChecked(t *testing.T, reports ...Named) Report {
	t.Helper()
	m, err := Merge(reports)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return checkReportSchema(t, data)
}

// The reports of four real shard runs merge into the report of the
// whole tree: every file once, copied.
func TestMergeShardRuns(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	var tree []string
	for i := range 80 {
		rel := fmt.Sprintf("d%d/e%d/f%d", i%3, i%5, i)
		write(t, filepath.Join(src, rel), rel)
		tree = append(tree, filepath.Join(src, rel))
	}
	dst := filepath.Join(dir, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var reports []Named
	for i := range 4 {
		var files []transfer.FileReport
		shard := Shard{i, 4}
		o := transfer.Options{Recursive: true, Shard: shard, Report: func(f transfer.FileReport) { files = append(files, f) }}
		res, err := copyLocal(t, o, src, dst)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("shard %d: %v %v", i, err, res.Errors)
		}
		r := New(files, res, time.Second)
		r.HPNCP, r.Sources, r.Target, r.Shards = "1.0", []string{"src"}, "h:dst", []string{shard.String()}
		// All four at once, ending a tenth of a second apart.
		r.Started = Time(start)
		r.Ended = Time(start.Add(time.Second + time.Duration(i)*100*time.Millisecond))
		reports = append(reports, Named{fmt.Sprintf("shard%d.json", i), r})
	}
	m := mergeChecked(t, reports...)
	var got []string
	for _, f := range m.Files {
		if f.Status != transfer.StatusCopied {
			t.Errorf("%+v: want copied", f)
		}
		got = append(got, f.Path)
	}
	slices.Sort(tree)
	if !slices.Equal(got, tree) {
		t.Errorf("merged files %q\nwant the tree %q", got, tree)
	}
	if m.Totals.Files != len(tree) || m.Totals.Copied != len(tree) || m.ExitCode != 0 || m.Error != nil {
		t.Errorf("merged totals %+v, exit code %d: want %d files copied, 0", m.Totals, m.ExitCode, len(tree))
	}
	if want := []string{"0/4", "1/4", "2/4", "3/4"}; !slices.Equal(m.Shards, want) || len(MissingShards(m)) > 0 {
		t.Errorf("shards %q, missing %q: want %q, none", m.Shards, MissingShards(m), want)
	}
	if m.Started != Time(start) || m.Ended != Time(start.Add(1300*time.Millisecond)) {
		t.Errorf("started %s, ended %s: want the earliest and the latest", m.Started, m.Ended)
	}
	// Copying from 12:00:00 (the first to start copying ended at 1 s
	// after a second's copy) to 12:00:01.3.
	if m.Totals.Seconds != 1.3 || m.Sources[0] != "src" || m.Target != "h:dst" || m.HPNCP != "1.0" {
		t.Errorf("merged %+v: want 1.3 s of copying and the runs' job and version", m)
	}

	// The shards a merge lacks are named.
	part := mergeChecked(t, reports[0], reports[1], reports[3])
	if got := MissingShards(part); !slices.Equal(got, []string{"2/4"}) {
		t.Errorf("missing %q, want 2/4", got)
	}
	// A merged report merges again.
	again := mergeChecked(t, Named{"part.json", part}, reports[2])
	if again.Totals != m.Totals || len(MissingShards(again)) > 0 {
		t.Errorf("merged in two steps %+v, want %+v", again.Totals, m.Totals)
	}
}

// testReport is a report of a run of job "a" to "h:x" that started at
// second sec of a day, with the files given as "path status".
func testReport(sec int, shard string, code int, files ...string) Report {
	var list []transfer.FileReport
	for _, f := range files {
		path, status, _ := strings.Cut(f, " ")
		e := transfer.FileReport{Path: path, Status: status, Target: "h:x/" + path}
		switch status {
		case transfer.StatusFailed:
			e.Error = "read " + path + ": permission denied"
		case transfer.StatusCopied:
			e.Bytes = 10
		}
		list = append(list, e)
	}
	r := New(list, &transfer.Result{MaxStreams: 1}, time.Second)
	start := time.Date(2026, 12, 1, 0, 0, sec, 0, time.UTC)
	r.Started, r.Ended = Time(start), Time(start.Add(time.Second))
	r.Sources, r.Target = []string{"a"}, "h:x"
	if shard != "" {
		r.Shards = []string{shard}
	}
	if code != 0 {
		kinds := map[int]string{1: KindFailed, 2: KindUsage, 3: KindPartial, 130: KindInterrupted, 255: KindConnection}
		r.ExitCode, r.Error = code, &RunError{Message: fmt.Sprintf("failed %d", code), Kind: kinds[code], Hint: fmt.Sprintf("hint %d", code)}
	}
	return r
}

func TestMergeExitCode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codes []int // of shards 0/n, 1/n, ...
		files [][]string
		want  int
		kind  string
		msg   string
	}{
		{"all ok", []int{0, 0}, nil, 0, "", ""},
		{"one partial", []int{0, 3}, [][]string{{"a copied"}, {"b copied", "c failed"}}, 3, KindPartial, "shard 1/2: failed 3"},
		// One shard could copy nothing, the other did: the job is partial.
		{"failed beside copied", []int{0, 1}, [][]string{{"a copied"}, {"c failed"}}, 3, KindPartial, "shard 1/2: failed 1"},
		{"failed beside skipped", []int{1, 0}, [][]string{{"c failed"}, {"a skipped"}}, 3, KindPartial, "shard 0/2: failed 1"},
		{"failed alone", []int{1, 1}, [][]string{{"c failed"}, {"d failed"}}, 1, KindFailed, "shard 0/2: failed 1; shard 1/2: failed 1"},
		{"connection over partial", []int{3, 255}, nil, 255, KindConnection, "shard 0/2: failed 3; shard 1/2: failed 255"},
		{"interrupted over connection", []int{130, 255, 0}, nil, 130, KindInterrupted, "shard 0/3: failed 130; shard 1/3: failed 255"},
		{"usage over all", []int{130, 2, 255}, nil, 2, KindUsage, "shard 0/3: failed 130; shard 1/3: failed 2; shard 2/3: failed 255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reports []Named
			n := len(tc.codes)
			for i, code := range tc.codes {
				var files []string
				if i < len(tc.files) {
					files = tc.files[i]
				}
				r := testReport(i, fmt.Sprintf("%d/%d", i, n), code, files...)
				reports = append(reports, Named{fmt.Sprint(i), r})
			}
			m := mergeChecked(t, reports...)
			if m.ExitCode != tc.want {
				t.Errorf("exit code %d, want %d", m.ExitCode, tc.want)
			}
			if tc.want == 0 {
				return
			}
			if m.Error.Kind != tc.kind || m.Error.Message != tc.msg {
				t.Errorf("error %+v, want kind %q, message %q", m.Error, tc.kind, tc.msg)
			}
			if want := fmt.Sprintf("hint %d", tc.want); tc.kind != KindPartial && m.Error.Hint != want {
				t.Errorf("hint %q, want the worst run's, %q", m.Error.Hint, want)
			}
		})
	}
}

// A re-run of a shard says what its files are now: its entries and its
// exit code replace those of the run it repeats.
func TestMergeRerun(t *testing.T) {
	first := testReport(0, "0/2", 3, "a copied", "b failed")
	other := testReport(1, "1/2", 0, "c copied")
	rerun := testReport(60, "0/2", 0, "a skipped", "b copied")
	// Given in any order, the later run wins.
	m := mergeChecked(t, Named{"rerun", rerun}, Named{"first", first}, Named{"other", other})
	if m.ExitCode != 0 || m.Error != nil {
		t.Errorf("exit code %d, %+v: the re-run succeeded", m.ExitCode, m.Error)
	}
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Path+" "+f.Status)
	}
	if want := []string{"a skipped", "b copied", "c copied"}; !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
	want := Totals{Files: 3, Copied: 2, Skipped: 1, Bytes: 30, Seconds: 3, MBPerS: 30 / 3.0 / 1e6, Streams: 1}
	if m.Totals != want {
		t.Errorf("totals %+v, want %+v (every byte sent counts)", m.Totals, want)
	}

	// A report of an older hpncp, without times, counts as earlier than
	// one with them, wherever it is on the command line.
	old := testReport(0, "0/2", 3, "b failed")
	old.Started, old.Ended = "", ""
	m = mergeChecked(t, Named{"rerun", rerun}, Named{"old", old})
	if m.ExitCode != 0 || len(m.Files) != 2 || m.Files[1].Status != transfer.StatusCopied {
		t.Errorf("merged %+v: want the timed re-run to win", m)
	}

	// A re-run that failed where the first run had copied: the file's
	// state is the failure's, not the older success.
	worse := testReport(60, "0/2", 3, "a failed")
	m = mergeChecked(t, Named{"first", testReport(0, "0/2", 0, "a copied")}, Named{"worse", worse})
	if m.ExitCode != 3 || len(m.Files) != 1 || m.Files[0].Status != transfer.StatusFailed || m.Totals.Copied != 0 {
		t.Errorf("merged %+v: want a failed, exit code 3", m)
	}
}

func TestMergeRefuses(t *testing.T) {
	other := testReport(1, "1/2", 0, "b copied")
	other.Target = "h:y"
	sources := testReport(1, "1/2", 0, "b copied")
	sources.Sources = []string{"a", "b"}
	overlap := testReport(1, "1/2", 0, "a skipped")
	for _, tc := range []struct {
		name string
		r    Report
		want string
	}{
		{"target", other, "merge reports second: a run of another job than first's: a to h:y, not a to h:x"},
		{"sources", sources, "merge reports second: a run of another job than first's: a b to h:x, not a to h:x"},
		{"split", testReport(1, "1/3", 0), "merge reports second: shard 1/3 is of another split than first's shard 0/2"},
		{"overlap", overlap, "merge reports second: a is listed copied by shard 0/2 (first) and skipped by shard 1/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Merge([]Named{{"first", testReport(0, "0/2", 0, "a copied")}, {"second", tc.r}})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v\nwant %s", err, tc.want)
			}
		})
	}
	if _, err := Merge(nil); err == nil {
		t.Error("merged no report")
	}

	// Reports that do not record their job (older versions) merge, and
	// so do failures of one path in two shards: each shard creates the
	// directories.
	a, b := testReport(0, "0/2", 1, "d failed"), testReport(0, "1/2", 1, "d failed")
	a.Sources, a.Target, b.Sources, b.Target = nil, "", nil, ""
	if m := mergeChecked(t, Named{"a", a}, Named{"b", b}); len(m.Files) != 1 || m.Totals.Failed != 1 {
		t.Errorf("merged %+v: want d failed once", m)
	}
}

func TestParseReportShards(t *testing.T) {
	for _, tc := range []struct {
		shards []string
		ok     bool
	}{
		{[]string{"0/4", "2/4"}, true},
		{[]string{"4/4"}, false},
		{[]string{"01/4"}, false},
		{[]string{"0/4", "1/3"}, false},
		{[]string{"1/4", "1/4"}, false},
		{[]string{"one"}, false},
	} {
		r := New(nil, nil, 0)
		r.Shards = tc.shards
		data, _ := json.Marshal(r)
		if _, err := Parse(data); (err == nil) != tc.ok {
			t.Errorf("shards %q: %v, want ok %v", tc.shards, err, tc.ok)
		}
	}
}

// hpncp sync's planned changes are kept, every run's.
func TestMergePlanned(t *testing.T) {
	a, b := testReport(0, "", 0, "a copied"), testReport(5, "", 0, "b copied")
	a.Planned = []PlannedChange{{Item: ">f+++++++++", Name: "a", Line: ">f+++++++++ a"}}
	b.Planned = []PlannedChange{{Item: ">f+++++++++", Name: "b", Line: ">f+++++++++ b"}}
	m := mergeChecked(t, Named{"b", b}, Named{"a", a})
	if len(m.Planned) != 2 || m.Planned[0].Name != "a" || m.Planned[1].Name != "b" {
		t.Errorf("planned %+v: want a's, then b's", m.Planned)
	}
}
