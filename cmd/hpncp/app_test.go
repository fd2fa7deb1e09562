package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// runArgs runs hpncp with args (after the program name) and returns its
// stdout, its stderr and the exit code report gives.
func runArgs(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, append([]string{"hpncp"}, args...), strings.NewReader(""), &out, &errb)
	code = reportError(&errb, err)
	return out.String(), errb.String(), code
}

// TestHelpFlags checks that help and version flags print what their
// commands print, whatever else the command line holds, and copy nothing.
func TestHelpFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("a", []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	same := []struct{ name, want, got string }{
		{"--version", "version", "--version"},
		{"-h with operands", "--help", "-h a b"},
		{"--help with operands", "--help", "--help a b"},
		{"-h in a cluster", "--help", "-rh a b"},
		{"-h after a valued flag", "--help", "-P 22 -h a b"},
		{"-h ssh", "ssh --help", "-h ssh"},
		{"--help ssh", "ssh --help", "--help ssh"},
		{"-h bench", "bench --help", "-h bench"},
	}
	for _, tt := range same {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr, wantCode := runArgs(t, strings.Fields(tt.want)...)
			got, gotErr, gotCode := runArgs(t, strings.Fields(tt.got)...)
			if want == "" || wantCode != 0 {
				t.Fatalf("hpncp %s: exit %d, stdout %q, stderr %q", tt.want, wantCode, want, wantErr)
			}
			if got != want || gotErr != wantErr || gotCode != wantCode {
				t.Errorf("hpncp %s: exit %d, stdout %.80q, stderr %q; want as hpncp %s: exit %d, stdout %.80q",
					tt.got, gotCode, got, gotErr, tt.want, wantCode, want)
			}
			if _, err := os.Stat("b"); err == nil {
				t.Errorf("hpncp %s copied a to b", tt.got)
			}
		})
	}
}

// TestHelpUsage checks that hpncp given nothing to copy prints its usage
// lines on stderr and exits 2, as scp does.
func TestHelpUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"-r"}, {"-P", "22"}} {
		out, errOut, code := runArgs(t, args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, usageText) || strings.Contains(errOut, "error") {
			t.Errorf("hpncp %q: exit %d, stdout %q, stderr %q; want exit 2 and the usage lines on stderr only",
				args, code, out, errOut)
		}
	}
}

// TestArgsUnknownFlag checks that an unknown flag is named as written,
// dashes included.
func TestArgsUnknownFlag(t *testing.T) {
	tests := []struct{ args, want string }{
		{"-Z a b", "unknown flag -Z"},
		{"-rZ a b", "unknown flag -Z"},
		{"-P22Z a b", ""}, // 22Z is -P's value: a usage error, but not this one
		{"--dry-run a b", "unknown flag --dry-run"},
		{"--dry-run=1 a b", "unknown flag --dry-run"},
		{"-r --delete --dry-run a b", "unknown flag --delete"},
		{"-5 a b", "unknown flag -5"},
	}
	for _, tt := range tests {
		_, errOut, code := runArgs(t, strings.Fields(tt.args)...)
		line := "hpncp: error: " + tt.want + "\n"
		if tt.want == "" {
			if code != exitUsage || strings.Contains(errOut, "unknown flag") {
				t.Errorf("hpncp %s: exit %d, stderr %q; want exit 2, no unknown flag", tt.args, code, errOut)
			}
			continue
		}
		if code != exitUsage || !strings.HasPrefix(errOut, line) {
			t.Errorf("hpncp %s: exit %d, stderr %q; want exit 2 and %q", tt.args, code, errOut, line)
		}
	}
}

// TestArgsSubcommandWord checks that a subcommand's name counts as one
// only as the first word: later, or as version with operands, it is a
// file to copy, and where no such file exists the error says so.
func TestArgsSubcommandWord(t *testing.T) {
	// The operands are addresses on 127.0.0.1, so that, read as
	// subcommands, they would reach no other host.
	t.Chdir(t.TempDir())
	for _, name := range []string{"version", "bench", "ssh"} {
		if err := os.WriteFile(name, []byte("file "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copies := []struct{ args, from, to string }{
		{"version 127.0.0.1", "version", "127.0.0.1"},
		{"-q version 127.0.0.2", "version", "127.0.0.2"},
		{"-q bench 127.0.0.3", "bench", "127.0.0.3"},
		{"-p ssh 127.0.0.4", "ssh", "127.0.0.4"},
		{"-q -- bench 127.0.0.5", "bench", "127.0.0.5"},
	}
	for _, tt := range copies {
		out, errOut, code := runArgs(t, strings.Fields(tt.args)...)
		got, err := os.ReadFile(tt.to)
		if code != 0 || err != nil || string(got) != "file "+tt.from {
			t.Errorf("hpncp %s: exit %d, stdout %q, stderr %q, %s holds %q (%v); want a copy of %s",
				tt.args, code, out, errOut, tt.to, got, err, tt.from)
		}
	}

	t.Chdir(t.TempDir())
	refused := []struct{ args, want string }{
		{"-B -F cfg bench 127.0.0.1", "hpncp: error: bench is a subcommand only as the first word, and there is no local file bench to copy\n" +
			"hpncp: hint: to run bench, give it first: hpncp bench -B -F cfg 127.0.0.1 (see hpncp bench --help)\n"},
		{"-o ProxyCommand=a;b bench 127.0.0.1:/x", "hpncp: error: bench is a subcommand only as the first word, and there is no local file bench to copy\n" +
			"hpncp: hint: to run bench, give it first: hpncp bench -o 'ProxyCommand=a;b' 127.0.0.1:/x (see hpncp bench --help)\n"},
		{"-v ssh 127.0.0.1", "hpncp: error: ssh is a subcommand only as the first word"},
		{"version 127.0.0.1:/x", "hpncp: error: version takes no operands, and there is no local file version to copy\n"},
	}
	for _, tt := range refused {
		_, errOut, code := runArgs(t, strings.Split(tt.args, " ")...)
		if code != exitUsage || !strings.HasPrefix(errOut, tt.want) || !strings.Contains(errOut, "hpncp: hint: ") {
			t.Errorf("hpncp %s: exit %d, stderr %q; want exit 2, %q and a hint", tt.args, code, errOut, tt.want)
		}
	}
}
