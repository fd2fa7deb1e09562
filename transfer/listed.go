package transfer

import (
	"context"
	"io/fs"
	"strings"
)

// Listed is a regular file a caller has listed and decided to copy: its
// path relative to the source directory (slash-separated, checked as
// cleanRel checks a --files-from entry) and its info.
type Listed struct {
	Rel  string
	Info fs.FileInfo
	// To is the path below the target directory, when not Rel (a file
	// copied under another name).
	To string
	// Fresh says the target has nothing at Rel: its directory was made by
	// this run, or its listing showed no such name. The copy then does
	// not look at the target first.
	Fresh bool
}

// CopyFiles copies files from below the directory src to the same paths
// below the directory dst, whose directories must exist. It is the
// engine's entry for a caller that walked and planned both trees itself
// (hpncp sync): no walk, no target rules and no skip decisions are made
// here, but every file goes through the same scheduler, movers, checks
// and finishing as Copy's. Failures are in the result, as Copy's.
func CopyFiles(ctx context.Context, src, dst Endpoint, files []Listed, o Options) (_ *Result, err error) {
	o.Recursive = true // the small-file batches are prepared for a tree
	c := newCopier(o, []Endpoint{src}, dst)
	c.prepare(ctx, src.FS)
	c.prepare(ctx, dst.FS)
	defer func() {
		c.finish(ctx)
		c.umask.wait()
		if err == nil {
			err = ctx.Err()
		}
	}()
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return c.res, err
		}
		rel, err := cleanRel(f.Rel)
		to := rel
		if err == nil && f.To != "" {
			to, err = cleanRel(f.To)
		}
		if err != nil {
			c.fail(&Error{Op: "copy", Path: src.String(), Err: err})
			continue
		}
		if !f.Info.Mode().IsRegular() {
			c.fail(&Error{Op: "copy", Path: src.FS.Join(src.Path, rel), Err: errNotRegular})
			continue
		}
		if !c.opts.Shard.Keep(rel) {
			continue
		}
		s := Endpoint{src.FS, src.FS.Join(append([]string{src.Path}, strings.Split(rel, "/")...)...)}
		d := Endpoint{dst.FS, dst.FS.Join(append([]string{dst.Path}, strings.Split(to, "/")...)...)}
		c.goFile(ctx, s, d, f.Info, f.Fresh)
	}
	return c.res, nil
}
