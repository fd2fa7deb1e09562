package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/transfer"
)

// rsync's progress formats, for hpncp sync: --progress (rsyncFiles), a
// file's name and then a line of its bytes, redrawn until it ends, and
// --info=progress2 (rsyncTotal), one such line for the whole run. The
// lines are rsync 3's, byte for byte where the numbers are the same:
//
//	         32,768 100%   31.25MB/s    0:00:00 (xfr#1, to-chk=2/4)
//
// bytes with thousands commas in 15 columns, the percentage, the rate in
// rsync's units (kB/s, MB/s, GB/s, powers of 1024), the time left while
// the bytes go and the time taken once they went, and, at a file's end,
// the files transferred and those left to check of the total ("ir-chk"
// while the totals may grow, "to-chk" once a plan set them). Like
// rsync's, the lines are redrawn once a second and carry no terminal
// escapes (a shorter line is padded over the longer one), so that they
// read the same in a log file.

// rsyncRedraw is how often rsync redraws a progress line.
const rsyncRedraw = time.Second

// rsyncLine formats one progress line. done and size are bytes; rate is
// in bytes per second, negative when not known; took is the time left,
// or, with last, the time taken; chk is the "(xfr#…)" part that ends a
// line drawn at a file's end, "" for a line drawn while bytes go.
func rsyncLine(done, size int64, rate float64, took time.Duration, known bool, chk string) string {
	pct := 100
	if done != size && size > 0 {
		pct = int(100 * float64(done) / float64(size))
	}
	kb := max(rate, 0) / 1024
	unit := "kB/s"
	switch {
	case kb > 1024*1024:
		kb, unit = kb/(1024*1024), "GB/s"
	case kb > 1024:
		kb, unit = kb/1024, "MB/s"
	}
	clock := "  ??:??:??"
	if secs := took.Seconds(); known && secs >= 0 && secs <= 9999*3600 {
		s := int64(secs)
		clock = fmt.Sprintf("%4d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	end := "  "
	if chk != "" {
		end = " " + chk
	}
	return fmt.Sprintf("%15s %3d%% %7.2f%s %s%s", commas(done), pct, kb, unit, clock, end)
}

// rsyncCounts are the files of a run as rsync counts them at a file's
// end: transferred, and the total, planned or found so far.
type rsyncCounts struct {
	planned   bool
	planFiles int
	planBytes int64
	started   int
	size      int64
	xfr       int
}

func (c *rsyncCounts) plan(files int, bytes int64) {
	c.planned, c.planFiles, c.planBytes = true, files, bytes
}

func (c *rsyncCounts) total() int { return max(c.started, c.planFiles) }

func (c *rsyncCounts) totalBytes() int64 { return max(c.size, c.planBytes) }

// chk is the "(xfr#…)" part of a line: "to-chk" once the totals are
// known, "ir-chk" while files may still be found.
func (c *rsyncCounts) chk(final bool) string {
	kind := "ir"
	if c.planned || final {
		kind = "to"
	}
	return fmt.Sprintf("(xfr#%d, %s-chk=%d/%d)", c.xfr, kind, max(c.total()-c.xfr, 0), c.total())
}

// rsyncFiles shows each file as rsync --progress does: its name on a line
// of its own, then its progress line, ended at 100% with the time the
// file took. rsync sends one file at a time; a run here has many in
// flight, each counted apart, so they are shown one after another in the
// order they started: the oldest still going has the progress line, and
// a file that ends before its turn is shown, whole, when its turn comes.
// So that a long file does not hold back the files ending behind it
// without bound, once maxWaiting of them wait they are shown at once,
// and the long file's name is shown again above its line.
type rsyncFiles struct {
	oneFile // the calls of a plain Progress

	mu     sync.Mutex
	line   lineWriter
	now    func() time.Time
	counts rsyncCounts
	queue  []*rsyncFile // started, not yet shown whole; queue[0] has the line
	shown  bool         // queue[0]'s name is printed
	wait   int          // files of queue[1:] that ended
}

const maxWaiting = 256

var _ transfer.FilesProgress = (*rsyncFiles)(nil)

// newRsyncFiles returns rsync's --progress, printed to w.
func newRsyncFiles(w io.Writer) *rsyncFiles {
	p := &rsyncFiles{line: lineWriter{w: w}, now: time.Now}
	p.oneFile.start = p.Start
	return p
}

type rsyncFile struct {
	p      *rsyncFiles
	name   string
	files  int
	size   int64
	done   int64
	start  time.Time
	end    time.Time
	last   time.Time // the last redraw
	rate   rateWindow
	ended  bool
	queued bool
}

// Plan sets the run's totals, known before it starts: "to-chk" counts
// down from them.
func (p *rsyncFiles) Plan(files int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.plan(files, bytes)
}

func (p *rsyncFiles) Start(name string, files int, size int64) transfer.FileProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	f := &rsyncFile{p: p, name: name, files: files, size: size, start: t, queued: true}
	f.rate.add(t, 0)
	p.counts.started += files
	p.counts.size += size
	p.queue = append(p.queue, f)
	if len(p.queue) == 1 {
		p.showHead(t)
	}
	return f
}

func (f *rsyncFile) Add(n int) {
	p := f.p
	p.mu.Lock()
	defer p.mu.Unlock()
	f.done += int64(n)
	if !f.queued || p.queue[0] != f {
		return
	}
	if t := p.now(); t.Sub(f.last) >= rsyncRedraw {
		p.drawHead(t)
	}
}

func (f *rsyncFile) End() {
	p := f.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.ended {
		return
	}
	f.ended, f.end = true, p.now()
	if p.queue[0] != f {
		p.wait++
		if p.wait >= maxWaiting {
			p.flushWaiting()
		}
		return
	}
	p.advance()
}

// showHead prints the name of the file that has the line, and its line.
func (p *rsyncFiles) showHead(t time.Time) {
	f := p.queue[0]
	p.line.wipe()
	p.line.write(vis.String(f.name) + "\n")
	p.shown = true
	if !f.ended {
		p.drawHead(t)
	}
}

// drawHead redraws the line of the file that has it.
func (p *rsyncFiles) drawHead(t time.Time) {
	f := p.queue[0]
	f.last = t
	f.rate.add(t, f.done)
	rate, ok := f.rate.rate()
	left := time.Duration(0)
	if ok && rate > 0 {
		left = time.Duration(float64(f.size-f.done) / rate * float64(time.Second))
	}
	if !ok {
		rate = -1
	}
	p.line.draw(rsyncLine(f.done, f.size, rate, left, ok && rate > 0, ""))
}

// finishHead prints the last line of the file that has the line, which
// ended, and takes it off the queue.
func (p *rsyncFiles) finishHead() {
	f := p.queue[0]
	if !p.shown {
		p.line.write(vis.String(f.name) + "\n")
	}
	took := f.end.Sub(f.start)
	p.counts.xfr += f.files
	p.line.draw(rsyncLine(f.size, f.size, float64(f.size)/max(took.Seconds(), 0.001), took, true, p.counts.chk(false)))
	p.line.end()
	p.queue[0] = nil
	p.queue = p.queue[1:]
	f.queued, p.shown = false, false
}

// advance shows whole every ended file at the head of the queue, then
// gives the line to the next one going.
func (p *rsyncFiles) advance() {
	for len(p.queue) > 0 && p.queue[0].ended {
		p.finishHead()
		if len(p.queue) > 0 && p.queue[0].ended {
			p.wait-- // a waiting file has its turn
		}
	}
	if len(p.queue) > 0 {
		p.showHead(p.now())
	}
}

// flushWaiting shows every ended file behind the head at once, then the
// head's name and line again.
func (p *rsyncFiles) flushWaiting() {
	head := p.queue[0]
	rest := p.queue[1:]
	p.queue = []*rsyncFile{}
	var going []*rsyncFile
	p.line.wipe()
	for _, f := range rest {
		if !f.ended {
			going = append(going, f)
			continue
		}
		p.queue = append(p.queue[:0], f)
		p.shown = false
		p.finishHead()
	}
	p.queue = append([]*rsyncFile{head}, going...)
	p.wait = 0
	p.showHead(p.now())
}

// Finish ends the line of a file still going (a run that failed or was
// cut), so that what follows starts on a line of its own.
func (p *rsyncFiles) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line.end()
}

// rsyncTotal is rsync's --info=progress2: one line for the whole run, of
// the bytes of all its files, redrawn as they go, with the "(xfr#…)"
// count when a file has just ended. rsync redraws it at every file's end;
// this redraws it once a second, however many files end in it. Finish draws it a last time with the
// run's average rate and the time it took.
type rsyncTotal struct {
	oneFile // the calls of a plain Progress

	mu     sync.Mutex
	line   lineWriter
	now    func() time.Time
	start  time.Time
	last   time.Time
	counts rsyncCounts
	done   int64
	rate   rateWindow
	ended  bool
}

var _ transfer.FilesProgress = (*rsyncTotal)(nil)

// newRsyncTotal returns rsync's --info=progress2, printed to w.
func newRsyncTotal(w io.Writer) *rsyncTotal {
	p := &rsyncTotal{line: lineWriter{w: w}, now: time.Now}
	p.oneFile.start = p.Start
	return p
}

type totalFile struct {
	p     *rsyncTotal
	files int
	ended bool
}

// Plan sets the run's totals, known before it starts.
func (p *rsyncTotal) Plan(files int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.plan(files, bytes)
}

func (p *rsyncTotal) Start(name string, files int, size int64) transfer.FileProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		p.start = p.now()
		p.rate.add(p.start, 0)
	}
	p.counts.started += files
	p.counts.size += size
	return &totalFile{p: p, files: files}
}

func (f *totalFile) Add(n int) {
	p := f.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(n)
	if t := p.now(); t.Sub(p.last) >= rsyncRedraw {
		p.draw(t, "")
	}
}

func (f *totalFile) End() {
	p := f.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.ended {
		return
	}
	f.ended = true
	p.counts.xfr += f.files
	if t := p.now(); t.Sub(p.last) >= rsyncRedraw {
		p.draw(t, p.counts.chk(false))
	}
}

// draw redraws the line: the rate of the last seconds and the time left,
// ended by chk when not "".
func (p *rsyncTotal) draw(t time.Time, chk string) {
	if p.ended {
		return
	}
	p.last = t
	p.rate.add(t, p.done)
	rate, ok := p.rate.rate()
	size := p.counts.totalBytes()
	left := time.Duration(0)
	if ok && rate > 0 {
		left = time.Duration(float64(max(size-p.done, 0)) / rate * float64(time.Second))
	}
	if !ok {
		rate = -1
	}
	p.line.draw(rsyncLine(p.done, size, rate, left, ok && rate > 0, chk))
}

// Finish draws the line a last time, with the average rate of the run
// and the time it took, as rsync ends its transfer, and ends it.
func (p *rsyncTotal) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if !p.start.IsZero() {
		took := p.now().Sub(p.start)
		size := p.counts.totalBytes()
		p.line.draw(rsyncLine(p.done, size, float64(p.done)/max(took.Seconds(), 0.001), took, true, p.counts.chk(true)))
	}
	p.line.end()
	p.ended = true
}
