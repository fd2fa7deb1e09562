package main

import (
	"strings"
	"testing"
)

// TestRun: what the scripts read back, one number a line, and nothing at
// all on stdout when any value is bad, so that a script's $(...) never
// holds half an answer.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"size", "1G", "256M", "4KB", "512"}, "1073741824\n268435456\n4000\n512\n"},
		{[]string{"bitrate", "1gbit", "100mbit", "unlimited", "0"}, "1000000000\n100000000\n0\n0\n"},
	} {
		var out strings.Builder
		if err := run(&out, tc.args); err != nil || out.String() != tc.want {
			t.Errorf("units %q = %q, %v; want %q", tc.args, out.String(), err, tc.want)
		}
	}
	for _, args := range [][]string{{"size", "1G", "1Q"}, {"bitrate", "1gbps"}, {"size"}, {"speed", "1"}, nil} {
		var out strings.Builder
		if err := run(&out, args); err == nil || out.Len() > 0 {
			t.Errorf("units %q = %q, %v; want an error and no output", args, out.String(), err)
		}
	}
}
