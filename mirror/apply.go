package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// RunOptions say how a plan is carried out.
type RunOptions struct {
	// Engine are the copy engine's options for the files sent: its
	// pipeline, limit, progress, verification and resume. Run sets the
	// attribute and skip fields from the plan's Options.
	Engine transfer.Options
	// Print, when not nil, receives each itemized line once its change
	// is done.
	Print func(line string)
	// RemoveSource is --remove-source-files: a source file is removed
	// once its target is in place and checked.
	RemoveSource bool
}

// Result is what a run did.
type Result struct {
	Engine  *transfer.Result // the files sent
	Dirs    int              // directories created
	Links   int              // symbolic and hard links made
	Deleted int
	Removed int // source files removed (--remove-source-files)
	Errors  []error
}

// runner carries out one plan.
type runner struct {
	p   *Plan
	o   Options
	ro  RunOptions
	mu  sync.Mutex
	res *Result
	// touched are the directories (rsync names) the plan makes, replaces
	// or removes an entry in: fixDirs sets their times again.
	touched map[string]bool
	// owned is the owner the receiving end gives what it creates, learnt
	// from the first file sent; owners are set only where they differ.
	ownerKnown bool
	ownUID     int
	ownGID     int
	// staged are the new directories made under a temporary name until
	// their contents are in place (stage), by rsync name; dstPath maps
	// names below them.
	staged map[string]stage
}

// stage is a new directory of the target, made as tmp and renamed to
// final once everything inside it is in place. name is its rsync name,
// tmpName the rsync name of tmp.
type stage struct{ name, tmpName, final, tmp string }

func (r *runner) fail(err error) {
	r.mu.Lock()
	r.res.Errors = append(r.res.Errors, err)
	r.mu.Unlock()
}

func (r *runner) print(c *Change) {
	if r.ro.Print != nil && c.Item != "" {
		r.mu.Lock()
		r.ro.Print(c.Line())
		r.mu.Unlock()
	}
}

// message prints a line that is not an itemized change.
func (r *runner) message(line string) {
	if r.ro.Print != nil {
		r.mu.Lock()
		r.ro.Print(line)
		r.mu.Unlock()
	}
}

// dstPath and srcPath are where a name is on either end.
func (r *runner) dstPath(n string) transfer.Endpoint {
	if st, rest, ok := r.stageOf(n); ok {
		fsys := r.p.Dst.Root.FS
		return transfer.Endpoint{FS: fsys, Path: fsys.Join(append([]string{st.tmp}, splitName(rest)...)...)}
	}
	return r.finalPath(n)
}

// finalPath is where a name is on the target once the run is done:
// removals act there, never in a staged directory.
func (r *runner) finalPath(n string) transfer.Endpoint {
	return transfer.Endpoint{FS: r.p.Dst.Root.FS, Path: pathOf(r.p.Dst.Root, r.p.SrcName, n)}
}

// stageOf finds the staged directory that is n or holds it, and the
// rest of n's name below it. It goes by rsync names, never by paths:
// the target's root path is the user's text ("dir/", "/abs/dir/", ""),
// which a path made by joining names below it does not begin with.
func (r *runner) stageOf(n string) (st stage, rest string, ok bool) {
	if len(r.staged) == 0 {
		return stage{}, "", false
	}
	for d := n; d != "."; d = path.Dir(d) {
		if st, ok := r.staged[d]; ok {
			return st, strings.TrimPrefix(n[len(d):], "/"), true
		}
	}
	return stage{}, "", false
}

// unstaged is dstPath's inverse for a message naming a target.
func (r *runner) unstaged(s string) string {
	for _, st := range r.staged {
		s = strings.Replace(s, st.tmp, st.final, 1)
	}
	return s
}

// stage picks the new directories whose parents the target has (the
// tops of the new subtrees) and has them made under a temporary name,
// renamed into place by unstage. A new small file below one then needs
// no temporary file and rename of its own (transfer.Listed.Direct): at
// 50 ms that is one round trip of three per file. A half-written file
// is never under its final name: it is in a directory nobody sees yet,
// and removed there when its copy fails. Only for a remote target, where
// a request costs a round trip.
func (r *runner) stage(mk []*Change) {
	root := r.p.Dst.Root
	if root.FS.Label() == "" {
		return
	}
	made := map[string]bool{}
	for _, c := range mk {
		made[c.Name] = true
	}
	for _, c := range mk {
		if c.Name == "." || made[path.Dir(c.Name)] && c.Name != r.p.SrcName {
			continue
		}
		final := pathOf(root, r.p.SrcName, c.Name)
		tmpBase := transfer.TempName(path.Base(c.Name))
		tmp := root.FS.Join(root.FS.Dir(final), tmpBase)
		if r.staged == nil {
			r.staged = map[string]stage{}
		}
		r.staged[c.Name] = stage{name: c.Name, tmpName: joinName(path.Dir(c.Name), tmpBase), final: final, tmp: tmp}
		if r.ro.Engine.Logf != nil {
			r.ro.Engine.Logf("sync: new directory %s made as %s until its contents are in place", final, tmp)
		}
	}
}

// unstage renames the staged directories into place, also when the run
// was cancelled: what is in them is whole. One that cannot be renamed
// stays staged, and is reported.
func (r *runner) unstage() {
	all := make([]stage, 0, len(r.staged))
	for _, st := range r.staged {
		all = append(all, st)
	}
	left := map[string]stage{}
	var mu sync.Mutex
	fsys := r.p.Dst.Root.FS
	slots.ForEach(len(all), dirRequests, func(i int) {
		st := all[i]
		if err := fsys.Rename(st.tmp, st.final); err != nil {
			r.fail(&transfer.Error{Op: "rename " + st.tmp + " into place as", Path: fsys.Label() + ":" + st.final, Err: err})
			mu.Lock()
			left[st.name] = st
			mu.Unlock()
		}
	})
	r.staged = left
}

func (r *runner) srcPath(n string) transfer.Endpoint {
	return transfer.Endpoint{FS: r.p.Src.Root.FS, Path: pathOf(r.p.Src.Root, r.p.SrcName, n)}
}

// relOf is n relative to the source root, as CopyFiles takes it.
func (r *runner) relOf(n string) string {
	if r.p.SrcName == "." {
		return n
	}
	return strings.TrimPrefix(n, r.p.SrcName+"/")
}

// Run carries out the plan: removals that make way, directories, the
// files (through the copy engine), links, attributes, then --delete's
// removals and the directories' own times and modes, deepest first. A
// failed step is recorded and the others go on; the error is non-nil
// only when ctx ended the run.
func (p *Plan) Run(ctx context.Context, o Options, ro RunOptions) (*Result, error) {
	r := &runner{p: p, o: o, ro: ro, res: &Result{}}
	by := map[kind][]*Change{}
	var clears []*Change
	for _, c := range p.Changes {
		switch {
		case c.kind == remove && c.early:
			by[-1] = append(by[-1], c)
		default:
			by[c.kind] = append(by[c.kind], c)
		}
		if c.clear {
			clears = append(clears, c)
		}
	}
	// The directories an entry is made in, replaced in or removed from:
	// their times change, and only theirs need setting again when the
	// plan found them right.
	r.touched = map[string]bool{}
	for _, c := range p.Changes {
		if c.kind != setAttrs && c.kind != message {
			r.touched[parentName(c.Name)] = true
		}
	}
	r.stage(by[mkDir])
	unstaged := false
	defer func() {
		if !unstaged {
			r.unstage()
		}
	}()
	steps := []struct {
		what string
		run  func()
	}{
		{"removals making way", func() { r.removeAll(ctx, by[-1]) }},
		{"types replaced", func() { r.clearAll(ctx, clears) }},
		{"directories made", func() { r.makeDirs(ctx, by[mkDir]) }},
		{"files sent", func() { r.sendFiles(ctx, by[sendFile]) }},
		{"symbolic links made", func() { r.makeLinks(ctx, by[mkLink]) }},
		{"hard links made", func() { r.hardLinks(ctx, by[hardLink]) }},
		{"attributes fixed", func() { r.fixAttrs(ctx, by[setAttrs], false) }},
		{"new directories renamed into place", func() { r.unstage(); unstaged = true }},
		{"deletions", func() { r.removeAll(ctx, by[remove]) }},
		{"directory times and modes", func() { r.fixDirs(ctx, append(by[mkDir], by[setAttrs]...)) }},
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return r.res, err
		}
		start := time.Now()
		step.run()
		if ro.Engine.Logf != nil {
			ro.Engine.Logf("sync: %s in %v", step.what, time.Since(start).Round(time.Millisecond))
		}
	}
	if ro.RemoveSource {
		r.removeUpToDate(ctx, by[setAttrs])
	}
	return r.res, ctx.Err()
}

// dirRequests bounds the one-request operations on directories (create,
// mode, times) in flight at once. Each is a single SFTP request, which
// the session pipelines: 100 new directories at 50 ms took two round
// trips 64 at a time, where one would do.
const dirRequests = 256

// byDepth runs fn on each change, the changes of one depth of the tree
// at once, deepest first when deep is set, shallowest first otherwise.
func byDepth(ctx context.Context, cs []*Change, deep bool, fn func(*Change)) {
	byDepthN(ctx, cs, deep, listers, fn)
}

// byDepthN is byDepth with n changes of a depth in flight at once.
func byDepthN(ctx context.Context, cs []*Change, deep bool, n int, fn func(*Change)) {
	depth := func(c *Change) int {
		if c.Name == "." {
			return 0
		}
		return strings.Count(c.Name, "/") + 1
	}
	sorted := append([]*Change(nil), cs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if deep {
			return depth(sorted[i]) > depth(sorted[j])
		}
		return depth(sorted[i]) < depth(sorted[j])
	})
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && depth(sorted[j]) == depth(sorted[i]) {
			j++
		}
		level := sorted[i:j]
		slots.ForEach(len(level), n, func(k int) { fn(level[k]) })
		i = j
	}
}

// removeAll removes the target entries of cs, deepest first.
func (r *runner) removeAll(ctx context.Context, cs []*Change) {
	byDepth(ctx, cs, true, func(c *Change) {
		d := r.finalPath(c.Name)
		if err := d.FS.Remove(d.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if c.dst != nil && c.dst.isDir() {
				if left, lerr := transfer.ReadDir(ctx, d.FS, d.Path); lerr == nil && len(left) > 0 {
					// What the filters protect stays, and so does the
					// directory that holds it, as with rsync.
					r.message("cannot delete non-empty directory: " + c.Name)
					return
				}
			}
			r.fail(&transfer.Error{Op: "delete", Path: d.String(), Err: err})
			return
		}
		r.mu.Lock()
		r.res.Deleted++
		r.mu.Unlock()
		r.print(c)
	})
}

// clearAll removes what stands where a change puts another type; a
// directory there was emptied by the removals before.
func (r *runner) clearAll(ctx context.Context, cs []*Change) {
	byDepth(ctx, cs, true, func(c *Change) {
		d := r.finalPath(c.Name)
		if err := d.FS.Remove(d.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.fail(&transfer.Error{Op: "make way for " + c.Name + ": delete", Path: d.String(), Err: err})
		}
	})
}

// modeMkdirer makes a directory with a mode in one request.
type modeMkdirer interface {
	MkdirMode(ctx context.Context, name string, perm fs.FileMode) error
}

// makeDirs creates the new directories, parents first, owner-writable
// until fixDirs gives them their mode.
func (r *runner) makeDirs(ctx context.Context, cs []*Change) {
	byDepthN(ctx, cs, false, dirRequests, func(c *Change) {
		d := r.dstPath(c.Name)
		perm := c.src.Info.Mode().Perm() | 0o700
		var err error
		if m, ok := d.FS.(modeMkdirer); ok {
			err = m.MkdirMode(ctx, d.Path, perm)
			if errors.Is(err, protocol.ErrNoBatch) {
				err = d.FS.Mkdir(d.Path)
			}
		} else {
			err = d.FS.Mkdir(d.Path)
		}
		if err != nil {
			if fi, serr := lstat(d); serr != nil || !fi.IsDir() {
				r.fail(&transfer.Error{Op: "create directory", Path: d.String(), Err: err})
				return
			}
		}
		r.mu.Lock()
		r.res.Dirs++
		r.mu.Unlock()
		r.print(c)
	})
}

// sendFiles hands the files to send to the copy engine.
func (r *runner) sendFiles(ctx context.Context, cs []*Change) {
	if len(cs) == 0 {
		r.res.Engine = &transfer.Result{}
		return
	}
	files := make([]transfer.Listed, 0, len(cs))
	dstTop := r.dstPath(r.p.SrcName).Path
	for _, c := range cs {
		rel := r.relOf(c.Name)
		f := transfer.Listed{Rel: rel, Info: c.src.Info, Fresh: c.dst == nil, Target: c.listedTarget()}
		if st, below, ok := r.stageOf(c.Name); ok {
			// Below a staged directory: CopyFiles writes it there, under
			// the temporary name of the directory staged, unless that
			// is the top CopyFiles writes below (dstTop).
			f.Direct, f.Target = true, nil
			if st.name != r.p.SrcName {
				f.To = r.relOf(st.tmpName + "/" + below)
			}
		}
		files = append(files, f)
	}
	eo := r.ro.Engine
	eo.Preserve = false
	eo.Modes, eo.Times = r.o.Perms, r.o.Times
	eo.Skip = transfer.CopyAlways
	eo.FilesFrom = nil
	srcRoot := transfer.Endpoint{FS: r.p.Src.Root.FS, Path: pathOf(r.p.Src.Root, r.p.SrcName, r.p.SrcName)}
	dstRoot := transfer.Endpoint{FS: r.p.Dst.Root.FS, Path: dstTop}
	if root := r.p.Src.Entries[r.p.SrcName]; root != nil && !root.isDir() {
		// A single file: CopyFiles joins its name to the directories
		// either side, and the target may have another name.
		c := cs[0]
		rel := srcRoot.FS.Base(srcRoot.Path)
		files = []transfer.Listed{{Rel: rel, To: dstRoot.FS.Base(dstRoot.Path), Info: c.src.Info, Fresh: c.dst == nil, Target: c.listedTarget()}}
		srcRoot.Path = srcRoot.FS.Dir(srcRoot.Path)
		dstRoot.Path = dstRoot.FS.Dir(dstRoot.Path)
	}
	// A report names its source file as CopyFiles made its path, by
	// joining Rel to srcRoot; the same join finds the change again. (The
	// root's path is the user's text, "src/" or "./f", which the joined
	// path does not begin with.)
	bySource := make(map[string]*Change, len(files))
	for i, f := range files {
		s := transfer.Endpoint{FS: srcRoot.FS, Path: srcRoot.FS.Join(append([]string{srcRoot.Path}, strings.Split(f.Rel, "/")...)...)}
		bySource[s.String()] = cs[i]
	}
	report := eo.Report
	eo.Report = func(f transfer.FileReport) {
		if report != nil {
			// The report says where the file is once the run is done.
			f.Target = r.unstaged(f.Target)
			report(f)
		}
		if f.Status != transfer.StatusCopied {
			return
		}
		c := bySource[f.Path]
		if c == nil {
			return
		}
		r.print(c)
		if r.ro.RemoveSource {
			r.removeSource(c)
		}
	}
	res, err := transfer.CopyFiles(ctx, srcRoot, dstRoot, files, eo)
	r.res.Engine = res
	r.res.Errors = append(r.res.Errors, res.Errors...)
	if err != nil && ctx.Err() == nil {
		r.fail(err)
	}
	r.learnOwner(cs)
	if r.o.Owner || r.o.Group {
		r.fixAttrs(ctx, cs, true)
	}
}

// learnOwner looks at one file the run created to learn who owns what
// the receiving end creates.
func (r *runner) learnOwner(cs []*Change) {
	if e := r.res.Engine; e != nil && e.Made != nil {
		// The engine saw one as it made it.
		if uid, gid, ok := transfer.OwnerOf(e.Made); ok {
			r.ownerKnown, r.ownUID, r.ownGID = true, uid, gid
			return
		}
	}
	for _, c := range cs {
		if fi, err := lstat(r.dstPath(c.Name)); err == nil {
			if uid, gid, ok := transfer.OwnerOf(fi); ok {
				r.ownerKnown, r.ownUID, r.ownGID = true, uid, gid
			}
			return
		}
	}
}

// makeLinks creates the symbolic links.
func (r *runner) makeLinks(ctx context.Context, cs []*Change) {
	slots.ForEach(len(cs), listers, func(i int) {
		c := cs[i]
		d := r.dstPath(c.Name)
		s, ok := d.FS.(transfer.Symlinker)
		if !ok {
			r.fail(&transfer.Error{Op: "create link", Path: d.String(), Err: errors.ErrUnsupported})
			return
		}
		if err := s.Symlink(c.src.Link, d.Path); err != nil {
			r.fail(&transfer.Error{Op: "create link", Path: d.String(), Err: err})
			return
		}
		r.mu.Lock()
		r.res.Links++
		r.mu.Unlock()
		r.print(c)
		if r.o.Owner || r.o.Group {
			r.setOwner(c, d)
		}
		if r.o.Times {
			r.setTimes(c, d)
		}
	})
}

// hardLinks makes each name of a group another name of its first.
func (r *runner) hardLinks(ctx context.Context, cs []*Change) {
	slots.ForEach(len(cs), listers, func(i int) {
		c := cs[i]
		d := r.dstPath(c.Name)
		h, ok := d.FS.(transfer.HardLinker)
		if !ok {
			r.fail(&transfer.Error{Op: "create hard link", Path: d.String(), Err: errors.ErrUnsupported})
			return
		}
		first := r.dstPath(c.src.Name)
		if g := c.linkTarget(); g != "" {
			first = r.dstPath(g)
		}
		if c.dst == nil || !c.dst.isFile() {
			if err := h.Link(first.Path, d.Path); err != nil {
				r.fail(&transfer.Error{Op: "create hard link", Path: d.String(), Err: err})
				return
			}
		} else {
			// The file there stays until its replacement, a new name of
			// the leader beside it, is renamed over it.
			tmp := d.FS.Join(d.FS.Dir(d.Path), transfer.TempName(d.FS.Base(d.Path)))
			if err := h.Link(first.Path, tmp); err != nil {
				r.fail(&transfer.Error{Op: "create hard link", Path: d.String(), Err: err})
				return
			}
			if err := d.FS.Rename(tmp, d.Path); err != nil {
				_ = d.FS.Remove(tmp)
				r.fail(&transfer.Error{Op: "create hard link", Path: d.String(), Err: err})
				return
			}
		}
		r.mu.Lock()
		r.res.Links++
		r.mu.Unlock()
		r.print(c)
	})
}

// fixAttrs gives existing targets the mode, times and owner the change
// says differ; for files just sent (sent) only owners remain to set.
func (r *runner) fixAttrs(ctx context.Context, cs []*Change, sent bool) {
	slots.ForEach(len(cs), listers, func(i int) {
		c := cs[i]
		if c.src == nil || c.src.isDir() {
			return
		}
		d := r.dstPath(c.Name)
		if !sent {
			if c.Item == "" {
				return
			}
			if r.o.Perms && !c.src.isLink() && c.Item[5] == 'p' {
				if err := d.FS.Chmod(d.Path, c.src.Info.Mode()&modeBits); err != nil {
					r.fail(&transfer.Error{Op: "set mode of", Path: d.String(), Err: err})
				}
			}
			if r.o.Times && c.Item[4] == 't' {
				r.setTimes(c, d)
			}
		}
		if r.o.Owner || r.o.Group {
			r.setOwner(c, d)
		}
		if !sent {
			r.print(c)
		}
	})
}

// setTimes gives d the source's modification time (and that as its
// access time, as rsync -t does); a link's only where the end can.
func (r *runner) setTimes(c *Change, d transfer.Endpoint) {
	mt := c.src.Info.ModTime()
	var err error
	if c.src.isLink() {
		lt, ok := d.FS.(transfer.LinkTimer)
		if !ok || !transfer.CanLchtimes(d.FS) {
			return
		}
		err = lt.Lchtimes(d.Path, mt, mt)
	} else {
		err = d.FS.Chtimes(d.Path, mt, mt)
	}
	if err != nil {
		r.fail(&transfer.Error{Op: "set times of", Path: d.String(), Err: err})
	}
}

// setOwner gives d the source's owner and group, as far as -o and -g ask
// and where the receiving end gave it others.
func (r *runner) setOwner(c *Change, d transfer.Endpoint) {
	uid, gid, ok := transfer.OwnerOf(c.src.Info)
	if !ok {
		return
	}
	cur := c.dst
	curUID, curGID, known := -1, -1, false
	if cur != nil && c.kind == setAttrs {
		curUID, curGID, known = transfer.OwnerOf(cur.Info)
	} else if r.ownerKnown {
		curUID, curGID, known = r.ownUID, r.ownGID, true
	}
	if !r.o.Owner {
		uid = -1
	}
	if !r.o.Group {
		gid = -1
	}
	if known && (uid == -1 || uid == curUID) && (gid == -1 || gid == curGID) {
		return
	}
	if known && uid != -1 && curUID != 0 && r.ownerKnown && r.ownUID != 0 {
		// Only the super-user gives files away, as rsync's -o.
		uid = -1
	}
	ch, ok := d.FS.(transfer.Chowner)
	if !ok {
		return
	}
	if err := ch.Lchown(d.Path, uid, gid); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		r.fail(&transfer.Error{Op: "set owner of", Path: d.String(), Err: err})
	}
}

// fixDirs gives directories their mode and times once everything inside
// them is in place, deepest first.
func (r *runner) fixDirs(ctx context.Context, cs []*Change) {
	var dirs []*Change
	for _, c := range cs {
		if c.src != nil && c.src.isDir() {
			dirs = append(dirs, c)
		}
	}
	// Deepest first matters only where a directory's new mode takes away
	// its owner's search permission: its entries could no longer be
	// reached. A child's mode or times leave its parent's times alone,
	// so otherwise every directory is done at once, in one round trip.
	fix := func(c *Change) {
		d := r.dstPath(c.Name)
		if r.o.Owner || r.o.Group {
			r.setOwner(c, d)
		}
		// The mode and the times are separate requests, sent at once.
		var wg sync.WaitGroup
		if r.o.Perms || c.kind == mkDir {
			mode := c.src.Info.Mode() & modeBits
			if !r.o.Perms {
				mode = c.src.Info.Mode().Perm() &^ localUmask()
			}
			if c.kind == mkDir || c.Item != "" && c.Item[5] == 'p' || c.src.Info.Mode().Perm()&0o700 != 0o700 {
				wg.Go(func() {
					if err := d.FS.Chmod(d.Path, mode); err != nil {
						r.fail(&transfer.Error{Op: "set mode of", Path: d.String(), Err: err})
					}
				})
			}
		}
		// A directory the plan found right keeps its times unless an
		// entry in it was made or removed: 1,000 requests at 100 ms were
		// half a second of an unchanged tree's sync.
		if r.o.Times && (c.kind != setAttrs || c.Item != "" || r.touched[c.Name]) {
			wg.Go(func() { r.setTimes(c, d) })
		}
		wg.Wait()
		if c.kind == setAttrs {
			r.print(c)
		}
	}
	if searchable(dirs) {
		slots.ForEach(len(dirs), dirRequests, func(i int) { fix(dirs[i]) })
		return
	}
	byDepthN(ctx, dirs, true, dirRequests, fix)
}

// searchable reports whether every directory of dirs keeps its owner's
// search permission.
func searchable(dirs []*Change) bool {
	for _, c := range dirs {
		if c.src.Info.Mode().Perm()&0o100 == 0 {
			return false
		}
	}
	return true
}

// removeSource removes the source of a file whose target is in place,
// once a look at the target shows it whole.
func (r *runner) removeSource(c *Change) {
	d := r.dstPath(c.Name)
	fi, err := lstat(d)
	switch {
	case err != nil:
		r.fail(&transfer.Error{Op: "check before removing the source", Path: d.String(), Err: err})
		return
	case !fi.Mode().IsRegular() || fi.Size() != c.src.Info.Size():
		r.fail(&transfer.Error{Op: "check before removing the source", Path: d.String(),
			Err: fmt.Errorf("the target is not the %d-byte file sent", c.src.Info.Size())})
		return
	}
	s := r.srcPath(c.Name)
	if err := s.FS.Remove(s.Path); err != nil {
		r.fail(&transfer.Error{Op: "remove source", Path: s.String(), Err: err})
		return
	}
	r.mu.Lock()
	r.res.Removed++
	r.mu.Unlock()
}

// removeUpToDate removes, with --remove-source-files, the sources whose
// targets were already the same, as rsync does.
func (r *runner) removeUpToDate(ctx context.Context, cs []*Change) {
	slots.ForEach(len(cs), listers, func(i int) {
		if c := cs[i]; c.src != nil && c.src.isFile() {
			r.removeSource(c)
		}
	})
}

// localUmask is this process's umask, which a new local directory gets
// without -p.
func localUmask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				var m uint32
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%o", &m); err == nil {
					return fs.FileMode(m)
				}
			}
		}
	}
	return 0o022
}
