package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/ssh"
)

const limitsExtension = "limits@openssh.com"

// SafePacket is the largest read or write every SFTP server must accept.
const SafePacket = 32 << 10

// maxPacketCap bounds what hpncp asks for even when a server allows more:
// larger packets save little CPU and cost latency and memory.
const maxPacketCap = 256 << 10

// Limits are what a server says it accepts in one request.
type Limits struct {
	MaxRead, MaxWrite int64 // payload bytes; 0 when the server did not say
	// RTT is the round trip of the last request of the exchange: the
	// whole path's, where the kernel's TCP RTT sees only the first hop of
	// a relay, a jump host or a proxy.
	RTT time.Duration
}

// Packet returns the payload size to use for reads and writes: the
// server's own limit when it announced one, else the size every server
// takes. Exceeding a server's read limit makes it return short reads, which
// some clients take for the end of the file, so the limit is never guessed.
func (l Limits) Packet() int {
	if l.MaxRead <= 0 || l.MaxWrite <= 0 {
		return SafePacket
	}
	return int(min(l.MaxRead, l.MaxWrite, maxPacketCap))
}

// QueryLimits asks the server's SFTP subsystem for its request limits
// (OpenSSH's limits@openssh.com, in OpenSSH 8.7 and later). A server without
// the extension yields zero Limits and no error.
func QueryLimits(conn *ssh.Client) (Limits, error) {
	ch, lim, _, _, err := limitsSession(conn, nil, startFiles{})
	if err != nil {
		return Limits{}, err
	}
	_ = ch.Close()
	return lim, nil
}

// limitsSession opens an SFTP session and asks it for the server's
// limits, as QueryLimits, and returns the session, with no request in
// flight, to be used on rather than closed: its set-up took as many round
// trips as the question.
//
// The question goes out right behind INIT, before VERSION tells whether
// the server knows it: one round trip for both. A server that does not
// know it answers with a status, as SFTP asks of unknown extended
// requests, and gets no other question. The stats of names go behind
// it (early.go).
func limitsSession(conn *ssh.Client, names []string, f startFiles) (ssh.Channel, Limits, map[earlyKey]earlyStat, startMade, error) {
	const id = 1
	ask := sftpPacket(fxpExtended, appendString(binary.BigEndian.AppendUint32(nil, id), limitsExtension))
	ahead := append([][]byte{ask, statRequests(names)}, f.packets(createAfter(names))...)
	ch, h, err := helloSFTP(conn, func() [][]byte { return ahead })
	if err != nil {
		return nil, Limits{}, nil, startMade{}, fmt.Errorf("ask for limits: %w", err)
	}
	lim, early, made, err := readStart(ch, h, names, f)
	if err != nil {
		_ = ch.Close()
		return nil, Limits{}, nil, startMade{}, fmt.Errorf("ask for limits: %w", err)
	}
	return ch, lim, early, made, nil
}

// readLimits reads the reply to limits@openssh.com request id from a
// server whose VERSION reply was h: the limits, or a status from a
// server that did not announce the extension.
func readLimits(r io.Reader, h hello, id uint32) (Limits, error) {
	typ, body, err := readPacket(r)
	switch {
	case err != nil:
		return Limits{}, err
	case hasExtension(h.ext, limitsExtension):
		lim, err := parseLimits(typ, body, id)
		if err != nil {
			return Limits{}, err
		}
		lim.RTT = time.Since(h.sent)
		return lim, nil
	case typ != fxpStatus || len(body) < 4 || binary.BigEndian.Uint32(body) != id:
		return Limits{}, fmt.Errorf("sftp: unexpected reply %d to %s from a server without it", typ, limitsExtension)
	}
	return Limits{RTT: h.rtt}, nil
}

// parseLimits reads the reply of type typ to limits@openssh.com request id.
func parseLimits(typ byte, body []byte, id uint32) (Limits, error) {
	if typ != fxpExtendedReply || len(body) < 4+4*8 || binary.BigEndian.Uint32(body) != id {
		return Limits{}, fmt.Errorf("sftp: unexpected reply %d to %s", typ, limitsExtension)
	}
	body = body[4:]
	readLen := binary.BigEndian.Uint64(body[8:])
	writeLen := binary.BigEndian.Uint64(body[16:])
	const sane = 64 << 20
	if readLen > sane || writeLen > sane {
		return Limits{}, fmt.Errorf("sftp: implausible limits read=%d write=%d", readLen, writeLen)
	}
	return Limits{MaxRead: int64(readLen), MaxWrite: int64(writeLen)}, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// sftpPacket frames payload as an SFTP packet of type typ.
func sftpPacket(typ byte, payload []byte) []byte {
	p := binary.BigEndian.AppendUint32(make([]byte, 0, 5+len(payload)), uint32(1+len(payload)))
	p = append(p, typ)
	return append(p, payload...)
}

// namePacket is a request of type typ, with id id, whose only field is
// name (STAT, RMDIR, REMOVE, CLOSE of a handle).
func namePacket(typ byte, id uint32, name string) []byte {
	return sftpPacket(typ, appendString(binary.BigEndian.AppendUint32(nil, id), name))
}

// readPacket reads one reply; replies here are small, so anything large
// is a protocol error rather than something to allocate for.
func readPacket(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("sftp: read reply: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > 64<<10 {
		return 0, nil, fmt.Errorf("sftp: reply of %d bytes", n)
	}
	body := make([]byte, n-1)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("sftp: read reply: %w", err)
	}
	return hdr[4], body, nil
}

// hasExtension reports whether the extension pairs of a VERSION reply
// name ext.
func hasExtension(b []byte, ext string) bool {
	for len(b) > 0 {
		name, rest, err := readString(b)
		if err != nil {
			return false
		}
		_, rest, err = readString(rest)
		if err != nil {
			return false
		}
		if name == ext {
			return true
		}
		b = rest
	}
	return false
}

func readString(b []byte) (string, []byte, error) {
	if len(b) < 4 {
		return "", nil, errors.New("short string")
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", nil, errors.New("short string")
	}
	return string(b[4 : 4+n]), b[4+n:], nil
}
