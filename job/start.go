package job

import (
	"os"
	"path"
	"strings"
	"time"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// oneServer reports whether locs copy between this host and one server,
// either way: every source remote and the target local, or the other
// way round, every remote one naming the same host.
func oneServer(locs []transfer.Location) bool {
	srcs, dst := locs[:len(locs)-1], locs[len(locs)-1]
	host := ""
	for _, l := range srcs {
		if l.Remote() == dst.Remote() {
			return false
		}
		if l.Remote() {
			if host != "" && l.HostLabel() != host {
				return false
			}
			host = l.HostLabel()
		}
	}
	return true
}

// uploads reports whether the copy of locs sends from this host: its
// target is remote and no source is.
func uploads(locs []transfer.Location) bool {
	if len(locs) < 2 || !locs[len(locs)-1].Remote() {
		return false
	}
	for _, l := range locs[:len(locs)-1] {
		if l.Remote() {
			return false
		}
	}
	return true
}

// treeConns is how many connections a tree's copy (-r) to or from one
// server is given from the start: the first, the second its batches and
// files spread to (protocol's pool asks for it as soon as SFTP is up),
// and tar mode's own.
const treeConns = 3

// predial returns, for an upload of a large local file, how many
// connections its copy's first plan will open, so that the host's end
// dials them as soon as the first is through its TCP handshake
// (ends.Options.Predial), rather than after the SFTP start and the plan,
// which cost several round trips; and how many streams the plan puts on
// each, whose SFTP sessions each connection opens once it is up. A tree's
// copy (tree: -r over SFTP) between this host and one server gets
// treeConns, or a download a large file's plan's connections, and no
// sessions ahead (its batches and tar streams take their own): with
// fewer, its large files start before a second connection is up and
// stay on the first. A download of one file asks for
// the plan of a large file before its size is known: the stat that tells
// it comes with the SFTP start, nine round trips after the TCP handshake,
// and connections dialed only then come up a round trip or more later.
// Should the file be small, the spares and their sessions go unused and
// are closed with the others; a short path's plan is one connection, and
// nothing is dialed or opened ahead. (bench/results-design.md has the
// measurements.)
func predial(locs []transfer.Location, p transfer.ParallelOptions, tree bool) func(time.Duration) (conns, sessions int) {
	if p.Controller == nil || len(locs) < 2 {
		return nil
	}
	sized := uploadPlan(locs, p)
	switch {
	case tree && oneServer(locs):
		// A file among the sources has the plan its size asks for when
		// that is more. A download's sizes come with its listing, after
		// the start: it gets a large file's connections (a sync of one
		// large file, or a tree holding some, would otherwise start its
		// data on three, at 100 ms 256 MiB at 43 MB/s where the copy
		// of the file gets 56).
		down := locs[0].Remote() && !locs[len(locs)-1].Remote()
		return func(rtt time.Duration) (int, int) {
			n := treeConns
			if sized != nil {
				c, _ := sized(rtt)
				n = max(n, c)
			}
			if down {
				c, _ := firstPlan(p.Controller(), rtt)
				n = max(n, c)
			}
			return n, 0
		}
	case !tree && len(locs) == 2 && locs[0].Remote() && !locs[1].Remote():
		return func(rtt time.Duration) (int, int) { return firstPlan(p.Controller(), rtt) }
	}
	return sized
}

// warms reports whether the connections of a copy grow their congestion
// windows before its first write (ends.Options.Warm): for an upload of a
// tree, or of a file large enough for the parallel pipeline. Downloads
// gain nothing from it: the server sends their bytes. first says whether
// the first connection does too (ends.Options.WarmFirst): not for a tree,
// whose listings and directories go over it.
func warms(locs []transfer.Location, p transfer.ParallelOptions, recursive bool) (extra, first bool) {
	extra = uploads(locs) && (recursive || uploadPlan(locs, p) != nil)
	return extra, extra && !recursive
}

// preOpen is, for a download of one remote file, that file's path on the
// server: the sessions opened ahead for its streams open it as they
// start (ends.Options.PreOpen). Anything else opens nothing ahead.
func preOpen(locs []transfer.Location, recursive bool) string {
	if recursive || len(locs) != 2 || !locs[0].Remote() || locs[1].Remote() {
		return ""
	}
	return ends.RemotePath(locs[0].Path)
}

// preCreate is, for a plain upload of one small local file to a remote
// path that names a file (not a directory: no trailing slash), that path,
// the temporary file the copy will write beside it and the umask probe's
// directory, which the server's SFTP start then makes
// (ends.Options.PreCreate). Anything the copy might not write, or write
// otherwise (a skip likely, --verify, --resume, file lists, shards,
// trees, -O, a link or a large file), makes nothing ahead. A path that is
// a directory after all gets its file elsewhere, and the file made ahead
// is removed.
func preCreate(locs []transfer.Location, to transfer.Options, other bool) protocol.PreCreate {
	// The quick check skips a file whose target has its size and time:
	// without -p the target's time is the last copy's, so the file is
	// sent, and a temporary file made ahead is used. With -p a re-run
	// would skip it, and a file made and removed for nothing would still
	// touch the directory.
	sends := to.Skip == transfer.CopyAlways || to.Skip == transfer.SkipQuick && !to.Preserve
	if other || len(locs) != 2 || locs[0].Remote() || !locs[1].Remote() ||
		!sends || to.Verify || to.Resume || to.InPlace || to.FilesFrom != nil || to.Split() {
		return protocol.PreCreate{}
	}
	fi, err := os.Lstat(locs[0].Path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > protocol.SmallMax {
		return protocol.PreCreate{}
	}
	final := ends.RemotePath(locs[1].Path)
	if final == "" || final == "." || strings.HasSuffix(final, "/") || strings.HasSuffix(final, "/.") {
		return protocol.PreCreate{}
	}
	dir := path.Dir(final)
	return protocol.PreCreate{Final: final, Temp: path.Join(dir, transfer.TempName(path.Base(final))),
		Probe: path.Join(dir, transfer.TempName("umask"))}
}

// localFiles reports whether every one of locs is a regular local file
// (links followed).
func localFiles(locs []transfer.Location) bool {
	for _, l := range locs {
		if l.Remote() {
			return false
		}
		if fi, err := os.Stat(l.Path); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return len(locs) > 0
}

// firstPlan is c's first plan at rtt as predial tells it: its
// connections, and the streams on each where it has more than one.
func firstPlan(c *window.Controller, rtt time.Duration) (conns, sessions int) {
	plan := c.Start(rtt)
	if plan.Conns <= 1 {
		return plan.Conns, 0
	}
	return plan.Conns, (plan.Streams + plan.Conns - 1) / plan.Conns
}

// uploadPlan is predial's answer for an upload of files, by the largest of
// them: nil when none is large enough for the parallel pipeline.
func uploadPlan(locs []transfer.Location, p transfer.ParallelOptions) func(time.Duration) (int, int) {
	if !uploads(locs) {
		return nil
	}
	var largest int64
	for _, l := range locs[:len(locs)-1] {
		if fi, err := os.Stat(l.Path); err == nil && fi.Mode().IsRegular() {
			largest = max(largest, fi.Size())
		}
	}
	if largest < p.MinSize {
		return nil
	}
	return func(rtt time.Duration) (int, int) {
		c := p.Controller()
		c.Size(largest)
		return firstPlan(c, rtt)
	}
}
