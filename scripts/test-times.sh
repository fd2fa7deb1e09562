#!/usr/bin/env bash
# Where a test run's time goes: reads go test -json output (files named, or
# stdin) and prints each package's time, then the N slowest tests and
# subtests (default 20). A parallel test's time counts from when it was let
# run, not from its pause.
#
#   go test -json -race -count=1 -p 1 ./cmd/hpncp > run.json
#   scripts/test-times.sh run.json 30
#
# N may come first or last; every other argument is a file.
set -euo pipefail

n=20
files=()
for a in "$@"; do
	if [[ $a =~ ^[0-9]+$ ]]; then
		n=$a
	else
		files+=("$a")
	fi
done

# test2json writes its fields in one order: Time, Action, Package, Test,
# Elapsed. Keep pass and fail lines as "elapsed package test".
results=$(cat "${files[@]}" |
	grep -E '"Action":"(pass|fail)"' |
	sed -nE 's/.*"Package":"([^"]*)"(,"Test":"([^"]*)")?,"Elapsed":([0-9.]+).*/\4 \1 \3/p' |
	sed -E 's| github.com/hpncp/hpncp/?| ./|')

echo "package seconds:"
awk 'NF == 2 { printf "%9.1f  %s\n", $1, $2 }' <<<"$results" | sort -rn
echo
echo "slowest $n tests and subtests:"
awk 'NF >= 3 { t = $3; for (i = 4; i <= NF; i++) t = t " " $i; printf "%9.1f  %-14s %s\n", $1, $2, t }' <<<"$results" |
	sort -rn | head -n "$n"
