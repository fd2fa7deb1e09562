package main

import (
	"errors"
	"io"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"1gbit", 1e9, false},
		{"1G", 1e9, false},
		{"100mbit", 100e6, false},
		{"2.5gbit", 2.5e9, false},
		{"500kbit", 500e3, false},
		{"64000", 64000, false},
		{"unlimited", 0, false},
		{"0", 0, false},
		{"1gbps", 0, true}, // tc's bps is bytes/s: refused, not guessed
		{"fast", 0, true},
		{"-1mbit", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseRate(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseRate(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseLoss(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"0", 0, false},
		{"0.01", 0.01, false},
		{"1%", 0.01, false},
		{"100%", 1, false},
		{"1.5", 0, true},
		{"-0.1", 0, true},
		{"often", 0, true},
	}
	for _, tt := range tests {
		got, err := parseLoss(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseLoss(%q) = %g, %v; want %g, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--rtt", "100ms", "--rate", "1gbit", "--tun-a", "x0", "--tun-b", "x1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rtt != 100*time.Millisecond || o.rate != 1e9 || o.mtu != 1500 || o.tunA != "x0" || o.tunB != "x1" {
		t.Errorf("parseFlags: got %+v", o)
	}
	// auto: one bandwidth-delay product, 1 Gbit/s × 100 ms.
	if o.queue != 12_500_000 {
		t.Errorf("auto queue = %d, want 12500000", o.queue)
	}
	if o.tick != time.Millisecond {
		t.Errorf("auto tick at 100 ms = %v, want 1ms", o.tick)
	}

	o, err = parseFlags([]string{"--rtt", "1ms", "--mtu", "9000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.queue != 32*9000 {
		t.Errorf("auto queue at 1 ms, MTU 9000 = %d, want at least 32 packets (288000)", o.queue)
	}
	if o.tick != 0 {
		t.Errorf("auto tick at 1 ms = %v, want 0 (exact timing)", o.tick)
	}

	for _, args := range [][]string{
		{"--rate", "1gbps"},
		{"--queue", "100"}, // smaller than one packet
		{"--rtt", "-1ms"},
		{"--mtu", "100"},
		{"--tun-a", "same", "--tun-b", "same"},
		{"--loss", "2"},
		{"--tick", "1s"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("parseFlags(%q) = %v, want a usage error", args, err)
		}
	}
}
