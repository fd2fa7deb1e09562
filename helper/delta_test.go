//go:build unix

package helper

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/filter"
	"github.com/zeebo/xxh3"
)

// deltaPair runs the delta service on one end of a pipe and returns a
// client on the other.
func deltaPair(t *testing.T) *DeltaClient {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- ServeDelta(context.Background(), b, b); b.Close() }()
	c, err := NewDeltaClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("service: %v", err)
		}
	})
	return c
}

// deltaPairFiles is deltaPair over files.
func deltaPairFiles(t *testing.T, files DeltaFiles) *DeltaClient {
	t.Helper()
	a, b := net.Pipe()
	go func() { ServeDeltaFiles(context.Background(), b, b, files); b.Close() }()
	c, err := NewDeltaClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

func TestDeltaServicePush(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(1, 400_000)
	next := append(bytes.Clone(old[:150_000]), append([]byte("a change"), old[150_100:]...)...)
	basis := filepath.Join(dir, "f")
	tmp := filepath.Join(dir, ".f.tmp")
	os.WriteFile(basis, old, 0o644)
	c := deltaPair(t)

	sent, st, err := signPatch(ctx, c, basis, int64(len(old)), tmp, next, delta.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(tmp); !bytes.Equal(got, next) {
		t.Fatalf("the helper rebuilt %d bytes, not the new file's %d", len(got), len(next))
	}
	if fi, err := os.Lstat(tmp); err != nil || fi.Mode() != 0o600 {
		t.Errorf("the temporary file the helper made: %v (%v), want owner-only", fi.Mode(), err)
	}
	if st != sent || st.Literal > 10_000 {
		t.Errorf("applied %+v, sent %+v", st, sent)
	}
	// Given a mode and times, the helper sets them once the file is
	// whole, the times to the second.
	os.Remove(tmp)
	mtime := time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC)
	given := Attrs{SetMode: true, Mode: 0o640 | fs.ModeSetgid, SetTimes: true, Atime: mtime.Add(time.Hour), Mtime: mtime}
	var made fs.FileInfo
	_, made, err = c.SignPatch(ctx, basis, int64(len(old)), tmp, int64(len(next)), given, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks})
		return err
	})
	fi, serr := os.Lstat(tmp)
	if err != nil || serr != nil || fi.Mode() != 0o640|fs.ModeSetgid || !fi.ModTime().Equal(mtime.Truncate(time.Second)) {
		t.Fatalf("a push given mode and times: %v; the file %v, %v (%v)", err, fi.Mode(), fi.ModTime(), serr)
	}
	// The answer holds the file's stat as the helper took it.
	uid, gid, ok := protocolOwner(made)
	if made.Name() != filepath.Base(tmp) || made.Size() != fi.Size() || made.Mode() != fi.Mode() || !made.ModTime().Equal(fi.ModTime()) ||
		!ok || uid != os.Getuid() || gid != int(fi.Sys().(*syscall.Stat_t).Gid) {
		t.Errorf("the answer's stat: %s %d %v %v %d:%d, want the file's %d %v %v, owner %d", made.Name(), made.Size(), made.Mode(), made.ModTime(), uid, gid,
			fi.Size(), fi.Mode(), fi.ModTime(), os.Getuid())
	}

	// Given a name, the helper renames the file there once it is whole;
	// one it cannot rename to fails the request and leaves nothing.
	os.Remove(tmp)
	final := filepath.Join(dir, "final")
	_, made, err = c.SignPatch(ctx, basis, int64(len(old)), tmp, int64(len(next)), Attrs{RenameTo: final}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks})
		return err
	})
	if got, _ := os.ReadFile(final); err != nil || !bytes.Equal(got, next) || made.Name() != "final" {
		t.Errorf("a push renamed into place: %v, %d bytes, named %q", err, len(got), made.Name())
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary name after the rename: %v", err)
	}
	_, _, err = c.SignPatch(ctx, basis, int64(len(old)), tmp, int64(len(next)), Attrs{RenameTo: filepath.Join(dir, "no", "such")}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks})
		return err
	})
	if _, serr := os.Lstat(tmp); !isDeltaError(err) || !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("a rename that failed: %v; the temporary file: %v", err, serr)
	}

	// Requests the helper cannot do are answered, leave no temporary
	// file, and the service goes on.
	os.Remove(tmp)
	if _, _, err := signPatch(ctx, c, basis, int64(len(old))+1, tmp, next, delta.DiffOptions{}); !isDeltaError(err) {
		t.Errorf("a basis of another size: %v", err)
	}
	os.Symlink(basis, filepath.Join(dir, "link"))
	if _, _, err := signPatch(ctx, c, filepath.Join(dir, "link"), int64(len(old)), tmp, next, delta.DiffOptions{}); !isDeltaError(err) {
		t.Errorf("a link: %v", err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed patch left its temporary file: %v", err)
	}
	// A temporary file, or a link, already there is not written.
	for _, there := range []func() error{
		func() error { return os.WriteFile(tmp, []byte("someone's"), 0o644) },
		func() error { return os.Symlink(basis, tmp) },
	} {
		os.Remove(tmp)
		if err := there(); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Lstat(tmp)
		if _, _, err := signPatch(ctx, c, basis, int64(len(old)), tmp, next, delta.DiffOptions{}); !isDeltaError(err) {
			t.Errorf("a temporary file there already (%v): %v", before.Mode(), err)
		}
		if after, err := os.Lstat(tmp); err != nil || !os.SameFile(before, after) || after.Size() != before.Size() {
			t.Errorf("a file there already was changed: %v", err)
		}
	}
	if got, _ := os.ReadFile(basis); !bytes.Equal(got, old) {
		t.Errorf("the basis changed")
	}
	// A delta that is not the signature's, and a cut one, are refused.
	os.Remove(tmp)
	other := randomBytes(2, len(old))
	wrong, _ := delta.Sign(ctx, bytes.NewReader(other), int64(len(other)), delta.BlockSize(int64(len(old))))
	_, _, err = c.SignPatch(ctx, basis, int64(len(old)), tmp, int64(len(other)), Attrs{}, func(_ *delta.Signature, _ func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		_, err := delta.Diff(ctx, wrong, bytes.NewReader(other), int64(len(other)), w, delta.DiffOptions{})
		return err
	})
	if !isDeltaError(err) {
		t.Errorf("a delta made against other blocks: %v", err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused delta left its temporary file: %v", err)
	}
	if err := inStep(ctx, c, basis, int64(len(old))); err != nil || c.Broken() {
		t.Errorf("after the failures: %v (broken %v)", err, c.Broken())
	}
	// A service of its own: it ends with the channel cut mid-request.
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() { ServeDelta(ctx, b, b); b.Close(); close(served) }()
	if c, err = NewDeltaClient(ctx, a); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := errors.New("stopped diffing")
	os.Remove(tmp)
	_, _, err = c.SignPatch(ctx, basis, int64(len(old)), tmp, int64(len(next)), Attrs{}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		w.Write([]byte("the start of a delta"))
		return stop
	})
	if !errors.Is(err, stop) || !c.Broken() {
		t.Errorf("a diff that failed part way: %v (broken %v), want its error and the channel given up", err, c.Broken())
	}
	<-served
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a delta cut short left its temporary file: %v", err)
	}
}

// signPatch has c rebuild next from basis into tmp, or over basis in
// place ("") with a delta made for that: sent is what the diff counted,
// applied what the helper did.
func signPatch(ctx context.Context, c *DeltaClient, basis string, basisSize int64, tmp string, next []byte, o delta.DiffOptions) (sent, applied delta.Stats, err error) {
	o.InPlace = tmp == ""
	applied, _, err = c.SignPatch(ctx, basis, basisSize, tmp, int64(len(next)), Attrs{}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		o.Blocks = blocks
		var err error
		sent, err = delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, o)
		return err
	})
	return sent, applied, err
}

// inStep says whether c's service answers a request after what came
// before: it sums the file of size at path.
func inStep(ctx context.Context, c *DeltaClient, path string, size int64) error {
	_, errs, err := c.Sums(ctx, []string{path}, []int64{size})
	if err == nil {
		err = errs[0]
	}
	return err
}

// protocolOwner is the owner Made gives, as the engine reads it.
func protocolOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	o, ok := fi.Sys().(interface{ Owner() (int, int, bool) })
	if !ok {
		return 0, 0, false
	}
	return o.Owner()
}

func isDeltaError(err error) bool {
	var de *DeltaError
	return errors.As(err, &de)
}

func TestDeltaServicePull(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(2, 300_000)
	next := append(randomBytes(3, 1000), old...)
	src := filepath.Join(dir, "src")
	os.WriteFile(src, next, 0o644)
	c := deltaPair(t)

	sig, err := delta.Sign(ctx, bytes.NewReader(old), int64(len(old)), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := c.Diff(ctx, src, int64(len(next)), sig, false, func(r io.Reader) error {
		var f memFile
		_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(old), Size: sig.Size, BlockLen: sig.BlockLen}, &f, int64(len(next)))
		out.Write(f.b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), next) {
		t.Fatalf("rebuilt %d bytes, not the %d of the helper's file", out.Len(), len(next))
	}
	if st.Literal > 2*int64(sig.BlockLen)+1000 {
		t.Errorf("sent %+v", st)
	}
	// A file there of another size than the client listed is refused,
	// and the client can go on.
	_, err = c.Diff(ctx, src, int64(len(next))-1, sig, false, func(r io.Reader) error {
		_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(old), Size: sig.Size, BlockLen: sig.BlockLen}, &memFile{}, -1)
		return err
	})
	if !isDeltaError(err) || c.Broken() {
		t.Errorf("a changed source: %v (broken %v)", err, c.Broken())
	}
}

// In place (--inplace): a push rewrites the basis itself, leaving what
// did not change unwritten, and a pull's delta is made for applying over
// the client's basis.
func TestDeltaServiceInPlace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(4, 500_000)
	next := bytes.Clone(old[:480_000]) // shorter: the rewrite cuts it
	copy(next[200_000:], "changed in place")
	swapped := append(bytes.Clone(old[250_000:]), old[:250_000]...)
	basis := filepath.Join(dir, "f")
	os.WriteFile(basis, old, 0o644)
	before, _ := os.Stat(basis)
	c := deltaPair(t)

	_, st, err := signPatch(ctx, c, basis, int64(len(old)), "", next, delta.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(basis); !bytes.Equal(got, next) {
		t.Fatalf("rewritten in place: %d bytes, not the new file's %d", len(got), len(next))
	}
	if after, _ := os.Stat(basis); !os.SameFile(before, after) {
		t.Errorf("the file was replaced, not rewritten")
	}
	if st.Literal > 10_000 {
		t.Errorf("applied %+v", st)
	}
	// A delta made for a fresh file is refused over the basis, and the
	// service goes on.
	_, _, err = c.SignPatch(ctx, basis, int64(len(next)), "", int64(len(swapped)), Attrs{}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		_, err := delta.Diff(ctx, sig, bytes.NewReader(swapped), int64(len(swapped)), w, delta.DiffOptions{RangeLen: 1 << 20, Blocks: blocks})
		return err
	})
	if !isDeltaError(err) || c.Broken() {
		t.Errorf("a fresh file's delta in place: %v (broken %v)", err, c.Broken())
	}

	// Pull: the helper's delta applies over the client's copy.
	src := filepath.Join(dir, "src")
	os.WriteFile(src, swapped, 0o644)
	local := &memFile{b: bytes.Clone(old)}
	lsig, _ := delta.Sign(ctx, bytes.NewReader(old), int64(len(old)), 0)
	_, err = c.Diff(ctx, src, int64(len(swapped)), lsig, true, func(r io.Reader) error {
		_, _, err := delta.Apply(ctx, r, delta.Basis{R: local, Size: lsig.Size, BlockLen: lsig.BlockLen, InPlace: true}, local, int64(len(swapped)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(local.b[:len(swapped)], swapped) {
		t.Fatalf("pulled in place: not the helper's file")
	}
}

type memFile struct {
	mu sync.Mutex
	b  []byte
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

func TestDeltaServiceSums(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var paths []string
	var sizes []int64
	var want []delta.RangeSum
	for i := range 40 {
		p := filepath.Join(dir, "f"+strconv.Itoa(i))
		data := randomBytes(uint64(i), i*5000)
		os.WriteFile(p, data, 0o644)
		paths = append(paths, p)
		sizes = append(sizes, int64(len(data)))
		want = append(want, xxh3.Hash128(data).Bytes())
	}
	// A file that is not there, one of another size, a link: errors in
	// their places, and the others still summed.
	os.Symlink(paths[3], filepath.Join(dir, "link"))
	paths = append(paths, filepath.Join(dir, "missing"), paths[5], filepath.Join(dir, "link"))
	sizes = append(sizes, 1, sizes[5]+1, sizes[3])
	c := deltaPair(t)
	sums, errs, err := c.Sums(ctx, paths, sizes)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if errs[i] != nil || sums[i] != want[i] {
			t.Errorf("file %d: sum %x, error %v; want %x", i, sums[i], errs[i], want[i])
		}
	}
	for i := len(want); i < len(paths); i++ {
		if !isDeltaError(errs[i]) {
			t.Errorf("%s of %d bytes: %v, want the helper's error", paths[i], sizes[i], errs[i])
		}
	}
	// The service goes on.
	if err := inStep(ctx, c, paths[10], sizes[10]); err != nil || c.Broken() {
		t.Errorf("after the sums: %v", err)
	}
}

// readDirs counts the directories the service reads.
type readDirs struct {
	osFiles
	mu   sync.Mutex
	read []string
}

func (r *readDirs) ReadDir(path string) ([]fs.FileInfo, error) {
	r.mu.Lock()
	r.read = append(r.read, path)
	r.mu.Unlock()
	return r.osFiles.ReadDir(path)
}

// TestDeltaServiceWalkPrunes: a walk told the sync's filter rules leaves
// out what they exclude and never reads an excluded directory, naming
// entries as the client's lister does (below the root's rsync name);
// rules it cannot read fail the walk, not the service.
func TestDeltaServiceWalkPrunes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	for _, d := range []string{"keep/sub", "skip/deep", "keep/skip", "build/out"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"a.c", "a.o", "keep/b.c", "keep/b.o", "keep/sub/c.c", "skip/deep/x", "keep/skip/y", "build/out/z"} {
		os.WriteFile(filepath.Join(root, f), []byte(f), 0o644)
	}
	files := &readDirs{}
	c := deltaPairFiles(t, files)
	var rules filter.Rules
	for _, r := range []string{"- *.o", "- /top/skip/", "-! */", "+ *"} {
		if err := rules.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	rules.Exclude("build")
	listed := func(dirs map[string][]fs.FileInfo) []string {
		var out []string
		for d, es := range dirs {
			for _, fi := range es {
				out = append(out, path.Join(d, fi.Name()))
			}
		}
		slices.Sort(out)
		return out
	}
	// "/top/skip/" is the top one's skip, not keep/skip, and only where
	// the root is named "top" (a source without its trailing slash); "-!
	// */" leaves out what is not a directory, and the "- build" after "+
	// *" never decides.
	for _, tc := range []struct {
		rootName string
		rules    []string
		want     []string
		notRead  []string
	}{
		{"top", []string{"- *.o", "- /top/skip/", "- build"}, []string{"a.c", "keep", "keep/b.c", "keep/skip", "keep/skip/y", "keep/sub", "keep/sub/c.c"}, []string{"skip", "skip/deep", "build"}},
		{".", []string{"- *.o", "- /top/skip/", "- build"}, []string{"a.c", "keep", "keep/b.c", "keep/skip", "keep/skip/y", "keep/sub", "keep/sub/c.c", "skip", "skip/deep", "skip/deep/x"}, []string{"build"}},
		{"top", rules.Lines(), []string{"build", "build/out", "keep", "keep/skip", "keep/sub"}, []string{"skip"}},
	} {
		files.mu.Lock()
		files.read = nil
		files.mu.Unlock()
		dirs, _, err := c.Walk(ctx, root, 1000, 1<<20, filter.Prune{Root: tc.rootName, Rules: tc.rules})
		if err != nil {
			t.Fatal(err)
		}
		if got := listed(dirs); !slices.Equal(got, tc.want) {
			t.Errorf("root %q, rules %q: walked %q, want %q", tc.rootName, tc.rules, got, tc.want)
		}
		files.mu.Lock()
		for _, d := range tc.notRead {
			if slices.Contains(files.read, filepath.Join(root, d)) {
				t.Errorf("root %q, rules %q: the excluded directory %s was read", tc.rootName, tc.rules, d)
			}
		}
		files.mu.Unlock()
	}
	if _, _, err := c.Walk(ctx, root, 1000, 1<<20, filter.Prune{Root: ".", Rules: []string{"merge x"}}); err == nil || c.Broken() {
		t.Errorf("a walk with a rule the helper refuses: %v, broken %v", err, c.Broken())
	}
	if err := inStep(ctx, c, filepath.Join(root, "a.c"), 3); err != nil {
		t.Errorf("after the walks: %v", err)
	}
}

func TestDeltaServiceWalk(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755)
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	os.WriteFile(filepath.Join(root, "top"), []byte("top"), 0o640)
	os.WriteFile(filepath.Join(root, "a/b/c/deep"), []byte("deep!"), 0o600)
	os.Symlink("../top", filepath.Join(root, "a/link"))
	os.Symlink("/", filepath.Join(root, "a/b/out")) // not followed
	locked := filepath.Join(root, "locked")
	os.Mkdir(locked, 0o755)
	os.WriteFile(filepath.Join(locked, "x"), nil, 0o644)
	os.Chmod(locked, 0)
	defer os.Chmod(locked, 0o755)
	c := deltaPair(t)
	dirs, errs, err := c.Walk(ctx, root, 1000, 1<<20, filter.Prune{})
	if err != nil {
		t.Fatal(err)
	}
	names := func(dir string) []string {
		var out []string
		for _, fi := range dirs[dir] {
			out = append(out, fi.Name())
		}
		slices.Sort(out)
		return out
	}
	for dir, want := range map[string][]string{
		"": {"a", "empty", "locked", "top"}, "a": {"b", "link"}, "a/b": {"c", "out"}, "a/b/c": {"deep"}, "empty": nil,
	} {
		if got := names(dir); !slices.Equal(got, want) {
			t.Errorf("walk of %q: %v, want %v", dir, got, want)
		}
	}
	for _, fi := range dirs["a"] {
		if fi.Name() == "link" {
			target, ok := fi.(interface{ LinkTarget() (string, bool) }).LinkTarget()
			if !ok || target != "../top" || fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("link: %v %q %v", fi.Mode(), target, ok)
			}
		}
	}
	for _, fi := range dirs[""] {
		if fi.Name() == "top" && (fi.Size() != 3 || fi.Mode().Perm() != 0o640) {
			t.Errorf("top: %d bytes, mode %v", fi.Size(), fi.Mode())
		}
	}
	if os.Geteuid() != 0 {
		if _, ok := errs["locked"]; !ok {
			t.Errorf("an unreadable directory: no error (%v)", errs)
		}
	}
	// A tree past the bound is an error, and the service goes on.
	if _, _, err := c.Walk(ctx, root, 3, 1<<20, filter.Prune{}); err == nil {
		t.Errorf("a walk of more than 3 entries succeeded")
	}
	if err := inStep(ctx, c, filepath.Join(root, "top"), 3); err != nil {
		t.Errorf("after the walks: %v", err)
	}

	// The walk asked for in the command line (--request): its answer
	// follows the hello, the same as asked on the channel, and the
	// service goes on.
	arg := WalkArg(root, 1000, filter.Prune{})
	value, ok := strings.CutPrefix(arg, "--"+RequestFlag+" ")
	if !ok {
		t.Fatalf("WalkArg: %q", arg)
	}
	a, b := net.Pipe()
	in, err := RequestInput(value, b)
	if err != nil {
		t.Fatal(err)
	}
	go func() { ServeDelta(ctx, in, b); b.Close() }()
	c2, err := NewDeltaClient(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	asked, _, err := c2.WalkAsked(ctx, root, 1000, 1<<20, filter.Prune{})
	if err != nil || len(asked) != len(dirs) || len(asked["a/b"]) != 2 {
		t.Errorf("the walk asked in the command line: %d directories (%v), want %d", len(asked), err, len(dirs))
	}
	if err := inStep(ctx, c2, filepath.Join(root, "top"), 3); err != nil {
		t.Errorf("after the walk asked in the command line: %v", err)
	}
	// A request too long for a command line is not put in one, and a
	// value past the bound is refused.
	if arg := WalkArg(strings.Repeat("x", MaxRequestArg), 1, filter.Prune{}); arg != "" {
		t.Errorf("a walk of a %d-byte root went in the command line", MaxRequestArg)
	}
	if _, err := RequestInput(strings.Repeat("A", MaxRequestArg+1), nil); err == nil {
		t.Errorf("a request past the bound was taken")
	}
	if _, err := RequestInput("not base64!", nil); err == nil {
		t.Errorf("a request not base64url was taken")
	}
}

// A diff whose signature is streamed: the delta flows back while it is
// written, and when this end stops applying part way the error it gets
// is its own, not the cut channel's.
func TestDeltaServiceDiffStream(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(5, 3<<20)
	next := bytes.Clone(old)
	copy(next[1<<20:], "a change")
	src := filepath.Join(dir, "src")
	os.WriteFile(src, next, 0o644)
	bl := delta.BlockSize(int64(len(old)))
	sign := func(w io.Writer) error { return delta.SignTo(ctx, bytes.NewReader(old), int64(len(old)), bl, w) }

	c := deltaPair(t)
	local := &memFile{b: bytes.Clone(old)}
	_, err := c.DiffStream(ctx, src, int64(len(next)), sign, true, delta.Share{}, func(r io.Reader) error {
		_, _, err := delta.Apply(ctx, r, delta.Basis{R: local, Size: int64(len(old)), BlockLen: bl, InPlace: true}, local, int64(len(next)))
		return err
	})
	if err != nil || !bytes.Equal(local.b[:len(next)], next) {
		t.Fatalf("streamed diff in place: %v", err)
	}

	// A service of its own: it ends with the channel cut mid-request.
	a, b := net.Pipe()
	go func() { ServeDelta(ctx, b, b); b.Close() }()
	if c, err = NewDeltaClient(ctx, a); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := errors.New("stopped applying")
	_, err = c.DiffStream(ctx, src, int64(len(next)), sign, true, delta.Share{}, func(r io.Reader) error {
		r.Read(make([]byte, 10))
		return stop
	})
	if !errors.Is(err, stop) || !c.Broken() {
		t.Errorf("apply stopped part way: %v (broken %v), want its own error and the channel given up", err, c.Broken())
	}
}

// A push in shares: the push's channel carries the first, PatchShare on
// channels of their own the others, into the file the push made; the
// file is finished, its mode and times given and renamed, only once all
// are in. A share that fails fails the push, and leaves nothing: no
// temporary file, nothing under the final name.
func TestDeltaServicePushShares(t *testing.T) {
	ctx := context.Background()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := t.TempDir()
	old := randomBytes(13, 3<<20)
	next := bytes.Clone(old)
	copy(next[1<<20:], randomBytes(14, 1<<20))
	basis := filepath.Join(dir, "f")
	os.WriteFile(basis, old, 0o644)
	const n = 3
	rl := int64(256 << 10)
	// early has the client withhold its verdict until the file is at
	// its final name: the other shares' helpers said they were applied.
	push := func(c *DeltaClient, tmp, final string, others []*DeltaClient, fail int, early bool) (delta.Stats, error) {
		diff := func(w io.Writer, sh delta.Share, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) error {
			_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks, Share: sh, RangeLen: rl})
			return err
		}
		mtime := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
		a := Attrs{SetMode: true, Mode: 0o640, SetTimes: true, Atime: mtime, Mtime: mtime, RenameTo: final}
		st, _, err := c.SignPatchShares(ctx, basis, int64(len(old)), tmp, int64(len(next)), a, Shares{N: n, Others: func(ctx context.Context, under bool, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error) {
			var all delta.Stats
			for i, o := range others {
				sh := delta.Share{N: n, I: i + 1}
				st, err := o.PatchShare(ctx, basis, int64(len(old)), tmp, int64(len(next)), under, sh, func(w io.Writer) error {
					if i+1 == fail {
						sh.I = (sh.I + 1) % n // another share's ranges
					}
					return diff(w, sh, sig, blocks)
				})
				if err != nil {
					return all, err
				}
				all.Add(st)
			}
			for early {
				if _, err := os.Lstat(final); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return all, ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
			return all, nil
		}}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
			return diff(w, delta.Share{N: n}, sig, blocks)
		})
		return st, err
	}
	c, others := deltaPair(t), []*DeltaClient{deltaPair(t), deltaPair(t)}
	tmp, final := filepath.Join(dir, ".f.tmp"), filepath.Join(dir, "final")
	st, err := push(c, tmp, final, others, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(final)
	fi, _ := os.Stat(final)
	if !bytes.Equal(got, next) || fi.Mode().Perm() != 0o640 || st.Literal+st.Matched != int64(len(next)) {
		t.Fatalf("a push in shares: %d bytes, mode %v, counts %+v", len(got), fi.Mode(), st)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary name after the push: %v", err)
	}

	// A share that sends another's ranges fails, and so does the push.
	final2 := filepath.Join(dir, "final2")
	if _, err := push(c, tmp, final2, others, 2, false); !isDeltaError(err) {
		t.Errorf("a push with a share failed: %v, want the helper's refusal", err)
	}
	for _, p := range []string{tmp, final2} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after a push with a share failed, %s: %v", filepath.Base(p), err)
		}
	}
	// The channels are in step: the push again, whole.
	if _, err := push(c, tmp, final2, others, 0, false); err != nil {
		t.Errorf("a push after one failed: %v", err)
	}
}

// A pull's delta asked for in shares on channels of their own, the
// signature made once and sent on each, is applied from all of them at
// once; a request for a share past the count is out of step, and ends
// the service.
func TestDeltaServiceShares(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(11, 5<<20)
	next := bytes.Clone(old)
	copy(next[2<<20:], randomBytes(12, 1<<20))
	src := filepath.Join(dir, "src")
	os.WriteFile(src, next, 0o644)
	bl := delta.BlockSize(int64(len(old)))
	log := delta.NewSignatureLog()
	go func() { log.Close(delta.SignTo(ctx, bytes.NewReader(old), int64(len(old)), bl, log)) }()
	for _, inPlace := range []bool{false, true} {
		out := &memFile{}
		b := delta.Basis{R: bytes.NewReader(old), Size: int64(len(old)), BlockLen: bl}
		if inPlace {
			out.b = bytes.Clone(old)
			b.R, b.InPlace = out, true
		}
		const n = 3
		g := delta.Gather(ctx, n, b, out, int64(len(next)))
		errs := make(chan error, n)
		for i := range n {
			c := deltaPair(t)
			go func() {
				_, err := c.DiffStream(ctx, src, int64(len(next)), log.CopyTo, inPlace, delta.Share{N: n, I: i}, g.Apply(i))
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("inPlace %v: %v", inPlace, err)
			}
		}
		if !bytes.Equal(out.b[:len(next)], next) {
			t.Fatalf("inPlace %v: not the new file", inPlace)
		}
	}
	a, b := net.Pipe()
	go func() { ServeDelta(ctx, b, b); b.Close() }()
	c, err := NewDeltaClient(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.DiffStream(ctx, src, int64(len(next)), log.CopyTo, false, delta.Share{N: 2, I: 2}, func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if err == nil || !c.Broken() {
		t.Errorf("share 2 of 2: %v (broken %v), want the service ended", err, c.Broken())
	}
}

// TestDeltaServiceFollow: the helper hashes a file as far as the client
// says it is written, while it is written; a file that cannot be
// followed, or marks that go back or past the size, give an error and
// leave the service in step.
func TestDeltaServiceFollow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := randomBytes(9, 5<<20+123)
	p := filepath.Join(dir, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := deltaPair(t)
	written := make(chan int64)
	type result struct {
		sum []byte
		err error
	}
	res := make(chan result, 1)
	go func() {
		sum, err := c.FollowSHA256(ctx, p, int64(len(data)), written)
		res <- result{sum, err}
	}()
	// Written front to back in pieces, each said once it is there.
	for off := 0; off < len(data); {
		n := min(700_000, len(data)-off)
		f.WriteAt(data[off:off+n], int64(off))
		off += n
		written <- int64(off)
	}
	close(written)
	r := <-res
	if want := sha256.Sum256(data); r.err != nil || !bytes.Equal(r.sum, want[:]) {
		t.Fatalf("followed: %x (%v), want %x", r.sum, r.err, want)
	}

	follow := func(path string, size int64, marks ...int64) error {
		ch := make(chan int64, len(marks))
		for _, m := range marks {
			ch <- m
		}
		close(ch)
		_, err := c.FollowSHA256(ctx, path, size, ch)
		return err
	}
	for _, tc := range []struct {
		name  string
		path  string
		size  int64
		marks []int64
	}{
		{"no such file", filepath.Join(dir, "none"), 10, []int64{5, 10}},
		{"a mark back", p, int64(len(data)), []int64{100, 50, int64(len(data))}},
		{"a mark past the size", p, 100, []int64{101}},
		{"short of the size", p, int64(len(data)), []int64{1000}},
		{"longer than the file", p, int64(len(data)) + 10, []int64{int64(len(data)) + 10}},
	} {
		var de *DeltaError
		if err := follow(tc.path, tc.size, tc.marks...); !errors.As(err, &de) {
			t.Errorf("%s: %v, want the helper's error", tc.name, err)
		}
		if c.Broken() {
			t.Fatalf("%s: the service is out of step", tc.name)
		}
	}
	if err := inStep(ctx, c, p, int64(len(data))); err != nil {
		t.Errorf("after the follows: %v", err)
	}
}

// countingConn counts the bytes read from and written to a channel.
type countingConn struct {
	io.ReadWriteCloser
	mu          sync.Mutex
	read, wrote int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.ReadWriteCloser.Read(p)
	c.mu.Lock()
	c.read += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.ReadWriteCloser.Write(p)
	c.mu.Lock()
	c.wrote += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) counts() (read, wrote int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read, c.wrote
}

// -z: a compressible file's deltas go compressed both ways, a push and
// a pull, fresh and in place, rebuilding the same files on fewer bytes
// than the literal data; and a client that asks for none still gets
// none after one that did.
func TestDeltaServiceCompressed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var text bytes.Buffer
	for i := range 60_000 {
		fmt.Fprintf(&text, "line %d of a log that compresses well\n", i)
	}
	old := text.Bytes()
	next := bytes.Clone(old)
	// A changed run in the middle: the literal data, compressible.
	copy(next[700_000:], bytes.Repeat([]byte("changed and compressible "), 20_000))
	basis := filepath.Join(dir, "f")

	a, b := net.Pipe()
	go func() { ServeDelta(ctx, b, b); b.Close() }()
	cc := &countingConn{ReadWriteCloser: a}
	c, err := NewDeltaClient(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for _, inPlace := range []bool{false, true} {
		for _, z := range []bool{true, false} {
			c.Compress(z)
			// Push.
			os.WriteFile(basis, old, 0o644)
			tmp := ""
			if !inPlace {
				tmp = filepath.Join(dir, "tmp")
				os.Remove(tmp)
			}
			_, w0 := cc.counts()
			_, st, err := signPatch(ctx, c, basis, int64(len(old)), tmp, next, delta.DiffOptions{})
			if err != nil {
				t.Fatalf("push (in place %v, -z %v): %v", inPlace, z, err)
			}
			_, w1 := cc.counts()
			rebuilt := tmp
			if inPlace {
				rebuilt = basis
			}
			if got, _ := os.ReadFile(rebuilt); !bytes.Equal(got, next) {
				t.Fatalf("push (in place %v, -z %v): %d bytes, not the new file's", inPlace, z, len(got))
			}
			if sent := w1 - w0; z && sent > st.Literal/4 || !z && sent < st.Literal {
				t.Errorf("push (in place %v, -z %v): %d bytes sent for %d of literal data", inPlace, z, sent, st.Literal)
			}

			// Pull: the helper has the new file, this end the old.
			src := filepath.Join(dir, "src")
			os.WriteFile(src, next, 0o644)
			local := &memFile{b: bytes.Clone(old)}
			out := &memFile{b: nil}
			if inPlace {
				out = local
			}
			lsig, _ := delta.Sign(ctx, bytes.NewReader(old), int64(len(old)), 0)
			r0, _ := cc.counts()
			st, err = c.Diff(ctx, src, int64(len(next)), lsig, inPlace, func(r io.Reader) error {
				_, _, err := delta.Apply(ctx, r, delta.Basis{R: local, Size: lsig.Size, BlockLen: lsig.BlockLen, InPlace: inPlace}, out, int64(len(next)))
				return err
			})
			if err != nil {
				t.Fatalf("pull (in place %v, -z %v): %v", inPlace, z, err)
			}
			r1, _ := cc.counts()
			if !bytes.Equal(out.b[:len(next)], next) {
				t.Fatalf("pull (in place %v, -z %v): not the helper's file", inPlace, z)
			}
			if got := r1 - r0; z && got > st.Literal/4 || !z && got < st.Literal {
				t.Errorf("pull (in place %v, -z %v): %d bytes received for %d of literal data", inPlace, z, got, st.Literal)
			}
		}
	}
}

// heldReads is a file of zeros whose reads past held wait until release
// is closed.
type heldReads struct {
	held    int64
	release chan struct{}
}

func (h *heldReads) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > h.held {
		<-h.release
	}
	clear(p)
	return len(p), nil
}

func (h *heldReads) Close() error { return nil }

// heldFiles opens every file as f.
type heldFiles struct {
	osFiles
	f *heldReads
}

func (h heldFiles) Open(string, int64) (ReadAtCloser, error) { return h.f, nil }

// closeHeld opens files as osFiles does, each one's Close saying it was
// called (called) and then waiting for release.
type closeHeld struct {
	osFiles
	called, release chan struct{}
	once            *sync.Once
}

func (h closeHeld) Open(path string, size int64) (ReadAtCloser, error) {
	f, err := h.osFiles.Open(path, size)
	if err != nil {
		return nil, err
	}
	return heldCloser{f, h}, nil
}

type heldCloser struct {
	ReadAtCloser
	h closeHeld
}

func (c heldCloser) Close() error {
	c.h.once.Do(func() { close(c.h.called) })
	<-c.h.release
	return c.ReadAtCloser.Close()
}

// TestPushClosesTheReplacedFileOnceAnswered: a push that renames the
// new file over its basis answers before it closes the basis, whose last
// close frees the replaced file's blocks; it closes it before the next
// request.
func TestPushClosesTheReplacedFileOnceAnswered(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(3, 300_000)
	next := append(bytes.Clone(old[:100_000]), append([]byte("a change"), old[100_100:]...)...)
	basis := filepath.Join(dir, "f")
	os.WriteFile(basis, old, 0o644)
	files := closeHeld{called: make(chan struct{}), release: make(chan struct{}), once: new(sync.Once)}
	c := deltaPairFiles(t, files)
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.SignPatch(ctx, basis, int64(len(old)), filepath.Join(dir, ".f.tmp"), int64(len(next)), Attrs{RenameTo: basis},
			func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
				_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks})
				return err
			})
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(files.release)
		t.Fatal("no answer while the basis's close was held")
	}
	select {
	case <-files.called:
	case <-time.After(time.Minute):
		t.Fatal("the replaced file was never closed")
	}
	close(files.release)
	if got, _ := os.ReadFile(basis); !bytes.Equal(got, next) {
		t.Errorf("the file renamed into place has %d bytes, not the new file's %d", len(got), len(next))
	}
	// The service goes on.
	if _, _, err := c.Sums(ctx, []string{basis}, []int64{int64(len(next))}); err != nil {
		t.Errorf("a request after the push: %v", err)
	}
}

// TestSignatureStreams: the helper sends the signature run by run as it
// is made: the client has the first run's blocks while the rest of the
// file is still being read, and diffs against them meanwhile.
func TestSignatureStreams(t *testing.T) {
	ctx := context.Background()
	const size = 64 << 20
	bl := delta.BlockSize(size)
	// A run is 8 MiB of the file: its blocks, and the reads of every
	// other run, wait.
	first := int64(8<<20) / int64(bl)
	f := &heldReads{held: 8 << 20, release: make(chan struct{})}
	c := deltaPairFiles(t, heldFiles{f: f})
	timeout := time.AfterFunc(time.Minute, func() { close(f.release) })
	next := make([]byte, 1<<20)
	tmp := filepath.Join(t.TempDir(), "t")
	st, _, err := c.SignPatch(ctx, "f", size, tmp, int64(len(next)), Attrs{}, func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
		if _, err := blocks(ctx, first); err != nil {
			return err
		}
		if !timeout.Stop() {
			return errors.New("the first run's blocks came only once the whole file was read")
		}
		close(f.release)
		_, err := delta.Diff(ctx, sig, bytes.NewReader(next), int64(len(next)), w, delta.DiffOptions{Blocks: blocks})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(tmp); !bytes.Equal(got, next) || st.Matched != int64(len(next)) {
		t.Errorf("rebuilt %d bytes, %+v", len(got), st)
	}
}

// TestDiffAhead: a pull asked before the file was listed (its size left
// to the helper) is diffed while nothing reads its delta, which the
// later DiffStream of the same file reads and checks against the size
// listed then; a size that differs fails the file, not silently; a
// request of another kind, or of another file, gives the channel up.
func TestDiffAhead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := randomBytes(7, 3<<20)
	next := bytes.Clone(old)
	copy(next[2<<20:], "a change ahead")
	next = append(next, "and more"...)
	src := filepath.Join(dir, "src")
	os.WriteFile(src, next, 0o644)
	bl := delta.BlockSize(int64(len(old)))
	var signs atomic.Int32
	sign := func(w io.Writer) error {
		signs.Add(1)
		return delta.SignTo(ctx, bytes.NewReader(old), int64(len(old)), bl, w)
	}
	apply := func(out *memFile, size int64) func(io.Reader) error {
		return func(r io.Reader) error {
			_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(old), Size: int64(len(old)), BlockLen: bl}, out, size)
			return err
		}
	}

	c := deltaPair(t)
	if err := c.DiffAhead(src, sign, false, delta.Share{}); err != nil {
		t.Fatal(err)
	}
	out := &memFile{}
	st, err := c.DiffStream(ctx, src, int64(len(next)), func(io.Writer) error {
		t.Error("a pull asked ahead signed again")
		return nil
	}, false, delta.Share{}, apply(out, int64(len(next))))
	if err != nil || !bytes.Equal(out.b, next) || signs.Load() != 1 {
		t.Fatalf("pull asked ahead: %v (signed %d times)", err, signs.Load())
	}
	if st.Literal > 2*int64(bl) {
		t.Errorf("pull asked ahead sent %d literal bytes for one change", st.Literal)
	}
	// The channel is in step: a pull asked now is answered.
	out = &memFile{}
	if _, err := c.DiffStream(ctx, src, int64(len(next)), sign, false, delta.Share{}, apply(out, int64(len(next)))); err != nil || !bytes.Equal(out.b, next) {
		t.Fatalf("pull after one asked ahead: %v", err)
	}

	// A service given up part way ends with the channel: its error
	// then is the cut's.
	cutPair := func() *DeltaClient {
		a, b := net.Pipe()
		go func() { ServeDelta(ctx, b, b); b.Close() }()
		c, err := NewDeltaClient(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Listed at another size than the helper found: refused.
	c = cutPair()
	if err := c.DiffAhead(src, sign, false, delta.Share{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiffStream(ctx, src, int64(len(next))-1, sign, false, delta.Share{}, apply(&memFile{}, int64(len(next))-1)); err == nil {
		t.Error("a pull asked ahead of a file listed at another size was applied")
	}

	// Another file, or another request: the channel is given up.
	for name, ask := range map[string]func(c *DeltaClient) error{
		"another file": func(c *DeltaClient) error {
			_, err := c.DiffStream(ctx, src+"x", int64(len(next)), sign, false, delta.Share{}, apply(&memFile{}, -1))
			return err
		},
		"made in place": func(c *DeltaClient) error {
			_, err := c.DiffStream(ctx, src, int64(len(next)), sign, true, delta.Share{}, apply(&memFile{}, -1))
			return err
		},
		"another share": func(c *DeltaClient) error {
			_, err := c.DiffStream(ctx, src, int64(len(next)), sign, false, delta.Share{N: 2, I: 1}, apply(&memFile{}, -1))
			return err
		},
		"sums": func(c *DeltaClient) error {
			_, _, err := c.SHA256s(ctx, []string{src}, []int64{int64(len(next))})
			return err
		},
	} {
		c := cutPair()
		if err := c.DiffAhead(src, sign, false, delta.Share{}); err != nil {
			t.Fatal(err)
		}
		if err := ask(c); !errors.Is(err, ErrAheadUnused) || !c.Broken() {
			t.Errorf("%s after a pull asked ahead: %v (broken %v), want the channel given up", name, err, c.Broken())
		}
	}
}

// The service's warming starts once the hello is out, and stops at a
// request whose answer is small (sums, a share of a push) or at the
// service's end: not at a pull, a push or a walk, whose answers it is
// for.
func TestServeDeltaWarm(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, randomBytes(3, 100_000), 0o644)
	for _, sums := range []bool{false, true} {
		a, b := net.Pipe()
		out := &countingConn{ReadWriteCloser: b}
		var started, stopped atomic.Int32
		var wroteFirst int64
		done := make(chan error, 1)
		go func() {
			done <- serveDelta(ctx, b, out, osFiles{}, func() func() {
				_, wroteFirst = out.counts()
				started.Add(1)
				return func() { stopped.Add(1) }
			})
			b.Close()
		}()
		c, err := NewDeltaClient(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if sums {
			if err := inStep(ctx, c, p, 100_000); err != nil {
				t.Fatal(err)
			}
			if stopped.Load() != 1 {
				t.Error("sums asked for: the warming goes on")
			}
		} else {
			if _, _, err := c.Walk(ctx, dir, 100, 1<<20, filter.Prune{}); err != nil {
				t.Fatal(err)
			}
			if stopped.Load() != 0 {
				t.Error("a walk asked for: the warming stopped")
			}
		}
		c.Close()
		<-done
		if started.Load() != 1 || stopped.Load() != 1 || wroteFirst != int64(len(deltaHello)) {
			t.Errorf("sums %v: warming started %d times (%d bytes out before), stopped %d times", sums, started.Load(), wroteFirst, stopped.Load())
		}
	}
}
