package recommend

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRecommendationCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	if _, ok := Load("nas"); ok || Any() {
		t.Fatal("a recommendation before any was saved")
	}
	want := Recommendation{Host: "nas", Config: "s8", Streams: 8, MBps: 812.5, Measured: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if err := Save("nas", want); err != nil {
		t.Fatal(err)
	}
	if !Any() {
		t.Error("Any: nothing stored after Save")
	}
	p := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "hpncp", "hosts", "nas.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("cache file: %v", err)
	}
	got, ok := Load("NAS")
	if !ok || got != want {
		t.Errorf("Load = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := Load("other"); ok {
		t.Error("another host has nas's recommendation")
	}
	had, err := Forget("nas")
	if err != nil || !had {
		t.Fatalf("Forget = %v, %v", had, err)
	}
	if _, ok := Load("nas"); ok {
		t.Error("recommendation still there after Forget")
	}
	if had, err := Forget("nas"); err != nil || had {
		t.Errorf("second Forget = %v, %v; want false, nil", had, err)
	}
}

func TestCacheNames(t *testing.T) {
	for host, want := range map[string]string{
		"nas": "nas", "Alice@Host.example": "alice@host.example", "[::1]": "__1", "../etc": ".._etc", "..": "", "a/b": "a_b",
	} {
		if got := cacheName(host); got != want {
			t.Errorf("cacheName(%q) = %q, want %q", host, got, want)
		}
	}
	if err := Save("..", Recommendation{Host: ".."}); err == nil {
		t.Error("saved a recommendation for host ..")
	}
}

func TestDamagedCacheIsIgnored(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	p := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "hpncp", "hosts")
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "h.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, ok := Load("h"); ok {
		t.Errorf("damaged cache read as %+v", r)
	}
}

// Keys name what ssh resolved: one file per user, host and port, whatever
// the alias, and none shared by two ports or users.
func TestKeys(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	a, b := Key("alice", "Nas.example", 22), Key("alice", "nas.example", 2222)
	if a != "alice@nas.example:22" || b != "alice@nas.example:2222" {
		t.Fatalf("keys %q, %q", a, b)
	}
	if err := Save(a, Recommendation{Host: "myalias", Config: "s4", Streams: 4}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "hpncp", "hosts", "alice@nas.example_22.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("cache file: %v", err)
	}
	if r, ok := Load(Key("alice", "NAS.example", 22)); !ok || r.Streams != 4 {
		t.Errorf("Load by the same destination = %+v, %v", r, ok)
	}
	for _, other := range []string{b, Key("bob", "nas.example", 22), Key("alice", "nas2.example", 22)} {
		if r, ok := Load(other); ok {
			t.Errorf("%s has %s's recommendation: %+v", other, a, r)
		}
	}
}
