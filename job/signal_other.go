//go:build !unix

package job

// posixSignals are the numbers POSIX systems agree on for the signals
// RFC 4254 names; where the local system has no signal numbers of its own,
// hpncp ssh reports a remote signal with these.
var posixSignals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "ABRT": 6, "FPE": 8,
	"KILL": 9, "SEGV": 11, "PIPE": 13, "ALRM": 14, "TERM": 15,
}

// signalNumber is the number of the signal RFC 4254 names without "SIG"
// ("TERM"), 0 for a name it does not know.
func signalNumber(name string) int { return posixSignals[name] }
