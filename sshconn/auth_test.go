package sshconn

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"
)

// authEnv is a server whose host key is known and a client environment
// for it; blocks are extra lines for the "target" Host block.
func authEnv(t *testing.T, srv *testServer, lines ...string) *env {
	t.Helper()
	e := newEnv(t)
	e.writeKnownHosts(knownLine(fmt.Sprintf("[127.0.0.1]:%d", srv.port), srv.hostKey.PublicKey()))
	e.writeConfig(targetBlock("target", srv, append([]string{"StrictHostKeyChecking yes"}, lines...)...))
	return e
}

func dialTwice(t *testing.T, d *Dialer) {
	t.Helper()
	for i := 0; i < 2; i++ {
		c, err := d.Dial(context.Background(), "target")
		if err != nil {
			t.Fatalf("dial %d: %v", i+1, err)
		}
		c.Close()
	}
}

func TestAuthIdentityFiles(t *testing.T) {
	for _, kind := range []string{"ed25519", "rsa"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			pub := writeKey(t, dir, "id_"+kind, kind, false)
			srv := newTestServer(t, withKeys(pub))
			e := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id_"+kind))
			c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
			if err != nil {
				t.Fatalf("%v\n%s", err, e.logs.String())
			}
			defer c.Close()
			if c.User() != "tester" {
				t.Errorf("user = %q", c.User())
			}
			if !strings.Contains(e.logs.String(), "authenticated to tester@127.0.0.1 using publickey "+filepath.Join(dir, "id_"+kind)) {
				t.Errorf("log does not say which key worked:\n%s", e.logs.String())
			}
		})
	}
}

// TestAuthSkipsKeysInOrder: a key the server refuses is offered first, a
// missing -i is warned about, and the next key is used.
func TestAuthSkipsKeysInOrder(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "refused", "ed25519", false)
	good := writeKey(t, dir, "good", "ed25519", false)
	srv := newTestServer(t, withKeys(good))
	e := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "good"))
	o := e.options(nil)
	o.Identities = []string{filepath.Join(dir, "refused"), filepath.Join(dir, "missing")}
	c, err := NewDialer(o).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if srv.pubkeyOffers.Load() < 2 {
		t.Errorf("server saw %d offers, want the refused key first", srv.pubkeyOffers.Load())
	}
	if !strings.Contains(e.warnings.String(), "missing not accessible") {
		t.Errorf("warnings = %q", e.warnings.String())
	}
	log := e.logs.String()
	if strings.Index(log, "refused") > strings.Index(log, "good ED25519") {
		t.Errorf("-i key not offered before the config one:\n%s", log)
	}
}

func TestAuthEncryptedKey(t *testing.T) {
	tests := []struct {
		name string
		// write writes dir/id_enc and returns its public key.
		write   func(t *testing.T, dir string) ssh.PublicKey
		answers []string
		prompts []string
	}{
		{"openssh format", func(t *testing.T, dir string) ssh.PublicKey {
			return writeEncryptedKey(t, dir, "id_enc")
		}, []string{"hunter2"}, []string{"Enter passphrase for key"}},
		{"pem with .pub, wrong passphrase first", func(t *testing.T, dir string) ssh.PublicKey {
			return writePEMKey(t, dir, "id_enc", true)
		}, []string{"wrong", "hunter2"}, []string{"Enter passphrase for key", "Bad passphrase, try again"}},
		{"pem without .pub", func(t *testing.T, dir string) ssh.PublicKey {
			return writePEMKey(t, dir, "id_enc", false)
		}, []string{"hunter2"}, []string{"Enter passphrase for key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := newTestServer(t, withKeys(tt.write(t, dir)))
			e := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id_enc"))
			p := &fakePrompter{passwords: tt.answers}
			dialTwice(t, NewDialer(e.options(p)))
			asked := p.prompts()
			if len(asked) != len(tt.prompts) {
				t.Fatalf("prompts over two dials = %q, want %q", asked, tt.prompts)
			}
			for i, want := range tt.prompts {
				if !strings.HasPrefix(asked[i], want) || !strings.Contains(asked[i], filepath.Join(dir, "id_enc")) {
					t.Errorf("prompt %d = %q, want %q... naming the key", i, asked[i], want)
				}
			}
			if strings.Contains(e.logs.String(), "hunter2") {
				t.Error("passphrase in the log")
			}
		})
	}
}

// TestAuthEncryptedKeyNotAcceptedIsNotDecrypted: the public half is offered
// first, so a key the server refuses costs no passphrase prompt.
func TestAuthEncryptedKeyNotAcceptedIsNotDecrypted(t *testing.T) {
	dir := t.TempDir()
	writePEMKey(t, dir, "id_enc", true)
	good := writeKey(t, dir, "id_good", "ed25519", false)
	srv := newTestServer(t, withKeys(good))
	e := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id_enc"), "IdentityFile "+filepath.Join(dir, "id_good"))
	p := &fakePrompter{passwords: []string{"hunter2"}}
	c, err := NewDialer(e.options(p)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if len(p.prompts()) != 0 {
		t.Errorf("asked %q for a key the server refused", p.prompts())
	}
}

func TestAuthPassword(t *testing.T) {
	srv := newTestServer(t, withPassword("s3cret"))
	e := authEnv(t, srv)
	p := &fakePrompter{passwords: []string{"nope", "s3cret"}}
	dialTwice(t, NewDialer(e.options(p)))
	asked := p.prompts()
	if len(asked) != 2 || asked[0] != "tester@127.0.0.1's password: " ||
		!strings.HasPrefix(asked[1], "Permission denied, please try again.") {
		t.Errorf("prompts = %q", asked)
	}
	if got := srv.passwordTries.Load(); got != 3 {
		t.Errorf("server saw %d passwords, want 3 (wrong, right, remembered)", got)
	}
	if strings.Contains(e.logs.String(), "s3cret") || strings.Contains(e.warnings.String(), "s3cret") {
		t.Error("password in the log")
	}
}

func TestAuthPasswordGivesUpAfterNumberOfPasswordPrompts(t *testing.T) {
	srv := newTestServer(t, withPassword("s3cret"))
	e := authEnv(t, srv, "NumberOfPasswordPrompts 2")
	p := &fakePrompter{passwords: []string{"a", "b", "c"}}
	_, err := NewDialer(e.options(p)).Dial(context.Background(), "target")
	if err == nil || err.Error() != "authenticate to tester@127.0.0.1: permission denied (password)" {
		t.Fatalf("err = %v", err)
	}
	if len(p.prompts()) != 2 {
		t.Errorf("asked %d times, want 2", len(p.prompts()))
	}
}

func TestAuthKeyboardInteractive(t *testing.T) {
	srv := newTestServer(t, withKbd("424242"))
	e := authEnv(t, srv)
	p := &fakePrompter{passwords: []string{"424242"}}
	dialTwice(t, NewDialer(e.options(p)))
	asked := p.prompts()
	if len(asked) != 1 || asked[0] != "Answer the question.\nVerification code: " {
		t.Errorf("prompts = %q", asked)
	}
	if srv.kbdTries.Load() != 2 {
		t.Errorf("server saw %d keyboard-interactive tries, want 2", srv.kbdTries.Load())
	}
}

// TestAuthKeyboardInteractiveEscaped: a server's name, instruction and
// prompt reach the terminal escaped, so that none can retitle the window,
// clear the screen or draw a prompt of its own over the real one. The
// instruction keeps its line breaks.
func TestAuthKeyboardInteractiveEscaped(t *testing.T) {
	srv := newTestServer(t, withKbd("424242"), withKbdChallenge(
		"evil\x1b]0;title\x07",
		"line one\nline two\x1b[2J\r\u009b31m\x7f",
		"\rPassword for local user: "))
	e := authEnv(t, srv)
	p := &fakePrompter{passwords: []string{"424242"}}
	c, err := NewDialer(e.options(p)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	asked := p.prompts()
	want := `evil\033]0;title\007` + "\n" +
		`line one` + "\n" + `line two\033[2J\015\302\23331m\177` + "\n" +
		`\015Password for local user: `
	if len(asked) != 1 || asked[0] != want {
		t.Fatalf("prompts = %q, want %q", asked, want)
	}
	for _, r := range asked[0] {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("prompt holds %U raw", r)
		}
	}
}

// TestBannerEscaped: the server's banner is handed on escaped, its lines
// kept.
func TestBannerEscaped(t *testing.T) {
	srv := newTestServer(t, withKbd("424242"), withBanner("Welcome\r\n\x1b]0;title\x07\x1b[2J\n"))
	e := authEnv(t, srv)
	var got []string
	o := e.options(&fakePrompter{passwords: []string{"424242"}})
	o.Banner = func(msg string) { got = append(got, msg) }
	c, err := NewDialer(o).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := `Welcome\015` + "\n" + `\033]0;title\007\033[2J` + "\n"
	if len(got) != 1 || got[0] != want {
		t.Errorf("banners = %q, want %q", got, want)
	}
}

// TestAuthNoPrompt: with -B, or with no terminal, nothing is asked and the
// dial fails cleanly.
func TestAuthNoPrompt(t *testing.T) {
	dir := t.TempDir()
	pub := writePEMKey(t, dir, "id_enc", true)
	srv := newTestServer(t, withPassword("s3cret"), withKbd("x"), withKeys(pub))
	e := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id_enc"))
	for _, batch := range []bool{true, false} {
		p := &fakePrompter{passwords: []string{"hunter2", "s3cret"}}
		o := e.options(p)
		if batch {
			o.BatchMode = true
		} else {
			o.Prompter = nil
		}
		_, err := NewDialer(o).Dial(context.Background(), "target")
		e, ok := asError(err)
		if !ok || e.Op != "authenticate to" || !strings.HasPrefix(e.Error(), "authenticate to tester@127.0.0.1: permission denied (") {
			t.Fatalf("batch=%v: err = %v", batch, err)
		}
		for _, m := range []string{"publickey", "password", "keyboard-interactive"} {
			if !strings.Contains(e.Error(), m) {
				t.Errorf("error %q does not list %s", e, m)
			}
		}
		if !strings.Contains(e.Hint, "need a terminal") {
			t.Errorf("hint = %q", e.Hint)
		}
		if len(p.prompts()) != 0 {
			t.Errorf("batch=%v: asked %q", batch, p.prompts())
		}
	}
	if srv.passwordTries.Load() != 0 {
		t.Errorf("server saw %d passwords", srv.passwordTries.Load())
	}
}

func TestAuthAgent(t *testing.T) {
	dir := t.TempDir()
	_, agentKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	agentSigner, err := ssh.NewSignerFromKey(agentKey)
	if err != nil {
		t.Fatal(err)
	}
	sock := serveAgent(t, dir, agentKey)
	unrelated := filepath.Join(dir, "id_other")
	writeKey(t, dir, "id_other", "ed25519", false)
	srv := newTestServer(t, withKeys(agentSigner.PublicKey()))
	e := authEnv(t, srv)

	c, err := NewDialer(e.options(nil, "IdentityAgent="+sock, "IdentityFile="+unrelated)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatalf("agent key: %v\n%s", err, e.logs.String())
	}
	c.Close()
	if !strings.Contains(e.logs.String(), "using publickey agent key") {
		t.Errorf("log:\n%s", e.logs.String())
	}

	_, err = NewDialer(e.options(nil, "IdentityAgent="+sock, "IdentityFile="+unrelated, "IdentitiesOnly=yes")).Dial(context.Background(), "target")
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("IdentitiesOnly=yes used an agent key not in IdentityFile: %v", err)
	}
}

// TestConcurrentDialsAskOnce: a pool dialing in parallel asks for the
// password once.
func TestConcurrentDialsAskOnce(t *testing.T) {
	srv := newTestServer(t, withPassword("s3cret"))
	e := authEnv(t, srv)
	p := &fakePrompter{passwords: []string{"s3cret", "s3cret", "s3cret", "s3cret"}}
	d := NewDialer(e.options(p))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Dial(context.Background(), "target")
			if err == nil {
				c.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(p.prompts()); n != 1 {
		t.Errorf("asked %d times, want 1", n)
	}
}

// TestAuthGateLeavesThePrompt: a dial held at its AuthGate (a pool's
// second connection waiting for the first's authentication) that asked
// about the host key first gives the prompt back, so that the first can
// ask for its password; the second then logs in with the remembered
// password, and the user is asked each question once. With the prompt
// kept, the two waited for each other for ever.
func TestAuthGateLeavesThePrompt(t *testing.T) {
	srv := newTestServer(t, withPassword("s3cret"))
	e := newEnv(t)
	e.knownHosts = "/dev/null"
	e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking ask", "PubkeyAuthentication no"))
	p := &fakePrompter{lines: []string{"yes"}, passwords: []string{"s3cret"}}
	d := NewDialer(e.options(p))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	firstDone := make(chan error, 1)
	var firstErr error
	gate := func(ctx context.Context) error {
		select {
		case err := <-firstDone:
			firstErr = err
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	asked := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		c, err := d.DialWith(ctx, "target", DialHooks{AuthGate: func(ctx context.Context) error {
			close(asked) // the host key is answered: this dial held the prompt
			return gate(ctx)
		}})
		if err == nil {
			c.Close()
		}
		second <- err
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the gated dial never reached its gate")
	}
	c, err := d.Dial(ctx, "target")
	firstDone <- err
	if err != nil {
		t.Fatalf("the first dial, with the other at its gate: %v", err)
	}
	c.Close()
	if err := <-second; err != nil || firstErr != nil {
		t.Fatalf("the gated dial: %v (gate: %v)", err, firstErr)
	}
	if got := p.prompts(); len(got) != 2 {
		t.Errorf("prompts %q: want the host key question and the password, once each", got)
	}
}

// TestKeyAccepted: a dial's KeyAccepted hook is called once the server
// accepted its key and the signature is made (an RSA key among them, whose
// signature algorithm x/crypto picks from what the signer offers), and
// not for a key the server refused.
func TestKeyAccepted(t *testing.T) {
	for _, kind := range []string{"ed25519", "rsa"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			writeKey(t, dir, "refused", "ed25519", false)
			good := writeKey(t, dir, "good", kind, false)
			srv := newTestServer(t, withKeys(good))
			e := authEnv(t, srv)
			o := e.options(nil)
			o.Identities = []string{filepath.Join(dir, "refused"), filepath.Join(dir, "good")}
			var accepted []int32
			c, err := NewDialer(o).DialWith(context.Background(), "target", DialHooks{KeyAccepted: func() {
				accepted = append(accepted, srv.pubkeyOffers.Load())
			}})
			if err != nil {
				t.Fatalf("%v\n%s", err, e.logs.String())
			}
			c.Close()
			if len(accepted) != 1 || accepted[0] < 2 {
				t.Errorf("KeyAccepted called after offers %v, want once, after the refused key and the good one", accepted)
			}
		})
	}
}

// TestKeyGate: a dial with a KeyGate waits for it, not for its AuthGate,
// before its first key; the AuthGate holds any attempt after that, here
// the key the server accepts after refusing the first.
func TestKeyGate(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "refused", "ed25519", false)
	good := writeKey(t, dir, "good", "ed25519", false)
	srv := newTestServer(t, withKeys(good))
	e := authEnv(t, srv)
	for _, tc := range []struct {
		name        string
		keys        []string
		authGateFor bool // the AuthGate is waited for
	}{
		{"accepted-first", []string{"good"}, false},
		{"refused-first", []string{"refused", "good"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := e.options(nil)
			o.Identities = nil
			for _, k := range tc.keys {
				o.Identities = append(o.Identities, filepath.Join(dir, k))
			}
			var keyGate, authGate int
			var offersAtAuthGate int32
			c, err := NewDialer(o).DialWith(context.Background(), "target", DialHooks{
				KeyGate: func(context.Context) error { keyGate++; return nil },
				AuthGate: func(context.Context) error {
					authGate++
					offersAtAuthGate = srv.pubkeyOffers.Load()
					return nil
				},
			})
			if err != nil {
				t.Fatalf("%v\n%s", err, e.logs.String())
			}
			c.Close()
			if keyGate != 1 {
				t.Errorf("KeyGate waited for %d times, want once", keyGate)
			}
			switch {
			case tc.authGateFor && authGate != 1:
				t.Errorf("AuthGate waited for %d times after a refused key, want once", authGate)
			case tc.authGateFor && offersAtAuthGate < 1:
				t.Error("AuthGate waited for before the first key was offered")
			case !tc.authGateFor && authGate != 0:
				t.Errorf("AuthGate waited for %d times although the first key was accepted", authGate)
			}
		})
	}
}
