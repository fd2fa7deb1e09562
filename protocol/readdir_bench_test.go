package protocol

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// delayed copies src to dst, each chunk d after it was read, as a path
// with a one-way delay of d would.
func delayed(dst io.WriteCloser, src io.Reader, d time.Duration) {
	type chunk struct {
		b []byte
		t time.Time
	}
	ch := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for c := range ch {
			time.Sleep(time.Until(c.t.Add(d)))
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	defer close(ch)
	for {
		b := make([]byte, 64<<10)
		n, err := src.Read(b)
		if n > 0 {
			ch <- chunk{b[:n], time.Now()}
		}
		if err != nil {
			return
		}
	}
}

// BenchmarkReadDir50ms lists one directory of 100 files, and 100 of them
// 64 at once as the tree walk does, over a path of 50 ms round trip:
// through pkg/sftp's ReadDir, and through the listing session. The
// in-process server's CPU, not the path, bounds the second case on a
// busy machine.
func BenchmarkReadDir50ms(b *testing.B) {
	srv := sshtest.Start(b, sshtest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", srv.Addr)
			if err != nil {
				c.Close()
				continue
			}
			go delayed(s, c, 25*time.Millisecond)
			go delayed(c, s, 25*time.Millisecond)
		}
	}()
	conn, err := ssh.Dial("tcp", ln.Addr().String(), srv.ClientConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	end, err := OpenSFTP(conn, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { end.Close() })
	var dirs []string
	for d := range 100 {
		dirs = append(dirs, filepath.Join(srv.Root, fmt.Sprint(d)))
		mkEntries(b, dirs[d], 100, func(i int) string { return fmt.Sprint(i) })
	}
	list := func(b *testing.B, dirs []string, readDir func(string) ([]fs.FileInfo, error)) {
		for b.Loop() {
			var wg sync.WaitGroup
			sem := make(chan struct{}, 64)
			for _, d := range dirs {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					if l, err := readDir(d); err != nil || len(l) != 100 {
						b.Errorf("%s: %d entries, %v", d, len(l), err)
					}
				})
			}
			wg.Wait()
		}
	}
	batched := func(d string) ([]fs.FileInfo, error) { return end.ReadDirContext(context.Background(), d) }
	b.Run("1dir/pkgsftp", func(b *testing.B) { list(b, dirs[:1], end.mc.current().ReadDir) })
	b.Run("1dir/batched", func(b *testing.B) { list(b, dirs[:1], batched) })
	b.Run("100dirs/pkgsftp", func(b *testing.B) { list(b, dirs, end.mc.current().ReadDir) })
	b.Run("100dirs/batched", func(b *testing.B) { list(b, dirs, batched) })
}
