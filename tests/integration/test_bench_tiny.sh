#!/bin/bash
# timeout: 180
# plain build only: it checks the benchmark's scripts, not the code they
# drive (the other suites run that under ASan); 90 s there.
#
# test_bench_tiny.sh BUILD - runs the benchmark (bench/run.sh) once in its
# tiny mode so it cannot rot. It reports, it does not gate on speed: the
# test fails only if the run itself fails, a workload is missing from the
# results, a local-disk figure is missing (a bug in the benchmark), or the
# Cairn side could not even be set up (server or mount did not start).
# Cairn-side errors in single phases are printed as diagnostics.
#
# Prints "ok - bench tiny" or "not ok - bench tiny"; exit 0 iff ok.

set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "not ok - bench tiny"
	echo "# no build directory ${1:-$ROOT/build}"
	exit 1
}

# Under tests/run.sh, scratch space and mounts live in its temp dir, which
# its safety net sweeps.
export TMPDIR=${CAIRN_TEST_TMP:-${TMPDIR:-/tmp}}
OUT=$(mktemp -d "$TMPDIR/bench-tiny-out.XXXXXX") || exit 1
trap 'rm -rf "$OUT"' EXIT

fail() {
	echo "not ok - bench tiny"
	echo "# $1"
	sed 's/^/# /' "$OUT/log" 2>/dev/null | tail -n 60
	exit 1
}

t0=$(date +%s)
(cd "$ROOT" && BENCH_TINY=1 BENCH_OUT="$OUT" BENCH= bench/run.sh "$BUILD") \
	>"$OUT/log" 2>&1
rc=$?
t1=$(date +%s)
[ $rc = 0 ] || fail "bench/run.sh exited $rc"

TSV=$(ls "$OUT"/*.tsv 2>/dev/null | head -n 1)
[ -n "$TSV" ] || fail "no .tsv written"
MD=${TSV%.tsv}.md
[ -s "$MD" ] || fail "no .md written"

missing=""
for w in stat search large netcdf frag tree dbench coherence; do
	awk -F'\t' -v w="$w" '$1 == "result" && $2 == w { f = 1 } END { exit !f }' \
		"$TSV" || missing="$missing $w"
done
[ -z "$missing" ] || fail "workloads missing from $TSV:$missing"

# Local figures come from the benchmark alone: an error there is its bug.
bad=$(awk -F'\t' '$1 == "result" && ($5 == "" || $5 ~ /^ERR/) { print $2 ": " $3 ": " $5 }' "$TSV")
[ -z "$bad" ] || fail "local figures missing: $bad"
setup=$(awk -F'\t' '$1 == "result" && $6 ~ /^ERR: (setup|unmount):/ { print $2 ": " $3 ": " $6 }' "$TSV")
[ -z "$setup" ] || fail "Cairn side could not be set up or torn down: $setup"

# Diagnostics only: phases Cairn could not do yet.
awk -F'\t' '$1 == "result" && $6 ~ /^ERR/ { print "# cairn: " $2 ": " $3 ": " $6 }' "$TSV"
echo "# tiny run took $((t1 - t0)) s"
echo "ok - bench tiny"
