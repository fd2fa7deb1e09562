package sshconn

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hpncp/hpncp/internal/vis"
)

// errAuthExhausted ends authentication when no method is left to try.
var errAuthExhausted = errors.New("no authentication method left")

// attempt is the authentication attempt in progress: what -v calls it,
// what to remember if it succeeds and what to forget if it fails.
type attempt struct {
	desc   string
	commit func()
	forget func()
}

// pubCandidate is one key publickey authentication may offer.
type pubCandidate struct {
	desc   string
	file   string
	signer ssh.Signer
	// pub is known before decryption when the key file or FILE.pub holds
	// it; nil means the passphrase is needed to learn it.
	pub ssh.PublicKey
}

func (c *pubCandidate) publicKey() ssh.PublicKey {
	if c.signer != nil {
		return c.signer.PublicKey()
	}
	return c.pub
}

// nextAuth is the ssh.ClientAuthCallback: it picks the next attempt in
// OpenSSH's order (or PreferredAuthentications), among the methods the
// server still allows.
func (r *dialRun) nextAuth(actx *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
	if !r.authStarted {
		// ConnectTimeout goes on bounding the dial through
		// authentication, as OpenSSH's packet timeout bounds its login;
		// only a prompt (acquirePrompt) stops it, the user's time being
		// no server's.
		r.authStarted = true
		r.o.logf("negotiated cipher %s, key exchange %s", actx.Algorithms.Write.Cipher, actx.Algorithms.KeyExchange)
		gate := r.o.hooks.AuthGate
		if r.o.hooks.KeyGate != nil {
			gate, r.gateLater = r.o.hooks.KeyGate, gate
		}
		if err := r.waitGate(gate); err != nil {
			return nil, err
		}
	} else if gate := r.gateLater; gate != nil {
		r.gateLater = nil
		if err := r.waitGate(gate); err != nil {
			return nil, err
		}
	}
	if n := len(actx.PartialSuccessMethods); n > r.partials {
		r.partials = n
		if r.last != nil && r.last.commit != nil {
			r.last.commit()
		}
	} else if r.last != nil && r.last.forget != nil {
		r.last.forget()
	}
	r.last = nil
	r.allowed = actx.AllowedMethods

	for _, m := range r.methodOrder() {
		if !slices.Contains(actx.AllowedMethods, m) {
			continue
		}
		var a ssh.AuthMethod
		switch m {
		case "publickey":
			if r.cfg.PubkeyAuthentication {
				a = r.nextPublicKey()
			}
		case "keyboard-interactive":
			if r.cfg.KbdInteractiveAuthentication && !r.noPasswords {
				a = r.nextKbdInteractive()
			}
		case "password":
			if r.cfg.PasswordAuthentication && !r.noPasswords {
				a = r.nextPassword()
			}
		}
		if a != nil {
			return a, nil
		}
	}
	return nil, errAuthExhausted
}

// waitGate waits for gate, when not nil, with ConnectTimeout stopped.
func (r *dialRun) waitGate(gate func(context.Context) error) error {
	if gate == nil {
		return nil
	}
	r.stopTimer()
	// A host key question this dial asked must not keep the prompt from
	// the dial it waits for, which may need it for a password.
	r.releasePrompt()
	if err := gate(r.ctx); err != nil {
		return err
	}
	if r.timer != nil {
		r.timer.Reset(connectTimeout(r.cfg))
	}
	return nil
}

func (r *dialRun) methodOrder() []string {
	def := []string{"publickey", "keyboard-interactive", "password"}
	if r.cfg.PreferredAuthentications == nil {
		return def
	}
	var out []string
	for _, m := range r.cfg.PreferredAuthentications {
		if slices.Contains(def, m) {
			out = append(out, m)
		}
	}
	return out
}

// committed runs after the handshake succeeded: the last attempt is the
// one that worked.
func (r *dialRun) committed() {
	desc := "none"
	if r.last != nil {
		desc = r.last.desc
		if r.last.commit != nil {
			r.last.commit()
		}
	}
	r.o.logf("authenticated to %s@%s using %s", r.cfg.User, r.cfg.HostName, desc)
}

func (r *dialRun) nextPublicKey() ssh.AuthMethod {
	if !r.pubPrepared {
		r.preparePublicKeys()
	}
	for r.pubIdx < len(r.pubs) {
		c := r.pubs[r.pubIdx]
		r.pubIdx++
		var s ssh.Signer
		switch {
		case c.signer != nil:
			s = c.signer
		case r.d.cachedSigner(c.file) != nil:
			s = r.d.cachedSigner(c.file)
		case !r.canPrompt:
			r.o.logf("skipping encrypted key %s: no terminal to ask for its passphrase", c.file)
			continue
		case c.pub != nil:
			// Offer the public half first; the passphrase is asked only if
			// the server accepts the key and a signature is needed.
			s = &lazySigner{r: r, c: c}
		default:
			if s = r.decrypt(c); s == nil {
				continue
			}
		}
		blob := string(s.PublicKey().Marshal())
		if r.offered[blob] {
			continue
		}
		r.offered[blob] = true
		desc := fmt.Sprintf("publickey %s %s %s", c.desc, keyTypeName(s.PublicKey()), ssh.FingerprintSHA256(s.PublicKey()))
		r.o.logf("offering %s", desc)
		r.last = &attempt{desc: desc}
		if f := r.o.hooks.KeyAccepted; f != nil {
			s = acceptedSigner(s, f)
		}
		return ssh.PublicKeys(s)
	}
	return nil
}

// preparePublicKeys lists the keys to offer in OpenSSH's order: agent keys
// first (an agent key that is also an identity file takes the file's
// place), then the remaining identity files; with IdentitiesOnly only agent
// keys that match an identity file.
func (r *dialRun) preparePublicKeys() {
	r.pubPrepared = true
	var files []*pubCandidate
	for _, f := range r.cfg.IdentityFiles {
		if c := r.loadIdentity(f); c != nil {
			files = append(files, c)
		}
	}
	var out []*pubCandidate
	for _, s := range r.agentSigners() {
		blob := s.PublicKey().Marshal()
		i := slices.IndexFunc(files, func(c *pubCandidate) bool {
			pk := c.publicKey()
			return pk != nil && bytes.Equal(pk.Marshal(), blob)
		})
		if i >= 0 {
			out = append(out, &pubCandidate{desc: files[i].file + " (agent)", file: files[i].file, signer: s})
			files = slices.Delete(files, i, i+1)
			continue
		}
		if !r.cfg.IdentitiesOnly {
			out = append(out, &pubCandidate{desc: "agent key", signer: s})
		}
	}
	r.pubs = append(out, files...)
}

// loadIdentity reads an identity file without asking anything: a plain key
// becomes a signer, an encrypted one a candidate to decrypt later.
func (r *dialRun) loadIdentity(file string) *pubCandidate {
	if s := r.d.cachedSigner(file); s != nil {
		return &pubCandidate{desc: file, file: file, signer: s}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		if !isDefaultIdentity(file) || !errors.Is(err, os.ErrNotExist) {
			r.o.logf("identity file %s: %v", file, unwrapPathError(err))
		}
		return nil
	}
	s, err := ssh.ParsePrivateKey(data)
	if err == nil {
		r.d.storeSigner(file, s)
		return &pubCandidate{desc: file, file: file, signer: s}
	}
	var missing *ssh.PassphraseMissingError
	if !errors.As(err, &missing) {
		r.o.logf("identity file %s: %v", file, err)
		return nil
	}
	c := &pubCandidate{desc: file, file: file, pub: missing.PublicKey}
	if c.pub == nil {
		if data, err := os.ReadFile(file + ".pub"); err == nil {
			if pk, _, _, _, err := ssh.ParseAuthorizedKey(data); err == nil {
				c.pub = pk
			}
		}
	}
	return c
}

// agentSigners returns the agent's keys, or none when there is no agent.
// The agent connection stays open until the dial ends: its signers sign
// through it.
func (r *dialRun) agentSigners() []ssh.Signer {
	sock := r.cfg.IdentityAgent
	if sock == "" || sock == "none" {
		return nil
	}
	var nd net.Dialer
	conn, err := nd.DialContext(r.ctx, "unix", sock)
	if err != nil {
		r.o.logf("ssh-agent at %s: %v", sock, err)
		return nil
	}
	r.closers = append(r.closers, conn)
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		r.o.logf("ssh-agent at %s: %v", sock, err)
		return nil
	}
	r.o.logf("ssh-agent at %s has %d keys", sock, len(signers))
	return signers
}

// decrypt asks for c's passphrase (up to NumberOfPasswordPrompts times; an
// empty answer skips the key, as in OpenSSH) and remembers the key in the
// Dialer. It returns nil when the key cannot be used.
func (r *dialRun) decrypt(c *pubCandidate) ssh.Signer {
	if s := r.d.cachedSigner(c.file); s != nil {
		return s
	}
	if !r.canPrompt || r.acquirePrompt() != nil {
		return nil
	}
	if s := r.d.cachedSigner(c.file); s != nil {
		return s
	}
	data, err := os.ReadFile(c.file)
	if err != nil {
		r.o.logf("identity file %s: %v", c.file, unwrapPathError(err))
		return nil
	}
	prompt := fmt.Sprintf("Enter passphrase for key '%s': ", c.file)
	for range max(1, r.cfg.NumberOfPasswordPrompts) {
		pass, err := r.o.Prompter.ReadPassword(prompt)
		if err != nil || pass == "" {
			r.o.logf("no passphrase given for %s, trying the next key", c.file)
			return nil
		}
		s, err := ssh.ParsePrivateKeyWithPassphrase(data, []byte(pass))
		if errors.Is(err, x509.IncorrectPasswordError) {
			prompt = fmt.Sprintf("Bad passphrase, try again for %s: ", c.file)
			continue
		}
		if err != nil {
			r.o.logf("load key %s: %v", c.file, err)
			return nil
		}
		if c.pub != nil && !bytes.Equal(c.pub.Marshal(), s.PublicKey().Marshal()) {
			r.o.logf("key %s does not match its public key, skipping it", c.file)
			return nil
		}
		r.d.storeSigner(c.file, s)
		return s
	}
	return nil
}

// lazySigner offers a public key whose private half is still encrypted and
// decrypts it only when the server asks for a signature.
type lazySigner struct {
	r *dialRun
	c *pubCandidate
}

func (l *lazySigner) PublicKey() ssh.PublicKey { return l.c.pub }

func (l *lazySigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	return l.SignWithAlgorithm(rand, data, "")
}

func (l *lazySigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	s := l.r.decrypt(l.c)
	if s == nil {
		return nil, fmt.Errorf("load key %s: passphrase not given", l.c.file)
	}
	if as, ok := s.(ssh.AlgorithmSigner); ok {
		return as.SignWithAlgorithm(rand, data, algorithm)
	}
	if algorithm != "" && algorithm != s.PublicKey().Type() {
		return nil, fmt.Errorf("sign with key %s: algorithm %s not supported", l.c.file, algorithm)
	}
	return s.Sign(rand, data)
}

// acceptedSigner is s, calling accepted once it has made a signature:
// x/crypto asks for one only after the server accepted the key. It signs
// with the algorithms s offers, as s itself would be used; a signer that
// cannot be told an algorithm is left as it is, and tells nothing.
func acceptedSigner(s ssh.Signer, accepted func()) ssh.Signer {
	as, ok := s.(ssh.AlgorithmSigner)
	if !ok {
		return s
	}
	n := notifySigner{AlgorithmSigner: as, accepted: accepted}
	if m, ok := s.(ssh.MultiAlgorithmSigner); ok {
		return notifyMultiSigner{n, m.Algorithms()}
	}
	return n
}

type notifySigner struct {
	ssh.AlgorithmSigner
	accepted func()
}

func (n notifySigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	return n.SignWithAlgorithm(rand, data, "")
}

func (n notifySigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	sig, err := n.AlgorithmSigner.SignWithAlgorithm(rand, data, algorithm)
	if err == nil {
		n.accepted()
	}
	return sig, err
}

// notifyMultiSigner is a notifySigner of a signer that names the
// algorithms it signs with.
type notifyMultiSigner struct {
	notifySigner
	algorithms []string
}

func (n notifyMultiSigner) Algorithms() []string { return n.algorithms }

func (r *dialRun) secretKey() string {
	return fmt.Sprintf("%s@%s:%d", r.cfg.User, r.cfg.HostName, r.cfg.Port)
}

// kbdRound is one keyboard-interactive challenge and the answers given.
type kbdRound struct {
	questions []string
	answers   []string
}

func (r *dialRun) nextKbdInteractive() ssh.AuthMethod {
	key := r.secretKey()
	cached := r.d.cachedKbd(key)
	useCache := cached != nil && !r.kbdCacheTried
	if useCache {
		r.kbdCacheTried = true
	} else {
		if !r.canPrompt || r.kbdTries >= max(1, r.cfg.NumberOfPasswordPrompts) {
			return nil
		}
		r.kbdTries++
	}
	var rounds []kbdRound
	att := &attempt{desc: "keyboard-interactive", commit: func() { r.d.storeKbd(key, rounds) }}
	if useCache {
		att.desc = "keyboard-interactive (remembered answers)"
		att.forget = func() { r.d.storeKbd(key, nil) }
	}
	r.last = att
	r.o.logf("trying %s", att.desc)
	return ssh.KeyboardInteractive(func(name, instruction string, questions []string, echos []bool) ([]string, error) {
		n := len(rounds)
		if len(questions) == 0 {
			rounds = append(rounds, kbdRound{})
			return nil, nil
		}
		if useCache && n < len(cached) && slices.Equal(cached[n].questions, questions) {
			rounds = append(rounds, cached[n])
			return cached[n].answers, nil
		}
		if !r.canPrompt {
			return nil, errors.New("keyboard-interactive: no terminal to answer on")
		}
		if err := r.acquirePrompt(); err != nil {
			return nil, err
		}
		// A concurrent dial may have succeeded while this one waited.
		if !useCache && !r.kbdCacheTried && n == 0 {
			if c := r.d.cachedKbd(key); len(c) > 0 && slices.Equal(c[0].questions, questions) {
				r.kbdCacheTried = true
				useCache, cached = true, c
				att.desc = "keyboard-interactive (remembered answers)"
				att.forget = func() { r.d.storeKbd(key, nil) }
				rounds = append(rounds, c[0])
				return c[0].answers, nil
			}
		}
		// All of it is the server's text, shown on the user's terminal
		// beside prompts for secrets: escaped, so that it cannot set the
		// title, clear the screen or draw a prompt of its own. Newlines
		// stay in the instruction and the prompts, where PAM puts its
		// messages, and the name is one line.
		header := ""
		if name != "" {
			header += vis.String(name) + "\n"
		}
		if instruction != "" {
			header += vis.Text(strings.TrimRight(instruction, "\n")) + "\n"
		}
		answers := make([]string, len(questions))
		for i, q := range questions {
			q = vis.Text(q)
			if i == 0 {
				q = header + q
			}
			var err error
			if echos[i] {
				answers[i], err = r.o.Prompter.ReadLine(q)
			} else {
				answers[i], err = r.o.Prompter.ReadPassword(q)
			}
			if err != nil {
				r.kbdTries = max(1, r.cfg.NumberOfPasswordPrompts)
				return nil, fmt.Errorf("keyboard-interactive: %w", err)
			}
		}
		rounds = append(rounds, kbdRound{questions: slices.Clone(questions), answers: answers})
		return answers, nil
	})
}

func (r *dialRun) nextPassword() ssh.AuthMethod {
	key := r.secretKey()
	if pw, ok := r.d.cachedPassword(key); ok && !r.pwCacheTried {
		r.pwCacheTried = true
		r.last = &attempt{desc: "password (remembered)", forget: func() { r.d.forgetPassword(key) }}
		r.o.logf("trying the remembered password")
		return ssh.Password(pw)
	}
	if !r.canPrompt || r.pwTries >= max(1, r.cfg.NumberOfPasswordPrompts) {
		return nil
	}
	r.pwTries++
	retry := r.pwTries > 1
	var typed string
	att := &attempt{desc: "password", commit: func() { r.d.storePassword(key, typed) }}
	r.last = att
	r.o.logf("trying password")
	return ssh.PasswordCallback(func() (string, error) {
		if err := r.acquirePrompt(); err != nil {
			return "", err
		}
		// A concurrent dial may have succeeded while this one waited.
		if pw, ok := r.d.cachedPassword(key); ok && !r.pwCacheTried {
			r.pwCacheTried = true
			r.pwTries--
			*att = attempt{desc: "password (remembered)", forget: func() { r.d.forgetPassword(key) }}
			return pw, nil
		}
		host := r.cfg.HostName
		if r.cfg.HostKeyAlias != "" {
			host = r.cfg.HostKeyAlias
		}
		prompt := fmt.Sprintf("%s@%s's password: ", r.cfg.User, host)
		if retry {
			prompt = "Permission denied, please try again.\n" + prompt
		}
		pw, err := r.o.Prompter.ReadPassword(prompt)
		if err != nil {
			r.pwTries = max(1, r.cfg.NumberOfPasswordPrompts)
			return "", fmt.Errorf("read password: %w", err)
		}
		typed = pw
		return pw, nil
	})
}

// authError reports that every method failed, as OpenSSH's "Permission
// denied (publickey,password)."
func (r *dialRun) authError() *Error {
	methods := strings.Join(r.allowed, ",")
	hint := "check -i / IdentityFile, or add the key to the agent with ssh-add"
	needsTerminal := slices.Contains(r.allowed, "password") || slices.Contains(r.allowed, "keyboard-interactive")
	switch {
	case r.noPasswords && needsTerminal:
		hint = "password authentication was disabled because the host key changed; fix known_hosts first"
	case !r.canPrompt && needsTerminal:
		hint += "; password and keyboard-interactive authentication need a terminal and no -B"
	}
	return &Error{
		Kind: KindAuth,
		Op:   "authenticate to",
		Host: r.cfg.User + "@" + r.cfg.HostName,
		Err:  fmt.Errorf("permission denied (%s)", methods),
		Hint: hint,
	}
}
