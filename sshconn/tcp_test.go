package sshconn

import (
	"errors"
	"math"
	"net"
	"strings"
	"testing"
)

func TestSetBuffersNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if err := SetBuffers(a, 0, 0); err != nil {
		t.Errorf("no sizes set: %v, want nothing done", err)
	}
	if err := SetBuffers(a, 1<<20, 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("on a pipe: %v, want ErrUnsupported", err)
	}
}

func TestSetBuffersRange(t *testing.T) {
	c, _ := tcpPair(t)
	sizes := []int{-1}
	if tooBig := int64(math.MaxInt32) + 1; int64(int(tooBig)) == tooBig {
		sizes = append(sizes, int(tooBig))
	}
	for _, size := range sizes {
		if err := SetBuffers(c, size, 0); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("SetBuffers(%d): %v, want out of range", size, err)
		}
	}
}

// tcpPair returns both ends of a loopback TCP connection, closed when the
// test ends.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	c, s, err := tcpPairOn(t, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// tcpPairOn is tcpPair over network, listening on addr; err says why it
// could not listen (a host without IPv6).
func tcpPairOn(t *testing.T, network, addr string) (client, server *net.TCPConn, err error) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn), nil
}
