#!/bin/bash
# tests/run.sh BUILD_DIR [BUILD_DIR...] - run every Cairn test against each
# build directory: the unit test binaries BUILD/tests/test_*, the fuzz
# corpus replays BUILD/fuzz/replay_* (each saved input of
# tests/fuzz/corpus/ and tests/fuzz/crashes/ run once), and the
# integration suites tests/integration/test_*.py (which drive BUILD/cairn).
# With CAIRN_CLANG_BUILD=DIR set (make check does), the tree is also built
# once with clang into DIR, -Werror, as one more suite.
#
# Every suite prints "ok - NAME" / "not ok - NAME" lines (and optionally a
# "1..N" plan first); this script counts them per suite, shows the failures
# with their diagnostics, and ends with exactly one line "N passed, N failed".
# Exit status 0 iff nothing failed.
#
# Robustness: each suite runs under `timeout`; a suite that crashes, hangs,
# or stops before its plan is complete counts as failed. Suites clean up
# after themselves; as a safety net, the EXIT trap unmounts whatever is still
# mounted under this run's own temp dir and kills the PIDs recorded in its
# pid file (checking each one's start time, so a recycled PID is never hit).
#
# On a machine with two CPUs or more, two workers run the suites side by
# side, taking them from a queue (each worker its own temp dir and safety
# net); the report keeps the usual order. A suite marked "# alone: WHY"
# near its top runs after them, by itself. Each failure seen only this way
# so far was a race that load opened, in Cairn or in a test, and is fixed
# (the last: test_hung's failed close, whose unsent bytes a read could
# still see).
#
# An integration suite with a line "# plain build only: WHY" near its top
# is not run against a sanitizer build.
#
# Environment: CAIRN_TEST_ONLY=substr[,substr] runs only matching suites
# files / tests; CAIRN_TEST_VERBOSE=1 prints every suite's full output;
# CAIRN_TEST_JOBS=1 runs one suite at a time (default 2 with two CPUs).

set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -lt 1 ]; then
	echo "usage: tests/run.sh BUILD_DIR [BUILD_DIR...]" >&2
	exit 2
fi

TMP=$(mktemp -d /tmp/cairn-check.XXXXXX) || exit 1
chmod 755 "$TMP"
PIDFILE=$TMP/pids
: >"$PIDFILE"
export CAIRN_TEST_PIDFILE=$PIDFILE

# Start time (field 22 of /proc/PID/stat) identifies a process instance.
# Fails for a process that is gone or a zombie (nothing left to kill).
pid_start() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	set -- $s
	[ "$1" != Z ] || return 1
	echo "${20}"
}

record_pid() {
	local st
	st=$(pid_start "$1") && echo "$1 $st" >>"$PIDFILE"
}

unmount_leftovers() {
	local mp
	[ -r /proc/self/mountinfo ] || return 0
	# Mount points under our temp dir, deepest first.
	awk -v t="$TMP/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r mp; do
			echo "run.sh: cleaning up leftover mount $mp" >&2
			fusermount3 -u -z "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null
		done
}

# Recorded processes still alive (same PID and start time as recorded).
live_recorded() {
	local pid st now
	[ -s "$PIDFILE" ] || return 0
	while read -r pid st; do
		now=$(pid_start "$pid") || continue
		[ "$now" = "$st" ] && echo "$pid"
	done <"$PIDFILE"
}

# Reap what a suite left behind: ask recorded processes to stop (a suite
# unmounts on SIGTERM), give them a moment, unmount what is still mounted
# under our temp dir, then SIGKILL the rest.
safety_net() {
	local pid pids i
	pids=$(live_recorded)
	if [ -n "$pids" ]; then
		for pid in $pids; do
			echo "run.sh: stopping leftover process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120))" >&2
			kill -TERM "$pid" 2>/dev/null
		done
		for i in 1 2 3 4 5 6 7 8 9 10; do
			[ -z "$(live_recorded)" ] && break
			sleep 1
		done
	fi
	unmount_leftovers
	for pid in $(live_recorded); do
		echo "run.sh: killing leftover process $pid" >&2
		kill -KILL "$pid" 2>/dev/null
	done
	unmount_leftovers
	: >"$PIDFILE"
}

on_exit() {
	safety_net
	rm -rf "$TMP" 2>/dev/null
}
trap on_exit EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM HUP

TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
SUMMARY=()
FAILS=()

matches_only() {
	[ -z "${CAIRN_TEST_ONLY:-}" ] && return 0
	local IFS=, o
	for o in $CAIRN_TEST_ONLY; do
		case "$1" in *"$o"*) return 0 ;; esac
	done
	return 1
}

# run_suite LABEL TIMEOUT_S CMD... : run one suite, count and report.
run_suite() {
	local label=$1 limit=$2
	shift 2
	local log=$TMP/suite.log t0 t1 rc pass fail plan missing extra=""
	t0=$(date +%s)
	# The suite gets SIGTERM at the limit (it cleans up on it), SIGKILL
	# 20 s later if it still has not gone.
	# Each suite runs in a scratch dir of its own (unit tests may create
	# files in their working directory).
	local work=$TMP/work.$RANDOM$RANDOM
	mkdir -p "$work" && chmod 755 "$work"
	(cd "$work" && exec timeout -k 20 "$limit" "$@") >"$log" 2>&1 </dev/null &
	local pid=$!
	record_pid "$pid"
	wait "$pid"
	rc=$?
	t1=$(date +%s)
	safety_net
	rm -rf "$work"

	# A skipped test ("ok - NAME  # skip WHY") ran nothing: it is shown
	# and counted apart, never as passed.
	skip=$(grep -c '^ok - .*  # skip' "$log")
	pass=$(($(grep -c '^ok - ' "$log") - skip))
	fail=$(grep -c '^not ok - ' "$log")
	[ "$skip" = 0 ] || extra="$extra; $skip skipped"
	TOTAL_SKIP=$((TOTAL_SKIP + skip))
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)
	missing=0
	if [ -n "$plan" ] && [ $((pass + skip + fail)) -lt "$plan" ]; then
		missing=$((plan - pass - skip - fail))
		extra="$extra; $missing test(s) never reported"
	fi
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		extra="$extra; TIMED OUT after ${limit}s"
	elif [ "$rc" != 0 ]; then
		extra="$extra; exit status $rc"
	fi
	fail=$((fail + missing))
	# A crash or hang that cost no test its result still counts once, and
	# so does a suite that reported nothing at all.
	if { [ "$rc" != 0 ] && [ "$fail" = 0 ]; } || [ $((pass + skip + fail)) = 0 ]; then
		fail=$((fail + 1))
		[ $((pass + fail)) = 1 ] && extra="$extra; no test results"
	fi

	if [ "${CAIRN_TEST_VERBOSE:-0}" = 1 ]; then
		sed 's/^/    /' "$log"
	else
		grep -E '^(ok|not ok) - ' "$log" | sed 's/^/    /'
	fi
	if [ "$fail" != 0 ]; then
		echo "    --- failure output of $label:"
		if [ "${CAIRN_TEST_VERBOSE:-0}" != 1 ]; then
			# Everything that is not an "ok" line: diagnostics, stderr,
			# sanitizer reports. Bounded so one runaway suite cannot
			# drown the report.
			grep -v -E '^(ok - |1\.\.[0-9]+$)' "$log" | head -n 300 | sed 's/^/    | /'
		fi
		# What failed, in a few lines, repeated at the very end of the
		# report (where a cut report still shows it).
		FAILS+=("$label$extra"$'\n'"$(grep -A3 '^not ok - ' "$log" |
			head -n 16 | sed 's/^/    /')")
	fi
	printf '  %-44s %3d passed, %3d failed  (%ss%s)\n' "$label" "$pass" "$fail" \
		$((t1 - t0)) "$extra"
	SUMMARY+=("$(printf '%-52s %3d passed, %3d failed%s' "$label" "$pass" "$fail" "$extra")")
	TOTAL_PASS=$((TOTAL_PASS + pass))
	TOTAL_FAIL=$((TOTAL_FAIL + fail))
}

# Per-suite time limit: a "# timeout: N" line near the top of the suite,
# else the default.
suite_limit() {
	local n
	n=$(head -n 20 "$1" | sed -n 's/^# timeout: *\([0-9][0-9]*\).*/\1/p' | head -n 1)
	echo "${n:-$2}"
}

# The clang build: everything `make all` builds, plus the libFuzzer
# targets, with clang and the usual -Wall -Wextra -Werror. Compile and
# link only (the gcc builds run the tests).
if [ -n "${CAIRN_CLANG_BUILD:-}" ] && matches_only clang; then
	echo "== clang"
	echo "-- build $CAIRN_CLANG_BUILD"
	run_suite "clang/build" 900 bash -c '
		cc=$(command -v clang-14 || command -v clang) || {
			echo "not ok - clang build"
			echo "# no clang-14 or clang (scripts/deps.sh installs clang-14)"
			exit 1
		}
		mkdir -p "$2" || exit 1
		if make -C "$1" -j2 --no-print-directory BUILD="$2" CC="$cc" \
			CLANG="$cc" all fuzz-build >"$2/build.log" 2>&1; then
			echo "ok - clang build ($cc, -Werror) into $2"
		else
			echo "not ok - clang build ($cc, -Werror) into $2"
			grep -E "(error|warning):" "$2/build.log" | head -n 40 | sed "s/^/# /"
			tail -n 5 "$2/build.log" | sed "s/^/# /"
			exit 1
		fi' _ "$ROOT" "$(cd "$ROOT" && mkdir -p "$CAIRN_CLANG_BUILD" &&
			cd "$CAIRN_CLANG_BUILD" && pwd)"
fi

# is_asan BUILD_DIR: is BUILD_DIR/cairn built with AddressSanitizer?
is_asan() {
	nm "$1/cairn" 2>/dev/null | grep -q __asan_init
}

# The suites to run, one line each: "BUILD_DIR KIND PATH" (KIND: unit,
# fuzz, integration), in the order they are reported.
list_jobs() {
	local build b t s
	for build in "$@"; do
		b=$(cd "$build" 2>/dev/null && pwd)
		if [ -z "$b" ] || [ ! -x "$b/cairn" ]; then
			echo "$build missing -"
			continue
		fi
		for t in "$b"/tests/test_*; do
			[ -x "$t" ] && [ -f "$t" ] || continue
			matches_only "$(basename "$t")" && echo "$build unit $t"
		done
		for t in "$b"/fuzz/replay_*; do
			[ -x "$t" ] && [ -f "$t" ] || continue
			matches_only "${t##*/replay_}" && echo "$build fuzz $t"
		done
		for s in "$ROOT"/tests/integration/test_*.py "$ROOT"/tests/integration/test_*.sh; do
			[ -f "$s" ] || continue
			if is_asan "$b" && head -n 20 "$s" | grep -q '^# plain build only:'; then
				continue
			fi
			matches_only "$(basename "$s")" && echo "$build integration $s"
		done
	done
}

# run_job BUILD_DIR KIND PATH: one suite against one build.
run_job() {
	local build=$1 kind=$2 path=$3 b asan lim name
	b=$(cd "$build" 2>/dev/null && pwd)
	if [ "$kind" = missing ]; then
		echo "  $build/cairn is missing: build first (make BUILD=$build)"
		SUMMARY+=("$build: cairn binary missing")
		FAILS+=("$build: cairn binary missing")
		TOTAL_FAIL=$((TOTAL_FAIL + 1))
		return
	fi
	asan=0
	is_asan "$b" && asan=1
	export CAIRN_ASAN=$asan
	# Sanitizer reports of unit tests land on their stderr, which we keep.
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
	# Known leaks inside libfuse itself: see tests/lsan.supp.
	export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}
	export CAIRN_TEST_TMP=$TMP
	case $kind in
	unit)
		lim=120
		[ $asan = 1 ] && lim=300
		echo "-- unit $(basename "$path")"
		run_suite "$(basename "$build")/unit/$(basename "$path")" "$lim" "$path"
		;;
	fuzz)
		# Fuzz corpus replay: every saved input once, no mutation, so a
		# fixed crash stays fixed (tests/fuzz/replay.c, docs/RELIABILITY.md).
		name=${path##*/replay_}
		local dirs=("$ROOT/tests/fuzz/corpus/$name")
		[ -d "$ROOT/tests/fuzz/crashes/$name" ] &&
			dirs+=("$ROOT/tests/fuzz/crashes/$name")
		lim=120
		[ $asan = 1 ] && lim=300
		echo "-- fuzz replay $name"
		run_suite "$(basename "$build")/fuzz/$name" "$lim" "$path" "$name" \
			"${dirs[@]}"
		;;
	integration)
		lim=$(suite_limit "$path" 300)
		[ $asan = 1 ] && lim=$((lim * 2))
		echo "-- integration $(basename "$path")"
		case "$path" in
		*.py) run_suite "$(basename "$build")/integration/$(basename "$path" .py)" \
			"$lim" python3 "$path" "$b" ;;
		*.sh) run_suite "$(basename "$build")/integration/$(basename "$path" .sh)" \
			"$lim" bash "$path" "$b" ;;
		esac
		;;
	esac
}

# queued_job DIR N BUILD KIND PATH: run job N, its report to DIR/out.N,
# its counts to DIR/res.N, its summary line and failure lines to DIR/sum.N
# and DIR/fail.N.
queued_job() {
	local q=$1 n=$2 p0=$TOTAL_PASS f0=$TOTAL_FAIL s0=$TOTAL_SKIP
	local ns=${#SUMMARY[@]} nf=${#FAILS[@]}

	run_job "$3" "$4" "$5" >"$q/out.$n" 2>&1
	[ "${#SUMMARY[@]}" = "$ns" ] || printf '%s\n' "${SUMMARY[-1]}" >"$q/sum.$n"
	[ "${#FAILS[@]}" = "$nf" ] || printf '%s\n' "${FAILS[-1]}" >"$q/fail.$n"
	echo "$((TOTAL_PASS - p0)) $((TOTAL_FAIL - f0)) $((TOTAL_SKIP - s0))" >"$q/res.$n"
}

# A suite with a line "# alone: WHY" near its top never runs beside
# another one (with two workers it runs after them).
suite_alone() {
	[ -f "$1" ] && head -n 20 "$1" | grep -q '^# alone:'
}

# A worker (CAIRN_TEST_QUEUE=DIR): take the next job of DIR/jobs until none
# is left; each job's report goes to DIR/out.N, its counts to DIR/res.N,
# its summary line and failure lines to DIR/sum.N and DIR/fail.N.
if [ -n "${CAIRN_TEST_QUEUE:-}" ]; then
	Q=$CAIRN_TEST_QUEUE
	njobs=$(wc -l <"$Q/jobs")
	while :; do
		exec 9>>"$Q/lock"
		flock 9
		i=$(cat "$Q/next")
		echo $((i + 1)) >"$Q/next"
		flock -u 9
		exec 9>&-
		[ "$i" -lt "$njobs" ] || break
		# jobs holds "ORDER BUILD KIND PATH", taken in the order listed.
		read -r n build kind path < <(sed -n "$((i + 1))p" "$Q/jobs")
		queued_job "$Q" "$n" "$build" "$kind" "$path"
	done
	exit 0
fi

mapfile -t JOBS < <(list_jobs "$@")

# Two workers (CAIRN_TEST_JOBS, default 2 with two CPUs), each a
# run.sh of its own (own temp dir, pid file and safety net), take the
# suites from a queue: most of a suite's time is waiting on the network
# and the kernel. The longest suites go first so that neither worker is
# left with a long one at the end; the reports are shown in the usual
# order all the same.
ncpu=$(nproc 2>/dev/null || echo 1)
workers=${CAIRN_TEST_JOBS:-$([ "$ncpu" -ge 2 ] && echo 2 || echo 1)}
[ "$workers" -gt 2 ] && workers=2
Q=""
if [ "$workers" -gt 1 ] && [ "${#JOBS[@]}" -gt 1 ]; then
	Q=$TMP/queue
	mkdir -p "$Q" && echo 0 >"$Q/next" || exit 1
	# Each job ranked by its place in LONG_FIRST (the rest after them,
	# in order); the suites that run alone are not queued.
	LONG_FIRST="test_writeback test_locks test_bench_tiny test_hung test_crash test_coherence"
	for n in "${!JOBS[@]}"; do
		read -r build kind path <<<"${JOBS[$n]}"
		suite_alone "$path" && continue
		rank=99 i=0
		for l in $LONG_FIRST; do
			case "$path" in */$l.*) rank=$i ;; esac
			i=$((i + 1))
		done
		echo "$rank $n ${JOBS[$n]}"
	done | sort -s -n -k1,1 | cut -d' ' -f2- >"$Q/jobs"
	for w in $(seq "$workers"); do
		CAIRN_TEST_QUEUE=$Q CAIRN_CLANG_BUILD= "$0" "$@" \
			>"$Q/worker.$w" 2>&1 </dev/null &
		record_pid "$!"
	done
	wait
	# The suites that run alone, now that the workers are done.
	for n in "${!JOBS[@]}"; do
		read -r build kind path <<<"${JOBS[$n]}"
		if suite_alone "$path"; then
			(queued_job "$Q" "$n" "$build" "$kind" "$path")
		fi
	done
fi

# The reports in the usual order: run here one after another, or collected
# from what the workers left in $Q.
last=""
for n in "${!JOBS[@]}"; do
	read -r build kind path <<<"${JOBS[$n]}"
	[ "$build" = "$last" ] || echo "== $build"
	last=$build
	if [ -z "$Q" ]; then
		run_job "$build" "$kind" "$path"
		continue
	fi
	if [ ! -f "$Q/res.$n" ]; then
		echo "  ${JOBS[$n]}: never ran (a worker stopped early)"
		sed 's/^/    | /' "$Q"/worker.* | tail -n 20
		SUMMARY+=("${JOBS[$n]}: never ran")
		FAILS+=("${JOBS[$n]}: never ran")
		TOTAL_FAIL=$((TOTAL_FAIL + 1))
		continue
	fi
	cat "$Q/out.$n"
	read -r p f s <"$Q/res.$n"
	TOTAL_PASS=$((TOTAL_PASS + p))
	TOTAL_FAIL=$((TOTAL_FAIL + f))
	TOTAL_SKIP=$((TOTAL_SKIP + s))
	[ -f "$Q/sum.$n" ] && SUMMARY+=("$(cat "$Q/sum.$n")")
	[ -f "$Q/fail.$n" ] && FAILS+=("$(cat "$Q/fail.$n")")
done

echo
echo "== summary"
for line in "${SUMMARY[@]}"; do
	echo "  $line"
done
if [ "${#FAILS[@]}" != 0 ]; then
	echo "== failed (the first lines of each; the whole output is above)"
	for line in "${FAILS[@]}"; do
		echo "  $line"
	done
fi
[ "$TOTAL_SKIP" = 0 ] || echo "$TOTAL_SKIP skipped (not counted as passed; see the # skip lines)"
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_FAIL" = 0 ]
