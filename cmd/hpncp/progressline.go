package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/hpncp/hpncp/internal/vis"
)

// What the progress displays share: for rsync's formats, a line redrawn
// in place and a rate over the last seconds; for all, how often they
// redraw and the numbers and names they print.

// redrawEvery bounds how often a line is redrawn: more often costs the
// terminal more than it tells anyone.
const redrawEvery = 200 * time.Millisecond

// rateSpan is how far back a rate looks, and rateMin the span it needs
// before it is shown at all: the bytes of a few milliseconds, divided by
// those milliseconds, made rates of hundreds of GiB/s out of a burst of
// buffered writes.
const (
	rateSpan = 5 * time.Second
	rateMin  = time.Second
)

// rateWindow measures a rate over the last rateSpan from samples of a
// growing count.
type rateWindow struct {
	samples []rateSample
}

type rateSample struct {
	at time.Time
	n  int64
}

// add records that the count was n at t. Samples closer together than
// redrawEvery are merged, which bounds the window to a few dozen.
func (w *rateWindow) add(t time.Time, n int64) {
	if k := len(w.samples); k > 1 && t.Sub(w.samples[k-2].at) < redrawEvery {
		w.samples[k-1] = rateSample{t, n}
	} else {
		w.samples = append(w.samples, rateSample{t, n})
	}
	// Keep one sample older than the span, so that the span is full.
	drop := 0
	for drop+1 < len(w.samples) && t.Sub(w.samples[drop+1].at) >= rateSpan {
		drop++
	}
	w.samples = w.samples[drop:]
}

// rate is the count per second over the window, and false while the
// window spans less than rateMin.
func (w *rateWindow) rate() (float64, bool) {
	if len(w.samples) < 2 {
		return 0, false
	}
	first, last := w.samples[0], w.samples[len(w.samples)-1]
	span := last.at.Sub(first.at)
	if span < rateMin {
		return 0, false
	}
	return float64(last.n-first.n) / span.Seconds(), true
}

// lineWriter draws a line that is redrawn in place: a carriage return,
// and the line padded with spaces over the previous one, for rsync's
// formats, whose output may be a file rather than a terminal.
type lineWriter struct {
	w      io.Writer
	prev   int  // cells of the line drawn last
	drawn  bool // a line is on screen, not yet ended
	broken bool // a write failed: the output is gone, stop drawing
}

// draw replaces the line on screen with s.
func (l *lineWriter) draw(s string) {
	n := utf8.RuneCountInString(s)
	pad := ""
	if n < l.prev {
		pad = strings.Repeat(" ", l.prev-n)
	}
	l.write("\r" + s + pad)
	l.prev, l.drawn = n, true
}

// end ends the line on screen, if any, so that what follows starts on a
// line of its own.
func (l *lineWriter) end() {
	if l.drawn {
		l.write("\n")
	}
	l.prev, l.drawn = 0, false
}

// wipe removes the line on screen, for lines printed above it.
func (l *lineWriter) wipe() {
	if !l.drawn {
		return
	}
	l.write("\r" + strings.Repeat(" ", l.prev) + "\r")
	l.prev, l.drawn = 0, false
}

// write writes s whole, between the -v lines (logMu): both go to
// stderr, the log from goroutines of its own.
func (l *lineWriter) write(s string) {
	if l.broken {
		return
	}
	logMu.Lock()
	_, err := io.WriteString(l.w, s)
	logMu.Unlock()
	if err != nil {
		l.broken = true
	}
}

// terminalWidth returns a function that reads w's width when w is a
// terminal, asked at each redraw so that a resized window is followed;
// 80 columns when it cannot tell.
func terminalWidth(w io.Writer) func() int {
	f, ok := w.(*os.File)
	return func() int {
		if ok {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				return cols
			}
		}
		return 80
	}
}

// fitName escapes a file's name for the terminal and cuts it to at most
// cells characters, keeping the \ooo escapes whole: half an escape would
// read as a different name. A cut name ends in "…".
func fitName(name string, cells int) string {
	s := vis.String(name)
	if utf8.RuneCountInString(s) <= cells {
		return s
	}
	if cells <= 1 {
		return ""
	}
	var b strings.Builder
	used := 0
	for i := 0; i < len(s); {
		unit := 1
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			unit = 4
		} else {
			_, unit = utf8.DecodeRuneInString(s[i:])
		}
		cost := 1
		if unit == 4 && s[i] == '\\' {
			cost = 4
		}
		if used+cost > cells-1 {
			break
		}
		b.WriteString(s[i : i+unit])
		used += cost
		i += unit
	}
	return b.String() + "…"
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// commas writes n with thousands separators, as rsync does: 1,234,567.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
