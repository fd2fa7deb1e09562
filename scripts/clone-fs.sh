#!/usr/bin/env bash
# Runs the tests that need a file system that clones files (a delta
# rebuilt over a clone of its target: internal/clone, and
# TestSyncDeltaOverCloneE2E in cmd/hpncp) on an XFS file system made for
# them: a 1 GiB image in /dev/shm, mounted through a loop device, both
# gone when this ends. Needs root, mkfs.xfs (scripts/ensure-deps.sh
# installs xfsprogs) and loop devices; without root it says so and does
# nothing, and with HPNCP_E2E=require that is a failure.
set -euo pipefail
GO=${GO:-go}

if [ "$(id -u)" -ne 0 ]; then
	echo "clone-fs: skipped: making a file system to test clones on needs root"
	[ "${HPNCP_E2E:-}" != require ] || exit 1
	exit 0
fi
img=$(mktemp /dev/shm/hpncp-xfs.XXXXXX)
mnt=$(mktemp -d)
mounted=
cleanup() {
	if [ -n "$mounted" ]; then umount "$mnt"; fi
	rmdir "$mnt"
	rm -f "$img"
}
trap cleanup EXIT
truncate -s 1G "$img"
mkfs.xfs -q -m reflink=1 "$img"
mount -o loop "$img" "$mnt"
mounted=1
chmod 1777 "$mnt"
echo "clone-fs: XFS with reflink at $mnt"
HPNCP_CLONE_DIR=$mnt HPNCP_E2E=${HPNCP_E2E:-} "$GO" test -count=1 ${GOTESTFLAGS:-} -run '^TestInto$' ./internal/clone
HPNCP_CLONE_DIR=$mnt HPNCP_E2E=${HPNCP_E2E:-} "$GO" test -count=1 ${GOTESTFLAGS:-} -run '^TestSyncDeltaOverCloneE2E$' ./cmd/hpncp
