package protocol

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestGuessedHandleOpenSSH: against OpenSSH's sftp-server the handle of
// a session's first file is guessed right, whether the file was opened
// behind INIT or by its stream, so that the first reads, sent behind
// the OPEN, bring the file's bytes without being asked again; a second
// file on the session is not guessed; a missing file's reads fail with
// its open's error.
func TestGuessedHandleOpenSSH(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{})
	conn, err := ssh.Dial("tcp", srv.Addr(), srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	guess := firstHandle(conn)
	if guess != openSSHFirstHandle {
		t.Fatalf("server %q: guess %q, want OpenSSH's first handle", conn.ServerVersion(), guess)
	}
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	content := noise(1<<20 + 3)
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(t *testing.T, f *rawFile) {
		t.Helper()
		b := make([]byte, len(content))
		if n, err := f.ReadAt(b, 0); err != nil || n != len(b) || !bytes.Equal(b, content) {
			t.Fatalf("read %d of %d bytes (%v), or not the file's", n, len(b), err)
		}
	}
	for _, behindInit := range []bool{true, false} {
		pre := &PreOpen{Name: name}
		pre.regular.Store(behindInit)
		rs := OpenReady(conn, 1, pre)
		if len(rs) != 1 || (rs[0].sent != "") != behindInit {
			t.Fatalf("opened behind INIT %v: %d sessions ready, %+v", behindInit, len(rs), rs)
		}
		s := newRawSession(rs[0].ch, 32<<10, sessionStart{versionDue: true, sent: rs[0].sent, guess: guess})
		f, err := s.openAhead(name)
		if err != nil {
			t.Fatal(err)
		}
		op := f.opening
		if op == nil {
			t.Fatal("the first file's open waited for its reply")
		}
		read(t, f)
		<-op.done
		if op.err != nil || op.handle != guess {
			t.Errorf("opened behind INIT %v: handle %q (%v), guessed %q", behindInit, op.handle, op.err, guess)
		}
		second, err := s.openAhead(name)
		if err != nil {
			t.Fatal(err)
		}
		if second.opening != nil {
			t.Error("a session's second file was guessed")
		}
		read(t, second)
		for _, f := range []*rawFile{f, second} {
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}
		_ = s.Close()
	}

	rs := OpenReady(conn, 1, nil)
	if len(rs) != 1 {
		t.Fatal("no session ready")
	}
	s := newRawSession(rs[0].ch, 32<<10, sessionStart{versionDue: true, guess: guess})
	defer s.Close()
	missing := filepath.Join(dir, "missing")
	f, err := s.openAhead(missing)
	if err == nil {
		_, err = f.ReadAt(make([]byte, 10), 0)
	}
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "open" || pe.Path != missing {
		t.Errorf("reading a missing file: %v, want its open's not-exist error", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("closing a file that never opened: %v", err)
	}
}
