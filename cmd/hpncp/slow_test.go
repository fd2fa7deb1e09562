package main

import (
	"testing"

	"github.com/hpncp/hpncp/internal/testenv"
)

// slow marks a test that the quick loop, go test -short, leaves out:
// fault trials, large copies cut midway, waits for stalls and endless
// listings. make test runs them all.
func slow(t *testing.T) {
	t.Helper()
	testenv.SkipSlow(t)
}
