package protocol

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func TestLimitsSessionServesTheFirstStream(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	pc := end.pool.conns[0]
	if len(pc.idle) != 1 || pc.open != 2 {
		t.Fatalf("after start: %d idle of %d sessions, want the limits session idle beside the main one", len(pc.idle), pc.open)
	}
	kept := pc.idle[0]
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := end.OpenReaderAt(context.Background(), name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.(*streamFile).s.rawSession; got != kept {
		t.Error("the first stream opened a session of its own rather than the kept one")
	}
	b := make([]byte, 3)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "abc" {
		t.Fatalf("read %q (%v) on the kept session", b, err)
	}
}

func TestStartOneSessionAtATime(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{MaxSessions: 1})
	end := openEnd(t, srv, false)
	if n := len(end.pool.conns[0].idle); n != 0 {
		t.Errorf("%d sessions kept at MaxSessions 1, want none", n)
	}
	if _, err := end.Stat("."); err != nil {
		t.Fatalf("main session at MaxSessions 1: %v", err)
	}
}

func TestPreparedSessionsServeTheStreams(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	end.PrepareStreams(ctx, 3, 1)
	// Asked again, as by a copy whose streams are not yet open: nothing more.
	end.PrepareStreams(ctx, 3, 1)
	var files []ReaderAtCloser
	for range 3 {
		f, err := end.OpenReaderAt(ctx, name, 1)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pc := end.pool.conns[0]
	end.pool.mu.Lock()
	open, idle, preparing := pc.open, len(pc.idle), end.pool.preparing
	end.pool.mu.Unlock()
	// The main session, the kept limits session and two prepared ones.
	if open != 4 || idle != 0 || preparing != 0 {
		t.Errorf("3 streams after preparing 3: %d sessions open, %d idle, %d being prepared; want 4, 0, 0", open, idle, preparing)
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
