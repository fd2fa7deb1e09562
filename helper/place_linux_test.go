package helper

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLaunchRecordsTheCheck runs Launch's line as a login would, with a
// sha256sum that counts its calls and a date that says what the test
// wants: a check that found the helper right is recorded once the file's
// change time is two seconds past, and a later run with the same file
// runs it unhashed; a write to the file in place, another file put in its
// place, or a record that names another file, has it hashed again, and a
// changed file never runs.
func TestLaunchRecordsTheCheck(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	realSum, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Skip("no sha256sum")
	}
	if out, err := exec.Command("stat", "-L", "-c", "%d %i %s %Y %Z", "/").Output(); err != nil || len(strings.Fields(string(out))) != 5 {
		t.Skip("no stat -c as GNU's")
	}
	home := t.TempDir()
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	os.WriteFile(filepath.Join(bin, "sha256sum"), []byte("#!/bin/sh\necho >>"+calls+"\nexec "+realSum+" \"$@\"\n"), 0o755)
	realDate, err := exec.LookPath("date")
	if err != nil {
		t.Skip("no date")
	}
	os.WriteFile(filepath.Join(bin, "date"), []byte("#!/bin/sh\n[ -z \"$NOW\" ] || { echo \"$NOW\"; exit; }\nexec "+realDate+" \"$@\"\n"), 0o755)
	helper := []byte("#!/bin/sh\necho installed \"$@\"\n")
	sum := sha256.Sum256(helper)
	dir := filepath.Join(home, ".cache", "hpncp", "helper", VersionDir(sum))
	binary, record := filepath.Join(dir, BinaryName), filepath.Join(dir, CheckedName)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(binary, helper, 0o700)
	ctime := func() int64 {
		t.Helper()
		fi, err := os.Stat(binary)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ctim.Sec
	}
	hashed := func() int {
		b, _ := os.ReadFile(calls)
		return bytes.Count(b, []byte("\n"))
	}
	// run runs the line with date saying now (the clock's when 0), and
	// returns what the helper said and whether it was hashed for it.
	run := func(now int64) (string, string, bool) {
		t.Helper()
		before := hashed()
		cmd := exec.Command(sh, "-c", Launch("~/.cache/hpncp/helper", sum, "j", "--protocol 1", false))
		cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"), "NOW="}
		if now != 0 {
			cmd.Env[2] += strconv.FormatInt(now, 10)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		return out.String(), errb.String(), hashed() > before
	}
	const ran = "installed serve --protocol 1\n"

	// A file changed a second ago: checked, run, not recorded.
	if out, _, h := run(ctime() + 1); out != ran || !h {
		t.Fatalf("fresh: %q, hashed %v; want it hashed and run", out, h)
	}
	if _, err := os.Stat(record); err == nil {
		t.Fatalf("a check of a file changed a second before was recorded")
	}
	// Two seconds past on the clock: recorded; the next run hashes
	// nothing. (A write after the record then lands in a later second,
	// whatever the filesystem's granularity.)
	for time.Now().Unix() < ctime()+2 {
		time.Sleep(50 * time.Millisecond)
	}
	if out, _, h := run(0); out != ran || !h {
		t.Fatalf("old enough: %q, hashed %v", out, h)
	}
	rec, err := os.ReadFile(record)
	if err != nil || !strings.HasPrefix(string(rec), hex.EncodeToString(sum[:])+" ") {
		t.Fatalf("no record of the check: %q (%v)", rec, err)
	}
	if out, _, h := run(0); out != ran || h {
		t.Fatalf("recorded: %q, hashed %v; want it run unhashed", out, h)
	}

	// A byte changed in place (the same inode, the same size, its
	// modification time put back): its change time moved, so it is hashed
	// and not run.
	fi, _ := os.Stat(binary)
	changed := append([]byte{}, helper...)
	changed[len(changed)-2] = 'X'
	f, err := os.OpenFile(binary, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(changed, 0)
	f.Close()
	os.Chtimes(binary, fi.ModTime(), fi.ModTime())
	if out, stderr, h := run(0); out != "" || !h || !strings.Contains(stderr, "sha256 differs") {
		t.Fatalf("changed in place: %q, hashed %v, stderr %q; want it hashed and refused", out, h, stderr)
	}

	// Another file in its place, right again: the record names the file
	// before it, so it is hashed, and run.
	os.WriteFile(binary+".new", helper, 0o700)
	os.Rename(binary+".new", binary)
	if out, _, h := run(0); out != ran || !h {
		t.Fatalf("replaced: %q, hashed %v", out, h)
	}

	// A record is the hash and the file's stat: with another hash, it
	// is no record.
	out, err := exec.Command("stat", "-L", "-c", "%d %i %s %Y %Z", binary).Output()
	if err != nil {
		t.Fatal(err)
	}
	k := strings.TrimSpace(string(out))
	os.WriteFile(record, []byte(strings.Repeat("0", 64)+" "+k+"\n"), 0o600)
	if out, _, h := run(0); out != ran || !h {
		t.Fatalf("another hash's record: %q, hashed %v", out, h)
	}
	os.WriteFile(record, []byte(hex.EncodeToString(sum[:])+" "+k+"\n"), 0o600)
	if out, _, h := run(0); out != ran || h {
		t.Fatalf("this file's record: %q, hashed %v", out, h)
	}
}
