//go:build linux

package transfer_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// oracleDiffers are the runs in which OpenSSH's scp does otherwise than
// the table, by protocol, direction and case, with the reason the table
// holds to its own answer.
var oracleDiffers = map[string]string{
	"scp/up/several sources to missing name": "OpenSSH 9.2's scp over SFTP makes the missing remote target a directory " +
		"and copies into it; scp -O, and both protocols downloading, refuse, as does hpncp",
}

// layoutOracle runs OpenSSH's scp, over SFTP and over the legacy
// protocol (-O), both ways, on every layout case: the table the ends are
// held to is what scp does, not what we think it does.
func layoutOracle(t *testing.T, s *sshdtest.Server) {
	scp := sshdtest.LookTool(t, "scp")
	control := controlMaster(t, s)
	for _, proto := range []string{"scp", "scp -O"} {
		for _, up := range []bool{true, false} {
			for _, lc := range layoutCases {
				t.Run(proto+"/"+direction(up)+"/"+lc.name, func(t *testing.T) {
					src, dst := t.TempDir(), t.TempDir()
					mkTree(t, src, layoutSource...)
					mkTree(t, dst, lc.target...)
					before := listTree(t, dst)
					args := []string{"-F", s.ConfigFile, "-q", "-o", "ControlMaster=no", "-o", "ControlPath=" + control}
					if proto == "scp -O" {
						args = append(args, "-O")
					}
					if lc.recursive {
						args = append(args, "-r")
					}
					remote := func(p string) string { return "e2e:" + p }
					local := func(p string) string { return p }
					from, to := remote, local
					if up {
						from, to = local, remote
					}
					for _, p := range under(src, lc.srcs...) {
						args = append(args, from(p))
					}
					args = append(args, to(dst+"/"+lc.to))
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					out, err := exec.CommandContext(ctx, scp, args...).CombinedOutput()
					got := listTree(t, dst)
					var p problems
					switch {
					case lc.want == nil && err == nil:
						p.add("%s %q succeeded; the table says it is refused", proto, args)
					case lc.want == nil && !slices.Equal(got, before):
						p.add("%s changed the target root of a refused copy:\n got %q\nwant %q", proto, got, before)
					case lc.want != nil && err != nil:
						p.add("%s %q: %v\n%s", proto, args, err, out)
					case lc.want != nil && !slices.Equal(got, lc.want):
						p.add("%s leaves the target root\n got %q\n the table says %q", proto, got, lc.want)
					}
					why, marked := oracleDiffers[proto+"/"+direction(up)+"/"+lc.name]
					switch {
					case !marked:
						for _, q := range p {
							t.Error(q)
						}
					case len(p) == 0:
						t.Errorf("marked as differing from the table (%s) but agrees: remove the mark", why)
					default:
						t.Logf("documented difference: %s:\n%s", why, strings.Join(p, "\n"))
					}
				})
			}
		}
	}
}

// controlMaster starts an ssh master connection to s for the scp runs
// to share, as each connection of their own costs sshd a process and a
// key exchange, and stops it by its PID when the test ends. It returns
// the control socket.
func controlMaster(t *testing.T, s *sshdtest.Server) string {
	ssh := sshdtest.LookTool(t, "ssh")
	// A socket's path must fit in 108 bytes; test directories may not.
	dir, err := os.MkdirTemp("", "cm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	cmd := exec.Command(ssh, "-F", s.ConfigFile, "-M", "-S", sock, "-N", "-o", "ControlPersist=no", "e2e")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ssh master: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		select {
		case err := <-exited:
			t.Fatalf("ssh master exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("ssh master made no control socket within 30s")
		}
	}
}
