package transfer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testPart is a Part for the engine's tests: file rel is part i of n by
// its length. (report.Shard, the one hpncp uses, cannot be imported
// here: report imports transfer.)
type testPart struct{ i, n int }

func (p testPart) Keep(rel string) bool { return len(rel)%p.n == p.i }
func (p testPart) Split() bool          { return p.n > 1 }

// A shard copies a directory only into an existing directory: shards run
// at once would otherwise split the tree between target and target/src,
// by whether another had made target yet. A file may take a new name.
func TestShardNeedsTargetDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src", "d", "f"), "f")
	write(t, filepath.Join(dir, "one"), "1")
	o := Options{Recursive: true, Shard: testPart{0, 2}}
	res, err := copyLocal(t, o, filepath.Join(dir, "src"), filepath.Join(dir, "new"))
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "a shard copies a directory only into an existing one") {
		t.Errorf("errors %v, %v: want the directory refused", err, res.Errors)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("the refused copy created its target")
	}
	for i := range 2 {
		o.Shard = testPart{i, 2}
		res, err := copyLocal(t, o, filepath.Join(dir, "one"), filepath.Join(dir, "renamed"))
		if err != nil || len(res.Errors) > 0 {
			t.Errorf("file to a new name, shard %d: %v %v", i, err, res.Errors)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "renamed")); err != nil || string(b) != "1" {
		t.Errorf("renamed: %q, %v", b, err)
	}
}
