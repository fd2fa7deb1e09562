package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// hostileText is what a hostile server may say, wherever it says
// something: it retitles the window, clears the screen, goes back to the
// start of the line (also with C1's CSI) and draws a prompt of its own.
const hostileText = "\x1b]0;title\x07\x1b[2J\r\u009b31m\x7fPassword for local user: "

// checkEscaped fails t if out holds a character a terminal would act on,
// a newline apart, or lacks hostileText escaped.
func checkEscaped(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && (r == utf8.RuneError || !unicode.IsPrint(r)) {
			t.Errorf("%s: %U reaches the terminal raw in %q", what, r, out)
			break
		}
	}
	if !strings.Contains(out, `\033]0;title\007\033[2J\015\302\23331m\177Password for local user:`) {
		t.Errorf("%s: the server's text is not shown escaped in %q", what, out)
	}
}

// TestServerTextEscaped: every kind of text a server says and hpncp
// prints reaches stderr escaped, by vis at the print.
func TestServerTextEscaped(t *testing.T) {
	for what, err := range map[string]error{
		"an SFTP status message and a listed name": &transfer.Error{Op: "read", Path: "host:/x/" + hostileText,
			Err: &protocol.StatusError{Code: 4, Msg: hostileText}},
		"tar's stderr": &protocol.TarExitError{What: "tar -c in host:/x", Err: errors.New("Process exited with status 2"),
			Status: 2, Stderr: "tar: " + hostileText + "\n"},
		// As protocol/sum.go words a remote command's failure.
		"a remote command's stderr": fmt.Errorf("sha256sum: %w: %s", errors.New("Process exited with status 1"), hostileText),
		"the server's disconnect message": &sshconn.Error{Op: "connect to", Host: "host",
			Err: fmt.Errorf("ssh: disconnect, reason 2: %s", hostileText)},
	} {
		var b bytes.Buffer
		reportError(&b, err)
		checkEscaped(t, what, b.String())
	}
	var b bytes.Buffer
	logTo(&b)("listing %s", hostileText)
	checkEscaped(t, "a -v line", b.String())
	b.Reset()
	warnTo(&b)("Warning: %s\nand a second line", hostileText)
	checkEscaped(t, "a warning", b.String())
	if !strings.HasSuffix(b.String(), "\nand a second line\n") {
		t.Errorf("a warning's lines are not kept: %q", b.String())
	}
	b.Reset()
	(&sshOptions{}).conn(&b).Banner(hostileText + "\n")
	checkEscaped(t, "the banner", b.String())
	b.Reset()
	rep := report.New([]transfer.FileReport{{Path: "host:/x/" + hostileText, Status: transfer.StatusFailed,
		Error: "read host:/x: " + hostileText}}, nil, 0)
	rep.ExitCode, rep.Error = 1, &report.RunError{Message: hostileText, Kind: report.KindFailed}
	if err := writeReport(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range b.String() {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("the JSON report holds %U raw:\n%s", r, b.String())
			break
		}
	}
}
