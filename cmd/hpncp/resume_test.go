package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/report"
)

// TestResumeAfterLostConnection cuts every connection of an upload with
// --resume midway and refuses new ones until the copy has given up (it
// dials again for ConnectTimeout): the temporary file stays, and the same
// command continues it instead of starting over.
func TestResumeAfterLostConnection(t *testing.T) {
	slow(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	srv := sshtest.Start(t, sshtest.Options{})
	work := t.TempDir()
	src := filepath.Join(work, "big")
	const size = 48 << 20
	if err := writeNoise(src, size); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(work, "copy")
	from, to := src, "testhost:"+dst
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"hpncp", "-F", srv.ConfigFile, "-o", "ConnectTimeout=2", "-q", "--resume", "--bwlimit", "16M", from, to}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, nil, io.Discard, io.Discard) }()
	temp := filepath.Join(work, ".hpncp.copy.*.part")
	for cut := false; !cut; {
		select {
		case err := <-done:
			t.Fatalf("copy ended before its connections could be cut: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		matches, _ := filepath.Glob(temp)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Size() > 16<<20 {
				srv.Refuse(true)
				srv.KillConnections()
				cut = true
			}
		}
	}
	if err := <-done; err == nil {
		t.Fatal("the copy succeeded with its connections cut and new ones refused")
	}
	srv.Refuse(false)
	if matches, _ := filepath.Glob(temp); len(matches) != 1 {
		t.Fatalf("temporary files after the cut: %q, want one", matches)
	}

	var out bytes.Buffer
	if err := run(ctx, append(args[:len(args)-2:len(args)-2], "--json", from, to), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(src)
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, want) {
		t.Fatal("the resumed copy differs from the source")
	}
	if matches, _ := filepath.Glob(temp); len(matches) > 0 {
		t.Errorf("temporary files left: %q", matches)
	}
	if rep.Totals.ResumedBytes < 8<<20 || rep.Totals.Bytes+rep.Totals.ResumedBytes != size {
		t.Errorf("resumed %d bytes and sent %d, want at least 8 MiB resumed of %d", rep.Totals.ResumedBytes, rep.Totals.Bytes, size)
	}
}
