package syncoracle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The harness rests on Build making the same tree twice, and on Snapshot
// seeing each attribute a copy can get wrong.
func TestBuildTwiceSnapshotsEqual(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the corpus has entries owned by other users: needs root")
	}
	dir := t.TempDir()
	var trees []Tree
	for _, name := range []string{"one", "two"} {
		if err := Build(filepath.Join(dir, name), Source()); err != nil {
			t.Fatal(err)
		}
		tr, err := Snapshot(filepath.Join(dir, name), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		trees = append(trees, tr)
	}
	if d := Diff(trees[0], trees[1]); len(d) > 0 {
		t.Fatalf("two builds of the source differ:\n%s", strings.Join(d, "\n"))
	}
	want := map[string]string{
		".":                "dir mode=0755 owner=0:0 mtime=2015-06-07 08:09:10",
		"a/b/hard3":        "linked=a/b/hard3",
		"hard1":            "linked=a/b/hard3",
		"hl-y":             "linked=hl-x",
		"sparse.img":       "size=1048576 ",
		"a/secret":         "mode=0600 owner=1234:5678 mtime=2015-06-07 08:09:10",
		"rodir":            "dir mode=0555",
		"link owned":       `symlink -> "top.txt" owner=1234:5678 mtime=2001-02-03 04:05:06`,
		"self":             `symlink -> "."`,
		"empty2/nested":    "dir mode=0755 owner=0:0 mtime=2001-02-03 04:05:06",
		"-leading-dash":    "mtime=2020-01-01 00:00:00",
		"ünïcödé файл.txt": "file size=8",
	}
	for name, part := range want {
		if !strings.Contains(trees[0][name], part) {
			t.Errorf("%s: %q does not contain %q", name, trees[0][name], part)
		}
	}
	if !strings.Contains(trees[0]["sparse.img"], "holes=true") {
		t.Logf("sparse.img: %s: this file system keeps no holes", trees[0]["sparse.img"])
	}
}

func TestSnapshotSeesEachAttribute(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	base := []Entry{
		{Path: "f", Data: "x\n", Mtime: old},
		{Path: "g", Kind: Hardlink, Target: "f"},
		{Path: "l", Kind: Symlink, Target: "f", Mtime: old},
		{Path: "d", Kind: Dir, Mtime: old},
	}
	change := map[string]func(e []Entry) []Entry{
		"content": func(e []Entry) []Entry { e[0].Data = "y\n"; return e },
		"mode":    func(e []Entry) []Entry { e[0].Mode = 0o600; return e },
		"mtime":   func(e []Entry) []Entry { e[0].Mtime = mid; return e },
		"owner":   func(e []Entry) []Entry { e[0].UID = otherUID; return e },
		"group":   func(e []Entry) []Entry { e[0].GID = otherGID; return e },
		"link target": func(e []Entry) []Entry {
			e[2].Target = "g"
			return e
		},
		"link time":   func(e []Entry) []Entry { e[2].Mtime = mid; return e },
		"hard link":   func(e []Entry) []Entry { e[1] = Entry{Path: "g", Data: "x\n", Mtime: old}; return e },
		"type":        func(e []Entry) []Entry { e[3] = Entry{Path: "d", Mtime: old}; return e },
		"dir mode":    func(e []Entry) []Entry { e[3].Mode = 0o700; return e },
		"extra entry": func(e []Entry) []Entry { return append(e, Entry{Path: "d/new"}) },
	}
	dir := t.TempDir()
	if err := Build(filepath.Join(dir, "base"), base); err != nil {
		t.Fatal(err)
	}
	want, err := Snapshot(filepath.Join(dir, "base"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range change {
		root := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := Build(root, f(slices.Clone(base))); err != nil {
			t.Fatal(err)
		}
		got, err := Snapshot(root, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(Diff(want, got)) == 0 {
			t.Errorf("a tree with another %s reads the same as the base", name)
		}
	}
}

func TestSnapshotFreshTimes(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	if err := os.WriteFile(filepath.Join(dir, "now"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Build(filepath.Join(dir, "old"), []Entry{{Path: ".", Kind: Dir, Mtime: old}}); err != nil {
		t.Fatal(err)
	}
	tr, err := Snapshot(dir, start)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(tr["now"], "mtime=fresh") {
		t.Errorf("a file written after the start reads %q, not fresh", tr["now"])
	}
	if !strings.HasSuffix(tr["old"], "mtime=2001-02-03 04:05:06") {
		t.Errorf("a directory of 2001 reads %q", tr["old"])
	}
	missing, err := Snapshot(filepath.Join(dir, "missing"), start)
	if err != nil || len(missing) != 0 {
		t.Errorf("a missing root: %v, %v; want the empty tree", missing, err)
	}
}

func TestDiffLinesIgnoresOrderNotCount(t *testing.T) {
	want := []string{"a", "b", "b", "c"}
	if d := DiffLines(want, []string{"c", "b", "a", "b"}); len(d) > 0 {
		t.Errorf("reordered lines differ: %q", d)
	}
	got := DiffLines(want, []string{"a", "b", "c", "d"})
	if !slices.Equal(got, []string{"- b", "+ d"}) {
		t.Errorf("DiffLines = %q, want [- b + d]", got)
	}
}

func TestJudgeKnownDifferences(t *testing.T) {
	known := []knownDifference{
		{dir: "push", name: "-a SRC/ into none", expect: "owner=1234:5678", why: "owners not kept yet"},
		{dir: "*", name: "-r SRC/ into none", expect: "skipping non-regular", why: "no such line yet"},
	}
	report := "tree after the run:\n\t~ dst/owned/f: want … owner=1234:5678 / got … owner=0:0"
	for _, tc := range []struct {
		d        Direction
		name     string
		problems []string
		report   string
		fail     string // text of the error, "" for none
	}{
		{Push, "-a SRC/ into none", []string{"x"}, report, ""},
		{Pull, "-a SRC/ into none", []string{"x"}, report, "owner=1234:5678"},
		{Push, "-a SRC/ into none", nil, "", "matches rsync now"},
		{Push, "-a SRC/ into none", []string{"x"}, "exit status: want 0, got 1", "knownDifferences expects"},
		{Pull, "-r SRC/ into none", nil, "", "take it out of knownDifferences"},
		{Pull, "-rl SRC/ into none", nil, "", ""},
	} {
		err := judge(known, tc.d, tc.name, tc.problems, tc.report)
		switch {
		case tc.fail == "" && err != nil:
			t.Errorf("%s %s: %v, want no failure", tc.d, tc.name, err)
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%s %s: %v, want a failure saying %q", tc.d, tc.name, err, tc.fail)
		}
	}
}

// A starting state must read the same whenever it is built: no entry may
// keep the time of its building, and a missing DEST must stay missing.
func TestPrepareLeavesNoFreshTimes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the states have entries owned by other users: needs root")
	}
	src := filepath.Join(t.TempDir(), "src")
	for _, st := range []State{NoTarget, EmptyTarget, OlderCopy, Clashes} {
		for _, noSlash := range []bool{false, true} {
			c := Case{Target: st, NoSlash: noSlash}
			dir := t.TempDir()
			before := time.Now().Add(-time.Second)
			dst, err := prepare(c, src, dir)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := Snapshot(dir, before)
			if err != nil {
				t.Fatal(err)
			}
			for name, attrs := range tr {
				if strings.Contains(attrs, "mtime=fresh") {
					t.Errorf("%s (no slash %t): %s keeps the time it was built: %s", st.Name, noSlash, name, attrs)
				}
			}
			if _, err := os.Lstat(dst); st.Exists == os.IsNotExist(err) {
				t.Errorf("%s (no slash %t): DEST exists: %t, want %t", st.Name, noSlash, err == nil, st.Exists)
			}
		}
	}
}
