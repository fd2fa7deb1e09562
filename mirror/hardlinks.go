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
		dev, ino, nlink, ok := transfer.FileID(e.Info)
		if !ok || nlink < 2 {
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

// pickFirst chooses, once the target is listed, which name of each group
// is sent: as rsync, the last name when the target has none of them, the
// first otherwise.
func pickFirst(groups map[string]*linkGroup, dst *Tree) {
	seen := map[*linkGroup]bool{}
	for _, g := range groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		g.first = g.names[0]
		any := false
		for _, n := range g.names {
			if dst.Entries[n] != nil {
				any = true
			}
		}
		if !any {
			g.first = g.names[len(g.names)-1]
		}
	}
}

// linkChange is the change that makes the target's name of s another
// name of its group's first, or nothing when the target has it already.
func (p *Plan) linkChange(o Options, s, d *Entry, g *linkGroup) *Change {
	if d != nil && d.isFile() {
		if same, _ := o.same(s, d, nil); same && !o.Checksum {
			if code := o.attrCode(s, d, false, false); code != "........." {
				return &Change{kind: setAttrs, Name: s.Name, Item: ".f" + code, src: s, dst: d}
			}
			return &Change{kind: setAttrs, Name: s.Name, src: s, dst: d}
		}
	}
	c := &Change{kind: hardLink, Name: s.Name, Item: "hf+++++++++", src: s, dst: d, linkTo: g.first, group: g.first}
	if d != nil {
		c.clear = true
		if d.isFile() {
			c.Item = "hf" + o.attrCode(s, d, true, false)
			if o.DryRun {
				// rsync's dry run does not name the other name of a
				// group member the target has.
				c.linkTo = ""
			}
		}
	}
	return c
}
