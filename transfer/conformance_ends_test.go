//go:build linux

package transfer_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/protocol/scp"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// The adapters below are the only code of the suite that knows how an end
// is reached: each turns local paths (every server here serves this
// machine's file system) into the operands of one engine, through the
// package's exported API alone.

// copyFunc copies srcs to target, each an absolute path on this machine;
// the end decides which side of the copy is remote.
type copyFunc func(ctx context.Context, srcs []string, target string, o transfer.Options) (*transfer.Result, error)

// end is one way of copying that every case runs on.
type end struct {
	name string
	// up is set when the far side is the target (an upload); false for
	// downloads and for local copies.
	up bool
	// open connects for one case; the connection ends with the test.
	open func(t *testing.T) copyFunc
	// hostile, when not nil, connects to a server that lists names
	// (the hostile ones among them) as the only entries of the
	// directory dir, for a download of dir. nil where the end cannot
	// make its far side send such names: a real sshd and every upload,
	// whose names come from this side.
	hostile func(t *testing.T, dir string, names []string) copyFunc
	// differs marks the cases this end fails today, with the reason: a
	// real difference of the end, or a finding awaiting a fix.
	differs map[string]difference
}

// difference is a case's known failure on one end: the run must show
// the problem expect names (so that a fix is noticed and the mark
// removed), and why tells the reader what it is.
type difference struct {
	expect string
	why    string
}

// server is a host the remote ends talk to.
type server struct {
	name string
	// dial opens a connection; the SFTP ends call it from their own
	// goroutines for more connections, so it reports and never fails
	// the test.
	dial func(ctx context.Context) (*ssh.Client, error)
}

// connect opens a connection for a test, closed when it ends.
func (s server) connect(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := s.dial(context.Background())
	if err != nil {
		t.Fatalf("connect to %s: %v", s.name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialer(name, addr string, cfg *ssh.ClientConfig) server {
	return server{name: name, dial: func(ctx context.Context) (*ssh.Client, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return ssh.NewClient(c, chans, reqs), nil
	}}
}

// inProcess is internal/sshtest's server, running commands (scp -t/-f,
// tar) with /bin/sh on this machine as sshd would.
func inProcess(t *testing.T) server {
	return sshtestServer(t, "inproc", sshtest.Start(t, sshtest.Options{Exec: sshtest.ShellExec(t.TempDir())}))
}

// tarServer is an in-process server that counts the tar streams it
// runs, so that the tar ends can tell that a tree went over tar and not
// over SFTP beside it.
func tarServer(t *testing.T) (server, *atomic.Int64) {
	run := sshtest.ShellExec(t.TempDir())
	var streams atomic.Int64
	srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		if strings.HasPrefix(cmd, "tar -x") || strings.HasPrefix(cmd, "tar -c") {
			streams.Add(1)
		}
		return run(cmd, stdin, stdout, stderr)
	}})
	return sshtestServer(t, "inproc", srv), &streams
}

// countedTarEnds are the tar ends on in-process servers of their own,
// both ways, each checking that its trees went over tar.
func countedTarEnds() []end {
	var out []end
	for _, up := range []bool{true, false} {
		out = append(out, end{name: "tar-inproc-" + direction(up), up: up, open: func(t *testing.T) copyFunc {
			s, streams := tarServer(t)
			return countedTar(sftpCopy(openSFTP(t, s), up, withTar), streams)
		}})
	}
	return out
}

// countedTar fails a run that copied a tree with none of its files over
// tar: the tar ends would otherwise test SFTP without telling.
func countedTar(cp copyFunc, streams *atomic.Int64) copyFunc {
	return func(ctx context.Context, srcs []string, target string, o transfer.Options) (*transfer.Result, error) {
		before := streams.Load()
		res, err := cp(ctx, srcs, target, o)
		if res != nil && ctx.Err() == nil && o.Recursive && treeWithFiles(srcs) && streams.Load() == before {
			res.Errors = append(res.Errors, errors.New("conformance: a tree was copied in tar mode without a tar stream"))
		}
		return res, err
	}
}

// treeWithFiles reports whether a source is a local directory holding a
// regular file somewhere below it (every server here serves this
// machine's files).
func treeWithFiles(srcs []string) bool {
	for _, src := range srcs {
		found := false
		filepath.WalkDir(src, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				found = true
				return filepath.SkipAll
			}
			return nil
		})
		if fi, err := os.Stat(src); err == nil && fi.IsDir() && found {
			return true
		}
	}
	return false
}

func sshtestServer(t *testing.T, name string, srv *sshtest.Server) server {
	return dialer(name, srv.Addr, srv.ClientConfig(t))
}

// realSSHD is OpenSSH's sshd on 127.0.0.1; without one the test is
// skipped, or fails under HPNCP_E2E=require.
func realSSHD(t *testing.T) (server, *sshdtest.Server) {
	s := sshdtest.Start(t, sshdtest.Options{})
	return dialer("sshd", s.Addr(), s.ClientConfig(t)), s
}

// localEnd copies between two local paths.
func localEnd() end {
	return end{name: "local",
		open: func(*testing.T) copyFunc { return localCopy(transfer.Local{}) },
		hostile: func(_ *testing.T, dir string, names []string) copyFunc {
			return localCopy(listedFS{dir: dir, names: names})
		},
	}
}

func localCopy(from transfer.FS) copyFunc {
	return func(ctx context.Context, srcs []string, target string, o transfer.Options) (*transfer.Result, error) {
		return transfer.Copy(ctx, endpoints(from, srcs), transfer.Endpoint{FS: transfer.Local{}, Path: target}, o)
	}
}

// listedFS is the local file system with the directory dir listed as
// names alone, each a regular file of five bytes, as a broken file
// system (or a FUSE one under someone else's control) might list it.
type listedFS struct {
	transfer.Local
	dir   string
	names []string
}

func (l listedFS) ReadDir(name string) ([]fs.FileInfo, error) {
	if name != l.dir {
		return l.Local.ReadDir(name)
	}
	var out []fs.FileInfo
	for _, n := range l.names {
		out = append(out, listedFile(n))
	}
	return out, nil
}

type listedFile string

func (f listedFile) Name() string       { return string(f) }
func (f listedFile) Size() int64        { return 5 }
func (f listedFile) Mode() fs.FileMode  { return 0o644 }
func (f listedFile) ModTime() time.Time { return time.Unix(1e9, 0) }
func (f listedFile) IsDir() bool        { return false }
func (f listedFile) Sys() any           { return nil }

// parallel is the CLI's kind of parallel pipeline, sized for tests: files
// of 1 MiB and more go over two streams.
func parallel() transfer.ParallelOptions {
	return transfer.ParallelOptions{
		Controller: func() *window.Controller { return window.New(window.Config{Fixed: 2}) },
		MinSize:    1 << 20,
		Chunk:      256 << 10,
	}
}

// openSFTP opens an SFTP end over a connection of s, dialing more of
// them for parallel streams and tar.
func openSFTP(t *testing.T, s server) *protocol.SFTP {
	t.Helper()
	fsys, err := protocol.OpenSFTP(s.connect(t), protocol.Options{Label: s.name + ":",
		Dial: func(ctx context.Context) (*ssh.Client, protocol.Readying, error) {
			c, err := s.dial(ctx)
			return c, protocol.Readying{}, err
		}})
	if err != nil {
		t.Fatalf("open SFTP on %s: %v", s.name, err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// sftpCopy copies over fsys in the direction up says, with tune applied
// to the options.
func sftpCopy(fsys transfer.FS, up bool, tune func(*transfer.Options)) copyFunc {
	return func(ctx context.Context, srcs []string, target string, o transfer.Options) (*transfer.Result, error) {
		tune(&o)
		if up {
			return transfer.Copy(ctx, endpoints(transfer.Local{}, srcs), transfer.Endpoint{FS: fsys, Path: target}, o)
		}
		return transfer.Copy(ctx, endpoints(fsys, srcs), transfer.Endpoint{FS: transfer.Local{}, Path: target}, o)
	}
}

func endpoints(fsys transfer.FS, paths []string) []transfer.Endpoint {
	var out []transfer.Endpoint
	for _, p := range paths {
		out = append(out, transfer.Endpoint{FS: fsys, Path: p})
	}
	return out
}

func withParallel(o *transfer.Options) { o.Parallel = parallel() }

// withTar forces tar mode, with every file of a tree in the tar stream
// rather than beside it over SFTP, so that the case tests tar.
func withTar(o *transfer.Options) {
	o.Parallel = parallel()
	o.Tar = transfer.TarOptions{Mode: transfer.TarForce, MaxSize: 1 << 40}
}

// sftpEnds are the SFTP ends on s, both ways.
func sftpEnds(s server, tune func(*transfer.Options), kind string) []end {
	var out []end
	for _, up := range []bool{true, false} {
		e := end{name: kind + "-" + s.name + "-" + direction(up), up: up}
		e.open = func(t *testing.T) copyFunc { return sftpCopy(openSFTP(t, s), up, tune) }
		out = append(out, e)
	}
	return out
}

// scpEnds are the legacy SCP ends on s, both ways.
func scpEnds(s server) []end {
	var out []end
	for _, up := range []bool{true, false} {
		e := end{name: "scp-" + s.name + "-" + direction(up), up: up}
		e.open = func(t *testing.T) copyFunc { return scpCopy(scp.NewHost(s.connect(t), s.name+":"), up) }
		out = append(out, e)
	}
	return out
}

func scpCopy(h *scp.Host, up bool) copyFunc {
	far := transfer.SCP{Host: h}
	return func(ctx context.Context, srcs []string, target string, o transfer.Options) (*transfer.Result, error) {
		if up {
			return transfer.Copy(ctx, endpoints(transfer.Local{}, srcs), transfer.Endpoint{FS: far, Path: target}, o)
		}
		return transfer.Copy(ctx, endpoints(far, srcs), transfer.Endpoint{FS: transfer.Local{}, Path: target}, o)
	}
}

func direction(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// hostileSFTP is an in-process server whose listing of dir holds names
// alone, each as a regular file, whatever is on disk; tune says whether
// the copy goes over SFTP or tar.
func hostileSFTP(tune func(*transfer.Options)) func(t *testing.T, dir string, names []string) copyFunc {
	return func(t *testing.T, dir string, names []string) copyFunc {
		list := func(p string) func() []string {
			if p != dir {
				return nil
			}
			var once sync.Once
			return func() []string {
				var out []string
				once.Do(func() { out = names })
				return out
			}
		}
		srv := sshtest.Start(t, sshtest.Options{ListDir: list, Exec: sshtest.ShellExec(t.TempDir())})
		return sftpCopy(openSFTP(t, sshtestServer(t, "hostile", srv)), false, tune)
	}
}

// hostileSCP is an in-process "scp -f" that answers a download of dir
// with a directory holding names, each a file of five bytes, sent all at
// once whatever the client answers.
func hostileSCP(t *testing.T, dir string, names []string) copyFunc {
	msg := "D0755 0 " + path.Base(dir) + "\n"
	for _, n := range names {
		msg += "C0644 5 " + n + "\nhello\x00"
	}
	msg += "E\n"
	srv := sshtest.Start(t, sshtest.Options{Exec: func(_ string, stdin io.Reader, stdout, _ io.Writer) int {
		if _, err := io.ReadFull(stdin, make([]byte, 1)); err != nil {
			return 1
		}
		io.WriteString(stdout, msg)
		if cw, ok := stdout.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, stdin)
		return 0
	}})
	return scpCopy(scp.NewHost(srv.Dial(t), "hostile:"), false)
}
