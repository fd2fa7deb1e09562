package helper

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/hpncp/hpncp/internal/filter"
)

// A walk (request 'L') lists a tree on the helper's host in one request:
// the client's listing of a remote tree cost a round trip or more a
// directory. The reply's stream holds a record for each entry of each
// directory below the root (links not followed, the root itself followed)
// and one for each directory that could not be read:
//
//	'E' dir, name, mode, size, mtime, atime, uid, gid, link target
//	'X' dir, message
//
// dir is the directory's path below the root, slash-separated ("" for
// the root); mode is Go's fs.FileMode; times are Unix seconds. The client
// holds the records as listings to be read (Walk): every name, link
// target and bound a listing is checked for is checked on them as on an
// SFTP listing's.
//
// The request carries the sync's filter rules and the root's rsync name
// (filter.Prune): what they exclude is left out of the records and an
// excluded directory is not read, as rsync's sender does not descend
// into one. The client's lister applies the same rules to what comes, so
// a helper that prunes less changes nothing; one that prunes more hides
// what a server can always hide, by listing less.

const (
	walkEntry = 'E'
	walkError = 'X'
)

// LinkTarget is the target of a link a walk listed.
func (w *walkInfo) LinkTarget() (string, bool) { return w.target, w.mode&fs.ModeSymlink != 0 }

// walkInfo is an entry of a walk, with its owner and access time, read as
// SFTP's listings' are (protocol.Owner, transfer's access times).
type walkInfo struct {
	name         string
	size         int64
	mode         fs.FileMode
	mtime, atime time.Time
	uid, gid     int
	target       string // a link's
}

func (w *walkInfo) Name() string                   { return w.name }
func (w *walkInfo) Size() int64                    { return w.size }
func (w *walkInfo) Mode() fs.FileMode              { return w.mode }
func (w *walkInfo) ModTime() time.Time             { return w.mtime }
func (w *walkInfo) IsDir() bool                    { return w.mode.IsDir() }
func (w *walkInfo) Sys() any                       { return w }
func (w *walkInfo) AccessTime() time.Time          { return w.atime }
func (w *walkInfo) Owner() (uid, gid int, ok bool) { return w.uid, w.gid, true }

// walkModes are the mode bits an entry of a walk may have.
const walkModes = fs.ModePerm | fs.ModeDir | fs.ModeSymlink | fs.ModeNamedPipe | fs.ModeSocket |
	fs.ModeDevice | fs.ModeCharDevice | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | fs.ModeIrregular

// Walk lists the tree at root on the helper's host, at most maxEntries
// entries and maxBytes of names and link targets (a tree past either is
// an error, as a listing's is): each directory's entries by its path
// below the root, slash-separated ("" for the root; an entry that is a
// link says its target by a method LinkTarget), and the directories that
// could not be read, with why (the server's words).
func (c *DeltaClient) Walk(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (dirs map[string][]fs.FileInfo, errs map[string]string, err error) {
	return c.walkOnce(ctx, root, maxEntries, maxBytes, prune, true)
}

// walkOnce is Walk, or WalkAsked where ask is false.
func (c *DeltaClient) walkOnce(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune, ask bool) (dirs map[string][]fs.FileInfo, errs map[string]string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return nil, nil, errBroken
	}
	if ask {
		// A walk asked in the command line is answered before a pull
		// asked ahead on the channel since, or a sign-ahead (which a
		// command line with a walk does not carry).
		if err := c.ready(ctx); err != nil {
			return nil, nil, err
		}
	}
	w, err := c.walk(ctx, root, maxEntries, maxBytes, prune, ask)
	var de *DeltaError
	if !errors.As(err, &de) {
		c.breaks(err)
	}
	if err != nil {
		return nil, nil, err
	}
	return w.dirs, w.errs, nil
}

type walked struct {
	dirs map[string][]fs.FileInfo
	errs map[string]string
}

// WalkArg is the serve arguments that ask, in the helper's command line,
// for the walk Walk(root, maxEntries, …, prune) would ask for; WalkAsked
// then reads its answer. It is "" where the request is too long for a
// command line.
func WalkArg(root string, maxEntries int, prune filter.Prune) string {
	return requestArg(walkRequest(root, maxEntries, prune))
}

// WalkAsked is Walk's answer to the walk the helper's command line asked
// for (WalkArg, with the same root, maxEntries and prune): the first
// thing the client reads after the hello.
func (c *DeltaClient) WalkAsked(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (dirs map[string][]fs.FileInfo, errs map[string]string, err error) {
	return c.walkOnce(ctx, root, maxEntries, maxBytes, prune, false)
}

// maxWalkRules bounds the filter rules a walk request carries.
const maxWalkRules = 1 << 16

func walkRequest(root string, maxEntries int, prune filter.Prune) []byte {
	req := appendString([]byte{opWalk}, root)
	req = binary.AppendUvarint(req, uint64(maxEntries))
	req = appendString(req, prune.Root)
	req = binary.AppendUvarint(req, uint64(len(prune.Rules)))
	for _, r := range prune.Rules {
		req = appendString(req, r)
	}
	return req
}

// walk asks for the walk (unless asked, when the command line has) and
// reads its answer.
func (c *DeltaClient) walk(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune, ask bool) (*walked, error) {
	if len(prune.Rules) > maxWalkRules {
		prune = filter.Prune{} // the lister here applies them all the same
	}
	stop := context.AfterFunc(ctx, func() { c.c.Close() })
	defer stop()
	if ask {
		if _, err := c.w.Write(walkRequest(root, maxEntries, prune)); err != nil {
			return nil, err
		}
		if err := c.w.Flush(); err != nil {
			return nil, err
		}
	}
	in := &chunkReader{r: c.r}
	// The records come compressed (zstd): names repeat, and a tree's
	// listing is the first thing a connection carries, in the small
	// windows of its start.
	zr, err := zstdIn(in)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	br := bufio.NewReaderSize(zr, 64<<10)
	w := &walked{dirs: map[string][]fs.FileInfo{}, errs: map[string]string{}}
	entries, bytes := 0, 0
	for {
		kind, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			if in.done && !errors.Is(err, ErrDeltaProtocol) {
				// The helper ended the stream early: its status says why.
				if _, serr := c.status(); serr != nil {
					return nil, serr
				}
			}
			return nil, fmt.Errorf("walk: %w", err)
		}
		dir, err := readString(br, maxPathLen)
		if err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		switch kind {
		case walkError:
			msg, err := readString(br, 4096)
			if err != nil {
				return nil, fmt.Errorf("walk: %w", err)
			}
			w.errs[dir] = msg
			continue
		case walkEntry:
		default:
			return nil, fmt.Errorf("%w: walk record %#x", ErrDeltaProtocol, kind)
		}
		name, err := readString(br, maxPathLen)
		if err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		var v [6]int64
		for i := range v {
			if v[i], err = readUint(br, 1<<62); err != nil {
				return nil, fmt.Errorf("walk: %w", err)
			}
		}
		target, err := readString(br, maxPathLen)
		if err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		mode := fs.FileMode(v[0])
		if mode&^walkModes != 0 || v[0] > 1<<32 {
			return nil, fmt.Errorf("%w: walk entry %q with mode %#o", ErrDeltaProtocol, name, v[0])
		}
		entries++
		bytes += len(dir) + len(name) + len(target)
		if entries > maxEntries || bytes > maxBytes {
			return nil, fmt.Errorf("walk of %s: more than %d entries or %d bytes of names", root, maxEntries, maxBytes)
		}
		w.dirs[dir] = append(w.dirs[dir], &walkInfo{name: name, mode: mode, size: v[1],
			mtime: time.Unix(v[2], 0), atime: time.Unix(v[3], 0), uid: int(v[4]), gid: int(v[5]), target: target})
	}
	// The records end where the stream does.
	if err := in.ended("the walk"); err != nil {
		return nil, err
	}
	if _, err := c.status(); err != nil {
		return nil, err
	}
	return w, nil
}

// serveWalk answers a walk request: the tree at root, breadth first, a
// directory's entries as its listing gives them, links not followed below
// the root, at most maxEntries entries and maxDepth levels, what the
// request's rules exclude left out.
func serveWalk(ctx context.Context, r *bufio.Reader, w *bufio.Writer, files DeltaFiles) (rerr, err error) {
	fr := fields{r: r}
	root, maxEntries := fr.path(), fr.uint(1<<30)
	var prune filter.Prune
	prune.Root = fr.path()
	n := fr.uint(maxWalkRules)
	for i := int64(0); i < n && fr.err == nil; i++ {
		prune.Rules = append(prune.Rules, fr.path())
	}
	if fr.err != nil {
		return nil, fr.err
	}
	// Rules this end cannot read fail the walk, and the client lists a
	// directory at a time: not an end to the service.
	rules, perr := prune.Compile()
	zw, err := zstdOut(chunkWriter{w: w})
	if err != nil {
		return nil, err
	}
	out := &errWriter{w: zw}
	type dir struct {
		rel   string
		depth int
	}
	queue := []dir{{"", 0}}
	if perr != nil {
		queue = nil
		rerr = fmt.Errorf("walk of %s: %w", root, perr)
	}
	sent := int64(0)
	for len(queue) > 0 && rerr == nil {
		if err := ctx.Err(); err != nil {
			rerr = err
			break
		}
		d := queue[0]
		queue = queue[1:]
		full := root
		if d.rel != "" {
			full = root + "/" + d.rel
		}
		entries, err := files.ReadDir(full)
		if err != nil {
			msg := err.Error()
			out.Write(appendString(appendString([]byte{walkError}, d.rel), msg[:min(len(msg), 4000)]))
			continue
		}
		for _, fi := range entries {
			rel := fi.Name()
			if d.rel != "" {
				rel = d.rel + "/" + fi.Name()
			}
			if rules.Excluded(prune.Name(rel), fi.IsDir()) {
				continue
			}
			if sent++; sent > maxEntries {
				rerr = fmt.Errorf("%s: more than %d entries", root, maxEntries)
				break
			}
			target := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				target, _ = files.Readlink(full + "/" + fi.Name())
			}
			uid, gid, atime := fileOwner(fi)
			rec := appendString([]byte{walkEntry}, d.rel)
			rec = appendString(rec, fi.Name())
			for _, v := range []uint64{uint64(fi.Mode() & walkModes), uint64(max(fi.Size(), 0)), uint64(max(fi.ModTime().Unix(), 0)),
				uint64(max(atime, 0)), uint64(uid), uint64(gid)} {
				rec = binary.AppendUvarint(rec, v)
			}
			rec = appendString(rec, target)
			out.Write(rec)
			if fi.IsDir() && d.depth+1 < maxWalkDepth {
				queue = append(queue, dir{rel, d.depth + 1})
			}
		}
		if out.err != nil {
			return nil, out.err
		}
	}
	if out.err != nil {
		return nil, out.err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return rerr, chunkWriter{w: w}.end()
}

// maxWalkDepth bounds the levels a walk descends, as the client's
// listing is bounded (transfer.MaxDepth).
const maxWalkDepth = 255
