#!/bin/bash
# scripts/pjdfstest.sh SRC [BUILD] - run pjdfstest (the POSIX conformance
# suite, https://github.com/pjd/pjdfstest; not packaged by Debian, so pass
# a checkout of it as SRC) on a fresh Cairn server and mount built in BUILD
# (default: build). Compiles pjdfstest.c without autotools, runs
# `prove -r SRC/tests` inside the mount as root, prints prove's summary and
# exits with its status. Not part of make check (it takes a few minutes).
set -u
SRC=${1:?usage: scripts/pjdfstest.sh PJDFSTEST_SRC [BUILD]}
B=$(cd "${2:-build}" && pwd) || exit 2
[ -f "$SRC/pjdfstest.c" ] || { echo "no pjdfstest.c in $SRC" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "pjdfstest needs root" >&2; exit 2; }
command -v prove >/dev/null || { echo "prove (perl) is missing" >&2; exit 2; }

T=$(mktemp -d /tmp/cairn-pjd.XXXXXX) || exit 1
SP=
cleanup() {
	mountpoint -q "$T/mnt" && umount "$T/mnt"
	[ -n "$SP" ] && kill "$SP" 2>/dev/null && wait "$SP"
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/bin" "$T/data" "$T/mnt" "$T/cache"

# The configure results for Linux with glibc.
cat >"$T/bin/config.h" <<'H'
#define _GNU_SOURCE 1
#define HAVE_SYS_SYSMACROS_H 1
#define HAVE_OPENAT 1
#define HAVE_UNLINKAT 1
#define HAVE_MKDIRAT 1
#define HAVE_LINKAT 1
#define HAVE_SYMLINKAT 1
#define HAVE_RENAMEAT 1
#define HAVE_MKFIFOAT 1
#define HAVE_MKNODAT 1
#define HAVE_FCHMODAT 1
#define HAVE_FCHOWNAT 1
#define HAVE_FSTATAT 1
#define HAVE_READLINKAT 1
#define HAVE_POSIX_FALLOCATE 1
#define HAVE_UTIMENSAT 1
#define HAVE_STRUCT_STAT_ST_ATIM 1
#define HAVE_STRUCT_STAT_ST_MTIM 1
#define HAVE_STRUCT_STAT_ST_CTIM 1
H
cc -O1 -w -I"$T/bin" -o "$SRC/pjdfstest" "$SRC/pjdfstest.c" || exit 1

# pjdfstest checks root's rights too: no root squash.
"$B/cairn" serve --data "$T/data" --listen 127.0.0.1:0 --no-root-squash \
	>"$T/serve.log" 2>&1 &
SP=$!
for _ in $(seq 100); do
	grep -q "listening on" "$T/serve.log" && break
	sleep 0.1
done
PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log" | head -1)
[ -n "$PORT" ] || { cat "$T/serve.log" >&2; exit 1; }
"$B/cairn" mount --key "$T/data/cell.key" --cache-dir "$T/cache" \
	"127.0.0.1:$PORT" "$T/mnt" || exit 1
mkdir "$T/mnt/w"
(cd "$T/mnt/w" && prove -r "$SRC/tests") >"$T/prove.log" 2>&1
rc=$?
grep -v '\.\. ok$' "$T/prove.log" | tail -40
exit $rc
