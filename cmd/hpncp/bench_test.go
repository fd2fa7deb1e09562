package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchLocation(t *testing.T) {
	tests := []struct {
		in, user, host, path string
		port                 int
	}{
		{"nas", "", "nas", "/tmp", 0},
		{"alice@nas", "alice", "nas", "/tmp", 0},
		{"nas:/data", "", "nas", "/data", 0},
		{"nas:", "", "nas", "/tmp", 0},
		{"[::1]", "", "::1", "/tmp", 0},
		{"bob@[::1]:x", "bob", "::1", "x", 0},
		{"scp://nas:2222/srv", "", "nas", "srv", 2222},
	}
	for _, tt := range tests {
		l, err := benchLocation(tt.in)
		if err != nil {
			t.Errorf("benchLocation(%q): %v", tt.in, err)
			continue
		}
		if l.User != tt.user || l.Host != tt.host || l.Path != tt.path || l.Port != tt.port {
			t.Errorf("benchLocation(%q) = %+v, want user %q host %q path %q port %d", tt.in, l, tt.user, tt.host, tt.path, tt.port)
		}
	}
	if _, err := benchLocation("./a:b"); err == nil {
		t.Error("benchLocation took a local path for a host")
	}
}

// TestDocs checks the release's man page and completions: every visible
// copy flag and every command is in them.
func TestDocs(t *testing.T) {
	dir := t.TempDir()
	if err := writeDocs(dir); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	man := read("hpncp.1")
	for _, want := range []string{".TH HPNCP 1", ".SH NAME", "hpncp bench --embedded", "hpncp ssh", ".SH REPORT", "hpncp report merge [-o FILE] REPORT..."} {
		if !strings.Contains(man, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	bash, zsh, fish := read("completions/hpncp.bash"), read("completions/hpncp.zsh"), read("completions/hpncp.fish")
	for _, f := range []string{"r", "streams", "hpn-disabled", "J"} {
		if !strings.Contains(bash, flagWord(f)+" ") {
			t.Errorf("bash completion lacks %s", flagWord(f))
		}
		if !strings.Contains(zsh, "'"+flagWord(f)+"[") {
			t.Errorf("zsh completion lacks %s", flagWord(f))
		}
		if !strings.Contains(fish, " "+f+" -d") {
			t.Errorf("fish completion lacks %s", f)
		}
	}
	for _, c := range docCommands {
		if !strings.Contains(bash, c) || !strings.Contains(zsh, c) || !strings.Contains(fish, c) {
			t.Errorf("a completion lacks the %s command", c)
		}
	}
	if strings.Contains(bash, "-A ") {
		t.Error("bash completion offers an unsupported (hidden) scp flag")
	}
}
