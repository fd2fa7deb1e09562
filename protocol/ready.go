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

// Readying is what a dial (Options.Dial) brings besides its connection:
// N sessions being opened on it ahead of need (OpenReady), which Wait
// returns once they are ready. The zero Readying brings none.
type Readying struct {
	N    int
	Wait func() []ReadySession
}

// StartReady starts opening n sessions on conn (OpenReady) and returns
// them as a Readying, whose Wait is called once.
func StartReady(conn *ssh.Client, n int, pre *PreOpen) Readying {
	if n <= 0 {
		return Readying{}
	}
	ready := make(chan []ReadySession, 1)
	go func() { ready <- OpenReady(conn, n, pre) }()
	return Readying{N: n, Wait: func() []ReadySession { return <-ready }}
}

// ReadyNow is the Readying of sessions already open.
func ReadyNow(rs []ReadySession) Readying {
	return Readying{N: len(rs), Wait: func() []ReadySession { return rs }}
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
// A session whose INIT goes out before the stat is answered does not
// wait for it: it opens the file after VERSION if the answer came by
// then, else leaves the OPEN to its stream. Those of a connection dialed
// ahead (Predial) send INIT after the answer, and open the file with it.
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
			// Decided as INIT goes out, not as the channel is asked
			// for: the start's stat, which says whether the file may be
			// opened, is often answered between the two (seen at 100
			// ms: asked for 100 ms before the answer, INIT sent 150 ms
			// after it, and each stream spent a round trip on its OPEN).
			var name string
			ch, _, err := helloSFTP(conn, func() [][]byte {
				if name = pre.name(); name == "" {
					return nil
				}
				return [][]byte{openRequest(preOpenID, name)}
			})
			if err != nil {
				return
			}
			r, err := openedAfter(ch, name, pre)
			if err != nil {
				_ = ch.Close()
				return
			}
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// openedAfter makes ch, past its VERSION, a ReadySession. sent names the
// file whose OPEN went out behind INIT ("" if none); its reply is read
// here. Where none went and pre's stat has been answered since (a
// session opened beside the start sends INIT before the answer), the
// session opens the file now, while the streams it is for wait for the
// copy's other connections.
func openedAfter(ch ssh.Channel, sent string, pre *PreOpen) (ReadySession, error) {
	r := ReadySession{ch: ch}
	name := sent
	if name == "" {
		if name = pre.name(); name != "" {
			if _, err := ch.Write(openRequest(preOpenID, name)); err != nil {
				return r, err
			}
		}
	}
	if name != "" {
		var err error
		if r.pre, err = readPreOpen(ch, preOpenID, name); err != nil {
			return r, err
		}
	}
	return r, nil
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
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expectLocked(pc, n, ready)
}

// expectLocked is expect with p.mu held.
func (p *pool) expectLocked(pc *pconn, n int, ready func() []ReadySession) {
	if n <= 0 || ready == nil {
		return
	}
	p.preparing += n
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
