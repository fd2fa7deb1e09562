package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/testenv"
	"github.com/hpncp/hpncp/job"
)

// helperServer is a real sshd, an hpncp binary built for the far end to
// run as its helper, and the hpncp ssh words that reach it with the
// helper's sockets in a directory of the test's (sent as
// XDG_RUNTIME_DIR, which the sshd accepts).
func helperServer(t *testing.T) (srv *sshdtest.Server, bin string, ssh []string) {
	t.Helper()
	srv = sshdtest.Start(t, sshdtest.Options{ExtraConfig: []string{"AcceptEnv XDG_RUNTIME_DIR"}})
	dir, err := os.MkdirTemp("", "hpncp-helper-e2e") // short: a socket's path must fit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin = testenv.BuildHpncp(t, dir)
	// hpncp ssh remembers a destination's helper in the cache (set after
	// the build, whose own cache the variable would move).
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	return srv, bin, []string{"ssh", "--helper-path", bin, "-o", "SetEnv=XDG_RUNTIME_DIR=" + run, "-F", srv.ConfigFile}
}

// TestHelperStripesCommandE2E: hpncp ssh with an hpncp helper at the far
// end (a real sshd) carries a command's stdin and stdout over several
// connections, byte for byte, and its exit as ssh would.
func TestHelperStripesCommandE2E(t *testing.T) {
	srv, _, ssh := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := make([]byte, 24<<20+777)
	rand.New(rand.NewSource(36)).Read(data)
	target := filepath.Join(t.TempDir(), "f")

	up := append(append([]string{}, ssh...), "--connections", "4", "-v", "e2e", "cat > "+target)
	_, stderr, err := runSSHArgs(ctx, "hpncp", up, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("cat > f through the helper: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "striping over 4 connections") {
		t.Errorf("-v does not say the command was striped:\n%s", stderr)
	}
	if got, err := os.ReadFile(target); err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("the file the command wrote: %d bytes of %d, not the same (%v)", len(got), len(data), err)
	}

	// The helper answered: the next run dials its connections beside
	// the first.
	down := append(append([]string{}, ssh...), "--connections", "3", "-v", "e2e", "cat "+target+"; echo on-stderr >&2")
	stdout, stderr, err := runSSHArgs(ctx, "hpncp", down, nil)
	if !strings.Contains(stderr, "a helper answered here before: dialing 2 more connections") {
		t.Errorf("-v does not say the connections were dialed ahead:\n%s", stderr)
	}
	if err != nil || sha256.Sum256([]byte(stdout)) != sha256.Sum256(data) {
		t.Fatalf("cat f through the helper: %d bytes of %d, %v", len(stdout), len(data), err)
	}
	// The command's stderr, among -v's lines (the dials' come as they
	// come).
	var own []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if line != "" && !strings.HasPrefix(line, "hpncp: ") {
			own = append(own, line)
		}
	}
	if strings.Join(own, "") != "on-stderr\n" {
		t.Errorf("the command's stderr came as %q, want \"on-stderr\\n\"", own)
	}

	for _, c := range []struct {
		cmd  string
		want int
	}{{"exit 3", 3}, {"kill -TERM $$", 128 + 15}} {
		_, _, err := runSSHArgs(ctx, "hpncp", append(append([]string{}, ssh...), "--connections", "2", "e2e", c.cmd), nil)
		var re *job.RemoteExit
		if !errors.As(err, &re) || re.ExitCode() != c.want {
			t.Errorf("%q through the helper: %v, want exit code %d", c.cmd, err, c.want)
		}
	}

	// The helper remembered is gone: the connections dialed ahead for it
	// are closed, and the command runs once, on one channel.
	gone := append([]string{}, ssh...)
	gone[2] = "/nonexistent/hpncp"
	count := filepath.Join(t.TempDir(), "runs")
	stdout, stderr, err = runSSHArgs(ctx, "hpncp", append(gone, "--connections", "3", "-v", "e2e", "echo run >> "+count+"; cat"), strings.NewReader("x\n"))
	if err != nil || stdout != "x\n" || !strings.Contains(stderr, "dialing 2 more connections") || !strings.Contains(stderr, "one channel") {
		t.Fatalf("a helper remembered and gone: %q, %v\n%s", stdout, err, stderr)
	}
	if runs, _ := os.ReadFile(count); string(runs) != "run\n" {
		t.Errorf("the command ran %q, want once", runs)
	}
	_ = srv
}

// TestNoHelperRunsOnOneChannelE2E: where no helper answers (none at the
// path, or --helper never), the command runs once, on one channel, as
// ssh runs it, and -v says why.
func TestNoHelperRunsOnOneChannelE2E(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	count := filepath.Join(t.TempDir(), "runs")
	for _, flags := range [][]string{
		{"--helper-path", "/nonexistent/hpncp"},
		{"--helper", "never"},
	} {
		args := append(append([]string{"ssh", "-v", "-F", srv.ConfigFile}, flags...), "e2e", "echo run >> "+count+"; cat")
		stdout, stderr, err := runSSHArgs(ctx, "hpncp", args, strings.NewReader("through\n"))
		if err != nil || stdout != "through\n" {
			t.Fatalf("%v: %q, %v\n%s", flags, stdout, err, stderr)
		}
		if !strings.Contains(stderr, "one channel") {
			t.Errorf("%v: -v does not say the command ran on one channel:\n%s", flags, stderr)
		}
	}
	if runs, _ := os.ReadFile(count); string(runs) != "run\nrun\n" {
		t.Errorf("the command ran %q, want once per hpncp ssh", runs)
	}
}

// TestRsyncThroughHelperE2E: rsync -e 'hpncp ssh' with a helper at the far
// end, both ways: the trees come out equal (rsync's own checksums pass).
func TestRsyncThroughHelperE2E(t *testing.T) {
	rsync := sshdtest.LookTool(t, "rsync")
	_, bin, ssh := helperServer(t)
	remoteShell := bin + " " + strings.Join(ssh, " ") + " --connections 3"
	src := t.TempDir()
	rng := rand.New(rand.NewSource(37))
	for i, size := range []int{0, 1, 4096, 3 << 20, 9<<20 + 5} {
		b := make([]byte, size)
		rng.Read(b)
		name := filepath.Join(src, "d", strings.Repeat("x", i+1))
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remote := t.TempDir()
	back := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-a", "-e", remoteShell, src + "/", "e2e:" + remote + "/"},
		{"-a", "-e", remoteShell, "e2e:" + remote + "/", back + "/"},
	} {
		if out, err := exec.CommandContext(ctx, rsync, args...).CombinedOutput(); err != nil {
			t.Fatalf("rsync %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.CommandContext(ctx, "diff", "-r", src, back).CombinedOutput()
	if err != nil {
		t.Fatalf("the tree rsync brought back through the helper differs: %v\n%s", err, out)
	}
}

// TestHelperInterruptedE2E: SIGTERM to hpncp ssh while a striped
// command still reads its input ends hpncp ssh with exit 130, and the
// helper stops the command (its process group) rather than give it an
// early end of its input: a tar x would take a cut archive for a whole
// one. (Where the input had ended, the command runs on, as under ssh.)
func TestHelperInterruptedE2E(t *testing.T) {
	_, bin, ssh := helperServer(t)
	dir := t.TempDir()
	started, done := filepath.Join(dir, "started"), filepath.Join(dir, "done")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{}, ssh...), "--connections", "3", "e2e",
		"echo $$ > "+started+"; cat > /dev/null; touch "+done)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in.Write(make([]byte, 1<<20))
	// Wait for the command to have started at the far end.
	var pid int
	for pid == 0 {
		if b, err := os.ReadFile(started); err == nil && len(b) > 1 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if ctx.Err() != nil {
			t.Fatalf("the command never started: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("hpncp ssh after SIGTERM: %v, want exit 130\n%s", err, stderr.String())
	}
	// The remote shell goes: the helper kills its process group.
	for syscall.Kill(pid, 0) == nil {
		if ctx.Err() != nil {
			t.Fatalf("the remote command (pid %d) still runs after hpncp ssh was interrupted", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(done); err == nil {
		t.Fatalf("the remote command was given an end of its input and ran on")
	}
}
