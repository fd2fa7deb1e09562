//go:build unix

package job

import "golang.org/x/sys/unix"

// signalNumber is the number of the signal RFC 4254 names without "SIG"
// ("TERM"), 0 for a name this system does not know.
func signalNumber(name string) int {
	return int(unix.SignalNum("SIG" + name))
}
