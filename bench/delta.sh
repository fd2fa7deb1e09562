#!/usr/bin/env bash
# Re-syncing a large file that changed a little: hpncp sync (rsync's delta
# transfer through the helper at the far end, each large file diffed and
# rebuilt on every core) beside rsync -a -e ssh, in one run, up and down,
# on an emulated path through bench/netns.sh.
#
#   bench/delta.sh [--rtt 100] [--rate 1gbit] [--runs 3]
#                  [--cases "scattered region"] [--dirs "up down"]
#                  [--tools "rsync hpn-sync hpn-sync-W rsync-inplace
#                  hpn-sync-inplace"] [--hpncp BINARY] [--fs tmpfs|xfs]
#                  [--out FILE.md]
#
#   --cases   scattered: a 1 GiB file with 100 changes of 10 KiB at
#             places spread over it (about 0.1 %);
#             region: a 4 GiB file with 1 % of it changed in one place;
#             checksum: an unchanged tree of 10,000 files of 100 KiB in
#             1,000 directories (1 GiB), synced with -c (rsync -a -c,
#             hpncp sync -a -c: the helper hashes the remote files);
#             dryrun: the same tree, unchanged, with -n (a re-run's
#             preview: the remote tree listed, nothing moved);
#             checksum-10g: as checksum, 10,000 files of 1 MiB (10 GiB),
#             the target tree hard links to the source's files so that
#             both fit in memory (each end still reads all 10 GiB);
#             text: 512 MiB of log lines over 512 MiB of other log lines
#             (nothing matches: all of it literal data, which zstd
#             shrinks to about a fifth), for -z
#   --tools   rsync (rsync -a -e ssh; the server's rsync), hpn-sync
#             (hpncp sync -a with the hpncp under test installed at the
#             far end by hpncp helper install, into the run's
#             directory, and run once, untimed, before the timed runs:
#             its first start checks its hash, which every later start
#             finds recorded), hpn-sync-W (the same with -W: whole files);
#             rsync-inplace and hpn-sync-inplace: each with --inplace
#             (the target rewritten where it lies, only what changed);
#             rsync-z and hpn-sync-z: each with -z (zstd)
#
#   --fs      where the files live: tmpfs (/dev/shm, the default), or
#             xfs: an XFS file system with reflink (mkfs.xfs -m reflink=1,
#             xfsprogs), made on an image in /dev/shm for the run and
#             mounted through a loop device, on which a delta without
#             --inplace is rebuilt over a clone of its target
#
# Each run puts the old version at the target (its time set apart from
# the source's, so that both tools see it changed), then times the tool
# bringing it up to date, and checks the result against the source with
# cmp. The server is a stock OpenSSH sshd in the far namespace (its own
# keys and config, Subsystem sftp internal-sftp); the clients run as an
# ordinary user (bench/sshd.sh's); TCP settings are a stock Debian
# kernel's (bench/netns.sh --tcp debian). Files live on /dev/shm. Each
# row: the median wall time, its ratio to rsync's, the bytes the tool sent
# over the wire as its --stats counts them (rsync: "Literal data"), and
# the CPU seconds of the whole machine (both ends, the emulator) and of
# the client, medians. Needs root, sshd, rsync, setpriv, /usr/bin/time,
# go.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

rtt=100 rate=1gbit runs=3 cases="scattered" dirs="up down" tools="rsync hpn-sync" hpncp_bin= out= fs=tmpfs
while [ $# -gt 0 ]; do
	case $1 in
	--rtt) rtt=$2 ;;
	--rate) rate=$2 ;;
	--runs) runs=$2 ;;
	--cases) cases=$2 ;;
	--dirs) dirs=$2 ;;
	--tools) tools=$2 ;;
	--hpncp) hpncp_bin=$2 ;;
	--out) out=$2 ;;
	--fs) fs=$2 ;;
	*)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
	shift 2
done
[ "$(id -u)" = 0 ] || { echo "delta.sh: needs root (network namespaces)" >&2; exit 1; }
# shellcheck source=bench/netns.sh
source "$here/netns.sh"
# shellcheck source=bench/sshd.sh
source "$here/sshd.sh"

work=$(mktemp -d /dev/shm/hpncp-delta.XXXXXX)
xfs_img= xfs_mounted=
cleanup() {
	[ -z "${sshd_pid:-}" ] || stop_sshd
	[ -z "${WAN_UP:-}" ] || wan_down
	if [ -n "$xfs_mounted" ]; then umount "$work"; fi
	rm -rf "$work"
	[ -z "$xfs_img" ] || rm -f "$xfs_img"
}
trap cleanup EXIT
case $fs in
tmpfs) ;;
xfs)
	# Sparse: it takes memory as the files are written.
	xfs_img=$(mktemp /dev/shm/hpncp-delta-xfs.XXXXXX)
	truncate -s 16G "$xfs_img"
	mkfs.xfs -q -m reflink=1 "$xfs_img"
	mount -o loop "$xfs_img" "$work"
	xfs_mounted=1
	chmod 755 "$work"
	;;
*) echo "delta.sh: --fs $fs: want tmpfs or xfs" >&2; exit 2 ;;
esac
bench_user_setup || { echo "delta.sh: no ordinary user to run the clients as" >&2; exit 1; }
if [ -z "$hpncp_bin" ]; then
	echo "building hpncp" >&2
	(cd "$root" && go build -o "$work/hpncp" ./cmd/hpncp)
	hpncp_bin=$work/hpncp
fi
mkdir -p "$work/remote" "$work/local" "$work/helper" "$work/files"
bench_user_own "$work/remote" "$work/local" "$work/helper" "$work/files"
chmod 700 "$work/helper"

# makecase NAME: $work/files/NAME.old and NAME.new, made once.
makecase() {
	local old=$work/files/$1.old new=$work/files/$1.new
	[ -e "$new" ] && return
	echo "creating case $1" >&2
	case $1 in
	scattered)
		head -c 1G /dev/urandom >"$old"
		cp "$old" "$new"
		# 100 changes of 10 KiB, one in each hundredth of the file.
		local i
		for i in $(seq 0 99); do
			head -c 10240 /dev/urandom | dd of="$new" bs=1 seek=$(((i * 10737418 + (i * 7919 % 997) * 4096))) conv=notrunc status=none
		done
		;;
	text)
		# Lines of a web server's log, different ones in each version.
		logs() {
			awk -v m="$1" 'BEGIN { for (i = 0; i < 7500000; i++)
				printf "2026-12-%02d %02d:%02d:%02d 198.18.%d.%d GET /data/%d/part-%05d.bin 200 %d\n",
					1 + i % 28, i / 3600 % 24, i / 60 % 60, i % 60, i * m % 251, i * 7 % 253, i * m % 100003, i % 99991, i * m % 1048576 }'
		}
		{ logs 7919 || :; } | head -c 512M >"$old"
		{ logs 104729 || :; } | head -c 512M >"$new"
		;;
	region)
		head -c 4G /dev/urandom >"$old"
		cp "$old" "$new"
		# 1 % of it, 41 MiB, rewritten in one place past the middle.
		head -c 42949673 /dev/urandom | dd of="$new" bs=1M seek=2500 conv=notrunc status=none iflag=fullblock
		;;
	*) echo "delta.sh: unknown case $1" >&2; exit 2 ;;
	esac
	touch -d '2026-01-02 03:04:05' "$new"
	bench_user_own "$old" "$new"
}

# maketree [NAME SIZE]: $work/files/NAME.tree (checksum), 10,000 files
# of SIZE bytes (100 KiB) in 1,000 directories, made once.
maketree() {
	local name=${1:-checksum} size=${2:-102400}
	local t=$work/files/$name.tree d f
	[ -e "$t" ] && return
	echo "creating case $name" >&2
	mkdir -p "$t"
	head -c $((10000 * size)) /dev/urandom | split -b "$size" -a 4 -d - "$t/f"
	for d in $(seq 0 999); do mkdir "$t/d$d"; done
	f=0
	for x in "$t"/f*; do mv "$x" "$t/d$((f % 1000))/"; f=$((f + 1)); done
	touch -d '2026-01-02 03:04:05' "$t"/d*/* 
	chown -R "${bench_user:-$(id -un)}" "$t"
}

client() { "${run_client[@]}" /usr/bin/time -f '%U %S' -o "$work/cpu" "${run_user[@]}" "$@"; }

busy_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { print ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat
}

# sync TOOL DIR CASE: one timed re-sync; prints seconds, bytes sent, the
# machine's CPU seconds and the client's.
sync_once() {
	local tool=$1 dir=$2 name=$3 cfg=$work/ssh_config src dst from to stats
	local c=
	if [ "$name" = checksum ] || [ "$name" = checksum-10g ] || [ "$name" = dryrun ]; then
		# The same tree both ends, its times the same: -c reads it all,
		# -n lists both and plans.
		local tree=checksum cp=-a
		c=-c
		[ "$name" != dryrun ] || c=-n
		[ "$name" != checksum-10g ] || tree=checksum-10g cp=-al
		src=$work/files/$tree.tree dst=$work/remote/$tree.tree
		[ "$dir" = up ] || dst=$work/local/$tree.tree
		[ -e "$dst" ] || { cp $cp "$src" "$dst"; chown -R "${bench_user:-$(id -un)}" "$dst"; }
		if [ "$dir" = up ]; then from=$src/ to=bench:$dst/; else from=bench:$src/ to=$dst/; fi
	elif [ "$dir" = up ]; then
		src=$work/files/$name.new dst=$work/remote/$name
		from=$src to=bench:$dst
	else
		src=$work/remote/$name.src dst=$work/local/$name
		[ -e "$src" ] || { cp -p "$work/files/$name.new" "$src"; bench_user_own "$src"; }
		from=bench:$src to=$dst
	fi
	if [ -z "$c" ]; then
		cp "$work/files/$name.old" "$dst"
		touch -d '2025-06-07 08:09:10' "$dst"
		bench_user_own "$dst"
		# A target a re-run finds has long been written out. Just
		# copied, its dirty pages would be written out during the
		# timed run (on XFS, through the loop device: a second of a
		# kernel thread's CPU on the two cores both tools share).
		sync "$dst"
	fi
	wan_forget
	local t0 t1 c0 c1
	c0=$(busy_cpu)
	t0=$(date +%s.%N)
	case $tool in
	rsync) stats=$(client rsync -a $c --stats -e "ssh -F $cfg" "$from" "$to") ;;
	hpn-sync) stats=$(client "$hpncp_bin" sync -a $c --stats -e "ssh -F $cfg" --helper-dir "$work/helper" "$from" "$to") ;;
	hpn-sync-W) stats=$(client "$hpncp_bin" sync -a $c -W --stats -e "ssh -F $cfg" "$from" "$to") ;;
	rsync-inplace) stats=$(client rsync -a $c --inplace --stats -e "ssh -F $cfg" "$from" "$to") ;;
	hpn-sync-inplace) stats=$(client "$hpncp_bin" sync -a $c --inplace --stats -e "ssh -F $cfg" --helper-dir "$work/helper" "$from" "$to") ;;
	rsync-z) stats=$(client rsync -a $c -z --stats -e "ssh -F $cfg" "$from" "$to") ;;
	hpn-sync-z) stats=$(client "$hpncp_bin" sync -a $c -z --stats -e "ssh -F $cfg" --helper-dir "$work/helper" "$from" "$to") ;;
	*) echo "delta.sh: unknown tool $tool" >&2; exit 2 ;;
	esac
	t1=$(date +%s.%N)
	c1=$(busy_cpu)
	if [ -n "$c" ]; then
		diff -r -q "$src" "$dst" >/dev/null || { echo "delta.sh: $tool $dir $name: the trees differ" >&2; exit 1; }
	else
		cmp -s "$src" "$dst" || { echo "delta.sh: $tool $dir $name: the target differs from the source" >&2; exit 1; }
	fi
	local sent
	sent=$(echo "$stats" | awk '/^Literal data:/ { gsub(",", "", $3); print $3 }')
	awk -v a="$t0" -v b="$t1" -v c0="$c0" -v c1="$c1" -v s="${sent:-0}" -v u="$(tail -1 "$work/cpu")" \
		'BEGIN { split(u, t, " "); printf "%.3f %d %.2f %.2f\n", b - a, s, c1 - c0, t[1] + t[2] }'
}

for c in $cases; do
	case $c in
	checksum | dryrun) maketree ;;
	checksum-10g) maketree checksum-10g 1048576 ;;
	*) makecase "$c" ;;
	esac
done
wan_up --rtt "${rtt}ms" --rate "$rate" --tcp debian
WAN_UP=1
addr=$WAN_ADDR_B run_server=(ip netns exec "$NS_B") run_client=(ip netns exec "$NS_A")
start_sshd "$addr" 2222 "MaxStartups 100:30:200" ||
	{ echo "delta.sh: sshd did not come up: $(cat "$work/sshd.log")" >&2; exit 1; }
case " $tools " in
*" hpn-sync "* | *" hpn-sync-inplace "* | *" hpn-sync-z "*)
	"${run_client[@]}" "${run_user[@]}" "$hpncp_bin" helper install -q -F "$work/ssh_config" --helper-dir "$work/helper" bench >/dev/null ||
		{ echo "delta.sh: hpncp helper install failed" >&2; exit 1; }
	# The helper runs once before the timed runs, as it has on any
	# re-run after the first: its first start hashes it and records the
	# check beside it, which later starts find (helper.Launch). The record
	# is made only once the binary's change time is two seconds past.
	sleep 2.5
	echo "the helper's first start" >"$work/files/helper-first"
	bench_user_own "$work/files/helper-first"
	"${run_client[@]}" "${run_user[@]}" "$hpncp_bin" sync -a -e "ssh -F $work/ssh_config" --helper-dir "$work/helper" \
		"$work/files/helper-first" "bench:$work/remote/helper-first" ||
		{ echo "delta.sh: the helper's first run failed" >&2; exit 1; }
	;;
esac
results=$work/results
: >"$results"
for run in $(seq "$runs"); do
	for c in $cases; do
		for dir in $dirs; do
			for tool in $tools; do
				s=$(sync_once "$tool" "$dir" "$c")
				echo "$c $dir $tool $s" >>"$results"
				echo "run=$run $c $dir $tool: $s (s, bytes sent, CPU machine, client)" >&2
			done
		done
	done
done
stop_sshd
wan_down
WAN_UP=

table=$(awk -v tools="$tools" -v cases="$cases" -v dirs="$dirs" '
function median(arr, n,   i, j, t, a) {
	for (i = 1; i <= n; i++) a[i] = arr[i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2 SUBSEP $3; n[k]++; s[k, n[k]] = $4; b[k, n[k]] = $5; m[k, n[k]] = $6; c[k, n[k]] = $7 }
END {
	print "| case | dir | tool | median s | min s | max s | x rsync (time) | sent MB (median) | CPU s machine (client) |"
	print "|---|---|---|---|---|---|---|---|---|"
	nc = split(cases, C, " "); nd = split(dirs, D, " "); nt = split(tools, T, " ")
	for (ci = 1; ci <= nc; ci++) for (d = 1; d <= nd; d++) {
		kr = C[ci] SUBSEP D[d] SUBSEP "rsync"
		rmed = 0
		if (n[kr]) { for (i = 1; i <= n[kr]; i++) x[i] = s[kr, i]; rmed = median(x, n[kr]) }
		for (t = 1; t <= nt; t++) {
			k = C[ci] SUBSEP D[d] SUBSEP T[t]
			if (!n[k]) continue
			mn = 1e18; mx = 0
			for (i = 1; i <= n[k]; i++) { x[i] = s[k, i]; if (x[i] < mn) mn = x[i]; if (x[i] > mx) mx = x[i]; y[i] = b[k, i]; z[i] = m[k, i]; w[i] = c[k, i] }
			med = median(x, n[k])
			printf "| %s | %s | %s | %.2f | %.2f | %.2f | %s | %.1f | %.2f (%.2f) |\n", C[ci], D[d], T[t], med, mn, mx,
				rmed ? sprintf("%.2f", med / rmed) : "-", median(y, n[k]) / 1e6, median(z, n[k]), median(w, n[k])
		}
	}
}' "$results")
{
	echo "hpncp sync (delta, helper at the far end) vs rsync -a -e ssh, $(date -u +%Y-%m-%d), re-syncing a changed file, clients as an ordinary user (${bench_user:-}), $runs runs each, ${rtt} ms, $rate, $WAN_TCP, stock OpenSSH $(/usr/sbin/sshd -V 2>&1 | head -1 | cut -d, -f1) server, files on $fs"
	echo
	echo "$table"
} | tee ${out:+"$out"}
