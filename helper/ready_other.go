//go:build !unix

package helper

import "io"

// readyFunc: without poll, a Sender sends what it has.
func readyFunc(io.Reader) func() bool { return nil }
