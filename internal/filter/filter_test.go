package filter

import (
	"errors"
	"strings"
	"testing"
)

func TestZeroValueExcludesNothing(t *testing.T) {
	var r Rules
	if !r.Empty() {
		t.Error("zero Rules: Empty() = false")
	}
	for _, p := range []string{"a", "a/b", ".x", "*"} {
		if r.Excluded(p, false) || r.Excluded(p, true) {
			t.Errorf("zero Rules exclude %q", p)
		}
	}
	if err := r.Exclude("*.o"); err != nil {
		t.Fatal(err)
	}
	if r.Empty() {
		t.Error("after Exclude: Empty() = true")
	}
}

// TestExcluded pins the matching rules case by case; each case is one a
// user could hit, and TestAgainstRsync checks the same rules against rsync.
func TestExcluded(t *testing.T) {
	type check struct {
		path string
		dir  bool
		want bool
	}
	tests := []struct {
		rules  []string // in --filter syntax
		checks []check
	}{
		{[]string{"- *.o"}, []check{
			{"a.o", false, true}, {"d/e/a.o", false, true}, {"a.c", false, false}, {"a.o/x", false, false},
		}},
		{[]string{"- /top"}, []check{
			{"top", false, true}, {"top", true, true}, {"a/top", false, false},
		}},
		{[]string{"- top"}, []check{
			{"top", false, true}, {"a/top", false, true}, {"a/top/b", false, false}, {"stop", false, false},
		}},
		{[]string{"- sub/"}, []check{
			{"sub", true, true}, {"sub", false, false}, {"a/sub", true, true},
		}},
		{[]string{"- b/c"}, []check{
			{"b/c", false, true}, {"a/b/c", false, true}, {"ab/c", false, false}, {"c", false, false}, {"b/c/d", false, false},
		}},
		{[]string{"- x/*.o"}, []check{
			{"x/a.o", false, true}, {"d/x/a.o", false, true}, {"x/y/a.o", false, false}, {"ax/a.o", false, false},
		}},
		{[]string{"- **/x/*.o"}, []check{
			{"x/a.o", false, true}, {"d/e/x/a.o", false, true}, {"x/y/a.o", false, false},
		}},
		{[]string{"- a/***"}, []check{
			{"a", true, true}, {"a", false, false}, {"a/b/c", false, true}, {"d/a", true, true}, {"ab", true, false},
		}},
		{[]string{"- dir/**"}, []check{
			{"dir", true, false}, {"dir/f", false, true}, {"dir/d/f", false, true}, {"p/dir/f", false, true},
		}},
		{[]string{"- /a/*"}, []check{
			{"a/b", false, true}, {"a/b/c", false, false}, {"x/a/b", false, false},
		}},
		// "**" anywhere puts the whole path under the pattern.
		{[]string{"- a**"}, []check{
			{"a/b", false, true}, {"d/a/b", false, true}, {"da/b", false, false},
		}},
		// "?" and classes never match a slash, negated or not.
		{[]string{"- **[!x]b", "- **?c"}, []check{
			{"a/b", false, false}, {"ab", false, true}, {"a/c", false, false}, {"ac", false, true},
		}},
		{[]string{"- ?.c"}, []check{
			{"a.c", false, true}, {"ab.c", false, false}, {"d/a.c", false, true},
		}},
		// Like rsync, "?" is one byte: "é" is two in UTF-8.
		{[]string{"- ?"}, []check{
			{"a", false, true}, {"é", false, false},
		}},
		{[]string{"- ??"}, []check{
			{"é", false, true},
		}},
		{[]string{"- [a-c]*"}, []check{
			{"b1", false, true}, {"d1", false, false},
		}},
		{[]string{"- [!a-c]*"}, []check{
			{"b1", false, false}, {"d1", false, true},
		}},
		{[]string{"- [^a-c]*"}, []check{
			{"b1", false, false}, {"d1", false, true},
		}},
		{[]string{"- []x]"}, []check{
			{"]", false, true}, {"x", false, true}, {"y", false, false},
		}},
		{[]string{"- [a-]"}, []check{
			{"-", false, true}, {"a", false, true}, {"b", false, false},
		}},
		{[]string{"- [[:upper:]]*"}, []check{
			{"Abc", false, true}, {"abc", false, false},
		}},
		// A malformed class makes rsync's matcher give up on the
		// pattern; so does an unknown class name.
		{[]string{"- [abc", "- [[:nope:]]"}, []check{
			{"[abc", false, false}, {"a", false, false}, {"[[:nope:]]", false, false},
		}},
		{[]string{`- \*`}, []check{
			{"*", false, true}, {"a", false, false},
		}},
		// Without a wildcard a backslash is an ordinary byte.
		{[]string{`- a\b`}, []check{
			{`a\b`, false, true}, {"ab", false, false},
		}},
		{[]string{`- a\b*`}, []check{
			{"ab", false, true}, {`a\b`, false, false},
		}},
		{[]string{"+ *.c", "- *"}, []check{
			{"a.c", false, false}, {"a.o", false, true}, {"d", true, true},
		}},
		{[]string{"+ */", "+ *.c", "- *"}, []check{
			{"d", true, false}, {"d/a.c", false, false}, {"d/a.o", false, true},
		}},
		{[]string{"-! *.c"}, []check{
			{"a.c", false, false}, {"a.o", false, true}, {"d", true, true},
		}},
		// A negated directory-only rule matches every non-directory.
		{[]string{"-! d/"}, []check{
			{"d", true, false}, {"e", true, true}, {"d", false, true},
		}},
		{[]string{"- *.c", "!", "- *.o"}, []check{
			{"a.c", false, false}, {"a.o", false, true},
		}},
		{[]string{"exclude,! *.c"}, []check{
			{"a.o", false, true}, {"a.c", false, false},
		}},
		{[]string{"include_keep", "exclude_*"}, []check{
			{"keep", false, false}, {"other", false, true},
		}},
		{[]string{"- *"}, []check{
			{"", true, false}, {"/a", false, true},
		}},
	}
	for _, tc := range tests {
		var r Rules
		for _, text := range tc.rules {
			if err := r.Add(text); err != nil {
				t.Fatalf("Add(%q): %v", text, err)
			}
		}
		for _, c := range tc.checks {
			if got := r.Excluded(c.path, c.dir); got != c.want {
				t.Errorf("rules %q: Excluded(%q, dir=%v) = %v, want %v", tc.rules, c.path, c.dir, got, c.want)
			}
		}
	}
}

func TestOldPrefixes(t *testing.T) {
	var r Rules
	for _, step := range []struct {
		include bool
		pat     string
	}{
		{false, "+ *.c"}, // --exclude="+ *.c" is an include
		{true, "- *.o"},  // --include="- *.o" is an exclude
		{false, "-x"},    // no space: a pattern that begins with "-"
		{true, "*"},
	} {
		var err error
		if step.include {
			err = r.Include(step.pat)
		} else {
			err = r.Exclude(step.pat)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]bool{"a.c": false, "a.o": true, "-x": true, "other": false} {
		if got := r.Excluded(path, false); got != want {
			t.Errorf("Excluded(%q) = %v, want %v", path, got, want)
		}
	}
	if got, want := r.String(), "+ *.c\n- *.o\n- -x\n+ *\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if err := r.Exclude("!"); err != nil {
		t.Fatal(err)
	}
	if !r.Empty() {
		t.Errorf("after Exclude(\"!\"): rules left:\n%s", r.String())
	}
}

// TestRuleErrors checks that a rule hpncp cannot honour is refused, with
// a message that names the rule and says what is wrong with it.
func TestRuleErrors(t *testing.T) {
	tests := []struct {
		rule string
		want string
	}{
		{"", "empty rule"},
		{"x foo", "unknown rule kind"},
		{"excludefoo", "unknown rule kind"},
		{"e foo", "unknown rule kind"},
		{"-", "no pattern"},
		{"- ", "no pattern"},
		{"include", "no pattern"},
		{"-!", "no pattern"},
		{"-foo", "invalid modifier 'f' at position 1"},
		{"-e foo", "invalid modifier 'e'"},
		{"exclude,w foo", "invalid modifier 'w'"},
		{"! x", "a clear rule takes no pattern"},
		{"clear x", "a clear rule takes no pattern"},
		{"merge rules.txt", "merge and dir-merge rules are not supported"},
		{". rules.txt", "merge and dir-merge rules are not supported"},
		{": .rsync-filter", "merge and dir-merge rules are not supported"},
		{"dir-merge .rsync-filter", "merge and dir-merge rules are not supported"},
		{"hide x", "hide rules are not supported"},
		{"S x", "show rules are not supported"},
		{"protect x", "protect rules are not supported"},
		{"R x", "risk rules are not supported"},
		{"-/ /abs", "'/' modifier (match against the absolute path) is not supported"},
		{"-C", "'C' modifier (CVS ignore rules) is not supported"},
		{"-p x", "'p' modifier (perishable) is not supported"},
		{"+r x", "'r' modifier (receiver side only) is not supported"},
		{"exclude,s x", "'s' modifier (sender side only) is not supported"},
		{"-x x", "'x' modifier (extended attribute names) is not supported"},
	}
	for _, tc := range tests {
		var r Rules
		err := r.Add(tc.rule)
		if err == nil {
			t.Errorf("Add(%q) = nil, want an error saying %q", tc.rule, tc.want)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `filter rule "`+tc.rule+`"`) || !strings.Contains(msg, tc.want) {
			t.Errorf("Add(%q) = %q, want it to name the rule and say %q", tc.rule, msg, tc.want)
		}
		if !r.Empty() {
			t.Errorf("Add(%q) failed but left a rule:\n%s", tc.rule, r.String())
		}
	}
}

func TestEmptyPatterns(t *testing.T) {
	var r Rules
	for _, f := range []func(string) error{r.Exclude, r.Include} {
		for _, pat := range []string{"", "+ ", "- "} {
			err := f(pat)
			if err == nil || !strings.Contains(err.Error(), "empty pattern") || !strings.Contains(err.Error(), `"`+pat+`"`) {
				t.Errorf("pattern %q: error %v, want one naming it and saying empty pattern", pat, err)
			}
		}
	}
	if !r.Empty() {
		t.Errorf("rules left:\n%s", r.String())
	}
}

func TestAddFrom(t *testing.T) {
	var r Rules
	text := "# comment\n; comment\n\n*.o\r\n+ keep.tmp\r*.tmp\n!\n/top\n- /a/b"
	if err := r.AddFrom(strings.NewReader(text), "rules.txt", false); err != nil {
		t.Fatal(err)
	}
	if got, want := r.String(), "- /top\n- /a/b\n"; got != want {
		t.Errorf("rules = %q, want %q (the \"!\" line clears what came before)", got, want)
	}

	r = Rules{}
	if err := r.AddFrom(strings.NewReader("*.c\n*/\n"), "inc", true); err != nil {
		t.Fatal(err)
	}
	if got, want := r.String(), "+ *.c\n+ */\n"; got != want {
		t.Errorf("include-from rules = %q, want %q", got, want)
	}

	r = Rules{}
	err := r.AddFrom(strings.NewReader("*.o\n\n# fine\n+ \n"), "ex.txt", false)
	if err == nil || !strings.HasPrefix(err.Error(), "ex.txt:4: ") || !strings.Contains(err.Error(), "empty pattern") {
		t.Errorf("error = %v, want one starting with ex.txt:4: and saying empty pattern", err)
	}

	r = Rules{}
	err = r.AddFrom(strings.NewReader("a\r\nb\r\n+ \r\n"), "crlf.txt", false)
	if err == nil || !strings.HasPrefix(err.Error(), "crlf.txt:3: ") {
		t.Errorf("error = %v, want one at crlf.txt:3 (CRLF is one line end)", err)
	}

	r = Rules{}
	cause := errors.New("input/output error")
	err = r.AddFrom(&failingReader{data: "*.o\n", err: cause}, "/etc/ex", false)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "/etc/ex") {
		t.Errorf("error = %v, want one naming /etc/ex and wrapping %v", err, cause)
	}
}

type failingReader struct {
	data string
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestMatchTimeIsBounded: a pattern of many stars against a long name
// that almost matches takes exponential time in a backtracking matcher.
func TestMatchTimeIsBounded(t *testing.T) {
	var r Rules
	if err := r.Exclude(strings.Repeat("*a", 60) + "b"); err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("a", 4000)
	for range 10 {
		if r.Excluded(name, false) {
			t.Fatal("excluded a name without the final b")
		}
	}
	if !r.Excluded(name+"b", false) {
		t.Error("did not exclude the name with the final b")
	}
	if r.Excluded("d/"+name+"b", false) != true || r.Excluded(name[:100]+"/b", false) {
		t.Error("a long pattern without a slash must match the last name only")
	}
}

// BenchmarkExcluded asks the man page's "*.c files at any depth" rules
// about a path of a deep tree, the question a walk asks once per entry.
func BenchmarkExcluded(b *testing.B) {
	var r Rules
	for _, text := range []string{"- *.tmp", "- /build/***", "- **/cache/*.o", "+ */", "+ *.c", "- *"} {
		if err := r.Add(text); err != nil {
			b.Fatal(err)
		}
	}
	path := "src/project/module/internal/pkg/file_name_test.c"
	for b.Loop() {
		if r.Excluded(path, false) {
			b.Fatal("excluded a .c file")
		}
	}
}
