#!/usr/bin/env python3
# timeout: 240
"""test_coherence.py - two mounts (A and B, separate cache dirs) of one
server see each other's changes.

Data follows close-to-open consistency: a file written and closed on A is
read whole on B by an open that starts after A's close returned. Metadata
changes (rename, unlink, chmod, mkdir, rmdir, create after a negative
lookup) must become visible on B; the server breaks B's callbacks before it
acknowledges A's change, so we allow B only a short grace period
(METADATA_GRACE) for its invalidation thread to run, and report the delay.
"""

import hashlib
import os
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import write_file, read_file  # noqa: E402,F401
from harness import test, expect, expect_eq, fail  # noqa: E402

DATA_GRACE = 0.2       # seconds B may lag for data (should be 0)
METADATA_GRACE = 2.0   # seconds B may lag for a directory entry or attribute


def eventually(fn, grace, what):
    """fn() returns (ok, description). Retry for `grace` seconds."""
    t0 = time.time()
    ok, desc = fn()
    while not ok and time.time() - t0 < grace:
        time.sleep(0.02)
        ok, desc = fn()
    if not ok:
        fail("%s: still wrong after %.1fs: %s" % (what, grace, desc))
    lag = time.time() - t0
    if lag > 0.05:
        print("# note: %s became visible only after %.2fs" % (what, lag))


def data_on_b(ctx, rel, want, what):
    def check():
        try:
            got = read_file(ctx.B.p(rel))
        except OSError as e:
            return False, "read failed: %s" % e
        if got == want:
            return True, ""
        return False, ("read %d bytes (sha %s), expected %d bytes (sha %s)"
                       % (len(got), hashlib.sha1(got).hexdigest()[:10],
                          len(want), hashlib.sha1(want).hexdigest()[:10]))
    eventually(check, DATA_GRACE, what)


def setup(ctx):
    ctx.srv = ctx.server()
    ctx.A = ctx.mount(ctx.srv, "a")
    ctx.B = ctx.mount(ctx.srv, "b")
    ctx.n = 0


def fresh(ctx, tag="t"):
    ctx.n += 1
    rel = "%02d-%s" % (ctx.n, tag)
    os.mkdir(ctx.A.p(rel))
    return rel


@test
def written_on_a_read_whole_on_b(ctx):
    d = fresh(ctx)
    for size in (0, 1, 4095, 4096, 65537, (1 << 20) + 1, 5 << 20):
        rel = os.path.join(d, "f%d" % size)
        data = os.urandom(size)
        write_file(ctx.A.p(rel), data)
        data_on_b(ctx, rel, data, "%d-byte file written on A, read on B" % size)


@test
def overwrite_same_size_different_content(ctx):
    d = fresh(ctx)
    for size in (1, 4096, 100000, 5 << 20):
        rel = os.path.join(d, "f%d" % size)
        for round_ in range(3):
            data = os.urandom(size)
            write_file(ctx.A.p(rel), data)      # same size, same second
            data_on_b(ctx, rel, data, "overwrite #%d of %d-byte file on A, read on B"
                      % (round_ + 1, size))


@test
def b_has_it_cached_then_a_rewrites(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"first version " * 1000)
    for _ in range(3):
        read_file(ctx.B.p(rel))                 # B caches it
    for i, data in enumerate((os.urandom(50000), b"short", os.urandom(3 << 20), b"")):
        write_file(ctx.A.p(rel), data)
        data_on_b(ctx, rel, data, "rewrite #%d (%d bytes) of a file B had cached" % (i, len(data)))
        st = os.stat(ctx.B.p(rel))
        expect_eq(st.st_size, len(data), "size on B after rewrite #%d" % i)


@test
def b_keeps_fd_open_reopen_sees_new_data(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"old" * 100)
    fb = os.open(ctx.B.p(rel), os.O_RDONLY)
    try:
        expect_eq(os.pread(fb, 3, 0), b"old", "B's first read")
        write_file(ctx.A.p(rel), b"new" * 100)
        data_on_b(ctx, rel, b"new" * 100, "B reopens after A's close (B still holds an older fd)")
    finally:
        os.close(fb)


@test
def writes_in_place_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    base = bytearray(os.urandom(300000))
    write_file(ctx.A.p(rel), bytes(base))
    read_file(ctx.B.p(rel))
    fd = os.open(ctx.A.p(rel), os.O_WRONLY)
    try:
        for off in (0, 4095, 150000, 299990):
            os.pwrite(fd, b"PATCHED!!!", off)
            base[off:off + 10] = b"PATCHED!!!"
    finally:
        os.close(fd)
    data_on_b(ctx, rel, bytes(base), "patches written on A in place, read on B")
    fd = os.open(ctx.A.p(rel), os.O_WRONLY)
    os.ftruncate(fd, 1000)
    os.close(fd)
    eventually(lambda: (os.stat(ctx.B.p(rel)).st_size == 1000,
                        "size %d" % os.stat(ctx.B.p(rel)).st_size),
               METADATA_GRACE, "truncate on A seen on B")
    data_on_b(ctx, rel, bytes(base[:1000]), "content after truncate on A")


@test
def rename_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    write_file(ctx.A.p(d, "old"), b"payload")
    expect_eq(read_file(ctx.B.p(d, "old")), b"payload", "B reads before rename")
    expect(not os.path.exists(ctx.B.p(d, "new")), "new name exists on B too early")  # negative entry
    os.rename(ctx.A.p(d, "old"), ctx.A.p(d, "new"))

    def check():
        old, new = os.path.exists(ctx.B.p(d, "old")), os.path.exists(ctx.B.p(d, "new"))
        return (not old and new), "on B: old exists=%s, new exists=%s" % (old, new)
    eventually(check, METADATA_GRACE, "rename on A")
    expect_eq(read_file(ctx.B.p(d, "new")), b"payload", "content under the new name on B")
    # Rename over an existing file B has cached.
    write_file(ctx.A.p(d, "victim"), b"victim")
    read_file(ctx.B.p(d, "victim"))
    os.rename(ctx.A.p(d, "new"), ctx.A.p(d, "victim"))
    data_on_b(ctx, os.path.join(d, "victim"), b"payload", "rename over a file B had read")
    # Directory rename moves its subtree for B too.
    os.makedirs(ctx.A.p(d, "dir1", "sub"))
    write_file(ctx.A.p(d, "dir1", "sub", "f"), b"deep")
    read_file(ctx.B.p(d, "dir1", "sub", "f"))
    os.rename(ctx.A.p(d, "dir1"), ctx.A.p(d, "dir2"))
    eventually(lambda: (not os.path.exists(ctx.B.p(d, "dir1")), "dir1 still on B"),
               METADATA_GRACE, "directory rename on A")
    expect_eq(read_file(ctx.B.p(d, "dir2", "sub", "f")), b"deep", "file under renamed dir on B")


@test
def unlink_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    write_file(ctx.A.p(d, "f"), b"doomed")
    expect_eq(read_file(ctx.B.p(d, "f")), b"doomed", "B reads before unlink")
    os.unlink(ctx.A.p(d, "f"))
    eventually(lambda: (not os.path.exists(ctx.B.p(d, "f")), "still exists on B"),
               METADATA_GRACE, "unlink on A")
    eventually(lambda: ("f" not in os.listdir(ctx.B.p(d)), "still listed on B"),
               METADATA_GRACE, "unlink on A (readdir on B)")
    # Recreate with the same name: B sees the new file, not the old one.
    write_file(ctx.A.p(d, "f"), b"reborn")
    data_on_b(ctx, os.path.join(d, "f"), b"reborn", "same name recreated on A")


@test
def chmod_chown_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    write_file(ctx.A.p(d, "f"), b"x")
    os.stat(ctx.B.p(d, "f"))
    for mode in (0o600, 0o755, 0o4711):
        os.chmod(ctx.A.p(d, "f"), mode)
        eventually(lambda: (stat.S_IMODE(os.stat(ctx.B.p(d, "f")).st_mode) == mode,
                            "mode %o" % stat.S_IMODE(os.stat(ctx.B.p(d, "f")).st_mode)),
                   METADATA_GRACE, "chmod %o on A" % mode)
    os.chown(ctx.A.p(d, "f"), 4242, 4343)
    eventually(lambda: ((os.stat(ctx.B.p(d, "f")).st_uid, os.stat(ctx.B.p(d, "f")).st_gid) == (4242, 4343),
                        "owner %d:%d" % (os.stat(ctx.B.p(d, "f")).st_uid, os.stat(ctx.B.p(d, "f")).st_gid)),
               METADATA_GRACE, "chown on A")
    # Permission checks on B use the new mode: nobody may no longer read.
    os.chown(ctx.A.p(d, "f"), 0, 0)
    os.chmod(ctx.A.p(d, "f"), 0o644)
    eventually(lambda: (H.user_errno(65534, 65534, read_file, ctx.B.p(d, "f")) == 0, "nobody can't read"),
               METADATA_GRACE, "chmod 644 on A lets others read on B")
    os.chmod(ctx.A.p(d, "f"), 0o600)
    eventually(lambda: (H.user_errno(65534, 65534, read_file, ctx.B.p(d, "f")) != 0,
                        "nobody can still read"),
               METADATA_GRACE, "chmod 600 on A denies others on B")


@test
def mkdir_rmdir_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    expect_eq(os.listdir(ctx.B.p(d)), [], "B lists empty dir")
    os.mkdir(ctx.A.p(d, "sub"))
    eventually(lambda: (os.path.isdir(ctx.B.p(d, "sub")), "sub missing on B"),
               METADATA_GRACE, "mkdir on A")
    eventually(lambda: (os.listdir(ctx.B.p(d)) == ["sub"], "listing %s" % os.listdir(ctx.B.p(d))),
               METADATA_GRACE, "mkdir on A (readdir on B)")
    eventually(lambda: (os.stat(ctx.B.p(d)).st_nlink == 3, "nlink %d" % os.stat(ctx.B.p(d)).st_nlink),
               METADATA_GRACE, "parent nlink on B after mkdir on A")
    os.rmdir(ctx.A.p(d, "sub"))
    eventually(lambda: (not os.path.exists(ctx.B.p(d, "sub")), "sub still on B"),
               METADATA_GRACE, "rmdir on A")
    eventually(lambda: (os.listdir(ctx.B.p(d)) == [], "listing %s" % os.listdir(ctx.B.p(d))),
               METADATA_GRACE, "rmdir on A (readdir on B)")
    # B can now create the same name.
    os.mkdir(ctx.B.p(d, "sub"))
    eventually(lambda: (os.path.isdir(ctx.A.p(d, "sub")), "missing on A"),
               METADATA_GRACE, "mkdir on B seen on A")


@test
def negative_lookup_then_create(ctx):
    d = fresh(ctx)
    for i in range(3):
        name = "later%d" % i
        for _ in range(3):
            expect(not os.path.exists(ctx.B.p(d, name)), "B sees %s before it exists" % name)
        if i == 0:
            write_file(ctx.A.p(d, name), b"now here")
        elif i == 1:
            os.mkdir(ctx.A.p(d, name))
        else:
            os.symlink("target", ctx.A.p(d, name))
        eventually(lambda: (os.path.lexists(ctx.B.p(d, name)), "B still gets ENOENT"),
                   METADATA_GRACE, "create on A after a negative lookup on B (%s)" % name)
    data_on_b(ctx, os.path.join(d, "later0"), b"now here", "content of file created after negative lookup")
    expect_eq(os.readlink(ctx.B.p(d, "later2")), "target", "symlink created after negative lookup")


@test
def listing_changes_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    for i in range(20):
        write_file(ctx.A.p(d, "f%02d" % i), b"")
    expect_eq(len(os.listdir(ctx.B.p(d))), 20, "B lists 20 files")
    for i in range(0, 20, 2):
        os.unlink(ctx.A.p(d, "f%02d" % i))
    for i in range(5):
        os.mkdir(ctx.A.p(d, "n%d" % i))
    want = sorted(["f%02d" % i for i in range(1, 20, 2)] + ["n%d" % i for i in range(5)])
    eventually(lambda: (sorted(os.listdir(ctx.B.p(d))) == want,
                        "B lists %s" % sorted(os.listdir(ctx.B.p(d)))),
               METADATA_GRACE, "listing after 10 unlinks and 5 mkdirs on A")


@test
def xattr_and_link_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    write_file(ctx.A.p(d, "f"), b"x")
    os.stat(ctx.B.p(d, "f"))
    os.setxattr(ctx.A.p(d, "f"), "user.k", b"v1")
    eventually(lambda: (os.getxattr(ctx.B.p(d, "f"), "user.k") == b"v1", "xattr differs"),
               METADATA_GRACE, "setxattr on A")
    os.setxattr(ctx.A.p(d, "f"), "user.k", b"v2")
    eventually(lambda: (os.getxattr(ctx.B.p(d, "f"), "user.k") == b"v2", "xattr still old"),
               METADATA_GRACE, "xattr replaced on A")
    os.link(ctx.A.p(d, "f"), ctx.A.p(d, "g"))
    eventually(lambda: (os.stat(ctx.B.p(d, "f")).st_nlink == 2, "nlink %d" % os.stat(ctx.B.p(d, "f")).st_nlink),
               METADATA_GRACE, "link on A (nlink on B)")


@test
def appends_from_both_sides(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "log")
    write_file(ctx.A.p(rel), b"")
    want = []
    for i in range(60):
        side = ctx.A if i % 2 == 0 else ctx.B
        line = ("%s line %03d\n" % ("A" if i % 2 == 0 else "B", i)).encode()
        fd = os.open(side.p(rel), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        want.append(line)
    whole = b"".join(want)
    for name, m in (("A", ctx.A), ("B", ctx.B)):
        got = read_file(m.p(rel))
        if got != whole:
            got_lines = got.splitlines(True)
            first_bad = next((i for i, (g, w) in enumerate(zip(got_lines, want)) if g != w),
                             min(len(got_lines), len(want)))
            fail("alternating O_APPEND from A and B, read on %s: expected %d lines / %d bytes, "
                 "got %d lines / %d bytes; first difference at line %d: expected %r, got %r"
                 % (name, len(want), len(whole), len(got_lines), len(got), first_bad,
                    want[first_bad] if first_bad < len(want) else None,
                    got_lines[first_bad] if first_bad < len(got_lines) else None))


@test
def concurrent_writers_different_files(ctx):
    d = fresh(ctx)
    errors = []
    blobs = {}

    def writer(m, tag):
        try:
            for i in range(10):
                data = os.urandom(100000 + i * 777)
                rel = os.path.join(d, "%s%d" % (tag, i))
                write_file(m.p(rel), data)
                blobs[rel] = data
        except Exception as e:
            errors.append("%s: %s" % (tag, e))

    ts = [threading.Thread(target=writer, args=(ctx.A, "a")),
          threading.Thread(target=writer, args=(ctx.B, "b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    expect(not errors, "writer errors: %s" % errors)
    bad = []
    for rel, data in sorted(blobs.items()):
        for name, m in (("A", ctx.A), ("B", ctx.B)):
            if read_file(m.p(rel)) != data:
                bad.append("%s on %s" % (rel, name))
    expect(not bad, "files with wrong content after concurrent writes: %s" % bad)


if __name__ == "__main__":
    H.main(setup=setup)
