package transfer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/pipeline"
)

// sizeInfo is the FileInfo of a listed regular file of a given size.
type sizeInfo struct {
	name string
	size int64
}

func (i sizeInfo) Name() string       { return i.name }
func (i sizeInfo) Size() int64        { return i.size }
func (i sizeInfo) Mode() fs.FileMode  { return 0o640 }
func (i sizeInfo) ModTime() time.Time { return time.Unix(1e9, 0) }
func (i sizeInfo) IsDir() bool        { return false }
func (i sizeInfo) Sys() any           { return nil }

// fileNode returns the node of a file of a plan, read from src and copied
// to dst, in a directory node of its own.
func fileNode(rel string, src, dst Endpoint, info fs.FileInfo) *tarNode {
	dirOf := func(e Endpoint) Endpoint {
		if e.FS == nil {
			return e
		}
		return Endpoint{e.FS, e.FS.Dir(e.Path)}
	}
	dir := newTarDir(path.Dir(rel), dirOf(src), dirOf(dst), nil)
	return &tarNode{rel: rel, info: info, parent: dir}
}

// downRun is the tarRun of a download into dir.
func downRun(dir string) *tarRun {
	return &tarRun{root: newTarDir("", Endpoint{FS: Local{}}, local(dir), nil)}
}

// askedFile is a file a download asks for: its name and listed size.
type askedFile struct {
	rel  string
	size int64
}

// wanted is the set of files a download asked for, below dir, by name
// and in the order asked.
func wanted(dir string, asked ...askedFile) (map[string]*tarFile, []*tarFile) {
	want := map[string]*tarFile{}
	var order []*tarFile
	for _, a := range asked {
		f := &tarFile{tarNode: fileNode(a.rel, Endpoint{FS: Local{}, Path: "remote/" + a.rel},
			local(filepath.Join(dir, filepath.FromSlash(a.rel))), sizeInfo{path.Base(a.rel), a.size})}
		want[a.rel] = f
		order = append(order, f)
	}
	return want, order
}

type entry struct {
	h    tar.Header
	body string
}

func archive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.h
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		h.Mode = 0o644
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil && !strings.Contains(err.Error(), "too long") {
			t.Fatal(err)
		}
	}
	// A cut stream has no end marker: Flush pads the last entry only.
	if err := tw.Flush(); err != nil && !strings.Contains(err.Error(), "missed writing") {
		t.Fatal(err)
	}
	return b.Bytes()
}

// files lists the regular files below dir, relative and slash-separated.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, line := range tree(t, dir) {
		if name, _, ok := strings.Cut(line, ":"); ok {
			out = append(out, name)
		}
	}
	return out
}

func TestReceiveTar(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	want, order := wanted(dir, askedFile{"a", 3}, askedFile{"sub/b", 5}, askedFile{"-dash", 1})
	data := archive(t,
		entry{tar.Header{Name: "./a"}, "aaa"},
		entry{tar.Header{Name: "./sub/b"}, "bbbbb"},
		entry{tar.Header{Name: "./-dash"}, "d"},
	)
	var n int
	if err := receiveTar(context.Background(), bytes.NewReader(data), order, pipeline.Meter{Progress: func(k int) { n += k }}); err != nil {
		t.Fatal(err)
	}
	if n != 9 {
		t.Errorf("progress counted %d bytes, want 9", n)
	}
	for rel, f := range want {
		if !f.done || f.err != nil {
			t.Fatalf("%s: done %v, err %v", rel, f.done, f.err)
		}
		if !strings.HasPrefix(filepath.Base(f.tmp), tempPrefix) {
			t.Errorf("%s written to %s, not a temporary name", rel, f.tmp)
		}
		if _, err := os.Stat(f.dst().Path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists under its final name before the stream ended", rel)
		}
	}
	got, _ := os.ReadFile(want["sub/b"].tmpBeside(want["sub/b"].dst()))
	if string(got) != "bbbbb" {
		t.Errorf("sub/b holds %q", got)
	}
}

// GNU tar writes the files in the order asked and leaves out one it
// cannot read: an archive may skip files, but an entry for a file it
// passed is refused, even one never sent.
func TestReceiveTarOrder(t *testing.T) {
	dir := t.TempDir()
	want, order := wanted(dir, askedFile{"a", 1}, askedFile{"b", 1}, askedFile{"c", 1})
	if err := receiveTar(context.Background(), bytes.NewReader(archive(t,
		entry{tar.Header{Name: "./a"}, "a"}, entry{tar.Header{Name: "./c"}, "c"})), order, pipeline.Meter{}); err != nil {
		t.Fatal(err)
	}
	if !want["a"].done || want["b"].seen || !want["c"].done {
		t.Errorf("a done %v, b seen %v, c done %v; want a and c received, b not", want["a"].done, want["b"].seen, want["c"].done)
	}
	downRun(dir).removeTemps(order)

	want, order = wanted(dir, askedFile{"a", 1}, askedFile{"b", 1}, askedFile{"c", 1})
	err := receiveTar(context.Background(), bytes.NewReader(archive(t,
		entry{tar.Header{Name: "./a"}, "a"}, entry{tar.Header{Name: "./c"}, "c"}, entry{tar.Header{Name: "./b"}, "b"})), order, pipeline.Meter{})
	if err == nil || !strings.Contains(err.Error(), `refusing "./b": not in the order asked for`) {
		t.Fatalf("error %v, want b refused as out of order", err)
	}
	if want["b"].tmp != "" {
		t.Errorf("b written to %s", want["b"].tmp)
	}
	downRun(dir).removeTemps(order)
	if left := files(t, dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestReceiveTarHostile feeds archives a hostile or broken server could
// send: each must end the stream with an error naming what was refused,
// and once the temporary files are removed nothing is left.
func TestReceiveTarHostile(t *testing.T) {
	ok := entry{tar.Header{Name: "a"}, "aaa"}
	cases := []struct {
		name    string
		entries []entry
		cut     int // bytes cut off the end of the archive
		want    string
	}{
		{"parent", []entry{ok, {tar.Header{Name: "../x"}, "x"}}, 0, `refusing "../x"`},
		{"absolute", []entry{{tar.Header{Name: "/etc/passwd"}, "x"}}, 0, "absolute path"},
		{"dotdot inside", []entry{{tar.Header{Name: "a/../../b"}, "x"}}, 0, "not a clean path"},
		{"dotdot element", []entry{{tar.Header{Name: "sub/.."}, "x"}}, 0, "not a clean path"},
		{"empty", []entry{{tar.Header{Name: "./", Typeflag: tar.TypeDir}, ""}}, 0, "empty name"},
		{"symlink", []entry{{tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, ""}}, 0, "not a regular file"},
		{"hardlink", []entry{{tar.Header{Name: "a", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}, ""}}, 0, "not a regular file"},
		{"device", []entry{{tar.Header{Name: "a", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, ""}}, 0, "not a regular file"},
		{"directory", []entry{{tar.Header{Name: "a", Typeflag: tar.TypeDir}, ""}}, 0, "not a regular file"},
		{"unasked", []entry{ok, {tar.Header{Name: "other"}, "x"}}, 0, "not a file that was asked for"},
		{"twice", []entry{ok, ok}, 0, "sent twice"},
		{"short body", []entry{{tar.Header{Name: "a", Size: 3}, "a"}}, 0, "cut short"},
		{"cut stream", []entry{{tar.Header{Name: "a", Size: 3}, "aaa"}}, 600, "read the tar stream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			want, order := wanted(dir, askedFile{"a", 3})
			data := archive(t, c.entries...)
			if c.cut > 0 {
				data = data[:len(data)-c.cut]
			}
			err := receiveTar(context.Background(), bytes.NewReader(data), order, pipeline.Meter{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			downRun(dir).removeTemps([]*tarFile{want["a"]})
			if left := files(t, dir); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
			if want["a"].done && c.name != "unasked" && c.name != "twice" && c.name != "parent" {
				t.Errorf("a marked complete")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(t.TempDir()), "x")); err == nil {
		t.Errorf("../x was written outside the tree")
	}
}

// A file whose size changed since the listing fails alone; the stream
// goes on.
func TestReceiveTarChangedSize(t *testing.T) {
	dir := t.TempDir()
	want, order := wanted(dir, askedFile{"a", 3}, askedFile{"b", 1})
	data := archive(t, entry{tar.Header{Name: "a"}, "aaaa"}, entry{tar.Header{Name: "b"}, "b"})
	if err := receiveTar(context.Background(), bytes.NewReader(data), order, pipeline.Meter{}); err != nil {
		t.Fatal(err)
	}
	if a := want["a"]; a.err == nil || !strings.Contains(a.err.Error(), "changed size") || a.tmp != "" {
		t.Errorf("a: err %v, tmp %q", a.err, a.tmp)
	}
	if b := want["b"]; !b.done || b.err != nil {
		t.Errorf("b: done %v, err %v", b.done, b.err)
	}
}

func TestTarEntryName(t *testing.T) {
	for name, want := range map[string]string{
		"a":         "a",
		"./a":       "a",
		"a/b c/d":   "a/b c/d",
		"-x":        "-x",
		"":          "",
		".":         "",
		"..":        "",
		"a//b":      "",
		"a/./b":     "",
		"/a":        "",
		"a/":        "",
		"a\x00b":    "",
		"./../a":    "",
		"a/b/../..": "",
	} {
		got, err := tarEntryName(name)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("tarEntryName(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestSplitBatches(t *testing.T) {
	var nodes []*tarNode
	for range 1000 {
		nodes = append(nodes, &tarNode{info: sizeInfo{"f", 4096}})
	}
	for _, c := range []struct{ files, streams, want int }{
		{1000, 4, 4}, {1000, 1, 1}, {40, 4, 1}, {100, 4, 3}, {1, 4, 1},
	} {
		b := splitBatches(nodes[:c.files], c.streams)
		n := 0
		for _, x := range b {
			n += len(x)
		}
		if len(b) != c.want || n != c.files {
			t.Errorf("%d files over %d streams: %d batches of %d files, want %d batches", c.files, c.streams, len(b), n, c.want)
		}
	}
}

// Without --tar-streams the streams follow the files' count and bytes;
// with it, what it says.
func TestTarStreamsFor(t *testing.T) {
	files := func(n int, size int64) []*tarNode {
		out := make([]*tarNode, n)
		for i := range out {
			out[i] = &tarNode{info: sizeInfo{"f", size}}
		}
		return out
	}
	for _, c := range []struct {
		n           int
		size        int64
		asked, want int
	}{
		{1000, 4 << 10, 0, 1},
		{2000, 4 << 10, 0, 1},
		{2501, 4 << 10, 0, 2},
		{10000, 4 << 10, 0, 4},
		{100000, 4 << 10, 0, 4},
		{100, 512 << 10, 0, 4}, // 50 MiB
		{40, 512 << 10, 0, 2},  // 20 MiB
		{1000, 4 << 10, 3, 3},
		{10000, 4 << 10, 1, 1},
	} {
		if got := tarStreamsFor(files(c.n, c.size), c.asked); got != c.want {
			t.Errorf("%d files of %d bytes, --tar-streams %d: %d streams, want %d", c.n, c.size, c.asked, got, c.want)
		}
	}
}

// The upload archive names each file by its temporary name (or, for a new
// tree, by its own name below the temporary tree), puts the directories
// first and writable by their owner, and carries the exact bytes and
// modes.
func TestWriteArchive(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "sub", "f"), "hello")
	if err := os.Chmod(filepath.Join(src, "sub"), 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Join(src, "sub"), 0o755)
	di, _ := os.Stat(filepath.Join(src, "sub"))
	fi, _ := os.Stat(filepath.Join(src, "sub", "f"))
	dir := &tarNode{rel: "sub", info: di}
	for _, whole := range []bool{false, true} {
		f := &tarFile{tarNode: fileNode("sub/f", local(filepath.Join(src, "sub", "f")), Endpoint{FS: Local{}, Path: "/t/sub/f"}, fi)}
		f.tmp = TempName("f")
		if whole {
			f.tmp = ""
		}
		run := &tarRun{c: &copier{}, root: newTarDir("", Endpoint{}, Endpoint{FS: Local{}, Path: "/t"}, nil), upload: true, whole: whole, base: "/tmptree"}
		var b bytes.Buffer
		if err := run.writeArchive(context.Background(), &b, []*tarNode{dir}, []*tarFile{f}); err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(&b)
		h, err := tr.Next()
		if err != nil || h.Typeflag != tar.TypeDir || h.Name != "sub/" || h.Mode != 0o755 {
			t.Fatalf("first entry %+v, %v; want directory sub/ mode 0755", h, err)
		}
		h, err = tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		want := "sub/" + f.tmp
		if whole {
			want = "sub/f"
		}
		body, _ := io.ReadAll(tr)
		if h.Name != want || h.Typeflag != tar.TypeReg || h.Mode != 0o644 || string(body) != "hello" {
			t.Errorf("whole %v: entry %q type %c mode %o body %q; want %q", whole, h.Name, h.Typeflag, h.Mode, body, want)
		}
		if !whole && !strings.HasPrefix(path.Base(h.Name), tempPrefix) {
			t.Errorf("entry %q is not a temporary name", h.Name)
		}
		if _, err := tr.Next(); err != io.EOF {
			t.Errorf("after the file: %v, want the end", err)
		}
	}
}
