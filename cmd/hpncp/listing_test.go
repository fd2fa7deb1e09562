//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// endlessDir makes the directory the hook lists on srv: it must stat as
// one.
func endlessDir(t *testing.T, srv *sshtest.Server) string {
	t.Helper()
	dir := filepath.Join(srv.Root, "endless")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hpncpProcess is hpncp running in a process of its own: the test
// binary, under the name testscript.Main runs hpncp for.
type hpncpProcess struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
}

func startHpncp(t *testing.T, args ...string) *hpncpProcess {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "hpncp")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	p := &hpncpProcess{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exited waits up to d for the process to end and reports whether it did.
func (p *hpncpProcess) exited(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// peakRSS is the most memory the ended process held, in MiB.
func (p *hpncpProcess) peakRSS() int64 {
	return p.cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss >> 10 // KiB on Linux
}

// raceDetector is set when the tests run under the race detector.
var raceDetector bool

// TestEndlessListing: a server that never ends a listing can neither
// hold hpncp past one Ctrl-C nor fill its memory. Before, the list grew
// without bound (5.6 GB seen) and neither SIGINT nor SIGTERM ended it.
func TestEndlessListing(t *testing.T) {
	slow(t)
	t.Parallel()
	maxRSS := int64(512) // MiB
	if raceDetector {
		maxRSS *= 4
	}
	var listings atomic.Int64 // listings of the endless directory begun
	srv := sshtest.Start(t, sshtest.Options{ListDir: sshtest.EndlessListing(func(p string) bool {
		if path.Base(p) != "endless" {
			return false
		}
		listings.Add(1)
		return true
	})})
	src := endlessDir(t, srv)

	t.Run("one SIGINT", func(t *testing.T) {
		dst := t.TempDir()
		before := listings.Load()
		p := startHpncp(t, "-F", srv.ConfigFile, "-q", "-r", "testhost:"+src, dst)
		// The signal goes once hpncp is listing: a signal before its
		// handler is set would end it as Go's default does.
		for deadline := time.Now().Add(time.Minute); listings.Load() == before; time.Sleep(10 * time.Millisecond) {
			if p.exited(0) || time.Now().After(deadline) {
				t.Fatalf("hpncp did not start listing; stderr:\n%s", p.stderr.String())
			}
		}
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		// Before the fix no signal ended it: the bound only has to be
		// far from a loaded machine's time to exit.
		sent := time.Now()
		if !p.exited(30 * time.Second) {
			t.Fatal("hpncp still runs 30 s after SIGINT")
		}
		t.Logf("ended %v after SIGINT, peak RSS %d MiB", time.Since(sent).Round(time.Millisecond), p.peakRSS())
		if code := p.cmd.ProcessState.ExitCode(); code != exitInterrupted {
			t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitInterrupted, p.stderr.String())
		}
		if rss := p.peakRSS(); rss > maxRSS {
			t.Errorf("peak RSS %d MiB, want at most %d", rss, maxRSS)
		}
	})

	t.Run("no signal", func(t *testing.T) {
		dst := t.TempDir()
		p := startHpncp(t, "-F", srv.ConfigFile, "-q", "-r", "testhost:"+src, dst)
		// A million names under -race take 20 s on a quiet machine and
		// over a minute on a loaded one; an endless list would grow until
		// the bound killed it.
		if !p.exited(5 * time.Minute) {
			t.Fatal("hpncp still lists after 5 minutes")
		}
		stderr := p.stderr.String()
		t.Logf("peak RSS %d MiB; stderr:\n%s", p.peakRSS(), stderr)
		want := "hpncp: error: read directory testhost:" + src + ": more than 1048576 entries"
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
		if code := p.cmd.ProcessState.ExitCode(); code != exitFailed {
			t.Errorf("exit code %d, want %d", code, exitFailed)
		}
		if rss := p.peakRSS(); rss > maxRSS {
			t.Errorf("peak RSS %d MiB, want at most %d", rss, maxRSS)
		}
	})
}

// TestSecondSignalEndsAtOnce: when a first signal cannot end the run,
// because it waits for a server that stopped answering where pkg/sftp
// takes no context (here the stat of the target), a second SIGINT or
// SIGTERM ends hpncp at once, with the exit code of an interrupted run.
func TestSecondSignalEndsAtOnce(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			stall := make(chan struct{})
			held := make(chan struct{}, 1)
			srv := sshtest.Start(t, sshtest.Options{Hold: func(p string) <-chan struct{} {
				if path.Base(p) == "held" {
					select {
					case held <- struct{}{}:
					default:
					}
					return stall
				}
				return nil
			}})
			t.Cleanup(func() { close(stall) })
			src := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startHpncp(t, "-F", srv.ConfigFile, "-q", src, "testhost:"+filepath.Join(srv.Root, "held"))
			// The signals go once hpncp waits for the held server.
			select {
			case <-held:
			case <-time.After(time.Minute):
				t.Fatalf("hpncp never reached the held stat; stderr:\n%s", p.stderr.String())
			}
			for i := range 2 {
				if err := p.cmd.Process.Signal(sig); err != nil {
					t.Fatalf("signal %d: %v", i+1, err)
				}
				if i == 0 && p.exited(500*time.Millisecond) {
					t.Fatalf("the first signal ended hpncp: the test no longer blocks it; stderr:\n%s", p.stderr.String())
				}
			}
			// Without the second signal's exit it would wait for the
			// server for ever: the bound is for a loaded machine.
			if !p.exited(30 * time.Second) {
				t.Fatal("hpncp still runs 30 s after the second signal")
			}
			if code := p.cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Errorf("exit code %d (%v), want %d", code, p.cmd.ProcessState, exitInterrupted)
			}
			if !strings.Contains(p.stderr.String(), "hpncp: interrupted") {
				t.Errorf("stderr lacks \"hpncp: interrupted\":\n%s", p.stderr.String())
			}
		})
	}
}
