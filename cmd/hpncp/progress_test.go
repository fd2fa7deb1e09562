package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func testLine(width int) (*runLine, *bytes.Buffer, *fakeClock) {
	var out bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := newRunLine(&out)
	l.now = clock.now
	l.line.width = func() int { return width }
	return l, &out, clock
}

// screen is what a terminal shows of out: each \r goes back to the
// start of the line, \x1b[K clears to its end.
func screen(out string) []string {
	var lines []string
	var cur []rune
	col := 0
	for i := 0; i < len(out); {
		switch {
		case out[i] == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
			i++
		case out[i] == '\r':
			col = 0
			i++
		case strings.HasPrefix(out[i:], "\x1b[K"):
			cur = cur[:col]
			i += 3
		default:
			r, n := utf8.DecodeRuneInString(out[i:])
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
			i += n
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}

// draws splits out into the lines drawn, one per \r.
func draws(out string) []string {
	var d []string
	for _, s := range strings.Split(out, "\r") {
		if s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\x1b[K"); s != "" {
			d = append(d, s)
		}
	}
	return d
}

func TestRunLineOneLineForManyFiles(t *testing.T) {
	l, out, clock := testLine(100)
	var files []interface {
		Add(int)
		End()
	}
	for i := range 50 {
		f := l.Start("f"+string(rune('a'+i%26)), 1, 1<<20)
		files = append(files, f)
		clock.advance(10 * time.Millisecond)
	}
	for _, f := range files {
		for range 4 {
			f.Add(256 << 10)
			clock.advance(25 * time.Millisecond)
		}
		f.End()
	}
	l.Finish()
	got := screen(out.String())
	if len(got) != 1 {
		t.Fatalf("%d lines left on screen, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
	// 50 MiB in the 5.5 s from the first file's start.
	want := "50 MiB/50 MiB 100%  50/50 files  9.1 MiB/s  in 0:06"
	if got[0] != want {
		t.Errorf("final line %q, want %q", got[0], want)
	}
	// Five redraws a second, not one per call: 5.5 s of calls.
	if n := len(draws(out.String())); n < 20 || n > 30 {
		t.Errorf("%d redraws in 5.5 s, want about 5 a second", n)
	}
}

func TestRunLineTotalsGrowAndPlan(t *testing.T) {
	l, out, clock := testLine(200)
	a := l.Start("a", 1, 100)
	clock.advance(time.Second)
	b := l.Start("b", 1, 300)
	last := draws(out.String())
	if s := last[len(last)-1]; !strings.HasPrefix(s, "0 B/400 B   0%  0/2 files") {
		t.Errorf("after two files started the line shows %q", s)
	}
	l.Plan(10, 4000)
	clock.advance(time.Second)
	a.Add(100)
	clock.advance(redrawEvery)
	a.End()
	last = draws(out.String())
	if s := last[len(last)-1]; !strings.HasPrefix(s, "100 B/3.9 KiB   2%  1/10 files  45 B/s  ETA 1:26  b") {
		t.Errorf("with a plan the line shows %q", s)
	}
	b.Add(300)
	b.End()
	l.Finish()
	if got := screen(out.String()); len(got) != 1 || !strings.HasPrefix(got[0], "400 B/3.9 KiB  10%  2/10 files") {
		t.Errorf("final line %q", got)
	}
}

func TestRunLineRateNeedsASecond(t *testing.T) {
	l, out, clock := testLine(200)
	f := l.Start("burst", 1, 1<<30)
	// A burst of buffered writes within a few milliseconds is no rate.
	for range 5 {
		clock.advance(201 * time.Millisecond / 100)
		f.Add(64 << 20)
	}
	clock.advance(200 * time.Millisecond)
	f.Add(1)
	d := draws(out.String())
	if s := d[len(d)-1]; !strings.Contains(s, "-- B/s  ETA --:--") {
		t.Errorf("after 0.2 s the line shows a rate: %q", s)
	}
	// Then a steady 10 MiB/s for 10 s: the window of the last seconds
	// shows it, not the burst.
	for range 50 {
		clock.advance(200 * time.Millisecond)
		f.Add(2 << 20)
	}
	d = draws(out.String())
	if s := d[len(d)-1]; !strings.Contains(s, "10 MiB/s  ETA 1:00") {
		t.Errorf("at a steady 10 MiB/s the line shows %q", s)
	}
}

func TestRunLineFitsTheTerminalAndEscapesNames(t *testing.T) {
	l, out, _ := testLine(60)
	hostile := "evil\x1b]2;pwned\x07\r\nname-that-goes-on-and-on-and-on.bin"
	l.Start(hostile, 1, 10)
	s := out.String()
	if strings.ContainsAny(strings.ReplaceAll(strings.ReplaceAll(s, "\x1b[K", ""), "\r", ""), "\x1b\x07\n") {
		t.Errorf("a control character of the name reached the terminal: %q", s)
	}
	d := draws(s)
	line := d[len(d)-1]
	if n := utf8.RuneCountInString(line); n > 59 {
		t.Errorf("line of %d cells on a 60-column terminal: %q", n, line)
	}
	if !strings.Contains(line, `evil\033]2;`) || !strings.HasSuffix(line, "…") {
		t.Errorf("the name is not escaped and cut whole: %q", line)
	}
	for _, cut := range []string{`\0…`, `\03…`, `\00…`, `\01…`} {
		if strings.Contains(line, cut) {
			t.Errorf("an escape was cut in half: %q", line)
		}
	}
}

func TestRunLineLogLinesGoAbove(t *testing.T) {
	l, out, clock := testLine(100)
	f := l.Start("a", 1, 10)
	log := logTo(l.Above())
	log("copied %s", "x")
	clock.advance(time.Millisecond)
	f.Add(10)
	f.End()
	l.Finish()
	got := screen(out.String())
	if len(got) != 2 || got[0] != "hpncp: copied x" || !strings.HasPrefix(got[1], "10 B/10 B 100%  1/1 files") {
		t.Errorf("screen:\n%s", strings.Join(got, "\n"))
	}
}

func TestRunLineNothingStartedDrawsNothing(t *testing.T) {
	l, out, _ := testLine(100)
	l.Finish()
	if out.Len() != 0 {
		t.Errorf("a run without files drew %q", out.String())
	}
}

func TestFitName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cells int
		want  string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 5, "abcd…"},
		{"ab\x01cdef", 5, "ab…"},
		{"ab\x01cdef", 7, `ab\001…`},
		{"héllo wörld", 6, "héllo…"},
		{"x", 0, ""},
	} {
		if got := fitName(tc.name, tc.cells); got != tc.want {
			t.Errorf("fitName(%q, %d) = %q, want %q", tc.name, tc.cells, got, tc.want)
		}
	}
}

func TestRunLineBeginTimesFromTheRunsStart(t *testing.T) {
	l, out, clock := testLine(100)
	l.Begin()
	clock.advance(time.Second) // connecting, listing
	f := l.Start("a", 1, 4<<20)
	clock.advance(time.Second)
	f.Add(4 << 20)
	f.End()
	l.Finish()
	if got := screen(out.String()); len(got) != 1 || got[0] != "4 MiB/4 MiB 100%  1/1 files  2 MiB/s  in 0:02" {
		t.Errorf("screen %q", got)
	}
}
