#!/usr/bin/env bash
# Fuzzes every parser of bytes that come from the network or the disk, one
# target after another (go test fuzzes one target per run), each for
# $FUZZTIME, and stops at the first failure; go then keeps the failing
# input in the package's testdata/fuzz/FuzzXxx. make test runs it briefly,
# make fuzz for longer.
#
#   scripts/fuzz.sh                           every target
#   scripts/fuzz.sh protocol:FuzzStreamReplies  only those named
#
# FUZZTIME (default 8s; make test gives 5s) is each target's time;
# FUZZPARALLEL, when set, the number of fuzzing processes (go's default:
# one per CPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-8s}

# The targets, as package:FuzzName. A Fuzz function missing here fails the
# run, so that a new parser's target cannot be left out.
targets=(
	protocol/scp:FuzzParseLine
	protocol:FuzzStreamReplies
	protocol:FuzzReadAttrs
	protocol:FuzzAppendNames
	protocol:FuzzStartReplies
	protocol:FuzzReadyReplies
	protocol:FuzzStartAnswers
	protocol:FuzzParseTarProbe
	transfer:FuzzReceiveTar
	transfer:FuzzReadJournal
	report:FuzzParse
	transfer:FuzzReadFileList
	sshconn:FuzzSSHG
	internal/filter:FuzzMatch
	protocol:FuzzParseFileIDs
	internal/trace:FuzzParse
	protocol:FuzzRemoteCommandPaths
	stripe:FuzzReceive
	delta:FuzzApply
	delta:FuzzApplyInPlace
	delta:FuzzApplyShares
	delta:FuzzReadSignature
	delta:FuzzSignaturePart
	helper:FuzzDeltaReplies
)

# Every func FuzzXxx in a _test.go file, as package:FuzzXxx.
found=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . |
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1:\2|' | sort -u)
listed=$(printf '%s\n' "${targets[@]}" | sort -u)
missing=$(comm -23 <(echo "$found") <(echo "$listed"))
stale=$(comm -13 <(echo "$found") <(echo "$listed"))
if [ -n "$missing" ] || [ -n "$stale" ]; then
	[ -z "$missing" ] || printf 'fuzz.sh: FAIL: fuzz targets not in the list of scripts/fuzz.sh:\n%s\n' "$missing" >&2
	[ -z "$stale" ] || printf 'fuzz.sh: FAIL: listed in scripts/fuzz.sh but not in the code:\n%s\n' "$stale" >&2
	exit 1
fi

run=("$@")
if [ ${#run[@]} -eq 0 ]; then
	run=("${targets[@]}")
fi
parallel=()
if [ -n "${FUZZPARALLEL:-}" ]; then
	parallel=(-parallel="$FUZZPARALLEL")
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${run[@]}"; do
	if ! grep -qxF -- "$t" <<<"$listed"; then
		echo "fuzz.sh: no target $t (want package:FuzzName, one of: ${targets[*]})" >&2
		exit 2
	fi
	pkg=${t%%:*} name=${t#*:}
	echo "fuzz.sh: $pkg $name for $FUZZTIME"
	if "$GO" test -run='^$' -fuzz="^$name\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=5s \
		"${parallel[@]}" "./$pkg" 2>&1 | tee "$log"; then
		continue
	fi
	# Go's fuzzing coordinator can fail a run that found nothing with a
	# bare "context deadline exceeded" when -fuzztime ends while a worker
	# is busy, most often on a loaded machine. Only that, with no failing
	# input written and the corpus passing when run again, is let go.
	if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
		echo "fuzz.sh: $name: the fuzzing run ended on go's deadline race, not on an input; running its corpus again"
		"$GO" test -count=1 -run="^$name\$" "./$pkg"
		continue
	fi
	echo "fuzz.sh: FAIL: $pkg $name" >&2
	exit 1
done
