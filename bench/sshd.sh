# shellcheck shell=bash
# The stock sshd the WAN benchmarks (wan.sh, many.sh) copy to, sourced by
# them. It uses the caller's $work (host_key, id and authorized_keys made
# there already), its client function (how to run a command on the client
# side of the path) and sets sshd_pid, which the caller's cleanup stops.

# start_sshd ADDR [NS]: a stock sshd on ADDR:2222, in namespace NS if
# given, with $work/ssh_config naming it "bench"; returns once ssh reaches
# it through client.
start_sshd() {
	local addr=$1 ns=${2:-}
	cat >"$work/sshd_config" <<EOF
ListenAddress $addr
Port 2222
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
Subsystem sftp internal-sftp
MaxStartups 100:30:200
EOF
	echo "[$addr]:2222 $(cat "$work/host_key.pub")" >"$work/known_hosts"
	cat >"$work/ssh_config" <<EOF
Host bench
	HostName $addr
	Port 2222
	User root
	IdentityFile $work/id
	IdentitiesOnly yes
	UserKnownHostsFile $work/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	LogLevel ERROR
EOF
	mkdir -p /run/sshd
	if [ -n "$ns" ]; then
		ip netns exec "$ns" /usr/sbin/sshd -D -f "$work/sshd_config" &
	else
		/usr/sbin/sshd -D -f "$work/sshd_config" &
	fi
	sshd_pid=$!
	for _ in $(seq 50); do
		if client ssh -F "$work/ssh_config" bench true 2>/dev/null; then
			return
		fi
		sleep 0.1
	done
	echo "$(basename "$0"): sshd did not come up on $addr" >&2
	exit 1
}

# stop_sshd stops the sshd start_sshd started, by its PID.
stop_sshd() {
	kill "$sshd_pid" 2>/dev/null || true
	wait "$sshd_pid" 2>/dev/null || true
	sshd_pid=
}
