package report

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/transfer"
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
		o := transfer.Options{Recursive: true, Shard: Shard{i, 3}, Report: func(f transfer.FileReport) {
			if f.Status != transfer.StatusCopied {
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
