package transfer

import (
	"strings"
	"testing"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		in   string
		want Location
	}{
		{"file", Location{Path: "file"}},
		{"/abs/file", Location{Path: "/abs/file"}},
		{"./a:b", Location{Path: "./a:b"}},
		{"dir/a:b", Location{Path: "dir/a:b"}},
		{":file", Location{Path: ":file"}},
		{"host:", Location{Host: "host", Path: "."}},
		{"host:dir/f", Location{Host: "host", Path: "dir/f"}},
		{"host:/abs", Location{Host: "host", Path: "/abs"}},
		{"bob@host:x", Location{User: "bob", Host: "host", Path: "x"}},
		{"bob@corp@host:x", Location{User: "bob@corp", Host: "host", Path: "x"}},
		{"[::1]:x", Location{Host: "::1", Path: "x"}},
		{"bob@[fe80::1]:/tmp/", Location{User: "bob", Host: "fe80::1", Path: "/tmp/"}},
		{"host:a:b", Location{Host: "host", Path: "a:b"}},
		{"scp://host", Location{Host: "host", Path: "."}},
		{"scp://bob@host:2222/dir/f", Location{User: "bob", Host: "host", Port: 2222, Path: "dir/f"}},
		{"scp://host//tmp/x", Location{Host: "host", Path: "/tmp/x"}},
		{"scp://[::1]:22/a%20b", Location{Host: "::1", Port: 22, Path: "a b"}},
	}
	for _, tt := range tests {
		got, err := ParseLocation(tt.in)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseLocation(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseLocationErrors(t *testing.T) {
	for _, in := range []string{"@:x", "scp://", "scp://host:0/x", "scp://host:99999/", "scp://u:pw@host/x", "scp://host/x?y"} {
		if l, err := ParseLocation(in); err == nil {
			t.Errorf("ParseLocation(%q) = %+v, want an error", in, l)
		}
	}
}

func TestLocationString(t *testing.T) {
	for in, want := range map[string]string{
		"bob@host:x":   "bob@host:x",
		"[::1]:y":      "[::1]:y",
		"local/file":   "local/file",
		"scp://h:2/zz": "h:zz",
	} {
		l, err := ParseLocation(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.String(); got != want {
			t.Errorf("%q.String() = %q, want %q", in, got, want)
		}
	}
}

// A password in an scp:// operand is refused, and no message repeats it:
// error output ends up in logs and terminals others read.
func TestParseLocationHidesPassword(t *testing.T) {
	for in, want := range map[string]string{
		"scp://u:s3cret@host/x":        `"scp://u:***@host/x": passwords in URIs are not accepted`,
		"scp://u:s3cret@host:0/x":      `"scp://u:***@host:0/x": passwords in URIs are not accepted`,
		"scp://u:s3cret@host/x?y":      `"scp://u:***@host/x?y": not a valid scp:// URI`,
		"scp://u:s3cret@ho%zzst/x":     `"scp://u:***@ho%zzst/x": not a valid scp:// URI`,
		"scp://a@b:s3cret@host/x":      `"scp://a@b:***@host/x": passwords in URIs are not accepted`,
		"scp://u:s3cret@host:99999/x":  `"scp://u:***@host:99999/x": passwords in URIs are not accepted`,
		"scp://u:s3cret@[::1]:22/a%zz": `"scp://u:***@[::1]:22/a%zz": not a valid scp:// URI`,
	} {
		_, err := ParseLocation(in)
		if err == nil {
			t.Errorf("ParseLocation(%q) accepted a password", in)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseLocation(%q): %q, want it to start %q", in, err, want)
		}
	}
}
