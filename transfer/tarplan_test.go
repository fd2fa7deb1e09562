package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
)

// slowLister is a server with GNU tar whose listings take a while, and
// which counts how many run at once.
type slowLister struct {
	Local
	now, most atomic.Int32
}

func (*slowLister) Label() string { return "fake:" }

func (*slowLister) TarProbe(context.Context) (protocol.TarSupport, error) {
	return protocol.TarSupport{GNU: true, Version: "tar (GNU tar) 1.35"}, nil
}

func (*slowLister) TarExtract(context.Context, string, protocol.TarOptions) (io.WriteCloser, error) {
	return nil, errors.New("slowLister: only creates")
}

func (*slowLister) TarCreate(_ context.Context, dir string, names iter.Seq[[]string], _ protocol.TarOptions) (io.ReadCloser, error) {
	return serveTar(dir, names, nil, ""), nil
}

func (s *slowLister) ReadDir(name string) ([]fs.FileInfo, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(10 * time.Millisecond)
	return s.Local.ReadDir(name)
}

// Tar mode lists a tree with the walk SFTP mode copies it with: no more
// directories at once than that walk lists, whichever mode copies.
func TestTarListingBoundOfTheWalk(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	for i := range 200 {
		write(t, filepath.Join(src, fmt.Sprintf("d%03d", i), "f"), strings.Repeat("x", i))
	}
	for _, mode := range []TarMode{TarOff, TarForce} {
		server := &slowLister{}
		target := filepath.Join(t.TempDir(), "tree")
		var logs []string
		o := Options{Recursive: true, Tar: TarOptions{Mode: mode},
			Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }}
		res, err := Copy(context.Background(), []Endpoint{{server, src}}, local(target), o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("mode %d: %v %v", mode, err, res.Errors)
		}
		if used := strings.Contains(strings.Join(logs, "\n"), "(tar)"); used != (mode == TarForce) {
			t.Fatalf("mode %d: tar streams used %v", mode, used)
		}
		if res.Files != 200 || res.Dirs != 201 {
			t.Errorf("mode %d: %d files, %d directories; want 200 and 201", mode, res.Files, res.Dirs)
		}
		if got, want := shortTree(t, target), shortTree(t, src); got != want {
			t.Errorf("mode %d: target differs from the source", mode)
		}
		if most := server.most.Load(); most > remoteDirs {
			t.Errorf("mode %d: %d listings at once, want at most %d", mode, most, remoteDirs)
		}
	}
}
