package transfer

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"0/1", Shard{0, 1}, true},
		{"2/3", Shard{2, 3}, true},
		{"3/3", Shard{}, false},
		{"-1/3", Shard{}, false},
		{"1/0", Shard{}, false},
		{"1", Shard{}, false},
		{"a/b", Shard{}, false},
		{"", Shard{}, false},
	}
	for _, tt := range tests {
		got, err := ParseShard(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// The hash is part of the interface: machines running different hpncp
// versions must split a migration the same way.
func TestShardStable(t *testing.T) {
	tests := []struct {
		rel  string
		n    int
		want int
	}{
		// FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c.
		{"a", 1000, int(uint64(0xaf63dc4c8601ec8c) % 1000)},
		{"a", 7, int(uint64(0xaf63dc4c8601ec8c) % 7)},
	}
	for _, tt := range tests {
		for i := range tt.n {
			if got := (Shard{i, tt.n}).Keep(tt.rel); got != (i == tt.want) {
				t.Errorf("Shard{%d, %d}.Keep(%q) = %v", i, tt.n, tt.rel, got)
			}
		}
	}
	if !(Shard{}).Keep("anything") {
		t.Error("the zero Shard must keep every file")
	}
}

// Separate runs of every shard into one target copy each file exactly
// once, and together the whole tree.
func TestShardsCoverOnce(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	var want []string
	for i := range 60 {
		rel := fmt.Sprintf("d%d/f%d", i%4, i)
		write(t, filepath.Join(src, rel), rel)
		want = append(want, "src/"+rel)
	}
	dst := filepath.Join(dir, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range 3 {
		o := Options{Recursive: true, Shard: Shard{i, 3}, Report: func(f FileReport) {
			if f.Status != StatusCopied {
				t.Errorf("shard %d: %+v", i, f)
			}
			rel, _ := filepath.Rel(dir, f.Path)
			seen[filepath.ToSlash(rel)]++
		}}
		res, err := copyLocal(t, o, src, dst)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("shard %d: %v %v", i, err, res.Errors)
		}
		if res.Files == 0 || res.Files == len(want) {
			t.Errorf("shard %d copied %d of %d files: the split is lopsided", i, res.Files, len(want))
		}
	}
	var got []string
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s copied %d times", p, n)
		}
		got = append(got, p)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("copied %q, want %q", got, want)
	}
	for _, p := range want {
		if b, err := os.ReadFile(filepath.Join(dst, p)); err != nil || string(b) != strings.TrimPrefix(p, "src/") {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
}

// A shard copies a directory only into an existing directory: shards run
// at once would otherwise split the tree between target and target/src,
// by whether another had made target yet. A file may take a new name.
func TestShardNeedsTargetDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src", "d", "f"), "f")
	write(t, filepath.Join(dir, "one"), "1")
	o := Options{Recursive: true, Shard: Shard{0, 2}}
	res, err := copyLocal(t, o, filepath.Join(dir, "src"), filepath.Join(dir, "new"))
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "a shard copies a directory only into an existing one") {
		t.Errorf("errors %v, %v: want the directory refused", err, res.Errors)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("the refused copy created its target")
	}
	for i := range 2 {
		o.Shard = Shard{i, 2}
		res, err := copyLocal(t, o, filepath.Join(dir, "one"), filepath.Join(dir, "renamed"))
		if err != nil || len(res.Errors) > 0 {
			t.Errorf("file to a new name, shard %d: %v %v", i, err, res.Errors)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "renamed")); err != nil || string(b) != "1" {
		t.Errorf("renamed: %q, %v", b, err)
	}
}
