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
	// The limit (-l, Kbit/s) makes the copy take a few seconds, so that
	// the line is redrawn many times.
	// hpncp is this test binary, as TestMain put it on $PATH.
	hpncp, err := exec.LookPath("hpncp")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	script := fmt.Sprintf("HOME=%s XDG_CACHE_HOME=%s/.cache %s -F %s -l 50000 -r %s testhost:%s; echo hpncp-exit=$?; sleep 300",
		shellQuote(home), shellQuote(home), shellQuote(hpncp), shellQuote(srv.ConfigFile), shellQuote(src), shellQuote(dst))
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
		if strings.Contains(pane, "hpncp-exit=") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the copy did not end in time; the pane:\n%s", pane)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !strings.Contains(pane, "hpncp-exit=0") {
		t.Fatalf("hpncp failed; the pane:\n%s", pane)
	}

	var progress, summary []string
	for _, l := range strings.Split(pane, "\n") {
		switch l = strings.TrimRight(l, " "); {
		case strings.HasPrefix(l, "hpncp: ") && strings.Contains(l, "file(s)"):
			summary = append(summary, l)
		case strings.Contains(l, "B/s") || strings.Contains(l, "%"):
			progress = append(progress, l)
		}
	}
	t.Logf("the pane:\n%s", pane)
	if len(progress) != 1 || len(summary) != 1 {
		t.Fatalf("%d progress lines and %d summary lines left, want 1 and 1; the pane:\n%s", len(progress), len(summary), pane)
	}
	m := regexp.MustCompile(`^hpncp: (\d+) file\(s\), (.+?) \((\d+) bytes\) in `).FindStringSubmatch(summary[0])
	if m == nil {
		t.Fatalf("summary %q", summary[0])
	}
	if m[1] != fmt.Sprint(files) || m[3] != fmt.Sprint(total) {
		t.Errorf("summary %q: want %d files, %d bytes", summary[0], files, total)
	}
	size := units.FormatSize(total)
	want := fmt.Sprintf("%s/%s 100%%  %d/%d files  ", size, size, files, files)
	if m[2] != size || !strings.HasPrefix(progress[0], want) {
		t.Errorf("progress line %q, summary %q: want the line to start %q", progress[0], summary[0], want)
	}
}
