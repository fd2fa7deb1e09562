package protocol

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func TestPathArg(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"-delete", `'./-delete'`},
		{"-", `'./-'`},
		{"--", `'./--'`},
		{"-a/b", `'./-a/b'`},
		{"a/-b", `'a/-b'`},
		{"/abs/-x", `'/abs/-x'`},
		{"it's", `'it'\''s'`},
		{"", `''`},
	} {
		if got := PathArg(c.path); got != c.want {
			t.Errorf("PathArg(%q) = %s, want %s", c.path, got, c.want)
		}
	}
}

// remoteCommands builds each command hpncp runs on a server with the
// path p where its path goes.
func remoteCommands(p string) []string {
	return []string{
		hardLinksCommand(p),
		tarExtractCommand(p, TarOptions{}),
		tarExtractCommand(p, TarOptions{Preserve: true, Compress: "zstd"}),
		tarCreateCommand(p, TarOptions{Compress: "gzip"}),
		sumCommand("sha256sum", p),
		sumCommand("shasum -a 256", p),
	}
}

// standIns stands shell functions in for the tools remoteCommands run:
// each writes its name, its argument count and its arguments, each
// ended by a NUL.
const standIns = `find() { printf '%s\0' find "$#" "$@"; }
tar() { printf '%s\0' tar "$#" "$@"; }
sha256sum() { printf '%s\0' sha256sum "$#" "$@"; }
shasum() { printf '%s\0' shasum "$#" "$@"; }
`

// argvs runs cmds, one after the other, under /bin/sh -c in dir with
// the stand-ins, and returns the arguments each tool was called with.
func argvs(t *testing.T, dir string, cmds []string) [][]string {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", standIns+strings.Join(cmds, "\n"))
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", cmds, err)
	}
	fields := strings.Split(string(out), "\x00")
	if fields[len(fields)-1] != "" {
		t.Fatalf("output of %q does not end in a NUL: %q", cmds, out)
	}
	fields = fields[:len(fields)-1]
	var calls [][]string
	for len(fields) >= 2 {
		n, err := strconv.Atoi(fields[1])
		if err != nil || n > len(fields)-2 {
			t.Fatalf("output of %q: no argument count after %q: %q", cmds, fields[0], out)
		}
		calls = append(calls, fields[2:2+n])
		fields = fields[2+n:]
	}
	if len(fields) != 0 || len(calls) != len(cmds) {
		t.Fatalf("%d commands made %d calls: %q", len(cmds), len(calls), out)
	}
	return calls
}

// checkPathReached checks that each command of remoteCommands(p)
// called its tool with the arguments want, which it has for the
// harmless path "PATH", but for p (or "./"+p, where p is relative) where
// "PATH" was, and no argument starting with "-" there.
func checkPathReached(t *testing.T, dir string, want [][]string, p string) {
	t.Helper()
	got := argvs(t, dir, remoteCommands(p))
	for i, argv := range got {
		at := slices.Index(want[i], "PATH")
		if at < 0 {
			t.Fatalf("%s: no path among %q", remoteCommands("PATH")[i], want[i])
		}
		same := argv[at] == p || !strings.HasPrefix(p, "/") && argv[at] == "./"+p
		if len(argv) != len(want[i]) || !same {
			t.Fatalf("%s: the tool got %q, want %q with %q for PATH", remoteCommands(p)[i], argv, want[i], p)
		}
		if strings.HasPrefix(argv[at], "-") {
			t.Fatalf("%s: the path reached the tool as %q, an option", remoteCommands(p)[i], argv[at])
		}
		for j := range argv {
			if j != at && argv[j] != want[i][j] {
				t.Fatalf("%s: argument %d is %q, want %q", remoteCommands(p)[i], j, argv[j], want[i][j])
			}
		}
	}
}

// checkTarName checks the record appendTarName writes for name: one
// NUL-terminated "./"+name, or nothing for a name no file can have.
func checkTarName(t *testing.T, name string) {
	t.Helper()
	var b bytes.Buffer
	appendTarName(&b, name)
	if strings.Contains(name, "\x00") {
		if b.Len() != 0 {
			t.Fatalf("a name holding a NUL went to tar as %q", b.Bytes())
		}
		return
	}
	if got, want := b.String(), "./"+name+"\x00"; got != want {
		t.Fatalf("name %q went to tar as %q, want %q", name, got, want)
	}
}

func TestRemoteCommandPaths(t *testing.T) {
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	want := argvs(t, dir, remoteCommands("PATH"))
	for _, p := range []string{
		"-delete", "-", "--", "--help", "-C/etc", "-exec rm {} +", "a b", "it's", "'", `a\b`,
		"$(touch pwned)", "`touch pwned`", "; touch pwned", "x\ny", "\xff\xfe", "*", "-*", "~", "",
	} {
		checkPathReached(t, dir, want, p)
		checkTarName(t, p)
	}
	checkTarName(t, "a\x00-delete")
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a quoted path ran a command")
	}
}

// FuzzRemoteCommandPaths runs every remote command hpncp builds, with
// stand-ins for the tools, for random paths: each tool must get the path
// as it was given (or with "./" before it), never as an option.
func FuzzRemoteCommandPaths(f *testing.F) {
	for _, p := range []string{"-delete", "it's $(x) `y`", "a\nb c", "\xff*", "--", ""} {
		f.Add(p)
	}
	dir := f.TempDir()
	var want [][]string
	f.Fuzz(func(t *testing.T, p string) {
		checkTarName(t, p)
		if strings.Contains(p, "\x00") {
			// No path holds a NUL, nor can a command line: the shell
			// never sees one.
			return
		}
		if want == nil {
			want = argvs(t, dir, remoteCommands("PATH"))
		}
		checkPathReached(t, dir, want, p)
	})
}

// shellEnd is an end on an in-process server whose commands run under
// /bin/sh -c in home, the login's directory, where relative paths in
// commands resolve.
func shellEnd(t *testing.T) (*SFTP, string) {
	t.Helper()
	home := t.TempDir()
	srv := sshtest.Start(t, sshtest.Options{Exec: sshtest.ShellExec(home)})
	return openEnd(t, srv, false), home
}

// mkFiles makes each file below dir, with its name as its contents.
func mkFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// exist checks that each file mkFiles made below dir is still there,
// unchanged.
func exist(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		holds(t, filepath.Join(dir, n), n)
	}
}

// holds checks that the file p holds data.
func holds(t *testing.T, p, data string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != data {
		t.Errorf("%s: %q, %v; want %q", p, b, err, data)
	}
}

// TestHardLinkedDashDir: a directory named "-delete" is searched by the
// server's find, not taken for find's action, which deletes everything
// below the login's directory.
func TestHardLinkedDashDir(t *testing.T) {
	if out, err := exec.Command("find", ".", "-maxdepth", "0", "-printf", "%P").CombinedOutput(); err != nil {
		t.Skipf("no find with -printf here: %v: %s", err, out)
	}
	end, home := shellEnd(t)
	mkFiles(t, home, "keep", "-delete/a", "-delete/sub/c")
	if err := os.Link(filepath.Join(home, "-delete/a"), filepath.Join(home, "-delete/sub/b")); err != nil {
		t.Fatal(err)
	}
	ids, err := end.HardLinked(context.Background(), "-delete")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids["a"] != ids["sub/b"] || ids["a"] == (FileID{}) {
		t.Errorf("HardLinked(-delete) = %v, want a and sub/b, one file", ids)
	}
	exist(t, home, "keep", "-delete/a", "-delete/sub/c")
	holds(t, filepath.Join(home, "-delete/sub/b"), "-delete/a")
}

// TestSum256DashName: a file named "-c" is hashed, not read as the
// option that checks sums.
func TestSum256DashName(t *testing.T) {
	end, home := shellEnd(t)
	mkFiles(t, home, "-c")
	got, err := end.Sum256(context.Background(), "-c")
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256([]byte("-c")); !bytes.Equal(got, want[:]) {
		t.Fatalf("Sum256(-c) = %x, want %x", got, want)
	}
}

// TestSumToolsDashName runs both hashing tools hpncp may ask for on a
// file named "-c" in the current directory.
func TestSumToolsDashName(t *testing.T) {
	dir := t.TempDir()
	mkFiles(t, dir, "-c")
	want := sha256.Sum256([]byte("-c"))
	for _, tool := range []string{"sha256sum", "shasum -a 256"} {
		if _, err := exec.LookPath(strings.Fields(tool)[0]); err != nil {
			t.Logf("no %s here", tool)
			continue
		}
		c := exec.Command("/bin/sh", "-c", sumCommand(tool, "-c"))
		c.Dir = dir
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v", sumCommand(tool, "-c"), err)
		}
		got, err := parseSum(out)
		if err != nil || !bytes.Equal(got, want[:]) {
			t.Errorf("%s: %x, %v; want %x", sumCommand(tool, "-c"), got, err, want)
		}
	}
}

// TestTarDashDirAndNames: tar -c in a directory named "-C" sends a file
// named "-f" as "./-f", and tar -x into "-x" unpacks it there; nothing
// lands elsewhere.
func TestTarDashDirAndNames(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	end, home := shellEnd(t)
	mkFiles(t, home, "-C/-f", "-C/--null", "-C/ok")
	if err := os.Mkdir(filepath.Join(home, "-x"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	names := func(yield []string) func(func([]string) bool) {
		return func(f func([]string) bool) { f(yield) }
	}
	rc, err := end.TarCreate(ctx, "-C", names([]string{"-f", "--null", "ok"}), TarOptions{})
	if err != nil {
		t.Fatal(err)
	}
	archive, rerr := io.ReadAll(rc)
	if err := rc.Close(); err != nil || rerr != nil {
		t.Fatalf("tar -c in -C: %v, %v", err, rerr)
	}
	var got []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
	}
	if want := []string{"./-f", "./--null", "./ok"}; !slices.Equal(got, want) {
		t.Errorf("tar -c in -C sent %q, want %q", got, want)
	}

	w, err := end.TarExtract(ctx, "-x", TarOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, werr := w.Write(archive)
	if err := w.Close(); err != nil || werr != nil {
		t.Fatalf("tar -x in -x: %v, %v", err, werr)
	}
	for _, n := range []string{"-f", "--null", "ok"} {
		holds(t, filepath.Join(home, "-x", n), "-C/"+n)
	}
	exist(t, home, "-C/-f", "-C/--null", "-C/ok")
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("the login's directory holds %d entries, want -C and -x alone", len(entries))
	}
}
