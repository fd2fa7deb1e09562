package job

import (
	"errors"
	"testing"

	"github.com/hpncp/hpncp/sshconn"
)

func TestSessionEndResult(t *testing.T) {
	tests := []struct {
		end  sessionEnd
		want int // -1: nil, 255: connection error
	}{
		{sessionEnd{status: 0}, -1},
		{sessionEnd{status: 3}, 3},
		{sessionEnd{status: -1, signal: "TERM"}, 143},
		{sessionEnd{status: -1, signal: "KILL"}, 137},
		{sessionEnd{status: -1, signal: "HUP"}, 129},
		{sessionEnd{status: -1, signal: "NOSUCH"}, 128},
		{sessionEnd{status: -1}, 255},
	}
	for _, tt := range tests {
		err := tt.end.result("h", func(string, ...any) {})
		var re *RemoteExit
		var ce *sshconn.Error
		switch {
		case tt.want == -1 && err != nil:
			t.Errorf("%+v: %v, want success", tt.end, err)
		case tt.want == 255 && !errors.As(err, &ce):
			t.Errorf("%+v: %v, want a connection error", tt.end, err)
		case tt.want != -1 && tt.want != 255 && (!errors.As(err, &re) || re.ExitCode() != tt.want):
			t.Errorf("%+v: %v, want exit code %d", tt.end, err, tt.want)
		}
	}
}
