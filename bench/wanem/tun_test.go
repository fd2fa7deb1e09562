package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// needRoot skips tests that create network devices or namespaces when the
// test cannot: they need root and /dev/net/tun.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create TUN devices and network namespaces")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}

func TestOpenTUN(t *testing.T) {
	needRoot(t)
	name := fmt.Sprintf("wtst%d", os.Getpid()%100000)
	fd, err := openTUN(name, 9000, false)
	if err != nil {
		t.Fatal(err)
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if ifc.MTU != 9000 || ifc.Flags&net.FlagUp == 0 {
		t.Errorf("%s: MTU %d, flags %v; want MTU 9000 and up", name, ifc.MTU, ifc.Flags)
	}
	qlen, err := os.ReadFile("/sys/class/net/" + name + "/tx_queue_len")
	if err != nil || strings.TrimSpace(string(qlen)) != fmt.Sprint(txQueueLen) {
		t.Errorf("%s: tx_queue_len %q (%v), want %d", name, qlen, err, txQueueLen)
	}
	if fd2, err := openTUN(name, 1500, false); err == nil {
		unix.Close(fd2)
		t.Errorf("a second openTUN(%s) succeeded; want it refused", name)
	}
	unix.Close(fd)
	if _, err := net.InterfaceByName(name); err == nil {
		t.Errorf("%s still exists after its descriptor was closed", name)
	}
}
