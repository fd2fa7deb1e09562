package transfer

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol/scp"
)

type execFunc = func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int

// scpHost starts an in-process SSH server running exec requests with fn
// and returns its scp end.
func scpHost(t *testing.T, fn execFunc) *scp.Host {
	t.Helper()
	c := sshtest.Start(t, sshtest.Options{Exec: fn}).Dial(t)
	return scp.NewHost(c, "testhost:")
}

// realSCP runs the commands it is given with /bin/sh, as sshd does: the
// remote end is OpenSSH's own scp in its server mode.
func realSCP(t *testing.T) execFunc {
	sshdtest.LookTool(t, "scp")
	return sshtest.ShellExec(t.TempDir())
}

func remote(h *scp.Host, p string) Endpoint { return Endpoint{SCP{Host: h}, p} }

// scpTree builds a tree with the sizes and names that trip scp
// implementations: empty files, sizes around buffer edges, a quote, a
// leading dash, spaces, non-ASCII and an empty directory.
func scpTree(t *testing.T, root string) {
	t.Helper()
	files := map[string]int{
		"zero": 0, "one": 1, "k32-1": 32767, "k32": 32768, "k32+1": 32769,
		"name with spaces": 10, "it's": 11, "-leading-dash": 12, "ünïcödé-名前.txt": 20,
		"sub/deeper/file.bin": 100000, "sub/x": 5,
	}
	for name, size := range files {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(i*7 + len(name))
		}
		write(t, filepath.Join(root, name), string(b))
	}
	if err := os.Mkdir(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "sub/x"), 0o751); err != nil {
		t.Fatal(err)
	}
	old := time.Unix(1e9, 0)
	for _, p := range []string{"one", "sub/deeper", "sub"} {
		if err := os.Chtimes(filepath.Join(root, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func mustCopyOverSCP(t *testing.T, o Options, srcs []Endpoint, target Endpoint) *Result {
	t.Helper()
	res, err := Copy(context.Background(), srcs, target, o)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("Copy: %v %v", err, res.Errors)
	}
	return res
}

// noTemps fails if a temporary file survived below root.
func noTemps(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func TestSCPRoundTrip(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, far, back := t.TempDir(), t.TempDir(), t.TempDir()
	scpTree(t, filepath.Join(src, "tree"))

	res := mustCopyOverSCP(t, Options{Recursive: true}, []Endpoint{local(filepath.Join(src, "tree"))},
		remote(h, filepath.Join(far, "up")))
	if res.Files != 11 {
		t.Errorf("upload copied %d files, want 11", res.Files)
	}
	res = mustCopyOverSCP(t, Options{Recursive: true}, []Endpoint{remote(h, filepath.Join(far, "up"))},
		local(filepath.Join(back, "down")))
	if res.Files != 11 || res.Bytes != 32767+32768+32769+100000+59 {
		t.Errorf("download copied %d files, %d bytes", res.Files, res.Bytes)
	}
	want := strings.Join(tree(t, filepath.Join(src, "tree")), "\n")
	for _, dir := range []string{filepath.Join(far, "up"), filepath.Join(back, "down")} {
		if got := strings.Join(tree(t, dir), "\n"); got != want {
			t.Errorf("%s differs from the source:\n%s\nwant\n%s", dir, got, want)
		}
	}
	noTemps(t, back)
}

// TestSCPSessionsAtOnce checks that several sources go over
// sessions running at the same time: each remote scp waits until a
// second one has started.
func TestSCPSessionsAtOnce(t *testing.T) {
	run := realSCP(t)
	var mu sync.Mutex
	started := 0
	second := make(chan struct{})
	h := scpHost(t, func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		mu.Lock()
		started++
		if started == 2 {
			close(second)
		}
		mu.Unlock()
		select {
		case <-second:
		case <-time.After(10 * time.Second):
		}
		return run(cmd, stdin, stdout, stderr)
	})
	src, dst := t.TempDir(), t.TempDir()
	var srcs []Endpoint
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		write(t, filepath.Join(src, n), n+n)
		srcs = append(srcs, remote(h, filepath.Join(src, n)))
	}
	res := mustCopyOverSCP(t, Options{}, srcs, local(dst))
	select {
	case <-second:
	default:
		t.Fatal("the sources went one session at a time")
	}
	if res.Files != 6 || res.MaxStreams < 2 || res.MaxStreams > scpSessions {
		t.Errorf("copied %d files over at most %d sessions at once; want 6 over 2 to %d", res.Files, res.MaxStreams, scpSessions)
	}
	if got := strings.Join(tree(t, dst), " "); got != "a:aa b:bb c:cc d:dd e:ee f:ff" {
		t.Errorf("target tree %q", got)
	}
}

func TestSCPPattern(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	for _, n := range []string{"k1.gz", "k2.gz", "other", "it's.gz"} {
		write(t, filepath.Join(src, n), n)
	}
	mustCopyOverSCP(t, Options{}, []Endpoint{remote(h, filepath.Join(src, "*.gz"))}, local(dst))
	if got := strings.Join(tree(t, dst), " "); got != "it's.gz:it's.gz k1.gz:k1.gz k2.gz:k2.gz" {
		t.Errorf("target tree %q", got)
	}
	// Several matches need a directory to land in.
	res, err := Copy(context.Background(), []Endpoint{remote(h, filepath.Join(src, "k*"))},
		local(filepath.Join(dst, "single")), Options{})
	if err != nil || len(res.Errors) != 1 || !errors.Is(res.Errors[0], ErrNotDirectory) {
		t.Fatalf("Copy of two matches to a file: %v %v", err, res.Errors)
	}
}

func TestSCPSetuidNeedsPreserve(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "tool"), "#!/bin/sh\n")
	write(t, filepath.Join(src, "plain"), "plain")
	if err := os.Chmod(filepath.Join(src, "tool"), 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	srcs := []Endpoint{remote(h, filepath.Join(src, "tool")), remote(h, filepath.Join(src, "plain"))}
	res, err := Copy(context.Background(), srcs, local(dst), Options{})
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "setuid or setgid bits; refused without -p") {
		t.Fatalf("Copy of a setuid file without -p: %v %v", err, res.Errors)
	}
	if got := strings.Join(tree(t, dst), " "); got != "plain:plain" {
		t.Errorf("target tree %q", got)
	}
	noTemps(t, dst)

	mustCopyOverSCP(t, Options{Preserve: true}, srcs[:1], local(dst))
	if fi, err := os.Stat(filepath.Join(dst, "tool")); err != nil || fi.Mode() != 0o755|fs.ModeSetuid {
		t.Fatalf("with -p: %v %v", fi, err)
	}
}

func TestSCPRemoteErrors(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "good"), "good")
	os.Mkdir(filepath.Join(src, "adir"), 0o755)

	// A missing source and a directory without -r are reported; the
	// other sources still go.
	srcs := []Endpoint{remote(h, filepath.Join(src, "missing")), remote(h, filepath.Join(src, "adir")),
		remote(h, filepath.Join(src, "good"))}
	res, err := Copy(context.Background(), srcs, local(dst), Options{})
	if err != nil || len(res.Errors) != 2 || res.Files != 1 {
		t.Fatalf("Copy: %v, %d files, errors %v", err, res.Files, res.Errors)
	}
	msgs := res.Errors[0].Error() + "\n" + res.Errors[1].Error()
	for _, want := range []string{"missing: No such file or directory", "adir: not a regular file"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("errors %q do not say %q", msgs, want)
		}
	}

	// Several sources to a remote name that is not a directory.
	write(t, filepath.Join(dst, "afile"), "keep")
	res, err = Copy(context.Background(),
		[]Endpoint{local(filepath.Join(src, "good")), local(filepath.Join(src, "good"))},
		remote(h, filepath.Join(dst, "afile")), Options{})
	if err != nil || len(res.Errors) != 2 || !strings.Contains(res.Errors[0].Error(), "afile: Not a directory") {
		t.Fatalf("Copy of two files to a remote file: %v %v", err, res.Errors)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "afile")); string(b) != "keep" {
		t.Errorf("afile was overwritten: %q", b)
	}

	// Remote to remote is refused, not tried.
	res, err = Copy(context.Background(), []Endpoint{remote(h, filepath.Join(src, "good"))},
		remote(h, filepath.Join(dst, "r2r")), Options{})
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "needs SFTP") {
		t.Fatalf("Copy remote to remote: %v %v", err, res.Errors)
	}
}

func TestSCPExecRefused(t *testing.T) {
	h := scpHost(t, nil)
	res, err := Copy(context.Background(), []Endpoint{remote(h, "f")}, local(t.TempDir()), Options{})
	var te *Error
	if err != nil || len(res.Errors) != 1 || !errors.As(res.Errors[0], &te) || !strings.Contains(te.Hint, "leave out -O") {
		t.Fatalf("Copy from a server that runs no commands: %v %v", err, res.Errors)
	}
}

// hostileSource plays an "scp -f" that sends out whatever it is asked
// for, then ends its output and waits for the client to hang up.
func hostileSource(out string) execFunc {
	return func(_ string, stdin io.Reader, stdout, _ io.Writer) int {
		if _, err := io.ReadFull(stdin, make([]byte, 1)); err != nil {
			return 1
		}
		io.WriteString(stdout, out)
		if cw, ok := stdout.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, stdin)
		return 0
	}
}

// TestSCPRefusesHostileSources has a malicious server answer a
// download with what CVE-2018-20685 and CVE-2019-6111 style attacks send:
// each must be refused with a clear error, and nothing may appear outside
// the target, nor in it under a final name.
func TestSCPRefusesHostileSources(t *testing.T) {
	base := t.TempDir()
	tests := []struct {
		name      string
		req       string
		recursive bool
		send      string
		err       string   // a part of the error
		keep      []string // what may exist in the target afterwards
	}{
		{name: "parent directory", req: "file", send: "C0644 5 ../evil\nhello\x00", err: `file name "../evil" contains a slash`},
		{name: "absolute path", req: "file", send: "C0644 5 " + base + "/abs\nhello\x00", err: "contains a slash"},
		{name: "other name", req: "file", send: "C0644 5 authorized_keys\nhello\x00", err: `sent "authorized_keys" where "file" was asked for`},
		{name: "directory for a file", req: "file", send: "D0755 0 file\nC0644 5 x\nhello\x00E\n", err: `directory "file" where a file was asked for`},
		{name: "oversize length", req: "file", send: "C0644 1000 file\nonly ten b", err: "after 10 of 1000 bytes"},
		{name: "huge length", req: "file", send: "C0644 99999999999999999999 file\n", err: `size "99999999999999999999"`},
		{name: "negative length", req: "file", send: "C0644 -1 file\n", err: `size "-1"`},
		{name: "garbage length", req: "file", send: "C0644 5x file\nhello\x00", err: `size "5x"`},
		{name: "setuid without -p", req: "file", send: "C4755 5 file\n", err: "setuid or setgid bits; refused without -p"},
		{name: "control characters", req: "file", send: "C0644 5 fi\x1b]0;pwned\x07le\nhello\x00", err: "control character"},
		{name: "nested escape", req: "dir", recursive: true, send: "D0755 0 dir\nC0644 5 ../../evil\nhello\x00E\n",
			err: "contains a slash", keep: []string{"dir/"}},
		{name: "nested dot dot", req: "dir", recursive: true, send: "D0755 0 dir\nD0755 0 ..\nC0644 5 evil\nhello\x00E\nE\n",
			err: `file name ".."`, keep: []string{"dir/"}},
		{name: "second file", req: "file", send: "C0644 2 file\nok\x00C0644 5 file\nhello\x00", err: "second entry",
			keep: []string{"file:ok"}},
		{name: "login banner", req: "file", send: "Welcome!\n", err: "unexpected line"},
		{name: "bad mode", req: "file", send: "C999 5 file\nhello\x00", err: "mode is not four octal digits"},
		{name: "longer than announced", req: "file", send: "C0644 5 file\nhello, and more\n", err: "unexpected answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := scpHost(t, hostileSource(tt.send))
			root := t.TempDir()
			out := filepath.Join(root, "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			res, err := Copy(context.Background(), []Endpoint{remote(h, tt.req)}, local(out),
				Options{Recursive: tt.recursive})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) == 0 {
				t.Fatal("Copy reported no error")
			}
			var all []string
			for _, e := range res.Errors {
				all = append(all, e.Error())
			}
			if msg := strings.Join(all, "\n"); !strings.Contains(msg, tt.err) {
				t.Errorf("errors\n%s\ndo not say %q", msg, tt.err)
			}
			if got := strings.Join(tree(t, root), " "); got != strings.Join(append([]string{"out/"}, prefixAll("out/", tt.keep)...), " ") {
				t.Errorf("after the attack the tree is %q", got)
			}
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(base, "abs"), filepath.Join(filepath.Dir(root), "evil")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}

func prefixAll(prefix string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, prefix+n)
	}
	return out
}

// TestSCPCancelLeavesNothing interrupts a download in the middle of
// a file: no file may be left under its final name, nor a temporary one.
func TestSCPCancelLeavesNothing(t *testing.T) {
	h := scpHost(t, func(_ string, stdin io.Reader, stdout, _ io.Writer) int {
		io.ReadFull(stdin, make([]byte, 1))
		io.WriteString(stdout, "C0644 1000000 big\n")
		io.ReadFull(stdin, make([]byte, 1))
		stdout.Write(make([]byte, 1000))
		io.Copy(io.Discard, stdin) // stalls until the client hangs up
		return 1
	})
	dst := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(dst, tempPrefix+"*")); len(m) > 0 {
				cancel()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := Copy(ctx, []Endpoint{remote(h, "big")}, local(dst), Options{})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Copy = %v, want context.Canceled", err)
	}
	if got := tree(t, dst); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

// TestSCPRefusesOneEntry has the local side refuse one file (a
// directory is in its way): the session goes on with the next one.
func TestSCPRefusesOneEntry(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "d/a/x"), "x")
	write(t, filepath.Join(src, "d/b/y"), "y")
	write(t, filepath.Join(dst, "d/a/x/keep"), "keep")
	res, err := Copy(context.Background(), []Endpoint{remote(h, filepath.Join(src, "d"))}, local(dst),
		Options{Recursive: true})
	if err != nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "x: is a directory") {
		t.Fatalf("Copy: %v %v", err, res.Errors)
	}
	if got := strings.Join(tree(t, dst), " "); got != "d/ d/a/ d/a/x/ d/a/x/keep:keep d/b/ d/b/y:y" {
		t.Errorf("target tree %q", got)
	}
}

func TestSCPProgressAndLog(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "a"), strings.Repeat("a", 100))
	write(t, filepath.Join(src, "b"), strings.Repeat("b", 50))
	p := &countingProgress{}
	var mu sync.Mutex
	var logged []string
	o := Options{Progress: p, Logf: func(format string, args ...any) {
		mu.Lock()
		logged = append(logged, format)
		mu.Unlock()
	}}
	mustCopyOverSCP(t, o, []Endpoint{remote(h, filepath.Join(src, "a")), remote(h, filepath.Join(src, "b"))}, local(dst))
	if p.started == 0 || p.started != p.ended || p.bytes > 150 || p.bytes == 0 {
		t.Errorf("progress saw %d files started, %d ended, %d bytes", p.started, p.ended, p.bytes)
	}
	if len(logged) != 2 {
		t.Errorf("logged %q, want a line per file", logged)
	}
}

// countingProgress counts what it is told; an scp run must call it from one
// goroutine at a time.
type countingProgress struct {
	started, ended int
	bytes          int
	inFile         bool
}

func (p *countingProgress) StartFile(string, int64) {
	if p.inFile {
		panic("StartFile inside a file")
	}
	p.inFile = true
	p.started++
}

func (p *countingProgress) Add(n int) { p.bytes += n }

func (p *countingProgress) EndFile() {
	p.inFile = false
	p.ended++
}

// TestSCPDownloadFinishesLikeCopy has a download's writes fail on
// the local end (a full disk, say): the file's previous content stays
// under its name, no temporary file is left, and the files beside it
// still arrive, as Copy gives every download.
func TestSCPDownloadFinishesLikeCopy(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "d/big"), strings.Repeat("x", 3<<20))
	write(t, filepath.Join(src, "d/small"), "small")
	write(t, filepath.Join(dst, "d/big"), "previous")
	target := Endpoint{failingFS{failAfter: 1 << 20}, dst}
	res, err := Copy(context.Background(), []Endpoint{remote(h, filepath.Join(src, "d"))}, target,
		Options{Recursive: true, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "injected write failure") {
		t.Fatalf("errors = %v, want the one write failure", res.Errors)
	}
	if got := strings.Join(tree(t, dst), " "); got != "d/ d/big:previous d/small:small" {
		t.Errorf("target tree %q", got)
	}
	noTemps(t, dst)
}

// TestSCPUploadWalksLikeCopy gives an upload a source whose listing
// holds a name that is not one path element: the walk Copy uses refuses
// it, and the remote scp is sent the directory without it.
func TestSCPUploadWalksLikeCopy(t *testing.T) {
	h := scpHost(t, realSCP(t))
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "d/f"), "f")
	source := Endpoint{failingFS{failAfter: -1, names: []string{"../evil"}}, filepath.Join(src, "d")}
	res, err := Copy(context.Background(), []Endpoint{source}, remote(h, dst), Options{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), `invalid name "../evil": contains a separator`) {
		t.Fatalf("errors = %v, want the listed name refused", res.Errors)
	}
	if got := strings.Join(tree(t, dst), " "); got != "d/" {
		t.Errorf("target tree %q", got)
	}
	if _, err := os.Lstat(filepath.Join(src, "evil")); err == nil {
		t.Error("the refused name was written")
	}
}
