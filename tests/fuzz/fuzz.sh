#!/bin/bash
# tests/fuzz/fuzz.sh FUZZDIR SECONDS SAVE TARGET... - the body of `make fuzz`.
#
# Runs each libFuzzer binary FUZZDIR/TARGET for SECONDS seconds on its saved
# corpus tests/fuzz/corpus/TARGET/ (and the crash reproducers in
# tests/fuzz/crashes/TARGET/, which must not crash any more). New inputs go
# to FUZZDIR/new/TARGET/ (scratch), or into tests/fuzz/corpus/TARGET/ when
# SAVE is 1; a crash's reproducer goes to FUZZDIR/crashes/ (copy it into
# tests/fuzz/crashes/TARGET/ once you have looked at it: docs/RELIABILITY.md).
# Prints per target the executions, the rate and the crashes, fuzz_msg's
# per-message counts, and the full libFuzzer log of a target that crashed.
# Exit status 1 if any target crashed.
#
# FUZZ_FLAGS adds libFuzzer options (e.g. FUZZ_FLAGS=-fork=2).

set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 3 ]; then
	echo "usage: $0 FUZZDIR SECONDS SAVE TARGET..." >&2
	exit 2
fi
DIR=$1 SECS=$2 SAVE=$3
shift 3
mkdir -p "$DIR/logs" "$DIR/crashes" || exit 1

total=0 crashed=0
printf '%-16s %14s %10s %10s %8s\n' target executions exec/s seconds crashes
for t in "$@"; do
	bin=$DIR/$t
	corpus=$ROOT/tests/fuzz/corpus/$t
	known=$ROOT/tests/fuzz/crashes/$t
	log=$DIR/logs/$t.log
	if [ ! -x "$bin" ]; then
		echo "$t: $bin missing (make fuzz-build)" >&2
		crashed=$((crashed + 1))
		continue
	fi
	mkdir -p "$corpus"
	if [ "$SAVE" = 1 ]; then
		dirs=("$corpus")
	else
		mkdir -p "$DIR/new/$t"
		dirs=("$DIR/new/$t" "$corpus")
	fi
	[ -d "$known" ] && dirs+=("$known")
	before=$(ls "$DIR/crashes" | wc -l)
	t0=$(date +%s)
	# shellcheck disable=SC2086 # FUZZ_FLAGS is a list of options
	"$bin" -max_total_time="$SECS" -print_final_stats=1 -max_len=4096 \
		-timeout=10 -artifact_prefix="$DIR/crashes/$t-" \
		${FUZZ_FLAGS:-} "${dirs[@]}" >"$log" 2>&1
	rc=$?
	t1=$(date +%s)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	new=$(( $(ls "$DIR/crashes" | wc -l) - before ))
	if [ "$rc" != 0 ] && [ "$new" = 0 ]; then
		new=1   # died without writing a reproducer: still a crash
	fi
	printf '%-16s %14s %10s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" \
		$((t1 - t0)) "$new"
	total=$((total + ${execs:-0}))
	sed -n 's/^fuzz_msg: /    /p' "$log"
	if [ "$new" != 0 ]; then
		crashed=$((crashed + new))
		echo "--- $t crashed (exit $rc); log $log:"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|artifact_prefix|.*runtime error)' \
			"$log" | sed 's/^/    /'
	fi
done
echo "total: $total executions, $crashed crash(es)"
[ "$crashed" = 0 ]
