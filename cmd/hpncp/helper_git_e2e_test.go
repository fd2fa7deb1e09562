package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestGitCloneThroughHelperE2E: git clone, fetch and push with
// GIT_SSH_COMMAND='hpncp ssh ...', against a real sshd with the hpncp
// helper at the far end, so that git's protocol streams (the negotiation
// both ways, then a pack of several MiB) are striped over 3 connections.
// What arrives is what was sent: the same commits, git fsck --full finds
// every object whole, and a binary file of random bytes comes out of the
// clone with the source's sha256.
func TestGitCloneThroughHelperE2E(t *testing.T) {
	git := sshdtest.LookTool(t, "git")
	_, bin, ssh := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()

	// git runs with no configuration but what the test gives it: HOME
	// is a directory of the test's, and neither the global nor the
	// system gitconfig is read. -v makes hpncp ssh say on stderr, which
	// git passes through, whether the helper striped the streams.
	sshCommand := bin + " " + strings.Join(ssh, " ") + " --connections 3 -v"
	gitTrace := filepath.Join(tmp, "git-trace")
	env := []string{
		"HOME=" + filepath.Join(tmp, "home"),
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=hpncp e2e", "GIT_AUTHOR_EMAIL=e2e@hpncp.invalid",
		"GIT_COMMITTER_NAME=hpncp e2e", "GIT_COMMITTER_EMAIL=e2e@hpncp.invalid",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_SSH_COMMAND=" + sshCommand,
		// The commands git runs, ssh's among them with its arguments.
		"GIT_TRACE=" + gitTrace,
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	if err := os.Mkdir(filepath.Join(tmp, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		os.Remove(gitTrace)
		cmd := exec.CommandContext(ctx, git, args...)
		cmd.Env = env
		// Past the deadline git is killed; hpncp ssh, its child, may
		// still hold the output pipe: the wait for it is bounded.
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	revParse := func(gitDir, rev string) string {
		t.Helper()
		return strings.TrimSpace(run("--git-dir", gitDir, "rev-parse", "--verify", rev))
	}
	rng := rand.New(rand.NewSource(38))
	write := func(name string, size int) [32]byte {
		t.Helper()
		b := make([]byte, size)
		rng.Read(b)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	writeText := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// striped checks that each of git's ssh commands in the output went
	// through the helper.
	striped := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, "striping over 3 connections") {
			t.Errorf("%s: hpncp ssh -v does not say the helper striped git's streams:\n%s", what, out)
		}
	}

	// The source: a few commits, random bytes (a pack git cannot
	// compress, of many of the helper's frames), text, a subdirectory.
	src := filepath.Join(tmp, "src")
	run("init", "-q", "--initial-branch=main", src)
	writeText(filepath.Join(src, "README"), "hpncp git e2e\n")
	run("-C", src, "add", "-A")
	run("-C", src, "commit", "-q", "-m", "first")
	blobSum := write(filepath.Join(src, "data", "blob.bin"), 5<<20+321)
	write(filepath.Join(src, "data", "small.bin"), 4096)
	run("-C", src, "add", "-A")
	run("-C", src, "commit", "-q", "-m", "random bytes")
	writeText(filepath.Join(src, "README"), "hpncp git e2e\nsecond line\n")
	run("-C", src, "commit", "-q", "-a", "-m", "third")

	// git clone. The sshd here does not accept GIT_PROTOCOL, so this is
	// git's protocol v0, as with a server that drops the variable.
	dst := filepath.Join(tmp, "dst")
	out := run("clone", "e2e:"+src, dst)
	striped("git clone", out)
	// git runs hpncp ssh -G first, to tell OpenSSH's ssh from a simpler
	// program, and passes ssh's options only to the former: the option
	// on the command line that ran git-upload-pack (the -G one has it
	// whatever the answer) shows that hpncp ssh passed for OpenSSH's.
	trace, _ := os.ReadFile(gitTrace)
	var asSSH bool
	for _, line := range strings.Split(string(trace), "\n") {
		if strings.Contains(line, "run_command:") && strings.Contains(line, "git-upload-pack") {
			asSSH = asSSH || strings.Contains(line, " -o SendEnv=GIT_PROTOCOL e2e ")
		}
	}
	if !asSSH {
		t.Errorf("git clone did not take hpncp ssh for OpenSSH's ssh (no -o SendEnv=GIT_PROTOCOL where it ran git-upload-pack):\n%s", trace)
	}
	if got, want := revParse(filepath.Join(dst, ".git"), "HEAD"), revParse(filepath.Join(src, ".git"), "HEAD"); got != want {
		t.Fatalf("the clone's HEAD is %s, the source's %s", got, want)
	}
	run("-C", dst, "fsck", "--full", "--strict")
	if got, err := os.ReadFile(filepath.Join(dst, "data", "blob.bin")); err != nil || sha256.Sum256(got) != blobSum {
		t.Fatalf("the clone's data/blob.bin: %d bytes, not the source's (%v)", len(got), err)
	}

	// git fetch of a new commit, in protocol v2: the variable the sshd
	// drops is set by the remote command itself. The trace of git's
	// packets shows the server spoke version 2.
	write(filepath.Join(src, "data", "more.bin"), 2<<20+7)
	run("-C", src, "add", "-A")
	run("-C", src, "commit", "-q", "-m", "more random bytes")
	packetTrace := filepath.Join(tmp, "packet-trace")
	env = append(env, "GIT_TRACE_PACKET="+packetTrace)
	out = run("-C", dst, "fetch", "--upload-pack", "GIT_PROTOCOL=version=2 git-upload-pack", "origin")
	env = env[:len(env)-1]
	striped("git fetch", out)
	if trace, _ := os.ReadFile(packetTrace); !bytes.Contains(trace, []byte("< version 2")) {
		t.Errorf("git fetch did not speak protocol v2; its packet trace:\n%s", trace)
	}
	if got, want := revParse(filepath.Join(dst, ".git"), "origin/main"), revParse(filepath.Join(src, ".git"), "HEAD"); got != want {
		t.Fatalf("the fetched origin/main is %s, the source's HEAD %s", got, want)
	}
	run("-C", dst, "merge", "-q", "--ff-only", "origin/main")
	run("-C", dst, "fsck", "--full", "--strict")

	// git push of the clone, with a commit of its own, to an empty bare
	// repository at the far end: the whole history goes up, on stdin.
	bare := filepath.Join(tmp, "bare.git")
	run("init", "-q", "--bare", "--initial-branch=main", bare)
	write(filepath.Join(dst, "data", "pushed.bin"), 3<<20+11)
	run("-C", dst, "add", "-A")
	run("-C", dst, "commit", "-q", "-m", "from the clone")
	out = run("-C", dst, "push", "e2e:"+bare, "main")
	striped("git push", out)
	if got, want := revParse(bare, "refs/heads/main"), revParse(filepath.Join(dst, ".git"), "HEAD"); got != want {
		t.Fatalf("the pushed main is %s, the clone's HEAD %s", got, want)
	}
	run("--git-dir", bare, "fsck", "--full", "--strict")
}
