// Package mirror makes a target tree match a source tree with rsync's
// semantics: it lists both ends (listTree), decides every change as
// rsync's generator would, itemized in rsync's --itemize-changes format
// (makePlan), and carries the plan out (Plan.Run), the files through the
// copy engine (transfer.CopyFiles). hpncp sync is its command line.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/hpncp/hpncp/internal/filter"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/transfer"
)

// Sync lists the source src and the target dst and plans what makes dst
// match src. name is the source root's rsync name: "." when contents is
// set (a source given with a trailing slash: what the directory holds),
// its base name otherwise (the directory or file itself, which dst is
// then the place of). A target missing is planned as empty.
//
// fresh says dst was just created for this run (or, in a dry run, would
// be): it is not listed, and its root is planned as new.
func Sync(ctx context.Context, src, dst transfer.Endpoint, name string, contents, fresh bool, o Options) (*Plan, error) {
	// The directory the user named holds what the run writes; without
	// contents, dst is the place of name below it, which a link there
	// must not redirect.
	top := dst.Path
	if !contents {
		top = dst.FS.Dir(dst.Path)
	}
	dst, err := transfer.ConfineAt(dst, top)
	if err != nil {
		return nil, err
	}
	srcL := lister{filter: o.Filter, links: o.Links, follow: contents, ids: o.HardLinks}
	dstL := lister{links: true, follow: contents, ids: o.HardLinks}
	if !o.DeleteExcluded {
		dstL.filter = o.Filter
	}
	if !o.Recursive {
		srcL.descend = func(string) bool { return false }
		dstL.descend = srcL.descend
	}
	// The remote tree is listed by its helper in one request, where one
	// answers: a round trip or more a directory otherwise.
	if o.Recursive && o.Delta != nil {
		if src.FS.Label() != "" {
			srcL.walk = o.walker(src.FS)
		} else if dst.FS.Label() != "" && !fresh {
			dstL.walk = o.walker(dst.FS)
		}
	}
	var (
		wg         sync.WaitGroup
		st, dt     *Tree
		serr, derr error
	)
	wg.Add(2)
	go func() { defer wg.Done(); st, serr = srcL.listTree(ctx, src, name) }()
	go func() {
		defer wg.Done()
		if fresh {
			dt = &Tree{Root: dst, Entries: map[string]*Entry{}}
			return
		}
		dt, derr = dstL.listTree(ctx, dst, name)
	}()
	wg.Wait()
	if serr != nil {
		return nil, &transfer.Error{Op: "read", Path: src.String(), Err: serr}
	}
	if derr != nil && !errors.Is(derr, fs.ErrNotExist) {
		return nil, &transfer.Error{Op: "read", Path: dst.String(), Err: derr}
	}
	root := st.Entries[name]
	if !contents && o.Filter != nil && o.Filter.Excluded(name, root.isDir()) {
		return &Plan{Src: &Tree{Root: src, Entries: map[string]*Entry{}}, Dst: dt, SrcName: name}, nil
	}
	if root.isDir() && !o.Recursive {
		p := &Plan{Src: &Tree{Root: src, Entries: map[string]*Entry{}}, Dst: dt, SrcName: name}
		p.add(&Change{kind: message, Name: name, text: fmt.Sprintf("skipping directory %s", name)})
		return p, nil
	}
	if d := dt.Entries[name]; d != nil && !root.isDir() && d.isDir() && contents {
		return nil, &transfer.Error{Op: "sync to", Path: dst.String(), Err: errors.New("is a directory")}
	}
	return makePlan(ctx, st, dt, name, o), nil
}

// walker is a lister's walk through the helper at end.
func (o Options) walker(end transfer.FS) func(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (*walkedTree, bool) {
	return func(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (*walkedTree, bool) {
		s, release, err := o.Delta.DeltaSession(ctx, end)
		if err != nil {
			o.logf("listing %s%s a directory at a time: %v", end.Label(), root, err)
			return nil, false
		}
		defer release()
		dirs, errs, err := s.Walk(ctx, root, maxEntries, maxBytes, prune)
		if err != nil {
			o.logf("listing %s%s a directory at a time: the helper's walk failed: %s", end.Label(), root, vis.String(err.Error()))
			return nil, false
		}
		n := 0
		for _, es := range dirs {
			n += len(es)
		}
		pruned := ""
		if len(prune.Rules) > 0 {
			pruned = ", what the filter rules exclude left out there"
		}
		o.logf("listed %s%s by its helper: %d entries in %d directories%s", end.Label(), root, n, len(dirs), pruned)
		return newWalkedTree(end, root, dirs, errs), true
	}
}

// Counts returns the tree's regular files, directories and links.
func (t *Tree) Counts() (files, dirs, links int) {
	for _, e := range t.Entries {
		switch {
		case e.isDir():
			dirs++
		case e.isLink():
			links++
		case e.isFile():
			files++
		}
	}
	return files, dirs, links
}

// Bytes is the size of the tree's regular files.
func (t *Tree) Bytes() int64 {
	var n int64
	for _, e := range t.Entries {
		if e.isFile() {
			n += e.Info.Size()
		}
	}
	return n
}

// Printed says a change is a message, printed whether or not the run
// is a dry one, before the run.
func (c *Change) Printed() bool { return c.kind == message && !c.verbose }

// Verbose says a change is a message rsync prints only with -v.
func (c *Change) Verbose() bool { return c.kind == message && c.verbose }

// unsafeLink says whether a link named n (an rsync name) with target
// leads outside the tree, as rsync's --safe-links judges it
// (transfer.UnsafeSymlink): each directory of the name is a level, the
// source operand's own name included when it is part of the names.
func unsafeLink(n, target string) bool {
	return transfer.UnsafeSymlink(target, strings.Count(n, "/"))
}
