package transfer

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
)

// waitingTar is a local directory posing as a server with GNU tar. Its
// extracting tar does not exit until the large file wait names has
// arrived below the directory it extracts into, or until patience runs
// out: an upload whose large files start only after the streams ends
// with the stream failed.
type waitingTar struct {
	Local
	wait     string // slash-separated, relative to the extraction directory; "" for none
	patience time.Duration
	refuse   string // the base name of a directory Mkdir refuses to make
}

func (w *waitingTar) Mkdir(name string) error {
	if w.refuse != "" && filepath.Base(name) == w.refuse {
		return &os.PathError{Op: "mkdir", Path: name, Err: os.ErrPermission}
	}
	return w.Local.Mkdir(name)
}

func (w *waitingTar) Label() string { return "fake:" }

func (w *waitingTar) TarProbe(context.Context) (protocol.TarSupport, error) {
	return protocol.TarSupport{GNU: true, Version: "tar (GNU tar) 1.35"}, nil
}

func (w *waitingTar) TarCreate(context.Context, string, iter.Seq[[]string], protocol.TarOptions) (io.ReadCloser, error) {
	return nil, errors.New("waitingTar: only extracts")
}

func (w *waitingTar) TarExtract(_ context.Context, dir string, _ protocol.TarOptions) (io.WriteCloser, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := extractAll(tar.NewReader(pr), dir)
		// Whatever is left of the archive must not block the writer.
		_, _ = io.Copy(io.Discard, pr)
		done <- err
	}()
	ww := &waitingWriter{pw: pw, done: done, patience: w.patience}
	if w.wait != "" {
		ww.want = filepath.Join(dir, filepath.FromSlash(w.wait))
	}
	return ww, nil
}

type waitingWriter struct {
	pw       *io.PipeWriter
	done     chan error
	want     string
	patience time.Duration
}

func (ww *waitingWriter) Write(b []byte) (int, error) { return ww.pw.Write(b) }

func (ww *waitingWriter) Close() error {
	_ = ww.pw.Close()
	if err := <-ww.done; err != nil || ww.want == "" {
		return err
	}
	for end := time.Now().Add(ww.patience); ; {
		if _, err := os.Stat(ww.want); err == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("tar exited before %s arrived over SFTP", ww.want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// extractAll writes an archive's directories and regular files below dir,
// as tar -x does; a file whose directory does not exist fails it.
func extractAll(tr *tar.Reader, dir string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(h.Name, "/")))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(name, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(name, b, 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected entry %q", h.Name)
		}
	}
}

// TestTarUploadLargeFilesBesideStreams checks that a large file of a new
// directory is on its way while the tar streams run, both into a new
// tree (its temporary tree) and into an existing target directory, that
// a directory SFTP cannot make leaves its large file to follow the
// streams, and that the tree arrives whole, each directory counted once.
func TestTarUploadLargeFilesBesideStreams(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing bool
		fake     *waitingTar
	}{
		{"new tree", false, &waitingTar{wait: "new/sub/big", patience: 5 * time.Second}},
		{"existing directory", true, &waitingTar{wait: "new/sub/big", patience: 5 * time.Second}},
		// A directory SFTP could not make: a stream makes it, and its
		// large file follows the streams.
		{"mkdir refused", true, &waitingTar{refuse: "sub"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "src", "tree")
			for _, f := range []struct {
				rel  string
				size int
			}{{"a/one", 100}, {"a/two", 200}, {"new/sub/three", 300}, {"new/sub/big", 8 << 10}, {"four", 10}} {
				p := filepath.Join(src, filepath.FromSlash(f.rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(strings.Repeat("x", f.size)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			target := filepath.Join(base, "dst")
			if err := os.MkdirAll(filepath.Join(target, "tree"), 0o755); err != nil {
				t.Fatal(err)
			}
			if !tc.existing {
				// A new tree: its temporary tree, renamed into place.
				if err := os.Remove(filepath.Join(target, "tree")); err != nil {
					t.Fatal(err)
				}
			}
			o := Options{Recursive: true, Tar: TarOptions{Mode: TarForce, MaxSize: 1024}, Logf: t.Logf}
			res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{FS: tc.fake, Path: target}, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) > 0 {
				t.Errorf("copy failed: %v", errors.Join(res.Errors...))
			}
			dirs := 3 // a, new, new/sub
			if !tc.existing {
				dirs++
			}
			if res.Files != 5 || res.Dirs != dirs {
				t.Errorf("copied %d files, created %d directories; want 5 and %d", res.Files, res.Dirs, dirs)
			}
			if got, want := shortTree(t, filepath.Join(target, "tree")), shortTree(t, src); got != want {
				t.Errorf("target:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// shortTree is tree with each file's bytes replaced by a digest.
func shortTree(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	for _, line := range tree(t, dir) {
		if name, body, ok := strings.Cut(line, ":"); ok {
			line = fmt.Sprintf("%s: %x", name, sha256.Sum256([]byte(body)))
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// countingTar is waitingTar counting the tar streams started.
type countingTar struct {
	waitingTar
	streams atomic.Int32
}

func (c *countingTar) TarExtract(ctx context.Context, dir string, o protocol.TarOptions) (io.WriteCloser, error) {
	c.streams.Add(1)
	return c.waitingTar.TarExtract(ctx, dir, o)
}

// TestTarAutoKeepsResumableTrees: a new tree holding a file large enough
// to be journaled goes over SFTP by default, since a cut run would leave
// that file in the temporary tree, out of --resume's reach; into an
// existing directory, where it keeps its own temporary name, tar mode
// still carries the small files.
func TestTarAutoKeepsResumableTrees(t *testing.T) {
	for _, existing := range []bool{false, true} {
		base := t.TempDir()
		src := filepath.Join(base, "src", "tree")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if err := os.WriteFile(filepath.Join(src, fmt.Sprint("small", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Sparse: the size is what counts.
		if err := os.Truncate(filepath.Join(src, "small0"), journalMinSize); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(base, "dst")
		if existing {
			if err := os.MkdirAll(filepath.Join(target, "tree"), 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		fake := &countingTar{}
		o := Options{Recursive: true, Tar: TarOptions{Mode: TarAuto, MaxSize: 1024, MinFiles: 2}, Logf: t.Logf}
		res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{FS: fake, Path: target}, o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("existing %v: %v %v", existing, err, res.Errors)
		}
		if got := fake.streams.Load() > 0; got != existing {
			t.Errorf("existing target %v: tar streams used %v, want %v", existing, got, existing)
		}
		if res.Files != 4 {
			t.Errorf("existing target %v: %d files copied, want 4", existing, res.Files)
		}
	}
}
