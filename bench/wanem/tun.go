package main

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Segmentation-offload features a TUN device takes (TUNSETOFFLOAD,
// include/uapi/linux/if_tun.h): partial checksums and TCP GSO packets of
// both IP versions, with ECN.
const (
	tunFCsum   = 0x01
	tunFTSO4   = 0x02
	tunFTSO6   = 0x04
	tunFTSOECN = 0x08
)

// openTUN creates a layer-3 TUN device (no packet-information header) with
// the given MTU, sets it up and returns its non-blocking file descriptor.
// With offload its packets carry a virtio_net_hdr and may be TCP GSO
// packets of up to 64 KiB (gso.go).
// The device is not persistent: it vanishes when the descriptor is closed
// or the process exits, in whatever namespace it has been moved to
// meanwhile, which is what makes teardown by PID complete.
func openTUN(name string, mtu int, offload bool) (int, error) {
	// TUNSETIFF on the name of an existing persistent TUN device would
	// attach to it instead of failing; refuse any existing name so two
	// runs never share a device.
	if _, err := net.InterfaceByName(name); err == nil {
		return -1, fmt.Errorf("create TUN device %s: an interface of that name exists", name)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, fmt.Errorf("create TUN device %s: open /dev/net/tun: %w", name, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("create TUN device %s: %w", name, err)
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if offload {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("create TUN device %s: TUNSETIFF: %w", name, err)
	}
	if offload {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4|tunFTSO6|tunFTSOECN); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("create TUN device %s: TUNSETOFFLOAD: %w", name, err)
		}
	}
	if err := setLink(name, mtu); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// txQueueLen is the length of the TUN device's transmit ring. TUN orphans
// the packets it queues, so TCP Small Queues does not hold a sender back and
// a GSO burst can outrun the emulator for a moment; at the default length
// (500) the ring overflows and the host, not the emulated link, drops
// packets. 10000 full-size packets absorb any burst seen at 1 Gbit/s.
const txQueueLen = 10000

// setLink sets a device's MTU and transmit queue length and brings it up,
// through the ioctls that ip(8) would use, so the emulator needs no
// external command.
func setLink(name string, mtu int) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("configure %s: socket: %w", name, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("configure %s: %w", name, err)
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(s, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("set MTU %d on %s: %w", mtu, name, err)
	}
	ifr.SetUint32(txQueueLen)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFTXQLEN, ifr); err != nil {
		return fmt.Errorf("set transmit queue length of %s: %w", name, err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}
