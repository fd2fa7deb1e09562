#!/usr/bin/env bash
# The cost of starting a copy: a 1 KiB file over an emulated WAN, hpncp
# beside what OpenSSH needs to run nothing at all (`ssh host true`) and
# beside scp, uploads and downloads, medians of --runs. At this size the
# wall time is all round trips and process start-up, so the ratio to
# `ssh true` says how many round trips a tool spends beyond ssh's own.
#
#   bench/rtt.sh [--rtt 100] [--rate 1gbit] [--runs 5] [--size 1K]
#                [--hpncp BINARY] [--before BINARY] [--out FILE.md]
#
#   --rtt     round-trip time in ms through bench/netns.sh's emulator
#             (stock kernel TCP settings in both namespaces)
#   --before  another hpncp binary (an earlier commit's), measured in the
#             same run as hpn-before, to show what a change saved
#   --out     also write the table as markdown
#
# The server is a stock OpenSSH sshd (bench/sshd.sh) in the far
# namespace; the file lives on /dev/shm. Each row: min, median and max
# seconds of wall time around the whole command, and the median's ratio to
# ssh true's. Needs root, sshd, ssh, scp, go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

rtt=100 rate=1gbit runs=5 size=1K hpncp_bin= before_bin= out=
while [ $# -gt 0 ]; do
	case $1 in
	--rtt) rtt=$2 ;;
	--rate) rate=$2 ;;
	--runs) runs=$2 ;;
	--size) size=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	--before) before_bin=$2 ;;
	--out) out=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
[ "$(id -u)" = 0 ] || { echo "rtt.sh: needs root (network namespaces)" >&2; exit 1; }

work=$(mktemp -d /dev/shm/hpncp-rtt.XXXXXX)
cleanup() {
	[ -z "${sshd_pid:-}" ] || stop_sshd
	rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/netns.sh
source "$here/netns.sh"
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"

if [ -z "$hpncp_bin" ]; then
	echo "building hpncp" >&2
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi
size_bytes=$(bench_units size "$size") || { echo "rtt.sh: --size $size: want bytes or a K, M, G suffix" >&2; exit 2; }
mkdir -p "$work/remote" "$work/local"
src=$work/src
head -c "$size_bytes" /dev/urandom >"$src"

tools="ssh-true scp hpn"
[ -z "$before_bin" ] || tools="$tools hpn-before"

client() { "${run_client[@]}" "$@"; }

# one TOOL DIR: one timed run; prints seconds.
one() {
	local tool=$1 dir=$2 cfg=$work/ssh_config from to got t0 t1
	if [ "$dir" = up ]; then
		from=$src to=bench:$work/remote/f got=$work/remote/f
	else
		from=bench:$src to=$work/local/f got=$work/local/f
	fi
	rm -f "$got"
	wan_forget
	t0=$(date +%s.%N)
	case $tool in
	ssh-true) client ssh -F "$cfg" bench true ;;
	scp) client scp -F "$cfg" -q "$from" "$to" ;;
	hpn) client "$hpncp_bin" -F "$cfg" -q "$from" "$to" ;;
	hpn-before) client "$before_bin" -F "$cfg" -q "$from" "$to" ;;
	esac
	t1=$(date +%s.%N)
	if [ "$tool" != ssh-true ]; then
		cmp -s "$src" "$got" || { echo "rtt.sh: $tool $dir: copy differs" >&2; exit 1; }
	fi
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

wan_up --rtt "${rtt}ms" --rate "$rate" --tcp debian
run_server=(ip netns exec "$NS_B") run_client=(ip netns exec "$NS_A")
start_sshd "$WAN_ADDR_B" 2222 ||
	{ echo "rtt.sh: sshd did not come up: $(cat "$work/sshd.log")" >&2; exit 1; }

results=$work/results # lines: tool dir seconds
: >"$results"
for run in $(seq "$runs"); do
	for tool in $tools; do
		dirs="up down"
		[ "$tool" != ssh-true ] || dirs=-
		for dir in $dirs; do
			s=$(one "$tool" "$dir")
			echo "$tool $dir $s" >>"$results"
			echo "run=$run $tool $dir: $s s" >&2
		done
	done
done
stop_sshd
wan_down

table=$(awk -v tools="$tools" '
function median(arr, n,   i, j, t, a) {
	for (i = 1; i <= n; i++) a[i] = arr[i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $3 }
END {
	printf "| tool | dir | min s | median s | max s | x ssh true |\n|---|---|---|---|---|---|\n"
	k = "ssh-true" SUBSEP "-"
	for (i = 1; i <= n[k]; i++) x[i] = v[k, i]
	base = median(x, n[k])
	nt = split(tools, T, " ")
	for (t = 1; t <= nt; t++) for (d = 1; d <= 3; d++) {
		dir = (d == 1) ? "-" : (d == 2) ? "up" : "down"
		k = T[t] SUBSEP dir
		if (!n[k]) continue
		mn = 1e18; mx = 0
		for (i = 1; i <= n[k]; i++) { x[i] = v[k, i]; if (x[i] < mn) mn = x[i]; if (x[i] > mx) mx = x[i] }
		med = median(x, n[k])
		printf "| %s | %s | %.3f | %.3f | %.3f | %.2f |\n", T[t], dir, mn, med, mx, med / base
	}
}' "$results")

{
	echo "$size_bytes-byte file at ${rtt} ms, $rate, $(wan_tcp_label debian "" "" 0) ($WAN_TCP), $(date -u +%Y-%m-%d), medians of $runs, stock OpenSSH $(/usr/sbin/sshd -V 2>&1 | head -1 | cut -d, -f1) server"
	echo
	echo "$table"
} | tee ${out:+"$out"}
