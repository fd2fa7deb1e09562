package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// sshdScriptEnv starts the real sshds TestScript/sshd runs the scripts
// against and returns the variables TestScript documents, and a setup that
// opens each work directory to the unprivileged account. sshd runs
// commands through the shell and has GNU tar, so $TARCONFIG is $SSHCONFIG;
// a second sshd, with no SFTP subsystem, is $NOSFTPCONFIG.
func sshdScriptEnv(t *testing.T) (map[string]string, func(*testscript.Env) error) {
	srv := sshdtest.Start(t, sshdtest.Options{Unprivileged: "nobody"})
	// Setting Subsystem replaces the harness's sftp subsystem.
	nosftp := sshdtest.Start(t, sshdtest.Options{ExtraConfig: []string{"Subsystem nosftp /bin/false"}})
	// Scripts compare hpncp with OpenSSH's scp on the same command lines.
	sshdtest.LookTool(t, "scp")

	dir := t.TempDir()
	config := filepath.Join(dir, "ssh_config")
	writeClientConfig(t, config,
		clientHost{alias: "testhost", user: srv.User, srv: srv},
		clientHost{alias: "unprivileged", user: "nobody", srv: srv})
	nosftpConfig := filepath.Join(dir, "nosftp_config")
	writeClientConfig(t, nosftpConfig, clientHost{alias: "testhost", user: nosftp.User, srv: nosftp})

	vars := map[string]string{
		"SSHCONFIG":    config,
		"KNOWNHOSTS":   srv.KnownHostsFile,
		"SSHPORT":      strconv.Itoa(srv.Port),
		"IDENTITY":     srv.ClientKeyFile,
		"TARCONFIG":    config,
		"NOSFTPCONFIG": nosftpConfig,
	}
	setup := func(env *testscript.Env) error {
		// The unprivileged account must reach the work directory.
		tmp := filepath.Clean(os.TempDir())
		for d := env.WorkDir; strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	return vars, setup
}

// clientHost is one Host block of a client ssh_config: alias logs in to
// srv as user with the harness's client key.
type clientHost struct {
	alias, user string
	srv         *sshdtest.Server
}

// writeClientConfig writes an ssh_config for hpncp and OpenSSH's tools with
// the scripts' host names, which are not the harness's own ("e2e").
func writeClientConfig(t *testing.T, path string, hosts ...clientHost) {
	t.Helper()
	var b strings.Builder
	for _, h := range hosts {
		for _, v := range []string{h.user, h.srv.ClientKeyFile, h.srv.KnownHostsFile} {
			// ssh_config would need quoting; temporary paths have none.
			if v == "" || strings.ContainsAny(v, " \t\"'") {
				t.Fatalf("write %s: %q needs quoting in ssh_config", path, v)
			}
		}
		fmt.Fprintf(&b, "Host %s\n\tHostName %s\n\tPort %d\n\tUser %s\n\tIdentityFile %s\n"+
			"\tIdentitiesOnly yes\n\tUserKnownHostsFile %s\n\tGlobalKnownHostsFile /dev/null\n"+
			"\tStrictHostKeyChecking yes\n\tBatchMode yes\n\tLogLevel ERROR\n",
			h.alias, h.srv.Host, h.srv.Port, h.user, h.srv.ClientKeyFile, h.srv.KnownHostsFile)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
