#!/usr/bin/env bash
# The many-small-files benchmark of tar mode (issue 5): a tree of N files
# of 4 KiB in 100 directories plus five files of 10 MiB, copied up and down
# to an empty target against a stock sshd it starts, by
#
#   hpncp -r (default: tar mode chosen automatically), hpncp --no-tar -r,
#   rsync -a -e ssh, scp -r
#
# once each per round, at loopback or, with --rtt, through bench/netns.sh
# (needs root). Prints one line per copy: tool, direction, seconds; every
# copy of the first round is compared with the source (diff -r).
#
#   bench/tar.sh [--files 10000] [--runs 1] [--rtt 0] [--rate 1gbit]
#                [--only "hpncp notar rsync scp"] [--args "HPNCP FLAGS"]
#
# Remote commands run through the login shell: a slow shell start (a heavy
# ~/.bashrc) adds to rsync's and tar mode's times, not to scp's or SFTP
# mode's, which use the sftp subsystem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
files=10000 runs=1 rtt=0 rate=1gbit only="hpncp notar rsync scp" hpncp_args=
while [ $# -gt 0 ]; do
	case $1 in
	--files) files=$2 ;;
	--runs) runs=$2 ;;
	--rtt) rtt=$2 ;;
	--rate) rate=$2 ;;
	--only) only=$2 ;;
	--args) hpncp_args=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
log() { echo "tar.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

base=/dev/shm
[ -d "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/hpncp-tarbench.XXXXXX")
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"
cleanup() {
	stop_sshd
	[ "$rtt" = 0 ] || wan_down >&2 || true
	rm -rf "$work"
}
trap cleanup EXIT

listen=127.0.0.1
if [ "$rtt" != 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "--rtt needs root (network namespaces)"
	# shellcheck source=bench/netns.sh
	source "$here/netns.sh"
	wan_up --rtt "$rtt" --rate "$rate" >&2 || die "wan_up failed"
	log "path: $WAN_MODE, rtt $rtt, rate $rate"
	listen=$WAN_ADDR_B
	run_client=(ip netns exec "$NS_A")
	run_server=(ip netns exec "$NS_B")
fi

log "building hpncp"
(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)

log "making the tree: $files x 4 KiB + 5 x 10 MiB"
src=$work/src
per=$(((files + 99) / 100))
left=$files
for d in $(seq 0 99); do
	mkdir -p "$src/d$d"
	n=$((left < per ? left : per))
	[ "$n" -gt 0 ] || continue
	head -c $((n * 4096)) /dev/urandom | split -b 4096 -a 5 -d - "$src/d$d/f"
	left=$((left - n))
done
for k in 1 2 3 4 5; do head -c $((10 << 20)) /dev/urandom >"$src/big$k"; done

start_sshd_free "$listen" || die "sshd on $listen does not answer: $(cat "$work/sshd.log")"

cfg=$work/ssh_config
hp="$work/hpncp -q -F $cfg $hpncp_args"
# The remote and local sides share this host: the target of each copy is
# a fresh directory in $work.
command_for() {
	local tool=$1 dir=$2 from=$3 to=$4
	case $tool.$dir in
	hpncp.up) echo "$hp -r $from bench:$to" ;;
	hpncp.down) echo "$hp -r bench:$from $to" ;;
	notar.up) echo "$hp --no-tar -r $from bench:$to" ;;
	notar.down) echo "$hp --no-tar -r bench:$from $to" ;;
	rsync.up) echo "rsync -a -e 'ssh -F $cfg' $from/ bench:$to/" ;;
	rsync.down) echo "rsync -a -e 'ssh -F $cfg' bench:$from/ $to/" ;;
	scp.up) echo "scp -q -r -F $cfg $from bench:$to" ;;
	scp.down) echo "scp -q -r -F $cfg bench:$from $to" ;;
	esac
}
for round in $(seq "$runs"); do
	for tool in $only; do
		for dir in up down; do
			from=$src
			[ "$dir" = down ] && from=$work/up.$tool.$round
			[ -d "$from" ] || from=$src
			to=$work/$dir.$tool.$round
			rm -rf "$to"
			cmd=$(command_for "$tool" "$dir" "$from" "$to")
			sync
			wan_forget
			t0=$(date +%s.%N)
			"${run_client[@]}" sh -c "$cmd"
			t1=$(date +%s.%N)
			printf '%-6s %-5s %6.2f s\n' "$tool" "$dir" "$(echo "$t1 - $t0" | bc)"
			if [ "$round" = 1 ]; then
				diff -r "$src" "$to" >/dev/null || die "$tool $dir: the copy differs from the source"
			fi
		done
		rm -rf "$work"/down."$tool".* "$work"/up."$tool".*
	done
done
