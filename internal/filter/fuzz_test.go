package filter

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// FuzzMatch feeds patterns and paths to the rules: nothing may panic or
// take long, and where a simple reference can say what rsync does, the
// answer must be the same. The references are written from the man page's
// description, not from the matcher: a pattern without wildcards is a
// plain comparison of names; an ASCII pattern made of "*", "**", "?" and
// escapes is a regular expression.
func FuzzMatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, pat, path string, dir bool) {
		var loose Rules
		_ = loose.Add(pat) // any rule text: an error is fine, a panic is not
		_ = loose.Exclude(pat)
		loose.Excluded(path, dir)
		// A helper's walk is told the rules by their Lines: each must
		// come back as the same rule.
		back, err := Prune{Rules: loose.Lines()}.Compile()
		if err != nil {
			t.Fatalf("rules %q: Lines do not compile again: %v", loose.Lines(), err)
		}
		if got, want := back.String(), loose.String(); got != want {
			t.Fatalf("rules from Lines %q, want %q", got, want)
		}
		if back.Excluded(path, dir) != loose.Excluded(path, dir) {
			t.Fatalf("rules %q from their Lines decide %q otherwise", loose.Lines(), path)
		}

		if pat == "" || !cleanPath(path) {
			return
		}
		var r Rules
		if err := r.Add("- " + pat); err != nil {
			t.Fatalf("Add(%q): %v", "- "+pat, err)
		}
		start := time.Now()
		got := r.Excluded(path, dir)
		if d := time.Since(start); d > time.Second && len(pat)+len(path) < 10000 {
			t.Errorf("pattern %q against %q took %v", pat, path, d)
		}
		// The bit-mask matcher of short patterns must agree with the
		// general one that long patterns use.
		if ru := r.list[0]; ru.pat.masks != nil {
			slow := ru.pat
			slow.masks = nil
			if s := slow.matches(path, dir); s != got {
				t.Errorf("pattern %q, path %q, dir=%v: bit masks say %v, states say %v", pat, path, dir, got, s)
			}
		}
		want, ok := reference(pat, path, dir)
		if ok && got != want {
			t.Errorf("pattern %q, path %q, dir=%v: Excluded = %v, reference says %v", pat, path, dir, got, want)
		}
	})
}

// cleanPath reports whether p is a path a walk could produce: components
// that are not empty, no leading or trailing slash.
func cleanPath(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && !strings.HasSuffix(p, "/") && !strings.Contains(p, "//")
}

// reference says whether pattern pat matches path, for the patterns it
// knows; ok is false for the others.
func reference(pat, path string, dir bool) (match, ok bool) {
	dirOnly := len(pat) > 1 && strings.HasSuffix(pat, "/")
	if dirOnly {
		pat = pat[:len(pat)-1]
	}
	if dirOnly && !dir {
		return false, true
	}
	anchored := strings.HasPrefix(pat, "/")
	if !strings.ContainsAny(pat, "*?[") {
		// A plain name: the whole path when anchored, the last name
		// without a slash, the last names with one.
		switch {
		case anchored:
			return path == pat[1:], true
		case !strings.Contains(pat, "/"):
			return path[strings.LastIndexByte(path, '/')+1:] == pat, true
		default:
			return path == pat || strings.HasSuffix(path, "/"+pat), true
		}
	}
	if strings.Contains(pat, "[") || !ascii(pat) || !ascii(path) {
		return false, false
	}
	// The man page: a pattern with "**" or a slash is held against the
	// full path, and a trailing "***" lets a directory match as "dir/".
	// One without "**" cannot match across more slashes than it holds,
	// so "(^|/)" at the front picks the right tail in every case.
	re, valid := globRegexp(strings.TrimPrefix(pat, "/"))
	if !valid {
		return false, true
	}
	text := path
	if dir && strings.Contains(pat, "**") && strings.HasSuffix(pat, "***") {
		text += "/"
	}
	switch {
	case anchored:
		re = "^" + re + "$"
	case strings.HasPrefix(pat, "**"):
		re, text = "^"+re+"$", "/"+text
	default:
		re = "(^|/)" + re + "$"
	}
	return regexp.MustCompile("(?s)" + re).MatchString(text), true
}

// globRegexp translates a pattern of "*", "**", "?" and backslash escapes;
// valid is false for a trailing backslash, which escapes nothing and so
// matches nothing.
func globRegexp(pat string) (re string, valid bool) {
	var b strings.Builder
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '\\':
			if i+1 == len(pat) {
				return "", false
			}
			i++
			b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
		case '?':
			b.WriteString("[^/]")
		case '*':
			if i+1 < len(pat) && pat[i+1] == '*' {
				for i+1 < len(pat) && pat[i+1] == '*' {
					i++
				}
				b.WriteString(".*")
			} else {
				b.WriteString("[^/]*")
			}
		default:
			b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
		}
	}
	return b.String(), true
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// TestReferenceAgrees runs the fuzz references on cases whose answers
// rsync gave (see TestAgainstRsync), so that a wrong reference cannot pass
// the fuzz target off as a check.
func TestReferenceAgrees(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		dir, want bool
	}{
		{"a/***", "a", true, true},
		{"a/***", "a", false, false},
		{"dir/**", "dir", true, false},
		{"**/x/*.o", "x/a.o", false, true},
		{"x/*.o", "d/x/y/a.o", false, false},
		{"/a/*", "a/b/c", false, false},
		{"top", "a/top", false, true},
		{"b/c", "ab/c", false, false},
		{`star\*name.txt`, "star*name.txt", false, true},
		{`*\`, "a", false, false},
		{"sub/", "sub", false, false},
	} {
		want, ok := reference(c.pat, c.path, c.dir)
		if !ok || want != c.want {
			t.Errorf("reference(%q, %q, %v) = %v, %v; want %v, true", c.pat, c.path, c.dir, want, ok, c.want)
		}
	}
}
