#!/usr/bin/env python3
# timeout: 240
"""test_cache.py - the persistent chunk cache (--cache-dir, --cache-size;
client/ccache.h) with a real server and real mounts.

What is checked, by what the server counts (`cairn status HOST:PORT`,
op.read.calls and op.read.bytes_out) and by the bytes read back:
  - a file read once is read again after a remount, or after the server
    restarted, without one READ reaching the server;
  - a file larger than a tiny --cache-size reads back right, and the cache
    directory stays under the limit;
  - a change made on another client, while this one is mounted or while it
    is not, is read, never the cached old version;
  - a cache damaged while unmounted (a truncated chunk, a flipped byte, a
    deleted or truncated index) serves the right data, and says in its log
    what it discarded or rebuilt;
  - a client killed with SIGKILL in the middle of a read leaves a cache the
    next mount recovers and reads right from.
"""

import os
import re
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import write_file, read_file  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

MiB = 1 << 20


def server_reads(srv):
    """(READ calls, READ reply bytes) the server has served so far."""
    p = H.run_cairn(["status", srv.addr])
    expect_eq(p.returncode, 0, "cairn status %s exit status" % srv.addr)
    vals = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(" ")
        vals[k] = v
    try:
        return int(vals.get("op.read.calls", 0)), int(vals.get("op.read.bytes_out", 0))
    except ValueError:
        fail("cairn status: unexpected op.read lines: %r" % p.stdout[-500:])


def mount_cache(m):
    """The cache.* counters of a mount (`cairn status MOUNTPOINT`)."""
    p = H.run_cairn(["status", m.path])
    expect_eq(p.returncode, 0, "cairn status %s exit status" % m.path)
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k.startswith("cache."):
            out[k] = int(v) if v.isdigit() else v
    return out


def read_big(path, bufsize=MiB):
    """Read a file front to back in bufsize pieces (readahead does the
    rest) and return its bytes."""
    out = bytearray()
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, bufsize)
            if not b:
                break
            out += b
    finally:
        os.close(fd)
    return bytes(out)


def remount(m, extra=()):
    m.umount()
    expect(not H.is_mounted(m.path), "%s still mounted after umount" % m.path)
    m.mount(extra=extra)


def chunk_files(cache):
    """Paths of the chunk files in a cache directory."""
    root = os.path.join(cache, "chunks")
    out = []
    for d in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if len(d) == 2:
            sub = os.path.join(root, d)
            out += [os.path.join(sub, f) for f in sorted(os.listdir(sub))]
    return out


def log_text(m):
    try:
        with open(m.daemon_log, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def same(got, want, what):
    if got != want:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                     min(len(got), len(want)))
        fail("%s: %d bytes read, %d expected, first difference at byte %d"
             % (what, len(got), len(want), first))


@test
def written_data_read_back_fetches_nothing(ctx):
    """What a client writes goes to its disk cache too: read back after a
    remount (and a chmod and utime, which move the data version but not
    the data), it costs no READ and no byte from the server."""
    srv = ctx.server()
    m = ctx.mount(srv, "a")
    data = os.urandom(5 * MiB + 777)
    small = os.urandom(3000)
    write_file(m.p("big"), data)
    with open(m.p("small"), "wb") as f:     # a file written in pieces
        for i in range(0, len(small), 1000):
            f.write(small[i:i + 1000])
    os.chmod(m.p("small"), 0o600)
    os.utime(m.p("big"), ns=(1, 2))
    c0, b0 = server_reads(srv)
    remount(m)
    same(read_big(m.p("big")), data, "big file read back after remount")
    same(read_file(m.p("small")), small, "small file read back after remount")
    c1, b1 = server_reads(srv)
    # The only READs allowed are relatime's atime updates (0 bytes of
    # data, sent because the first read after a write owes an atime).
    print("# read back %d bytes written here: %d READs, %d reply bytes"
          % (len(data) + len(small), c1 - c0, b1 - b0))
    expect(b1 - b0 < 1000 * max(1, c1 - c0) and c1 - c0 <= 2,
           "data fetched for what this client wrote: %d READs, %d bytes"
           % (c1 - c0, b1 - b0))
    cs = mount_cache(m)
    expect_eq(cs.get("cache.fetched_bytes"), 0, "cache.fetched_bytes")
    expect(cs.get("cache.hit_bytes", 0) >= len(data) + len(small),
           "cache.hit_bytes %s" % cs.get("cache.hit_bytes"))


@test
def reread_after_remount_fetches_nothing(ctx):
    srv = ctx.server()
    m = ctx.mount(srv, "a")
    w = ctx.mount(srv, "w")   # the writer: m fetches what it reads
    data = os.urandom(20 * MiB)
    small = os.urandom(3000)
    write_file(w.p("big"), data)
    write_file(w.p("small"), small)
    same(read_big(m.p("big")), data, "first read after remount")
    same(read_file(m.p("small")), small, "small file, first read")
    c0, b0 = server_reads(srv)
    expect(c0 > 0, "the first read reached the server (%d READs)" % c0)
    remount(m)
    same(read_big(m.p("big")), data, "re-read after remount")
    same(read_file(m.p("small")), small, "small file, re-read")
    c1, b1 = server_reads(srv)
    print("# 20 MiB + 3000 bytes: first read %d READs, %d bytes; re-read after "
          "remount %d READs, %d bytes" % (c0, b0, c1 - c0, b1 - b0))
    expect_eq(c1 - c0, 0, "READ calls for the re-read after remount")
    expect_eq(b1 - b0, 0, "READ bytes for the re-read after remount")
    cs = mount_cache(m)
    expect_eq(cs.get("cache.fetched_bytes"), 0, "cache.fetched_bytes of the re-read")
    expect(cs.get("cache.hit_bytes", 0) >= len(data) + len(small),
           "cache.hit_bytes %s for a %d-byte re-read" % (cs.get("cache.hit_bytes"),
                                                       len(data) + len(small)))
    # And again: the cache survives more than one remount.
    remount(m)
    same(read_big(m.p("big")), data, "second re-read after remount")
    expect_eq(server_reads(srv)[0] - c1, 0, "READ calls for the second re-read")


@test
def cold_reads_in_small_pieces_fetch_each_chunk_once(ctx):
    """The kernel's READs do not follow the cache's 1 MiB chunks (cat reads
    128 KiB at a time, readahead windows start anywhere): two READs in
    flight often need the same chunk. Each chunk still crosses the network
    once: read in 128 KiB and 4 KiB pieces, and by two readers at once,
    a file costs about its size in READ bytes (it cost twice that)."""
    srv = ctx.server()
    m = ctx.mount(srv, "a")
    w = ctx.mount(srv, "w")   # the writer: m fetches what it reads
    size = 24 * MiB           # above the 8 MiB read whole at open
    files = {n: os.urandom(size) for n in ("f128k", "f4k", "ftwo")}
    for n, d in files.items():
        write_file(w.p(n), d)
    slack = 2 * MiB           # reads under 128 KiB fetch only their bytes

    def fetched(what, fn):
        c0, b0 = server_reads(srv)
        fn()
        c1, b1 = server_reads(srv)
        print("# %s: %d READs, %d bytes for %d" % (what, c1 - c0, b1 - b0, size))
        expect(b1 - b0 <= size + slack,
               "%s fetched %d bytes for a %d-byte file (%d READs)"
               % (what, b1 - b0, size, c1 - c0))

    fetched("128 KiB reads", lambda: same(read_big(m.p("f128k"), 128 * 1024),
                                          files["f128k"], "read in 128 KiB pieces"))
    fetched("4 KiB reads", lambda: same(read_big(m.p("f4k"), 4096),
                                        files["f4k"], "read in 4 KiB pieces"))
    got, errs = [None, None], []

    def reader(i):
        try:
            got[i] = read_big(m.p("ftwo"), 128 * 1024)
        except OSError as e:
            errs.append(e)

    def two():
        ts = [threading.Thread(target=reader, args=(i,)) for i in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        expect(not errs, "a reader failed: %s" % (errs[:1],))
        for i in (0, 1):
            same(got[i] or b"", files["ftwo"], "reader %d of two at once" % i)
    fetched("two readers at once", two)


def drop_page_cache(path):
    """Drop this file's pages from the kernel's page cache (not the whole
    machine's: other work on the host keeps its caches)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@test
def server_restart_revalidates_without_refetch(ctx):
    srv = ctx.server()
    m = ctx.mount(srv, "a")
    data = os.urandom(6 * MiB + 777)
    write_file(m.p("f"), data)
    remount(m)
    same(read_big(m.p("f")), data, "first read")
    expect_eq(srv.stop(), 0, "exit status of cairn serve after SIGTERM")
    srv.start()         # same port, same data: every promise is gone
    end = time.time() + 30
    while time.time() < end:
        st = H.run_cairn(["status", m.path]).stdout
        if re.search(r"^rpc\.reconnects [1-9]", st, re.M) and \
                re.search(r"^rpc\.connected 1$", st, re.M):
            break
        os.stat(m.path)  # a call makes the client notice and reconnect
        time.sleep(0.05)
    else:
        fail("the mount did not reconnect within 30 s")
    drop_page_cache(m.p("f"))
    same(read_big(m.p("f")), data, "re-read after the server restarted")
    calls, nbytes = server_reads(srv)   # the restarted server's counts
    expect_eq((calls, nbytes), (0, 0),
              "READ calls and bytes after the server restarted")


@test
def tiny_cache_evicts_and_reads_right(ctx):
    srv = ctx.server()
    m = ctx.mount(srv, "a", extra=["--cache-size", "4M"])
    data = os.urandom(20 * MiB)
    write_file(m.p("big"), data)
    for i in range(2):
        remount(m, extra=["--cache-size", "4M"])
        same(read_big(m.p("big")), data, "read #%d through a 4 MiB cache" % (i + 1))
        # pread at scattered offsets, some cached, most not
        fd = os.open(m.p("big"), os.O_RDONLY)
        try:
            for off in (0, 5 * MiB - 7, 19 * MiB + 12345, 3 * MiB, 17 * MiB):
                same(os.pread(fd, 70000, off), data[off:off + 70000],
                     "pread at %d" % off)
        finally:
            os.close(fd)
        # A chunk is stored before the ones it evicts are unlinked, and
        # read-ahead may still be filling: the bound holds once that
        # settles.
        end = time.time() + 5
        while True:
            used = sum(os.path.getsize(p) for p in chunk_files(m.cache))
            if used <= 4 * MiB or time.time() > end:
                break
            time.sleep(0.05)
        expect(used <= 4 * MiB, "cache holds %d bytes of chunks, limit 4 MiB" % used)
        expect(len(chunk_files(m.cache)) >= 2,
               "a 4 MiB cache holds some chunks (%d)" % len(chunk_files(m.cache)))
        cs = mount_cache(m)
        expect(cs["cache.used_bytes"] <= cs["cache.limit_bytes"] == 4 * MiB,
               "cache.used_bytes %d, limit %d" % (cs["cache.used_bytes"],
                                                  cs["cache.limit_bytes"]))
        expect(cs["cache.evictions"] > 0, "a 20 MiB read through 4 MiB evicts")
    # --cache-size 0: no disk cache at all, reads still right
    remount(m, extra=["--cache-size", "0"])
    same(read_big(m.p("big")), data, "read with --cache-size 0")
    expect_eq(mount_cache(m), {"cache.enabled": 0}, "cache keys with --cache-size 0")


@test
def change_on_other_client_is_read_not_cached_copy(ctx):
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    b = ctx.mount(srv, "b")
    v1 = os.urandom(5 * MiB + 100)
    write_file(a.p("f"), v1)
    same(read_big(b.p("f")), v1, "B reads version 1")
    remount(b)
    same(read_big(b.p("f")), v1, "B re-reads version 1 from its cache")
    # B mounted, holding the file's chunks: A overwrites in place, same size.
    v2 = bytearray(v1)
    fd = os.open(a.p("f"), os.O_WRONLY)
    try:
        for off in (0, MiB + 5, 4 * MiB):
            os.pwrite(fd, b"VERSION2" * 8, off)
            v2[off:off + 64] = b"VERSION2" * 8
    finally:
        os.close(fd)
    same(read_big(b.p("f")), bytes(v2), "B after A changed the file in place")
    # B unmounted while A rewrites the file: B's cache still has version 2.
    b.umount()
    v3 = os.urandom(5 * MiB + 100)
    write_file(a.p("f"), v3)
    b.mount()
    same(read_big(b.p("f")), v3, "B remounted after A rewrote the file")
    # Same size, same second, unmounted: the data version tells.
    b.umount()
    v4 = bytes(x ^ 0x55 for x in v3[:4096]) + v3[4096:]
    fd = os.open(a.p("f"), os.O_WRONLY)
    os.pwrite(fd, v4[:4096], 0)
    os.close(fd)
    b.mount()
    same(read_big(b.p("f")), v4, "B remounted after a same-size change")


@test
def damaged_cache_serves_right_data(ctx):
    srv = ctx.server()
    m = ctx.mount(srv, "a")
    w = ctx.mount(srv, "w")   # the writer: m's chunks are fetched ones
    data = os.urandom(8 * MiB)
    write_file(w.p("f"), data)
    same(read_big(m.p("f")), data, "first read")
    m.umount()
    files = chunk_files(m.cache)
    expect(len(files) >= 8, "8 chunks cached (found %d)" % len(files))
    # one chunk truncated, one with a flipped data byte, one with a
    # flipped header byte, one deleted
    os.truncate(files[0], os.path.getsize(files[0]) - 5000)
    for path, off in ((files[1], os.path.getsize(files[1]) - 77), (files[2], 20)):
        with open(path, "r+b") as f:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x01]))
    os.unlink(files[3])
    c0 = server_reads(srv)[0]
    m.mount()
    same(read_big(m.p("f")), data, "read from a damaged cache")
    c1 = server_reads(srv)[0]
    # 4 damaged chunks of 8; aligned 1 MiB reads fetch each once (slack
    # for a readahead window that straddles two chunks)
    print("# damaged cache: %d READs to read 8 chunks, 4 of them damaged" % (c1 - c0))
    expect(4 <= c1 - c0 <= 6, "the damaged chunks fetched again: %d READs" % (c1 - c0))
    text = log_text(m)
    for why in ("wrong size", "data checksum mismatch", "header checksum mismatch",
                "file missing"):
        expect(why in text, "daemon log names the damage %r" % why)
    # deleted index: rebuilt from the chunk files
    m.umount()
    shutil.rmtree(os.path.join(m.cache, "chunks", "index"))
    m.mount()
    same(read_big(m.p("f")), data, "read after the index was deleted")
    expect("index rebuilt" in log_text(m), "daemon log says the index was rebuilt")
    expect_eq(server_reads(srv)[0] - c1, 0, "READs after the index was rebuilt")
    # truncated index
    m.umount()
    idx = os.path.join(m.cache, "chunks", "index", "data.mdb")
    os.truncate(idx, os.path.getsize(idx) // 2)
    m.mount()
    same(read_big(m.p("f")), data, "read after the index was truncated")


@test
def killed_during_fetch_recovers(ctx):
    srv = ctx.server()
    m = ctx.mount(srv, "a")
    data = os.urandom(24 * MiB)
    write_file(m.p("f"), data)
    remount(m)
    got = {"n": 0, "err": None}

    def reader():
        try:
            fd = os.open(m.p("f"), os.O_RDONLY)
            try:
                while True:
                    b = os.read(fd, 256 * 1024)
                    if not b:
                        break
                    got["n"] += len(b)
            finally:
                os.close(fd)
        except OSError as e:
            got["err"] = e

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    end = time.time() + 30
    while got["n"] < 4 * MiB and t.is_alive() and time.time() < end:
        time.sleep(0.001)
    expect(m.pid is not None, "daemon pid known")
    os.kill(m.pid, signal.SIGKILL)
    t.join(30)
    print("# killed after %d bytes were read (reader: %s)" % (got["n"], got["err"]))
    m.umount()          # the mount of a dead daemon: lazy unmount
    expect(not H.is_mounted(m.path), "unmounted after the kill")
    m.mount()
    same(read_big(m.p("f")), data, "read after the client was killed mid-fetch")
    text = log_text(m)
    expect("unclean shutdown" in text or "index rebuilt" in text,
           "daemon log says it recovered the cache")
    c0 = server_reads(srv)[0]
    remount(m)
    same(read_big(m.p("f")), data, "re-read after a clean remount")
    expect_eq(server_reads(srv)[0] - c0, 0, "READs for the re-read after recovery")


if __name__ == "__main__":
    H.main()
