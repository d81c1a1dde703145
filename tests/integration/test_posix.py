#!/usr/bin/env python3
# timeout: 300
"""test_posix.py - the POSIX surface of a Cairn mount, through ordinary
system calls.

One server, mount A (and mount B for a few cross-checks). Where the right
answer is an error code, the same system call is also made on a directory
of the local disk and the two errnos must agree: the local file system is
the reference ("error codes match what Linux local file systems return").
"""

import ctypes
import ctypes.util
import errno
import os
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import write_file, read_file  # noqa: E402,F401
from harness import test, expect, expect_eq, fail, errname, errno_of  # noqa: E402

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 0x10

libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                           ctypes.c_char_p, ctypes.c_uint]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.listxattr.restype = ctypes.c_ssize_t

NOBODY = (65534, 65534)
OTHER = (12345, 12345)   # a second unprivileged user (no passwd entry needed)


def _check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def renameat2(old, new, flags):
    _check(libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags))


def fallocate(fd, mode, off, length):
    _check(libc.fallocate(fd, mode, off, length))


def getxattr_sized(path, name, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(libc.getxattr(os.fsencode(path), os.fsencode(name), buf if size else None, size))
    return n, buf.raw[:n] if size else b""


# ---------------------------------------------------------------- fixture

def setup(ctx):
    ctx.srv = ctx.server()
    ctx.A = ctx.mount(ctx.srv, "a")
    ctx.B = ctx.mount(ctx.srv, "b")
    ctx.L = ctx.local()
    ctx.n = 0


def fresh(ctx, tag="t", mnt=None):
    """A new empty directory on the mount (A unless mnt) and one on local
    disk."""
    ctx.n += 1
    name = "%02d-%s" % (ctx.n, tag)
    m, l = (mnt or ctx.A).p(name), os.path.join(ctx.L, name)
    for d in (m, l):
        os.mkdir(d)
        os.chmod(d, 0o755)
    return m, l


def same_errno(ctx, what, op, setup=None, want=None):
    """Run setup(base) then op(base) on a fresh local dir and a fresh
    Cairn dir; the errnos must match (and equal `want` if given)."""
    m, l = fresh(ctx, "e")
    res = {}
    for base in (l, m):
        if setup:
            setup(base)
        res[base] = errno_of(op, base)
    if want is not None and res[l] != want:
        fail("%s: test assumption broken: local fs gave %s, test expects %s"
             % (what, errname(res[l]), errname(want)))
    if res[m] != res[l]:
        fail("%s: expected %s (as on the local file system), got %s"
             % (what, errname(res[l]), errname(res[m])))


# ---------------------------------------------------------------- basics

@test
def create_stat_and_lookup(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    fd = os.open(f, os.O_CREAT | os.O_WRONLY, 0o640)
    st = os.fstat(fd)
    os.close(fd)
    expect(stat.S_ISREG(st.st_mode), "new file is not S_IFREG: mode %o" % st.st_mode)
    expect_eq(stat.S_IMODE(st.st_mode), 0o640 & ~0o022, "permission bits of new file (umask 022)")
    expect_eq((st.st_uid, st.st_gid), (0, 0), "owner of a file root created")
    expect_eq(st.st_size, 0, "size of new file")
    expect_eq(st.st_nlink, 1, "nlink of new file")
    st2 = os.stat(f)
    expect_eq(st2.st_ino, st.st_ino, "inode number stable between fstat and stat")
    expect("f" in os.listdir(m), "new file missing from readdir")
    H.expect_errno(errno.ENOENT, os.stat, os.path.join(m, "nope"), what="stat of missing name")
    H.expect_errno(errno.ENOENT, os.open, os.path.join(m, "nope"), os.O_RDONLY,
                   what="open of missing name without O_CREAT")


@test
def write_read_round_trip(ctx):
    m, _ = fresh(ctx)
    for size in (0, 1, 4095, 4096, 4097, 65536 + 3, 1 << 20, (3 << 20) + 17):
        data = os.urandom(size)
        f = os.path.join(m, "f%d" % size)
        write_file(f, data)
        expect_eq(os.stat(f).st_size, size, "size of %d-byte file" % size)
        got = read_file(f)
        expect(got == data, "content of %d-byte file differs (got %d bytes)" % (size, len(got)))


@test
def pread_pwrite_offsets(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"A" * 10000, 0)
        os.pwrite(fd, b"hello", 4093)          # straddles a page boundary
        os.pwrite(fd, b"tail", 10000)          # exactly at EOF
        expect_eq(os.pread(fd, 9, 4091), b"AAhelloAA", "pread across page boundary")
        expect_eq(os.pread(fd, 100, 10000), b"tail", "pread at old EOF")
        expect_eq(os.pread(fd, 10, 20000), b"", "pread past EOF")
        expect_eq(os.fstat(fd).st_size, 10004, "size after writes")
        os.lseek(fd, 2, os.SEEK_SET)
        os.write(fd, b"xy")
        expect_eq(os.pread(fd, 6, 0), b"AAxyAA", "write at lseek position")
    finally:
        os.close(fd)
    # Seen the same from mount B after close.
    expect_eq(read_file(ctx.B.p(os.path.relpath(f, ctx.A.path)))[4091:4100], b"AAhelloAA",
              "content on mount B")


@test
def o_excl(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    fd = os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.close(fd)
    same_errno(ctx, "O_CREAT|O_EXCL on existing file",
               lambda b: os.close(os.open(os.path.join(b, "x"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
               setup=lambda b: write_file(os.path.join(b, "x"), b"1"), want=errno.EEXIST)
    same_errno(ctx, "O_CREAT|O_EXCL on existing directory",
               lambda b: os.close(os.open(os.path.join(b, "d"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
               setup=lambda b: os.mkdir(os.path.join(b, "d")), want=errno.EEXIST)
    same_errno(ctx, "O_CREAT|O_EXCL on dangling symlink",
               lambda b: os.close(os.open(os.path.join(b, "s"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
               setup=lambda b: os.symlink("nowhere", os.path.join(b, "s")), want=errno.EEXIST)
    # O_CREAT without O_EXCL opens the existing file, keeping its data.
    write_file(f, b"keep")
    fd = os.open(f, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    expect_eq(read_file(f), b"keep", "O_CREAT on existing file keeps data")


@test
def o_trunc(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"x" * 100000)
    st0 = os.stat(f)
    time.sleep(0.05)
    fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
    st1 = os.fstat(fd)
    os.write(fd, b"new")
    os.close(fd)
    expect_eq(st1.st_size, 0, "size right after open(O_TRUNC)")
    expect(st1.st_mtime_ns > st0.st_mtime_ns, "O_TRUNC did not update mtime")
    expect_eq(read_file(f), b"new", "content after O_TRUNC + write")
    expect_eq(read_file(ctx.B.p(os.path.relpath(f, ctx.A.path))), b"new", "content on mount B")


@test
def o_append(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"0123456789")
    a = os.open(f, os.O_WRONLY | os.O_APPEND)
    b = os.open(f, os.O_WRONLY | os.O_APPEND)
    try:
        os.lseek(a, 0, os.SEEK_SET)
        os.write(a, b"AA")
        os.write(b, b"BBB")
        os.write(a, b"C")
        expect_eq(os.lseek(a, 0, os.SEEK_CUR), 16, "file offset after O_APPEND writes")
    finally:
        os.close(a)
        os.close(b)
    expect_eq(read_file(f), b"0123456789AABBBC", "content after interleaved O_APPEND writes")


@test
def truncate_grow_shrink(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    data = os.urandom(20000)
    write_file(f, data)
    os.truncate(f, 5000)
    expect_eq(os.stat(f).st_size, 5000, "size after truncate down")
    os.truncate(f, 12000)
    got = read_file(f)
    expect_eq(len(got), 12000, "size after truncate up")
    expect(got[:5000] == data[:5000], "data before truncation point changed")
    expect(got[5000:] == bytes(7000), "re-extended region is not zeros (old data leaked back?)")
    fd = os.open(f, os.O_RDWR)
    os.ftruncate(fd, 1)
    expect_eq(os.fstat(fd).st_size, 1, "size after ftruncate")
    os.close(fd)
    same_errno(ctx, "truncate of a directory",
               lambda b: os.truncate(os.path.join(b, "d"), 0),
               setup=lambda b: os.mkdir(os.path.join(b, "d")), want=errno.EISDIR)
    same_errno(ctx, "truncate to negative size",
               lambda b: os.truncate(os.path.join(b, "f"), -1),
               setup=lambda b: write_file(os.path.join(b, "f"), b"1"), want=errno.EINVAL)


@test
def chmod_chown(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"x")
    for mode in (0o000, 0o777, 0o4755, 0o2750, 0o1700, 0o640):
        os.chmod(f, mode)
        expect_eq(stat.S_IMODE(os.stat(f).st_mode), mode, "mode after chmod %o" % mode)
    os.chown(f, 1234, 5678)
    st = os.stat(f)
    expect_eq((st.st_uid, st.st_gid), (1234, 5678), "owner after chown")
    os.chown(f, -1, 42)
    st = os.stat(f)
    expect_eq((st.st_uid, st.st_gid), (1234, 42), "owner after chown(-1, 42)")
    st_b = os.stat(ctx.B.p(os.path.relpath(f, ctx.A.path)))
    expect_eq((st_b.st_uid, st_b.st_gid, stat.S_IMODE(st_b.st_mode)), (1234, 42, 0o640),
              "owner/mode seen on mount B")
    # An unprivileged user may not give a file away or chmod another's file.
    os.chown(f, NOBODY[0], NOBODY[1])
    expect_eq(H.user_errno(*NOBODY, os.chown, f, OTHER[0], -1), errno.EPERM,
              "chown to another user by a non-root owner")
    expect_eq(H.user_errno(*OTHER, os.chmod, f, 0o777), errno.EPERM,
              "chmod of another user's file")
    expect_eq(H.user_errno(*NOBODY, os.chmod, f, 0o600), 0, "chmod by the owner")


@test
def utimens(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"x")
    os.utime(f, ns=(1_000_000_123, 2_000_000_456))
    st = os.stat(f)
    expect_eq((st.st_atime_ns, st.st_mtime_ns), (1_000_000_123, 2_000_000_456),
              "atime/mtime set with nanoseconds")
    expect(st.st_ctime_ns > 2_000_000_456, "utimensat did not set ctime to now")
    # UTIME_OMIT for atime, explicit mtime.
    libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2

    class TS(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
    ts = (TS * 2)((0, UTIME_OMIT), (3_000, 7))
    _check(libc.utimensat(AT_FDCWD, os.fsencode(f), ts, 0))
    st = os.stat(f)
    expect_eq((st.st_atime_ns, st.st_mtime_ns), (1_000_000_123, 3_000_000_000_007),
              "UTIME_OMIT atime, explicit mtime")
    before = time.time_ns()
    time.sleep(0.01)
    ts = (TS * 2)((0, UTIME_NOW), (0, UTIME_OMIT))
    _check(libc.utimensat(AT_FDCWD, os.fsencode(f), ts, 0))
    st = os.stat(f)
    expect(st.st_atime_ns >= before - 1_000_000_000, "UTIME_NOW atime %d is not now (%d)"
           % (st.st_atime_ns, before))
    expect_eq(st.st_mtime_ns, 3_000_000_000_007, "mtime after UTIME_OMIT")
    os.utime(f)  # both now
    st = os.stat(f)
    expect(abs(st.st_mtime_ns - time.time_ns()) < 5_000_000_000, "utime(NULL) mtime is not now")
    # A non-owner with write permission may set "now" but not explicit times.
    os.chmod(f, 0o666)
    expect_eq(H.user_errno(*NOBODY, os.utime, f), 0, "utime(NULL) by non-owner with write access")
    expect_eq(H.user_errno(*NOBODY, os.utime, f, (5, 5)), errno.EPERM,
              "explicit utime by non-owner")
    # Negative and pre-epoch times round trip.
    os.utime(f, ns=(-1_500_000_000, 0))
    expect_eq(os.stat(f).st_atime_ns, -1_500_000_000, "pre-1970 atime")


# ---------------------------------------------------------------- special files

@test
def mknod_special_files(ctx):
    m, _ = fresh(ctx)
    cases = [("fifo", stat.S_IFIFO | 0o644, 0),
             ("sock", stat.S_IFSOCK | 0o600, 0),
             ("chr", stat.S_IFCHR | 0o600, os.makedev(1, 3)),
             ("blk", stat.S_IFBLK | 0o600, os.makedev(7, 300)),
             ("reg", stat.S_IFREG | 0o600, 0)]
    for name, mode, dev in cases:
        p = os.path.join(m, name)
        os.mknod(p, mode, dev)
        st = os.lstat(p)
        expect_eq(stat.S_IFMT(st.st_mode), stat.S_IFMT(mode), "file type of mknod %s" % name)
        expect_eq(stat.S_IMODE(st.st_mode), stat.S_IMODE(mode) & ~0o022, "mode of mknod %s" % name)
        if dev:
            expect_eq(st.st_rdev, dev, "rdev of %s" % name)
        st_b = os.lstat(ctx.B.p(os.path.relpath(p, ctx.A.path)))
        expect_eq((st_b.st_mode, st_b.st_rdev), (st.st_mode, st.st_rdev), "%s seen on mount B" % name)
    # A fifo on the mount works as a pipe.
    p = os.path.join(m, "fifo")
    r = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    w = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
    os.write(w, b"through the fifo")
    expect_eq(os.read(r, 100), b"through the fifo", "data through fifo")
    os.close(w)
    os.close(r)
    # (Device nodes are not opened: network mounts are nodev, like NFS.)
    same_errno(ctx, "mknod over existing name",
               lambda b: os.mknod(os.path.join(b, "x"), stat.S_IFIFO | 0o644),
               setup=lambda b: write_file(os.path.join(b, "x"), b""), want=errno.EEXIST)
    same_errno(ctx, "mkfifo in missing directory",
               lambda b: os.mkfifo(os.path.join(b, "no", "x")), want=errno.ENOENT)


@test
def symlink_readlink(ctx):
    m, _ = fresh(ctx)
    write_file(os.path.join(m, "target"), b"via link")
    os.symlink("target", os.path.join(m, "s"))
    st = os.lstat(os.path.join(m, "s"))
    expect(stat.S_ISLNK(st.st_mode), "lstat of symlink is not S_IFLNK")
    expect_eq(st.st_size, len("target"), "size of symlink")
    expect_eq(os.readlink(os.path.join(m, "s")), "target", "readlink")
    expect_eq(read_file(os.path.join(m, "s")), b"via link", "read through symlink")
    os.symlink("../" + os.path.basename(m) + "/target", os.path.join(m, "rel"))
    expect_eq(read_file(os.path.join(m, "rel")), b"via link", "read through ../ symlink")
    os.symlink("dangling", os.path.join(m, "d"))
    H.expect_errno(errno.ENOENT, os.stat, os.path.join(m, "d"), what="stat of dangling symlink")
    long_target = "x/" * 2000 + "y" * 95      # 4095 bytes
    os.symlink(long_target, os.path.join(m, "long"))
    expect_eq(os.readlink(os.path.join(m, "long")), long_target, "4095-byte symlink target")
    expect_eq(os.readlink(ctx.B.p(os.path.relpath(os.path.join(m, "long"), ctx.A.path))),
              long_target, "long symlink seen on mount B")
    same_errno(ctx, "symlink over existing name",
               lambda b: os.symlink("t", os.path.join(b, "x")),
               setup=lambda b: write_file(os.path.join(b, "x"), b""), want=errno.EEXIST)
    same_errno(ctx, "readlink of a regular file",
               lambda b: os.readlink(os.path.join(b, "x")),
               setup=lambda b: write_file(os.path.join(b, "x"), b""), want=errno.EINVAL)
    same_errno(ctx, "symlink loop",
               lambda b: os.stat(os.path.join(b, "l1")),
               setup=lambda b: (os.symlink("l2", os.path.join(b, "l1")),
                                os.symlink("l1", os.path.join(b, "l2"))), want=errno.ELOOP)
    same_errno(ctx, "open O_NOFOLLOW on symlink",
               lambda b: os.open(os.path.join(b, "s"), os.O_RDONLY | os.O_NOFOLLOW),
               setup=lambda b: os.symlink("t", os.path.join(b, "s")), want=errno.ELOOP)


# ---------------------------------------------------------------- directories

@test
def mkdir_rmdir_errors(ctx):
    m, _ = fresh(ctx)
    d = os.path.join(m, "d")
    os.mkdir(d, 0o750)
    st = os.stat(d)
    expect(stat.S_ISDIR(st.st_mode), "mkdir made no directory")
    expect_eq(stat.S_IMODE(st.st_mode), 0o750, "mode of new directory")
    expect_eq(os.listdir(d), [], "new directory is not empty")
    os.rmdir(d)
    H.expect_errno(errno.ENOENT, os.stat, d, what="stat after rmdir")
    j = os.path.join
    same_errno(ctx, "mkdir existing", lambda b: os.mkdir(j(b, "d")),
               setup=lambda b: os.mkdir(j(b, "d")), want=errno.EEXIST)
    same_errno(ctx, "mkdir over file", lambda b: os.mkdir(j(b, "f")),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.EEXIST)
    same_errno(ctx, "rmdir non-empty", lambda b: os.rmdir(j(b, "d")),
               setup=lambda b: (os.mkdir(j(b, "d")), write_file(j(b, "d", "f"), b"")),
               want=errno.ENOTEMPTY)
    same_errno(ctx, "rmdir of a file", lambda b: os.rmdir(j(b, "f")),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENOTDIR)
    same_errno(ctx, "rmdir missing", lambda b: os.rmdir(j(b, "nope")), want=errno.ENOENT)
    same_errno(ctx, "rmdir '.'", lambda b: os.rmdir(j(b, "d", ".")),
               setup=lambda b: os.mkdir(j(b, "d")), want=errno.EINVAL)
    same_errno(ctx, "unlink of a directory", lambda b: os.unlink(j(b, "d")),
               setup=lambda b: os.mkdir(j(b, "d")), want=errno.EISDIR)
    same_errno(ctx, "unlink missing", lambda b: os.unlink(j(b, "nope")), want=errno.ENOENT)
    same_errno(ctx, "path through a file", lambda b: os.stat(j(b, "f", "x")),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENOTDIR)
    same_errno(ctx, "create under a file", lambda b: write_file(j(b, "f", "x"), b""),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENOTDIR)
    same_errno(ctx, "listdir of a file", lambda b: os.listdir(j(b, "f")),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENOTDIR)
    same_errno(ctx, "open directory for writing",
               lambda b: os.open(j(b, "d"), os.O_WRONLY),
               setup=lambda b: os.mkdir(j(b, "d")), want=errno.EISDIR)
    same_errno(ctx, "O_DIRECTORY on a file",
               lambda b: os.open(j(b, "f"), os.O_RDONLY | os.O_DIRECTORY),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENOTDIR)


@test
def directory_nlink(ctx):
    m, l = fresh(ctx)
    for base in (l, m):
        os.mkdir(os.path.join(base, "d"))
    got, want = [], []
    for base, out in ((l, want), (m, got)):
        d = os.path.join(base, "d")
        out.append(os.stat(d).st_nlink)
        os.mkdir(os.path.join(d, "s1"))
        os.mkdir(os.path.join(d, "s2"))
        write_file(os.path.join(d, "f"), b"")
        out.append(os.stat(d).st_nlink)
        out.append(os.stat(os.path.join(d, "s1")).st_nlink)
        os.rename(os.path.join(d, "s2"), os.path.join(base, "moved"))
        out.append(os.stat(d).st_nlink)
        out.append(os.stat(base).st_nlink)
        os.rmdir(os.path.join(d, "s1"))
        out.append(os.stat(d).st_nlink)
    expect_eq(got, want, "directory nlink [new, +2 subdirs, subdir, after moving one out, "
              "parent of moved, after rmdir] (local fs values are the expectation)")


@test
def hard_links(ctx):
    m, _ = fresh(ctx)
    j = os.path.join
    f = j(m, "f")
    write_file(f, b"shared")
    st0 = os.stat(f)
    time.sleep(0.05)
    os.link(f, j(m, "g"))
    os.mkdir(j(m, "sub"))
    os.link(f, j(m, "sub", "h"))
    st = os.stat(f)
    expect_eq(st.st_nlink, 3, "nlink after two links")
    expect(st.st_ctime_ns > st0.st_ctime_ns, "link() did not update the file's ctime")
    expect_eq(os.stat(j(m, "g")).st_ino, st.st_ino, "inode of link equals original")
    expect_eq(os.stat(ctx.B.p(os.path.relpath(j(m, "sub", "h"), ctx.A.path))).st_nlink, 3,
              "nlink seen on mount B")
    with open(j(m, "g"), "r+b") as fh:
        fh.write(b"SH")
    expect_eq(read_file(j(m, "sub", "h")), b"SHared", "write through one link seen through another")
    os.unlink(f)
    expect_eq(os.stat(j(m, "g")).st_nlink, 2, "nlink after unlinking one name")
    os.rename(j(m, "g"), j(m, "sub", "h"))   # same inode: no-op, both stay
    expect(os.path.exists(j(m, "g")) and os.path.exists(j(m, "sub", "h")),
           "rename between two links of one inode must do nothing")
    os.unlink(j(m, "g"))
    expect_eq(os.stat(j(m, "sub", "h")).st_nlink, 1, "nlink after unlinking second name")
    same_errno(ctx, "link to a directory", lambda b: os.link(j(b, "d"), j(b, "d2")),
               setup=lambda b: os.mkdir(j(b, "d")), want=errno.EPERM)
    same_errno(ctx, "link over existing name", lambda b: os.link(j(b, "f"), j(b, "g")),
               setup=lambda b: (write_file(j(b, "f"), b""), write_file(j(b, "g"), b"")),
               want=errno.EEXIST)
    same_errno(ctx, "link of missing file", lambda b: os.link(j(b, "nope"), j(b, "g")),
               want=errno.ENOENT)


@test
def unlink_while_open(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"still here")
    fd = os.open(f, os.O_RDWR)
    try:
        os.unlink(f)
        H.expect_errno(errno.ENOENT, os.stat, f, what="stat after unlink")
        expect("f" not in os.listdir(m), "unlinked name still listed")
        expect_eq(os.pread(fd, 100, 0), b"still here", "read through fd after unlink")
        os.pwrite(fd, b"STILL", 0)
        expect_eq(os.pread(fd, 100, 0), b"STILL here", "write+read through fd after unlink")
        expect_eq(os.fstat(fd).st_nlink, 0, "nlink of open unlinked file")
    finally:
        os.close(fd)


def server_orphans(ctx):
    """The server's count of unlinked files kept for a client (STATUS)."""
    r = H.run_cairn(["status", ctx.srv.addr], timeout=15)
    if r.returncode != 0:
        fail("cairn status %s: %s" % (ctx.srv.addr, r.stderr.strip()))
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k == "orphans":
            return int(v)
    fail("server STATUS has no orphans key:\n" + r.stdout)


def wait_orphans(ctx, want, what, timeout=10):
    """The client releases unlinked files in the background, in batches:
    wait (bounded) until the server holds `want` of them."""
    end = time.time() + timeout
    n = server_orphans(ctx)
    while n != want and time.time() < end:
        time.sleep(0.05)
        n = server_orphans(ctx)
    expect_eq(n, want, "orphans on the server " + what)


@test
def unlink_while_open_then_rmdir(ctx):
    """No hidden name is left behind: the directory of an open, unlinked
    file can be removed at once, and the file lives on through its
    descriptor until the last close; then the server frees it."""
    m, _ = fresh(ctx)
    d = os.path.join(m, "d")
    os.mkdir(d)
    f = os.path.join(d, "f")
    write_file(f, b"x" * 100000)
    fd = os.open(f, os.O_RDWR)
    try:
        os.unlink(f)
        expect_eq(os.listdir(d), [], "listing after unlink of an open file")
        os.rmdir(d)
        expect(not os.path.exists(d), "directory still there after rmdir")
        expect_eq(os.pread(fd, 10, 99990), b"x" * 10, "read after rmdir")
        os.ftruncate(fd, 5)
        os.pwrite(fd, b"abc", 5)
        expect_eq(os.pread(fd, 100, 0), b"xxxxxabc", "truncate+write after rmdir")
        expect_eq(os.fstat(fd).st_nlink, 0, "nlink after rmdir")
        expect_eq(os.fstat(fd).st_size, 8, "size after truncate+write")
        expect(server_orphans(ctx) >= 1, "the server does not keep the open file")
    finally:
        os.close(fd)
    wait_orphans(ctx, 0, "after the last close")


@test
def rename_over_open_file(ctx):
    m, _ = fresh(ctx)
    f, g = os.path.join(m, "f"), os.path.join(m, "g")
    write_file(f, b"old")
    write_file(g, b"new")
    fd = os.open(f, os.O_RDONLY)
    try:
        os.rename(g, f)
        expect_eq(read_file(f), b"new", "the name after rename over an open file")
        expect_eq(os.pread(fd, 100, 0), b"old", "the replaced file through its descriptor")
        expect_eq(os.fstat(fd).st_nlink, 0, "nlink of the replaced file")
    finally:
        os.close(fd)
    wait_orphans(ctx, 0, "after the replaced file was closed")


def _open_elsewhere_then(ctx, what, change):
    """Mount B has a file open (and read, so it holds a promise on it)
    while mount A unlinks it or renames another file over it (`change`,
    given A's path of the file): B keeps reading and writing it through
    its descriptor, after A has surely released its own hold too, until
    its last close; then the server frees it."""
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"shared data")
    fb = ctx.B.p(os.path.relpath(f, ctx.A.path))
    fd = os.open(fb, os.O_RDWR)
    try:
        expect_eq(os.pread(fd, 100, 0), b"shared data", what + ": read on B before")
        change(f)
        expect_eq(os.pread(fd, 100, 0), b"shared data", what + ": read on B at once")
        # A's kernel forgets the file and A's release (batched, 20 ms)
        # reaches the server: B still holds it.
        H.drop_kernel_caches()
        time.sleep(0.3)
        expect_eq(os.pread(fd, 100, 0), b"shared data", what + ": read on B after A's release")
        os.pwrite(fd, b"SHARED", 0)
        expect_eq(os.pread(fd, 100, 0), b"SHARED data", what + ": write+read on B")
        expect_eq(os.fstat(fd).st_nlink, 0, what + ": nlink on B")
        expect(server_orphans(ctx) >= 1, what + ": the server does not keep B's open file")
    finally:
        os.close(fd)
    wait_orphans(ctx, 0, what + ": after B's last close")


@test
def unlink_while_open_on_other_mount(ctx):
    _open_elsewhere_then(ctx, "unlink on A", os.unlink)


@test
def rename_over_file_open_on_other_mount(ctx):
    def over(f):
        g = os.path.join(os.path.dirname(f), "g")
        write_file(g, b"new")
        os.rename(g, f)
        expect_eq(read_file(f), b"new", "the name after rename over B's open file")
    _open_elsewhere_then(ctx, "rename over on A", over)


@test
def unlink_of_file_cached_on_other_mount(ctx):
    """B only has the file cached (listed, stat'ed, read and closed): it is
    made a holder by A's unlink too, and lets go at once, so the orphan
    goes away without waiting for anything else."""
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"cached")
    rel = os.path.relpath(f, ctx.A.path)
    expect("f" in os.listdir(ctx.B.p(os.path.dirname(rel))), "B lists the file")
    expect_eq(read_file(ctx.B.p(rel)), b"cached", "B reads the file")
    os.stat(ctx.B.p(rel))
    os.unlink(f)
    H.expect_errno(errno.ENOENT, os.stat, ctx.B.p(rel), what="stat on B after unlink on A")
    wait_orphans(ctx, 0, "after unlink of a file only cached on B", timeout=5)


@test
def unlink_many_releases_all(ctx):
    """rm of a few hundred files not open: each is kept by the server only
    until the kernel forgets it (batched releases), none is leaked."""
    m, _ = fresh(ctx)
    d = os.path.join(m, "many")
    os.mkdir(d)
    for i in range(300):
        write_file(os.path.join(d, "f%03d" % i), b"%d" % i)
    for i in range(300):
        os.stat(os.path.join(d, "f%03d" % i))
    # The stats are answered here while the files are still being sent:
    # their write-back (a SETATTR of the mtime of some) is not counted.
    H.wb_idle(ctx.A)
    before = H.mount_status(ctx.A)
    for i in range(300):
        os.unlink(os.path.join(d, "f%03d" % i))
    # Removes answered by the client go to the server from its journal.
    H.wb_idle(ctx.A)
    after = H.mount_status(ctx.A)
    os.rmdir(d)
    wait_orphans(ctx, 0, "after rm of 300 closed files")
    # The kernel writes back the ctime it moved on each of them (writeback
    # cache): answered by the client, a REMOVE is the only call per file.
    expect_eq(after["rpc.setattr.calls"] - before["rpc.setattr.calls"], 0,
              "SETATTR calls for 300 unlinks")
    # Each unlink goes to the server once: alone (a REMOVESAT of one), or
    # in a REMOVESAT with others of the directory.
    d = {k: after.get(k, 0) - before.get(k, 0)
         for k in ("rpc.remove.calls", "rpc.removes.calls",
                   "rpc.removesat.calls", "wb.remove_batches",
                   "wb.removes_batched")}
    expect_eq(d["rpc.remove.calls"] + d["rpc.removes.calls"] +
              d["rpc.removesat.calls"] - d["wb.remove_batches"] +
              d["wb.removes_batched"], 300,
              "unlinks sent alone and in batches for 300 unlinks (%r)" % d)
    # The client marks each removed file stale itself (RM_SELF): no break
    # makes the REMOVE's reply stale, so the directory's attributes in it
    # are trusted and the kernel's permission checks ask for nothing.
    expect(after["rpc.getattr.calls"] - before["rpc.getattr.calls"] <= 2,
           "GETATTR calls for 300 unlinks: %d" %
           (after["rpc.getattr.calls"] - before["rpc.getattr.calls"]))


@test
def unlinked_open_file_keeps_its_attributes(ctx):
    """A file unlinked while open: fstat says nlink 0 and its size, on the
    client that removed it (whose kernel wrote back its ctime) and after
    a write through the fd."""
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"abc")
    os.stat(f)
    fd = os.open(f, os.O_RDWR)
    try:
        os.unlink(f)
        st = os.fstat(fd)
        expect_eq((st.st_nlink, st.st_size), (0, 3), "nlink, size after unlink")
        os.pwrite(fd, b"defg", 3)
        os.fsync(fd)
        st = os.fstat(fd)
        expect_eq((st.st_nlink, st.st_size), (0, 7), "nlink, size after a write")
        expect_eq(os.pread(fd, 10, 0), b"abcdefg", "content through the fd")
    finally:
        os.close(fd)


@test
def open_trunc_on_cached_file(ctx):
    """With no OPEN sent, O_TRUNC arrives as a SETATTR: a cached file is
    truncated on the server and for the other client too."""
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    write_file(f, b"0123456789")
    expect_eq(read_file(f), b"0123456789", "first read")
    fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
    try:
        expect_eq(os.fstat(fd).st_size, 0, "size right after O_TRUNC")
    finally:
        os.close(fd)
    expect_eq(read_file(f), b"", "content after O_TRUNC")
    b = ctx.B.p(os.path.relpath(f, ctx.A.path))
    expect_eq(read_file(b), b"", "content on the other client after O_TRUNC")


# ---------------------------------------------------------------- rename

@test
def rename_basic_and_replace(ctx):
    m, _ = fresh(ctx)
    j = os.path.join
    write_file(j(m, "a"), b"A")
    os.rename(j(m, "a"), j(m, "b"))
    expect_eq(sorted(os.listdir(m)), ["b"], "directory after rename a->b")
    expect_eq(read_file(j(m, "b")), b"A", "content after rename")
    # Replace an existing file: the target's inode goes, the source's stays.
    write_file(j(m, "c"), b"C")
    ino_b = os.stat(j(m, "b")).st_ino
    os.rename(j(m, "b"), j(m, "c"))
    expect_eq(os.stat(j(m, "c")).st_ino, ino_b, "inode after rename over existing file")
    expect_eq(read_file(j(m, "c")), b"A", "content after rename over existing file")
    # Across directories, and a directory with contents.
    os.makedirs(j(m, "d1", "inner"))
    write_file(j(m, "d1", "inner", "f"), b"deep")
    os.mkdir(j(m, "d2"))
    os.rename(j(m, "d1", "inner"), j(m, "d2", "moved"))
    expect_eq(read_file(j(m, "d2", "moved", "f")), b"deep", "file inside moved directory")
    expect_eq(os.listdir(j(m, "d1")), [], "source dir after moving its subdir away")
    # Directory over an empty directory.
    os.mkdir(j(m, "empty"))
    os.rename(j(m, "d2", "moved"), j(m, "empty"))
    expect_eq(os.listdir(j(m, "empty")), ["f"], "directory renamed over an empty one")
    # Rename onto itself is a no-op.
    os.rename(j(m, "c"), j(m, "c"))
    expect_eq(read_file(j(m, "c")), b"A", "rename onto itself")
    # Seen from mount B.
    rel = os.path.relpath(m, ctx.A.path)
    expect_eq(sorted(os.listdir(ctx.B.p(rel))), ["c", "d1", "d2", "empty"], "listing on mount B")


@test
def rename_errors(ctx):
    j = os.path.join
    same_errno(ctx, "rename dir over non-empty dir", lambda b: os.rename(j(b, "a"), j(b, "t")),
               setup=lambda b: (os.mkdir(j(b, "a")), os.mkdir(j(b, "t")), write_file(j(b, "t", "x"), b"")),
               want=errno.ENOTEMPTY)
    same_errno(ctx, "rename file over dir", lambda b: os.rename(j(b, "f"), j(b, "d")),
               setup=lambda b: (write_file(j(b, "f"), b""), os.mkdir(j(b, "d"))), want=errno.EISDIR)
    same_errno(ctx, "rename dir over file", lambda b: os.rename(j(b, "d"), j(b, "f")),
               setup=lambda b: (write_file(j(b, "f"), b""), os.mkdir(j(b, "d"))), want=errno.ENOTDIR)
    same_errno(ctx, "rename dir into its own subdir", lambda b: os.rename(j(b, "d"), j(b, "d", "s", "x")),
               setup=lambda b: os.makedirs(j(b, "d", "s")), want=errno.EINVAL)
    same_errno(ctx, "rename missing source", lambda b: os.rename(j(b, "nope"), j(b, "x")),
               want=errno.ENOENT)
    same_errno(ctx, "rename into missing dir", lambda b: os.rename(j(b, "f"), j(b, "no", "x")),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENOENT)


@test
def renameat2_noreplace(ctx):
    j = os.path.join
    m, _ = fresh(ctx)
    write_file(j(m, "a"), b"A")
    renameat2(j(m, "a"), j(m, "b"), RENAME_NOREPLACE)
    expect_eq(read_file(j(m, "b")), b"A", "RENAME_NOREPLACE to a free name")
    same_errno(ctx, "RENAME_NOREPLACE over existing file",
               lambda b: renameat2(j(b, "a"), j(b, "t"), RENAME_NOREPLACE),
               setup=lambda b: (write_file(j(b, "a"), b"a"), write_file(j(b, "t"), b"t")),
               want=errno.EEXIST)
    # The failed rename must leave both files alone.
    m2, _ = fresh(ctx)
    write_file(j(m2, "a"), b"a")
    write_file(j(m2, "t"), b"t")
    errno_of(renameat2, j(m2, "a"), j(m2, "t"), RENAME_NOREPLACE)
    expect_eq((read_file(j(m2, "a")), read_file(j(m2, "t"))), (b"a", b"t"),
              "files after refused RENAME_NOREPLACE")


@test
def renameat2_exchange(ctx):
    j = os.path.join
    m, _ = fresh(ctx)
    write_file(j(m, "f"), b"file")
    os.makedirs(j(m, "d"))
    write_file(j(m, "d", "inside"), b"in")
    renameat2(j(m, "f"), j(m, "d"), RENAME_EXCHANGE)
    expect(os.path.isdir(j(m, "f")) and os.path.isfile(j(m, "d")), "file and dir not exchanged")
    expect_eq(read_file(j(m, "d")), b"file", "content of exchanged file")
    expect_eq(read_file(j(m, "f", "inside")), b"in", "content inside exchanged dir")
    # Across directories.
    os.mkdir(j(m, "p"))
    write_file(j(m, "p", "x"), b"px")
    renameat2(j(m, "p", "x"), j(m, "d"), RENAME_EXCHANGE)
    expect_eq((read_file(j(m, "p", "x")), read_file(j(m, "d"))), (b"file", b"px"),
              "exchange across directories")
    rel = os.path.relpath(m, ctx.A.path)
    expect_eq(read_file(ctx.B.p(rel, "p", "x")), b"file", "exchange seen on mount B")
    same_errno(ctx, "RENAME_EXCHANGE with missing target",
               lambda b: renameat2(j(b, "a"), j(b, "nope"), RENAME_EXCHANGE),
               setup=lambda b: write_file(j(b, "a"), b""), want=errno.ENOENT)
    same_errno(ctx, "RENAME_EXCHANGE|RENAME_NOREPLACE",
               lambda b: renameat2(j(b, "a"), j(b, "c"), RENAME_EXCHANGE | RENAME_NOREPLACE),
               setup=lambda b: (write_file(j(b, "a"), b""), write_file(j(b, "c"), b"")),
               want=errno.EINVAL)


# ---------------------------------------------------------------- names, paths

@test
def name_length_255_256(ctx):
    m, _ = fresh(ctx)
    n255 = "n" * 255
    write_file(os.path.join(m, n255), b"long name")
    expect_eq(read_file(os.path.join(m, n255)), b"long name", "read of 255-byte name")
    expect(n255 in os.listdir(m), "255-byte name not listed")
    utf = "é" * 127 + "x"   # 255 bytes of UTF-8
    os.mkdir(os.path.join(m, utf))
    expect(utf in os.listdir(m), "255-byte UTF-8 name not listed")
    os.rename(os.path.join(m, n255), os.path.join(m, "m" * 255))
    expect_eq(read_file(os.path.join(m, "m" * 255)), b"long name", "rename to 255-byte name")
    n256 = "z" * 256
    j = os.path.join
    for what, op in (("create", lambda b: write_file(j(b, n256), b"")),
                     ("mkdir", lambda b: os.mkdir(j(b, n256))),
                     ("stat", lambda b: os.stat(j(b, n256))),
                     ("symlink", lambda b: os.symlink("t", j(b, n256))),
                     ("rename to", lambda b: os.rename(j(b, "f"), j(b, n256))),
                     ("link to", lambda b: os.link(j(b, "f"), j(b, n256)))):
        same_errno(ctx, "%s 256-byte name" % what, op,
                   setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENAMETOOLONG)


@test
def deep_path_near_path_max(ctx):
    m, _ = fresh(ctx)
    # Build component by component (each mkdir uses the full path) until
    # the next component would pass PATH_MAX (4096 including the NUL).
    comp = "d" * 200
    path = m
    depth = 0
    while len(os.fsencode(path)) + 1 + len(comp) + 1 + 2 < 4096:
        path = os.path.join(path, comp)
        os.mkdir(path)
        depth += 1
    # Pad the last component so the file's path is exactly 4095 bytes.
    room = 4095 - len(os.fsencode(path)) - 1
    expect(room >= 1, "test setup: no room left")
    fname = "f" * min(room, 255)
    if room > 255:
        path = os.path.join(path, "p" * (room - 255 - 1))
        os.mkdir(path)
        fname = "f" * 255
    f = os.path.join(path, fname)
    expect_eq(len(os.fsencode(f)), 4095, "test setup: path length")
    write_file(f, b"deep")
    expect_eq(read_file(f), b"deep", "read at depth %d, path length 4095" % depth)
    expect_eq(os.stat(f).st_size, 4, "stat of 4095-byte path")
    H.expect_errno(errno.ENAMETOOLONG, os.stat, f + "/x", what="stat of 4097-byte path")
    H.expect_errno(errno.ENAMETOOLONG, os.stat, f + "x", what="stat of 4096-byte path")
    # Relative access from deep inside (no PATH_MAX limit on the tree).
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.mkdir("more", dir_fd=fd)
        write_file("/proc/self/fd/%d/more/g" % fd, b"deeper")
        expect_eq(read_file("/proc/self/fd/%d/more/g" % fd), b"deeper", "file past PATH_MAX depth")
    finally:
        os.close(fd)


@test
def readdir_large_directory(ctx):
    m, _ = fresh(ctx)
    n = 2000
    names = set("entry-%05d-%s" % (i, "x" * (i % 40)) for i in range(n))
    for name in names:
        os.close(os.open(os.path.join(m, name), os.O_CREAT | os.O_WRONLY, 0o644))
    os.mkdir(os.path.join(m, "subdir"))
    listed = os.listdir(m)
    dups = len(listed) - len(set(listed))
    expect(dups == 0, "readdir returned %d duplicate names" % dups)
    missing = (names | {"subdir"}) - set(listed)
    extra = set(listed) - (names | {"subdir"})
    expect(not missing and not extra, "readdir of %d entries: %d missing (e.g. %s), %d extra (e.g. %s)"
           % (n + 1, len(missing), sorted(missing)[:3], len(extra), sorted(extra)[:3]))
    # d_type comes through readdir.
    types = {e.name: e.is_dir(follow_symlinks=False) for e in os.scandir(m)}
    expect(types.get("subdir") is True and types.get(min(names)) is False, "scandir d_type wrong")
    # Mount B sees the same listing.
    rel = os.path.relpath(m, ctx.A.path)
    listed_b = os.listdir(ctx.B.p(rel))
    expect_eq(len(listed_b), n + 1, "number of entries listed on mount B")
    # Removing while listing: every surviving entry is seen exactly once.
    it = os.scandir(m)
    seen = []
    victims = sorted(names)[1000:1500]
    for i, e in enumerate(it):
        seen.append(e.name)
        if i == 10:
            for v in victims:
                os.unlink(os.path.join(m, v))
    it.close()
    survivors = (names | {"subdir"}) - set(victims)
    expect(len(seen) == len(set(seen)), "duplicates while deleting during readdir")
    expect(survivors <= set(seen), "%d surviving entries missed while deleting during readdir"
           % len(survivors - set(seen)))
    # '.' and '..' are there for programs that read them.
    fd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
    os.close(fd)
    expect_eq(os.stat(os.path.join(m, ".")).st_ino, os.stat(m).st_ino, "'.' resolves")
    expect_eq(os.stat(os.path.join(m, "..")).st_ino, os.stat(ctx.A.path).st_ino, "'..' resolves")


# ---------------------------------------------------------------- sizes, holes

@test
def sparse_file(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "sparse")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        off = 1 << 30
        os.pwrite(fd, b"end", off)
        os.pwrite(fd, b"start", 4096 * 3)
        st = os.fstat(fd)
        expect_eq(st.st_size, off + 3, "size of sparse file")
        expect_eq(os.pread(fd, 4096, 0), bytes(4096), "hole at start reads zeros")
        expect_eq(os.pread(fd, 8, 4096 * 3 - 3), b"\0\0\0start", "data after hole")
        expect_eq(os.pread(fd, 4096, 1 << 29), bytes(4096), "hole in the middle reads zeros")
        expect_eq(os.pread(fd, 10, off - 2), b"\0\0end", "data at 1 GiB")
    finally:
        os.close(fd)
    st = os.stat(f)
    expect(st.st_blocks * 512 < 4 << 20,
           "1 GiB sparse file occupies %d bytes on the server (sparse files must stay sparse)"
           % (st.st_blocks * 512))


@test
def offsets_past_4gib(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "big")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        cases = [((1 << 32) - 3, b"across4G"), ((5 << 30) + 123, b"five-gib"),
                 ((1 << 40) + 1, b"one-tib")]
        for off, data in cases:
            os.pwrite(fd, data, off)
        for off, data in cases:
            expect_eq(os.pread(fd, len(data), off), data, "read back at offset %d" % off)
        expect_eq(os.fstat(fd).st_size, (1 << 40) + 1 + 7, "size after write at 1 TiB")
        os.ftruncate(fd, (6 << 30))
        expect_eq(os.fstat(fd).st_size, 6 << 30, "size after truncate to 6 GiB")
        expect_eq(os.pread(fd, 8, (5 << 30) + 123), b"five-gib", "data below truncate point")
        os.lseek(fd, 0, os.SEEK_END)
        fa = os.open(f, os.O_WRONLY | os.O_APPEND)
        os.write(fa, b"appended")
        os.close(fa)
        expect_eq(os.pread(fd, 8, 6 << 30), b"appended", "O_APPEND past 4 GiB")
    finally:
        os.close(fd)
    rel = os.path.relpath(f, ctx.A.path)
    with open(ctx.B.p(rel), "rb") as fh:
        fh.seek((5 << 30) + 123)
        expect_eq(fh.read(8), b"five-gib", "read past 4 GiB on mount B")


@test
def fallocate_modes(ctx):
    m, l = fresh(ctx)
    f = os.path.join(m, "fa")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fallocate(fd, 0, 0, 1 << 20)
        st = os.fstat(fd)
        expect_eq(st.st_size, 1 << 20, "size after fallocate mode 0")
        expect(st.st_blocks * 512 >= 1 << 20, "fallocate mode 0 allocated only %d bytes"
               % (st.st_blocks * 512))
        expect_eq(os.pread(fd, 16, 4096), bytes(16), "fallocated range reads zeros")
        fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20)
        expect_eq(os.fstat(fd).st_size, 1 << 20, "size after fallocate KEEP_SIZE past EOF")
        data = os.urandom(3 * 65536)
        os.pwrite(fd, data, 0)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 65536)
        expect_eq(os.fstat(fd).st_size, 1 << 20, "size after PUNCH_HOLE")
        got = os.pread(fd, 3 * 65536, 0)
        expect(got[:65536] == data[:65536], "data before punched hole changed")
        expect(got[65536:131072] == bytes(65536), "punched hole does not read as zeros")
        expect(got[131072:] == data[131072:], "data after punched hole changed")
        # An unaligned punch zeroes exactly its bytes.
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 10)
        got = os.pread(fd, 120, 0)
        expect(got[:100] == data[:100] and got[100:110] == bytes(10) and got[110:] == data[110:120],
               "unaligned PUNCH_HOLE changed the wrong bytes")
        fallocate(fd, 0, (1 << 20) + 100, 50)   # grows the file
        expect_eq(os.fstat(fd).st_size, (1 << 20) + 150, "size after fallocate past EOF")
    finally:
        os.close(fd)
    rel = os.path.relpath(f, ctx.A.path)
    got_b = read_file(ctx.B.p(rel))
    expect(got_b[65536:131072] == bytes(65536), "punched hole seen on mount B")
    # Errors as on the local disk.
    j = os.path.join

    def punch_no_keep(b):
        fd = os.open(j(b, "f"), os.O_RDWR)
        try:
            fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 10)
        finally:
            os.close(fd)

    same_errno(ctx, "PUNCH_HOLE without KEEP_SIZE", punch_no_keep,
               setup=lambda b: write_file(j(b, "f"), b"x" * 100), want=errno.EOPNOTSUPP)

    def zero_len(b):
        fd = os.open(j(b, "f"), os.O_RDWR)
        try:
            fallocate(fd, 0, 0, 0)
        finally:
            os.close(fd)

    same_errno(ctx, "fallocate of length 0", zero_len,
               setup=lambda b: write_file(j(b, "f"), b"x"), want=errno.EINVAL)


# ---------------------------------------------------------------- xattrs

@test
def xattrs(ctx):
    m, _ = fresh(ctx)
    j = os.path.join
    f = j(m, "f")
    write_file(f, b"")
    os.setxattr(f, "user.color", b"blue")
    os.setxattr(f, "user.empty", b"")
    big = os.urandom(65536)
    os.setxattr(f, "user.big", big)
    expect_eq(os.getxattr(f, "user.color"), b"blue", "getxattr")
    expect_eq(os.getxattr(f, "user.empty"), b"", "empty xattr value")
    expect(os.getxattr(f, "user.big") == big, "64 KiB xattr value differs")
    expect_eq(sorted(os.listxattr(f)), ["user.big", "user.color", "user.empty"], "listxattr")
    n, _v = getxattr_sized(f, "user.color", 0)
    expect_eq(n, 4, "getxattr size query")
    expect_eq(errno_of(getxattr_sized, f, "user.color", 2), errno.ERANGE, "getxattr with small buffer")
    os.setxattr(f, "user.color", b"green", os.XATTR_REPLACE)
    expect_eq(os.getxattr(f, "user.color"), b"green", "value after XATTR_REPLACE")
    rel = os.path.relpath(f, ctx.A.path)
    expect_eq(os.getxattr(ctx.B.p(rel), "user.color"), b"green", "xattr seen on mount B")
    os.removexattr(f, "user.color")
    H.expect_errno(errno.ENODATA, os.getxattr, f, "user.color", what="getxattr after removexattr")
    expect_eq(sorted(os.listxattr(f)), ["user.big", "user.empty"], "listxattr after remove")
    # Directories and symlinks (user.* is not allowed on symlinks: EPERM).
    os.mkdir(j(m, "d"))
    os.setxattr(j(m, "d"), "user.dir", b"yes")
    expect_eq(os.getxattr(j(m, "d"), "user.dir"), b"yes", "xattr on a directory")
    same_errno(ctx, "XATTR_CREATE on existing",
               lambda b: os.setxattr(j(b, "f"), "user.a", b"2", os.XATTR_CREATE),
               setup=lambda b: (write_file(j(b, "f"), b""), os.setxattr(j(b, "f"), "user.a", b"1")),
               want=errno.EEXIST)
    same_errno(ctx, "XATTR_REPLACE on missing",
               lambda b: os.setxattr(j(b, "f"), "user.a", b"2", os.XATTR_REPLACE),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENODATA)
    same_errno(ctx, "getxattr missing", lambda b: os.getxattr(j(b, "f"), "user.none"),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENODATA)
    same_errno(ctx, "removexattr missing", lambda b: os.removexattr(j(b, "f"), "user.none"),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ENODATA)
    same_errno(ctx, "xattr value over 64 KiB",
               lambda b: os.setxattr(j(b, "f"), "user.huge", bytes(65537)),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.E2BIG)
    same_errno(ctx, "xattr name over 255 bytes",
               lambda b: os.setxattr(j(b, "f"), "user." + "n" * 251, b"x"),
               setup=lambda b: write_file(j(b, "f"), b""), want=errno.ERANGE)
    same_errno(ctx, "user xattr on a symlink",
               lambda b: os.setxattr(j(b, "s"), "user.x", b"1", follow_symlinks=False),
               setup=lambda b: os.symlink("t", j(b, "s")), want=errno.EPERM)
    # Unprivileged users need write permission to set user.* xattrs.
    os.chmod(f, 0o644)
    expect_eq(H.user_errno(*NOBODY, os.setxattr, f, "user.x", b"1"), errno.EACCES,
              "setxattr on a file without write permission")
    expect_eq(H.user_errno(*NOBODY, os.getxattr, f, "user.empty"), 0,
              "getxattr on a readable file")


# ---------------------------------------------------------------- sync, statfs

@test
def fsync_fdatasync_fsyncdir(ctx):
    m, _ = fresh(ctx)
    f = os.path.join(m, "f")
    fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"sync me" * 1000)
        os.fsync(fd)
        os.write(fd, b"more")
        os.fdatasync(fd)
    finally:
        os.close(fd)
    dfd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    expect_eq(len(read_file(f)), 7004, "size after fsyncs")


@test
def statfs(ctx):
    sv = os.statvfs(ctx.A.path)
    expect(sv.f_bsize > 0, "f_bsize is 0")
    expect(sv.f_blocks > 0, "f_blocks is 0")
    expect(sv.f_bfree <= sv.f_blocks and sv.f_bavail <= sv.f_blocks,
           "free blocks %d/%d exceed total %d" % (sv.f_bfree, sv.f_bavail, sv.f_blocks))
    expect_eq(sv.f_namemax, 255, "f_namemax")
    expect(sv.f_files >= sv.f_ffree, "f_ffree > f_files")
    sv_b = os.statvfs(ctx.B.path)
    expect_eq(sv_b.f_blocks, sv.f_blocks, "f_blocks on mount B")
    # The figures are the server's disk (here the same machine's): total
    # size exact, free space close (other processes write too).
    local = os.statvfs(ctx.srv.data)
    expect_eq(sv.f_blocks * sv.f_frsize, local.f_blocks * local.f_frsize,
              "total bytes (f_blocks * f_frsize) vs the server's data dir")
    free, lfree = sv.f_bavail * sv.f_frsize, local.f_bavail * local.f_frsize
    expect(abs(free - lfree) <= max(lfree // 20, 64 << 20),
           "available bytes %d, server's data dir has %d" % (free, lfree))


# ---------------------------------------------------------------- permissions

@test
def ownership_and_permissions(ctx):
    m, _ = fresh(ctx)
    j = os.path.join
    os.chmod(m, 0o777)

    def create(path):
        write_file(path, b"mine", 0o640)
        st = os.stat(path)
        return st.st_uid, st.st_gid

    kind, v = H.as_user(*NOBODY, create, j(m, "nobody-file"))
    expect_eq((kind, v), ("ok", NOBODY), "owner of a file created by uid 65534 (as seen by creator)")
    st = os.stat(j(m, "nobody-file"))
    expect_eq((st.st_uid, st.st_gid), NOBODY, "owner of a file uid 65534 created (as seen by root)")
    expect_eq(stat.S_IMODE(st.st_mode), 0o640, "mode of a file uid 65534 created")
    kind, v = H.as_user(*NOBODY, lambda p: (os.mkdir(p), os.stat(p).st_uid)[1], j(m, "nobody-dir"))
    expect_eq((kind, v), ("ok", NOBODY[0]), "owner of a directory made by uid 65534")
    expect_eq(H.user_errno(*OTHER, read_file, j(m, "nobody-file")), errno.EACCES,
              "read of a 0640 file by another user")
    expect_eq(H.user_errno(*OTHER, os.open, j(m, "nobody-file"), os.O_WRONLY), errno.EACCES,
              "open for write of a 0640 file by another user")
    expect_eq(H.user_errno(*NOBODY, read_file, j(m, "nobody-file")), 0, "read by the owner")
    # Root bypasses permission bits.
    os.chmod(j(m, "nobody-file"), 0)
    expect_eq(read_file(j(m, "nobody-file")), b"mine", "root reads a mode-000 file")
    # Search permission on directories.
    os.mkdir(j(m, "private"), 0o700)
    write_file(j(m, "private", "x"), b"")
    expect_eq(H.user_errno(*NOBODY, os.stat, j(m, "private", "x")), errno.EACCES,
              "lookup in a 0700 root-owned directory by another user")
    expect_eq(H.user_errno(*NOBODY, os.listdir, j(m, "private")), errno.EACCES,
              "readdir of a 0700 root-owned directory by another user")
    os.mkdir(j(m, "ro"), 0o755)
    expect_eq(H.user_errno(*NOBODY, write_file, j(m, "ro", "new"), b""), errno.EACCES,
              "create in a 0755 root-owned directory by another user")
    # Files a user creates via mount B are owned by that user too.
    rel = os.path.relpath(m, ctx.A.path)
    kind, v = H.as_user(*OTHER, create, ctx.B.p(rel, "other-file"))
    expect_eq((kind, v), ("ok", OTHER), "owner of a file uid 12345 created on mount B")
    expect_eq(os.stat(j(m, "other-file")).st_uid, OTHER[0], "owner seen on mount A")


@test
def setgid_directory_inheritance(ctx):
    m, l = fresh(ctx)
    res = {}
    for base in (l, m):
        d = os.path.join(base, "sg")
        os.mkdir(d)
        os.chown(d, 0, 4321)
        os.chmod(d, 0o2775)
        write_file(os.path.join(d, "f"), b"")
        os.mkdir(os.path.join(d, "sub"))
        fs, ss = os.stat(os.path.join(d, "f")), os.stat(os.path.join(d, "sub"))
        res[base] = (fs.st_gid, ss.st_gid, bool(ss.st_mode & stat.S_ISGID))
    expect_eq(res[m], res[l], "(file gid, subdir gid, subdir setgid) in a setgid directory")


@test
def sticky_directory(ctx):
    j = os.path.join

    def scenario(base):
        d = j(base, "tmp")
        os.mkdir(d)
        os.chmod(d, 0o1777)
        out = []
        out.append(H.user_errno(*NOBODY, write_file, j(d, "nb"), b"n"))
        out.append(H.user_errno(*OTHER, write_file, j(d, "ot"), b"o"))
        out.append(H.user_errno(*OTHER, os.unlink, j(d, "nb")))          # not owner
        out.append(H.user_errno(*OTHER, os.rename, j(d, "nb"), j(d, "x")))
        out.append(H.user_errno(*OTHER, os.rename, j(d, "ot"), j(d, "nb")))  # replace other's
        out.append(H.user_errno(*NOBODY, os.rename, j(d, "nb"), j(d, "nb2")))  # own file
        out.append(H.user_errno(*NOBODY, os.unlink, j(d, "nb2")))        # owner may
        write_file(j(d, "root"), b"r")
        out.append(H.user_errno(*NOBODY, os.unlink, j(d, "root")))
        out.append(errno_of(os.unlink, j(d, "ot")))                      # root may
        st = os.stat(d)
        out.append(stat.S_IMODE(st.st_mode))
        return out

    m, l = fresh(ctx)
    os.chmod(m, 0o755)
    os.chmod(l, 0o755)
    want = scenario(l)
    got = scenario(m)
    names = ["nobody creates", "other creates", "other unlinks nobody's", "other renames nobody's",
             "other renames over nobody's", "nobody renames own", "nobody unlinks own",
             "nobody unlinks root's", "root unlinks other's", "dir mode"]
    diffs = ["%s: expected %s, got %s" % (n, errname(w) if n != "dir mode" else oct(w),
                                           errname(g) if n != "dir mode" else oct(g))
             for n, w, g in zip(names, want, got) if w != g]
    expect(not diffs, "sticky directory differs from local fs:\n" + "\n".join(diffs))
    expect_eq(want[2], errno.EPERM, "test assumption: local fs refuses unlink in sticky dir")


@test
def sticky_directory_sees_a_chown_just_made(ctx):
    """pjdfstest rename/10.t: root makes a file in a sticky directory and
    gives it to nobody at once, then nobody renames another of its files
    over it, and back, and unlinks it. The chown is answered from the
    client's journal; the server must have it before it judges the rename
    and the unlink by the file's owner (it once refused some with EACCES
    when the RENAME overtook the chown)."""
    j = os.path.join
    m, _ = fresh(ctx, "stickyrace")
    os.chmod(m, 0o777)
    st, src = j(m, "sticky"), j(m, "own")
    os.mkdir(st)
    os.chmod(st, 0o1777)
    os.mkdir(src)
    os.chown(src, *NOBODY)
    os.listdir(st)          # the listing and the token: creates answered here
    fails = []
    for i in range(40):
        mine = j(src, "f%d" % i)
        write_file(mine, b"mine")
        os.chown(mine, *NOBODY)
        victim = j(st, "v%d" % i)
        write_file(victim, b"victim")
        os.chown(victim, *NOBODY)
        e1 = H.user_errno(*NOBODY, os.rename, mine, victim)
        e2 = H.user_errno(*NOBODY, os.rename, victim, mine) if not e1 else -1
        e3 = H.user_errno(*NOBODY, os.unlink, mine) if not e2 else -1
        if (e1, e2, e3) != (0, 0, 0):
            fails.append("round %d: %s" % (i, [errname(e) if e > 0 else e
                                               for e in (e1, e2, e3)]))
    expect(not fails, "renames and unlinks by the new owner refused:\n" +
           "\n".join(fails[:5]))


# ---------------------------------------------------------------- timestamps

def _times(p):
    st = os.lstat(p)
    return st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns


def _changed(before, after, fields):
    return "".join(n for n, b, a in zip("amc", before, after) if a != b and n in fields)


def _obj(o, when):
    return o if isinstance(o, str) else o[0 if when == "before" else 1]


def ts_rule(ctx, what, setup, op, objs, fields, mnt=None):
    """Run setup, wait, op on local and Cairn dirs (on mount mnt, A unless
    given); which of atime/mtime/ctime (those in `fields`) changed on each
    object in objs must be the same. An obj is a path, or (path before,
    path after) for a rename."""
    m, l = fresh(ctx, "ts", mnt)
    res = {}
    for base in (l, m):
        setup(base)
    time.sleep(0.05)
    before = {b: [_times(os.path.join(b, _obj(o, "before"))) for o in objs] for b in (l, m)}
    time.sleep(0.05)
    for base in (l, m):
        op(base)
        after = [_times(os.path.join(base, _obj(o, "after"))) for o in objs]
        res[base] = [_changed(x, y, fields) for x, y in zip(before[base], after)]
    if res[m] != res[l]:
        names = [_obj(o, "after") for o in objs]
        fail("%s: %s changed on %s: expected %s (as on the local fs), got %s"
             % (what, "/".join(f + "time" for f in fields), names, res[l], res[m]))


def _mk(b):
    j = os.path.join
    os.mkdir(j(b, "d"))
    write_file(j(b, "d", "f"), b"0123456789")
    os.symlink("f", j(b, "d", "s"))
    os.mkdir(j(b, "e"))


def _write(b):
    with open(os.path.join(b, "d", "f"), "r+b") as fh:
        fh.write(b"x")


def _run_rules(ctx, rules, fields, mnt=None):
    errors = []
    for what, op, objs in rules:
        try:
            ts_rule(ctx, what, _mk, op, objs, fields, mnt)
        except H.TestFailure as e:
            errors.append(str(e))
    expect(not errors, "\n".join(errors))


@test
def mtime_ctime_rules(ctx):
    j = os.path.join
    rules = [
        ("write", _write, ["d", "d/f"]),
        ("read", lambda b: read_file(j(b, "d", "f")), ["d", "d/f"]),
        ("chmod", lambda b: os.chmod(j(b, "d", "f"), 0o600), ["d", "d/f"]),
        ("chown", lambda b: os.chown(j(b, "d", "f"), 7, 7), ["d", "d/f"]),
        ("truncate", lambda b: os.truncate(j(b, "d", "f"), 3), ["d", "d/f"]),
        # truncate to the same size: truncate_to_same_size_times
        ("open O_TRUNC", lambda b: os.close(os.open(j(b, "d", "f"), os.O_WRONLY | os.O_TRUNC)),
         ["d", "d/f"]),
        ("create", lambda b: write_file(j(b, "d", "new"), b""), ["d", "d/f"]),
        ("mkdir", lambda b: os.mkdir(j(b, "d", "sub")), ["d", "d/f"]),
        ("rmdir", lambda b: (os.mkdir(j(b, "e", "x")), time.sleep(0.05), os.rmdir(j(b, "e", "x"))),
         ["d", "e"]),
        ("unlink", lambda b: os.unlink(j(b, "d", "f")), ["d"]),
        ("unlink one of two links", lambda b: (os.link(j(b, "d", "f"), j(b, "e", "f2")),
                                               os.unlink(j(b, "e", "f2"))), ["d", "d/f"]),
        ("link", lambda b: os.link(j(b, "d", "f"), j(b, "d", "g")), ["d", "d/f"]),
        ("rename within dir", lambda b: os.rename(j(b, "d", "f"), j(b, "d", "g")),
         ["d", ("d/f", "d/g")]),
        ("rename to other dir", lambda b: os.rename(j(b, "d", "f"), j(b, "e", "f")),
         ["d", "e", ("d/f", "e/f")]),
        ("rename dir to other dir", lambda b: os.rename(j(b, "e"), j(b, "d", "e")),
         ["d", ("e", "d/e")]),
        ("symlink", lambda b: os.symlink("x", j(b, "d", "s2")), ["d", "d/f"]),
        ("setxattr", lambda b: os.setxattr(j(b, "d", "f"), "user.t", b"1"), ["d", "d/f"]),
        ("readdir", lambda b: os.listdir(j(b, "d")), ["d", "d/f"]),
        ("utime explicit", lambda b: os.utime(j(b, "d", "f"), (100, 200)), ["d", "d/f"]),
        ("fallocate KEEP_SIZE", lambda b: _falloc(j(b, "d", "f"), FALLOC_FL_KEEP_SIZE, 0, 8192),
         ["d/f"]),
    ]
    _run_rules(ctx, rules, "mc")


@test
def truncate_to_same_size_times(ctx):
    """truncate(2) to a file's own size moves its mtime and ctime on the
    local fs. A --write-through mount does the same. With the writeback
    cache (the default) the kernel keeps a file's times itself and moves
    neither for a size that does not change (docs/cairn.1): then the
    server keeps them too, and both clients see the same times."""
    j = os.path.join
    wt = ctx.mount(ctx.srv, "wt", extra=["--write-through"])
    try:
        ts_rule(ctx, "truncate to same size (--write-through)", _mk,
                lambda b: os.truncate(j(b, "d", "f"), 10), ["d", "d/f"], "mc", wt)
    finally:
        wt.umount()
    m, _ = fresh(ctx, "tsame")
    _mk(m)
    rel = os.path.relpath(j(m, "d", "f"), ctx.A.path)
    before = os.stat(j(m, "d", "f"))
    time.sleep(0.05)
    os.truncate(j(m, "d", "f"), 10)
    on_a, on_b = os.stat(ctx.A.p(rel)), os.stat(ctx.B.p(rel))
    expect_eq((on_a.st_mtime_ns, on_a.st_ctime_ns), (before.st_mtime_ns, before.st_ctime_ns),
              "mtime, ctime on A after truncate to the same size (writeback cache)")
    expect_eq((on_b.st_mtime_ns, on_b.st_ctime_ns), (on_a.st_mtime_ns, on_a.st_ctime_ns),
              "mtime, ctime on B after A's truncate to the same size")


def _falloc(p, mode, off, length):
    fd = os.open(p, os.O_RDWR)
    try:
        fallocate(fd, mode, off, length)
    finally:
        os.close(fd)


@test
def atime_rules(ctx):
    """Cairn keeps atime (the kernel does not, for FUSE), so only reads that
    reach the client daemon move it. With the writeback cache (the
    default) the kernel answers a read of pages this client just wrote
    itself: relatime's first read after a write is checked on a
    --write-through mount, and on another client, whose read reaches its
    daemon."""
    j = os.path.join
    wt = ctx.mount(ctx.srv, "wta", extra=["--write-through"])
    try:
        _run_rules(ctx, [("read (relatime: first read after a write)",
                          lambda b: read_file(j(b, "d", "f")), ["d", "d/f"])], "a", wt)
    finally:
        wt.umount()
    m, _ = fresh(ctx, "atb")
    _mk(m)
    rel = os.path.relpath(j(m, "d", "f"), ctx.A.path)
    # A rewrite well after the create: A's kernel sets mtime from its
    # coarse clock (one tick), which may lie before the server's creation
    # time that atime has (docs/cairn.1, --write-through).
    time.sleep(0.05)
    _write(m)
    before = os.stat(ctx.A.p(rel)).st_atime_ns
    time.sleep(0.05)
    read_file(ctx.B.p(rel))
    expect(os.stat(ctx.B.p(rel)).st_atime_ns > before,
           "atime after B's first read of a file A wrote: unchanged")
    rules = [
        ("write", _write, ["d/f"]),
        ("chmod", lambda b: os.chmod(j(b, "d", "f"), 0o600), ["d/f"]),
        ("readdir (relatime: first after a change)", lambda b: os.listdir(j(b, "d")), ["d"]),
        ("create", lambda b: write_file(j(b, "d", "new"), b""), ["d"]),
    ]
    _run_rules(ctx, rules, "a")


def _append(p, data):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@test
def write_or_truncate_by_another_user_clears_setuid(ctx):
    """Set-user-ID, and set-group-ID with group execute, go when a user
    other than root writes to or truncates the file, and stay when root
    does, as on the local disk. Cairn's server clears them (the kernel
    leaves it to the file system: FUSE_HANDLE_KILLPRIV_V2, which spares
    a capability lookup before every write); both mounts see the mode."""
    m, l = fresh(ctx, "suid")
    rel = os.path.relpath(m, ctx.A.path)
    steps = [
        ("write by uid 1001", lambda p: H.as_user(1001, 1000, _append, p, b"y" * 10)),
        ("truncate by uid 1001", lambda p: H.as_user(1001, 1000, os.truncate, p, 3)),
        ("O_TRUNC open by uid 1001", lambda p: H.as_user(
            1001, 1000, lambda q: os.close(os.open(q, os.O_WRONLY | os.O_TRUNC)), p)),
        ("write by root", lambda p: _append(p, b"z" * 10)),
        ("truncate by root", lambda p: os.truncate(p, 2)),
    ]
    for mode in (0o6775, 0o4755 | 0o020, 0o2765):
        for what, op in steps:
            got = {}
            for base in (l, m):
                p = os.path.join(base, "f")
                write_file(p, b"x" * 100)
                os.chown(p, 1000, 1000)
                os.chmod(p, mode)
                res = op(p)
                expect(res is None or res[0] == "ok", "%s on %s: %r" % (what, base, res))
                got[base] = "%04o" % (os.stat(p).st_mode & 0o7777)
            expect_eq(got[m], got[l], "mode %o after %s" % (mode, what))
            expect_eq("%04o" % (os.stat(ctx.B.p(rel, "f")).st_mode & 0o7777), got[l],
                      "mode %o after %s, seen on mount B" % (mode, what))


@test
def new_file_times_and_cross_mount(ctx):
    m, _ = fresh(ctx)
    t0 = time.time_ns()
    f = os.path.join(m, "f")
    write_file(f, b"x")
    a, mt, c = _times(f)
    for name, v in (("atime", a), ("mtime", mt), ("ctime", c)):
        expect(abs(v - t0) < 5_000_000_000, "%s of a new file is %d, not now (%d)" % (name, v, t0))
    time.sleep(0.05)
    with open(f, "ab") as fh:
        fh.write(b"y")
    rel = os.path.relpath(f, ctx.A.path)
    expect_eq(os.stat(ctx.B.p(rel)).st_mtime_ns, os.stat(f).st_mtime_ns,
              "mtime after write seen on mount B")


if __name__ == "__main__":
    H.main(setup=setup)
