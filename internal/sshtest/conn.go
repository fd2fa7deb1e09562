package sshtest

import (
	"errors"
	"io"
	"net"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// conn handles the channels of one authenticated connection.
//
// One goroutine receives both new channels and the requests of every open
// session. x/crypto/ssh closes a session's request channel before it
// delivers a channel open the client sent after closing that session, so
// before refusing an open at the session limit this goroutine can handle
// every close already delivered (drain): a client that closes a session and
// opens another is never refused, as with sshd, which reads both in order.
type conn struct {
	srv      *Server
	sessions []*session
}

type session struct {
	ch      ssh.Channel
	reqs    <-chan *ssh.Request
	started bool // a subsystem or command runs on it
}

func (c *conn) loop(chans <-chan ssh.NewChannel) {
	for {
		cases := make([]reflect.SelectCase, 0, 1+len(c.sessions))
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(chans)})
		cases = append(cases, c.sessionCases()...)
		i, v, ok := reflect.Select(cases)
		if i > 0 {
			c.sessionEvent(i-1, v, ok)
			continue
		}
		if !ok {
			return
		}
		c.open(v.Interface().(ssh.NewChannel))
	}
}

func (c *conn) sessionCases() []reflect.SelectCase {
	cases := make([]reflect.SelectCase, len(c.sessions))
	for i, ss := range c.sessions {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ss.reqs)}
	}
	return cases
}

// drain handles every session request and close already delivered.
func (c *conn) drain() {
	for {
		cases := append(c.sessionCases(), reflect.SelectCase{Dir: reflect.SelectDefault})
		i, v, ok := reflect.Select(cases)
		if i == len(c.sessions) {
			return
		}
		c.sessionEvent(i, v, ok)
	}
}

func (c *conn) sessionEvent(i int, v reflect.Value, ok bool) {
	ss := c.sessions[i]
	if !ok {
		ss.ch.Close()
		c.sessions = append(c.sessions[:i], c.sessions[i+1:]...)
		return
	}
	c.request(ss, v.Interface().(*ssh.Request))
}

func (c *conn) open(nc ssh.NewChannel) {
	s := c.srv
	switch nc.ChannelType() {
	case "session":
		if max := s.opts.MaxSessions; max > 0 && len(c.sessions) >= max {
			c.drain()
			if len(c.sessions) >= max {
				// sshd's words for a session beyond MaxSessions.
				nc.Reject(ssh.Prohibited, "open failed")
				return
			}
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			s.logf("accept session: %v", err)
			return
		}
		c.sessions = append(c.sessions, &session{ch: ch, reqs: reqs})
		s.mu.Lock()
		s.sessions++
		s.mu.Unlock()
	case "direct-tcpip":
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.forward(nc)
		}()
	default:
		nc.Reject(ssh.UnknownChannelType, "unknown channel type "+nc.ChannelType())
	}
}

func (c *conn) request(ss *session, req *ssh.Request) {
	s := c.srv
	switch req.Type {
	case "subsystem":
		var p struct{ Name string }
		ok := !ss.started && !s.opts.NoSFTP && ssh.Unmarshal(req.Payload, &p) == nil && p.Name == "sftp"
		reply(req, ok)
		if ok {
			ss.started = true
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveSFTP(ss.ch)
			}()
		}
	case "exec":
		var p struct{ Command string }
		ok := !ss.started && s.opts.Exec != nil && ssh.Unmarshal(req.Payload, &p) == nil
		reply(req, ok)
		if ok {
			ss.started = true
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.exec(ss.ch, p.Command)
			}()
		}
	default:
		// shell, pty-req, env and the like: this server offers none.
		reply(req, false)
	}
}

func reply(req *ssh.Request, ok bool) {
	if req.WantReply {
		req.Reply(ok, nil)
	}
}

func (s *Server) serveSFTP(ch ssh.Channel) {
	defer ch.Close()
	var rwc io.ReadWriteCloser = ch
	{
		// The listings the test serves are answered, and the requests it
		// holds held, between the channel and the server; so are
		// symbolic links, which pkg/sftp's server would make otherwise
		// than OpenSSH's (see listingProxy.symlink), and
		// lsetstat@openssh.com, which it lacks.
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		p := &listingProxy{list: s.opts.ListDir, hold: s.opts.Hold, root: s.Root, withLsetstat: !s.opts.NoLsetstat, out: ch}
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.serve(ch, inW, outR)
		}()
		defer func() {
			outW.Close()
			inR.Close()
			ch.Close()
			<-done
		}()
		rwc = struct {
			io.Reader
			io.Writer
			io.Closer
		}{inR, outW, outW}
	}
	srv, err := sftp.NewServer(rwc, sftp.WithServerWorkingDirectory(s.Root), sftp.WithMaxTxPacket(maxReadLength))
	if err != nil {
		s.logf("start sftp server: %v", err)
		return
	}
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		s.logf("sftp session: %v", err)
	}
}

func (s *Server) exec(ch ssh.Channel, cmd string) {
	defer ch.Close()
	status := s.opts.Exec(cmd, ch, ch, ch.Stderr())
	// Same order as sshd: exit status, then EOF, then close.
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
	ch.CloseWrite()
}

// forward serves a direct-tcpip channel. Only loopback targets are allowed,
// so that no test can reach beyond the machine through a jump host.
func (s *Server) forward(nc ssh.NewChannel) {
	var p struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
		nc.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	if ip := net.ParseIP(p.Host); ip == nil || !ip.IsLoopback() {
		nc.Reject(ssh.Prohibited, "sshtest forwards to loopback addresses only, not "+p.Host)
		return
	}
	target := net.JoinHostPort(p.Host, strconv.FormatUint(uint64(p.Port), 10))
	tc, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		tc.Close()
		s.logf("accept direct-tcpip to %s: %v", target, err)
		return
	}
	if !s.track(tc) {
		ch.Close()
		return
	}
	defer s.untrack(tc)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ssh.DiscardRequests(reqs)
	}()

	// Each direction passes EOF on as a half-close, as sshd does; an error
	// in either direction ends both.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(tc, ch); err != nil {
			ch.Close()
			tc.Close()
			return
		}
		tc.(*net.TCPConn).CloseWrite()
	}()
	go func() {
		defer wg.Done()
		if _, err := io.Copy(ch, tc); err != nil {
			ch.Close()
			tc.Close()
			return
		}
		ch.CloseWrite()
	}()
	wg.Wait()
	ch.Close()
}
