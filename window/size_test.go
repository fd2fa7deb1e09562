package window

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"512B", 512},
		{"256k", 256 << 10},
		{"4M", 4 << 20},
		{"1g", 1 << 30},
		{"2T", 2 << 40},
		{"16MiB", 16 << 20},
		{"16mib", 16 << 20},
		{"64KiB", 64 << 10},
		{"1GiB", 1 << 30},
		{"4MB", 4_000_000},
		{"1kb", 1000},
		{"1.5G", 3 << 29},
		{"0.1G", 107374182}, // 107374182.4, rounded down
		{".5k", 512},
		{" 8 M ", 8 << 20},
		{"8388607T", 8388607 << 40},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"", "not a number"},
		{"M", "not a number"},
		{"-1M", "not a number"},
		{"1.2.3", "not a number"},
		{".", "not a number"},
		{"4X", `unknown unit "X"`},
		{"4 MiBs", "unknown unit"},
		{"1e6", "unknown unit"},
		{"8388608T", "too large"},
		{"99999999999999999999", "too large"},
	} {
		got, err := ParseSize(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error naming the input and %q", tc.in, got, err, tc.msg)
		}
	}
}
