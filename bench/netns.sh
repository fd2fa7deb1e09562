#!/usr/bin/env bash
# Two network namespaces joined by an emulated WAN, for hpncp's benchmarks.
#
# As a library (one WAN per shell process at a time):
#
#   source bench/netns.sh
#   wan_up --rtt 50ms --rate 1gbit          # sets NS_A, NS_B, WAN_ADDR_A, WAN_ADDR_B, ...
#   ip netns exec "$NS_B" /usr/sbin/sshd -f "$cfg"
#   ip netns exec "$NS_A" hpncp big.iso "$WAN_ADDR_B":/tmp/
#   wan_down                                # also run by the EXIT/INT/TERM/HUP trap
#
# As a command:
#
#   bench/netns.sh run [wan_up options] -- COMMAND [ARGS...]
#       runs COMMAND (in the root namespace, with the variables above in its
#       environment) and tears everything down afterwards, even on failure.
#   bench/netns.sh mode [wan_up options]
#       prints which mode wan_up would use (netem, wanem or veth).
#
# wan_up options (defaults in brackets):
#   --rtt DURATION    round-trip propagation delay, Go syntax: 10ms, 1.5ms, 0 [50ms]
#   --rate RATE       rate from NS_A to NS_B (NS_A's upload), and back unless
#                     --rate-back says otherwise: 100mbit, 1gbit, 10gbit,
#                     unlimited [1gbit]
#   --rate-back RATE  rate from NS_B to NS_A (NS_A's download) where it
#                     differs: an asymmetric link; a slower uplink is
#                     --rate 100mbit --rate-back 1gbit [--rate]
#   --queue SIZE      drop-tail queue per direction: BYTES (256k, 12m), or
#                     a multiple of the direction's own BDP (0.25bdp,
#                     0.5bdp, 2bdp); auto = 1bdp; a BDP multiple is at
#                     least 32 MTU [auto]
#   --loss P          random loss per packet and direction: 0.001 or 0.1% [0]
#   --jitter DURATION random extra one-way delay per packet, uniform from 0
#                     to DURATION; packets still leave in order [0]
#   --reorder P       share of packets let past the one ahead of them, per
#                     direction: 0.001 or 0.1% [0]
#   --mtu N           MTU of the link [1500]
#   --seed N          seed of the emulator's loss, jitter and reordering [1]
#   --tick DURATION   emulator's batching interval under load; 0 = exact
#                     per-packet timing at twice the CPU [auto: RTT/100,
#                     at most 1ms, 0 below 10ms]
#   --offload on|off  whether the emulator's devices take TCP senders'
#                     segmentation-offload packets whole (the link model
#                     still sees every MTU-sized packet; the receiver gets
#                     the segments due together as one, as from a NIC's
#                     GRO), or read and write every packet apart, at
#                     about twice the emulator's CPU [on]
#   --mode MODE       auto, wanem, netem or veth [auto]: auto is veth for
#                     --rtt 0 --rate unlimited --loss 0, else netem where the
#                     kernel has it and neither --jitter nor --reorder is
#                     asked for (netem's differ: its jitter reorders), else
#                     the userspace emulator (wanem)
#   --tcp PROFILE     TCP settings of both namespaces [host]:
#                       host    what a new namespace copies from this host
#                       debian  a stock Debian kernel's: tcp_rmem
#                               4096 131072 6291456, tcp_wmem 4096 16384
#                               4194304, congestion control cubic, and
#                               tcp_allowed_congestion_control "reno
#                               cubic" (host-wide, below)
#   --tcp-mem BYTES   the maximum of net.ipv4.tcp_rmem and tcp_wmem in both
#                     namespaces, over what --tcp set
#   --cc NAME         TCP congestion control in both namespaces, over what
#                     --tcp set
#
# A namespace other than the host's may only default to a congestion
# control in net.ipv4.tcp_allowed_congestion_control, a host-wide list. When
# the one asked for is available but not allowed, wan_up adds it to the
# list for the moment it takes to set it (under a lock, so that concurrent
# wan_ups restore the same list) and puts the list back at once. The
# sockets' own limits (net.core.rmem_max, wmem_max) are host-wide: only an
# explicit SO_RCVBUF or SO_SNDBUF meets them.
#
# That list is also what an ordinary user's TCP_CONGESTION may name (root
# may name any algorithm). It is host-wide (read-only inside a namespace
# on this kernel, 6.18), so with --tcp debian wan_up sets it to a stock
# Debian kernel's, "reno cubic" (plus --cc's algorithm, which a kernel
# adds when the administrator makes it the default), for as long as the
# WAN is up, and wan_down puts back what it was. Concurrent runs share
# it: the first saves the host's list in /run/hpncp-bench-cc.state, the
# last one out (or the next run, once the holders are dead) restores it;
# a run that needs another list while one is held fails.
#
# After wan_up these are set (and exported):
#   NS_A, NS_B              namespace names, hpncp-a-PID and hpncp-b-PID
#   WAN_ADDR_A, WAN_ADDR_B  198.18.0.1 (in NS_A) and 198.18.0.2 (in NS_B)
#   WAN_DEV                 the link's interface name in both namespaces (wan0)
#   WAN_MODE                wanem, netem or veth
#   WAN_TCP                 the TCP settings the namespaces run with, for tables
#   WANEM_PID               the emulator's PID (wanem mode; empty otherwise)
#   WAN_DIR                 a private temporary directory, removed by wan_down
# and these functions are available:
#   wan_exec a|b CMD...     run CMD inside NS_A or NS_B
#   wan_stats               print the emulator's counters so far (wanem mode)
#   wan_tcp_label ...       "stock Debian TCP settings" or "VARIANT: ...", for titles
#   wan_shape_label ...     ", queue 0.25 BDP, jitter 2ms, ...", for titles
#
# wan_down stops the emulator by its PID, stops by PID every process still
# inside the two namespaces (TERM, then KILL after 3 s), deletes the
# namespaces and the temporary directory, and restores the traps it found.
# After it, WAN_LAST_STATS holds the emulator's final counter lines.
#
# Needs root, ip(8), and go (to read --rate through bench/units.sh, and to
# build bench/wanem unless WANEM_BIN names a built binary). Never kills
# anything by name.

# The library must not change the caller's shell options; everything below
# is written to work under set -euo pipefail as well as without it.

_wan_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

_wan_err() { echo "netns.sh: error: $*" >&2; }

# shellcheck source=bench/units.sh
source "$_wan_root/bench/units.sh"

# _wan_usec DURATION: prints a Go-syntax duration (50ms, 1.5ms, 200us, 1s,
# 0) in microseconds, possibly fractional.
_wan_usec() {
	local v=$1 unit mult
	case $v in
	0) echo 0 && return ;;
	*ns) unit=ns mult=0.001 ;;
	*us) unit=us mult=1 ;;
	*µs) unit=µs mult=1 ;;
	*ms) unit=ms mult=1000 ;;
	*s) unit=s mult=1000000 ;;
	*) return 1 ;;
	esac
	v=${v%"$unit"}
	[[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || return 1
	awk -v n="$v" -v m="$mult" 'BEGIN { printf "%.3f\n", n * m }'
}

# _wan_parse ARGS...: sets the _wan_opt_* variables from wan_up options.
_wan_parse() {
	_wan_opt_rtt=50ms _wan_opt_rate=1gbit _wan_opt_queue=auto _wan_opt_loss=0
	_wan_opt_rate_back= _wan_opt_jitter=0 _wan_opt_reorder=0
	_wan_opt_mtu=1500 _wan_opt_seed=1 _wan_opt_tick=auto _wan_opt_offload=on _wan_opt_mode=auto _wan_opt_tcpmem= _wan_opt_cc= _wan_opt_tcp=host
	while [ $# -gt 0 ]; do
		if [ $# -lt 2 ]; then
			_wan_err "option $1 needs a value"
			return 2
		fi
		case $1 in
		--rtt) _wan_opt_rtt=$2 ;;
		--rate) _wan_opt_rate=$2 ;;
		--rate-back) _wan_opt_rate_back=$2 ;;
		--queue) _wan_opt_queue=$2 ;;
		--loss) _wan_opt_loss=$2 ;;
		--jitter) _wan_opt_jitter=$2 ;;
		--reorder) _wan_opt_reorder=$2 ;;
		--mtu) _wan_opt_mtu=$2 ;;
		--seed) _wan_opt_seed=$2 ;;
		--tick) _wan_opt_tick=$2 ;;
		--offload) _wan_opt_offload=$2 ;;
		--mode) _wan_opt_mode=$2 ;;
		--tcp) _wan_opt_tcp=$2 ;;
		--tcp-mem) _wan_opt_tcpmem=$2 ;;
		--cc) _wan_opt_cc=$2 ;;
		*)
			_wan_err "unknown option $1"
			return 2
			;;
		esac
		shift 2
	done
	case $_wan_opt_offload in
	on | off) ;;
	*)
		_wan_err "--offload $_wan_opt_offload: want on or off"
		return 2
		;;
	esac
	_wan_rtt_us=$(_wan_usec "$_wan_opt_rtt") || {
		_wan_err "--rtt $_wan_opt_rtt: want a duration such as 50ms"
		return 2
	}
	_wan_rate_bps=$(bench_units bitrate "$_wan_opt_rate") || {
		_wan_err "--rate $_wan_opt_rate: want a rate such as 1gbit or unlimited"
		return 2
	}
	_wan_rate_back_bps=$_wan_rate_bps
	if [ -n "$_wan_opt_rate_back" ]; then
		_wan_rate_back_bps=$(bench_units bitrate "$_wan_opt_rate_back") || {
			_wan_err "--rate-back $_wan_opt_rate_back: want a rate such as 100mbit or unlimited"
			return 2
		}
	fi
	_wan_jitter_us=$(_wan_usec "$_wan_opt_jitter") || {
		_wan_err "--jitter $_wan_opt_jitter: want a duration such as 2ms"
		return 2
	}
	case $_wan_opt_queue in
	auto | [0-9]*bdp | [0-9]*) ;;
	*)
		_wan_err "--queue $_wan_opt_queue: want auto, bytes such as 256k, or a multiple of the BDP such as 0.5bdp"
		return 2
		;;
	esac
	case $_wan_opt_mode in
	auto | wanem | netem | veth) ;;
	*)
		_wan_err "--mode $_wan_opt_mode: want auto, wanem, netem or veth"
		return 2
		;;
	esac
	if [ "$_wan_opt_mode" = veth ] && ! _wan_plain; then
		_wan_err "--mode veth emulates nothing: it needs --rtt 0 --rate unlimited --loss 0, no --rate-back, --jitter or --reorder"
		return 2
	fi
	if [ "$_wan_opt_mode" = netem ] && _wan_varies; then
		_wan_err "--mode netem: --jitter and --reorder are the userspace emulator's (netem's jitter reorders); use --mode wanem"
		return 2
	fi
	return 0
}

# _wan_plain: whether the options ask for no emulation at all.
_wan_plain() {
	[ "$_wan_rtt_us" = 0 ] && [ "$_wan_rate_bps" = 0 ] && [ "$_wan_rate_back_bps" = 0 ] &&
		[ "$_wan_opt_loss" = 0 ] && ! _wan_varies
}

# _wan_varies: whether the options ask for jitter or reordering.
_wan_varies() {
	[ "$_wan_jitter_us" != 0 ] || [ "$_wan_opt_reorder" != 0 ]
}

# _wan_netem_works: whether this kernel has the netem qdisc. Probed on a
# veth pair inside a scratch namespace so that nothing outside is touched.
_wan_netem_works() {
	local ns=hpncp-probe-$BASHPID ok=1
	ip netns add "$ns" || return 1
	if ip -n "$ns" link add probe0 type veth peer name probe1 &&
		ip netns exec "$ns" tc qdisc add dev probe0 root netem delay 1ms 2>/dev/null; then
		ok=0
	fi
	ip netns del "$ns"
	return "$ok"
}

_wan_pick_mode() {
	if [ "$_wan_opt_mode" != auto ]; then
		echo "$_wan_opt_mode"
	elif _wan_plain; then
		echo veth
	elif ! _wan_varies && _wan_netem_works; then
		echo netem
	else
		echo wanem
	fi
}

# _wan_chain_traps: runs wan_down on EXIT, INT, TERM and HUP before whatever
# the caller had there; a signal with no handler of the caller's still
# kills the shell, as it would have without us.
_wan_chain_traps() {
	local sig prev cmd
	_wan_saved_traps=()
	for sig in EXIT INT TERM HUP; do
		prev=$(trap -p "$sig")
		cmd=
		if [ -n "$prev" ]; then
			_wan_saved_traps+=("$prev")
			cmd=$(eval "set -- $prev" && printf '%s' "$3")
		else
			_wan_saved_traps+=("trap - $sig")
		fi
		if [ "$sig" = EXIT ]; then
			# shellcheck disable=SC2064 # expanded now on purpose
			trap "wan_down; $cmd" EXIT
		elif [ -n "$cmd" ]; then
			# shellcheck disable=SC2064
			trap "wan_down; $cmd" "$sig"
		else
			# shellcheck disable=SC2064
			trap "wan_down; trap - $sig; kill -s $sig \$BASHPID" "$sig"
		fi
	done
}

_wan_restore_traps() {
	local t
	for t in "${_wan_saved_traps[@]}"; do
		eval "$t"
	done
	_wan_saved_traps=()
}

# _wan_kill_pids PIDS...: TERM the PIDs, wait up to 3 s, KILL the rest.
_wan_kill_pids() {
	local pid i alive
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null || true
	for i in $(seq 30); do
		alive=
		for pid in "$@"; do
			if kill -0 "$pid" 2>/dev/null; then
				alive=1
			fi
		done
		[ -n "$alive" ] || return 0
		sleep 0.1
	done
	kill -KILL "$@" 2>/dev/null || true
	return 0
}

# wan_up [OPTIONS]: creates NS_A and NS_B and joins them (see the header).
wan_up() {
	if [ -n "${NS_A:-}" ]; then
		_wan_err "wan_up: a WAN is already up in this shell ($NS_A); call wan_down first"
		return 1
	fi
	_wan_parse "$@" || return
	local mode
	mode=$(_wan_pick_mode)
	WAN_MODE=$mode
	NS_A=hpncp-a-$BASHPID NS_B=hpncp-b-$BASHPID
	WAN_ADDR_A=198.18.0.1 WAN_ADDR_B=198.18.0.2 WAN_DEV=wan0 WANEM_PID=
	export NS_A NS_B WAN_ADDR_A WAN_ADDR_B WAN_DEV WAN_MODE WANEM_PID
	# Traps first: from here on, any failure still tears down what exists.
	_wan_chain_traps
	WAN_DIR=$(mktemp -d /tmp/hpncp-wan.XXXXXX) || {
		wan_down
		return 1
	}
	export WAN_DIR
	if ! _wan_up_"$mode"; then
		_wan_err "wan_up: setting up the $mode link failed; tearing down"
		wan_down
		return 1
	fi
	return 0
}

# _wan_netns_add: both namespaces, with lo up and the TCP settings asked for.
_wan_netns_add() {
	local ns rmem= wmem= cc=
	case $_wan_opt_tcp in
	host) ;;
	debian) rmem="4096 131072 6291456" wmem="4096 16384 4194304" cc=cubic ;;
	*)
		_wan_err "--tcp $_wan_opt_tcp: want host or debian"
		return 2
		;;
	esac
	if [ -n "$_wan_opt_tcpmem" ]; then
		rmem="4096 131072 $_wan_opt_tcpmem" wmem="4096 16384 $_wan_opt_tcpmem"
	fi
	[ -z "$_wan_opt_cc" ] || cc=$_wan_opt_cc
	if [ "$_wan_opt_tcp" = debian ]; then
		case $cc in
		reno | cubic) _wan_cc_hold "reno cubic" || return 1 ;;
		*) _wan_cc_hold "reno cubic $cc" || return 1 ;;
		esac
	fi
	for ns in "$NS_A" "$NS_B"; do
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up || return 1
		if [ -n "$rmem" ]; then
			ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_rmem=$rmem" "net.ipv4.tcp_wmem=$wmem" || return 1
		fi
		if [ -n "$cc" ]; then
			_wan_set_cc "$ns" "$cc" || return 1
		fi
	done
	WAN_TCP="tcp_rmem $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_rmem | tr -s '\t ' ' ')"
	WAN_TCP="$WAN_TCP, tcp_wmem $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_wmem | tr -s '\t ' ' ')"
	WAN_TCP="$WAN_TCP, $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_congestion_control)"
	WAN_TCP="$WAN_TCP (allowed: $(sysctl -n net.ipv4.tcp_allowed_congestion_control))"
	export WAN_TCP
}

# wan_tcp_label PROFILE TCPMEM CC LOSS: whether a benchmark's figures are
# the headline (a stock kernel's TCP settings, no loss) or a variant, for
# its table's title; the arguments are what it passed to wan_up.
wan_tcp_label() {
	if [ "$1" = debian ] && [ -z "$2" ] && [ -z "$3" ] && [ "${4:-0}" = 0 ]; then
		echo "stock Debian TCP settings"
	else
		echo "VARIANT: --tcp $1${2:+ --tcp-mem $2}${3:+ --cc $3}$( [ "${4:-0}" = 0 ] || echo " --loss $4")"
	fi
}

# _wan_cc_hold LIST: the host-wide tcp_allowed_congestion_control is LIST
# until _wan_cc_release (see the header). The state file holds the host's
# own list, the list in force, then the PIDs of the shells holding it.
_wan_cc_state=/run/hpncp-bench-cc.state
_wan_cc_held=
_wan_cc_hold() {
	local want=$1 me=$BASHPID
	(
		flock 9
		local saved= held= holders= pid
		if [ -f "$_wan_cc_state" ]; then
			{ read -r saved; read -r held; } <"$_wan_cc_state"
			for pid in $(tail -n +3 "$_wan_cc_state"); do
				! kill -0 "$pid" 2>/dev/null || holders="$holders $pid"
			done
		fi
		if [ -n "$holders" ] && [ "$held" != "$want" ]; then
			_wan_err "tcp_allowed_congestion_control is held at \"$held\" by another benchmark (PIDs$holders); this one needs \"$want\""
			exit 1
		fi
		[ -n "$saved" ] || saved=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
		sysctl -qw "net.ipv4.tcp_allowed_congestion_control=$want" || exit 1
		printf '%s\n' "$saved" "$want" $holders "$me" >"$_wan_cc_state"
	) 9>/run/hpncp-bench-cc.lock || return 1
	_wan_cc_held=$me
}

# _wan_cc_release: undoes this shell's _wan_cc_hold; the last holder puts
# the host's list back.
_wan_cc_release() {
	[ -n "$_wan_cc_held" ] || return 0
	(
		flock 9
		local saved held holders= pid
		[ -f "$_wan_cc_state" ] || exit 0
		{ read -r saved; read -r held; } <"$_wan_cc_state"
		for pid in $(tail -n +3 "$_wan_cc_state"); do
			[ "$pid" = "$_wan_cc_held" ] || ! kill -0 "$pid" 2>/dev/null || holders="$holders $pid"
		done
		if [ -z "$holders" ]; then
			sysctl -qw "net.ipv4.tcp_allowed_congestion_control=$saved"
			rm -f "$_wan_cc_state"
		else
			printf '%s\n' "$saved" "$held" $holders >"$_wan_cc_state"
		fi
	) 9>/run/hpncp-bench-cc.lock || _wan_err "could not restore net.ipv4.tcp_allowed_congestion_control (see $_wan_cc_state)"
	_wan_cc_held=
}

# wan_shape_label QUEUES JITTER REORDER RATE_BACK: the path's shape beyond
# rate, loss and TCP settings, for a table's heading, from what a
# benchmark passed to wan_up (QUEUES: its list of BDP multiples): empty for
# the defaults (one BDP, no jitter or reordering, one rate both ways).
wan_shape_label() {
	local out=
	case $1 in
	1) ;;
	*" "*) out=", queues of $1 BDP (a row each)" ;;
	*) out=", queue $1 BDP" ;;
	esac
	[ "${2:-0}" = 0 ] || out="$out, jitter $2"
	[ "${3:-0}" = 0 ] || out="$out, reorder $3"
	[ -z "${4:-}" ] || out="$out, B to A (downloads) at $4"
	printf '%s' "$out"
}

# _wan_set_cc NS NAME: makes NAME the congestion control NS defaults to,
# allowing it host-wide for that moment only where it has to be.
_wan_set_cc() {
	local ns=$1 cc=$2 allowed rc=0
	case " $(sysctl -n net.ipv4.tcp_available_congestion_control) " in
	*" $cc "*) ;;
	*)
		modprobe -q "tcp_$cc" 2>/dev/null || true
		case " $(sysctl -n net.ipv4.tcp_available_congestion_control) " in
		*" $cc "*) ;;
		*)
			_wan_err "--cc $cc: this kernel offers $(sysctl -n net.ipv4.tcp_available_congestion_control)"
			return 1
			;;
		esac
		;;
	esac
	(
		flock 9
		allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
		case " $allowed " in
		*" $cc "*) ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_congestion_control=$cc" ;;
		*)
			sysctl -qw "net.ipv4.tcp_allowed_congestion_control=$allowed $cc" || exit 1
			ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_congestion_control=$cc" || rc=1
			sysctl -qw "net.ipv4.tcp_allowed_congestion_control=$allowed" || rc=1
			exit $rc
			;;
		esac
	) 9>/run/hpncp-bench-cc.lock || {
		_wan_err "--cc $cc: could not make it the default of $ns"
		return 1
	}
}

# _wan_addr_up NS DEV ADDR: names the link wan0 inside NS, sets its MTU and
# address (a /24 route to the peer, no default route) and brings it up.
_wan_addr_up() {
	local ns=$1 dev=$2 addr=$3
	ip -n "$ns" link set "$dev" name "$WAN_DEV" &&
		ip -n "$ns" link set "$WAN_DEV" mtu "$_wan_opt_mtu" &&
		ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$WAN_DEV.disable_ipv6=1" &&
		ip -n "$ns" addr add "$addr/24" dev "$WAN_DEV" &&
		ip -n "$ns" link set "$WAN_DEV" up
}

_wan_up_veth() {
	_wan_netns_add || return 1
	ip -n "$NS_A" link add "hpa$BASHPID" type veth peer name "hpb$BASHPID" netns "$NS_B" || return 1
	_wan_addr_up "$NS_A" "hpa$BASHPID" "$WAN_ADDR_A" &&
		_wan_addr_up "$NS_B" "hpb$BASHPID" "$WAN_ADDR_B"
}

# _wan_up_netem: a veth pair with, on each side's egress, netem for delay
# and loss and a tbf child for rate and a byte-limited drop-tail queue.
_wan_up_netem() {
	_wan_up_veth || return 1
	local half queue burst ns rate bdps
	half=$(awk -v u="$_wan_rtt_us" 'BEGIN { printf "%.3fms\n", u / 2000 }')
	for ns in "$NS_A" "$NS_B"; do
		# NS_A's egress is the A-to-B direction, NS_B's the way back.
		rate=$_wan_rate_bps
		[ "$ns" = "$NS_A" ] || rate=$_wan_rate_back_bps
		case $_wan_opt_queue in
		auto | *bdp)
			bdps=${_wan_opt_queue%bdp}
			[ "$bdps" != auto ] || bdps=1
			queue=$(awk -v r="$rate" -v u="$_wan_rtt_us" -v m="$_wan_opt_mtu" -v k="$bdps" \
				'BEGIN { q = k * r / 8 * u / 1e6; if (q < 32 * m) q = 32 * m; printf "%.0f\n", q }')
			;;
		*) queue=$_wan_opt_queue ;;
		esac
		# tbf needs a bucket of at least one packet, and about a
		# millisecond of tokens to keep a high rate with timer wake-ups.
		burst=$(awk -v r="$rate" -v m="$_wan_opt_mtu" \
			'BEGIN { b = r / 8 / 1000; if (b < 2 * m) b = 2 * m; printf "%.0f\n", b }')
		# veth hands 64 KiB GSO frames to the qdisc; a per-packet model
		# needs them segmented (where ethtool exists to ask for it).
		if command -v ethtool >/dev/null 2>&1; then
			ip netns exec "$ns" ethtool -K "$WAN_DEV" tso off gso off gro off >/dev/null 2>&1
		fi
		ip netns exec "$ns" tc qdisc add dev "$WAN_DEV" root handle 1: netem \
			delay "$half" loss "$_wan_opt_loss" limit 1000000 || return 1
		if [ "$rate" != 0 ]; then
			ip netns exec "$ns" tc qdisc add dev "$WAN_DEV" parent 1:1 handle 10: tbf \
				rate "${rate}bit" burst "$burst" limit "$queue" || return 1
		fi
	done
}

_wan_wanem_bin() {
	if [ -n "${WANEM_BIN:-}" ]; then
		echo "$WANEM_BIN"
		return
	fi
	(cd "$_wan_root" && go build -o "$WAN_DIR/wanem" ./bench/wanem) >&2 || return 1
	echo "$WAN_DIR/wanem"
}

_wan_up_wanem() {
	local bin tun_a=hpa$BASHPID tun_b=hpb$BASHPID i
	bin=$(_wan_wanem_bin) || return 1
	# Niced up so that the link's timing suffers less from whatever else
	# the machine runs (a real link does not share the hosts' CPUs); nice
	# execs the emulator, so $! is still its PID.
	nice -n -10 "$bin" --tick "$_wan_opt_tick" --rtt "$_wan_opt_rtt" --rate "$_wan_opt_rate" --queue "$_wan_opt_queue" \
		${_wan_opt_rate_back:+--rate-back "$_wan_opt_rate_back"} --jitter "$_wan_opt_jitter" --reorder "$_wan_opt_reorder" \
		--loss "$_wan_opt_loss" --mtu "$_wan_opt_mtu" --seed "$_wan_opt_seed" \
		--offload="$([ "$_wan_opt_offload" = on ] && echo true || echo false)" \
		--tun-a "$tun_a" --tun-b "$tun_b" \
		</dev/null >"$WAN_DIR/wanem.out" 2>"$WAN_DIR/wanem.log" &
	WANEM_PID=$!
	for i in $(seq 100); do
		if grep -qx ready "$WAN_DIR/wanem.out" 2>/dev/null; then
			break
		fi
		if ! kill -0 "$WANEM_PID" 2>/dev/null; then
			cat "$WAN_DIR/wanem.log" >&2
			return 1
		fi
		sleep 0.1
	done
	grep -qx ready "$WAN_DIR/wanem.out" || {
		_wan_err "wanem did not become ready in 10 s"
		return 1
	}
	_wan_netns_add || return 1
	# Moving a device to another namespace sets it down and keeps its
	# file descriptor working: the emulator goes on reading and writing it.
	ip link set "$tun_a" netns "$NS_A" || return 1
	ip link set "$tun_b" netns "$NS_B" || return 1
	_wan_addr_up "$NS_A" "$tun_a" "$WAN_ADDR_A" &&
		_wan_addr_up "$NS_B" "$tun_b" "$WAN_ADDR_B"
}

wan_exec() {
	local side=${1:-}
	shift || true
	case $side in
	a) ip netns exec "$NS_A" "$@" ;;
	b) ip netns exec "$NS_B" "$@" ;;
	*)
		_wan_err "wan_exec: want a or b, then a command"
		return 2
		;;
	esac
}

# wan_forget: both namespaces forget what TCP learnt of the path (the
# kernel's tcp_metrics: RTT, its variance, cwnd), so that each timed copy
# starts on a path no connection has measured, as a user's first copy
# does. Left in place, the metrics of one copy steered the next: at 50 ms
# a 1 GiB upload took 11.1-11.4 s after a download and 10.5-10.9 s after
# an upload, so that in a side-by-side run the tool that came first after
# the other direction lost 0.5 s to the one after it.
wan_forget() {
	[ -n "${NS_A:-}" ] || return 0 # loopback: no path of its own
	ip netns exec "$NS_A" ip tcp_metrics flush all 2>/dev/null || true
	ip netns exec "$NS_B" ip tcp_metrics flush all 2>/dev/null || true
}

# wan_stats: the emulator's counters so far, one line per direction.
wan_stats() {
	[ -n "${WANEM_PID:-}" ] || return 0
	local before after i
	before=$(grep -c ' dir=' "$WAN_DIR/wanem.log" 2>/dev/null || true)
	kill -USR1 "$WANEM_PID" 2>/dev/null || return 0
	for i in $(seq 50); do
		after=$(grep -c ' dir=' "$WAN_DIR/wanem.log" 2>/dev/null || true)
		[ "${after:-0}" -ge $((${before:-0} + 2)) ] && break
		sleep 0.02
	done
	grep ' dir=' "$WAN_DIR/wanem.log" | tail -n 2
}

# wan_down: tears down everything wan_up made; safe to call more than once.
wan_down() {
	local ns pids
	if [ -n "${WANEM_PID:-}" ]; then
		_wan_kill_pids "$WANEM_PID"
		wait "$WANEM_PID" 2>/dev/null || true
		# || true: an emulator that died before it counted left no lines,
		# which must not stop a caller's set -e -o pipefail here.
		WAN_LAST_STATS=$(grep ' dir=' "$WAN_DIR/wanem.log" 2>/dev/null | tail -n 2 || true)
		WANEM_PID=
	fi
	for ns in "${NS_A:-}" "${NS_B:-}"; do
		[ -n "$ns" ] && [ -e "/run/netns/$ns" ] || continue
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		# shellcheck disable=SC2086 # one word per PID
		_wan_kill_pids $pids
		ip netns del "$ns" 2>/dev/null || _wan_err "wan_down: cannot delete namespace $ns"
	done
	if [ -n "${WAN_DIR:-}" ]; then
		rm -rf -- "$WAN_DIR"
	fi
	_wan_cc_release
	NS_A= NS_B= WAN_DIR= WAN_MODE=
	if [ "${#_wan_saved_traps[@]}" -gt 0 ] 2>/dev/null; then
		_wan_restore_traps
	fi
	return 0
}

_wan_saved_traps=()

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	case ${1:-} in
	run)
		shift
		opts=()
		while [ $# -gt 0 ] && [ "$1" != -- ]; do
			opts+=("$1")
			shift
		done
		if [ $# -lt 2 ]; then
			_wan_err "usage: $0 run [wan_up options] -- COMMAND [ARGS...]"
			exit 2
		fi
		shift
		wan_up "${opts[@]}"
		rc=0
		"$@" || rc=$?
		wan_down
		if [ -n "${WAN_LAST_STATS:-}" ]; then
			printf '%s\n' "$WAN_LAST_STATS" >&2
		fi
		exit "$rc"
		;;
	mode)
		shift
		_wan_parse "$@"
		_wan_pick_mode
		;;
	*)
		sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
fi
