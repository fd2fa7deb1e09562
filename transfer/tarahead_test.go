package transfer_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/transfer"
)

// aheadServer is an in-process server whose listing of the directory
// zlast (listed after the files beside it) holds until release is closed, and which counts the tar -c
// commands it starts and those still running. gnu false answers the
// probe of the server's tar as busybox would.
type aheadServer struct {
	release chan struct{}
	once    sync.Once
	started atomic.Int32 // tar -c commands started
	running atomic.Int32 // tar -c commands not yet returned
	// want is how many started tar -c commands close release.
	want int32
}

func (a *aheadServer) start(t *testing.T, gnu bool) server {
	run := sshtest.ShellExec(t.TempDir())
	srv := sshtest.Start(t, sshtest.Options{
		Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
			switch {
			case strings.HasPrefix(cmd, "tar -c"):
				a.running.Add(1)
				defer a.running.Add(-1)
				if a.started.Add(1) == a.want {
					a.once.Do(func() { close(a.release) })
				}
			case strings.Contains(cmd, "tar --version") && !gnu:
				fmt.Fprintln(stdout, "tar (busybox) 1.36.1")
				return 0
			}
			return run(cmd, stdin, stdout, stderr)
		},
		Hold: func(p string) <-chan struct{} {
			if filepath.Base(p) == "zlast" {
				return a.release
			}
			return nil
		},
	})
	return sshtestServer(t, "inproc", srv)
}

// TestDownloadStartsTarWhileListing: a download's tar -c commands start
// while its tree is still being listed, as many as the listed small
// files are worth, so that the server's login shells start before the
// plan is made; when tar mode is not used after all, they are ended.
func TestDownloadStartsTarWhileListing(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	for i := range 200 {
		mkTree(t, src, fmt.Sprintf("f%03d=%s", i, strings.Repeat("x", 1000+i)))
	}
	mkTree(t, src, "zlast/f=last")
	for _, gnu := range []bool{true, false} {
		a := &aheadServer{release: make(chan struct{}), want: 2}
		s := a.start(t, gnu)
		fsys := openSFTP(t, s)
		// The listing of zlast is held until two tar -c commands started,
		// or for 10 s.
		timedOut := make(chan struct{})
		timer := time.AfterFunc(10*time.Second, func() {
			a.once.Do(func() { close(timedOut); close(a.release) })
		})
		target := filepath.Join(t.TempDir(), "copy")
		o := transfer.Options{Recursive: true, Parallel: parallel(),
			Tar: transfer.TarOptions{Mode: transfer.TarAuto, Streams: 2}}
		res, err := transfer.Copy(context.Background(), []transfer.Endpoint{{FS: fsys, Path: src}},
			transfer.Endpoint{FS: transfer.Local{}, Path: target}, o)
		timer.Stop()
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("gnu %v: %v %v", gnu, err, res.Errors)
		}
		select {
		case <-timedOut:
			t.Fatalf("gnu %v: no two tar -c commands started while the listing was held (%d)", gnu, a.started.Load())
		default:
		}
		if res.Files != 201 {
			t.Errorf("gnu %v: %d files copied; want 201", gnu, res.Files)
		}
		for i := range 200 {
			b, err := os.ReadFile(filepath.Join(target, fmt.Sprintf("f%03d", i)))
			if err != nil || len(b) != 1000+i {
				t.Fatalf("gnu %v: file %d: %d bytes, %v", gnu, i, len(b), err)
			}
		}
		if got := a.started.Load(); got != 2 {
			t.Errorf("gnu %v: %d tar -c commands started; want the 2 streams'", gnu, got)
		}
		// Without GNU tar the tree went over SFTP: the commands started
		// ahead end, not left to the end of the session.
		deadline := time.Now().Add(5 * time.Second)
		for a.running.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := a.running.Load(); n > 0 {
			t.Errorf("gnu %v: %d tar -c commands still running after the copy", gnu, n)
		}
	}
}

// TestDownloadEndsHostileTarStartedAhead: a tar -c started while the
// tree was listed is ended with its stream like one started for it: a
// server whose archive names a file outside the tree and then sends
// without end fails the copy at once, and writes nothing outside.
func TestDownloadEndsHostileTarStartedAhead(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	for i := range 100 {
		mkTree(t, src, fmt.Sprintf("f%03d=small", i))
	}
	run := sshtest.ShellExec(t.TempDir())
	var started atomic.Int32
	srv := sshtest.Start(t, sshtest.Options{
		Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
			if !strings.HasPrefix(cmd, "tar -c") {
				return run(cmd, stdin, stdout, stderr)
			}
			started.Add(1)
			// One name in, then an entry no name asked for, then
			// zeros until the channel closes.
			_, _ = stdin.Read(make([]byte, 1))
			tw := tar.NewWriter(stdout)
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "../evil", Size: 1 << 40, Mode: 0o644})
			zeros := make([]byte, 32<<10)
			for {
				if _, err := stdout.Write(zeros); err != nil {
					return 1
				}
			}
		},
	})
	fsys := openSFTP(t, sshtestServer(t, "inproc", srv))
	dir := t.TempDir()
	target := filepath.Join(dir, "copy")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := transfer.Options{Recursive: true, Parallel: parallel(), Tar: transfer.TarOptions{Mode: transfer.TarForce}}
	res, err := transfer.Copy(ctx, []transfer.Endpoint{{FS: fsys, Path: src}},
		transfer.Endpoint{FS: transfer.Local{}, Path: target}, o)
	if ctx.Err() != nil {
		t.Fatal("the copy went on until the test's deadline")
	}
	if err == nil && (res == nil || len(res.Errors) == 0) {
		t.Fatal("a hostile archive copied without an error")
	}
	if started.Load() == 0 {
		t.Fatal("no tar -c ran")
	}
	if _, err := os.Stat(filepath.Join(dir, "evil")); !os.IsNotExist(err) {
		t.Fatalf("a file outside the target: %v", err)
	}
}
