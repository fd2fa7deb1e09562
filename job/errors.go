package job

import (
	"errors"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// ConnError finds in err's chain a failure to make, authenticate or keep
// an SSH connection (ssh's exit status 255: a host not reached, a host
// key refused, authentication failed, a server that stopped responding)
// and returns its message and hint. When there is none, ok is false and
// msg is err's own message.
func ConnError(err error) (msg, hint string, ok bool) {
	var ce *sshconn.Error
	if errors.As(err, &ce) {
		return ce.Error(), ce.Hint, true
	}
	return err.Error(), "", false
}

// Lost reports whether err is a connection lost under a copy, with the
// retries spent: the files it failed may copy on a re-run, and the exit
// status says so as ssh's does.
func Lost(err error) bool { return protocol.Lost(err) }

// Hint is the hint err carries for the user (a file's failure, a refused
// option, a run's own), "" when it carries none.
func Hint(err error) string {
	var te *transfer.Error
	var he *hinted
	switch {
	case errors.As(err, &te):
		return te.Hint
	case errors.As(err, &he):
		return he.hint
	}
	return ""
}

// hinted is an error told with a hint of the job's.
type hinted struct {
	err  error
	hint string
}

func (e *hinted) Error() string { return e.err.Error() }
func (e *hinted) Unwrap() error { return e.err }
