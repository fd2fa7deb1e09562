package mirror

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"sort"
	"sync"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// Filter says which names a run leaves out (internal/filter's Rules).
// Names are rsync's: slash-separated, relative to the transfer root.
type Filter interface {
	Excluded(rel string, dir bool) bool
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
// on a long path (a listing is several of them, and 100 directories at 50
// ms took 1.4 s 16 at a time), few enough to stay polite to a server,
// whose SFTP session answers them one after another anyway.
const listers = 64

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
}

// listTree lists the tree at root, whose rsync name is rootName ("." when
// the root's contents are the transfer, its base name when the root
// itself is), without following links. A missing root gives an empty
// tree and its error.
func (l lister) listTree(ctx context.Context, root transfer.Endpoint, rootName string) (*Tree, error) {
	t := &Tree{Root: root, Entries: map[string]*Entry{}}
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
		}
	}()
	// A queue of directories and a fixed set of workers: the listings in
	// flight stay bounded however wide the tree.
	type dirJob struct{ path, name string }
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		queue  = []dirJob{{root.Path, rootName}}
		active int
		wg     sync.WaitGroup
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

			found, dirs, errs := l.listDir(ctx, t, j.path, j.name)

			mu.Lock()
			for _, e := range found {
				t.Entries[e.Name] = e
			}
			for _, d := range dirs {
				queue = append(queue, dirJob{d.path, d.name})
			}
			t.Errors = append(t.Errors, errs...)
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
	return t, nil
}

type listedDir struct{ path, name string }

// listDir lists one directory of t: its entries, the directories among
// them to list next, and what failed.
func (l lister) listDir(ctx context.Context, t *Tree, dir, name string) ([]*Entry, []listedDir, []error) {
	end := t.Root.FS
	entries, err := transfer.ReadDir(ctx, end, dir)
	if err != nil {
		return nil, nil, []error{&transfer.Error{Op: "read directory", Path: end.Label() + dir, Err: err}}
	}
	var (
		found []*Entry
		dirs  []listedDir
		errs  []error
	)
	for _, fi := range entries {
		base := fi.Name()
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
			if err := t.readLink(e, p); err != nil {
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

func (t *Tree) readLink(e *Entry, p string) error {
	r, ok := t.Root.FS.(transfer.LinkReader)
	if !ok {
		return &transfer.Error{Op: "read link", Path: t.Root.FS.Label() + p, Err: errors.ErrUnsupported}
	}
	target, err := r.ReadLink(p)
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
