package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
)

// A FilesProgress is told of every file a run copies, with all its
// bytes, whichever way the file goes: the totals it saw are the result's.
func TestFilesProgressTotalsAreTheResult(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := sftpEnd(t, srv)
	src := filepath.Join(t.TempDir(), "src")
	// Small files in batches, one too large for a batch, and two for the
	// parallel pipeline.
	bigTree(t, src, 4, 50, protocol.SmallMax+1, 2<<20, 3<<20)
	for _, dir := range []string{"up", "down"} {
		if err := os.Mkdir(filepath.Join(srv.Root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runs := []struct {
		name     string
		src, dst Endpoint
	}{
		{"upload", local(src), Endpoint{end, filepath.Join(srv.Root, "up")}},
		{"download", Endpoint{end, filepath.Join(srv.Root, "up", "src")}, local(t.TempDir())},
	}
	for _, r := range runs {
		var tally fileTally
		o := Options{Recursive: true, Parallel: testParallel(), Progress: &tally}
		res, err := Copy(context.Background(), []Endpoint{r.src}, r.dst, o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("%s: %v %v", r.name, err, errors.Join(res.Errors...))
		}
		files, bytes := tally.totals(t)
		if files != res.Files || bytes != res.Bytes || res.Files != 4*50+3 {
			t.Errorf("%s: progress told %d files, %d bytes; the result has %d, %d (want %d files)",
				r.name, files, bytes, res.Files, res.Bytes, 4*50+3)
		}
		if tally.most < 2 {
			t.Errorf("%s: at most %d file in flight told at once", r.name, tally.most)
		}
	}
}

// In tar mode the large files copied beside the streams count too, and
// a stream counts as the files it carries.
func TestFilesProgressTotalsInTarMode(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	bigTree(t, src, 3, 20, 4*protocol.SafePacket, 5*protocol.SafePacket)
	target := filepath.Join(base, "dst")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	var tally fileTally
	var logs []string
	o := Options{Recursive: true, Tar: TarOptions{Mode: TarForce, MaxSize: 3 * protocol.SafePacket}, Progress: &tally,
		Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }}
	res, err := Copy(context.Background(), []Endpoint{local(src)}, Endpoint{&waitingTar{}, target}, o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("%v %v", err, errors.Join(res.Errors...))
	}
	if !strings.Contains(strings.Join(logs, "\n"), "(tar)") {
		t.Fatalf("tar streams not used:\n%s", strings.Join(logs, "\n"))
	}
	files, bytes := tally.totals(t)
	if files != res.Files || bytes != res.Bytes || res.Files != 3*20+2 {
		t.Errorf("progress told %d files, %d bytes; the result has %d, %d (want %d files)",
			files, bytes, res.Files, res.Bytes, 3*20+2)
	}
}
