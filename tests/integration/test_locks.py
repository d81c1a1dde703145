#!/usr/bin/env python3
# timeout: 480
"""test_locks.py - flock and fcntl locks across clients (issue 10).

Locks are granted by the server, so two mounts (A and B, separate cache
dirs) of one server exclude each other the way two processes on one
machine do. Every lock holder and waiter is a process of its own (a small
python child driven over a pipe, `Locker` below), so lock owners are real
processes and a blocked F_SETLKW never blocks the suite; every wait is
bounded and every child is killed at the end of its test.

- flock: EX excludes across clients, SH is shared, SH vs EX conflicts,
  LOCK_UN lets the other client in; a blocked LOCK_EX is woken.
- flock is released by close() of the locking descriptor and by the
  exit (or kill -9) of the holding process (within RELEASE_LAG: the
  kernel sends FUSE_RELEASE after close() returns).
- fcntl byte ranges: disjoint ranges coexist, overlapping write locks
  conflict (EAGAIN), read locks share; F_GETLK across clients reports the
  holder's type and range with l_pid 0, on the same client the holder's
  pid.
- Unlocking the middle of a range splits it; a failed upgrade keeps the
  read lock; upgrade and downgrade in place.
- POSIX close semantics: closing any descriptor of the file drops the
  process's locks on it.
- A blocked F_SETLKW is woken when the holder unlocks (server pushes,
  client does not poll: lk.calls stays put during the wait); SIGINT ends
  the wait at once (EINTR), SIGTERM kills the waiter, and neither leaves
  a stale waiter or a lock behind.
- OFD locks (F_OFD_SETLK/F_OFD_SETLKW) exclude across clients and between
  two open file descriptions of one process, and go with the last close
  of their description (within RELEASE_LAG).
- kill -9 of a holder's client daemon: its locks are kept for
  --lock-lease, then dropped (lock_expired) and the waiter is woken.
- Server restart with --lock-grace: the holder's client reclaims its lock
  (lock_reclaims), so the other client still cannot take it, during or
  after the grace; when a lock was held at the stop (DATA/locks-held),
  other requests during the grace get EAGAIN (F_SETLK) or wait until it
  ends (F_SETLKW); with none held there is no grace; a lock that could
  not be reclaimed is lost: the next lock operation on that file fails
  with EIO.
- SQLite from both clients on one database: no lost update, intact file.
- Deadlock between clients: exactly one F_SETLKW gets EDEADLK, no hang.
- `cairn mount --local-locks` keeps locks local to each client.
"""

import errno
import json
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import write_file, read_file  # noqa: E402,F401
from harness import test, expect, expect_eq, fail  # noqa: E402

SERVER_KEYS = ("locks", "lock_waiters", "lock_clients", "locks_granted",
               "lock_conflicts", "lock_wakes", "lock_reclaims", "lock_expired",
               "lock_deadlocks", "lock_grace", "lock_delegations",
               "lock_delegations_granted", "lock_recalls", "lock_delegations_returned",
               "lock_delegations_revoked")
MOUNT_KEYS = ("lk.held", "lk.waiting", "lk.lost", "lk.reclaimed", "lk.calls",
              "lk.delegated", "lk.deleg_granted", "lk.deleg_returned", "lk.local")

LEASE_MS = 1500          # --lock-lease used where a lease matters
GRACE_MS = 1500          # --lock-grace used where a grace matters


def slow():
    """Time factor: sanitizer builds are slower."""
    return 3.0 if H.ASAN else 1.0


# ------------------------------------------------------------ lock children

# A child process that holds descriptors and locks and runs one command per
# line of JSON on stdin, answering one line of JSON on stdout:
# {"e": errno or 0, "v": value, "dt": seconds the call took}. SIGINT during
# a call is caught (KeyboardInterrupt) and answered as EINTR, "intr": true.
CHILD = r'''
import errno, fcntl, json, os, struct, sys, time
FMT = "hhqqi"
SZ = 32
TYPES = {"r": fcntl.F_RDLCK, "w": fcntl.F_WRLCK, "u": fcntl.F_UNLCK}
NAMES = {v: k for k, v in TYPES.items()}
CMDS = {"getlk": fcntl.F_GETLK, "setlk": fcntl.F_SETLK, "setlkw": fcntl.F_SETLKW,
        "ofd_getlk": 36, "ofd_setlk": 37, "ofd_setlkw": 38}
fds = {}
out = sys.stdout
def reply(**kw):
    out.write(json.dumps(kw) + "\n")
    out.flush()
reply(e=0, v=os.getpid(), dt=0)
for line in sys.stdin:
    c = json.loads(line)
    op = c["op"]
    t0 = time.time()
    try:
        try:
            v = None
            if op == "open":
                fds[c["name"]] = os.open(c["path"], c["flags"], 0o666)
            elif op == "close":
                os.close(fds.pop(c["name"]))
            elif op == "flock":
                fcntl.flock(fds[c["name"]], c["how"])
            elif op == "lk":
                buf = struct.pack(FMT, TYPES[c["type"]], 0, c["start"], c["len"], 0)
                buf = buf.ljust(SZ, b"\0")
                res = fcntl.fcntl(fds[c["name"]], CMDS[c["cmd"]], buf)
                if c["cmd"].endswith("getlk"):
                    t, wh, s, l, p = struct.unpack(FMT, res[:struct.calcsize(FMT)])
                    v = [NAMES.get(t, t), s, l, p]
            elif op == "pwrite":
                v = os.pwrite(fds[c["name"]], bytes.fromhex(c["data"]), c["off"])
            elif op == "pread":
                v = os.pread(fds[c["name"]], c["len"], c["off"]).hex()
            elif op == "exit":
                reply(e=0, v=None, dt=0)
                os._exit(0)
            else:
                raise ValueError("unknown op %r" % op)
            reply(e=0, v=v, dt=time.time() - t0)
        except OSError as e:
            reply(e=e.errno, v=str(e), dt=time.time() - t0)
    except KeyboardInterrupt:
        reply(e=errno.EINTR, v="interrupted", intr=True, dt=time.time() - t0)
'''

_PROCS = []      # every Popen started by the running test


def reap_all():
    """Kill every child the test started (SIGKILL, bounded waits). A child
    stuck in the kernel on a FUSE request dies once its mount goes; the
    runner's pid file covers that."""
    procs = list(_PROCS)
    del _PROCS[:]
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    end = time.time() + 5
    for p in procs:
        try:
            p.wait(max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            print("# child %d did not die within 5 s of SIGKILL (blocked in the mount?)" % p.pid)
        for f in (p.stdin, p.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass


def spawn(argv, **kw):
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    _PROCS.append(p)
    H._record_pid(p.pid)
    return p


def lock_test(fn=None, *, timeout=90):
    """@test whose children are reaped (and mounts' holders gone) before
    the harness unmounts."""
    def reg(f):
        def run(ctx):
            try:
                f(ctx)
            finally:
                reap_all()
        return test(name=f.__name__.replace("_", " "), timeout=timeout)(run)
    return reg(fn) if fn is not None else reg


def rng(start, length):
    return "[%d,%s)" % (start, "EOF" if length == 0 else str(start + length))


class Locker:
    """One child process, labelled (e.g. "A1": first process on mount A)."""

    def __init__(self, label):
        self.label = label
        self.proc = spawn([sys.executable, "-u", "-c", CHILD],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.pending = None       # description of a call sent, not answered
        r = self.recv(15 * slow())
        if r is None:
            fail("%s: lock child did not start within %ds" % (label, 15 * slow()))
        self.pid = r["v"]

    # -- transport
    def send(self, what, **cmd):
        if self.pending:
            fail("%s: test bug: %s sent while %s still pending" % (self.label, what, self.pending))
        try:
            self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as e:
            fail("%s: cannot send %s to its child (%s; exit status %s)"
                 % (self.label, what, e, self.proc.poll()))
        self.pending = what

    def recv(self, timeout):
        """The next reply, or None if none came within timeout."""
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                try:
                    st = self.proc.wait(2)
                except subprocess.TimeoutExpired:
                    st = "?"
                fail("%s: child %d exited (status %s) while %s"
                     % (self.label, self.proc.pid, st, self.pending or "idle"))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        self.pending = None
        return json.loads(line)

    def wait_reply(self, timeout, what=None):
        what = what or self.pending
        r = self.recv(timeout)
        if r is None:
            fail("%s: %s did not return within %.1f s" % (self.label, what, timeout))
        return r

    def still_blocked(self, secs):
        """True if the pending call is still unanswered after secs; if it
        answered, fail saying what it answered."""
        what = self.pending
        r = self.recv(secs)
        if r is not None:
            fail("%s: %s should have blocked but returned %s after %.2f s"
                 % (self.label, what, H.errname(r["e"]), r["dt"]))
        return True

    def call(self, what, timeout=None, **cmd):
        self.send(what, **cmd)
        return self.wait_reply(timeout or 15 * slow())

    # -- operations (return errno, 0 on success)
    def open(self, path, name="f", flags=os.O_RDWR):
        r = self.call("open(%s)" % path, op="open", path=path, name=name, flags=flags)
        if r["e"]:
            fail("%s: open(%s): %s" % (self.label, path, H.errname(r["e"])))

    def close(self, name="f"):
        r = self.call("close(%s)" % name, op="close", name=name)
        return r["e"]

    def pwrite(self, data, off, name="f"):
        r = self.call("pwrite(%d bytes at %d)" % (len(data), off), op="pwrite", name=name,
                      data=data.hex(), off=off)
        if r["e"]:
            fail("%s: pwrite: %s" % (self.label, H.errname(r["e"])))

    def pread(self, length, off, name="f"):
        r = self.call("pread(%d bytes at %d)" % (length, off), op="pread", name=name,
                      len=length, off=off)
        if r["e"]:
            fail("%s: pread: %s" % (self.label, H.errname(r["e"])))
        return bytes.fromhex(r["v"])

    def _flock_desc(self, how):
        parts = [n for n, v in (("LOCK_SH", 1), ("LOCK_EX", 2), ("LOCK_UN", 8)) if how & v]
        if how & 4:
            parts.append("LOCK_NB")
        return "flock(%s)" % "|".join(parts)

    def flock(self, how, name="f"):
        return self.call(self._flock_desc(how), op="flock", name=name, how=how)["e"]

    def flock_send(self, how, name="f"):
        self.send(self._flock_desc(how), op="flock", name=name, how=how)

    def _lk_desc(self, cmd, typ, start, length):
        return "fcntl(F_%s, %s %s)" % (cmd.upper(), {"r": "F_RDLCK", "w": "F_WRLCK",
                                                       "u": "F_UNLCK"}[typ], rng(start, length))

    def lk(self, cmd, typ, start, length, name="f"):
        return self.call(self._lk_desc(cmd, typ, start, length), op="lk", cmd=cmd,
                         type=typ, start=start, len=length, name=name)["e"]

    def lk_send(self, cmd, typ, start, length, name="f"):
        self.send(self._lk_desc(cmd, typ, start, length), op="lk", cmd=cmd, type=typ,
                  start=start, len=length, name=name)

    def getlk(self, typ, start, length, name="f", ofd=False):
        """(type 'r'/'w'/'u', start, len, pid) of the F_GETLK answer."""
        cmd = "ofd_getlk" if ofd else "getlk"
        r = self.call(self._lk_desc(cmd, typ, start, length), op="lk", cmd=cmd,
                      type=typ, start=start, len=length, name=name)
        if r["e"]:
            fail("%s: %s failed: %s" % (self.label, self._lk_desc(cmd, typ, start, length),
                                        H.errname(r["e"])))
        return tuple(r["v"])

    def exit(self):
        self.call("exit", op="exit")
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            fail("%s: child did not exit within 10 s after being told to" % self.label)

    def signal(self, sig):
        os.kill(self.proc.pid, sig)



def ok(lk, e, what):
    if e != 0:
        fail("%s: %s failed with %s (expected success)" % (lk.label, what, H.errname(e)))


def refused(lk, e, what, want=errno.EAGAIN):
    if e != want:
        fail("%s: %s: expected %s (conflict), got %s" % (lk.label, what, H.errname(want),
                                                          "success" if e == 0 else H.errname(e)))


# ------------------------------------------------------------ status helpers

def server_status(srv):
    r = H.run_cairn(["status", srv.addr], timeout=15)
    if r.returncode != 0:
        fail("cairn status %s exited %d: %s" % (srv.addr, r.returncode, r.stderr.strip()))
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def skey(srv, key):
    st = server_status(srv)
    if key not in st:
        fail("server STATUS (cairn status %s) has no %r key" % (srv.addr, key))
    return st[key]


def mkey(m, key):
    st = H.mount_status(m)
    if key not in st:
        fail("cairn status %s has no %r key" % (m.path, key))
    return st[key]


def wait_for(what, fn, pred, timeout):
    """Poll fn() until pred(value), at most timeout s; fail naming the last
    value."""
    end = time.time() + timeout * slow()
    v = fn()
    while not pred(v):
        if time.time() > end:
            fail("%s: still %r after %.1f s" % (what, v, timeout * slow()))
        time.sleep(0.05)
        v = fn()
    return v


def new_log_lines(path, skip, pattern):
    import re
    lines = H.tail(path, 1000000)[skip:]
    rx = re.compile(pattern, re.I)
    return [l for l in lines if rx.search(l)]


def setup2(ctx, srv_extra=(), mount_extra=()):
    """A server and two mounts A and B of it, and a 4 KiB file f. The
    server runs with --lock-grace 0 unless srv_extra sets a grace; with
    one, this returns once a grace of the server's first start (if it
    has one: none is needed when no lock was held before) is over."""
    srv_extra = list(srv_extra)
    grace = 0
    if "--lock-grace" in srv_extra:
        grace = int(srv_extra[srv_extra.index("--lock-grace") + 1])
    else:
        srv_extra += ["--lock-grace", "0"]
    t0 = time.time()
    srv = ctx.server(extra=srv_extra)
    A = ctx.mount(srv, "a", extra=mount_extra)
    B = ctx.mount(srv, "b", extra=mount_extra)
    write_file(A.p("f"), b"x" * 4096)
    expect(os.path.exists(B.p("f")), "file created on A not seen on B")
    if grace:
        end = t0 + grace / 1000.0 + 0.2
        while time.time() < end and server_status(srv).get("lock_grace", 1) != 0:
            time.sleep(0.05)
    return srv, A, B


def lockers(*specs):
    """Lockers for (label, path, flags?) specs, each with file opened as 'f'."""
    out = []
    for spec in specs:
        label, path = spec[0], spec[1]
        flags = spec[2] if len(spec) > 2 else os.O_RDWR
        lk = Locker(label)
        lk.open(path, flags=flags)
        out.append(lk)
    return out


EX, SH, UN, NB = 2, 1, 8, 4


# ------------------------------------------------------------ 0. interface

@lock_test
def status_has_lock_counters(ctx):
    srv, A, B = setup2(ctx)
    st = server_status(srv)
    missing = [k for k in SERVER_KEYS if k not in st]
    expect(not missing, "server STATUS lacks %s" % missing)
    for k in SERVER_KEYS:
        if k != "lock_clients":     # client records, made at HELLO
            expect_eq(st[k], 0, "server %s before any lock" % k)
    mst = H.mount_status(A)
    missing = [k for k in MOUNT_KEYS if k not in mst]
    expect(not missing, "cairn status MOUNTPOINT lacks %s" % missing)
    r = H.run_cairn(["mount", "--help"])
    expect("--local-locks" in r.stdout + r.stderr, "cairn mount --help does not list --local-locks")
    r = H.run_cairn(["serve", "--help"])
    for opt in ("--lock-lease", "--lock-grace"):
        expect(opt in r.stdout + r.stderr, "cairn serve --help does not list %s" % opt)


# ------------------------------------------------------------ 1. flock

@lock_test
def flock_exclusion_across_clients(ctx):
    srv, A, B = setup2(ctx)
    a, b, a2 = lockers(("A1", A.p("f")), ("B1", B.p("f")), ("A2", A.p("f")))
    ok(a, a.flock(EX), "flock(LOCK_EX)")
    refused(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) while A holds LOCK_EX", errno.EWOULDBLOCK)
    refused(b, b.flock(SH | NB), "flock(LOCK_SH|LOCK_NB) while A holds LOCK_EX", errno.EWOULDBLOCK)
    expect(skey(srv, "locks") >= 1, "server locks is 0 while A holds a flock")
    expect(mkey(A, "lk.held") >= 1, "A's lk.held is 0 while it holds a flock")
    ok(a, a.flock(UN), "flock(LOCK_UN)")
    ok(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) after A's LOCK_UN")
    refused(a, a.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) while B holds LOCK_EX", errno.EWOULDBLOCK)
    refused(a, a.flock(SH | NB), "flock(LOCK_SH|LOCK_NB) while B holds LOCK_EX", errno.EWOULDBLOCK)
    ok(b, b.flock(UN), "flock(LOCK_UN)")

    # Shared locks on both clients; an exclusive one conflicts with either.
    ok(a, a.flock(SH | NB), "flock(LOCK_SH|LOCK_NB) on A")
    refused(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) on B while A holds LOCK_SH",
            errno.EWOULDBLOCK)
    ok(b, b.flock(SH | NB), "flock(LOCK_SH|LOCK_NB) on B while A holds LOCK_SH")
    refused(a2, a2.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) (2nd process on A) while A and B "
            "hold LOCK_SH", errno.EWOULDBLOCK)
    ok(a, a.flock(UN), "flock(LOCK_UN) of A's LOCK_SH")
    refused(a2, a2.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) on A while only B holds LOCK_SH",
            errno.EWOULDBLOCK)
    ok(b, b.flock(UN), "flock(LOCK_UN) of B's LOCK_SH")
    ok(a2, a2.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) on A once B dropped its LOCK_SH")
    ok(a2, a2.flock(UN), "flock(LOCK_UN)")

    # A blocked LOCK_EX on B is woken by A's LOCK_UN.
    ok(a, a.flock(EX), "flock(LOCK_EX) on A")
    b.flock_send(EX)
    b.still_blocked(0.7 * slow())
    t0 = time.time()
    ok(a, a.flock(UN), "flock(LOCK_UN) on A")
    r = b.wait_reply(5 * slow())
    dt = time.time() - t0
    ok(b, r["e"], "blocked flock(LOCK_EX) on B after A's LOCK_UN")
    expect(dt < 2.0 * slow(), "B's blocked flock(LOCK_EX) returned %.2f s after A's LOCK_UN "
           "(expected < 2 s)" % dt)
    refused(a, a.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) on A while B holds LOCK_EX",
            errno.EWOULDBLOCK)
    ok(b, b.flock(UN), "flock(LOCK_UN)")
    wait_for("server locks after every flock was released", lambda: skey(srv, "locks"),
             lambda v: v == 0, 3)


# ------------------------------------------------------------ 2. flock release

# How late a flock or OFD lock may be released after the last close of
# its open file description (or the holder's exit). The kernel unlocks
# them only through FUSE_RELEASE, which it sends after close() has
# returned (and its own unlock-at-close is skipped: its local lock lists
# are empty when the daemon implements locks), so another client can
# still see the lock for a moment. POSIX locks are dropped by FLUSH,
# which close() waits for: no delay allowed there.
RELEASE_LAG = 1.0


def at_once(what, attempt, desc, lag=0.0, diag_secs=3.0):
    """attempt() (an errno) must succeed at once (lag 0: the lock it needs
    was released before the call that released it returned, as on a
    local disk), or within lag seconds. If it does not, find out whether
    it ever does (for the message)."""
    e = attempt()
    if e == 0:
        return
    t0 = time.time()
    while time.time() - t0 < max(lag, diag_secs):
        time.sleep(0.02)
        if attempt() == 0:
            dt = time.time() - t0
            if dt <= lag * slow():
                print("# %s: %s got %s at first, succeeded %.2f s later (asynchronous "
                      "FUSE_RELEASE; allowed up to %.1f s)" % (what, desc, H.errname(e), dt, lag))
                return
            fail("%s: %s right after it got %s; it succeeded only %.2f s later (the "
                 "release is late%s)" % (what, desc, H.errname(e), dt,
                                         ", more than %.1f s" % lag if lag else ""))
    fail("%s: %s got %s, and still fails %.0f s later (the lock was never released)"
         % (what, desc, H.errname(e), max(lag, diag_secs)))


def released_check(b, what, how_b=EX | NB):
    at_once(what, lambda: b.flock(how_b), "B's flock(LOCK_EX|LOCK_NB)", lag=RELEASE_LAG)


@lock_test
def flock_released_by_close_and_exit(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    # close()
    ok(a, a.flock(EX), "flock(LOCK_EX)")
    refused(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) while A holds it", errno.EWOULDBLOCK)
    ok(a, a.close(), "close of the flocked descriptor")
    released_check(b, "after A closed its flocked descriptor")
    ok(b, b.flock(UN), "flock(LOCK_UN)")

    # a flock lives on while a dup of the descriptor is open: open twice,
    # lock one: closing the other (a different open file) keeps it.
    a.open(A.p("f"), name="f")
    a.open(A.p("f"), name="g")
    ok(a, a.flock(EX, name="f"), "flock(LOCK_EX) on fd f")
    ok(a, a.close(name="g"), "close of another descriptor of the file")
    refused(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) after A closed an unrelated "
            "descriptor (its flock is on another open file)", errno.EWOULDBLOCK)

    # exit of the holding process
    st = a.exit()
    expect_eq(st, 0, "exit status of the flock holder")
    released_check(b, "after the flock holder on A exited")
    ok(b, b.flock(UN), "flock(LOCK_UN)")

    # kill -9 of the holding process
    a2 = Locker("A2")
    a2.open(A.p("f"))
    ok(a2, a2.flock(EX), "flock(LOCK_EX)")
    refused(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) while A2 holds it", errno.EWOULDBLOCK)
    a2.signal(signal.SIGKILL)
    try:
        a2.proc.wait(10)
    except subprocess.TimeoutExpired:
        fail("A2 did not die within 10 s of SIGKILL")
    released_check(b, "after the flock holder on A was killed (SIGKILL)")
    ok(b, b.flock(UN), "flock(LOCK_UN)")
    wait_for("server locks after every flock was released", lambda: skey(srv, "locks"),
             lambda v: v == 0, 3)


# ------------------------------------------------------------ 3. byte ranges

@lock_test
def fcntl_byte_ranges_and_getlk(ctx):
    srv, A, B = setup2(ctx)
    a, b, a2 = lockers(("A1", A.p("f")), ("B1", B.p("f")), ("A2", A.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100)")
    ok(b, b.lk("setlk", "w", 100, 100), "F_SETLK F_WRLCK [100,200) beside A's [0,100)")
    refused(b, b.lk("setlk", "w", 50, 10), "F_SETLK F_WRLCK [50,60) inside A's [0,100)")
    refused(b, b.lk("setlk", "r", 99, 1), "F_SETLK F_RDLCK [99,100) inside A's write lock")
    refused(a, a.lk("setlk", "w", 150, 100), "F_SETLK F_WRLCK [150,250) overlapping B's [100,200)")
    ok(a, a.lk("setlk", "r", 300, 100), "F_SETLK F_RDLCK [300,400)")
    ok(b, b.lk("setlk", "r", 350, 100), "F_SETLK F_RDLCK [350,450) overlapping A's read lock")
    refused(a2, a2.lk("setlk", "w", 420, 10), "F_SETLK F_WRLCK [420,430) (2nd process on A) "
            "inside B's read lock")

    # F_GETLK across clients: type and range of the holder, l_pid 0.
    got = b.getlk("w", 0, 50)
    expect_eq(got, ("w", 0, 100, 0), "B's F_GETLK F_WRLCK [0,50) with A holding F_WRLCK [0,100) "
              "(type, start, len, pid)")
    got = b.getlk("r", 10, 1)
    expect_eq(got, ("w", 0, 100, 0), "B's F_GETLK F_RDLCK [10,11) with A holding F_WRLCK [0,100)")
    got = b.getlk("w", 320, 10)
    expect_eq(got, ("r", 300, 100, 0), "B's F_GETLK F_WRLCK [320,330) with A holding "
              "F_RDLCK [300,400)")
    got = b.getlk("r", 300, 10)
    expect_eq(got[0], "u", "B's F_GETLK F_RDLCK [300,310) where only read locks are (type)")
    got = b.getlk("w", 1000, 10)
    expect_eq(got[0], "u", "B's F_GETLK F_WRLCK [1000,1010) where nothing is locked (type)")
    got = a2.getlk("w", 150, 10)
    expect_eq(got, ("w", 100, 100, 0), "A2's F_GETLK F_WRLCK [150,160) with B holding "
              "F_WRLCK [100,200)")
    # F_GETLK on the same client: the holder's pid.
    got = a2.getlk("w", 0, 50)
    expect_eq(got, ("w", 0, 100, a.pid), "A2's F_GETLK F_WRLCK [0,50) with A1 (pid %d) holding "
              "F_WRLCK [0,100)" % a.pid)
    # A process's own locks never conflict with it.
    got = a.getlk("w", 0, 50)
    expect_eq(got[0], "u", "A1's F_GETLK over its own write lock (type)")

    ok(a, a.lk("setlk", "u", 0, 0), "F_SETLK F_UNLCK [0,EOF)")
    ok(b, b.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) after A unlocked everything")
    ok(b, b.lk("setlk", "u", 0, 0), "F_SETLK F_UNLCK [0,EOF)")
    wait_for("server locks after every range was unlocked", lambda: skey(srv, "locks"),
             lambda v: v == 0, 3)
    expect(skey(srv, "lock_conflicts") >= 4, "server lock_conflicts below the 4 refusals "
           "this test caused")
    expect_eq(mkey(A, "lk.held"), 0, "A's lk.held after unlocking everything")


# ------------------------------------------------------------ 4. split

@lock_test
def unlock_middle_splits_range(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 300), "F_SETLK F_WRLCK [0,300)")
    ok(a, a.lk("setlk", "u", 100, 100), "F_SETLK F_UNLCK [100,200)")
    ok(b, b.lk("setlk", "w", 100, 100), "F_SETLK F_WRLCK [100,200) after A unlocked the middle")
    refused(b, b.lk("setlk", "w", 50, 10), "F_SETLK F_WRLCK [50,60) (A still holds [0,100))")
    refused(b, b.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) (A still holds it)")
    refused(b, b.lk("setlk", "w", 200, 100), "F_SETLK F_WRLCK [200,300) (A still holds it)")
    refused(b, b.lk("setlk", "r", 299, 1), "F_SETLK F_RDLCK [299,300) (A still holds it)")
    ok(b, b.lk("setlk", "w", 300, 100), "F_SETLK F_WRLCK [300,400) past A's range")
    expect_eq(b.getlk("w", 0, 0), ("w", 0, 100, 0), "B's F_GETLK F_WRLCK [0,EOF) (the first "
              "of A's two pieces)")
    expect_eq(b.getlk("w", 250, 10), ("w", 200, 100, 0), "B's F_GETLK F_WRLCK [250,260) "
              "(A's second piece)")
    ok(a, a.lk("setlk", "u", 0, 100), "F_SETLK F_UNLCK [0,100)")
    ok(b, b.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) after A unlocked it")
    refused(b, b.lk("setlk", "w", 200, 100), "F_SETLK F_WRLCK [200,300) (A still holds it)")


# ------------------------------------------------------------ 5. up/downgrade

@lock_test
def upgrade_and_downgrade(ctx):
    srv, A, B = setup2(ctx)
    a, b, b2 = lockers(("A1", A.p("f")), ("B1", B.p("f")), ("B2", B.p("f")))
    ok(a, a.lk("setlk", "r", 0, 100), "F_SETLK F_RDLCK [0,100)")
    ok(b, b.lk("setlk", "r", 0, 100), "F_SETLK F_RDLCK [0,100) beside A's read lock")
    refused(a, a.lk("setlk", "w", 0, 100), "upgrade to F_WRLCK while B holds a read lock")
    ok(b, b.lk("setlk", "u", 0, 100), "F_SETLK F_UNLCK [0,100)")
    # The failed upgrade keeps A's read lock.
    expect_eq(b2.getlk("w", 0, 100), ("r", 0, 100, 0), "B2's F_GETLK F_WRLCK [0,100) after A's "
              "failed upgrade and B1's unlock (A's read lock must remain)")
    refused(b2, b2.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK on B while A still holds its "
            "read lock (after its failed upgrade)")
    ok(a, a.lk("setlk", "w", 0, 100), "upgrade to F_WRLCK once B unlocked")
    refused(b, b.lk("setlk", "r", 0, 100), "F_SETLK F_RDLCK while A holds the upgraded write lock")
    expect_eq(b.getlk("r", 0, 100), ("w", 0, 100, 0), "B's F_GETLK after A's upgrade")
    ok(a, a.lk("setlk", "r", 0, 100), "downgrade to F_RDLCK")
    ok(b, b.lk("setlk", "r", 0, 100), "F_SETLK F_RDLCK after A's downgrade")
    refused(b2, b2.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK while A and B hold read locks")
    # Upgrading a part: A write-locks [40,60) of its read lock once B left.
    ok(b, b.lk("setlk", "u", 0, 0), "F_SETLK F_UNLCK [0,EOF)")
    ok(a, a.lk("setlk", "w", 40, 20), "upgrade of [40,60) inside A's read lock")
    expect_eq(b.getlk("r", 0, 100), ("w", 40, 20, 0), "B's F_GETLK F_RDLCK [0,100) after A "
              "upgraded [40,60)")
    ok(b, b.lk("setlk", "r", 0, 40), "F_SETLK F_RDLCK [0,40) (A holds a read lock there)")
    refused(b, b.lk("setlk", "r", 50, 5), "F_SETLK F_RDLCK [50,55) (A's write piece)")


# ------------------------------------------------------------ 6. close semantics

@lock_test
def posix_lock_dropped_by_any_close(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) via fd1")
    refused(b, b.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) while A holds it")
    a.open(A.p("f"), name="fd2", flags=os.O_RDONLY)
    refused(b, b.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) after A opened fd2")
    ok(a, a.close(name="fd2"), "close(fd2)")
    at_once("after A's process closed another descriptor of the file (POSIX: any close "
            "drops the process's locks)", lambda: b.lk("setlk", "w", 0, 100),
            "B's F_SETLK F_WRLCK [0,100)")
    # fd1 is still open and usable, and the lock really is B's now.
    refused(a, a.lk("setlk", "w", 0, 100), "A's F_SETLK via fd1 while B holds the range")


# ------------------------------------------------------------ 7. wake-up

@lock_test
def blocked_setlkw_woken_on_unlock(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100)")
    wakes0 = skey(srv, "lock_wakes")
    b.lk_send("setlkw", "w", 50, 100)
    b.still_blocked(0.5 * slow())
    wait_for("server lock_waiters while B waits", lambda: skey(srv, "lock_waiters"),
             lambda v: v == 1, 3)
    wait_for("B's lk.waiting while it waits", lambda: mkey(B, "lk.waiting"),
             lambda v: v == 1, 3)
    # Waiting costs no calls: the server pushes the wake-up.
    calls0 = mkey(B, "lk.calls")
    b.still_blocked(2.0)
    calls1 = mkey(B, "lk.calls")
    expect(calls1 - calls0 <= 1, "B made %d lock calls to the server in 2 s of waiting "
           "(polling?)" % (calls1 - calls0))
    t0 = time.time()
    ok(a, a.lk("setlk", "u", 0, 100), "F_SETLK F_UNLCK [0,100)")
    r = b.wait_reply(5 * slow())
    dt = time.time() - t0
    ok(b, r["e"], "B's blocked F_SETLKW after A unlocked")
    expect(dt < 2.0 * slow(), "B's F_SETLKW returned %.2f s after A's unlock (expected < 2 s)" % dt)
    refused(a, a.lk("setlk", "r", 120, 10), "A's F_SETLK F_RDLCK [120,130) inside B's new lock")
    wakes1 = skey(srv, "lock_wakes")
    expect(wakes1 > wakes0, "server lock_wakes did not grow (%d -> %d) though a waiter was woken"
           % (wakes0, wakes1))
    expect_eq(skey(srv, "lock_waiters"), 0, "server lock_waiters after the waiter got its lock")
    expect_eq(mkey(B, "lk.waiting"), 0, "B's lk.waiting after its wait ended")

    # Several waiters on both clients, woken one after the other.
    a2 = Locker("A2")
    a2.open(A.p("f"))
    b2 = Locker("B2")
    b2.open(B.p("f"))
    a2.lk_send("setlkw", "w", 0, 200)
    b2.lk_send("setlkw", "w", 0, 200)
    a2.still_blocked(0.3 * slow())
    b2.still_blocked(0.1)
    wait_for("server lock_waiters with two waiters", lambda: skey(srv, "lock_waiters"),
             lambda v: v == 2, 3)
    ok(b, b.lk("setlk", "u", 0, 0), "B's F_SETLK F_UNLCK [0,EOF)")
    # One of them gets it; the other still waits until it unlocks.
    first = second = None
    end = time.time() + 5 * slow()
    while time.time() < end and first is None:
        for w, o in ((a2, b2), (b2, a2)):
            r = w.recv(0.05)
            if r is not None:
                ok(w, r["e"], "F_SETLKW after the holder unlocked")
                first, second = w, o
                break
    if first is None:
        fail("neither waiter (A2, B2) got [0,200) within %.0f s of B's unlock" % (5 * slow()))
    second.still_blocked(0.5 * slow())
    ok(first, first.lk("setlk", "u", 0, 0), "F_SETLK F_UNLCK [0,EOF)")
    r = second.wait_reply(5 * slow())
    ok(second, r["e"], "F_SETLKW after the first waiter unlocked")
    ok(second, second.lk("setlk", "u", 0, 0), "F_SETLK F_UNLCK [0,EOF)")
    wait_for("server locks when all is unlocked", lambda: skey(srv, "locks"),
             lambda v: v == 0, 3)


# ------------------------------------------------------------ 8. Ctrl-C

@lock_test
def interrupted_waiter_leaves_nothing(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100)")
    b.lk_send("setlkw", "w", 0, 100)
    b.still_blocked(0.5 * slow())
    wait_for("server lock_waiters while B waits", lambda: skey(srv, "lock_waiters"),
             lambda v: v == 1, 3)
    t0 = time.time()
    b.signal(signal.SIGINT)
    r = b.recv(1.0 * slow())
    if r is None:
        fail("B's F_SETLKW did not stop within %.1f s of SIGINT" % (1.0 * slow()))
    dt = time.time() - t0
    if r["e"] != errno.EINTR:
        fail("B's F_SETLKW after SIGINT: expected EINTR, got %s" % (
            "success (it got a lock A still holds!)" if r["e"] == 0 else H.errname(r["e"])))
    print("# SIGINT ended the wait in %.3f s" % dt)
    wait_for("server lock_waiters after the waiter was interrupted",
             lambda: skey(srv, "lock_waiters"), lambda v: v == 0, 2)
    wait_for("B's lk.waiting after the waiter was interrupted", lambda: mkey(B, "lk.waiting"),
             lambda v: v == 0, 2)
    refused(b, b.lk("setlk", "w", 0, 100), "B1's F_SETLK after its interrupted wait "
            "(A still holds the range)")

    # A waiter killed by a signal (SIGTERM: python dies of it) goes too.
    b3 = Locker("B3")
    b3.open(B.p("f"))
    b3.lk_send("setlkw", "w", 0, 100)
    b3.still_blocked(0.5 * slow())
    wait_for("server lock_waiters while B3 waits", lambda: skey(srv, "lock_waiters"),
             lambda v: v == 1, 3)
    t0 = time.time()
    b3.signal(signal.SIGTERM)
    try:
        b3.proc.wait(2.0 * slow())
    except subprocess.TimeoutExpired:
        fail("B3, blocked in F_SETLKW, did not die within %.0f s of SIGTERM" % (2.0 * slow()))
    print("# SIGTERM ended the waiter in %.3f s" % (time.time() - t0))
    wait_for("server lock_waiters after the waiter was killed",
             lambda: skey(srv, "lock_waiters"), lambda v: v == 0, 2)

    ok(a, a.lk("setlk", "u", 0, 100), "A's F_SETLK F_UNLCK [0,100)")
    time.sleep(0.3)    # a stale waiter, if any, would be granted now
    b2 = Locker("B2")
    b2.open(B.p("f"))
    ok(b2, b2.lk("setlk", "w", 0, 100), "a third process on B: F_SETLK F_WRLCK [0,100) once A "
       "unlocked (a stale grant to an interrupted waiter would refuse it)")
    expect_eq(skey(srv, "locks"), 1, "server locks while only B2 holds [0,100)")
    expect_eq(skey(srv, "lock_waiters"), 0, "server lock_waiters")
    refused(a, a.lk("setlk", "w", 0, 100), "A's F_SETLK while B2 holds the range")
    refused(b, b.lk("setlk", "w", 0, 100), "B1's F_SETLK while B2 holds the range")
    ok(b2, b2.lk("setlk", "u", 0, 100), "B2's F_SETLK F_UNLCK")
    wait_for("server locks after B2 unlocked", lambda: skey(srv, "locks"), lambda v: v == 0, 3)
    expect_eq(mkey(B, "lk.held"), 0, "B's lk.held after everything was unlocked")
    expect_eq(mkey(B, "lk.waiting"), 0, "B's lk.waiting after everything was unlocked")


# ------------------------------------------------------------ 9. OFD locks

@lock_test
def ofd_locks_across_clients(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("ofd_setlk", "w", 0, 100), "F_OFD_SETLK F_WRLCK [0,100)")
    refused(b, b.lk("ofd_setlk", "w", 50, 10), "F_OFD_SETLK F_WRLCK [50,60) while A holds [0,100)")
    refused(b, b.lk("ofd_setlk", "r", 0, 1), "F_OFD_SETLK F_RDLCK [0,1) while A holds [0,100)")
    refused(b, b.lk("setlk", "w", 50, 10), "POSIX F_SETLK [50,60) against A's OFD lock")
    ok(b, b.lk("ofd_setlk", "w", 100, 100), "F_OFD_SETLK F_WRLCK [100,200) beside A's")
    got = b.getlk("w", 0, 10, ofd=True)
    expect_eq(got[:3], ("w", 0, 100), "B's F_OFD_GETLK F_WRLCK [0,10) (type, start, len)")
    # Two open file descriptions in one process are two owners.
    a.open(A.p("f"), name="g")
    refused(a, a.lk("ofd_setlk", "w", 0, 10, name="g"), "F_OFD_SETLK on a second open file "
            "description of the same process (A's first holds [0,100))")
    # A blocked F_OFD_SETLKW on A woken by B's unlock.
    a.lk_send("ofd_setlkw", "w", 100, 100, name="g")
    a.still_blocked(0.5 * slow())
    t0 = time.time()
    ok(b, b.lk("ofd_setlk", "u", 100, 100), "F_OFD_SETLK F_UNLCK [100,200)")
    r = a.wait_reply(5 * slow())
    ok(a, r["e"], "A's blocked F_OFD_SETLKW [100,200) after B unlocked")
    expect(time.time() - t0 < 2.0 * slow(), "A's F_OFD_SETLKW returned %.2f s after B's unlock"
           % (time.time() - t0))
    # Closing the description drops its OFD lock.
    ok(a, a.close(name="f"), "close of the description holding [0,100)")
    at_once("after A closed the open file description holding an OFD lock on [0,100)",
            lambda: b.lk("ofd_setlk", "w", 0, 100), "B's F_OFD_SETLK F_WRLCK [0,100)",
            lag=RELEASE_LAG)
    refused(b, b.lk("ofd_setlk", "w", 150, 10), "F_OFD_SETLK [150,160) (A's other description "
            "holds [100,200))")


# ------------------------------------------------------------ 10. kill -9 daemon

@lock_test(timeout=120)
def killed_client_locks_expire_after_lease(ctx):
    srv, A, B = setup2(ctx, srv_extra=("--lock-lease", str(LEASE_MS)))
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100)")
    refused(b, b.lk("setlk", "w", 0, 100), "F_SETLK while A holds the range")
    nlog = len(srv.log_lines())
    H.kill9_daemon(A)
    t_kill = time.time()
    # The lease keeps A's lock for now.
    e = b.lk("setlk", "w", 0, 100)
    dt = time.time() - t_kill
    if dt < LEASE_MS / 1000.0 * 0.7:
        refused(b, e, "F_SETLK %.2f s after A's daemon was killed (the lease of %d ms must "
                "keep A's lock)" % (dt, LEASE_MS))
    else:
        print("# (the F_SETLK right after the kill took %.2f s: lease not checked)" % dt)
    b.lk_send("setlkw", "w", 0, 100)
    limit = LEASE_MS / 1000.0 + 5 * slow()
    r = b.recv(max(0.1, limit - (time.time() - t_kill)))
    dt = time.time() - t_kill
    if r is None:
        fail("B's F_SETLKW did not get A's lock within %.1f s of kill -9 of A's daemon "
             "(lease %d ms)" % (limit, LEASE_MS))
    ok(b, r["e"], "B's F_SETLKW after A's lease ran out")
    print("# B got the lock %.2f s after the kill (lease %.1f s)" % (dt, LEASE_MS / 1000.0))
    expect(dt >= LEASE_MS / 1000.0 * 0.8, "B got the lock %.2f s after A's daemon was killed, "
           "before the %d ms lease ran out" % (dt, LEASE_MS))
    expect(skey(srv, "lock_expired") >= 1, "server lock_expired is 0 after a lease ran out")
    expect_eq(skey(srv, "lock_waiters"), 0, "server lock_waiters after B got the lock")
    logged = new_log_lines(srv.log, nlog, r"lock")
    expect(logged, "the server logged nothing about dropping the killed client's locks")
    print("# server log: %s" % logged[-1])
    # The holder on A is stranded on a dead mount: kill it before umount.
    reap_all()


# ------------------------------------------------------------ 11. restart

def restart(srv):
    """Stop the server (SIGTERM) and start it on the same data dir and
    port (with the same options). Returns the time just before the start."""
    st = srv.stop()
    expect_eq(st, 0, "exit status of cairn serve after SIGTERM")
    t = time.time()
    srv.start()
    return t


def sleep_past_grace(t_start):
    """Until GRACE_MS (and half a second) after a start at t_start."""
    left = t_start + GRACE_MS / 1000.0 + 0.5 - time.time()
    if left > 0:
        time.sleep(left)


@lock_test(timeout=120)
def server_restart_reclaims_locks(ctx):
    srv, A, B = setup2(ctx, srv_extra=("--lock-grace", str(GRACE_MS)))
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100)")
    refused(b, b.lk("setlk", "w", 0, 100), "F_SETLK while A holds the range")
    t_start = restart(srv)
    # During the grace (B's call also makes B reconnect).
    refused(b, b.lk("setlk", "w", 0, 100), "B's F_SETLK right after the restart (A holds the "
            "range; and the grace is on)")
    print("# B's first F_SETLK answered %.2f s after the restart" % (time.time() - t_start))
    # A's client reclaims by itself (nothing here touches A's mount).
    wait_for("A's lk.reclaimed after the server restart", lambda: mkey(A, "lk.reclaimed"),
             lambda v: v >= 1, GRACE_MS / 1000.0 + 5)
    sleep_past_grace(t_start)
    refused(b, b.lk("setlk", "w", 0, 100), "B's F_SETLK after the grace ended (A reclaimed "
            "the range)")
    refused(b, b.lk("setlk", "r", 99, 1), "B's F_SETLK F_RDLCK [99,100) after the grace")
    expect_eq(b.getlk("w", 0, 10), ("w", 0, 100, 0), "B's F_GETLK after the restart")
    expect(skey(srv, "lock_reclaims") >= 1, "server lock_reclaims is 0 after a restart "
           "while A held a lock")
    expect_eq(mkey(A, "lk.lost"), 0, "A's lk.lost after a successful reclaim")
    ok(a, a.lk("setlk", "u", 0, 100), "A's F_SETLK F_UNLCK after the restart")
    ok(b, b.lk("setlk", "w", 0, 100), "B's F_SETLK once A unlocked")
    refused(a, a.lk("setlk", "w", 0, 100), "A's F_SETLK while B holds the range")


@lock_test(timeout=120)
def downgrade_during_the_grace_is_granted(ctx):
    """A holds a write lock through a server restart and downgrades it to
    a read lock during the grace, as SQLite does at the end of every
    transaction: granted (it takes nothing new). It was refused (EAGAIN),
    which SQLite reports as "disk I/O error" on the COMMIT that had
    already succeeded. A new range during the grace is still refused."""
    grace = 4000
    srv, A, B = setup2(ctx, srv_extra=("--lock-grace", str(grace)))
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "A's F_SETLK F_WRLCK [0,100)")
    t_start = restart(srv)
    wait_for("A's lk.reclaimed after the server restart", lambda: mkey(A, "lk.reclaimed"),
             lambda v: v >= 1, grace / 1000.0)
    if time.time() - t_start >= grace / 1000.0 - 0.5:
        fail("A reclaimed %.2f s after the restart: too late to test the %d ms grace"
             % (time.time() - t_start, grace))
    ok(a, a.lk("setlk", "r", 0, 100), "A's downgrade to F_RDLCK [0,100) during the grace")
    ok(a, a.lk("setlk", "r", 10, 20), "A's F_RDLCK [10,30) again during the grace")
    refused(a, a.lk("setlk", "w", 0, 100), "A's upgrade back to F_WRLCK during the grace")
    refused(a, a.lk("setlk", "r", 200, 10), "A's F_RDLCK on a new range during the grace")
    expect(time.time() - t_start < grace / 1000.0, "the checks above ran past the grace "
           "(%.2f s after the restart)" % (time.time() - t_start))
    expect_eq(b.getlk("w", 0, 10), ("r", 0, 100, 0), "B's F_GETLK: A's lock is a read lock")
    left = t_start + grace / 1000.0 + 0.5 - time.time()
    if left > 0:
        time.sleep(left)
    ok(b, b.lk("setlk", "r", 0, 10), "B's F_RDLCK beside A's read lock after the grace")


@lock_test(timeout=120)
def grace_period_refuses_new_locks(ctx):
    grace = 4000
    srv, A, B = setup2(ctx, srv_extra=("--lock-grace", str(grace)))
    write_file(A.p("g"), b"g" * 100)
    a, b, a2 = lockers(("A1", A.p("f")), ("B1", B.p("f")), ("A2", A.p("g")))
    ok(b, b.lk("setlk", "w", 0, 10), "F_SETLK F_WRLCK [0,10)")
    ok(b, b.lk("setlk", "u", 0, 10), "F_SETLK F_UNLCK")
    # B's lock came with f's delegation, which B would hand back after the
    # restart (in the grace, like a reclaim): A's question recalls it, so
    # that B holds nothing of f through the restart.
    expect_eq(a.getlk("w", 0, 10)[0], "u", "A's F_GETLK of f after B unlocked (type)")
    # A lock held through the restart (of another file): the server must
    # give its holder the grace period.
    ok(a2, a2.lk("setlk", "w", 0, 1), "A2's F_SETLK on g, held through the restart")
    t_before = restart(srv)
    expect_eq(skey(srv, "lock_grace"), 1, "server lock_grace right after a restart while A "
              "held a lock")
    e = b.lk("setlk", "w", 0, 10)
    t_ans = time.time()
    if t_ans - t_before >= grace / 1000.0 - 0.2:
        fail("B's first F_SETLK after the restart took %.2f s (the %d ms grace was over: "
             "reconnect too slow to test the grace)" % (t_ans - t_before, grace))
    refused(b, e, "F_SETLK on an unlocked file %.2f s into the grace (nothing to reclaim there)"
            % (t_ans - t_before))
    refused(a, a.lk("setlk", "r", 500, 10), "A's F_SETLK F_RDLCK during the grace")
    a.lk_send("setlkw", "w", 0, 10)
    r = a.recv(grace / 1000.0 + 5 * slow())
    t_got = time.time()
    if r is None:
        fail("A's F_SETLKW during the grace did not return within %.0f s of the restart"
             % (t_got - t_before))
    ok(a, r["e"], "A's F_SETLKW issued during the grace")
    expect(t_got - t_before >= grace / 1000.0 - 0.1, "A's F_SETLKW returned %.2f s after the "
           "restart, before the %d ms grace ended" % (t_got - t_before, grace))
    print("# F_SETLKW during the grace returned %.2f s after the restart" % (t_got - t_before))
    expect_eq(skey(srv, "lock_grace"), 0, "server lock_grace after the grace")
    refused(b, b.lk("setlk", "w", 0, 10), "B's F_SETLK after the grace while A holds the range")
    b.open(B.p("g"), name="g")
    refused(b, b.lk("setlk", "w", 0, 1, name="g"), "B's F_SETLK on g, whose lock A2 held "
            "through the restart (reclaimed)")


@lock_test(timeout=120)
def no_grace_after_a_stop_with_no_lock_held(ctx):
    srv, A, B = setup2(ctx, srv_extra=("--lock-grace", "4000"))
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 10), "F_SETLK F_WRLCK [0,10)")
    ok(a, a.lk("setlk", "u", 0, 10), "F_SETLK F_UNLCK")
    expect(os.path.exists(os.path.join(srv.data, "locks-held")),
           "no DATA/locks-held marker while the server has granted locks")
    # A's lock came with f's delegation: while a client holds one, the
    # server cannot know it holds no lock, and keeps the marker. B's
    # question recalls it.
    expect_eq(b.getlk("w", 0, 10)[0], "u", "B's F_GETLK of f after A unlocked (type)")
    expect_eq(skey(srv, "lock_delegations"), 0, "delegations held after B's F_GETLK")
    t_before = restart(srv)
    expect(not os.path.exists(os.path.join(srv.data, "locks-held")),
           "DATA/locks-held still there after a stop with no lock held")
    # During a grace this F_SETLK would be refused (EAGAIN), not held:
    # granted is the proof, not how soon (a time bound can fail under
    # ASan on a loaded machine, where the start alone takes seconds).
    ok(b, b.lk("setlk", "w", 0, 10), "B's F_SETLK right after a restart that followed a "
       "stop with no lock held (no grace needed)")
    print("# B's F_SETLK granted %.2f s after the restart began" % (time.time() - t_before))
    expect_eq(skey(srv, "lock_grace"), 0, "server lock_grace after such a restart")


@lock_test(timeout=120)
def unreclaimable_lock_is_lost(ctx):
    srv, A, B = setup2(ctx, srv_extra=("--lock-grace", str(GRACE_MS)))
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100)")
    nlog = len(H.tail(A.daemon_log, 1000000))
    # A's daemon sleeps through the restart and the grace; B takes the range.
    H.sigstop(A.pid)
    try:
        t_start = restart(srv)
        sleep_past_grace(t_start)
        e = b.lk("setlk", "w", 0, 100)
        if e != 0:
            # B's first call after the restart may land in the grace.
            time.sleep(GRACE_MS / 1000.0)
            e = b.lk("setlk", "w", 0, 100)
        ok(b, e, "B's F_SETLK F_WRLCK [0,100) after the grace (A never reclaimed)")
    finally:
        os.kill(A.pid, signal.SIGCONT)
    # A wakes, reconnects, cannot reclaim: the lock is lost.
    end = time.time() + 20 * slow()
    while True:
        try:
            H.with_deadline(10, "stat of A's root", os.stat, A.path)
        except OSError:
            pass
        if mkey(A, "lk.lost") >= 1:
            break
        if time.time() > end:
            fail("A's lk.lost still 0 %.0f s after its daemon resumed (B holds A's range)"
                 % (20 * slow()))
        time.sleep(0.2)
    e = a.lk("setlk", "w", 200, 10)
    expect_eq(H.errname(e), "EIO", "A1's next lock operation (F_SETLK [200,210)) on the file "
              "whose lock was lost")
    logged = new_log_lines(A.daemon_log, nlog, r"lost|lock")
    expect(logged, "A's daemon logged nothing about the lost lock")
    print("# A's log: %s" % logged[-1])
    expect_eq(mkey(A, "lk.reclaimed"), 0, "A's lk.reclaimed (its reclaim was refused)")
    # B's lock is untouched.
    b2 = Locker("B2")
    b2.open(B.p("f"))
    expect_eq(b2.getlk("w", 0, 10), ("w", 0, 100, b.pid), "B2's F_GETLK: B1 still holds [0,100)")


# ------------------------------------------------------------ 12. SQLite

SQLITE_WORKER = r'''
import sqlite3, sys, time, traceback
path, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
grow = len(sys.argv) > 4 and sys.argv[4] == "grow"
t0 = time.time()
try:
    con = sqlite3.connect(path, timeout=30, isolation_level=None)
    for i in range(n):
        con.execute("BEGIN IMMEDIATE")
        con.execute("UPDATE counter SET n = n + 1")
        if grow:
            con.execute("INSERT INTO rows VALUES (?, randomblob(3000))", (tag,))
        con.execute("COMMIT")
        if (i + 1) % 100 == 0:
            print("%s %d %.1f" % (tag, i + 1, time.time() - t0), flush=True)
    con.close()
except Exception:
    traceback.print_exc()
    print("%s FAILED after %.1f s" % (tag, time.time() - t0), flush=True)
    sys.exit(1)
print("%s done %.1f" % (tag, time.time() - t0), flush=True)
'''


@lock_test(timeout=200)
def sqlite_from_two_clients(ctx):
    # 400 from each client take about 4 s here, both clients at it all
    # the while (a lost update shows within the first few dozen when the
    # locks do not hold across clients); the sanitizer build, several
    # times slower, does 200 each.
    sqlite_two_clients(ctx, int(os.environ.get("CAIRN_LOCK_SQLITE_N") or
                                (200 if H.ASAN else 400)), grow=False)


@lock_test(timeout=200)
def sqlite_growing_from_two_clients(ctx):
    """Each transaction also adds a 3000-byte row, so the database grows
    under the other client's open descriptor: the size must follow the
    lock (a descriptor opened before kept the old size, and SQLite read
    the new pages as past the end of the file)."""
    sqlite_two_clients(ctx, 100 if H.ASAN else 250, grow=True)


def sqlite_two_clients(ctx, n, grow):
    import sqlite3
    srv, A, B = setup2(ctx)
    db = A.p("counter.db")
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("CREATE TABLE counter (n INTEGER)")
    con.execute("INSERT INTO counter VALUES (0)")
    con.execute("CREATE TABLE rows (tag TEXT, b BLOB)")
    con.close()
    outs = {}
    procs = {}
    for tag, m in (("A", A), ("B", B)):
        outs[tag] = open(ctx.path("sqlite-%s.out" % tag), "w+b")
        argv = [sys.executable, "-c", SQLITE_WORKER, m.p("counter.db"), str(n), tag]
        procs[tag] = spawn(argv + (["grow"] if grow else []),
                           stdin=subprocess.DEVNULL, stdout=outs[tag], stderr=subprocess.STDOUT)
    t0 = time.time()
    limit = 120 * slow()
    for tag, p in procs.items():
        try:
            p.wait(max(0.1, limit - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            pass

    def report():
        lines = []
        for tag in procs:
            outs[tag].seek(0)
            text = outs[tag].read().decode("utf-8", "replace").strip().splitlines()
            lines.append("worker %s (exit %s): %s" % (tag, procs[tag].poll(),
                                                       " | ".join(text[-8:])))
        return "\n".join(lines)
    if any(p.poll() is None for p in procs.values()):
        fail("SQLite workers not done within %.0f s:\n%s" % (limit, report()))
    dt = time.time() - t0
    print("# %d+%d SQLite transactions from two clients in %.1f s" % (n, n, dt))
    for tag, p in procs.items():
        expect_eq(p.returncode, 0, "exit status of SQLite worker %s\n%s" % (tag, report()))
    for tag, m in (("A", A), ("B", B)):
        con = sqlite3.connect(m.p("counter.db"), timeout=30)
        try:
            got = con.execute("SELECT n FROM counter").fetchall()
            chk = con.execute("PRAGMA integrity_check").fetchall()
            rows = con.execute("SELECT tag, count(*) FROM rows GROUP BY tag "
                               "ORDER BY tag").fetchall()
        finally:
            con.close()
        expect_eq(got, [(2 * n,)], "counter read on %s after %d increments from each client "
                  "(lost updates?)" % (tag, n))
        if grow:
            expect_eq(rows, [("A", n), ("B", n)], "rows per client read on %s" % tag)
        expect_eq(chk, [("ok",)], "PRAGMA integrity_check on %s" % tag)
    expect(skey(srv, "lock_conflicts") >= 1, "server lock_conflicts is 0: the two SQLite "
           "workers never contended (test proves nothing)")


# ------------------------------------------------------------ 13. deadlock

@lock_test
def deadlock_between_clients(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 10), "F_SETLK F_WRLCK [0,10)")
    ok(b, b.lk("setlk", "w", 20, 10), "F_SETLK F_WRLCK [20,30)")
    a.lk_send("setlkw", "w", 20, 10)
    a.still_blocked(0.5 * slow())
    wait_for("server lock_waiters with A waiting", lambda: skey(srv, "lock_waiters"),
             lambda v: v == 1, 3)
    b.lk_send("setlkw", "w", 0, 10)
    # Exactly one of the two gets EDEADLK, promptly.
    got = {}
    end = time.time() + 5 * slow()
    while time.time() < end and not got:
        for w in (a, b):
            r = w.recv(0.05)
            if r is not None:
                got[w.label] = r["e"]
    if not got:
        fail("deadlock A [0,10)->[20,30), B [20,30)->[0,10): neither F_SETLKW returned "
             "within %.0f s (undetected deadlock)" % (5 * slow()))
    (loser_label, e), = got.items()
    loser, winner = (a, b) if loser_label == a.label else (b, a)
    if e != errno.EDEADLK:
        fail("%s's F_SETLKW in a deadlock returned %s, expected EDEADLK" % (
            loser.label, "success" if e == 0 else H.errname(e)))
    # The other one keeps waiting (it must not get EDEADLK too).
    r = winner.recv(0.5 * slow())
    if r is not None:
        fail("%s's F_SETLKW also returned (%s) after %s got EDEADLK: expected it to wait "
             "on" % (winner.label, H.errname(r["e"]), loser.label))
    expect(skey(srv, "lock_deadlocks") >= 1, "server lock_deadlocks is 0 after an EDEADLK")
    print("# %s got EDEADLK" % loser.label)
    held = (0, 10) if loser is a else (20, 10)
    ok(loser, loser.lk("setlk", "u", held[0], held[1]), "F_SETLK F_UNLCK of %s" % rng(*held))
    r = winner.wait_reply(5 * slow())
    ok(winner, r["e"], "the surviving F_SETLKW once the EDEADLK side unlocked")
    expect_eq(skey(srv, "lock_waiters"), 0, "server lock_waiters after the deadlock resolved")


# ------------------------------------------------------------ 14. delegation
#
# A file whose locks only one client uses has them delegated to it: that
# client answers its processes' lock calls itself until another client
# asks, when the server recalls them (docs/PROTOCOL.md, "Delegated locks").

@lock_test
def delegated_locks_answered_here_and_recalled(ctx):
    srv, A, B = setup2(ctx)
    a, a2, b = lockers(("A1", A.p("f")), ("A2", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "A1's F_SETLK F_WRLCK [0,100)")
    expect_eq(mkey(A, "lk.delegated"), 1, "A's lk.delegated after the first lock of f")
    calls0, granted0 = mkey(A, "lk.calls"), skey(srv, "locks_granted")
    local0 = mkey(A, "lk.local")
    for i in range(100):
        ok(a, a.lk("setlk", "u", 0, 100), "A1's F_SETLK F_UNLCK, round %d" % i)
        ok(a, a.lk("setlk", "w", 0, 100), "A1's F_SETLK F_WRLCK [0,100), round %d" % i)
    refused(a2, a2.lk("setlk", "w", 50, 10), "A2's F_SETLK [50,60) while A1 holds [0,100)")
    expect_eq(a2.getlk("w", 0, 10), ("w", 0, 100, a.pid), "A2's F_GETLK (A1 holds)")
    ok(a2, a2.lk("setlk", "r", 100, 10), "A2's F_SETLK F_RDLCK [100,110)")
    expect_eq(mkey(A, "lk.calls"), calls0, "lock calls A sent for 203 lock steps of A1 and A2")
    expect_eq(skey(srv, "locks_granted"), granted0, "server locks_granted over those steps")
    expect(mkey(A, "lk.local") - local0 >= 203, "A's lk.local grew by %d over 203 steps"
           % (mkey(A, "lk.local") - local0))
    # B asks: A hands every lock back, and B's answers are the server's.
    refused(b, b.lk("setlk", "w", 0, 100), "B's F_SETLK [0,100) while A1 holds it (delegated "
            "to A until now)")
    expect_eq(mkey(A, "lk.delegated"), 0, "A's lk.delegated after B asked")
    expect_eq(b.getlk("w", 0, 10), ("w", 0, 100, 0), "B's F_GETLK [0,10): A1's lock")
    expect_eq(b.getlk("w", 105, 1), ("r", 100, 10, 0), "B's F_GETLK [105,106): A2's lock")
    ok(b, b.lk("setlk", "r", 100, 10), "B's F_SETLK F_RDLCK beside A2's read lock")
    expect(skey(srv, "lock_recalls") >= 1, "server lock_recalls is 0 after B asked")
    expect(skey(srv, "lock_delegations_returned") >= 1,
           "server lock_delegations_returned is 0 after B asked")
    expect_eq(skey(srv, "lock_delegations"), 0, "server lock_delegations after B asked")
    ok(a, a.lk("setlk", "u", 0, 100), "A1's F_SETLK F_UNLCK (at the server now)")
    ok(b, b.lk("setlk", "w", 0, 100), "B's F_SETLK [0,100) once A1 unlocked")
    refused(a2, a2.lk("setlk", "r", 0, 1), "A2's F_SETLK while B holds [0,100)")


@lock_test
def data_follows_a_delegated_lock(ctx):
    """What A wrote under a lock delegated to it, released with its file
    still open (no close, no shipping at the release), B reads once it
    holds the lock; and A reads B's bytes when it locks again."""
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 0), "A's F_SETLK F_WRLCK of the whole file")
    expect_eq(mkey(A, "lk.delegated"), 1, "A's lk.delegated after its lock")
    da = b"A-bytes." * 1500
    a.pwrite(da, 0)
    ok(a, a.lk("setlk", "u", 0, 0), "A's F_SETLK F_UNLCK (answered on A)")
    expect_eq(mkey(A, "lk.delegated"), 1, "A's lk.delegated after its unlock")
    ok(b, b.lk("setlkw", "w", 0, 0), "B's F_SETLKW of the whole file")
    got = b.pread(len(da) + 10, 0)
    expect(got == da, "B read %d bytes under its lock (%r...), not A's %d (%r...)"
           % (len(got), got[:16], len(da), da[:16]))
    db = b"B-bytes!" * 1000
    b.pwrite(db, 0)
    ok(b, b.lk("setlk", "u", 0, 0), "B's F_SETLK F_UNLCK")
    ok(a, a.lk("setlkw", "w", 0, 0), "A's F_SETLKW again")
    got = a.pread(len(da), 0)
    want = db + da[len(db):]
    expect(got == want, "A read %r... under its lock, not B's bytes over its own" % got[:16])


@lock_test
def stat_follows_writes_through_an_older_descriptor(ctx):
    """B's descriptor was opened before A changed the file, so B's kernel
    keeps it on an inode of its own (a new incarnation serves new
    lookups: client/inode.h). What B then writes through it, a stat by
    path on B must show (the size stayed at A's: a new open read short),
    and the file grown by A must show through B's descriptor once B
    locks."""
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    end = 4096
    for i in range(3):
        ok(a, a.lk("setlkw", "w", 0, 0), "A's F_SETLKW, round %d" % i)
        a.pwrite(b"a" * 5000, end)
        end += 5000
        ok(a, a.lk("setlk", "u", 0, 0), "A's F_SETLK F_UNLCK, round %d" % i)
        ok(b, b.lk("setlkw", "w", 0, 0), "B's F_SETLKW, round %d" % i)
        expect_eq(len(b.pread(end + 100, 0)), end, "bytes B reads through its descriptor "
                  "under its lock after A grew the file, round %d" % i)
        expect_eq(os.stat(B.p("f")).st_size, end, "size of f by path on B, round %d" % i)
        b.pwrite(b"b" * 5000, end)
        end += 5000
        ok(b, b.lk("setlk", "u", 0, 0), "B's F_SETLK F_UNLCK, round %d" % i)
        expect_eq(os.stat(B.p("f")).st_size, end, "size of f by path on B after B wrote "
                  "through its descriptor, round %d" % i)
        expect_eq(len(read_file(B.p("f"))), end, "bytes of f read by path on B, round %d" % i)
    expect(H.mount_status(B).get("cb_stale_others", 0) >= 1,
           "B's cb_stale_others is 0: no write went through an older incarnation (test "
           "proves nothing)")


@lock_test
def local_wait_goes_to_the_server(ctx):
    """A wait between two processes of the delegated client hands the
    delegation back and waits at the server, which finds a deadlock
    between them as Linux would (EDEADLK) and wakes the waiter."""
    srv, A, B = setup2(ctx)
    a1, a2 = lockers(("A1", A.p("f")), ("A2", A.p("f")))
    ok(a1, a1.lk("setlk", "w", 0, 10), "A1's F_SETLK [0,10)")
    ok(a2, a2.lk("setlk", "w", 20, 10), "A2's F_SETLK [20,30)")
    expect_eq(mkey(A, "lk.delegated"), 1, "A's lk.delegated")
    a1.lk_send("setlkw", "w", 20, 10)
    a1.still_blocked(0.5 * slow())
    expect_eq(mkey(A, "lk.delegated"), 0, "A's lk.delegated while A1 waits")
    refused(a2, a2.lk("setlkw", "w", 0, 10), "A2's F_SETLKW [0,10), closing a cycle with A1",
            errno.EDEADLK)
    ok(a2, a2.lk("setlk", "u", 20, 10), "A2's F_SETLK F_UNLCK [20,30)")
    r = a1.wait_reply(5 * slow())
    ok(a1, r["e"], "A1's F_SETLKW [20,30) once A2 unlocked")


@lock_test
def clients_taking_turns_get_no_delegation(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    for i in range(10):
        for lk in (a, b):
            ok(lk, lk.lk("setlkw", "w", 0, 0), "F_SETLKW, round %d" % i)
            ok(lk, lk.lk("setlk", "u", 0, 0), "F_SETLK F_UNLCK, round %d" % i)
    st = server_status(srv)
    expect(st["lock_delegations_granted"] <= 1 and st["lock_recalls"] <= 1,
           "two clients locking f in turn: %d delegations granted, %d recalled (the first, "
           "at most)" % (st["lock_delegations_granted"], st["lock_recalls"]))


@lock_test
def unmount_hands_delegations_back(ctx):
    srv, A, B = setup2(ctx)
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 0), "A's F_SETLK")
    ok(a, a.lk("setlk", "u", 0, 0), "A's F_SETLK F_UNLCK")
    expect_eq(skey(srv, "lock_delegations"), 1, "server lock_delegations while A holds f's")
    a.close()
    a.exit()
    A.umount()
    expect_eq(skey(srv, "lock_delegations"), 0, "server lock_delegations after A's unmount")
    t0 = time.time()
    ok(b, b.lk("setlk", "w", 0, 0), "B's F_SETLK after A's unmount")
    expect(time.time() - t0 < 1.0 * slow(), "B's F_SETLK took %.2f s after A's unmount"
           % (time.time() - t0))


@lock_test(timeout=120)
def delegated_locks_survive_a_server_restart(ctx):
    """A holds locks of a file delegated to it, which the server never
    saw (taken after the delegation); the server restarts: A hands them
    back during the grace, and B finds them held."""
    srv, A, B = setup2(ctx, srv_extra=("--lock-grace", str(GRACE_MS)))
    a, a2, b = lockers(("A1", A.p("f")), ("A2", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "r", 0, 10), "A1's F_SETLK F_RDLCK [0,10)")
    expect_eq(mkey(A, "lk.delegated"), 1, "A's lk.delegated")
    ok(a, a.lk("setlk", "w", 100, 100), "A1's F_SETLK [100,200) (answered on A)")
    ok(a2, a2.lk("setlk", "r", 0, 10), "A2's F_SETLK F_RDLCK [0,10) (answered on A)")
    expect_eq(skey(srv, "locks_granted"), 1, "locks the server granted itself")
    t_start = restart(srv)
    wait_for("A's lk.reclaimed after the restart", lambda: mkey(A, "lk.reclaimed"),
             lambda v: v >= 3, GRACE_MS / 1000.0 + 5)
    sleep_past_grace(t_start)
    refused(b, b.lk("setlk", "w", 150, 10), "B's F_SETLK [150,160) after the grace (A1 "
            "holds [100,200))")
    refused(b, b.lk("setlk", "w", 0, 1), "B's F_SETLK [0,1) (A1 and A2 hold it shared)")
    ok(b, b.lk("setlk", "r", 0, 1), "B's F_SETLK F_RDLCK [0,1) beside A's read locks")
    expect_eq(b.getlk("w", 100, 1), ("w", 100, 100, 0), "B's F_GETLK [100,101)")
    expect_eq(mkey(A, "lk.lost"), 0, "A's lk.lost")
    expect_eq(mkey(A, "lk.delegated"), 0, "A's lk.delegated after the restart")


@lock_test(timeout=120)
def silent_holder_loses_its_delegation(ctx):
    """A holder that does not answer a recall (its daemon stopped) loses
    the delegation and its locks within the lease's bound; once it runs
    again it learns so (lost: EIO at its next lock call), and B's lock
    stands."""
    srv, A, B = setup2(ctx, srv_extra=("--lock-lease", str(LEASE_MS)))
    a, b = lockers(("A1", A.p("f")), ("B1", B.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "A's F_SETLK [0,100)")
    expect_eq(mkey(A, "lk.delegated"), 1, "A's lk.delegated")
    H.sigstop(A.pid)
    try:
        t0 = time.time()
        b.lk_send("setlkw", "w", 0, 100)
        limit = 2 * LEASE_MS / 1000.0 + 5 * slow()
        r = b.recv(limit)
        dt = time.time() - t0
        if r is None:
            fail("B's F_SETLKW did not return within %.1f s while A's daemon was stopped "
                 "(lease %d ms)" % (limit, LEASE_MS))
        ok(b, r["e"], "B's F_SETLKW while A's daemon is stopped")
        print("# B got the lock %.2f s after asking (lease %.1f s)" % (dt, LEASE_MS / 1000.0))
        expect(dt >= LEASE_MS / 1000.0 * 0.8, "B got A's lock %.2f s after asking, before "
               "the %d ms lease" % (dt, LEASE_MS))
    finally:
        os.kill(A.pid, signal.SIGCONT)
    wait_for("A's lk.lost after its daemon resumed", lambda: mkey(A, "lk.lost"),
             lambda v: v >= 1, 10)
    e = a.lk("setlk", "w", 200, 10)
    expect_eq(H.errname(e), "EIO", "A's next lock call on the file whose locks it lost")
    refused(a, a.lk("setlk", "w", 0, 10), "A's F_SETLK [0,10) while B holds [0,100)")
    expect_eq(b.getlk("w", 0, 10)[0], "u", "B's own F_GETLK (type)")


# ------------------------------------------------------------ 15. local locks

@lock_test
def local_locks_mode_does_not_exclude_clients(ctx):
    srv, A, B = setup2(ctx, mount_extra=("--local-locks",))
    a, b, a2 = lockers(("A1", A.p("f")), ("B1", B.p("f")), ("A2", A.p("f")))
    ok(a, a.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) on A")
    ok(b, b.lk("setlk", "w", 0, 100), "F_SETLK F_WRLCK [0,100) on B while A holds it "
       "(--local-locks: clients do not exclude each other)")
    refused(a2, a2.lk("setlk", "w", 0, 100), "a second process on A: F_SETLK (local locking "
            "still works within a client)")
    expect_eq(a2.getlk("w", 0, 10), ("w", 0, 100, a.pid), "A2's F_GETLK (the local holder)")
    ok(a, a.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) on A")
    ok(b, b.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) on B while A holds it (--local-locks)")
    refused(a2, a2.flock(EX | NB), "flock(LOCK_EX|LOCK_NB) by a second process on A",
            errno.EWOULDBLOCK)
    st = server_status(srv)
    expect_eq((st.get("locks"), st.get("locks_granted")), (0, 0),
              "server (locks, locks_granted) with --local-locks mounts")


if __name__ == "__main__":
    H.main()
