package sshconn

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// sock_diag finds a connection's socket by its two ends, and tells what
// TCP_INFO tells its holder; the connection the other way round, and one
// that is not there, are not taken for it.
func TestSocketTCPInfo(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		c, s, err := tcpPairOn(t, network, addr)
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		go io.Copy(io.Discard, s)
		if _, err := c.Write(make([]byte, 100_000)); err != nil {
			t.Fatal(err)
		}
		local := c.LocalAddr().(*net.TCPAddr).AddrPort()
		remote := c.RemoteAddr().(*net.TCPAddr).AddrPort()
		got, ok := SocketTCPInfo(local, remote)
		want, wok := TCPInfo(c)
		if !ok || !wok || got.MSS != want.MSS || got.BytesSent < 100_000 || got.BytesSent > want.BytesSent {
			t.Errorf("%s: sock_diag %+v (%v), TCP_INFO %+v (%v)", network, got, ok, want, wok)
		}
		if _, ok := SocketTCPInfo(remote, netip.AddrPortFrom(local.Addr(), local.Port()+1)); ok {
			t.Errorf("%s: a socket that is not there was found", network)
		}
		if back, ok := SocketTCPInfo(remote, local); !ok || back.BytesReceived < 100_000 || back.BytesSent != 0 {
			t.Errorf("%s: the accepted end: %+v (%v)", network, back, ok)
		}
	}
}

// The warmer runs on a socket it finds by its ends, as the helper's on
// sshd's: the padding goes out, and sock_diag's window grows with it.
func TestWarmWithSocketTCPInfo(t *testing.T) {
	c, s := tcpPair(t)
	go io.Copy(io.Discard, s)
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	remote := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	pad := make([]byte, warmRequest)
	var sent int
	r, ok := warmWith(t.Context(), 2*time.Second, 0,
		func() (TCPStats, bool) { return SocketTCPInfo(local, remote) },
		func(n int) error { sent += n; _, err := c.Write(pad[:n]); return err })
	if !ok || r.Padding == 0 || int64(sent) != r.Padding || r.Padding > warmBudget {
		t.Fatalf("warmed through sock_diag: %s (ok %v), %d bytes written", r, ok, sent)
	}
	// Loopback: the window never fills, or grows at once.
	switch r.StoppedFor {
	case "window grown", "padding spent", "window not growing", "slow start ended":
	default:
		t.Errorf("stopped for %q", r.StoppedFor)
	}
}
