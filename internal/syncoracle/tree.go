package syncoracle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Tree is what a user would check of a directory tree: one line of
// attributes for each name, the root as ".". A missing root is the empty
// tree.
type Tree map[string]string

// sparseMin is the smallest file whose holes Snapshot records: smaller
// files are a block or two either way, whatever the copy did.
const sparseMin = 512 << 10

// Snapshot reads the tree at root. Times at or after fresh are recorded as
// "fresh": they are the run's "now", which two runs a second apart do not
// share, while every time the trees are built with is years older.
func Snapshot(root string, fresh time.Time) (Tree, error) {
	t := Tree{}
	type inode struct{ dev, ino uint64 }
	names := map[inode][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		var b strings.Builder
		switch {
		case fi.Mode().IsRegular():
			sum, err := fileSum(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "file size=%d sha256=%s", fi.Size(), sum)
			if fi.Size() >= sparseMin {
				fmt.Fprintf(&b, " holes=%t", st.Blocks*512 < fi.Size()/2)
			}
			if st.Nlink > 1 {
				id := inode{uint64(st.Dev), st.Ino}
				names[id] = append(names[id], rel)
			}
		case fi.IsDir():
			b.WriteString("dir")
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "symlink -> %q", target)
		default:
			fmt.Fprintf(&b, "special %v", fi.Mode().Type())
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			fmt.Fprintf(&b, " mode=%04o", st.Mode&0o7777)
		}
		fmt.Fprintf(&b, " owner=%d:%d", st.Uid, st.Gid)
		mtime := time.Unix(st.Mtim.Sec, 0)
		if !mtime.Before(fresh.Truncate(time.Second)) {
			b.WriteString(" mtime=fresh")
		} else {
			fmt.Fprintf(&b, " mtime=%s", mtime.UTC().Format(time.DateTime))
		}
		t[rel] = b.String()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, err)
	}
	// A hard-link group is named by its first member, so that the same
	// grouping in two trees reads the same whatever the inode numbers.
	for _, group := range names {
		if len(group) < 2 {
			continue // linked only to names outside the tree
		}
		slices.Sort(group)
		for _, n := range group {
			t[n] += " linked=" + group[0]
		}
	}
	return t, nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Diff lists how got differs from want, one line per name: "- name: …"
// only in want, "+ name: …" only in got, "~ name: want … / got …".
func Diff(want, got Tree) []string {
	var out []string
	for _, n := range unionKeys(want, got) {
		w, inW := want[n]
		g, inG := got[n]
		switch {
		case !inG:
			out = append(out, fmt.Sprintf("- %s: %s", n, w))
		case !inW:
			out = append(out, fmt.Sprintf("+ %s: %s", n, g))
		case w != g:
			out = append(out, fmt.Sprintf("~ %s: want %s / got %s", n, w, g))
		}
	}
	return out
}

func unionKeys(a, b Tree) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// DiffLines compares two outputs as multisets of lines, order aside:
// "- line" only in want, "+ line" only in got.
func DiffLines(want, got []string) []string {
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var out []string
	for _, l := range sortedKeys(count) {
		for i := count[l]; i > 0; i-- {
			out = append(out, "- "+l)
		}
		for i := count[l]; i < 0; i++ {
			out = append(out, "+ "+l)
		}
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
