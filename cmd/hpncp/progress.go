package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/transfer"
)

// runLine shows a whole run on one line of a terminal, redrawn in place:
// bytes and files done of those known, the rate over the last seconds,
// the time left and a file in flight. The totals grow as the walk,
// which runs beside the copy, hands out files; a caller that knows them
// first (a sync's plan) sets them with Plan. Finish ends the line with
// the run's totals, which are the summary line's: both count the files
// and bytes each copy told, in the same units.
type runLine struct {
	mu    sync.Mutex
	line  lineWriter
	now   func() time.Time
	start time.Time // from Begin or the first file's start
	last  time.Time // the last redraw
	any   bool      // a file started

	planFiles int
	planBytes int64
	files     int   // files started
	size      int64 // their bytes
	doneFiles int
	done      int64
	rate      rateWindow
	inFlight  []*lineFile
	finished  bool
	cur       transfer.FileProgress // the file of the plain Progress calls
}

// newRunLine returns a runLine drawing on w, a terminal.
func newRunLine(w io.Writer) *runLine {
	return &runLine{line: lineWriter{w: w, width: terminalWidth(w), clear: "\x1b[K"}, now: time.Now}
}

var _ transfer.FilesProgress = (*runLine)(nil)

// lineFile is one file, or tar batch, of a runLine.
type lineFile struct {
	l     *runLine
	name  string
	files int
	at    int // its index in l.inFlight
}

// Begin starts the line's clock now, for a caller whose summary times
// the run from before its first file starts, which otherwise starts it.
func (l *runLine) Begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.begin(l.now())
}

func (l *runLine) begin(t time.Time) {
	if l.start.IsZero() {
		l.start = t
		l.rate.add(t, 0)
	}
}

// Plan sets the run's totals, files and bytes, known before it starts.
// Files started beyond them raise them.
func (l *runLine) Plan(files int, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.planFiles, l.planBytes = files, bytes
}

func (l *runLine) Start(name string, files int, size int64) transfer.FileProgress {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	l.begin(t)
	l.any = true
	f := &lineFile{l: l, name: name, files: files, at: len(l.inFlight)}
	l.inFlight = append(l.inFlight, f)
	l.files += files
	l.size += size
	l.redraw(t, false)
	return f
}

func (f *lineFile) Add(n int) {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += int64(n)
	l.redraw(l.now(), false)
}

func (f *lineFile) End() {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.at < 0 {
		return
	}
	last := len(l.inFlight) - 1
	l.inFlight[f.at] = l.inFlight[last]
	l.inFlight[f.at].at = f.at
	l.inFlight = l.inFlight[:last]
	f.at = -1
	l.doneFiles += f.files
	l.redraw(l.now(), false)
}

// The calls of a plain Progress, for a caller that copies one file at a
// time.
func (l *runLine) StartFile(name string, size int64) { l.cur = l.Start(name, 1, size) }
func (l *runLine) Add(n int) {
	if l.cur != nil {
		l.cur.Add(n)
	}
}
func (l *runLine) EndFile() {
	if l.cur != nil {
		l.cur.End()
		l.cur = nil
	}
}

// Finish draws the line a last time, with the time the run took, and
// ends it. Nothing is drawn after it.
func (l *runLine) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	if l.any {
		l.redraw(l.now(), true)
	}
	l.line.end()
	l.finished = true
}

// Above returns a writer for lines printed while the run goes, the -v
// log: each write takes the progress line away first, and the next
// redraw puts it back below.
func (l *runLine) Above() io.Writer { return aboveLine{l} }

type aboveLine struct{ l *runLine }

func (a aboveLine) Write(p []byte) (int, error) {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line.wipe()
	l.last = time.Time{} // redraw at the next call
	return l.line.w.Write(p)
}

// redraw draws the line when the last redraw is old enough, or now when
// final.
func (l *runLine) redraw(t time.Time, final bool) {
	if l.finished || !final && !l.last.IsZero() && t.Sub(l.last) < redrawEvery {
		return
	}
	l.last = t
	l.rate.add(t, l.done)
	l.line.draw(l.format(t, final))
}

// format writes the line: "  3.1 MiB/12.0 MiB  26%  412/3000 files
// 1.2 MiB/s  ETA 0:07  name", or, final, the rate over the whole run and
// the time it took in place of the time left.
func (l *runLine) format(t time.Time, final bool) string {
	files, size := max(l.files, l.planFiles), max(l.size, l.planBytes)
	pct := 100
	if size > 0 && l.done < size {
		pct = int(100 * float64(l.done) / float64(size))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s %3d%%  %d/%d files  ", units.FormatSize(l.done), units.FormatSize(size), pct, l.doneFiles, files)
	elapsed := t.Sub(l.start)
	switch rate, ok := l.rate.rate(); {
	case final:
		if secs := elapsed.Seconds(); secs > 0 {
			b.WriteString(units.FormatSize(int64(float64(l.done)/secs)) + "/s")
		} else {
			b.WriteString("-- B/s")
		}
		b.WriteString("  in " + clockTime(elapsed))
	case ok && rate > 0:
		b.WriteString(units.FormatSize(int64(rate)) + "/s  ETA " + clockTime(time.Duration(float64(max(size-l.done, 0))/rate*float64(time.Second))))
	case ok:
		b.WriteString("0 B/s  ETA --:--")
	default:
		b.WriteString("-- B/s  ETA --:--")
	}
	if final || len(l.inFlight) == 0 {
		return b.String()
	}
	room := 0
	if l.line.width != nil {
		room = l.line.width() - 1 - len([]rune(b.String())) - 2
	}
	name := l.inFlight[len(l.inFlight)-1].name
	if l.line.width == nil || room > 0 {
		if l.line.width == nil {
			room = len(name) * 4
		}
		b.WriteString("  " + fitName(name, room))
	}
	return b.String()
}
