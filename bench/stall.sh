#!/usr/bin/env bash
# The dead-path acceptance case: an upload over an emulated 50 ms path
# (bench/netns.sh, a stock sshd in the far namespace) whose emulator is
# stopped (SIGSTOP by its PID) a few seconds into the copy, so that the
# path neither delivers nor refuses anything, as a dead router. Prints,
# for each set of ssh options, how long after the stall the tool exited,
# its exit status and its last line on stderr. hpncp is measured beside
# OpenSSH's scp with the same options.
#
#   bench/stall.sh [--rtt 50] [--after 3] [--limit 120] [--tools "hpncp scp"]
#                  [--hpncp HPNCP_BINARY]
#
#   --after   seconds of copying before the emulator is stopped
#   --limit   seconds after the stall at which a tool still running is
#             stopped and reported as hung
#
# Needs root, ip(8), /usr/sbin/sshd, ssh, scp, go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

rtt=50 after=3 limit=120 tools="hpncp scp" hpncp_bin=
while [ $# -gt 0 ]; do
	case $1 in
	--rtt) rtt=$2 ;;
	--after) after=$2 ;;
	--limit) limit=$2 ;;
	--tools) tools=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done

work=$(mktemp -d /dev/shm/hpncp-stall.XXXXXX)
tool_pid=
cleanup() {
	if [ -n "$tool_pid" ]; then
		kill -KILL "$tool_pid" 2>/dev/null || true
		wait "$tool_pid" 2>/dev/null || true
	fi
	[ -z "${WANEM_PID:-}" ] || kill -CONT "$WANEM_PID" 2>/dev/null || true
	[ -z "${sshd_pid:-}" ] || stop_sshd
	declare -F wan_down >/dev/null && wan_down
	rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/netns.sh
source "$here/netns.sh"
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"

if [ -z "$hpncp_bin" ]; then
	echo "stall.sh: building hpncp" >&2
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi
head -c $((2 << 30)) /dev/zero >"$work/big"
mkdir -p "$work/remote"

# Each case: a label, then the -o options given to the tool.
cases=("keepalive 5 x 2|-o ServerAliveInterval=5 -o ServerAliveCountMax=2"
	"no keepalive options|")

echo "| tool | ssh options | exit | seconds after the stall | last line |"
echo "|---|---|---|---|---|"
for c in "${cases[@]}"; do
	label=${c%%|*} opts=${c#*|}
	for tool in $tools; do
		wan_up --mode wanem --rtt "${rtt}ms" --rate 1gbit >/dev/null
		run_server=(ip netns exec "$NS_B") run_client=(ip netns exec "$NS_A")
		start_sshd "$WAN_ADDR_B" 2222 || { echo "stall.sh: sshd did not start: $(cat "$work/sshd.log")" >&2; exit 1; }
		# shellcheck disable=SC2086
		case $tool in
		hpncp) "${run_client[@]}" "$hpncp_bin" -q -F "$work/ssh_config" $opts "$work/big" "bench:$work/remote/big" 2>"$work/stderr" & ;;
		scp) "${run_client[@]}" scp -q -F "$work/ssh_config" $opts "$work/big" "bench:$work/remote/big" 2>"$work/stderr" & ;;
		esac
		tool_pid=$!
		sleep "$after"
		kill -STOP "$WANEM_PID"
		t0=$(date +%s.%N)
		rc=hung
		for _ in $(seq $((limit * 10))); do
			if ! kill -0 "$tool_pid" 2>/dev/null; then
				rc=0
				wait "$tool_pid" || rc=$?
				break
			fi
			sleep 0.1
		done
		t1=$(date +%s.%N)
		if [ "$rc" = hung ]; then
			kill -KILL "$tool_pid" 2>/dev/null || true
			wait "$tool_pid" 2>/dev/null || true
		fi
		tool_pid=
		secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
		last=$(tail -n 3 "$work/stderr" | tr '\n' ' ' | sed 's/|/\\|/g')
		echo "| $tool | $label | $rc | $secs | $last |"
		kill -CONT "$WANEM_PID"
		stop_sshd
		wan_down
		rm -f "$work/remote/big" "$work/remote"/.hpncp.*
	done
done
