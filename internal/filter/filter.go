// Package filter holds rsync's include and exclude rules (--exclude,
// --include, --exclude-from, --include-from and the "+"/"-" rules of
// --filter) and decides, as rsync 3.5 does, whether a path of a transfer is
// excluded. It matches names only; walking a tree is the caller's job.
//
// The rules are tried in the order they were given and the first whose
// pattern matches decides; a path no rule matches is included. A pattern
// that begins with "/" is anchored at the transfer root; one without a
// slash matches a path's last component; one with an inner slash matches
// the path's last components, at component boundaries, or, when it holds
// "**", any tail that starts after a slash. A trailing "/" makes a rule
// match directories only. "*" matches within one component, "**" across
// components, "?" one byte other than "/", "[...]" one byte of a class
// (ranges, "[!...]" and "[^...]", "[:alpha:]" and its kin), and a
// backslash escapes the next byte, but only in a pattern that holds a
// wildcard: without one, a backslash is an ordinary byte, as in rsync. A
// pattern ending in "/***" matches the directory itself and everything
// below it. Like rsync's, the matcher works on bytes: "?" matches one byte
// of a multibyte UTF-8 name, not one character.
package filter

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Rules is an ordered list of include and exclude rules. The zero value
// excludes nothing. A Rules is built by one goroutine; once built, Excluded
// may be called from many at once.
type Rules struct {
	list []rule
}

type rule struct {
	include bool // a "+" rule: a match includes the path
	negate  bool // the "!" modifier: the rule applies where the pattern does not match
	pat     pattern
	raw     string // the pattern as given, for String
}

// Exclude adds an exclude rule, as rsync's --exclude does: the pattern may
// begin with "+ " or "- " to make it an include or an exclude rule, and a
// lone "!" clears the rules added so far.
func (r *Rules) Exclude(pattern string) error {
	return r.addOld(pattern, false)
}

// Include adds an include rule, as rsync's --include does, with the same
// prefixes as Exclude.
func (r *Rules) Include(pattern string) error {
	return r.addOld(pattern, true)
}

// addOld reads a pattern of --exclude, --include or their -from files,
// where rsync takes "+ " and "- " as the only prefixes and "!" alone as a
// clear. Unlike rsync, which ignores an empty --exclude, an empty pattern
// is an error: it is almost always a shell variable that was not set.
func (r *Rules) addOld(text string, include bool) error {
	if text == "!" {
		r.list = nil
		return nil
	}
	pat := text
	if len(pat) >= 2 && pat[1] == ' ' && (pat[0] == '+' || pat[0] == '-') {
		include = pat[0] == '+'
		pat = pat[2:]
	}
	if pat == "" {
		return fmt.Errorf("filter rule %q: empty pattern", text)
	}
	r.list = append(r.list, rule{include: include, pat: compile(pat), raw: pat})
	return nil
}

// Add adds one rule in the syntax of rsync's --filter: "- PATTERN" or
// "exclude PATTERN", "+ PATTERN" or "include PATTERN", with the rule's
// name and its pattern separated by one space or one underscore;
// modifiers follow a short name directly ("-! PATTERN") and a long name
// after a comma ("exclude,! PATTERN"). The one modifier supported is "!",
// which makes the rule apply to the paths its pattern does not match. "!"
// or "clear" alone clears the rules added so far. Merge rules, the
// one-sided rules (hide, show, protect, risk) and the other modifiers are
// refused, by name, rather than ignored.
func (r *Rules) Add(text string) error {
	if text == "" {
		return errors.New("filter rule \"\": empty rule")
	}
	kind, rest, ok := ruleKind(text)
	if !ok {
		return fmt.Errorf("filter rule %q: unknown rule kind (want \"+\", \"-\", \"include\", \"exclude\", \"!\" or \"clear\")", text)
	}
	var include bool
	switch kind {
	case '!':
		if rest != "" {
			return fmt.Errorf("filter rule %q: a clear rule takes no pattern", text)
		}
		r.list = nil
		return nil
	case '+':
		include = true
	case '-':
	case '.', ':':
		return fmt.Errorf("filter rule %q: merge and dir-merge rules are not supported; give the rules with --filter, --exclude-from or --include-from", text)
	case 'H', 'S', 'P', 'R':
		return fmt.Errorf("filter rule %q: %s rules are not supported; use \"+\" or \"-\" rules", text, sidedNames[kind])
	}
	negate := false
	for rest != "" && rest[0] != ' ' && rest[0] != '_' {
		switch m := rest[0]; m {
		case '!':
			negate = true
		case '/', 'C', 'p', 'r', 's', 'x':
			return fmt.Errorf("filter rule %q: the %q modifier (%s) is not supported", text, m, modifierNames[m])
		default:
			return fmt.Errorf("filter rule %q: invalid modifier %q at position %d", text, m, len(text)-len(rest))
		}
		rest = rest[1:]
	}
	if rest != "" {
		rest = rest[1:] // the one separator
	}
	if rest == "" {
		return fmt.Errorf("filter rule %q: no pattern after the rule", text)
	}
	r.list = append(r.list, rule{include: include, negate: negate, pat: compile(rest), raw: rest})
	return nil
}

var sidedNames = map[byte]string{'H': "hide", 'S': "show", 'P': "protect", 'R': "risk"}

var modifierNames = map[byte]string{
	'/': "match against the absolute path",
	'C': "CVS ignore rules",
	'p': "perishable",
	'r': "receiver side only",
	's': "sender side only",
	'x': "extended attribute names",
}

// longKinds are the rule names rsync accepts spelled out, with the short
// name each stands for.
var longKinds = []struct {
	name string
	kind byte
}{
	{"clear", '!'}, {"dir-merge", ':'}, {"exclude", '-'}, {"hide", 'H'},
	{"include", '+'}, {"merge", '.'}, {"protect", 'P'}, {"risk", 'R'},
	{"show", 'S'},
}

// ruleKind reads the rule's name from the start of text, long or short,
// and returns its short form and what follows: the modifiers, the
// separator and the pattern.
func ruleKind(text string) (kind byte, rest string, ok bool) {
	for _, l := range longKinds {
		after, found := strings.CutPrefix(text, l.name)
		if !found {
			continue
		}
		switch {
		case after == "" || after[0] == ' ' || after[0] == '_':
			return l.kind, after, true
		case after[0] == ',':
			return l.kind, after[1:], true
		}
		return 0, "", false
	}
	switch text[0] {
	case '+', '-', '!', '.', ':', 'H', 'S', 'P', 'R':
		rest = strings.TrimPrefix(text[1:], ",")
		return text[0], rest, true
	}
	return 0, "", false
}

// AddFrom adds the rules of an --exclude-from (include false) or
// --include-from (include true) file: one pattern a line, in the syntax of
// Exclude or Include. Lines end at "\n", "\r\n" or a lone "\r"; empty lines
// and lines beginning with ";" or "#" are skipped. name is the file's name
// for error messages, which give it and the line number. (It is not called
// ReadFrom because go vet holds that name to io.ReaderFrom's signature.)
func (r *Rules) AddFrom(rd io.Reader, name string, include bool) error {
	br := bufio.NewReader(rd)
	for line := 1; ; line++ {
		text, end, err := readLine(br)
		if err != nil {
			return fmt.Errorf("read filter rules from %s: %w", name, err)
		}
		if text != "" && text[0] != ';' && text[0] != '#' {
			if err := r.addOld(text, include); err != nil {
				return fmt.Errorf("%s:%d: %w", name, line, err)
			}
		}
		if end {
			return nil
		}
	}
}

// readLine returns the next line without its end; end is true at the end
// of the input.
func readLine(br *bufio.Reader) (line string, end bool, err error) {
	var b strings.Builder
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return b.String(), true, nil
		}
		if err != nil {
			return "", false, err
		}
		switch c {
		case '\n':
			return b.String(), false, nil
		case '\r':
			next, err := br.ReadByte()
			switch {
			case err == io.EOF:
				return b.String(), true, nil
			case err != nil:
				return "", false, err
			case next != '\n':
				if err := br.UnreadByte(); err != nil {
					return "", false, err
				}
			}
			return b.String(), false, nil
		}
		b.WriteByte(c)
	}
}

// Excluded reports whether the rules exclude rel, a slash-separated path
// relative to the transfer root ("a/b/c"); dir says whether it is a
// directory (a symbolic link is not one, unless the caller follows it).
// The names are rsync's: for a source directory given with a trailing
// slash ("src/") they start inside it and the root itself, "", is never
// excluded; without the slash ("src") the directory is a name of the
// transfer, "src", subject to the rules like any other, and what is in it
// is "src/a" (so "/a" does not match it and "/src/a" does); a file operand
// is its base name.
//
// An excluded directory is the caller's cue to skip its whole subtree, as
// rsync does: nothing below it is looked at, so no rule can bring it back.
// That is why "--include '*.c' --exclude '*'" copies only the *.c files of
// the top directory ("*" excludes every subdirectory), and why
// "--include '*/' --include '*.c' --exclude '*'" is the way to reach *.c
// files at any depth.
func (r *Rules) Excluded(rel string, dir bool) bool {
	rel = strings.TrimPrefix(rel, "/")
	if rel == "" {
		return false
	}
	for i := range r.list {
		ru := &r.list[i]
		if ru.pat.matches(rel, dir) != ru.negate {
			return !ru.include
		}
	}
	return false
}

// Empty reports whether there are no rules, so that a caller can skip
// asking.
func (r *Rules) Empty() bool {
	return len(r.list) == 0
}

// String returns the rules in --filter syntax, one a line, as a -v report
// or a test failure would show them.
func (r *Rules) String() string {
	var b strings.Builder
	for _, l := range r.Lines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Lines returns the rules in --filter syntax, one a rule: Add takes each
// back as the same rule, which is how a walk elsewhere is told them
// (Prune).
func (r *Rules) Lines() []string {
	lines := make([]string, 0, len(r.list))
	for _, ru := range r.list {
		l := string("-+"[btoi(ru.include)])
		if ru.negate {
			l += "!"
		}
		lines = append(lines, l+" "+ru.raw)
	}
	return lines
}

// Prune is what a walk of a tree elsewhere (a helper's, on the server)
// needs to leave out what a run's rules exclude, as the lister here
// would, and not to descend into an excluded directory: the rules, as
// Lines gives them, and the rsync name of the walk's root ("." where the
// root's contents are the transfer's names, its base name where the root
// itself is one). The zero Prune leaves out nothing.
type Prune struct {
	Root  string
	Rules []string
}

// Compile builds p's rules, refusing a line Add refuses.
func (p Prune) Compile() (*Rules, error) {
	r := &Rules{}
	for _, l := range p.Rules {
		if err := r.Add(l); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Name is the rsync name of the entry at rel (slash-separated, below the
// walk's root).
func (p Prune) Name(rel string) string {
	if p.Root == "." || p.Root == "" {
		return rel
	}
	return p.Root + "/" + rel
}

// Key is p as a comparable value, two Prunes having the same Key when
// they prune the same.
func (p Prune) Key() string {
	if len(p.Rules) == 0 {
		return ""
	}
	return fmt.Sprintf("%q %q", p.Root, p.Rules)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
