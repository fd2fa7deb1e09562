#!/usr/bin/env bash
# Measures how faithfully bench/netns.sh emulates the path it is asked for:
# ping RTT against the requested RTT, and the throughput of one bulk TCP
# flow (iperf3) against the link rate, with the emulator's CPU use. Prints a
# Markdown table (the one in bench/README.md) on stdout; progress on stderr.
#
#   bench/validate-wan.sh [--runs 3] [--time 10] [--rtts "1 10 50 100"]
#                         [--mtus "1500 9000"] [--rate 1gbit] [--cc cubic]
#                         [--mode auto|wanem|netem] [--offload on|off]
#
# Every configuration gets its own namespaces (wan_up) and iperf3 runs
# --runs times for --time seconds; the table shows medians, with the range
# of the runs. The last rows are the emulator at an unlimited rate and RTT 0
# (its own ceiling) and a plain veth pair for reference. TCP buffers in the
# namespaces are raised to 64 MiB so that one flow can fill 1 Gbit/s at
# 100 ms. --cc picks the flow's congestion control (iperf3 -C); reno and
# bbr are also allowed as namespace defaults, cubic only per socket.
#
# Needs root, ip, ping and iperf3 (installed with apt-get when missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/netns.sh
source "$here/netns.sh"

runs=3 secs=10 rtts="1 10 50 100" mtus="1500 9000" rate=1gbit cc=cubic mode=auto offload=on
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2 ;;
	--time) secs=$2 ;;
	--rtts) rtts=$2 ;;
	--mtus) mtus=$2 ;;
	--rate) rate=$2 ;;
	--cc) cc=$2 ;;
	--mode) mode=$2 ;;
	--offload) offload=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done

if [ "$(id -u)" -ne 0 ]; then
	echo "validate-wan.sh: error: needs root (network namespaces)" >&2
	exit 1
fi
missing=()
command -v iperf3 >/dev/null || missing+=(iperf3)
command -v ping >/dev/null || missing+=(iputils-ping)
if [ ${#missing[@]} -gt 0 ]; then
	echo "validate-wan.sh: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; }
fi

# Build the emulator once rather than in every wan_up.
tmp=$(mktemp -d /tmp/hpncp-validate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${WANEM_BIN:-}" ]; then
	(cd "$here/.." && go build -o "$tmp/wanem" ./bench/wanem)
	export WANEM_BIN=$tmp/wanem
fi

log() { echo "validate-wan.sh: $*" >&2; }

# median N...: the middle value (the lower middle for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s–%s", lo, hi }'; }

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# measure LABEL WAN_UP_OPTIONS...: one table row.
measure() {
	local label=$1 mtu=$3
	shift
	log "$label: wan_up $*"
	wan_up "$@" --tcp-mem 67108864 --offload "$offload"
	local used=$WAN_MODE server ping_out rtt_min rtt_avg rtt_max i out mbit retr cpu t0 t1
	local -a tputs=() retrs=() cpus=()
	ip netns exec "$NS_B" iperf3 -s >/dev/null 2>&1 &
	server=$!
	ping_out=$(ip netns exec "$NS_A" ping -n -q -c 20 -i 0.1 "$WAN_ADDR_B" | tail -n 1)
	IFS=/ read -r rtt_min rtt_avg rtt_max _ <<<"${ping_out#*= }"
	for i in $(seq "$runs"); do
		t0=
		if [ -n "$WANEM_PID" ]; then
			t0=$(cpu_ticks "$WANEM_PID")
		fi
		out=$(ip netns exec "$NS_A" iperf3 -c "$WAN_ADDR_B" -t "$secs" -f m -C "$cc" 2>&1) || {
			log "iperf3 failed: $out"
			return 1
		}
		mbit=$(awk '/receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") print $(i - 1) }' <<<"$out")
		retr=$(awk '/sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") print $(i + 1) }' <<<"$out")
		cpu=-
		if [ -n "$t0" ]; then
			t1=$(cpu_ticks "$WANEM_PID")
			cpu=$(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v s="$secs" 'BEGIN { printf "%.0f", 100 * d / hz / s }')
			cpus+=("$cpu")
		fi
		tputs+=("$mbit") retrs+=("$retr")
		log "$label run $i: $mbit Mbit/s, $retr retransmits, emulator CPU $cpu %"
	done
	local host_drops
	host_drops=$(ip -n "$NS_A" -s link show "$WAN_DEV" | awk '/TX:/ { getline; print $4 }')
	local cpu_col=-
	if [ ${#cpus[@]} -gt 0 ]; then
		cpu_col="$(median "${cpus[@]}") ($(range "${cpus[@]}"))"
	fi
	kill "$server" 2>/dev/null || true
	wait "$server" 2>/dev/null || true
	wan_down
	printf '| %s | %s | %s | %s / %s / %s | %s (%s) | %s | %s | %s |\n' \
		"$used" "$label" "$mtu" "$rtt_min" "$rtt_avg" "$rtt_max" \
		"$(median "${tputs[@]}")" "$(range "${tputs[@]}")" "$(median "${retrs[@]}")" \
		"$host_drops" "$cpu_col"
}

echo "Rate $rate, $runs runs of ${secs} s per row, iperf3 -C $cc, emulator offload $offload, $(nproc) CPUs, kernel $(uname -r), $(date -u +%Y-%m-%d), load average at start $(cut -d' ' -f1 /proc/loadavg)."
echo
echo "| mode | requested | MTU | ping min / avg / max ms | iperf3 Mbit/s median (range) | retransmits | host drops | emulator CPU % of a core |"
echo "|---|---|---|---|---|---|---|---|"
for mtu in $mtus; do
	for r in $rtts; do
		measure "${r} ms, $rate" --mtu "$mtu" --rtt "${r}ms" --rate "$rate" --mode "$mode"
	done
done
for mtu in $mtus; do
	measure "0 ms, unlimited" --mtu "$mtu" --rtt 0 --rate unlimited --mode wanem
done
measure "0 ms, unlimited" --mtu 1500 --rtt 0 --rate unlimited --mode veth
echo
echo "Load average at the end: $(cut -d' ' -f1 /proc/loadavg)."
