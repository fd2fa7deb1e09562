package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hpncp/hpncp/internal/vis"
)

// A report carries names as the file systems and servers gave them, and
// those need not be text. JSON strings are: encoding/json writes each
// byte that is not UTF-8 as U+FFFD, so that "a\xff" and "a\xfe" would
// print the same. A name that is not valid UTF-8 is written, in its
// field, escaped as hpncp's messages show it (vis.String: \377), and
// whole, in a field of the same name with "_b64" after it: its bytes in
// standard base64. Reading the report back gives the bytes. A name that
// is valid UTF-8, nearly all of them, is written as it is, alone.
//
// encoding/json also writes DEL and the C1 control characters (U+0080
// to U+009F) as they are, and a terminal showing the report may act on
// C1 as on ESC sequences (U+009B is CSI): Report's MarshalJSON escapes
// them (\u009b), as encoding/json does C0's.

// nameJSON returns how a report writes name: in its field, and in the
// field's _b64 companion when name is not UTF-8.
func nameJSON(name string) (field, b64 string) {
	if utf8.ValidString(name) {
		return name, ""
	}
	return vis.String(name), base64.StdEncoding.EncodeToString([]byte(name))
}

// nameFromJSON is the name nameJSON wrote as field and b64, checked as
// hpncp writes them. what and whatB64 name the fields in an error.
func nameFromJSON(what, whatB64, field string, b64 *string) (string, error) {
	if b64 == nil {
		return field, nil
	}
	b, err := base64.StdEncoding.DecodeString(*b64)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", whatB64, err)
	case utf8.Valid(b):
		return "", fmt.Errorf("%s holds UTF-8 text: %s alone says it", whatB64, what)
	case vis.String(string(b)) != field:
		return "", fmt.Errorf("%s %q is not %s escaped", what, field, whatB64)
	}
	return string(b), nil
}

// marshalText encodes v as a report does: <, > and & as they are, so
// that names and itemized lines stay readable.
func marshalText(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decodeStrict decodes data into v refusing unknown fields, as
// Parse does the whole report: a type with its own UnmarshalJSON
// is not told of the outer decoder's setting.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// reportJSON is a Report as JSON carries it: the job's operands are
// names too.
type reportJSON struct {
	plainReport
	// SourcesB64 is there when a source is not UTF-8: one entry for each
	// of Sources, empty for those that are.
	SourcesB64 []string `json:"sources_b64,omitempty"`
	TargetB64  string   `json:"target_b64,omitempty"`
}

type plainReport Report

// MarshalJSON writes the report with DEL and the C1 control characters
// escaped.
func (r Report) MarshalJSON() ([]byte, error) {
	w := reportJSON{plainReport: plainReport(r)}
	w.Sources = nil
	for i, src := range r.Sources {
		field, b64 := nameJSON(src)
		w.Sources = append(w.Sources, field)
		if b64 != "" && w.SourcesB64 == nil {
			w.SourcesB64 = make([]string, len(r.Sources))
		}
		if b64 != "" {
			w.SourcesB64[i] = b64
		}
	}
	w.Target, w.TargetB64 = nameJSON(r.Target)
	b, err := marshalText(w)
	if err != nil {
		return nil, err
	}
	return escapeC1(b), nil
}

func (r *Report) UnmarshalJSON(data []byte) error {
	var w struct {
		plainReport
		SourcesB64 []string `json:"sources_b64"`
		TargetB64  *string  `json:"target_b64"`
	}
	if err := decodeStrict(data, &w); err != nil {
		return err
	}
	if w.SourcesB64 != nil && len(w.SourcesB64) != len(w.Sources) {
		return fmt.Errorf("sources_b64 has %d entries, sources %d", len(w.SourcesB64), len(w.Sources))
	}
	for i, b64 := range w.SourcesB64 {
		if b64 == "" {
			continue
		}
		src, err := nameFromJSON(fmt.Sprintf("sources[%d]", i), fmt.Sprintf("sources_b64[%d]", i), w.Sources[i], &b64)
		if err != nil {
			return err
		}
		w.Sources[i] = src
	}
	var err error
	if w.Target, err = nameFromJSON("target", "target_b64", w.Target, w.TargetB64); err != nil {
		return err
	}
	*r = Report(w.plainReport)
	return nil
}

// escapeC1 writes DEL and each C1 control character of the JSON
// document b as a \u escape. In encoding/json's output every byte above
// 0x7e is in a string, as valid UTF-8, so DEL is one and the two bytes
// C2 80-9F are always one character.
func escapeC1(b []byte) []byte {
	var out []byte
	start := 0
	for i := 0; i < len(b); i++ {
		n := 0
		switch {
		case b[i] == 0x7f:
			n = 1
		case b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			n = 2
		default:
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b)+32)
		}
		out = append(out, b[start:i]...)
		out = fmt.Appendf(out, `\u%04x`, b[i+n-1])
		i += n - 1
		start = i + 1
	}
	if out == nil {
		return b
	}
	return append(out, b[start:]...)
}

func (f File) MarshalJSON() ([]byte, error) {
	type plain File
	w := struct {
		plain
		PathB64   string `json:"path_b64,omitempty"`
		TargetB64 string `json:"target_b64,omitempty"`
	}{plain: plain(f)}
	w.Path, w.PathB64 = nameJSON(f.Path)
	w.Target, w.TargetB64 = nameJSON(f.Target)
	return marshalText(w)
}

func (f *File) UnmarshalJSON(data []byte) error {
	type plain File
	var w struct {
		plain
		PathB64   *string `json:"path_b64"`
		TargetB64 *string `json:"target_b64"`
	}
	if err := decodeStrict(data, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON("path", "path_b64", w.Path, w.PathB64); err != nil {
		return err
	}
	if w.Target, err = nameFromJSON("target", "target_b64", w.Target, w.TargetB64); err != nil {
		return err
	}
	*f = File(w.plain)
	return nil
}

func (c PlannedChange) MarshalJSON() ([]byte, error) {
	type plain PlannedChange
	w := struct {
		plain
		NameB64 string `json:"name_b64,omitempty"`
	}{plain: plain(c)}
	w.Name, w.NameB64 = nameJSON(c.Name)
	return marshalText(w)
}

func (c *PlannedChange) UnmarshalJSON(data []byte) error {
	type plain PlannedChange
	var w struct {
		plain
		NameB64 *string `json:"name_b64"`
	}
	if err := decodeStrict(data, &w); err != nil {
		return err
	}
	var err error
	if w.Name, err = nameFromJSON("name", "name_b64", w.Name, w.NameB64); err != nil {
		return err
	}
	*c = PlannedChange(w.plain)
	return nil
}
