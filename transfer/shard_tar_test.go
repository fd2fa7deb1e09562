//go:build linux

package transfer_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// The shards of a job started at once into a new tree, in tar mode, up
// and down: each writes its files into the one tree rather than building
// one of its own to rename into place (only the first could), and a
// directory another shard made a moment before is no error.
func TestShardsAtOnceTar(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	for i := range 120 {
		rel := fmt.Sprintf("d%d/e%d/f%d", i%3, i%4, i)
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, rel), []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const n = 4
	for _, up := range []bool{true, false} {
		t.Run(direction(up), func(t *testing.T) {
			s, streams := tarServer(t)
			// Each shard on connections of its own, as separate runs are.
			var copies []copyFunc
			for range n {
				copies = append(copies, sftpCopy(openSFTP(t, s), up, withTar))
			}
			dst := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, n)
			files := make([]int, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o := transfer.Options{Recursive: true, Shard: hashPart{i, n}}
					res, err := copies[i](ctx, []string{src}, dst, o)
					if res != nil {
						files[i] = res.Files
						err = errors.Join(append([]error{err}, res.Errors...)...)
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			total := 0
			for i, err := range errs {
				if err != nil {
					t.Errorf("shard %d/%d: %v", i, n, err)
				}
				total += files[i]
			}
			if total != 120 || streams.Load() < n {
				t.Errorf("the shards copied %d files with %d tar streams; want 120, at least %d", total, streams.Load(), n)
			}
			got, want := treeOf(t, filepath.Join(dst, "tree")), treeOf(t, src)
			if got != want {
				t.Errorf("target tree:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// treeOf lists a tree's files and their contents, one a line.
func treeOf(t *testing.T, root string) string {
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(&b, "%s %q\n", rel, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// hashPart is a transfer.Part that splits files by a hash of their names,
// as report.Shard does (report imports transfer, so this test cannot).
type hashPart struct{ i, n int }

func (p hashPart) Keep(rel string) bool {
	h := fnv.New32a()
	h.Write([]byte(rel))
	return int(h.Sum32()%uint32(p.n)) == p.i
}
func (p hashPart) Split() bool { return p.n > 1 }
