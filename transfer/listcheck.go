package transfer

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// A server's listing is hostile input: what follows is checked before
// anything is believed of it.

// SortListing sorts a directory's listing by name and returns the names
// it holds more than once, nil when none. A listing names an entry once:
// a server that names one twice (a directory, then a link to elsewhere)
// would have a receiver descend into the one and make the other, so
// callers copy neither and report the name (DuplicateError).
//
// Names that differ only in case are not refused: a receiver that folds
// case cannot be told from here (APFS and NTFS may or may not, ext4 may
// per directory), and what such a pair could do, a link made under one
// spelling and written through under the other, the confined local file
// system refuses, as it refuses any write through a link.
func SortListing(listed []fs.FileInfo) map[string]bool {
	sort.Slice(listed, func(i, j int) bool { return listed[i].Name() < listed[j].Name() })
	var dups map[string]bool
	for i := 1; i < len(listed); i++ {
		if n := listed[i].Name(); n == listed[i-1].Name() {
			if dups == nil {
				dups = map[string]bool{}
			}
			dups[n] = true
		}
	}
	return dups
}

// ErrDuplicateName is a name a listing holds more than once.
var ErrDuplicateName = errors.New("listed more than once")

// DuplicateError is the failure to copy the name that the listing of the
// directory dir held more than once.
func DuplicateError(dir, name string) error {
	return &Error{Op: "read directory", Path: dir, Err: fmt.Errorf("%q: %w", name, ErrDuplicateName),
		Hint: "the server named one entry twice, as a broken or hostile one does; neither was copied"}
}

// MaxLinkTarget is the longest link target accepted, in bytes: Linux's
// PATH_MAX less its NUL, the most a link made here could hold.
const MaxLinkTarget = 4095

// CheckLinkTarget refuses a link target no file system stores: one with
// a NUL byte, which the receiver's symlink(2) would cut short, or one
// longer than MaxLinkTarget.
func CheckLinkTarget(target string) error {
	switch {
	case strings.IndexByte(target, 0) >= 0:
		return errors.New("the link's target holds a NUL byte")
	case len(target) > MaxLinkTarget:
		return fmt.Errorf("the link's target is %d bytes long, more than %d", len(target), MaxLinkTarget)
	}
	return nil
}

// MaxDepth is how many levels of directories below its operand a walk
// goes before it calls the tree endless (maxDepth); hpncp sync's lister
// stops at the same depth.
const MaxDepth = maxDepth
