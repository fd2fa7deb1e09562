#!/bin/sh
# design-check.sh: every name docs/DESIGN.md puts in backquotes, and every
# file name it mentions, must exist in the tree, so that the document
# cannot go on describing code that moved or was removed.
#
#   scripts/design-check.sh [FILE]
#
# A Go name (Name, pkg.Name, Type.Name, Name(args)) must be declared: a
# func, method, type, var, const or struct field of that name, in pkg's
# directory when the first element is one of hpncp's package names. A path
# must exist (globs allowed), `make X` must be a Makefile target. Words
# that are not hpncp's own (OpenSSH options, kernel fields, commands) need
# only appear somewhere in the code. Flags (`-p`, `--resume`) and runtime
# paths ($XDG_…, ~/…) are not checked. Prints each miss; exit status 1 if
# there is one.
set -eu
cd "$(dirname "$0")/.."
doc=${1:-docs/DESIGN.md}

gofiles() { find "${1:-.}" -name '*.go' -not -path './.git/*'; }

# pkgdir NAME: the directory of the hpncp package whose last element is NAME.
pkgdir() {
	case $1 in
	hpncp) echo cmd/hpncp ;;
	*) awk -v n="$1" -F/ '$NF == n { print; exit }' "$pkgs" ;;
	esac
}

# declared NAME [RECV] [DIR]: NAME is declared in DIR's Go files (the whole
# tree by default); with RECV, a method of RECV or a field.
declared() {
	name=$1 recv=${2:-} dir=${3:-.}
	files=$(gofiles "$dir")
	[ -n "$files" ] || return 1
	if [ -n "$recv" ]; then
		# shellcheck disable=SC2086
		grep -qE "^func \([a-z]* ?\*?$recv(\[[^]]*\])?\) $name[[(]" $files && return 0
	fi
	# shellcheck disable=SC2086
	grep -qE "^func (\([^)]*\) )?$name[[(]|^(type|var|const) $name\b|^[[:space:]]+($name|[A-Za-z_][A-Za-z0-9_]*(, [A-Za-z_][A-Za-z0-9_]*)*, $name)(, [A-Za-z_][A-Za-z0-9_]*)*([[:space:]]+[^[:space:]=:(]|[[:space:]]*=[^=])" $files
}

# mentioned WORD: WORD appears in the code (not in the documentation).
mentioned() {
	grep -rqwF --include='*.go' --include='*.sh' --include=Makefile --include='*.yaml' -- "$1" .
}

miss=0
fail() {
	echo "miss: $1${2:+ ($2)}"
	miss=$((miss + 1))
}

check() {
	t=$1
	case $t in
	-* | *'$'* | '~'* | *XXXX* | . | .. | / | '\'* | *'<='* | ceil\(*) return ;;
	'make '*)
		grep -qE "^${t#make }:" Makefile || fail "$t" "no Makefile target"
		return
		;;
	'hpncp '* | 'go '* | 'ssh '* | 'scp '* | 'tar '* | 'sha256sum'* | 'shasum '*) return ;;
	*' '*)
		# A command: its first word must be a file of the tree.
		first=${t%% *}
		case $first in */*) [ -e "$first" ] || fail "$t" "no file $first" ;; esac
		return
		;;
	*/* | *.go | *.sh | *.md | *.yaml | *.json)
		case $t in *@* | *:*) return ;; esac
		# shellcheck disable=SC2086
		if ls -d $t >/dev/null 2>&1; then return; fi
		[ -n "$(find . -path "*/$t" -not -path './.git/*' | head -1)" ] || fail "$t" "no such path"
		return
		;;
	*:*) return ;;
	*@*) mentioned "$t" || fail "$t" "not in the code"; return ;;
	esac
	id=${t%%(*}
	case $id in *[!A-Za-z0-9_.*]*) return ;; esac
	id=${id#\*}
	last=${id##*.}
	dir=.
	recv=
	case $id in
	*.*)
		first=${id%%.*}
		rest=${id#*.}
		d=$(pkgdir "$first")
		if [ -n "$d" ]; then
			dir=$d
			case $rest in *.*) recv=${rest%%.*} ;; esac
			# The type part, too, must be declared in that package.
			if [ -n "$recv" ] && ! declared "$recv" "" "$dir"; then
				fail "$t" "no $recv in $dir"
				return
			fi
		else
			case $first in
			[a-z]*)
				declared "$first" && { recv=$first; declared "$last" "$recv" && return; fail "$t" "no $last"; return; }
				# Another module's package (ssh.Client): named in the code.
				grep -rqF --include='*.go' -- "$first.$rest" . || fail "$t" "not in the code"
				return
				;;
			esac
			recv=$first
			declared "$recv" || { fail "$t" "no $recv"; return; }
		fi
		;;
	esac
	if [ "$id" = "$last" ] && [ -n "$(pkgdir "$id")" ]; then return; fi
	declared "$last" "$recv" "$dir" && return
	case $id in
	*.*) fail "$t" "no $last in ${dir}" ;;
	*)
		# Not hpncp's own name: it must at least appear in the code.
		mentioned "$id" || fail "$t" "not declared, not in the code"
		;;
	esac
}

tokens=$(mktemp)
pkgs=$(mktemp)
trap 'rm -f "$tokens" "$pkgs"' EXIT
go list -f '{{.Dir}}' ./... | sed "s|^$PWD/||" >"$pkgs"
grep -o '`[^`]*`' "$doc" | tr -d '`' | sort -u >"$tokens"
# File names in the prose, outside backquotes.
sed 's/`[^`]*`//g' "$doc" | grep -oE '[A-Za-z0-9_./*-]+\.(go|sh|md|yaml)\b' | sort -u >>"$tokens"
n=0
while IFS= read -r t; do
	n=$((n + 1))
	check "$t"
done <"$tokens"
echo "$doc: $n names checked, $miss missing"
[ "$miss" -eq 0 ]
