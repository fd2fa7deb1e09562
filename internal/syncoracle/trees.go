package syncoracle

import (
	"strings"
	"time"
)

var (
	old    = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	mid    = time.Date(2015, 6, 7, 8, 9, 10, 0, time.UTC)
	shared = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // several entries have this very time
	newer  = time.Date(2023, 9, 9, 9, 9, 9, 0, time.UTC)
)

// Owner and group of the entries that are not root's: a run as root that
// keeps ownership (-o, -g) must give them back, one that does not must not.
const (
	otherUID = 1234
	otherGID = 5678
)

// pseudoRandom is n bytes that no run can recreate by chance or compress
// to nothing.
// changedOld and changedNew are two versions of a file large enough to go
// as a delta where a helper is at the far end: the new one has bytes put
// in, changed and taken out.
var (
	changedOld = pseudoRandom(300 << 10)
	changedNew = changedOld[:1000] + "put in" + changedOld[1000:150_000] + "changed" + changedOld[150_007:250_000] + changedOld[250_100:]
)

func pseudoRandom(n int) string {
	var b strings.Builder
	x := uint32(2463534242)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(byte(x))
	}
	return b.String()
}

// Source is the tree every case copies: nested and empty directories,
// symlinks inside and out of the tree, dangling and to the tree itself,
// hard-link groups, a sparse file, modes from 0444 to 0755 on files and a
// 0555 directory, old and equal mtimes, names with spaces, unicode and
// leading dashes (also in directories no starting state has, which a
// copy into DEST that exists makes afresh), and entries owned by
// otherUID:otherGID.
func Source() []Entry {
	return []Entry{
		{Path: ".", Kind: Dir, Mtime: mid},
		{Path: "top.txt", Data: "top level\n", Mtime: mid},
		{Path: "name with spaces.txt", Data: "spaces\n", Mtime: shared},
		{Path: "ünïcödé файл.txt", Data: "unicode\n", Mtime: shared},
		{Path: "-leading-dash", Data: "dash\n", Mtime: shared},
		{Path: "--double-dash.txt", Data: "double dash\n", Mtime: shared},
		{Path: "zero", Mtime: old},
		{Path: "small.bin", Data: "0123456789", Mtime: old},
		{Path: "big.bin", Data: pseudoRandom(200 << 10), Mtime: mid},
		{Path: "changed.bin", Data: changedNew, Mtime: mid},
		{Path: "sparse.img", Data: strings.Repeat("S", 4096), Size: 1 << 20, Mtime: mid},
		{Path: "samesize.txt", Data: "content A\n", Mtime: mid},
		{Path: "a", Kind: Dir, Mtime: mid},
		{Path: "a/script.sh", Data: "#!/bin/sh\necho hi\n", Mode: 0o755, Mtime: old},
		{Path: "a/secret", Data: "secret\n", Mode: 0o600, UID: otherUID, GID: otherGID, Mtime: mid},
		{Path: "a/ro.txt", Data: "read only\n", Mode: 0o444, Mtime: old},
		{Path: "a/x.tmp", Data: "tmp\n", Mtime: old},
		{Path: "a/newer.txt", Data: "source version\n", Mtime: old},
		{Path: "a/b", Kind: Dir, Mtime: old},
		{Path: "a/b/c", Kind: Dir, Mtime: old},
		{Path: "a/b/c/deep.txt", Data: "deep\n", Mtime: old},
		{Path: "a/b/c/deep.log", Data: "log\n", Mtime: old},
		{Path: "a/b/link-rel", Kind: Symlink, Target: "../../top.txt", Mtime: old},
		{Path: "owned", Kind: Dir, Mode: 0o750, UID: otherUID, GID: otherGID, Mtime: old},
		{Path: "owned/f", Data: "owned\n", Mode: 0o640, UID: otherUID, GID: otherGID, Mtime: old},
		{Path: "owned/g", Data: "group only\n", GID: otherGID, Mtime: old},
		{Path: "cache", Kind: Dir, Mtime: old},
		{Path: "cache/c1", Data: "c1\n", Mtime: old},
		{Path: "empty", Kind: Dir, Mtime: old},
		{Path: "empty2", Kind: Dir, Mtime: mid},
		{Path: "empty2/nested", Kind: Dir, Mtime: old},
		{Path: "rodir", Kind: Dir, Mode: 0o555, Mtime: old},
		{Path: "rodir/inside", Data: "inside\n", Mtime: old},
		{Path: "link-in", Kind: Symlink, Target: "top.txt", Mtime: old},
		{Path: "link-dir", Kind: Symlink, Target: "a/b", Mtime: old},
		{Path: "link-up", Kind: Symlink, Target: "../outside-the-tree", Mtime: old},
		{Path: "link-abs", Kind: Symlink, Target: "/etc/hostname", Mtime: old},
		{Path: "dangling", Kind: Symlink, Target: "no/such/file", Mtime: mid},
		{Path: "self", Kind: Symlink, Target: ".", Mtime: old},
		{Path: "link owned", Kind: Symlink, Target: "top.txt", UID: otherUID, GID: otherGID, Mtime: old},
		{Path: "hard1", Data: "hard linked\n", Mtime: mid},
		{Path: "a/hard2", Kind: Hardlink, Target: "hard1"},
		{Path: "a/b/hard3", Kind: Hardlink, Target: "hard1"},
		{Path: "hl-x", Data: "pair\n", Mode: 0o600, Mtime: shared},
		{Path: "hl-y", Kind: Hardlink, Target: "hl-x"},
		{Path: "new dir ü", Kind: Dir, Mtime: mid},
		{Path: "new dir ü/name with spaces.txt", Data: "spaces inside\n", Mtime: shared},
		{Path: "new dir ü/ünïcödé файл", Kind: Dir, Mtime: old},
		{Path: "new dir ü/ünïcödé файл/-leading-dash", Data: "dash inside\n", Mtime: old},
		{Path: "-dash dir", Kind: Dir, Mtime: old},
		{Path: "-dash dir/--double-dash", Data: "double dash inside\n", Mode: 0o600, Mtime: mid},
	}
}

// State is what DEST holds before a run. Its entries are relative to the
// place the source's contents land: DEST itself for a source with a
// trailing slash, DEST/src without one.
type State struct {
	Name    string
	Exists  bool // DEST exists (empty unless Entries say otherwise)
	Entries []Entry
}

// States are the starting points of DEST the cases choose from.
var (
	NoTarget    = State{Name: "none"}
	EmptyTarget = State{Name: "empty", Exists: true}
	// OlderCopy is a partial older copy: files changed in content, size,
	// time, mode or owner only, one the same size and time but different
	// (only -c sees it), one newer than the source (-u keeps it), extra
	// files and directories (--delete removes them, an excluded one only
	// with --delete-excluded), a retargeted symlink, a hard-link group
	// the target holds as separate files, and an older version of a large
	// file (changed.bin), which goes as a delta through a helper.
	OlderCopy = State{Name: "older", Exists: true, Entries: []Entry{
		{Path: ".", Kind: Dir, Mtime: old},
		{Path: "top.txt", Data: "TOP LEVEL\n", Mtime: old},
		{Path: "name with spaces.txt", Data: "spaces\n", Mtime: shared},
		{Path: "ünïcödé файл.txt", Data: "unicode\n", Mtime: old},
		{Path: "-leading-dash", Data: "dash, longer\n", Mtime: shared},
		{Path: "zero", Mtime: old},
		{Path: "big.bin", Data: pseudoRandom(200 << 10), Mtime: mid},
		{Path: "changed.bin", Data: changedOld, Mtime: old},
		{Path: "sparse.img", Data: strings.Repeat("S", 4096), Size: 1 << 20, Mtime: old},
		{Path: "samesize.txt", Data: "content B\n", Mtime: mid},
		{Path: "a", Kind: Dir, Mode: 0o700, Mtime: old},
		{Path: "a/script.sh", Data: "#!/bin/sh\n", Mtime: old},
		{Path: "a/secret", Data: "secret\n", Mode: 0o644, Mtime: mid},
		{Path: "a/newer.txt", Data: "target version, newer\n", Mtime: newer},
		{Path: "a/extra-dir", Kind: Dir, Mtime: old},
		{Path: "a/extra-dir/x", Data: "x\n", Mtime: old},
		{Path: "a/b/c/deep.txt", Data: "deep\n", Mtime: old},
		{Path: "old.log", Data: "old\n", Mtime: old},
		{Path: "extra.txt", Data: "extra\n", Mtime: old},
		{Path: "link-in", Kind: Symlink, Target: "a/script.sh", Mtime: old},
		{Path: "dangling", Kind: Symlink, Target: "no/such/file", Mtime: old},
		{Path: "hard1", Data: "hard linked\n", Mtime: mid},
		{Path: "a/hard2", Data: "hard linked\n", Mtime: mid},
		{Path: "owned", Kind: Dir, Mtime: old},
		{Path: "owned/f", Data: "owned\n", Mode: 0o640, Mtime: old},
		{Path: "cache", Kind: Dir, Mtime: old},
		{Path: "cache/stale", Data: "stale\n", Mtime: old},
	}}
	// Clashes has the other type where the source has a file, a
	// directory or a symlink: a non-empty and an empty directory where
	// files go, a file where a directory goes, symlinks where directories
	// go (one to a directory outside DEST, which a copy must replace, not
	// write through), a directory where a symlink goes, and a plain file
	// where a hard link goes.
	Clashes = State{Name: "clashes", Exists: true, Entries: []Entry{
		{Path: ".", Kind: Dir, Mtime: old},
		{Path: "top.txt", Kind: Dir, Mtime: old},
		{Path: "top.txt/inner", Data: "inner\n", Mtime: old},
		{Path: "zero", Kind: Dir, Mtime: old},
		{Path: "a", Data: "a is a file here\n", Mtime: old},
		{Path: "empty", Kind: Symlink, Target: "owned", Mtime: old},
		{Path: "cache", Kind: Symlink, Target: "../decoy", Mtime: old},
		{Path: "link-in", Kind: Dir, Mtime: old},
		{Path: "hl-y", Data: "pair\n", Mode: 0o600, Mtime: shared},
	}}
)

// Decoy is built beside the place the contents land (beside DEST, or
// inside it for a source without a trailing slash): the directory a
// symlink of Clashes points at, which no run may write into.
var Decoy = []Entry{
	{Path: ".", Kind: Dir, Mtime: old},
	{Path: "keep", Data: "outside the destination\n", Mtime: old},
}
