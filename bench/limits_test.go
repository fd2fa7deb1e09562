package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/protocol"
)

// fakeChannel is a channel whose client side is scripted: Read returns
// the client's packets, Write collects what the server side sends.
type fakeChannel struct {
	in  io.Reader
	out bytes.Buffer
}

func (c *fakeChannel) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *fakeChannel) Write(p []byte) (int, error) { return c.out.Write(p) }
func (c *fakeChannel) Close() error                { return nil }

func packet(typ byte, body ...[]byte) []byte {
	p := []byte{0, 0, 0, 0, typ}
	for _, b := range body {
		p = append(p, b...)
	}
	binary.BigEndian.PutUint32(p, uint32(len(p)-4))
	return p
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// packets splits a stream into its packets.
func packets(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("%d bytes left over", len(b))
		}
		n := 4 + int(binary.BigEndian.Uint32(b))
		if n > len(b) {
			t.Fatalf("packet of %d bytes, %d left", n, len(b))
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// TestLimitsFilter: the server never sees a limits request; its VERSION
// reply gains the extension; the filter's reply goes out whole, after the
// VERSION and never inside another reply.
func TestLimitsFilter(t *testing.T) {
	initPkt := packet(1, u32(3))
	limitsReq := packet(sftpExtended, u32(7), appendString(nil, limitsExtension))
	readPkt := packet(5, u32(8), appendString(nil, "h"), make([]byte, 12))
	ch := &fakeChannel{in: bytes.NewReader(bytes.Join([][]byte{initPkt, limitsReq, readPkt}, nil))}
	f := newLimitsFilter(ch)

	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte{}, initPkt...), readPkt...); !bytes.Equal(got, want) {
		t.Fatalf("the server read % x, want % x", got, want)
	}
	if ch.out.Len() != 0 {
		t.Fatalf("%d bytes sent before the VERSION reply", ch.out.Len())
	}

	version := packet(sftpVersion, u32(3), appendString(nil, "posix-rename@openssh.com"), appendString(nil, "1"))
	data := packet(103, u32(8), u32(10), []byte("0123456789"))
	// The VERSION in two writes, a DATA reply's header and payload apart.
	for _, w := range [][]byte{version[:3], version[3:], data[:13], data[13:]} {
		if n, err := f.Write(w); err != nil || n != len(w) {
			t.Fatalf("Write of %d bytes: %d, %v", len(w), n, err)
		}
	}
	ps := packets(t, ch.out.Bytes())
	if len(ps) != 3 {
		t.Fatalf("sent %d packets, want VERSION, the limits reply, DATA", len(ps))
	}
	if !bytes.Contains(ps[0], appendString(nil, limitsExtension)) || !bytes.Contains(ps[0], []byte("posix-rename")) {
		t.Errorf("VERSION reply % x lacks an extension", ps[0])
	}
	r := ps[1]
	if r[4] != sftpExtendedReply || binary.BigEndian.Uint32(r[5:]) != 7 || len(r) != 9+32 {
		t.Fatalf("limits reply % x", r)
	}
	if rd, wr := binary.BigEndian.Uint64(r[17:]), binary.BigEndian.Uint64(r[25:]); rd != demoMaxPacket || wr != demoMaxPacket {
		t.Errorf("limits read %d write %d, want %d", rd, wr, demoMaxPacket)
	}
	if !bytes.Equal(ps[2], data) {
		t.Errorf("DATA reply came out as % x", ps[2])
	}

	// Between two replies the filter's reply goes out at once; inside
	// one, after it.
	ch.out.Reset()
	if err := f.inject(packet(sftpExtendedReply, u32(9))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data[:13]); err != nil {
		t.Fatal(err)
	}
	if err := f.inject(packet(sftpExtendedReply, u32(10))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data[13:]); err != nil {
		t.Fatal(err)
	}
	ps = packets(t, ch.out.Bytes())
	if len(ps) != 3 || binary.BigEndian.Uint32(ps[0][5:]) != 9 || !bytes.Equal(ps[1], data) || binary.BigEndian.Uint32(ps[2][5:]) != 10 {
		t.Errorf("replies interleaved: % x", ps)
	}
}

// TestDemoLimits: hpncp's own query finds OpenSSH's limits on the demo
// server, and requests of that size move every byte both ways.
func TestDemoLimits(t *testing.T) {
	d, err := StartDemo(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := dialDemo(t, d)
	defer c.Close()
	lim, err := protocol.QueryLimits(c)
	if err != nil {
		t.Fatal(err)
	}
	if lim.MaxRead != demoMaxPacket || lim.MaxWrite != demoMaxPacket || lim.Packet() != demoMaxPacket {
		t.Fatalf("limits %+v, want read and write %d", lim, demoMaxPacket)
	}

	sc, err := sftp.NewClient(c, sftp.MaxPacketUnchecked(lim.Packet()),
		sftp.UseConcurrentWrites(true), sftp.UseConcurrentReads(true))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	data := make([]byte, 3<<20+12345)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	f, err := sc.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(d.Root, "big"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("server's copy: %d bytes, %v; want %d bytes as sent", len(onDisk), err, len(data))
	}
	f, err = sc.Open("big")
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := f.WriteTo(&back); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(back.Bytes(), data) {
		t.Fatalf("read back %d bytes, not the %d written", back.Len(), len(data))
	}
}

// dialDemo connects to d as its ssh_config says.
func dialDemo(t *testing.T, d *Demo) *ssh.Client {
	t.Helper()
	keyPEM, err := os.ReadFile(filepath.Join(d.dir, "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", d.Relay.Addr, &ssh.ClientConfig{
		User: "demo", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
