package filter

import "strings"

// A pattern is one rule's pattern, compiled. The flags are rsync's: they are
// read from the pattern's raw text (so "\**", an escaped star and a star,
// still counts as holding "**" when deciding what part of a path the
// pattern is held against, as in rsync), while the wildcards themselves
// are read token by token.
type pattern struct {
	text     string  // the pattern, without a trailing "/" and with a leading "/" removed when anchored
	anchored bool    // it began with "/": held against the whole path
	dirOnly  bool    // it ended with "/": directories only
	slashes  int     // the slashes in the pattern, a leading one included
	wild     bool    // it holds one of * ? [ and so is a wildcard pattern
	wild2    bool    // it holds "**"
	prefix2  bool    // it begins with "**"
	suffix3  bool    // it ends with "***": a directory matches as if it had a trailing "/"
	toks     []token // the wildcard pattern, when wild
	masks    *masks  // the tokens as bit masks, when there are fewer than 64
	dead     bool    // a malformed class or a trailing backslash: rsync's matcher gives up, so nothing matches
}

type tokenKind uint8

const (
	tokByte     tokenKind = iota // one byte, itself
	tokAny                       // "?": one byte but "/"
	tokClass                     // "[...]": one byte of a set, never "/"
	tokStar                      // "*": any run of bytes without "/"
	tokStarStar                  // "**" (or more stars): any run of bytes
)

type token struct {
	kind tokenKind
	b    byte
	set  *byteSet
}

type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}

// compile reads pat as rsync's add_rule does: a trailing "/" (on a pattern
// longer than one byte) makes the rule match directories only and is
// removed; the slashes left are counted; "*", "[" or "?" make it a
// wildcard pattern, in which a backslash escapes the next byte; without
// them every byte, backslashes included, is literal.
func compile(pat string) pattern {
	var p pattern
	if len(pat) > 1 && pat[len(pat)-1] == '/' {
		pat = pat[:len(pat)-1]
		p.dirOnly = true
	}
	p.slashes = strings.Count(pat, "/")
	if strings.ContainsAny(pat, "*[?") {
		p.wild = true
		if i := strings.Index(pat, "**"); i >= 0 {
			p.wild2 = true
			p.prefix2 = i == 0
			p.suffix3 = strings.HasSuffix(pat, "***")
		}
	}
	if strings.HasPrefix(pat, "/") {
		p.anchored = true
		pat = pat[1:]
	}
	p.text = pat
	if p.wild {
		p.toks, p.dead = tokenize(pat)
		if len(p.toks) < 64 {
			p.masks = newMasks(p.toks)
		}
	}
	return p
}

// tokenize turns a wildcard pattern into tokens. dead is true for a
// character class without its closing "]" or with an unknown "[:name:]",
// and for a trailing backslash: rsync's matcher gives up on those, so the
// pattern matches nothing.
func tokenize(pat string) (toks []token, dead bool) {
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '\\':
			// A trailing backslash escapes the string's end, which
			// no name's byte equals.
			if i+1 >= len(pat) {
				return nil, true
			}
			i++
			toks = append(toks, token{kind: tokByte, b: pat[i]})
		case '?':
			toks = append(toks, token{kind: tokAny})
		case '*':
			j := i
			for j+1 < len(pat) && pat[j+1] == '*' {
				j++
			}
			kind := tokStar
			if j > i {
				kind = tokStarStar
			}
			i = j
			toks = append(toks, token{kind: kind})
		case '[':
			set, end, ok := parseClass(pat, i+1)
			if !ok {
				return nil, true
			}
			i = end
			toks = append(toks, token{kind: tokClass, set: set})
		default:
			toks = append(toks, token{kind: tokByte, b: c})
		}
	}
	return toks, false
}

// parseClass reads a character class whose body starts at pat[i] (just
// after the "["). It returns the set of bytes it matches and the index of
// its closing "]". As in rsync: "!" or "^" first negates it; a "]" first
// is literal; "a-z" is a range of bytes unless the "-" is first or last;
// a backslash escapes the next byte; "[:alpha:]" and its kin are the ASCII
// classes of the C locale. "/" is never in the set.
func parseClass(pat string, i int) (set *byteSet, end int, ok bool) {
	set = new(byteSet)
	negate := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		negate = true
		i++
	}
	// prev is the byte a following "-" would start a range from; a range
	// or a named class leaves none.
	prev, havePrev := byte(0), false
	for first := true; ; first = false {
		if i >= len(pat) {
			return nil, 0, false
		}
		c := pat[i]
		if c == ']' && !first {
			break
		}
		switch {
		case c == '\\':
			i++
			if i >= len(pat) {
				return nil, 0, false
			}
			set.add(pat[i])
			prev, havePrev = pat[i], true
		case c == '-' && havePrev && i+1 < len(pat) && pat[i+1] != ']':
			i++
			hi := pat[i]
			if hi == '\\' {
				i++
				if i >= len(pat) {
					return nil, 0, false
				}
				hi = pat[i]
			}
			set.addRange(prev, hi) // empty when hi < prev, as in rsync
			havePrev = false
		case c == '[' && i+1 < len(pat) && pat[i+1] == ':':
			name, after, named := className(pat, i+2)
			if !named {
				// No ":]" before the next "]": the "[" is literal.
				set.add('[')
				prev, havePrev = '[', true
				break
			}
			if after < 0 {
				return nil, 0, false
			}
			in, known := posixClasses[name]
			if !known {
				return nil, 0, false
			}
			for b := 0; b < 128; b++ {
				if in(byte(b)) {
					set.add(byte(b))
				}
			}
			i = after
			havePrev = false
		default:
			set.add(c)
			prev, havePrev = c, true
		}
		i++
	}
	if negate {
		for w := range set {
			set[w] = ^set[w]
		}
	}
	set[0] &^= 1 << '/'
	set[0] &^= 1 // NUL: no name holds one
	return set, i, true
}

// className looks for a "[:name:]" whose name starts at pat[i]. It scans
// to the next "]"; named is false when that "]" does not follow a ":" (the
// "[" is then an ordinary member), and after is -1 when there is no "]" at
// all (a malformed class), else the index of that "]".
func className(pat string, i int) (name string, after int, named bool) {
	j := strings.IndexByte(pat[i:], ']')
	if j < 0 {
		return "", -1, true
	}
	j += i
	if j-1 < i || pat[j-1] != ':' {
		return "", 0, false
	}
	return pat[i : j-1], j, true
}

var posixClasses = map[string]func(byte) bool{
	"alnum":  func(b byte) bool { return isAlpha(b) || isDigit(b) },
	"alpha":  isAlpha,
	"blank":  func(b byte) bool { return b == ' ' || b == '\t' },
	"cntrl":  func(b byte) bool { return b < 0x20 || b == 0x7f },
	"digit":  isDigit,
	"graph":  func(b byte) bool { return b > ' ' && b < 0x7f },
	"lower":  func(b byte) bool { return b >= 'a' && b <= 'z' },
	"print":  func(b byte) bool { return b >= ' ' && b < 0x7f },
	"punct":  func(b byte) bool { return b > ' ' && b < 0x7f && !isAlpha(b) && !isDigit(b) },
	"space":  func(b byte) bool { return b == ' ' || (b >= '\t' && b <= '\r') },
	"upper":  func(b byte) bool { return b >= 'A' && b <= 'Z' },
	"xdigit": func(b byte) bool { return isDigit(b) || (b|0x20 >= 'a' && b|0x20 <= 'f') },
}

func isAlpha(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }
func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// matches reports whether the pattern matches name, a path relative to the
// transfer root, as rsync's rule_matches decides which part of the path to
// hold the pattern against:
//   - no slash and no "**": the last component only;
//   - anchored, or beginning with "**": the whole path (a leading "**" may
//     also match an empty start, as "**/x" matches "x");
//   - an inner slash and no "**": the last slashes+1 components;
//   - otherwise ("**" inside or at the end): the path from its start or
//     from just after any slash.
//
// A directory is held as "name/" against a pattern ending in "***", so that
// "dir/***" matches the directory itself as well as what is inside.
func (p *pattern) matches(name string, dir bool) bool {
	if p.dirOnly && !dir {
		return false
	}
	if !p.wild {
		return p.literal(name)
	}
	if p.dead {
		return false
	}
	text := name
	switch {
	case p.slashes == 0 && !p.wild2:
		text = name[strings.LastIndexByte(name, '/')+1:]
	case p.prefix2:
		text = "/" + name
	}
	if dir && p.suffix3 {
		text += "/"
	}
	switch {
	case !p.anchored && p.slashes > 0 && !p.wild2:
		tail, ok := trailing(text, p.slashes+1)
		return ok && p.glob(tail, false)
	case !p.anchored && !p.prefix2 && p.wild2:
		return p.glob(text, true)
	default:
		return p.glob(text, false)
	}
}

// literal matches a pattern without wildcards: the whole path when
// anchored, else the path's last components, at a component boundary.
func (p *pattern) literal(name string) bool {
	if p.slashes == 0 {
		name = name[strings.LastIndexByte(name, '/')+1:]
	}
	if p.anchored {
		return name == p.text
	}
	if !strings.HasSuffix(name, p.text) {
		return false
	}
	rest := len(name) - len(p.text)
	return rest == 0 || name[rest-1] == '/'
}

// trailing returns the last n slash-separated components of s; ok is false
// when s has fewer.
func trailing(s string, n int) (tail string, ok bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			n--
			if n == 0 {
				return s[i+1:], true
			}
		}
	}
	return s, n == 1
}

// glob reports whether the tokens match all of text, or, with anySlash,
// all of the text that follows any one of its slashes. It runs the tokens
// as a set of states over the text's bytes, so that its time is bounded by
// len(tokens)*len(text) whatever the pattern, which a backtracking matcher
// cannot promise. State s means "tokens before s matched"; the last state
// is the match.
func (p *pattern) glob(text string, anySlash bool) bool {
	if p.masks != nil {
		return p.masks.glob(text, anySlash, len(p.toks))
	}
	n := len(p.toks)
	cur := make([]bool, n+1)
	next := make([]bool, n+1)
	cur[0] = true
	p.closure(cur)
	for i := 0; i < len(text); i++ {
		c := text[i]
		clear(next)
		for s := 0; s < n; s++ {
			if !cur[s] {
				continue
			}
			t := &p.toks[s]
			switch t.kind {
			case tokByte:
				next[s+1] = next[s+1] || c == t.b
			case tokAny:
				next[s+1] = next[s+1] || c != '/'
			case tokClass:
				next[s+1] = next[s+1] || t.set.has(c)
			case tokStar:
				next[s] = next[s] || c != '/'
			case tokStarStar:
				next[s] = true
			}
		}
		if anySlash && c == '/' {
			next[0] = true
		}
		p.closure(next)
		cur, next = next, cur
	}
	return cur[n]
}

// closure adds the states reached by letting stars match nothing.
func (p *pattern) closure(states []bool) {
	for s, t := range p.toks {
		if states[s] && (t.kind == tokStar || t.kind == tokStarStar) {
			states[s+1] = true
		}
	}
}

// masks are a pattern's tokens as bit masks over its states (bit s is
// token s), so that one step over a byte is a few word operations: the
// common patterns, a handful of tokens long, are asked about every path of
// a walk, once for each rule before the one that decides.
type masks struct {
	advance  [256]uint64 // the tokens that consume this byte and move on
	star     uint64      // "*" and "**": stay on any byte but "/"
	starStar uint64      // "**": stays on "/" too
}

func newMasks(toks []token) *masks {
	m := new(masks)
	for s, t := range toks {
		bit := uint64(1) << s
		for c := 0; c < 256; c++ {
			b := byte(c)
			switch {
			case t.kind == tokByte && b == t.b,
				t.kind == tokAny && b != '/',
				t.kind == tokClass && t.set.has(b):
				m.advance[c] |= bit
			}
		}
		switch t.kind {
		case tokStar:
			m.star |= bit
		case tokStarStar:
			m.star |= bit
			m.starStar |= bit
		}
	}
	return m
}

func (m *masks) glob(text string, anySlash bool, n int) bool {
	// Letting a star match nothing moves its state on by one. Stars are
	// never adjacent (a run of them is one token), so one shift is the
	// whole closure.
	closure := func(s uint64) uint64 { return s | (s&m.star)<<1 }
	cur := closure(1)
	for i := 0; i < len(text); i++ {
		c := text[i]
		stay := m.star
		if c == '/' {
			stay = m.starStar
		}
		next := (cur&m.advance[c])<<1 | cur&stay
		if anySlash && c == '/' {
			next |= 1
		}
		cur = closure(next)
		if cur == 0 && !anySlash {
			return false
		}
	}
	return cur&(1<<n) != 0
}
