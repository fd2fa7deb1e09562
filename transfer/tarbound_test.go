package transfer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hpncp/hpncp/protocol"
)

// A download's compressed stream is bounded: a zstd frame may not ask
// for a window above zstdMaxWindow, and no stream may expand to more
// than the listing promised.

// compressingRemote is a server whose tar compresses, with gzip alone
// when gzip is set, with zstd otherwise: archive makes the compressed
// stream of the names its tar -c was handed, all of them, in order.
type compressingRemote struct {
	Local
	gzip    bool
	archive func(t *testing.T, dir string, names []string) []byte
	t       *testing.T
}

func (*compressingRemote) Label() string { return "fake:" }

func (c *compressingRemote) TarProbe(context.Context) (protocol.TarSupport, error) {
	return protocol.TarSupport{GNU: true, Version: "tar (GNU tar) 1.35", Zstd: !c.gzip, Gzip: true}, nil
}

func (*compressingRemote) TarExtract(context.Context, string, protocol.TarOptions) (io.WriteCloser, error) {
	return nil, errors.New("compressingRemote: only creates")
}

func (c *compressingRemote) TarCreate(_ context.Context, dir string, names iter.Seq[[]string], _ protocol.TarOptions) (io.ReadCloser, error) {
	var all []string
	for batch := range names {
		all = append(all, batch...)
	}
	return io.NopCloser(bytes.NewReader(c.archive(c.t, dir, all))), nil
}

// tarOf is the archive GNU tar would send of names in dir.
func tarOf(t *testing.T, dir string, names []string) []byte {
	var b bytes.Buffer
	rc := serveTar(dir, func(yield func([]string) bool) { yield(names) }, nil, "")
	if _, err := io.Copy(&b, rc); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombTar is an archive whose first entry claims size bytes of zeros,
// whatever its file's listed size, and whose other entries are empty.
func bombTar(t *testing.T, names []string, size int64) (head []byte, zeros int64) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i, n := range names {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: "./" + n, Mode: 0o644}
		if i == 0 {
			h.Size = size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The first entry's body and the rest follow as zeros:
			// empty headers are not needed, the end marker is zeros.
			return b.Bytes(), size + 1024
		}
	}
	return b.Bytes(), 1024
}

// zstdFrame is a zstd frame whose header claims a window of 1<<windowLog
// bytes, holding data in raw blocks and then zeros bytes of zeros in RLE
// blocks: a few bytes on the wire for each 128 KiB decoded.
func zstdFrame(windowLog int, data []byte, zeros int64) []byte {
	// Magic number; a descriptor with no content size, no checksum, no
	// dictionary and not single-segment, so a window descriptor
	// follows: exponent in its high five bits, no mantissa.
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte(windowLog-10) << 3}
	block := func(last bool, typ, size int, body []byte) {
		h := uint32(size)<<3 | uint32(typ)<<1
		if last {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16))
		b = append(b, body...)
	}
	const most = 128 << 10
	for len(data) > 0 {
		n := min(len(data), most)
		block(false, 0, n, data[:n])
		data = data[n:]
	}
	for zeros > 0 {
		n := min(zeros, most)
		block(false, 1, int(n), []byte{0})
		zeros -= n
	}
	block(true, 0, 0, nil)
	return b
}

func gzipped(t *testing.T, data []byte, zeros int64) []byte {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(data)
	chunk := make([]byte, 1<<20)
	for zeros > 0 {
		n := min(zeros, int64(len(chunk)))
		zw.Write(chunk[:n])
		zeros -= n
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTarDownloadDecompressionBounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		archive func(t *testing.T, dir string, names []string) []byte
		want    string // the error, or "" when the copy must succeed
	}{
		{"gzip", func(t *testing.T, dir string, names []string) []byte {
			return gzipped(t, tarOf(t, dir, names), 0)
		}, ""},
		{"zstd at hpncp's own window", func(t *testing.T, dir string, names []string) []byte {
			var b bytes.Buffer
			zw, err := zstdWriter(&b)
			if err != nil {
				t.Fatal(err)
			}
			zw.Write(tarOf(t, dir, names))
			zw.Close()
			return b.Bytes()
		}, ""},
		{"zstd at the bound", func(t *testing.T, dir string, names []string) []byte {
			return zstdFrame(24, tarOf(t, dir, names), 0)
		}, ""},
		// 512 MiB, the most klauspost/compress takes by default, and a
		// 600 MiB entry to fill it: a decoder without the bound holds
		// about 545 MB.
		{"zstd window of 512 MiB", func(t *testing.T, dir string, names []string) []byte {
			head, zeros := bombTar(t, names, 600<<20)
			return zstdFrame(29, head, zeros)
		}, "a zstd frame asks for a window larger than hpncp's bound of 16 MiB"},
		{"zstd window of 2 GiB", func(t *testing.T, dir string, names []string) []byte {
			head, zeros := bombTar(t, names, 1<<20)
			return zstdFrame(31, head, zeros)
		}, "a zstd frame asks for a window larger than hpncp's bound of 16 MiB"},
		// A file listed with a few bytes, sent as 100 MiB of zeros:
		// about 100 KiB of gzip.
		{"gzip bomb", func(t *testing.T, dir string, names []string) []byte {
			head, zeros := bombTar(t, names, 100<<20)
			return gzipped(t, head, zeros)
		}, "the stream expands to more than the listing promised"},
		{"zstd bomb", func(t *testing.T, dir string, names []string) []byte {
			head, zeros := bombTar(t, names, 100<<20)
			return zstdFrame(20, head, zeros)
		}, "the stream expands to more than the listing promised"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "tree")
			write(t, filepath.Join(src, "a"), "aaa")
			write(t, filepath.Join(src, "b"), "bbbb")
			target := filepath.Join(t.TempDir(), "tree")
			from := Endpoint{&compressingRemote{archive: tc.archive, t: t, gzip: strings.HasPrefix(tc.name, "gzip")}, src}
			var logs []string
			res, err := Copy(context.Background(), []Endpoint{from}, local(target), Options{Recursive: true,
				Tar:  TarOptions{Mode: TarForce, Compress: true},
				Logf: func(f string, a ...any) { logs = append(logs, f) }})
			if err == nil && res != nil {
				err = errors.Join(res.Errors...)
			}
			if !strings.Contains(strings.Join(logs, "\n"), "tar: %d files") {
				t.Fatalf("the copy did not go over tar: %q", logs)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(tree(t, target), " "); got != "a:aaa b:bbbb" {
					t.Errorf("target holds %q", got)
				}
				return
			}
			// The error names the stream and the source.
			if err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "decompress tar stream ") || !strings.Contains(err.Error(), "fake:"+src) {
				t.Fatalf("error %v, want the stream of fake:%s named and %q", err, src, tc.want)
			}
			if got := files(t, target); len(got) != 0 {
				t.Errorf("target holds %q, want no file", got)
			}
		})
	}
}

// TestZstdWriterWindow: what hpncp compresses, hpncp's decoder takes.
func TestZstdWriterWindow(t *testing.T) {
	var b bytes.Buffer
	zw, err := zstdWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("hpncp "), 1<<20)
	zw.Write(data)
	zw.Close()
	var h zstd.Header
	if err := h.Decode(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if h.WindowSize == 0 || h.WindowSize > zstdMaxWindow {
		t.Errorf("hpncp's encoder writes a window of %d bytes, hpncp's decoder takes %d at most", h.WindowSize, zstdMaxWindow)
	}
	zr, err := newZstdReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("decoded %d bytes, err %v; want the %d written", len(got), err, len(data))
	}
}
