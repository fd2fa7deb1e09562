#!/usr/bin/env bash
# Many small files: hpncp against scp -r and rsync -a on an emulated WAN
# path, side by side in one run, uploads and downloads of one tree to an
# empty target. The tree: --dirs directories of --per-dir files of 4 KiB
# (10,000 by default) and five files of 10 MiB. Every run copies the whole
# tree, and the copy is compared with the source.
#
#   bench/many.sh [--rtt 50] [--rate 1gbit] [--runs 3] [--dirs 100]
#                 [--per-dir 100] [--files N] [--tools "scp rsync hpn hpnd"]
#                 [--scp-sample 500] [--scp-runs 1] [--out FILE.md]
#                 [--hpncp BINARY] [--before BINARY]
#                 [--tcp debian] [--tcp-mem BYTES] [--cc NAME] [--loss P]
#                 [--as-root]
#                 [--queue "0.25 0.5 1 2"] [--jitter DURATION] [--reorder P]
#                 [--rate-back RATE]
#
#   --rtt         RTT in ms through bench/netns.sh's emulator at --rate
#   --queue       the emulator's drop-tail queue in multiples of the BDP
#                 (default 1); with several, every run copies at each, a
#                 row and a queue column each
#   --jitter      random extra one-way delay per packet (2ms), order kept
#   --reorder     share of packets let past the one ahead (0.1%)
#   --rate-back   downloads' rate (the far end to the client) where it
#                 differs from --rate, the uploads' (bench/netns.sh)
#   --tcp         TCP settings of both namespaces: debian (a stock Debian
#                 kernel's: tcp_rmem max 6 MiB, tcp_wmem max 4 MiB, cubic;
#                 the headline) or host (what this host has)
#   --tcp-mem     a variant: tcp_rmem and tcp_wmem max raised to BYTES
#   --cc          a variant: another congestion control (bbr), the
#                 namespaces' default and allowed to every user
#   --as-root     a variant: the client tools run as root (see wan.sh)
#   --loss        a variant: random loss per packet and direction (0.01%)
#   --files       about N small files instead of --dirs x --per-dir, laid
#                 out as round(sqrt(N)) directories of as many files
#                 (1,000,000: 1,000 of 1,000); the table then gives files
#                 per second and each hpncp tool's peak RSS
#   --tools       any of: scp (scp -r, SFTP mode), rsync (rsync -a -e ssh),
#                 hpn (hpncp -r), hpnd (hpncp -r --hpn-disabled) and sync
#                 (hpncp sync -a -e ssh, rsync's command line);
#                 with --before, also hpn-before
#   --before      another hpncp binary (an earlier commit's), run as tool
#                 hpn-before beside hpn in the same run, to show a change
#                 leaves the figures within noise
#   --scp-sample  scp takes a round trip or more per file: 10,000 files at
#                 50 ms are half an hour. With a sample of N < all small
#                 files, scp's time is estimated from three runs, each
#                 timed: the big files alone (B), one small file (S: the
#                 set-up) and N small files (T), as B + S + (T - S) x
#                 all/N, and the table says so. 0 copies the whole tree.
#   --scp-runs    runs that include scp (the first ones): at minutes a
#                 run, one is usually enough
#
# The server is a stock OpenSSH sshd in the far namespace, set up as
# bench/wan.sh does (Subsystem sftp internal-sftp), and the client tools
# run as wan.sh's ordinary user, hpncp-bench, who logs in as itself (rsync
# and tar mode exec through its bash), with the host-wide
# tcp_allowed_congestion_control "reno cubic" under --tcp debian. The
# files live on /dev/shm. Each row: min, median and max seconds, wall time
# with connection set-up, and the ratio of hpncp's median to the tool's.
# Needs root, sshd, scp, rsync, setpriv, /usr/bin/time, go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

rtt=50 rate=1gbit runs=3 ndirs=100 per_dir=100 tools="scp rsync hpn hpnd"
scp_sample=500 scp_runs=1 out= hpncp_bin= before_bin= nfiles=
tcp=debian tcp_mem= cc= loss=0 as_root=
queues=1 jitter=0 reorder=0 rate_back=
while [ $# -gt 0 ]; do
	case $1 in
	--as-root) as_root=1 && shift && continue ;;
	--rtt) rtt=$2 ;;
	--rate) rate=$2 ;;
	--runs) runs=$2 ;;
	--dirs) ndirs=$2 ;;
	--per-dir) per_dir=$2 ;;
	--files) nfiles=$2 ;;
	--tools) tools=$2 ;;
	--scp-sample) scp_sample=$2 ;;
	--scp-runs) scp_runs=$2 ;;
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
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
case " $tools " in
*" hpn-before "*) [ -n "$before_bin" ] || { echo "many.sh: tool hpn-before needs --before BINARY" >&2; exit 2; } ;;
esac
[ "$(id -u)" = 0 ] || { echo "many.sh: needs root (network namespaces)" >&2; exit 1; }

# files_layout N: sets ndirs and per_dir for about N small files, a square
# of directories and files (at most N: a 1,000,000-file tree is
# 1,000 x 1,000).
files_layout() {
	local n=$1
	case $n in '' | *[!0-9]* | 0) echo "many.sh: --files wants a positive count" >&2; exit 2 ;; esac
	ndirs=$(awk -v n="$n" 'BEGIN { d = int(sqrt(n) + 0.5); print (d < 1) ? 1 : d }')
	per_dir=$((n / ndirs))
}
[ -z "$nfiles" ] || files_layout "$nfiles"
small=$((ndirs * per_dir))

work=$(mktemp -d /dev/shm/hpncp-many.XXXXXX)
cleanup() {
	[ -z "${sshd_pid:-}" ] || stop_sshd
	rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/netns.sh
source "$here/netns.sh"
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"
[ -n "$as_root" ] || bench_user_setup || { echo "many.sh: no ordinary user to run the clients as" >&2; exit 1; }

if [ -z "$hpncp_bin" ]; then
	echo "building hpncp" >&2
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi

# mktree DIR NDIRS PER_DIR BIG: NDIRS directories of PER_DIR 4 KiB files,
# and BIG files of 10 MiB in DIR/big.
mktree() {
	local dir=$1 nd=$2 pd=$3 big=$4 d
	mkdir -p "$dir"
	for d in $(seq -w 1 "$nd"); do
		mkdir "$dir/d$d"
		if [ "$pd" -gt 0 ]; then
			head -c $((pd * 4096)) /dev/urandom | (cd "$dir/d$d" && split -b 4096 -a 4 -d - f)
		fi
	done
	if [ "$big" -gt 0 ]; then
		mkdir "$dir/big"
		for d in $(seq 1 "$big"); do
			head -c $((10 << 20)) /dev/urandom >"$dir/big/b$d"
		done
	fi
}
echo "creating the trees: $small files of 4 KiB in $ndirs directories and 5 of 10 MiB" >&2
mkdir -p "$work/src" "$work/remote" "$work/local"
mktree "$work/src/tree" "$ndirs" "$per_dir" 5
if [ "$scp_sample" -gt 0 ] && [ "$scp_sample" -lt "$small" ]; then
	sample_dirs=$(((scp_sample + per_dir - 1) / per_dir))
	scp_sample=$((sample_dirs * per_dir))
	mktree "$work/src/sample-big" 0 0 5
	mktree "$work/src/sample-one" 1 1 0
	mktree "$work/src/sample-small" "$sample_dirs" "$per_dir" 0
else
	scp_sample=0
fi
bench_user_own "$work/src" "$work/remote" "$work/local"

# client CMD...: CMD on the client's side of the path as the benchmark's
# user; client_rss also takes its peak RSS (KiB) into $work/rss.
client() { "${run_client[@]}" "${run_user[@]}" "$@"; }
client_rss() { "${run_client[@]}" /usr/bin/time -f %M -o "$work/rss" "${run_user[@]}" "$@"; }

# copy TOOL DIR NAME: one timed copy of $work/src/NAME (up) or of
# $work/remote/NAME, a copy of it put there beforehand (down), into an
# empty directory; prints seconds.
copy() {
	local tool=$1 dir=$2 name=$3 cfg=$work/ssh_config from to src dst
	if [ "$dir" = up ]; then
		src=$work/src dst=$work/remote
		rm -rf "$dst/$name"
		from=$src/$name to=bench:$dst/
	else
		src=$work/remote dst=$work/local
		rm -rf "$dst/$name"
		from=bench:$src/$name to=$dst/
		[ -d "$src/$name" ] || cp -a "$work/src/$name" "$src/"
	fi
	local t0 t1
	# hpncp's peak RSS (KiB) goes to $work/rss; the other tools' is not
	# taken (rss=-).
	echo - >"$work/rss"
	wan_forget
	t0=$(date +%s.%N)
	case $tool in
	scp) client scp -F "$cfg" -q -r "$from" "$to" ;;
	rsync) client rsync -a -e "ssh -F $cfg" "$from" "$to" ;;
	hpnd) client_rss "$hpncp_bin" -F "$cfg" -q -r --hpn-disabled "$from" "$to" ;;
	hpn) client_rss "$hpncp_bin" -F "$cfg" -q -r "$from" "$to" ;;
	sync) client_rss "$hpncp_bin" sync -a -e "ssh -F $cfg" "$from" "$to" ;;
	hpn-before) client_rss "$before_bin" -F "$cfg" -q -r "$from" "$to" ;;
	*) echo "many.sh: unknown tool $tool" >&2; exit 2 ;;
	esac
	t1=$(date +%s.%N)
	diff -r -q "$src/$name" "$dst/$name" >/dev/null || { echo "many.sh: $tool $dir $name: the copy differs" >&2; exit 1; }
	awk -v a="$t0" -v b="$t1" -v r="$(tail -1 "$work/rss")" 'BEGIN { printf "%.3f %s\n", b - a, r }'
}

# use_queue Q: the link with a queue of Q BDPs, and sshd on it; a link
# with another queue is torn down first.
use_queue() {
	[ "$1" != "${link_queue:-}" ] || return 0
	if [ -n "${link_queue:-}" ]; then
		stop_sshd
		wan_stats >&2 || true
		wan_down
	fi
	wan_up --rtt "${rtt}ms" --rate "$rate" --loss "$loss" --tcp "$tcp" ${tcp_mem:+--tcp-mem "$tcp_mem"} ${cc:+--cc "$cc"} \
		--queue "${1}bdp" --jitter "$jitter" --reorder "$reorder" ${rate_back:+--rate-back "$rate_back"}
	link_queue=$1
	run_server=(ip netns exec "$NS_B") run_client=(ip netns exec "$NS_A")
	start_sshd "$WAN_ADDR_B" 2222 "MaxStartups 100:30:200" ||
		{ echo "many.sh: sshd did not come up on $WAN_ADDR_B: $(cat "$work/sshd.log")" >&2; exit 1; }
}
# cases: both directions at each queue size, as dir:queue when there are
# several (each run goes through them all, a link each).
cases=
for q in $queues; do
	case $queues in
	*" "*) cases="$cases up:$q down:$q" ;;
	*) cases="up down" ;;
	esac
done

results=$work/results # lines: dir[:queue] tool seconds peak-RSS-KiB (- when not taken)
: >"$results"
for run in $(seq "$runs"); do
	for case in $cases; do
		dir=${case%:*} q=$queues
		[ "$case" = "$dir" ] || q=${case#*:}
		use_queue "$q"
		for tool in $tools; do
			if [ "$tool" = scp ] && [ "$run" -gt "$scp_runs" ]; then
				continue
			fi
			if [ "$tool" = scp ] && [ "$scp_sample" -gt 0 ]; then
				b=$(copy scp "$dir" sample-big)
				s=$(copy scp "$dir" sample-one)
				t=$(copy scp "$dir" sample-small)
				b=${b% *} s=${s% *} t=${t% *}
				secs=$(awk -v b="$b" -v s="$s" -v t="$t" -v n="$scp_sample" -v all="$small" \
					'BEGIN { printf "%.3f -\n", b + s + (t - s) * all / n }')
				echo "run=$run $dir scp: big $b s, one file $s s, $scp_sample files $t s: estimated ${secs% *} s" >&2
			else
				secs=$(copy "$tool" "$dir" tree)
				echo "run=$run $dir $tool: ${secs% *} s, peak RSS ${secs#* } KiB" >&2
			fi
			echo "$case $tool $secs" >>"$results" # dir[:queue] tool seconds rss
		done
	done
done
tcp_settings=$WAN_TCP
stop_sshd
wan_stats >&2 || true
wan_down

# median(arr, n): the median of arr[1..n], for both tables' awk.
awk_median='function median(arr, n,   i, j, t, a) {
	for (i = 1; i <= n; i++) a[i] = arr[i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'
# qcols(cases): the queue column's heading and rule, where there is one;
# row(case): a row's first cells, "up" or "0.25 BDP | up".
awk_queue='function qcols(cases) { return index(cases, ":") ? " queue |" : "" }
function qrule(cases) { return index(cases, ":") ? "---|" : "" }
function row(c,   p) { return (split(c, p, ":") > 1) ? p[2] " BDP | " p[1] : c }'
table=$(awk -v tools="$tools" -v cases="$cases" "$awk_median$awk_queue"'
{ k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $3 }
END {
	printf "|%s dir | tool | runs | min s | median s | max s | tool time / hpncp time |\n", qcols(cases)
	printf "|%s---|---|---|---|---|---|---|\n", qrule(cases)
	nt = split(tools, T, " "); nd = split(cases, D, " ")
	for (d = 1; d <= nd; d++) {
		kh = D[d] SUBSEP "hpn"
		hmed = 0
		if (n[kh]) { for (i = 1; i <= n[kh]; i++) x[i] = v[kh, i]; hmed = median(x, n[kh]) }
		for (t = 1; t <= nt; t++) {
			k = D[d] SUBSEP T[t]
			if (!n[k]) continue
			mn = 1e18; mx = 0
			for (i = 1; i <= n[k]; i++) { x[i] = v[k, i]; if (x[i] < mn) mn = x[i]; if (x[i] > mx) mx = x[i] }
			med = median(x, n[k])
			ratio = (hmed > 0) ? sprintf("%.2f", med / hmed) : "-"
			printf "| %s | %s | %d | %.2f | %.2f | %.2f | %s |\n", row(D[d]), T[t], n[k], mn, med, mx, ratio
		}
	}
}' "$results")

{
	echo "Many small files: $small x 4 KiB in $ndirs directories + 5 x 10 MiB, $(date -u +%Y-%m-%d), clients ${bench_user:+as an ordinary user ($bench_user)}${as_root:+as root (VARIANT: --as-root)}, RTT ${rtt} ms, rate $rate, loss $loss$(wan_shape_label "$queues" "$jitter" "$reorder" "$rate_back"), $tcp_settings ($(wan_tcp_label "$tcp" "$tcp_mem" "$cc" "$loss")), $runs run(s) each, stock OpenSSH $(/usr/sbin/sshd -V 2>&1 | head -1 | cut -d, -f1) server, to an empty target"
	echo
	echo "$table"
	echo
	echo "The last column is the tool's median time over hpncp's (hpn): above 1, hpncp is faster."
	if [[ " $tools " == *" sync "* ]] && [[ " $tools " == *" rsync "* ]]; then
		awk -v cases="$cases" "$awk_median"'
		{ k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $3 }
		END {
			nd = split(cases, D, " ")
			line = "rsync -a median / hpncp sync -a median (the same command line):"
			for (d = 1; d <= nd; d++) {
				kr = D[d] SUBSEP "rsync"; ks = D[d] SUBSEP "sync"
				for (i = 1; i <= n[kr]; i++) x[i] = v[kr, i]; r = median(x, n[kr])
				for (i = 1; i <= n[ks]; i++) y[i] = v[ks, i]; s = median(y, n[ks])
				line = line sprintf(" %s %.2f", D[d], r / s)
			}
			print ""
			print line
		}' "$results"
	fi
	if [ -n "$nfiles" ]; then
		echo
		echo "Files per second (all $small small files over the median time) and hpncp's peak RSS (the most of any run):"
		echo
		awk -v tools="$tools" -v files="$small" -v cases="$cases" "$awk_median$awk_queue"'
		{ k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $3; if ($4 != "-" && $4 > rss[k]) rss[k] = $4 }
		END {
			printf "|%s dir | tool | files/s | peak RSS MiB |\n|%s---|---|---|---|\n", qcols(cases), qrule(cases)
			nt = split(tools, T, " "); nd = split(cases, D, " ")
			for (d = 1; d <= nd; d++) for (t = 1; t <= nt; t++) {
				k = D[d] SUBSEP T[t]
				if (!n[k]) continue
				for (i = 1; i <= n[k]; i++) x[i] = v[k, i]
				printf "| %s | %s | %.0f | %s |\n", row(D[d]), T[t], files / median(x, n[k]), (k in rss) ? sprintf("%.0f", rss[k] / 1024) : "-"
			}
		}' "$results"
	fi
	if [[ " $tools " == *" scp "* ]] && [ "$scp_sample" -gt 0 ]; then
		echo
		echo "scp's times are estimates: big files + set-up + (a sample of $scp_sample small files - set-up) x $small / $scp_sample, each part timed."
	fi
} | tee ${out:+"$out"}
