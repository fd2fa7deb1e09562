package job

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hpncp/hpncp/transfer"
)

// Aliases of one user@host:port share a key; another port or user, from
// the configuration, the operand or -P, does not.
func TestRecommendationKey(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	conf := "Host a b\n\tHostName Nas.Example\n\tUser alice\n\tPort 2200\n" +
		"Host c\n\tHostName nas.example\n\tUser alice\n\tPort 2201\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	so := Conn{ConfigFile: cfg, Batch: true}
	key := func(so Conn, l transfer.Location) string {
		t.Helper()
		k, err := RecommendationKey(context.Background(), so, l)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := key(so, transfer.Location{Host: "a"})
	if a != "alice@nas.example:2200" {
		t.Fatalf("a's key = %q", a)
	}
	if b := key(so, transfer.Location{Host: "b"}); b != a {
		t.Errorf("alias b: key %q, want a's %q", b, a)
	}
	withP := so
	withP.Port = 2200
	for _, tc := range []struct {
		name string
		key  string
		same bool // as a's
	}{
		{"another port", key(so, transfer.Location{Host: "c"}), false},
		{"the operand's user", key(so, transfer.Location{Host: "a", User: "bob"}), false},
		{"the operand's port", key(so, transfer.Location{Host: "a", Port: 22}), false},
		{"-P over another port", key(withP, transfer.Location{Host: "c"}), true},
	} {
		if (tc.key == a) != tc.same {
			t.Errorf("%s: key %q, a's %q; want the same: %v", tc.name, tc.key, a, tc.same)
		}
	}
}
