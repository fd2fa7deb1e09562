// Package protocol speaks the wire protocols hpncp moves files with over
// SSH: SFTP to any stock server, and the streams of remote commands.
package protocol

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// posixRename is OpenSSH's extension for a rename that replaces its target
// atomically; plain SFTP rename refuses an existing target.
const posixRename = "posix-rename@openssh.com"

// SFTP is a remote file system reached over one SFTP session. Its methods
// have the shape transfer.FS asks for.
type SFTP struct {
	c     *sftp.Client
	label string
	// atomicRename is set when the server offers posix-rename.
	atomicRename bool
}

// OpenSFTP starts an SFTP session on conn. label prefixes paths in
// messages ("host:").
func OpenSFTP(conn *ssh.Client, label string) (*SFTP, error) {
	c, err := sftp.NewClient(conn,
		sftp.UseConcurrentWrites(true),
		sftp.UseConcurrentReads(true),
	)
	if err != nil {
		return nil, fmt.Errorf("start sftp session on %s %w", label, err)
	}
	_, ok := c.HasExtension(posixRename)
	return &SFTP{c: c, label: label, atomicRename: ok}, nil
}

// Close ends the session; the SSH connection stays open.
func (s *SFTP) Close() error { return s.c.Close() }

func (s *SFTP) Label() string { return s.label }

func (s *SFTP) Stat(name string) (fs.FileInfo, error) { return s.c.Stat(name) }

func (s *SFTP) ReadDir(name string) ([]fs.FileInfo, error) { return s.c.ReadDir(name) }

func (s *SFTP) Glob(pattern string) ([]string, error) { return s.c.Glob(pattern) }

func (s *SFTP) Open(name string) (io.ReadCloser, error) { return s.c.Open(name) }

// CreateExclusive creates name, failing with fs.ErrExist if it exists.
func (s *SFTP) CreateExclusive(name string) (io.WriteCloser, error) {
	f, err := s.c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		// SFTP v3 has no "exists" status: OpenSSH answers a plain failure.
		if _, serr := s.c.Lstat(name); serr == nil {
			return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
		}
		return nil, err
	}
	return f, nil
}

func (s *SFTP) Mkdir(name string) error { return s.c.Mkdir(name) }

// Rename replaces newname with oldname. Without posix-rename the server
// cannot replace atomically, so the old target is removed first: the only
// window in which neither exists.
func (s *SFTP) Rename(oldname, newname string) error {
	if s.atomicRename {
		return s.c.PosixRename(oldname, newname)
	}
	err := s.c.Rename(oldname, newname)
	if err == nil {
		return nil
	}
	if _, serr := s.c.Lstat(newname); serr != nil {
		return err
	}
	if rerr := s.c.Remove(newname); rerr != nil {
		return errors.Join(err, rerr)
	}
	return s.c.Rename(oldname, newname)
}

func (s *SFTP) Remove(name string) error { return s.c.Remove(name) }

func (s *SFTP) Chmod(name string, mode fs.FileMode) error { return s.c.Chmod(name, mode) }

func (s *SFTP) Chtimes(name string, atime, mtime time.Time) error {
	return s.c.Chtimes(name, atime, mtime)
}

func (s *SFTP) Abs(name string) (string, error) { return s.c.RealPath(name) }

func (s *SFTP) Join(elem ...string) string { return path.Join(elem...) }
func (s *SFTP) Dir(name string) string     { return path.Dir(name) }
func (s *SFTP) Base(name string) string    { return path.Base(name) }
