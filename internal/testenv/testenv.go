// Package testenv decides which tests the quick loop, go test -short,
// leaves out.
package testenv

import "testing"

// SkipMessage is the reason SkipSlow gives. It differs from the e2e
// harness's skip marker on purpose: a skip asked for with -short is not
// lost coverage, and make test, which CI runs, never passes -short.
const SkipMessage = "slow: runs without -short"

// SkipSlow skips t under go test -short. It marks what makes the full
// suite take minutes: a real sshd, fault trials, large copies, and waits
// for stalls, timeouts and signals.
func SkipSlow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip(SkipMessage)
	}
}
