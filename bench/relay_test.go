package bench

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection by echoing what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func testRelay(t *testing.T, target string, rtt time.Duration, bits float64) *Relay {
	t.Helper()
	r, err := startRelay(target, rtt, bits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRelayDelay checks that a round trip through the relay takes the
// emulated RTT, not less, and that data arrives intact.
func TestRelayDelay(t *testing.T) {
	const rtt = 40 * time.Millisecond
	r := testRelay(t, echoServer(t), rtt, 0)
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		msg := []byte{byte(i), 'p', 'i', 'n', 'g'}
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo %q, want %q", got, msg)
		}
		if took < rtt || took > rtt+time.Second {
			t.Errorf("round trip %d took %v, want about %v", i, took, rtt)
		}
	}
}

// TestRelayRate checks that the relay serialises at its rate: 4 MB at
// 80 Mbit/s takes at least 0.4 s each way.
func TestRelayRate(t *testing.T) {
	const bits = 80e6
	r := testRelay(t, echoServer(t), 0, bits)
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 4e6/16)
	start := time.Now()
	go func() {
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !bytes.Equal(got, data) {
		t.Fatalf("echoed %d bytes, not the %d sent", len(got), len(data))
	}
	if min := time.Duration(float64(len(data)*8) / bits * float64(time.Second)); took < min {
		t.Errorf("4 MB took %v through an %g bit/s relay, want at least %v", took, bits, min)
	}
	t.Logf("%d bytes echoed in %v (%.1f MB/s)", len(data), took, float64(len(data))/took.Seconds()/1e6)
}
