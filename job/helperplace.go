package job

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/internal/hostconfig"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/sshconn"
)

// HelperInstall is the setting that lets hpncp upload itself as a
// server's helper where none answers (--helper install, or Helper
// install for the host in hpncp's configuration file).
const HelperInstall = "install"

// mainPackage is hpncp's: a binary whose build says another is not
// uploaded as a helper.
const mainPackage = "github.com/hpncp/hpncp/cmd/hpncp"

// CheckHelperDir refuses a helpers' directory hpncp cannot name on a
// server: it is absolute or under "~/", and clean.
func CheckHelperDir(dir string) error { return helper.CheckDir(dir) }

// DefaultHelperDir is where hpncp helper install puts helpers unless
// told another place.
const DefaultHelperDir = helper.DefaultDir

// HelperPlace names a server's helpers: where hpncp helper install puts
// them and which local binary it uploads.
type HelperPlace struct {
	Conn Conn
	Host string
	// Dir is the helpers' directory on the server, absolute or under
	// "~/" (helper.DefaultDir when "", or the configuration's HelperDir).
	Dir string
	// Binary is the local hpncp to upload (the running one when "").
	Binary string
	Logf   func(format string, args ...any)
}

// HelperSettings resolves host's helper settings: the flag's value where
// one was given, else hpncp's configuration file's (Helper, HelperDir),
// else auto and helper.DefaultDir.
func HelperSettings(host, mode, dir string) (string, string, error) {
	var err error
	if mode == "" {
		if mode, err = hostconfig.Get(host, "Helper"); err != nil {
			return "", "", err
		}
		switch mode {
		case "":
			mode = HelperAuto
		case HelperAuto, HelperNever, HelperInstall:
		default:
			return "", "", fmt.Errorf("%s: Helper %q for %s: want auto, never or install", hostconfig.Path(), mode, host)
		}
	}
	if dir == "" {
		if dir, err = hostconfig.Get(host, "HelperDir"); err != nil {
			return "", "", err
		}
		if dir == "" {
			dir = helper.DefaultDir
		}
	}
	if err := helper.CheckDir(dir); err != nil {
		return "", "", err
	}
	return mode, dir, nil
}

// localBinary is an hpncp binary on this machine: its path, hash and the
// system it was built for.
type localBinary struct {
	path         string
	sum          [32]byte
	goos, goarch string
}

var (
	runningOnce sync.Once
	running     localBinary
	runningErr  error
)

// openBinary reads the hpncp binary at p (the running one when ""): its
// build must say it is hpncp's main package, and for which system.
func openBinary(p string) (localBinary, error) {
	if p == "" {
		runningOnce.Do(func() {
			exe, err := os.Executable()
			if err != nil {
				runningErr = fmt.Errorf("find the running hpncp: %w", err)
				return
			}
			running, runningErr = readBinary(exe)
		})
		return running, runningErr
	}
	return readBinary(p)
}

// binaryFuture is a local binary being read and hashed.
type binaryFuture struct {
	done chan struct{}
	b    localBinary
	ok   bool
}

// knownBinary is a binaryFuture of b, read already.
func knownBinary(b localBinary) *binaryFuture {
	f := &binaryFuture{done: make(chan struct{}), b: b, ok: true}
	close(f.done)
	return f
}

// hashBinary reads and hashes the binary at p (the running one when "")
// on a goroutine of its own; one that is not hpncp is logged, and
// get reports it not ok.
func hashBinary(p string, logf func(string, ...any)) *binaryFuture {
	f := &binaryFuture{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		b, err := openBinary(p)
		if err != nil {
			logf("no installed helper can be checked: %v", err)
			return
		}
		f.b, f.ok = b, true
	}()
	return f
}

// get waits for the binary; ok false where it is not hpncp.
func (f *binaryFuture) get() (localBinary, bool) {
	<-f.done
	return f.b, f.ok
}

func readBinary(p string) (localBinary, error) {
	b := localBinary{path: p}
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		return b, fmt.Errorf("read %s as hpncp: %w", p, err)
	}
	if bi.Path != mainPackage {
		return b, fmt.Errorf("%s is not hpncp: it was built from %s", p, vis.Text(bi.Path))
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS":
			b.goos = s.Value
		case "GOARCH":
			b.goarch = s.Value
		}
	}
	if b.goos == "" || b.goarch == "" {
		return b, fmt.Errorf("%s: its build does not say which system it is for", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return b, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return b, fmt.Errorf("read %s: %w", p, err)
	}
	h.Sum(b.sum[:0])
	return b, nil
}

// HelperArchError is a server whose system the binary was not built for:
// nothing is uploaded.
type HelperArchError struct {
	Host, Uname string // the server's uname -s -m
	Want        string // GOOS/GOARCH of the server, "" where unknown
	Have        string // the binary's
}

func (e *HelperArchError) Error() string {
	if e.Want == "" {
		return fmt.Sprintf("not uploading a helper to %s: its system (%s) is not one hpncp can tell a build for; this hpncp is for %s",
			e.Host, vis.Text(e.Uname), e.Have)
	}
	return fmt.Sprintf("not uploading a helper to %s: it runs %s (%s), this hpncp is built for %s",
		e.Host, e.Want, vis.Text(e.Uname), e.Have)
}

// Hint says how to get a helper there all the same.
func (e *HelperArchError) Hint() string {
	if e.Want == "" {
		return "install hpncp on the server's PATH, built for it"
	}
	return fmt.Sprintf("install hpncp on the server's PATH, or give --helper-binary an hpncp built for %s", e.Want)
}

// remoteMachine runs uname -s -m on c.
func remoteMachine(ctx context.Context, c *sshconn.Client) (string, error) {
	out, err := protocol.Output(ctx, c.Client, "uname -s -m", 256)
	if err != nil {
		return "", fmt.Errorf("ask the server's system (uname -s -m): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkMachine refuses a server whose system is not b's.
func checkMachine(ctx context.Context, c *sshconn.Client, host string, b localBinary) error {
	uname, err := remoteMachine(ctx, c)
	if err != nil {
		return err
	}
	goos, goarch, ok := helper.Machine(uname)
	have := b.goos + "/" + b.goarch
	switch {
	case !ok:
		return &HelperArchError{Host: host, Uname: uname, Have: have}
	case goos+"/"+goarch != have:
		return &HelperArchError{Host: host, Uname: uname, Want: goos + "/" + goarch, Have: have}
	}
	return nil
}

// madeRecord is the file in the helpers' directory that lists the
// directories above it that install made, for remove to take away.
const madeRecord = ".made"

// helperFiles is an SFTP session on a server's helper directory.
type helperFiles struct {
	s    *protocol.SFTP
	host string
	dir  string // for SFTP (helper.SFTPDir)
	home bool   // dir is under the login's home: shown with "~/"
}

func openHelperFiles(c *sshconn.Client, host, dir string, logf func(string, ...any)) (*helperFiles, error) {
	s, err := protocol.OpenSFTP(c.Client, protocol.Options{Label: host + ":", Logf: logf})
	if err != nil {
		return nil, err
	}
	return &helperFiles{s: s, host: host, dir: helper.SFTPDir(dir), home: strings.HasPrefix(dir, "~/")}, nil
}

func (f *helperFiles) Close() error { return f.s.Close() }

// where names p on the server for a message.
func (f *helperFiles) where(p string) string { return f.host + ":" + vis.Text(f.show(p)) }

// show is p as the user names it: "~/" before a path under the home.
func (f *helperFiles) show(p string) string {
	if f.home {
		return "~/" + p
	}
	return p
}

// ownDir checks that p is a directory, not a link, open to its owner
// only (it narrows one that is not).
func (f *helperFiles) ownDir(p string) error {
	fi, err := f.s.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory (%v); not installing there", f.where(p), fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := f.s.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("narrow %s to its owner: %w", f.where(p), err)
		}
	}
	return nil
}

// mkdirs makes dir and the directories above it that are missing, 0700,
// and returns those it made, from the top.
func (f *helperFiles) mkdirs(ctx context.Context, dir string) ([]string, error) {
	var missing []string
	for p := dir; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if _, err := f.s.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("look at %s: %w", f.where(p), err)
		}
		missing = append(missing, p)
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := f.s.MkdirMode(ctx, p, 0o700); err != nil {
			return made, fmt.Errorf("make %s: %w", f.where(p), err)
		}
		made = append(made, p)
	}
	return made, nil
}

// install uploads b into its version's directory, checks its hash with
// the server's own tool, and only then gives it its name. A helper
// already there whose hash checks is left as it is.
func (f *helperFiles) install(ctx context.Context, b localBinary, logf func(string, ...any)) (string, error) {
	vdir := path.Join(f.dir, helper.VersionDir(b.sum))
	final := path.Join(vdir, helper.BinaryName)
	if fi, err := f.s.Lstat(final); err == nil && fi.Mode().IsRegular() {
		if sum, err := f.s.Sum256(ctx, final); err == nil && [32]byte(sum) == b.sum {
			logf("the helper at %s is there already, and its hash checks", f.where(final))
			return f.show(final), nil
		}
		logf("the helper at %s is not this hpncp's; replacing it", f.where(final))
	}
	made, err := f.mkdirs(ctx, vdir)
	if err != nil {
		return "", err
	}
	// The directories above the helpers' that install made go in a
	// record, for remove; the helpers' own and the version's are
	// removed by name.
	var above []string
	for _, p := range made {
		if p != f.dir && p != vdir {
			above = append(above, p)
		}
	}
	if len(above) > 0 {
		if err := f.put(path.Join(f.dir, madeRecord), []byte(strings.Join(above, "\n")+"\n")); err != nil {
			return "", fmt.Errorf("record the directories made on %s: %w", f.host, err)
		}
	}
	for _, p := range []string{f.dir, vdir} {
		if err := f.ownDir(p); err != nil {
			return "", err
		}
	}

	var r [8]byte
	rand.Read(r[:])
	tmp := path.Join(vdir, helper.BinaryName+".tmp-"+hex.EncodeToString(r[:]))
	if err := f.upload(b.path, tmp); err != nil {
		f.s.Remove(tmp)
		return "", err
	}
	sum, err := f.s.Sum256(ctx, tmp)
	switch {
	case err != nil:
		f.s.Remove(tmp)
		return "", fmt.Errorf("check the helper uploaded to %s: %w; it is removed, and not run", f.where(tmp), err)
	case [32]byte(sum) != b.sum:
		f.s.Remove(tmp)
		return "", fmt.Errorf("the helper uploaded to %s has sha256 %x, not %x; it is removed, and not run", f.where(tmp), sum, b.sum)
	}
	if err := f.s.Rename(tmp, final); err != nil {
		f.s.Remove(tmp)
		return "", fmt.Errorf("rename %s to %s: %w", f.where(tmp), helper.BinaryName, err)
	}
	return f.show(final), nil
}

// upload copies the local file p to the new file tmp, which only its
// owner may run.
func (f *helperFiles) upload(p, tmp string) error {
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := f.s.CreateExclusive(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", f.where(tmp), err)
	}
	// Writes of 8 MiB, each split into requests all in flight at once:
	// io.Copy's 32 KiB, one request and its reply at a time, took 72 s
	// for 21 MB at 100 ms.
	if _, err := io.CopyBuffer(dst, struct{ io.Reader }{src}, make([]byte, 8<<20)); err != nil {
		dst.Close()
		return fmt.Errorf("upload the helper to %s: %w", f.where(tmp), err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("upload the helper to %s: %w", f.where(tmp), err)
	}
	if err := f.s.Chmod(tmp, 0o700); err != nil {
		return fmt.Errorf("make %s runnable: %w", f.where(tmp), err)
	}
	return nil
}

// put writes data to the new file p, under a temporary name first.
func (f *helperFiles) put(p string, data []byte) error {
	tmp := p + ".tmp"
	f.s.Remove(tmp)
	w, err := f.s.CreateExclusive(tmp)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		f.s.Remove(tmp)
		return err
	}
	if err := w.Close(); err != nil {
		f.s.Remove(tmp)
		return err
	}
	return f.s.Rename(tmp, p)
}

// get reads the file p, of at most max bytes.
func (f *helperFiles) get(p string, max int64) ([]byte, error) {
	r, err := f.s.Open(p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s: more than %d bytes", f.where(p), max)
	}
	return data, err
}

// installed is a version's directory in the helpers' directory.
type installed struct {
	name string // helper.VersionDir's
	path string // its binary's
	ok   bool   // the binary is there
}

// list returns the version directories in the helpers' directory; none
// where the directory is missing.
func (f *helperFiles) list() ([]installed, error) {
	entries, err := f.s.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", f.where(f.dir), err)
	}
	var out []installed
	for _, e := range entries {
		if !e.IsDir() || !helper.IsVersionDir(e.Name()) {
			continue
		}
		in := installed{name: e.Name(), path: path.Join(f.dir, e.Name(), helper.BinaryName)}
		if fi, err := f.s.Lstat(in.path); err == nil && fi.Mode().IsRegular() {
			in.ok = true
		}
		out = append(out, in)
	}
	return out, nil
}

// remove takes away every helper version in the helpers' directory, the
// directory, and the directories above it that install made and that
// are empty now. It takes away only names install gives: anything else
// found there stays, and is reported.
func (f *helperFiles) remove(logf func(string, ...any)) (removed []string, err error) {
	entries, err := f.s.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", f.where(f.dir), err)
	}
	var left []string
	var above []string
	for _, e := range entries {
		p := path.Join(f.dir, e.Name())
		switch {
		case e.Name() == madeRecord:
			if data, err := f.get(p, 64<<10); err == nil {
				above = f.madeAbove(string(data))
			}
		case e.IsDir() && helper.IsVersionDir(e.Name()):
			files, err := f.s.ReadDir(p)
			if err != nil {
				return removed, fmt.Errorf("list %s: %w", f.where(p), err)
			}
			for _, fi := range files {
				if fi.Name() != helper.BinaryName && fi.Name() != helper.CheckedName && !helper.IsTempName(fi.Name()) {
					left = append(left, path.Join(p, fi.Name()))
					continue
				}
				if err := f.s.Remove(path.Join(p, fi.Name())); err != nil {
					return removed, fmt.Errorf("remove %s: %w", f.where(path.Join(p, fi.Name())), err)
				}
				removed = append(removed, f.show(path.Join(p, fi.Name())))
			}
			if err := f.s.Remove(p); err != nil {
				left = append(left, p)
				continue
			}
			removed = append(removed, f.show(p))
			continue
		default:
			left = append(left, p)
			continue
		}
		if err := f.s.Remove(p); err != nil {
			return removed, fmt.Errorf("remove %s: %w", f.where(p), err)
		}
	}
	if len(left) > 0 {
		for _, p := range left {
			logf("left %s: not a name hpncp helper install gives", f.where(p))
		}
		return removed, fmt.Errorf("%s holds %d entries hpncp did not put there (%s); they are left", f.where(f.dir), len(left), f.where(left[0]))
	}
	if err := f.s.Remove(f.dir); err != nil {
		return removed, fmt.Errorf("remove %s: %w", f.where(f.dir), err)
	}
	removed = append(removed, f.show(f.dir))
	for i := len(above) - 1; i >= 0; i-- {
		// A directory something else uses now is not empty, and stays.
		if f.s.Remove(above[i]) == nil {
			removed = append(removed, f.show(above[i]))
		}
	}
	return removed, nil
}

// madeAbove reads install's record: the directories it made above the
// helpers' directory, from the top. A line that does not name one of
// them is ignored.
func (f *helperFiles) madeAbove(record string) []string {
	var out []string
	for _, p := range strings.Split(record, "\n") {
		if p != "" && p != "." && strings.HasPrefix(f.dir, p+"/") && !strings.Contains(p, "..") {
			out = append(out, p)
		}
	}
	return out
}

// installHelperOn checks that the server on c runs the system b was built
// for, and installs b as its helper in dir; it returns the helper's path
// there.
func installHelperOn(ctx context.Context, c *sshconn.Client, host, dir string, b localBinary, logf func(string, ...any)) (string, error) {
	if err := checkMachine(ctx, c, host, b); err != nil {
		return "", err
	}
	f, err := openHelperFiles(c, host, dir, logf)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return f.install(ctx, b, logf)
}

// dial connects to p's host.
func (p HelperPlace) dial(ctx context.Context) (*sshconn.Client, func(string, ...any), error) {
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c, err := sshconn.NewDialer(p.Conn.ssh()).Dial(ctx, p.Host)
	return c, logf, err
}

// InstallHelper uploads p.Binary (the running hpncp when "") as the
// helper in p's directory on p.Host, where the server runs the system it
// was built for (else *HelperArchError, and nothing is uploaded), and
// returns the helper's path there. The binary is uploaded under a
// temporary name and takes its own only once the server's sha256 of it
// is the local one's.
func InstallHelper(ctx context.Context, p HelperPlace) (string, error) {
	b, err := openBinary(p.Binary)
	if err != nil {
		return "", err
	}
	c, logf, err := p.dial(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return installHelperOn(ctx, c, p.Host, p.Dir, b, logf)
}

// runDirsScript takes away the helpers' socket directories, where empty:
// under $XDG_RUNTIME_DIR, and under ~/.cache where there is none.
const runDirsScript = `for d in ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR"/hpncp} "$HOME"/.cache/hpncp; do rmdir "$d"/run "$d" 2>/dev/null; done; exit 0`

// RemoveHelper takes away every helper hpncp helper install put in p's
// directory on p.Host, the directory, the directories above it that
// install made, and the helpers' socket directories where empty. It
// returns the paths removed.
func RemoveHelper(ctx context.Context, p HelperPlace) ([]string, error) {
	c, logf, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// With the environment hpncp ssh sends: XDG_RUNTIME_DIR may be one.
	if ch, err := openHelper(c, p.Host, "sh -c "+protocol.QuoteArg(runDirsScript), logf); err != nil {
		logf("the helpers' socket directories: %v", err)
	} else {
		io.Copy(io.Discard, ch)
		ch.Close()
	}
	f, err := openHelperFiles(c, p.Host, p.Dir, logf)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.remove(logf)
}

// HelperStatus writes what p.Host has of helpers: its system beside
// p.Binary's, the helpers installed in p's directory (this hpncp's hash
// checked on the server), and whether a helper answers a command there
// as hpncp ssh would start it.
func HelperStatus(ctx context.Context, p HelperPlace, mode string, w io.Writer) error {
	b, berr := openBinary(p.Binary)
	c, logf, err := p.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(w, "host:      %s\n", p.Host)
	uname, err := remoteMachine(ctx, c)
	if err != nil {
		return err
	}
	goos, goarch, known := helper.Machine(uname)
	system := vis.Text(uname)
	if known {
		system += " (" + goos + "/" + goarch + ")"
	}
	fmt.Fprintf(w, "system:    %s\n", system)
	if berr != nil {
		fmt.Fprintf(w, "this hpncp: %v\n", berr)
	} else {
		match := "cannot be installed there: another system"
		if known && goos == b.goos && goarch == b.goarch {
			match = "can be installed there"
		}
		fmt.Fprintf(w, "this hpncp: %s/%s, sha256 %x: %s\n", b.goos, b.goarch, b.sum[:8], match)
	}
	fmt.Fprintf(w, "setting:   %s\n", mode)

	f, err := openHelperFiles(c, p.Host, p.Dir, logf)
	if err != nil {
		return err
	}
	defer f.Close()
	list, err := f.list()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "directory: %s\n", vis.Text(p.Dir))
	if len(list) == 0 {
		fmt.Fprintf(w, "installed: none\n")
	}
	for _, in := range list {
		var note string
		switch {
		case !in.ok:
			note = "no binary in it"
		case berr != nil || in.name != helper.VersionDir(b.sum):
			note = "another build's (hpncp helper remove takes it away)"
		default:
			sum, err := f.s.Sum256(ctx, in.path)
			switch {
			case err != nil:
				note = fmt.Sprintf("this hpncp's, but its hash cannot be checked: %v", err)
			case [32]byte(sum) != b.sum:
				note = "this hpncp's name, but its sha256 differs: it is not run (hpncp helper install puts it back)"
			default:
				note = "this hpncp's, sha256 checked"
			}
		}
		fmt.Fprintf(w, "installed: %s: %s\n", in.name, note)
	}

	s := Shell{Host: p.Host, HelperDir: p.Dir}
	if berr == nil {
		s.bin = knownBinary(b)
	}
	if err := probeHelper(ctx, c, s, logf); err != nil {
		fmt.Fprintf(w, "answers:   no: %v\n", err)
	} else {
		fmt.Fprintf(w, "answers:   yes, helper protocol %d\n", helper.Protocol)
	}
	return nil
}

// probeHelper starts a helper on c as hpncp ssh would and runs "exit 0"
// through it.
func probeHelper(ctx context.Context, c *sshconn.Client, s Shell, logf func(string, ...any)) error {
	first, err := openHelper(c, s.Host, s.helperLine(newJobName(), 1, false), logf)
	if err != nil {
		return err
	}
	defer first.Close()
	var early strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(&early, io.LimitReader(first.Stderr(), 4096))
	}()
	if err := helper.Start(first, "exit 0"); err != nil {
		closeAfterStderr(first, done)
		if msg, ok := helper.CheckFailed(early.String()); ok {
			return errors.New(vis.Text(msg))
		}
		return fmt.Errorf("%v%s", err, quoted(early.String()))
	}
	exit, err := helper.Stripe(ctx, helper.StripeOptions{Channels: []helper.Channel{first},
		Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		return err
	}
	if exit.Status != 0 {
		return fmt.Errorf("exit 0 through it ended with status %d", exit.Status)
	}
	return nil
}
