//go:build unix && !linux && !darwin && !freebsd

package helper

import "os"

// peerUID, where the system has no call for it that x/sys knows, is this
// user: the socket is in a directory only this user can enter (runDir),
// which is what keeps others out there.
func peerUID(int) (int, error) { return os.Getuid(), nil }
