package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/hpncp/hpncp/internal/vis"
)

// What the progress displays share: a line redrawn in place at most a few
// times a second, a rate over the last seconds, and the numbers and names
// they print.

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
// the line, and the end of the previous one cleared.
type lineWriter struct {
	w     io.Writer
	width func() int // the terminal's columns; 0 for no bound
	// clear is written after the line: the terminal's clear-to-end, or,
	// where the output may be a file (rsync's formats), nothing, the line
	// padded with spaces over the previous one.
	clear  string
	prev   int  // cells of the line drawn last
	drawn  bool // a line is on screen, not yet ended
	broken bool // a write failed: the output is gone, stop drawing
}

// draw replaces the line on screen with s, cut to the terminal's width.
func (l *lineWriter) draw(s string) {
	s = l.fit(s)
	n := utf8.RuneCountInString(s)
	pad := ""
	if l.clear == "" && n < l.prev {
		pad = strings.Repeat(" ", l.prev-n)
	}
	l.write("\r" + s + pad + l.clear)
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
	if l.clear != "" {
		l.write("\r" + l.clear)
	} else {
		l.write("\r" + strings.Repeat(" ", l.prev) + "\r")
	}
	l.prev, l.drawn = 0, false
}

func (l *lineWriter) write(s string) {
	if l.broken {
		return
	}
	if _, err := io.WriteString(l.w, s); err != nil {
		l.broken = true
	}
}

// fit cuts s to one cell less than the terminal's width: a character in
// the last column makes some terminals wrap, and the next \r would then
// redraw only the second half.
func (l *lineWriter) fit(s string) string {
	if l.width == nil {
		return s
	}
	w := l.width()
	if w <= 1 || utf8.RuneCountInString(s) < w {
		return s
	}
	r := []rune(s)
	return string(r[:w-1])
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

// clockTime writes d as m:ss, or h:mm:ss from an hour on.
func clockTime(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s < 3600 {
		return fmt.Sprintf("%d:%02d", s/60, s%60)
	}
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}
