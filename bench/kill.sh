#!/usr/bin/env bash
# The lost-connection acceptance case of the integrity work: a large file
# copied to or from a stock sshd on loopback while, once its temporary
# file passes --at bytes, every sshd process serving the copy is killed
# (by PID: the children of the test sshd). hpncp then either reconnects
# and finishes, or fails. Each run is judged:
#
#   exit 0        the target must equal the source (sha256)
#   other exits   no final name that differs from the source: the
#                 previous target (an older file put there first) is
#                 intact or replaced by the source's bytes, nothing else
#   --resume      a failed run keeps its temporary file and journal, and
#                 a re-run with --resume (no kill) ends byte-identical,
#                 sending again at most 10 % of the file beyond what was
#                 missing
#
# With --outage the sshd itself is stopped with its sessions and started
# again only once hpncp has exited: the copy cannot reconnect (it tries
# for ConnectTimeout, 5 s here) and must fail cleanly.
#
# Prints one line per run and the counts; exits 1 when any run broke a
# rule.
#
#   bench/kill.sh [--runs 20] [--size 1G] [--at 300M] [--direction up|down]
#                 [--resume] [--outage] [--dir DIR] [--hpncp HPNCP_BINARY]
#
# Needs /usr/sbin/sshd, ssh, ssh-keygen, python3, go and root (sshd).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

runs=20 size=1G at=300M direction=down resume= outage= dir= hpncp_bin=
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2 ;;
	--size) size=$2 ;;
	--at) at=$2 ;;
	--direction) direction=$2 ;;
	--resume) resume=1; shift; continue ;;
	--outage) outage=1; shift; continue ;;
	--dir) dir=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done

die() {
	echo "kill.sh: error: $*" >&2
	exit 1
}
log() { echo "kill.sh: $*" >&2; }

# shellcheck source=bench/units.sh
source "$here/units.sh"
bytes=$(bench_units size "$size") || die "--size $size: want bytes or a K, M, G suffix"
at_bytes=$(bench_units size "$at") || die "--at $at: want bytes or a K, M, G suffix"
case $direction in up | down) ;; *) die "--direction $direction: want up or down" ;; esac
for tool in /usr/sbin/sshd ssh ssh-keygen python3 go sha256sum; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
if [ -z "$dir" ]; then
	dir=${TMPDIR:-/tmp}
	[ -d /dev/shm ] && [ -w /dev/shm ] && dir=/dev/shm
fi

# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"
work=$(mktemp -d "$dir/hpncp-kill.XXXXXX")
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

mkdir -p "$work/src" "$work/out"
head -c "$bytes" /dev/urandom >"$work/src/big"
want=$(sha256sum <"$work/src/big" | cut -d' ' -f1)
head -c 4096 /dev/urandom >"$work/old"
old=$(sha256sum <"$work/old" | cut -d' ' -f1)
export XDG_STATE_HOME=$work/state

port=$(awk '$1 == "Port" { print $2 }' "$work/ssh_config")
hp=("$hpncp_bin" -q -F "$work/ssh_config" -o ConnectTimeout=5)
[ -n "$resume" ] && hp+=(--resume)
if [ "$direction" = up ]; then
	from=$work/src/big to=bench:$work/out/big
else
	from=bench:$work/src/big to=$work/out/big
fi
got=$work/out/big

# kill_sessions kills every process under the listening sshd: the
# connections' privileged and user processes, and their subsystems.
kill_sessions() {
	local pids p
	pids=$(pgrep -P "$sshd_pid" || true)
	for p in $pids; do
		kill -KILL "$p" 2>/dev/null || true
	done
	[ -n "$pids" ]
}

sha() { sha256sum <"$1" | cut -d' ' -f1; }

ok=0 failed_clean=0 violations=0 resumed=0 max_again=0
for run in $(seq "$runs"); do
	rm -rf -- "$work/out" "$work/state"
	mkdir -p "$work/out"
	cp "$work/old" "$got"
	"${hp[@]}" "$from" "$to" 2>"$work/stderr" &
	hp_pid=$!
	killed=
	while kill -0 "$hp_pid" 2>/dev/null; do
		for tmp in "$work"/out/.hpncp.big.*.part; do
			[ -e "$tmp" ] || continue
			if [ "$(stat -c %s "$tmp")" -ge "$at_bytes" ] && kill_sessions; then
				killed=1
				[ -n "$outage" ] && stop_sshd
				break 2
			fi
		done
		sleep 0.01
	done
	rc=0
	wait "$hp_pid" || rc=$?
	hp_pid=
	if [ -z "$sshd_pid" ]; then
		start_sshd 127.0.0.1 "$port" || die "sshd did not start again on port $port: $(cat "$work/sshd.log")"
	fi
	verdict= why=
	if [ -z "$killed" ]; then
		verdict=skip why="the copy ended before the kill"
	elif [ "$rc" = 0 ]; then
		if [ "$(sha "$got")" = "$want" ]; then
			verdict=ok
		else
			verdict=VIOLATION why="exit 0 with a target that differs from the source"
		fi
	else
		h=$(sha "$got" 2>/dev/null || echo missing)
		if [ "$h" != "$old" ] && [ "$h" != "$want" ]; then
			verdict=VIOLATION why="exit $rc left a final name that is neither the old target nor the source"
		elif [ -n "$resume" ]; then
			tmps=("$work"/out/.hpncp.big.*.part)
			journals=$(find "$work/state" -type f 2>/dev/null | wc -l)
			if [ ! -e "${tmps[0]}" ] || [ "$journals" = 0 ]; then
				verdict=VIOLATION why="exit $rc under --resume kept no temporary file ($([ -e "${tmps[0]}" ] && echo kept || echo gone)) or journal ($journals)"
			else
				written=$(stat -c '%b * %B' "${tmps[0]}" | bc)
				written=$((written > bytes ? bytes : written))
				if ! "${hp[@]}" --json "$from" "$to" >"$work/report.json" 2>>"$work/stderr"; then
					verdict=VIOLATION why="the --resume re-run failed: $(tail -1 "$work/stderr")"
				elif [ "$(sha "$got")" != "$want" ]; then
					verdict=VIOLATION why="the --resume re-run ended with a target that differs"
				else
					read -r again detail < <(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; size,written=int(sys.argv[2]),int(sys.argv[3]); print(max(t["bytes"]-(size-written),0)*100//size, "written %d MB, resumed from %d MB, sent %d MB" % (written>>20, t.get("resumed_bytes",0)>>20, t["bytes"]>>20))' \
						"$work/report.json" "$bytes" "$written")
					max_again=$((again > max_again ? again : max_again))
					resumed=$((resumed + 1))
					if [ "$again" -gt 10 ]; then
						verdict=VIOLATION why="the re-run sent $again % of the file again: $detail"
					else
						verdict=failed-clean why="exit $rc; resumed, $again % sent again: $detail"
					fi
				fi
			fi
		else
			verdict=failed-clean why="exit $rc: $(tail -1 "$work/stderr")"
		fi
	fi
	case $verdict in
	ok) ok=$((ok + 1)) ;;
	failed-clean) failed_clean=$((failed_clean + 1)) ;;
	VIOLATION) violations=$((violations + 1)) ;;
	esac
	echo "run $run: $verdict${why:+ ($why)}"
done
echo "direction $direction${resume:+ --resume}${outage:+ --outage}, $runs runs of $bytes bytes, killed at $at_bytes:" \
	"$ok exit 0 and identical, $failed_clean failed cleanly ($resumed resumed, at most $max_again % sent again), $violations violations"
[ "$violations" = 0 ]
