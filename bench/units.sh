# shellcheck shell=bash
# bench_units KIND VALUE...: prints each VALUE as a number, one a line,
# read by package units as hpncp and the emulator read it (see
# bench/cmd/units): "size" in bytes (1G is 1073741824, 1GB 1000000000),
# "bitrate" in bit/s (1gbit is 1000000000, unlimited 0). Returns non-zero,
# with the reason on stderr, for a value it cannot read. Sourced by
# sshd.sh and netns.sh, so that no script parses units in shell.

_units_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bench_units() {
	(cd "$_units_root" && go run ./bench/cmd/units "$@")
}
