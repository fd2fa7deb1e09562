// Package hostile runs an in-process SSH server that lies, as a
// compromised host would, for tests of what a client may be made to do:
// it serves a virtual tree (Tree) over SFTP whose listings may hold one
// name twice, whose STAT may disagree with them, whose links point
// anywhere, which may change between two runs and may never end; it
// answers the commands hpncp runs (its tar probe, tar -c, find's
// hard-link listing, sha256sum and scp -f) from that tree or with
// whatever the scenario writes; and its keyboard-interactive questions
// may carry terminal escapes. It refuses every write. It logs in a client
// the way internal/sshtest does, with the files sshtest.ClientFiles
// writes.
package hostile

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// Home is the login directory as the server names it: relative paths
// resolve here, and only paths below it exist.
const Home = "/home/hostile"

// KeyboardInteractive is the one round of questions the server asks
// instead of accepting the client's key. Any answers log in.
type KeyboardInteractive struct {
	Name, Instruction string
	Prompts           []string
}

// Options configures a Server.
type Options struct {
	Tree *Tree
	// KeyboardInteractive, if set, is the only way in.
	KeyboardInteractive *KeyboardInteractive
}

// Server is a running hostile server; it stops when its test ends.
type Server struct {
	Addr           string
	Port           int
	ClientKeyFile  string
	KnownHostsFile string
	ConfigFile     string // host "testhost", BatchMode yes

	tb        testing.TB
	opts      Options
	clientKey ssh.PublicKey
	hostKey   ssh.Signer
	ln        net.Listener
	wg        sync.WaitGroup

	mu       sync.Mutex
	tree     *Tree
	commands []string
	conns    map[net.Conn]struct{}
	closed   bool

	served atomic.Int64 // listing entries sent
}

// Start starts a server on 127.0.0.1 serving o.Tree.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("hostile: host key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("hostile: host key: %v", err)
	}
	s := &Server{tb: t, opts: o, hostKey: signer, tree: o.Tree, conns: map[net.Conn]struct{}{}}
	if s.tree == nil {
		s.tree = NewTree()
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hostile: listen: %v", err)
	}
	s.Addr = s.ln.Addr().String()
	s.Port = s.ln.Addr().(*net.TCPAddr).Port
	s.ClientKeyFile, s.KnownHostsFile, s.ConfigFile, s.clientKey = sshtest.ClientFiles(t, "127.0.0.1", s.Port, signer.PublicKey())
	cfg := s.serverConfig()
	s.wg.Add(1)
	go s.accept(cfg)
	t.Cleanup(s.close)
	return s
}

// SetTree makes the server serve t from now on: the tree of a second run.
func (s *Server) SetTree(t *Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tree = t
}

func (s *Server) currentTree() *Tree {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree
}

// Commands returns every command line the server was asked to run, in
// order.
func (s *Server) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// Served reports how many listing entries the server has sent.
func (s *Server) Served() int64 { return s.served.Load() }

func (s *Server) serverConfig() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{ServerVersion: "SSH-2.0-hpncp_hostile"}
	if ki := s.opts.KeyboardInteractive; ki != nil {
		cfg.KeyboardInteractiveCallback = func(c ssh.ConnMetadata, ch ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			echo := make([]bool, len(ki.Prompts))
			_, err := ch(ki.Name, ki.Instruction, ki.Prompts, echo)
			return nil, err
		}
	} else {
		cfg.PublicKeyCallback = func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if subtle.ConstantTimeCompare(key.Marshal(), s.clientKey.Marshal()) == 1 {
				return nil, nil
			}
			return nil, errors.New("public key not authorized")
		}
	}
	cfg.AddHostKey(s.hostKey)
	return cfg
}

func (s *Server) accept(cfg *ssh.ServerConfig) {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, nc)
				s.mu.Unlock()
				nc.Close()
			}()
			s.serveConn(nc, cfg)
		}()
	}
}

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *Server) serveConn(nc net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "session channels only")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.session(ch, creqs)
		}()
	}
}

func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "subsystem":
			var p struct{ Name string }
			ok := ssh.Unmarshal(req.Payload, &p) == nil && p.Name == "sftp"
			req.Reply(ok, nil)
			if ok {
				go ssh.DiscardRequests(reqs)
				s.serveSFTP(ch)
				return
			}
		case "exec":
			var p struct{ Command string }
			ok := ssh.Unmarshal(req.Payload, &p) == nil
			req.Reply(ok, nil)
			if ok {
				go ssh.DiscardRequests(reqs)
				s.mu.Lock()
				s.commands = append(s.commands, p.Command)
				s.mu.Unlock()
				status := s.exec(p.Command, ch, ch, ch.Stderr())
				ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
				ch.CloseWrite()
				return
			}
		default:
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}
}

func (s *Server) serveSFTP(ch ssh.Channel) {
	h := &handler{s: s}
	srv := sftp.NewRequestServer(ch, sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h},
		sftp.WithStartDirectory(Home))
	_ = srv.Serve()
	srv.Close()
}

// rel maps a path the SFTP server cleaned (absolute) to the tree's, and
// reports false for paths outside the login directory.
func rel(p string) (string, bool) {
	p = path.Clean("/" + p)
	if p == Home {
		return "", true
	}
	if !strings.HasPrefix(p, Home+"/") {
		return "", false
	}
	return p[len(Home)+1:], true
}

// handler answers SFTP requests from the current tree.
type handler struct{ s *Server }

func (h *handler) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	p, ok := rel(r.Filepath)
	if !ok {
		return nil, os.ErrNotExist
	}
	e, _, ok := h.s.currentTree().lookup(p, true)
	switch {
	case !ok:
		return nil, os.ErrNotExist
	case e.Kind != File:
		return nil, errors.New("not a regular file")
	}
	return strings.NewReader(string(e.Data)), nil
}

func (h *handler) Filewrite(*sftp.Request) (io.WriterAt, error) { return nil, os.ErrPermission }
func (h *handler) Filecmd(*sftp.Request) error                  { return os.ErrPermission }

func (h *handler) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	p, ok := rel(r.Filepath)
	if !ok {
		return nil, os.ErrNotExist
	}
	t := h.s.currentTree()
	switch r.Method {
	case "List":
		e, real, ok := t.lookup(p, true)
		if !ok {
			return nil, os.ErrNotExist
		}
		if e.Kind != Dir {
			return nil, errors.New("not a directory")
		}
		es, ok := t.list(real)
		if !ok {
			return nil, os.ErrNotExist
		}
		return &lister{s: h.s, es: es}, nil
	case "Stat", "Lstat":
		e, _, ok := t.lookup(p, r.Method == "Stat")
		if !ok {
			return nil, os.ErrNotExist
		}
		return &lister{es: []Entry{e}}, nil
	}
	return nil, errors.New("unsupported")
}

// Readlink reads a link's target out as the tree gives it: of a name
// listed twice, the entry that is a link, whatever STAT says, so that a
// client that believes the listing gets the link it was shown.
func (h *handler) Readlink(p string) (string, error) {
	rp, ok := rel(p)
	if !ok {
		return "", os.ErrNotExist
	}
	t := h.s.currentTree()
	if dir, real, ok := t.lookup(path.Dir(rp), true); ok && dir.Kind == Dir {
		es, _ := t.list(real)
		for _, e := range es {
			if e.Name == path.Base(rp) && e.Kind == Symlink {
				return e.Target, nil
			}
		}
	}
	e, _, ok := t.lookup(rp, false)
	if !ok || e.Kind != Symlink {
		return "", os.ErrNotExist
	}
	return e.Target, nil
}

// RealPath resolves . and names below the login directory, as the
// client's first REALPATH asks.
func (h *handler) RealPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		p = Home + "/" + p
	}
	return path.Clean(p), nil
}

type lister struct {
	s  *Server // counts what it serves, for listings
	es []Entry
}

func (l *lister) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l.es)) {
		return 0, io.EOF
	}
	n := 0
	for i := off; i < int64(len(l.es)) && n < len(out); i++ {
		out[n] = info{l.es[i]}
		n++
	}
	if l.s != nil {
		l.s.served.Add(int64(n))
	}
	if off+int64(n) >= int64(len(l.es)) {
		return n, io.EOF
	}
	return n, nil
}
