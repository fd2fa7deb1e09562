package protocol

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
)

// ReadySession is an SFTP session opened on a connection ahead of need
// (OpenReady): its channel is open, the sftp subsystem started and INIT
// sent, with the OPEN of the file a download reads behind it where that
// was known (PreOpen). Its VERSION, and that OPEN's reply, are read by
// the session it becomes (newRawSession): a long path's streams then
// start with their first READ, or their file's OPEN, not three round
// trips before it.
type ReadySession struct {
	ch   ssh.Channel
	sent string // the file opened behind INIT, "" for none
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

// readyNow is the Readying of sessions already open.
func readyNow(rs []ReadySession) Readying {
	return Readying{N: len(rs), Wait: func() []ReadySession { return rs }}
}

// preOpened is a file a session opened for reading before any stream
// asked for it (OpenReady's name), its OPEN's reply perhaps still on its
// way: the stream that opens that name for reading on the session takes
// it (rawSession.takePre).
type preOpened struct {
	name string
	op   *opening
}

// preOpenID is the id of the OPEN behind INIT.
const preOpenID = 1

// PreOpen names the file a download of one file reads, known before its
// size is, for the sessions opened ahead to open it behind their INIT
// (OpenReady): each stream's first request is then its first READ.
// They open it only once the SFTP start's early stat has shown a regular
// file (Options.Stat must ask for Name): an OPEN of a FIFO would hold the
// server's sftp-server, and every request behind it, until a writer came.
// A session whose INIT goes out before the stat is answered does not
// wait for it: it leaves the OPEN to its stream (openAhead). Those of a
// connection dialed ahead (Predial) send INIT after the answer, and open
// the file with it.
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

// OpenReady opens n SFTP sessions on conn side by side, up to their
// INIT, and returns those that got that far; their VERSION is read by
// the session each becomes. One that failed is left to the pool, which
// opens a session when a stream asks and fails there with the reason.
// Each session opens pre's file, where it may (PreOpen), in the same
// write as its INIT; a file that does not open leaves the session
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
			// opened, is often answered between the two, and a stream
			// decided at the ask spends a round trip on its OPEN.
			var name string
			ch, err := startSession(conn, func() [][]byte {
				if name = pre.name(); name == "" {
					return nil
				}
				return [][]byte{openRequest(preOpenID, name)}
			})
			if err != nil {
				return
			}
			mu.Lock()
			out = append(out, ReadySession{ch: ch, sent: name})
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
	pc.readying += n
	go func() {
		rs := ready()
		p.mu.Lock()
		p.preparing -= n
		pc.readying -= n
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
	guess := firstHandle(pc.c)
	for _, r := range rs {
		pc.open++
		pc.idle = append(pc.idle, newRawSession(r.ch, p.packet, sessionStart{versionDue: true, sent: r.sent, guess: guess}))
	}
}
