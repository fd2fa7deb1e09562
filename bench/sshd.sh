# shellcheck shell=bash
# The stock OpenSSH sshd every benchmark copies to, sourced by lan.sh,
# wan.sh, many.sh, tar.sh and resume.sh. The caller gives $work, may set
# run_server and run_client after sourcing this (arrays: what runs a
# command on the server's and on the client's side of the path, such as
# ip netns exec NS; empty for this host), and calls stop_sshd in its
# cleanup. A caller that runs its client tools as an ordinary user calls
# bench_user_setup before start_sshd: ssh then logs in as that user, and
# run_user (empty: as whoever runs the script) goes between run_client and
# each client command.

run_server=()
run_client=()
run_user=()
bench_user=
sshd_pid=
hpnsshd_pid=

# bench_user_setup: the ordinary user the benchmarks' client tools run as
# and log in as (BENCH_USER, hpncp-bench by default), so that they get
# what a user gets: no SO_SNDBUFFORCE, no TCP_CONGESTION outside
# net.ipv4.tcp_allowed_congestion_control. Made once and reused: a system
# account with bash as its shell (scp -O and rsync run commands through
# it) and its home in /var/tmp/hpncp-bench, its password disabled ('*'; a
# locked '!' would make sshd refuse it without PAM); remove it with
# userdel -r hpncp-bench. An existing account of that name that
# useradd here did not make (another comment) is not taken. Sets
# bench_user and run_user, and makes $work and what the client needs in
# it (client key, known_hosts, ssh_config) the user's to read.
bench_user_setup() {
	local name=${BENCH_USER:-hpncp-bench} comment="hpncp benchmarks (bench/sshd.sh)" home
	if ! id -u "$name" >/dev/null 2>&1; then
		useradd --system --create-home --home-dir "/var/tmp/$name" --shell /bin/bash \
			--comment "$comment" "$name" || return 1
		usermod -p '*' "$name" || return 1
	fi
	if [ "$(getent passwd "$name" | cut -d: -f5)" != "$comment" ] || [ "$(id -u "$name")" = 0 ]; then
		echo "sshd.sh: account $name exists and was not made for the benchmarks; set BENCH_USER to another name" >&2
		return 1
	fi
	home=$(getent passwd "$name" | cut -d: -f6)
	bench_user=$name
	# A login's environment, not root's (whose XDG directories, say, the
	# user could not write).
	run_user=(setpriv --reuid="$(id -u "$name")" --regid="$(id -g "$name")" --init-groups
		env -i PATH="$PATH" HOME="$home" USER="$name" LOGNAME="$name" SHELL=/bin/bash LANG="${LANG:-C.UTF-8}")
	# The user reaches the files through $work; what only root needs in
	# it (the host key) stays root's.
	chmod 0711 "$work"
}

# bench_user_own PATH...: gives PATHs (recursively) to the benchmark's
# user, when there is one: the directories it copies into and the files
# it copies from.
bench_user_own() {
	[ -z "$bench_user" ] || chown -R "$bench_user:" "$@"
}

# start_sshd ADDR PORT [LINE...]: a stock sshd on ADDR:PORT, with any
# extra sshd_config LINEs, and $work/ssh_config naming it "bench"; the
# host and client keys are made in $work the first time. Returns once ssh
# reaches it; returns 1, sshd stopped and its log in $work/sshd.log, when
# it exits or does not answer within 10 s.
start_sshd() {
	local addr=$1 port=$2 i
	shift 2
	if [ ! -f "$work/host_key" ]; then
		ssh-keygen -q -t ed25519 -N '' -C bench-host -f "$work/host_key"
		ssh-keygen -q -t ed25519 -N '' -C bench-client -f "$work/client_key"
		cp "$work/client_key.pub" "$work/authorized_keys"
		# ssh refuses a private key others can read, and one it cannot.
		bench_user_own "$work/client_key"
	fi
	{
		cat <<EOF
ListenAddress $addr
Port $port
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
Subsystem sftp internal-sftp
UseDNS no
LogLevel ERROR
EOF
		printf '%s\n' "$@"
	} >"$work/sshd_config"
	echo "[$addr]:$port $(cat "$work/host_key.pub")" >"$work/known_hosts"
	cat >"$work/ssh_config" <<EOF
Host bench
	HostName $addr
	Port $port
	User ${bench_user:-$(id -un)}
	IdentityFile $work/client_key
	IdentitiesOnly yes
	UserKnownHostsFile $work/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	LogLevel ERROR
EOF
	# sshd as root refuses to start without its privilege separation
	# directory.
	mkdir -p /run/sshd
	/usr/sbin/sshd -t -f "$work/sshd_config" || return 1
	"${run_server[@]}" /usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
	sshd_pid=$!
	for i in $(seq 100); do
		if "${run_client[@]}" "${run_user[@]}" ssh -F "$work/ssh_config" bench true 2>/dev/null; then
			return 0
		fi
		kill -0 "$sshd_pid" 2>/dev/null || break
		sleep 0.1
	done
	stop_sshd
	return 1
}

# start_sshd_free ADDR: start_sshd on a free port, as the kernel picks one;
# another process may take it before sshd binds it, hence five tries.
start_sshd_free() {
	local addr=$1 attempt port
	for attempt in 1 2 3 4 5; do
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
			echo $((20000 + RANDOM % 20000)))
		start_sshd "$addr" "$port" && return 0
	done
	return 1
}

# stop_sshd stops the sshd start_sshd started, by its PID.
stop_sshd() {
	stop_pid "$sshd_pid"
	sshd_pid=
}

# stop_pid PID: stops a server this script started (none when PID is
# empty) and waits for it.
stop_pid() {
	if [ -n "$1" ]; then
		kill -TERM "$1" 2>/dev/null || true
		wait "$1" 2>/dev/null || true
	fi
}

# hpnssh_find: sets hpnssh_bin and hpnssh_sbin to the directories of an
# HPN-SSH install (hpnscp and hpnssh in the one, hpnsshd in the other):
# HPNSSH_PREFIX, else where hpnscp is on PATH, else /opt/hpnssh or
# /usr/local. Returns 1 when none is found.
hpnssh_find() {
	local prefix
	for prefix in ${HPNSSH_PREFIX:-} "$(dirname "$(dirname "$(command -v hpnscp 2>/dev/null || echo /x/x/x)")")" /opt/hpnssh /usr/local; do
		if [ -x "$prefix/bin/hpnscp" ] && [ -x "$prefix/sbin/hpnsshd" ]; then
			hpnssh_bin=$prefix/bin hpnssh_sbin=$prefix/sbin
			return 0
		fi
	done
	return 1
}

# start_hpnsshd ADDR PORT: HPN-SSH's sshd (hpnssh_find) beside the stock
# one start_sshd started, with the same keys and settings on another
# PORT, and $work/hpnssh_config naming it "bench" for hpnscp -F. hpnsshd
# drops privileges to its own account, hpnsshd, made here once when
# missing (a system account without a shell or home; remove it with
# userdel hpnsshd). Its build here has no PAM, so that line is left out.
# Returns once hpnssh reaches it; returns 1, hpnsshd stopped and its log
# in $work/hpnsshd.log, when it exits or does not answer within 10 s.
start_hpnsshd() {
	local addr=$1 port=$2 i
	if ! id -u hpnsshd >/dev/null 2>&1; then
		useradd --system --no-create-home --home-dir /var/empty --shell /usr/sbin/nologin \
			--comment "HPN-SSH privilege separation (bench/sshd.sh)" hpnsshd || return 1
	fi
	mkdir -p /var/empty
	sed -e "s/^Port .*/Port $port/" -e "s|^PidFile .*|PidFile $work/hpnsshd.pid|" -e '/^UsePAM /d' \
		"$work/sshd_config" >"$work/hpnsshd_config"
	sed -e "s/^\(\tPort\) .*/\1 $port/" -e "s|known_hosts\$|hpn_known_hosts|" "$work/ssh_config" >"$work/hpnssh_config"
	echo "[$addr]:$port $(cat "$work/host_key.pub")" >"$work/hpn_known_hosts"
	"$hpnssh_sbin/hpnsshd" -t -f "$work/hpnsshd_config" || return 1
	"${run_server[@]}" "$hpnssh_sbin/hpnsshd" -D -e -f "$work/hpnsshd_config" 2>"$work/hpnsshd.log" &
	hpnsshd_pid=$!
	for i in $(seq 100); do
		if "${run_client[@]}" "${run_user[@]}" "$hpnssh_bin/hpnssh" -F "$work/hpnssh_config" bench true 2>/dev/null; then
			return 0
		fi
		kill -0 "$hpnsshd_pid" 2>/dev/null || break
		sleep 0.1
	done
	stop_hpnsshd
	return 1
}

# stop_hpnsshd stops the hpnsshd start_hpnsshd started, by its PID.
stop_hpnsshd() {
	stop_pid "$hpnsshd_pid"
	hpnsshd_pid=
}
