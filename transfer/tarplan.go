package transfer

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/hpncp/hpncp/protocol"
)

// A tree goes over tar streams only when enough of it is small and new,
// which only its whole listing tells: so tar mode has copyDir's walk list
// the tree into a plan first (a planner), then chooses what goes how.

// tarNode is one entry of a tree to copy. A plan holds one for every
// file of the tree at once, so a file's node keeps only what its
// directory cannot: its name, its stat, its target's. Its endpoints are
// its directory's joined with its name (src, dst), as the walk made them.
type tarNode struct {
	rel string // slash-separated, relative to the source operand
	// info is the source's, links followed: a *smallInfo for a file that
	// goes over a tar stream (small), the walk's for any other.
	info     fs.FileInfo
	existing fs.FileInfo // the target's, links followed; nil when missing
	parent   *tarNode
	dir      *tarDir   // a directory's; nil for a file
	stat     smallStat // a small file's, its info's
}

// tarDir is what a plan keeps of a directory beside its node.
type tarDir struct {
	src, dst Endpoint
	children []*tarNode // sorted by name once the walk is done; nil after flatten
	// targets are the directory's entries at the target, as listed,
	// while the walk hands out its entries; nil when the target lacks it.
	targets map[string]fs.FileInfo
}

// newTarDir returns the node of a directory to copy from src to dst.
func newTarDir(rel string, src, dst Endpoint, info fs.FileInfo) *tarNode {
	return &tarNode{rel: rel, info: info, dir: &tarDir{src: src, dst: dst}}
}

// src is where the entry is read from.
func (n *tarNode) src() Endpoint {
	if n.dir != nil {
		return n.dir.src
	}
	d := n.parent.dir.src
	return Endpoint{d.FS, d.FS.Join(d.Path, path.Base(n.rel))}
}

// dst is where the entry is copied to.
func (n *tarNode) dst() Endpoint {
	if n.dir != nil {
		return n.dir.dst
	}
	d := n.parent.dir.dst
	return Endpoint{d.FS, d.FS.Join(d.Path, path.Base(n.rel))}
}

// small says the file goes over a tar stream: new, smaller than the
// plan's MaxSize and without holes to keep.
func (n *tarNode) small() bool {
	_, ok := n.info.(*smallInfo)
	return ok
}

// tarPlan is a listed tree: what goes over tar and what over SFTP.
type tarPlan struct {
	dirs  []*tarNode // parents before children
	files []*tarNode // those the run's shard keeps, in the order of dirs; nil once sorted
	// small are the files that are new and smaller than MaxSize, for the
	// streams; other the rest, for SFTP.
	small, other []*tarNode
	// errs are the listing's failures, reported once tar mode is chosen:
	// copyDir would report them again.
	errs []error
	// restoreGC, when not nil, undoes the lowerGC of a big plan.
	restoreGC func()
}

// release ends what the plan holds beyond its memory.
func (p *tarPlan) release() {
	if p.restoreGC != nil {
		p.restoreGC()
	}
}

// newDirs are the directories the target lacks, parents first.
func (p *tarPlan) newDirs() []*tarNode {
	var out []*tarNode
	for _, d := range p.dirs {
		if d.existing == nil {
			out = append(out, d)
		}
	}
	return out
}

// list lists the tree and the target's matching directories, and sorts
// its files into small and other. The server is asked what tar it has
// meanwhile: that costs a command start, which may take longer than the
// listing.
func (run *tarRun) list(ctx context.Context) *tarPlan {
	c, t := run.c, run.c.opts.Tar
	c.startTarProbe(ctx, run.end)
	l := &tarLister{root: run.root, nodes: map[string]*tarNode{}, sparse: c.opts.Sparse,
		maxSize: cmp0(t.MaxSize, defaultTarMaxSize), minFiles: int(cmp0(int64(t.MinFiles), defaultTarMinFiles))}
	if p, ok := run.end.(tarPreparer); ok {
		// The streams' connection is opened as soon as the listing shows
		// that they will be used, not after it.
		l.enough = func() { p.PrepareTar(ctx) }
		if t.Mode == TarForce {
			l.enough()
		}
	}
	if a, ok := run.end.(tarAheader); ok && !run.upload && !t.Compress {
		// Without -C a download's tar -c is known before the probe
		// answers: its streams' commands start now, their login shells
		// while the listing goes on.
		dir, o := run.root.src().Path, protocol.TarOptions{Preserve: c.opts.Preserve}
		l.ahead = func(n int) {
			o := o
			o.Stream = n
			a.TarCreateAhead(ctx, dir, o)
		}
		l.asked, l.force = t.Streams, t.Mode == TarForce
	}
	// The walk records into a copier of its own: its failures wait in
	// the plan for the choice of tar mode.
	w := &copier{opts: c.opts, res: &Result{}, parallel: c.parallel, plan: l, sched: c.sched}
	w.opts.Report = nil
	listStart := time.Now()
	w.goDir(ctx, run.root.src(), run.root.dst(), run.root.info, "", 0, false, nil)
	c.wg.Wait()
	p := &tarPlan{errs: w.res.Errors, restoreGC: l.restoreGC}
	if ctx.Err() != nil {
		return p
	}
	flatten(run.root, &p.dirs, &p.files)
	c.logf("listed %s: %d files, %d directories in %s", run.root.src(), len(p.files), len(p.dirs), time.Since(listStart).Round(time.Millisecond))
	nsmall := 0
	for _, f := range p.files {
		if f.small() {
			nsmall++
		}
	}
	// Exact sizes, and files dropped once sorted: at a million files
	// each slice of pointers costs 8 MB, and append's slack as much again.
	p.small = make([]*tarNode, 0, nsmall)
	p.other = make([]*tarNode, 0, len(p.files)-nsmall)
	for _, f := range p.files {
		if f.small() {
			p.small = append(p.small, f)
		} else {
			p.other = append(p.other, f)
		}
	}
	p.files = nil
	return p
}

// tarLister is the planner of a tar mode tree: it builds the tree of
// tarNodes from the walk, each directory the target has listed there
// too, so that no file's target costs a round trip of its own.
type tarLister struct {
	root *tarNode
	// enough, when not nil, is called once the walk has found minFiles
	// new files smaller than maxSize.
	enough   func()
	maxSize  int64
	minFiles int
	sparse   bool // --sparse: a file with holes goes by the pipeline
	// ahead, when not nil, starts the tar -c of a download's stream
	// numbered n before the listing ends; it is called for each stream
	// the small files listed so far are worth (streamsFor), with asked
	// (--tar-streams) and force (--tar) as the plan takes them.
	ahead   func(n int)
	asked   int
	force   bool
	started int

	mu         sync.Mutex
	nodes      map[string]*tarNode // the directories entered, by rel
	small      int
	smallBytes int64
	files      int // every file of the plan
	// restoreGC, once the plan holds bigPlanFiles files, undoes its
	// lowerGC.
	restoreGC func()
}

func (l *tarLister) dir(ctx context.Context, src, dst Endpoint, si fs.FileInfo, rel string) error {
	n := l.root
	if rel != "" {
		var err error
		if n, err = l.add(dst, si, rel); err != nil {
			return err
		}
		if n.existing != nil && !n.existing.IsDir() {
			return &Error{Op: "copy " + src.String() + " to", Path: dst.String(), Err: ErrNotDirectory}
		}
		n.dir = &tarDir{src: src, dst: dst}
		l.mu.Lock()
		l.nodes[rel] = n
		n.parent.dir.children = append(n.parent.dir.children, n)
		l.mu.Unlock()
	}
	if n.existing == nil {
		return nil
	}
	have, err := readDir(ctx, dst.FS, dst.Path)
	if err != nil {
		return &Error{Op: "read directory", Path: dst.String(), Err: err, Hint: listingHint(err)}
	}
	targets := make(map[string]fs.FileInfo, len(have))
	for _, e := range have {
		targets[e.Name()] = e
	}
	n.dir.targets = targets
	return nil
}

func (l *tarLister) file(src, dst Endpoint, si fs.FileInfo, rel string) error {
	n, err := l.add(dst, si, rel)
	if err != nil {
		return err
	}
	// tar writes every byte: a file with holes to keep goes by the
	// pipeline, which leaves them unwritten.
	if n.existing == nil && si.Size() < l.maxSize && !(l.sparse && hasHoles(si)) {
		n.setSmall(si)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n.parent.dir.children = append(n.parent.dir.children, n)
	if l.files++; l.files == bigPlanFiles {
		l.restoreGC = lowerGC()
	}
	if n.existing == nil && si.Size() < l.maxSize {
		l.small++
		l.smallBytes += si.Size()
		if l.small == l.minFiles && l.enough != nil {
			go l.enough()
		}
		if l.ahead != nil && (l.small >= l.minFiles || l.force) {
			// As many as the plan would give the small files listed so
			// far.
			want := downloadStreamsFor(l.small, l.smallBytes, l.asked)
			for ; l.started < want; l.started++ {
				go l.ahead(l.started)
			}
		}
	}
	return nil
}

// add returns the node of an entry below a directory the walk entered,
// with its target as that directory's listing has it, links followed.
func (l *tarLister) add(dst Endpoint, si fs.FileInfo, rel string) (*tarNode, error) {
	l.mu.Lock()
	parent := l.root
	if d := path.Dir(rel); d != "." {
		parent = l.nodes[d]
	}
	l.mu.Unlock()
	n := &tarNode{parent: parent, rel: rel, info: si}
	if x, ok := parent.dir.targets[path.Base(rel)]; ok {
		if x.Mode()&fs.ModeSymlink != 0 {
			var err error
			look := dst.FS.Stat
			if si.IsDir() {
				// A link where a directory goes is replaced on a
				// confined end, as the walk replaces it (dirTarget).
				look = func(string) (fs.FileInfo, error) { return dirTarget(dst) }
			}
			switch x, err = look(dst.Path); {
			case errors.Is(err, fs.ErrNotExist):
				return n, nil
			case err != nil:
				return nil, &Error{Op: "stat", Path: dst.String(), Err: err}
			}
		}
		n.existing = x
	}
	return n, nil
}

// smallStat is what a tar plan keeps of a small file's stat, in its
// node: what its archive entry, its -p times and the report need. A plan
// holds one for every file of the tree at once; what the walk gave (a
// local stat with its Stat_t, an SFTP listing's attributes) is several
// times the size, which at a million files is most of the run's memory.
type smallStat struct {
	size int64
	// The times in seconds and nanoseconds, as time.Unix takes them:
	// Unix nanoseconds alone overflow past 2262, and a time.Time costs
	// a location pointer besides.
	mtime, atime int64
	mnsec, ansec int32
	mode         fs.FileMode
}

// setSmall has n keep si as its smallStat, and be its own info.
func (n *tarNode) setSmall(si fs.FileInfo) {
	m, a := si.ModTime(), atimeOf(si)
	n.stat = smallStat{size: si.Size(), mode: si.Mode(),
		mtime: m.Unix(), mnsec: int32(m.Nanosecond()), atime: a.Unix(), ansec: int32(a.Nanosecond())}
	n.info = (*smallInfo)(n)
}

// smallInfo is the FileInfo of a small file: its node's name and
// smallStat, at no cost of its own.
type smallInfo tarNode

func (s *smallInfo) Name() string       { return path.Base(s.rel) }
func (s *smallInfo) Size() int64        { return s.stat.size }
func (s *smallInfo) Mode() fs.FileMode  { return s.stat.mode }
func (s *smallInfo) ModTime() time.Time { return time.Unix(s.stat.mtime, int64(s.stat.mnsec)) }
func (s *smallInfo) IsDir() bool        { return s.stat.mode.IsDir() }

// Sys returns s, whose AccessTime atimeOf reads.
func (s *smallInfo) Sys() any { return s }

// AccessTime is the source's access time, for -p.
func (s *smallInfo) AccessTime() time.Time { return time.Unix(s.stat.atime, int64(s.stat.ansec)) }

// flatten lists the tree below n in copy order: parents before children.
func flatten(n *tarNode, dirs, files *[]*tarNode) {
	if n.dir == nil {
		return
	}
	kids := n.dir.children
	n.dir.children, n.dir.targets = nil, nil
	sort.Slice(kids, func(i, j int) bool { return path.Base(kids[i].rel) < path.Base(kids[j].rel) })
	for _, ch := range kids {
		if ch.info.IsDir() {
			*dirs = append(*dirs, ch)
			flatten(ch, dirs, files)
		} else {
			*files = append(*files, ch)
		}
	}
}

// Without --tar-streams, a tree's small files get a stream for every
// tarFilesPerStream files or tarBytesPerStream bytes, whichever asks for
// more, up to defaultTarStreams. Each stream costs a command on the
// server, whose login shell may take a good part of a second to start,
// and its CPU: a thousand small files go faster on one stream than on
// four, ten thousand faster on four than on one or two.
const (
	tarFilesPerStream = 2500
	tarBytesPerStream = 16 << 20
)

// minDownloadStreams is the fewest streams a download's small files take
// without --tar-streams, where they are enough for that many
// (tarStreamFiles each): its streams take their files from one feed
// (tarfeed.go), so that a second connection carries what a first the
// server's congestion control held back cannot: two streams cut the
// slow runs a single stream has when cubic backs off.
const minDownloadStreams = 2

// tarStreamsFor is how many streams the small files should take: asked,
// when --tar-streams said, or what their count and bytes are worth.
func tarStreamsFor(files []*tarNode, asked int) int {
	var total int64
	for _, f := range files {
		total += f.info.Size()
	}
	return streamsFor(len(files), total, asked)
}

// downloadStreamsFor is how many streams a download's count small files
// of total bytes take: as tarStreamsFor, at least minDownloadStreams
// without asked, and none of fewer than tarStreamFiles files (as
// splitBatches cuts them).
func downloadStreamsFor(count int, total int64, asked int) int {
	n := streamsFor(count, total, asked)
	if asked == 0 {
		n = max(n, minDownloadStreams)
	}
	return max(1, min(n, count/tarStreamFiles))
}

// streamsFor is tarStreamsFor for count files of total bytes.
func streamsFor(count int, total int64, asked int) int {
	if asked > 0 {
		return asked
	}
	n := max((count+tarFilesPerStream-1)/tarFilesPerStream, int((total+tarBytesPerStream-1)/tarBytesPerStream))
	return max(1, min(n, defaultTarStreams))
}

// splitBatches cuts files, in order, into up to n runs of about the same
// bytes, none of fewer than tarStreamFiles files but the last.
func splitBatches(files []*tarNode, n int) [][]*tarNode {
	n = max(1, min(n, len(files)/tarStreamFiles))
	// Each file costs a header and padding besides its bytes.
	const overhead = 1024
	var total int64
	for _, f := range files {
		total += f.info.Size() + overhead
	}
	per := total/int64(n) + 1
	// Each batch is a run of files itself, not a copy of it.
	out := make([][]*tarNode, 0, n)
	var sum int64
	start := 0
	for i, f := range files {
		sum += f.info.Size() + overhead
		if sum >= per && len(out) < n-1 {
			out = append(out, files[start:i+1:i+1])
			start, sum = i+1, 0
		}
	}
	return append(out, files[start:len(files):len(files)])
}

// dirsFor returns the new directories a stream must create before its
// files, parents first: all of them for the first stream.
func dirsFor(files []*tarFile, newDirs []*tarNode, all bool) []*tarNode {
	if all {
		return newDirs
	}
	need := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.rel); d != "."; d = path.Dir(d) {
			need[d] = true
		}
	}
	var out []*tarNode
	for _, d := range newDirs {
		if need[d.rel] {
			out = append(out, d)
		}
	}
	return out
}
