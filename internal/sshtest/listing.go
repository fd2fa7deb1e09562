package sshtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// SFTP packet types the listing hook answers itself
// (draft-ietf-secsh-filexfer-02).
const (
	fxpClose   = 4
	fxpOpendir = 11
	fxpReaddir = 12
	fxpSymlink = 20
	fxpStatus  = 101
	fxpHandle  = 102
	fxpName    = 104

	fxOK               = 0
	fxEOF              = 1
	fxNoSuchFile       = 2
	fxPermissionDenied = 3
	fxFailure          = 4
)

// maxPacket bounds a client's SFTP packet, as OpenSSH's sftp-server does.
const maxPacket = 256 << 10

// SFTP requests whose first field is a path, which Options.Hold is asked
// about.
var pathRequests = map[byte]bool{
	3: true, 7: true, 9: true, 11: true, 13: true, 14: true,
	15: true, 16: true, 17: true, 18: true, 19: true, 20: true,
}

// listingProxy stands between a session channel and pkg/sftp's server:
// it answers the listings Options.ListDir takes over and every SYMLINK,
// holds the requests Options.Hold names, and hands every other request
// to the server, whose
// replies it passes back whole, so that its own replies never split one
// of the server's.
type listingProxy struct {
	list func(dir string) func() []string
	hold func(path string) <-chan struct{}
	root string // the server's working directory

	wmu sync.Mutex
	out io.Writer // the channel

	handles map[string]func() []string // the reading goroutine's only
	next    int
}

// serve relays between ch and a server reading toServer and writing
// fromServer, until ch or the server ends.
func (p *listingProxy) serve(ch io.Reader, toServer io.WriteCloser, fromServer io.Reader) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			pkt, err := readPacket(fromServer)
			if err != nil {
				return
			}
			if p.write(pkt) != nil {
				return
			}
		}
	}()
	for {
		pkt, err := readPacket(ch)
		if err != nil {
			break
		}
		p.wait(pkt)
		if p.answer(pkt) {
			continue
		}
		if _, err := toServer.Write(pkt); err != nil {
			break
		}
	}
	toServer.Close()
	wg.Wait()
}

// wait returns once Options.Hold lets pkt through.
func (p *listingProxy) wait(pkt []byte) {
	if p.hold == nil || len(pkt) < 9 || !pathRequests[pkt[4]] {
		return
	}
	if name, _, ok := cutString(pkt[9:]); ok {
		if held := p.hold(name); held != nil {
			<-held
		}
	}
}

// answer replies to pkt itself when it belongs to a listing the hook
// serves, and reports whether it did.
func (p *listingProxy) answer(pkt []byte) bool {
	if len(pkt) < 9 {
		return false
	}
	typ, id, body := pkt[4], pkt[5:9], pkt[9:]
	if typ == fxpSymlink {
		return p.symlink(id, body)
	}
	if p.list == nil {
		return false
	}
	arg, _, ok := cutString(body)
	if !ok {
		return false
	}
	switch typ {
	case fxpOpendir:
		names := p.list(arg)
		if names == nil {
			return false
		}
		p.next++
		h := "sshtest-listing-" + strconv.Itoa(p.next)
		if p.handles == nil {
			p.handles = map[string]func() []string{}
		}
		p.handles[h] = names
		_ = p.write(packet(fxpHandle, id, appendString(nil, h)))
		return true
	case fxpReaddir:
		names, ok := p.handles[arg]
		if !ok {
			return false
		}
		batch := names()
		if len(batch) == 0 {
			_ = p.write(status(id, fxEOF, "end of listing"))
			return true
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(len(batch)))
		for _, n := range batch {
			b = appendString(b, n)
			b = appendString(b, "-rw-r--r-- 1 sshtest sshtest 0 Jan 1 00:00 "+n)
			// Attributes: permissions only, those of a regular file.
			b = binary.BigEndian.AppendUint32(b, 0x4)
			b = binary.BigEndian.AppendUint32(b, 0o100644)
		}
		_ = p.write(packet(fxpName, id, b))
		return true
	case fxpClose:
		if _, ok := p.handles[arg]; !ok {
			return false
		}
		delete(p.handles, arg)
		_ = p.write(status(id, fxOK, ""))
		return true
	}
	return false
}

// symlink makes the link a SYMLINK request asks for, as OpenSSH's
// sftp-server does: the target comes first (the draft's order is the
// other way round) and is stored as sent. pkg/sftp's server resolves a
// relative target against its working directory, which would make
// every relative link an absolute one.
func (p *listingProxy) symlink(id, body []byte) bool {
	target, rest, ok := cutString(body)
	if !ok {
		return false
	}
	link, _, ok := cutString(rest)
	if !ok {
		return false
	}
	if !filepath.IsAbs(link) {
		link = filepath.Join(p.root, link)
	}
	code, msg := uint32(fxOK), ""
	if err := os.Symlink(target, link); err != nil {
		code, msg = fxFailure, err.Error()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			code = fxNoSuchFile
		case errors.Is(err, fs.ErrPermission):
			code = fxPermissionDenied
		}
	}
	_ = p.write(status(id, code, msg))
	return true
}

func (p *listingProxy) write(pkt []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.out.Write(pkt)
	return err
}

// readPacket reads one SFTP packet, its length included.
func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > maxPacket {
		return nil, fmt.Errorf("sshtest: sftp packet of %d bytes", n)
	}
	pkt := make([]byte, 4+n)
	copy(pkt, hdr[:])
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		return nil, errors.Join(io.ErrUnexpectedEOF, err)
	}
	return pkt, nil
}

func packet(typ byte, id, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(1+len(id)+len(body)))
	b = append(b, typ)
	b = append(b, id...)
	return append(b, body...)
}

func status(id []byte, code uint32, msg string) []byte {
	b := binary.BigEndian.AppendUint32(nil, code)
	b = appendString(b, msg)
	b = appendString(b, "")
	return packet(fxpStatus, id, b)
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func cutString(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", nil, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}

// EndlessListing returns an Options.ListDir hook under which every
// directory for which match holds never ends: each READDIR brings a
// hundred names not seen before, as a broken or hostile server's might.
func EndlessListing(match func(dir string) bool) func(string) func() []string {
	return func(p string) func() []string {
		if !match(p) {
			return nil
		}
		var mu sync.Mutex
		n := 0
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			names := make([]string, 100)
			for i := range names {
				n++
				names[i] = fmt.Sprintf("name-%09d", n)
			}
			return names
		}
	}
}
