package svg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// parse decodes the whole of doc as XML and returns the elements' names
// and the text inside them, in order.
func parse(t *testing.T, doc []byte) (names, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return names, texts
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			names = append(names, tok.Name.Local)
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
}

func TestHostileTextIsEscaped(t *testing.T) {
	const hostile = `</text><script>alert("x")</script>& ]]> ` + "\x00\x1b"
	d := New(100, 50)
	d.Text(1, 2, "start", hostile)
	d.TextRotated(1, 2, hostile)
	d.Circle(3, 4, 2, "#000", hostile)
	d.Rect(0, 0, 10, 10, `red" onload="x`, hostile)
	var b bytes.Buffer
	if _, err := d.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	names, texts := parse(t, b.Bytes())
	for _, n := range names {
		if n == "script" {
			t.Fatalf("a text made a <script> element:\n%s", b.String())
		}
	}
	want := strings.ReplaceAll(strings.ReplaceAll(hostile, "\x00", "\uFFFD"), "\x1b", "\uFFFD")
	want = strings.TrimSpace(want)
	n := 0
	for _, s := range texts {
		if s == want {
			n++
		}
	}
	if n != 4 {
		t.Errorf("the hostile text read back %d times, want 4 (2 texts, 2 titles): %q", n, texts)
	}
	if strings.Contains(b.String(), `onload="x"`) {
		t.Errorf("an attribute value broke out of its quotes:\n%s", b.String())
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		hi   float64
		n    int
		want string
	}{
		{100, 5, "0 20 40 60 80 100"},
		{93, 5, "0 20 40 60 80 100"},
		{7, 4, "0 2 4 6 8"},
		{0.3, 3, "0 0.1 0.2 0.3"},
		{0, 4, "0 0.5 1"},
		{1e-300, 4, "0 0.5 1"},
	} {
		var got []string
		for _, v := range Ticks(tc.hi, tc.n) {
			got = append(got, Label(v))
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("Ticks(%v, %d) = %s, want %s", tc.hi, tc.n, s, tc.want)
		}
	}
}
