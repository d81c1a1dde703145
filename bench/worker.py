#!/usr/bin/env python3
"""worker.py - the file operations of the benchmark that run on a mount.

bench.py runs each of these in a child process with a timeout
(`worker.py OP ARGS...`, prints one JSON object), so a call that hangs on
a broken mount costs that phase a timeout, never the whole run.
"""

import json
import os
import sys
import time

MiB = 1 << 20


def w_mkfile(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * int(size))
    return {}


def w_mkheaders(root, ndirs, n):
    ndirs, n = int(ndirs), int(n)
    for i in range(ndirs):
        os.makedirs(os.path.join(root, "inc%d" % i), exist_ok=True)
    for i in range(n):
        with open(os.path.join(root, "inc%d" % (i % ndirs), "hdr%04d.h" % i), "w") as f:
            f.write("#define HDR%04d 1\n" % i)
    return {}


def w_write(path, mib):
    buf = os.urandom(MiB)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(int(mib)):
        if os.write(fd, buf) != MiB:
            raise OSError(5, "short write", path)
    os.close(fd)
    return {"secs": time.perf_counter() - t0}


def w_read(path, bufsize=MiB):
    buf = bytearray(int(bufsize))
    total = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
    return {"secs": time.perf_counter() - t0, "bytes": total}


def w_mkextents(path, n, dense):
    """n 4 KiB blocks at blocks 1, 3, 5, ... (a hole before each), or for
    `dense` the same 2n blocks written solid; fsync'd so the extents exist."""
    n, dense = int(n), int(dense)
    blk = b"e" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if dense:
        os.write(fd, blk * (2 * n))
    else:
        for i in range(n):
            os.pwrite(fd, blk, (2 * i + 1) * 4096)
    os.fsync(fd)
    os.close(fd)
    return {}


def w_append(path, mib):
    buf = os.urandom(MiB)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    for _ in range(int(mib)):
        os.write(fd, buf)
    os.close(fd)
    return {"secs": time.perf_counter() - t0}


def w_coherence(a, b, rounds, limit):
    """Same-size overwrites on A; after each close, B re-opens and reads
    until it sees the new bytes. B first caches the old content."""
    size = 4096
    rounds, limit = int(rounds), float(limit)

    def read_b():
        with open(b, "rb") as f:
            return f.read()

    def wait_for(content):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < limit:
            try:
                if read_b() == content:
                    return time.perf_counter() - t0
            except FileNotFoundError:
                pass
            time.sleep(0.0005)
        return None
    with open(a, "wb") as f:
        f.write(b"@" * size)
    if wait_for(b"@" * size) is None:
        raise OSError(2, "B never saw the file", b)
    lat = []
    for r in range(rounds):
        content = bytes([ord("A") + r]) * size
        read_b()                            # B holds the old version
        fd = os.open(a, os.O_WRONLY)
        os.pwrite(fd, content, 0)
        os.close(fd)
        lat.append(wait_for(content))
        time.sleep(0.2)
    return {"latencies": lat}


def w_lockpairs(path, n):
    """n uncontended fcntl write lock + unlock pairs on one open file."""
    import fcntl
    n = int(n)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0)
            fcntl.lockf(fd, fcntl.LOCK_UN, 0, 0)
        ns = time.perf_counter_ns() - t0
    finally:
        os.close(fd)
    return {"ns": ns, "n": n}


def w_sqlite(db, n, start_at):
    """n write transactions (BEGIN IMMEDIATE; add 1; COMMIT) on db,
    starting at time start_at (so that two workers contend)."""
    import sqlite3
    n = int(n)
    c = sqlite3.connect(db, timeout=60, isolation_level=None)
    while time.time() < float(start_at):
        time.sleep(0.001)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        c.execute("BEGIN IMMEDIATE")
        c.execute("UPDATE t SET n = n + 1")
        c.execute("COMMIT")
    ns = time.perf_counter_ns() - t0
    c.close()
    return {"ns": ns, "n": n}


def w_sqlite_init(db):
    import sqlite3
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
    c.execute("DELETE FROM t")
    c.execute("INSERT INTO t VALUES (0)")
    c.close()
    return {}


def w_sqlite_check(db):
    import sqlite3
    c = sqlite3.connect(db, isolation_level=None)
    n = c.execute("SELECT n FROM t").fetchone()[0]
    ok = c.execute("PRAGMA integrity_check").fetchone()[0]
    c.close()
    return {"n": n, "integrity": ok}


def w_mkdir(path):
    os.makedirs(path, exist_ok=True)
    return {}


def w_unlink(path):
    os.unlink(path)
    return {}


WORKER_OPS = {
    "mkdir": w_mkdir, "unlink": w_unlink, "mkfile": w_mkfile,
    "mkheaders": w_mkheaders, "write": w_write, "read": w_read,
    "mkextents": w_mkextents, "append": w_append, "coherence": w_coherence,
    "lockpairs": w_lockpairs, "sqlite": w_sqlite,
    "sqlite_init": w_sqlite_init, "sqlite_check": w_sqlite_check,
}


def main(argv):
    try:
        out = WORKER_OPS[argv[0]](*argv[1:])
    except OSError as e:
        print("%s: %s" % (e.filename or argv[0], e.strerror), file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
