package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/faultnet"
	"github.com/hpncp/hpncp/internal/sshtest"
)

func TestPutGetSmallRoundTrip(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	mtime := time.Date(2020, 5, 17, 10, 0, 0, 0, time.UTC)
	// Sizes around the packet size (32 KiB here), sent from many
	// goroutines at once so that the batches of several files interleave
	// on the same sessions.
	sizes := []int{0, 1, SafePacket - 1, SafePacket, SafePacket + 1, 3*SafePacket + 5, SmallMax}
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(sizes))
	for i := range 4 * len(sizes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := noise(sizes[i%len(sizes)] + i/len(sizes))
			if len(data) > SmallMax {
				data = data[:SmallMax]
			}
			name := filepath.Join(srv.Root, fmt.Sprintf("f%d", i))
			a := PutAttrs{Perm: 0o640, SetTimes: i%2 == 0, Atime: mtime, Mtime: mtime}
			if err := end.PutSmall(context.Background(), name+".tmp", name, data, a); err != nil {
				errs <- err
				return
			}
			got, fi, err := end.GetSmall(context.Background(), name, int64(len(data)))
			switch {
			case err != nil:
				errs <- err
			case !bytes.Equal(got, data):
				errs <- fmt.Errorf("%s: read back differs", name)
			case fi.Size() != int64(len(data)) || fi.Mode() != 0o640:
				errs <- fmt.Errorf("%s: size %d mode %v, want %d, -rw-r-----", name, fi.Size(), fi.Mode(), len(data))
			case a.SetTimes && !fi.ModTime().Equal(mtime):
				errs <- fmt.Errorf("%s: mtime %v, want %v", name, fi.ModTime(), mtime)
			}
			if _, err := os.Stat(name + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
				errs <- fmt.Errorf("%s: the temporary file is still there (%v)", name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPutSmallReplacesAndSetsMode(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := PutAttrs{Perm: 0o644, SetMode: true, Mode: 0o751}
	if err := end.PutSmall(context.Background(), name+".tmp", name, []byte("new"), a); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(name); string(got) != "new" || fi.Mode() != 0o751 {
		t.Errorf("got %q mode %v, want \"new\" -rwxr-x--x", got, fi.Mode())
	}
}

func TestPutSmallFailureLeavesTargetAndNoTemp(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	dir := filepath.Join(srv.Root, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The rename fails: the target is a non-empty directory.
	name := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(name, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := end.PutSmall(context.Background(), filepath.Join(dir, "tmp"), name, []byte("data"), PutAttrs{Perm: 0o644})
	if err == nil {
		t.Fatal("PutSmall over a non-empty directory succeeded")
	}
	assertOnly(t, dir, "target")

	// A cancelled context stops it before the rename.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = end.PutSmall(ctx, filepath.Join(dir, "tmp2"), filepath.Join(dir, "new"), []byte("data"), PutAttrs{Perm: 0o644})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("PutSmall with a cancelled context: %v, want context.Canceled", err)
	}
	assertOnly(t, dir, "target")
}

func TestGetSmallSizeChanged(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{5, 20} {
		if _, _, err := end.GetSmall(context.Background(), name, size); err == nil {
			t.Errorf("GetSmall of a 10-byte file expected to hold %d succeeded", size)
		}
	}
	if _, _, err := end.GetSmall(context.Background(), filepath.Join(srv.Root, "missing"), 3); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("GetSmall of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	return got
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	if got := dirNames(t, dir); fmt.Sprint(got) != fmt.Sprint(names) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// TestGetSmallLostIsLost: a small file's batch cut off by its connection
// fails as a lost stream, which the copy reads again another way, not as
// a file that changed size (the session's EOF is io.EOF too).
func TestGetSmallLostIsLost(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, bytes.Repeat([]byte("x"), 200<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c := faultnet.Wrap(raw, faultnet.Fault{Kind: faultnet.Cut, Dir: faultnet.Read, AtByte: 64 << 10})
	sc, chans, reqs, err := ssh.NewClientConn(c, srv.Addr, srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()
	end, err := OpenSFTP(client, Options{Label: "testhost:", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	if c.Fired() {
		t.Fatal("the cut came before the batch: raise AtByte")
	}
	_, _, err = end.GetSmall(context.Background(), name, 200<<10)
	if err == nil {
		t.Fatal("GetSmall succeeded over a cut connection")
	}
	if !Lost(err) || strings.Contains(err.Error(), "changed size") {
		t.Errorf("GetSmall cut off: %v; want a lost stream", err)
	}
}

// TestSetAttrsSetsThenStats: SetAttrs's stat shows the mode and times its
// setstat gave, and a file that is not there fails it.
func TestSetAttrsSetsThenStats(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	fi, err := end.SetAttrs(context.Background(), name, PutAttrs{SetMode: true, Mode: 0o644,
		SetTimes: true, Atime: mtime, Mtime: mtime})
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 5 || fi.Mode().Perm() != 0o644 || !fi.ModTime().Equal(mtime) {
		t.Errorf("stat: %d bytes, %v, %v; want 5, -rw-r--r--, %v", fi.Size(), fi.Mode(), fi.ModTime(), mtime)
	}
	if on, err := os.Stat(name); err != nil || on.Mode().Perm() != 0o644 || !on.ModTime().Equal(mtime) {
		t.Errorf("on the server: %v %v", on, err)
	}
	if _, err := end.SetAttrs(context.Background(), name+"-missing", PutAttrs{SetMode: true, Mode: 0o644}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SetAttrs of a missing file: %v, want not exist", err)
	}
}
