package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The line is progressbar/v3's, which reads the clock itself: these tests
// wait for its redraws, a few tenths of a second each.

func testLine(width int) (*runLine, *bytes.Buffer) {
	var out bytes.Buffer
	l := newRunLine(&out)
	l.width = func() int { return width }
	return l, &out
}

// screen is what a terminal shows of out: each \r goes back to the
// start of the line, \x1b[0K clears to its end, \x1b[2K the whole line.
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
		case strings.HasPrefix(out[i:], "\x1b[0K"):
			cur = cur[:col]
			i += 4
		case strings.HasPrefix(out[i:], "\x1b[2K"):
			cur = nil
			i += 4
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
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\x1b[0K")
		if s != "" && s != "\x1b[2K" {
			d = append(d, s)
		}
	}
	return d
}

// lastDraw is the line drawn last.
func lastDraw(t *testing.T, out *bytes.Buffer) string {
	t.Helper()
	d := draws(out.String())
	if len(d) == 0 {
		t.Fatal("nothing drawn")
	}
	return d[len(d)-1]
}

// One line for a run of many files, redrawn a few times a second however
// often it is told, and cleared at the end for the summary.
func TestRunLineOneLineForManyFiles(t *testing.T) {
	l, out := testLine(100)
	var files []interface {
		Add(int)
		End()
	}
	for i := range 50 {
		files = append(files, l.Start("f"+string(rune('a'+i%26)), 1, 1<<20))
	}
	start := time.Now()
	for _, f := range files {
		for range 4 {
			f.Add(256 << 10)
			time.Sleep(5 * time.Millisecond)
		}
		f.End()
	}
	took := time.Since(start)
	time.Sleep(redrawEvery)
	last := l.Start("last", 1, 10)
	time.Sleep(redrawEvery)
	last.Add(5)
	if got := screen(out.String()); len(got) != 1 {
		t.Fatalf("%d lines on screen, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
	if s := lastDraw(t, out); !strings.Contains(s, "/50 MiB") || !strings.Contains(s, " 50/51 files  last") || !strings.Contains(s, "B/s") {
		t.Errorf("line %q: want the bytes of 50 MiB, 50 of 51 files and a rate", s)
	}
	// 1,000 calls: a redraw each 0.2 s at most, not one a call.
	if n, most := len(draws(out.String())), int(took/redrawEvery)+4; n > most {
		t.Errorf("%d redraws in %v, want at most %d", n, took, most)
	}
	l.Finish()
	if got := screen(out.String()); len(got) != 0 {
		t.Errorf("the line is left after Finish: %q", got)
	}
}

// The totals grow as files start; the bar goes on while the files started
// are all done, and a file that sends more than its size does not end it.
func TestRunLineTotalsGrow(t *testing.T) {
	l, out := testLine(200)
	a := l.Start("a", 1, 100)
	a.Add(150)
	a.End()
	time.Sleep(redrawEvery)
	b := l.Start("b", 1, 300)
	// A redraw shows what the calls within its 0.2 s told.
	time.Sleep(redrawEvery)
	b.Add(100)
	if s := lastDraw(t, out); !strings.Contains(s, "(250/400 B") || !strings.Contains(s, " 1/2 files  b") {
		t.Errorf("with a second file started and 250 of 400 bytes done the line shows %q", s)
	}
	b.Add(200)
	b.End()
	l.Finish()
	if got := screen(out.String()); len(got) != 0 {
		t.Errorf("the line is left after Finish: %q", got)
	}
}

func TestRunLineFitsTheTerminalAndEscapesNames(t *testing.T) {
	l, out := testLine(80)
	hostile := "evil\x1b]2;pwned\x07\r\nname-that-goes-on-and-on-and-on-and-on-and-on.bin"
	f := l.Start(hostile, 1, 10)
	time.Sleep(redrawEvery)
	f.Add(1)
	s := out.String()
	plain := strings.NewReplacer("\x1b[0K", "", "\x1b[2K", "", "\r", "").Replace(s)
	if strings.ContainsAny(plain, "\x1b\x07\n") {
		t.Errorf("a control character of the name reached the terminal: %q", s)
	}
	line := lastDraw(t, out)
	if n := utf8.RuneCountInString(line); n > 79 {
		t.Errorf("line of %d cells on an 80-column terminal: %q", n, line)
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
	l, out := testLine(100)
	f := l.Start("a", 1, 10)
	log := logTo(l.Above())
	log("copied %s", "x")
	time.Sleep(redrawEvery)
	f.Add(5)
	if got := screen(out.String()); len(got) != 2 || got[0] != "hpncp: copied x" || !strings.Contains(got[1], "5/10 B") {
		t.Errorf("screen:\n%s", strings.Join(got, "\n"))
	}
	f.Add(5)
	f.End()
	l.Finish()
	if got := screen(out.String()); len(got) != 1 || got[0] != "hpncp: copied x" {
		t.Errorf("screen after Finish:\n%s", strings.Join(got, "\n"))
	}
}

func TestRunLineNothingStartedDrawsNothing(t *testing.T) {
	l, out := testLine(100)
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
	l, out := testLine(100)
	l.Begin()
	time.Sleep(1100 * time.Millisecond) // connecting, listing
	l.Start("a", 1, 4<<20)
	// The time since Begin is at least a second, however busy the machine.
	if s := lastDraw(t, out); !regexp.MustCompile(`\[[1-9][0-9]*s:`).MatchString(s) {
		t.Errorf("the line %q does not time the run from Begin", s)
	}
	l.Finish()
}
