package transfer

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Location is one operand of the command line: a local path, or a path on a
// remote host.
type Location struct {
	User string // "" when the operand names none
	Host string // "" for a local path
	Port int    // from an scp:// URI; 0 when not given
	Path string
}

// Remote reports whether the location is on another host.
func (l Location) Remote() bool { return l.Host != "" }

func (l Location) String() string {
	if !l.Remote() {
		return l.Path
	}
	return l.HostLabel() + l.Path
}

// HostLabel names the host as the user wrote it, with a trailing colon:
// the prefix messages put before a remote path.
func (l Location) HostLabel() string {
	h := l.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if l.User != "" {
		h = l.User + "@" + h
	}
	return h + ":"
}

// ParseLocation splits an operand as scp does: "[user@]host:path",
// "[user@][v6addr]:path", "scp://[user@]host[:port][/path]", or else a local
// path. A colon after a slash, or a leading colon, leaves the operand local,
// so "./a:b" names a local file.
func ParseLocation(s string) (Location, error) {
	if strings.HasPrefix(s, "scp://") {
		return parseURI(s)
	}
	i := remoteColon(s)
	if i < 0 {
		return Location{Path: s}, nil
	}
	hostPart, path := s[:i], s[i+1:]
	if path == "" {
		path = "."
	}
	var user string
	if at := strings.LastIndexByte(hostPart, '@'); at >= 0 {
		user, hostPart = hostPart[:at], hostPart[at+1:]
	}
	host := strings.TrimSuffix(strings.TrimPrefix(hostPart, "["), "]")
	if host == "" {
		return Location{}, fmt.Errorf("%q: empty host name", s)
	}
	return Location{User: user, Host: host, Path: path}, nil
}

// remoteColon returns the index of the colon that separates host from path,
// or -1 when the operand is local. It follows scp's rule: the operand is
// remote only if a colon comes before any slash, with "[...]" shielding the
// colons of an IPv6 address.
func remoteColon(s string) int {
	if strings.HasPrefix(s, ":") {
		return -1
	}
	bracket := strings.HasPrefix(s, "[")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '@' && i+1 < len(s) && s[i+1] == '[':
			bracket = true
		case c == ']' && bracket && i+1 < len(s) && s[i+1] == ':':
			return i + 1
		case c == ':' && !bracket:
			return i
		case c == '/':
			return -1
		}
	}
	return -1
}

// parseURI reads scp://[user@]host[:port][/path]. As with OpenSSH, the path
// after the host's slash is relative to the remote home, so scp://h/d is
// ~/d and scp://h//tmp is /tmp.
func parseURI(s string) (Location, error) {
	shown := hidePassword(s)
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return Location{}, fmt.Errorf("%q: not a valid scp:// URI (want scp://[user@]host[:port][/path])", shown)
	}
	l := Location{Host: u.Hostname()}
	if u.User != nil {
		l.User = u.User.Username()
		if _, ok := u.User.Password(); ok {
			return Location{}, fmt.Errorf("%q: passwords in URIs are not accepted", shown)
		}
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Location{}, fmt.Errorf("%q: bad port %q", shown, p)
		}
		l.Port = n
	}
	l.Path = strings.TrimPrefix(u.Path, "/")
	if l.Path == "" {
		l.Path = "."
	}
	return l, nil
}

// hidePassword returns the scp:// URI s with the password of its user
// part, if any, replaced by "***", for messages: the command line is
// refused, but its error must not carry the password on to a terminal
// or a log.
func hidePassword(s string) string {
	rest := strings.TrimPrefix(s, "scp://")
	auth := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		auth = rest[:end]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return s
	}
	colon := strings.IndexByte(auth[:at], ':')
	if colon < 0 {
		return s
	}
	return "scp://" + auth[:colon+1] + "***" + rest[at:]
}
