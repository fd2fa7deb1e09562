package job

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/protocol"
)

// DeltaHelper says which helper runs the delta service on a host for a
// copy or a sync (transfer.Options.Delta): Helper (auto or never; ""
// for hpncp's configuration file's), HelperPath and HelperDir as hpncp
// ssh takes them.
type DeltaHelper struct {
	Helper, HelperPath, HelperDir string
}

// lines returns what runs the delta service on a host, with extra (when
// not "") among hpncp serve's arguments: the helper told (HelperPath),
// else the one installed for this very binary in the helpers' directory,
// its hash checked first, else hpncp on the remote PATH; an error says
// why none is to run there. Nothing is uploaded.
//
// The running binary is hashed (for the installed helper's check) only
// once a host asks: a sync that never reaches a remote end's helper does
// not read it.
func (d DeltaHelper) lines(logf func(string, ...any)) func(host, extra string) (string, error) {
	var (
		once sync.Once
		bin  *binaryFuture
	)
	return func(host, extra string) (string, error) {
		mode, dir, err := HelperSettings(host, d.Helper, d.HelperDir)
		if err != nil {
			return "", err
		}
		if mode == HelperNever {
			return "", errors.New("--helper never")
		}
		args := fmt.Sprintf("--protocol %d --delta", helper.Protocol)
		if extra != "" {
			args += " " + extra
		}
		if d.HelperPath != "" {
			return protocol.QuoteArg(d.HelperPath) + " serve " + args, nil
		}
		once.Do(func() { bin = hashBinary("", logf) })
		if b, ok := bin.get(); ok {
			return helper.Launch(dir, b.sum, "", args, false), nil
		}
		return DefaultHelperPath + " serve " + args, nil
	}
}
