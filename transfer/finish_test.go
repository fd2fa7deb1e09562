package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/pipeline"
)

type fakeInfo struct {
	fs.FileInfo
	mode fs.FileMode
}

func (f fakeInfo) Mode() fs.FileMode { return f.mode }

func TestFinalAttrs(t *testing.T) {
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	src := fileAttrs{mode: 0o4750, times: true, atime: mtime, mtime: mtime}
	umasked := func() fs.FileMode { return 0o640 }
	for _, c := range []struct {
		name     string
		preserve bool
		existing fs.FileInfo
		want     fileAttrs
	}{
		{"-p: the source's mode and times", true, nil, src},
		{"-p over a target: still the source's", true, fakeInfo{mode: 0o600}, src},
		{"over a target: its mode, no times", false, fakeInfo{mode: 0o604 | fs.ModeSetgid}, fileAttrs{mode: 0o604 | fs.ModeSetgid}},
		{"new: the umask's", false, nil, fileAttrs{mode: 0o640}},
	} {
		called := false
		got := finalAttrs(c.preserve, src, c.existing, func() fs.FileMode { called = true; return umasked() })
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if called != (!c.preserve && c.existing == nil) {
			t.Errorf("%s: the umask asked: %v", c.name, called)
		}
	}
}

// writeTemp writes a temporary file of data beside dst, owner-only as
// the copy creates it.
func writeTemp(t *testing.T, dst string, data string) tempFile {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(dst), TempName(filepath.Base(dst)))
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return tempFile{dst: local(dst), tmp: tmp, op: "copy src to"}
}

func TestFinishRenamesWithModeAndTimes(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "f")
	tf := writeTemp(t, dst, "hello")
	mtime := time.Date(2021, 6, 7, 8, 9, 10, 0, time.UTC)
	a := fileAttrs{mode: 0o751, times: true, atime: mtime, mtime: mtime}
	if err := tf.finish(context.Background(), 5, nil, func() fileAttrs { return a }, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o751 || !fi.ModTime().Equal(mtime) {
		t.Errorf("finished file: %v %v, want -rwxr-x--x %v", fi.Mode(), fi.ModTime(), mtime)
	}
	if _, err := os.Stat(tf.tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary file still there: %v", err)
	}
}

// The stat the caller took, of the mode as created, does not stand for
// the mode wanted.
func TestFinishSetsModeTheStatShowsWrong(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "f")
	tf := writeTemp(t, dst, "hello")
	stat, err := os.Stat(tf.tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.finish(context.Background(), 5, stat, func() fileAttrs { return fileAttrs{mode: 0o644} }, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode() != 0o644 {
		t.Errorf("finished file: %v %v, want -rw-r--r--", fi.Mode(), err)
	}
}

// A file short of what was sent, a failed check or a cancelled context
// leave the target as it was.
func TestFinishRefuses(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	failed := errors.New("sums differ")
	for _, c := range []struct {
		name  string
		ctx   context.Context
		size  int64
		check func() error
		want  error
	}{
		{"short", context.Background(), 6, nil, pipeline.ErrShortWrite},
		{"long", context.Background(), 4, nil, pipeline.ErrShortWrite},
		{"check fails", context.Background(), 5, func() error { return failed }, failed},
		{"cancelled", cancelled, 5, nil, context.Canceled},
	} {
		dst := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		tf := writeTemp(t, dst, "hello")
		asked := false
		err := tf.finish(c.ctx, c.size, nil, func() fileAttrs { asked = true; return fileAttrs{mode: 0o644} }, c.check)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if asked && c.ctx.Err() == nil {
			t.Errorf("%s: the final mode was worked out for a file that failed its checks", c.name)
		}
		if got, _ := os.ReadFile(dst); string(got) != "old" {
			t.Errorf("%s: the target holds %q, want it left as it was", c.name, got)
		}
	}
}
