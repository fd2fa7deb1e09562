package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// preCreateEnd opens an end whose start makes the temporary file and the
// umask probe of pc, and returns it with the server's root.
func preCreateEnd(t *testing.T, pc func(root string) PreCreate) (*SFTP, PreCreate, string) {
	t.Helper()
	srv := sshtest.Start(t, sshtest.Options{})
	first, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := pc(srv.Root)
	end, err := OpenSFTP(first, Options{Label: "testhost:", Logf: t.Logf, Stat: []string{p.Final}, PreCreate: &p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	return end, p, srv.Root
}

// leftovers lists the entries of dir named as hpncp's temporary files.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range dirNames(t, dir) {
		if strings.HasPrefix(n, ".hpncp.") {
			out = append(out, n)
		}
	}
	return out
}

func plainPreCreate(root string) PreCreate {
	return PreCreate{Final: filepath.Join(root, "f"), Temp: filepath.Join(root, ".hpncp.f.1.part"),
		Probe: filepath.Join(root, ".hpncp.umask.2.part")}
}

// TestPreCreateTaken: the start makes the temporary file, owner-only,
// and learns the umask from its probe, whose directory it removes; the
// small file's PutSmall writes the temporary file through the start's
// handle, with no OPEN of its own, and renames it into place.
func TestPreCreateTaken(t *testing.T) {
	end, pc, root := preCreateEnd(t, plainPreCreate)
	fi, err := os.Stat(pc.Temp)
	if err != nil {
		t.Fatalf("temporary file not made with the start: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("temporary file mode %v, want owner-only", fi.Mode().Perm())
	}
	if _, err := os.Stat(pc.Probe); err == nil {
		t.Error("the umask probe's directory is left")
	}
	mask, known := end.startUmask()
	if !known {
		t.Fatal("umask not learnt with the start")
	}
	if got, err := end.Umask(context.Background(), filepath.Join(root, "other")); err != nil || got != mask {
		t.Errorf("Umask = %v, %v; want the start's %v without a probe", got, err, mask)
	}
	if _, err := os.Stat(filepath.Join(root, "other")); err == nil {
		t.Error("Umask made a probe although the start learnt the mask")
	}
	tmp, ok := end.TempFor(pc.Final)
	if !ok || tmp != pc.Temp {
		t.Fatalf("TempFor(%s) = %q, %v", pc.Final, tmp, ok)
	}
	rs := end.created.rs
	opens := rs.nextID
	if err := end.PutSmall(context.Background(), tmp, pc.Final, []byte("four"), PutAttrs{Perm: 0o600}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(pc.Final); err != nil || string(b) != "four" {
		t.Fatalf("target %q, %v", b, err)
	}
	if rs.nextID == opens {
		t.Error("PutSmall sent nothing on the session that holds the handle")
	}
	if _, ok := end.TempFor(pc.Final); ok {
		t.Error("the temporary file is offered again after PutSmall took it")
	}
	end.DropUnused()
	if left := leftovers(t, root); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// TestPreCreateUnused: a target that is a directory puts the file
// elsewhere; the temporary file made for nothing is removed by
// DropUnused, and one that existed already is not taken for the start's.
func TestPreCreateUnused(t *testing.T) {
	end, pc, root := preCreateEnd(t, func(root string) PreCreate {
		p := plainPreCreate(root)
		if err := os.Mkdir(p.Final, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	})
	if _, err := os.Stat(pc.Temp); err != nil {
		t.Fatalf("temporary file not made: %v", err)
	}
	if _, ok := end.TempFor(filepath.Join(pc.Final, "f")); ok {
		t.Error("TempFor offers the file made for another target")
	}
	end.DropUnused()
	if left := leftovers(t, root); len(left) > 0 {
		t.Errorf("left after DropUnused: %v", left)
	}

	end2, pc2, _ := preCreateEnd(t, func(root string) PreCreate {
		p := plainPreCreate(root)
		if err := os.WriteFile(p.Temp, []byte("someone's"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	})
	if b, err := os.ReadFile(pc2.Temp); err != nil || string(b) != "someone's" {
		t.Errorf("an existing file at the temporary name: %q, %v", b, err)
	}
	if _, ok := end2.TempFor(pc2.Final); ok {
		t.Error("a file that existed at the temporary name is offered as the start's")
	}
	end2.DropUnused()
	if _, err := os.Stat(pc2.Temp); err != nil {
		t.Errorf("DropUnused removed a file the start did not make: %v", err)
	}
}

// TestReadStartPreCreate: the replies to the start's requests for
// PreCreate give the temporary file's handle and the umask, in any order,
// and a probe whose removal failed is left to remove.
func TestReadStartPreCreate(t *testing.T) {
	id, status, attrs := replyID, statusReply, attrsReply
	// Ids: 1 the limits, 2 and 3 the stat and lstat of /t, 4 the
	// create, 5 to 7 the probe's mkdir, stat and rmdir.
	handle := sftpPacket(fxpHandle, appendString(id(4), "h1"))
	f := startFiles{create: "/c", probe: "/p"}
	for _, tc := range []struct {
		name    string
		replies [][]byte
		want    startMade
	}{
		{"made", [][]byte{status(1, 8), status(2, 2), status(3, 2), handle, status(5, 0), attrs(6, 0o40750), status(7, 0)},
			startMade{handle: "h1", mask: 0o027, maskKnown: true}},
		{"reordered", [][]byte{handle, attrs(6, 0o40755), status(7, 0), status(3, 2), status(5, 0), status(2, 2), status(1, 8)},
			startMade{handle: "h1", mask: 0o022, maskKnown: true}},
		{"rmdir failed", [][]byte{status(1, 8), status(2, 2), status(3, 2), status(4, 4), status(5, 0), attrs(6, 0o40755), status(7, 3)},
			startMade{probeLeft: true}},
	} {
		var b []byte
		for _, r := range tc.replies {
			b = append(b, r...)
		}
		_, _, made, err := readStart(bytes.NewReader(b), hello{}, []string{"/t"}, f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if made != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, made, tc.want)
		}
	}
}

// replyID, statusReply and attrsReply build a server's replies, request
// id n first: a STATUS of code, and ATTRS with permissions mode.
func replyID(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func statusReply(n, code uint32) []byte {
	return sftpPacket(fxpStatus, appendString(appendString(binary.BigEndian.AppendUint32(replyID(n), code), ""), ""))
}

func attrsReply(n, mode uint32) []byte {
	return sftpPacket(fxpAttrs, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(replyID(n), attrPermissions), mode))
}
