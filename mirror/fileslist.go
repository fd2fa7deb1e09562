package mirror

import "strings"

// ListFilter keeps the names of a --files-from list, the directories
// that lead to them and, with recursion, what listed directories hold;
// rsync's --files-from without -r copies just the names listed.
type ListFilter struct {
	names   map[string]bool // listed
	parents map[string]bool // directories on the way to a listed name
	recurse bool
	// rules, when not nil, apply too: a name both keep is kept.
	rules Filter
}

// NewListFilter makes the filter of list, rsync names relative to the
// source (clean, slash-separated: transfer.ReadFileList's).
func NewListFilter(list []string, recurse bool, rules Filter) *ListFilter {
	f := &ListFilter{names: map[string]bool{}, parents: map[string]bool{}, recurse: recurse, rules: rules}
	for _, n := range list {
		f.names[n] = true
		for d := parentName(n); d != "." && d != "/"; d = parentName(d) {
			f.parents[d] = true
		}
	}
	return f
}

// Lines are the rules' lines (filter.Rules.Lines), which a helper's walk
// may prune by: what they exclude, f does.
func (f *ListFilter) Lines() []string {
	if l, ok := f.rules.(interface{ Lines() []string }); ok {
		return l.Lines()
	}
	return nil
}

// Excluded implements Filter.
func (f *ListFilter) Excluded(n string, dir bool) bool {
	if f.rules != nil && f.rules.Excluded(n, dir) {
		return true
	}
	if f.names[n] || dir && f.parents[n] {
		return false
	}
	if f.recurse {
		for d := parentName(n); d != "."; d = parentName(d) {
			if f.names[d] {
				return false
			}
			if !strings.Contains(d, "/") {
				break
			}
		}
	}
	return true
}
