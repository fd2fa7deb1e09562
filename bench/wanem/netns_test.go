package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/testenv"
)

// The end-to-end test runs this test binary again inside the namespaces
// that bench/netns.sh makes, as a TCP listener in one and a client in the
// other; helperEnv says which.
const (
	helperEnv  = "WANEM_TEST_HELPER"
	helperPort = "7777"
	rttProbes  = 5
	bulkBytes  = 25 << 20
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "listen":
		if err := helperListen(); err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			os.Exit(1)
		}
	case "dial":
		if err := helperDial(); err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// helperListen accepts the RTT probes, then one bulk connection, and prints
// the goodput it received.
func helperListen() error {
	ln, err := net.Listen("tcp", "198.18.0.2:"+helperPort)
	if err != nil {
		return err
	}
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	for range rttProbes {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		c.Close()
	}
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		return err
	}
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return err
	}
	fmt.Printf("bytes=%d goodput_bps=%.0f\n", n+1, float64(n)*8/time.Since(start).Seconds())
	return nil
}

// helperDial times TCP handshakes (one round trip each), then sends
// bulkBytes and waits for the listener to close.
func helperDial() error {
	addr := "198.18.0.2:" + helperPort
	var c net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	c.Close()
	minRTT, maxRTT := time.Hour, time.Duration(0)
	for range rttProbes - 1 {
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		d := time.Since(start)
		c.Close()
		minRTT, maxRTT = min(minRTT, d), max(maxRTT, d)
	}
	c, err = net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, bulkBytes)); err != nil {
		return err
	}
	c.(*net.TCPConn).CloseWrite()
	if _, err := io.Copy(io.Discard, c); err != nil {
		return err
	}
	fmt.Printf("rtt_min_us=%d rtt_max_us=%d\n", minRTT.Microseconds(), maxRTT.Microseconds())
	return nil
}

// TestNetnsEndToEnd brings up a 40 ms, 100 Mbit/s path with bench/netns.sh
// and checks what a benchmark relies on: the handshake RTT is the one asked
// for, a bulk TCP flow gets close to the rate and never above it, and
// nothing is left behind afterwards.
func TestNetnsEndToEnd(t *testing.T) {
	testenv.SkipSlow(t)
	needRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) from iproute2")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wanem")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := `
		echo "$NS_A $NS_B $WANEM_PID $WAN_MODE" >"$OUT/setup"
		ip netns exec "$NS_B" env ` + helperEnv + `=listen "$HELPER" >"$OUT/listen" 2>&1 & l=$!
		ip netns exec "$NS_A" env ` + helperEnv + `=dial "$HELPER" >"$OUT/dial" 2>&1; rc=$?
		wait "$l" || rc=1
		exit "$rc"`
	cmd := exec.Command("bash", "../netns.sh", "run", "--mode", "wanem", "--rtt", "40ms", "--rate", "100mbit", "--", "bash", "-c", script)
	cmd.Env = append(os.Environ(), "WANEM_BIN="+bin, "HELPER="+self, "OUT="+dir)
	late := schedLateness()
	out, err := cmd.CombinedOutput()
	hiccup := late()
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	if err != nil {
		t.Fatalf("netns.sh run: %v\n%s\nlisten: %s\ndial: %s", err, out, read("listen"), read("dial"))
	}
	t.Logf("%s\nlisten: %s\ndial: %s", out, read("listen"), read("dial"))

	setup := strings.Fields(read("setup"))
	if len(setup) != 4 || setup[3] != "wanem" {
		t.Fatalf("setup = %q, want NS_A NS_B WANEM_PID wanem", setup)
	}
	for _, ns := range setup[:2] {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	if _, err := os.Stat("/proc/" + setup[2]); err == nil {
		t.Errorf("wanem (PID %s) still running", setup[2])
	}

	vals := fields(read("dial") + " " + read("listen"))
	rttMin := time.Duration(vals["rtt_min_us"]) * time.Microsecond
	if limit := 45*time.Millisecond + 2*hiccup; rttMin < 40*time.Millisecond || rttMin > limit {
		t.Errorf("handshake RTT %v, want 40 ms (%v at most: +5 ms, and twice the %v a timer here woke late meanwhile)", rttMin, limit, hiccup)
	}
	// The most TCP can carry at 100 Mbit/s over 1500-byte packets with
	// timestamps is 1448/1500 of it; a busy machine and slow start take
	// some of the rest.
	goodput := float64(vals["goodput_bps"])
	if goodput > 100e6 || goodput < 60e6 {
		t.Errorf("goodput %.1f Mbit/s, want 60 to 100 (link rate 100)", goodput/1e6)
	}
	if !strings.Contains(string(out), "drop_overflow=0") {
		t.Errorf("emulator counters missing or show overflow drops:\n%s", out)
	}
}

func fields(s string) map[string]int64 {
	m := map[string]int64{}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			m[k] = n
		}
	}
	return m
}
