package sshconn

import (
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// localUser returns the name and home directory of the user running hpncp,
// which OpenSSH uses as the default remote user and for ~ and %d.
func localUser() (name, home string) {
	if u, err := user.Current(); err == nil {
		name, home = u.Username, u.HomeDir
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if h, err := os.UserHomeDir(); err == nil && home == "" {
		home = h
	}
	return name, home
}

// expandTilde expands a leading ~ or ~user as OpenSSH's tilde_expand_filename
// does.
func expandTilde(path string) (string, error) {
	if !strings.HasPrefix(path, "~") {
		return path, nil
	}
	rest := path[1:]
	name, tail, _ := strings.Cut(rest, "/")
	var home string
	if name == "" {
		_, home = localUser()
		if home == "" {
			return "", fmt.Errorf("expand %q: home directory unknown", path)
		}
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return "", fmt.Errorf("expand %q: %w", path, err)
		}
		home = u.HomeDir
	}
	if tail == "" && !strings.Contains(rest, "/") {
		return home, nil
	}
	return filepath.Join(home, tail), nil
}

// tokens holds the values of OpenSSH's % tokens for one destination.
type tokens map[byte]string

func newTokens(alias, hostname string, port int, remoteUser, hostKeyAlias string) tokens {
	name, home := localUser()
	local, _ := os.Hostname()
	short, _, _ := strings.Cut(local, ".")
	k := hostKeyAlias
	if k == "" {
		k = hostname
	}
	return tokens{
		'%': "%",
		'd': home,
		'h': hostname,
		'i': strconv.Itoa(os.Getuid()),
		'k': k,
		'L': short,
		'l': local,
		'n': alias,
		'p': strconv.Itoa(port),
		'r': remoteUser,
		'u': name,
	}
}

// expand replaces % tokens; an unknown token is an error, as in OpenSSH.
func (t tokens) expand(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("expand %q: %% at end of string", s)
		}
		i++
		v, ok := t[s[i]]
		if !ok {
			return "", fmt.Errorf("expand %q: unknown token %%%c", s, s[i])
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// expandPath expands ~ and then % tokens in a file name, as OpenSSH does for
// IdentityFile, UserKnownHostsFile and IdentityAgent.
func (t tokens) expandPath(s string) (string, error) {
	s, err := expandTilde(s)
	if err != nil {
		return "", err
	}
	return t.expand(s)
}

// parseTime parses an OpenSSH time value ("30", "1m30s", "none" is handled
// by the caller); a bare number is seconds.
func parseTime(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty time value")
	}
	orig := s
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("invalid time value %q", s)
		}
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("invalid time value %q: %w", s, err)
		}
		unit := time.Second
		s = s[i:]
		if s != "" {
			switch s[0] {
			case 's', 'S':
			case 'm', 'M':
				unit = time.Minute
			case 'h', 'H':
				unit = time.Hour
			case 'd', 'D':
				unit = 24 * time.Hour
			case 'w', 'W':
				unit = 7 * 24 * time.Hour
			default:
				return 0, fmt.Errorf("invalid time unit in %q", s)
			}
			s = s[1:]
		}
		// OpenSSH takes no more than INT_MAX seconds in all; past that a
		// Duration would also wrap around to a negative time.
		if time.Duration(n) > (maxTime-total)/unit {
			return 0, fmt.Errorf("invalid time value %q: more than %d seconds", orig, int64(maxTime/time.Second))
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// maxTime is the longest time OpenSSH's configuration takes.
const maxTime = math.MaxInt32 * time.Second

// parseYesNo parses OpenSSH's booleans; -G prints some as true/false.
func parseYesNo(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: invalid value %q (want yes or no)", key, v)
}
