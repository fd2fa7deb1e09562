package transfer

// Resuming (--resume): a file being written keeps a journal entry on the
// local machine that names its temporary file, the source it comes from
// and its watermark, the length of the prefix known to be written and
// acknowledged. A run that is interrupted or loses its connection keeps
// the temporary file; the next run with --resume checks that the source
// is unchanged and that the bytes before the watermark match, and sends
// only the rest.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hpncp/hpncp/protocol"
)

// journalVersion is the version of a journal entry's format; an entry of
// another version is ignored and its file started over.
const journalVersion = 1

// An entry is written again once this long has passed or the watermark
// moved this far since its last write: often enough that a killed run
// loses little, rarely enough to cost nothing next to the copy.
const (
	journalInterval = time.Second
	journalBytes    = 16 << 20
)

// journalMinSize is the smallest file that has a journal entry in a run
// without --resume: a large file killed (SIGKILL, a crash) or cut off from
// its server keeps its temporary file anyway, and with the entry a re-run
// with --resume continues it. Smaller files cost more to journal than to
// send again.
const journalMinSize = 64 << 20

// resumeMinSize is the smallest file journaled under --resume. Sending a
// smaller one again costs less than its journal entry (files created,
// renamed and removed: a write alone takes 0.3 ms on ext4 here, see
// BenchmarkJournalSave, which over a tree of small files adds up), so it
// is started over like any other.
const resumeMinSize = 1 << 20

// overlapCheck is how many bytes before the watermark must match on both
// ends before a file is resumed: they catch a temporary file that another
// program changed, or a watermark that claims more than was written.
const overlapCheck = 1 << 20

// ResumeDir returns the directory hpncp keeps its resume journal in:
// $XDG_STATE_HOME/hpncp/resume, or ~/.local/state/hpncp/resume.
func ResumeDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the resume journal's directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "hpncp", "resume"), nil
}

// journalEntry is what the journal keeps about one file being written.
type journalEntry struct {
	Version int    `json:"version"`
	Target  string `json:"target"` // host label and path of the final name
	Temp    string `json:"temp"`   // the temporary file, in the target end's syntax
	Source  string `json:"source"`
	Size    int64  `json:"size"`
	// MTime is the source's modification time in Unix nanoseconds.
	MTime     int64 `json:"mtime"`
	Watermark int64 `json:"watermark"`
	// Sparse says the blocks of zeros were left unwritten and counted as
	// written: the file may be shorter than its watermark.
	Sparse bool `json:"sparse,omitempty"`
}

// watermark follows the chunks of one file as they complete, in any order,
// and keeps the length of the prefix every byte of which is written.
type watermark struct {
	at    int64
	ahead map[int64]int64 // completed ranges past at: start → end
}

// add records that the n bytes at off are written.
func (w *watermark) add(off int64, n int) {
	end := off + int64(n)
	switch {
	case end <= w.at:
		return
	case off > w.at:
		if w.ahead == nil {
			w.ahead = map[int64]int64{}
		}
		w.ahead[off] = max(w.ahead[off], end)
		return
	}
	w.at = end
	for moved := true; moved; {
		moved = false
		for s, e := range w.ahead {
			if s <= w.at {
				delete(w.ahead, s)
				w.at = max(w.at, e)
				moved = true
			}
		}
	}
}

// partial is a file with a journal entry: under --resume every file of
// resumeMinSize or more, and without it those of journalMinSize or more. Its methods may be called on nil, a file without an
// entry, and then do nothing.
type partial struct {
	path string // the journal entry's file
	from int64  // the bytes the temporary file had when this run started
	// resume is set under --resume: the entry must be written, and the
	// temporary file is kept when the copy is interrupted. Without it the
	// entry is written where it can be, for a later --resume.
	resume bool
	logf   func(format string, args ...any)

	mu      sync.Mutex // guards the fields below it but err
	e       journalEntry
	wm      watermark
	savedAt time.Time
	saved   int64
	saving  bool // a write of the entry is under way or due
	closed  bool // the entry is final or gone: no more writes

	// wmu orders the writes of the entry: each takes the watermark once
	// it holds wmu, so that no write overtakes a later one.
	wmu sync.Mutex
	err error // the first failure to save, reported once; under wmu
}

// targetID names a target file in the journal: host label and path,
// absolute for a local one. A remote path is taken as given (relative to
// the login directory), which costs no round trip per file.
func targetID(dst Endpoint) string {
	p := dst.Path
	if dst.FS.Label() == "" {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	return dst.FS.Label() + p
}

func journalPath(dir, target string) string {
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(dir, hex.EncodeToString(sum[:16])+".json")
}

// resumePoint returns the partial file for dst, nil for a file too small
// to journal. Under --resume that is the one a previous run left, when it
// can be continued, or a fresh one; a previous temporary file that cannot
// be continued is removed and the reason logged. Without --resume it is a
// fresh one.
func (c *copier) resumePoint(ctx context.Context, src, dst Endpoint, si fs.FileInfo) (*partial, error) {
	if c.opts.Resume && si.Size() < resumeMinSize {
		return nil, nil
	}
	if !c.opts.Resume {
		if si.Size() < journalMinSize || c.opts.ResumeDir == "" || os.MkdirAll(c.opts.ResumeDir, 0o700) != nil {
			return nil, nil
		}
		// This run starts over: a temporary file a killed run left would
		// otherwise stay behind for good.
		c.forgetTarget(dst)
		return c.newPartial(src, dst, si), nil
	}
	if c.opts.ResumeDir == "" {
		return nil, &Error{Op: "resume", Path: dst.String(), Err: errors.New("no journal directory")}
	}
	if err := os.MkdirAll(c.opts.ResumeDir, 0o700); err != nil {
		return nil, &Error{Op: "create the resume journal", Path: c.opts.ResumeDir, Err: err,
			Hint: "set XDG_STATE_HOME to a writable directory"}
	}
	p := c.newPartial(src, dst, si)
	old, err := readJournal(p.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		c.logf("resume: starting %s over: %v", dst, err)
		return p, nil
	}
	from, why := c.checkPartial(ctx, src, dst, si, old)
	if why != "" {
		c.logf("resume: starting %s over: %s", dst, why)
		if old.Target == targetID(dst) && validTemp(dst, old.Temp) {
			_ = dst.FS.Remove(old.Temp)
		}
		_ = os.Remove(p.path)
		return p, nil
	}
	p.from = from
	p.e.Temp = old.Temp
	p.e.Watermark = from
	p.wm.at = from
	p.saved = from
	c.logf("resume: %s continues from byte %d of %d", dst, from, si.Size())
	return p, nil
}

func (c *copier) newPartial(src, dst Endpoint, si fs.FileInfo) *partial {
	return &partial{
		path:   journalPath(c.opts.ResumeDir, targetID(dst)),
		resume: c.opts.Resume,
		logf:   c.logf,
		e: journalEntry{Version: journalVersion, Target: targetID(dst), Source: src.String(),
			Size: si.Size(), MTime: si.ModTime().UnixNano(), Sparse: c.opts.Sparse},
	}
}

func readJournal(name string) (journalEntry, error) {
	var e journalEntry
	b, err := os.ReadFile(name)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("read resume journal %s: %w", name, err)
	}
	return e, nil
}

// validTemp reports whether name is a temporary file hpncp would have
// made for dst: in its directory, with its prefix. A journal entry naming
// anything else is not followed, so that it can never make hpncp write to
// or remove another file.
func validTemp(dst Endpoint, name string) bool {
	base := dst.FS.Base(name)
	// Exactly the name the run would have made: "//d/.hpncp.part" is in
	// /d on Linux, but a name that is not its own clean form is not one
	// this journal wrote.
	return name != "" && name == dst.FS.Join(dst.FS.Dir(dst.Path), base) &&
		strings.HasPrefix(base, tempPrefix) && strings.HasSuffix(base, ".part") && ValidName(base) == nil
}

// checkPartial returns where the temporary file old names can be
// continued from, or why it cannot.
func (c *copier) checkPartial(ctx context.Context, src, dst Endpoint, si fs.FileInfo, old journalEntry) (int64, string) {
	_, canRead := src.FS.(streamReader)
	_, canWrite := dst.FS.(streamWriter)
	_, canReadBack := dst.FS.(streamReader)
	switch {
	case !canRead || !canWrite || !canReadBack:
		return 0, "the ends cannot read and write at offsets"
	case old.Version != journalVersion:
		return 0, fmt.Sprintf("journal entry of version %d", old.Version)
	case old.Target != targetID(dst):
		return 0, "the journal entry is another target's"
	case old.Source != src.String():
		return 0, "the journal entry is for source " + old.Source
	case old.Size != si.Size() || old.MTime != si.ModTime().UnixNano():
		return 0, "the source changed since the interrupted run"
	case !validTemp(dst, old.Temp):
		return 0, fmt.Sprintf("the journal names %q, not a temporary file beside the target", old.Temp)
	case old.Watermark <= 0 || old.Watermark > si.Size():
		return 0, fmt.Sprintf("nothing to continue from (watermark %d)", old.Watermark)
	}
	ti, err := dst.FS.Stat(old.Temp)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("the temporary file is gone: %v", err)
	case !ti.Mode().IsRegular():
		return 0, "the temporary file is not a regular file"
	case ti.Size() < old.Watermark && !old.Sparse || ti.Size() > si.Size():
		return 0, fmt.Sprintf("the temporary file has %d bytes, the journal says %d of %d are written",
			ti.Size(), old.Watermark, si.Size())
	}
	if (old.Sparse || c.opts.Sparse) && ti.Size() != old.Watermark {
		// A sparse copy's file ends where its last data does, the zeros
		// after it counted as written; and one continued sparse must
		// hold nothing past the watermark, where what it leaves unwritten
		// must read as zeros.
		if err := setSize(dst.FS, old.Temp, old.Watermark); err != nil {
			return 0, fmt.Sprintf("cut the temporary file back to its watermark: %v", err)
		}
	}
	n := min(old.Watermark, overlapCheck)
	a, err := readTail(ctx, src, old.Watermark, n)
	if err != nil {
		return 0, fmt.Sprintf("read the source to check the overlap: %v", err)
	}
	b, err := readTail(ctx, Endpoint{dst.FS, old.Temp}, old.Watermark, n)
	if err != nil {
		return 0, fmt.Sprintf("read the temporary file to check the overlap: %v", err)
	}
	if !bytes.Equal(a, b) {
		return 0, fmt.Sprintf("the last %d bytes before byte %d differ from the source's", n, old.Watermark)
	}
	return old.Watermark, ""
}

// readTail reads the n bytes before end of e.
func readTail(ctx context.Context, e Endpoint, end, n int64) ([]byte, error) {
	r, ok := e.FS.(streamReader)
	if !ok {
		return nil, errors.New("the end cannot read at offsets")
	}
	f, err := r.OpenReaderAt(ctx, e.Path, 1)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	// A full count beside an error is not the file's bytes.
	if k, err := f.ReadAt(b, end-n); k < len(b) || (err != nil && err != io.EOF) {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%d bytes at offset %d, expected %d", k, end-n, n)
		}
		return nil, err
	}
	return b, nil
}

// openSource opens src to be read from where p starts.
func (p *partial) openSource(ctx context.Context, src Endpoint) (io.ReadCloser, error) {
	if p.resumed() == 0 {
		return src.FS.Open(src.Path)
	}
	f, err := src.FS.(streamReader).OpenReaderAt(ctx, src.Path, 1)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, p.from, 1<<62), f}, nil
}

// openTemp opens the temporary file for dst: a fresh one, recorded in the
// journal under --resume, or the one being continued, to be written from
// where it stopped.
func (p *partial) openTemp(ctx context.Context, dst Endpoint) (io.WriteCloser, string, error) {
	if p.resumed() > 0 {
		f, err := dst.FS.(streamWriter).OpenWriterAt(ctx, p.e.Temp, 1)
		if err != nil {
			return nil, "", err
		}
		return struct {
			io.Writer
			io.WriterAt // for sparse copies
			io.Closer
		}{io.NewOffsetWriter(f, p.from), f, f}, p.e.Temp, nil
	}
	if p == nil {
		return createTemp(dst.FS, dst.FS.Dir(dst.Path), dst.FS.Base(dst.Path))
	}
	// The journal names the file before it is created: should the
	// create's reply be lost with every connection, the file may exist
	// on the server with no answer to tell so, and a re-run with
	// --resume removes it only because the journal names it (checkPartial
	// finds nothing to continue from, watermark 0).
	return createTempNamed(dst.FS, dst.FS.Dir(dst.Path), dst.FS.Base(dst.Path), func(name string) error {
		p.e.Temp = name
		if err := p.save(); err != nil && p.resume {
			return err
		}
		return nil
	})
}

// resumed is the bytes this run need not send.
func (p *partial) resumed() int64 {
	if p == nil {
		return 0
	}
	return p.from
}

// done records that the n bytes at off are written, and saves the
// watermark when it is due. The save runs on a goroutine of its own: done
// is called with the parallel copy's lock held, and a journal write (a
// file created and renamed: about 0.3 ms on ext4) would stall every lane.
func (p *partial) done(off int64, n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.wm.add(off, n)
	due := !p.saving && !p.closed &&
		(p.wm.at-p.saved >= journalBytes || time.Since(p.savedAt) >= journalInterval)
	if due {
		p.saving = true
	}
	p.mu.Unlock()
	if due {
		go func() {
			_ = p.save()
			p.mu.Lock()
			p.saving = false
			p.mu.Unlock()
		}()
	}
}

// appended records n more bytes written front to back.
func (p *partial) appended(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	at := p.wm.at
	p.mu.Unlock()
	p.done(at, n)
}

// appendedThen returns a progress function that records the bytes written
// front to back and then calls next, when not nil.
func (p *partial) appendedThen(next func(int)) func(int) {
	return func(n int) {
		p.appended(n)
		if next != nil {
			next(n)
		}
	}
}

// save writes the entry with the current watermark: to a temporary file
// renamed over the old entry, so that a run killed at any point leaves one
// whole entry whose watermark is at most what was written.
func (p *partial) save() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.e.Watermark = p.wm.at
	e := p.e
	p.mu.Unlock()
	b, err := json.Marshal(e)
	if err == nil {
		err = writeAtomic(p.path, b)
	}
	if err != nil {
		p.err = fmt.Errorf("save the resume journal for %s: %w", e.Target, err)
		p.logf("resume: %v", p.err)
		return p.err
	}
	p.mu.Lock()
	p.saved, p.savedAt = e.Watermark, time.Now()
	p.mu.Unlock()
	return nil
}

// close makes the entry final: once the writes under way are done, no
// other is made.
func (p *partial) close() {
	p.wmu.Lock()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wmu.Unlock()
}

func writeAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// keep reports whether the temporary file of a copy that failed with err
// is kept for a later --resume, and if so saves its final watermark. Only
// an interruption or a lost connection keeps it: after any other failure
// a re-run would most likely fail the same way.
func (p *partial) keep(ctx context.Context, err error) bool {
	if p == nil || !p.resume || p.e.Temp == "" {
		return false
	}
	if ctx.Err() == nil && !protocol.Lost(err) {
		return false
	}
	defer p.close()
	return p.save() == nil
}

// removed is told whether removing the temporary file after a failure
// worked. The entry goes with the file; when the file stays (its
// connection is lost), the entry stays too, with the final watermark, for
// a later --resume.
func (p *partial) removed(err error) {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		p.forget()
		return
	}
	if p != nil {
		_ = p.save()
		p.close()
	}
}

// forget removes the journal entry: the file is complete, or its temporary
// file gone.
func (p *partial) forget() {
	if p != nil {
		p.close()
		_ = os.Remove(p.path)
	}
}

// forgetTarget removes the journal entry of dst and the temporary file
// it names, if any: a target found complete, or copied afresh, has no use
// for a partial copy left by a killed run.
func (c *copier) forgetTarget(dst Endpoint) {
	if c.opts.ResumeDir == "" {
		return
	}
	name := journalPath(c.opts.ResumeDir, targetID(dst))
	e, err := readJournal(name)
	if err != nil {
		return
	}
	if e.Target == targetID(dst) && validTemp(dst, e.Temp) {
		_ = dst.FS.Remove(e.Temp)
	}
	_ = os.Remove(name)
}
