package sshconn

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// resolveBoth resolves host with ssh -G and with the built-in parser and
// fails unless both agree; it returns the ssh -G answer.
func resolveBoth(t *testing.T, host string, o Options) *Config {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh not installed: only the fallback can run")
	}
	viaSSH, err := Resolve(context.Background(), host, o)
	if err != nil {
		t.Fatalf("Resolve via ssh -G: %v", err)
	}
	forceFallback = true
	defer func() { forceFallback = false }()
	viaGo, err := Resolve(context.Background(), host, o)
	if err != nil {
		t.Fatalf("Resolve via fallback: %v", err)
	}
	if viaSSH.Source != "ssh -G" || viaGo.Source == "ssh -G" {
		t.Fatalf("sources: %q and %q", viaSSH.Source, viaGo.Source)
	}
	a, b := viaSSH.clone(), viaGo.clone()
	a.Source, b.Source = "", ""
	if !reflect.DeepEqual(a, b) {
		t.Errorf("ssh -G and fallback disagree for %s:\n ssh -G:   %+v\n fallback: %+v", host, a, b)
	}
	return viaSSH
}

func TestResolveMatchesSSHG(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "/tmp/test-agent.sock")
	_, home := localUser()
	local, _ := localUser()
	dir := t.TempDir()
	cmdlineKey := filepath.Join(dir, "cmdline_key")
	if err := os.WriteFile(cmdlineKey, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config")
	body := `
Host web
  HostName %h.example.com
  User alice
  Port 2200
  IdentityFile ~/.ssh/web_%r
  IdentityFile /keys/%h_%p

Host *.internal
  User bob
  ProxyJump bastion:2222
  UserKnownHostsFile ~/kh_%n /tmp/kh2

Match host db1
  Port 5432
  HostKeyAlias dbalias

Host strict
  StrictHostKeyChecking yes
  HashKnownHosts yes
  IdentitiesOnly yes
  IdentityAgent none
  PasswordAuthentication no

Host *
  ServerAliveInterval 15
  ServerAliveCountMax 5
  ConnectTimeout 7
  StrictHostKeyChecking accept-new
  Ciphers aes256-ctr
`
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	defaults := func() []string {
		var out []string
		for _, d := range defaultIdentityFiles {
			p, _ := expandTilde(d)
			out = append(out, p)
		}
		return out
	}

	tests := []struct {
		name  string
		host  string
		o     Options
		check func(t *testing.T, c *Config)
	}{
		{"alias with tokens", "web", Options{}, func(t *testing.T, c *Config) {
			want := Config{HostName: "web.example.com", User: "alice", Port: 2200}
			if c.HostName != want.HostName || c.User != want.User || c.Port != want.Port {
				t.Errorf("got %s@%s:%d, want alice@web.example.com:2200", c.User, c.HostName, c.Port)
			}
			wantIDs := []string{filepath.Join(home, ".ssh/web_alice"), "/keys/web.example.com_2200"}
			if !slices.Equal(c.IdentityFiles, wantIDs) {
				t.Errorf("IdentityFiles = %q, want %q", c.IdentityFiles, wantIDs)
			}
			if c.ServerAliveInterval != 15*time.Second || c.ServerAliveCountMax != 5 || c.ConnectTimeout != 7*time.Second {
				t.Errorf("timers: %v %d %v", c.ServerAliveInterval, c.ServerAliveCountMax, c.ConnectTimeout)
			}
			if c.StrictHostKeyChecking != "accept-new" || !slices.Equal(c.Ciphers, []string{"aes256-ctr"}) {
				t.Errorf("strict %q ciphers %q", c.StrictHostKeyChecking, c.Ciphers)
			}
			if c.IdentityAgent != "/tmp/test-agent.sock" {
				t.Errorf("IdentityAgent = %q, want $SSH_AUTH_SOCK", c.IdentityAgent)
			}
		}},
		{"command line wins, -i first, first -o wins", "web", Options{
			Options:    []string{"Port=3000", "Port 4000", "User=carol", "Ciphers aes128-gcm@openssh.com"},
			Identities: []string{cmdlineKey},
		}, func(t *testing.T, c *Config) {
			if c.Port != 3000 || c.User != "carol" {
				t.Errorf("got %s:%d, want carol:3000", c.User, c.Port)
			}
			want := []string{cmdlineKey, filepath.Join(home, ".ssh/web_carol"), "/keys/web.example.com_3000"}
			if !slices.Equal(c.IdentityFiles, want) {
				t.Errorf("IdentityFiles = %q, want %q", c.IdentityFiles, want)
			}
			if !slices.Equal(c.Ciphers, []string{"aes128-gcm@openssh.com"}) {
				t.Errorf("Ciphers = %q", c.Ciphers)
			}
		}},
		{"flags", "web", Options{Port: 2022, User: "dave", Ciphers: "chacha20-poly1305@openssh.com",
			AddressFamily: "inet6", BatchMode: true, JumpHosts: "j1,u@j2:23"}, func(t *testing.T, c *Config) {
			if c.Port != 2022 || c.User != "dave" || c.AddressFamily != "inet6" || !c.BatchMode || c.ProxyJump != "j1,u@j2:23" {
				t.Errorf("got %+v", c)
			}
			if !slices.Equal(c.Ciphers, []string{"chacha20-poly1305@openssh.com"}) {
				t.Errorf("Ciphers = %q", c.Ciphers)
			}
		}},
		{"wildcard host", "x.internal", Options{}, func(t *testing.T, c *Config) {
			if c.User != "bob" || c.ProxyJump != "bastion:2222" || c.HostName != "x.internal" {
				t.Errorf("got %+v", c)
			}
			want := []string{filepath.Join(home, "kh_x.internal"), "/tmp/kh2"}
			if !slices.Equal(c.UserKnownHostsFiles, want) {
				t.Errorf("UserKnownHostsFiles = %q, want %q", c.UserKnownHostsFiles, want)
			}
		}},
		{"match host", "db1", Options{}, func(t *testing.T, c *Config) {
			if c.Port != 5432 || c.HostKeyAlias != "dbalias" {
				t.Errorf("got port %d alias %q", c.Port, c.HostKeyAlias)
			}
		}},
		{"booleans", "strict", Options{}, func(t *testing.T, c *Config) {
			if c.StrictHostKeyChecking != "yes" || !c.HashKnownHosts || !c.IdentitiesOnly ||
				c.IdentityAgent != "none" || c.PasswordAuthentication || !c.KbdInteractiveAuthentication {
				t.Errorf("got %+v", c)
			}
		}},
		{"defaults", "plain", Options{Options: []string{"StrictHostKeyChecking=off", "Ciphers=+aes128-cbc"}}, func(t *testing.T, c *Config) {
			if c.User != local || c.HostName != "plain" || c.Port != 22 {
				t.Errorf("got %s@%s:%d", c.User, c.HostName, c.Port)
			}
			if c.StrictHostKeyChecking != "no" {
				t.Errorf("StrictHostKeyChecking off = %q, want no", c.StrictHostKeyChecking)
			}
			if !slices.Equal(c.IdentityFiles, defaults()) {
				t.Errorf("IdentityFiles = %q", c.IdentityFiles)
			}
			wantKH := []string{filepath.Join(home, ".ssh/known_hosts"), filepath.Join(home, ".ssh/known_hosts2")}
			if !slices.Equal(c.UserKnownHostsFiles, wantKH) ||
				!slices.Equal(c.GlobalKnownHostsFiles, []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}) {
				t.Errorf("known hosts files %q %q", c.UserKnownHostsFiles, c.GlobalKnownHostsFiles)
			}
			if c.Ciphers[len(c.Ciphers)-1] != "aes128-cbc" || c.NumberOfPasswordPrompts != 3 {
				t.Errorf("Ciphers %q prompts %d", c.Ciphers, c.NumberOfPasswordPrompts)
			}
		}},
		{"user@host", "erin@web", Options{}, func(t *testing.T, c *Config) {
			if c.User != "erin" || c.Host != "web" {
				t.Errorf("got user %q host %q", c.User, c.Host)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.ConfigFile = config
			tt.check(t, resolveBoth(t, tt.host, tt.o))
		})
	}
}

func TestResolveNoConfigHasNoUserCiphers(t *testing.T) {
	c := resolveBoth(t, "somewhere", Options{ConfigFile: "none"})
	if c.Ciphers != nil {
		t.Errorf("Ciphers = %q, want nil (OpenSSH default, hpncp chooses)", c.Ciphers)
	}
	if c.StrictHostKeyChecking != "ask" || c.ServerAliveCountMax != 3 || c.ConnectTimeout != 0 || !c.PubkeyAuthentication {
		t.Errorf("defaults: %+v", c)
	}
}

func TestResolveErrors(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		forceFallback = fallback
		for _, tc := range []struct {
			host string
			o    Options
		}{
			{"h", Options{ConfigFile: "/nonexistent/config"}},
			{"-oProxyCommand=x", Options{ConfigFile: "none"}},
			{"h", Options{ConfigFile: "none", Options: []string{"StrictHostKeyChecking=maybe"}}},
		} {
			_, err := Resolve(context.Background(), tc.host, tc.o)
			e, ok := asError(err)
			if !ok {
				t.Errorf("fallback=%v Resolve(%q, %+v) = %v, want *Error", fallback, tc.host, tc.o, err)
				continue
			}
			if !strings.Contains(e.Error(), tc.host) {
				t.Errorf("error %q does not name host %q", e, tc.host)
			}
		}
	}
	forceFallback = false
}

func TestResolveWarnsMissingIdentity(t *testing.T) {
	var w logSink
	missing := filepath.Join(t.TempDir(), "nope")
	c, err := Resolve(context.Background(), "h", Options{ConfigFile: "none", Identities: []string{missing}, Warnf: w.f})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.String(), "Identity file "+missing+" not accessible") {
		t.Errorf("warnings = %q", w.String())
	}
	if slices.Contains(c.IdentityFiles, missing) {
		t.Errorf("missing -i file kept: %q", c.IdentityFiles)
	}
}

func TestTokensAndTimes(t *testing.T) {
	tok := tokens{'%': "%", 'h': "host", 'p': "22", 'r': "bob"}
	if got, err := tok.expand("%r@%h:%p 100%%"); err != nil || got != "bob@host:22 100%" {
		t.Errorf("expand = %q, %v", got, err)
	}
	if _, err := tok.expand("%Z"); err == nil {
		t.Error("unknown token accepted")
	}
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "1m30s": 90 * time.Second, "2h": 2 * time.Hour} {
		if got, err := parseTime(in); err != nil || got != want {
			t.Errorf("parseTime(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := parseTime("5x"); err == nil {
		t.Error("parseTime accepted 5x")
	}
	// OpenSSH refuses times past INT_MAX seconds; wrapped around, they
	// made a negative ConnectTimeout, which fails every dial at once.
	if got, err := parseTime("24855d"); err != nil || got != 24855*24*time.Hour {
		t.Errorf("parseTime(24855d) = %v, %v", got, err)
	}
	for _, in := range []string{"2147483647w", "24856d", "2147483647s1s", "9999999999"} {
		if got, err := parseTime(in); err == nil {
			t.Errorf("parseTime(%q) = %v, want an error: more than OpenSSH takes", in, got)
		}
	}
	for in, want := range map[string][2]string{"Port=22": {"Port", "22"}, "User bob": {"User", "bob"}, "Port = 2": {"Port", "2"}} {
		k, v, err := splitOption(in)
		if err != nil || k != want[0] || v != want[1] {
			t.Errorf("splitOption(%q) = %q %q %v", in, k, v, err)
		}
	}
}
