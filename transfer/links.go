package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hpncp/hpncp/protocol"
)

// Optional FS methods for copies that keep symbolic links as links, hard
// links as one file with several names, and numeric owners (rsync's -l,
// -H, -o and -g). Local and *protocol.SFTP have them all; an end that
// lacks one cannot do what it is for, and the caller says so.

// LinkReader is an end that reads symbolic links themselves rather than
// what they point to.
type LinkReader interface {
	// Lstat is Stat without following a final symbolic link.
	Lstat(name string) (fs.FileInfo, error)
	// ReadLink returns the target of the symbolic link name, as stored.
	ReadLink(name string) (string, error)
}

// Symlinker is an end that creates symbolic links.
type Symlinker interface {
	// Symlink creates name, a symbolic link pointing to target.
	Symlink(target, name string) error
}

// HardLinker is an end that gives a file another name.
type HardLinker interface {
	// Link makes newname another name of oldname. Over SFTP it needs
	// OpenSSH's hardlink@openssh.com; without it the error wraps
	// errors.ErrUnsupported and names the extension.
	Link(oldname, newname string) error
}

// Chowner is an end that sets numeric owners.
type Chowner interface {
	// Lchown sets name's owner and group without following a final
	// symbolic link. SFTP can only with OpenSSH's lsetstat@openssh.com:
	// without it, for a link the error wraps errors.ErrUnsupported, and
	// callers leave that link's owner be.
	Lchown(name string, uid, gid int) error
}

func (l Local) Lstat(name string) (fs.FileInfo, error) {
	if l.root != nil {
		return l.root.lstat("lstat", name)
	}
	return os.Lstat(name)
}

func (l Local) ReadLink(name string) (string, error) {
	if l.root != nil {
		return l.root.readLink(name)
	}
	return os.Readlink(name)
}

func (l Local) Symlink(target, name string) error {
	if l.root != nil {
		return l.root.symlink(target, name)
	}
	return os.Symlink(target, name)
}

func (l Local) Link(oldname, newname string) error {
	if l.root != nil {
		return l.root.link(oldname, newname)
	}
	return os.Link(oldname, newname)
}

func (l Local) Lchown(name string, uid, gid int) error {
	if l.root != nil {
		return l.root.lchown(name, uid, gid)
	}
	return os.Lchown(name, uid, gid)
}

// OwnerOf returns the numeric owner and group in fi, from any end's Stat,
// Lstat or ReadDir; ok is false where the end gave none.
func OwnerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	if uid, gid, ok := protocol.Owner(fi); ok {
		return uid, gid, true
	}
	return localOwner(fi)
}

// FileID returns the device and inode that identify the file of fi, and
// its count of names, for a local FileInfo: files with the same device
// and inode are one file. SFTP has no inode numbers: ok is false for a
// remote FileInfo.
func FileID(fi fs.FileInfo) (dev, ino, nlink uint64, ok bool) {
	return localFileID(fi)
}

// LinkOptions say what a copy makes of links in the trees it copies.
// The zero value follows every symbolic link and copies every name of a
// file as a file of its own, as scp does.
type LinkOptions struct {
	// Symlinks copies a symbolic link as a link with the same target
	// (rsync's --links), an operand that is one included. Without it the
	// walk follows links, and stops at a loop of them (loop.go).
	Symlinks bool
	// Safe leaves out, reported as skipped, every symbolic link whose
	// target leads outside the copied tree, absolute ones included
	// (rsync's --safe-links): with Symlinks the others are copied as
	// links, without it they are followed.
	Safe bool
	// Hard makes the names of one local file in the copied set one file
	// with as many names at the target (rsync's --hard-links). SFTP has
	// no inode numbers, so the sources must be local.
	Hard bool
}

// ReasonUnsafeLink: with --safe-links, a symbolic link whose target leads
// outside the copied tree was left out.
const ReasonUnsafeLink = "unsafe-link"

// UnsafeSymlink reports whether a symbolic link with target, depth
// directories below the top of the copied tree, may lead outside the
// tree, by the rule rsync 3.4 and later apply for --safe-links:
//
//   - an empty or absolute target is unsafe;
//   - ".." may only open the target: one after a name or "." is unsafe
//     whatever the depth, since the name it climbs back from may be, or
//     later become, a link to somewhere else (s/up -> .. makes
//     s/esc -> up/../outside leave the tree);
//   - a target of several elements that ends in ".." is unsafe, as rsync
//     has it, so that both tools keep the same links;
//   - the opening ".." elements may climb at most depth levels.
//
// The top directory's own name counts as a level, as rsync counts it: a
// link directly in the source operand dir is at depth 1, so "../dir/x"
// stays inside; a link that is itself an operand is at depth 0.
func UnsafeSymlink(target string, depth int) bool {
	if target == "" || target[0] == '/' || strings.HasSuffix(target, "/..") {
		return true
	}
	climbs, named := 0, false
	for elem := range strings.SplitSeq(target, "/") {
		switch elem {
		case "":
			// Repeated and trailing slashes name no element.
		case "..":
			if named {
				return true
			}
			climbs++
		default:
			named = true
		}
	}
	return climbs > depth
}

// levels is the depth UnsafeSymlink wants of an entry of d: one more
// than the directories above d on the walk's path.
func (d *walkDir) levels() int {
	n := 1
	for a := d; a != nil && a.up != nil; a = a.up {
		n++
	}
	return n
}

// statSource looks at the source operand s: links followed, as scp does,
// unless --links keeps an operand that is a link (without a trailing
// slash, which asks for what it points to) as a link.
func (c *copier) statSource(s Endpoint) (fs.FileInfo, error) {
	r, ok := s.FS.(LinkReader)
	if !c.opts.Links.Symlinks || !ok || strings.HasSuffix(s.Path, "/") {
		return s.FS.Stat(s.Path)
	}
	return r.Lstat(s.Path)
}

// unsafeLink reports whether --safe-links leaves out the link src, depth
// levels below the top of the copied tree (UnsafeSymlink), and reports
// it skipped when it does.
func (c *copier) unsafeLink(src Endpoint, depth int) (bool, error) {
	if !c.opts.Links.Safe {
		return false, nil
	}
	r, ok := src.FS.(LinkReader)
	if !ok {
		return false, &Error{Op: "read link", Path: src.String(), Err: errors.ErrUnsupported}
	}
	target, err := r.ReadLink(src.Path)
	if err != nil {
		return false, &Error{Op: "read link", Path: src.String(), Err: err}
	}
	if !UnsafeSymlink(target, depth) {
		return false, nil
	}
	if c.plan != nil {
		// Tar mode's listing records into a copier of its own; the skip
		// is told once tar mode takes the tree (makeLinks).
		c.links.mu.Lock()
		c.links.planned = append(c.links.planned, plannedLink{src: src, unsafe: target})
		c.links.mu.Unlock()
		return true, nil
	}
	c.skipUnsafe(src, target)
	return true, nil
}

// skipUnsafe reports the link src, to target, left out by --safe-links.
func (c *copier) skipUnsafe(src Endpoint, target string) {
	c.record(func(r *Result) { r.Skipped++ })
	c.report(FileReport{Path: src.String(), Status: StatusSkipped, Reason: ReasonUnsafeLink})
	c.logf("skipped %s -> %s: the link leads outside the copied tree (--safe-links)", src, target)
}

// copySymlink copies the symbolic link src, rel below its operand ("" for
// the operand), to dst as a link with the same target, in a job of its
// own. Within tar mode's listing the link waits for the streams, which
// make the directories it goes in (copyAny).
func (c *copier) copySymlink(ctx context.Context, src, dst Endpoint, rel string) {
	if rel == "" {
		rel = src.FS.Base(src.Path)
		// An entry's link was looked at as its directory was listed
		// (dirEntries); an operand's is looked at here.
		if skip, err := c.unsafeLink(src, 0); err != nil || skip {
			if err != nil {
				c.fail(err)
			}
			return
		}
	}
	if !c.opts.Shard.Keep(rel) {
		return
	}
	if c.plan != nil {
		c.links.mu.Lock()
		c.links.planned = append(c.links.planned, plannedLink{src: src, dst: dst})
		c.links.mu.Unlock()
		return
	}
	c.goSymlink(ctx, src, dst)
}

// goSymlink makes dst a copy of the link src in a job of its own.
func (c *copier) goSymlink(ctx context.Context, src, dst Endpoint) {
	c.goFileJob(ctx, src, func() error { return c.makeSymlink(src, dst) })
}

// makeSymlink makes dst a symbolic link with the target of the link src.
// A link already there with that target is left as it is; anything else
// but a directory is replaced at once, through a temporary name renamed
// over it, so that dst is never missing.
func (c *copier) makeSymlink(src, dst Endpoint) error {
	r, rok := src.FS.(LinkReader)
	w, wok := dst.FS.(Symlinker)
	if !rok || !wok {
		return &Error{Op: "copy link " + src.String() + " to", Path: dst.String(), Err: errors.ErrUnsupported}
	}
	target, err := r.ReadLink(src.Path)
	if err != nil {
		return &Error{Op: "read link", Path: src.String(), Err: err}
	}
	op := "copy link " + src.String() + " to"
	if err := CheckLinkTarget(target); err != nil {
		return &Error{Op: op, Path: dst.String(), Err: err}
	}
	dr, _ := dst.FS.(LinkReader)
	var existing fs.FileInfo
	if dr != nil {
		existing, err = dr.Lstat(dst.Path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &Error{Op: op, Path: dst.String(), Err: err}
		}
	}
	switch {
	case existing == nil:
		err = w.Symlink(target, dst.Path)
	case existing.IsDir():
		return &Error{Op: op, Path: dst.String(), Err: errors.New("is a directory")}
	case existing.Mode()&fs.ModeSymlink != 0 && readsAs(dr, dst.Path, target):
		c.record(func(r *Result) { r.Skipped++ })
		c.report(FileReport{Path: src.String(), Status: StatusSkipped, Target: dst.String(), Reason: ReasonQuickCheck})
		c.logf("skipped %s: %s is that link already", src, dst)
		return nil
	default:
		tmp := dst.FS.Join(dst.FS.Dir(dst.Path), TempName(dst.FS.Base(dst.Path)))
		if err = w.Symlink(target, tmp); err == nil {
			if err = dst.FS.Rename(tmp, dst.Path); err != nil {
				_ = dst.FS.Remove(tmp)
			}
		}
	}
	if err != nil {
		return &Error{Op: op, Path: dst.String(), Err: err}
	}
	c.record(func(r *Result) { r.Links++ })
	c.report(FileReport{Path: src.String(), Status: StatusCopied, Target: dst.String()})
	c.logf("made link %s -> %s", dst, target)
	return nil
}

func readsAs(r LinkReader, name, target string) bool {
	got, err := r.ReadLink(name)
	return err == nil && got == target
}

// linkState is a run's links that wait: hard links for the end of the
// run (their file must be in place first), symbolic links for the end of
// a tree's tar streams.
type linkState struct {
	mu      sync.Mutex
	groups  map[fileKey]*linkGroup
	keys    []fileKey // of groups, in the order found
	later   []laterName
	planned []plannedLink
	// placed holds the targets (Endpoint.String) that were copied or
	// skipped as already there: a hard link may be made to them.
	placed map[string]bool
}

type fileKey struct{ dev, ino uint64 }

// linkGroup is a local file with several names in the copied set, and
// where the first of them goes.
type linkGroup struct {
	first Endpoint
}

// laterName is a name of a file after the first: dst becomes another
// name of the group's first target.
type laterName struct {
	src, dst Endpoint
	si       fs.FileInfo
	g        *linkGroup
	fresh    bool
}

// plannedLink is a symbolic link tar mode's listing found: to be made
// at dst, or, when unsafe holds its target, reported left out.
type plannedLink struct {
	src, dst Endpoint
	unsafe   string
}

// linkMark is where a tar mode listing began, so that what it recorded
// can be dropped should tar mode not be used after all.
type linkMark struct{ keys, later, planned int }

func (l *linkState) mark() linkMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	return linkMark{len(l.keys), len(l.later), len(l.planned)}
}

// rollback forgets what was recorded since m: the walk lists the tree
// again, and records it again.
func (l *linkState) rollback(m linkMark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.keys[m.keys:] {
		delete(l.groups, k)
	}
	l.keys, l.later, l.planned = l.keys[:m.keys], l.later[:m.later], l.planned[:m.planned]
}

// takePlanned returns the symbolic links tar mode's listing found since m.
func (l *linkState) takePlanned(m linkMark) []plannedLink {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := slices.Clone(l.planned[m.planned:])
	l.planned = l.planned[:m.planned]
	return p
}

// tracking says whether note keeps anything: whether hard links are
// being kept.
func (l *linkState) tracking() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groups != nil
}

// note records a file's outcome, as every mover reports it: a later name
// is linked only to a first name that is in place.
func (l *linkState) note(f FileReport) {
	if f.Target == "" || f.Status == StatusFailed {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.groups == nil {
		return // no hard links asked for
	}
	if l.placed == nil {
		l.placed = map[string]bool{}
	}
	l.placed[f.Target] = true
}

// laterName reports whether the regular file src, of info si, is a name
// of a file whose first name the run has seen, and with --hard-links
// records it, to be made a link at the end of the run; the first name is
// copied as any file.
func (c *copier) laterName(src, dst Endpoint, si fs.FileInfo, fresh bool) bool {
	if !c.opts.Links.Hard || isRemote(src.FS) {
		return false
	}
	dev, ino, nlink, ok := FileID(si)
	if !ok || nlink < 2 {
		return false
	}
	l := &c.links
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fileKey{dev, ino}
	g, seen := l.groups[k]
	if !seen {
		if l.groups == nil {
			l.groups = map[fileKey]*linkGroup{}
		}
		l.groups[k] = &linkGroup{first: dst}
		l.keys = append(l.keys, k)
		return false
	}
	l.later = append(l.later, laterName{src, dst, si, g, fresh})
	return true
}

// makeLinks makes the symbolic links a tar mode tree left for after its
// streams, and reports those --safe-links left out.
func (c *copier) makeLinks(ctx context.Context, links []plannedLink) {
	for _, p := range links {
		switch {
		case ctx.Err() != nil:
			return
		case p.unsafe != "":
			c.skipUnsafe(p.src, p.unsafe)
		default:
			c.goSymlink(ctx, p.src, p.dst)
		}
	}
}

// linkLater makes each later name of a file another name of its first
// target, once every file is in place and before -p sets directory
// times. A name whose first did not arrive, or whose end cannot make
// hard links (an SFTP server without hardlink@openssh.com), is copied
// as a file of its own: nothing is lost, only the sharing.
func (c *copier) linkLater(ctx context.Context) {
	c.links.mu.Lock()
	later := c.links.later
	c.links.later = nil
	placed := c.links.placed
	c.links.mu.Unlock()
	for _, n := range later {
		if ctx.Err() != nil {
			return
		}
		var err error
		hl, ok := n.dst.FS.(HardLinker)
		if !placed[n.g.first.String()] || n.g.first.FS != n.dst.FS || !ok {
			err = errors.ErrUnsupported
		} else {
			err = c.hardLink(hl, n.g.first, n.dst)
		}
		switch {
		case err == nil:
			c.record(func(r *Result) { r.Links++ })
			c.report(FileReport{Path: n.src.String(), Status: StatusCopied, Target: n.dst.String()})
			c.logf("linked %s to %s", n.dst, n.g.first)
			continue
		case !errors.Is(err, errors.ErrUnsupported):
			c.failFile(n.src, &Error{Op: "hard link " + n.g.first.String() + " to", Path: n.dst.String(), Err: err})
			continue
		}
		c.logf("copying %s as a file of its own: %v", n.src, err)
		if err := c.copyFile(ctx, n.src, n.dst, n.si, n.fresh); err != nil {
			c.failFile(n.src, err)
		}
	}
}

// hardLink makes dst another name of first: made under a temporary name
// and renamed over dst, so that a file already at dst is replaced at
// once. Renaming a name over another name of the same file does nothing
// (POSIX rename), which leaves the temporary name behind: it goes then.
func (c *copier) hardLink(hl HardLinker, first, dst Endpoint) error {
	fsys := dst.FS
	tmp := fsys.Join(fsys.Dir(dst.Path), TempName(fsys.Base(dst.Path)))
	if err := hl.Link(first.Path, tmp); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, dst.Path); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if r, ok := fsys.(LinkReader); ok {
		if _, err := r.Lstat(tmp); err == nil {
			return fsys.Remove(tmp)
		}
	}
	return nil
}

// checkHardLinks refuses --hard-links for remote sources, whose files SFTP
// cannot tell apart from their other names.
func checkHardLinks(srcs []Endpoint, o Options) error {
	if !o.Links.Hard {
		return nil
	}
	for _, s := range srcs {
		if isRemote(s.FS) {
			return &OptionError{"--hard-links works with local sources only: SFTP has no inode numbers to find " + s.String() + "'s names by",
				"leave out --hard-links, or run hpncp on the source host"}
		}
	}
	return nil
}
