#!/usr/bin/env bash
# Compares hpncp with OpenSSH's scp on a LAN: loopback by default, or a
# path with a given RTT through bench/netns.sh. Starts its own sshd (stock
# config, Subsystem sftp internal-sftp) on a free port, builds hpncp,
# creates a random test file and runs interleaved rounds of
#
#   scp up, scp down, hpncp up, hpncp down, hpncp --hpn-disabled up/down
#
# (the order rotates every round so that no tool always follows the same
# one), then prints, per row, min / median / max MB/s (10^6 bytes/s), the
# median of hpncp over scp in the same direction, and the median client CPU
# (user, sys) and peak RSS of the runs, from GNU time. Every copy of the
# first round is compared with the source byte for byte.
#
#   bench/lan.sh [--size 1G] [--runs 5] [--dir DIR] [--rtt 0]
#                [--args "HPNCP FLAGS"] [--baseline HPNCP_BINARY]
#                [--hpncp HPNCP_BINARY] [--only "scp hpncp seq base"]
#
#   --size      test file size: bytes or with a K, M, G suffix (powers of 1024;
#               KB, MB, GB are powers of 1000)
#   --runs      rounds (at least 5 for medians worth reading)
#   --dir       where the files go [/dev/shm when it exists, else $TMPDIR]:
#               a tmpfs keeps the disk out of a CPU-per-byte comparison
#   --rtt       0 is loopback; anything else (1ms, 500us) runs sshd and the
#               clients in two namespaces joined by bench/netns.sh at that
#               RTT, unlimited rate (needs root)
#   --args      extra flags for the hpncp auto rows, e.g. "--streams 32"
#   --baseline  another hpncp binary, run as extra rows "base up/down" with
#               the same --args: before/after comparisons in one run
#   --hpncp     use this binary instead of building ./cmd/hpncp
#   --only      which row groups to run [scp hpncp seq, plus base with
#               --baseline]
#
# Progress goes to stderr, the table to stdout. Needs /usr/sbin/sshd, scp,
# ssh-keygen, GNU time (/usr/bin/time) and go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

size=1G runs=5 dir= rtt=0 hpncp_args= baseline= hpncp_bin= only=
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2 ;;
	--runs) runs=$2 ;;
	--dir) dir=$2 ;;
	--rtt) rtt=$2 ;;
	--args) hpncp_args=$2 ;;
	--baseline) baseline=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	--only) only=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
if [ -z "$only" ]; then
	only="scp hpncp seq"
	[ -z "$baseline" ] || only="$only base"
fi

die() {
	echo "lan.sh: error: $*" >&2
	exit 1
}
log() { echo "lan.sh: $*" >&2; }

# shellcheck source=bench/units.sh
source "$here/units.sh"
bytes=$(bench_units size "$size") || die "--size $size: want bytes or a K, M, G suffix"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs $runs: want a positive count"
sshd_bin=/usr/sbin/sshd
for tool in "$sshd_bin" scp ssh-keygen /usr/bin/time go; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
if [ -n "$baseline" ]; then
	[ -x "$baseline" ] || die "--baseline $baseline: not an executable"
	baseline=$(cd "$(dirname "$baseline")" && pwd)/$(basename "$baseline")
fi
if [ -z "$dir" ]; then
	dir=${TMPDIR:-/tmp}
	[ -d /dev/shm ] && [ -w /dev/shm ] && dir=/dev/shm
fi

work=$(mktemp -d "$dir/hpncp-lan.XXXXXX")
cleanup() {
	[ -z "${sshd_pid:-}" ] || stop_sshd
	rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"

# Where sshd listens and how clients run: the host's loopback, or the
# two ends of an emulated path.
listen=127.0.0.1
if [ "$rtt" != 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "--rtt needs root (network namespaces)"
	# shellcheck source=bench/netns.sh
	source "$here/netns.sh"
	wan_up --rtt "$rtt" --rate unlimited >&2 || die "wan_up --rtt $rtt failed"
	log "path: $WAN_MODE, rtt $rtt, $NS_A -> $NS_B"
	listen=$WAN_ADDR_B
	run_client=(ip netns exec "$NS_A")
	run_server=(ip netns exec "$NS_B")
fi

if [ -z "$hpncp_bin" ]; then
	log "building hpncp"
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi
hpncp_bin=$(cd "$(dirname "$hpncp_bin")" && pwd)/$(basename "$hpncp_bin")

start_sshd_free "$listen" || die "sshd on $listen does not answer: $(cat "$work/sshd.log")"

log "creating a $bytes-byte test file in $work"
head -c "$bytes" /dev/urandom >"$work/src"

# The rows: a name, a direction, and a command in which SRC and DST stand
# for the source and target operands (paths here have no spaces, and
# --args is split into flags on purpose).
names=() dirs=() cmds=()
add_row() {
	names+=("$1")
	dirs+=("$2")
	cmds+=("$3")
}
hp="$hpncp_bin -q -F $work/ssh_config"
for group in $only; do
	case $group in
	scp)
		add_row "scp" up "scp -q -F $work/ssh_config SRC bench:DST"
		add_row "scp" down "scp -q -F $work/ssh_config bench:SRC DST"
		;;
	hpncp)
		add_row "hpncp" up "$hp $hpncp_args SRC bench:DST"
		add_row "hpncp" down "$hp $hpncp_args bench:SRC DST"
		;;
	seq)
		add_row "hpncp --hpn-disabled" up "$hp --hpn-disabled SRC bench:DST"
		add_row "hpncp --hpn-disabled" down "$hp --hpn-disabled bench:SRC DST"
		;;
	base)
		[ -n "$baseline" ] || die "--only base needs --baseline"
		add_row "base" up "$baseline -q -F $work/ssh_config $hpncp_args SRC bench:DST"
		add_row "base" down "$baseline -q -F $work/ssh_config $hpncp_args bench:SRC DST"
		;;
	*) die "--only: unknown group $group (want scp, hpncp, seq, base)" ;;
	esac
done
nrows=${#names[@]}

# run_row I ROUND: one copy of row I; appends "elapsed user sys maxrss_kb"
# to $work/row.I.
run_row() {
	local i=$1 round=$2 out k
	local -a cmd
	read -r -a cmd <<<"${cmds[$i]}"
	out=$work/out.$i
	rm -f -- "$out"
	for k in "${!cmd[@]}"; do
		case ${cmd[$k]} in
		SRC) cmd[k]=$work/src ;;
		DST) cmd[k]=$out ;;
		bench:SRC) cmd[k]=bench:$work/src ;;
		bench:DST) cmd[k]=bench:$out ;;
		esac
	done
	if ! "${run_client[@]}" /usr/bin/time -f '%e %U %S %M' -o "$work/time" "${cmd[@]}" 2>"$work/stderr"; then
		die "${names[$i]} ${dirs[$i]} (round $round) failed: $(cat "$work/stderr")"
	fi
	if [ "$round" -eq 1 ]; then
		cmp -s "$work/src" "$out" || die "${names[$i]} ${dirs[$i]}: the copy differs from the source"
	fi
	rm -f -- "$out"
	tail -n 1 "$work/time" >>"$work/row.$i"
	log "round $round: ${names[$i]} ${dirs[$i]}: $(tail -n 1 "$work/time" | awk -v b="$bytes" \
		'{ printf "%.1f MB/s, %.2fs user, %.2fs sys, %d MiB RSS", b / $1 / 1e6, $2, $3, $4 / 1024 }')"
}

for round in $(seq "$runs"); do
	for k in $(seq 0 $((nrows - 1))); do
		run_row $(((k + round - 1) % nrows)) "$round"
	done
done

# stats FILE: min, median and max MB/s, then the median user and sys
# seconds and peak RSS (MiB) of a row's runs.
stats() {
	awk -v b="$bytes" '{ print b / $1 / 1e6, $2, $3, $4 / 1024 }' "$1" | awk '
		{ r[NR] = $1; u[NR] = $2; s[NR] = $3; m[NR] = $4 }
		function med(a, n,   i, j, t, c) {
			for (i = 1; i <= n; i++) c[i] = a[i]
			for (i = 2; i <= n; i++) for (j = i; j > 1 && c[j - 1] > c[j]; j--) { t = c[j]; c[j] = c[j - 1]; c[j - 1] = t }
			return n % 2 ? c[(n + 1) / 2] : (c[n / 2] + c[n / 2 + 1]) / 2
		}
		END {
			lo = r[1]; hi = r[1]
			for (i = 1; i <= NR; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
			printf "%.1f %.1f %.1f %.2f %.2f %.0f\n", lo, med(r, NR), hi, med(u, NR), med(s, NR), med(m, NR)
		}'
}

declare -A scp_med
for i in "${!names[@]}"; do
	if [ "${names[$i]}" = scp ]; then
		read -r _ med _ _ _ _ < <(stats "$work/row.$i")
		scp_med[${dirs[$i]}]=$med
	fi
done

where="loopback"
[ "$rtt" = 0 ] || where="rtt $rtt ($WAN_MODE)"
echo "$((bytes / 1048576)) MiB file, $runs rounds, $where, $(nproc) CPUs, $(ssh -V 2>&1 | cut -d, -f1), files in $dir${hpncp_args:+, hpncp $hpncp_args}"
echo
echo "| row | MB/s min | median | max | / scp | user s | sys s | RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
for i in "${!names[@]}"; do
	read -r lo med hi usr sys rss < <(stats "$work/row.$i")
	ratio=-
	if [ -n "${scp_med[${dirs[$i]}]:-}" ]; then
		ratio=$(awk -v a="$med" -v b="${scp_med[${dirs[$i]}]}" 'BEGIN { printf "%.2f", a / b }')
	fi
	printf '| %s %s | %s | %s | %s | %s | %s | %s | %s |\n' \
		"${names[$i]}" "${dirs[$i]}" "$lo" "$med" "$hi" "$ratio" "$usr" "$sys" "$rss"
done
