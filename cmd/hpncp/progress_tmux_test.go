package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/internal/testenv"
	"github.com/hpncp/hpncp/internal/units"
)

// What a user sees on a terminal copying a tree of 3,000 files: tmux runs
// hpncp -r in a pane of its own, and the pane with its scrollback is read
// once the copy exited. One progress line is left, whose totals are the
// summary's; no bar of a file, no line glued to the summary.
func TestProgressOneLineInATerminal(t *testing.T) {
	testenv.SkipSlow(t)
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
	for {
		out, err := run("capture-pane", "-p", "-J", "-S", "-")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, out)
		}
		pane = out
		if strings.Count(pane, "hpncp-exit=") == 2 {
			break
		}
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
	}
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
	if len(progress) != 1 || len(summary) != 1 {
		t.Errorf("%s: %d progress lines and %d summary lines left, want 1 and 1", name, len(progress), len(summary))
		return
	}
	m := regexp.MustCompile(`^hpncp: (\d+) file\(s\), .*?(\d+) bytes`).FindStringSubmatch(summary[0])
	if m == nil || m[1] != fmt.Sprint(files) || m[2] != fmt.Sprint(total) {
		t.Errorf("%s: summary %q: want %d files, %d bytes", name, summary[0], files, total)
		return
	}
	size := units.FormatSize(total)
	want := fmt.Sprintf("%s/%s 100%%  %d/%d files  ", size, size, files, files)
	if !strings.HasPrefix(progress[0], want) || !strings.Contains(summary[0], " "+size+" ") {
		t.Errorf("%s: progress line %q, summary %q: want both to say %d files of %s", name, progress[0], summary[0], files, size)
	}
}
