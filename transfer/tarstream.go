package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/pipeline"
)

// The tar streams of a tree: its small files cut into batches, one
// archive each, their bytes metered.

// tarFile is a file that goes over a tar stream.
type tarFile struct {
	*tarNode
	// tmp is the name of its temporary file in its target's directory:
	// empty until made, and on an upload of a whole new tree, where the
	// files go under their own names (tmpPath). A plan holds a tarFile
	// for every small file at once: a full path each would cost more
	// than the rest of the record.
	tmp string
	err error // the file's own failure
	// listed is tmp as the target's listing showed it, once an upload's
	// size was checked.
	listed fs.FileInfo
	// mtime and mnsec are the modification time the archive gave, on
	// download, as time.Unix takes it (a time.Time costs 24 bytes).
	mtime int64
	mnsec int32
	done  bool // every byte arrived under tmp
	seen  bool // the archive had an entry for it
}

// stream moves small over up to Streams tar streams at once, telling
// prog (when not nil) of the bytes. On upload the new directories travel
// in the archives too, each stream carrying the ones its files need and
// the first stream all of them. It returns the files of each stream and
// the stream's failure.
func (run *tarRun) stream(ctx context.Context, small, newDirs []*tarNode, prog Progress) ([][]*tarFile, []error) {
	c := run.c
	if len(small) == 0 && (!run.upload || len(newDirs) == 0) {
		return nil, nil
	}
	// A download's streams take their files from one feed as they go.
	batches := [][]*tarNode{small}
	if run.upload {
		batches = splitBatches(small, tarStreamsFor(small, c.opts.Tar.Streams))
	}
	files := make([][]*tarFile, len(batches))
	var total int64
	for i, b := range batches {
		// One allocation per batch rather than one per file.
		all := make([]tarFile, len(b))
		files[i] = make([]*tarFile, len(b))
		for j, n := range b {
			all[j].tarNode = n
			files[i][j] = &all[j]
			total += n.info.Size()
		}
	}
	n := len(batches)
	if !run.upload {
		n = downloadStreamsFor(len(small), total, c.opts.Tar.Streams)
	}
	c.logf("tar: %d files in %d stream(s) to %s (compression %q)", len(small), n, run.root.dst(), run.po.Compress)
	run.m = pipeline.Meter{Limiter: c.opts.Limiter}
	if prog != nil {
		// prog is safe for use by the streams at once.
		run.m.Progress = prog.Add
		startFiles(prog, fmt.Sprintf("%d files (tar)", len(small)), len(small), total)
		defer prog.EndFile()
	}
	if !run.upload {
		return run.downloadStreams(ctx, files[0], n)
	}
	errs := make([]error, len(batches))
	slots.ForEach(len(batches), len(batches), func(i int) {
		errs[i] = run.uploadStream(ctx, dirsFor(files[i], newDirs, i == 0), files[i])
	})
	return files, errs
}

// downloadStreams moves files over n tar streams that take them from one
// feed, and returns the files each stream was handed and its failure.
// Files no stream took, when streams failed, go with a failed stream's
// files and its failure; a stream that failed before it took any file
// fails nothing.
func (run *tarRun) downloadStreams(ctx context.Context, files []*tarFile, n int) ([][]*tarFile, []error) {
	feed := &tarFeed{files: files}
	streams := make([]*feedStream, n)
	for i := range streams {
		streams[i] = newFeedStream(feed)
	}
	errs := make([]error, n)
	slots.ForEach(n, n, func(i int) {
		errs[i] = run.downloadStream(ctx, streams[i], i)
	})
	out := make([][]*tarFile, n)
	for i, s := range streams {
		out[i] = s.files()
	}
	if left := feed.left(); len(left) > 0 {
		i := slices.IndexFunc(errs, func(err error) bool { return err != nil })
		if i < 0 {
			// Not seen: a stream ends once the feed is dry or it failed.
			out, errs = append(out, nil), append(errs, errors.New("tar streams ended before every file was sent"))
			i = len(out) - 1
		}
		out[i] = append(out[i], left...)
	}
	for i, err := range errs {
		if err != nil && len(out[i]) == 0 {
			// The others took its share: nothing of the copy is lost.
			run.c.logf("tar stream %d: %v; the other streams took its files", i, err)
			errs[i] = nil
		}
	}
	return out, errs
}

// tmpBeside is the path of f's temporary file beside dst, its target
// (f.dst(), which the caller has at hand); empty when none was made.
func (f *tarFile) tmpBeside(dst Endpoint) string {
	if f.tmp == "" {
		return ""
	}
	return dst.FS.Join(dst.FS.Dir(dst.Path), f.tmp)
}

// tmpPath is where f's bytes are written on the target until it takes
// its name: in a whole new tree its place in the temporary tree at base,
// otherwise its temporary file beside its target.
func (run *tarRun) tmpPath(f *tarFile) string {
	if run.upload && run.whole {
		return run.root.dst().FS.Join(run.base, f.rel)
	}
	return f.tmpBeside(f.dst())
}

// tmpName is the last element of tmpPath: the name the target's listing
// shows f's bytes under.
func (run *tarRun) tmpName(f *tarFile) string {
	if run.upload && run.whole {
		return path.Base(f.rel)
	}
	return f.tmp
}

// removeTemps removes the temporary files of a failed stream.
func (run *tarRun) removeTemps(files []*tarFile) {
	fsys := run.root.dst().FS
	slots.ForEach(len(files), metaWorkers, func(i int) {
		if tmp := run.tmpPath(files[i]); tmp != "" {
			_ = fsys.Remove(tmp)
		}
	})
}
