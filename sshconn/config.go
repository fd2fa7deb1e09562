package sshconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// Config is the effective configuration for one destination after
// ssh_config resolution.
type Config struct {
	// Host is the name given on the command line (the alias).
	Host     string
	HostName string
	Port     int
	User     string
	// IdentityFiles are tilde- and token-expanded, command-line ones first.
	IdentityFiles  []string
	IdentitiesOnly bool
	// IdentityAgent is the agent socket: SSH_AUTH_SOCK unless configured;
	// "none" or "" disables the agent.
	IdentityAgent string
	// ProxyJump is "" or "none" for a direct connection.
	ProxyJump string
	// ProxyCommand is "" or "none" for a direct connection.
	ProxyCommand          string
	UserKnownHostsFiles   []string
	GlobalKnownHostsFiles []string
	// StrictHostKeyChecking is "yes", "accept-new", "no" or "ask".
	StrictHostKeyChecking string
	HashKnownHosts        bool
	HostKeyAlias          string
	// ConnectTimeout bounds a dial, from the TCP connect to the end of
	// authentication; 0 is unset, and Dial uses DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Ciphers is the configured cipher list; nil when neither the
	// configuration nor -c set one, and hpncp picks its own preference.
	Ciphers []string
	// HostKeyAlgorithms is the configured host key algorithm order; the
	// algorithms of keys already known for the host go first at dial time.
	HostKeyAlgorithms []string
	// ServerAliveInterval is as configured (or as `ssh -G` reports it);
	// the keepalives run at DefaultServerAliveInterval when it is unset.
	ServerAliveInterval time.Duration
	ServerAliveCountMax int
	BatchMode           bool
	// AddressFamily is "any", "inet" or "inet6".
	AddressFamily                string
	PasswordAuthentication       bool
	KbdInteractiveAuthentication bool
	PubkeyAuthentication         bool
	NumberOfPasswordPrompts      int
	// PreferredAuthentications is the configured method order, or nil for
	// OpenSSH's default (publickey, keyboard-interactive, password).
	PreferredAuthentications []string
	// SendEnv are the patterns of local environment variables to pass to
	// the server; SetEnv are NAME=VALUE pairs to set there. See
	// Environment.
	SendEnv []string
	SetEnv  []string
	// Source says where the configuration came from ("ssh -G" or the
	// built-in parser), for -v.
	Source string
}

// openSSHDefaultCiphers is OpenSSH's default client cipher list: when -G
// reports exactly this list the user did not choose, and hpncp's own
// preference applies.
const openSSHDefaultCiphers = "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com"

// openSSHDefaultHostKeyAlgorithms is OpenSSH 9's default order, so that
// the key hpncp records for a new host is the type ssh would record.
const openSSHDefaultHostKeyAlgorithms = "ssh-ed25519-cert-v01@openssh.com,ecdsa-sha2-nistp256-cert-v01@openssh.com," +
	"ecdsa-sha2-nistp384-cert-v01@openssh.com,ecdsa-sha2-nistp521-cert-v01@openssh.com," +
	"sk-ssh-ed25519-cert-v01@openssh.com,sk-ecdsa-sha2-nistp256-cert-v01@openssh.com," +
	"rsa-sha2-512-cert-v01@openssh.com,rsa-sha2-256-cert-v01@openssh.com," +
	"ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521," +
	"sk-ssh-ed25519@openssh.com,sk-ecdsa-sha2-nistp256@openssh.com,rsa-sha2-512,rsa-sha2-256"

var defaultIdentityFiles = []string{
	"~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
	"~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa",
}

// forceFallback makes Resolve use the built-in parser even when ssh is
// installed, so tests can compare both paths.
var forceFallback bool

// Resolve returns the effective config for host, as OpenSSH would use it:
// the answer of `ssh -G` when ssh is on PATH, otherwise the built-in parser
// over the same files with OpenSSH's defaults.
func Resolve(ctx context.Context, host string, o Options) (*Config, error) {
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		if o.User == "" {
			o.User = host[:at]
		}
		host = host[at+1:]
	}
	if host == "" || strings.HasPrefix(host, "-") || strings.ContainsAny(host, " \t\r\n") {
		return nil, &Error{Op: "resolve host", Host: fmt.Sprintf("%q", host), Err: errors.New("invalid host name")}
	}
	explicit := existingIdentities(&o)

	var vals map[string][]string
	var source string
	sshPath, lookErr := exec.LookPath("ssh")
	if lookErr == nil && !forceFallback {
		v, err := sshG(ctx, sshPath, host, o)
		switch {
		case errors.Is(err, errNoDashG):
			o.logf("%s does not support -G; using the built-in ssh_config parser", sshPath)
		case err != nil:
			return nil, err
		default:
			vals, source = v, "ssh -G"
		}
	}
	if vals == nil {
		v, err := fallbackValues(host, o, explicit)
		if err != nil {
			return nil, &Error{Op: "read ssh config for", Host: host, Err: err}
		}
		vals, source = v, "built-in ssh_config parser"
	}
	cfg, err := buildConfig(host, vals)
	if err != nil {
		return nil, &Error{Op: "read ssh config for", Host: host, Err: err}
	}
	cfg.Source = source
	o.logf("configuration for %s from %s: %s@%s port %d", host, source, cfg.User, cfg.HostName, cfg.Port)
	return cfg, nil
}

// existingIdentities returns the -i files that exist, tilde-expanded, and
// warns about the others as ssh does ("Identity file ... not accessible").
func existingIdentities(o *Options) []string {
	var ok []string
	for _, id := range o.Identities {
		p, err := expandTilde(id)
		if err == nil {
			_, err = os.Stat(p)
		}
		if err != nil {
			o.warnf("Warning: Identity file %s not accessible: %v.", id, unwrapPathError(err))
			continue
		}
		ok = append(ok, p)
	}
	return ok
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// errNoDashG means ssh predates -G (OpenSSH 6.8) or is not OpenSSH.
var errNoDashG = errors.New("ssh does not support -G")

// sshG runs `ssh -G` with the same inputs ssh itself would get and returns
// its key/value answer.
func sshG(ctx context.Context, sshPath, host string, o Options) (map[string][]string, error) {
	args := []string{"-G"}
	if o.ConfigFile != "" {
		args = append(args, "-F", o.ConfigFile)
	}
	if o.BatchMode {
		args = append(args, "-o", "BatchMode=yes")
	}
	for _, opt := range o.Options {
		args = append(args, "-o", opt)
	}
	if o.Port != 0 {
		args = append(args, "-p", strconv.Itoa(o.Port))
	}
	if o.User != "" {
		args = append(args, "-l", o.User)
	}
	for _, id := range o.Identities {
		args = append(args, "-i", id)
	}
	if o.JumpHosts != "" {
		args = append(args, "-J", o.JumpHosts)
	}
	if o.Ciphers != "" {
		args = append(args, "-c", o.Ciphers)
	}
	switch o.AddressFamily {
	case "inet":
		args = append(args, "-4")
	case "inet6":
		args = append(args, "-6")
	}
	args = append(args, "--", host)

	cmd := exec.CommandContext(ctx, sshPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, &Error{Op: "read ssh config for", Host: host, Err: ctx.Err()}
		}
		if strings.Contains(stderr.String(), "option -- G") || strings.Contains(stderr.String(), "option -- 'G'") {
			return nil, errNoDashG
		}
		msg := sshGMessage(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, &Error{Op: "read ssh config for", Host: host, Err: fmt.Errorf("ssh -G: %s", msg),
			Hint: "check the -o options and the ssh_config files (-F)"}
	}
	return parseSSHG(stdout.Bytes()), nil
}

// parseSSHG reads the "key value" lines `ssh -G` prints, keys lowercased,
// the values of a repeated key in order.
func parseSSHG(out []byte) map[string][]string {
	vals := make(map[string][]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		if key == "" {
			continue
		}
		key = strings.ToLower(key)
		vals[key] = append(vals[key], val)
	}
	return vals
}

// sshGMessage keeps ssh's own error lines and drops its chatter, such as
// the warnings ssh prints for -i files that do not exist (Resolve reports
// those itself).
func sshGMessage(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "Warning: Identity file") || strings.HasPrefix(l, "Pseudo-terminal") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "; ")
}

// fallbackValues resolves the configuration with the built-in parser and
// returns it in the shape `ssh -G` prints: lowercase keys, OpenSSH's
// defaults filled in, file names expanded (IdentityFile excepted, as -G).
func fallbackValues(host string, o Options, explicitIdentities []string) (map[string][]string, error) {
	var files []*ssh_config.Config
	var names []string
	switch o.ConfigFile {
	case "none":
	case "":
		_, home := localUser()
		names = []string{filepath.Join(home, ".ssh", "config"), "/etc/ssh/ssh_config"}
	default:
		names = []string{o.ConfigFile}
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			if o.ConfigFile == "" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		cfg, err := ssh_config.DecodeBytes(data)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		files = append(files, cfg)
	}

	// Command-line flags come first, then -o in order, then the files: the
	// first value of a key wins.
	var cmdline [][2]string
	add := func(k, v string) { cmdline = append(cmdline, [2]string{strings.ToLower(k), v}) }
	if o.BatchMode {
		add("batchmode", "yes")
	}
	if o.Port != 0 {
		add("port", strconv.Itoa(o.Port))
	}
	if o.User != "" {
		add("user", o.User)
	}
	if o.JumpHosts != "" {
		add("proxyjump", o.JumpHosts)
	}
	if o.Ciphers != "" {
		add("ciphers", o.Ciphers)
	}
	switch o.AddressFamily {
	case "inet", "inet6":
		add("addressfamily", o.AddressFamily)
	}
	for _, id := range explicitIdentities {
		add("identityfile", id)
	}
	for _, opt := range o.Options {
		k, v, err := splitOption(opt)
		if err != nil {
			return nil, err
		}
		add(k, v)
	}

	// ChallengeResponseAuthentication is the old name of
	// KbdInteractiveAuthentication; both spellings still work.
	spellings := func(key string) []string {
		if key == "kbdinteractiveauthentication" {
			return []string{key, "challengeresponseauthentication"}
		}
		return []string{key}
	}
	get := func(key string) (string, bool) {
		for _, kv := range cmdline {
			if slices.Contains(spellings(key), kv[0]) {
				return kv[1], true
			}
		}
		for _, f := range files {
			for _, k := range spellings(key) {
				if v, err := f.Get(host, k); err == nil && v != "" {
					return v, true
				}
			}
		}
		return "", false
	}
	getAll := func(key string) []string {
		var all []string
		for _, kv := range cmdline {
			if kv[0] == key {
				all = append(all, kv[1])
			}
		}
		for _, f := range files {
			if v, err := f.GetAll(host, key); err == nil {
				all = append(all, v...)
			}
		}
		return all
	}
	or := func(key, def string) string {
		if v, ok := get(key); ok {
			return v
		}
		return def
	}

	localName, _ := localUser()
	vals := make(map[string][]string)
	set := func(k, v string) { vals[k] = []string{v} }

	hostname := or("hostname", host)
	hostname, err := tokens{'%': "%", 'h': host}.expand(hostname)
	if err != nil {
		return nil, fmt.Errorf("HostName: %w", err)
	}
	set("hostname", hostname)
	set("port", or("port", "22"))
	set("user", or("user", localName))
	port, err := strconv.Atoi(vals["port"][0])
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("bad port %q", vals["port"][0])
	}
	alias := or("hostkeyalias", "")
	tok := newTokens(host, hostname, port, vals["user"][0], alias)
	if alias != "" {
		set("hostkeyalias", alias)
	}

	ids := getAll("identityfile")
	if len(ids) == 0 {
		ids = defaultIdentityFiles
	}
	vals["identityfile"] = ids

	for _, k := range []string{"userknownhostsfile", "globalknownhostsfile"} {
		def := "~/.ssh/known_hosts ~/.ssh/known_hosts2"
		if k == "globalknownhostsfile" {
			def = "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2"
		}
		var out []string
		for _, f := range strings.Fields(or(k, def)) {
			p, err := tok.expandPath(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out = append(out, p)
		}
		set(k, strings.Join(out, " "))
	}
	if v, ok := get("identityagent"); ok {
		if v != "none" && v != "SSH_AUTH_SOCK" && !strings.HasPrefix(v, "$") {
			if v, err = tok.expandPath(v); err != nil {
				return nil, fmt.Errorf("IdentityAgent: %w", err)
			}
		}
		set("identityagent", v)
	}
	for _, k := range []string{"proxyjump", "proxycommand", "preferredauthentications"} {
		if v, ok := get(k); ok {
			set(k, v)
		}
	}
	if send := sendEnvValue(getAll("sendenv")); len(send) > 0 {
		vals["sendenv"] = send
	}
	if v, ok := get("setenv"); ok {
		env, err := setEnvValue(v)
		if err != nil {
			return nil, err
		}
		vals["setenv"] = env
	}
	set("stricthostkeychecking", or("stricthostkeychecking", "ask"))
	set("hashknownhosts", or("hashknownhosts", "no"))
	set("connecttimeout", or("connecttimeout", "none"))
	set("serveraliveinterval", or("serveraliveinterval", "0"))
	set("serveralivecountmax", or("serveralivecountmax", "3"))
	set("batchmode", or("batchmode", "no"))
	set("addressfamily", or("addressfamily", "any"))
	set("identitiesonly", or("identitiesonly", "no"))
	set("passwordauthentication", or("passwordauthentication", "yes"))
	set("kbdinteractiveauthentication", or("kbdinteractiveauthentication", "yes"))
	set("pubkeyauthentication", or("pubkeyauthentication", "yes"))
	set("numberofpasswordprompts", or("numberofpasswordprompts", "3"))
	ciphers, err := applyAlgoSpec("Ciphers", or("ciphers", ""), openSSHDefaultCiphers)
	if err != nil {
		return nil, err
	}
	set("ciphers", strings.Join(ciphers, ","))
	hka, err := applyAlgoSpec("HostKeyAlgorithms", or("hostkeyalgorithms", ""), openSSHDefaultHostKeyAlgorithms)
	if err != nil {
		return nil, err
	}
	set("hostkeyalgorithms", strings.Join(hka, ","))
	return vals, nil
}

// splitOption splits a -o argument: "Key=Value", "Key Value" or
// "Key = Value".
func splitOption(opt string) (key, val string, err error) {
	opt = strings.TrimSpace(opt)
	i := strings.IndexAny(opt, "= \t")
	if i <= 0 {
		return "", "", fmt.Errorf("-o %q: want Key=Value", opt)
	}
	key, val = opt[:i], strings.TrimLeft(opt[i:], " \t")
	val = strings.TrimPrefix(val, "=")
	val = strings.Trim(strings.TrimSpace(val), `"`)
	if val == "" {
		return "", "", fmt.Errorf("-o %q: missing value", opt)
	}
	return key, val, nil
}

// applyAlgoSpec applies OpenSSH's algorithm list syntax (a list, or +list
// to append, -list to remove, ^list to prepend) to the default list.
func applyAlgoSpec(key, spec, defaults string) ([]string, error) {
	def := strings.Split(defaults, ",")
	if spec == "" {
		return def, nil
	}
	list := strings.Split(spec[1:], ",")
	switch spec[0] {
	case '+':
		return append(def, list...), nil
	case '^':
		return append(list, def...), nil
	case '-':
		var out []string
		for _, c := range def {
			if !slices.ContainsFunc(list, func(p string) bool {
				m, _ := filepath.Match(p, c)
				return m
			}) {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s %q removes every algorithm", key, spec)
		}
		return out, nil
	}
	return strings.Split(spec, ","), nil
}

// buildConfig turns `ssh -G`-shaped values into a Config.
func buildConfig(host string, vals map[string][]string) (*Config, error) {
	one := func(k string) string {
		if v := vals[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	c := &Config{
		Host:          host,
		HostName:      one("hostname"),
		User:          one("user"),
		HostKeyAlias:  one("hostkeyalias"),
		ProxyJump:     one("proxyjump"),
		ProxyCommand:  one("proxycommand"),
		AddressFamily: one("addressfamily"),
	}
	if c.HostName == "" {
		c.HostName = host
	}
	if c.AddressFamily == "" {
		c.AddressFamily = "any"
	}
	var err error
	if c.Port, err = strconv.Atoi(one("port")); err != nil || c.Port <= 0 || c.Port > 65535 {
		return nil, fmt.Errorf("bad port %q", one("port"))
	}
	if c.User == "" {
		c.User, _ = localUser()
	}

	tok := newTokens(host, c.HostName, c.Port, c.User, c.HostKeyAlias)
	for _, f := range vals["identityfile"] {
		p, err := tok.expandPath(f)
		if err != nil {
			return nil, fmt.Errorf("IdentityFile: %w", err)
		}
		if !slices.Contains(c.IdentityFiles, p) {
			c.IdentityFiles = append(c.IdentityFiles, p)
		}
	}
	c.UserKnownHostsFiles = strings.Fields(one("userknownhostsfile"))
	c.GlobalKnownHostsFiles = strings.Fields(one("globalknownhostsfile"))

	switch a := one("identityagent"); {
	case a == "" || a == "SSH_AUTH_SOCK":
		c.IdentityAgent = os.Getenv("SSH_AUTH_SOCK")
	case strings.HasPrefix(a, "$"):
		c.IdentityAgent = os.Getenv(a[1:])
	default:
		c.IdentityAgent = a
	}

	switch v := strings.ToLower(one("stricthostkeychecking")); v {
	case "yes", "true":
		c.StrictHostKeyChecking = "yes"
	case "no", "false", "off":
		c.StrictHostKeyChecking = "no"
	case "accept-new", "ask":
		c.StrictHostKeyChecking = v
	case "":
		c.StrictHostKeyChecking = "ask"
	default:
		return nil, fmt.Errorf("StrictHostKeyChecking: unsupported value %q", v)
	}

	bools := []struct {
		key string
		dst *bool
	}{
		{"hashknownhosts", &c.HashKnownHosts},
		{"batchmode", &c.BatchMode},
		{"identitiesonly", &c.IdentitiesOnly},
		{"passwordauthentication", &c.PasswordAuthentication},
		{"kbdinteractiveauthentication", &c.KbdInteractiveAuthentication},
	}
	for _, b := range bools {
		v := one(b.key)
		if v == "" {
			continue
		}
		if *b.dst, err = parseYesNo(b.key, v); err != nil {
			return nil, err
		}
	}
	// PubkeyAuthentication also takes "unbound" and "host-bound" (OpenSSH
	// 8.9+), both of which mean yes.
	c.PubkeyAuthentication = true
	if v := strings.ToLower(one("pubkeyauthentication")); v == "no" || v == "false" {
		c.PubkeyAuthentication = false
	}

	if v := one("connecttimeout"); v != "" && v != "none" {
		if c.ConnectTimeout, err = parseTime(v); err != nil {
			return nil, fmt.Errorf("ConnectTimeout: %w", err)
		}
	}
	if v := one("serveraliveinterval"); v != "" {
		if c.ServerAliveInterval, err = parseTime(v); err != nil {
			return nil, fmt.Errorf("ServerAliveInterval: %w", err)
		}
	}
	c.ServerAliveCountMax = 3
	if v := one("serveralivecountmax"); v != "" {
		if c.ServerAliveCountMax, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("ServerAliveCountMax: bad value %q", v)
		}
	}
	c.NumberOfPasswordPrompts = 3
	if v := one("numberofpasswordprompts"); v != "" {
		if c.NumberOfPasswordPrompts, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("NumberOfPasswordPrompts: bad value %q", v)
		}
	}
	if v := one("ciphers"); v != "" && v != openSSHDefaultCiphers {
		c.Ciphers = strings.Split(v, ",")
	}
	hka := one("hostkeyalgorithms")
	if hka == "" {
		hka = openSSHDefaultHostKeyAlgorithms
	}
	c.HostKeyAlgorithms = strings.Split(hka, ",")
	if v := one("preferredauthentications"); v != "" {
		c.PreferredAuthentications = strings.Split(v, ",")
	}
	c.SendEnv = slices.Clone(vals["sendenv"])
	c.SetEnv = slices.Clone(vals["setenv"])
	return c, nil
}

// clone returns a copy that shares no slices with c.
func (c *Config) clone() *Config {
	n := *c
	n.IdentityFiles = slices.Clone(c.IdentityFiles)
	n.UserKnownHostsFiles = slices.Clone(c.UserKnownHostsFiles)
	n.GlobalKnownHostsFiles = slices.Clone(c.GlobalKnownHostsFiles)
	n.Ciphers = slices.Clone(c.Ciphers)
	n.HostKeyAlgorithms = slices.Clone(c.HostKeyAlgorithms)
	n.PreferredAuthentications = slices.Clone(c.PreferredAuthentications)
	n.SendEnv = slices.Clone(c.SendEnv)
	n.SetEnv = slices.Clone(c.SetEnv)
	return &n
}

// isDefaultIdentity reports whether path is one of OpenSSH's default
// identity files, which are skipped silently when missing.
func isDefaultIdentity(path string) bool {
	for _, d := range defaultIdentityFiles {
		if p, err := expandTilde(d); err == nil && p == path {
			return true
		}
	}
	return false
}
