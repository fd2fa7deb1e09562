package sshconn

import (
	"strings"
	"testing"
)

// FuzzSSHG reads `ssh -G` output into a Config, as Resolve does: no
// output may make it panic, and a Config it gives is one a dial can use.
// The seeds are OpenSSH 9's answers for a host with no configuration
// (ssh -G -F /dev/null localhost) and with many options set on the
// command line. Run it with scripts/fuzz.sh sshconn:FuzzSSHG.
func FuzzSSHG(f *testing.F) {
	f.Add([]byte("port 22\nconnecttimeout none\nbatchmode yes\n"))
	f.Add([]byte("port 22\nserveraliveinterval 1w1d1h1m1s\nidentityfile ~nosuchuser/id\n"))
	f.Add([]byte("Port 0x16\r\nHostName \n\nport  22"))
	f.Fuzz(func(t *testing.T, out []byte) {
		vals := parseSSHG(out)
		for k, vs := range vals {
			if k == "" || k != strings.ToLower(k) || strings.ContainsAny(k, " \n") {
				t.Fatalf("key %q from %q", k, out)
			}
			for _, v := range vs {
				if strings.Contains(v, "\n") {
					t.Fatalf("value %q of %s spans lines", v, k)
				}
			}
		}
		c, err := buildConfig("host", vals)
		if err != nil {
			return
		}
		switch {
		case c.Port <= 0 || c.Port > 65535:
			t.Fatalf("port %d from %q", c.Port, out)
		case c.ConnectTimeout < 0 || c.ServerAliveInterval < 0:
			t.Fatalf("times ConnectTimeout %v, ServerAliveInterval %v from %q", c.ConnectTimeout, c.ServerAliveInterval, out)
		case c.HostName == "":
			t.Fatalf("no host name from %q", out)
		}
		switch c.StrictHostKeyChecking {
		case "yes", "no", "accept-new", "ask":
		default:
			t.Fatalf("StrictHostKeyChecking %q from %q", c.StrictHostKeyChecking, out)
		}
	})
}
