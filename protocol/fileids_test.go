package protocol

import (
	"strings"
	"testing"
)

func TestParseFileIDs(t *testing.T) {
	ids, err := parseFileIDs([]byte("64769 1234 a/b c\x0064769 1234 top\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if ids["a/b c"] != (FileID{64769, 1234}) || ids["top"] != ids["a/b c"] || len(ids) != 2 {
		t.Fatalf("got %v", ids)
	}
	for _, bad := range []string{"1 2 ../x\x00", "1 2 /etc/passwd\x00", "1 2 a/../../x\x00", "x 2 a\x00", "1 2\x00", "1 2 a", "1 2 \x00", "1 2 ./a\x00"} {
		if _, err := parseFileIDs([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func FuzzParseFileIDs(f *testing.F) {
	f.Add([]byte("64769 1234 a/b c\x0064769 1234 top\x00"))
	f.Add([]byte("1 2 ../x\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		ids, err := parseFileIDs(out)
		if err != nil {
			return
		}
		for name := range ids {
			if name == "" || strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") {
				t.Fatalf("accepted %q", name)
			}
		}
	})
}
