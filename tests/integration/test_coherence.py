#!/usr/bin/env python3
# timeout: 240
"""test_coherence.py - two mounts (A and B, separate cache dirs) of one
server see each other's changes at once.

The server replies to a change only after every other client holding a
promise on what changed has acknowledged the callback break, and a mount
acknowledges only once its kernel has dropped the old attributes, pages,
dentries and negative dentries (docs/ARCHITECTURE.md, "A request's life").
So the moment a system call returns on A, B must see the new state: no
test here sleeps or retries. Each change kind has a test of its own, and in
each B first caches the old state (stat, read, listdir, negative lookups,
so both its kernel and its cache manager hold it) and the test checks that
B really saw the old state before A changes anything.

Also here: lookup counts balance on a mount that listed a 10,000-entry
directory while A changed it (cairn status MOUNTPOINT's `inodes`, and the
daemon's "inode table at exit" log line), and a mount killed with kill -9
while holding promises costs A's next change at most the server's
acknowledgement timeout.
"""

import errno
import hashlib
import os
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import proto_client as P  # noqa: E402
from harness import write_file, read_file  # noqa: E402,F401
from harness import test, expect, expect_eq, fail  # noqa: E402

ACK_TIMEOUT = 3.0      # server/callback.h CB_ACK_TIMEOUT_MS

# Attributes that both mounts must report alike (atime excluded: reads
# move it under relatime; the utimens test checks it where it is fixed).
FIELDS = ("st_ino", "st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
          "st_mtime_ns", "st_ctime_ns")


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


def attrs(path):
    st = os.lstat(path)
    return {f: getattr(st, f) for f in FIELDS}


def same_attrs(ctx, rel, what):
    """B's lstat of rel equals A's, field by field; returns A's."""
    a, b = attrs(ctx.A.p(rel)), attrs(ctx.B.p(rel))
    diff = ["%s: A %r, B %r" % (f, a[f], b[f]) for f in FIELDS if a[f] != b[f]]
    if diff:
        fail("%s: B's attributes of %s differ from A's: %s" % (what, rel, "; ".join(diff)))
    return a


def exists(path):
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


def absent_on_b(ctx, rel, what):
    """B does not see rel (ENOENT from lstat and from open)."""
    e = H.errno_of(os.lstat, ctx.B.p(rel))
    if e != errno.ENOENT:
        fail("%s: lstat of %s on B: expected ENOENT, got %s" % (what, rel, H.errname(e)))
    e = H.errno_of(os.open, ctx.B.p(rel), os.O_RDONLY)
    if e != errno.ENOENT:
        fail("%s: open of %s on B: expected ENOENT, got %s" % (what, rel, H.errname(e)))


def data_on_b(ctx, rel, want, what):
    got = read_file(ctx.B.p(rel))
    if got != want:
        fail("%s: B read %d bytes (sha %s), expected %d bytes (sha %s)"
             % (what, len(got), hashlib.sha1(got).hexdigest()[:10],
                len(want), hashlib.sha1(want).hexdigest()[:10]))


def listing_on_b(ctx, rel, want, what):
    """B's listing of directory rel, by readdir alone and by readdir plus
    a stat of each entry, is exactly `want` (names)."""
    got = sorted(os.listdir(ctx.B.p(rel)))
    if got != sorted(want):
        fail("%s: B lists %s as %s, expected %s" % (what, rel, got, sorted(want)))
    with os.scandir(ctx.B.p(rel)) as it:
        plus = {e.name: e.stat(follow_symlinks=False).st_ino for e in it}
    if sorted(plus) != sorted(want):
        fail("%s: B's scandir of %s gives %s, expected %s" % (what, rel, sorted(plus), sorted(want)))
    for name, ino in plus.items():
        a = os.lstat(ctx.A.p(rel, name)).st_ino
        if ino != a:
            fail("%s: %s/%s is inode %d in B's listing, %d on A" % (what, rel, name, ino, a))


def cache_on_b(ctx, *rels):
    """B looks at each rel the way programs do (twice, so the second look is
    answered from its caches): lstat, read a file, list a directory, list
    the parent. A missing name leaves a negative entry."""
    for _ in range(2):
        for rel in rels:
            parent = os.path.dirname(rel)
            os.listdir(ctx.B.p(parent) if parent else ctx.B.path)
            try:
                st = os.lstat(ctx.B.p(rel))
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                read_file(ctx.B.p(rel))
            elif stat.S_ISDIR(st.st_mode):
                with os.scandir(ctx.B.p(rel)) as it:
                    for e in it:
                        e.stat(follow_symlinks=False)
            elif stat.S_ISLNK(st.st_mode):
                os.readlink(ctx.B.p(rel))


# ------------------------------------------------------------------ file data

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
def write_close_on_a_replaces_b_cached_pages_and_attributes(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    old = b"first version " * 1000
    write_file(ctx.A.p(rel), old)
    cache_on_b(ctx, rel)
    expect_eq(os.stat(ctx.B.p(rel)).st_size, len(old), "size B cached")
    for i, data in enumerate((os.urandom(50000), b"short", os.urandom(3 << 20),
                              b"", os.urandom(5))):
        before = os.stat(ctx.B.p(rel))
        write_file(ctx.A.p(rel), data)
        a = same_attrs(ctx, rel, "rewrite #%d (%d bytes)" % (i, len(data)))
        expect_eq(a["st_size"], len(data), "size after rewrite #%d" % i)
        expect(a["st_ctime_ns"] != before.st_ctime_ns or a["st_mtime_ns"] != before.st_mtime_ns
               or len(data) != before.st_size,
               "rewrite #%d changed neither size nor times: nothing to be stale about" % i)
        data_on_b(ctx, rel, data, "rewrite #%d (%d bytes) of a file B had cached" % (i, len(data)))


@test
def chmod_after_other_clients_rewrite_is_what_a_listing_shows(ctx):
    """B's chmod goes to its journal and is answered at once; its shipper
    sends it while B lists the directory. A listing (READDIRPLUS) or stat
    that copied the file's status before the server's reply came, and
    looked for the journal's changes after the change had left it,
    handed the kernel the mode from before the chmod (test_model, seed
    2360422730). B here is a third mount that pauses 20 ms between
    copying a listing and answering it (a test hook), so that the reply
    comes in between every time; the build before failed 18 of 20 rounds."""
    d = fresh(ctx)
    b = ctx.mount(ctx.srv, "slowlist",
                  env={"CAIRN_TEST_LIST_PAUSE_US": "20000"})
    bad = []
    for i in range(20):
        rel = os.path.join(d, "n%d" % i)
        write_file(ctx.A.p(rel), b"x" * 50)
        read_file(b.p(rel))
        write_file(ctx.A.p(rel), b"y" * 144)
        read_file(b.p(rel))
        mode = 0o640 if i % 2 else 0o604
        os.chmod(b.p(rel), mode)
        for e in os.scandir(b.p(d)):
            pass
        got = stat.S_IMODE(os.lstat(b.p(rel)).st_mode)
        if got != mode:
            bad.append("round %d: %o, not %o" % (i, got, mode))
    expect(not bad, "mode on B after its own chmod and a listing: %s"
           % "; ".join(bad))


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
def b_holds_fd_while_a_appends_and_truncates(ctx):
    """With the writeback cache B's kernel keeps a file's size and times
    itself while it has the file in memory, and an open fd keeps it there.
    A reopen must still see A's new size and data (the client hands the
    kernel a new incarnation of the file), every time, and after B lets
    go of the old fd too; a stat by name agrees with A."""
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"hello")
    fb = os.open(ctx.B.p(rel), os.O_RDONLY)
    try:
        expect_eq(os.pread(fb, 100, 0), b"hello", "B's first read")
        with open(ctx.A.p(rel), "ab") as f:
            f.write(b" world, longer now")
        same_attrs(ctx, rel, "append on A while B holds an fd")
        data_on_b(ctx, rel, b"hello world, longer now", "B reopens after A's append")
        write_file(ctx.A.p(rel), b"hi")
        same_attrs(ctx, rel, "truncate on A while B holds an fd")
        data_on_b(ctx, rel, b"hi", "B reopens after A's truncate")
        fb2 = os.open(ctx.B.p(rel), os.O_RDONLY)
        os.close(fb2)
        with open(ctx.A.p(rel), "ab") as f:
            f.write(b"!!")
        data_on_b(ctx, rel, b"hi!!", "B reopens after a second append")
    finally:
        os.close(fb)
    same_attrs(ctx, rel, "after B closed its old fd")
    data_on_b(ctx, rel, b"hi!!", "B reads after closing its old fd")


@test
def writes_in_place_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    base = bytearray(os.urandom(300000))
    write_file(ctx.A.p(rel), bytes(base))
    cache_on_b(ctx, rel)
    fd = os.open(ctx.A.p(rel), os.O_WRONLY)
    try:
        for off in (0, 4095, 150000, 299990):
            os.pwrite(fd, b"PATCHED!!!", off)
            base[off:off + 10] = b"PATCHED!!!"
    finally:
        os.close(fd)
    same_attrs(ctx, rel, "patches written on A in place")
    data_on_b(ctx, rel, bytes(base), "patches written on A in place, read on B")


@test
def ftruncate_and_truncate_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    base = os.urandom(300000)
    write_file(ctx.A.p(rel), base)
    # (how, new size): shrink inside B's cached pages, grow with a hole,
    # to zero, by path and by descriptor.
    for i, (how, size) in enumerate((("ftruncate", 1000), ("ftruncate", 70000),
                                     ("truncate", 5), ("ftruncate", 0),
                                     ("truncate", 12345), ("ftruncate", 12345))):
        cache_on_b(ctx, rel)
        old = read_file(ctx.B.p(rel))
        if how == "ftruncate":
            fd = os.open(ctx.A.p(rel), os.O_WRONLY)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
        else:
            os.truncate(ctx.A.p(rel), size)
        what = "%s to %d on A (step %d)" % (how, size, i)
        a = same_attrs(ctx, rel, what)
        expect_eq(a["st_size"], size, what + ": size")
        data_on_b(ctx, rel, (old + bytes(max(0, size - len(old))))[:size], what)


@test
def open_o_trunc_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    for i, flags in enumerate((os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_TRUNC,
                               os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        write_file(ctx.A.p(rel), os.urandom(20000 + i))
        cache_on_b(ctx, rel)
        expect_eq(os.stat(ctx.B.p(rel)).st_size, 20000 + i, "size B cached")
        os.close(os.open(ctx.A.p(rel), flags))      # truncates, writes nothing
        what = "open with O_TRUNC (flags %#o) and close on A" % flags
        a = same_attrs(ctx, rel, what)
        expect_eq(a["st_size"], 0, what + ": size")
        data_on_b(ctx, rel, b"", what)


# ------------------------------------------------------------------ attributes

@test
def chmod_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"x")
    for path in (rel, d):
        modes = (0o600, 0o755, 0o4711, 0o640) if path == rel else (0o700, 0o1777, 0o755)
        for mode in modes:
            cache_on_b(ctx, path)
            os.chmod(ctx.A.p(path), mode)
            a = same_attrs(ctx, path, "chmod %o of %s on A" % (mode, path))
            expect_eq(stat.S_IMODE(a["st_mode"]), mode, "mode after chmod %o" % mode)
    # B's kernel checks permissions with the new mode at once.
    os.chmod(ctx.A.p(rel), 0o644)
    expect_eq(H.user_errno(65534, 65534, read_file, ctx.B.p(rel)), 0,
              "nobody reads on B right after chmod 644 on A")
    os.chmod(ctx.A.p(rel), 0o600)
    expect_eq(H.user_errno(65534, 65534, read_file, ctx.B.p(rel)), errno.EACCES,
              "nobody reads on B right after chmod 600 on A")


@test
def chown_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"x")
    os.chmod(ctx.A.p(rel), 0o6755)
    for path, (uid, gid) in ((rel, (4242, 4343)), (rel, (4242, 0)), (rel, (0, 4343)),
                             (d, (1234, 5678))):
        cache_on_b(ctx, path)
        os.chown(ctx.A.p(path), uid, gid)
        a = same_attrs(ctx, path, "chown %d:%d of %s on A" % (uid, gid, path))
        expect_eq((a["st_uid"], a["st_gid"]), (uid, gid), "owner after chown")
    # The owner's new rights apply on B at once.
    os.chmod(ctx.A.p(rel), 0o600)
    cache_on_b(ctx, rel)
    expect_eq(H.user_errno(4242, 4242, read_file, ctx.B.p(rel)), errno.EACCES,
              "uid 4242 reads a 0600 file of uid 0 on B")
    os.chown(ctx.A.p(rel), 4242, 4242)
    expect_eq(H.user_errno(4242, 4242, read_file, ctx.B.p(rel)), 0,
              "uid 4242 reads on B right after A gave it the file")


@test
def utimens_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"times")
    times = ((1234567890123456789, 1111111111987654321),   # ns that no clock gives
             (1, 2),
             (4102444800000000001, 946684800999999999))
    for path in (rel, d):
        for at, mt in times:
            cache_on_b(ctx, path)
            os.utime(ctx.A.p(path), ns=(at, mt))
            what = "utimens(%d, %d) of %s on A" % (at, mt, path)
            a = same_attrs(ctx, path, what)
            st = os.lstat(ctx.B.p(path))     # before any read moves atime
            expect_eq((st.st_atime_ns, st.st_mtime_ns), (at, mt), what + ": times on B")
            expect_eq(a["st_mtime_ns"], mt, what + ": mtime on A")
        # And "now" (UTIME_NOW), which the server stamps.
        cache_on_b(ctx, path)
        os.utime(ctx.A.p(path))
        same_attrs(ctx, path, "utimens(NOW) of %s on A" % path)
        expect_eq(os.lstat(ctx.B.p(path)).st_atime_ns, os.lstat(ctx.A.p(path)).st_atime_ns,
                  "atime after utimens(NOW) of %s, B vs A" % path)


# ------------------------------------------------------------------ names

@test
def rename_within_a_directory_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    src, dst = os.path.join(d, "old"), os.path.join(d, "new")
    write_file(ctx.A.p(src), b"payload")
    cache_on_b(ctx, src, dst)
    ino = os.lstat(ctx.B.p(src)).st_ino
    expect(not exists(ctx.B.p(dst)), "B sees the new name before the rename")
    os.rename(ctx.A.p(src), ctx.A.p(dst))
    absent_on_b(ctx, src, "old name after rename on A")
    expect_eq(os.lstat(ctx.B.p(dst)).st_ino, ino, "inode under the new name on B")
    same_attrs(ctx, dst, "renamed file")
    data_on_b(ctx, dst, b"payload", "content under the new name on B")
    listing_on_b(ctx, d, ["new"], "listing after rename on A")


@test
def rename_across_directories_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    e = fresh(ctx)
    write_file(ctx.A.p(d, "f"), b"moving")
    os.mkdir(ctx.A.p(d, "sub"))
    write_file(ctx.A.p(d, "sub", "inner"), b"inner")
    cache_on_b(ctx, os.path.join(d, "f"), os.path.join(d, "sub"),
               os.path.join(d, "sub", "inner"), os.path.join(e, "f"),
               os.path.join(e, "sub"), e)
    expect_eq((os.stat(ctx.B.p(d)).st_nlink, os.stat(ctx.B.p(e)).st_nlink), (3, 2),
              "nlink of the two directories on B before")
    f_ino = os.lstat(ctx.B.p(d, "f")).st_ino
    sub_ino = os.lstat(ctx.B.p(d, "sub")).st_ino
    # A file.
    os.rename(ctx.A.p(d, "f"), ctx.A.p(e, "f"))
    absent_on_b(ctx, os.path.join(d, "f"), "file moved away on A")
    expect_eq(os.lstat(ctx.B.p(e, "f")).st_ino, f_ino, "inode of the moved file on B")
    data_on_b(ctx, os.path.join(e, "f"), b"moving", "moved file")
    listing_on_b(ctx, d, ["sub"], "source directory after moving a file")
    listing_on_b(ctx, e, ["f"], "target directory after moving a file")
    # A directory: both parents' link counts change, and its ".." too.
    cache_on_b(ctx, d, e, os.path.join(d, "sub"), os.path.join(e, "sub"))
    os.rename(ctx.A.p(d, "sub"), ctx.A.p(e, "sub"))
    absent_on_b(ctx, os.path.join(d, "sub"), "directory moved away on A")
    expect_eq(os.lstat(ctx.B.p(e, "sub")).st_ino, sub_ino, "inode of the moved directory on B")
    same_attrs(ctx, d, "source directory after moving a directory")
    same_attrs(ctx, e, "target directory after moving a directory")
    expect_eq((os.stat(ctx.B.p(d)).st_nlink, os.stat(ctx.B.p(e)).st_nlink), (2, 3),
              "nlink of the two directories on B after")
    expect_eq(os.stat(ctx.B.p(e, "sub", "..")).st_ino, os.stat(ctx.B.p(e)).st_ino,
              "'..' of the moved directory on B")
    data_on_b(ctx, os.path.join(e, "sub", "inner"), b"inner", "file inside the moved directory")
    listing_on_b(ctx, d, [], "source directory after moving a directory")
    listing_on_b(ctx, e, ["f", "sub"], "target directory after moving a directory")


@test
def rename_over_an_existing_name_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    e = fresh(ctx)
    write_file(ctx.A.p(d, "src"), b"payload")
    write_file(ctx.A.p(d, "victim"), b"victim, longer than the payload")
    write_file(ctx.A.p(e, "victim"), b"other victim")
    cache_on_b(ctx, os.path.join(d, "src"), os.path.join(d, "victim"),
               os.path.join(e, "victim"))
    src_ino = os.lstat(ctx.B.p(d, "src")).st_ino
    expect(os.lstat(ctx.B.p(d, "victim")).st_ino != src_ino, "two names, two inodes")
    # Over a file B has read, in the same directory.
    os.rename(ctx.A.p(d, "src"), ctx.A.p(d, "victim"))
    absent_on_b(ctx, os.path.join(d, "src"), "source name after rename over a file")
    expect_eq(os.lstat(ctx.B.p(d, "victim")).st_ino, src_ino, "inode under the replaced name on B")
    same_attrs(ctx, os.path.join(d, "victim"), "replaced name")
    data_on_b(ctx, os.path.join(d, "victim"), b"payload", "rename over a file B had read")
    listing_on_b(ctx, d, ["victim"], "listing after rename over a file")
    # Over a file in another directory.
    cache_on_b(ctx, os.path.join(d, "victim"), os.path.join(e, "victim"))
    os.rename(ctx.A.p(d, "victim"), ctx.A.p(e, "victim"))
    absent_on_b(ctx, os.path.join(d, "victim"), "source after rename over a file elsewhere")
    expect_eq(os.lstat(ctx.B.p(e, "victim")).st_ino, src_ino, "inode after rename across, over a file")
    data_on_b(ctx, os.path.join(e, "victim"), b"payload", "rename across directories over a file")
    listing_on_b(ctx, d, [], "source directory")
    listing_on_b(ctx, e, ["victim"], "target directory")
    # A directory over an empty directory.
    os.mkdir(ctx.A.p(d, "dsrc"))
    write_file(ctx.A.p(d, "dsrc", "x"), b"x")
    os.mkdir(ctx.A.p(d, "dvictim"))
    cache_on_b(ctx, os.path.join(d, "dsrc"), os.path.join(d, "dvictim"))
    dsrc_ino = os.lstat(ctx.B.p(d, "dsrc")).st_ino
    os.rename(ctx.A.p(d, "dsrc"), ctx.A.p(d, "dvictim"))
    absent_on_b(ctx, os.path.join(d, "dsrc"), "directory renamed over an empty one")
    expect_eq(os.lstat(ctx.B.p(d, "dvictim")).st_ino, dsrc_ino, "inode of the replaced directory")
    listing_on_b(ctx, os.path.join(d, "dvictim"), ["x"], "listing of the replaced directory")
    same_attrs(ctx, d, "parent after a directory replaced another")


@test
def rename_of_a_directory_moves_its_subtree_for_b(ctx):
    d = fresh(ctx)
    os.makedirs(ctx.A.p(d, "dir1", "sub"))
    write_file(ctx.A.p(d, "dir1", "sub", "f"), b"deep")
    cache_on_b(ctx, os.path.join(d, "dir1"), os.path.join(d, "dir1", "sub"),
               os.path.join(d, "dir1", "sub", "f"), os.path.join(d, "dir2"))
    os.rename(ctx.A.p(d, "dir1"), ctx.A.p(d, "dir2"))
    absent_on_b(ctx, os.path.join(d, "dir1"), "old directory name")
    absent_on_b(ctx, os.path.join(d, "dir1", "sub", "f"), "file under the old directory name")
    data_on_b(ctx, os.path.join(d, "dir2", "sub", "f"), b"deep", "file under the renamed directory")
    listing_on_b(ctx, d, ["dir2"], "listing after a directory rename")


@test
def unlink_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"doomed")
    os.link(ctx.A.p(rel), ctx.A.p(d, "other-link"))
    cache_on_b(ctx, rel, os.path.join(d, "other-link"))
    expect_eq(os.lstat(ctx.B.p(d, "other-link")).st_nlink, 2, "nlink B cached")
    os.unlink(ctx.A.p(rel))
    absent_on_b(ctx, rel, "unlink on A")
    listing_on_b(ctx, d, ["other-link"], "listing after unlink on A")
    # The object lost a link: its other name shows it.
    a = same_attrs(ctx, os.path.join(d, "other-link"), "remaining link after unlink on A")
    expect_eq(a["st_nlink"], 1, "nlink of the remaining link")
    # Last link.
    cache_on_b(ctx, os.path.join(d, "other-link"))
    os.unlink(ctx.A.p(d, "other-link"))
    absent_on_b(ctx, os.path.join(d, "other-link"), "unlink of the last link on A")
    listing_on_b(ctx, d, [], "listing after the last unlink on A")
    # Recreate with the same name: B sees the new file, not the old one.
    cache_on_b(ctx, rel)
    write_file(ctx.A.p(rel), b"reborn")
    same_attrs(ctx, rel, "same name recreated on A")
    data_on_b(ctx, rel, b"reborn", "same name recreated on A")


@test
def create_after_a_negative_lookup_on_b(ctx):
    d = fresh(ctx)
    e = fresh(ctx)
    write_file(ctx.A.p(e, "target"), b"link target")
    kinds = {
        "file": lambda p: write_file(p, b"now here"),
        "excl": lambda p: os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)),
        "dir": lambda p: os.mkdir(p),
        "symlink": lambda p: os.symlink("target", p),
        "hardlink": lambda p: os.link(ctx.A.p(e, "target"), p),
        "fifo": lambda p: os.mkfifo(p),
        "renamed": lambda p: os.rename(ctx.A.p(e, "target"), p),
    }
    made = []
    for name, make in kinds.items():
        rel = os.path.join(d, name)
        cache_on_b(ctx, rel)
        absent_on_b(ctx, rel, "B before %s is made" % name)
        make(ctx.A.p(rel))
        made.append(name)
        expect(exists(ctx.B.p(rel)), "%s made on A after a negative lookup on B: "
               "B still gets ENOENT" % name)
        same_attrs(ctx, rel, "%s made on A after a negative lookup on B" % name)
        listing_on_b(ctx, d, made, "listing after %s made on A" % name)
    data_on_b(ctx, os.path.join(d, "file"), b"now here", "file made after a negative lookup")
    expect_eq(os.readlink(ctx.B.p(d, "symlink")), "target", "symlink made after a negative lookup")
    data_on_b(ctx, os.path.join(d, "hardlink"), b"link target", "hard link made after a negative lookup")
    # B's own exclusive create must not trust its stale negative entry.
    rel = os.path.join(d, "mine")
    cache_on_b(ctx, rel)
    write_file(ctx.A.p(rel), b"A's")
    expect_eq(H.errno_of(os.open, ctx.B.p(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL),
              errno.EEXIST, "O_EXCL create on B of a name A just made")


@test
def mkdir_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    cache_on_b(ctx, d, os.path.join(d, "sub"))
    expect_eq(os.stat(ctx.B.p(d)).st_nlink, 2, "nlink B cached")
    os.mkdir(ctx.A.p(d, "sub"), 0o751)
    expect(os.path.isdir(ctx.B.p(d, "sub")), "directory made on A is not one on B")
    a = same_attrs(ctx, os.path.join(d, "sub"), "mkdir on A")
    umask = os.umask(0)
    os.umask(umask)
    expect_eq(stat.S_IMODE(a["st_mode"]), 0o751 & ~umask, "mode of the new directory")
    listing_on_b(ctx, d, ["sub"], "listing after mkdir on A")
    listing_on_b(ctx, os.path.join(d, "sub"), [], "listing of the new directory")
    a = same_attrs(ctx, d, "parent after mkdir on A")
    expect_eq(a["st_nlink"], 3, "parent nlink after mkdir on A")
    # And one level down, in the directory B just listed.
    cache_on_b(ctx, os.path.join(d, "sub", "deeper"))
    os.mkdir(ctx.A.p(d, "sub", "deeper"))
    listing_on_b(ctx, os.path.join(d, "sub"), ["deeper"], "listing after a second mkdir")
    expect_eq(os.stat(ctx.B.p(d, "sub")).st_nlink, 3, "nlink of sub on B after mkdir inside it")


@test
def rmdir_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    os.makedirs(ctx.A.p(d, "sub", "inner"))
    os.mkdir(ctx.A.p(d, "keep"))
    cache_on_b(ctx, os.path.join(d, "sub"), os.path.join(d, "sub", "inner"),
               os.path.join(d, "keep"))
    expect_eq(os.stat(ctx.B.p(d)).st_nlink, 4, "parent nlink B cached")
    os.rmdir(ctx.A.p(d, "sub", "inner"))
    absent_on_b(ctx, os.path.join(d, "sub", "inner"), "rmdir of a nested directory on A")
    listing_on_b(ctx, os.path.join(d, "sub"), [], "listing after rmdir on A")
    expect_eq(same_attrs(ctx, os.path.join(d, "sub"), "parent after rmdir")["st_nlink"], 2,
              "nlink of the parent after rmdir on A")
    cache_on_b(ctx, os.path.join(d, "sub"))
    os.rmdir(ctx.A.p(d, "sub"))
    absent_on_b(ctx, os.path.join(d, "sub"), "rmdir on A")
    listing_on_b(ctx, d, ["keep"], "listing after rmdir on A")
    expect_eq(same_attrs(ctx, d, "parent after rmdir")["st_nlink"], 3,
              "nlink of the parent after rmdir on A")
    # B can now make the same name, and A sees it.
    os.mkdir(ctx.B.p(d, "sub"))
    expect(os.path.isdir(ctx.A.p(d, "sub")), "mkdir on B after rmdir on A: missing on A")


@test
def link_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    e = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"linked")
    cache_on_b(ctx, rel, os.path.join(d, "g"), os.path.join(e, "h"))
    ino = os.lstat(ctx.B.p(rel)).st_ino
    expect_eq(os.lstat(ctx.B.p(rel)).st_nlink, 1, "nlink B cached")
    for n, new in enumerate((os.path.join(d, "g"), os.path.join(e, "h")), start=2):
        os.link(ctx.A.p(rel), ctx.A.p(new))
        a = same_attrs(ctx, rel, "link to %s on A" % new)
        expect_eq(a["st_nlink"], n, "nlink on B after link to %s" % new)
        expect_eq(os.lstat(ctx.B.p(new)).st_ino, ino, "inode of the new link on B")
        same_attrs(ctx, new, "new link %s" % new)
        data_on_b(ctx, new, b"linked", "content through the new link")
    listing_on_b(ctx, d, ["f", "g"], "listing after link on A")
    listing_on_b(ctx, e, ["h"], "listing of the other directory after link on A")


@test
def symlink_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    write_file(ctx.A.p(d, "t1"), b"one")
    write_file(ctx.A.p(d, "t2"), b"two")
    rel = os.path.join(d, "s")
    cache_on_b(ctx, rel)
    os.symlink("t1", ctx.A.p(rel))
    expect_eq(os.readlink(ctx.B.p(rel)), "t1", "readlink on B of a symlink made on A")
    a = same_attrs(ctx, rel, "symlink made on A")
    expect(stat.S_ISLNK(a["st_mode"]) and a["st_size"] == 2, "lstat of the symlink: %r" % a)
    data_on_b(ctx, rel, b"one", "read through the symlink on B")
    listing_on_b(ctx, d, ["s", "t1", "t2"], "listing after symlink on A")
    # The kernel caches symlink targets (FUSE_CAP_CACHE_SYMLINKS): a new
    # symlink renamed over the name must not be read through the old one.
    cache_on_b(ctx, rel)
    os.symlink("t2-but-longer", ctx.A.p(d, "tmp"))
    os.rename(ctx.A.p(d, "tmp"), ctx.A.p(rel))
    expect_eq(os.readlink(ctx.B.p(rel)), "t2-but-longer", "readlink on B after a symlink replaced it")
    same_attrs(ctx, rel, "replaced symlink")
    cache_on_b(ctx, rel)
    os.unlink(ctx.A.p(rel))
    os.symlink("t2", ctx.A.p(rel))
    expect_eq(os.readlink(ctx.B.p(rel)), "t2", "readlink on B after unlink and symlink on A")
    data_on_b(ctx, rel, b"two", "read through the remade symlink on B")


# ------------------------------------------------------------------ xattrs

@test
def setxattr_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    for rel in (os.path.join(d, "f"), os.path.join(d, "sub")):
        if rel.endswith("f"):
            write_file(ctx.A.p(rel), b"x")
        else:
            os.mkdir(ctx.A.p(rel))
        cache_on_b(ctx, rel)
        expect_eq(H.errno_of(os.getxattr, ctx.B.p(rel), "user.k"), errno.ENODATA,
                  "getxattr on B before it is set")
        expect_eq(os.listxattr(ctx.B.p(rel)), [], "listxattr on B before")
        for v in (b"v1", b"value two, longer", b"", bytes(range(256)) * 8):
            os.setxattr(ctx.A.p(rel), "user.k", v)
            expect_eq(os.getxattr(ctx.B.p(rel), "user.k"), v, "getxattr on B after setxattr on A")
            expect_eq(os.listxattr(ctx.B.p(rel)), ["user.k"], "listxattr on B after setxattr on A")
            same_attrs(ctx, rel, "setxattr on A (ctime)")
        os.setxattr(ctx.A.p(rel), "user.second", b"2")
        expect_eq(sorted(os.listxattr(ctx.B.p(rel))), ["user.k", "user.second"],
                  "listxattr on B after a second setxattr on A")
    # A name the client remembers as absent (client/fs_xattr.c: a few
    # well-known names asked on every write or ls -l).
    rel = os.path.join(d, "f")
    for _ in range(2):
        expect_eq(H.errno_of(os.getxattr, ctx.B.p(rel), "security.ima"), errno.ENODATA,
                  "security.ima on B before")
    os.setxattr(ctx.A.p(rel), "security.ima", b"\x03\x02cairn")
    expect_eq(os.getxattr(ctx.B.p(rel), "security.ima"), b"\x03\x02cairn",
              "security.ima on B after setxattr on A (B had it cached as absent)")


@test
def removexattr_on_a_seen_on_b(ctx):
    d = fresh(ctx)
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"x")
    os.setxattr(ctx.A.p(rel), "user.a", b"1")
    os.setxattr(ctx.A.p(rel), "user.b", b"2")
    cache_on_b(ctx, rel)
    expect_eq(os.getxattr(ctx.B.p(rel), "user.a"), b"1", "getxattr on B before")
    expect_eq(sorted(os.listxattr(ctx.B.p(rel))), ["user.a", "user.b"], "listxattr on B before")
    os.removexattr(ctx.A.p(rel), "user.a")
    expect_eq(H.errno_of(os.getxattr, ctx.B.p(rel), "user.a"), errno.ENODATA,
              "getxattr on B after removexattr on A")
    expect_eq(os.listxattr(ctx.B.p(rel)), ["user.b"], "listxattr on B after removexattr on A")
    same_attrs(ctx, rel, "removexattr on A (ctime)")
    os.removexattr(ctx.A.p(rel), "user.b")
    expect_eq(os.listxattr(ctx.B.p(rel)), [], "listxattr on B after removing the last one")


# ------------------------------------------------------------------ mixed

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
    want = ["f%02d" % i for i in range(1, 20, 2)] + ["n%d" % i for i in range(5)]
    listing_on_b(ctx, d, want, "listing after 10 unlinks and 5 mkdirs on A")


def journal_sent(m):
    """Until every change m's daemon answered itself reached the server
    (which returned only once the other mount had taken its break)."""
    t0 = time.time()
    while H.mount_status(m)["wb.pending_changes"]:
        if time.time() - t0 > 20:
            fail("%s's journal not sent within 20 s" % m.path)
        time.sleep(0.02)


def cwd_answers(here, what):
    """getcwd() of this process is `here`, and a relative path in it
    works."""
    try:
        cwd = os.getcwd()
    except OSError as e:
        fail("getcwd() on B %s: %s" % (what, H.errname(e.errno)))
    expect_eq(cwd, here, "getcwd() on B %s" % what)
    expect_eq(read_file("in"), b"inside", "a relative read on B %s" % what)


@test(timeout=120)
def working_directory_survives_changes_beside_it(ctx):
    """A process on B whose working directory is a directory w of the
    mount keeps it, as on a local disk, while A makes, removes and
    renames other names in w's parent, and after the server restarts (B
    reconnects): getcwd() answers and relative paths work. Each such
    change used to drop every other name of the parent from B's kernel,
    w's with it, and getcwd() then failed with ENOENT (and git, make or
    rsync run there with it). Removed by A, w is gone for B too. (A
    answers its changes itself and sends them a moment later: each check
    waits for that.)

    Expiring those names instead (FUSE_EXPIRE_ONLY) keeps w, but then a
    directory another client moved could be found under its new name
    while the kernel still held it under the old one: a rename there
    failed with ESTALE (test_model, CAIRN_MODEL_SEED=2929835734, step
    2264); such a directory now gets a new node id (client/inode.h)."""
    srv = ctx.server(data=ctx.path("data-cwd"))
    a = ctx.mount(srv, "cwd-a")
    b = ctx.mount(srv, "cwd-b")
    os.mkdir(a.p("p"))
    os.mkdir(a.p("p", "w"))
    write_file(a.p("p", "w", "in"), b"inside")
    write_file(a.p("p", "x"), b"x")
    here = b.p("p", "w")
    old = os.getcwd()
    expect_eq(sorted(os.listdir(b.p("p"))), ["w", "x"], "B's listing of p")
    os.chdir(here)
    try:
        cwd_answers(here, "in w")
        for what, change in (
                ("mkdir", lambda: os.mkdir(a.p("p", "m"))),
                ("create", lambda: write_file(a.p("p", "c"), b"c")),
                ("unlink", lambda: os.unlink(a.p("p", "x"))),
                ("rename", lambda: os.rename(a.p("p", "c"), a.p("p", "c2")))):
            change()
            journal_sent(a)
            cwd_answers(here, "after A's %s in w's parent" % what)
            expect_eq(sorted(os.listdir(b.p("p"))),
                      sorted({"mkdir": ["m", "w", "x"],
                              "create": ["c", "m", "w", "x"],
                              "unlink": ["c", "m", "w"],
                              "rename": ["c2", "m", "w"]}[what]),
                      "B's listing of p after A's %s" % what)
        # The server restarts: B reconnects, and everything it cached is
        # checked again.
        before = H.mount_status(b)["cb_reconnect_breaks"]
        expect_eq(srv.stop(), 0, "exit status of cairn serve after SIGTERM")
        srv.start()
        expect_eq(read_file(b.p("p", "c2")), b"c", "B reads c2 after the restart")
        t0 = time.time()
        while time.time() - t0 < 20:
            st = H.mount_status(b)
            if st["cb_reconnect_breaks"] > before and st["cb_queued"] == 0:
                break
            time.sleep(0.05)
        else:
            fail("B's reconnect invalidations not done within 20 s")
        cwd_answers(here, "after the server restarted")
        # B lists p again (its promise on p's entries went with the
        # connection), so the removal of w reaches it.
        expect_eq(sorted(os.listdir(b.p("p"))), ["c2", "m", "w"],
                  "B's listing of p after the restart")
        os.unlink(a.p("p", "w", "in"))
        os.rmdir(a.p("p", "w"))
        journal_sent(a)
        try:
            os.getcwd()
            fail("getcwd() on B answered after A removed its working directory")
        except OSError as e:
            expect_eq(e.errno, errno.ENOENT, "getcwd() on B after A removed w")
    finally:
        os.chdir(old)
    b.umount()
    a.umount()


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


# ------------------------------------------------------------------ lifecycle

def big_listing(path, with_stat):
    """Names of directory path (readdir), or {name: st_ino} with a stat of
    each entry through scandir (readdirplus, then lookups)."""
    if not with_stat:
        return os.listdir(path)
    out = {}
    with os.scandir(path) as it:
        for e in it:
            try:
                out[e.name] = e.stat(follow_symlinks=False).st_ino
            except FileNotFoundError:
                out[e.name] = None       # removed by A between readdir and stat
    return out


@test(timeout=200)
def lookup_counts_balance_after_a_10000_entry_listing_under_churn(ctx):
    """Every inode the kernel was handed (by LOOKUP, CREATE, READDIRPLUS)
    is forgotten again. A fresh mount B lists a 10,000-entry directory
    (readdir alone, and readdir plus a stat of each entry) while A creates,
    renames and removes entries in it. Then B pins some entries (O_PATH
    descriptors) and the kernel drops its caches: B's table must hold
    exactly the root, the directory and the pinned inodes (fewer: the
    daemon forgot inodes the kernel still holds; more: lookups the kernel
    never counted). Unpinned and dropped again, the root alone, and that
    is also the count the daemon logs at exit (this kernel sends no FORGET
    at unmount: see the next test)."""
    n = 10000
    churn_s = 8.0 if not H.ASAN else 12.0
    d = fresh(ctx, "big")
    c = P.Conn("127.0.0.1", ctx.srv.port)      # 10,000 creates, without FUSE
    try:
        root = c.hello()
        dfid = c.lookup(root["fid"], d)["fid"]
        for i in range(n):
            c.create(dfid, "e%05d" % i, 0o100644, flags=P.CR_EXCL)
    finally:
        c.close()
    base = set("e%05d" % i for i in range(n))
    B = ctx.mount(ctx.srv, "count")            # a fresh table: root only
    expect_eq(H.mount_status(B)["inodes"], 1, "inodes of a fresh mount")
    stop = threading.Event()
    errors, churned = [], [0]

    def churn():                               # on A, while B lists
        i, t_end = 0, time.time() + churn_s
        while not stop.is_set() and time.time() < t_end:
            p = ctx.A.p(d, "c%05d" % i)
            try:
                write_file(p, b"")
                if i % 3 == 1:
                    os.rename(p, ctx.A.p(d, "r%05d" % i))
                elif i % 3 == 2:
                    os.unlink(p)
            except OSError as e:
                errors.append("A: %s" % e)
                return
            i += 1
            churned[0] = i

    t = threading.Thread(target=churn)
    t0 = time.time()
    t.start()
    rounds = 0
    try:
        # Alternate the two kinds of listing for as long as A changes the
        # directory (at least once each).
        while rounds < 2 or t.is_alive():
            got = big_listing(B.p(d), with_stat=rounds % 2 == 1)
            lost = base - set(got)
            expect(not lost, "listing %d on B lacks %d of the entries that never "
                   "changed, e.g. %s" % (rounds, len(lost), sorted(lost)[:3]))
            if isinstance(got, dict):
                gone = sorted(k for k, v in got.items() if v is None and k in base)
                expect(not gone, "stat on B of entries that never changed failed: %s" % gone[:3])
            rounds += 1
    finally:
        stop.set()
        t.join(60)
    dt = time.time() - t0
    expect(not errors, "errors: %s" % errors[:5])
    st = H.mount_status(B)
    print("# %d listings of %d+ entries on B in %.1fs while A made %d entries "
          "(B: %d BULKSTATs, %d listings fetched, break acknowledged in %d us on "
          "average, %d at most)" % (rounds, n, dt, churned[0], st["rpc.bulkstat.calls"],
                                    st["dir.fetched"], st["cb_ack_us_mean"], st["cb_ack_us_max"]))
    # Quiet now: B's listing is exact, names and inodes.
    got = big_listing(B.p(d), with_stat=True)
    want = big_listing(ctx.A.p(d), with_stat=True)
    expect_eq(len(got), len(want), "entries on B vs A after the churn")
    diff = sorted(set(got.items()) ^ set(want.items()))
    expect(not diff, "B's listing differs from A's: %s" % diff[:6])
    # Pin every entry A made and kept, and every 50th of the others.
    names = sorted(k for k in got if k not in base) + sorted(base)[::50]
    pins = []
    try:
        for name in names:
            pins.append(os.open(B.p(d, name), os.O_PATH | os.O_NOFOLLOW))
        want_held = 2 + len(pins)

        def settle(want):
            # Forgetting is asynchronous (the kernel queues FORGETs as it
            # frees inodes): drop and ask again until the count is right,
            # up to 10 s.
            end = time.time() + 10
            while True:
                H.drop_kernel_caches()
                held = H.mount_status(B)["inodes"]
                if held == want or time.time() > end:
                    return held
                time.sleep(0.2)

        expect_eq(settle(want_held), want_held,
                  "inodes in B's table with %d entries pinned, after the kernel dropped "
                  "its caches (root + directory + pinned)" % len(pins))
    finally:
        for fd in pins:
            os.close(fd)
    expect_eq(settle(1), 1, "inodes in B's table after the kernel dropped its caches, "
              "nothing pinned (the root alone when every lookup was forgotten)")
    B.umount()
    expect(not H.is_mounted(B.path), "B still mounted")
    at_exit = H.exit_inode_count(B)
    expect(at_exit is not None, "no 'inode table at exit' line in %s" % B.daemon_log)
    expect_eq(at_exit, 1, "B's inode table at exit")


@test
def unmount_sends_no_forget_on_this_kernel(ctx):
    """What the lookup-count test relies on, printed: at unmount this
    kernel sends no FORGET, so the daemon's count at exit is what the
    kernel held. Checked: 20 stats of pinned names are 20 inodes, and the
    table at exit holds no more than the kernel held."""
    d = fresh(ctx, "held")
    for i in range(20):
        write_file(ctx.A.p(d, "f%02d" % i), b"")
    M = ctx.mount(ctx.srv, "held")
    # O_PATH descriptors pin the inodes (another test's drop_caches
    # cannot take them), and need one LOOKUP each, no OPEN.
    fds = [os.open(M.p(d, "f%02d" % i), os.O_PATH | os.O_NOFOLLOW) for i in range(20)]
    try:
        for i in range(20):
            os.stat(M.p(d, "f%02d" % i))
        held = H.mount_status(M)["inodes"]
    finally:
        for fd in fds:
            os.close(fd)
    expect_eq(held, 22, "inodes with 20 names pinned (root, directory, 20 files)")
    M.umount()
    at_exit = H.exit_inode_count(M)
    print("# inodes held before unmount %d, in the table at exit %s (%s)"
          % (held, at_exit, "no FORGET at unmount" if at_exit == held else
             "the kernel sent FORGETs at unmount, or dropped its caches before"))
    expect(at_exit is not None and 1 <= at_exit <= held,
           "table at exit holds %s inodes; the kernel held %d" % (at_exit, held))


def timed(fn, deadline, what):
    """Seconds fn() took, run in a thread so that a call that hangs fails
    the test after `deadline` s instead of hanging it."""
    box = {}

    def run():
        t0 = time.time()
        try:
            fn()
        except BaseException as e:
            box["err"] = e
        box["dt"] = time.time() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(deadline)
    if t.is_alive():
        fail("%s: did not return within %.0fs" % (what, deadline))
    if "err" in box:
        raise box["err"]
    return box["dt"]


@test(timeout=120)
def a_client_killed_with_promises_delays_a_change_at_most_the_ack_timeout(ctx):
    """Mount K caches a file and its directory, then its daemon is killed
    with SIGKILL. The server waits for K's acknowledgement at most
    CB_ACK_TIMEOUT_MS (3 s), and a dead process's connection is closed by
    the kernel, so A's changes of what K held return within that bound
    plus a margin (measured and printed), and B sees them."""
    d = fresh(ctx, "killed")
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"before the kill")
    K = ctx.mount(ctx.srv, "killed")
    try:
        expect_eq(read_file(K.p(rel)), b"before the kill", "K reads the file")
        os.listdir(K.p(d))
        expect(H.errno_of(os.lstat, K.p(d, "new")) == errno.ENOENT, "K: new exists")
        st = H.mount_status(K)
        expect(st["promises"] >= 3, "K holds %d promises (root, directory, file)"
               % st["promises"])
        gone = H.kill9_daemon(K)
        limit = ACK_TIMEOUT + (4.0 if H.ASAN else 2.0)
        times = {}
        for what, fn in (("write+close of the file K read", lambda: write_file(ctx.A.p(rel), b"after")),
                         ("create in the directory K listed", lambda: write_file(ctx.A.p(d, "new"), b"n")),
                         ("chmod of the file K read", lambda: os.chmod(ctx.A.p(rel), 0o600))):
            times[what] = timed(fn, limit + 30, what + " on A with K killed")
        print("# K's daemon gone %.3fs after SIGKILL; then on A: %s" % (gone, ", ".join(
            "%s %.3fs" % kv for kv in times.items())))
        for what, dt in times.items():
            expect(dt < limit, "%s on A took %.2fs with K killed; limit %.1fs "
                   "(CB_ACK_TIMEOUT_MS + margin)" % (what, dt, limit))
        expect_eq(read_file(ctx.B.p(rel)), b"after", "B reads A's write")
        expect_eq(sorted(os.listdir(ctx.B.p(d))), ["f", "new"], "B's listing")
    finally:
        K.umount()
    expect(not H.is_mounted(K.path), "the dead mount %s is still mounted" % K.path)
    # The server has dropped K: a change costs no wait now.
    dt = timed(lambda: write_file(ctx.A.p(rel), b"later"), 30, "a later write on A")
    expect(dt < 1.0, "a later write on A took %.2fs" % dt)
    c = P.Conn("127.0.0.1", ctx.srv.port)
    try:
        c.hello()
        print("# server: cb_ack_timeouts %s" % c.status().get("cb_ack_timeouts"))
    finally:
        c.close()


@test(timeout=120)
def directory_moved_by_the_other_client_renames_on_this_one(ctx):
    """A directory B's kernel holds as d0/n0 is moved by A to d1/n7; B
    then renames d1/n7 (back) into d0, and the other way round, with a
    process sitting in it. B's kernel keeps the old name only expired
    (so that getcwd() there still answers), and found under its new
    name the directory must not be the same kernel inode: the kernel
    would have to move the old dentry inside the rename and fails it
    with ESTALE instead (test_model, CAIRN_MODEL_SEED=2929835734)."""
    srv = ctx.server(data=ctx.path("data-mv"))
    a = ctx.mount(srv, "mv-a")
    b = ctx.mount(srv, "mv-b")
    for d in ("d0", "d1"):
        os.mkdir(a.p(d))
    os.mkdir(a.p("d0", "n0"))
    write_file(a.p("d0", "n0", "in"), b"inside")
    journal_sent(a)
    old = os.getcwd()
    try:
        for i, (src, dst) in enumerate(((("d0", "n0"), ("d1", "n7")),
                                        (("d0", "n0"), ("d1", "n7")),
                                        (("d0", "n0"), ("d0", "n5")))):
            expect_eq(read_file(b.p(*src, "in")), b"inside",
                      "B reads %s/in (round %d)" % ("/".join(src), i))
            if i == 1:
                os.chdir(b.p(*src))
            os.rename(a.p(*src), a.p(*dst))
            journal_sent(a)
            try:
                os.rename(b.p(*dst), b.p(*src))
            except OSError as e:
                fail("B's rename(%s, %s) after A moved it there (round "
                     "%d): %s" % ("/".join(dst), "/".join(src), i,
                                  H.errname(e.errno)))
            expect_eq(read_file(b.p(*src, "in")), b"inside",
                      "B reads %s/in after its rename (round %d)"
                      % ("/".join(src), i))
            expect_eq(read_file(a.p(*src, "in")), b"inside",
                      "A reads %s/in after B's rename (round %d)"
                      % ("/".join(src), i))
            if i == 1:
                expect_eq(read_file("in"), b"inside",
                          "a relative read in the moved directory")
    finally:
        os.chdir(old)

@test(timeout=120)
def subdirectory_of_a_moved_directory_renames_on_this_one(ctx):
    """B's kernel holds p/w, p/w/s and p/w/s/g; A moves p/w to q/w. B
    then moves q/w/s/g out to q/g, q/w/s out to q/s and back in, and
    renames it within q/w: its kernel must not meet an old dentry of g
    or s (under the old p/w) inside those renames (it would fail them
    with ESTALE, as for the moved directory itself above)."""
    srv = ctx.server(data=ctx.path("data-mvs"))
    a = ctx.mount(srv, "mvs-a")
    b = ctx.mount(srv, "mvs-b")
    for d in (("p",), ("q",), ("p", "w"), ("p", "w", "s"),
              ("p", "w", "s", "g")):
        os.mkdir(a.p(*d))
    write_file(a.p("p", "w", "s", "in"), b"deep")
    write_file(a.p("p", "w", "s", "g", "in"), b"deep")
    journal_sent(a)
    expect_eq(read_file(b.p("p", "w", "s", "g", "in")), b"deep",
              "B reads p/w/s/g/in")
    os.rename(a.p("p", "w"), a.p("q", "w"))
    journal_sent(a)
    for src, dst in ((("q", "w", "s", "g"), ("q", "g")),
                     (("q", "w", "s"), ("q", "s")),
                     (("q", "s"), ("q", "w", "s")),
                     (("q", "w", "s"), ("q", "w", "t"))):
        try:
            os.rename(b.p(*src), b.p(*dst))
        except OSError as e:
            fail("B's rename(%s, %s) after A moved p/w to q/w: %s"
                 % ("/".join(src), "/".join(dst), H.errname(e.errno)))
        expect_eq(read_file(b.p(*dst, "in")), b"deep",
                  "B reads %s/in" % "/".join(dst))
    journal_sent(b)
    expect_eq(read_file(a.p("q", "w", "t", "in")), b"deep",
              "A reads q/w/t/in")

if __name__ == "__main__":
    H.main(setup=setup)
