package sshdtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenSSHToolsAgainstSSHD is the harness's own end-to-end proof: the
// stock ssh, sftp and scp clients work with ConfigFile, and Stop ends the
// sshd it started.
func TestOpenSSHToolsAgainstSSHD(t *testing.T) {
	s := Start(t, Options{})
	sshBin := LookTool(t, "ssh")
	sftpBin := LookTool(t, "sftp")
	scpBin := LookTool(t, "scp")

	run(t, nil, sshBin, "-F", s.ConfigFile, "e2e", "true")
	// A command's shell is a nested one (SHLVL set), which does not read
	// the account's ~/.bashrc, where sshd has SetEnv.
	if cfg, err := os.ReadFile(filepath.Join(s.Dir, "sshd_config")); err != nil {
		t.Fatal(err)
	} else if bytes.Contains(cfg, []byte("\nSetEnv SHLVL=1\n")) {
		if out := strings.TrimSpace(run(t, nil, sshBin, "-F", s.ConfigFile, "e2e", "echo $SHLVL")); out == "" {
			t.Error("a command's shell has no SHLVL: a bash account's shell reads its ~/.bashrc")
		}
	}

	probe := filepath.Join(s.Dir, "probe.txt")
	if err := os.WriteFile(probe, []byte("probe"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, strings.NewReader("ls -1 "+s.Dir+"\n"), sftpBin, "-F", s.ConfigFile, "-b", "-", "e2e")
	if !strings.Contains(out, "probe.txt") {
		t.Errorf("sftp ls of %s does not list probe.txt:\n%s", s.Dir, out)
	}

	local := t.TempDir()
	want := bytes.Repeat([]byte("hpncp e2e\n"), 10000)
	src := filepath.Join(local, "src.bin")
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(s.Dir, "remote.bin")
	back := filepath.Join(local, "back.bin")
	run(t, nil, scpBin, "-F", s.ConfigFile, src, "e2e:"+remote)
	run(t, nil, scpBin, "-F", s.ConfigFile, "e2e:"+remote, back)
	for _, p := range []string{remote, back} {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the %d bytes sent", p, len(got), len(want))
		}
	}

	pid := s.PID
	s.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("sshd pid %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if err := exec.Command(sshBin, "-F", s.ConfigFile, "-o", "ConnectTimeout=5", "e2e", "true").Run(); err == nil {
		t.Error("ssh still connects after Stop")
	}
}

func TestExtraConfigTakesPrecedence(t *testing.T) {
	s := Start(t, Options{ExtraConfig: []string{
		"MaxSessions 3",
		"Match User nobody-at-all",
		"\tMaxSessions 1",
	}})
	cfg, err := os.ReadFile(filepath.Join(s.Dir, "sshd_config"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(cfg)
	if strings.Contains(text, "MaxSessions 64") {
		t.Errorf("default MaxSessions kept although ExtraConfig sets it:\n%s", text)
	}
	if i, j := strings.Index(text, "MaxSessions 3"), strings.Index(text, "LogLevel VERBOSE"); i < 0 || j < 0 || i > j {
		t.Errorf("ExtraConfig line not placed before the defaults:\n%s", text)
	}
	if !strings.HasSuffix(strings.TrimSpace(text), "MaxSessions 1") {
		t.Errorf("Match block not placed last:\n%s", text)
	}
	sshBin := LookTool(t, "ssh")
	out := run(t, nil, sshBin, "-F", s.ConfigFile, "-G", "e2e")
	if !strings.Contains(out, "port "+strconv.Itoa(s.Port)) {
		t.Errorf("ssh -G e2e does not resolve to port %d:\n%s", s.Port, out)
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{{"require", true}, {"", false}, {"1", false}} {
		t.Setenv("HPNCP_E2E", tc.env)
		if got := Required(); got != tc.want {
			t.Errorf("HPNCP_E2E=%q: Required() = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// recorder stands in for a test to observe whether a harness call skips or
// fails it.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestLookToolMissingSkipsUnlessRequired(t *testing.T) {
	const tool = "hpncp-no-such-tool"
	t.Setenv("HPNCP_E2E", "")
	r := &recorder{TB: t}
	LookTool(r, tool)
	if !strings.HasPrefix(r.skipped, SkipMarker) || !strings.Contains(r.skipped, tool) || r.failed != "" {
		t.Errorf("without HPNCP_E2E: skipped %q, failed %q; want a skip starting with %q naming %s", r.skipped, r.failed, SkipMarker, tool)
	}

	t.Setenv("HPNCP_E2E", "require")
	r = &recorder{TB: t}
	LookTool(r, tool)
	if r.skipped != "" || !strings.Contains(r.failed, tool) {
		t.Errorf("with HPNCP_E2E=require: skipped %q, failed %q; want a failure naming %s", r.skipped, r.failed, tool)
	}
}

func run(t *testing.T, stdin *strings.Reader, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s (%v)", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return string(out)
}

// TestCIKnowsSkipMarker keeps .ci/run's guard against skipped end-to-end
// tests in step with the message this package skips with.
func TestCIKnowsSkipMarker(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "marker='"+SkipMarker+"'") {
		t.Errorf(".ci/run does not grep for %q", SkipMarker)
	}
}
