package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A target found complete in the listing is skipped as copyFile skips
// it: under --resume, the temporary file a killed run left for it, and
// its journal entry, go too, in tar mode as in SFTP mode.
func TestTarSkipForgetsStaleTemp(t *testing.T) {
	for _, mode := range []TarMode{TarOff, TarForce} {
		base := t.TempDir()
		src := filepath.Join(base, "src", "tree")
		for _, name := range []string{"done", "new1", "new2"} {
			write(t, filepath.Join(src, name), name)
		}
		mtime := time.Unix(1e9, 0)
		if err := os.Chtimes(filepath.Join(src, "done"), mtime, mtime); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(base, "dst")
		done := filepath.Join(target, "tree", "done")
		write(t, done, "done")
		if err := os.Chtimes(done, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		stale := filepath.Join(target, "tree", TempName("done"))
		write(t, stale, "do")
		fake := &waitingTar{}
		journal := filepath.Join(base, "journal")
		if err := os.Mkdir(journal, 0o700); err != nil {
			t.Fatal(err)
		}
		id := targetID(Endpoint{fake, done})
		b, err := json.Marshal(journalEntry{Version: journalVersion, Target: id, Temp: stale,
			Source: filepath.Join(src, "done"), Size: 4, MTime: mtime.UnixNano(), Watermark: 2})
		if err != nil {
			t.Fatal(err)
		}
		entry := journalPath(journal, id)
		if err := os.WriteFile(entry, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var logs []string
		o := Options{Recursive: true, Skip: SkipQuick, Resume: true, ResumeDir: journal,
			Tar: TarOptions{Mode: mode}, Logf: func(f string, a ...any) { logs = append(logs, f) }}
		res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{fake, target}, o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("mode %d: %v %v", mode, err, errors.Join(res.Errors...))
		}
		if used := strings.Contains(strings.Join(logs, "\n"), "(tar)"); used != (mode == TarForce) {
			t.Fatalf("mode %d: tar streams used %v", mode, used)
		}
		if res.Skipped != 1 || res.Files != 2 {
			t.Errorf("mode %d: %d skipped, %d copied; want 1 and 2", mode, res.Skipped, res.Files)
		}
		for _, p := range []string{stale, entry} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("mode %d: %s is still there (%v)", mode, filepath.Base(p), err)
			}
		}
	}
}
