#!/usr/bin/env bash
# A --trace of one hpncp copy each way over an emulated WAN path, and its
# charts (hpncp trace plot): where the time of a long-path copy goes.
#
#   bench/trace.sh [--rtt 100] [--rate 1gbit] [--size 1G] [--loss 0]
#                  [--cc NAME] [--out DIR]
#
#   --rtt   round trip in ms through bench/netns.sh's emulator
#   --cc    congestion control in both namespaces over the stock
#           Debian settings (bench/netns.sh --tcp debian: tcp_rmem max
#           6 MiB, tcp_wmem max 4 MiB, cubic)
#   --out   where up.csv, up.svg, down.csv and down.svg go [.]
#
# The server is the stock sshd of bench/sshd.sh; files live on /dev/shm.
# Prints each copy's wall time and MB/s. Needs root, sshd, go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

rtt=100 rate=1gbit size=1G loss=0 cc= out=.
while [ $# -gt 0 ]; do
	case $1 in
	--rtt) rtt=$2 ;;
	--rate) rate=$2 ;;
	--size) size=$2 ;;
	--loss) loss=$2 ;;
	--cc) cc=$2 ;;
	--out) out=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
[ "$(id -u)" = 0 ] || { echo "trace.sh: needs root (network namespaces)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d /dev/shm/hpncp-trace.XXXXXX)
cleanup() {
	[ -z "${sshd_pid:-}" ] || stop_sshd
	rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/netns.sh
source "$here/netns.sh"
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"

(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
bytes=$(bench_units size "$size") || { echo "trace.sh: --size $size: want bytes or a K, M, G suffix" >&2; exit 2; }
mkdir -p "$work/remote" "$work/local"
head -c "$bytes" /dev/urandom >"$work/src"

ccopt=()
[ -z "$cc" ] || ccopt=(--cc "$cc")
wan_up --rtt "${rtt}ms" --rate "$rate" --loss "$loss" --tcp debian "${ccopt[@]}"
echo "path: ${rtt} ms, $rate, loss $loss, $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_congestion_control)," \
	"tcp_rmem $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_rmem), tcp_wmem $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_wmem)" >&2
run_server=(ip netns exec "$NS_B") run_client=(ip netns exec "$NS_A")
start_sshd "$WAN_ADDR_B" 2222 "MaxStartups 100:30:200" ||
	{ echo "trace.sh: sshd did not come up: $(cat "$work/sshd.log")" >&2; exit 1; }

# traced DIR FROM TO: one copy with --trace DIR.csv, timed on the wall clock.
traced() {
	local t0 t1
	wan_forget
	t0=$(date +%s.%N)
	"${run_client[@]}" "$work/hpncp" -F "$work/ssh_config" -q --trace "$out/$1.csv" "$2" "$3"
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" -v n="$bytes" -v d="$1" 'BEGIN { printf "%s: %.2fs, %.1f MB/s\n", d, b - a, n / (b - a) / 1e6 }'
}
traced up "$work/src" "bench:$work/remote/f"
cmp -s "$work/src" "$work/remote/f" || { echo "trace.sh: upload differs" >&2; exit 1; }
traced down "bench:$work/remote/f" "$work/local/f"
cmp -s "$work/src" "$work/local/f" || { echo "trace.sh: download differs" >&2; exit 1; }
stop_sshd
wan_down
for d in up down; do
	"$work/hpncp" trace plot -o "$out/$d.svg" "$out/$d.csv"
done
echo "traces and charts in $out: up.csv up.svg down.csv down.svg" >&2
