#!/usr/bin/env bash
# hpncp against the tools a user would pick instead, on emulated WAN paths,
# side by side in one run: scp (SFTP mode), scp -O, sftp, rsync -e ssh,
# rsync -e 'hpncp ssh', hpncp --hpn-disabled (one stream, the baseline),
# mscp -n 16 where it is installed and hpncp (auto), uploads and
# downloads, at loopback and at each RTT through bench/netns.sh.
#
#   bench/wan.sh [--rtts "lo 1 10 50 100"] [--rate 1gbit] [--runs 3]
#                [--size 1G] [--slow-size 256M] [--tools "..."]
#                [--dirs "up down"] [--mtu 1500] [--out FILE.md]
#                [--hpncp BINARY] [--before BINARY] [--vs TOOL]
#                [--tcp debian] [--tcp-mem BYTES] [--cc NAME] [--loss P]
#                [--as-root]
#                [--queue "0.25 0.5 1 2"] [--jitter DURATION] [--reorder P]
#                [--rate-back RATE] [--offload on|off]
#
#   --rtts       "lo" is 127.0.0.1 in this namespace (no emulator); a number
#                is an RTT in ms through the emulator at --rate
#   --queue      the emulator's drop-tail queue in multiples of the BDP
#                (default 1); with several, each RTT runs at each, a row
#                and a queue column each
#   --jitter     random extra one-way delay per packet (2ms), order kept
#   --reorder    share of packets let past the one ahead (0.1%)
#   --rate-back  downloads' rate (the far end to the client) where it
#                differs from --rate, the uploads' (bench/netns.sh)
#   --offload    off: a variant, the emulator reads and writes every
#                packet apart instead of taking TCP's offload packets
#                whole (bench/netns.sh), at about twice its CPU, which the
#                2-core host's endpoints then lack [on]
#   --size       file size for hpncp auto, the parallel peers and HPN-SSH,
#                and for every tool below 50 ms
#   --slow-size  file size for the single-channel tools (scp, scp-O, sftp,
#                rsync, hpnd) and for rclone and lftp, whose uploads are one
#                stream, at 50 ms and more, where 1 GiB would take a minute
#                a run; MB/s stays comparable, set-up included
#   --tcp         TCP settings of both namespaces: debian (a stock Debian
#                 kernel's: tcp_rmem max 6 MiB, tcp_wmem max 4 MiB, cubic;
#                 the headline) or host (what this host has)
#   --tcp-mem     a variant: tcp_rmem and tcp_wmem max raised to BYTES
#   --cc          a variant: another congestion control (bbr), the
#                 namespaces' default and allowed to every user
#   --as-root     a variant: the client tools run as root, who may set
#                 any congestion control (hpncp's --cc auto sets bbr on
#                 an upload) and socket buffers past rmem_max/wmem_max
#   --loss        a variant: random loss per packet and direction (0.01%)
#   --tools      any of: scp scp-O sftp rsync rsync-hpn rsync-helper ssh-cat
#                helper-cat hpnd hpn hpn-verify hpn-sync
#                (rsync-hpn is rsync -e 'hpncp ssh' with no helper at the far
#                end, rsync-helper the same with the hpncp under test there
#                as its helper (hpncp helper install, into the run's
#                directory: --helper-dir), ssh-cat and helper-cat
#                `hpncp ssh bench 'cat > f' < file` up and `cat f > file`
#                down, without and with the helper; hpn-verify hpncp
#                --verify with that helper taking the far end's hash
#                (--vs hpn gives what --verify costs); hpn-sync hpncp sync
#                of the file to a target that is not there, so sent
#                whole); with --before, also hpn-before;
#                the parallel peers mscp (-n 16), mscp-a64 (-n 8 -a 64),
#                rclone (sftp backend, its multi-thread download), lftp
#                (sftp, pget -n 16 down) and hpnssh (HPN-SSH on both
#                ends: its hpnscp to its hpnsshd, which runs beside the
#                stock sshd on port 2223; found as bench/sshd.sh's
#                hpnssh_find says), each skipped with a note when it is
#                not installed
#   --before     another hpncp binary (an earlier commit's), run as tool
#                hpn-before beside hpn in the same run, to show a change
#                leaves the figures within noise
#   --vs         the tool each median is divided by (scp)
#   --out        also write the table as markdown
#
# The server is a stock OpenSSH sshd started in the far namespace with its
# own keys and config (Subsystem sftp internal-sftp). The client tools run
# as an ordinary user, hpncp-bench (made once by bench/sshd.sh; BENCH_USER
# names another), who logs in to that sshd as itself: scp -O and rsync exec
# through its bash. With --tcp debian (the default) the host-wide
# net.ipv4.tcp_allowed_congestion_control is "reno cubic" for the run, as
# on a stock kernel, so that user cannot pick bbr. Files live on /dev/shm
# so the disk stays out of it. Needs root (namespaces, the account),
# sshd, scp, sftp, rsync, setpriv, /usr/bin/time, go. Each row: min,
# median and max MB/s (10^6 bytes/s, wall time with connection set-up),
# the ratio of the median to --vs's (scp's) in the same direction and RTT,
# and the CPU seconds per GiB copied: the whole machine's (/proc/stat,
# everything but idle and iowait, over the copy: both ends, the emulator
# and whatever else runs) and, in brackets, the client's (user + sys of
# the client command and the children it waited for), medians.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

rtts="lo 1 10 50 100" rate=1gbit runs=3 size=1G slow_size=256M
tools="scp scp-O sftp rsync rsync-hpn hpnd mscp hpn" dirs="up down" mtu=1500 out= hpncp_bin= before_bin=
tcp=debian tcp_mem= cc= loss=0 vs=scp as_root=
queues=1 jitter=0 reorder=0 rate_back= offload=on
while [ $# -gt 0 ]; do
	case $1 in
	--as-root) as_root=1 && shift && continue ;;
	--rtts) rtts=$2 ;;
	--rate) rate=$2 ;;
	--runs) runs=$2 ;;
	--size) size=$2 ;;
	--slow-size) slow_size=$2 ;;
	--tools) tools=$2 ;;
	--dirs) dirs=$2 ;;
	--mtu) mtu=$2 ;;
	--out) out=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	--before) before_bin=$2 ;;
	--tcp) tcp=$2 ;;
	--tcp-mem) tcp_mem=$2 ;;
	--cc) cc=$2 ;;
	--loss) loss=$2 ;;
	--queue) queues=$2 ;;
	--jitter) jitter=$2 ;;
	--reorder) reorder=$2 ;;
	--rate-back) rate_back=$2 ;;
	--offload) offload=$2 ;;
	--vs) vs=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
case " $tools " in
*" hpn-before "*) [ -n "$before_bin" ] || { echo "wan.sh: tool hpn-before needs --before BINARY" >&2; exit 2; } ;;
esac
[ "$(id -u)" = 0 ] || { echo "wan.sh: needs root (network namespaces)" >&2; exit 1; }
# shellcheck source=bench/netns.sh
source "$here/netns.sh"
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"
# Peers are optional: a tool that is not installed is left out of the run
# and named under the table.
skipped=
kept=
for tool in $tools; do
	case $tool in
	mscp | mscp-a64) prog=mscp ;;
	rclone | lftp) prog=$tool ;;
	*) prog= ;;
	esac
	if [ "$tool" = hpnssh ] && ! hpnssh_find; then
		echo "wan.sh: HPN-SSH (hpnscp, hpnsshd) is not installed; $tool skipped" >&2
		skipped="$skipped $tool"
		continue
	fi
	if [ -n "$prog" ] && ! command -v "$prog" >/dev/null; then
		echo "wan.sh: $prog is not installed; $tool skipped" >&2
		skipped="$skipped $tool"
		continue
	fi
	kept="$kept $tool"
done
tools=${kept# }

work=$(mktemp -d /dev/shm/hpncp-wan.XXXXXX)
cleanup() {
	[ -z "${sshd_pid:-}" ] || stop_sshd
	[ -z "${hpnsshd_pid:-}" ] || stop_hpnsshd
	rm -rf "$work"
}
trap cleanup EXIT
[ -n "$as_root" ] || bench_user_setup || { echo "wan.sh: no ordinary user to run the clients as" >&2; exit 1; }

if [ -z "$hpncp_bin" ]; then
	echo "building hpncp" >&2
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi
mkdir -p "$work/remote" "$work/local" "$work/helper"
bench_user_own "$work/remote" "$work/local" "$work/helper"
chmod 700 "$work/helper"

size_bytes=$(bench_units size "$size") || { echo "wan.sh: --size $size: want bytes or a K, M, G suffix" >&2; exit 2; }
slow_bytes=$(bench_units size "$slow_size") || { echo "wan.sh: --slow-size $slow_size: want bytes or a K, M, G suffix" >&2; exit 2; }

# testfile BYTES: sets f to the path of a random file of that size, made
# once (not in a subshell, so that the file is made once per size).
testfile() {
	f=$work/src-$1
	if ! [ -e "$f" ]; then
		echo "creating a $1-byte test file" >&2
		head -c "$1" /dev/urandom >"$f"
		bench_user_own "$f"
	fi
}

# client CMD...: CMD on the client's side of the path as the benchmark's
# user, its CPU time (user and sys seconds) in $work/cpu.
client() { "${run_client[@]}" /usr/bin/time -f '%U %S' -o "$work/cpu" "${run_user[@]}" "$@"; }

# busy_cpu: the CPU seconds this machine has been busy, all CPUs
# (/proc/stat: all but idle and iowait).
busy_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { print ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat
}

# copy TOOL DIR SRC: one timed copy; prints seconds, the machine's CPU
# seconds over it and the client's.
copy() {
	local tool=$1 dir=$2 src=$3 cfg=$work/ssh_config from to
	local name
	name=$(basename "$src")
	if [ "$dir" = up ]; then
		from=$src to=bench:$work/remote/$name
		rm -f "$work/remote/$name"
	else
		from=bench:$src to=$work/local/$name
		rm -f "$work/local/$name"
	fi
	local t0 t1 c0 c1
	wan_forget
	c0=$(busy_cpu)
	t0=$(date +%s.%N)
	case $tool in
	scp) client scp -F "$cfg" -q "$from" "$to" ;;
	scp-O) client scp -O -F "$cfg" -q "$from" "$to" ;;
	sftp)
		if [ "$dir" = up ]; then
			echo "put $src $work/remote/$name" | client sftp -F "$cfg" -q -b - bench >/dev/null
		else
			echo "get $src $work/local/$name" | client sftp -F "$cfg" -q -b - bench >/dev/null
		fi
		;;
	rsync) client rsync -e "ssh -F $cfg" "$from" "$to" ;;
	rsync-hpn) client rsync -e "$hpncp_bin ssh -F $cfg" "$from" "$to" ;;
	rsync-helper) client rsync -e "$hpncp_bin ssh -F $cfg --helper-dir $work/helper" "$from" "$to" ;;
	ssh-cat | helper-cat)
		# A command's stdin and stdout: hpncp ssh without (ssh-cat) and
		# with (helper-cat) the helper at the far end.
		local via=(--helper never)
		[ "$tool" = ssh-cat ] || via=(--helper-dir "$work/helper")
		if [ "$dir" = up ]; then
			client "$hpncp_bin" ssh -F "$cfg" "${via[@]}" bench "cat > $work/remote/$name" <"$src"
		else
			client sh -c '"$@" > "$0"' "$work/local/$name" "$hpncp_bin" ssh -F "$cfg" "${via[@]}" bench "cat $src"
		fi
		;;
	hpnd) client "$hpncp_bin" -F "$cfg" -q --hpn-disabled "$from" "$to" ;;
	hpn) client "$hpncp_bin" -F "$cfg" -q "$from" "$to" ;;
	hpn-verify) client "$hpncp_bin" -F "$cfg" -q --verify --helper-dir "$work/helper" "$from" "$to" ;;
	hpn-before) client "$before_bin" -F "$cfg" -q "$from" "$to" ;;
	hpn-sync) client "$hpncp_bin" sync -q -e "ssh -F $cfg" "$from" "$to" ;;
	mscp) client mscp -F "$cfg" -q -n 16 "$from" "$to" ;;
	mscp-a64) client mscp -F "$cfg" -q -n 8 -a 64 "$from" "$to" ;;
	hpnssh) client "$hpnssh_bin/hpnscp" -F "$work/hpnssh_config" -q "$from" "$to" ;;
	rclone)
		# rclone reads no ssh_config: the same host, key and known_hosts,
		# given as an on-the-fly remote.
		local remote=":sftp,host=$addr,port=2222,user=${bench_user:-$(id -un)},key_file=$work/client_key,known_hosts_file=$work/known_hosts:"
		if [ "$dir" = up ]; then
			client rclone --config /dev/null -q copyto "$src" "$remote$work/remote/$name"
		else
			client rclone --config /dev/null -q copyto "$remote$src" "$work/local/$name"
		fi
		;;
	lftp)
		local cmd="set sftp:connect-program 'ssh -a -x -F $cfg'; open sftp://bench"
		if [ "$dir" = up ]; then
			client lftp -c "$cmd; put $src -o $work/remote/$name"
		else
			client lftp -c "$cmd; pget -n 16 $src -o $work/local/$name"
		fi
		;;
	*) echo "wan.sh: unknown tool $tool" >&2; exit 2 ;;
	esac
	t1=$(date +%s.%N)
	c1=$(busy_cpu)
	if [ "$dir" = up ]; then
		cmp -s "$src" "$work/remote/$name" || { echo "wan.sh: $tool $dir: copy differs" >&2; exit 1; }
	else
		cmp -s "$src" "$work/local/$name" || { echo "wan.sh: $tool $dir: copy differs" >&2; exit 1; }
	fi
	awk -v a="$t0" -v b="$t1" -v c0="$c0" -v c1="$c1" -v u="$(tail -1 "$work/cpu")" \
		'BEGIN { split(u, t, " "); printf "%.3f %.2f %.2f\n", b - a, c1 - c0, t[1] + t[2] }'
}

results=$work/results # lines: rtt[:queue] dir tool bytes seconds machine-CPU-s client-CPU-s
: >"$results"
# cases: every RTT at every queue size (loopback has none), as rtt:queue.
cases= several=
case $queues in *" "*) several=1 ;; esac
for rtt in $rtts; do
	for q in $queues; do
		[ "$rtt" != lo ] || { cases="$cases lo" && break; }
		cases="$cases $rtt:$q"
	done
done
for case in $cases; do
	rtt=${case%:*} q=
	[ "$rtt" = lo ] || q=${case#*:}
	if [ "$rtt" = lo ]; then
		addr=127.0.0.1 run_server=() run_client=()
	else
		wan_up --rtt "${rtt}ms" --rate "$rate" --mtu "$mtu" --loss "$loss" --tcp "$tcp" ${tcp_mem:+--tcp-mem "$tcp_mem"} ${cc:+--cc "$cc"} \
			--queue "${q}bdp" --jitter "$jitter" --reorder "$reorder" ${rate_back:+--rate-back "$rate_back"} --offload "$offload"
		tcp_settings=$WAN_TCP
		addr=$WAN_ADDR_B run_server=(ip netns exec "$NS_B") run_client=(ip netns exec "$NS_A")
	fi
	start_sshd "$addr" 2222 "MaxStartups 100:30:200" ||
		{ echo "wan.sh: sshd did not come up on $addr: $(cat "$work/sshd.log")" >&2; exit 1; }
	case " $tools " in
	*" rsync-helper "* | *" helper-cat "* | *" hpn-verify "*)
		# The helper as a user puts it there: hpncp helper install,
		# into a directory of the run's (its hash checked at each start).
		"${run_client[@]}" "${run_user[@]}" "$hpncp_bin" helper install -q -F "$work/ssh_config" --helper-dir "$work/helper" bench >/dev/null ||
			{ echo "wan.sh: hpncp helper install failed" >&2; exit 1; }
		;;
	esac
	case " $tools " in
	*" hpnssh "*)
		start_hpnsshd "$addr" 2223 ||
			{ echo "wan.sh: hpnsshd did not come up on $addr: $(cat "$work/hpnsshd.log")" >&2; exit 1; }
		;;
	esac
	for run in $(seq "$runs"); do
		for dir in $dirs; do
			for tool in $tools; do
				sz=$size_bytes
				case $tool in
				hpn | hpn-verify | hpn-before | hpn-sync | mscp | mscp-a64 | hpnssh | rsync-helper | helper-cat) slow= ;;
				*) slow=1 ;;
				esac
				if [ -n "$slow" ] && [ "$rtt" != lo ] && [ "$rtt" -ge 50 ]; then
					sz=$slow_bytes
				fi
				testfile "$sz"
				s=$(copy "$tool" "$dir" "$f")
				echo "$case $dir $tool $sz $s" >>"$results"
				echo "rtt=$rtt${several:+${q:+ queue=$q}} run=$run $dir $tool: ${s%% *} s, CPU machine / client ${s#* } s" >&2
			done
		done
	done
	stop_sshd
	[ -z "$hpnsshd_pid" ] || stop_hpnsshd
	if [ "$rtt" != lo ]; then
		wan_stats >&2 || true
		wan_down
	fi
done

# The table: per rtt, dir, tool: min median max MB/s, ratio of medians to scp.
table=$(awk -v tools="$tools" -v rtts="$cases" -v queues="$queues" -v dirs="$dirs" -v rate="$rate" -v runs="$runs" -v vs="$vs" '
function median(arr, n,   i, j, t, a) {
	for (i = 1; i <= n; i++) a[i] = arr[i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2 SUBSEP $3; n[k]++; v[k, n[k]] = $4 / $5 / 1e6; size[k] = $4
  m[k, n[k]] = $6 / ($4 / 1073741824); c[k, n[k]] = $7 / ($4 / 1073741824) }
END {
	nq = split(queues, Q, " ")
	printf "| RTT |%s dir | tool | size | min MB/s | median MB/s | max MB/s | x %s | CPU s/GiB machine (client) |\n", (nq > 1) ? " queue |" : "", vs
	printf "|---|%s---|---|---|---|---|---|---|---|\n", (nq > 1) ? "---|" : ""
	nt = split(tools, T, " "); nr = split(rtts, R, " "); nd = split(dirs, D, " ")
	for (r = 1; r <= nr; r++) for (d = 1; d <= nd; d++) {
		ks = R[r] SUBSEP D[d] SUBSEP vs
		if (n[ks]) { for (i = 1; i <= n[ks]; i++) x[i] = v[ks, i]; scpmed = median(x, n[ks]) } else scpmed = 0
		for (t = 1; t <= nt; t++) {
			k = R[r] SUBSEP D[d] SUBSEP T[t]
			if (!n[k]) continue
			mn = 1e18; mx = 0
			for (i = 1; i <= n[k]; i++) { x[i] = v[k, i]; if (x[i] < mn) mn = x[i]; if (x[i] > mx) mx = x[i] }
			med = median(x, n[k])
			for (i = 1; i <= n[k]; i++) { y[i] = m[k, i]; z[i] = c[k, i] }
			cpu = sprintf("%.2f (%.2f)", median(y, n[k]), median(z, n[k]))
			ratio = scpmed ? sprintf("%.2f", med / scpmed) : "-"
			split(R[r], RQ, ":")
			lbl = (R[r] == "lo") ? "loopback" : RQ[1] " ms"
			if (nq > 1) lbl = lbl " | " ((R[r] == "lo") ? "-" : RQ[2] " BDP")
			printf "| %s | %s | %s | %d MiB | %.1f | %.1f | %.1f | %s | %s |\n", lbl, D[d], T[t], size[k] / 1048576, mn, med, mx, ratio, cpu
		}
	}
}' "$results")

{
	echo "hpncp vs stock tools, $(date -u +%Y-%m-%d), clients ${bench_user:+as an ordinary user ($bench_user)}${as_root:+as root (VARIANT: --as-root)}, $runs runs each, rate $rate, MTU $mtu, loss $loss$(wan_shape_label "$queues" "$jitter" "$reorder" "$rate_back")$([ "$offload" = off ] && echo " (VARIANT: emulator without offload)"), ${tcp_settings:-loopback only} ($(wan_tcp_label "$tcp" "$tcp_mem" "$cc" "$loss")), stock OpenSSH $(/usr/sbin/sshd -V 2>&1 | head -1 | cut -d, -f1) server"
	echo
	echo "$table"
	case " $tools " in
	*" hpnssh "*) echo; echo "hpnssh: $("$hpnssh_sbin/hpnsshd" -V 2>&1 | head -1 | cut -d, -f1) on both ends, its hpnscp to its hpnsshd (the stock sshd's keys and settings, no PAM)." ;;
	esac
	[ -z "$skipped" ] || { echo; echo "Not installed, skipped:$skipped."; }
} | tee ${out:+"$out"}
