package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/internal/testenv"
	"github.com/hpncp/hpncp/internal/units"
)

// What a user sees on a terminal copying a tree of 3,000 files: tmux runs
// hpncp -r in a pane of its own, and the pane is read while the copy goes
// and, with its scrollback, once it exited. While it goes, one bar for the
// run, no bar of a file, within the pane's width; at the end the bar is
// cleared and the summary alone says the totals, on a line of its own.
func TestProgressOneLineInATerminal(t *testing.T) {
	testenv.SkipSlow(t)
	t.Parallel()
	tmux := sshdtest.LookTool(t, "tmux")
	srv := sshtest.Start(t, sshtest.Options{})
	const files = 3000
	src := filepath.Join(t.TempDir(), "tree")
	var total int64
	for i := range files {
		// Sizes from 0 to 12 KiB, and a few of a few MiB, which go on
		// the pipeline beside the small ones.
		size := int64(i%13) << 10
		if i%1000 == 999 {
			size = 3<<20 + int64(i)
		}
		name := filepath.Join(src, fmt.Sprintf("d%02d", i%40), fmt.Sprintf("f%04d", i))
		if err := writeNoise(name, size); err != nil {
			t.Fatal(err)
		}
		total += size
	}
	dst := filepath.Join(srv.Root, "dst")

	// tmux's socket path must be short: a directory of its own in /tmp.
	dir, err := os.MkdirTemp("", "hpncp-tmux")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		// The server is this test's own, found by its socket.
		if out, err := exec.Command(tmux, "-S", sock, "kill-server").CombinedOutput(); err != nil && !strings.Contains(string(out), "no server") {
			t.Logf("tmux kill-server: %v: %s", err, out)
		}
	})
	// hpncp is this test binary, as TestMain put it on $PATH.
	hpncp, err := exec.LookPath("hpncp")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	// Up, then down: a download lists the tree on the server while its
	// files are written here, and the bar of the files in flight ended
	// and started again whenever the listing fell behind. The limit (-l,
	// Kbit/s) makes each copy take a few seconds, so that the line is
	// redrawn many times.
	copyCmd := func(from, to string) string {
		return fmt.Sprintf("HOME=%s XDG_CACHE_HOME=%s/.cache %s -F %s -l 50000 -r %s %s; echo hpncp-exit=$?; ",
			shellQuote(home), shellQuote(home), shellQuote(hpncp), shellQuote(srv.ConfigFile), shellQuote(from), shellQuote(to))
	}
	down := t.TempDir()
	script := copyCmd(src, "testhost:"+dst) + copyCmd("testhost:"+dst, down) + "sleep 300"
	if out, err := run("new-session", "-d", "-x", "120", "-y", "30", "sh", "-c", script); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	var pane string
	var bars [2][]string // the bars seen while each copy went
	for {
		out, err := run("capture-pane", "-p", "-J", "-S", "-")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, out)
		}
		pane = out
		ended := strings.Count(pane, "hpncp-exit=")
		if ended == 2 {
			break
		}
		going := pane[strings.LastIndex(pane, "hpncp-exit=")+1:]
		var seen []string
		for _, l := range strings.Split(going, "\n") {
			if barLine.MatchString(l) {
				seen = append(seen, l)
			}
		}
		if len(seen) > 1 {
			t.Errorf("%d progress bars on screen at once:\n%s", len(seen), going)
		}
		bars[ended] = append(bars[ended], seen...)
		select {
		case <-ctx.Done():
			t.Fatalf("the copies did not end in time; the pane:\n%s", pane)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("the pane:\n%s", pane)
	runs := strings.Split(pane, "hpncp-exit=")
	for i, name := range []string{"upload", "download"} {
		checkProgressPane(t, name, runs[i], runs[i+1], files, total)
		checkBars(t, name, bars[i], files)
	}
}

// barLine is a line of the progress bar: "  26% |███   | (3.1/12 MiB,
// 1.2 MiB/s) [3s:7s]  412/3000 files  name".
var barLine = regexp.MustCompile(`^ *\d+% \|[^|]*\| \(`)

// checkBars checks the bars seen while a copy of files files went: at
// least one, each within the pane's 120 columns, the files counted.
func checkBars(t *testing.T, name string, bars []string, files int) {
	t.Helper()
	if len(bars) == 0 {
		t.Errorf("%s: no progress bar seen while the copy went", name)
		return
	}
	counted := regexp.MustCompile(` \d+/(\d+) files`)
	withFiles := 0
	for _, b := range bars {
		if n := utf8.RuneCountInString(strings.TrimRight(b, " ")); n >= 120 {
			t.Errorf("%s: a bar of %d cells in a pane of 120: %q", name, n, b)
		}
		if m := counted.FindStringSubmatch(b); m != nil {
			withFiles++
			if n, _ := strconv.Atoi(m[1]); n > files {
				t.Errorf("%s: bar %q counts more than the %d files", name, b, files)
			}
		}
	}
	if withFiles == 0 {
		t.Errorf("%s: no bar counted the files: %q", name, bars)
	}
	t.Logf("%s: %d bars seen, the last %q", name, len(bars), bars[len(bars)-1])
}

// checkProgressPane checks what a copy left in the pane, out, and its
// exit code, at the start of next.
func checkProgressPane(t *testing.T, name, out, next string, files int, total int64) {
	t.Helper()
	if !strings.HasPrefix(next, "0") {
		t.Errorf("%s: hpncp failed", name)
		return
	}
	var progress, summary []string
	for _, l := range strings.Split(out, "\n") {
		switch l = strings.TrimRight(l, " "); {
		case strings.HasPrefix(l, "hpncp: ") && strings.Contains(l, "file(s)"):
			summary = append(summary, l)
		case strings.Contains(l, "B/s") || strings.Contains(l, "%"):
			progress = append(progress, l)
		}
	}
	if len(progress) != 0 || len(summary) != 1 {
		t.Errorf("%s: %d progress lines and %d summary lines left, want none and 1", name, len(progress), len(summary))
		return
	}
	m := regexp.MustCompile(`^hpncp: (\d+) file\(s\), .*?(\d+) bytes`).FindStringSubmatch(summary[0])
	if m == nil || m[1] != fmt.Sprint(files) || m[2] != fmt.Sprint(total) {
		t.Errorf("%s: summary %q: want %d files, %d bytes", name, summary[0], files, total)
		return
	}
	if size := units.FormatSize(total); !strings.Contains(summary[0], " "+size+" ") {
		t.Errorf("%s: summary %q: want it to say %s", name, summary[0], size)
	}
}
