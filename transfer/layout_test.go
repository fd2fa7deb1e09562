package transfer

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckTarget(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "file"), "x")
	tests := []struct {
		target        string
		several, some bool
		isDir         bool
		exists        bool   // the statted target found a file
		err           string // a part of the error; "" for none
	}{
		{target: root, several: true, some: true, isDir: true},
		{target: root + "/", some: true, isDir: true},
		{target: filepath.Join(root, "file"), some: true, exists: true},
		{target: filepath.Join(root, "new"), some: true},
		{target: filepath.Join(root, "file"), several: true, some: true, err: "with several sources the target must be an existing directory"},
		{target: filepath.Join(root, "new"), several: true, some: true, err: "with several sources"},
		{target: filepath.Join(root, "new") + "/", some: true, err: "a target ending in / must be an existing directory"},
		{target: filepath.Join(root, "new") + "/"},
		{target: filepath.Join(root, "file", "below"), some: true, err: "stat target"},
	}
	for _, tt := range tests {
		isDir, st, err := checkTarget(local(tt.target), tt.several, tt.some)
		switch {
		case tt.err != "":
			var te *Error
			if !errors.As(err, &te) || !strings.Contains(te.Error()+" "+te.Hint, tt.err) {
				t.Errorf("checkTarget(%q, %v, %v) = %v, want an error saying %q", tt.target, tt.several, tt.some, err, tt.err)
			}
		case err != nil || isDir != tt.isDir:
			t.Errorf("checkTarget(%q, %v, %v) = %v, %v; want directory %v", tt.target, tt.several, tt.some, isDir, err, tt.isDir)
		case isDir && st != nil:
			t.Errorf("checkTarget(%q) kept a stat of a directory target", tt.target)
		case !isDir && (st == nil || st.path != tt.target || (st.fi != nil) != tt.exists ||
			(!tt.exists && !errors.Is(st.err, fs.ErrNotExist))):
			t.Errorf("checkTarget(%q) kept stat %+v; want the file found: %v", tt.target, st, tt.exists)
		}
	}
}
