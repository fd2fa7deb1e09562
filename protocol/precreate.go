package protocol

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"sync"

	"golang.org/x/crypto/ssh"
)

// An upload of one small file writes a temporary file beside its target
// and renames it into place, and the temporary file's OPEN had to wait for
// the target's stat: a round trip of its own. Where the copy knows its
// target before the start (Options.PreCreate), the start's limits session
// creates that temporary file, owner-only and exclusively, behind the
// early stat, and PutSmall writes it through the handle it got. A target
// that turns out to be a directory puts the file elsewhere; the temporary
// file created for nothing is closed and removed (DropUnused).

// PreCreate names the target of an upload of one small file, the
// temporary file the copy will write for it, and the name of the
// directory that learns the server's umask for the file's mode (Probe,
// transfer's umask probe), made, looked at and removed in the same round
// trip (Options.PreCreate).
type PreCreate struct{ Final, Temp, Probe string }

// startFiles are the requests PreCreate puts behind the early stats, from
// the id createAfter gives on: the temporary file's OPEN, then the umask
// probe's MKDIR, STAT and RMDIR.
type startFiles struct{ create, probe string }

func (f startFiles) requests() int {
	n := 0
	if f.create != "" {
		n++
	}
	if f.probe != "" {
		n += 3
	}
	return n
}

// probeID is the umask probe's MKDIR's id when the requests start at base.
func (f startFiles) probeID(base uint32) uint32 {
	if f.create != "" {
		return base + 1
	}
	return base
}

// packets are the requests, ids from base on.
func (f startFiles) packets(base uint32) [][]byte {
	var out [][]byte
	if f.create != "" {
		out = append(out, createRequest(base, f.create))
	}
	if f.probe != "" {
		id := f.probeID(base)
		out = append(out,
			sftpPacket(fxpMkdir, appendMkdir(binary.BigEndian.AppendUint32(nil, id), f.probe, 0o777)),
			namePacket(fxpStat, id+1, f.probe),
			namePacket(fxpRmdir, id+2, f.probe))
	}
	return out
}

// startMade is what the requests of startFiles made: the temporary
// file's handle ("" if it was not created), the umask the probe learnt,
// and whether the probe's directory is left to remove.
type startMade struct {
	handle    string
	mask      fs.FileMode
	maskKnown bool
	probeLeft bool
}

// createRequest is an OPEN that creates name, owner-only, failing where
// it exists, with request id id.
func createRequest(id uint32, name string) []byte {
	return sftpPacket(fxpOpen, appendOpen(binary.BigEndian.AppendUint32(nil, id), name, fxfWrite|fxfCreat|fxfExcl, 0o600))
}

// dropMade closes the temporary file made on ch and removes it, and the
// umask probe's directory if it is left, waiting for the replies, before
// the start gives ch up.
func dropMade(ch ssh.Channel, made startMade, f startFiles) {
	if ch == nil {
		return
	}
	const id = 1 << 30
	var reqs [][]byte
	if made.handle != "" {
		reqs = append(reqs, namePacket(fxpClose, id, made.handle), namePacket(fxpRemove, id+1, f.create))
	}
	if made.probeLeft {
		reqs = append(reqs, namePacket(fxpRmdir, id+2, f.probe))
	}
	if len(reqs) == 0 {
		return
	}
	if _, err := ch.Write(bytes.Join(reqs, nil)); err != nil {
		return
	}
	for range reqs {
		if _, _, err := readPacket(ch); err != nil {
			return
		}
	}
}

// created is the temporary file the start created (PreCreate), on the
// session that holds its handle.
type created struct {
	mu     sync.Mutex
	rs     *rawSession
	final  string
	name   string
	handle string
	// mask is the umask the start's probe learnt, where maskKnown;
	// probeLeft is the probe's directory when its RMDIR failed.
	mask      fs.FileMode
	maskKnown bool
	probeLeft string
}

// TempFor returns the temporary file created ahead for the target final,
// if any: the copy writes that one rather than name another.
func (s *SFTP) TempFor(final string) (string, bool) {
	c := &s.created
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handle == "" || c.final != final {
		return "", false
	}
	return c.name, true
}

// takeCreated hands over the temporary file tmp created ahead: its
// session and an open file on it; nil when it is not that one.
func (s *SFTP) takeCreated(tmp string) (*rawSession, *rawFile) {
	c := &s.created
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handle == "" || c.name != tmp {
		return nil, nil
	}
	rs, f := c.rs, &rawFile{s: c.rs, handle: c.handle}
	c.handle = ""
	return rs, f
}

// DropUnused closes and removes the temporary file created ahead if
// nothing took it (the target was a directory, or the copy went another
// way), and the umask probe's directory if its removal failed. It waits
// for the server; a session lost meanwhile leaves the removal to the main
// session, started again on a live connection.
func (s *SFTP) DropUnused() {
	c := &s.created
	c.mu.Lock()
	rs, name, handle, left := c.rs, c.name, c.handle, c.probeLeft
	c.handle, c.probeLeft = "", ""
	c.mu.Unlock()
	if handle != "" {
		_ = (&rawFile{s: rs, handle: handle}).Close()
		if err := rs.simple(fxpRemove, func(b []byte) []byte { return appendString(b, name) }); err != nil {
			_ = s.Remove(name)
		}
	}
	if left != "" {
		_ = s.Remove(left)
	}
}

// startUmask is the umask the start's probe learnt (PreCreate.Probe).
func (s *SFTP) startUmask() (fs.FileMode, bool) {
	s.created.mu.Lock()
	defer s.created.mu.Unlock()
	return s.created.mask, s.created.maskKnown
}
