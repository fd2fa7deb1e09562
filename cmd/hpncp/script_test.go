package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/internal/testenv"
	"github.com/hpncp/hpncp/report"
)

func TestMain(m *testing.M) {
	// The tests wait on child processes, servers, bandwidth limits and
	// stalls far more than they compute. Only the test binary's own run
	// parses the test flags, not a script's hpncp.
	if filepath.Base(os.Args[0]) != "hpncp" {
		testenv.ParallelUnlessSet(4)
	}
	testscript.Main(m, map[string]func(){
		"hpncp": func() { os.Exit(mainExit()) },
	})
}

// TestScript runs every script in testdata/script twice: as
// TestScript/inproc/NAME against in-process servers (internal/sshtest) and
// as TestScript/sshd/NAME against a real OpenSSH sshd on 127.0.0.1
// (internal/sshdtest, in e2e_test.go). A script reads the same on both:
//
//   - $SSHCONFIG names the server as host "testhost", reached with
//     $IDENTITY on port $SSHPORT, its key in $KNOWNHOSTS; OpenSSH's scp,
//     sftp and rsync read the same file;
//   - $TARCONFIG names, as "testhost", a server that runs commands with the
//     shell, as sshd does (tar mode, scp -O, hpncp ssh);
//   - $NOSFTPCONFIG names, as "testhost", one without an SFTP subsystem that
//     runs commands (the legacy scp protocol);
//   - [inproc] and [sshd] hold for the server the script runs against;
//     [root] when the test runs as root (tmpfs mounts).
//
// What only one server has: on inproc, $REMOTEHOME (the SFTP server's
// start directory, a temporary one) and $PWCONFIG (a server that also
// takes a password), and $SSHCONFIG's server runs no commands; on sshd,
// host "unprivileged" in $SSHCONFIG logs in as nobody, whose shell runs no
// commands, for real permission errors.
//
// Under go test -short only inproc runs; without sshd the sshd half is
// skipped, or fails when HPNCP_E2E=require, as CI sets.
func TestScript(t *testing.T) {
	t.Parallel()
	t.Run("inproc", func(t *testing.T) {
		t.Parallel()
		runScripts(t, "inproc", inprocScriptEnv(t), nil)
	})
	t.Run("sshd", func(t *testing.T) {
		t.Parallel()
		vars, setup := sshdScriptEnv(t)
		runScripts(t, "sshd", vars, setup)
	})
}

// runScripts runs testdata/script with vars set in every script's
// environment; server is the condition that holds ("inproc" or "sshd");
// setup, if set, prepares each script's work directory.
func runScripts(t *testing.T, server string, vars map[string]string, setup func(*testscript.Env) error) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			for k, v := range vars {
				env.Setenv(k, v)
			}
			// ASLIMIT is the address-space bound of copies that must not
			// hold a large file in memory (prlimit --as=$ASLIMIT): the
			// race detector reserves far more address space than any
			// bound a run without it should keep, so under -race there is
			// none (its RSS bounds are allowed for elsewhere).
			env.Setenv("ASLIMIT", "3221225472")
			// BIGSPARSE is the size of sparse.txtar's file, whose holes
			// it keeps, and BIGDATA the offset of its second data block.
			// Its size is what would break ASLIMIT if a copy held it;
			// without that bound, under -race, a quarter shows the same
			// and costs a quarter.
			env.Setenv("BIGSPARSE", "1GiB")
			env.Setenv("BIGDATA", "512MiB")
			if raceDetector {
				env.Setenv("ASLIMIT", "unlimited")
				env.Setenv("BIGSPARSE", "256MiB")
				env.Setenv("BIGDATA", "128MiB")
			}
			if setup != nil {
				return setup(env)
			}
			return nil
		},
		Cmds:                scriptCmds,
		Condition:           scriptCondition(server),
		RequireExplicitExec: true,
	})
}

// inprocScriptEnv starts the in-process servers the scripts use and
// returns their variables.
func inprocScriptEnv(t *testing.T) map[string]string {
	srv := sshtest.Start(t, sshtest.Options{})
	pwsrv := sshtest.Start(t, sshtest.Options{Password: "s3cret pass"})
	// A server without SFTP that runs commands with the shell: the real
	// scp -t and scp -f serve the legacy protocol.
	nosftp := sshtest.Start(t, sshtest.Options{NoSFTP: true, Exec: sshtest.ShellExec(t.TempDir())})
	tarsrv := sshtest.Start(t, sshtest.Options{Exec: sshtest.ShellExec(t.TempDir())})
	return map[string]string{
		"SSHCONFIG":    srv.ConfigFile,
		"KNOWNHOSTS":   srv.KnownHostsFile,
		"SSHPORT":      strconv.Itoa(srv.Port),
		"IDENTITY":     srv.ClientKeyFile,
		"REMOTEHOME":   srv.Root,
		"PWCONFIG":     pwsrv.ConfigFile,
		"NOSFTPCONFIG": nosftp.ConfigFile,
		"TARCONFIG":    tarsrv.ConfigFile,
	}
}

// scriptCondition answers [inproc] and [sshd] for the server the scripts
// run against, and [root]: the test runs as root (tmpfs mounts).
func scriptCondition(server string) func(cond string) (bool, error) {
	return func(cond string) (bool, error) {
		switch cond {
		case "root":
			return os.Geteuid() == 0, nil
		case "inproc", "sshd":
			return cond == server, nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}
}

// scriptCmds are the commands scripts get beyond testscript's own.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"mkfile":      cmdMkfile,
	"mktree":      cmdMktree,
	"treeeq":      cmdTreeeq,
	"status":      cmdStatus,
	"waitfile":    cmdWaitfile,
	"waitjournal": cmdWaitjournal,
	"waitcount":   cmdWaitcount,
	"tmpfs":       cmdTmpfs,
	"mtime":       cmdMtime,
	"noglob":      cmdNoglob,
	"jsoncmp":     cmdJSONCmp,
	"jsonreport":  cmdJSONReport,
	"mkmany":      cmdMkmany,
	"perm":        cmdPerm,
	"mksparse":    cmdMksparse,
	"bigcmp":      cmdBigcmp,
	"disk":        cmdDisk,
	"tracecheck":  cmdTracecheck,
	"svgcount":    cmdSvgcount,
}

// perm GLOB MODE checks the permission bits (octal) of every file
// matching GLOB; at least one must match.
func cmdPerm(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: perm glob mode")
	}
	want, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	matches, err := filepath.Glob(ts.MkAbs(args[0]))
	ts.Check(err)
	if len(matches) == 0 {
		ts.Fatalf("no file matches %s", args[0])
	}
	for _, m := range matches {
		fi, err := os.Stat(m)
		ts.Check(err)
		if got := fi.Mode().Perm(); got != fs.FileMode(want) {
			ts.Fatalf("%s: mode %04o, want %04o", m, got, want)
		}
	}
}

// noglob PATTERN fails if any file matches PATTERN: no temporary file may
// survive a failed copy.
func cmdNoglob(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: noglob pattern")
	}
	matches, err := filepath.Glob(ts.MkAbs(args[0]))
	ts.Check(err)
	if len(matches) > 0 {
		ts.Fatalf("files left behind: %q", matches)
	}
}

// mkfile PATH SIZE writes SIZE bytes of deterministic noise to PATH.
func cmdMkfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkfile path size")
	}
	size, err := parseSize(args[1])
	ts.Check(err)
	ts.Check(writeNoise(ts.MkAbs(args[0]), size))
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

func writeNoise(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewSource(size))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		r.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}

// mktree DIR builds the tree the acceptance criteria name: sizes around
// SFTP's 32 KiB packets, awkward names and an empty directory.
func cmdMktree(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mktree dir")
	}
	ts.Check(makeTree(ts.MkAbs(args[0])))
}

func makeTree(root string) error {
	files := map[string]int64{
		"zero":                0,
		"one":                 1,
		"k32-1":               32767,
		"k32":                 32768,
		"k32+1":               32769,
		"name with spaces":    10,
		"ünïcödé-名前.txt":      20,
		"-leading-dash":       30,
		"sub/deeper/file.bin": 100000,
		"sub/x":               5,
	}
	for name, size := range files {
		if err := writeNoise(filepath.Join(root, name), size); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(root, "sub/x"), 0o751); err != nil {
		return err
	}
	return os.Chtimes(filepath.Join(root, "one"), time.Unix(1e9, 0), time.Unix(1e9, 0))
}

// treeeq [-modes] [-times] A B compares two trees: names, types and
// contents always; permission bits and modification times on request.
func cmdTreeeq(ts *testscript.TestScript, neg bool, args []string) {
	modes, times := false, false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-modes":
			modes = true
		case "-times":
			times = true
		default:
			ts.Fatalf("treeeq: unknown flag %s", args[0])
		}
		args = args[1:]
	}
	if len(args) != 2 {
		ts.Fatalf("usage: treeeq [-modes] [-times] dirA dirB")
	}
	a, err := describeTree(ts.MkAbs(args[0]), modes, times)
	ts.Check(err)
	b, err := describeTree(ts.MkAbs(args[1]), modes, times)
	ts.Check(err)
	diff := diffLines(a, b)
	switch {
	case neg && diff == "":
		ts.Fatalf("trees %s and %s are equal", args[0], args[1])
	case !neg && diff != "":
		ts.Fatalf("trees %s and %s differ:\n%s", args[0], args[1], diff)
	}
}

func describeTree(root string, modes, times bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := rel
		switch {
		case d.IsDir():
			line += "/"
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(b), sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		default:
			line += " " + fi.Mode().Type().String()
		}
		link := fi.Mode()&fs.ModeSymlink != 0
		if modes && !link {
			line += fmt.Sprintf(" %04o", fi.Mode().Perm())
		}
		// A link's own times: SFTP cannot set them.
		if times && rel != "." && !link {
			line += " " + fi.ModTime().UTC().Format(time.RFC3339)
		}
		out = append(out, line)
		return nil
	})
	sort.Strings(out)
	return out, err
}

func diffLines(a, b []string) string {
	inA := map[string]bool{}
	for _, l := range a {
		inA[l] = true
	}
	inB := map[string]bool{}
	for _, l := range b {
		inB[l] = true
	}
	var d strings.Builder
	for _, l := range a {
		if !inB[l] {
			fmt.Fprintf(&d, "- %s\n", l)
		}
	}
	for _, l := range b {
		if !inA[l] {
			fmt.Fprintf(&d, "+ %s\n", l)
		}
	}
	return d.String()
}

// status CODE CMD ARGS... runs CMD and checks its exit status; its output
// is then available to stdout and stderr like exec's.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status code command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// waitfile GLOB SIZE waits (waitUntil) for a file matching GLOB with at
// least SIZE bytes.
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfile glob size")
	}
	size, err := parseSize(args[1])
	ts.Check(err)
	waitUntil(ts, func() bool {
		matches, _ := filepath.Glob(ts.MkAbs(args[0]))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Size() >= size {
				return true
			}
		}
		return false
	}, "no file matching %s reached %d bytes", args[0], size)
}

// waitcount GLOB N waits for N files or more to match GLOB: the files a
// cut copy must have finished before its cut.
func cmdWaitcount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitcount glob n")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	waitUntil(ts, func() bool {
		matches, _ := filepath.Glob(ts.MkAbs(args[0]))
		return len(matches) >= n
	}, "fewer than %d files match %s", n, args[0])
}

// waitUntil polls ok and fails the script with the message if it does not
// hold within a minute: a guard against a script that would wait forever,
// long enough that a loaded machine never reaches it.
func waitUntil(ts *testscript.TestScript, ok func() bool, format string, args ...any) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf(format, args...)
}

// waitjournal DIR SIZE waits until a resume journal entry in DIR says
// SIZE bytes or more are written. A test that cuts a copy and asserts what
// the re-run continues from waits for this rather than for the temporary
// file's length: the entry is saved every journalBytes or second and lags
// the file, by more than a second's bytes on a loaded machine.
func cmdWaitjournal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitjournal dir size")
	}
	size, err := parseSize(args[1])
	ts.Check(err)
	waitUntil(ts, func() bool {
		matches, _ := filepath.Glob(filepath.Join(ts.MkAbs(args[0]), "*.json"))
		for _, m := range matches {
			var e struct {
				Watermark int64 `json:"watermark"`
			}
			if b, err := os.ReadFile(m); err == nil && json.Unmarshal(b, &e) == nil && e.Watermark >= size {
				return true
			}
		}
		return false
	}, "no journal entry in %s reached a watermark of %d bytes", args[0], size)
}

// tmpfs DIR SIZE mounts a tmpfs of SIZE bytes on DIR for the rest of the
// script (root only), to test a full disk.
func cmdTmpfs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: tmpfs dir size")
	}
	if os.Geteuid() != 0 {
		ts.Fatalf("tmpfs needs root; guard the script with [root]")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+args[1]))
	ts.Defer(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// mtime PATH UNIXSECONDS sets a file's access and modification times.
func cmdMtime(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mtime path unixseconds")
	}
	sec, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	ts.Check(os.Chtimes(ts.MkAbs(args[0]), time.Unix(sec, 0), time.Unix(sec, 0)))
}

// jsonreport FILE checks that FILE is a --json report as docs/report.md documents
// it (report.Parse: strict fields, statuses, totals that add up).
func cmdJSONReport(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: jsonreport file")
	}
	_, err := report.Parse([]byte(ts.ReadFile(args[0])))
	switch {
	case neg && err == nil:
		ts.Fatalf("%s is a valid report", args[0])
	case !neg && err != nil:
		ts.Fatalf("%s: %v", args[0], err)
	}
}

// jsoncmp FILE FIELD OP VALUE compares a number in a JSON document, named
// by a dotted path (totals.bytes), with VALUE (a size such as 8MiB); OP is
// <=, >= or ==. A missing field is 0, as omitempty leaves it out.
func cmdJSONCmp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: jsoncmp file field op value")
	}
	var doc any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &doc))
	for _, k := range strings.Split(args[1], ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			ts.Fatalf("%s: %s is not in an object", args[0], k)
		}
		doc = m[k]
	}
	var got int64
	switch v := doc.(type) {
	case nil:
	case float64:
		got = int64(v)
	default:
		ts.Fatalf("%s: %s is %v, not a number", args[0], args[1], doc)
	}
	want, err := parseSize(args[3])
	ts.Check(err)
	ok := false
	switch args[2] {
	case "<=":
		ok = got <= want
	case ">=":
		ok = got >= want
	case "==":
		ok = got == want
	default:
		ts.Fatalf("jsoncmp: unknown operator %s", args[2])
	}
	if !ok {
		ts.Fatalf("%s: %s is %d, want %s %d", args[0], args[1], got, args[2], want)
	}
	ts.Logf("%s: %s = %d", args[0], args[1], got)
}
