package helper

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// DefaultDir is where hpncp helper install puts helpers on a server,
// under the login's home ("~/"): one directory per protocol and binary.
const DefaultDir = "~/.cache/hpncp/helper"

// BinaryName is the helper's file in its version's directory.
const BinaryName = "hpncp"

// CheckedName is the file beside the helper that records which file its
// last hash check found right (Launch), so that a run after it need not
// hash the whole binary again.
const CheckedName = BinaryName + ".checked"

// VersionDir is the directory of DefaultDir (or another) that holds the
// helper binary of hash sum: the protocol, then the hash's first 16 hex
// digits, so that helpers of other builds sit beside it and a stale one
// is told by its name.
func VersionDir(sum [32]byte) string {
	return fmt.Sprintf("%d-%s", Protocol, hex.EncodeToString(sum[:8]))
}

var versionDirRE = regexp.MustCompile(`^[0-9]{1,5}-[0-9a-f]{16}$`)

// IsVersionDir reports whether name is a name VersionDir gives (of any
// protocol): what hpncp helper remove may take away.
func IsVersionDir(name string) bool { return versionDirRE.MatchString(name) }

// IsTempName reports whether name is one hpncp helper install uploads a
// binary under before its hash is checked and it is renamed.
func IsTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, BinaryName+".tmp-")
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// ShellDir is dir for a POSIX shell's command line: "~/" as "$HOME"/,
// the rest quoted.
func ShellDir(dir string) string {
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		return `"$HOME"/` + quote(rest)
	}
	return quote(dir)
}

// SFTPDir is dir for SFTP, whose relative names start at the login's
// home.
func SFTPDir(dir string) string {
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		return rest
	}
	return dir
}

// CheckDir refuses a helper directory hpncp cannot name on a server:
// it is absolute or under the home ("~/"), and clean.
func CheckDir(dir string) error {
	rest, home := strings.CutPrefix(dir, "~/")
	switch {
	case dir == "":
		return fmt.Errorf("helper directory: empty")
	case !home && !strings.HasPrefix(dir, "/"):
		return fmt.Errorf("helper directory %q: want an absolute path or one under ~/", dir)
	case strings.ContainsAny(dir, "\x00\n"):
		return fmt.Errorf("helper directory %q: has a NUL or a newline", dir)
	case home && (rest == "" || cleanPath(rest) != rest),
		!home && (dir == "/" || cleanPath(dir) != dir):
		return fmt.Errorf("helper directory %q: not a clean path to a directory", dir)
	}
	return nil
}

// cleanPath is p without "." or ".." components, double or trailing
// slashes; a p that has any of them differs from it.
func cleanPath(p string) string {
	var kept []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." && c != ".." {
			kept = append(kept, c)
		}
	}
	out := strings.Join(kept, "/")
	if strings.HasPrefix(p, "/") {
		out = "/" + out
	}
	return out
}

// quote makes s one word for a POSIX shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// checkFailed starts what the launch line says, on stderr, when the
// installed helper's hash is not the one expected: the client shows
// that line even without -v.
const checkFailed = "hpncp helper check failed: "

// CheckFailed returns the launch line's message, when text (a failed
// launch's stderr) has one.
func CheckFailed(text string) (string, bool) {
	_, msg, ok := strings.Cut(text, checkFailed)
	if !ok {
		return "", false
	}
	msg, _, _ = strings.Cut(msg, "\n")
	return msg, true
}

// Launch is the remote command line that runs hpncp serve with args for
// job: the helper installed in dir for the binary of hash sum, else hpncp
// on the login's PATH. The first channel's line (join false) runs the
// installed helper only once the server's sha256sum (or shasum, or
// sha256) has found its hash the one named; one whose hash differs, or
// cannot be taken, is not run, and the line says why on stderr. A joining
// channel's line runs it only once the first channel's helper, checked so,
// has made the job's socket: hashing a 20 MB binary on each of a dozen
// channels at once cost the start of a striped command half a second.
// It is sh's, under whatever shell the login has: every word in it is
// quoted for that shell too.
//
// Hashing the binary costs a tenth of a second before every run's first
// channel, so a check that found it right records, beside it
// (CheckedName), the file it checked as stat(1) sees it: device, inode,
// size, modification and change times. A later line whose stat says the
// same runs the helper without hashing it. Any write to the file, or
// another file put in its place, changes its change time, which no user
// can set; so that a write in the same second as the check cannot pass
// for the file checked, the record is made only for a file whose change
// time is two seconds past, and only when stat said the same before and
// after the hash. Without GNU stat (or busybox's) there is no record,
// and every first channel hashes.
func Launch(dir string, sum [32]byte, job, args string, join bool) string {
	want := hex.EncodeToString(sum[:])
	script := "h=" + ShellDir(dir) + "/" + VersionDir(sum) + "/" + BinaryName + "; " +
		`if [ -e "$h" ]; then `
	if join {
		// The socket's directory as runDir names it.
		script += `s=${XDG_RUNTIME_DIR:-}; case "$s" in /*) ;; *) s="$HOME"/.cache;; esac; ` +
			`s="$s"/hpncp/run/` + job + `.sock; i=0; ` +
			`while [ ! -S "$s" ]; do i=$((i+1)); if [ "$i" -gt 300 ]; then ` +
			`echo "` + checkFailed + `no checked helper started the job; not running $h" >&2; exit 126; fi; sleep 0.1; done; ` +
			`exec "$h" serve ` + args + `; fi; `
	} else {
		stat := `$(stat -L -c "%d %i %s %Y %Z" "$h" 2>/dev/null)`
		script += `c="$h".checked; k=` + stat + `; r=; { read -r r <"$c"; } 2>/dev/null; ` +
			`if [ -n "$k" ] && [ "$r" = "` + want + ` $k" ]; then exec "$h" serve ` + args + `; fi; ` +
			`s=$( (sha256sum || shasum -a 256 || sha256) <"$h" 2>/dev/null); ` +
			`case "$s" in ` +
			want + `*) if [ -n "$k" ] && [ "$k" = "` + stat + `" ] && [ "${k##* }" -lt $(($(date +%s) - 1)) ]; then ` +
			`{ echo "` + want + ` $k" >"$c"; } 2>/dev/null; fi; exec "$h" serve ` + args + `;; ` +
			`"") echo "` + checkFailed + `no sha256sum, shasum or sha256 to check $h with; not running it" >&2;; ` +
			`*) echo "` + checkFailed + `$h is not the file installed: its sha256 differs; not running it" >&2;; ` +
			`esac; exit 126; fi; `
	}
	script += `exec hpncp serve ` + args
	return "sh -c " + quote(script)
}

// Machine is a server's system and machine as uname -s -m prints them,
// as Go names them (GOOS and GOARCH); ok false where Go has no name
// hpncp can be sure of.
func Machine(unameOut string) (goos, goarch string, ok bool) {
	f := strings.Fields(unameOut)
	if len(f) != 2 {
		return "", "", false
	}
	switch f[0] {
	case "Linux":
		goos = "linux"
	case "Darwin":
		goos = "darwin"
	case "FreeBSD":
		goos = "freebsd"
	case "OpenBSD":
		goos = "openbsd"
	case "NetBSD":
		goos = "netbsd"
	case "DragonFly":
		goos = "dragonfly"
	default:
		return "", "", false
	}
	switch f[1] {
	case "x86_64", "amd64":
		goarch = "amd64"
	case "aarch64", "arm64":
		goarch = "arm64"
	case "i386", "i486", "i586", "i686":
		goarch = "386"
	case "riscv64":
		goarch = "riscv64"
	case "ppc64le":
		goarch = "ppc64le"
	case "s390x":
		goarch = "s390x"
	case "loongarch64":
		goarch = "loong64"
	default:
		// 32-bit ARM differs by version (GOARM) and MIPS by byte order,
		// which uname -m does not always say: no guess.
		return "", "", false
	}
	return goos, goarch, true
}
