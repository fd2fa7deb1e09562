package transfer

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/pipeline"
)

// The fuzz targets of what transfer reads from a server or the disk: tar
// streams of a download, resume journal entries and --files-from lists.
// Their seed corpora in testdata/fuzz are real: archives GNU tar 1.34
// wrote as tarCreateCommand runs it and entries the journal wrote. scripts/fuzz.sh runs them all.

// fuzzWant is what a fuzzed download asked for: its seeds archive these
// names with these sizes.
var fuzzWant = []askedFile{
	{"a", 3}, {"sub/b", 5}, {"-dash", 1},
	{"sub/" + strings.Repeat("long", 30), 2},
}

// hostileTar is an archive of one entry, as a server could send it.
func hostileTar(h tar.Header, body string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	h.Size = int64(len(body))
	h.Mode = 0o644
	if h.Typeflag != tar.TypeReg {
		h.Size = 0
		body = ""
	}
	_ = tw.WriteHeader(&h)
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	return b.Bytes()
}

// FuzzReceiveTar feeds arbitrary archives to a download's reader, into a
// target directory that has a sibling: whatever the archive holds,
// nothing may appear but the temporary files of the names asked for,
// beside their targets, each whole when it is taken as received.
func FuzzReceiveTar(f *testing.F) {
	for _, h := range []tar.Header{
		{Name: "../outside/x", Typeflag: tar.TypeReg},
		{Name: "/etc/x", Typeflag: tar.TypeReg},
		{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "../outside/keep"},
		{Name: "a", Typeflag: tar.TypeLink, Linkname: "../outside/keep"},
		{Name: "sub", Typeflag: tar.TypeDir},
		{Name: "./sub/../a", Typeflag: tar.TypeReg},
		{Name: "a", Typeflag: tar.TypeReg, Format: tar.FormatPAX, PAXRecords: map[string]string{"path": "../outside/keep"}},
	} {
		f.Add(hostileTar(h, "aaa"))
	}
	f.Add(append(hostileTar(tar.Header{Name: "a", Typeflag: tar.TypeReg}, "aaa")[:1024], hostileTar(tar.Header{Name: "a", Typeflag: tar.TypeReg}, "aaa")...))
	// One tree for every input, which leaves it as it found it: a fresh
	// one each time cost more than the archive's reading.
	root := f.TempDir()
	dir := filepath.Join(root, "target")
	for _, d := range []string{filepath.Join(root, "outside"), filepath.Join(dir, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	keep := filepath.Join(root, "outside", "keep")
	if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, order := wanted(dir, fuzzWant...)
		defer func() {
			var list []*tarFile
			for _, f := range want {
				list = append(list, f)
			}
			downRun(dir).removeTemps(list)
		}()
		err := receiveTar(context.Background(), bytes.NewReader(data), order, pipeline.Meter{})

		temps := map[string]*tarFile{}
		for rel, f := range want {
			if f.tmp == "" {
				if f.done {
					t.Fatalf("%s taken as received without a temporary file", rel)
				}
				continue
			}
			if f.tmp != filepath.Base(f.tmp) || !strings.HasPrefix(f.tmp, tempPrefix) {
				t.Fatalf("%s written to %q, not a temporary file beside %s", rel, f.tmp, f.dst().Path)
			}
			temps[f.tmpBeside(f.dst())] = f
			if err == nil && !f.done && f.err == nil {
				t.Fatalf("%s was received (%s) neither whole nor failed, yet the stream ended well", rel, f.tmpBeside(f.dst()))
			}
			if f.done {
				var size int64 = -1
				fi, serr := os.Stat(f.tmpBeside(f.dst()))
				if serr == nil {
					size = fi.Size()
				}
				if size != f.info.Size() || f.err != nil || !f.seen {
					t.Fatalf("%s taken as received (err %v): %v, %d bytes of %d", rel, f.err, serr, size, f.info.Size())
				}
			}
		}
		werr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case p == root || p == dir || p == filepath.Join(dir, "sub") || p == filepath.Dir(keep):
				if !d.IsDir() {
					t.Fatalf("%s is no longer a directory", p)
				}
			case p == keep:
				if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" || !d.Type().IsRegular() {
					t.Fatalf("the file outside the target changed: %q, %v", b, err)
				}
			case temps[p] != nil && d.Type().IsRegular():
			default:
				t.Fatalf("the archive made %s (%v)", p, d.Type())
			}
			return nil
		})
		if werr != nil {
			t.Fatal(werr)
		}
	})
}

// FuzzReadJournal reads resume journal entries from the disk: any file
// there is read or refused, never a panic, an entry read is written back
// by the journal's own encoding to the same entry, and a journal never
// names a temporary file outside its target's directory for resume to
// continue or remove.
func FuzzReadJournal(f *testing.F) {
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"target":"/d/x","temp":"/d/.hpncp.x.0011223344556677.part/../../etc/passwd"}`))
	f.Add([]byte(`{"version":2,"size":-1,"watermark":1e400}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		name := filepath.Join(dir, "entry.json")
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := readJournal(name)
		if err != nil {
			return
		}
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("entry %+v read from %q does not encode: %v", e, b, err)
		}
		if err := os.WriteFile(name, out, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := readJournal(name)
		if err != nil || again != e {
			t.Fatalf("entry %+v, written as %s, reads back as %+v, %v", e, out, again, err)
		}
		dst := local("/d/x")
		if validTemp(dst, e.Temp) && (filepath.Dir(filepath.Clean(e.Temp)) != "/d" || filepath.Clean(e.Temp) != e.Temp) {
			t.Fatalf("temporary file %q taken for one beside %s", e.Temp, dst.Path)
		}
	})
}

// FuzzReadFileList reads --files-from lists, newline- or NUL-separated (the
// seeds are find's output over a small tree, both ways): every path it
// returns must name something below the source directory.
func FuzzReadFileList(f *testing.F) {
	f.Add([]byte("a\n../b\n"), false)
	f.Add([]byte("/etc/passwd\x00"), true)
	f.Add([]byte("a/./b/../../..\r\n"), false)
	f.Fuzz(func(t *testing.T, b []byte, nul bool) {
		list, err := ReadFileList(bytes.NewReader(b), nul)
		if err != nil {
			return
		}
		for _, p := range list {
			joined := path.Join("/src", p)
			if p == "" || path.Clean(p) != p || !strings.HasPrefix(joined, "/src/") || strings.ContainsRune(p, 0) {
				t.Fatalf("%q (nul %v) listed %q, which is not a clean path below the source (%s)", b, nul, p, joined)
			}
		}
	})
}
