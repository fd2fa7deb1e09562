#!/usr/bin/env bash
# The --resume acceptance case: a copy of a tree with a 5,000-file
# directory and a 2 GiB file, killed with SIGKILL once the large file's
# temporary file passes half its size, then re-run with the same command
# plus --resume. Checks that the trees end byte-identical and prints the
# bytes the re-run sent again: those it sent beyond what was missing when
# the first run was killed (complete files, and the blocks the large
# file's temporary file had allocated: the parallel copy leaves holes, so
# its size alone says nothing), against the tree's total.
#
# The first run is started without --resume, as a user's would be: hpncp
# journals large files anyway, so that a killed run can be resumed.
# Starts its own sshd (stock config, Subsystem sftp internal-sftp) on
# loopback, as bench/lan.sh does.
#
#   bench/resume.sh [--size 2G] [--files 5000] [--dir DIR] [--direction up|down]
#                   [--hpncp HPNCP_BINARY]
#
#   --size       the large file's size (K, M, G suffixes, powers of 1024;
#                KB, MB, GB powers of 1000)
#   --files      how many small files (1 to 32 KiB each) beside it
#   --dir        where the files go [/dev/shm when it exists, else $TMPDIR]
#   --direction  up (local to sshd, the default) or down
#   --hpncp      use this binary instead of building ./cmd/hpncp
#
# Progress goes to stderr, the result to stdout. Needs /usr/sbin/sshd,
# ssh-keygen, python3 and go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

size=2G files=5000 dir= direction=up hpncp_bin=
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2 ;;
	--files) files=$2 ;;
	--dir) dir=$2 ;;
	--direction) direction=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done

die() {
	echo "resume.sh: error: $*" >&2
	exit 1
}
log() { echo "resume.sh: $*" >&2; }

# shellcheck source=bench/units.sh
source "$here/units.sh"
bytes=$(bench_units size "$size") || die "--size $size: want bytes or a K, M, G suffix"
[[ $files =~ ^[0-9]+$ ]] || die "--files $files: want a count"
case $direction in up | down) ;; *) die "--direction $direction: want up or down" ;; esac
sshd_bin=/usr/sbin/sshd
for tool in "$sshd_bin" ssh ssh-keygen python3 go; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
if [ -z "$dir" ]; then
	dir=${TMPDIR:-/tmp}
	[ -d /dev/shm ] && [ -w /dev/shm ] && dir=/dev/shm
fi

# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"
work=$(mktemp -d "$dir/hpncp-resume.XXXXXX")
hp_pid=
cleanup() {
	if [ -n "$hp_pid" ]; then
		kill -TERM "$hp_pid" 2>/dev/null || true
		wait "$hp_pid" 2>/dev/null || true
	fi
	stop_sshd
	rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "$hpncp_bin" ]; then
	log "building hpncp"
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi

start_sshd_free 127.0.0.1 || die "sshd on 127.0.0.1 does not answer: $(cat "$work/sshd.log")"

# The tree: a-tree (copied first, names sort before big) and big.
log "creating $files small files and a $bytes-byte file in $work/src"
mkdir -p "$work/src/a-tree" "$work/out"
python3 - "$work/src/a-tree" "$files" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(1)
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 50))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(rnd.randint(1 << 10, 32 << 10)))
EOF
head -c "$bytes" /dev/urandom >"$work/src/big"
total=$(du -sb --apparent-size "$work/src" | cut -f1)
files_total=$(find "$work/src" -type f | wc -l)

# A state directory of its own: the user's journal is left alone.
export XDG_STATE_HOME=$work/state
hp=("$hpncp_bin" -q -F "$work/ssh_config" -r)
if [ "$direction" = up ]; then
	from=$work/src to=bench:$work/out got=$work/out/src
else
	from=bench:$work/src to=$work/out got=$work/out/src
fi

log "copying $direction ($total bytes in $files_total files), SIGKILL once big passes half"
start=$(date +%s.%N)
"${hp[@]}" "$from" "$to" &
hp_pid=$!
half=$((bytes / 2))
killed=
while kill -0 "$hp_pid" 2>/dev/null; do
	for tmp in "$got"/.hpncp.big.*.part; do
		[ -e "$tmp" ] || continue
		if [ "$(stat -c %s "$tmp")" -ge "$half" ]; then
			kill -KILL "$hp_pid"
			killed=$(date +%s.%N)
			break 2
		fi
	done
	sleep 0.02
done
wait "$hp_pid" 2>/dev/null || true
hp_pid=
[ -n "$killed" ] || die "the copy ended before big's temporary file reached $half bytes"
partial=$(stat -c '%b * %B' "$got"/.hpncp.big.*.part | bc)
partial=$((partial > bytes ? bytes : partial))
done_files=$(find "$got" -type f ! -name '.hpncp.*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
present=$((partial + done_files))
log "killed after $(echo "$killed - $start" | bc) s; at the target: $done_files bytes of complete files, $partial of big's written"

log "re-running with --resume"
start=$(date +%s.%N)
"${hp[@]}" --resume --json "$from" "$to" >"$work/report.json"
secs=$(echo "$(date +%s.%N) - $start" | bc)

diff -r "$work/src" "$got" >&2 || die "the trees differ after the resumed run"
if compgen -G "$got/.hpncp.*" >/dev/null || [ -n "$(find "$got" -name '.hpncp.*' -print -quit)" ]; then
	die "temporary files left in $got"
fi

python3 - "$work/report.json" "$total" "$secs" "$present" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
t, total, secs, present = rep["totals"], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
sent, resumed = t["bytes"], t.get("resumed_bytes", 0)
missing = total - present
again = max(sent - missing, 0)
print("trees byte-identical after the resumed run")
print("re-run: %d copied, %d skipped, %.1f s" % (t["copied"], t["skipped"], secs))
print("at the target when killed: %d of %d bytes; the re-run sent %d (missing: %d)" %
      (present, total, sent, missing))
print("resumed from the temporary file: %d bytes" % resumed)
print("bytes re-sent (sent again beyond what was missing): %d = %.2f %% of %d" %
      (again, 100.0 * again / total, total))
EOF
