package main

import (
	"strings"
	"testing"
)

func TestGetoptArgs(t *testing.T) {
	valued := func(n string) bool { return strings.Contains("PiFoJlc", n) && len(n) == 1 || n == "streams" }
	tests := []struct{ in, want string }{
		{"a b", "-- a b"},
		{"-rp a b", "-r -p -- a b"},
		{"-P2222 a b", "-P 2222 -- a b"},
		{"-rP 2222 a b", "-r -P 2222 -- a b"},
		{"-o Ciphers=a,b -q a b", "-o Ciphers=a,b -q -- a b"},
		{"-oUser=x a b", "-o User=x -- a b"},
		{"a b -r", "-- a b -r"},
		{"-- -a b", "-- -a b"},
		{"--streams 4 a b", "--streams 4 -- a b"},
		{"--streams=4 -v a b", "--streams=4 -v -- a b"},
		{"- b", "-- - b"},
		{"-r", "-r --"},
		{"-4r a b", "--4 -r -- a b"},
	}
	for _, tt := range tests {
		got := strings.Join(getoptArgs(strings.Fields(tt.in), valued), " ")
		if got != tt.want {
			t.Errorf("getoptArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
