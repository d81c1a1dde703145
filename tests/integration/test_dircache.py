#!/usr/bin/env python3
# timeout: 300
"""test_dircache.py - directories cached whole in the client (BULKSTAT,
client/dircache.h), with a real server and two mounts A and B.

- A name that got ENOENT on A (a negative entry the kernel caches) and
  is then created on B is visible on A as soon as B's create returns.
- A listing on A after B creates, removes and renames entries (within a
  directory and across two) is exact, names and attributes.
- Cold lookups cost about one round trip per directory: after a fresh
  mount, statting 200 missing and 100 present names in a 100-entry
  directory takes at most a few server calls (counted with the server's
  op.<name>.calls), and a listing after that at most one more.
- Our own creates, unlinks and renames in a cached directory edit the
  cached listing (no new BULKSTAT or LOOKUP for later lookups in it).
- Lookup counts balance: a 2,000-entry directory listed on a third mount
  while B creates and removes entries in it; after the kernel has dropped
  its caches, the daemon's inode table holds the root alone at unmount.
"""

import errno
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import proto_client as P  # noqa: E402
from harness import test, expect, expect_eq, fail, write_file  # noqa: E402


def setup(ctx):
    ctx.srv = ctx.server()
    ctx.A = ctx.mount(ctx.srv, "a")
    ctx.B = ctx.mount(ctx.srv, "b")
    ctx.n = 0


def fresh(ctx, tag):
    ctx.n += 1
    rel = "%02d-%s" % (ctx.n, tag)
    os.mkdir(ctx.A.p(rel))
    return rel


def calls(ctx):
    """op.<name>.calls of the server, by name (STATUS itself, HELLO and the
    PINGs that keep idle clients' promises excluded)."""
    c = P.Conn("127.0.0.1", ctx.srv.port)
    try:
        c.hello()
        st = c.status()
    finally:
        c.close()
    out = {}
    for k, v in st.items():
        if k.startswith("op.") and k.endswith(".calls") and isinstance(v, int):
            name = k[3:-6]
            if name not in ("status", "hello", "ping"):  # PING: leases
                out[name] = v
    return out


def delta(before, after):
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return {k: v for k, v in d.items() if v}


def exists(path):
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


def listing(path):
    """{name: (size, mode, ino)} of a directory, through readdir and stat."""
    out = {}
    with os.scandir(path) as it:
        for e in it:
            st = e.stat(follow_symlinks=False)
            out[e.name] = (st.st_size, st.st_mode, st.st_ino)
    return out


@test
def created_on_b_after_enoent_on_a(ctx):
    d = fresh(ctx, "neg")
    names = ["n%02d" % i for i in range(40)]
    for n in names:
        expect(not exists(ctx.A.p(d, n)), "%s exists before it was made" % n)
    # Cached now: the kernel holds negative entries, the daemon a listing.
    for n in names:
        expect(not exists(ctx.A.p(d, n)), "%s exists on the second look" % n)
    made = names[::4]
    for n in made:
        write_file(ctx.B.p(d, n), n.encode())
        # Visible right after B's create returned: B's create waited for
        # A's acknowledgement of the break.
        expect(exists(ctx.A.p(d, n)), "%s created on B is not visible on A "
               "right after the create returned" % n)
    seen = sorted(n for n in names if exists(ctx.A.p(d, n)))
    expect_eq(seen, sorted(made), "names visible on A")
    with open(ctx.A.p(d, made[1]), "rb") as f:
        expect_eq(f.read(), made[1].encode(), "content of a name made on B")
    # mkdir and symlink too.
    os.mkdir(ctx.B.p(d, "n01"))
    expect(os.path.isdir(ctx.A.p(d, "n01")), "directory made on B not on A")
    os.symlink("n00", ctx.B.p(d, "n02"))
    expect_eq(os.readlink(ctx.A.p(d, "n02")), "n00", "symlink made on B")


@test
def listing_exact_after_changes_on_b(ctx):
    d = fresh(ctx, "ls")
    e = fresh(ctx, "ls2")
    for i in range(30):
        write_file(ctx.B.p(d, "f%02d" % i), b"x" * i)
    expect_eq(listing(ctx.A.p(d)), listing(ctx.B.p(d)), "first listing")
    expect_eq(listing(ctx.A.p(e)), {}, "empty directory")
    steps = [
        ("create", lambda: write_file(ctx.B.p(d, "new"), b"abc")),
        ("unlink", lambda: os.unlink(ctx.B.p(d, "f03"))),
        ("rename within", lambda: os.rename(ctx.B.p(d, "f04"), ctx.B.p(d, "r04"))),
        ("rename over", lambda: os.rename(ctx.B.p(d, "f05"), ctx.B.p(d, "f06"))),
        ("rename across", lambda: os.rename(ctx.B.p(d, "f07"), ctx.B.p(e, "f07"))),
        ("rename back", lambda: os.rename(ctx.B.p(e, "f07"), ctx.B.p(d, "g07"))),
        ("write", lambda: write_file(ctx.B.p(d, "f08"), b"y" * 1000)),
        ("chmod", lambda: os.chmod(ctx.B.p(d, "f09"), 0o600)),
        ("mkdir", lambda: os.mkdir(ctx.B.p(d, "sub"))),
        ("rmdir", lambda: os.rmdir(ctx.B.p(d, "sub"))),
        ("link", lambda: os.link(ctx.B.p(d, "f10"), ctx.B.p(e, "l10"))),
    ]
    for what, fn in steps:
        fn()
        for sub in (d, e):
            got, want = listing(ctx.A.p(sub)), listing(ctx.B.p(sub))
            if got != want:
                diff = sorted(set(got.items()) ^ set(want.items()))
                fail("after %s on B, A's listing of %s differs: %s"
                     % (what, sub, diff[:6]))
    expect_eq(os.stat(ctx.A.p(d, "f10")).st_nlink, 2, "nlink after a link on B")


@test
def cold_lookups_one_round_trip_per_directory(ctx):
    d = fresh(ctx, "cold")
    for i in range(100):
        write_file(ctx.A.p(d, "p%03d" % i), b"")
    H.wb_idle(ctx.A)                   # A's tokens back: not counted below
    m = ctx.mount(ctx.srv, "cold")     # a mount that has seen nothing
    try:
        c0 = calls(ctx)
        for i in range(200):
            expect(not exists(m.p(d, "missing%03d" % i)), "missing name exists")
        for i in range(100):
            expect(exists(m.p(d, "p%03d" % i)), "present name missing")
        c1 = calls(ctx)
        names = sorted(os.listdir(m.p(d)))
        c2 = calls(ctx)
        print("# 300 cold lookups in a 100-entry directory: %s; a listing "
              "after them: %s" % (delta(c0, c1), delta(c1, c2)))
        expect(sum(delta(c0, c1).values()) <= 3,
               "300 cold lookups in two directories took %s server calls"
               % delta(c0, c1))
        expect_eq(len(names), 100, "entries listed")
        expect(sum(delta(c1, c2).values()) <= 1,
               "a listing of a cached directory took %s" % delta(c1, c2))
        st = os.stat(m.p(d, "p007"))
        expect_eq(st.st_size, 0, "size from the cache")
    finally:
        m.umount()


@test
def own_changes_edit_the_cached_listing(ctx):
    d = fresh(ctx, "hero")
    for i in range(10):
        write_file(ctx.A.p(d, "h%d" % i), b"")
    expect(not exists(ctx.A.p(d, "none")), "a name that was never made")
    c0 = calls(ctx)
    write_file(ctx.A.p(d, "made"), b"1")
    os.unlink(ctx.A.p(d, "h1"))
    os.rename(ctx.A.p(d, "h2"), ctx.A.p(d, "h2b"))
    os.rename(ctx.A.p(d, "h3"), ctx.A.p(d, "h4"))
    os.mkdir(ctx.A.p(d, "dd"))
    os.symlink("made", ctx.A.p(d, "sl"))
    for n in ["x%d" % i for i in range(20)] + ["h1", "h2", "h3"]:
        expect(not exists(ctx.A.p(d, n)), "%s exists" % n)
    c1 = calls(ctx)
    dl = delta(c0, c1)
    print("# own changes, then 23 lookups of missing names: %s" % dl)
    expect(not dl.get("bulkstat") and not dl.get("lookup"),
           "lookups after our own changes went to the server: %s" % dl)
    want = sorted(["h0", "h2b", "h4", "h5", "h6", "h7", "h8", "h9", "made",
                   "dd", "sl"])
    expect_eq(sorted(os.listdir(ctx.A.p(d))), want, "listing on A")
    expect_eq(sorted(os.listdir(ctx.B.p(d))), want, "listing on B")


@test
def renames_on_the_server_keep_the_directory_current(ctx):
    """A rename that goes to the server (the files are there already:
    B listed them) makes the server break A's promise on the moved file,
    whose attributes the reply lacks. That break is no reason to take the
    directory's attributes in the same reply for out of date: the next
    rename's permission check on the directory costs no GETATTR (one
    each before). B then lists the new names."""
    d = fresh(ctx, "mv")
    for i in range(20):
        write_file(ctx.A.p(d, "f%02d" % i), b"%d" % i)
    expect_eq(sorted(os.listdir(ctx.B.p(d))),
              ["f%02d" % i for i in range(20)], "listing on B")
    c0 = calls(ctx)
    for i in range(20):
        os.rename(ctx.A.p(d, "f%02d" % i), ctx.A.p(d, "g%02d" % i))
    c1 = calls(ctx)
    dl = delta(c0, c1)
    print("# 20 renames: %s" % dl)
    expect_eq(dl.get("rename", 0), 20, "RENAMEs")
    # 19 before (one for each rename after the first); a break about
    # something else while one is on its way may still cost one.
    expect(dl.get("getattr", 0) <= 2, "GETATTRs with the renames: %s" % dl)
    expect_eq(sorted(os.listdir(ctx.B.p(d))),
              ["g%02d" % i for i in range(20)], "listing on B")
    for i in (0, 7, 19):
        with open(ctx.B.p(d, "g%02d" % i), "rb") as f:
            expect_eq(f.read(), b"%d" % i, "g%02d on B" % i)


@test
def replaced_file_costs_no_setattr(ctx):
    """rename() over an existing file (an editor's save, git's
    index.lock): the kernel then writes back the replaced file's ctime
    (a SETATTR), as after an unlink. That file has no name left: it is
    answered here, as for an unlink (one SETATTR a rename before: the
    replaced file's; the moved file's ctime still goes, from the
    journal). B reads the new contents."""
    d = fresh(ctx, "over")
    for i in range(20):
        write_file(ctx.A.p(d, "f%02d" % i), b"old %d" % i)
    expect_eq(len(os.listdir(ctx.B.p(d))), 20, "files on B")
    c0 = calls(ctx)
    for i in range(20):
        tmp = ctx.A.p(d, "t%02d.tmp" % i)
        write_file(tmp, b"new %d" % i)
        os.rename(tmp, ctx.A.p(d, "f%02d" % i))
    got = sorted(os.listdir(ctx.B.p(d)))
    c1 = calls(ctx)
    dl = delta(c0, c1)
    print("# 20 renames over existing files: %s" % dl)
    expect_eq(dl.get("rename", 0), 20, "RENAMEs")
    # 40 before: the replaced file's and, from the journal, the moved
    # one's. A few more may come where a creation left before its
    # close's times (a loaded machine).
    expect(dl.get("setattr", 0) <= 26, "SETATTRs with 20 renames: %s" % dl)
    expect_eq(got, ["f%02d" % i for i in range(20)], "listing on B")
    for i in range(20):
        with open(ctx.B.p(d, "f%02d" % i), "rb") as f:
            expect_eq(f.read(), b"new %d" % i, "f%02d on B" % i)


@test
def listing_and_lookup_counts_balance(ctx):
    d = fresh(ctx, "big")
    # 2,000 entries, made straight on the server (faster than FUSE).
    c = P.Conn("127.0.0.1", ctx.srv.port)
    try:
        root = c.hello()
        dfid = c.lookup(root["fid"], d)["fid"]
        for i in range(2000):
            c.create(dfid, "e%04d" % i, 0o100644, flags=P.CR_EXCL)
    finally:
        c.close()
    m = ctx.mount(ctx.srv, "count")
    stop = threading.Event()
    errors = []

    def churn():
        i = 0
        while not stop.is_set():
            p = ctx.B.p(d, "c%05d" % i)
            try:
                write_file(p, b"")
                if i % 2:
                    os.unlink(p)
            except OSError as e:
                errors.append("B: %s" % e)
                return
            i += 1

    t = threading.Thread(target=churn)
    t.start()
    try:
        for rnd in range(8 if not H.ASAN else 4):
            try:
                got = listing(m.p(d))
            except OSError as e:
                # An entry B removed between readdir and stat is fine.
                if e.errno != errno.ENOENT:
                    errors.append("listing: %s" % e)
                continue
            expect(len(got) >= 2000, "listing %d has %d entries" % (rnd, len(got)))
    finally:
        stop.set()
        t.join()
    expect(not errors, "errors: %s" % errors[:5])
    # Quiet now: A's listing is exact.
    names = set(os.listdir(m.p(d)))
    expect_eq(names, set(os.listdir(ctx.B.p(d))), "listing after the churn")
    # Every inode the kernel held is forgotten when it drops its caches;
    # the daemon's table must then hold the root alone.
    for _ in range(3):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
        time.sleep(0.3)
    m.umount()
    log = open(m.daemon_log).read().splitlines()
    left = [ln for ln in log if "inode table at exit" in ln]
    expect(left, "no 'inode table at exit' line in %s" % m.daemon_log)
    if left:
        expect(left[-1].endswith("inode table at exit: 1 inodes"),
               "lookup counts do not balance: %s" % left[-1])
    hits = [ln for ln in log if "directory cache:" in ln]
    if hits:
        print("# " + hits[-1].split("] ", 1)[-1])


if __name__ == "__main__":
    H.main(setup=setup)
