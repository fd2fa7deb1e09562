package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// literalData is --stats's "Literal data" count.
func literalData(t *testing.T, stdout string) int64 {
	t.Helper()
	m := regexp.MustCompile(`Literal data: ([0-9,]+) bytes`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no Literal data in --stats:\n%s", stdout)
	}
	n, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	return n
}

// loggedHelper is a helper's command that notes each run's arguments
// in the file runs, then runs the helper bin.
func loggedHelper(t *testing.T, bin string) (wrapper, runs string) {
	t.Helper()
	runs = filepath.Join(t.TempDir(), "runs")
	wrapper = filepath.Join(t.TempDir(), "helper.sh")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$*\" >> "+runs+"\nexec "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, runs
}

// scatter changes n runs of each bytes of p at places rng picks.
func scatter(rng *rand.Rand, p []byte, n, each int) {
	for range n {
		off := rng.Intn(len(p) - each)
		rng.Read(p[off : off+each])
	}
}

// TestSyncDeltaE2E: hpncp sync with a helper at the far end (a real
// sshd) sends a changed file as rsync's delta transfer would, up and
// down: only about the changed bytes travel, the result is the source
// byte for byte, and its attributes are the source's. Without a helper,
// or with -W, the file goes whole, and -vv says why.
func TestSyncDeltaE2E(t *testing.T) {
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(37))
	old := make([]byte, 24<<20+4321)
	rng.Read(old)
	next := bytes.Clone(old)
	scatter(rng, next, 40, 5000)
	next = append(next, "and a tail"...)
	const changed = 40*5000 + 10

	sync := func(args ...string) (string, string, error) {
		full := append([]string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", bin}, args...)
		return runSSHArgs(ctx, "hpncp", full, nil)
	}
	for _, dir := range []string{"up", "down"} {
		t.Run(dir, func(t *testing.T) {
			local, remote := t.TempDir(), t.TempDir()
			src, dst := filepath.Join(local, "f"), filepath.Join(remote, "f")
			from, to := src, "e2e:"+dst
			if dir == "down" {
				src, dst = dst, src
				from, to = "e2e:"+src, dst
			}
			os.WriteFile(dst, old, 0o644)
			os.WriteFile(src, next, 0o640)
			mtime := time.Date(2020, 3, 4, 5, 6, 7, 0, time.UTC)
			os.Chtimes(src, mtime, mtime)

			stdout, stderr, err := sync("-a", "--stats", "-vv", from, to)
			if err != nil {
				t.Fatalf("sync: %v\n%s%s", err, stdout, stderr)
			}
			got, _ := os.ReadFile(dst)
			if !bytes.Equal(got, next) {
				t.Fatalf("the target is %d bytes and not the source's %d", len(got), len(next))
			}
			fi, _ := os.Stat(dst)
			if fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
				t.Errorf("the target's mode %v, time %v; want the source's", fi.Mode().Perm(), fi.ModTime())
			}
			if sent := literalData(t, stdout); sent > 4*changed {
				t.Errorf("sent %d literal bytes for %d changed", sent, changed)
			}
			if !strings.Contains(stderr, "delta: ") || !strings.Contains(stdout, "f\n") {
				t.Errorf("-vv says nothing of the delta, or the file is not itemized:\n%s%s", stdout, stderr)
			}
			// Down, the delta was asked for as the helper came up, before
			// the file was listed.
			if ahead := strings.Contains(stderr, "was asked for ahead"); ahead != (dir == "down") {
				t.Errorf("pull asked ahead: %v, want %v:\n%s", ahead, dir == "down", stderr)
			}
			// No temporary file is left beside it.
			if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 1 {
				t.Errorf("the target's directory holds %d entries", len(ents))
			}
			// Run again, nothing changed: a pull asked ahead is left
			// unused, and nothing else is touched.
			stdout, stderr, err = sync("-a", "--stats", "-vv", from, to)
			if got, _ := os.ReadFile(dst); err != nil || !bytes.Equal(got, next) || strings.Contains(stderr, "delta: ") {
				t.Fatalf("sync of an unchanged file: %v\n%s%s", err, stdout, stderr)
			}
			if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 1 {
				t.Errorf("after an unchanged sync, the target's directory holds %d entries", len(ents))
			}
			// Into the directory that holds the target: the same delta,
			// asked ahead down.
			os.WriteFile(dst, old, 0o644)
			intoDir := filepath.Dir(to[strings.Index(to, ":")+1:])
			if dir == "up" {
				intoDir = "e2e:" + intoDir
			}
			stdout, stderr, err = sync("-a", "--stats", "-vv", from, intoDir+"/")
			if got, _ := os.ReadFile(dst); err != nil || !bytes.Equal(got, next) || !strings.Contains(stderr, "delta: ") {
				t.Fatalf("sync into the target's directory: %v\n%s%s", err, stdout, stderr)
			}
			if ahead := strings.Contains(stderr, "was asked for ahead"); ahead != (dir == "down") {
				t.Errorf("into the directory, pull asked ahead: %v, want %v:\n%s", ahead, dir == "down", stderr)
			}

			// -W sends it whole.
			os.WriteFile(dst, old, 0o644)
			stdout, stderr, err = sync("-a", "-W", "--stats", from, to)
			if got, _ := os.ReadFile(dst); err != nil || !bytes.Equal(got, next) {
				t.Fatalf("sync -W: %v\n%s", err, stderr)
			}
			if sent := literalData(t, stdout); sent != int64(len(next)) {
				t.Errorf("-W sent %d literal bytes, not the file's %d", sent, len(next))
			}

			// -z: the same delta, compressed through the helper.
			os.WriteFile(dst, old, 0o644)
			stdout, stderr, err = sync("-a", "-z", "--stats", "-vv", from, to)
			if got, _ := os.ReadFile(dst); err != nil || !bytes.Equal(got, next) {
				t.Fatalf("sync -z: %v\n%s", err, stderr)
			}
			if sent := literalData(t, stdout); sent > 4*changed || !strings.Contains(stderr, "delta: ") {
				t.Errorf("sync -z sent %d literal bytes for %d changed, or no delta:\n%s", sent, changed, stderr)
			}

			// --inplace rewrites the same file, sending as little; with
			// --partial (-P) too, and with -z.
			for _, flags := range [][]string{{"--inplace"}, {"--inplace", "-P"}, {"--inplace", "-z"}} {
				os.WriteFile(dst, old, 0o644)
				before, _ := os.Stat(dst)
				stdout, stderr, err = sync(append([]string{"-a", "--stats", "-vv"}, append(flags, from, to)...)...)
				if got, _ := os.ReadFile(dst); err != nil || !bytes.Equal(got, next) {
					t.Fatalf("sync %v: %v\n%s", flags, err, stderr)
				}
				after, _ := os.Stat(dst)
				if !os.SameFile(before, after) {
					t.Errorf("sync %v replaced the target rather than rewriting it", flags)
				}
				if after.Mode().Perm() != 0o640 || !after.ModTime().Equal(mtime) {
					t.Errorf("sync %v: the target's mode %v, time %v; want the source's", flags, after.Mode().Perm(), after.ModTime())
				}
				if sent := literalData(t, stdout); sent > 4*changed {
					t.Errorf("sync %v sent %d literal bytes for %d changed", flags, sent, changed)
				}
				if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 1 {
					t.Errorf("sync %v: the target's directory holds %d entries", flags, len(ents))
				}
			}

			// A file that goes whole (-W, or with no helper there) is
			// written over its target too under --inplace, as rsync's
			// is: a longer old target is cut to the new size, a shorter
			// one grows, and a hard link to it sees the new bytes. The
			// same for a small file, which otherwise goes up in one
			// batch under a temporary name.
			small := []byte("a small file, new")
			smallOld := []byte("a small file, the old one, longer than the new")
			smallSrc, smallDst := filepath.Join(t.TempDir(), "s"), filepath.Join(t.TempDir(), "s")
			smallFrom, smallTo := smallSrc, "e2e:"+smallDst
			if dir == "down" {
				smallFrom, smallTo = "e2e:"+smallSrc, smallDst
			}
			os.WriteFile(smallSrc, small, 0o640)
			os.Chtimes(smallSrc, mtime, mtime)
			for _, c := range []struct {
				from, to, dst string
				old, new      []byte
			}{
				{from, to, dst, append(bytes.Clone(old), make([]byte, 1<<20)...), next},
				{from, to, dst, old[:1<<20], next},
				{smallFrom, smallTo, smallDst, smallOld, small},
			} {
				for _, flags := range [][]string{{"--inplace", "-W"}, {"--inplace", "--helper=never"}} {
					link := filepath.Join(t.TempDir(), "link")
					os.WriteFile(c.dst, c.old, 0o644)
					os.Link(c.dst, link)
					before, _ := os.Stat(c.dst)
					stdout, stderr, err := sync(append([]string{"-a", "--stats", "-vv"}, append(flags, c.from, c.to)...)...)
					if got, _ := os.ReadFile(c.dst); err != nil || !bytes.Equal(got, c.new) {
						t.Fatalf("sync %v of %d bytes over %d: %v (%d bytes there)\n%s", flags, len(c.new), len(c.old), err, len(got), stderr)
					}
					after, _ := os.Stat(c.dst)
					if !os.SameFile(before, after) {
						t.Errorf("sync %v of %d bytes over %d replaced the target rather than rewriting it", flags, len(c.new), len(c.old))
					}
					if got, _ := os.ReadFile(link); !bytes.Equal(got, c.new) {
						t.Errorf("sync %v: a hard link to the target holds %d bytes, not the new file", flags, len(got))
					}
					if after.Mode().Perm() != 0o640 || !after.ModTime().Equal(mtime) {
						t.Errorf("sync %v: the target's mode %v, time %v; want the source's", flags, after.Mode().Perm(), after.ModTime())
					}
					if sent := literalData(t, stdout); sent != int64(len(c.new)) {
						t.Errorf("sync %v sent %d literal bytes, not the file's %d", flags, sent, len(c.new))
					}
					if ents, _ := os.ReadDir(filepath.Dir(c.dst)); len(ents) != 1 {
						t.Errorf("sync %v: the target's directory holds %d entries", flags, len(ents))
					}
				}
			}

			// A link at the target is replaced, as without --inplace,
			// not written through: the file it names stays as it was.
			outside := filepath.Join(t.TempDir(), "outside")
			for _, run := range []func() (string, string, error){
				func() (string, string, error) { return sync("-a", "--inplace", "-W", smallFrom, smallTo) },
				func() (string, string, error) {
					// scp's syntax, which follows a link at a target
					// it checks.
					return runSSHArgs(ctx, "hpncp", []string{"-F", srv.ConfigFile, "--inplace", smallFrom, smallTo}, nil)
				},
			} {
				os.WriteFile(outside, smallOld, 0o644)
				os.Remove(smallDst)
				if err := os.Symlink(outside, smallDst); err != nil {
					t.Fatal(err)
				}
				if _, stderr, err := run(); err != nil {
					t.Fatalf("--inplace over a link: %v\n%s", err, stderr)
				}
				if got, _ := os.ReadFile(outside); !bytes.Equal(got, smallOld) {
					t.Errorf("--inplace wrote through a link at the target: the file it names holds %q", got)
				}
				if fi, err := os.Lstat(smallDst); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("--inplace over a link: the target is not a regular file (%v)", err)
				} else if got, _ := os.ReadFile(smallDst); !bytes.Equal(got, small) {
					t.Errorf("--inplace over a link: the target holds %q", got)
				}
			}
		})
	}

	// scp's syntax with --delta: the same, down; -v names the delta.
	t.Run("copy --delta", func(t *testing.T) {
		local, remote := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(local, "f"), old, 0o644)
		os.WriteFile(filepath.Join(remote, "f"), next, 0o600)
		full := []string{"-F", srv.ConfigFile, "--delta", "--helper-path", bin, "-p", "-v",
			"e2e:" + filepath.Join(remote, "f"), filepath.Join(local, "f")}
		_, stderr, err := runSSHArgs(ctx, "hpncp", full, nil)
		if got, _ := os.ReadFile(filepath.Join(local, "f")); err != nil || !bytes.Equal(got, next) {
			t.Fatalf("hpncp --delta: %v\n%s", err, stderr)
		}
		m := regexp.MustCompile(`delta: \S+: (\d+) bytes sent`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("-v does not say the file went as a delta:\n%s", stderr)
		}
		if n, _ := strconv.Atoi(m[1]); n > 4*changed {
			t.Errorf("sent %d bytes for %d changed", n, changed)
		}
		if fi, _ := os.Stat(filepath.Join(local, "f")); fi.Mode().Perm() != 0o600 {
			t.Errorf("-p: the target's mode is %v", fi.Mode().Perm())
		}
	})

	t.Run("no helper", func(t *testing.T) {
		local, remote := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(remote, "f"), old, 0o644)
		os.WriteFile(filepath.Join(local, "f"), next, 0o644)
		full := []string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", "/nonexistent/hpncp", "-a", "-vv", "--stats",
			filepath.Join(local, "f"), "e2e:" + filepath.Join(remote, "f")}
		stdout, stderr, err := runSSHArgs(ctx, "hpncp", full, nil)
		if got, _ := os.ReadFile(filepath.Join(remote, "f")); err != nil || !bytes.Equal(got, next) {
			t.Fatalf("sync without a helper: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr, "goes whole") || literalData(t, stdout) != int64(len(next)) {
			t.Errorf("without a helper: -vv does not say the file goes whole, or not all of it went:\n%s%s", stdout, stderr)
		}
	})
}

// TestSyncChecksumHelperE2E: hpncp sync -c with a helper at the far end
// (a real sshd) has the helper hash the remote files, in one request,
// and sends exactly the files whose content differs, up and down.
func TestSyncChecksumHelperE2E(t *testing.T) {
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wrapper, runs := loggedHelper(t, bin)
	stamp := time.Date(2021, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, dir := range []string{"up", "down"} {
		t.Run(dir, func(t *testing.T) {
			os.Remove(runs)
			src, dst := t.TempDir(), t.TempDir()
			for i := range 30 {
				name := "f" + strconv.Itoa(i)
				data := bytes.Repeat([]byte(name), 1000+i)
				os.WriteFile(filepath.Join(src, name), data, 0o644)
				if i%3 == 0 {
					data = bytes.Clone(data)
					data[7] ^= 1 // same size, other content: only -c sees it
				}
				os.WriteFile(filepath.Join(dst, name), data, 0o644)
				os.Chtimes(filepath.Join(src, name), stamp, stamp)
				os.Chtimes(filepath.Join(dst, name), stamp, stamp)
			}
			from, to := src+"/", "e2e:"+dst+"/"
			if dir == "down" {
				from, to = "e2e:"+src+"/", dst+"/"
			}
			full := []string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", wrapper, "-a", "-c", "-i", "-vv", from, to}
			stdout, stderr, err := runSSHArgs(ctx, "hpncp", full, nil)
			if err != nil {
				t.Fatalf("sync -c: %v\n%s%s", err, stdout, stderr)
			}
			var sent []string
			for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
				if (strings.HasPrefix(l, ">f") || strings.HasPrefix(l, "<f")) && !strings.Contains(l, "hpncp:") {
					sent = append(sent, l[strings.LastIndex(l, " ")+1:])
				}
			}
			want := []string{}
			for i := 0; i < 30; i += 3 {
				want = append(want, "f"+strconv.Itoa(i))
			}
			slices.Sort(sent)
			slices.Sort(want)
			if !slices.Equal(sent, want) {
				t.Errorf("sync -c sent %v, want %v\n%s", sent, want, stdout)
			}
			for i := range 30 {
				name := "f" + strconv.Itoa(i)
				a, _ := os.ReadFile(filepath.Join(src, name))
				b, _ := os.ReadFile(filepath.Join(dst, name))
				if !bytes.Equal(a, b) {
					t.Errorf("%s differs after sync -c", name)
				}
			}
			if log, _ := os.ReadFile(runs); !strings.Contains(string(log), "--delta") || !strings.Contains(stderr, "checksums: 30 files hashed by the helper") {
				t.Errorf("the helper did not hash the files (it ran %q):\n%s", log, stderr)
			}
		})
	}
}

// TestVerifyHelperE2E: hpncp --verify with a helper at the far end (a
// real sshd) has the helper take the remote file's SHA-256, up and down,
// and reports the file's own hash.
func TestVerifyHelperE2E(t *testing.T) {
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wrapper, runs := loggedHelper(t, bin)
	// Large enough for the parallel streams, whose written file is
	// hashed behind them.
	data := make([]byte, 12<<20+17)
	rand.New(rand.NewSource(38)).Read(data)
	want := fmt.Sprintf("%x", sha256.Sum256(data))
	for _, dir := range []string{"up", "down"} {
		t.Run(dir, func(t *testing.T) {
			os.Remove(runs)
			src, dst := filepath.Join(t.TempDir(), "f"), filepath.Join(t.TempDir(), "f")
			os.WriteFile(src, data, 0o644)
			from, to := src, "e2e:"+dst
			if dir == "down" {
				from, to = "e2e:"+src, dst
			}
			stdout, stderr, err := runSSHArgs(ctx, "hpncp", []string{"-F", srv.ConfigFile, "--verify", "--json", "--helper-path", wrapper, "-v", from, to}, nil)
			if err != nil {
				t.Fatalf("--verify: %v\n%s", err, stderr)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
				t.Fatal("the copy differs")
			}
			if !strings.Contains(stdout, want) {
				t.Errorf("the report does not give the file's SHA-256 %s:\n%s", want, stdout)
			}
			if log, _ := os.ReadFile(runs); !strings.Contains(string(log), "--delta") || strings.Contains(stderr, "sha256sum") {
				t.Errorf("the helper did not take the hash (it ran %q):\n%s", log, stderr)
			}
			// The written file is hashed behind the streams: by the
			// helper up, here down.
			if !strings.Contains(stderr, "taken behind the copy") || strings.Contains(stderr, "hashing it again") {
				t.Errorf("the written file was not hashed behind the copy:\n%s", stderr)
			}
		})
	}
}

// TestSyncWalkAheadE2E: the remote tree a sync lists is walked by the
// helper started beside the SFTP start (ends.Hosts.WalkAhead), and the
// lister takes that answer: one helper runs, the plan is rsync's (the
// changed file, nothing else), up and down, dry run or not. With filter
// rules the walk asked ahead leaves out what they exclude, and is still
// the one the lister takes: a source named without its trailing slash
// too, whose names start with its own.
func TestSyncWalkAheadE2E(t *testing.T) {
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wrapper, runs := loggedHelper(t, bin)
	stamp := time.Date(2021, 1, 2, 3, 4, 5, 0, time.UTC)
	type variant struct {
		dry, exclude, noSlash bool
	}
	for _, dir := range []string{"up", "down"} {
		for _, v := range []variant{{dry: true}, {}, {dry: true, exclude: true}, {exclude: true, noSlash: dir == "down"}} {
			dry := v.dry
			t.Run(fmt.Sprintf("%s/%+v", dir, v), func(t *testing.T) {
				os.Remove(runs)
				src, dst := t.TempDir(), t.TempDir()
				target := dst
				if v.noSlash {
					// dst/<src's name> is the target.
					target = filepath.Join(dst, filepath.Base(src))
				}
				for _, root := range []string{src, target} {
					for d := range 5 {
						sub := filepath.Join(root, "d"+strconv.Itoa(d), "e")
						os.MkdirAll(sub, 0o755)
						os.WriteFile(filepath.Join(sub, "f"), []byte("same"), 0o644)
						os.Chtimes(filepath.Join(sub, "f"), stamp, stamp)
					}
				}
				os.WriteFile(filepath.Join(src, "d3", "e", "f"), []byte("newer"), 0o644)
				os.WriteFile(filepath.Join(src, "d2", "e", "f"), []byte("newer, excluded"), 0o644)
				from, to := src+"/", "e2e:"+dst+"/"
				walked, prefix := map[string]string{"up": dst, "down": src}[dir]+"/", ""
				if dir == "down" {
					from, to = "e2e:"+src+"/", dst+"/"
				}
				if v.noSlash {
					from, walked, prefix = strings.TrimSuffix(from, "/"), src, filepath.Base(src)+"/"
				}
				args := []string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", wrapper, "-a", "-i", "-vv", from, to}
				if dry {
					args = append(args, "-n")
				}
				listed := "by its helper: 15 entries in 11 directories\n"
				if v.exclude {
					// Anchored at the transfer's root, whose first name
					// is the source's own without the slash.
					args = append(args, "--exclude=/"+prefix+"d2/")
					listed = "by its helper: 12 entries in 9 directories, what the filter rules exclude left out there\n"
				}
				stdout, stderr, err := runSSHArgs(ctx, "hpncp", args, nil)
				if err != nil {
					t.Fatalf("sync: %v\n%s%s", err, stdout, stderr)
				}
				if !strings.Contains(stderr, listed) ||
					!strings.Contains(stderr, "the helper walked "+walked+" as the SFTP start went on") {
					t.Errorf("the remote tree was not walked ahead by the helper (%q):\n%s", listed, stderr)
				}
				var items []string
				for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
					if strings.HasPrefix(l, ">f") || strings.HasPrefix(l, "<f") {
						items = append(items, l)
					}
				}
				slices.SortFunc(items, func(a, b string) int { return strings.Compare(a[12:], b[12:]) })
				want := []string{"d3/e/f"}
				if !v.exclude {
					want = []string{"d2/e/f", "d3/e/f"}
				}
				if len(items) != len(want) {
					t.Errorf("sync itemized %q, want %q\n%s", items, want, stdout)
				}
				for i := range min(len(items), len(want)) {
					if !strings.HasSuffix(items[i], " "+prefix+want[i]) {
						t.Errorf("sync itemized %q, want %q\n%s", items, want, stdout)
					}
				}
				if log, _ := os.ReadFile(runs); strings.Count(string(log), "--delta") != 1 {
					t.Errorf("the helper ran %d times, want once:\n%s", strings.Count(string(log), "--delta"), log)
				}
				if got, _ := os.ReadFile(filepath.Join(target, "d2", "e", "f")); v.exclude && string(got) != "same" {
					t.Errorf("the excluded d2/e/f holds %q", got)
				}
				got, _ := os.ReadFile(filepath.Join(target, "d3", "e", "f"))
				if want := map[bool]string{true: "same", false: "newer"}[dry]; string(got) != want {
					t.Errorf("the target holds %q, want %q", got, want)
				}
			})
		}
	}
}

// TestSyncAppendE2E: --append (and --append-verify, the same in hpncp)
// sends the rest of a file whose target is shorter, in place, about the
// new bytes only; leaves alone, attributes too, a changed file whose
// target is not shorter, as rsync does; and, unlike rsync's --append,
// never trusts the old bytes: a target whose start differs ends up the
// source's.
func TestSyncAppendE2E(t *testing.T) {
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(38))
	log := make([]byte, 3<<20)
	rng.Read(log)
	stamp := time.Date(2022, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, dir := range []string{"up", "down"} {
		for _, flag := range []string{"--append", "--append-verify"} {
			t.Run(dir+flag, func(t *testing.T) {
				local, remote := t.TempDir(), t.TempDir()
				src, dst := local, remote
				from, to := local+"/", "e2e:"+remote+"/"
				if dir == "down" {
					src, dst = remote, local
					from, to = "e2e:"+remote+"/", local+"/"
				}
				write := func(root, name string, data []byte, mode fs.FileMode) {
					p := filepath.Join(root, name)
					os.WriteFile(p, data, mode)
					os.Chmod(p, mode)
				}
				write(src, "grown", log, 0o644)
				write(dst, "grown", log[:2<<20], 0o644)
				write(src, "longer", log[:1000], 0o644)
				write(dst, "longer", log[:2000], 0o600)
				other := bytes.Clone(log[:2<<20])
				other[100] ^= 1
				write(src, "changed", log, 0o644)
				write(dst, "changed", other, 0o644)
				for _, n := range []string{"grown", "longer", "changed"} {
					os.Chtimes(filepath.Join(src, n), stamp, stamp)
				}
				stdout, stderr, err := runSSHArgs(ctx, "hpncp", []string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", bin,
					"-a", "-i", "--stats", flag, from, to}, nil)
				if err != nil {
					t.Fatalf("sync %s: %v\n%s%s", flag, err, stdout, stderr)
				}
				for _, n := range []string{"grown", "changed"} {
					if got, _ := os.ReadFile(filepath.Join(dst, n)); !bytes.Equal(got, log) {
						t.Errorf("%s: %d bytes, not the source's", n, len(got))
					}
				}
				if got, _ := os.ReadFile(filepath.Join(dst, "longer")); !bytes.Equal(got, log[:2000]) {
					t.Errorf("longer: its target was changed")
				}
				if fi, _ := os.Stat(filepath.Join(dst, "longer")); fi.Mode().Perm() != 0o600 {
					t.Errorf("longer: mode %v, want its own 0600 left alone", fi.Mode().Perm())
				}
				if !strings.Contains(stdout, ">f.st...... grown") && !strings.Contains(stdout, "<f.st...... grown") ||
					strings.Contains(stdout, " longer") {
					t.Errorf("itemized:\n%s", stdout)
				}
				// grown's rest and a block around changed's one byte.
				if sent := literalData(t, stdout); sent > 2*(1<<20)+64<<10 {
					t.Errorf("sent %d literal bytes for 2 MiB of new data", sent)
				}
			})
		}
	}
}

// TestSyncDeltaOverCloneE2E: where the target's file system shares
// blocks (XFS, Btrfs: set HPNCP_CLONE_DIR to a directory on one; the
// test is skipped otherwise), a delta without --inplace is rebuilt over a
// clone of the target, up and down: the new file is the source's, the
// blocks that did not change are still shared with the old file (a hard
// link keeps it), and the old file is left as it was.
func TestSyncDeltaOverCloneE2E(t *testing.T) {
	dir := os.Getenv("HPNCP_CLONE_DIR")
	if dir == "" {
		t.Skip("HPNCP_CLONE_DIR names no directory on a file system that clones files")
	}
	filefrag := sshdtest.LookTool(t, "filefrag")
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(39))
	old := make([]byte, 16<<20+777)
	rng.Read(old)
	next := bytes.Clone(old)
	scatter(rng, next, 20, 3000)
	// An insertion: what follows moves, and is copied from the old file.
	next = append(append(bytes.Clone(next[:9<<20]), "inserted"...), next[9<<20:15<<20]...)
	for _, d := range []string{"up", "down"} {
		t.Run(d, func(t *testing.T) {
			local, err := os.MkdirTemp(dir, "local")
			if err != nil {
				t.Fatal(err)
			}
			remote, _ := os.MkdirTemp(dir, "remote")
			t.Cleanup(func() { os.RemoveAll(local); os.RemoveAll(remote) })
			src, dst := filepath.Join(local, "f"), filepath.Join(remote, "f")
			from, to := src, "e2e:"+dst
			if d == "down" {
				src, dst = dst, src
				from, to = "e2e:"+src, dst
			}
			os.WriteFile(dst, old, 0o644)
			kept := dst + ".old"
			if err := os.Link(dst, kept); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(src, next, 0o640)
			stdout, stderr, err := runSSHArgs(ctx, "hpncp", []string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", bin, "-a", "--stats", "-vv", from, to}, nil)
			if err != nil {
				t.Fatalf("sync: %v\n%s%s", err, stdout, stderr)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, next) {
				t.Fatalf("the target is %d bytes and not the source's %d", len(got), len(next))
			}
			if got, _ := os.ReadFile(kept); !bytes.Equal(got, old) {
				t.Fatalf("the old file changed")
			}
			if sent := literalData(t, stdout); sent > 20*3000*4 {
				t.Errorf("sent %d literal bytes", sent)
			}
			if d == "down" && !strings.Contains(stderr, "rebuilt over a clone of the target") {
				t.Errorf("-vv does not say the file was rebuilt over a clone:\n%s", stderr)
			}
			out, err := exec.Command(filefrag, "-v", dst).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "shared") {
				t.Errorf("the new file shares no blocks with the old (%v):\n%s", err, out)
			}
		})
	}
}

// A file of several ranges goes as a delta in shares, each on a channel
// of its own. Down: the one-file sync asks them all ahead, a tree's sync
// as it comes to the file; in place too. Up: the push's own channel
// carries the first, the others go into the file it made (not in
// place). The file is rebuilt, with its mode and time, nothing is left
// beside it, and what was sent is about what changed: a region of
// several ranges, spread over the shares.
func TestSyncDeltaSharesE2E(t *testing.T) {
	srv, bin, _ := helperServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(41))
	old := make([]byte, 2*32<<20+12345)
	rng.Read(old)
	next := bytes.Clone(old)
	rng.Read(next[30<<20 : 36<<20])
	scatter(rng, next, 10, 3000)
	const changed = 6<<20 + 10*3000
	mtime := time.Date(2020, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, c := range []struct {
		name   string
		args   []string
		up     bool
		tree   bool
		shares bool
		ahead  bool
		into   bool // into the target's directory
	}{
		{"down/one file", nil, false, false, true, true, false},
		{"down/a tree", nil, false, true, true, false, false},
		{"down/in place", []string{"--inplace"}, false, false, true, true, false},
		{"up/one file", nil, true, false, true, true, false},
		{"up/one file into its directory", nil, true, false, true, true, true},
		{"up/a tree", nil, true, true, true, false, false},
		{"up/in place", []string{"--inplace"}, true, false, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			src, dst := filepath.Join(srcDir, "f"), filepath.Join(dstDir, "f")
			os.WriteFile(src, next, 0o640)
			os.Chtimes(src, mtime, mtime)
			os.WriteFile(dst, old, 0o644)
			from, to := src, dst
			if c.tree {
				from, to = srcDir+"/", dstDir
			}
			if c.into {
				to = dstDir + "/"
			}
			if c.up {
				to = "e2e:" + to
			} else {
				from = "e2e:" + from
			}
			args := append([]string{"sync", "-e", "ssh -F " + srv.ConfigFile, "--helper-path", bin, "-a", "--stats", "-vv"}, c.args...)
			stdout, stderr, err := runSSHArgs(ctx, "hpncp", append(args, from, to), nil)
			if err != nil {
				t.Fatalf("sync: %v\n%s%s", err, stdout, stderr)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, next) {
				t.Fatalf("the target is %d bytes and not the source's %d", len(got), len(next))
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
				t.Errorf("the target's mode %v, time %v; want the source's", fi.Mode().Perm(), fi.ModTime())
			}
			if sent := literalData(t, stdout); sent < changed || sent > changed+(4<<20) {
				t.Errorf("sent %d literal bytes for %d changed", sent, changed)
			}
			if shared := strings.Contains(stderr, " shares, on a channel each"); shared != c.shares {
				t.Errorf("in shares %v, want %v:\n%s", shared, c.shares, stderr)
			}
			// A pull's delta, or a push's basis signed, asked for as the
			// helper came up.
			ahead := strings.Contains(stderr, "was asked for ahead") || strings.Contains(stderr, "came ahead, in")
			if ahead != c.ahead {
				t.Errorf("asked ahead %v, want %v:\n%s", ahead, c.ahead, stderr)
			}
			local := dstDir
			if ents, _ := os.ReadDir(local); len(ents) != 1 {
				t.Errorf("the target's directory holds %d entries", len(ents))
			}
		})
	}
}
