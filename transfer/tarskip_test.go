package transfer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
)

// An unreadable file of a tree: tar mode copies the others and fails it
// alone, as SFTP mode does.

// unreadable is the local file system with the files named secret
// refused to readers, as for a user without read permission (the tests
// run as root, who reads anything).
type unreadable struct{ Local }

func (unreadable) Open(name string) (io.ReadCloser, error) {
	if filepath.Base(name) == "secret" {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return os.Open(name)
}

// unreadableRemote is unreadable as a server with GNU tar: its tar -c
// leaves the secret files out, says so on stderr, and exits 2, as GNU
// tar does. complaint, when set, is a further stderr line.
type unreadableRemote struct {
	unreadable
	complaint string
}

func (unreadableRemote) Label() string { return "fake:" }

func (unreadableRemote) TarProbe(context.Context) (protocol.TarSupport, error) {
	return protocol.TarSupport{GNU: true, Version: "tar (GNU tar) 1.35"}, nil
}

func (unreadableRemote) TarExtract(context.Context, string, protocol.TarOptions) (io.WriteCloser, error) {
	return nil, errors.New("unreadableRemote: only creates")
}

func (u unreadableRemote) TarCreate(_ context.Context, dir string, names iter.Seq[[]string], _ protocol.TarOptions) (io.ReadCloser, error) {
	return serveTar(dir, names, func(n string) bool { return filepath.Base(n) == "secret" }, u.complaint), nil
}

// serveTar is a server's tar -c in dir for the fakes: as the real one, it
// takes the names as they are handed out, while its archive is read, and
// writes each file's entry in their order. A name skip reports (when
// skip is not nil) is left out with GNU tar's complaint on stderr, which
// with complaint, a further line, makes Close fail as tar exiting 2 does.
func serveTar(dir string, names iter.Seq[[]string], skip func(string) bool, complaint string) io.ReadCloser {
	pr, pw := io.Pipe()
	a := &servedArchive{r: pr, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		var stderr strings.Builder
		tw := tar.NewWriter(pw)
		err := func() error {
			for batch := range names {
				for _, n := range batch {
					if skip != nil && skip(n) {
						stderr.WriteString("tar: ./" + n + ": Cannot open: Permission denied\n")
						continue
					}
					data, err := os.ReadFile(filepath.Join(dir, n))
					if err != nil {
						return err
					}
					h := &tar.Header{Typeflag: tar.TypeReg, Name: "./" + n, Size: int64(len(data)), Mode: 0o644, ModTime: time.Unix(1e9, 0)}
					if err := tw.WriteHeader(h); err != nil {
						return err
					}
					if _, err := tw.Write(data); err != nil {
						return err
					}
				}
			}
			return tw.Close()
		}()
		if err == nil && stderr.Len() > 0 {
			stderr.WriteString(complaint)
			stderr.WriteString("tar: Exiting with failure status due to previous errors\n")
			err = &protocol.TarExitError{What: "tar -c in fake:" + dir,
				Err: errors.New("Process exited with status 2"), Status: 2, Stderr: stderr.String()}
		}
		a.err = err
		pw.CloseWithError(err)
	}()
	return a
}

// servedArchive is serveTar's archive: Close reads what is left and
// returns how tar ended.
type servedArchive struct {
	r    *io.PipeReader
	done chan struct{}
	err  error // set before done is closed
}

func (a *servedArchive) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		// The archive so far, as a cut channel would end it.
		return n, io.EOF
	}
	return n, err
}

func (a *servedArchive) Close() error {
	_, _ = io.Copy(io.Discard, a.r)
	<-a.done
	return a.err
}

// secretTree writes a tree of a few small files, one of them named
// secret, and returns its root.
func secretTree(t *testing.T) string {
	src := filepath.Join(t.TempDir(), "tree")
	for _, rel := range []string{"a", "b", "sub/c", "sub/secret", "z"} {
		write(t, filepath.Join(src, filepath.FromSlash(rel)), strings.Repeat(rel, 100))
	}
	return src
}

func TestTarUnreadableFileFailsAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upload   bool
		tar      TarMode
		existing bool // the target tree exists: files go under temporary names
	}{
		{"upload, new tree, tar", true, TarForce, false},
		{"upload, new tree, sftp", true, TarOff, false},
		{"upload, existing tree, tar", true, TarForce, true},
		{"download, tar", false, TarForce, false},
		{"download, sftp", false, TarOff, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := secretTree(t)
			target := filepath.Join(t.TempDir(), "tree")
			if tc.existing {
				if err := os.Mkdir(target, 0o755); err != nil {
					t.Fatal(err)
				}
				target = filepath.Dir(target)
			}
			var from, to Endpoint
			if tc.upload {
				from, to = Endpoint{unreadable{}, src}, Endpoint{&waitingTar{}, target}
			} else {
				from, to = Endpoint{unreadableRemote{}, src}, local(target)
			}
			var logs []string
			o := Options{Recursive: true, Tar: TarOptions{Mode: tc.tar},
				Logf: func(f string, a ...any) { logs = append(logs, f) }}
			res, err := Copy(context.Background(), []Endpoint{from}, to, o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.tar == TarForce && !strings.Contains(strings.Join(logs, "\n"), "tar: %d files") {
				t.Fatalf("the copy did not go over tar: %q", logs)
			}
			want := "read " + from.FS.Label() + filepath.Join(src, "sub", "secret") + ": permission denied"
			if len(res.Errors) != 1 || res.Errors[0].Error() != want {
				t.Fatalf("errors %q, want the one %q", res.Errors, want)
			}
			if res.Files != 4 {
				t.Errorf("%d files copied, want 4", res.Files)
			}
			root := filepath.Join(target, "tree")
			if !tc.existing {
				root = target
			}
			got := strings.Join(tree(t, root), " ")
			if want := "a:" + strings.Repeat("a", 100) + " b:" + strings.Repeat("b", 100) +
				" sub/ sub/c:" + strings.Repeat("sub/c", 100) + " z:" + strings.Repeat("z", 100); got != want {
				t.Errorf("target holds %q, want %q", got, want)
			}
		})
	}
}

// A complaint about a file the archive has (GNU tar pads a file that
// shrank with zeros) fails the whole stream: its bytes cannot be trusted.
func TestTarDownloadOtherComplaintFailsStream(t *testing.T) {
	src := secretTree(t)
	target := filepath.Join(t.TempDir(), "tree")
	from := Endpoint{unreadableRemote{complaint: "tar: ./sub/c: File shrank by 10 bytes; padding with zeros\n"}, src}
	res, err := Copy(context.Background(), []Endpoint{from}, local(target),
		Options{Recursive: true, Tar: TarOptions{Mode: TarForce}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 0 || len(res.Errors) == 0 || !strings.Contains(errors.Join(res.Errors...).Error(), "File shrank") {
		t.Fatalf("%d files copied, errors %v; want none copied and tar's complaint", res.Files, res.Errors)
	}
	if got := tree(t, target); strings.Join(got, " ") != "sub/" {
		t.Errorf("target holds %q, want the directories alone", got)
	}
}

func TestTarSkipped(t *testing.T) {
	files := func() []*tarFile {
		var out []*tarFile
		for _, rel := range []string{"a", "sub/b: odd", "sub/c"} {
			out = append(out, &tarFile{tarNode: fileNode(rel, Endpoint{unreadableRemote{}, "/r/" + rel}, Endpoint{}, nil), seen: rel == "a"})
		}
		return out
	}
	exit2 := func(stderr string) error {
		return &protocol.TarExitError{Status: 2, Stderr: stderr, Err: errors.New("exit 2")}
	}
	const end = "tar: Exiting with failure status due to previous errors\n"
	for _, tc := range []struct {
		name string
		err  error
		ok   bool
		errs []string // the files' errors, in order
	}{
		{"names with colons", exit2("tar: ./sub/b: odd: Cannot open: Permission denied\ntar: ./sub/c: Cannot stat: No such file or directory\n" + end),
			true, []string{"", "read fake:/r/sub/b: odd: permission denied", "read fake:/r/sub/c: Cannot stat: No such file or directory"}},
		{"a complaint about a file sent", exit2("tar: ./a: file changed as we read it\n" + end), false, nil},
		{"an unknown line", exit2("tar: something else\n" + end), false, nil},
		{"no complaint", exit2(end), false, nil},
		{"exit 1", &protocol.TarExitError{Status: 1, Stderr: "tar: ./sub/c: Cannot open: Permission denied\n"}, false, nil},
		{"cut short", &protocol.TarExitError{Status: 2, Stderr: "tar: ./sub/c: Cannot open: Permission denied\n", Truncated: true}, false, nil},
		{"not tar's exit", errors.New("connection lost"), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := files()
			if got := tarSkipped(tc.err, fs); got != tc.ok {
				t.Fatalf("tarSkipped = %v, want %v", got, tc.ok)
			}
			for i, want := range tc.errs {
				got := ""
				if fs[i].err != nil {
					got = fs[i].err.Error()
				}
				if got != want {
					t.Errorf("%s: error %q, want %q", fs[i].rel, got, want)
				}
			}
		})
	}
}

// GNU tar itself, run as nobody on a file it cannot read, says what
// tarSkipped expects: the file named as TarCreate names it, exit 2.
func TestTarSkippedGNUTar(t *testing.T) {
	tarPath, err := exec.LookPath("tar")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs GNU tar and root, to run tar as nobody")
	}
	if out, _ := exec.Command(tarPath, "--version").Output(); !bytes.HasPrefix(out, []byte("tar (GNU tar)")) {
		t.Skip("tar is not GNU tar")
	}
	dir, err := os.MkdirTemp("", "tarskip")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	write(t, filepath.Join(dir, "ok"), "ok")
	write(t, filepath.Join(dir, "secret"), "secret")
	if err := errors.Join(os.Chmod(dir, 0o755), os.Chmod(filepath.Join(dir, "secret"), 0o600)); err != nil {
		t.Fatal(err)
	}
	files := []*tarFile{
		{tarNode: fileNode("ok", Endpoint{unreadableRemote{}, "/r/ok"}, Endpoint{}, nil)},
		{tarNode: fileNode("secret", Endpoint{unreadableRemote{}, "/r/secret"}, Endpoint{}, nil)},
	}
	// The command of protocol.TarCreate, its names as it sends them.
	cmd := exec.Command(tarPath, "-c", "-f", "-", "-h", "--hard-dereference", "--no-recursion", "-C", dir, "--null", "-T", "-")
	cmd.Args[0] = "tar" // as the server's shell runs it
	cmd.Stdin = strings.NewReader("./ok\x00./secret\x00")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("tar as nobody: %v, want a failure", err)
	}
	want, order := wanted(t.TempDir(), askedFile{"ok", 2}, askedFile{"secret", 6})
	if err := receiveTar(context.Background(), &stdout, order, pipeline.Meter{}); err != nil {
		t.Fatal(err)
	}
	files[0].seen, files[1].seen = want["ok"].seen, want["secret"].seen
	te := &protocol.TarExitError{Status: ee.ExitCode(), Stderr: stderr.String(), Err: err}
	if !tarSkipped(te, files) {
		t.Fatalf("tarSkipped refused GNU tar's exit %d with %q", ee.ExitCode(), stderr.String())
	}
	if files[0].err != nil || files[1].err == nil || files[1].err.Error() != "read fake:/r/secret: permission denied" {
		t.Errorf("errors %v, %v; want none for ok and permission denied for secret", files[0].err, files[1].err)
	}
}
