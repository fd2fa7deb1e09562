// Package vis makes text safe to print on a terminal: names and messages
// that come from a server, or from a file system, may hold escape
// sequences, carriage returns or invalid UTF-8 that would rewrite the
// user's screen or hide what is printed. As OpenSSH's strnvis with
// VIS_SAFE|VIS_OCTAL|VIS_NOSLASH does, each byte of a character a
// terminal would not print as text becomes \ooo; printable UTF-8 stays
// as it is, and so does the backslash, so that escaping twice changes
// nothing.
package vis

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// String escapes s for a line of output: every control character,
// newlines and tabs among them, invalid UTF-8 and invisible format
// characters.
func String(s string) string { return escape(s, false) }

// Text escapes s as String does but keeps its newlines and tabs, for text
// of several lines, such as a server's banner.
func Text(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !safe(r, n, lines) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s // the common case: nothing to escape, nothing allocated
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if safe(r, n, lines) {
			b.WriteString(s[i : i+n])
		} else {
			for _, c := range []byte(s[i : i+n]) {
				b.WriteByte('\\')
				b.WriteByte('0' + c>>6)
				b.WriteByte('0' + c>>3&7)
				b.WriteByte('0' + c&7)
			}
		}
		i += n
	}
	return b.String()
}

func safe(r rune, n int, lines bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return false
	case lines && (r == '\n' || r == '\t'):
		return true
	}
	return unicode.IsPrint(r)
}
