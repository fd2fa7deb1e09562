package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// TestPredial: an upload of a large local file asks its host's end for
// the connections of its first plan at once; a small one, a download and
// a copy off the parallel pipeline ask for none.
func TestPredial(t *testing.T) {
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big"), filepath.Join(dir, "small")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	os.WriteFile(small, []byte("x"), 0o644)
	p := transfer.ParallelOptions{MinSize: 4 << 20,
		Controller: func() *window.Controller { return window.New(window.Config{ConnBytes: 3.6e6}) }}
	host := transfer.Location{Host: "h", Path: "dst"}
	local := func(path string) transfer.Location { return transfer.Location{Path: path} }

	if fn := predial([]transfer.Location{local(big), host}, p); fn == nil {
		t.Error("a 1 GiB upload asked for no connections ahead")
	} else if conns := fn(100 * time.Millisecond); conns != 5 {
		t.Errorf("a 1 GiB upload at 100 ms asked for %d connections, want 5 (its first plan)", conns)
	} else if conns := fn(time.Millisecond); conns > 1 {
		t.Errorf("a 1 GiB upload at 1 ms asked for %d connections, want one", conns)
	}
	for name, locs := range map[string][]transfer.Location{
		"small upload": {local(small), host},
		"download":     {{Host: "h", Path: "big"}, local(dir)},
	} {
		if fn := predial(locs, p); fn != nil {
			t.Errorf("%s: asked for connections ahead (%d at 100 ms)", name, fn(100*time.Millisecond))
		}
	}
	if fn := predial([]transfer.Location{local(big), host}, transfer.ParallelOptions{}); fn != nil {
		t.Error("a copy off the parallel pipeline asked for connections ahead")
	}
}
