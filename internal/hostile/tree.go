package hostile

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Kind is what a virtual entry claims to be.
type Kind int

const (
	File Kind = iota
	Dir
	Symlink
)

func (k Kind) String() string {
	switch k {
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	}
	return "file"
}

// Entry is one name as a listing gives it. Nothing ties it to anything
// else the server says: a listing may hold the name twice, and a STAT may
// answer differently (Tree.Stat).
type Entry struct {
	Name   string
	Kind   Kind
	Data   []byte      // a file's content
	Target string      // a symlink's target, as the server reads it out
	Mode   fs.FileMode // permission bits; 0 means 0644 for files, 0755 for directories
	// Dev and Ino, when Ino is not 0, are what the server's find says of
	// a file: files sharing them form a hard-link group (-H).
	Dev, Ino uint64
}

func (e Entry) perm() fs.FileMode {
	if e.Mode != 0 {
		return e.Mode.Perm()
	}
	switch e.Kind {
	case Dir:
		return 0o755
	case Symlink:
		return 0o777
	}
	return 0o644
}

// Tree is a virtual directory tree: each directory's listing, in order,
// keyed by its path relative to the login directory ("" for the login
// directory itself).
type Tree struct {
	Dirs map[string][]Entry
	// Gen, if set, lists directories Dirs lacks, lazily: an endless or
	// very deep tree is generated as the client walks it. ok false means
	// no such directory.
	Gen func(dir string) (entries []Entry, ok bool)
	// Stat, if set, answers STAT and LSTAT of the paths it holds instead
	// of the listings: a server whose stat disagrees with its listing.
	Stat map[string]Entry
	// FindExtra are records the server's find adds to those of the tree,
	// each "DEV INO PATH": lies about hard links.
	FindExtra []string
	// TarCreate, if set, writes what tar -c sends for the names asked
	// (compress is "", "zstd" or "gzip") instead of an archive of the
	// tree.
	TarCreate func(w WriterTo, dir string, names []string, compress string)
	// Sums, if set, are the hashes sha256sum gives of the paths it holds
	// instead of the content's.
	Sums map[string]string
	// DeltaFlip, if above 0, is the offset of a byte the helper's delta
	// service (HelperPath) sends with its bits flipped: a damaged or
	// forged delta.
	DeltaFlip int64
}

// WriterTo is where a scenario writes a command's output.
type WriterTo interface{ Write([]byte) (int, error) }

// NewTree returns an empty tree: a login directory that lists nothing.
func NewTree() *Tree { return &Tree{Dirs: map[string][]Entry{"": nil}} }

// Add appends e to the listing of dir (made, as an entry of its parent,
// if the tree has no such directory yet), after whatever it lists
// already, even under the same name.
func (t *Tree) Add(dir string, e Entry) *Tree {
	dir = clean(dir)
	t.ensureDir(dir)
	t.Dirs[dir] = append(t.Dirs[dir], e)
	if child := path.Join(dir, e.Name); e.Kind == Dir {
		if _, ok := t.Dirs[child]; !ok {
			t.Dirs[child] = nil
		}
	}
	return t
}

// File adds a regular file at p (relative to the login directory).
func (t *Tree) File(p, content string) *Tree {
	d, n := path.Split(clean(p))
	return t.Add(d, Entry{Name: n, Kind: File, Data: []byte(content)})
}

// DirAt adds a directory at p.
func (t *Tree) DirAt(p string) *Tree {
	d, n := path.Split(clean(p))
	return t.Add(d, Entry{Name: n, Kind: Dir})
}

// Link adds a symbolic link at p to target.
func (t *Tree) Link(p, target string) *Tree {
	d, n := path.Split(clean(p))
	return t.Add(d, Entry{Name: n, Kind: Symlink, Target: target})
}

func (t *Tree) ensureDir(dir string) {
	if t.Dirs == nil {
		t.Dirs = map[string][]Entry{"": nil}
	}
	if _, ok := t.Dirs[dir]; ok || dir == "" {
		return
	}
	parent, name := path.Split(dir)
	parent = clean(parent)
	t.ensureDir(parent)
	t.Dirs[parent] = append(t.Dirs[parent], Entry{Name: name, Kind: Dir})
	t.Dirs[dir] = nil
}

// list returns the listing of dir.
func (t *Tree) list(dir string) ([]Entry, bool) {
	if es, ok := t.Dirs[dir]; ok {
		return es, true
	}
	if t.Gen != nil {
		return t.Gen(dir)
	}
	return nil, false
}

// lookup finds p as a server walking its listings would: the first entry
// of each name, following symbolic links on the way and, when follow is
// set, at the end. Links that leave the tree find nothing.
func (t *Tree) lookup(p string, follow bool) (Entry, string, bool) {
	return t.lookupN(p, follow, 0)
}

// maxHops bounds the links followed to resolve one path, as ELOOP does.
const maxHops = 40

func (t *Tree) lookupN(p string, follow bool, hops int) (Entry, string, bool) {
	p = clean(p)
	if e, ok := t.Stat[p]; ok {
		if !follow || e.Kind != Symlink {
			return e, p, true
		}
	}
	for ; hops < maxHops; hops++ {
		e, real, ok := t.walk(p, hops)
		if !ok || e.Kind != Symlink || !follow {
			return e, real, ok
		}
		if strings.HasPrefix(e.Target, "/") {
			return Entry{}, "", false
		}
		p = clean(path.Join(path.Dir(real), e.Target))
		if p == ".." || strings.HasPrefix(p, "../") {
			return Entry{}, "", false
		}
	}
	return Entry{}, "", false
}

// walk resolves every element but the last through links; it returns the
// entry and its path with the links resolved.
func (t *Tree) walk(p string, hops int) (Entry, string, bool) {
	if p == "" {
		return Entry{Name: ".", Kind: Dir}, "", true
	}
	dir := ""
	elems := strings.Split(p, "/")
	for i, name := range elems {
		es, ok := t.list(dir)
		if !ok {
			return Entry{}, "", false
		}
		var found *Entry
		for j := range es {
			if es[j].Name == name {
				found = &es[j]
				break
			}
		}
		if found == nil {
			return Entry{}, "", false
		}
		full := path.Join(dir, name)
		if i == len(elems)-1 {
			return *found, full, true
		}
		switch found.Kind {
		case Dir:
			dir = full
		case Symlink:
			e, real, ok := t.lookupN(full, true, hops+1)
			if !ok || e.Kind != Dir {
				return Entry{}, "", false
			}
			dir = real
		default:
			return Entry{}, "", false
		}
	}
	return Entry{}, "", false
}

// clean makes p a path relative to the login directory, "" for itself.
func clean(p string) string {
	p = path.Clean("/" + p)[1:]
	return p
}

// info is an Entry as an fs.FileInfo.
type info struct{ e Entry }

func (i info) Name() string { return i.e.Name }
func (i info) Size() int64 {
	switch i.e.Kind {
	case File:
		return int64(len(i.e.Data))
	case Symlink:
		return int64(len(i.e.Target))
	}
	return 4096
}

func (i info) Mode() fs.FileMode {
	switch i.e.Kind {
	case Dir:
		return fs.ModeDir | i.e.perm()
	case Symlink:
		return fs.ModeSymlink | 0o777
	}
	return i.e.perm()
}

func (i info) ModTime() time.Time { return time.Unix(1700000000, 0) }
func (i info) IsDir() bool        { return i.e.Kind == Dir }
func (i info) Sys() any           { return nil }

var _ os.FileInfo = info{}

// String describes the tree, one listing a line, for a failing test's
// message.
func (t *Tree) String() string {
	dirs := make([]string, 0, len(t.Dirs))
	for d := range t.Dirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var b strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&b, "%q:", d)
		for _, e := range t.Dirs[d] {
			fmt.Fprintf(&b, " %q(%s", e.Name, e.Kind)
			if e.Kind == Symlink {
				fmt.Fprintf(&b, " -> %q", e.Target)
			}
			if e.Ino != 0 {
				fmt.Fprintf(&b, " ino %d", e.Ino)
			}
			b.WriteString(")")
		}
		b.WriteString("\n")
	}
	for p, e := range t.Stat {
		fmt.Fprintf(&b, "stat %q: %s\n", p, e.Kind)
	}
	for _, r := range t.FindExtra {
		fmt.Fprintf(&b, "find: %q\n", r)
	}
	return b.String()
}
