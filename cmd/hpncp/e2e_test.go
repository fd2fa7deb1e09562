package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestE2E runs the scripts in testdata/e2e against a real OpenSSH sshd on
// 127.0.0.1: $SSHCONFIG names it as host "e2e" (logged in as the current
// user) and "e2e-unprivileged" (as nobody, for real permission errors).
// OpenSSH's scp, sftp and rsync read the same config, so scripts compare
// hpncp with them on the same command lines.
func TestE2E(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{Unprivileged: "nobody"})
	sshdtest.LookTool(t, "scp")
	testscript.Run(t, testscript.Params{
		Dir: "testdata/e2e",
		Setup: func(env *testscript.Env) error {
			env.Setenv("SSHCONFIG", srv.ConfigFile)
			// The unprivileged account must reach the work directory.
			tmp := filepath.Clean(os.TempDir())
			for d := env.WorkDir; strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
				if err := os.Chmod(d, 0o755); err != nil {
					return err
				}
			}
			return nil
		},
		Cmds:                scriptCmds,
		Condition:           scriptCondition,
		RequireExplicitExec: true,
	})
}
