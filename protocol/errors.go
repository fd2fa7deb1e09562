package protocol

import (
	"errors"
	"io"
	"syscall"

	"github.com/pkg/sftp"
)

// ErrStreamLost marks a failure of the stream (the channel or the
// connection under it), not of the file: the work can be retried on
// another stream.
var ErrStreamLost = errors.New("stream lost")

// ConnError is a failure to reach the server for more work: a connection
// that could not be opened, or none left alive. Like ErrStreamLost it is
// about the path to the server, not about the file being copied.
type ConnError struct {
	Err error
}

func (e *ConnError) Error() string { return e.Err.Error() }

func (e *ConnError) Unwrap() error { return e.Err }

// Lost reports whether err says the connection or channel under an
// operation failed, rather than the file: a stream lost, a connection
// that could not be opened again, pkg/sftp's lost connection, or a
// transport cut short. A file whose copy failed so is worth resuming, and
// the run's failure is the connection's (exit status 255, as ssh's).
func Lost(err error) bool {
	var ce *ConnError
	return err != nil && (errors.Is(err, ErrStreamLost) || errors.As(err, &ce) ||
		errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, sftp.ErrSSHFxNoConnection) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED))
}

// ServerFailure reports whether err is a server's SSH_FX_FAILURE status,
// from pkg/sftp's sessions or hpncp's own: the server gave no reason.
func ServerFailure(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == fxFailure
	}
	var pe *sftp.StatusError
	return errors.As(err, &pe) && pe.FxCode() == sftp.ErrSSHFxFailure
}
