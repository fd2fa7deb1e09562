package sshconn

import (
	"errors"
	"fmt"
	"math"
	"net"

	"github.com/hpncp/hpncp/internal/units"
)

// ErrCapped reports that the kernel granted a smaller socket buffer than
// asked for. A capped explicit buffer is usually worse than autotuning,
// whose limit (tcp_rmem) is often well above the SO_RCVBUF limit (rmem_max).
var ErrCapped = errors.New("kernel capped the socket buffer")

// SetBuffers sets the TCP receive and send buffers of c to rcv and snd
// bytes (--tcp-rcvbuf, --tcp-sndbuf). A zero size leaves that buffer alone:
// setting one turns off the kernel's autotuning of it, which is the better
// default. Call it before the SSH handshake. Where the kernel reports what
// it granted (Linux), a smaller grant is an error wrapping ErrCapped, which
// a caller may treat as a warning: the smaller buffer is in force, and the
// other buffer is set all the same (an ordinary user's requests above
// rmem_max and wmem_max are both capped, and both must take effect).
func SetBuffers(c net.Conn, rcv, snd int) error {
	if rcv == 0 && snd == 0 {
		return nil
	}
	peer := "connection"
	if a := c.RemoteAddr(); a != nil {
		peer = a.String()
	}
	sc, ok := c.(interface {
		SetReadBuffer(int) error
		SetWriteBuffer(int) error
	})
	if !ok {
		return fmt.Errorf("set socket buffers of %s: %w", peer, errors.ErrUnsupported)
	}
	var capped []error
	for _, b := range []struct {
		size  int
		name  string
		set   func(int) error
		which bufferKind
		limit string
	}{
		{rcv, "receive", sc.SetReadBuffer, receiveBuffer, "net.core.rmem_max"},
		{snd, "send", sc.SetWriteBuffer, sendBuffer, "net.core.wmem_max"},
	} {
		if b.size == 0 {
			continue
		}
		if b.size < 0 || b.size > math.MaxInt32 {
			return fmt.Errorf("set TCP %s buffer of %s to %d bytes: size out of range", b.name, peer, b.size)
		}
		if err := b.set(b.size); err != nil {
			return fmt.Errorf("set TCP %s buffer of %s to %s: %w", b.name, peer, units.FormatSize(int64(b.size)), err)
		}
		if got, ok := granted(c, b.which); ok && got < b.size {
			capped = append(capped, fmt.Errorf("set TCP %s buffer of %s to %s: %w to %s (raise %s)",
				b.name, peer, units.FormatSize(int64(b.size)), ErrCapped, units.FormatSize(int64(got)), b.limit))
		}
	}
	return errors.Join(capped...)
}

type bufferKind int

const (
	receiveBuffer bufferKind = iota
	sendBuffer
)

// Shares of a socket buffer that hold payload: the kernel counts every
// segment's bookkeeping against the buffer too. Measured on Linux over a
// veth pair: a connection whose 4 MiB send buffer was full kept 3.6 MB in
// flight; a receive buffer advertises about 60 % of itself as window.
const (
	sendPayload    = 0.85
	receivePayload = 0.6
)

// ConnBytes estimates the most payload one TCP connection of this host
// keeps in flight, whichever way the data goes: the smaller of what its
// send buffer and its receive window hold, taking the far end's limits
// to be this host's. rcv and snd are the buffers set with SetBuffers (0:
// autotuned, up to the kernel's tcp_rmem and tcp_wmem maxima). 0 means
// unknown: the kernel does not say.
func ConnBytes(rcv, snd int) int64 {
	maxRcv, maxSnd := autotuneLimits()
	if rcv > 0 {
		maxRcv = rcv
	}
	if snd > 0 {
		maxSnd = snd
	}
	if maxRcv <= 0 || maxSnd <= 0 {
		return 0
	}
	return int64(min(sendPayload*float64(maxSnd), receivePayload*float64(maxRcv)))
}
