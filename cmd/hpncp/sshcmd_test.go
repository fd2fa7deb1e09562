package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/sshconn"
)

func TestParseSSHArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want sshOptions
	}{
		{"rsync", []string{"-l", "alice", "host", "rsync", "--server", "-logDtpre.iLsfxCIvu", ".", "dst/"},
			sshOptions{User: "alice", Host: "host", Command: []string{"rsync", "--server", "-logDtpre.iLsfxCIvu", ".", "dst/"}}},
		{"git", []string{"-o", "SendEnv=GIT_PROTOCOL", "-p", "2222", "host", "git-upload-pack '/srv/repo.git'"},
			sshOptions{SSHOptions: []string{"SendEnv=GIT_PROTOCOL"}, Port: 2222, Host: "host",
				Command: []string{"git-upload-pack '/srv/repo.git'"}}},
		{"clustered and attached values", []string{"-4qTp2222", "-oBatchMode=yes", "-lroot", "-ik1", "-i", "k2", "h"},
			sshOptions{AddressFamily: "inet", Quiet: true, Port: 2222, SSHOptions: []string{"BatchMode=yes"},
				User: "root", Identities: []string{"k1", "k2"}, Host: "h"}},
		{"flags after the host, then the command", []string{"h", "-p", "22", "-v", "ls", "-l", "-p"},
			sshOptions{Host: "h", Port: 22, Verbose: true, Command: []string{"ls", "-l", "-p"}}},
		{"-- after the host", []string{"h", "--", "-p", "22"},
			sshOptions{Host: "h", Command: []string{"-p", "22"}}},
		{"-- before the host ends the flags for good", []string{"-v", "--", "h", "-p", "22"},
			sshOptions{Verbose: true, Host: "h", Command: []string{"-p", "22"}}},
		{"user@host, last @", []string{"a@b@host", "true"},
			sshOptions{User: "a@b", Host: "host", Command: []string{"true"}}},
		{"the first -l and -p win, as in ssh", []string{"-l", "x", "-p", "1", "-l", "y", "-p", "2", "z@h"},
			sshOptions{User: "x", Port: 1, Host: "h"}},
		{"ssh URI", []string{"ssh://u@[::1]:2200"},
			sshOptions{User: "u", Port: 2200, Host: "::1"}},
		{"accepted no-ops and modes", []string{"-TxakC2", "-e", "none", "-n", "-s", "h", "sftp"},
			sshOptions{Compression: true, NullStdin: true, Subsystem: true, Host: "h", Command: []string{"sftp"}}},
		{"last of -4 and -6 wins", []string{"-4", "-6", "-N", "-J", "j1,j2", "-c", "aes128-ctr", "-F", "cfg", "h"},
			sshOptions{AddressFamily: "inet6", NoCommand: true, Jump: "j1,j2", Cipher: "aes128-ctr", ConfigFile: "cfg", Host: "h"}},
		{"-G", []string{"-G", "h"}, sshOptions{PrintConfig: true, Host: "h"}},
		{"--help", []string{"--help"}, sshOptions{Help: true}},
		{"-V", []string{"-V"}, sshOptions{Version: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSSHArgs(tt.args)
			if err != nil {
				t.Fatalf("parseSSHArgs(%q): %v", tt.args, err)
			}
			if len(got.Command) == 0 {
				got.Command = nil
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("parseSSHArgs(%q)\n got %+v\nwant %+v", tt.args, *got, tt.want)
			}
		})
	}
}

func TestParseSSHArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-t", "h"}, "ssh flag -t (pseudo-terminal allocation) is not supported"},
		{[]string{"-L", "80:x:80", "h"}, "ssh flag -L (local port forwarding) is not supported"},
		{[]string{"h", "-A", "ls"}, "ssh flag -A (agent forwarding) is not supported"},
		{[]string{"-Z", "h"}, "unknown ssh flag -Z"},
		{[]string{"--verbose", "h"}, "unknown ssh flag --verbose"},
		{[]string{"h", "-p"}, "ssh flag -p needs a value"},
		{[]string{"-p", "http", "h"}, "-p http: not a port number"},
		{[]string{"-p", "70000", "h"}, "-p 70000: not a port number"},
		{[]string{"-v"}, "missing destination"},
		{[]string{}, "missing destination"},
		{[]string{"@h"}, `invalid destination "@h"`},
		{[]string{"ssh://h/path"}, `invalid destination "ssh://h/path"`},
		{[]string{"-N", "h", "ls"}, "-N runs no remote command"},
		{[]string{"-s", "h"}, "-s needs a subsystem name"},
		{[]string{"-J", "a", "-J", "b", "h"}, "only one -J"},
	}
	for _, tt := range tests {
		_, err := parseSSHArgs(tt.args)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, tt.want) {
			t.Errorf("parseSSHArgs(%q) = %v, want a usage error with %q", tt.args, err, tt.want)
		}
	}
}

// execServer is an in-process server whose commands are: "cat" (stdin to
// stdout), "count" (reads stdin to its end, prints the byte count),
// "fail" (a line on stderr, status 3), "hold" (reports start, reads stdin
// to its end) and anything else, echoed back as the command line.
func execServer(t *testing.T) (*sshtest.Server, <-chan struct{}) {
	started := make(chan struct{}, 10)
	srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		switch cmd {
		case "cat":
			if _, err := io.Copy(stdout, stdin); err != nil {
				return 1
			}
		case "count":
			n, err := io.Copy(io.Discard, stdin)
			if err != nil {
				return 1
			}
			fmt.Fprintf(stdout, "%d\n", n)
		case "fail":
			fmt.Fprintln(stderr, "oops")
			return 3
		case "hold":
			started <- struct{}{}
			io.Copy(io.Discard, stdin)
		default:
			fmt.Fprintf(stdout, "command: %s\n", cmd)
		}
		return 0
	}})
	return srv, started
}

func runSSHArgs(ctx context.Context, argv0 string, args []string, stdin io.Reader) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = run(ctx, append([]string{argv0}, args...), stdin, &out, &errb)
	return out.String(), errb.String(), err
}

func TestSSHSession(t *testing.T) {
	srv, _ := execServer(t)
	ctx := context.Background()
	ssh := []string{"ssh", "-F", srv.ConfigFile, "testhost"}

	t.Run("stdin to the command, its stdout back", func(t *testing.T) {
		data := make([]byte, 5<<20+123)
		rand.New(rand.NewSource(1)).Read(data)
		out, _, err := runSSHArgs(ctx, "hpncp", append(ssh, "cat"), bytes.NewReader(data))
		if err != nil || out != string(data) {
			t.Errorf("cat of %d bytes: got %d bytes back, err %v", len(data), len(out), err)
		}
	})
	t.Run("stdin EOF ends the command's input", func(t *testing.T) {
		out, _, err := runSSHArgs(ctx, "hpncp", append(ssh, "count"), strings.NewReader("12345"))
		if err != nil || out != "5\n" {
			t.Errorf("count: %q, %v; want 5", out, err)
		}
	})
	t.Run("-n gives the command no input", func(t *testing.T) {
		out, _, err := runSSHArgs(ctx, "hpncp", []string{"ssh", "-n", "-F", srv.ConfigFile, "testhost", "count"}, strings.NewReader("12345"))
		if err != nil || out != "0\n" {
			t.Errorf("count -n: %q, %v; want 0", out, err)
		}
	})
	t.Run("words joined with spaces", func(t *testing.T) {
		out, _, err := runSSHArgs(ctx, "hpncp", append(ssh, "echo", "a b", "'c'"), nil)
		if err != nil || out != "command: echo a b 'c'\n" {
			t.Errorf("got %q, %v", out, err)
		}
	})
	t.Run("stderr apart and the exit status", func(t *testing.T) {
		out, errOut, err := runSSHArgs(ctx, "hpncp", append(ssh, "fail"), nil)
		var re *job.RemoteExit
		if !errors.As(err, &re) || re.ExitCode() != 3 {
			t.Fatalf("fail: err %v, want remote exit status 3", err)
		}
		if out != "" || errOut != "oops\n" {
			t.Errorf("stdout %q stderr %q; want only oops on stderr", out, errOut)
		}
	})
	t.Run("as hpnssh", func(t *testing.T) {
		out, _, err := runSSHArgs(ctx, "/usr/local/bin/hpnssh", []string{"-F", srv.ConfigFile, "testhost", "count"}, strings.NewReader("abc"))
		if err != nil || out != "3\n" {
			t.Errorf("hpnssh count: %q, %v; want 3", out, err)
		}
	})
	t.Run("refused subsystem is a connection error", func(t *testing.T) {
		_, _, err := runSSHArgs(ctx, "hpncp", []string{"ssh", "-F", srv.ConfigFile, "-s", "testhost", "nosuch"}, nil)
		var ce *sshconn.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "start subsystem nosuch on testhost") {
			t.Errorf("got %v, want an sshconn error starting the subsystem", err)
		}
		if code := reportError(io.Discard, err); code != exitConnection {
			t.Errorf("exit code %d, want %d", code, exitConnection)
		}
	})
}

func TestSSHConnectionLostIs255(t *testing.T) {
	srv, started := execServer(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		<-started
		srv.KillConnections()
	}()
	_, _, err := runSSHArgs(context.Background(), "hpncp", []string{"ssh", "-F", srv.ConfigFile, "testhost", "hold"}, pr)
	var ce *sshconn.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want an sshconn error", err)
	}
	if code := reportError(io.Discard, err); code != exitConnection {
		t.Errorf("exit code %d, want %d", code, exitConnection)
	}
}

func TestSSHInterrupted(t *testing.T) {
	srv, started := execServer(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	done := make(chan error, 1)
	go func() {
		_, _, err := runSSHArgs(ctx, "hpncp", []string{"ssh", "-F", srv.ConfigFile, "testhost", "hold"}, pr)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("hpncp ssh still running 20s after the interrupt")
	}
}

// TestSSHExitStatusE2E checks against OpenSSH's sshd the statuses it
// reports its own way: exit-status, and exit-signal for a killed command.
func TestSSHExitStatusE2E(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{})
	for _, tt := range []struct {
		cmd  string
		want int
	}{
		{"exit 3", 3},
		{"kill -TERM $$", 128 + 15},
	} {
		_, _, err := runSSHArgs(context.Background(), "hpncp", []string{"ssh", "-F", srv.ConfigFile, "e2e", tt.cmd}, nil)
		var re *job.RemoteExit
		if !errors.As(err, &re) || re.ExitCode() != tt.want {
			t.Errorf("%q: %v, want exit code %d", tt.cmd, err, tt.want)
		}
	}
}
