package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
)

// ReadySession is an SFTP session opened on a connection ahead of need
// (OpenReady): its channel is open, the sftp subsystem started and INIT
// answered. A long path's streams then start with their file's OPEN, not
// three round trips before it, or with their first READ where the
// session opened the file behind its INIT.
type ReadySession struct {
	ch  ssh.Channel
	pre *preOpened
}

// preOpened is a file a session opened for reading before any stream
// asked for it (OpenReady's name): the stream that opens that name for
// reading on the session takes the handle (rawSession.open).
type preOpened struct{ name, handle string }

// preOpenID is the id of the OPEN behind INIT; its reply is read before
// the session takes other requests.
const preOpenID = 1

// PreOpen names the file a download of one file reads, known before its
// size is, for the sessions opened ahead to open it behind their INIT
// (OpenReady): each stream's first request is then its first READ.
// They open it only once the SFTP start's early stat has shown a regular
// file (Options.Stat must ask for Name): an OPEN of a FIFO would hold the
// server's sftp-server, and every request behind it, until a writer came.
// The sessions opened beside the start, before the stat is answered, do
// not wait for it: a connection dialed ahead (Predial) is ready after the
// start, and its sessions open the file.
type PreOpen struct {
	Name    string
	regular atomic.Bool
}

// name is the file to open ahead now, or "".
func (p *PreOpen) name() string {
	if p == nil || !p.regular.Load() {
		return ""
	}
	return p.Name
}

// OpenReady opens n SFTP sessions on conn side by side and returns those
// that opened. One that failed is left to the pool, which opens a
// session when a stream asks and fails there with the reason. Each
// session opens pre's file, where it may (PreOpen), in the same round
// trip as its INIT; a file that does not open leaves the session
// without it, and the stream's own OPEN reports why.
func OpenReady(conn *ssh.Client, n int, pre *PreOpen) []ReadySession {
	var (
		mu  sync.Mutex
		out []ReadySession
		wg  sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			var ahead [][]byte
			name := pre.name()
			if name != "" {
				ahead = append(ahead, openRequest(preOpenID, name))
			}
			ch, _, err := helloSFTP(conn, ahead...)
			if err != nil {
				return
			}
			r := ReadySession{ch: ch}
			if name != "" {
				if r.pre, err = readPreOpen(ch, preOpenID, name); err != nil {
					_ = ch.Close()
					return
				}
			}
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// openRequest is an OPEN of name for reading, with request id id.
func openRequest(id uint32, name string) []byte {
	return sftpPacket(fxpOpen, appendOpen(binary.BigEndian.AppendUint32(nil, id), name, fxfRead, 0))
}

// readPreOpen reads the reply to openRequest(id, name): the file opened,
// or nil where the server said no.
func readPreOpen(r io.Reader, id uint32, name string) (*preOpened, error) {
	typ, body, err := readPacket(r)
	if err != nil {
		return nil, err
	}
	return preOpenReply(typ, body, id, name)
}

// preOpenReply judges the reply of type typ to openRequest(id, name).
func preOpenReply(typ byte, body []byte, id uint32, name string) (*preOpened, error) {
	if len(body) < 4 || binary.BigEndian.Uint32(body) != id {
		return nil, fmt.Errorf("sftp: unexpected reply %d to the open of %s", typ, name)
	}
	switch typ {
	case fxpStatus:
		return nil, nil
	case fxpHandle:
		h, _, err := readString(body[4:])
		if err != nil {
			return nil, fmt.Errorf("sftp: %w in the handle of %s", err, name)
		}
		return &preOpened{name: name, handle: h}, nil
	}
	return nil, fmt.Errorf("sftp: unexpected reply %d to the open of %s", typ, name)
}

// expect makes the sessions ready will return, opened ahead on pc, idle
// sessions of the pool. Until they are, they count as sessions being
// prepared: prepare opens no others in their place, and the streams
// wait for them rather than open their own.
func (p *pool) expect(pc *pconn, n int, ready func() []ReadySession) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	p.preparing += n
	p.mu.Unlock()
	go func() {
		rs := ready()
		p.mu.Lock()
		p.preparing -= n
		var unused []ReadySession
		if pc.dead || p.closed {
			unused = rs
		} else {
			p.adoptReady(pc, rs)
		}
		p.wakePrepared()
		p.mu.Unlock()
		for _, r := range unused {
			_ = r.ch.Close()
		}
	}()
}

// adoptReady makes rs idle sessions of pc; p.mu is held.
func (p *pool) adoptReady(pc *pconn, rs []ReadySession) {
	for _, r := range rs {
		pc.open++
		rs := newRawSession(r.ch, p.packet)
		rs.pre = r.pre
		pc.idle = append(pc.idle, rs)
	}
}
