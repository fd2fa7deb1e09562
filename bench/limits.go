package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The demo's SFTP server is pkg/sftp's, which has no limits@openssh.com
// (OpenSSH 8.7 and later). Without it a client must assume the 32 KiB
// requests every server takes, which is not what hpncp meets on a stock
// sshd and costs eight times the requests. limitsFilter sits between the
// channel and pkg/sftp's server and adds the extension: it announces it in
// the VERSION reply and answers the request itself, with the limits that
// server honours.

// SFTP packet types the filter looks at (draft-ietf-secsh-filexfer-02 and
// OpenSSH's PROTOCOL).
const (
	sftpVersion       = 2
	sftpExtended      = 200
	sftpExtendedReply = 201
)

const limitsExtension = "limits@openssh.com"

// The limits the demo announces are OpenSSH's sftp-server's: packets of
// 256 KiB, reads and writes of 1 KiB less. pkg/sftp's server reads
// packets of up to 256 KiB and caps a read reply at demoMaxPacket.
const (
	demoMaxMessage = 256 << 10
	demoMaxHandles = 1024
)

// maxFilterPacket bounds a packet the filter reads from the client:
// anything larger is refused, as pkg/sftp's server would refuse it.
const maxFilterPacket = demoMaxMessage + 1024

// limitsFilter is an SFTP server's channel with limits@openssh.com added.
// Read hands the server the client's packets, minus the limits requests;
// Write passes the server's replies on, extending the first (VERSION) and
// slipping the filter's own replies in between two of the server's.
type limitsFilter struct {
	ch io.ReadWriteCloser

	rbuf []byte // the client's current packet
	in   []byte // what of it the server has not read yet

	wmu     sync.Mutex
	first   []byte   // the server's first reply, until it is whole
	started bool     // the first reply has gone out
	need    int      // bytes of the server's current reply still to come
	queued  [][]byte // the filter's replies, sent at the next boundary
}

func newLimitsFilter(ch io.ReadWriteCloser) *limitsFilter {
	return &limitsFilter{ch: ch}
}

func (f *limitsFilter) Read(p []byte) (int, error) {
	for len(f.in) == 0 {
		pkt, err := f.readPacket()
		if err != nil {
			return 0, err
		}
		if reply, ok := limitsReply(pkt); ok {
			if err := f.inject(reply); err != nil {
				return 0, err
			}
			continue
		}
		f.in = pkt
	}
	n := copy(p, f.in)
	f.in = f.in[n:]
	return n, nil
}

// readPacket reads one whole packet, length prefix included.
func (f *limitsFilter) readPacket() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(f.ch, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > maxFilterPacket {
		return nil, fmt.Errorf("sftp packet of %d bytes", n)
	}
	if cap(f.rbuf) < int(4+n) {
		f.rbuf = make([]byte, 4+n)
	}
	pkt := f.rbuf[:4+n]
	copy(pkt, hdr[:])
	if _, err := io.ReadFull(f.ch, pkt[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return pkt, nil
}

// limitsReply returns the reply to pkt when it is a limits@openssh.com
// request.
func limitsReply(pkt []byte) ([]byte, bool) {
	const head = 4 + 1 + 4 // length, type, id
	if len(pkt) < head+4 || pkt[4] != sftpExtended {
		return nil, false
	}
	id := binary.BigEndian.Uint32(pkt[5:])
	name := pkt[head:]
	n := binary.BigEndian.Uint32(name)
	if uint64(n) > uint64(len(name)-4) || string(name[4:4+n]) != limitsExtension {
		return nil, false
	}
	r := make([]byte, 4, head+4*8)
	r = append(r, sftpExtendedReply)
	r = binary.BigEndian.AppendUint32(r, id)
	r = binary.BigEndian.AppendUint64(r, demoMaxMessage)
	r = binary.BigEndian.AppendUint64(r, demoMaxPacket) // read
	r = binary.BigEndian.AppendUint64(r, demoMaxPacket) // write
	r = binary.BigEndian.AppendUint64(r, demoMaxHandles)
	binary.BigEndian.PutUint32(r, uint32(len(r)-4))
	return r, true
}

// inject sends reply now if the server is between replies, else as soon
// as its current one is out: replies are never interleaved.
func (f *limitsFilter) inject(reply []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.started && f.need == 0 {
		_, err := f.ch.Write(reply)
		return err
	}
	f.queued = append(f.queued, reply)
	return nil
}

// Write passes the server's bytes on, reply by reply. pkg/sftp's server
// writes a reply's header (length prefix included) and payload in one or
// two calls, one reply at a time.
func (f *limitsFilter) Write(p []byte) (int, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	total := len(p)
	if !f.started {
		n, err := f.writeFirst(p)
		if err != nil || n == len(p) {
			return n, err
		}
		p = p[n:]
	}
	for len(p) > 0 {
		if f.need == 0 {
			if len(p) < 4 {
				return total - len(p), errors.New("sftp reply split inside its length")
			}
			f.need = 4 + int(binary.BigEndian.Uint32(p))
		}
		k := min(f.need, len(p))
		if _, err := f.ch.Write(p[:k]); err != nil {
			return total - len(p), err
		}
		f.need -= k
		p = p[k:]
		if f.need == 0 {
			if err := f.flush(); err != nil {
				return total - len(p), err
			}
		}
	}
	return total, nil
}

// writeFirst collects the server's first reply, the VERSION, and sends it
// with limits@openssh.com among its extensions. It returns how much of p
// it took.
func (f *limitsFilter) writeFirst(p []byte) (int, error) {
	took := len(p)
	f.first = append(f.first, p...)
	if len(f.first) < 4 {
		return took, nil
	}
	size := 4 + int(binary.BigEndian.Uint32(f.first))
	if len(f.first) < size {
		return took, nil
	}
	took -= len(f.first) - size
	v := f.first[:size]
	if size > 4 && v[4] == sftpVersion {
		v = appendString(v, limitsExtension)
		v = appendString(v, "1")
		binary.BigEndian.PutUint32(v, uint32(len(v)-4))
	}
	f.started, f.first = true, nil
	if _, err := f.ch.Write(v); err != nil {
		return took, err
	}
	return took, f.flush()
}

func (f *limitsFilter) flush() error {
	for len(f.queued) > 0 {
		r := f.queued[0]
		f.queued = f.queued[1:]
		if _, err := f.ch.Write(r); err != nil {
			return err
		}
	}
	return nil
}

func (f *limitsFilter) Close() error { return f.ch.Close() }

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
