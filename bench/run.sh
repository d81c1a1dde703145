#!/bin/bash
# bench/run.sh - entry point of `make bench`: the seed workloads on local
# disk and on Cairn, side by side (the driver is bench/bench.py).
#
#   bench/run.sh [BUILD]          BUILD defaults to $BUILD, then build/
#   BENCH=stat,search bench/run.sh    a subset
#   BENCH_TINY=1 bench/run.sh         every count shrunk, < 60 s
#   BENCH_OUT=DIR                     results elsewhere than bench/results
#
# The driver cleans up after itself; this wrapper is the backstop when the
# driver itself dies: on any exit it unmounts whatever the driver recorded
# (or anything still mounted under the scratch directory) and stops the
# processes it recorded, checking each is still a cairn process first.

set -u
cd "$(dirname "$0")/.." || exit 1

BUILD=${1:-${BUILD:-build}}
export BUILD
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in bench/

# The C tools (bench/tools, linked with libnetcdf) are not part of
# `make all`; build them here if they are missing.
if [ ! -x "$BUILD/tools/statloop" ] || [ ! -x "$BUILD/tools/ncwrite" ]; then
	make --no-print-directory BUILD="$BUILD" bench-tools >&2 || exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/cairn-bench.XXXXXX") || exit 1
export BENCH_WORK=$WORK
PY=

cleanup() {
	local mp pid
	trap - EXIT INT TERM HUP
	# The driver cleans up on TERM; if it is stuck (say in a call on a
	# mount whose server died) it gets 30 s, then KILL (which takes effect
	# once a FUSE request it waits in is answered, at the latest when the
	# client gives up on the server).
	if [ -n "$PY" ] && kill -0 "$PY" 2>/dev/null; then
		kill -TERM "$PY" 2>/dev/null
		for _ in $(seq 60); do
			kill -0 "$PY" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$PY" 2>/dev/null
		wait "$PY" 2>/dev/null
	fi
	# Mounts the driver recorded, then anything else under $WORK.
	{
		[ -f "$WORK/mounts" ] && cat "$WORK/mounts"
		awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts
	} | sort -u | while read -r mp; do
		[ -n "$mp" ] || continue
		if grep -q " $mp " /proc/mounts; then
			fusermount3 -u -z "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null
		fi
	done
	if [ -f "$WORK/pids" ]; then
		while read -r pid; do
			[ -n "$pid" ] || continue
			if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q cairn; then
				kill -TERM "$pid" 2>/dev/null
				sleep 1
				kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
			fi
		done <"$WORK/pids"
	fi
	rm -rf "$WORK"
}

on_signal() {
	echo "bench/run.sh: interrupted" >&2
	cleanup
	exit 130
}

trap cleanup EXIT
trap on_signal INT TERM HUP

# In the background so a TERM to this script is handled at once (bash defers
# traps while a foreground child runs) and forwarded to the driver.
python3 bench/bench.py &
PY=$!
wait "$PY"
rc=$?
PY=
exit $rc
