package sshconn

import (
	"net"
	"testing"
	"time"
)

func TestTCPInfoLoopback(t *testing.T) {
	c, s := tcpPair(t)
	before, ok := TCPInfo(c)
	if !ok {
		t.Fatal("TCPInfo on a loopback TCP connection: not ok")
	}
	start := time.Now()
	const n = 4 << 20
	done := make(chan error, 1)
	// A slow reader keeps the sender busy, and held back by the receive
	// window, for longer than the kernel's clock tick (its timers count
	// in jiffies).
	go func() {
		buf := make([]byte, 64<<10)
		for got := 0; got < n; {
			m, err := s.Read(buf)
			got += m
			if err != nil {
				done <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		done <- nil
	}()
	buf := make([]byte, 64<<10)
	for sent := 0; sent < n; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The last bytes are read before their acknowledgement is counted.
	var after TCPStats
	for deadline := time.Now().Add(2 * time.Second); ; {
		after, ok = TCPInfo(c)
		if !ok {
			t.Fatal("TCPInfo after a write: not ok")
		}
		if after.BytesAcked-before.BytesAcked >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := after.BytesAcked - before.BytesAcked; got < n {
		t.Errorf("bytes acked grew by %d after writing %d", got, n)
	}
	if after.SRTT <= 0 || after.SRTT > 50*time.Millisecond || after.MinRTT <= 0 || after.MinRTT > after.SRTT+after.RTTVar {
		t.Errorf("srtt %v, min rtt %v, rttvar %v: want a small loopback RTT, min ≤ srtt", after.SRTT, after.MinRTT, after.RTTVar)
	}
	if after.Cwnd < 1 || after.MSS < 500 || after.SndBuf <= 0 || after.RcvBuf <= 0 || after.PeerWindow <= 0 {
		t.Errorf("cwnd %d, mss %d, sndbuf %d, rcvbuf %d, peer window %d: want all positive",
			after.Cwnd, after.MSS, after.SndBuf, after.RcvBuf, after.PeerWindow)
	}
	if after.BusyTime <= before.BusyTime || after.RwndLimited > after.BusyTime {
		t.Errorf("busy time %v (rwnd-limited %v) after sending to a slow reader, from %v: want it grown, and no less than the limited part",
			after.BusyTime, after.RwndLimited, before.BusyTime)
	}
	if got := LimitedBy(before, after, time.Since(start)); got != LimitRwnd {
		t.Errorf("a sender to a slow reader: LimitedBy = %q, want %q (busy %v, rwnd-limited %v, sndbuf-limited %v in %v)",
			got, LimitRwnd, after.BusyTime, after.RwndLimited, after.SndbufLimited, time.Since(start))
	}
	if got, ok := TCPInfo(s); !ok || got.BytesReceived < n {
		t.Errorf("the receiving end: bytes received %d, ok %v; want at least %d", got.BytesReceived, ok, n)
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := TCPInfo(a); ok {
		t.Error("TCPInfo on a pipe: ok, want not ok")
	}
}
