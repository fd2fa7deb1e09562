package protocol

import (
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func TestHasSFTP(t *testing.T) {
	for _, noSFTP := range []bool{false, true} {
		srv := sshtest.Start(t, sshtest.Options{NoSFTP: noSFTP})
		ok, err := HasSFTP(srv.Dial(t))
		if err != nil || ok == noSFTP {
			t.Errorf("HasSFTP with NoSFTP=%v = %v, %v", noSFTP, ok, err)
		}
	}
}
