package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"

	"github.com/hpncp/hpncp/transfer"
)

// runLine shows a whole run on one line of a terminal: one progressbar/v3
// bar of the bytes done of those known, with their rate and the time left,
// whose description is the files done of those started and a file in
// flight. The totals grow as the walk, which runs beside the copy, hands
// out files. Finish clears the line: the summary printed after it says
// the run's totals.
type runLine struct {
	oneFile // the calls of a plain Progress

	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	w     io.Writer
	width func() int // the terminal's columns

	files     int   // files started
	doneFiles int   // files ended
	size      int64 // the bytes of the files started
	done      int64 // bytes told
	shown     int64 // bytes told to the bar (update)
	inFlight  []*lineFile
	desc      string // the bar's description
	// fixed is the cells of the line besides its description, as last
	// drawn: what the name of the file in flight must leave room for.
	fixed    int
	any      bool // a file started
	finished bool
}

// barWidth is the bar's own width: progressbar/v3 narrows it when the line
// would not fit the terminal.
const barWidth = 15

// nameSlack is the cells the name leaves free beyond the line last drawn:
// the rate and the time left grow between two redraws.
const nameSlack = 8

// newRunLine returns a runLine drawing on w, a terminal.
func newRunLine(w io.Writer) *runLine {
	l := &runLine{w: w, width: terminalWidth(w), fixed: 40}
	l.oneFile.start = l.Start
	l.bar = progressbar.NewOptions64(1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionThrottle(redrawEvery),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(barWidth),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionUseANSICodes(true),
	)
	return l
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
	l.bar.StartWithoutRender()
}

func (l *runLine) Start(name string, files int, size int64) transfer.FileProgress {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bar.StartWithoutRender()
	l.any = true
	f := &lineFile{l: l, name: name, files: files, at: len(l.inFlight)}
	l.inFlight = append(l.inFlight, f)
	l.files += files
	l.size += size
	if l.finished {
		return f
	}
	// Each call redraws when the last redraw is old enough: the bytes
	// first, and the description at the next.
	l.bar.ChangeMax64(max(l.size, 1))
	l.describe()
	l.update()
	return f
}

func (f *lineFile) Add(n int) {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += int64(n)
	if !l.finished {
		l.update()
	}
}

// update tells the bar the bytes done. Its count stays one short of its
// total until Finish: progressbar/v3 ends a bar for good once its count
// reaches its total, and the files started so far may all be done while
// the walk has more to hand out; and a file that grew while it was
// copied sends more than its size.
func (l *runLine) update() {
	if show := min(l.done, l.size-1); show > l.shown {
		_ = l.bar.Add64(show - l.shown)
		l.shown = show
	}
	l.measure()
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
	if !l.finished {
		l.describe()
	}
}

// describe sets the bar's description: the files, and the name of the
// file in flight started last, escaped and cut to the room the line has.
func (l *runLine) describe() {
	var b strings.Builder
	fmt.Fprintf(&b, " %d/%d files", l.doneFiles, l.files)
	if n := len(l.inFlight); n > 0 {
		room := l.width() - 1 - l.fixed - nameSlack - utf8.RuneCountInString(b.String()) - 2
		if name := fitName(l.inFlight[n-1].name, room); name != "" {
			b.WriteString("  " + name)
		}
	}
	if d := b.String(); d != l.desc {
		l.desc = d
		l.bar.Describe(d)
	}
}

// measure takes the cells of the line besides its description from the
// line last drawn, when it was drawn with the description now set.
func (l *runLine) measure() {
	s := strings.TrimSuffix(strings.TrimPrefix(l.bar.String(), "\r"), "\x1b[0K")
	if body, ok := strings.CutSuffix(s, l.desc); ok && s != "" {
		l.fixed = utf8.RuneCountInString(body)
	}
}

// Finish clears the line, so that what follows is printed where it was.
// Nothing is drawn after it.
func (l *runLine) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	l.finished = true
	if l.any {
		_ = l.bar.Finish()
	}
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
	if !l.finished {
		_ = l.bar.Clear()
	}
	return l.w.Write(p)
}

// oneFile gives a transfer.FilesProgress the calls of a plain
// transfer.Progress, for a caller that copies one file at a time: each
// file is a Start of its own, ended by EndFile. The progress displays
// embed it, with start their own Start.
type oneFile struct {
	start func(name string, files int, size int64) transfer.FileProgress
	cur   transfer.FileProgress
}

func (o *oneFile) StartFile(name string, size int64) { o.cur = o.start(name, 1, size) }

func (o *oneFile) Add(n int) {
	if o.cur != nil {
		o.cur.Add(n)
	}
}

func (o *oneFile) EndFile() {
	if o.cur != nil {
		o.cur.End()
		o.cur = nil
	}
}
