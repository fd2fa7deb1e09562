package faultnet

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection: a is the
// accepted end, b the dialing end.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	b, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a = <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func noise(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

// readAll reads from c until it fails, within 10 s.
func readAll(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got bytes.Buffer
	_, err := io.Copy(&got, c)
	return got.Bytes(), err
}

func TestNoneCounts(t *testing.T) {
	a, b := tcpPair(t)
	c := Wrap(a, Fault{})
	data := noise(100_000)
	go func() {
		b.Write(data[:1234])
	}()
	buf := make([]byte, 1234)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.Write(data)
		c.Close()
	}()
	got, err := readAll(b)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("peer got %d bytes (%v), want all %d", len(got), err, len(data))
	}
	if c.Bytes(Read) != 1234 || c.Bytes(Write) != int64(len(data)) || c.Fired() {
		t.Fatalf("counted read %d write %d fired %v", c.Bytes(Read), c.Bytes(Write), c.Fired())
	}
}

// TestCutAtWriteByte: the peer gets exactly the bytes before the cut, then
// EOF; the write that reached the cut fails.
func TestCutAtWriteByte(t *testing.T) {
	for _, at := range []int64{0, 1, 4095, 70_000} {
		a, b := tcpPair(t)
		c := Wrap(a, Fault{Kind: Cut, Dir: Write, AtByte: at})
		data := noise(100_000)
		werr := make(chan error, 1)
		go func() {
			_, err := c.Write(data)
			werr <- err
		}()
		got, err := readAll(b)
		if err != nil || !bytes.Equal(got, data[:at]) {
			t.Fatalf("cut at %d: peer got %d bytes (%v), want the first %d then EOF", at, len(got), err, at)
		}
		if err := <-werr; !errors.Is(err, ErrFault) {
			t.Fatalf("cut at %d: write returned %v, want ErrFault", at, err)
		}
		if !c.Fired() {
			t.Fatal("Fired is false after the cut")
		}
	}
}

// TestCutAtReadByte: the holder reads exactly the bytes before the cut.
func TestCutAtReadByte(t *testing.T) {
	a, b := tcpPair(t)
	c := Wrap(a, Fault{Kind: Cut, Dir: Read, AtByte: 5000})
	data := noise(20_000)
	go b.Write(data)
	got, err := readAll(c)
	if !errors.Is(err, ErrFault) || !bytes.Equal(got, data[:5000]) {
		t.Fatalf("read %d bytes, then %v; want 5000 then ErrFault", len(got), err)
	}
	// The peer sees the connection end: a reset, as the kernel sends for
	// a socket closed with unread bytes, or EOF.
	if rest, err := readAll(b); len(rest) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("peer read %d bytes, %v; want the end of the connection", len(rest), err)
	}
}

func TestReset(t *testing.T) {
	a, b := tcpPair(t)
	c := Wrap(a, Fault{Kind: Reset, Dir: Write, AtByte: 10})
	c.Write(noise(100))
	got, err := readAll(b)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("peer read %d bytes, then %v; want connection reset", len(got), err)
	}
}

func TestCutAtTime(t *testing.T) {
	a, b := tcpPair(t)
	c := Wrap(a, Fault{Kind: Cut, AtTime: 100 * time.Millisecond})
	start := time.Now()
	buf := make([]byte, 10)
	_, err := c.Read(buf)
	if !errors.Is(err, ErrFault) && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read returned %v, want the cut's error", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("cut after %v, want 100ms", d)
	}
	if _, err := readAll(b); err != nil {
		t.Fatalf("peer: %v, want EOF", err)
	}
}

// TestStallFor: bytes after the stall's byte arrive only once it is over,
// in both directions.
func TestStallFor(t *testing.T) {
	a, b := tcpPair(t)
	const stall = 300 * time.Millisecond
	c := Wrap(a, Fault{Kind: Stall, Dir: Write, AtByte: 100, Duration: stall})
	start := time.Now()
	go func() {
		c.Write(noise(200))
		c.Close()
	}()
	buf := make([]byte, 200)
	if _, err := io.ReadFull(b, buf[:100]); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > stall/2 {
		t.Fatalf("the bytes before the stall took %v", d)
	}
	if _, err := io.ReadFull(b, buf[100:]); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < stall {
		t.Fatalf("the bytes after the stall came after %v, want %v", d, stall)
	}
	if !bytes.Equal(buf, noise(200)) {
		t.Fatal("bytes differ after the stall")
	}
}

// TestStallForGood: a stall without end blocks reads until Close.
func TestStallForGood(t *testing.T) {
	a, b := tcpPair(t)
	c := Wrap(a, Fault{Kind: Stall, Dir: Read, AtByte: 3})
	b.Write([]byte("abcdef"))
	buf := make([]byte, 10)
	if n, err := io.ReadFull(c, buf[:3]); n != 3 || err != nil {
		t.Fatalf("read %d, %v before the stall", n, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("read during the stall returned %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the stall")
	}
}

func TestSlow(t *testing.T) {
	a, b := tcpPair(t)
	c := Wrap(a, Fault{Kind: Slow, Dir: Write, AtByte: 0, Rate: 200 << 10})
	data := noise(100 << 10)
	start := time.Now()
	go func() {
		c.Write(data)
		c.Close()
	}()
	got, err := readAll(b)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("peer got %d bytes, %v", len(got), err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("100 KiB at 200 KiB/s took %v, want about 500ms", d)
	}
}

// TestProxy: bytes pass both ways through the proxy, and a cut at a byte
// of the server's reply ends the client's connection there.
func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	var mu sync.Mutex
	var wrapped []*Conn
	p, err := NewProxy(ln.Addr().String(), func(n int, c net.Conn) net.Conn {
		mu.Lock()
		defer mu.Unlock()
		f := Fault{}
		if n == 1 {
			f = Fault{Kind: Cut, Dir: Write, AtByte: 1000}
		}
		fc := Wrap(c, f)
		wrapped = append(wrapped, fc)
		return fc
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	data := noise(50_000)
	for n, want := range [][]byte{data, data[:1000]} {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c.Write(data)
			if n == 0 {
				c.(*net.TCPConn).CloseWrite()
			}
		}()
		got, err := readAll(c)
		c.Close()
		if err != nil && n == 0 || !bytes.Equal(got, want) {
			t.Fatalf("connection %d: got %d bytes (%v), want %d", n, len(got), err, len(want))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(wrapped) != 2 || wrapped[0].Bytes(Read) != int64(len(data)) || !wrapped[1].Fired() {
		t.Fatal("the proxy did not wrap each connection")
	}
	if _, err := NewProxy("192.0.2.1:22", nil); err == nil {
		t.Fatal("NewProxy accepted a target beyond loopback")
	}
}

// TestStallProxyFire: bytes pass until Fire, then none in either
// direction, the connection held open.
func TestStallProxyFire(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo
	}()
	p, err := StallProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 5)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("before Fire: %q, %v", buf, err)
	}
	p.Fire()
	if _, err := c.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after Fire: read %d bytes, %v; want nothing until the deadline", n, err)
	}
}
