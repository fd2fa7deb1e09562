package sshconn

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"

	"github.com/hpncp/hpncp/internal/starttrace"
)

// knownHosts is the known_hosts view for one destination.
type knownHosts struct {
	// lookup is the "host:port" that known_hosts lines are matched against:
	// HostKeyAlias as-is, else HostName with the port.
	lookup string
	// display is lookup in known_hosts notation ("host" or "[host]:port"),
	// as OpenSSH prints it and writes it.
	display string
	db      *knownhosts.HostKeyDB
	// caLines holds "file:line" of @cert-authority lines, which are not
	// host keys of their own.
	caLines map[string]bool
	revoked []knownKey
}

type knownKey struct {
	key  ssh.PublicKey
	file string
	line int
}

// loadKnownHosts reads the user and global known_hosts files that exist.
// A file that cannot be parsed is skipped with a warning, as OpenSSH skips
// lines it does not understand.
func loadKnownHosts(cfg *Config, o *Options) *knownHosts {
	kh := &knownHosts{caLines: make(map[string]bool)}
	if cfg.HostKeyAlias != "" {
		kh.lookup = net.JoinHostPort(cfg.HostKeyAlias, "22")
	} else {
		kh.lookup = net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))
	}
	kh.display = knownhosts.Normalize(kh.lookup)

	var files []string
	for _, f := range slices.Concat(cfg.UserKnownHostsFiles, cfg.GlobalKnownHostsFiles) {
		if f == "none" || slices.Contains(files, f) {
			continue
		}
		if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if _, err := knownhosts.NewDB(f); err != nil {
			o.warnf("Warning: ignoring %s: %v", f, err)
			continue
		}
		files = append(files, f)
		kh.scanMarkers(f)
	}
	db, err := knownhosts.NewDB(files...)
	if err != nil {
		// Every file parsed on its own just above; failing together means
		// one changed in between. Checking against nothing is the safe side.
		o.warnf("Warning: reading known_hosts: %v", err)
		db, _ = knownhosts.NewDB()
	}
	kh.db = db
	return kh
}

// scanMarkers records @cert-authority line numbers and @revoked keys of
// file: the known_hosts library applies them but does not say which lines
// they are, which the messages need.
func (kh *knownHosts) scanMarkers(file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		switch f[0] {
		case "@cert-authority":
			kh.caLines[file+":"+strconv.Itoa(n)] = true
		case "@revoked":
			blob, err := base64.StdEncoding.DecodeString(f[3])
			if err != nil {
				continue
			}
			if k, err := ssh.ParsePublicKey(blob); err == nil {
				kh.revoked = append(kh.revoked, knownKey{key: k, file: file, line: n})
			}
		}
	}
}

// hostKeyAlgorithms orders the configured algorithms that x/crypto
// implements so that those of keys known for the host come first: the
// server then presents a key we can check, as OpenSSH arranges it.
func (kh *knownHosts) hostKeyAlgorithms(configured []string) []string {
	supported := ssh.SupportedAlgorithms().HostKeys
	var usable []string
	for _, a := range configured {
		if slices.Contains(supported, a) && !slices.Contains(usable, a) {
			usable = append(usable, a)
		}
	}
	if len(usable) == 0 {
		usable = supported
	}
	var algos []string
	for _, a := range kh.db.HostKeyAlgorithms(kh.lookup) {
		if slices.Contains(usable, a) && !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	for _, a := range usable {
		if !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	return algos
}

func (kh *knownHosts) isRevoked(key ssh.PublicKey) (knownKey, bool) {
	blob := key.Marshal()
	for _, r := range kh.revoked {
		if bytes.Equal(r.key.Marshal(), blob) {
			return r, true
		}
	}
	return knownKey{}, false
}

// hostKeyStatus is the outcome of a known_hosts lookup, named as in
// OpenSSH's hostfile.h.
type hostKeyStatus int

const (
	hostOK hostKeyStatus = iota
	hostNew
	hostChanged
	hostRevoked
	// hostError: the lookup itself failed; nothing is known either way.
	hostError
)

// check classifies key. For a certificate it first tries the CAs; when no
// CA vouches for it, it falls back to the plain key, as OpenSSH does.
// offending lists the known keys of the same type for hostChanged, or the
// revocation line for hostRevoked; plain is the key to record or report;
// err is set with hostError.
func (kh *knownHosts) check(remote net.Addr, key ssh.PublicKey, logf func(string, ...any)) (status hostKeyStatus, plain ssh.PublicKey, offending []knownKey, otherTypes bool, err error) {
	plain = key
	cb := kh.db.HostKeyCallback()
	if cert, ok := key.(*ssh.Certificate); ok {
		for _, k := range []ssh.PublicKey{cert.Key, cert.SignatureKey} {
			if r, bad := kh.isRevoked(k); bad {
				return hostRevoked, cert.Key, []knownKey{r}, false, nil
			}
		}
		err := cb(kh.lookup, remote, key)
		if err == nil {
			logf("host certificate for %s signed by a known CA (%s %s)", kh.display,
				keyTypeName(cert.SignatureKey), ssh.FingerprintSHA256(cert.SignatureKey))
			return hostOK, key, nil, false, nil
		}
		logf("host certificate not accepted (%v); checking the plain key", err)
		plain = cert.Key
	}
	if r, bad := kh.isRevoked(plain); bad {
		return hostRevoked, plain, []knownKey{r}, false, nil
	}
	err = cb(kh.lookup, remote, plain)
	if err == nil {
		return hostOK, plain, nil, false, nil
	}
	var rev *xknownhosts.RevokedError
	if errors.As(err, &rev) {
		return hostRevoked, plain, []knownKey{{rev.Revoked.Key, rev.Revoked.Filename, rev.Revoked.Line}}, false, nil
	}
	var ke *xknownhosts.KeyError
	if !errors.As(err, &ke) {
		return hostError, plain, nil, false, err
	}
	// A known key of another type does not make this one "changed": OpenSSH
	// treats it as a new key for the host (and says others are known).
	for _, w := range ke.Want {
		if kh.caLines[w.Filename+":"+strconv.Itoa(w.Line)] {
			continue
		}
		if w.Key.Type() == plain.Type() {
			offending = append(offending, knownKey{w.Key, w.Filename, w.Line})
		} else {
			otherTypes = true
		}
	}
	if len(offending) > 0 {
		return hostChanged, plain, offending, otherTypes, nil
	}
	return hostNew, plain, nil, otherTypes, nil
}

// keyTypeName is OpenSSH's short name for a key type, as in "ED25519 key
// fingerprint is ...".
func keyTypeName(k ssh.PublicKey) string {
	t := k.Type()
	suffix := ""
	if c, ok := k.(*ssh.Certificate); ok {
		t = c.Key.Type()
		suffix = "-CERT"
	}
	var name string
	switch {
	case t == ssh.KeyAlgoED25519:
		name = "ED25519"
	case t == ssh.KeyAlgoSKED25519:
		name = "ED25519-SK"
	case t == ssh.KeyAlgoRSA:
		name = "RSA"
	case t == "ssh-dss":
		name = "DSA"
	case t == ssh.KeyAlgoSKECDSA256:
		name = "ECDSA-SK"
	case strings.HasPrefix(t, "ecdsa-"):
		name = "ECDSA"
	default:
		name = strings.ToUpper(t)
	}
	return name + suffix
}

// changedWarning is OpenSSH's warning for a host whose key changed.
func changedWarning(display string, key ssh.PublicKey, offending []knownKey) string {
	var b strings.Builder
	b.WriteString("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n")
	b.WriteString("@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n")
	b.WriteString("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n")
	b.WriteString("IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n")
	b.WriteString("Someone could be eavesdropping on you right now (man-in-the-middle attack)!\n")
	b.WriteString("It is also possible that a host key has just been changed.\n")
	fmt.Fprintf(&b, "The fingerprint for the %s key sent by the remote host is\n%s.\n",
		keyTypeName(key), ssh.FingerprintSHA256(key))
	b.WriteString("Please contact your system administrator.\n")
	for _, k := range offending {
		fmt.Fprintf(&b, "Offending %s key in %s:%d\n", keyTypeName(k.key), k.file, k.line)
	}
	if len(offending) > 0 {
		fmt.Fprintf(&b, "  remove with:\n  ssh-keygen -f %q -R %q\n", offending[0].file, display)
	}
	fmt.Fprintf(&b, "Host key for %s has changed.", display)
	return b.String()
}

func revokedWarning(display string, key ssh.PublicKey) string {
	var b strings.Builder
	b.WriteString("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n")
	b.WriteString("@       WARNING: REVOKED HOST KEY DETECTED!               @\n")
	b.WriteString("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n")
	fmt.Fprintf(&b, "The %s host key for %s is marked as revoked.\n", keyTypeName(key), display)
	b.WriteString("This could mean that a stolen key is being used to\nimpersonate this host.")
	return b.String()
}

// appendKnownHost adds key for display to file, creating the file (0600)
// and its directory (0700) when needed, hashing the name when asked.
func appendKnownHost(file, display string, key ssh.PublicKey, hash bool) error {
	if file == "" || file == "none" {
		return errors.New("no UserKnownHostsFile to write to")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("create directory of %s: %w", file, err)
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", file, err)
	}
	name := display
	if hash {
		name = xknownhosts.HashHostname(display)
	}
	line := name + " " + key.Type() + " " + base64.StdEncoding.EncodeToString(key.Marshal()) + "\n"
	// A file whose last line lacks its newline would glue our line to it.
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// verifyHostKey is the ssh.HostKeyCallback: known_hosts with OpenSSH's
// StrictHostKeyChecking semantics. Its refusals are KindHostKey.
func (r *dialRun) verifyHostKey(_ string, remote net.Addr, key ssh.PublicKey) error {
	starttrace.From(r.ctx).Mark(starttrace.KEX)
	r.hostKeySeen = true
	err := r.hostKeyCheck(remote, key)
	if e, ok := err.(*Error); ok && e.Kind == KindOther && r.ctx.Err() == nil {
		e.Kind = KindHostKey
	}
	return err
}

// hostKeyCheck runs again on every re-key, when the key must be the one
// verified first.
func (r *dialRun) hostKeyCheck(remote net.Addr, key ssh.PublicKey) error {
	if r.verifiedKey != nil {
		if bytes.Equal(r.verifiedKey, key.Marshal()) {
			return nil
		}
		return &Error{Op: "verify host key of", Host: r.kh.display, Err: errors.New("host key changed during re-key")}
	}
	if hook := testHookHostKey.Load(); hook != nil {
		(*hook)()
	}
	if err := r.checkHostKey(remote, key); err != nil {
		return err
	}
	r.verifiedKey = key.Marshal()
	return nil
}

// testHookHostKey, when set, runs as a connection's first host key check
// starts.
var testHookHostKey atomic.Pointer[func()]

// hostPin is a host's key for the Dialer's lifetime. Only the first
// connection to a host may learn its key (StrictHostKeyChecking
// accept-new, ask or no); a man in the middle answering a later
// connection of the pool would otherwise have its own key learned as
// well (the host unknown, or known by a key of another type) or, with no,
// accepted. So a later connection must present the pinned key, unless
// known_hosts vouches for the one it presents.
type hostPin struct {
	// turn is held by the one dial deciding on the host's key, from its
	// connect to its verdict: dials whose key exchanges end together would
	// each find the host unknown and each learn its own key. The others
	// wait for its verdict.
	turn chan struct{}
	// Under Dialer.mu:
	key ssh.PublicKey // nil until a connection's key is accepted
	// declined holds the keys the user said no to, not asked about again.
	declined [][]byte
	// refused holds the keys refused for differing from key, warned
	// about once.
	refused [][]byte
}

func (d *Dialer) hostPin(display string) *hostPin {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pins[display]
	if p == nil {
		p = &hostPin{turn: make(chan struct{}, 1)}
		d.pins[display] = p
	}
	return p
}

func (d *Dialer) pinnedKey(p *hostPin) ssh.PublicKey {
	d.mu.Lock()
	defer d.mu.Unlock()
	return p.key
}

func (d *Dialer) decline(p *hostPin, key ssh.PublicKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p.declined = append(p.declined, key.Marshal())
}

func (d *Dialer) declined(p *hostPin, key ssh.PublicKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(p.declined, func(k []byte) bool { return bytes.Equal(k, key.Marshal()) })
}

// firstRefusal records key as refused for not being the pinned key and
// reports whether it was the first time.
func (d *Dialer) firstRefusal(p *hostPin, key ssh.PublicKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	blob := key.Marshal()
	if slices.ContainsFunc(p.refused, func(k []byte) bool { return bytes.Equal(k, blob) }) {
		return false
	}
	p.refused = append(p.refused, blob)
	return true
}

func (d *Dialer) pin(p *hostPin, key ssh.PublicKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.key == nil {
		p.key = key
	}
}

// claimTurn takes the host's turn when no key is pinned and no other dial
// holds it: the dial connected first decides on the key, however fast
// another connection's key exchange (a nearer man in the middle's) ends.
func (r *dialRun) claimTurn() {
	r.hostPin = r.d.hostPin(r.kh.display)
	if r.d.pinnedKey(r.hostPin) != nil {
		return
	}
	select {
	case r.hostPin.turn <- struct{}{}:
		r.holdsTurn = true
	default:
	}
}

func (r *dialRun) releaseTurn() {
	if r.holdsTurn {
		<-r.hostPin.turn
		r.holdsTurn = false
	}
}

// awaitPin returns the key pinned for the host, or nil with the host's
// turn held: this dial decides, and releases the turn once it has.
func (r *dialRun) awaitPin() (ssh.PublicKey, error) {
	p := r.hostPin
	if !r.holdsTurn {
		if k := r.d.pinnedKey(p); k != nil {
			return k, nil
		}
		select {
		case p.turn <- struct{}{}:
		default:
			// The dial deciding may be asking the user, whose time is no
			// server's: as at a prompt, ConnectTimeout does not run
			// meanwhile.
			resume := r.pauseTimer()
			select {
			case p.turn <- struct{}{}:
				resume()
			case <-r.ctx.Done():
				return nil, r.ctx.Err()
			}
		}
		r.holdsTurn = true
	}
	if k := r.d.pinnedKey(p); k != nil {
		r.releaseTurn()
		return k, nil
	}
	return nil, nil
}

func (r *dialRun) checkHostKey(remote net.Addr, key ssh.PublicKey) error {
	kh, o := r.kh, r.o
	o.logf("server host key: %s %s", keyTypeName(key), ssh.FingerprintSHA256(key))
	status, plain, offending, otherTypes, err := kh.check(remote, key, o.logf)
	fp := ssh.FingerprintSHA256(plain)
	// Refused whatever an earlier connection presented.
	switch status {
	case hostError:
		return &Error{Op: "verify host key of", Host: kh.display, Err: fmt.Errorf("check known_hosts: %w; host key verification failed", err)}
	case hostRevoked:
		o.warnf("%s", revokedWarning(kh.display, plain))
		return &Error{
			Op:   "verify host key of",
			Host: kh.display,
			Err:  fmt.Errorf("%s host key %s is revoked (%s:%d); host key verification failed", keyTypeName(plain), fp, offending[0].file, offending[0].line),
			Hint: "a revoked key may be stolen; contact the host's administrator",
		}
	}

	pinned, err := r.awaitPin()
	if err != nil {
		return &Error{Op: "verify host key of", Host: kh.display, Err: err}
	}
	defer r.releaseTurn()
	if pinned != nil {
		switch {
		case status == hostOK:
			o.logf("host %s found in known_hosts", kh.display)
			return nil
		case !bytes.Equal(pinned.Marshal(), plain.Marshal()):
			return r.pinMismatch(pinned, plain)
		case status == hostNew:
			o.logf("host key for %s accepted earlier in this run", kh.display)
			return nil
		}
		// A changed key, the first connection's: judged again, so that
		// StrictHostKeyChecking=no withholds passwords from this one too.
	}
	if err := r.judgeHostKey(remote, status, plain, offending, otherTypes); err != nil {
		return err
	}
	r.d.pin(r.hostPin, plain)
	return nil
}

// pinMismatch refuses a connection whose key is not the one the host's
// first connection presented, loudly: the pool may go on without it, and
// the user must still learn that someone answered in the host's name
// (once for each key, not for each of the pool's connections).
func (r *dialRun) pinMismatch(pinned, key ssh.PublicKey) error {
	display := r.kh.display
	if r.d.firstRefusal(r.hostPin, key) {
		r.warnMismatch(pinned, key)
	}
	return &Error{
		Op:   "verify host key of",
		Host: display,
		Err: fmt.Errorf("the %s key %s is not the %s key %s this run's first connection presented; host key verification failed",
			keyTypeName(key), ssh.FingerprintSHA256(key), keyTypeName(pinned), ssh.FingerprintSHA256(pinned)),
		Hint: "every connection to one host must present the same key: someone may be intercepting connections; if the host's key has just been replaced, run again",
	}
}

func (r *dialRun) warnMismatch(pinned, key ssh.PublicKey) {
	r.o.warnf("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"+
		"@    WARNING: HOST KEY DIFFERS BETWEEN CONNECTIONS!       @\n"+
		"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"+
		"A connection to %s presented the %s key\n%s,\n"+
		"but the first connection of this run presented the %s key\n%s.\n"+
		"Someone may be intercepting connections to this host: such connections are refused.",
		r.kh.display, keyTypeName(key), ssh.FingerprintSHA256(key), keyTypeName(pinned), ssh.FingerprintSHA256(pinned))
}

// judgeHostKey decides on the host's first connection (or a changed key
// pinned by it), by known_hosts and StrictHostKeyChecking, as OpenSSH.
func (r *dialRun) judgeHostKey(remote net.Addr, status hostKeyStatus, plain ssh.PublicKey, offending []knownKey, otherTypes bool) error {
	kh, o, strict := r.kh, r.o, r.cfg.StrictHostKeyChecking
	switch status {
	case hostOK:
		o.logf("host %s found in known_hosts", kh.display)
		return nil
	case hostChanged:
		o.warnf("%s", changedWarning(kh.display, plain, offending))
		if strict == "no" {
			o.warnf("Password authentication is disabled to avoid man-in-the-middle attacks.\n" +
				"Keyboard-interactive authentication is disabled to avoid man-in-the-middle attacks.")
			r.noPasswords = true
			return nil
		}
		return &Error{
			Op:   "verify host key of",
			Host: kh.display,
			Err: fmt.Errorf("REMOTE HOST IDENTIFICATION HAS CHANGED: the %s key is %s, offending key in %s:%d; host key verification failed",
				keyTypeName(plain), ssh.FingerprintSHA256(plain), offending[0].file, offending[0].line),
			Hint: fmt.Sprintf("if the host key really changed, remove the old one with: ssh-keygen -f %q -R %q", offending[0].file, kh.display),
		}
	}

	switch strict {
	case "accept-new", "no":
		return r.addHostKey(plain)
	case "ask":
		if r.canPrompt {
			return r.askHostKey(remote, plain, otherTypes)
		}
	}
	return r.unknownHostError(plain)
}

func (r *dialRun) unknownHostError(key ssh.PublicKey) *Error {
	scan := "ssh-keyscan " + r.cfg.HostName
	if r.cfg.Port != 22 {
		scan = fmt.Sprintf("ssh-keyscan -p %d %s", r.cfg.Port, r.cfg.HostName)
	}
	file := "~/.ssh/known_hosts"
	if len(r.cfg.UserKnownHostsFiles) > 0 {
		file = r.cfg.UserKnownHostsFiles[0]
	}
	return &Error{
		Op:   "verify host key of",
		Host: r.kh.display,
		Err: fmt.Errorf("no %s host key is known for %s and strict checking is on (server's key: %s); host key verification failed",
			keyTypeName(key), r.kh.display, ssh.FingerprintSHA256(key)),
		Hint: fmt.Sprintf("check the fingerprint, then add the key with `%s >> %s`, or connect once with -o StrictHostKeyChecking=accept-new", scan, file),
	}
}

// askHostKey asks the user about an unknown host key, as ssh does.
func (r *dialRun) askHostKey(remote net.Addr, key ssh.PublicKey, otherTypes bool) error {
	if r.d.declined(r.hostPin, key) {
		return &Error{Op: "verify host key of", Host: r.kh.display,
			Err: fmt.Errorf("%s host key %s declined earlier in this run; host key verification failed", keyTypeName(key), ssh.FingerprintSHA256(key))}
	}
	if err := r.acquirePrompt(); err != nil {
		return &Error{Op: "verify host key of", Host: r.kh.display, Err: err}
	}
	ip := "no hostip for proxy command"
	if ta, ok := remote.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		ip = ta.IP.String()
		if r.cfg.Port != 22 {
			ip = fmt.Sprintf("[%s]:%d", ta.IP, r.cfg.Port)
		}
	}
	fp := ssh.FingerprintSHA256(key)
	prompt := fmt.Sprintf("The authenticity of host '%s (%s)' can't be established.\n%s key fingerprint is %s.\n",
		r.kh.display, ip, keyTypeName(key), fp)
	if otherTypes {
		prompt += "Keys of other types are already known for this host.\n"
	}
	prompt += "Are you sure you want to continue connecting (yes/no/[fingerprint])? "
	for {
		ans, err := r.o.Prompter.ReadLine(prompt)
		ans = strings.TrimSpace(ans)
		switch {
		case err != nil || ans == "" || strings.EqualFold(ans, "no"):
			r.d.decline(r.hostPin, key)
			return &Error{Op: "verify host key of", Host: r.kh.display,
				Err: errors.New("host key not accepted; host key verification failed")}
		case strings.EqualFold(ans, "yes") || ans == fp:
			return r.addHostKey(key)
		}
		prompt = "Please type 'yes', 'no' or the fingerprint: "
	}
}

// addHostKey records key in the first UserKnownHostsFile. Failing to
// write is a warning, as in OpenSSH: this connection goes on, and the
// Dialer's pin holds the key for the others.
func (r *dialRun) addHostKey(key ssh.PublicKey) error {
	d := r.d
	d.knownHosts.Lock()
	defer d.knownHosts.Unlock()
	file := ""
	if len(r.cfg.UserKnownHostsFiles) > 0 {
		file = r.cfg.UserKnownHostsFiles[0]
	}
	if err := appendKnownHost(file, r.kh.display, key, r.cfg.HashKnownHosts); err != nil {
		r.o.warnf("Failed to add the host to the list of known hosts: %v", err)
		return nil
	}
	r.o.warnf("Warning: Permanently added '%s' (%s) to the list of known hosts.", r.kh.display, keyTypeName(key))
	return nil
}
