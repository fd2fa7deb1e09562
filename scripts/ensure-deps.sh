#!/usr/bin/env bash
# Makes sure this machine has what hpncp's end-to-end tests run against:
# OpenSSH's sshd (with ssh, scp, sftp, ssh-keygen), rsync, tmux, zstd,
# xfsprogs and filefrag (scripts/clone-fs.sh), and GNU parallel (the
# sharded runs' test). Missing
# packages are installed with apt-get (as root, or through sudo). Silent
# when there is nothing to do.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

missing_packages() {
	packages=()
	if ! [ -x /usr/sbin/sshd ] && ! have sshd; then
		packages+=(openssh-server)
	fi
	for tool in ssh scp sftp ssh-keygen; do
		if ! have "$tool"; then
			packages+=(openssh-client)
			break
		fi
	done
	if ! have rsync; then
		packages+=(rsync)
	fi
	# The progress line's test reads a terminal's screen through tmux.
	if ! have tmux; then
		packages+=(tmux)
	fi
	# The file system whose clones a delta is rebuilt over, and the
	# tool that shows a file's shared blocks.
	if ! have mkfs.xfs; then
		packages+=(xfsprogs)
	fi
	if ! have filefrag; then
		packages+=(e2fsprogs)
	fi
	# The reference reader of a compressed delta's frames.
	if ! have zstd; then
		packages+=(zstd)
	fi
	# moreutils has a parallel of its own, with other flags.
	if ! parallel --version 2>/dev/null | grep -q '^GNU parallel'; then
		packages+=(parallel)
	fi
}

missing_packages
if [ "$(id -u)" -eq 0 ]; then
	as_root=()
elif have sudo; then
	as_root=(sudo)
else
	as_root=(missing)
fi

if [ "${#packages[@]}" -gt 0 ]; then
	if [ "${as_root[0]-}" = missing ] || ! have apt-get; then
		echo "ensure-deps: please install: ${packages[*]} (the end-to-end tests need them)" >&2
		exit 1
	fi
	echo "ensure-deps: installing ${packages[*]}" >&2
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}"
	missing_packages
	if [ "${#packages[@]}" -gt 0 ]; then
		echo "ensure-deps: still missing after apt-get install: ${packages[*]}" >&2
		exit 1
	fi
fi

# sshd started as root will not run without its privilege separation
# directory, which containers often lack; as another user it does not need it.
if [ "$(id -u)" -eq 0 ] && ! [ -d /run/sshd ]; then
	mkdir -p -m 0755 /run/sshd
fi
