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
	// Target, when not nil, is the regular file the caller's listing
	// found at the target: the copy takes it for what is there rather
	// than looking again, a round trip a file on a long path.
	Target fs.FileInfo
	// Direct says the target's directory is private to this run until
	// the caller renames it into place (a staging directory it made):
	// a new small file is then written under its own name there,
	// without a temporary file and a rename of its own. Its bytes are
	// checked as any file's, and a failed file is removed.
	Direct bool
}

// CopyFiles copies files from below the directory src to the same paths
// below the directory dst, whose directories must exist. It is the
// engine's entry for a caller that walked and planned both trees itself
// (hpncp sync): no walk, no target rules and no skip decisions are made
// here, but every file goes through the same scheduler, movers, checks
// and finishing as Copy's. Failures are in the result, as Copy's.
func CopyFiles(ctx context.Context, src, dst Endpoint, files []Listed, o Options) (_ *Result, err error) {
	o.Recursive = true // the small-file batches are prepared for a tree
	if overSCP([]Endpoint{src}, dst) {
		return &Result{}, &OptionError{Msg: "a list of files cannot be copied over the legacy scp protocol",
			Hint: "the legacy scp protocol copies whole operands: this needs an SFTP server"}
	}
	dst, err = Confine(dst)
	if err != nil {
		return &Result{}, err
	}
	// The lister took links as links: a file is read only as listed.
	src = NoFollow(src)
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
	var jobs []listedJob
	for _, f := range files {
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
		if !c.opts.keeps(rel) {
			continue
		}
		s := Endpoint{src.FS, src.FS.Join(append([]string{src.Path}, strings.Split(rel, "/")...)...)}
		d := Endpoint{dst.FS, dst.FS.Join(append([]string{dst.Path}, strings.Split(to, "/")...)...)}
		if f.Direct && f.Fresh {
			if c.direct == nil {
				c.direct = map[string]bool{}
			}
			c.direct[d.Path] = true
		}
		if f.Target != nil && !f.Fresh && f.Target.Mode().IsRegular() {
			if c.listed == nil {
				c.listed = map[string]fs.FileInfo{}
			}
			c.listed[d.Path] = f.Target
		}
		jobs = append(jobs, listedJob{s, d, f.Info, f.Fresh})
	}
	// c.direct and c.listed are complete before the first job reads
	// them.
	for _, j := range jobs {
		if err := ctx.Err(); err != nil {
			return c.res, err
		}
		c.goFile(ctx, j.src, j.dst, j.info, j.fresh)
	}
	return c.res, nil
}

// listedJob is a file of CopyFiles, checked and placed.
type listedJob struct {
	src, dst Endpoint
	info     fs.FileInfo
	fresh    bool
}
