package transfer

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadFileList(t *testing.T) {
	tests := []struct {
		name, in string
		nul      bool
		want     []string
		wantErr  string
	}{
		{"lines", "a\nsub/b\n\n./c//d\r\n", false, []string{"a", "sub/b", "c/d"}, ""},
		{"no final newline", "a\nb", false, []string{"a", "b"}, ""},
		{"nul", "a\x00with\nnewline\x00\x00b", true, []string{"a", "with\nnewline", "b"}, ""},
		{"absolute", "a\n/etc/passwd\n", false, nil, "entry 2"},
		{"climbs out", "x/../../y\n", false, nil, "below the source"},
		{"dot", ".\n", false, nil, "below the source"},
		{"empty", "\n\n", false, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadFileList(strings.NewReader(tt.in), tt.nul)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCopyFilesFrom(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	for _, f := range []string{"a", "sub/b", "sub/deeper/c", "sub/not-listed", "tree/x", "tree/y/z"} {
		write(t, filepath.Join(src, f), f)
	}
	dst := filepath.Join(dir, "new", "dst")
	if err := os.Mkdir(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	var reports []FileReport
	o := Options{Recursive: true, FilesFrom: []string{"a", "sub/deeper/c", "missing", "tree"},
		Report: func(f FileReport) { reports = append(reports, f) }}
	res, err := copyLocal(t, o, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a:a", "sub/", "sub/deeper/", "sub/deeper/c:sub/deeper/c", "tree/", "tree/x:tree/x", "tree/y/", "tree/y/z:tree/y/z"}
	if got := tree(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("target tree %q, want %q", got, want)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "missing") {
		t.Errorf("errors = %v, want the missing entry", res.Errors)
	}
	failed := 0
	for _, r := range reports {
		if r.Status == StatusFailed {
			failed++
		}
	}
	if len(reports) != 5 || failed != 1 {
		t.Errorf("reports = %+v, want 4 copied and 1 failed", reports)
	}

	// With two sources the list has no root to be relative to.
	if _, err := copyLocal(t, Options{FilesFrom: []string{"a"}}, src, src, dst); err == nil {
		t.Error("two sources with a file list: no error")
	}
	// A file as the source, likewise.
	if _, err := copyLocal(t, Options{FilesFrom: []string{"a"}}, filepath.Join(src, "a"), dst); err == nil {
		t.Error("a file as the list's source: no error")
	}
}

func TestCopyFilesFromShards(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	var list []string
	for i := range 30 {
		rel := fmt.Sprintf("d%d/f%d", i%3, i)
		write(t, filepath.Join(src, rel), rel)
		list = append(list, rel)
	}
	dst := filepath.Join(dir, "dst")
	total := 0
	for i := range 2 {
		res, err := copyLocal(t, Options{FilesFrom: list, Shard: testPart{i, 2}}, src, dst)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("shard %d: %v %v", i, err, res.Errors)
		}
		total += res.Files
	}
	if total != len(list) {
		t.Errorf("the shards copied %d files, want %d", total, len(list))
	}
	if got := tree(t, dst); len(got) != len(list)+3 {
		t.Errorf("target has %d entries, want %d files and 3 directories", len(got), len(list))
	}
}
