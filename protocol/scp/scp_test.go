package scp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line string
		want Record
		err  string // a part of the error; "" when the line is valid
	}{
		{line: "C0644 5 file", want: Record{Type: File, Mode: 0o644, Size: 5, Name: "file"}},
		{line: "C0755 0 name with spaces", want: Record{Type: File, Mode: 0o755, Name: "name with spaces"}},
		{line: "C4755 1 suid", want: Record{Type: File, Mode: 0o755 | fs.ModeSetuid, Size: 1, Name: "suid"}},
		{line: "D2775 0 shared", want: Record{Type: Dir, Mode: 0o775 | fs.ModeSetgid, Name: "shared"}},
		{line: "D1777 0 tmp", want: Record{Type: Dir, Mode: 0o777 | fs.ModeSticky, Name: "tmp"}},
		{line: "C0644 1125899906842624 huge", want: Record{Type: File, Mode: 0o644, Size: MaxFileSize, Name: "huge"}},
		{line: "C0600 007 lead", want: Record{Type: File, Mode: 0o600, Size: 7, Name: "lead"}},
		{line: "C0644 3 ünïcödé-名前", want: Record{Type: File, Mode: 0o644, Size: 3, Name: "ünïcödé-名前"}},
		{line: "C0644 3 -leading-dash", want: Record{Type: File, Mode: 0o644, Size: 3, Name: "-leading-dash"}},
		{line: "C0644 3 a\\b", want: Record{Type: File, Mode: 0o644, Size: 3, Name: `a\b`}},
		{line: "E", want: Record{Type: End}},
		{line: "T1000000000 0 1000000001 999999", want: Record{Type: Time, Times: true,
			Mtime: time.Unix(1e9, 0), Atime: time.Unix(1e9+1, 999999000)}},
		{line: "\x01scp: /x: No such file or directory", want: Record{Type: Warning, Message: "scp: /x: No such file or directory"}},
		{line: "\x02scp: \x1b[2Jgone", want: Record{Type: Fatal, Message: `scp: \033[2Jgone`}},

		{line: "", err: "empty line"},
		{line: "C0644 5 ../evil", err: "contains a slash"},
		{line: "C0644 5 /etc/passwd", err: "contains a slash"},
		{line: "C0644 5 a/b", err: "contains a slash"},
		{line: "C0644 5 ..", err: `file name ".."`},
		{line: "D0755 0 .", err: `file name "."`},
		{line: "C0644 5 ", err: "empty file name"},
		{line: "C0644 5", err: "no name"},
		{line: "C0644 5 bad\x1b[31m", err: "control character"},
		{line: "C0644 5 tab\there", err: "control character"},
		{line: "C0644 5 del\x7f", err: "control character"},
		{line: "C0644 5 nul\x00", err: "control character"},
		{line: "C0644 5 " + strings.Repeat("x", 256), err: "256 bytes"},
		{line: "C0644 -5 file", err: "size"},
		{line: "C0644 +5 file", err: "size"},
		{line: "C0644 abc file", err: "size"},
		{line: "C0644 0x10 file", err: "size"},
		{line: "C0644 1125899906842625 file", err: "size"},
		{line: "C0644 99999999999999999999 file", err: "size"},
		{line: "C0644  5 file", err: "size"},
		{line: "C644 5 file", err: "mode"},
		{line: "C06440 5 file", err: "mode"},
		{line: "C0648 5 file", err: "mode"},
		{line: "C-644 5 file", err: "mode"},
		{line: "C", err: "mode"},
		{line: "E ", err: "trailing text"},
		{line: "Ex", err: "trailing text"},
		{line: "T1 0 2", err: "malformed time"},
		{line: "T1 0 2 0 ", err: "malformed time"},
		{line: "T-1 0 2 0", err: "time out of range"},
		{line: "T1 1000000 2 0", err: "time out of range"},
		{line: "T1 0 2 -1", err: "time out of range"},
		{line: "T253402300800 0 2 0", err: "time out of range"},
		{line: "T1  0 2 0", err: "malformed time"},
		{line: "Welcome to the server!", err: "unexpected line"},
		{line: "C0644 5 a\nC0644 5 b", err: "newline"},
		{line: "C0644 5 " + strings.Repeat("x", maxSCPLine), err: "line of"},
	}
	for _, tt := range tests {
		got, err := parseLine(tt.line)
		if tt.err != "" {
			if err == nil || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseLine(%q) = %+v, %v; want an ErrProtocol error containing %q", tt.line, got, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseLine(%q): %v", tt.line, err)
			continue
		}
		if !sameRecord(got, tt.want) {
			t.Errorf("parseLine(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

func sameRecord(a, b Record) bool {
	return a.Type == b.Type && a.Mode == b.Mode && a.Size == b.Size && a.Name == b.Name &&
		a.Times == b.Times && a.Mtime.Equal(b.Mtime) && a.Atime.Equal(b.Atime) && a.Message == b.Message
}

func TestRecordLine(t *testing.T) {
	tests := []struct {
		rec  Record
		want string
	}{
		{Record{Type: File, Mode: 0o644, Size: 5, Name: "f"}, "C0644 5 f"},
		{Record{Type: File, Mode: 0o755 | fs.ModeSetuid | fs.ModeSetgid, Size: 0, Name: "s"}, "C6755 0 s"},
		{Record{Type: Dir, Mode: 0o700 | fs.ModeSticky, Name: "d"}, "D1700 0 d"},
		{Record{Type: End}, "E"},
		{Record{Type: Time, Mtime: time.Unix(1e9, 123456789), Atime: time.Unix(5, 0)}, "T1000000000 123456 5 0"},
		// Times before 1970 go as 1970, as OpenSSH's scp sends them.
		{Record{Type: Time, Mtime: time.Unix(-100, 0), Atime: time.Unix(-1, 5)}, "T0 0 0 0"},
		{Record{Type: Warning, Message: "no\nway"}, "\x01no\\012way"},
	}
	for _, tt := range tests {
		if got := tt.rec.Line(); got != tt.want {
			t.Errorf("%+v.Line() = %q, want %q", tt.rec, got, tt.want)
		}
	}
}

// FuzzParseLine checks that no line makes the parser panic, and that
// whatever it accepts is safe to act on and survives a round trip.
// Run it with: go test -run='^$' -fuzz=FuzzParseLine -fuzztime=60s ./protocol
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"C0644 5 file", "D0755 0 dir", "E", "T1000000000 0 1000000000 0",
		"\x01scp: warning", "\x02scp: fatal", "C0644 5 ../evil", "C4755 1 x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		rec, err := parseLine(line)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("parseLine(%q): error %v does not wrap ErrProtocol", line, err)
			}
			return
		}
		switch rec.Type {
		case File, Dir:
			if err := checkSCPName(rec.Name); err != nil {
				t.Fatalf("parseLine(%q) accepted name %q: %v", line, rec.Name, err)
			}
			if rec.Size < 0 || rec.Size > MaxFileSize {
				t.Fatalf("parseLine(%q) accepted size %d", line, rec.Size)
			}
			if rec.Mode&^(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				t.Fatalf("parseLine(%q) gave mode %v", line, rec.Mode)
			}
		case Time:
			for _, tm := range []time.Time{rec.Mtime, rec.Atime} {
				if tm.Unix() < 0 || tm.Unix() > maxSCPTime {
					t.Fatalf("parseLine(%q) accepted time %v", line, tm)
				}
			}
		case Warning, Fatal:
			if vis.String(rec.Message) != rec.Message {
				t.Fatalf("parseLine(%q) gave an unprintable message %q", line, rec.Message)
			}
		case End:
		default:
			t.Fatalf("parseLine(%q) gave type %q", line, rec.Type)
		}
		again, err := parseLine(rec.Line())
		if err != nil || !sameRecord(rec, again) {
			t.Fatalf("parseLine(%q) = %+v, whose Line %q parses as %+v, %v", line, rec, rec.Line(), again, err)
		}
	})
}

// TestQuoteRemote runs quoted words through a real shell: they must come
// out as they went in, with only the glob characters of patterns active.
func TestQuoteRemote(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a1", "a2", "b c"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pwned := filepath.Join(dir, "pwned")
	sh := func(word string) string {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", `printf '%s\n' `+word)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh -c printf %s: %v", word, err)
		}
		return strings.TrimSuffix(string(out), "\n")
	}
	hostile := []string{
		"plain", "with space", "it's", "'", "''", `a\b`, "$HOME", "$(touch " + pwned + ")",
		"`touch " + pwned + "`", "; touch " + pwned, "x\ny", "-rf", "~", "!", `"`, "",
	}
	for _, s := range hostile {
		if got := sh(protocol.QuoteArg(s)); got != s {
			t.Errorf("protocol.QuoteArg(%q) reached the shell as %q", s, got)
		}
		if got := sh(quoteRemotePattern(s)); got != s {
			t.Errorf("quoteRemotePattern(%q) reached the shell as %q", s, got)
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a quoted word ran a command")
	}
	if got, want := sh(quoteRemotePattern(dir+"/a*")), dir+"/a1\n"+dir+"/a2"; got != want {
		t.Errorf("pattern a* expanded to %q, want %q", got, want)
	}
	if got, want := sh(quoteRemotePattern(dir+"/b ?")), dir+"/b c"; got != want {
		t.Errorf("pattern 'b ?' expanded to %q, want %q", got, want)
	}
	if got, want := sh(quoteRemotePattern(dir+"/a[2]")), dir+"/a2"; got != want {
		t.Errorf("pattern a[2] expanded to %q, want %q", got, want)
	}
	if got, want := sh(protocol.QuoteArg(dir+"/a*")), dir+"/a*"; got != want {
		t.Errorf("quoteRemote let a pattern expand: %q", got)
	}
}

// peer is the server side of an exec'd scp in a test: it answers with
// the script's function and records the command and what the client sent.
type peer struct {
	cmds chan string
	got  chan []byte
}

func startPeer(t *testing.T, script func(r *bufio.Reader, w io.Writer) error) (*Host, *peer) {
	t.Helper()
	p := &peer{cmds: make(chan string, 10), got: make(chan []byte, 10)}
	srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, _ io.Writer) int {
		p.cmds <- cmd
		var rec bytes.Buffer
		err := script(bufio.NewReader(io.TeeReader(stdin, &rec)), stdout)
		if err != nil {
			t.Errorf("scp peer: %v", err)
		}
		if cw, ok := stdout.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		// Wait for the client to hang up, so that it reads everything.
		io.Copy(&rec, stdin)
		p.got <- rec.Bytes()
		if err != nil {
			return 1
		}
		return 0
	}})
	return NewHost(srv.Dial(t), "testhost:"), p
}

// expect reads want from r.
func expect(r *bufio.Reader, want string) error {
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		return err
	}
	if string(got) != want {
		return errors.New("got " + strconvQuote(got) + ", want " + strconvQuote([]byte(want)))
	}
	return nil
}

func strconvQuote(b []byte) string { return quoteLine(string(b)) }

func TestReceiverFollowsTheProtocol(t *testing.T) {
	scp, p := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
		steps := []struct{ send, want string }{
			{"", "\x00"},
			{"T1000000000 0 1000000001 0\n", "\x00"},
			{"D0755 0 dir\n", "\x00"},
			{"C0640 5 f\n", "\x00"},
			{"hello\x00", "\x00"},
			{"C0644 3 skipped\n", "\x01"},
		}
		for _, s := range steps {
			io.WriteString(w, s.send)
			if err := expect(r, s.want); err != nil {
				return err
			}
		}
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
		io.WriteString(w, "\x01scp: dir/unreadable: Permission denied\nE\n")
		return expect(r, "\x00")
	})
	rcv, err := scp.Receive(context.Background(), "/srv/dir", Options{Recursive: true, Preserve: true})
	if err != nil {
		t.Fatal(err)
	}
	if cmd := <-p.cmds; cmd != "scp -r -p -f -- '/srv/dir'" {
		t.Errorf("command %q", cmd)
	}
	rec, err := rcv.Next()
	if err != nil || rec.Type != Dir || rec.Name != "dir" || !rec.Times || rec.Mtime.Unix() != 1e9 {
		t.Fatalf("Next = %+v, %v; want directory dir with times", rec, err)
	}
	if err := rcv.Reply(nil); err != nil {
		t.Fatal(err)
	}
	rec, err = rcv.Next()
	if err != nil || rec.Type != File || rec.Name != "f" || rec.Size != 5 || rec.Mode != 0o640 || rec.Times {
		t.Fatalf("Next = %+v, %v; want file f", rec, err)
	}
	if err := rcv.Reply(nil); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rcv)
	if err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	if err := rcv.FinishBody(); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Reply(nil); err != nil {
		t.Fatal(err)
	}
	if rec, err = rcv.Next(); err != nil || rec.Name != "skipped" {
		t.Fatalf("Next = %+v, %v", rec, err)
	}
	if err := rcv.Reply(errors.New("not wanted")); err != nil {
		t.Fatal(err)
	}
	var se *Error
	if _, err := rcv.Next(); !errors.As(err, &se) || se.Fatal || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("Next = %v, want the server's warning", err)
	}
	if rec, err = rcv.Next(); err != nil || rec.Type != End {
		t.Fatalf("Next = %+v, %v; want the end of dir", rec, err)
	}
	if _, err := rcv.Next(); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	if err := rcv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(<-p.got); !strings.Contains(got, "\x01scp: not wanted\n") {
		t.Errorf("the refusal did not reach the server: %q", got)
	}
}

// TestReceiverRefusesHostileServers feeds the receiver what a
// malicious "scp -f" could send; each must end the session with an
// ErrProtocol error before the entry is handed on.
func TestReceiverRefusesHostileServers(t *testing.T) {
	tests := []struct {
		name, req string
		recursive bool
		send      string
		err       string
	}{
		{"parent", "file", false, "C0644 5 ../evil\n", "contains a slash"},
		{"absolute", "file", false, "C0644 5 /etc/passwd\n", "contains a slash"},
		{"other name", "file", false, "C0644 5 other\n", `sent "other" where "file" was asked for`},
		{"dir for file", "file", false, "D0755 0 file\n", "where a file was asked for"},
		{"second entry", "file", false, "C0644 1 file\nx\x00C0644 1 file\n", "second entry"},
		{"pattern mismatch", "logs/*.gz", false, "C0644 1 a.txt\n", `"a.txt" where "*.gz"`},
		{"dot dot dir", "d", true, "D0755 0 d\nD0755 0 ..\n", `file name ".."`},
		{"end at top", "d", true, "E\n", "never sent"},
		{"two times", "f", false, "T1 0 1 0\nT1 0 1 0\n", "two time lines"},
		{"time before end", "d", true, "D0755 0 d\nT1 0 1 0\nE\n", "time line before the end"},
		{"banner", "f", false, "Last login: yesterday\n", "unexpected line"},
		{"no newline", "f", false, strings.Repeat("C", 70000), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scp, _ := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
				if err := expect(r, "\x00"); err != nil {
					return err
				}
				// The client may hang up before all of it is written.
				io.WriteString(w, tt.send)
				return nil
			})
			rcv, err := scp.Receive(context.Background(), tt.req, Options{Recursive: tt.recursive})
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			for {
				rec, err := rcv.Next()
				if err != nil {
					if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.err) {
						t.Fatalf("Next: %v; want an ErrProtocol error containing %q", err, tt.err)
					}
					return
				}
				if rec.Type == End {
					continue
				}
				if err := rcv.Reply(nil); err != nil {
					t.Fatalf("Reply: %v", err)
				}
				if rec.Type == File {
					if _, err := io.Copy(io.Discard, rcv); err != nil {
						t.Fatalf("Read: %v", err)
					}
					if err := rcv.FinishBody(); err != nil {
						t.Fatalf("FinishBody: %v", err)
					}
					if err := rcv.Reply(nil); err != nil {
						t.Fatalf("Reply: %v", err)
					}
				}
			}
		})
	}
}

func TestReceiverShortFile(t *testing.T) {
	scp, _ := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
		if err := expect(r, "\x00"); err != nil {
			return err
		}
		io.WriteString(w, "C0644 1000 f\n")
		if err := expect(r, "\x00"); err != nil {
			return err
		}
		_, err := io.WriteString(w, "only ten b")
		return err
	})
	rcv, err := scp.Receive(context.Background(), "f", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	if _, err := rcv.Next(); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Reply(nil); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rcv)
	if err == nil || !strings.Contains(err.Error(), "after 10 of 1000 bytes") || len(b) != 10 {
		t.Fatalf("ReadAll = %d bytes, %v; want an error after 10 of 1000 bytes", len(b), err)
	}
	if err := rcv.FinishBody(); err == nil {
		t.Fatal("FinishBody after a short file succeeded")
	}
}

func TestSenderFollowsTheProtocol(t *testing.T) {
	scp, p := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
		io.WriteString(w, "\x00")
		for {
			line, err := r.ReadString('\n')
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			switch {
			case strings.HasPrefix(line, "C0600 3 refused"):
				io.WriteString(w, "\x01scp: refused: Permission denied\n")
				continue
			case strings.HasPrefix(line, "C"):
				var size int
				for _, c := range strings.Fields(line)[1] {
					size = size*10 + int(c-'0')
				}
				io.WriteString(w, "\x00")
				if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
					return err
				}
				// The sender's word on the bytes: 0, or 1 and a message.
				if b, err := r.ReadByte(); err != nil || b != 0 {
					if _, err := r.ReadString('\n'); err != nil {
						return err
					}
				}
			}
			io.WriteString(w, "\x00")
		}
	})
	snd, err := scp.Send(context.Background(), "it's here", Options{Recursive: true, Preserve: true, TargetIsDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if cmd := <-p.cmds; cmd != `scp -r -p -d -t -- 'it'\''s here'` {
		t.Errorf("command %q", cmd)
	}
	mtime, atime := time.Unix(1e9, 5000), time.Unix(1e9+1, 0)
	dir := Record{Type: Dir, Mode: 0o750, Name: "d", Times: true, Mtime: mtime, Atime: atime}
	if err := snd.StartDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := snd.StartFile(Record{Type: File, Mode: 0o644, Size: 5, Name: "f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := snd.Write([]byte("hel")); err != nil {
		t.Fatal(err)
	}
	if err := snd.EndFile(errors.New("disk on fire")); err != nil {
		t.Fatal(err)
	}
	var se *Error
	err = snd.StartFile(Record{Type: File, Mode: 0o600, Size: 3, Name: "refused"})
	if !errors.As(err, &se) || se.Fatal {
		t.Fatalf("StartFile of a refused file = %v, want the server's refusal", err)
	}
	if err := snd.StartFile(Record{Type: File, Mode: 0o600, Size: 1, Name: "bad\nname"}); err == nil {
		t.Fatal("StartFile with a newline in the name succeeded")
	}
	if err := snd.StartFile(Record{Type: File, Mode: 0o4755, Size: 2, Name: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, err := snd.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := snd.EndFile(nil); err != nil {
		t.Fatal(err)
	}
	if err := snd.EndDir(); err != nil {
		t.Fatal(err)
	}
	if err := snd.Close(); err != nil {
		t.Fatal(err)
	}
	want := "T1000000000 5 1000000001 0\nD0750 0 d\nC0644 5 f\nhel\x00\x00\x01scp: disk on fire\n" +
		"C0600 3 refused\nC0755 2 g\nok\x00E\n"
	if got := string(<-p.got); got != want {
		t.Errorf("the server received\n%q\nwant\n%q", got, want)
	}
}

func TestSenderStopsAtTheSize(t *testing.T) {
	scp, _ := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
		io.WriteString(w, "\x00")
		r.ReadString('\n')
		io.WriteString(w, "\x00")
		return nil
	})
	snd, err := scp.Send(context.Background(), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	if err := snd.StartFile(Record{Type: File, Mode: 0o644, Size: 5, Name: "f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := snd.Write([]byte("hello!")); err == nil {
		t.Fatal("Write beyond the size succeeded")
	}
	if err := snd.EndFile(nil); err == nil {
		t.Fatal("EndFile after a failed Write succeeded")
	}
}

func TestSendRefusedAtStart(t *testing.T) {
	scp, _ := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
		_, err := io.WriteString(w, "\x01scp: /nodir: Not a directory\n")
		return err
	})
	_, err := scp.Send(context.Background(), "/nodir", Options{TargetIsDir: true})
	var se *Error
	if !errors.As(err, &se) || err.Error() != "remote scp: /nodir: Not a directory" {
		t.Fatalf("Send = %v, want the server's refusal", err)
	}
}

func TestExecRefused(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	_, err := NewHost(srv.Dial(t), "testhost:").Receive(context.Background(), "f", Options{})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Receive from a server without exec = %v, want ErrUnavailable", err)
	}
}

func TestReceiveRefusesNamelessPaths(t *testing.T) {
	scp := NewHost(nil, "testhost:")
	for _, p := range []string{"", ".", "..", "/", "dir/..", "tab\there"} {
		if _, err := scp.Receive(context.Background(), p, Options{}); err == nil {
			t.Errorf("Receive(%q) succeeded", p)
		}
	}
}

func TestCloseReportsUnexplainedFailure(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{Exec: func(_ string, stdin io.Reader, _, stderr io.Writer) int {
		// Take the client's first byte, so that its write cannot meet a
		// closed channel, then fail as a shell without scp does.
		stdin.Read(make([]byte, 1))
		io.WriteString(stderr, "sh: 1: scp: not found\n")
		return 127
	}})
	scp := NewHost(srv.Dial(t), "testhost:")
	rcv, err := scp.Receive(context.Background(), "f", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rcv.Next(); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	err = rcv.Close()
	if err == nil || !strings.Contains(err.Error(), "status 127") || !strings.Contains(err.Error(), "scp: not found") {
		t.Fatalf("Close = %v, want the exit status and the server's words", err)
	}
}

func TestCancel(t *testing.T) {
	release := make(chan struct{})
	scp, _ := startPeer(t, func(r *bufio.Reader, w io.Writer) error {
		<-release
		return nil
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	rcv, err := scp.Receive(ctx, "f", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := rcv.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want context.Canceled", err)
	}
}
