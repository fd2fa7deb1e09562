// Package syncoracle is the differential test of hpncp sync against rsync:
// it builds the same starting state twice, runs rsync into one copy and the
// tool under test into the other with the same command line, and compares
// what a user would check: the itemized lines of a dry run and, after a
// real run, every entry of the target tree (type, content, link target,
// hard-link group, holes, mode, mtime, owner).
//
// The trees are built from a list of entries rather than copied, so that
// both copies start from the same state by construction: cp -a would be one
// more tool whose idea of hard links, holes and times the test relies on.
package syncoracle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is the type of entry Build makes.
type Kind int

const (
	File Kind = iota
	Dir
	Symlink
	// Hardlink is a second name for the file at Entry.Target, which an
	// earlier entry made.
	Hardlink
)

// Entry is one name of a tree to build.
type Entry struct {
	Path string // slash-separated, relative to the root; "." is the root
	Kind Kind

	Data string // a file's content
	// Size, when larger than Data, makes a sparse file: Data at the start
	// and again at the end, a hole between.
	Size int64

	// Target is a symlink's text, or the path of the file a Hardlink names.
	Target string

	Mode     os.FileMode // permission bits; 0 means 0644 for files, 0755 for dirs
	Mtime    time.Time   // zero means defaultMtime
	UID, GID int         // applied with lchown; 0:0 is root's
}

// defaultMtime is far enough in the past that a time a run sets to "now"
// cannot be mistaken for one the tree was built with.
var defaultMtime = time.Date(2019, 3, 4, 5, 6, 7, 0, time.UTC)

// Build makes entries under root, creating root and any missing parent
// directory (0755, defaultMtime). It sets times last, deepest first, as
// creating a name changes its directory's mtime.
func Build(root string, entries []Entry) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("build %s: %w", root, err)
	}
	dirs := map[string]bool{".": true}
	type stamp struct {
		path  string
		mtime time.Time
	}
	var stamps []stamp
	var parents func(rel string) error
	parents = func(rel string) error {
		dir := filepath.Dir(rel)
		if dirs[dir] {
			return nil
		}
		if err := parents(dir); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		dirs[dir] = true
		stamps = append(stamps, stamp{dir, defaultMtime})
		return nil
	}
	explicit := map[string]bool{}
	for _, e := range entries {
		full := filepath.Join(root, filepath.FromSlash(e.Path))
		if err := parents(filepath.FromSlash(e.Path)); err != nil {
			return fmt.Errorf("build %s: %w", full, err)
		}
		if err := makeEntry(root, full, e); err != nil {
			return fmt.Errorf("build %s: %w", full, err)
		}
		if e.Kind == Dir {
			dirs[filepath.FromSlash(e.Path)] = true
		}
		if e.Kind != Hardlink {
			mt := e.Mtime
			if mt.IsZero() {
				mt = defaultMtime
			}
			explicit[filepath.FromSlash(e.Path)] = true
			stamps = append(stamps, stamp{filepath.FromSlash(e.Path), mt})
		}
	}
	if !explicit["."] {
		stamps = append(stamps, stamp{".", defaultMtime})
	}
	// Deepest first, so that no later step touches a directory whose
	// time is already set; a parent made implicitly but later named by
	// an entry keeps the entry's time, which comes later in stamps.
	slices.SortStableFunc(stamps, func(a, b stamp) int {
		return strings.Count(b.path, string(filepath.Separator)) + boolInt(b.path != ".") -
			strings.Count(a.path, string(filepath.Separator)) - boolInt(a.path != ".")
	})
	for _, s := range stamps {
		ts := []unix.Timespec{unix.NsecToTimespec(s.mtime.UnixNano()), unix.NsecToTimespec(s.mtime.UnixNano())}
		full := filepath.Join(root, s.path)
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, full, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("build %s: set times: %w", full, err)
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func makeEntry(root, full string, e Entry) error {
	switch e.Kind {
	case File:
		if err := writeFile(full, e); err != nil {
			return err
		}
	case Dir:
		if err := os.Mkdir(full, 0o755); err != nil && !(errors.Is(err, os.ErrExist) && e.Path == ".") {
			return err
		}
	case Symlink:
		if err := os.Symlink(e.Target, full); err != nil {
			return err
		}
	case Hardlink:
		// A hard link shares its inode's mode, owner and times.
		return os.Link(filepath.Join(root, filepath.FromSlash(e.Target)), full)
	default:
		return fmt.Errorf("unknown kind %d", e.Kind)
	}
	if err := os.Lchown(full, e.UID, e.GID); err != nil {
		return err
	}
	if e.Kind == Symlink {
		return nil // Linux has no modes on symlinks
	}
	mode := e.Mode
	if mode == 0 {
		mode = 0o644
		if e.Kind == Dir {
			mode = 0o755
		}
	}
	// After chown, which clears set-id bits.
	return os.Chmod(full, mode)
}

func writeFile(full string, e Entry) error {
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(e.Data)
	if err == nil && e.Size > int64(len(e.Data)) {
		// Data again at the end, so that the hole is in the middle and
		// a copy cannot keep it by merely truncating.
		_, err = f.WriteAt([]byte(e.Data), e.Size-int64(len(e.Data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
