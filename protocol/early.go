package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync"
)

// A copy's first request to a host is the stat of its operand there (the
// target of an upload, the source of a download), and it waits on the
// round trip of the session start before it. Options.Stat asks for it on
// the limits session, behind INIT and the limits question: the answer
// comes with theirs, and the copy's Stat takes it instead of asking. An
// LSTAT of each name goes with it: a sync stats its operand, then its
// lister looks at the root without following a link.
//
// An early answer is as old as the session's start, so it is given only
// to Stats and Lstats that come before any other request of the end, and
// only for the name it was asked for: nothing has changed on the server
// through this end since it was given. The end's first Stat or Lstat
// drops the other names' answers, and every request that may change
// something (onMain, getBatch, the streams, tar) drops them all.

// earlyID is the request id of the first early stat; limitsSession's
// question is id 1.
const earlyID = 2

// earlyStat is the server's answer to an early stat.
type earlyStat struct {
	fi  fs.FileInfo
	err error
}

// earlyKey names an early answer: a name's STAT, or (link) its LSTAT.
type earlyKey struct {
	name string
	link bool
}

// earlyStats holds the answers until the end's first Stat.
type earlyStats struct {
	mu sync.Mutex
	m  map[earlyKey]earlyStat // nil once another request came
}

// take returns the early answer for name (its LSTAT's, link) if no
// request but Stats and Lstats of name came before, and drops every
// other name's answers: a Stat of another name asks the server, and so
// does every Stat after it. (A sync stats its source to know whether the
// target is a directory, then lists from it: Stats and an Lstat of one
// name, nothing between.)
func (e *earlyStats) take(name string, link bool) (earlyStat, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.m[earlyKey{name, link}]
	if !ok {
		e.m = nil
		return a, false
	}
	kept := map[earlyKey]earlyStat{}
	for _, k := range []earlyKey{{name, false}, {name, true}} {
		if v, ok := e.m[k]; ok {
			kept[k] = v
		}
	}
	e.m = kept
	return a, true
}

// drop forgets the answers: a request other than a Stat is under way.
func (e *earlyStats) drop() {
	e.mu.Lock()
	e.m = nil
	e.mu.Unlock()
}

// getBatch is s.batch.get for a request that may change the server's
// files, after which no early answer holds.
func (s *SFTP) getBatch(ctx context.Context) (*batchSession, error) {
	s.early.drop()
	return s.batch.get(ctx)
}

// statRequests are the STAT requests for names, ids from earlyID on,
// then their LSTATs.
func statRequests(names []string) []byte {
	var out []byte
	for i, n := range names {
		out = append(out, namePacket(fxpStat, uint32(earlyID+i), n)...)
	}
	for i, n := range names {
		out = append(out, namePacket(fxpLstat, uint32(earlyID+len(names)+i), n)...)
	}
	return out
}

// readStart reads the replies to the limits question (id 1) and to the
// early stats of names, in whatever order the server sends them. A
// stat's answer is kept when it is attributes, or a status that pkg/sftp
// would turn into fs.ErrNotExist; any other status is left for the copy's
// own Stat to ask again and report in its own words.
func readStart(r io.Reader, h hello, names []string, f startFiles) (Limits, map[earlyKey]earlyStat, startMade, error) {
	var (
		lim  Limits
		made startMade
	)
	answers := map[earlyKey]earlyStat{}
	seen := make([]bool, 2*len(names))
	base := createAfter(names)
	replies := 1 + 2*len(names) + f.requests()
	var mkdirOK, statOK, rmdirOK bool
	for range replies {
		typ, body, err := readPacket(r)
		if err != nil {
			return Limits{}, nil, startMade{}, err
		}
		var id uint32
		if len(body) >= 4 {
			id = binary.BigEndian.Uint32(body)
		}
		if i := int(id) - earlyID; id >= earlyID && i < 2*len(names) && !seen[i] {
			seen[i] = true
			k := earlyKey{names[i%len(names)], i >= len(names)}
			if a, ok := earlyAnswer(typ, body[4:], k.name); ok {
				answers[k] = a
			}
			continue
		}
		if id >= base && id < base+uint32(f.requests()) && (typ == fxpHandle || typ == fxpStatus || typ == fxpAttrs) {
			switch {
			case f.create != "" && id == base:
				if typ == fxpHandle {
					if made.handle, _, err = readString(body[4:]); err != nil {
						return Limits{}, nil, startMade{}, fmt.Errorf("sftp: %w in the handle of %s", err, f.create)
					}
				}
			case id == f.probeID(base): // MKDIR
				mkdirOK = typ == fxpStatus && statusError(body[4:]) == nil
			case id == f.probeID(base)+1: // STAT
				if typ == fxpAttrs {
					if fi, err := parseAttrs(body[4:], f.probe); err == nil {
						made.mask, statOK = probeMask(fi), true
					}
				}
			case id == f.probeID(base)+2: // RMDIR
				rmdirOK = typ == fxpStatus && statusError(body[4:]) == nil
			}
			continue
		}
		// Anything else is the limits reply, which readLimits judges.
		lim, err = readLimits(bytes.NewReader(sftpPacket(typ, body)), h, 1)
		if err != nil {
			return Limits{}, nil, startMade{}, err
		}
	}
	made.maskKnown = f.probe != "" && mkdirOK && statOK && rmdirOK
	made.probeLeft = mkdirOK && !rmdirOK
	if !made.maskKnown {
		made.mask = 0
	}
	return lim, answers, made, nil
}

// createAfter is the request id of the OPEN that creates the temporary
// file of Options.PreCreate, behind the early stats and lstats of names.
func createAfter(names []string) uint32 { return uint32(earlyID + 2*len(names)) }

// earlyAnswer turns the reply of type typ (body after the id) to the
// stat or lstat of name into what Stat or Lstat returns, or false when it
// should ask.
func earlyAnswer(typ byte, body []byte, name string) (earlyStat, bool) {
	switch typ {
	case fxpAttrs:
		fi, err := parseAttrs(body, name)
		if err != nil {
			return earlyStat{}, false
		}
		fi.name = path.Base(name) // as pkg/sftp's Stat and Lstat name it
		return earlyStat{fi: fi}, true
	case fxpStatus:
		if len(body) >= 4 && binary.BigEndian.Uint32(body) == fxNoSuchFile {
			// As pkg/sftp's Stat reports it.
			return earlyStat{err: fs.ErrNotExist}, true
		}
	}
	return earlyStat{}, false
}
