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
		{"--queue", "0bdp"},
		{"--queue", "fullbdp"},
		{"--queue", "-1"},
		{"--jitter", "-1ms"},
		{"--reorder", "1.5"},
		{"--rate-back", "1gbps"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("parseFlags(%q) = %v, want a usage error", args, err)
		}
	}
}

func TestParseQueue(t *testing.T) {
	tests := []struct {
		in      string
		want    queueSize
		wantErr bool
	}{
		{"auto", queueSize{bdps: 1}, false},
		{"0.25bdp", queueSize{bdps: 0.25}, false},
		{"2BDP", queueSize{bdps: 2}, false},
		{"256k", queueSize{bytes: 256 << 10}, false},
		{"1500000", queueSize{bytes: 1_500_000}, false},
		{"0bdp", queueSize{}, true},
		{"1000bdp", queueSize{}, true},
		{"bdp", queueSize{}, true},
		{"deep", queueSize{}, true},
	}
	for _, tt := range tests {
		got, err := parseQueue(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseQueue(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseFlagsMatrix(t *testing.T) {
	// A symmetric path: the queue in BDPs is the same both ways.
	o, err := parseFlags([]string{"--rtt", "100ms", "--queue", "0.25bdp", "--jitter", "2ms", "--reorder", "0.1%"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.queue != 3_125_000 || o.queueBack != 3_125_000 || o.rateBack != o.rate {
		t.Errorf("--queue 0.25bdp at 1 Gbit/s, 100 ms: queues %d and %d, rates %d and %d; want 3125000 both ways, one rate", o.queue, o.queueBack, o.rate, o.rateBack)
	}
	if o.jitter != 2*time.Millisecond || o.reorder != 0.001 {
		t.Errorf("jitter %v, reorder %g; want 2ms, 0.001", o.jitter, o.reorder)
	}
	ab, ba := o.links()
	if ab.jitter != 2e6 || ba.jitter != 2e6 || ab.reorder != 0.001 || ba.reorder != 0.001 {
		t.Errorf("links: jitter %d/%d ns, reorder %g/%g; want both directions to vary", ab.jitter, ba.jitter, ab.reorder, ba.reorder)
	}
	// The queue follows each direction's own rate; a size in bytes is
	// the same both ways.
	o, err = parseFlags([]string{"--rtt", "100ms", "--rate", "100mbit", "--rate-back", "1gbit", "--queue", "2bdp"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rate != 100e6 || o.rateBack != 1e9 || o.queue != 2_500_000 || o.queueBack != 25_000_000 {
		t.Errorf("asymmetric 2bdp: rates %d/%d queues %d/%d; want 100e6/1e9 and 2500000/25000000", o.rate, o.rateBack, o.queue, o.queueBack)
	}
	o, err = parseFlags([]string{"--rtt", "100ms", "--rate", "100mbit", "--rate-back", "1gbit", "--queue", "1m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.queue != 1<<20 || o.queueBack != 1<<20 {
		t.Errorf("--queue 1m: queues %d/%d, want 1048576 both ways", o.queue, o.queueBack)
	}
	// The floor of 32 packets holds for a multiple of the BDP.
	o, err = parseFlags([]string{"--rtt", "1ms", "--queue", "0.25bdp"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.queue != 48_000 {
		t.Errorf("0.25bdp at 1 ms: queue %d, want the 32-packet floor 48000", o.queue)
	}
}
