package sshconn

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func TestResolveSendEnvSetEnv(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config")
	body := `
Host web
  SendEnv LANG LC_* FOO
  SendEnv -FO?
  SetEnv A=1 B="x y" A=2
  SetEnv C=3
Host *
  SendEnv TERM
`
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := resolveBoth(t, "web", Options{ConfigFile: config, Options: []string{"SendEnv=GIT_PROTOCOL"}})
	if want := []string{"GIT_PROTOCOL", "LANG", "LC_*", "TERM"}; !slices.Equal(c.SendEnv, want) {
		t.Errorf("SendEnv = %q, want %q", c.SendEnv, want)
	}
	if want := []string{"A=1", "B=x y"}; !slices.Equal(c.SetEnv, want) {
		t.Errorf("SetEnv = %q, want %q", c.SetEnv, want)
	}

	plain := resolveBoth(t, "other", Options{ConfigFile: config})
	if plain.SetEnv != nil || !slices.Equal(plain.SendEnv, []string{"TERM"}) {
		t.Errorf("other host: SendEnv %q SetEnv %q", plain.SendEnv, plain.SetEnv)
	}
}

func TestEnvironment(t *testing.T) {
	c := &Config{SendEnv: []string{"LC_*", "GIT_PROTOCOL", "T?RM"}, SetEnv: []string{"LC_ALL=C", "EMPTY="}}
	environ := []string{"LC_CTYPE=en_US.UTF-8", "HOME=/root", "GIT_PROTOCOL=version=2", "TERM=xterm", "TIRMX=1", "=odd", "LC_"}
	got := c.Environment(environ)
	want := [][2]string{{"LC_CTYPE", "en_US.UTF-8"}, {"GIT_PROTOCOL", "version=2"}, {"TERM", "xterm"}, {"LC_ALL", "C"}, {"EMPTY", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Environment = %q, want %q", got, want)
	}
	if got := (&Config{}).Environment(environ); got != nil {
		t.Errorf("no SendEnv or SetEnv: Environment = %q, want none", got)
	}
}

func TestMatchPattern(t *testing.T) {
	tests := []struct {
		s, pattern string
		want       bool
	}{
		{"LANG", "LANG", true},
		{"LANG", "LAN", false},
		{"LC_ALL", "LC_*", true},
		{"LC_", "LC_*", true},
		{"XLC_ALL", "LC_*", false},
		{"abc", "a?c", true},
		{"ac", "a?c", false},
		{"abcbc", "*b*c", true},
		{"anything", "*", true},
		{"", "*", true},
		{"", "?", false},
	}
	for _, tt := range tests {
		if got := matchPattern(tt.s, tt.pattern); got != tt.want {
			t.Errorf("matchPattern(%q, %q) = %v, want %v", tt.s, tt.pattern, got, tt.want)
		}
	}
}
