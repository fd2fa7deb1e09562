package transfer

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSkip(t *testing.T) {
	srcTime := time.Unix(1_700_000_000, 0)
	sum := sha256.Sum256([]byte("same"))
	tests := []struct {
		name    string
		mode    SkipMode
		target  string        // existing target content
		offset  time.Duration // target mtime minus the source's
		skipped bool
		sha     string // the report's sha256
		reason  string // a skipped file's
		resume  bool
	}{
		{"quick: same size and time", SkipQuick, "same", 0, true, "", ReasonQuickCheck, false},
		{"quick: same second, other nanoseconds", SkipQuick, "same", 500 * time.Millisecond, true, "", ReasonQuickCheck, false},
		{"quick: same size, content differs", SkipQuick, "diff", 0, true, "", ReasonQuickCheck, false},
		{"quick: other time", SkipQuick, "same", time.Second, false, "", "", false},
		{"resume: same time", SkipQuick, "same", 0, true, "", ReasonQuickCheck, true},
		{"resume: target written later", SkipQuick, "same", time.Second, true, "", ReasonResumeComplete, true},
		{"resume: target older", SkipQuick, "same", -time.Second, false, "", "", true},
		{"resume: other size", SkipQuick, "longer", time.Second, false, "", "", true},
		{"quick: other size", SkipQuick, "longer", 0, false, "", "", false},
		{"checksum: same content, other time", SkipChecksum, "same", time.Hour, true, hex.EncodeToString(sum[:]), ReasonChecksum, false},
		{"checksum: same size and time, content differs", SkipChecksum, "diff", 0, false, "", "", false},
		{"checksum: other size", SkipChecksum, "longer", 0, false, "", "", false},
		{"ignore existing: content differs", SkipExisting, "other content", time.Hour, true, "", ReasonIgnoreExisting, false},
		{"force: same size and time", CopyAlways, "same", 0, false, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			write(t, src, "same")
			write(t, dst, tt.target)
			if err := os.Chtimes(src, srcTime, srcTime); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(dst, srcTime.Add(tt.offset), srcTime.Add(tt.offset)); err != nil {
				t.Fatal(err)
			}
			var reports []FileReport
			o := Options{Skip: tt.mode, Report: func(f FileReport) { reports = append(reports, f) }}
			if tt.resume {
				o.Resume, o.ResumeDir = true, t.TempDir()
			}
			res, err := copyLocal(t, o, src, dst)
			if err != nil || len(res.Errors) > 0 {
				t.Fatalf("copy: %v %v", err, res.Errors)
			}
			got, _ := os.ReadFile(dst)
			want := FileReport{Path: src, Status: StatusSkipped, SHA256: tt.sha, Target: dst, Reason: tt.reason}
			if !tt.skipped {
				want = FileReport{Path: src, Bytes: 4, Status: StatusCopied, Target: dst}
				if string(got) != "same" {
					t.Errorf("target = %q, want the source's content", got)
				}
			} else if string(got) != tt.target {
				t.Errorf("skipped target changed to %q", got)
			}
			if len(reports) != 1 || reports[0] != want {
				t.Errorf("reports = %+v, want %+v", reports, want)
			}
			wantSkipped := 0
			if tt.skipped {
				wantSkipped = 1
			}
			if res.Skipped != wantSkipped || res.Files != 1-wantSkipped {
				t.Errorf("result: %d copied, %d skipped; want skipped=%v", res.Files, res.Skipped, tt.skipped)
			}
		})
	}
}

// A re-run of a finished -p copy of a tree sends no byte.
func TestSkipRerunPreserved(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	for _, f := range []string{"a", "sub/b", "sub/deeper/c"} {
		write(t, filepath.Join(src, f), "content of "+f)
	}
	dst := filepath.Join(dir, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{Recursive: true, Preserve: true, Skip: SkipQuick}
	first, err := copyLocal(t, o, src, dst)
	if err != nil || len(first.Errors) > 0 || first.Files != 3 {
		t.Fatalf("first run: %v %v, %d files", err, first.Errors, first.Files)
	}
	again, err := copyLocal(t, o, src, dst)
	if err != nil || len(again.Errors) > 0 {
		t.Fatalf("second run: %v %v", err, again.Errors)
	}
	if again.Bytes != 0 || again.Files != 0 || again.Skipped != 3 {
		t.Errorf("second run: %d bytes, %d copied, %d skipped; want 0, 0, 3", again.Bytes, again.Files, again.Skipped)
	}
}
