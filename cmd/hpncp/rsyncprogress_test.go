package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The lines rsync 3.5.0 printed copying a small tree with --progress
// and --info=progress2 (rsync -r --progress --bwlimit=2000), and the
// numbers behind them.
func TestRsyncLineIsRsyncs(t *testing.T) {
	for _, tc := range []struct {
		done, size int64
		rate       float64 // bytes per second
		took       time.Duration
		known      bool
		chk        string
		want       string
	}{
		{32768, 32768, 0, 0, true, "(xfr#1, to-chk=4/6)", "         32,768 100%    0.00kB/s    0:00:00 (xfr#1, to-chk=4/6)"},
		{100, 100, 100000, 0, true, "(xfr#2, to-chk=3/6)", "            100 100%   97.66kB/s    0:00:00 (xfr#2, to-chk=3/6)"},
		{0, 0, 0, 0, true, "(xfr#3, to-chk=2/6)", "              0 100%    0.00kB/s    0:00:00 (xfr#3, to-chk=2/6)"},
		{32768, 5000000, 32768000, 0, true, "", "         32,768   0%   31.25MB/s    0:00:00  "},
		{2064384, 5000000, 1.96 * 1024 * 1024, time.Second, true, "", "      2,064,384  41%    1.96MB/s    0:00:01  "},
		{5000000, 5000000, 2.03 * 1024 * 1024, 2 * time.Second, true, "(xfr#4, to-chk=0/6)", "      5,000,000 100%    2.03MB/s    0:00:02 (xfr#4, to-chk=0/6)"},
		{5032868, 5032868, 1.94 * 1024 * 1024, 2*time.Second + 400*time.Millisecond, true, "(xfr#4, to-chk=0/6)", "      5,032,868 100%    1.94MB/s    0:00:02 (xfr#4, to-chk=0/6)"},
		{1234567, 2743482, 12.34 * 1024 * 1024, 5 * time.Second, true, "(xfr#12, to-chk=88/100)", "      1,234,567  45%   12.34MB/s    0:00:05 (xfr#12, to-chk=88/100)"},
		// rsync's own mark for a time it cannot tell.
		{1, 10, -1, 0, false, "", "              1  10%    0.00kB/s   ??:??:??  "},
		{3 << 40, 3 << 40, 2.5 * (1 << 30), 25*time.Hour + 3*time.Minute + 4*time.Second, true, "", "3,298,534,883,328 100%    2.50GB/s   25:03:04  "},
	} {
		if got := rsyncLine(tc.done, tc.size, tc.rate, tc.took, tc.known, tc.chk); got != tc.want {
			t.Errorf("rsyncLine(%d, %d, %.0f, %v) =\n%q, want\n%q", tc.done, tc.size, tc.rate, tc.took, got, tc.want)
		}
	}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func testRsyncFiles() (*rsyncFiles, *bytes.Buffer, *fakeClock) {
	var out bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	p := newRsyncFiles(&out)
	p.now = clock.now
	return p, &out, clock
}

func TestRsyncFilesOneAtATimeAsRsync(t *testing.T) {
	p, out, clock := testRsyncFiles()
	p.Plan(2, 5000100)
	a := p.Start("c", 1, 100)
	clock.advance(time.Millisecond)
	a.Add(100)
	a.End()
	b := p.Start("d/b", 1, 5000000)
	for range 20 {
		clock.advance(125 * time.Millisecond)
		b.Add(250000)
	}
	b.End()
	p.Finish()
	want := "c\n" +
		"\r              0   0%    0.00kB/s   ??:??:??  " +
		"\r            100 100%   97.66kB/s    0:00:00 (xfr#1, to-chk=1/2)\n" +
		"d/b\n" +
		"\r              0   0%    0.00kB/s   ??:??:??  " +
		"\r      2,000,000  40%    1.91MB/s    0:00:01  " +
		"\r      4,000,000  80%    1.91MB/s    0:00:00  " +
		"\r      5,000,000 100%    1.91MB/s    0:00:02 (xfr#2, to-chk=0/2)\n"
	if got := out.String(); got != want {
		t.Errorf("output\n%q, want\n%q", got, want)
	}
}

func TestRsyncFilesManyInFlightShownInTurn(t *testing.T) {
	p, out, clock := testRsyncFiles()
	big := p.Start("big", 1, 1000)
	small := p.Start("small", 1, 10)
	small.Add(10)
	clock.advance(10 * time.Millisecond)
	small.End() // waits for big, which started first
	if strings.Contains(out.String(), "small") {
		t.Fatalf("a file was shown before the one that started first ended:\n%q", out.String())
	}
	big.Add(1000)
	clock.advance(10 * time.Millisecond)
	big.End()
	p.Finish()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var last []string
	for _, l := range lines {
		d := strings.Split(l, "\r")
		last = append(last, d[len(d)-1])
	}
	want := []string{
		"big",
		"          1,000 100%   48.83kB/s    0:00:00 (xfr#1, ir-chk=1/2)",
		"small",
		"             10 100%    0.98kB/s    0:00:00 (xfr#2, ir-chk=0/2)",
	}
	if strings.Join(last, "\n") != strings.Join(want, "\n") {
		t.Errorf("shown:\n%s\nwant:\n%s", strings.Join(last, "\n"), strings.Join(want, "\n"))
	}
}

func TestRsyncFilesLongFileDoesNotHoldBackTheRest(t *testing.T) {
	p, out, clock := testRsyncFiles()
	long := p.Start("long", 1, 1<<30)
	for i := range maxWaiting {
		f := p.Start("f", 1, 1)
		f.Add(1)
		clock.advance(time.Millisecond)
		f.End()
		if i == maxWaiting-2 && strings.Contains(out.String(), "xfr#") {
			t.Fatal("files were shown before maxWaiting of them waited")
		}
	}
	if n := strings.Count(out.String(), "xfr#"); n != maxWaiting {
		t.Errorf("%d files shown once %d waited, want all of them", n, maxWaiting)
	}
	// The long file's name is shown again above its line.
	if !strings.HasSuffix(strings.TrimRight(out.String(), " ?:0.%kB/s\r\n"), "long") {
		t.Errorf("the long file's name is not above its line again: ...%q", out.String()[max(out.Len()-200, 0):])
	}
	long.Add(1 << 30)
	long.End()
	p.Finish()
	if n := strings.Count(out.String(), "xfr#"); n != maxWaiting+1 {
		t.Errorf("%d files shown, want %d", n, maxWaiting+1)
	}
}

func TestRsyncFilesEscapesNames(t *testing.T) {
	p, out, _ := testRsyncFiles()
	f := p.Start("a\x1b[2Jb\nc", 1, 1)
	f.Add(1)
	f.End()
	if s := out.String(); strings.Contains(s, "\x1b") || !strings.HasPrefix(s, `a\033[2Jb\012c`+"\n") {
		t.Errorf("name not escaped: %q", s)
	}
}

func TestRsyncTotalAsProgress2(t *testing.T) {
	var out bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	p := newRsyncTotal(&out)
	p.now = clock.now
	p.Plan(100, 100*100<<10)
	var fs []interface {
		Add(int)
		End()
	}
	for range 100 {
		fs = append(fs, p.Start("f", 1, 100<<10))
	}
	for _, f := range fs {
		clock.advance(50 * time.Millisecond)
		f.Add(100 << 10)
		f.End()
	}
	p.Finish()
	s := out.String()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Fatalf("progress2 is one line, ended at the end: %q", s)
	}
	draws := strings.Split(strings.TrimSuffix(s, "\n"), "\r")
	if n := len(draws) - 1; n < 5 || n > 7 {
		t.Errorf("%d redraws in 5 s, want one a second", n)
	}
	if d := draws[3]; !strings.HasSuffix(d, "  ") && !strings.Contains(d, "(xfr#") {
		t.Errorf("a redraw %q", d)
	}
	want := "     10,240,000 100%    1.95MB/s    0:00:05 (xfr#100, to-chk=0/100)"
	if got := draws[len(draws)-1]; strings.TrimRight(got, " ") != want {
		t.Errorf("last line\n%q, want\n%q", got, want)
	}
	// Each line covers the longer one before it.
	for i := 2; i < len(draws); i++ {
		if len(draws[i]) < len(strings.TrimRight(draws[i-1], " ")) {
			t.Errorf("line %d (%q) leaves the end of %q", i, draws[i], draws[i-1])
		}
	}
}
