package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// FileID is a file's device and inode number on the server: two names
// with one FileID are one file.
type FileID struct{ Dev, Ino uint64 }

// maxFileIDs bounds the output of the server's find: a listing of hard
// links larger than this is refused rather than held.
const maxFileIDs = 64 << 20

// HardLinked lists, with the server's find (SFTP tells no inode
// numbers), the regular files below dir that have more than one name:
// their paths relative to dir, with their FileIDs. It fails when the
// server runs no commands or its find lacks -printf (GNU find has it).
func (s *SFTP) HardLinked(ctx context.Context, dir string) (map[string]FileID, error) {
	out, err := runCommandMax(ctx, s.pool.firstConn(), hardLinksCommand(dir), maxFileIDs)
	if err != nil {
		return nil, fmt.Errorf("list hard links below %s%s on the server: %w", s.label, dir, err)
	}
	ids, err := parseFileIDs(out)
	if err != nil {
		return nil, fmt.Errorf("list hard links below %s%s on the server: %w", s.label, dir, err)
	}
	return ids, nil
}

// hardLinksCommand is HardLinked's find. %P names each file relative to
// the directory as find was given it, so that the "./" PathArg may put
// before dir changes nothing in the names.
func hardLinksCommand(dir string) string {
	return "find " + PathArg(dir) + " -type f -links +1 -printf '%D %i %P\\0'"
}

// parseFileIDs reads find's "-printf '%D %i %P\0'" records: the device,
// the inode and a path relative to the directory searched, which must
// stay below it.
func parseFileIDs(out []byte) (map[string]FileID, error) {
	ids := map[string]FileID{}
	for len(out) > 0 {
		i := bytes.IndexByte(out, 0)
		if i < 0 {
			return nil, errors.New("find's output ends inside a record")
		}
		rec := string(out[:i])
		out = out[i+1:]
		devText, rest, ok1 := strings.Cut(rec, " ")
		inoText, name, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("unexpected find record %q", rec)
		}
		dev, err1 := strconv.ParseUint(devText, 10, 64)
		ino, err2 := strconv.ParseUint(inoText, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unexpected find record %q", rec)
		}
		if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("find named %q, which is not below the directory searched", name)
		}
		ids[name] = FileID{Dev: dev, Ino: ino}
	}
	return ids, nil
}
