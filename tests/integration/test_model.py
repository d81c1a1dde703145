#!/usr/bin/env python3
# timeout: 240
"""test_model.py - random changes on two mounts of one volume, checked
against a model after every one.

A small tree (3 directories of 8 names each) and a seeded random sequence
of changes: create or overwrite a file (with and without O_TRUNC), append,
truncate, unlink, rename, mkdir, rmdir, chmod, utimens; each made on mount
A or B at random, each followed by reads on A or B at random (lstat, read
the whole file, list a directory, lstat a missing name). A Python model of
the tree says what every call must return, errors included. The server
answers a change only after every other client has dropped what the change
made stale, so the moment a call returns, every read on either mount must
match the model exactly: existence, type, size, contents, mode, link
count, inode number and mtime (the last two learned from the first look
after a change that moves them, then held). No sleeps, no retries.

The seed is printed; CAIRN_MODEL_SEED=N repeats a run's operations (not
its timing), CAIRN_MODEL_STEPS=N sets the number of changes. A mismatch names the seed, the step, the mount,
what was expected and what was seen, and the last 20 operations.
"""

import collections
import errno
import os
import random
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, fail  # noqa: E402

NDIRS, NNAMES = 3, 8
FILE_MODES = (0o644, 0o600, 0o640, 0o755, 0o444, 0o700)
DIR_MODES = (0o755, 0o700, 0o750, 0o711)
UMASK = 0o022


class Obj:
    """A file or directory of the model. ino and mtime are None while
    unknown (not yet seen since a change that sets them)."""
    _n = 0

    def __init__(self, kind, mode):
        Obj._n += 1
        self.id = Obj._n
        self.kind = kind              # "f" or "d"
        self.mode = mode & 0o7777
        self.data = bytearray()
        self.ino = None
        self.mtime = None


class Model:
    def __init__(self, rng):
        self.rng = rng
        self.top = [Obj("d", 0o755) for _ in range(NDIRS)]
        self.slots = {}               # (dir index, name) -> Obj
        self.names = ["n%d" % i for i in range(NNAMES)]

    @staticmethod
    def rel(di, name=None):
        return "d%d" % di if name is None else "d%d/%s" % (di, name)

    def nlink(self, o, di=None):
        if o.kind == "f":
            return 1
        if di is None:                # a subdirectory: always empty
            return 2
        return 2 + sum(1 for (d, _), x in self.slots.items() if d == di and x.kind == "d")

    def listing(self, di):
        return sorted(n for (d, n) in self.slots if d == di)

    def rand_slot(self):
        return (self.rng.randrange(NDIRS), self.rng.choice(self.names))

    def pick(self, want=None):
        """A slot: one holding a `want` ("f", "d", "any") object when
        there is one, else any slot (None: any slot at all)."""
        if want and self.rng.random() < 0.85:
            cands = [s for s, o in self.slots.items() if want == "any" or o.kind == want]
            if cands:
                return self.rng.choice(sorted(cands))
        return self.rand_slot()

    def missing(self):
        cands = [(d, n) for d in range(NDIRS) for n in self.names if (d, n) not in self.slots]
        return self.rng.choice(cands) if cands else None


class Run:
    def __init__(self, ctx, seed, steps):
        self.ctx, self.seed, self.steps = ctx, seed, steps
        self.rng = random.Random(seed)
        self.m = Model(self.rng)
        self.log = collections.deque(maxlen=20)
        self.step = 0
        self.base = "model"
        self.mounts = {"A": ctx.A, "B": ctx.B}
        self.counts = collections.Counter()

    # ------------------------------------------------------------ reporting

    def path(self, who, rel):
        return self.mounts[who].p(self.base, rel)

    def mismatch(self, who, what, want, got):
        fail("seed %d (CAIRN_MODEL_SEED=%d to repeat), step %d, on %s: %s: expected %s, got %s\n"
             "last %d operations (newest last):\n  %s"
             % (self.seed, self.seed, self.step, who, what, want, got, len(self.log),
                "\n  ".join(self.log)))

    def note(self, text):
        self.log.append("%5d %s" % (self.step, text))

    # ------------------------------------------------------------ calls

    def call(self, who, desc, want_err, fn, *args):
        """Run fn(*args) on mount `who`; its errno must be want_err (0 for
        success). Returns fn's value."""
        self.note("%s %s (expect %s)" % (who, desc, H.errname(want_err)))
        try:
            v = fn(*args)
            got = 0
        except OSError as e:
            v, got = None, e.errno
        if got != want_err:
            self.mismatch(who, desc, H.errname(want_err), H.errname(got))
        return v

    # ------------------------------------------------------------ changes

    def data(self):
        r = self.rng.random()
        n = (self.rng.randrange(0, 300) if r < 0.7 else
             self.rng.randrange(300, 9000) if r < 0.95 else
             self.rng.randrange(9000, 300000))
        return self.rng.randbytes(n)

    def ch_write(self, who):
        s = self.m.pick("f")
        o = self.m.slots.get(s)
        trunc = self.rng.random() < 0.5
        buf = self.data()
        off = 0
        if not trunc and o is not None and o.kind == "f" and self.rng.random() < 0.5:
            off = self.rng.randrange(0, len(o.data) + 2000)
        mode = self.rng.choice(FILE_MODES)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if trunc else 0)
        want = errno.EISDIR if o is not None and o.kind == "d" else 0

        def op(p):
            fd = os.open(p, flags, mode)
            try:
                view, pos = memoryview(buf), off
                while view:
                    k = os.pwrite(fd, view, pos)
                    view, pos = view[k:], pos + k
            finally:
                os.close(fd)
        self.call(who, "open(%s, %s%s, %o) + pwrite %d bytes at %d + close"
                  % (self.m.rel(*s), "O_CREAT", "|O_TRUNC" if trunc else "", mode, len(buf), off),
                  want, op, self.path(who, self.m.rel(*s)))
        if want:
            return s
        if o is None:
            o = self.m.slots[s] = Obj("f", mode & ~UMASK)
            self.m.top[s[0]].mtime = None
        if trunc:
            o.data = bytearray()
        if buf:
            if len(o.data) < off:
                o.data += bytes(off - len(o.data))
            o.data[off:off + len(buf)] = buf
        o.mtime = None
        return s

    def ch_append(self, who):
        s = self.m.pick("f")
        o = self.m.slots.get(s)
        buf = self.data()[:4000]
        want = errno.ENOENT if o is None else errno.EISDIR if o.kind == "d" else 0

        def op(p):
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
            try:
                view = memoryview(buf)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        self.call(who, "append %d bytes to %s" % (len(buf), self.m.rel(*s)), want,
                  op, self.path(who, self.m.rel(*s)))
        if not want:
            o.data += buf
            o.mtime = None
        return s

    def ch_truncate(self, who):
        s = self.m.pick("f")
        o = self.m.slots.get(s)
        size = self.rng.randrange(0, (len(o.data) if o is not None and o.kind == "f" else 0) + 3000)
        want = errno.ENOENT if o is None else errno.EISDIR if o.kind == "d" else 0
        byfd = self.rng.random() < 0.5
        if byfd and o is not None and o.kind == "d":
            byfd = False                  # opening a directory for writing is EISDIR too

        def op(p):
            if byfd:
                fd = os.open(p, os.O_WRONLY)
                try:
                    os.ftruncate(fd, size)
                finally:
                    os.close(fd)
            else:
                os.truncate(p, size)
        self.call(who, "%s(%s, %d)" % ("ftruncate" if byfd else "truncate", self.m.rel(*s), size),
                  want, op, self.path(who, self.m.rel(*s)))
        if not want:
            if size <= len(o.data):
                del o.data[size:]
            else:
                o.data += bytes(size - len(o.data))
            o.mtime = None
        return s

    def ch_unlink(self, who):
        s = self.m.pick("f")
        o = self.m.slots.get(s)
        want = errno.ENOENT if o is None else errno.EISDIR if o.kind == "d" else 0
        self.call(who, "unlink(%s)" % self.m.rel(*s), want, os.unlink,
                  self.path(who, self.m.rel(*s)))
        if not want:
            del self.m.slots[s]
            self.m.top[s[0]].mtime = None
        return s

    def ch_rename(self, who):
        src = self.m.pick("any")
        dst = self.m.rand_slot() if self.rng.random() < 0.7 else self.m.pick("any")
        so, do = self.m.slots.get(src), self.m.slots.get(dst)
        if so is None:
            want = errno.ENOENT
        elif src == dst or do is None:
            want = 0
        elif so.kind == "f" and do.kind == "d":
            want = errno.EISDIR
        elif so.kind == "d" and do.kind == "f":
            want = errno.ENOTDIR
        else:
            want = 0                      # a file over a file, a directory over an empty one
        self.call(who, "rename(%s, %s)" % (self.m.rel(*src), self.m.rel(*dst)), want, os.rename,
                  self.path(who, self.m.rel(*src)), self.path(who, self.m.rel(*dst)))
        if not want and src != dst:
            self.m.slots[dst] = so
            del self.m.slots[src]
            self.m.top[src[0]].mtime = None
            self.m.top[dst[0]].mtime = None
        return dst

    def ch_mkdir(self, who):
        s = self.m.missing() if self.rng.random() < 0.85 else None
        s = s or self.m.rand_slot()
        mode = self.rng.choice(DIR_MODES)
        want = errno.EEXIST if s in self.m.slots else 0
        self.call(who, "mkdir(%s, %o)" % (self.m.rel(*s), mode), want, os.mkdir,
                  self.path(who, self.m.rel(*s)), mode)
        if not want:
            self.m.slots[s] = Obj("d", mode & ~UMASK)
            self.m.top[s[0]].mtime = None
        return s

    def ch_rmdir(self, who):
        s = self.m.pick("d")
        o = self.m.slots.get(s)
        want = errno.ENOENT if o is None else errno.ENOTDIR if o.kind == "f" else 0
        self.call(who, "rmdir(%s)" % self.m.rel(*s), want, os.rmdir,
                  self.path(who, self.m.rel(*s)))
        if not want:
            del self.m.slots[s]
            self.m.top[s[0]].mtime = None
        return s

    def target(self):
        """A slot or (1 time in 8) one of the three directories."""
        if self.rng.random() < 0.125:
            di = self.rng.randrange(NDIRS)
            return (di, None), self.m.top[di]
        s = self.m.pick("any")
        return s, self.m.slots.get(s)

    def ch_chmod(self, who):
        s, o = self.target()
        mode = self.rng.choice(DIR_MODES if (o is not None and o.kind == "d") else FILE_MODES)
        want = errno.ENOENT if o is None else 0
        self.call(who, "chmod(%s, %o)" % (self.m.rel(*s), mode), want, os.chmod,
                  self.path(who, self.m.rel(*s)), mode)
        if not want:
            o.mode = mode
        return s

    def ch_utime(self, who):
        s, o = self.target()
        want = errno.ENOENT if o is None else 0
        if self.rng.random() < 0.2:
            self.call(who, "utimens(%s, NOW)" % self.m.rel(*s), want, os.utime,
                      self.path(who, self.m.rel(*s)))
            mt = None
        else:
            at = self.rng.randrange(0, 1 << 62)
            mt = self.rng.randrange(0, 1 << 62)
            self.call(who, "utimens(%s, %d, %d)" % (self.m.rel(*s), at, mt), want,
                      lambda p: os.utime(p, ns=(at, mt)), self.path(who, self.m.rel(*s)))
        if not want:
            o.mtime = mt
        return s

    CHANGES = (("write", 30), ("append", 8), ("truncate", 8), ("unlink", 10), ("rename", 14),
               ("mkdir", 6), ("rmdir", 5), ("chmod", 6), ("utime", 6))

    # ------------------------------------------------------------ reads

    def check_obj(self, who, rel, o, nlink, st):
        """lstat result st of rel against model object o."""
        what = "lstat(%s)" % rel
        kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "?"
        if kind != o.kind:
            self.mismatch(who, what + " type", o.kind, kind)
        if stat.S_IMODE(st.st_mode) != o.mode:
            self.mismatch(who, what + " mode", "%o" % o.mode, "%o" % stat.S_IMODE(st.st_mode))
        if o.kind == "f" and st.st_size != len(o.data):
            self.mismatch(who, what + " size", len(o.data), st.st_size)
        if st.st_nlink != nlink:
            self.mismatch(who, what + " nlink", nlink, st.st_nlink)
        if o.ino is None:
            o.ino = st.st_ino
        elif st.st_ino != o.ino:
            self.mismatch(who, what + " inode", o.ino, st.st_ino)
        if o.mtime is None:
            o.mtime = st.st_mtime_ns
        elif st.st_mtime_ns != o.mtime:
            self.mismatch(who, what + " mtime_ns", o.mtime, st.st_mtime_ns)

    def rd_stat(self, who, s):
        rel = self.m.rel(*s)
        if s[1] is None:
            o, nlink = self.m.top[s[0]], self.m.nlink(self.m.top[s[0]], s[0])
        else:
            o = self.m.slots.get(s)
            nlink = self.m.nlink(o) if o is not None else 0
        st = self.call(who, "lstat(%s)" % rel, 0 if o is not None else errno.ENOENT,
                       os.lstat, self.path(who, rel))
        if o is not None:
            self.check_obj(who, rel, o, nlink, st)

    def rd_read(self, who, s):
        rel = self.m.rel(*s)
        o = self.m.slots.get(s)
        want = errno.ENOENT if o is None else errno.EISDIR if o.kind == "d" else 0
        got = self.call(who, "read whole %s" % rel, want, H.read_file, self.path(who, rel))
        if not want and got != o.data:
            first = next((i for i, (a, b) in enumerate(zip(got, o.data)) if a != b),
                         min(len(got), len(o.data)))
            self.mismatch(who, "contents of %s" % rel, "%d bytes" % len(o.data),
                          "%d bytes, first difference at offset %d" % (len(got), first))

    def rd_list(self, who, di):
        rel = self.m.rel(di)
        want = self.m.listing(di)
        if self.rng.random() < 0.5:
            got = self.call(who, "listdir(%s)" % rel, 0, os.listdir, self.path(who, rel))
            if sorted(got) != want:
                self.mismatch(who, "listdir(%s)" % rel, want, sorted(got))
            return

        def scan(p):
            with os.scandir(p) as it:
                return {e.name: e.stat(follow_symlinks=False) for e in it}
        got = self.call(who, "scandir+lstat(%s)" % rel, 0, scan, self.path(who, rel))
        if sorted(got) != want:
            self.mismatch(who, "scandir(%s)" % rel, want, sorted(got))
        for name, st in sorted(got.items()):
            o = self.m.slots[(di, name)]
            self.check_obj(who, self.m.rel(di, name), o, self.m.nlink(o), st)

    def rd_missing(self, who):
        s = self.m.missing()
        if s is None:
            return
        self.call(who, "lstat(%s) of a missing name" % self.m.rel(*s), errno.ENOENT,
                  os.lstat, self.path(who, self.m.rel(*s)))

    def read_some(self, last):
        """1 to 3 reads, on A or B at random; most look at what the last
        change touched (last: its slot), the rest anywhere."""
        for _ in range(self.rng.randrange(1, 4)):
            who = self.rng.choice("AB")
            near = self.rng.random() < 0.6
            s = last if near else self.m.rand_slot()
            r = self.rng.random()
            if r < 0.4:
                self.rd_stat(who, s)
                self.counts["stat"] += 1
            elif r < 0.65:
                if s[1] is None:
                    self.rd_stat(who, s)
                else:
                    self.rd_read(who, s)
                self.counts["read"] += 1
            elif r < 0.9:
                self.rd_list(who, s[0])
                self.counts["list"] += 1
            else:
                self.rd_missing(who)
                self.counts["missing"] += 1

    def check_all(self):
        """Every name and listing on both mounts."""
        for who in "AB":
            for di in range(NDIRS):
                self.rd_stat(who, (di, None))
                self.rd_list(who, di)
                for n in self.m.names:
                    self.rd_stat(who, (di, n))
                    if (di, n) in self.m.slots and self.m.slots[(di, n)].kind == "f":
                        self.rd_read(who, (di, n))

    # ------------------------------------------------------------ run

    def run(self):
        os.mkdir(self.ctx.A.p(self.base))
        for di in range(NDIRS):
            os.mkdir(self.ctx.A.p(self.base, self.m.rel(di)), 0o755)
        kinds = [k for k, _ in self.CHANGES]
        weights = [w for _, w in self.CHANGES]
        t0 = time.time()
        for self.step in range(1, self.steps + 1):
            kind = self.rng.choices(kinds, weights)[0]
            who = self.rng.choice("AB")
            last = getattr(self, "ch_" + kind)(who)
            self.counts[kind] += 1
            self.read_some(last)
        self.step += 1
        self.note("final check of every name on both mounts")
        self.check_all()
        return time.time() - t0


def steps_default():
    n = int(os.environ.get("CAIRN_MODEL_STEPS") or 0)
    return n or (4000 if H.ASAN else 8000)


def setup(ctx):
    ctx.srv = ctx.server()
    ctx.A = ctx.mount(ctx.srv, "a")
    ctx.B = ctx.mount(ctx.srv, "b")


@test
def random_changes_on_a_and_b_match_the_model_on_both(ctx):
    env = os.environ.get("CAIRN_MODEL_SEED")
    seed = int(env) if env else int.from_bytes(os.urandom(4), "little")
    steps = steps_default()
    print("# seed %d (CAIRN_MODEL_SEED=%d to repeat), %d changes" % (seed, seed, steps))
    old = os.umask(UMASK)
    try:
        r = Run(ctx, seed, steps)
        dt = r.run()
    finally:
        os.umask(old)
    print("# %d changes in %.1fs: %s" % (steps, dt, ", ".join(
        "%s %d" % kv for kv in sorted(r.counts.items()))))


if __name__ == "__main__":
    H.main(setup=setup)
