package sshconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// TestHostKeyChecking runs every known_hosts situation against every
// StrictHostKeyChecking value.
func TestHostKeyChecking(t *testing.T) {
	ca := newSigner(t)
	hostKey := newSigner(t)
	other := newSigner(t)

	type situation struct {
		name string
		// known returns the known_hosts lines for a server on display.
		known func(display string) []string
		cert  bool
	}
	situations := []situation{
		{"known", func(d string) []string { return []string{knownLine(d, hostKey.PublicKey())} }, false},
		{"hashed", func(d string) []string { return []string{knownLine(xknownhosts.HashHostname(d), hostKey.PublicKey())} }, false},
		{"cert-authority", func(d string) []string { return []string{knownLine("@cert-authority "+d, ca.PublicKey())} }, true},
		{"unknown", func(d string) []string { return []string{knownLine("elsewhere.example", hostKey.PublicKey())} }, false},
		{"changed", func(d string) []string {
			return []string{knownLine("elsewhere.example", other.PublicKey()), knownLine(d, other.PublicKey())}
		}, false},
		{"revoked", func(d string) []string {
			return []string{knownLine(d, hostKey.PublicKey()), knownLine("@revoked *", hostKey.PublicKey())}
		}, false},
		{"revoked CA", func(d string) []string {
			return []string{knownLine("@cert-authority "+d, ca.PublicKey()), knownLine("@revoked *", ca.PublicKey())}
		}, true},
	}
	type mode struct {
		strict string
		// prompter answers "ask"; nil means no terminal.
		answer *string
	}
	yes, no := "yes", "no"
	modes := []mode{{"yes", nil}, {"accept-new", nil}, {"no", nil}, {"ask", &yes}, {"ask", &no}, {"ask", nil}}

	// want is "ok", "added" (ok and written to known_hosts) or "refused".
	want := func(sit string, m mode) string {
		switch sit {
		case "known", "hashed", "cert-authority":
			return "ok"
		case "revoked", "revoked CA":
			return "refused"
		case "changed":
			if m.strict == "no" {
				return "ok"
			}
			return "refused"
		}
		switch {
		case m.strict == "accept-new" || m.strict == "no":
			return "added"
		case m.strict == "ask" && m.answer != nil && *m.answer == "yes":
			return "added"
		}
		return "refused"
	}

	for _, sit := range situations {
		for _, m := range modes {
			name := fmt.Sprintf("%s/%s", sit.name, m.strict)
			if m.strict == "ask" {
				name += "/no-terminal"
				if m.answer != nil {
					name = fmt.Sprintf("%s/%s/answer-%s", sit.name, m.strict, *m.answer)
				}
			}
			t.Run(name, func(t *testing.T) {
				opts := []serverOption{withHostKey(hostKey)}
				if sit.cert {
					opts = append(opts, withHostCert(ca, "127.0.0.1"))
				}
				srv := newTestServer(t, opts...)
				e := newEnv(t)
				display := fmt.Sprintf("[127.0.0.1]:%d", srv.port)
				e.writeKnownHosts(sit.known(display)...)
				e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking "+m.strict))
				var p *fakePrompter
				o := e.options(nil)
				if m.answer != nil {
					p = &fakePrompter{lines: []string{*m.answer}}
					o.Prompter = p
				}
				before, _ := os.ReadFile(e.knownHosts)

				c, err := NewDialer(o).Dial(context.Background(), "target")
				after, _ := os.ReadFile(e.knownHosts)
				got := "ok"
				switch {
				case err != nil:
					got = "refused"
					if _, ok := asError(err); !ok {
						t.Errorf("error %v is not *Error", err)
					}
					if !strings.Contains(err.Error(), "host key verification failed") {
						t.Errorf("error %q does not say host key verification failed", err)
					}
				case string(after) != string(before):
					got = "added"
					c.Close()
				default:
					c.Close()
				}
				if w := want(sit.name, m); got != w {
					t.Fatalf("got %s (err %v), want %s\nlog:\n%s\nwarnings:\n%s", got, err, w, e.logs.String(), e.warnings.String())
				}

				switch {
				case sit.name == "changed":
					w := e.warnings.String()
					for _, s := range []string{"WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!",
						ssh.FingerprintSHA256(hostKey.PublicKey()),
						fmt.Sprintf("Offending ED25519 key in %s:2", e.knownHosts)} {
						if !strings.Contains(w, s) {
							t.Errorf("warning lacks %q:\n%s", s, w)
						}
					}
					if err != nil {
						he, _ := asError(err)
						if !strings.Contains(he.Hint, "ssh-keygen") || !strings.Contains(he.Hint, "-R \""+display+"\"") {
							t.Errorf("hint %q does not name ssh-keygen -R %s", he.Hint, display)
						}
					}
				case got == "added":
					line := knownLine(display, hostKey.PublicKey())
					if !strings.HasSuffix(string(after), line+"\n") {
						t.Errorf("known_hosts does not end with %q:\n%s", line, after)
					}
					if !strings.Contains(e.warnings.String(), "Permanently added '"+display+"' (ED25519)") {
						t.Errorf("warnings = %q", e.warnings.String())
					}
				case sit.name == "unknown" && err != nil && p == nil:
					he, _ := asError(err)
					if !strings.Contains(err.Error(), ssh.FingerprintSHA256(hostKey.PublicKey())) ||
						!strings.Contains(he.Hint, "ssh-keyscan") || !strings.Contains(he.Hint, "accept-new") {
						t.Errorf("unknown host error %q hint %q", err, he.Hint)
					}
				}
				if p != nil && sit.name == "unknown" {
					asked := strings.Join(p.prompts(), "")
					for _, s := range []string{
						fmt.Sprintf("The authenticity of host '%s ([127.0.0.1]:%d)' can't be established.", display, srv.port),
						"ED25519 key fingerprint is " + ssh.FingerprintSHA256(hostKey.PublicKey()) + ".",
						"Are you sure you want to continue connecting (yes/no/[fingerprint])? ",
					} {
						if !strings.Contains(asked, s) {
							t.Errorf("prompt lacks %q:\n%s", s, asked)
						}
					}
				}
				if p != nil && sit.name != "unknown" && len(p.prompts()) > 0 {
					t.Errorf("asked about a host that is not new: %q", p.prompts())
				}
			})
		}
	}
}

// TestAcceptNewThenStrict: what accept-new writes, plain or hashed, in a
// directory it creates, a later strict dial accepts.
func TestAcceptNewThenStrict(t *testing.T) {
	for _, hash := range []string{"no", "yes"} {
		t.Run("hash="+hash, func(t *testing.T) {
			srv := newTestServer(t)
			e := newEnv(t)
			e.knownHosts = filepath.Join(e.dir, "sub", "dir", "known_hosts")
			e.writeConfig(targetBlock("target", srv, "HashKnownHosts "+hash))

			c, err := NewDialer(e.options(nil, "StrictHostKeyChecking=accept-new")).Dial(context.Background(), "target")
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			data, err := os.ReadFile(e.knownHosts)
			if err != nil {
				t.Fatal(err)
			}
			if hashed := strings.HasPrefix(string(data), "|1|"); hashed != (hash == "yes") {
				t.Errorf("HashKnownHosts %s wrote %q", hash, data)
			}
			for path, mode := range map[string]os.FileMode{e.knownHosts: 0o600, filepath.Dir(e.knownHosts): 0o700} {
				if st, err := os.Stat(path); err != nil || st.Mode().Perm() != mode {
					t.Errorf("%s: mode %v, want %v (%v)", path, st.Mode().Perm(), mode, err)
				}
			}

			c, err = NewDialer(e.options(nil, "StrictHostKeyChecking=yes")).Dial(context.Background(), "target")
			if err != nil {
				t.Fatalf("strict dial after accept-new: %v", err)
			}
			c.Close()
		})
	}
}

// TestAskAcceptsFingerprint: the fingerprint typed in full is a yes, and a
// second dial of the same Dialer does not ask again.
func TestAskAcceptsFingerprint(t *testing.T) {
	srv := newTestServer(t)
	e := newEnv(t)
	e.knownHosts = "/dev/null"
	e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking ask"))
	p := &fakePrompter{lines: []string{"maybe", ssh.FingerprintSHA256(srv.hostKey.PublicKey())}}
	d := NewDialer(e.options(p))
	for i := 0; i < 2; i++ {
		c, err := d.Dial(context.Background(), "target")
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		c.Close()
	}
	asked := p.prompts()
	if len(asked) != 2 || !strings.Contains(asked[1], "Please type 'yes', 'no' or the fingerprint") {
		t.Errorf("prompts = %q", asked)
	}
}

// TestChangedKeyNoDisablesPasswords: with StrictHostKeyChecking=no a
// changed key lets the connection go on, but no password is sent, on the
// first connection or a later one presenting the same key.
func TestChangedKeyNoDisablesPasswords(t *testing.T) {
	srv := newTestServer(t, withPassword("secret"), withKbd("secret"))
	e := newEnv(t)
	e.writeKnownHosts(knownLine(fmt.Sprintf("[127.0.0.1]:%d", srv.port), newSigner(t).PublicKey()))
	e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking no"))
	p := &fakePrompter{passwords: []string{"secret", "secret"}}
	d := NewDialer(e.options(p))
	for i := range 2 {
		_, err := d.Dial(context.Background(), "target")
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("dial %d: err = %v, want permission denied", i, err)
		}
	}
	if len(p.prompts()) != 0 || srv.passwordTries.Load() != 0 || srv.kbdTries.Load() != 0 {
		t.Errorf("password sent after a changed host key: prompts %q, server saw %d passwords",
			p.prompts(), srv.passwordTries.Load())
	}
	if !strings.Contains(e.warnings.String(), "Password authentication is disabled") {
		t.Errorf("warnings = %q", e.warnings.String())
	}
}

// TestHostKeyAlias: the alias is the known_hosts name, without the port.
func TestHostKeyAlias(t *testing.T) {
	srv := newTestServer(t)
	e := newEnv(t)
	e.writeKnownHosts(knownLine("myalias", srv.hostKey.PublicKey()))
	e.writeConfig(targetBlock("target", srv, "HostKeyAlias myalias", "StrictHostKeyChecking yes"))
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestHostKeyAlgorithmsFollowKnownHosts: a host known by its ECDSA key is
// asked for ECDSA even though ED25519 comes first by default.
func TestHostKeyAlgorithmsFollowKnownHosts(t *testing.T) {
	kh := &knownHosts{lookup: "h:22", display: "h", caLines: map[string]bool{}}
	dir := t.TempDir()
	f := filepath.Join(dir, "kh")
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&ek.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(knownLine("h", pub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kh.db = loadKnownHosts(&Config{HostName: "h", Port: 22, UserKnownHostsFiles: []string{f}}, &Options{}).db
	algos := kh.hostKeyAlgorithms([]string{"ssh-ed25519", "ecdsa-sha2-nistp256", "bogus"})
	if len(algos) != 2 || algos[0] != "ecdsa-sha2-nistp256" || algos[1] != "ssh-ed25519" {
		t.Errorf("algorithms = %q", algos)
	}
}
