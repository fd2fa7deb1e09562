package protocol

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func TestSum256OnTheServer(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{Exec: sshtest.ShellExec(t.TempDir())})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "it's a file")
	data := []byte("hash me where I live")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := end.Sum256(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(got, want[:]) {
		t.Fatalf("Sum256 = %x, want %x", got, want)
	}
	if _, err := end.Sum256(context.Background(), filepath.Join(srv.Root, "missing")); err == nil {
		t.Error("a missing file hashed without error")
	}
}

func TestSum256WithoutCommands(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	if _, err := end.Sum256(context.Background(), name); err == nil {
		t.Fatal("Sum256 succeeded on a server that runs no commands; callers must fall back to reading back")
	}
}
