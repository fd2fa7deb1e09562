package units

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

func TestParseTCSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"1500", 1500, false},
		{"256k", 256 << 10, false},
		{"12m", 12 << 20, false},
		{"12MiB", 12 << 20, false},
		{"1kb", 1024, false},
		{"1.5m", 0, true},
		{"lots", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseTCSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseTCSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {208 << 10, "208 KiB"},
		{1536, "1.5 KiB"}, {4 << 20, "4 MiB"}, {6<<20 + 1<<19, "6.5 MiB"}, {3 << 30, "3 GiB"}, {5 << 40, "5120 GiB"},
	} {
		if got := FormatSize(tc.in); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
