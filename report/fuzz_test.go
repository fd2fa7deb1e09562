package report

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The seed corpus in testdata/fuzz is hpncp --json output.
// scripts/fuzz.sh runs the target with the others.

// FuzzParse reads --json reports: none may panic, and a report
// accepted encodes to one accepted again with the same content.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"files":[],"totals":{"files":0,"copied":0,"skipped":0,"failed":0,"bytes":0,"seconds":0,"mb_per_s":0,"streams":0}}`))
	f.Add([]byte(`{"version":1,"files":[{"path":"h:x","bytes":0,"status":"failed","error":"boom"}],` +
		`"totals":{"files":1,"copied":0,"skipped":0,"failed":1,"bytes":0,"seconds":0.5,"mb_per_s":0,"streams":1}}`))
	f.Add([]byte(`{"version":1,"hpncp":"dev","exit_code":255,"error":{"message":"connect","hint":"h","kind":"connection"},` +
		`"started":"2026-12-01T12:00:00.000Z","ended":"2026-12-01T12:00:01.000Z",` +
		`"files":[{"path":"x","bytes":0,"status":"skipped","target":"h:x","reason":"checksum"}],` +
		`"totals":{"files":1,"copied":0,"skipped":1,"failed":0,"bytes":0,"seconds":0,"mb_per_s":0,"streams":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("report %+v read from %q does not encode: %v", r, b, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("report read from %q, encoded as %s, is refused: %v", b, out, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("report read from %q reads back as %+v, not %+v", b, again, r)
		}
	})
}
