#!/bin/bash
# timeout: 60
#
# test_docs.sh BUILD - the documentation matches the program (STYLE.md
# item 13). Asks BUILD/cairn for its subcommands (`cairn --help`) and each
# subcommand for its usage (`cairn SUB --help`), then checks that
#   - docs/cairn.1 renders without warnings (man --warnings, groff -ww);
#   - every subcommand appears in docs/cairn.1 (as a section of its own)
#     and in README.md;
#   - every long option a --help prints appears in README.md and in the
#     option list of that subcommand's section of docs/cairn.1, every short
#     option in that list, and every default path or address it names
#     anywhere in cairn.1;
#   - every usage line appears, word for word, in cairn.1 and README.md.
# Words match whole: --data does not match --database, "... --data DIR"
# does not match "... --data DIRS".
#
# Prints one "ok - NAME" or "not ok - NAME" line per check (rendering
# checks are skipped, "ok - NAME # skip", where man or groff is missing);
# exit status 0 iff none failed. Installs nothing, starts no server.

set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MANPAGE=$ROOT/docs/cairn.1
README=$ROOT/README.md
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "not ok - build directory ${1:-$ROOT/build} exists"
	exit 1
}
CAIRN=$BUILD/cairn

TMP=$(mktemp -d "${CAIRN_TEST_TMP:-${TMPDIR:-/tmp}}/docs.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

FAILED=0
ok() { echo "ok - $1"; }
not_ok() {
	echo "not ok - $1"
	shift
	for line in "$@"; do
		echo "# $line"
	done
	FAILED=1
}
skip() { echo "ok - $1 # skip $2"; }
check() { # check NAME DIAGNOSTIC CMD...: ok if CMD succeeds
	local name=$1 diag=$2
	shift 2
	if "$@"; then ok "$name"; else not_ok "$name" "$diag"; fi
}

for f in "$MANPAGE" "$README"; do
	if [ ! -f "$f" ]; then
		not_ok "${f#"$ROOT"/} exists"
		exit 1
	fi
done

# --- rendering ------------------------------------------------------------

HAVE_MAN=0
HAVE_GROFF=0
command -v man >/dev/null 2>&1 && HAVE_MAN=1
command -v groff >/dev/null 2>&1 && HAVE_GROFF=1

if [ $HAVE_MAN = 1 ]; then
	MANWIDTH=80 MANPAGER=cat PAGER=cat man --warnings -l "$MANPAGE" \
		>"$TMP/man.out" 2>"$TMP/man.err"
	rc=$?
	if [ $rc = 0 ] && [ ! -s "$TMP/man.err" ] && [ -s "$TMP/man.out" ]; then
		ok "cairn.1 renders without warnings (man --warnings)"
	else
		not_ok "cairn.1 renders without warnings (man --warnings)" \
			"man exited $rc" "$(head -n 20 "$TMP/man.err")"
	fi
else
	skip "cairn.1 renders without warnings (man --warnings)" "no man"
fi
if [ $HAVE_GROFF = 1 ]; then
	groff -ww -z -man "$MANPAGE" 2>"$TMP/groff.err"
	rc=$?
	if [ $rc = 0 ] && [ ! -s "$TMP/groff.err" ]; then
		ok "cairn.1 has no groff warnings (groff -ww -man)"
	else
		not_ok "cairn.1 has no groff warnings (groff -ww -man)" \
			"groff exited $rc" "$(head -n 20 "$TMP/groff.err")"
	fi
else
	skip "cairn.1 has no groff warnings (groff -ww -man)" "no groff"
fi

# The page as a reader sees it, in ASCII. Without a formatter, a reading
# of the source laid out the way man lays out a page: fonts and escapes
# removed, macro arguments joined as the macros join them, .SH headings at
# column 0, .SS headings at 3 and everything else at 7.
render() {
	if [ $HAVE_MAN = 1 ]; then
		LC_ALL=C MANWIDTH=80 MANPAGER=cat PAGER=cat man -l "$MANPAGE" \
			2>/dev/null >"$TMP/page.raw" && [ -s "$TMP/page.raw" ] &&
			return 0
	fi
	if [ $HAVE_GROFF = 1 ]; then
		groff -man -Tascii -P-c -P-b -P-u "$MANPAGE" 2>/dev/null \
			>"$TMP/page.raw" && [ -s "$TMP/page.raw" ] && return 0
	fi
	return 1
}
if ! render; then
	awk '
	# Split roff macro arguments (double quotes group) and join them.
	function join(s, sep,   out, n, i, c, q, a, have) {
		out = ""; a = ""; q = 0; have = 0; n = length(s)
		for (i = 1; i <= n + 1; i++) {
			c = i <= n ? substr(s, i, 1) : " "
			if (c == "\"") { q = !q; have = 1; continue }
			if (c == " " && !q) {
				if (have) out = out (out == "" ? "" : sep) a
				a = ""; have = 0; continue
			}
			a = a c; have = 1
		}
		return out
	}
	/^\.\\"/ { next }
	{
		gsub(/\\f[BIRP]/, ""); gsub(/\\f\(../, ""); gsub(/\\-/, "-")
		gsub(/\\[&c]/, ""); gsub(/\\\(aq/, "\047"); gsub(/\\e/, "\\")
	}
	/^\.SH / { print join(substr($0, 5), " "); next }
	/^\.SS / { print "   " join(substr($0, 5), " "); next }
	/^\.(BI|IB|BR|RB|IR|RI) / { print "       " join(substr($0, 5), ""); next }
	/^\.(B|I|SY) / { sub(/^\.[A-Z]+ /, ""); print "       " join($0, " "); next }
	/^[.\047]/ { next }
	{ print "       " $0 }' "$MANPAGE" >"$TMP/page.raw"
fi
sed 's/.\x08//g' "$TMP/page.raw" >"$TMP/page.txt"
tr -s ' \t\n' '   ' <"$TMP/page.txt" >"$TMP/page.flat"
tr -s ' \t\n' '   ' <"$README" >"$TMP/readme.flat"

# --- helpers --------------------------------------------------------------

# has_word FILE WORD: WORD occurs in FILE with no letter, digit, '_' or '-'
# directly before or after it.
has_word() {
	local re
	re=$(printf '%s' "$2" | sed 's/[][\.*^$/+?(){}|]/\\&/g')
	grep -qE -- "(^|[^A-Za-z0-9_-])$re([^A-Za-z0-9_-]|\$)" "$1"
}

# section SUB: the body of cairn.1's section on `cairn SUB`, from below
# its heading up to the next heading.
section() {
	awk -v h="   cairn $1" '
		index($0, h) == 1 && (length($0) == length(h) ||
			substr($0, length(h) + 1, 1) == " ") { on = 1; next }
		on && /^([^ ]|   [^ ])/ { on = 0 }
		on { print }' "$TMP/page.txt"
}

# --- the program's own word -----------------------------------------------

if ! "$CAIRN" --help >"$TMP/top.help" 2>"$TMP/top.err"; then
	not_ok "cairn --help exits 0" "$(cat "$TMP/top.err")"
	exit 1
fi
ok "cairn --help exits 0"
SUBS=$(awk '/^commands:/ { on = 1; next }
	on && /^  [a-z]/ { print $1; next }
	on && /^$/ { on = 0 }' "$TMP/top.help")
if [ -z "$SUBS" ]; then
	not_ok "cairn --help lists subcommands" "$(cat "$TMP/top.help")"
	exit 1
fi
ok "cairn --help lists subcommands (${SUBS//$'\n'/ })"

# Long options of `cairn --help` itself (it names --help).
for opt in $(grep -oE -- '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' \
	"$TMP/top.help" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
	check "cairn $opt in cairn.1" "not in docs/cairn.1" \
		has_word "$TMP/page.txt" "$opt"
	check "cairn $opt in README.md" "not in README.md" \
		has_word "$README" "$opt"
done

for sub in $SUBS; do
	help=$TMP/$sub.help
	if ! "$CAIRN" "$sub" --help >"$help" 2>"$TMP/$sub.err"; then
		not_ok "cairn $sub --help exits 0" "$(cat "$TMP/$sub.err")"
		continue
	fi
	if [ ! -s "$help" ]; then
		not_ok "cairn $sub --help prints its usage on stdout"
		continue
	fi
	ok "cairn $sub --help exits 0"

	# The subcommand itself.
	section "$sub" >"$TMP/$sub.sec"
	check "$sub has a section in cairn.1" \
		"no heading 'cairn $sub' in docs/cairn.1" test -s "$TMP/$sub.sec"
	# Its option list: the tags of its indented paragraphs.
	grep -E '^       -' "$TMP/$sub.sec" >"$TMP/$sub.tags"
	check "$sub in README.md" "'cairn $sub' not in README.md" \
		has_word "$README" "cairn $sub"

	# Its usage line, word for word.
	usage=$(sed -n 's/^usage: *//p' "$help" | head -n 1 | tr -s ' \t' '  ')
	if [ -z "$usage" ]; then
		not_ok "$sub --help has a usage line" "$(head -n 3 "$help")"
	else
		check "$sub usage line in cairn.1" "'$usage' not in docs/cairn.1" \
			has_word "$TMP/page.flat" "$usage"
		check "$sub usage line in README.md" "'$usage' not in README.md" \
			has_word "$TMP/readme.flat" "$usage"
	fi

	# Its options.
	for opt in $(grep -oE -- '(^|[^A-Za-z0-9_-])--?[A-Za-z][A-Za-z0-9-]*' \
		"$help" | grep -oE -- '--?[A-Za-z][A-Za-z0-9-]*' | sort -u); do
		check "$sub $opt in cairn.1" \
			"not in the option list of 'cairn $sub' in docs/cairn.1" \
			has_word "$TMP/$sub.tags" "$opt"
		case $opt in
		--*) check "$sub $opt in README.md" "not in README.md" \
			has_word "$README" "$opt" ;;
		esac
	done

	# Defaults it names: absolute paths and IP:PORT addresses.
	for val in $( { grep -oE -- '(^|[ (])/[A-Za-z0-9_./%-]+' "$help" |
		sed 's/^[ (]//; s/[.]*$//'
		grep -oE -- '[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+' "$help"
		} | sort -u); do
		check "$sub default $val in cairn.1" "not in docs/cairn.1" \
			has_word "$TMP/page.txt" "$val"
	done
done

exit $FAILED
