package units

import (
	"strings"
	"testing"
)

// TestParseBitRate covers every spelling the benchmark --rate flags and
// scripts have taken (bench --rate, wanem --rate, netns.sh --rate).
func TestParseBitRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"unlimited", 0},
		{"Unlimited", 0},
		{"64000", 64000},
		{"1e6", 1e6},
		{"1.5e3kbit", 1.5e6},
		{"500kbit", 500e3},
		{"500Kbit", 500e3},
		{"100mbit", 100e6},
		{"1gbit", 1e9},
		{"1G", 1e9},
		{"2.5gbit", 2.5e9},
		{"2.5Gbit/s", 2.5e9},
		{"10gbit", 10e9},
		{"1tbit", 1e12},
		{"1kibit", 1024},
		{"1mibit", 1 << 20},
		{"0.1gbit", 1e8},
		{" 8 mbit ", 8e6},
		{"1.9bit", 1},
	} {
		got, err := ParseBitRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBitRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"", "not a number"},
		{"fast", "not a number"},
		{"-1gbit", "not a number"},
		{"1gbps", `"bps" is bytes per second to tc`},
		{"10mbps", "bps"},
		{"100 MB", "unknown unit"},
		{"1xbit", "unknown unit"},
		{"0.5bit", "below 1 bit/s"},
		{"1e400", "too large"},
		{"10000000tbit", "too large"},
		{"1.2.3gbit", "not a number"},
		{"inf", "not a number"},
		{"0x10", "unknown unit"},
	} {
		got, err := ParseBitRate(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseBitRate(%q) = %d, %v; want an error naming the input and %q", tc.in, got, err, tc.msg)
		}
	}
}

// TestParseBWLimit: --bwlimit reads as rsync's --bwlimit does (KiB/s
// without a unit, K and M powers of 1024, KB and MB powers of 1000), and
// bit rates as tc writes them.
func TestParseBWLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // bytes per second
	}{
		{"1000", 1000 << 10}, // rsync: a number alone is KiB/s
		{"1.5", 1536},
		{"512b", 512},
		{"512B/s", 512},
		{"100k", 100 << 10},
		{"100KiB", 100 << 10},
		{"100KB", 100e3},
		{"10M", 10 << 20},
		{"10m", 10 << 20},
		{"10MiB/s", 10 << 20},
		{"10MB", 10e6},
		{"10MB/s", 10e6},
		{"1.5m", 3 << 19},
		{"1G", 1 << 30},
		{"1GB", 1e9},
		{"8bit", 1},
		{"100kbit", 12500},
		{"100mbit", 12_500_000},
		{"100Mbit/s", 12_500_000},
		{"1.5gbit", 187_500_000},
		{"1gibit", 1 << 27},
	} {
		got, err := ParseBWLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBWLimit(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"", "not a number"},
		{"0", "at least 1 byte per second"},
		{"0M", "at least 1 byte per second"},
		{"7bit", "at least 1 byte per second"},
		{"0.0001", "at least 1 byte per second"},
		{"fast", "not a number"},
		{"10X", "unknown unit"},
		{"-1M", "not a number"},
		{"10mbps", "bps"},
		{"1e6", "unknown unit"},
	} {
		got, err := ParseBWLimit(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseBWLimit(%q) = %d, %v; want an error naming the input and %q", tc.in, got, err, tc.msg)
		}
	}
}

// TestSCPLimit: -l is scp's Kbit/s, a Kbit being 1024 bits as OpenSSH
// counts it.
func TestSCPLimit(t *testing.T) {
	for kbit, want := range map[int64]int64{0: 0, 1: 128, 8: 1024, 4000: 512_000, 80000: 10_240_000} {
		if got := SCPLimit(kbit); got != want {
			t.Errorf("SCPLimit(%d) = %d bytes/s, want %d", kbit, got, want)
		}
	}
}
