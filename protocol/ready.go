package protocol

import (
	"sync"

	"golang.org/x/crypto/ssh"
)

// ReadySession is an SFTP session opened on a connection ahead of need
// (OpenReady): its channel is open, the sftp subsystem started and INIT
// answered. A long path's streams then start with their file's OPEN, not
// three round trips before it.
type ReadySession struct{ ch ssh.Channel }

// OpenReady opens n SFTP sessions on conn side by side and returns those
// that opened. One that failed is left to the pool, which opens a
// session when a stream asks and fails there with the reason.
func OpenReady(conn *ssh.Client, n int) []ReadySession {
	var (
		mu  sync.Mutex
		out []ReadySession
		wg  sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			ch, _, err := helloSFTP(conn)
			if err != nil {
				return
			}
			mu.Lock()
			out = append(out, ReadySession{ch})
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
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
		pc.idle = append(pc.idle, newRawSession(r.ch, p.packet))
	}
}
