package job

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// planFixture makes a directory holding a sparse 1 GiB file and a 1-byte
// one, and the parallel options of a stock kernel's plans.
func planFixture(t *testing.T) (dir, big, small string, p transfer.ParallelOptions) {
	t.Helper()
	dir = t.TempDir()
	big, small = filepath.Join(dir, "big"), filepath.Join(dir, "small")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	os.WriteFile(small, []byte("x"), 0o644)
	p = transfer.ParallelOptions{MinSize: 4 << 20,
		Controller: func() *window.Controller { return window.New(window.Config{ConnBytes: 3.6e6}) }}
	return dir, big, small, p
}

// local is path on this host.
func local(path string) transfer.Location { return transfer.Location{Path: path} }

// TestPredial: an upload of a large local file asks its host's end for
// the connections of its first plan at once, with its streams' sessions
// on each, and so does a download of one file, whose size is not known
// yet; a small upload, a download of
// several files and a copy off the parallel pipeline ask for none. A
// tree's copy between
// this host and one server, either way, asks for treeConns, or its large
// file's plan when that is more; a download, whose sizes are not known
// yet, a large file's.
func TestPredial(t *testing.T) {
	dir, big, small, p := planFixture(t)
	host := transfer.Location{Host: "h", Path: "dst"}

	if fn := predial([]transfer.Location{local(big), host}, p, false); fn == nil {
		t.Error("a 1 GiB upload asked for no connections ahead")
	} else if conns, sessions := fn(100 * time.Millisecond); conns != 5 || sessions != 3 {
		t.Errorf("a 1 GiB upload at 100 ms asked for %d connections with %d sessions each, want 5 with 3 (its first plan)", conns, sessions)
	} else if conns, sessions := fn(time.Millisecond); conns > 1 || sessions > 0 {
		t.Errorf("a 1 GiB upload at 1 ms asked for %d connections with %d sessions each, want one and none ahead", conns, sessions)
	}
	download := []transfer.Location{{Host: "h", Path: "big"}, local(dir)}
	if fn := predial(download, p, false); fn == nil {
		t.Error("a download of one file asked for no connections ahead")
	} else if conns, sessions := fn(100 * time.Millisecond); conns != 5 || sessions != 3 {
		t.Errorf("a download of one file at 100 ms asked for %d connections with %d sessions each, want 5 with 3 (a large file's first plan)", conns, sessions)
	} else if conns, _ := fn(time.Millisecond); conns > 1 {
		t.Errorf("a download of one file at 1 ms asked for %d connections, want one", conns)
	}
	for name, locs := range map[string][]transfer.Location{
		"small upload":             {local(small), host},
		"download of two files":    {{Host: "h", Path: "a"}, {Host: "h", Path: "b"}, local(dir)},
		"copy between two servers": {{Host: "h", Path: "a"}, {Host: "g", Path: "b"}},
	} {
		if fn := predial(locs, p, false); fn != nil {
			conns, _ := fn(100 * time.Millisecond)
			t.Errorf("%s: asked for connections ahead (%d at 100 ms)", name, conns)
		}
	}
	if fn := predial([]transfer.Location{local(big), host}, transfer.ParallelOptions{}, false); fn != nil {
		t.Error("a copy off the parallel pipeline asked for connections ahead")
	}

	other := transfer.Location{Host: "g", Path: "x"}
	for name, c := range map[string]struct {
		locs []transfer.Location
		want int // at 100 ms; 0 for none
	}{
		"tree upload":               {[]transfer.Location{local(dir), host}, treeConns},
		"tree upload with big file": {[]transfer.Location{local(dir), local(big), host}, 5},
		"tree download":             {[]transfer.Location{{Host: "h", Path: "tree"}, local(dir)}, 5},
		"two servers":               {[]transfer.Location{{Host: "h", Path: "tree"}, other, local(dir)}, 0},
		"server to server":          {[]transfer.Location{{Host: "h", Path: "tree"}, other}, 0},
	} {
		fn := predial(c.locs, p, true)
		var conns, sessions int
		if fn != nil {
			conns, sessions = fn(100 * time.Millisecond)
		}
		switch {
		case c.want == 0 && fn != nil:
			t.Errorf("%s: asked for connections ahead (%d at 100 ms)", name, conns)
		case c.want > 0 && fn == nil:
			t.Errorf("%s: asked for no connections ahead, want %d", name, c.want)
		case c.want > 0 && (conns != c.want || sessions != 0):
			t.Errorf("%s: asked for %d connections with %d sessions each at 100 ms, want %d and none ahead (a tree's batches take their own)",
				name, conns, sessions, c.want)
		}
	}
}

// TestPreOpen: a download of one remote file names it for the sessions
// opened ahead, as the copy will open it (~/ taken off); an upload, a
// tree, a copy between servers or of several files names nothing.
func TestPreOpen(t *testing.T) {
	remote := func(path string) transfer.Location { return transfer.Location{Host: "h", Path: path} }
	local := transfer.Location{Path: "dst"}
	for _, tc := range []struct {
		locs      []transfer.Location
		recursive bool
		want      string
	}{
		{[]transfer.Location{remote("/data/big"), local}, false, "/data/big"},
		{[]transfer.Location{remote("~/big"), local}, false, "big"},
		{[]transfer.Location{remote("/data/big"), local}, true, ""},
		{[]transfer.Location{local, remote("/data/big")}, false, ""},
		{[]transfer.Location{remote("/a"), remote("/b"), local}, false, ""},
		{[]transfer.Location{remote("/a"), remote("/b")}, false, ""},
	} {
		if got := preOpen(tc.locs, tc.recursive); got != tc.want {
			t.Errorf("preOpen(%v, -r %v) = %q, want %q", tc.locs, tc.recursive, got, tc.want)
		}
	}
}

// TestPreCreate: a plain upload of one small local file to a remote path
// naming a file makes its temporary file and umask probe ahead, beside
// the target; a large file, a directory-looking target, a skip likely
// (-p with the quick check, --ignore-existing), --verify, --resume, a
// tree, -O, a download or a link makes nothing ahead.
func TestPreCreate(t *testing.T) {
	dir := t.TempDir()
	small, big, link := filepath.Join(dir, "small"), filepath.Join(dir, "big"), filepath.Join(dir, "link")
	os.WriteFile(small, []byte("x"), 0o644)
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(protocol.SmallMax + 1)
	f.Close()
	os.Symlink(small, link)
	remote := func(p string) transfer.Location { return transfer.Location{Host: "h", Path: p} }
	plain := transfer.Options{Skip: transfer.SkipQuick}

	pc := preCreate([]transfer.Location{local(small), remote("/data/f")}, plain, false)
	if pc.Final != "/data/f" || !strings.HasPrefix(pc.Temp, "/data/.hpncp.f.") || !strings.HasPrefix(pc.Probe, "/data/.hpncp.umask.") {
		t.Errorf("plain upload: %+v", pc)
	}
	if pc := preCreate([]transfer.Location{local(small), remote("~/f")}, plain, false); pc.Final != "f" || !strings.HasPrefix(pc.Temp, ".hpncp.f.") {
		t.Errorf("upload to ~/f: %+v", pc)
	}
	for _, tc := range []struct {
		what  string
		locs  []transfer.Location
		to    transfer.Options
		other bool
	}{
		{"a large file", []transfer.Location{local(big), remote("/data/f")}, plain, false},
		{"a link", []transfer.Location{local(link), remote("/data/f")}, plain, false},
		{"a trailing slash", []transfer.Location{local(small), remote("/data/")}, plain, false},
		{"the home directory", []transfer.Location{local(small), remote("~")}, plain, false},
		{"-p with the quick check", []transfer.Location{local(small), remote("/data/f")}, transfer.Options{Skip: transfer.SkipQuick, Preserve: true}, false},
		{"--ignore-existing", []transfer.Location{local(small), remote("/data/f")}, transfer.Options{Skip: transfer.SkipExisting}, false},
		{"--verify", []transfer.Location{local(small), remote("/data/f")}, transfer.Options{Skip: transfer.SkipQuick, Verify: true}, false},
		{"--resume", []transfer.Location{local(small), remote("/data/f")}, transfer.Options{Skip: transfer.SkipQuick, Resume: true}, false},
		{"-r or -O", []transfer.Location{local(small), remote("/data/f")}, plain, true},
		{"a download", []transfer.Location{remote("/data/f"), local(small)}, plain, false},
		{"two sources", []transfer.Location{local(small), local(small), remote("/data/")}, plain, false},
	} {
		if pc := preCreate(tc.locs, tc.to, tc.other); pc != (protocol.PreCreate{}) {
			t.Errorf("%s: made ahead %+v", tc.what, pc)
		}
	}
}

// TestWarms: uploads of a tree or of a large file grow their extra
// connections' windows before the first write, and a large file's upload
// its first connection's too; downloads, small uploads and copies between
// servers do not.
func TestWarms(t *testing.T) {
	dir, big, small, p := planFixture(t)
	host := transfer.Location{Host: "h", Path: "dst"}
	for _, tc := range []struct {
		name      string
		locs      []transfer.Location
		recursive bool
		want      bool
		first     bool
	}{
		{"large upload", []transfer.Location{local(big), host}, false, true, true},
		{"tree upload", []transfer.Location{local(dir), host}, true, true, false},
		{"small upload", []transfer.Location{local(small), host}, false, false, false},
		{"download", []transfer.Location{{Host: "h", Path: "big"}, local(dir)}, false, false, false},
		{"tree download", []transfer.Location{{Host: "h", Path: "d"}, local(dir)}, true, false, false},
		{"between servers", []transfer.Location{{Host: "h", Path: "a"}, {Host: "g", Path: "b"}}, true, false, false},
	} {
		if got, first := warms(tc.locs, p, tc.recursive); got != tc.want || first != tc.first {
			t.Errorf("%s: warms %v, the first connection %v; want %v, %v", tc.name, got, first, tc.want, tc.first)
		}
	}
}
