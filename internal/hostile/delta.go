package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/hpncp/hpncp/helper"
)

// HelperPath is the helper's command on a hostile server: given to
// hpncp as --helper-path, it runs the delta service (hpncp serve --delta)
// over the tree's files, damaged as the tree's DeltaFlip says.
const HelperPath = "/hpncp-hostile-helper"

// serveDelta answers the helper's delta service from t.
func (t *Tree) serveDelta(stdin io.Reader, stdout io.Writer) int {
	out := stdout
	if t.DeltaFlip > 0 {
		out = &flipper{w: stdout, at: t.DeltaFlip}
	}
	if err := helper.ServeDeltaFiles(context.Background(), stdin, out, treeFiles{t}); err != nil {
		return 1
	}
	return 0
}

// treeFiles are a tree's regular files, as the delta service reads them;
// it writes none (a hostile server is only ever read from).
type treeFiles struct{ t *Tree }

func (f treeFiles) Open(name string, size int64) (helper.ReadAtCloser, error) {
	p, ok := rel(path.Join(Home, name))
	if strings.HasPrefix(name, "/") {
		p, ok = rel(name)
	}
	e, _, found := f.t.lookup(p, true)
	if !ok || !found || e.Kind != File {
		return nil, fmt.Errorf("%s: no such file", name)
	}
	if size >= 0 && int64(len(e.Data)) != size {
		return nil, fmt.Errorf("%s: %d bytes, not %d", name, len(e.Data), size)
	}
	return readerAt{bytes.NewReader(e.Data)}, nil
}

func (treeFiles) CreateTemp(name string) (helper.WriteAtCloser, error) {
	return nil, errors.New("read-only")
}

func (treeFiles) Remove(name string) error { return errors.New("read-only") }

func (treeFiles) Chtimes(name string, atime, mtime time.Time) error { return errors.New("read-only") }

func (treeFiles) Rename(oldname, newname string) error { return errors.New("read-only") }

func (treeFiles) OpenUpdate(name string, size int64) (helper.UpdateFile, error) {
	return nil, errors.New("read-only")
}

// OpenWritten: the tree is never written, so no file of it is being.
func (treeFiles) OpenWritten(name string) (helper.ReadAtCloser, error) {
	return nil, errors.New("read-only")
}

type readerAt struct{ *bytes.Reader }

func (readerAt) Close() error { return nil }

// flipper flips the bits of the byte at offset at of what it writes.
type flipper struct {
	w     io.Writer
	n, at int64
}

func (f *flipper) Write(p []byte) (int, error) {
	if i := f.at - f.n; i >= 0 && i < int64(len(p)) {
		q := bytes.Clone(p)
		q[i] ^= 0xff
		p = q
	}
	f.n += int64(len(p))
	return f.w.Write(p)
}

// ReadDir lists the directory at name as the SFTP server does, links on
// the way followed.
func (f treeFiles) ReadDir(name string) ([]fs.FileInfo, error) {
	p, ok := rel(path.Join(Home, name))
	if strings.HasPrefix(name, "/") {
		p, ok = rel(name)
	}
	if !ok {
		return nil, fs.ErrNotExist
	}
	e, real, found := f.t.lookup(p, true)
	if !found || e.Kind != Dir {
		return nil, fs.ErrNotExist
	}
	es, ok := f.t.list(real)
	if !ok {
		return nil, fs.ErrNotExist
	}
	out := make([]fs.FileInfo, len(es))
	for i, e := range es {
		out[i] = info{e}
	}
	return out, nil
}

// Readlink reads the link at name: the first entry of its name that is
// a link, as the SFTP server's Readlink.
func (f treeFiles) Readlink(name string) (string, error) {
	p, ok := rel(path.Join(Home, name))
	if strings.HasPrefix(name, "/") {
		p, ok = rel(name)
	}
	if !ok {
		return "", fs.ErrNotExist
	}
	if dir, real, ok := f.t.lookup(path.Dir(p), true); ok && dir.Kind == Dir {
		es, _ := f.t.list(real)
		for _, e := range es {
			if e.Name == path.Base(p) && e.Kind == Symlink {
				return e.Target, nil
			}
		}
	}
	return "", fs.ErrNotExist
}
