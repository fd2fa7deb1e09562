package protocol

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// A temporary file must be owner-only from its creation: one narrowed
// after could be opened by anyone in between and read as it fills.
func TestCreateExclusiveOwnerOnly(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	for _, withDial := range []bool{true, false} {
		end := openEnd(t, srv, withDial)
		name := filepath.Join(srv.Root, "tmp-"+map[bool]string{true: "pool", false: "first"}[withDial])
		w, err := end.CreateExclusive(name)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(name)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s just created: mode %v (%v), want 0600", name, fi.Mode(), err)
		}
		data := noise(3*SafePacket + 7)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes read back (%v), want the %d written", name, len(got), err, len(data))
		}
		if _, err := end.CreateExclusive(name); !errors.Is(err, fs.ErrExist) {
			t.Errorf("create of an existing file: %v, want fs.ErrExist", err)
		}
	}
}

func TestUmaskProbe(t *testing.T) {
	// pkg/sftp's server makes directories 0755 under the process's umask.
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	probe := filepath.Join(srv.Root, ".probe")
	mask, err := end.Umask(context.Background(), probe)
	if err != nil {
		t.Fatal(err)
	}
	if mask != 0o027 {
		t.Errorf("umask %04o, want 0027", mask)
	}
	if _, err := os.Lstat(probe); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the probe directory is left (%v)", err)
	}
	if err := os.Mkdir(probe, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := end.Umask(context.Background(), probe); err == nil {
		t.Error("a probe on an existing name succeeded")
	}
}
