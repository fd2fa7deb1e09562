package transfer

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The tar streams of a tree: its small files cut into batches, one
// archive each, their bytes metered.

// tarFile is a file that goes over a tar stream.
type tarFile struct {
	*tarNode
	tmp   string    // its temporary name, a full path on the target
	mtime time.Time // from the archive, on download
	err   error     // the file's own failure
	done  bool      // every byte arrived under tmp
	seen  bool      // the archive had an entry for it
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
	batches := splitBatches(small, cmp0(c.opts.Tar.Streams, defaultTarStreams))
	files := make([][]*tarFile, len(batches))
	var total int64
	for i, b := range batches {
		for _, n := range b {
			files[i] = append(files[i], &tarFile{tarNode: n})
			total += n.info.Size()
		}
	}
	c.logf("tar: %d files in %d stream(s) to %s (compression %q)", len(small), len(batches), run.root.dst, run.po.Compress)
	run.m = &meter{ctx: ctx, lim: c.opts.Limiter, add: func(int) {}}
	if prog != nil {
		// prog is safe for use by the streams at once.
		run.m.add = prog.Add
		prog.StartFile(fmt.Sprintf("%d files (tar)", len(small)), total)
		defer prog.EndFile()
	}
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i := range batches {
		var dirs []*tarNode
		if run.upload {
			dirs = dirsFor(files[i], newDirs, i == 0)
		}
		wg.Go(func() {
			if run.upload {
				errs[i] = run.uploadStream(ctx, dirs, files[i])
			} else {
				errs[i] = run.downloadStream(ctx, files[i])
			}
		})
	}
	wg.Wait()
	return files, errs
}

// removeTemps removes the temporary files of a failed stream.
func removeTemps(fsys FS, files []*tarFile) {
	forEach(len(files), metaWorkers, func(i int) {
		if files[i].tmp != "" {
			_ = fsys.Remove(files[i].tmp)
		}
	})
}

// meter counts the bytes of the streams for Progress and holds them to
// the run's bandwidth limit.
type meter struct {
	ctx context.Context
	lim *rate.Limiter // nil for no limit
	add func(int)
}

// reader returns r, metered.
func (m *meter) reader(r io.Reader) io.Reader { return &meteredReader{r: r, m: m} }

type meteredReader struct {
	r io.Reader
	m *meter
}

func (mr *meteredReader) Read(b []byte) (int, error) {
	if mr.m.lim != nil {
		// WaitN refuses more than the burst at once.
		b = b[:min(len(b), max(mr.m.lim.Burst(), 1))]
	}
	n, err := mr.r.Read(b)
	if n > 0 {
		mr.m.add(n)
		if mr.m.lim != nil {
			if werr := mr.m.lim.WaitN(mr.m.ctx, n); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return n, err
}
