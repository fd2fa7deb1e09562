package job

import (
	"bytes"
	"net/netip"
	"testing"
)

// SSH_CONNECTION is "client port server port": the helper's connection
// is the server's end to the client's; anything else names none.
func TestSSHEnds(t *testing.T) {
	for conn, want := range map[string][2]string{
		"198.18.0.1 51874 198.18.0.2 2222": {"198.18.0.2:2222", "198.18.0.1:51874"},
		"::1 40000 ::1 22":                 {"[::1]:22", "[::1]:40000"},
		"fe80::1%eth0 1 fe80::2%eth0 22":   {"[fe80::2%eth0]:22", "[fe80::1%eth0]:1"},
		"":                                 {},
		"198.18.0.1 51874 198.18.0.2":      {},
		"198.18.0.1 70000 198.18.0.2 22":   {},
		"host 1 198.18.0.2 22":             {},
	} {
		local, remote, ok := sshEnds(conn)
		if ok != (want[0] != "") || ok && (local != netip.MustParseAddrPort(want[0]) || remote != netip.MustParseAddrPort(want[1])) {
			t.Errorf("%q: %v %v (%v), want %v", conn, local, remote, ok, want)
		}
	}
}

// Without a connection to warm, or on loopback, the helper's stderr
// carries no padding.
func TestWarmChannelNothing(t *testing.T) {
	for _, conn := range []string{"", "127.0.0.1 1 127.0.0.1 2"} {
		var stderr bytes.Buffer
		warmChannel(t.Context(), conn, &stderr)()
		if stderr.Len() != 0 {
			t.Errorf("%q: %d bytes on stderr", conn, stderr.Len())
		}
	}
}
