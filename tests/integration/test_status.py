#!/usr/bin/env python3
# timeout: 180
"""test_status.py - `cairn status MOUNTPOINT`: a mount's own counters.

A real server and two mounts, A and B. The counters must follow what
the tests do through ordinary system calls, by amounts that can be
predicted: a write(2) of 4 KiB is one WRITE call (writes go through to the
server), a first read of a file fetches exactly its size, a stat of a name
A never saw is a lookup that leaves a promise, and a change B makes to a
file A has cached reaches A as a callback break that A acknowledges.

The daemon answers from its own thread: it must answer while a FUSE
request waits for a stopped server. When the daemon itself is stopped,
status gives up after 2 s; when it is dead, or the caller may not ask,
or the path is not on a Cairn mount, status says so and exits 1. The
server form (`cairn status HOST:PORT`) is unchanged. Every key a mount
prints is documented in docs/cairn.1.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, expect, expect_eq, fail, write_file, read_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOBODY = (65534, 65534)


def status(path, cwd=None):
    """`cairn status PATH` of a mount: its keys as a dict (ints where the
    value is one)."""
    r = H.run_cairn(["status", path], timeout=15, cwd=cwd)
    if r.returncode != 0:
        fail("cairn status %s exited %d: %s" % (path, r.returncode, r.stderr.strip()))
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        expect(k and k not in out, "status line %r: empty or repeated key" % line)
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


def delta(before, after, key):
    expect(key in before and key in after, "key %s missing from status" % key)
    return after[key] - before[key]


def eventually(fn, what, timeout=10.0):
    """Poll fn() until true (for counters bumped just after the event the
    test waits for, e.g. an acknowledgement counted after it is sent)."""
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            fail("%s: not within %ss" % (what, timeout))
        time.sleep(0.05)


def setup(ctx):
    ctx.srv = ctx.server()
    ctx.A = ctx.mount(ctx.srv, "a")
    ctx.B = ctx.mount(ctx.srv, "b")
    ctx.n = 0


def fresh(ctx, tag):
    """A new directory, made on B (A has never looked it up)."""
    ctx.n += 1
    rel = "%02d-%s" % (ctx.n, tag)
    os.mkdir(ctx.B.p(rel))
    return rel


@test
def mount_point_subdir_and_relative_name_all_answer(ctx):
    A = ctx.A
    s = status(A.path)
    expect_eq(s.get("mount"), os.path.realpath(A.path), "mount key")
    expect_eq(s.get("server"), ctx.srv.addr, "server key")
    if A.pid:
        expect_eq(s.get("pid"), A.pid, "pid key (the daemon of this mount)")
    expect_eq(s.get("rpc.connected"), 1, "rpc.connected")
    expect(s.get("rpc.hello.calls", 0) >= 1, "rpc.hello.calls counts the handshake: %r"
           % s.get("rpc.hello.calls"))
    expect(s.get("uptime_s", -1) >= 0, "uptime_s")
    # A directory inside the mount, and a name relative to the cwd.
    d = fresh(ctx, "sub")
    expect_eq(status(A.p(d)).get("mount"), os.path.realpath(A.path), "mount key of a subdirectory")
    expect_eq(status("a", cwd=ctx.dir).get("mount"), os.path.realpath(A.path),
              "mount key of a relative name")
    expect_eq(status(ctx.B.path).get("mount"), os.path.realpath(ctx.B.path), "B's own mount key")


@test
def writes_and_reads_are_counted_per_operation(ctx):
    A, B = ctx.A, ctx.B
    d = fresh(ctx, "rw")
    f = A.p(d, "w")
    fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        before = status(A.path)
        for i in range(3):
            expect_eq(os.pwrite(fd, b"x" * 4096, i * 4096), 4096, "pwrite %d" % i)
        # The writeback cache: write(2) only fills the page cache, and
        # the kernel sends the dirty pages (in the background, at the
        # latest on fsync) in WRITEs of up to 1 MiB: here 1 to 3.
        os.fsync(fd)
        after = status(A.path)
    finally:
        os.close(fd)
    # The last with the times after it: a WRITEATTR.
    n = (delta(before, after, "rpc.write.calls") +
         delta(before, after, "rpc.writeattr.calls"))
    expect(1 <= n <= 3, "rpc.write.calls + rpc.writeattr.calls after 3 "
           "writes and an fsync: %d" % n)
    out = (delta(before, after, "rpc.write.bytes_out") +
           delta(before, after, "rpc.writeattr.bytes_out"))
    expect(out >= 3 * 4096, "rpc.write.bytes_out + rpc.writeattr.bytes_out "
           "grew by %d, less than the data written" % out)
    # The fsync's last change went durable itself (WR_SYNC or SA_SYNC:
    # no FSYNC), or, when a shipper had sent everything before the
    # fsync came, one FSYNC followed.
    fs = delta(before, after, "rpc.fsync.calls")
    expect(fs in (0, 1), "rpc.fsync.calls after an fsync: %d" % fs)
    expect(delta(before, after, "rpc.calls") >= n + fs,
           "rpc.calls grew by less than the WRITEs and the FSYNC")
    # fsync of a directory reaches the server too: its commits are
    # durable within about a second unless someone syncs.
    dfd = os.open(A.p(d), os.O_RDONLY | os.O_DIRECTORY)
    try:
        b2 = status(A.path)
        os.fsync(dfd)
        a2 = status(A.path)
    finally:
        os.close(dfd)
    expect_eq(delta(b2, a2, "rpc.fsync.calls"), 1, "rpc.fsync.calls after fsync of a directory")
    expect(delta(before, after, "rpc.bytes_out") >= delta(before, after, "rpc.write.bytes_out"),
           "rpc.bytes_out counts every frame")
    expect(after["rpc.write.us_max"] >= after["rpc.write.us_mean"],
           "write round trips: mean %d above max %d"
           % (after["rpc.write.us_mean"], after["rpc.write.us_max"]))

    # A first read of a file A never read fetches exactly its bytes.
    size = 64 * 1024 + 123
    write_file(B.p(d, "r"), os.urandom(size))
    before = status(A.path)
    expect_eq(len(read_file(A.p(d, "r"))), size, "size read on A")
    after = status(A.path)
    expect_eq(delta(before, after, "data.fetched_bytes"), size, "data.fetched_bytes after a first read")
    expect(delta(before, after, "rpc.read.calls") >= 1, "rpc.read.calls did not grow")
    expect(delta(before, after, "rpc.read.bytes_in") > size, "rpc.read.bytes_in: frames carry the data")


@test
def lookups_leave_promises_and_inodes(ctx):
    A, B = ctx.A, ctx.B
    d = fresh(ctx, "look")
    for i in range(3):
        write_file(B.p(d, "f%d" % i), b"x")
    before = status(A.path)
    for i in range(3):
        os.stat(A.p(d, "f%d" % i))
    after = status(A.path)
    # d and its three files: new inodes, each promised by the reply that
    # named it (nothing changed since).
    expect(delta(before, after, "inodes") >= 4, "inodes grew by %d after stat of d/f0..f2"
           % delta(before, after, "inodes"))
    expect(delta(before, after, "promises") >= 3, "promises grew by %d after stat of d/f0..f2"
           % delta(before, after, "promises"))
    expect(after["promises"] <= after["inodes"], "more promises than inodes")
    # A name that does not exist: no new inode, and no server call: the
    # stats above fetched d's listing (one BULKSTAT), which answers it.
    before = status(A.path)
    expect_eq(H.errno_of(os.stat, A.p(d, "missing")), 2, "stat of a missing name")
    after = status(A.path)
    expect_eq(delta(before, after, "inodes"), 0, "inodes after a failed lookup")
    expect_eq(delta(before, after, "rpc.lookup.calls") +
              delta(before, after, "rpc.bulkstat.calls"), 0,
              "server calls for a name missing from a cached listing")
    expect(delta(before, after, "dir.lookup_neg_hits") >= 1,
           "dir.lookup_neg_hits grew by %d after a name missing from a cached listing"
           % delta(before, after, "dir.lookup_neg_hits"))
    expect(after["dir.listings"] >= 1 and after["dir.fetched"] >= 1,
           "dir.listings %r, dir.fetched %r after d's listing was fetched"
           % (after["dir.listings"], after["dir.fetched"]))


@test
def a_change_on_b_is_a_break_received_and_acknowledged_on_a(ctx):
    A, B = ctx.A, ctx.B
    d = fresh(ctx, "brk")
    write_file(B.p(d, "g"), b"one\n")
    expect_eq(read_file(A.p(d, "g")), b"one\n", "A caches g")
    before = status(A.path)
    with open(B.p(d, "g"), "ab") as f:
        f.write(b"two\n")
    # B's close returned: the server has A's acknowledgement, so A got the
    # break; the ack counter follows the send on A's side.
    after = status(A.path)
    expect(delta(before, after, "cb_breaks") >= 1, "cb_breaks did not grow on A")
    expect(delta(before, after, "cb_break_records") >= 1, "cb_break_records did not grow on A")
    eventually(lambda: delta(before, status(A.path), "cb_acks") >= 1, "cb_acks grows on A")
    s = status(A.path)
    expect(s["cb_ack_us_max"] >= s["cb_ack_us_mean"], "ack latency: mean above max")
    expect(s["cb_invalidations"] >= 1, "no kernel invalidation counted")
    expect_eq(read_file(A.p(d, "g")), b"one\ntwo\n", "A sees B's change")


@test
def answers_while_a_call_waits_for_a_stopped_server(ctx):
    A = ctx.A
    d = fresh(ctx, "hung")
    os.stat(A.p(d))
    res = {}

    def waiter():
        res["errno"] = H.errno_of(os.stat, A.p(d, "never-seen"))

    t = threading.Thread(target=waiter, daemon=True)
    try:
        H.sigstop(ctx.srv.proc.pid)
        t.start()
        # The stat's lookup is in flight on a FUSE thread, its reply
        # held back by the stopped server: status still answers at once.
        s = eventually(lambda: (lambda s: s if s["rpc.waiting"] >= 1 else None)(status(A.path)),
                       "rpc.waiting >= 1 while the server is stopped")
        expect_eq(s["rpc.connected"], 1, "rpc.connected while the server is stopped")
    finally:
        os.kill(ctx.srv.proc.pid, signal.SIGCONT)
    t.join(30)
    expect(not t.is_alive(), "the stat did not finish after SIGCONT")
    expect_eq(res.get("errno"), 2, "stat of a missing name after SIGCONT")
    expect_eq(status(A.path)["rpc.waiting"], 0, "rpc.waiting once answered")


@test
def a_stopped_client_is_reported_after_2_s(ctx):
    A = ctx.A
    if not A.pid:
        raise H.Skip("daemon pid of A not found")
    try:
        H.sigstop(A.pid)
        r = H.run_cairn(["status", A.path], timeout=20)
    finally:
        os.kill(A.pid, signal.SIGCONT)
    expect_eq(r.returncode, 1, "exit status of status on a stopped client")
    expect("did not answer within 2 s" in r.stderr, "message: %r" % r.stderr)
    expect_eq(status(A.path)["rpc.connected"], 1, "status after SIGCONT")


@test
def a_dead_client_is_reported(ctx):
    C = ctx.mount(ctx.srv, "c")
    if not C.pid:
        raise H.Skip("daemon pid of C not found")
    os.kill(C.pid, signal.SIGKILL)
    end = time.time() + 10
    while H.pid_alive(C.pid) and time.time() < end:
        time.sleep(0.05)
    r = H.run_cairn(["status", C.path], timeout=20)
    expect_eq(r.returncode, 1, "exit status of status on a dead client")
    expect("not answering" in r.stderr, "message: %r" % r.stderr)
    C.umount()


@test
def another_user_is_refused(ctx):
    A = ctx.A

    def run():
        p = subprocess.run([H.CAIRN, "status", A.path], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=15, text=True)
        return p.returncode, p.stdout, p.stderr

    if os.geteuid() != 0:
        raise H.Skip("needs root to switch users")
    kind, v = H.as_user(*NOBODY, run)
    expect_eq(kind, "ok", "running cairn status as uid 65534: %r" % (v,))
    rc, out, err = v
    expect_eq(rc, 1, "exit status as another user")
    expect_eq(out, "", "nothing printed on stdout as another user")
    expect("permission denied" in err, "message: %r" % err)


@test
def not_a_cairn_mount_fails_clearly(ctx):
    plain = ctx.local("plain")
    r = H.run_cairn(["status", plain])
    expect_eq(r.returncode, 1, "exit status on a plain directory")
    expect("not in a Cairn mount" in r.stderr or "not a Cairn mount" in r.stderr,
           "message: %r" % r.stderr)
    expect_eq(r.stdout, "", "stdout on a plain directory")
    r = H.run_cairn(["status", "/"])
    expect_eq(r.returncode, 1, "exit status on /")
    expect("not a Cairn mount" in r.stderr or "not in a Cairn mount" in r.stderr,
           "message on /: %r" % r.stderr)
    r = H.run_cairn(["status", ctx.path("no", "such")])
    expect_eq(r.returncode, 1, "exit status on a missing path")
    expect("No such file" in r.stderr, "message on a missing path: %r" % r.stderr)
    r = H.run_cairn(["status", "a", "b"])
    expect_eq(r.returncode, 2, "exit status with two arguments")


@test
def the_server_form_still_works(ctx):
    r = H.run_cairn(["status", ctx.srv.addr])
    expect_eq(r.returncode, 0, "cairn status %s: %s" % (ctx.srv.addr, r.stderr))
    keys = dict(l.partition(" ")[::2] for l in r.stdout.splitlines())
    for k in ("uptime_s", "connections", "callbacks", "op.getattr.calls", "rpc.calls"):
        expect(k in keys, "server key %s missing" % k)
    expect("mount" not in keys, "the server's status has a mount key")
    r = H.run_cairn(["status", "127.0.0.1:1"])
    expect_eq(r.returncode, 1, "status of a closed port")


URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def possible_cpus():
    """The kernel's count of possible CPUs: one ring queue each."""
    n = 0
    with open("/sys/devices/system/cpu/possible") as f:
        for part in f.read().strip().split(","):
            a, _, b = part.partition("-")
            n += int(b or a) - int(a) + 1
    return n


def ring_traffic(m, d):
    """Ordinary calls on mount m in directory d (relative): creates, writes,
    reads back, stats, a listing. Returns how many files it made."""
    n = 12
    for i in range(n):
        write_file(m.p("%s/f%d" % (d, i)), b"ring %d\n" % i * (i + 1))
    for i in range(n):
        expect_eq(read_file(m.p("%s/f%d" % (d, i))), b"ring %d\n" % i * (i + 1),
                  "content of f%d read back" % i)
        expect_eq(os.stat(m.p("%s/f%d" % (d, i))).st_size, len(b"ring %d\n" % i) * (i + 1),
                  "size of f%d" % i)
    expect_eq(sorted(os.listdir(m.p(d))), sorted("f%d" % i for i in range(n)), "listing")
    return n


@test
def requests_come_over_the_ring_where_the_kernel_can(ctx):
    if not os.path.exists(URING_PARAM):
        raise H.Skip("this kernel has no FUSE over io_uring (%s)" % URING_PARAM)
    A = ctx.A
    before = status(A.path)
    expect_eq(before.get("fuse.uring"), 1, "fuse.uring of a default mount")
    expect_eq(before.get("fuse.ring_queues"), possible_cpus(), "one ring queue per possible CPU")
    expect(before.get("fuse.ring_threads", 0) >= 2 * possible_cpus(),
           "at least 2 threads per queue: %r" % before.get("fuse.ring_threads"))
    d = fresh(ctx, "ring")
    n = ring_traffic(A, d)
    after = status(A.path)
    # Each file: at least a lookup, a create, a write-back and a release.
    expect(delta(before, after, "fuse.ring_requests") >= 4 * n,
           "requests taken from the ring for %d files: %d" % (n, delta(before, after, "fuse.ring_requests")))
    expect_eq(after.get("fuse.ring_malformed"), 0, "malformed ring requests")
    # B (also over the ring) sees every file whole.
    for i in range(n):
        expect_eq(read_file(ctx.B.p("%s/f%d" % (d, i))), b"ring %d\n" % i * (i + 1),
                  "B's read of f%d" % i)


@test
def no_uring_mount_reads_dev_fuse(ctx):
    C = ctx.mount(ctx.srv, "c-no-uring", extra=["--no-uring"])
    try:
        before = status(C.path)
        expect_eq(before.get("fuse.uring"), 0, "fuse.uring of a --no-uring mount")
        expect_eq(before.get("fuse.ring_threads"), 0, "ring threads of a --no-uring mount")
        d = fresh(ctx, "noring")
        ring_traffic(C, d)
        after = status(C.path)
        expect_eq(delta(before, after, "fuse.ring_requests"), 0,
                  "requests taken from a ring by a --no-uring mount")
    finally:
        C.umount()


def man_status_text():
    """The `cairn status` section of docs/cairn.1, macros joined the way
    man joins them (.BI a b c -> abc), fonts and escapes removed."""
    text, on = [], False
    with open(os.path.join(ROOT, "docs", "cairn.1")) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(".SS "):
                on = line.startswith(".SS cairn status")
                continue
            if not on or line.startswith('.\\"'):
                continue
            line = line.replace("\\ ", "\0")  # an escaped space is no separator
            m = re.match(r"\.(BI|IB|BR|RB|IR|RI|B|I) (.*)", line)
            if m:
                args = [a.strip('"') for a in re.findall(r'"[^"]*"|\S+', m.group(2))]
                # Two-font macros alternate fonts with no space between.
                line = ("" if len(m.group(1)) == 2 else " ").join(args)
            line = re.sub(r"\\f[BIRP]", "", line)
            line = line.replace("\\-", "-").replace("\0", " ").replace("\\&", "")
            text.append(line)
    return "\n".join(text)


@test
def every_key_of_a_mount_is_documented(ctx):
    s = status(ctx.A.path)
    page = man_status_text()
    missing = []
    for k in s:
        if k.startswith("cache."):
            continue  # the disk cache's section documents its own keys
        doc = re.sub(r"^rpc\.[a-z_]+\.", "rpc.NAME.", k) if k.count(".") == 2 else k
        if not re.search(r"(^|[^A-Za-z0-9_.])%s($|[^A-Za-z0-9_])" % re.escape(doc), page):
            missing.append(doc)
    expect(not missing, "keys printed but not in docs/cairn.1's cairn status section: %s"
           % ", ".join(sorted(set(missing))))


if __name__ == "__main__":
    H.main(setup=setup)
