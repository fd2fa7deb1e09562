package hostile

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// TestHostileListsDuplicates checks that the server lists what the tree
// says, one name twice included, and stats each name by its first entry.
func TestHostileListsDuplicates(t *testing.T) {
	tr := NewTree()
	tr.File("src/x", "x")
	tr.DirAt("src/d")
	tr.Link("src/d", "/elsewhere")
	srv := Start(t, Options{Tree: tr})
	key, err := os.ReadFile(srv.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	fis, err := sc.ReadDir("src")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fi := range fis {
		got = append(got, fi.Name()+" "+fi.Mode().Type().String())
	}
	want := []string{"x ----------", "d d---------", "d L---------"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listing %q, want %q", got, want)
	}
	if fi, err := sc.Lstat("src/d"); err != nil || !fi.IsDir() {
		t.Errorf("lstat src/d: %v, %v; want the first entry, a directory", fi, err)
	}
	if _, err := sc.Create("src/new"); err == nil {
		t.Errorf("a write was accepted")
	}
}

// TestHostileWords checks the command lines hpncp writes split as sh
// splits them.
func TestHostileWords(t *testing.T) {
	got := Words(`find '-del'\''ete' -printf '%D %i %P\0'`)
	want := []string{"find", "-del'ete", "-printf", `%D %i %P\0`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Words = %q, want %q", got, want)
	}
}

// TestHostileZstdWindowClaim checks that WriteTar's frame claims the
// window it is given, which is what a test of a bounded decoder needs.
func TestHostileZstdWindowClaim(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTar(&buf, []TarFile{{Name: "f", Entry: Entry{Data: []byte("data")}}}, "zstd", 512<<20); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if h.WindowSize != 512<<20 {
		t.Errorf("the frame claims a window of %d bytes, want %d", h.WindowSize, 512<<20)
	}
}
