package delta

import (
	"errors"
	"io"
	"sync"
)

// A SignatureLog is a signature as it is made (SignTo writing to it),
// kept whole for the requests of a delta's shares (Share): each sends
// all of it, from its start and at its own pace, while it is still being
// made, so that the basis is read and summed once however many shares
// there are. It holds what a SignatureReader at the far end holds: the
// whole signature. The signing keeps at most logAhead bytes ahead of the
// copy furthest on, as it would writing to one channel, and fails once
// every copy begun has failed: the requests given up, nobody reads what
// it would make.
type SignatureLog struct {
	mu       sync.Mutex
	cond     *sync.Cond
	b        []byte
	done     bool
	err      error
	copies   int // copies begun and still going
	begun    bool
	furthest int // the most any copy has sent

	// sign, where SignLog made the log, fills it, begun by the first
	// copy; ended is closed once it has returned signErr, or the log was
	// Unused.
	sign    func(w io.Writer) error
	once    sync.Once
	ended   chan struct{}
	signErr error
}

// logAhead is how far the signing may run ahead of its copies.
const logAhead = 4 << 20

// errNoCopies is the signing's error once every copy of it failed.
var errNoCopies = errors.New("delta: no request sends the signature any more")

// NewSignatureLog returns an empty log, to be written and then closed.
func NewSignatureLog() *SignatureLog {
	l := &SignatureLog{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// SignLog returns a log that sign fills, on a goroutine of its own begun
// by the first copy (CopyTo): the basis is read only where a request
// sends its signature. Err says how the signing ended.
func SignLog(sign func(w io.Writer) error) *SignatureLog {
	l := NewSignatureLog()
	l.sign, l.ended = sign, make(chan struct{})
	return l
}

// Unused ends a log SignLog made where no copy began and none will:
// nothing is signed. A log whose signing began is left to end.
func (l *SignatureLog) Unused() {
	if l.sign == nil {
		return
	}
	l.once.Do(func() {
		l.Close(errors.New("delta: the signature was not asked for"))
		close(l.ended)
	})
}

// Err waits for the signing of a log SignLog made to end, and returns
// its error: nil where it was Unused.
func (l *SignatureLog) Err() error {
	<-l.ended
	return l.signErr
}

// Write adds p to the log.
func (l *SignatureLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.begun && l.copies > 0 && len(l.b)-l.furthest > logAhead && !l.done {
		l.cond.Wait()
	}
	switch {
	case l.done:
		return 0, io.ErrClosedPipe
	case l.begun && l.copies == 0:
		return 0, errNoCopies
	}
	l.b = append(l.b, p...)
	l.cond.Broadcast()
	return len(p), nil
}

// Close ends the log: the signature is whole, or (err not nil) it
// failed, which every copy of it then returns.
func (l *SignatureLog) Close(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done, l.err = true, err
		l.cond.Broadcast()
	}
}

// CopyTo writes the log to w from its start, following it as it is made,
// until it is closed: it returns the signing's error, or w's.
func (l *SignatureLog) CopyTo(w io.Writer) (err error) {
	if l.sign != nil {
		l.once.Do(func() {
			go func() {
				err := l.sign(l)
				l.Close(err)
				l.signErr = err
				close(l.ended)
			}()
		})
	}
	l.mu.Lock()
	l.begun = true
	l.copies++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.copies--
		l.cond.Broadcast()
		l.mu.Unlock()
	}()
	var at int
	for {
		l.mu.Lock()
		for at == len(l.b) && !l.done {
			l.cond.Wait()
		}
		p, done, err := l.b[at:], l.done, l.err
		l.mu.Unlock()
		if len(p) > 0 {
			if _, werr := w.Write(p); werr != nil {
				return werr
			}
			at += len(p)
			l.mu.Lock()
			if at > l.furthest {
				l.furthest = at
				l.cond.Broadcast()
			}
			l.mu.Unlock()
			continue
		}
		if done {
			return err
		}
	}
}
