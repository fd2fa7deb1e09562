#!/usr/bin/env bash
# make release-check: validates goreleaser.yaml, builds every release
# target as a snapshot into dist/ (nothing is published), and checks what
# a user would unpack: each archive holds its binaries, README, LICENSE,
# man page and completions, each .deb and .rpm installs hpncp, hpnssh (a
# link to it), the man page and completions where the system looks, and
# the packaged binary runs and says its version.
# GORELEASER is the goreleaser command (the Makefile passes it);
# --no-build checks dist/ as the last build left it.
set -euo pipefail

build=1
if [ "${1-}" = --no-build ]; then
	build=
fi

GORELEASER=${GORELEASER:-go run github.com/goreleaser/goreleaser/v2@v2.15.1}
have() { command -v "$1" >/dev/null 2>&1; }
fail() { echo "release-check: $*" >&2; exit 1; }

# rpm's own query tool reads the .rpm; Debian has it as package rpm.
if ! have rpm; then
	if [ "$(id -u)" -eq 0 ] && have apt-get; then
		echo "release-check: installing rpm (to read the .rpm packages)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rpm >/dev/null
	else
		fail "please install rpm (its query tool reads the .rpm packages)"
	fi
fi

if [ -n "$build" ]; then
	$GORELEASER check
	$GORELEASER release --snapshot --clean --skip=publish
fi

shopt -s nullglob
debs=(dist/*.deb)
rpms=(dist/*.rpm)
archives=(dist/hpncp_*.tar.gz dist/hpncp_*.zip)
[ "${#debs[@]}" -eq 2 ] || fail "want a .deb for amd64 and arm64, found: ${debs[*]-none}"
[ "${#rpms[@]}" -eq 2 ] || fail "want an .rpm for amd64 and arm64, found: ${rpms[*]-none}"
[ "${#archives[@]}" -eq 8 ] || fail "want 8 archives, found ${#archives[@]}: ${archives[*]-}"

# What every package must install, as the package lists it.
want=(
	/usr/bin/hpncp
	/usr/bin/hpnssh
	/usr/share/man/man1/hpncp.1
	/usr/share/bash-completion/completions/hpncp
	/usr/share/zsh/vendor-completions/_hpncp
	/usr/share/fish/vendor_completions.d/hpncp.fish
	/usr/share/doc/hpncp/copyright
)
for p in "${debs[@]}"; do
	contents=$(dpkg-deb -c "$p")
	list=$(awk '{print $6}' <<<"$contents" | sed 's|^\.||')
	for f in "${want[@]}"; do
		grep -qx "$f" <<<"$list" || fail "$p lacks $f"
	done
	grep -q ' ./usr/bin/hpnssh -> hpncp$' <<<"$contents" || fail "$p: hpnssh is not a link to hpncp"
done
for p in "${rpms[@]}"; do
	list=$(rpm -qlp "$p" 2>/dev/null)
	for f in "${want[@]}"; do
		grep -qx "$f" <<<"$list" || fail "$p lacks $f"
	done
done
for p in "${archives[@]}"; do
	case $p in
	*.zip) continue ;; # no unzip here; goreleaser built it from the same list
	esac
	list=$(tar -tzf "$p")
	for f in hpncp README.md LICENSE man/man1/hpncp.1 completions/hpncp.bash; do
		grep -qx "$f" <<<"$list" || fail "$p lacks $f"
	done
done

# The amd64 package's binary, unpacked, runs under both names.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
if [ "$(uname -m)" = x86_64 ]; then
	dpkg-deb -x dist/*_amd64.deb "$root"
	v=$("$root/usr/bin/hpncp" version)
	grep -q '^hpncp [0-9][^ ]*-snapshot ' <<<"$v" || fail "packaged hpncp says its version is: $v"
	h=$("$root/usr/bin/hpnssh" -h 2>&1 || true)
	grep -q 'hpncp ssh' <<<"$h" || fail "packaged hpnssh does not run as hpncp ssh: $h"
fi
echo "release-check: ok: ${#archives[@]} archives, ${#debs[@]} .deb, ${#rpms[@]} .rpm in dist/"
