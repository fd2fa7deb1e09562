package sshconn

import (
	"fmt"
	"slices"
	"strings"
)

// Environment returns the variables a session to this destination passes
// to the server, in the order ssh sends them: each variable of environ
// ("NAME=value" strings, as os.Environ returns) whose name matches a
// SendEnv pattern, then SetEnv's. The server decides which it accepts
// (sshd's AcceptEnv).
func (c *Config) Environment(environ []string) [][2]string {
	var out [][2]string
	if len(c.SendEnv) > 0 {
		for _, kv := range environ {
			name, val, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				continue
			}
			if slices.ContainsFunc(c.SendEnv, func(p string) bool { return matchPattern(name, p) }) {
				out = append(out, [2]string{name, val})
			}
		}
	}
	for _, kv := range c.SetEnv {
		if name, val, ok := strings.Cut(kv, "="); ok && name != "" {
			out = append(out, [2]string{name, val})
		}
	}
	return out
}

// matchPattern is OpenSSH's match_pattern: '*' matches any run of
// characters, '?' any one character, everything else itself.
func matchPattern(s, pattern string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			pattern = strings.TrimLeft(pattern, "*")
			if pattern == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if matchPattern(s[i:], pattern) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
		}
		s, pattern = s[1:], pattern[1:]
	}
	return s == ""
}

// sendEnvValue folds SendEnv lines, in the order ssh reads them, into the
// list ssh -G prints: patterns accumulate, and "-pattern" (OpenSSH 8.7+)
// removes the patterns read so far that it matches.
func sendEnvValue(lines []string) []string {
	var out []string
	for _, l := range lines {
		for _, p := range strings.Fields(l) {
			if rm, ok := strings.CutPrefix(p, "-"); ok {
				out = slices.DeleteFunc(out, func(s string) bool { return matchPattern(s, rm) })
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// setEnvValue parses the SetEnv line that applies (ssh uses the first one
// it reads) into the NAME=VALUE list ssh -G prints: quotes group words, a
// backslash escapes the next character, and a name given twice keeps its
// first value.
func setEnvValue(line string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, w := range splitWords(line) {
		name, _, ok := strings.Cut(w, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("SetEnv %q: want NAME=VALUE", w)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, w)
	}
	return out, nil
}

// splitWords splits s at unquoted blanks as OpenSSH's argv_split does. An
// unterminated quote runs to the end: -o values reach here with their
// outer quotes already trimmed.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && quote != '\'':
			i++
			cur.WriteByte(s[i])
			inWord = true
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote = c
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// SplitWords splits a command line as OpenSSH splits one (an rsync -e
// command, for hpncp sync, which rsync splits the same way).
func SplitWords(s string) []string { return splitWords(s) }
