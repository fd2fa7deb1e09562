package mirror

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"runtime"
	"sort"
	"strings"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/transfer"
)

// Options are rsync's flags as a plan and its run read them.
type Options struct {
	Recursive bool // -r
	Links     bool // -l: copy symbolic links as links
	Perms     bool // -p
	Times     bool // -t
	Owner     bool // -o
	Group     bool // -g
	Devices   bool // -D: devices and specials (reported and left out: SFTP cannot make them)
	HardLinks bool // -H

	Checksum bool // -c: compare content, not size and time
	SizeOnly bool // --size-only
	// Append is rsync's --append and --append-verify: a file the quick
	// check finds changed is left alone, attributes and all, unless its
	// target is shorter (the rest is then sent; hpncp checks the whole
	// file either way, as --append-verify does).
	Append         bool
	IgnoreTimes    bool // -I: send every file
	Update         bool // -u: leave a target newer than its source
	Existing       bool // --existing: create nothing new
	IgnoreExisting bool // --ignore-existing: update nothing that exists
	MinSize        int64
	MaxSize        int64 // 0: no limit

	Delete         bool // --delete (deletions run after the transfer)
	DeleteExcluded bool // --delete-excluded
	MaxDelete      int  // --max-delete; negative: no limit

	Filter Filter

	// SafeLinks is --safe-links: links that lead out of the tree are
	// left out.
	SafeLinks bool
	// DryRun is -n: the plan is printed, not run.
	DryRun bool

	// linkTimes says the receiving end can set a link's times.
	linkTimes bool

	// Push names a run whose receiver is remote: rsync itemizes what it
	// sends with '<' there, '>' otherwise.
	Push bool
	// Delta, when set, gives the helper at the remote end: with -c the
	// remote files are hashed there in one request (helperChecksums)
	// rather than one command each.
	Delta transfer.DeltaHosts
	// Logf, when set, is told what the plan asked of a helper (-vv).
	Logf func(format string, args ...any)
}

// kind is what a change does.
type kind int

const (
	mkDir    kind = iota // create a directory
	sendFile             // send a regular file's content
	mkLink               // create (or replace) a symbolic link
	hardLink             // make another name of a file sent or present
	setAttrs             // fix mode, times or owner of what is there
	remove               // delete an entry of the target
	message              // only a line to print (a skipped entry)
)

// Change is one step of a plan, with its itemized line.
type Change struct {
	kind kind
	// Name is the rsync name, Item the 11-character itemize code; a
	// change with an empty Item prints nothing.
	Name string
	Item string
	src  *Entry // the source's entry; nil for a removal
	dst  *Entry // the target's entry before the run; nil when missing
	// linkTo is a hard link's other name, which the line shows.
	linkTo string
	// group is a hard link's first name, even where the line omits it.
	group string
	// clear says the target's entry must go first (another type is there).
	clear bool
	// text is a message change's line.
	text string
	// verbose marks a message rsync prints only with -v.
	verbose bool
	// early marks a removal that makes way for another type, made
	// before anything is created.
	early bool
}

// listedTarget is the target's entry as listed, where it is a regular
// file that stays until the new one replaces it (the copy takes it for
// what is there rather than looking again), or nil.
func (c *Change) listedTarget() fs.FileInfo {
	if c.dst == nil || c.clear || !c.dst.Info.Mode().IsRegular() {
		return nil
	}
	return c.dst.Info
}

// linkTarget is the name a hard link change joins.
func (c *Change) linkTarget() string { return c.group }

// Line is the change as rsync's --itemize-changes prints it.
func (c *Change) Line() string {
	if c.kind == message {
		return c.text
	}
	name := c.Name
	if name == "." {
		name = "./"
	} else if (c.src != nil && c.src.isDir()) || (c.kind == remove && c.dst != nil && c.dst.isDir()) {
		name += "/"
	}
	switch {
	case c.kind == remove:
		return "*deleting   " + name
	case c.src != nil && c.src.isLink():
		return c.Item + " " + name + " -> " + c.src.Link
	case c.linkTo != "":
		return c.Item + " " + name + " => " + c.linkTo
	}
	return c.Item + " " + name
}

// Plan is what a run will do to make the target match the source.
type Plan struct {
	Src, Dst *Tree
	// SrcName is the source root's rsync name: "." for a source whose
	// contents are copied, its base name otherwise.
	SrcName string
	Changes []*Change
	// Files and Bytes count the regular files to send and their bytes.
	Files int
	Bytes int64
	// Skipped counts the devices and specials -D asked for and left out.
	Skipped int
	// DeleteSkipped counts the deletions --max-delete held back; Errors
	// are what the plan could not decide (deletions are off when the
	// source listing failed).
	DeleteSkipped int
	Errors        []error
	// NewRoot says the target's root directory does not exist yet.
	NewRoot bool
}

// listOnly says the run copies a --files-from list whose names leave
// the source directory itself out.
func (o Options) listOnly() bool {
	l, ok := o.Filter.(*ListFilter)
	return ok && !l.names["."]
}

// attrCode returns the six attribute letters c s t p o g (without the
// leading type letters) comparing source s with target d; sending says
// the content is sent (an unset -t then shows 'T').
func (o Options) attrCode(s, d *Entry, sending, sumDiffers bool) string {
	b := []byte(".........")
	if sumDiffers {
		b[0] = 'c'
	}
	if s.isFile() && s.Info.Size() != d.Info.Size() {
		b[1] = 's'
	}
	switch {
	case sending && !o.Times:
		// Without -t what is sent takes the time of its transfer.
		b[2] = 'T'
	case o.Times && s.Info.ModTime().Unix() != d.Info.ModTime().Unix() && (!s.isLink() || o.linkTimes):
		b[2] = 't'
	}
	if o.Perms && !s.isLink() && s.Info.Mode()&modeBits != d.Info.Mode()&modeBits {
		b[3] = 'p'
	}
	su, sg, sok := transfer.OwnerOf(s.Info)
	du, dg, dok := transfer.OwnerOf(d.Info)
	if sok && dok {
		if o.Owner && su != du {
			b[4] = 'o'
		}
		if o.Group && sg != dg {
			b[5] = 'g'
		}
	}
	return string(b)
}

// modeBits are the mode bits -p keeps, the engine's.
const modeBits = transfer.ModeBits

// makePlan compares the listed source and target and decides every
// change, as rsync's generator would.
func makePlan(ctx context.Context, src, dst *Tree, srcName string, o Options) *Plan {
	p := &Plan{Src: src, Dst: dst, SrcName: srcName}
	o.linkTimes = transfer.CanLchtimes(dst.Root.FS)
	// The target's listing failing is an error too: a target that lies
	// (a remote one) is refused, and its deletions are off.
	p.Errors = append(p.Errors, src.Errors...)
	p.Errors = append(p.Errors, dst.Errors...)
	y := byte('>')
	if o.Push {
		y = '<'
	}
	if _, ok := dst.Entries[srcName]; !ok {
		p.NewRoot = true
	}
	sums := o.checksums(ctx, p)
	groups := o.hardLinkGroups(src)
	pickFirst(groups, dst)
	// skipped holds directories whose subtree the plan leaves alone.
	var skipped []string
	under := func(n string) bool {
		for _, s := range skipped {
			if s == "." || strings.HasPrefix(n, s+"/") {
				return true
			}
		}
		return false
	}
	for _, n := range src.sorted() {
		if under(n) {
			continue
		}
		s := src.Entries[n]
		d := dst.Entries[n]
		switch {
		case s.isDir() && n == "." && o.listOnly():
			// --files-from: the source directory itself is not part of
			// the transfer unless listed, only what leads to the names.
		case s.isDir():
			if n != srcName && !o.Recursive {
				p.add(&Change{kind: message, Name: n, text: fmt.Sprintf("skipping directory %s", n)})
				skipped = append(skipped, n)
				continue
			}
			switch {
			case d == nil && o.Existing:
				skipped = append(skipped, n)
			case d == nil:
				p.add(&Change{kind: mkDir, Name: n, Item: "cd+++++++++", src: s})
			case !d.isDir() && o.IgnoreExisting:
				skipped = append(skipped, n)
			case !d.isDir():
				p.add(&Change{kind: mkDir, Name: n, Item: "cd+++++++++", src: s, dst: d, clear: true})
			default:
				if code := o.attrCode(s, d, false, false); code != "........." {
					p.add(&Change{kind: setAttrs, Name: n, Item: ".d" + code, src: s, dst: d})
				} else {
					p.add(&Change{kind: setAttrs, Name: n, src: s, dst: d})
				}
			}
		case s.isLink():
			if !o.Links {
				p.add(&Change{kind: message, Name: n, text: fmt.Sprintf("skipping non-regular file %q", n)})
				continue
			}
			if o.SafeLinks && unsafeLink(n, s.Link) {
				p.add(&Change{kind: message, Name: n, verbose: true, text: fmt.Sprintf("ignoring unsafe symlink %q -> %q", n, s.Link)})
				continue
			}
			switch {
			case d == nil && o.Existing:
			case d == nil:
				p.add(&Change{kind: mkLink, Name: n, Item: "cL+++++++++", src: s})
			case o.IgnoreExisting:
			case d.isLink() && d.Link == s.Link:
				if code := o.attrCode(s, d, false, false); code != "........." {
					p.add(&Change{kind: setAttrs, Name: n, Item: ".L" + code, src: s, dst: d})
				}
			case d.isLink():
				code := []byte(o.attrCode(s, d, true, false))
				code[0] = 'c'
				p.add(&Change{kind: mkLink, Name: n, Item: "cL" + string(code), src: s, dst: d, clear: true})
			case d.isDir() && !o.Delete && p.nonEmpty(n):
				p.refuse(n, "symlink")
			default:
				p.add(&Change{kind: mkLink, Name: n, Item: "cL+++++++++", src: s, dst: d, clear: true})
				p.clearDir(d, o)
			}
		case s.isFile():
			size := s.Info.Size()
			if (o.MaxSize > 0 && size > o.MaxSize) || (o.MinSize > 0 && size < o.MinSize) {
				continue
			}
			if g, ok := groups[n]; ok && g.first != n {
				p.add(p.linkChange(o, s, d, g))
				continue
			}
			switch {
			case d == nil && o.Existing:
			case d != nil && o.IgnoreExisting:
			case d == nil:
				p.send(&Change{kind: sendFile, Name: n, Item: string(y) + "f+++++++++", src: s})
			case d.isDir() && !o.Delete && p.nonEmpty(n):
				p.refuse(n, "regular file")
			case !d.isFile():
				p.send(&Change{kind: sendFile, Name: n, Item: string(y) + "f+++++++++", src: s, dst: d, clear: true})
				p.clearDir(d, o)
			case o.IgnoreExisting:
			case o.Update && d.Info.ModTime().Unix() > s.Info.ModTime().Unix():
			default:
				same, differs := o.same(s, d, sums)
				code := o.attrCode(s, d, !same, differs)
				switch {
				case !same && o.Append && d.Info.Size() >= s.Info.Size():
				case !same:
					p.send(&Change{kind: sendFile, Name: n, Item: string(y) + "f" + code, src: s, dst: d})
				case code != ".........":
					p.add(&Change{kind: setAttrs, Name: n, Item: ".f" + code, src: s, dst: d})
				default:
					p.add(&Change{kind: setAttrs, Name: n, src: s, dst: d})
				}
			}
		case o.Devices:
			// rsync -D would make it; SFTP has no request to.
			p.add(&Change{kind: message, Name: n, text: fmt.Sprintf("skipping device or special file %q: SFTP cannot create one", n)})
			p.Skipped++
		default:
			p.add(&Change{kind: message, Name: n, text: fmt.Sprintf("skipping non-regular file %q", n)})
		}
	}
	if o.Delete {
		p.planDeletes(o)
	}
	return p
}

func (p *Plan) add(c *Change) { p.Changes = append(p.Changes, c) }

func (p *Plan) send(c *Change) {
	p.Files++
	p.Bytes += c.src.Info.Size()
	p.add(c)
}

// nonEmpty reports whether the target's directory n has entries.
func (p *Plan) nonEmpty(n string) bool {
	prefix := n + "/"
	for m := range p.Dst.Entries {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// refuse records that the target's non-empty directory n stands where
// the source has another type and nothing may delete it.
func (p *Plan) refuse(n, what string) {
	p.add(&Change{kind: message, Name: n, text: "cannot delete non-empty directory: " + n})
	p.Errors = append(p.Errors, &transfer.Error{Op: "make way for new " + what, Path: n,
		Err: fmt.Errorf("a non-empty directory is in the way"), Hint: "add --delete to replace it"})
}

// clearDir plans the removal of what the target's directory d holds,
// which a replacement of another type must remove first.
func (p *Plan) clearDir(d *Entry, o Options) {
	if !d.isDir() {
		return
	}
	prefix := d.Name + "/"
	var names []string
	for m := range p.Dst.Entries {
		if strings.HasPrefix(m, prefix) {
			names = append(names, m)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, m := range names {
		p.add(&Change{kind: remove, Name: m, Item: "*deleting", dst: p.Dst.Entries[m], early: true})
	}
}

// same says whether the target file d already has the source s's
// content by the run's test, and whether a checksum showed it differ.
func (o Options) same(s, d *Entry, sums map[string]bool) (same, sumDiffers bool) {
	switch {
	case o.IgnoreTimes:
		return false, false
	case s.Info.Size() != d.Info.Size():
		return false, o.Checksum
	case o.Checksum:
		eq := sums[s.Name]
		return eq, !eq
	case o.SizeOnly:
		return true, false
	}
	return s.Info.ModTime().Unix() == d.Info.ModTime().Unix(), false
}

// checksums compares, with -c, the content of every file of the same
// size on both sides, several at once.
func (o Options) checksums(ctx context.Context, p *Plan) map[string]bool {
	if !o.Checksum {
		return nil
	}
	var names []string
	for n, s := range p.Src.Entries {
		if d := p.Dst.Entries[n]; d != nil && s.isFile() && d.isFile() && s.Info.Size() == d.Info.Size() {
			names = append(names, n)
		}
	}
	if out, ok := o.helperChecksums(ctx, p, names); ok {
		return out
	}
	eq := make([]bool, len(names))
	errs := make([]error, len(names))
	slots.ForEach(len(names), listers, func(i int) {
		n := names[i]
		a, err := transfer.Sum256(ctx, transfer.Endpoint{FS: p.Src.Root.FS, Path: pathOf(p.Src.Root, p.SrcName, n)})
		if err != nil {
			errs[i] = err
			return
		}
		b, err := transfer.Sum256(ctx, transfer.Endpoint{FS: p.Dst.Root.FS, Path: pathOf(p.Dst.Root, p.SrcName, n)})
		if err != nil {
			errs[i] = err
			return
		}
		eq[i] = bytes.Equal(a, b)
	})
	out := map[string]bool{}
	for i, n := range names {
		if errs[i] != nil {
			p.Errors = append(p.Errors, errs[i])
			continue
		}
		out[n] = eq[i]
	}
	return out
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// helperChecksums compares, with -c, the content of the files names
// where a helper hashes the remote end's in one request, on every CPU of
// its host, while this end hashes its own: XXH3-128 (delta.SumOf) both
// ends. ok false: no helper answered (or the request as a whole failed),
// and the files are compared one by one as without one.
func (o Options) helperChecksums(ctx context.Context, p *Plan, names []string) (map[string]bool, bool) {
	if o.Delta == nil || len(names) == 0 {
		return nil, false
	}
	local, remote := p.Src, p.Dst
	if !o.Push {
		local, remote = p.Dst, p.Src
	}
	if local.Root.FS.Label() != "" || remote.Root.FS.Label() == "" {
		return nil, false
	}
	s, release, err := o.Delta.DeltaSession(ctx, remote.Root.FS)
	if err != nil {
		o.logf("checksums: %d files hashed one by one: %v", len(names), err)
		return nil, false
	}
	defer release()
	paths := make([]string, len(names))
	sizes := make([]int64, len(names))
	for i, n := range names {
		paths[i] = pathOf(remote.Root, p.SrcName, n)
		sizes[i] = remote.Entries[n].Info.Size()
	}
	var (
		theirs   []delta.RangeSum
		theirErr []error
		reqErr   error
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		theirs, theirErr, reqErr = s.Sums(ctx, paths, sizes)
	}()
	ours := make([]delta.RangeSum, len(names))
	ourErr := make([]error, len(names))
	workers := runtime.GOMAXPROCS(0)
	bufs := make(chan []byte, workers)
	for range workers {
		bufs <- make([]byte, 1<<20)
	}
	slots.ForEach(len(names), workers, func(i int) {
		n := names[i]
		e := transfer.Endpoint{FS: local.Root.FS, Path: pathOf(local.Root, p.SrcName, n)}
		buf := <-bufs
		ours[i], ourErr[i] = transfer.ContentSum(ctx, e, local.Entries[n].Info.Size(), buf)
		bufs <- buf
	})
	<-done
	if reqErr != nil {
		o.logf("checksums: %d files hashed one by one: the helper's sums failed: %s", len(names), vis.String(reqErr.Error()))
		return nil, false
	}
	o.logf("checksums: %d files hashed by the helper at %s, beside this end", len(names), remote.Root.FS.Label())
	out := map[string]bool{}
	for i, n := range names {
		switch {
		case ourErr[i] != nil:
			p.Errors = append(p.Errors, &transfer.Error{Op: "checksum", Path: local.Root.FS.Label() + paths[i], Err: ourErr[i]})
		case theirErr[i] != nil:
			p.Errors = append(p.Errors, &transfer.Error{Op: "checksum", Path: remote.Root.FS.Label() + paths[i], Err: theirErr[i]})
		default:
			out[n] = ours[i] == theirs[i]
		}
	}
	return out, true
}

// planDeletes plans, with --delete, the removal of every target entry
// in a directory the source has whose name the source lacks, deepest
// first, within --max-delete. Nothing is deleted when a listing failed:
// the missing names could be the listing's fault.
func (p *Plan) planDeletes(o Options) {
	if len(p.Src.Errors) > 0 || len(p.Dst.Errors) > 0 {
		p.add(&Change{kind: message, text: "IO error encountered -- skipping file deletion"})
		return
	}
	var names []string
	for n := range p.Dst.Entries {
		if _, ok := p.Src.Entries[n]; ok || n == p.SrcName {
			continue
		}
		parent := parentName(n)
		if s, ok := p.Src.Entries[parent]; !ok || !s.isDir() {
			// Inside a directory that goes: its removal lists it.
			if _, gone := p.Src.Entries[parent]; gone || !p.extraneous(parent) {
				continue
			}
		}
		names = append(names, n)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	done := 0
	for _, n := range names {
		if o.MaxDelete >= 0 && done >= o.MaxDelete {
			p.DeleteSkipped++
			continue
		}
		done++
		p.add(&Change{kind: remove, Name: n, Item: "*deleting", dst: p.Dst.Entries[n]})
	}
}

// extraneous says the target's name n is below, or is, a directory the
// source lacks within a directory the source has.
func (p *Plan) extraneous(n string) bool {
	for n != "." && n != p.SrcName {
		parent := parentName(n)
		if s, ok := p.Src.Entries[parent]; ok {
			return s.isDir()
		}
		n = parent
	}
	return false
}
