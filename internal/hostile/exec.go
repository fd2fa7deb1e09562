package hostile

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/bits"
	"path"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/hpncp/hpncp/helper"
)

// exec answers the commands hpncp runs, from the tree or as the scenario
// says; anything else is not found, as on a host without the program.
func (s *Server) exec(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
	t := s.currentTree()
	if strings.Contains(cmd, "tar --version") {
		io.WriteString(stdout, "has zstd\nhas gzip\ntar (GNU tar) 1.35\n")
		return 0
	}
	words := Words(cmd)
	if len(words) == 0 {
		return 0
	}
	switch words[0] {
	case "find":
		return t.find(words[1:], stdout, stderr)
	case "tar":
		return t.tarCreate(words[1:], stdin, stdout, stderr)
	case "sha256sum":
		return t.sha256sum(words[1:], stdout, stderr)
	case "scp":
		return t.scpSource(words[1:], stdin, stdout)
	case HelperPath:
		if len(words) > 1 && words[1] == "serve" && slices.Contains(words, "--delta") {
			// A first request may come in the command line, as
			// hpncp serve takes it.
			if i := slices.Index(words, "--"+helper.RequestFlag); i > 0 && i+1 < len(words) {
				in, err := helper.RequestInput(words[i+1], stdin)
				if err != nil {
					fmt.Fprintf(stderr, "hpncp: %v\n", err)
					return 2
				}
				stdin = in
			}
			return t.serveDelta(stdin, stdout)
		}
	}
	fmt.Fprintf(stderr, "sh: %s: command not found\n", words[0])
	return 127
}

// Words splits a command line as sh would split one made only of words,
// single and double quotes and backslashes, which is all hpncp writes; a
// test reads with it what arguments a command received.
func Words(cmd string) []string {
	var words []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\'':
			in = true
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				j = len(cmd) - i - 1
			}
			cur.WriteString(cmd[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			in = true
			for i++; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) {
					i++
				}
				cur.WriteByte(cmd[i])
			}
		case c == '\\' && i+1 < len(cmd):
			in = true
			i++
			cur.WriteByte(cmd[i])
		case c == ' ' || c == '\t' || c == '\n' || c == ';':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			in = true
			cur.WriteByte(c)
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// find answers "find DIR -type f -links +1 -printf '%D %i %P\0'": the
// files of the tree below DIR with an Ino, walked through the first
// entry of each name as the listings give it, then FindExtra.
func (t *Tree) find(args []string, stdout, stderr io.Writer) int {
	for len(args) > 0 && (args[0] == "-H" || args[0] == "-L" || args[0] == "-P" || args[0] == "--") {
		args = args[1:]
	}
	if len(args) == 0 {
		return 1
	}
	dir, ok := rel(path.Join(Home, args[0]))
	if strings.HasPrefix(args[0], "/") {
		dir, ok = rel(args[0])
	}
	if !ok {
		fmt.Fprintf(stderr, "find: '%s': No such file or directory\n", args[0])
		return 1
	}
	e, real, ok := t.lookup(dir, true)
	if !ok || e.Kind != Dir {
		fmt.Fprintf(stderr, "find: '%s': No such file or directory\n", args[0])
		return 1
	}
	w := bufio.NewWriter(stdout)
	var walk func(d, prefix string, depth int)
	walk = func(d, prefix string, depth int) {
		es, ok := t.list(d)
		if !ok || depth > 64 {
			return
		}
		seen := map[string]bool{}
		for _, e := range es {
			if seen[e.Name] {
				continue
			}
			seen[e.Name] = true
			p := path.Join(prefix, e.Name)
			switch {
			case e.Kind == File && e.Ino != 0:
				fmt.Fprintf(w, "%d %d %s\x00", e.Dev, e.Ino, p)
			case e.Kind == Dir:
				walk(path.Join(d, e.Name), p, depth+1)
			}
		}
	}
	walk(real, "", 0)
	for _, r := range t.FindExtra {
		w.WriteString(r + "\x00")
	}
	w.Flush()
	return 0
}

// tarCreate answers "tar -c -f - -h … [--zstd|-z] -C DIR --null -T -".
func (t *Tree) tarCreate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var dir, compress string
	create := false
	for i, a := range args {
		switch a {
		case "-c":
			create = true
		case "--zstd":
			compress = "zstd"
		case "-z":
			compress = "gzip"
		case "-C":
			if i+1 < len(args) {
				dir = args[i+1]
			}
		}
	}
	if !create {
		io.WriteString(stderr, "tar: this server only creates archives\n")
		return 2
	}
	raw, _ := io.ReadAll(stdin)
	var names []string
	for _, n := range bytes.Split(raw, []byte{0}) {
		if len(n) > 0 {
			names = append(names, string(n))
		}
	}
	if t.TarCreate != nil {
		t.TarCreate(stdout, dir, names, compress)
		return 0
	}
	base, ok := rel(path.Join(Home, dir))
	if strings.HasPrefix(dir, "/") {
		base, ok = rel(dir)
	}
	if !ok {
		fmt.Fprintf(stderr, "tar: %s: Cannot open: No such file or directory\n", dir)
		return 2
	}
	files := make([]TarFile, 0, len(names))
	status := 0
	for _, n := range names {
		e, _, ok := t.lookup(path.Join(base, n), true)
		if !ok || e.Kind == Symlink {
			fmt.Fprintf(stderr, "tar: %s: Cannot stat: No such file or directory\n", n)
			status = 2
			continue
		}
		files = append(files, TarFile{Name: n, Entry: e})
	}
	if err := WriteTar(stdout, files, compress, 0); err != nil {
		return 2
	}
	return status
}

// TarFile is one member of an archive WriteTar writes.
type TarFile struct {
	Name string
	Entry
}

// WriteTar writes files as a tar archive, compressed with compress ("",
// "zstd" or "gzip"); window, when not 0, is the window a zstd frame
// claims, whatever the data needs.
func WriteTar(w io.Writer, files []TarFile, compress string, window int) error {
	if compress == "zstd" && window != 0 {
		var tarball bytes.Buffer
		if err := WriteTar(&tarball, files, "", 0); err != nil {
			return err
		}
		return writeZstdFrame(w, tarball.Bytes(), window)
	}
	var cw io.WriteCloser
	switch compress {
	case "zstd":
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return err
		}
		cw = zw
	case "gzip":
		cw = gzip.NewWriter(w)
	default:
		cw = nopCloser{w}
	}
	tw := tar.NewWriter(cw)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Mode: int64(f.perm()), ModTime: info{f.Entry}.ModTime(), Format: tar.FormatPAX}
		switch f.Kind {
		case Dir:
			h.Typeflag = tar.TypeDir
		case Symlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Target
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return cw.Close()
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// sha256sum answers "sha256sum [--] FILE…" from the tree, or with Sums.
func (t *Tree) sha256sum(args []string, stdout, stderr io.Writer) int {
	status := 0
	for _, a := range args {
		if a == "--" || strings.HasPrefix(a, "-") && len(a) > 1 {
			continue
		}
		p, ok := rel(path.Join(Home, a))
		if strings.HasPrefix(a, "/") {
			p, ok = rel(a)
		}
		if sum, lie := t.Sums[p]; lie {
			fmt.Fprintf(stdout, "%s  %s\n", sum, a)
			continue
		}
		e, _, found := t.lookup(p, true)
		if !ok || !found || e.Kind != File {
			fmt.Fprintf(stderr, "sha256sum: %s: No such file or directory\n", a)
			status = 1
			continue
		}
		sum := sha256.Sum256(e.Data)
		fmt.Fprintf(stdout, "%s  %s\n", hex.EncodeToString(sum[:]), a)
	}
	return status
}

// scpSource answers "scp [-r] [-p] [-d] -f [--] PATH" as a source: the
// listings in their order, duplicates and all, links followed as scp
// follows them.
func (t *Tree) scpSource(args []string, stdin io.Reader, stdout io.Writer) int {
	var recursive, preserve, from bool
	var paths []string
	dashes := false
	for _, a := range args {
		switch {
		case dashes || !strings.HasPrefix(a, "-"):
			paths = append(paths, a)
		case a == "--":
			dashes = true
		default:
			recursive = recursive || strings.Contains(a, "r")
			preserve = preserve || strings.Contains(a, "p")
			from = from || strings.Contains(a, "f")
		}
	}
	if !from {
		io.WriteString(stdout, "\x02scp: this server only sends\n")
		return 1
	}
	r := bufio.NewReader(stdin)
	ack := func() bool {
		b, err := r.ReadByte()
		return err == nil && b == 0
	}
	if !ack() {
		return 1
	}
	status := 0
	var send func(p, name string, e Entry, depth int) bool
	send = func(p, name string, e Entry, depth int) bool {
		if e.Kind == Symlink {
			fe, _, ok := t.lookup(p, true)
			if !ok {
				fmt.Fprintf(stdout, "\x01scp: %s: No such file or directory\n", p)
				status = 1
				return true
			}
			e = fe
		}
		if preserve {
			io.WriteString(stdout, "T1700000000 0 1700000000 0\n")
			if !ack() {
				return false
			}
		}
		switch e.Kind {
		case Dir:
			if !recursive {
				fmt.Fprintf(stdout, "\x01scp: %s: not a regular file\n", p)
				status = 1
				return true
			}
			if depth > 300 {
				return false
			}
			fmt.Fprintf(stdout, "D%04o 0 %s\n", e.perm(), name)
			if !ack() {
				return false
			}
			_, real, _ := t.lookup(p, true)
			es, _ := t.list(real)
			for _, c := range es {
				if !send(path.Join(p, c.Name), c.Name, c, depth+1) {
					return false
				}
			}
			io.WriteString(stdout, "E\n")
			return ack()
		default:
			fmt.Fprintf(stdout, "C%04o %d %s\n", e.perm(), len(e.Data), name)
			if !ack() {
				return false
			}
			stdout.Write(e.Data)
			stdout.Write([]byte{0})
			return ack()
		}
	}
	for _, a := range paths {
		p, ok := rel(path.Join(Home, a))
		if strings.HasPrefix(a, "/") {
			p, ok = rel(a)
		}
		e, _, found := t.lookup(p, false)
		if !ok || !found {
			fmt.Fprintf(stdout, "\x01scp: %s: No such file or directory\n", a)
			status = 1
			continue
		}
		if !send(p, path.Base("/"+p), e, 0) {
			return 1
		}
	}
	return status
}

// writeZstdFrame writes data as one zstd frame of raw blocks whose header
// claims window (a power of two of 1 KiB or more) and no content size,
// so that a decoder believing it must be ready to keep that much; no
// encoder writes such a frame for little data, it fits the window to it
// (RFC 8878, 3.1.1).
func writeZstdFrame(w io.Writer, data []byte, window int) error {
	exp := bits.Len(uint(window)) - 1
	if window < 1<<10 || window != 1<<exp {
		return fmt.Errorf("zstd window %d: want a power of two of 1 KiB or more", window)
	}
	// Magic number, a descriptor with no flags (so a window descriptor
	// follows), and the window's exponent above 2^10, mantissa 0.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte(exp-10) << 3}
	const maxBlock = 128 << 10
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), maxBlock)
		last := 0
		if n == len(data) {
			last = 1
		}
		h := uint32(last) | uint32(n)<<3 // block type 0: raw
		frame = append(frame, byte(h), byte(h>>8), byte(h>>16))
		frame = append(frame, data[:n]...)
		data = data[n:]
	}
	_, err := w.Write(frame)
	return err
}
