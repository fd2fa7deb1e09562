package transfer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// ReadFileList reads a --files-from list: one path per line, or per
// NUL-terminated record when nul is set. Paths are relative to the source
// directory; blank entries are ignored, and a path that is absolute or
// climbs out with ".." is an error, as it would escape the target.
func ReadFileList(r io.Reader, nul bool) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if nul {
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			if i := bytes.IndexByte(data, 0); i >= 0 {
				return i + 1, data[:i], nil
			}
			if atEOF && len(data) > 0 {
				return len(data), data, nil
			}
			return 0, nil, nil
		})
	}
	var list []string
	for n := 1; sc.Scan(); n++ {
		p := sc.Text()
		if !nul {
			p = strings.TrimSuffix(p, "\r")
		}
		if strings.TrimSpace(p) == "" {
			continue
		}
		clean, err := cleanRel(p)
		if err != nil {
			return nil, fmt.Errorf("read file list: entry %d: %w", n, err)
		}
		list = append(list, clean)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read file list: %w", err)
	}
	return list, nil
}

// cleanRel returns p as a clean slash-separated relative path that stays
// below the directory it is joined to.
func cleanRel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("invalid path %q: contains NUL", p)
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("invalid path %q: must be relative to the source", p)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("invalid path %q: must name something below the source", p)
	}
	for _, el := range strings.Split(c, "/") {
		if err := ValidName(el); err != nil {
			return "", err
		}
	}
	return c, nil
}

// copyList copies Options.FilesFrom from the one source directory in srcs
// to the same relative paths below target.
func (c *copier) copyList(ctx context.Context, srcs []Endpoint, target Endpoint) (*Result, error) {
	if len(srcs) != 1 {
		return c.res, &Error{Op: "copy list to", Path: target.String(), Err: errors.New("needs exactly one source"),
			Hint: "with --files-from give the directory the listed paths are relative to, then the target"}
	}
	root := srcs[0]
	if si, err := root.FS.Stat(root.Path); err != nil {
		return c.res, &Error{Op: "read", Path: root.String(), Err: err}
	} else if !si.IsDir() {
		return c.res, &Error{Op: "copy list from", Path: root.String(), Err: ErrNotDirectory,
			Hint: "with --files-from the source is the directory the listed paths are relative to"}
	}
	if err := c.mkdirAll(target, nil); err != nil {
		return c.res, err
	}
	for _, rel := range c.opts.FilesFrom {
		if err := ctx.Err(); err != nil {
			return c.res, err
		}
		elems := strings.Split(rel, "/")
		src := Endpoint{root.FS, root.FS.Join(append([]string{root.Path}, elems...)...)}
		si, err := src.FS.Stat(src.Path)
		if err != nil {
			if c.opts.keeps(rel) {
				c.failFile(src, &Error{Op: "read", Path: src.String(), Err: err})
			}
			continue
		}
		if !si.IsDir() && !c.opts.keeps(rel) {
			continue
		}
		if err := c.mkdirAll(target, elems[:len(elems)-1]); err != nil {
			c.fail(err)
			continue
		}
		dst := Endpoint{target.FS, target.FS.Join(append([]string{target.Path}, elems...)...)}
		c.copyAny(ctx, src, dst, si, rel, 0, false, nil)
	}
	if err := ctx.Err(); err != nil {
		return c.res, err
	}
	return c.res, nil
}

// mkdirAll makes sure base and the directories elems name below it exist.
func (c *copier) mkdirAll(base Endpoint, elems []string) error {
	p := base.Path
	for i := -1; i < len(elems); i++ {
		if i >= 0 {
			p = base.FS.Join(p, elems[i])
		}
		d := Endpoint{base.FS, p}
		if c.knownDir(d) {
			continue
		}
		fi, err := d.FS.Stat(d.Path)
		switch {
		case err == nil && fi.IsDir():
			c.addKnownDir(d)
			continue
		case err == nil:
			return &Error{Op: "create directory", Path: d.String(), Err: ErrNotDirectory}
		case !errors.Is(err, fs.ErrNotExist):
			return &Error{Op: "stat", Path: d.String(), Err: err}
		}
		if err := d.FS.Mkdir(d.Path); err != nil {
			// Shards of one run create the same directories at once.
			if fi, serr := d.FS.Stat(d.Path); serr != nil || !fi.IsDir() {
				return &Error{Op: "create directory", Path: d.String(), Err: err}
			}
			c.addKnownDir(d)
			continue
		}
		c.addKnownDir(d)
		c.record(func(r *Result) { r.Dirs++ })
		c.logf("created directory %s", d)
	}
	return nil
}
