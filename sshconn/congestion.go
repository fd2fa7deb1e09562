package sshconn

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// maxCongestionName is the longest name the kernel gives a congestion
// control algorithm (TCP_CA_NAME_MAX, less its terminating NUL).
const maxCongestionName = 15

// ValidCongestionName reports whether name can be a congestion control
// algorithm's name: what --cc accepts before any socket is asked.
func ValidCongestionName(name string) bool {
	if name == "" || len(name) > maxCongestionName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// SetCongestion sets the congestion control algorithm of the TCP
// connection c to name (TCP_CONGESTION, --cc). It governs what c sends:
// the data of an upload, only acknowledgements on a download. The error
// says what the kernel refused and how to allow it.
func SetCongestion(c net.Conn, name string) error {
	peer := "connection"
	if a := c.RemoteAddr(); a != nil {
		peer = a.String()
	}
	err := setCongestion(c, name)
	if err == nil {
		return nil
	}
	what := fmt.Errorf("set TCP congestion control of %s to %q: %w", peer, name, err)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w (the kernel has no such algorithm: see net.ipv4.tcp_available_congestion_control, or load its module, tcp_%s)", what, name)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w (not allowed for this user: see net.ipv4.tcp_allowed_congestion_control)", what)
	}
	return what
}

// Congestion returns the congestion control algorithm of c, "" when the
// kernel does not say.
func Congestion(c net.Conn) string {
	name, err := congestion(c)
	if err != nil {
		return ""
	}
	return name
}
