package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/hpncp/hpncp/internal/filter"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// Filter says which names a run leaves out (internal/filter's Rules).
// Names are rsync's: slash-separated, relative to the transfer root.
type Filter interface {
	Excluded(rel string, dir bool) bool
}

// pruneOf is what a helper's walk of the tree whose root's rsync name is
// name may leave out for a lister of filter f: what f's rules exclude,
// where f can say them (filter.Rules, a ListFilter's rules).
func pruneOf(f Filter, name string) filter.Prune {
	l, ok := f.(interface{ Lines() []string })
	if !ok {
		return filter.Prune{}
	}
	lines := l.Lines()
	if len(lines) == 0 {
		return filter.Prune{}
	}
	return filter.Prune{Root: name, Rules: lines}
}

// WalkPrune is what a helper's walk of this sync's source (source true) or
// target, whose root's rsync name is name, may leave out, as its lister
// will: ends.Hosts.WalkAhead asks for it.
func (o Options) WalkPrune(name string, source bool) filter.Prune {
	if !source && o.DeleteExcluded {
		return filter.Prune{}
	}
	return pruneOf(o.Filter, name)
}

// Entry is one name of a listed tree.
type Entry struct {
	// Name is the entry's rsync name: slash-separated below the transfer
	// root, "." for the root itself.
	Name string
	// Info is the entry's own info: a link is not followed.
	Info fs.FileInfo
	// Link is a symbolic link's target, as stored.
	Link string
}

func (e *Entry) isDir() bool  { return e.Info.IsDir() }
func (e *Entry) isLink() bool { return e.Info.Mode()&fs.ModeSymlink != 0 }
func (e *Entry) isFile() bool { return e.Info.Mode().IsRegular() }

// Tree is a listing: every name below a root, each directory's entries
// in the order of their names.
type Tree struct {
	Root    transfer.Endpoint
	Entries map[string]*Entry
	// Errors are the listings that failed; the tree then lacks what they
	// hold, and deleting on its account would delete what exists.
	Errors []error
	// ids are the inodes of a remote end's files with several names
	// (-H), by rsync name; a local end's are in each Entry's Info.
	ids    map[string]protocol.FileID
	idsErr error
}

// hardLinkLister is a remote end that can list its files of several names.
type hardLinkLister interface {
	HardLinked(ctx context.Context, dir string) (map[string]protocol.FileID, error)
}

// fileID returns the device and inode of the file e, where the end tells.
func (t *Tree) fileID(e *Entry) (dev, ino uint64, ok bool) {
	if dev, ino, _, ok := transfer.FileID(e.Info); ok {
		return dev, ino, true
	}
	if id, ok := t.ids[e.Name]; ok {
		return id.Dev, id.Ino, true
	}
	return 0, 0, false
}

// sorted returns the tree's names in rsync's order: a directory before
// what it holds, names compared as strings.
func (t *Tree) sorted() []string {
	names := make([]string, 0, len(t.Entries))
	for n := range t.Entries {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return lessName(names[i], names[j]) })
	return names
}

// lessName orders names so that a directory comes before its entries.
func lessName(a, b string) bool {
	switch {
	case a == ".":
		return b != "."
	case b == ".":
		return false
	}
	return a < b
}

// joinName is the rsync name of base inside the directory dir.
func joinName(dir, base string) string {
	if dir == "." {
		return base
	}
	return dir + "/" + base
}

// listers bounds the directory listings, and the requests on
// directories and links, a run has in flight: enough to hide round trips
// on a long path (a listing is several of them, and a wide tree's level
// should list in about that time), few enough to stay polite to a server,
// whose SFTP session answers them one after another anyway.
const listers = 64

// maxTreeEntries and maxTreeNameBytes bound one listed tree, so that a
// server whose tree never ends (each directory naming new ones) ends the
// run with an error rather than exhausting memory. A listed name costs
// about 260 bytes in its tree and 160 in the plan (measured: a million
// names, 251 MiB listed, 150 MiB more planned): a sync of 4 million
// names needs 1.7 GiB, and of bench/many.sh's million a quarter of that,
// while an endless tree reaches the bound in seconds. Names are full
// paths, so a tree both deep and wide costs by its names' bytes: 256 MiB
// of them (held twice, in the name and in a directory's path) stops it
// however few its names. The endless deep tree (a/a/a/...) stops far
// sooner, at transfer.MaxDepth.
const (
	maxTreeEntries   = 4 << 20
	maxTreeNameBytes = 256 << 20
)

// ErrTreeTooLarge is the failure of a listing that reached
// maxTreeEntries names or maxTreeNameBytes of them.
var ErrTreeTooLarge = fmt.Errorf("more than %d names, or more than %d MiB of them", maxTreeEntries, maxTreeNameBytes>>20)

// lister says how listTree lists.
type lister struct {
	// filter, when not nil, leaves out what it excludes; an excluded
	// directory is not descended into.
	filter Filter
	// descend, when not nil, says whether to list the directory n.
	descend func(n string) bool
	// links reads the targets of symbolic links.
	links bool
	// follow says the root is looked at through a link (a directory
	// given with a trailing slash).
	follow bool
	// ids asks a remote end for the inodes of its hard links (-H).
	ids bool
	// maxEntries and maxNameBytes, when not 0, are the bounds a test
	// wants instead of maxTreeEntries and maxTreeNameBytes.
	maxEntries, maxNameBytes int
	// walk, when not nil, lists the whole tree below a root at once (a
	// helper's walk, transfer.DeltaSession.Walk); nil (or ok false) lists
	// it a directory at a time.
	walk   func(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (*walkedTree, bool)
	walked *walkedTree
}

// walkedTree is a tree a helper listed in one request, by the paths on
// the end that listDir asks for: the listings of the directories below
// the root, the directories whose listing failed, and every directory
// the walk saw (an empty one has no listing of its own).
type walkedTree struct {
	dirs map[string][]fs.FileInfo
	errs map[string]string
	seen map[string]bool
}

// newWalkedTree holds a walk's answer for the root at root on end, whose
// directories it names by their paths below root ("" for root). A path
// that is not a plain relative one (empty, ".", ".." or "/" in it) names
// no directory listDir asks for, and is left out.
func newWalkedTree(end transfer.FS, root string, dirs map[string][]fs.FileInfo, errs map[string]string) *walkedTree {
	onEnd := func(rel string) (string, bool) {
		if rel == "" {
			return root, true
		}
		parts := strings.Split(rel, "/")
		for _, p := range parts {
			if p == "" || p == "." || p == ".." {
				return "", false
			}
		}
		return end.Join(append([]string{root}, parts...)...), true
	}
	w := &walkedTree{dirs: map[string][]fs.FileInfo{}, errs: map[string]string{}, seen: map[string]bool{root: true}}
	for rel, es := range dirs {
		d, ok := onEnd(rel)
		if !ok {
			continue
		}
		w.dirs[d] = es
		for _, fi := range es {
			// A name listDir refuses marks nothing seen.
			if fi.IsDir() && transfer.ValidName(fi.Name()) == nil {
				w.seen[end.Join(d, fi.Name())] = true
			}
		}
	}
	for rel, msg := range errs {
		if d, ok := onEnd(rel); ok {
			w.errs[d] = msg
		}
	}
	return w
}

// listing is the walk's listing of dir (a path on the end, below the
// root): ok false where the walk did not see it, which is then listed
// as without one.
func (w *walkedTree) listing(dir string) (entries []fs.FileInfo, err error, ok bool) {
	if msg, failed := w.errs[dir]; failed {
		return nil, errors.New(vis.String(msg)), true
	}
	if !w.seen[dir] {
		return nil, nil, false
	}
	return w.dirs[dir], nil, true
}

// listTree lists the tree at root, whose rsync name is rootName ("." when
// the root's contents are the transfer, its base name when the root
// itself is), without following links. A missing root gives an empty
// tree and its error; so does a tree past maxTreeEntries names or
// maxTreeNameBytes of them (ErrTreeTooLarge).
//
// What the end lists is believed only once checked: a name listed twice
// in a directory, a link target no file system stores, a directory
// deeper than transfer.MaxDepth, an entry whose parent is not a
// directory of the listing, and a hard-link record of -H naming anything
// but a listed regular file are left out, and each, but the last, is one
// of the tree's Errors.
func (l lister) listTree(ctx context.Context, root transfer.Endpoint, rootName string) (*Tree, error) {
	t := &Tree{Root: root, Entries: map[string]*Entry{}}
	maxEntries, maxNameBytes := l.maxEntries, l.maxNameBytes
	if maxEntries == 0 {
		maxEntries = maxTreeEntries
	}
	if maxNameBytes == 0 {
		maxNameBytes = maxTreeNameBytes
	}
	look := lstat
	if l.follow {
		look = func(e transfer.Endpoint) (fs.FileInfo, error) { return e.FS.Stat(e.Path) }
	}
	info, err := look(root)
	if err != nil {
		return t, err
	}
	rootEntry := &Entry{Name: rootName, Info: info}
	t.Entries[rootName] = rootEntry
	if l.links && info.Mode()&fs.ModeSymlink != 0 {
		if err := t.readLink(rootEntry, root.Path); err != nil {
			return t, err
		}
	}
	if !info.IsDir() {
		return t, nil
	}
	if l.walk != nil {
		if w, ok := l.walk(ctx, root.Path, maxEntries, maxNameBytes, pruneOf(l.filter, rootName)); ok {
			l.walked = w
		}
	}
	var idsDone chan struct{}
	if h, ok := root.FS.(hardLinkLister); ok && l.ids {
		idsDone = make(chan struct{})
		go func() {
			defer close(idsDone)
			ids, err := h.HardLinked(ctx, root.Path)
			if err != nil {
				t.idsErr = &transfer.Error{Op: "keep hard links (-H)", Path: root.String(), Err: err,
					Hint: "the server needs GNU find to tell which names are one file; leave out -H to copy them as separate files"}
				return
			}
			t.ids = make(map[string]protocol.FileID, len(ids))
			for rel, id := range ids {
				t.ids[joinName(rootName, rel)] = id
			}
		}()
	}
	defer func() {
		if idsDone != nil {
			<-idsDone
			if t.idsErr != nil {
				t.Errors = append(t.Errors, t.idsErr)
			}
			t.keepFileIDs()
		}
	}()
	// A queue of directories and a fixed set of workers: the listings in
	// flight stay bounded however wide the tree.
	type dirJob struct {
		path, name string
		depth      int // levels below root
	}
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		queue   = []dirJob{{root.Path, rootName, 0}}
		active  int
		wg      sync.WaitGroup
		tooMany bool
		bytes   int // of the names held
	)
	work := func() {
		defer wg.Done()
		for {
			mu.Lock()
			for len(queue) == 0 && active > 0 {
				cond.Wait()
			}
			if len(queue) == 0 || ctx.Err() != nil {
				if ctx.Err() != nil && len(queue) > 0 {
					t.Errors = append(t.Errors, ctx.Err())
					queue = nil
				}
				cond.Broadcast()
				mu.Unlock()
				return
			}
			j := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			active++
			mu.Unlock()

			var (
				found []*Entry
				dirs  []listedDir
				errs  []error
			)
			if j.depth >= transfer.MaxDepth {
				errs = []error{&transfer.Error{Op: "list", Path: root.FS.Label() + j.path,
					Err:  fmt.Errorf("more than %d levels of directories", transfer.MaxDepth),
					Hint: "the tree is endless, as a broken or hostile server's may be; what is below was not copied"}}
			} else {
				found, dirs, errs = l.listDir(ctx, t, j.path, j.name)
			}

			add := 0
			for _, e := range found {
				add += len(e.Name)
			}
			for _, d := range dirs {
				add += len(d.path)
			}
			mu.Lock()
			bytes += add
			if !tooMany && (len(t.Entries)+len(found) > maxEntries || bytes > maxNameBytes) {
				// The tree is dropped as a whole, so listings in flight
				// add nothing more; the names held go with it.
				tooMany = true
				queue = nil
			}
			if !tooMany {
				for _, e := range found {
					t.Entries[e.Name] = e
				}
				for _, d := range dirs {
					queue = append(queue, dirJob{d.path, d.name, j.depth + 1})
				}
				t.Errors = append(t.Errors, errs...)
			}
			active--
			cond.Broadcast()
			mu.Unlock()
		}
	}
	for range listers {
		wg.Add(1)
		go work()
	}
	wg.Wait()
	if tooMany {
		return &Tree{Root: root, Entries: map[string]*Entry{}}, &transfer.Error{Op: "list", Path: root.String(), Err: ErrTreeTooLarge,
			Hint: "the tree may be endless, as a broken or hostile server's can be; sync a part of it at a time"}
	}
	t.dropOrphans(rootName)
	return t, nil
}

// dropOrphans leaves out every entry whose parent the tree does not have
// as a directory, with what is below it, each an error. A listing of the
// directories it descends into cannot make one, while names are unique
// (listDir): the check holds that, so that nothing is ever made through
// a link or a file the tree has where it thought a directory was.
func (t *Tree) dropOrphans(rootName string) {
	for {
		var orphans []string
		for n := range t.Entries {
			if n == rootName {
				continue
			}
			if p := t.Entries[parentName(n)]; p == nil || !p.isDir() {
				orphans = append(orphans, n)
			}
		}
		if len(orphans) == 0 {
			return
		}
		for _, n := range orphans {
			delete(t.Entries, n)
			t.Errors = append(t.Errors, &transfer.Error{Op: "list", Path: t.Root.String(),
				Err: fmt.Errorf("%q: its directory is not one of the listing's", n)})
		}
	}
}

// keepFileIDs keeps, of the hard-link records of -H, those of names the
// listing has as regular files: a record of find's is another listing of
// the same server, and one naming a directory, a link or a name not
// listed must make no link.
func (t *Tree) keepFileIDs() {
	for n := range t.ids {
		if e := t.Entries[n]; e == nil || !e.isFile() {
			delete(t.ids, n)
		}
	}
}

type listedDir struct{ path, name string }

// listDir lists one directory of t: its entries, the directories among
// them to list next, and what failed.
func (l lister) listDir(ctx context.Context, t *Tree, dir, name string) ([]*Entry, []listedDir, []error) {
	end := t.Root.FS
	var entries []fs.FileInfo
	var err error
	walked := false
	if l.walked != nil {
		entries, err, walked = l.walked.listing(dir)
	}
	if !walked {
		entries, err = transfer.ReadDir(ctx, end, dir)
	}
	if err == nil && len(entries) > protocol.MaxDirEntries {
		// SFTP's listings stop there already (protocol.ReadDir); an
		// end of another kind is held to the same.
		err = protocol.ErrTooManyEntries
	}
	if err != nil {
		return nil, nil, []error{&transfer.Error{Op: "read directory", Path: end.Label() + dir, Err: err}}
	}
	var (
		found []*Entry
		dirs  []listedDir
		errs  []error
	)
	dups := transfer.SortListing(entries)
	for i, fi := range entries {
		base := fi.Name()
		if dups[base] {
			if i == 0 || entries[i-1].Name() != base {
				errs = append(errs, transfer.DuplicateError(end.Label()+dir, base))
			}
			continue
		}
		if err := transfer.ValidName(base); err != nil {
			errs = append(errs, &transfer.Error{Op: "list", Path: end.Label() + dir, Err: err})
			continue
		}
		n := joinName(name, base)
		if l.filter != nil && l.filter.Excluded(n, fi.IsDir()) {
			continue
		}
		e := &Entry{Name: n, Info: fi}
		p := end.Join(dir, base)
		if l.links && fi.Mode()&fs.ModeSymlink != 0 {
			if err := t.readLinkOf(e, p, fi); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		found = append(found, e)
		if fi.IsDir() && (l.descend == nil || l.descend(n)) {
			dirs = append(dirs, listedDir{p, n})
		}
	}
	return found, dirs, errs
}

// readLinkOf is readLink, with the target a helper's walk gave with fi
// where it gave one.
func (t *Tree) readLinkOf(e *Entry, p string, fi fs.FileInfo) error {
	if w, ok := fi.(interface{ LinkTarget() (string, bool) }); ok {
		if target, ok := w.LinkTarget(); ok {
			if err := transfer.CheckLinkTarget(target); err != nil {
				return &transfer.Error{Op: "read link", Path: t.Root.FS.Label() + p, Err: err}
			}
			e.Link = target
			return nil
		}
	}
	return t.readLink(e, p)
}

func (t *Tree) readLink(e *Entry, p string) error {
	r, ok := t.Root.FS.(transfer.LinkReader)
	if !ok {
		return &transfer.Error{Op: "read link", Path: t.Root.FS.Label() + p, Err: errors.ErrUnsupported}
	}
	target, err := r.ReadLink(p)
	if err == nil {
		err = transfer.CheckLinkTarget(target)
	}
	if err != nil {
		return &transfer.Error{Op: "read link", Path: t.Root.FS.Label() + p, Err: err}
	}
	e.Link = target
	return nil
}

// lstat looks at the end's path without following a final link, where
// the end allows it.
func lstat(e transfer.Endpoint) (fs.FileInfo, error) {
	if l, ok := e.FS.(transfer.LinkReader); ok {
		return l.Lstat(e.Path)
	}
	return e.FS.Stat(e.Path)
}

// pathOf is where the rsync name n of a tree rooted at root (whose own
// name is rootName) is on root's end.
func pathOf(root transfer.Endpoint, rootName, n string) string {
	if n == rootName {
		return root.Path
	}
	rel := n
	if rootName != "." {
		rel = n[len(rootName)+1:]
	}
	return root.FS.Join(append([]string{root.Path}, splitName(rel)...)...)
}

func splitName(n string) []string {
	var out []string
	for n != "" {
		i := 0
		for i < len(n) && n[i] != '/' {
			i++
		}
		out = append(out, n[:i])
		if i == len(n) {
			break
		}
		n = n[i+1:]
	}
	return out
}

// parentName is the rsync name of n's directory.
func parentName(n string) string {
	d := path.Dir(n)
	return d
}

// TreeLimits are the bounds a sync's lister puts on a tree's entries and
// name bytes, which a walk asked for ahead of it asks with too
// (ends.Hosts.WalkAhead).
func TreeLimits() (entries, nameBytes int) { return maxTreeEntries, maxTreeNameBytes }
