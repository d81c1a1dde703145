#!/usr/bin/env python3
# timeout: 180
"""test_hung.py - a hung server never hangs the applications.

The server is stopped with SIGSTOP: its sockets stay open and accept, but
nothing is answered, which is what a wedged or overloaded server looks
like to a client.

- A signal ends a waiting call at once (FUSE INTERRUPT): `timeout -s INT 1`
  around a lookup, an open and a write on a mount of the stopped server
  ends within ~3 s, by the signal or with EINTR, instead of waiting for the
  server. After SIGCONT the mount works, also for the names involved.
- `cairn mount --timeout 6`: a stat of an uncached name on the stopped
  server fails with EIO within 6 s (+ slack); after SIGCONT the mount
  reconnects by itself and later calls succeed.
- A write and close on the stopped server: write(2) returns at once;
  close(2) too when the client holds the write token (the journal), and
  the fsync after it fails with EIO after --timeout; otherwise close(2)
  does. Resumed, A and B agree on the content. What a failed close could
  not send is not read back on A, even while the server is still stopped
  and the client's invalidation of the kernel's pages runs late.
- Promises are leased (lib/proto.h): a client cut off from the server
  without a close (a frozen relay between them: a partition) does not
  read another client's replaced content from its cache once the server
  gave up on it, but goes on writing a file whose write token it holds;
  an idle client keeps its promises by PINGing.

Every test resumes the server in `finally`, before its children are
waited for and before cleanup, so nothing is left stuck whatever fails.
"""

import errno
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

SIGNAL_AFTER_S = 1          # the child gets SIGINT this long after start


def slack():
    return 4.0 if H.ASAN else 2.0


class Stopped:
    """SIGSTOP a server for the duration of a with block; always resumes."""

    def __init__(self, srv):
        self.srv = srv

    def __enter__(self):
        H.sigstop(self.srv.proc.pid)
        return self

    def __exit__(self, *exc):
        try:
            os.kill(self.srv.proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        return False


def spawn(argv, **kw):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace",
                         start_new_session=True, **kw)
    H._record_pid(p.pid)
    return p


def wait_child(p, limit):
    """Wait up to `limit` s; returns (elapsed, returncode or None)."""
    t0 = time.time()
    try:
        p.wait(limit)
    except subprocess.TimeoutExpired:
        return time.time() - t0, None
    return time.time() - t0, p.returncode


def reap(p):
    """After the server was resumed: the child ends by itself (its call is
    answered); make sure of it."""
    if p.poll() is None:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def expect_interrupted(ctx, srv, argv, what, **kw):
    """Start argv (which must block on the stopped server) under
    `timeout -s INT 1`; it must end within 1 s + slack."""
    limit = SIGNAL_AFTER_S + slack()
    # Leaving the with block resumes the server (also on an exception), so
    # a child stuck in the kernel is released before it is reaped.
    with Stopped(srv):
        time.sleep(0.2)   # the server is stopped, not just about to be
        p = spawn(["timeout", "-s", "INT", str(SIGNAL_AFTER_S)] + argv, **kw)
        elapsed, rc = wait_child(p, limit)
    try:
        if rc is None:
            fail("%s: still waiting %.1f s after the SIGINT: the call is "
                 "not interruptible" % (what, elapsed - SIGNAL_AFTER_S))
        # timeout(1) says 124 when it had to send the signal; the child
        # ended by it (killed by SIGINT, or EINTR and a failure exit).
        expect(rc != 0, "%s: exited 0 although the server was stopped" % what)
        expect(elapsed >= SIGNAL_AFTER_S - 0.2,
               "%s: ended after %.2f s, before the signal: %s" % (
                   what, elapsed, p.stderr.read().strip()))
    finally:
        reap(p)


def fresh_name(tag):
    return "%s-%d-%d" % (tag, os.getpid(), int(time.time() * 1000))


@test(timeout=90)
def sigint_ends_calls_to_a_stopped_server(ctx):
    srv = ctx.server()
    a = ctx.mount(srv)
    b = ctx.mount(srv)
    # Writes that reach the server as they happen (case 3): with the
    # writeback cache a write(2) does not wait for the server at all
    # (writeback_close_waits_for_the_server_and_fails_after_timeout).
    w = ctx.mount(srv, extra=["--write-through"])
    try:
        # 1. LOOKUP of a name never seen.
        name = fresh_name("lookup")
        expect_interrupted(ctx, srv, ["cat", a.p(name)], "cat of an unknown name")

        # 2. Open of a file A knows the name of but has never opened (the
        # open fetches fresh attributes): written on B.
        with open(b.p("data"), "wb") as f:
            f.write(b"hello\n" * 100)
        os.stat(a.p("data"))
        expect_interrupted(ctx, srv, ["cat", a.p("data")], "cat of an unopened file")

        # 3. A write on a file already open: a non-fatal SIGINT (python's
        # KeyboardInterrupt) must get EINTR back, not wait. Another file
        # than in 2: there cat's readahead is still waiting for the
        # server, and the kernel keeps that page locked (readahead is a
        # background request, which no signal ends) until the server
        # answers or --timeout gives up; a write to that page waits as
        # long (docs/cairn.1, --timeout).
        with open(w.p("wdata"), "wb") as f:
            f.write(b"hello\n" * 100)
        fd = os.open(w.p("wdata"), os.O_WRONLY)
        try:
            code = ("import os, sys\n"
                    "try:\n"
                    "    os.write(int(sys.argv[1]), b'x' * 4096)\n"
                    "except KeyboardInterrupt:\n"
                    "    sys.exit(3)\n")
            expect_interrupted(ctx, srv, [sys.executable, "-c", code, str(fd)],
                               "write on an open file", pass_fds=(fd,))
        finally:
            os.close(fd)

        # The server is running again: the mount works, also for the
        # names whose calls were interrupted.
        expect_errno_within(errno.ENOENT, lambda: os.stat(a.p(name)), 20,
                            "stat of the interrupted name after SIGCONT")
        with open(a.p("after"), "wb") as f:
            f.write(b"after\n")
        with open(b.p("after"), "rb") as f:
            expect_eq(f.read(), b"after\n", "file written on A after SIGCONT, read on B")
        # The interrupted write may or may not have reached the server
        # ("a change the server already received may still happen").
        expect_old_or_written(a.p("data"), b"hello\n" * 100, b"x" * 4096,
                              "data on A after SIGCONT")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)


def expect_old_or_written(path, old, written, what):
    """path reads as old, or as old with `written` over its start (a
    failed write may have reached the server: PROTOCOL.md); returns it."""
    with open(path, "rb") as f:
        got = f.read()
    expect(got in (old, written + old[len(written):]),
           "%s: %r" % (what, H.short(got)))
    return got


def expect_errno_within(want, fn, seconds, what):
    """fn must give errno `want` (0: succeed) within `seconds` (the mount
    may be reconnecting: EIO and ENOTCONN-ish errors are retried)."""
    end = time.time() + seconds
    got = None
    while True:
        got = H.errno_of(fn)
        if got == want or time.time() > end:
            break
        time.sleep(0.2)
    if got != want:
        fail("%s: expected %s, got %s (retried %d s)" % (
            what, H.errname(want), H.errname(got), seconds))


def child_code(call, setup="", timed=False):
    """A child's python: setup, then call (one statement, on sys.argv[1]);
    it prints "ok" or the errno's name, each followed by the seconds the
    call took when timed."""
    took = " %.1f' % (time.time() - t)" if timed else "'"
    return ("import errno, os, sys, time\n" + setup +
            "t = time.time()\n"
            "try:\n"
            "    " + call + "\n"
            "    print('ok" + took + ")\n"
            "except OSError as e:\n"
            "    print(errno.errorcode.get(e.errno, str(e.errno)) + '" + took + ")\n")


STAT_CODE = child_code("os.stat(sys.argv[1])")


@test(timeout=90)
def timeout_option_turns_a_stopped_server_into_eio(ctx):
    srv = ctx.server()
    a = ctx.mount(srv, extra=["--timeout", "6"])
    with open(a.p("before"), "wb") as f:
        f.write(b"before\n")
    # A directory A has not listed: a name in it needs the server (A may
    # answer names in the root from its cached listing of it). Made by
    # another mount: A knows a directory it made itself is empty.
    b = ctx.mount(srv, "b")
    os.mkdir(b.p("unlisted"))
    os.stat(a.p("unlisted"))
    limit = 6 + 3 + slack()
    p = None
    try:
        with Stopped(srv):
            time.sleep(0.2)
            name = os.path.join("unlisted", fresh_name("eio"))
            p = spawn([sys.executable, "-c", STAT_CODE, a.p(name)])
            elapsed, rc = wait_child(p, limit)
        if rc is None:
            fail("stat on a stopped server: no answer within %.0f s with "
                 "--timeout 6" % limit)
        out = p.stdout.read().strip()
        expect_eq(out, "EIO", "stat of an uncached name on a stopped server")
        expect(elapsed >= 3,
               "stat failed after %.1f s, well before --timeout 6" % elapsed)
        # Resumed: the mount reconnects by itself and carries on.
        expect_errno_within(0, lambda: os.stat(a.p("before")), 30,
                            "stat after SIGCONT")
        expect_errno_within(errno.ENOENT, lambda: os.stat(a.p(name)), 30,
                            "stat of the failed name after SIGCONT")
        with open(a.p("after"), "wb") as f:
            f.write(b"after\n")
        with open(a.p("before"), "rb") as f:
            expect_eq(f.read(), b"before\n", "content after SIGCONT")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        if p is not None:
            reap(p)


CREATE_CODE = child_code("os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644))",
                         timed=True)


@test(timeout=90)
def create_on_a_stopped_server_fails_after_one_timeout(ctx):
    """A file made in a directory A has listed whole is answered by A
    once it holds the directory's token, which it asks the server for.
    With the server stopped that request fails after --timeout, and so
    must the create: not go on to ask the server to make the file and
    wait as long again (it took twice --timeout)."""
    srv = ctx.server()
    a = ctx.mount(srv, extra=["--timeout", "6"])
    b = ctx.mount(srv, "b")
    os.mkdir(b.p("d"))
    os.listdir(a.p("d"))
    p = None
    try:
        with Stopped(srv):
            time.sleep(0.2)
            p = spawn([sys.executable, "-c", CREATE_CODE,
                       a.p("d", fresh_name("new"))])
            elapsed, rc = wait_child(p, 6 + 6 + 3 + slack())
        if rc is None:
            fail("create on a stopped server: no answer within %.0f s "
                 "with --timeout 6" % (6 + 6 + 3 + slack()))
        out = p.stdout.read().strip().split()
        expect_eq(out[0], "EIO", "create on a stopped server")
        expect(3 <= elapsed <= 6 + 3 + slack(),
               "create failed after %.1f s with --timeout 6" % elapsed)
        # Resumed: files are made again.
        expect_errno_within(0, lambda: open(a.p("d", "after"), "wb").close(),
                            30, "create after SIGCONT")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        if p is not None:
            reap(p)


@test(timeout=90)
def calls_fail_at_once_once_the_server_was_out_of_reach_for_timeout(ctx):
    """The first call to a stopped server waits --timeout and fails with
    EIO; from then on, until the server answers again, calls fail at once
    (as AFS fails calls to a server it marked down) instead of each
    waiting the whole timeout: a program that goes through a tree is not
    made to wait once per file (here: reads of files A has not read). The log says so once. Resumed, the
    mount works again by itself."""
    srv = ctx.server()
    a = ctx.mount(srv, extra=["--timeout", "6"])
    b = ctx.mount(srv, "b")
    names = ("u1", "u2", "u3")
    for n in names:
        with open(b.p(n), "wb") as f:
            f.write(n.encode() * 50000)
    for n in names:
        os.stat(a.p(n))       # known, never read: reading needs the server
    first_limit = 6 + 3 + slack()
    ps = []
    try:
        with Stopped(srv):
            time.sleep(0.2)
            times = []
            for n in names:
                p = spawn([sys.executable, "-c", READ_CODE, a.p(n)])
                ps.append(p)
                elapsed, rc = wait_child(p, first_limit)
                if rc is None:
                    fail("read of %s on a stopped server: no answer within "
                         "%.0f s with --timeout 6" % (n, first_limit))
                expect_eq(p.stdout.read().strip(), "EIO",
                          "read of %s on a stopped server" % n)
                times.append(elapsed)
            print("# reads on the stopped server failed after %s s" %
                  ", ".join("%.2f" % t for t in times))
            expect(times[0] >= 3, "the first call failed after %.1f s, well "
                   "before --timeout 6" % times[0])
            for t in times[1:]:
                expect(t < 1.5 + slack() / 2,
                       "a call after the server was out of reach for "
                       "--timeout waited %.1f s" % t)
        with open(a.daemon_log) as f:
            said = [x for x in f if "out of reach for 6 s" in x]
        expect_eq(len(said), 1, "log lines saying calls fail at once")
        # Resumed: the mount reconnects by itself and carries on.
        # (Until the client has reconnected, calls still fail at once.)
        expect_errno_within(0, lambda: H.read_file(a.p("u3")), 30,
                            "read after SIGCONT")
        for n in names:
            with open(a.p(n), "rb") as f:
                expect(f.read() == n.encode() * 50000,
                       "%s read on A after SIGCONT" % n)
        with open(a.p("after"), "wb") as f:
            f.write(b"after\n")
        with open(b.p("after"), "rb") as f:
            expect_eq(f.read(), b"after\n", "file made on A after SIGCONT, on B")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        for p in ps:
            reap(p)


CLOSE_CODE = child_code("os.pwrite(fd, b'y' * 100, 0); os.close(fd)", timed=True,
                        setup="fd = os.open(sys.argv[1], os.O_WRONLY)\n")


@test(timeout=90)
def close_on_a_stopped_server_fails_after_one_timeout(ctx):
    """A write and close of a file whose write token A does not hold, on
    a stopped server, need several requests: the write the file's
    security.capability (the kernel's GETXATTR) and, once A's promises
    lapsed (2 s), the page it writes into (READ); the close its pages
    (WRITE, which needs the token) and then its times (SETATTR). The
    first of them fails after --timeout; the rest must then fail at once,
    so the write or the close fails with EIO after one --timeout, not two
    or more."""
    srv = ctx.server()
    a = ctx.mount(srv, extra=["--timeout", "10"])
    b = ctx.mount(srv, "b")
    with open(b.p("f"), "wb") as f:
        f.write(b"from b\n" * 100)
    with open(a.p("f"), "rb") as f:
        expect_eq(f.read(), b"from b\n" * 100, "A reads B's file")
    limit = 2 * 10 + 5 + slack()
    p = None
    try:
        with Stopped(srv):
            time.sleep(0.2)
            p = spawn([sys.executable, "-c", CLOSE_CODE, a.p("f")])
            elapsed, rc = wait_child(p, limit)
        if rc is None:
            fail("close on a stopped server: no answer within %.0f s with "
                 "--timeout 10" % limit)
        out = p.stdout.read().split()
        print("# close on the stopped server: %s after %.1f s" % (out, elapsed))
        expect_eq(out[0], "EIO", "write and close of a file on a stopped server")
        expect(5 <= elapsed <= 10 + 2 + slack(),
               "close failed after %.1f s with --timeout 10" % elapsed)
        # Resumed: the close failed, so the write may be lost, or it may
        # have reached the server (PROTOCOL.md); A and B agree.
        expect_errno_within(0, lambda: os.stat(a.p("f")), 30, "stat after SIGCONT")
        on_b = expect_old_or_written(b.p("f"), b"from b\n" * 100, b"y" * 100,
                                     "content on B after the failed close")
        with open(a.p("f"), "rb") as f:
            on_a = f.read()
        expect_eq(H.short(on_a), H.short(on_b), "content on A after the failed close")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        if p is not None:
            reap(p)


READ_CODE = ("import errno, os, sys\n"
             "try:\n"
             "    with open(sys.argv[1], 'rb') as f:\n"
             "        data = f.read()\n"
             "    print('ok ' + data[:12].decode('ascii', 'replace'))\n"
             "except OSError as e:\n"
             "    print(errno.errorcode.get(e.errno, str(e.errno)))\n")


@test(timeout=90)
def failed_close_leaves_no_unsent_bytes_to_read(ctx):
    """After close() failed on a stopped server, the bytes it could not
    send are nowhere: a read on A, with the server still stopped, gets
    B's content (from A's cache) or an error, never A's unsent write. The
    kernel kept the pages of the failed WRITE; the client drops them
    through the notifier, which may be busy with others for a while (here
    3 s, CAIRN_TEST_INVAL_PAUSE_US): the next open must not keep them
    meanwhile."""
    srv = ctx.server()
    a = ctx.mount(srv, extra=["--timeout", "6"],
                  env={"CAIRN_TEST_INVAL_PAUSE_US": "3000000"})
    b = ctx.mount(srv, "b")
    with open(b.p("f"), "wb") as f:
        f.write(b"from b\n" * 100)
    with open(a.p("f"), "rb") as f:
        expect_eq(f.read(), b"from b\n" * 100, "A reads B's file")
    time.sleep(3.5)   # the notifier's queue empty (its pause is 3 s)
    p = q = None
    try:
        with Stopped(srv):
            time.sleep(0.2)
            p = spawn([sys.executable, "-c", CLOSE_CODE, a.p("f")])
            elapsed, rc = wait_child(p, 2 * 6 + 5 + slack())
            expect(rc is not None, "close on a stopped server did not return")
            out = p.stdout.read().split()
            print("# close on the stopped server: %s after %.1f s" % (out, elapsed))
            expect_eq(out[:1], ["EIO"], "write and close of a file on a stopped server")
            q = spawn([sys.executable, "-c", READ_CODE, a.p("f")])
            elapsed, rc = wait_child(q, 6 + 5 + slack())
            expect(rc is not None, "a read on A with the server stopped did not return")
            got = q.stdout.read().strip()
            print("# read on A, server still stopped: %s after %.1f s" % (got, elapsed))
            expect(not got.startswith("ok y"),
                   "A read its own write that the failed close never sent: %s" % got)
            expect(got in ("ok from b\nfrom", "EIO") or got.startswith("ok from b"),
                   "read on A with the server stopped: %r" % got)
        expect_old_or_written(b.p("f"), b"from b\n" * 100, b"y" * 100,
                              "content on B after the failed close")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        for c in (p, q):
            if c is not None:
                reap(c)


WB_CODE = ("import os, sys, time\n"
           "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
           "t = time.time()\n"
           "os.pwrite(fd, b'x' * 4096, 0)\n"
           "print('write %.3f' % (time.time() - t), flush=True)\n"
           "t = time.time()\n"
           "try:\n"
           "    os.close(fd)\n"
           "    print('close ok %.1f' % (time.time() - t), flush=True)\n"
           "except OSError as e:\n"
           "    print('close %s %.1f' % (os.strerror(e.errno), time.time() - t))\n"
           "    sys.exit(0)\n"
           "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
           "t = time.time()\n"
           "try:\n"
           "    os.fsync(fd)\n"
           "    print('fsync ok %.1f' % (time.time() - t))\n"
           "except OSError as e:\n"
           "    print('fsync %s %.1f' % (os.strerror(e.errno), time.time() - t))\n")


@test(timeout=90)
def writeback_close_or_fsync_fails_after_timeout(ctx):
    """With the writeback cache a write(2) needs no server. close() needs
    none either while the client holds the file's write token (the data
    goes to its journal); without the token, it waits for the server.
    With the server stopped, whichever waits (close, or the fsync after
    it) fails with EIO once --timeout gave up, and nothing blocks longer.
    The data stays in the journal (or the WRITE may have reached the
    server; PROTOCOL.md): once the server runs again, A and B agree."""
    srv = ctx.server()
    a = ctx.mount(srv, extra=["--timeout", "6"])
    b = ctx.mount(srv)
    with open(a.p("wb"), "wb") as f:
        f.write(b"hello\n" * 1000)
    limit = 2 * (6 + 5) + slack()
    p = None
    try:
        with Stopped(srv):
            time.sleep(0.2)
            p = spawn([sys.executable, "-c", WB_CODE, a.p("wb")])
            elapsed, rc = wait_child(p, limit)
        if rc is None:
            fail("close+fsync on a stopped server: no answer within %.0f s with "
                 "--timeout 6" % limit)
        out = p.stdout.read().split("\n")
        print("# with the server stopped: %s" % "; ".join(x for x in out if x))
        expect(out[0].startswith("write ") and float(out[0].split()[1]) < 1.0,
               "write(2) waited for the stopped server: %r" % out[0])
        failed = [x for x in out[1:3] if x and not x.split()[1] == "ok"]
        expect(len(failed) == 1 and "Input/output error" in failed[0],
               "neither close nor fsync failed with EIO on a stopped server: %r" % out)
        expect(float(failed[0].split()[-1]) >= 3,
               "%s: failed well before --timeout 6" % failed[0])
        # Resumed: the journal (or the WRITE that went out) gets there; A
        # shows what the server has, as B does.
        expect_errno_within(0, lambda: os.stat(a.p("wb")), 30, "stat after SIGCONT")
        want = b"x" * 4096 + (b"hello\n" * 1000)[4096:]
        end = time.time() + 30
        while time.time() < end:
            with open(b.p("wb"), "rb") as f:
                on_b = f.read()
            if on_b == want:
                break
            time.sleep(0.2)
        with open(a.p("wb"), "rb") as f:
            on_a = f.read()
        expect(on_b in (b"hello\n" * 1000, want),
               "content on B after the failed call: %r" % H.short(on_b))
        expect_eq(H.short(on_a), H.short(on_b), "content on A after the failed call")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        if p is not None:
            reap(p)


READ_TIMED_CODE = child_code("sys.stdout.write(open(sys.argv[1], 'rb').read().decode() + ' ')",
                       timed=True)


@test(timeout=120)
def partitioned_client_reads_no_stale_data(ctx):
    """A is cut off from the server without a close (a frozen relay: a
    partition). B rewrites a file A has cached; the server gives up on A's
    acknowledgement after 3 s and B's close returns. A, still cut off,
    must not read the old content from its cache: its promises lapsed 2 s
    after the server last answered it (lib/proto.h), so the read waits for
    the server and fails after --timeout. Once the relay flows again, A
    reads B's content."""
    srv = ctx.server()
    relay = ctx.proxy(srv)
    a = ctx.mount(relay, "a", extra=["--timeout", "6"])
    b = ctx.mount(srv, "b")
    H.write_file(b.p("f"), b"old " * 100)
    expect_eq(H.read_file(a.p("f")), b"old " * 100, "A's first read")
    p = None
    try:
        relay.freeze()
        t0 = time.time()
        H.write_file(b.p("f"), b"new " * 100)
        took = time.time() - t0
        print("# B's rewrite with A cut off returned in %.2f s" % took)
        p = spawn([sys.executable, "-c", READ_TIMED_CODE, a.p("f")])
        elapsed, rc = wait_child(p, 6 + 6 + slack())
        expect(rc is not None, "A's read while cut off: no answer in %.0f s" % elapsed)
        out = p.stdout.read().strip()
        print("# A's read while cut off: %s" % H.short(out, 40))
        expect(not out.startswith("old"),
               "A read the old content %.1f s after B's rewrite returned, while "
               "cut off from the server: %s" % (elapsed, H.short(out)))
        expect(out.split()[0] in ("EIO", "new"),
               "A's read while cut off: %s" % H.short(out))
        log = open(a.daemon_log, errors="replace").read()
        expect("no longer trusted" in log,
               "A's log does not say its promises lapsed:\n%s" % "\n".join(H.tail(a.daemon_log, 10)))
    finally:
        relay.thaw()
        if p is not None:
            reap(p)
    end = time.time() + 30
    got = None
    while time.time() < end:
        try:
            got = H.read_file(a.p("f"))
        except OSError as e:
            got = e
        if got == b"new " * 100:
            break
        time.sleep(0.2)
    expect_eq(got, b"new " * 100, "A's read once the relay flows again")
    st = H.mount_status(a)
    expect(st["rpc.lapses"] >= 1, "rpc.lapses on A: %r" % st["rpc.lapses"])


def push_pages(fd):
    """sync_file_range(SYNC_FILE_RANGE_WRITE | WAIT_AFTER): the kernel's
    dirty pages of fd to the client daemon, without an fsync."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.sync_file_range(fd, ctypes.c_longlong(0), ctypes.c_longlong(0),
                            ctypes.c_uint(2 | 4)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


@test(timeout=120)
def partitioned_client_writes_what_its_token_covers(ctx):
    """What a held write token covers outlives the lapse: A, cut off with
    a file open whose token it holds, goes on writing and closes it in
    about the time a local disk takes (the journal), 3 s into the
    partition; once the relay flows again, B reads every byte. (A token
    goes back after a second in which the client daemon got no write,
    which takes the server: sync_file_range hands it the pages as they
    are written, as a steady writer's write-back would.)"""
    srv = ctx.server()
    relay = ctx.proxy(srv)
    a = ctx.mount(relay, "a", extra=["--timeout", "6"])
    b = ctx.mount(srv, "b")
    chunk = b"x" * 4096
    fd = os.open(a.p("w"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, chunk)
        relay.freeze()
        for _ in range(10):                  # 3 s: past the lapse
            os.write(fd, chunk)
            push_pages(fd)
            time.sleep(0.3)
        t0 = time.time()
        os.write(fd, b"end\n")
        os.close(fd)
        fd = None
        took = time.time() - t0
        print("# write and close 3 s into the partition: %.3f s" % took)
        expect(took < 1.0, "write and close of a file A holds the token for "
               "took %.1f s while cut off" % took)
        st = H.mount_status(a)
        expect(st["rpc.lapses"] >= 1, "no lapse on A: %r" % st["rpc.lapses"])
        kept = re.findall(r"promises dropped .*; (\d+) objects held for write-back keep",
                          open(a.daemon_log, errors="replace").read())
        expect(kept and int(kept[0]) >= 1,
               "A's lapse kept nothing its tokens cover: %r" % kept)
    finally:
        if fd is not None:
            os.close(fd)
        relay.thaw()
    want = chunk * 11 + b"end\n"
    end = time.time() + 40
    got = None
    while time.time() < end:
        got = H.read_file(b.p("w"))
        if got == want:
            break
        time.sleep(0.3)
    expect(got == want, "B's read once the relay flows: %d bytes, want %d"
           % (len(got or b""), len(want)))


@test(timeout=90)
def an_idle_client_keeps_its_promises(ctx):
    """Promises last 2 s past the server's last answer, so an idle client
    renews them (a PING every 0.6 s): after 5 s of nothing, A's stat and
    read of a cached file are still answered without a call, and no
    lapse happened."""
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    H.write_file(a.p("f"), b"kept\n")
    H.wb_idle(a)
    os.stat(a.p("f"))
    expect_eq(H.read_file(a.p("f")), b"kept\n", "the first read")
    # What the first read sends late (its atime) before the count starts.
    before = H.mount_status(a)
    end = time.time() + 10
    while time.time() < end:
        time.sleep(0.5)
        now = H.mount_status(a)
        if now["rpc.calls"] == before["rpc.calls"]:
            break
        before = now
    time.sleep(5)
    os.stat(a.p("f"))
    expect_eq(H.read_file(a.p("f")), b"kept\n", "the read after 5 s")
    after = H.mount_status(a)
    pings = after["rpc.ping.calls"] - before["rpc.ping.calls"]
    print("# 5 s idle: %d pings" % pings)
    expect(pings >= 4, "only %d PINGs in 5 s idle" % pings)
    expect_eq(after["rpc.lapses"], 0, "lapses in 5 s idle")
    calls = after["rpc.calls"] - before["rpc.calls"]
    expect_eq(calls, 0, "calls for a stat and a read after 5 s idle")

if __name__ == "__main__":
    H.main()
