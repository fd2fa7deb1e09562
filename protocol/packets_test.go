package protocol

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pkg/sftp"
)

// ServerFailure goes by the status code, from either SFTP client, never
// by what a message says.
func TestServerFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"ours", &StatusError{Code: fxFailure, Msg: "Failure"}, true},
		{"ours wrapped", fmt.Errorf("write f: %w", &StatusError{Code: fxFailure}), true},
		{"pkg/sftp's", fmt.Errorf("open: %w", &sftp.StatusError{Code: fxFailure}), true},
		{"another code", &StatusError{Code: fxNoSuchFile, Msg: "SSH_FX_FAILURE"}, false},
		{"pkg/sftp's other code", &sftp.StatusError{Code: fxPermissionDenied}, false},
		{"text only", errors.New("sftp: \"Failure\" (SSH_FX_FAILURE)"), false},
		{"nil", nil, false},
	} {
		if got := ServerFailure(c.err); got != c.want {
			t.Errorf("%s: ServerFailure(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestStatusErrorNames(t *testing.T) {
	for code, want := range map[uint32]string{
		fxEOF:           "SSH_FX_EOF",
		fxFailure:       "SSH_FX_FAILURE",
		fxOpUnsupported: "SSH_FX_OP_UNSUPPORTED",
		99:              "SSH_FX_99",
	} {
		if got := (&StatusError{Code: code, Msg: "m"}).Error(); !strings.Contains(got, "("+want+")") {
			t.Errorf("status %d: %q, want it named %s", code, got, want)
		}
	}
}
