package mirror

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// openSFTP opens an SFTP end on an in-process server started with o.
func openSFTP(t *testing.T, o sshtest.Options) *protocol.SFTP {
	t.Helper()
	end, _ := serveSFTP(t, o)
	return end
}

// serveSFTP is openSFTP that also returns the server, whose Root is the
// directory relative remote paths start from.
func serveSFTP(t *testing.T, o sshtest.Options) (*protocol.SFTP, *sshtest.Server) {
	t.Helper()
	srv := sshtest.Start(t, o)
	conn, err := ssh.Dial("tcp", srv.Addr, srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	end, err := protocol.OpenSFTP(conn, protocol.Options{Label: "testhost:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	return end, srv
}

// TestLinkTimesOverSFTP: sync -a gives a link its own time over SFTP
// where the server offers lsetstat@openssh.com, as rsync does with
// lutimes. Where it does not, the link keeps the time the server gave
// it, without an error for each link, and a second run itemizes nothing:
// a time the end cannot set is not a change to make.
func TestLinkTimesOverSFTP(t *testing.T) {
	for name, c := range map[string]struct {
		o        sshtest.Options
		setsTime bool
	}{
		"lsetstat":    {sshtest.Options{}, true},
		"no lsetstat": {sshtest.Options{NoLsetstat: true}, false},
	} {
		t.Run(name, func(t *testing.T) {
			end := openSFTP(t, c.o)
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			write(t, src, map[string]string{"f": "data", "l": "->f"})
			linkTime := time.Unix(1000000000, 0)
			if err := (transfer.Local{}).Lchtimes(filepath.Join(src, "l"), linkTime, linkTime); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			run := func() *Plan {
				t.Helper()
				p, err := Sync(ctx, transfer.Endpoint{FS: transfer.Local{}, Path: src}, transfer.Endpoint{FS: end, Path: dst}, ".", true, false, archive())
				if err != nil {
					t.Fatal(err)
				}
				res, err := p.Run(ctx, archive(), RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Errors) > 0 {
					t.Fatalf("errors: %v", res.Errors)
				}
				return p
			}
			run()
			fi, err := os.Lstat(filepath.Join(dst, "l"))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.ModTime().Equal(linkTime); got != c.setsTime {
				t.Errorf("the link's mtime on disk is %v; set from the source: %v, want %v", fi.ModTime(), got, c.setsTime)
			}
			for _, ch := range run().Changes {
				if ch.Item != "" {
					t.Errorf("the second run itemizes %q", ch.Line())
				}
			}
		})
	}
}

// ownerInfo is a stat whose Sys gives an owner, as a helper's answer.
type ownerInfo struct {
	fs.FileInfo
	uid, gid int
}

func (o ownerInfo) Sys() any                       { return o }
func (o ownerInfo) Owner() (uid, gid int, ok bool) { return o.uid, o.gid, true }

// TestLearnOwnerFromEngine: who owns the files the run makes is taken
// from the stat the engine saw of one (a push's helper answers with it),
// without a look of its own; with none, nothing is known of a run that
// made nothing.
func TestLearnOwnerFromEngine(t *testing.T) {
	r := &runner{res: &Result{Engine: &transfer.Result{Made: ownerInfo{uid: 1234, gid: 567}}}}
	r.learnOwner(nil)
	if !r.ownerKnown || r.ownUID != 1234 || r.ownGID != 567 {
		t.Errorf("owner learnt %v %d:%d, want 1234:567 from the engine", r.ownerKnown, r.ownUID, r.ownGID)
	}
	r = &runner{res: &Result{Engine: &transfer.Result{}}}
	r.learnOwner(nil)
	if r.ownerKnown {
		t.Errorf("owner learnt from nothing: %d:%d", r.ownUID, r.ownGID)
	}
}
