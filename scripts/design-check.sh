#!/bin/sh
# design-check.sh: every name a page of the documentation puts in
# backquotes, every file name it mentions and every relative link it
# makes must exist in the tree, so that no page can go on describing code,
# flags, targets or files that moved or were removed.
#
#   scripts/design-check.sh [FILE...]
#
# With no FILE it checks every page: README.md, CONTRIBUTING.md,
# docs/*.md and bench/README.md.
#
# A Go name (Name, pkg.Name, Type.Name, Name(args)) must be declared: a
# func, method, type, var, const or struct field of that name, in pkg's
# directory when the first element is one of hpncp's package names; a
# dotted lower-case name that is no Go name (totals.bytes) must be a JSON
# field of the code. A path must exist (globs allowed), beside the page or
# from the top of the tree, or, for what a build makes (dist/,
# checksums.txt), be named in the code or build files. `make X` must be a
# Makefile target and its VAR= settings Makefile variables. A long flag
# (`--resume`, `--tcp-mem BYTES`) must appear in the code or scripts.
# Words that are not hpncp's own (OpenSSH options, kernel fields, commands)
# need only appear somewhere in the code. Short flags, numbers and
# runtime paths (/usr/…, $XDG_…, ~/…) are not checked. A relative link
# [text](path#anchor) must lead to a file inside the repository and, in a
# Markdown file, to one of its headings. Prints each miss; exit status 1
# if there is one.
set -eu
cd "$(dirname "$0")/.."
top=$(pwd -P)

# gofiles [DIR]: the Go files of the tree, or below DIR (listed once).
gofiles() {
	case ${1:-.} in
	.) cat "$golist" ;;
	*) grep "^$1/" "$golist" || true ;;
	esac
}

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
	grep -rqwF --include='*.go' --include='*.sh' --include=Makefile --include='*.yaml' -- "$1" . .ci
}

# flagknown --FLAG: the long flag appears in the code or scripts, as a
# whole (--tar is not found in --tar-streams).
flagknown() {
	grep -rqE --include='*.go' --include='*.sh' --include=Makefile -- "$1([^a-z0-9-]|\$)" . .ci
}

# pathknown PATH: PATH exists from the top of the tree or beside the page
# (globs and {a,b} allowed), or, for what a build or a run makes, the code
# or build files name it.
pathknown() {
	case $1 in
	*{*}*)
		pre=${1%%{*} rest=${1#*{}
		alts=${rest%%\}*} post=${rest#*\}}
		for a in $(echo "$alts" | tr , ' '); do
			pathknown "$pre$a$post" || return 1
		done
		return 0
		;;
	esac
	# shellcheck disable=SC2086
	if ls -d $1 >/dev/null 2>&1 || (cd "$docdir" && ls -d $1 >/dev/null 2>&1); then return 0; fi
	[ -n "$(find . -path "*/${1%/}" -not -path './.git/*' | head -1)" ] && return 0
	mentioned "${1%/}"
}

# jsonfield NAME: NAME is a JSON field of the code (a struct tag).
jsonfield() {
	grep -rqE --include='*.go' -- "json:\"$1[,\"]" .
}

miss=0
fail() {
	echo "miss: $1${2:+ ($2)}"
	miss=$((miss + 1))
}

check() {
	t=$1
	case $t in *[A-Za-z]*) ;; *) return ;; esac # a number, a fraction, an address
	case $t in
	--[a-z]*)
		f=${t%%[ =]*}
		flagknown "$(echo "$f" | sed 's/\*/[a-z0-9-]*/g')" || fail "$t" "flag $f not in the code"
		return
		;;
	-* | *'$'* | '~'* | /* | *XXXX* | . | .. | '\'* | *'<='* | ceil\(*) return ;;
	'make '*)
		set -- $t
		shift
		grep -qE "^$1:" Makefile || fail "$t" "no Makefile target $1"
		shift
		for v in "$@"; do
			case $v in *=*) grep -qw -- "${v%%=*}" Makefile || fail "$t" "no Makefile variable ${v%%=*}" ;; esac
		done
		return
		;;
	'hpncp '* | 'go '* | 'ssh '* | 'scp '* | 'tar '* | 'sha256sum'* | 'shasum '*) return ;;
	*' '*)
		# A command: its first word must be a file of the tree.
		first=${t%% *}
		case $first in */*) [ -e "$first" ] || fail "$t" "no file $first" ;; esac
		return
		;;
	*/* | *.go | *.sh | *.md | *.yaml | *.json | *.mod | *.txt | *.svg | *.csv)
		case $t in *@* | *:*) return ;; esac
		pathknown "$t" || fail "$t" "no such path"
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
				declared "$first" && { recv=$first; declared "$last" "$recv" && return; jsonfield "$last" && return; fail "$t" "no $last"; return; }
				# Another module's package (ssh.Client): named in the code.
				grep -rqF --include='*.go' -- "$first.$rest" . && return
				# A field of a JSON document (totals.bytes).
				jsonfield "$last" || fail "$t" "not in the code, no JSON field $last"
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

# links: the relative link targets of the page, one a line.
links() {
	grep -oE '\]\([^)[:space:]]+\)' "$doc" | sed 's/^](//; s/)$//' | grep -vE '^(https?:|mailto:)' || true
}

# anchors FILE: the anchors of a Markdown file's headings, as GitHub makes
# them: lower case, punctuation dropped, spaces as dashes.
anchors() {
	grep -E '^#+ ' "$1" | sed 's/^#* //' | tr 'A-Z' 'a-z' | tr -d '`' |
		sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# checklinks: every relative link of the page leads to a file inside the
# repository (and to a heading of it).
checklinks() {
	for l in $(links); do
		n=$((n + 1))
		p=${l%%#*}
		a=
		case $l in *#*) a=${l#*#} ;; esac
		[ -n "$p" ] || p=$(basename "$doc")
		f=$docdir/$p
		if [ ! -e "$f" ]; then
			fail "link $l" "no such file"
			continue
		fi
		case $(cd "$(dirname "$f")" && pwd -P)/ in
		"$top"/*) ;;
		*) fail "link $l" "outside the repository"; continue ;;
		esac
		if [ -n "$a" ] && [ "${f%.md}" != "$f" ] && ! anchors "$f" | grep -qxF -- "$a"; then
			fail "link $l" "no heading #$a"
		fi
	done
}

tokens=$(mktemp)
pkgs=$(mktemp)
golist=$(mktemp)
trap 'rm -f "$tokens" "$pkgs" "$golist"' EXIT
find . -name '*.go' -not -path './.git/*' | sed 's|^\./||' >"$golist"
go list -f '{{.Dir}}' ./... | sed "s|^$PWD/||" >"$pkgs"
[ $# -gt 0 ] || set -- README.md CONTRIBUTING.md docs/*.md bench/README.md
for doc in "$@"; do
	docdir=$(dirname "$doc")
	# Code fences are no names; what is between them is read as any text.
	grep -v '^ *```' "$doc" | grep -o '`[^`]*`' | tr -d '`' | sort -u >"$tokens"
	# File names in the prose, outside backquotes.
	grep -v '^ *```' "$doc" | sed 's/`[^`]*`//g' | grep -oE '[A-Za-z0-9_./*-]+\.(go|sh|md|yaml)\b' | sort -u >>"$tokens"
	n=0
	before=$miss
	while IFS= read -r t; do
		n=$((n + 1))
		check "$t"
	done <"$tokens"
	checklinks
	echo "$doc: $n names and links checked, $((miss - before)) missing"
done
[ "$miss" -eq 0 ]
