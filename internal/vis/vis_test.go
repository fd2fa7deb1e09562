package vis

import "testing"

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"plain name.txt":       "plain name.txt",
		"ünïcödé-名前":           "ünïcödé-名前",
		"\x1b[31mred\x1b[0m":   `\033[31mred\033[0m`,
		"over\rwrite":          `over\015write`,
		"two\nlines\tand tab":  `two\012lines\011and tab`,
		"bad \xff\xfe utf8":    `bad \377\376 utf8`,
		"del\x7f":              `del\177`,
		"c1 \u009b31m":         `c1 \302\23331m`,
		"bidi \u202e evil":     `bidi \342\200\256 evil`,
		`back\slash \033 kept`: `back\slash \033 kept`,
		"":                     "",
	} {
		got := String(in)
		if got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		if again := String(got); again != got {
			t.Errorf("String(String(%q)) = %q, want it unchanged", in, again)
		}
	}
}

func TestText(t *testing.T) {
	in := "Welcome\r\n\x1b]0;title\x07\tbe nice\n"
	want := "Welcome\\015\n\\033]0;title\\007\tbe nice\n"
	if got := Text(in); got != want {
		t.Errorf("Text(%q) = %q, want %q", in, got, want)
	}
}
