#!/usr/bin/env python3
# timeout: 300
"""test_cbreak.py - callback breaks are acknowledged before the change is.

The server replies to a change only after every other client holding a
promise on what changed has acknowledged the CB_BREAK, which a mount does
only once its kernel has dropped the stale attributes, pages and dentries
(docs/PROTOCOL.md, "Callbacks"). So the moment write()/close()/rename()
returns on mount A, mount B must already see the change: these tests allow
B no grace period at all, and loop to catch the race that a grace period
would hide.

The raw clients here say HELLO_CB_ACK, like a mount does. A client that
never acknowledges costs the changer one timeout
(CB_ACK_TIMEOUT_MS, 3 s) once, and is then disconnected with one log line
naming it. Two mounts changing one directory at the same time must not
deadlock on each other's acknowledgements (each mount's create holds the
directory lock that dropping the other's entries by name would need), nor
answer a change without waiting (cb_ack_cycles, counted by the server):
each mount's reads right after the other's create returned must be fresh
(docs/LOCKING.md, "Cycles are refused"; this needs the kernel's dentry
epoch, Linux 6.16: on older kernels only the absence of timeouts and lost
names is checked there).
"""

import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import write_file, read_file  # noqa: E402,F401
import proto_client as P  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

ACK_TIMEOUT = 3.0      # server/callback.h CB_ACK_TIMEOUT_MS


def kernel_has_epoch():
    """The kernel can advance the FUSE dentry epoch (Linux 6.16), so the
    mount says HELLO_CB_NOLOCK (client/notify.c notify_hello_flags)."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 16)


class AckConn(P.Conn):
    """A raw protocol client that acknowledges every break it reads (when
    auto_ack) and remembers the ids."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.auto_ack = True
        self.break_ids = []

    def hello(self, flags=1):
        """HELLO with HELLO_CB_ACK (flags bit 0): the server waits for us."""
        r = self.call(P.OP_HELLO, P.u32(P.MAGIC) + P.u32(P.VERSION) +
                      self.client_id + P.u32(flags))
        r.u32()
        self.server_id = r.take(16)
        self.epoch = r.u64()
        root = r.attr()
        self.hello_flags = r.u32()
        r.end()
        return root

    def _dispatch(self, fr):
        op, flags, id, status, payload = fr
        super()._dispatch(fr)
        if flags & P.WF_PUSH and op == P.OP_CB_BREAK:
            self.break_ids.append(id)
            if self.auto_ack and id:
                self.send_raw(P.frame(P.OP_CB_BREAK, b"", flags=P.WF_REPLY, id=id))


def iters(n):
    return max(n // 4, 20) if H.ASAN else n


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


def status(ctx):
    c = P.Conn("127.0.0.1", ctx.srv.port)
    try:
        c.hello()
        return c.status()
    finally:
        c.close()


def no_timeouts(ctx, what):
    st = status(ctx)
    expect_eq(st.get("cb_ack_timeouts"), 0, "cb_ack_timeouts after %s" % what)
    lost = [l for l in ctx.srv.log_lines() if "did not acknowledge" in l]
    expect(not lost, "a client was dropped during %s: %s" % (what, lost))


@test
def appends_from_both_sides_looped(ctx):
    d = fresh(ctx, "append")
    rel = os.path.join(d, "log")
    write_file(ctx.A.p(rel), b"")
    want = []
    n = iters(200)
    for i in range(n):
        side, tag = (ctx.A, "A") if i % 2 == 0 else (ctx.B, "B")
        line = ("%s line %04d\n" % (tag, i)).encode()
        fd = os.open(side.p(rel), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        want.append(line)
        # The other side must know the new size at once: its next
        # O_APPEND write depends on it.
        other = ctx.B if side is ctx.A else ctx.A
        size = os.stat(other.p(rel)).st_size
        if size != sum(map(len, want)):
            fail("append #%d on %s: size on the other mount is %d, expected %d"
                 % (i, tag, size, sum(map(len, want))))
    whole = b"".join(want)
    for name, m in (("A", ctx.A), ("B", ctx.B)):
        got = read_file(m.p(rel))
        if got != whole:
            gl = got.splitlines(True)
            bad = next((i for i, (g, w) in enumerate(zip(gl, want)) if g != w),
                       min(len(gl), len(want)))
            fail("%d alternating appends, read on %s: %d bytes instead of %d; first "
                 "difference at line %d: %r" % (n, name, len(got), len(whole), bad,
                                                 gl[bad] if bad < len(gl) else None))
    no_timeouts(ctx, "alternating appends")


@test
def overwrite_on_a_read_at_once_on_b(ctx):
    d = fresh(ctx, "overwrite")
    rel = os.path.join(d, "f")
    write_file(ctx.A.p(rel), b"x" * 4096)
    read_file(ctx.B.p(rel))
    for i in range(iters(200)):
        # Same size every time, so only the data version tells them apart.
        data = (b"%06d" % i) * 700
        write_file(ctx.A.p(rel), data)
        got = read_file(ctx.B.p(rel))
        if got != data:
            fail("overwrite #%d on A: B read %r... (%d bytes), expected %r..."
                 % (i, got[:12], len(got), data[:12]))
        # And back: B writes, A reads.
        data = (b"%06d" % -i) * 700
        write_file(ctx.B.p(rel), data)
        got = read_file(ctx.A.p(rel))
        if got != data:
            fail("overwrite #%d on B: A read %r..., expected %r..." % (i, got[:12], data[:12]))
    no_timeouts(ctx, "overwrites")


@test
def rename_on_a_seen_at_once_on_b(ctx):
    d = fresh(ctx, "rename")
    for i in range(iters(100)):
        src, dst = os.path.join(d, "x%d" % i), os.path.join(d, "y%d" % i)
        write_file(ctx.A.p(src), b"v%d" % i)
        # B caches the positive entry, the negative one and the listing.
        expect(os.path.exists(ctx.B.p(src)), "B sees %s" % src)
        expect(not os.path.exists(ctx.B.p(dst)), "B does not see %s yet" % dst)
        os.listdir(ctx.B.p(d))
        os.rename(ctx.A.p(src), ctx.A.p(dst))
        if os.path.exists(ctx.B.p(src)):
            fail("rename #%d: B still sees the old name right after rename() returned on A" % i)
        if not os.path.exists(ctx.B.p(dst)):
            fail("rename #%d: B does not see the new name right after rename() returned on A" % i)
        expect_eq(read_file(ctx.B.p(dst)), b"v%d" % i, "content under the new name on B")
        names = os.listdir(ctx.B.p(d))
        if ("x%d" % i) in names or ("y%d" % i) not in names:
            fail("rename #%d: B's listing is stale: %s" % (i, sorted(names)[-4:]))
    no_timeouts(ctx, "renames")


def concurrent_creates(ctx, tag, n, probe):
    """Mounts A and B create files in one directory at once, each listing it
    now and then (which takes the directory's promise again). Each creator,
    right after its create returned, checks the other mount: the name must
    be there, with its size. With probe, it first looks the name up on the
    other mount (a cacheable negative entry there) and lists the directory
    on both sides every 10 files, so the other mount holds the very dentry
    the create makes stale. Returns (stale reads, cycles, waits)."""
    d = fresh(ctx, tag)
    errors, stale, times = [], [], {}
    before = status(ctx)

    def creator(me, other, t):
        t0 = time.time()
        try:
            for i in range(n):
                name = "%s%d" % (t, i)
                data = b"%s %d" % (t.encode(), i)
                if probe and os.path.exists(other.p(d, name)):
                    errors.append("%s exists on the other mount before its create" % name)
                write_file(me.p(d, name), data)
                # The change has returned: the other mount must see it now.
                try:
                    size = os.stat(other.p(d, name)).st_size
                    if size != len(data):
                        stale.append("%s: size %d on the other mount, expected %d"
                                     % (name, size, len(data)))
                except FileNotFoundError:
                    stale.append("%s: absent on the other mount" % name)
                if i % 10 == 0:
                    os.listdir(me.p(d))      # take the directory's promise again
                    if probe:
                        names = os.listdir(other.p(d))
                        if name not in names:
                            stale.append("%s: not in the other mount's listing" % name)
        except Exception as e:
            errors.append("%s: %s" % (t, e))
        times[t] = time.time() - t0

    ts = [threading.Thread(target=creator, args=(a, b, t))
          for a, b, t in ((ctx.A, ctx.B, "a"), (ctx.B, ctx.A, "b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    expect(not errors, "creator errors: %s" % errors[:5])
    for m in (ctx.A, ctx.B):
        names = set(os.listdir(m.p(d)))
        want = set("%s%d" % (t, i) for t in "ab" for i in range(n))
        expect(want <= names, "missing on %s: %s" % (m.path, sorted(want - names)[:5]))
    st = status(ctx)
    cycles = st.get("cb_ack_cycles", 0) - before.get("cb_ack_cycles", 0)
    waits = st.get("cb_ack_waits", 0) - before.get("cb_ack_waits", 0)
    print("# %s: %d creates per mount in one directory: A %.2fs, B %.2fs; "
          "%d breaks waited for, %d not (cb_ack_cycles), %d stale reads"
          % (tag, n, times.get("a", -1), times.get("b", -1), waits, cycles, len(stale)))
    no_timeouts(ctx, "concurrent creates in one directory")
    return stale, cycles, waits


@test
def both_mounts_change_one_directory_at_once(ctx):
    # Each mount's create holds its own directory lock while the server
    # waits for the other mount's acknowledgement, whose invalidation of
    # that directory's entries would need that very lock: the mount
    # acknowledges without it (docs/LOCKING.md), so the server waits for
    # every break and no create returns before the other mount sees it.
    stale, cycles, waits = concurrent_creates(ctx, "together", iters(150), False)
    expect(waits > 0, "no create waited for an acknowledgement")
    if not kernel_has_epoch():
        print("# kernel %s has no dentry epoch: stale reads and cycles not checked"
              % os.uname().release)
        return
    expect(not stale, "%d reads on the other mount right after a create were "
           "stale: %s" % (len(stale), stale[:5]))
    expect_eq(cycles, 0, "breaks not waited for (cb_ack_cycles)")


@test
def both_mounts_change_one_directory_each_holding_the_other_name(ctx):
    # As above, and each mount has just looked up (and cached as absent)
    # the name the other creates: that negative dentry is what must be gone
    # when the create returns, although the mount's own create holds the
    # lock its invalidation would need.
    stale, cycles, waits = concurrent_creates(ctx, "negative", iters(150), True)
    if not kernel_has_epoch():
        print("# kernel %s has no dentry epoch: stale reads and cycles not checked"
              % os.uname().release)
        return
    expect(not stale, "%d reads on the other mount right after a create were "
           "stale: %s" % (len(stale), stale[:5]))
    expect_eq(cycles, 0, "breaks not waited for (cb_ack_cycles)")


@test
def raw_client_acknowledges_and_stays(ctx):
    d = fresh(ctx, "rawack")
    write_file(ctx.A.p(d, "f"), b"one")
    c = AckConn("127.0.0.1", ctx.srv.port)
    try:
        root = c.hello()
        dd = c.lookup(root["fid"], d)
        f = c.lookup(dd["fid"], "f")
        c.getattr(f["fid"])
        # The client answers only what it reads: read while A writes.
        w = threading.Thread(target=write_file, args=(ctx.A.p(d, "f"), b"two"))
        t0 = time.time()
        w.start()
        while w.is_alive():
            c.poll_breaks(0.02)
        dt = time.time() - t0
        w.join()
        c.poll_breaks(0.2)
        expect(c.break_ids, "the raw client got no CB_BREAK")
        expect(all(i != 0 for i in c.break_ids), "break ids %s: 0 is not allowed" % c.break_ids)
        expect(dt < ACK_TIMEOUT * 0.5, "write on A took %.2fs with an acknowledging client" % dt)
        c.ping()   # still connected
    finally:
        c.close()
    no_timeouts(ctx, "an acknowledging raw client")


@test
def raw_client_without_ack_flag_is_not_waited_for(ctx):
    d = fresh(ctx, "noflag")
    write_file(ctx.A.p(d, "f"), b"one")
    c = AckConn("127.0.0.1", ctx.srv.port)
    c.auto_ack = False
    try:
        root = c.hello(flags=0)
        dd = c.lookup(root["fid"], d)
        f = c.lookup(dd["fid"], "f")
        c.getattr(f["fid"])
        t0 = time.time()
        write_file(ctx.A.p(d, "f"), b"two")
        dt = time.time() - t0
        expect(dt < ACK_TIMEOUT * 0.5, "write on A took %.2fs: the server waited for a "
               "client that never said HELLO_CB_ACK" % dt)
        expect(c.expect_break((f["fid"], "")), "no CB_BREAK for the file")
        expect(all(i != 0 for i in c.break_ids), "break ids %s: 0 is not allowed" % c.break_ids)
        c.ping()
    finally:
        c.close()
    no_timeouts(ctx, "a raw client without HELLO_CB_ACK")


def dead_client(ctx, tag, read_socket):
    d = fresh(ctx, tag)
    write_file(ctx.A.p(d, "f"), b"one")
    # A's daemon made d and f itself: on the server before c looks (else
    # their arrival breaks c's fresh promise on d, which c never
    # acknowledges, before the break this test is about).
    end = time.time() + 20
    while H.mount_status(ctx.A).get("wb.pending_changes", 0):
        if time.time() > end:
            fail("A's journal not sent within 20 s")
        time.sleep(0.05)
    c = AckConn("127.0.0.1", ctx.srv.port)
    c.auto_ack = False
    stop = threading.Event()
    try:
        root = c.hello()
        cid = c.client_id.hex()[:16]
        dd = c.lookup(root["fid"], d)
        f = c.lookup(dd["fid"], "f")
        c.getattr(f["fid"])
        reader = None
        if read_socket:
            # Reads everything (so TCP never pushes back), answers nothing.
            def drain():
                c.sock.settimeout(0.2)
                while not stop.is_set():
                    try:
                        c._dispatch(c.recv_frame())
                    except (OSError, EOFError):
                        if stop.is_set():
                            return
                        continue
            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
        limit = ACK_TIMEOUT + (3.0 if H.ASAN else 1.0)
        t0 = time.time()
        write_file(ctx.A.p(d, "f"), b"two")
        dt = time.time() - t0
        print("# write+close on A with a silent client (%s): %.2fs" % (tag, dt))
        expect(dt < limit, "write+close on A took %.2fs with a silent client; limit %.1fs"
               % (dt, limit))
        expect(dt > ACK_TIMEOUT * 0.8,
               "write+close on A took only %.2fs: did the server wait for the acknowledgement?" % dt)
        # Once dropped, the client costs nothing more.
        t0 = time.time()
        write_file(ctx.A.p(d, "f"), b"three")
        dt = time.time() - t0
        expect(dt < 1.0, "the next write took %.2fs: the silent client still holds promises" % dt)
        lines = [l for l in ctx.srv.log_lines() if "did not acknowledge" in l]
        expect(any(cid in l for l in lines),
               "no server log line names client %s as silent; lines: %s" % (cid, lines))
        expect_eq(read_file(ctx.B.p(d, "f")), b"three", "B's view after all that")
        st = status(ctx)
        expect(st.get("cb_ack_timeouts", 0) >= 1, "cb_ack_timeouts %s" % st.get("cb_ack_timeouts"))
    finally:
        stop.set()
        c.close()


@test
def silent_client_that_never_reads(ctx):
    dead_client(ctx, "noread", read_socket=False)


@test
def silent_client_that_reads_but_never_acks(ctx):
    dead_client(ctx, "noack", read_socket=True)


@test
def mounts_still_coherent_after_a_client_was_dropped(ctx):
    d = fresh(ctx, "after")
    for i in range(iters(20)):
        write_file(ctx.A.p(d, "f"), b"%d" % i)
        expect_eq(read_file(ctx.B.p(d, "f")), b"%d" % i, "B after write #%d" % i)


if __name__ == "__main__":
    H.main(setup=setup)
