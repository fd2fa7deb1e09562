package mirror

import (
	"sort"

	"github.com/hpncp/hpncp/transfer"
)

// linkGroup is a set of source names of one file (-H).
type linkGroup struct {
	names []string // sorted
	first string   // the name whose content is sent; the others link to it
}

// hardLinkGroups finds, with -H, the regular files of src that are one
// file under several names. Only an end that tells inodes (the local
// one) has any; a group's first name is the one sent.
func (o Options) hardLinkGroups(src *Tree) map[string]*linkGroup {
	if !o.HardLinks {
		return nil
	}
	type key struct{ dev, ino uint64 }
	byID := map[key]*linkGroup{}
	for n, e := range src.Entries {
		if !e.isFile() {
			continue
		}
		dev, ino, ok := src.fileID(e)
		if !ok {
			continue
		}
		if _, _, nlink, local := transfer.FileID(e.Info); local && nlink < 2 {
			continue
		}
		k := key{dev, ino}
		g := byID[k]
		if g == nil {
			g = &linkGroup{}
			byID[k] = g
		}
		g.names = append(g.names, n)
	}
	out := map[string]*linkGroup{}
	for _, g := range byID {
		if len(g.names) < 2 {
			continue
		}
		sort.Slice(g.names, func(i, j int) bool { return lessName(g.names[i], g.names[j]) })
		g.first = g.names[0]
		for _, n := range g.names {
			out[n] = g
		}
	}
	return out
}

// fileListLess orders names as rsync's file list has them: a
// directory's files before those of the directories below it.
func fileListLess(a, b string) bool {
	da, db := parentName(a), parentName(b)
	if da != db {
		return lessName(da, db)
	}
	return a < b
}

// pickFirst chooses, once the target is listed, which name of each group
// leads (is sent; the others become its names): as rsync, the first name
// in file-list order the target has as a file, or the last name when the
// target has none.
func pickFirst(groups map[string]*linkGroup, dst *Tree) {
	seen := map[*linkGroup]bool{}
	for _, g := range groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		sort.Slice(g.names, func(i, j int) bool { return fileListLess(g.names[i], g.names[j]) })
		g.first = g.names[len(g.names)-1]
		for _, n := range g.names {
			if d := dst.Entries[n]; d != nil && d.isFile() {
				g.first = n
				break
			}
		}
	}
}

// linkChange is the change that makes the target's name of s another
// name of its group's first, or nothing when the target has it already.
func (p *Plan) linkChange(o Options, s, d *Entry, g *linkGroup) *Change {
	lead := p.Dst.Entries[g.first]
	if d != nil && d.isFile() {
		linked, known := p.Dst.sameFile(d, lead)
		same, _ := o.same(s, d, nil)
		switch {
		case same && (linked || !known):
			// Already a name of the leader (or, where the end tells no
			// inodes, as good as one): only attributes may differ.
			if code := o.attrCode(s, d, false, false); code != "........." {
				return &Change{kind: setAttrs, Name: s.Name, Item: ".f" + code, src: s, dst: d}
			}
			return &Change{kind: setAttrs, Name: s.Name, src: s, dst: d}
		case same:
			// A separate copy of the content: made a name of the leader,
			// with no attribute to change, as rsync shows it.
			return &Change{kind: hardLink, Name: s.Name, Item: "hf         ", src: s, dst: d, linkTo: g.first, group: g.first}
		}
	}
	c := &Change{kind: hardLink, Name: s.Name, Item: "hf+++++++++", src: s, dst: d, linkTo: g.first, group: g.first}
	if d != nil {
		// A file there is replaced by a rename, so that it stays until
		// the link is made; anything else makes way first.
		c.clear = !d.isFile()
		if d.isFile() {
			c.Item = "hf" + o.attrCode(s, d, true, false)
			if o.DryRun {
				// rsync's dry run does not name the leader of a group
				// member the target has.
				c.linkTo = ""
			}
		}
	}
	return c
}

// sameFile says whether two entries of t are one file, and whether the
// end tells (the local one does; a remote one when -H asked its find).
func (t *Tree) sameFile(a, b *Entry) (same, known bool) {
	if a == nil || b == nil {
		return false, false
	}
	ad, ai, aok := t.fileID(a)
	bd, bi, bok := t.fileID(b)
	switch {
	case aok && bok:
		return ad == bd && ai == bi, true
	case t.ids != nil:
		// The server listed every file of several names: one it did
		// not list has one name only.
		return false, true
	}
	return false, false
}
