#!/usr/bin/env python3
# timeout: 300
"""test_crash.py - the server dies, the data stays, the clients carry on.

- kill -9 of the server at random moments under concurrent writes (data
  and metadata, through a mount), restart on the same data dir and port:
  the mount reconnects by itself, operations after the restart succeed,
  everything acknowledged before the kill (close()/fsync() returned, a
  rename returned) is intact as read by a fresh mount, and `cairn fsck`
  finds the stopped store consistent.
- A second `cairn serve` on the same data dir refuses, naming the dir.
- `cairn mount` of an address where nothing listens fails within 10 s with
  a message naming the address.
- Usage errors exit 2 for every subcommand.
"""

import hashlib
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import write_file, read_file  # noqa: E402,F401
import proto_client as P  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

RECOVER_S = 30   # how long a mount may take to carry on after a restart


def content_for(name):
    """Deterministic content from the name, 0..~200 KiB."""
    h = hashlib.sha256(name.encode()).digest()
    size = int.from_bytes(h[:4], "little") % 200000
    if size % 7 == 0:
        size = 0
    block = hashlib.sha512(h).digest()
    return (block * (size // len(block) + 1))[:size]


def write_durable(path, data):
    H.write_file(path, data, fsync=True)


class Workload:
    """Writers on a mount that record what was acknowledged.

    The mount's writers run in a child process (MountWriters, below), not
    in this one: with the writeback cache a close() of a file with dirty
    pages waits for the server, and so does a child this process forks to
    restart the server (it closes the inherited descriptors before its
    exec): a writer thread's file open at that moment would keep the
    server from starting until --timeout. The child reports each
    acknowledgement on its stdout, which a thread here reads."""

    def __init__(self, mnt, nthreads=2, server=None):
        self.mnt = mnt
        self.server = server
        self.nthreads = nthreads
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked_files = {}        # rel path -> content
        self.acked_renames = []      # (old rel, new rel, content)
        self.errors = []             # (time, text) of failed operations
        self.child = None
        self.threads = [threading.Thread(target=self._reader, daemon=True,
                                         name="mount writers")]
        if server:
            self.threads.append(threading.Thread(target=self._direct, daemon=True,
                                                 name="direct writer"))
            os.makedirs(mnt.p("direct"), exist_ok=True)
        os.makedirs(mnt.p("work"), exist_ok=True)

    def mount_acked(self):
        """Files acknowledged through the mount (not the direct writer)."""
        with self.lock:
            return sum(1 for k in self.acked_files if k.startswith("work/"))

    def start(self):
        self.child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--mount-writers",
             self.mnt.path, str(self.nthreads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            start_new_session=True)
        H._record_pid(self.child.pid)
        for t in self.threads:
            t.start()

    def finish(self, timeout=60):
        self.stop.set()
        if self.child and self.child.stdin:
            try:
                self.child.stdin.close()   # the child's writers stop
            except OSError:
                pass
        stuck = []
        for t in self.threads:
            t.join(timeout)
            if t.is_alive():
                stuck.append(t.name)
        return stuck

    def _err(self, what, e):
        with self.lock:
            self.errors.append((time.time(), "%s: %s" % (what, e)))

    def _reader(self):
        """Take the child's reports until it ends (after finish)."""
        for line in self.child.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            t, _, rest = rest.partition(" ")
            with self.lock:
                if kind == "F":            # F time rel [v2]
                    rel, _, v = rest.partition(" ")
                    self.acked_files[rel] = content_for(rel + v)
                elif kind == "P":          # P time rel: either version
                    self.acked_files.pop(rest, None)
                elif kind == "R":          # R time old new
                    old, _, new = rest.partition(" ")
                    self.acked_renames.append((old, new, content_for(old)))
                elif kind == "E":          # E time text
                    self.errors.append((float(t), rest))
        self.child.wait()

    def _direct(self):
        """Writes straight over the protocol (no FUSE, no client cache):
        CREATE + WRITE + FSYNC; acknowledged once FSYNC is answered. On a
        dropped connection, reconnect and go on."""
        n = 0
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = P.Conn("127.0.0.1", self.server.port, timeout=10)
                    root = conn.hello()
                    d = conn.lookup(root["fid"], "direct")
                n += 1
                rel = "direct/p%05d" % n
                data = content_for(rel)
                f = conn.create(d["fid"], os.path.basename(rel), 0o100644)["child"]
                for off in range(0, len(data), 1 << 20):
                    conn.write(f["fid"], off, data[off:off + (1 << 20)])
                conn.fsync(f["fid"])
            except (OSError, EOFError, P.ProtocolError, P.CairnError) as e:
                self._err("direct write", e)
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
                continue
            with self.lock:
                self.acked_files[rel] = data
        if conn is not None:
            conn.close()


class MountWriters:
    """The child of Workload: writer threads on mount path `root` that
    print F/P/R/E lines (see Workload._reader) and stop when stdin ends."""

    def __init__(self, root, nthreads):
        self.root = root
        self.stop = threading.Event()
        self.out = threading.Lock()
        self.threads = [threading.Thread(target=self._files, args=(i,))
                        for i in range(nthreads)]
        self.threads.append(threading.Thread(target=self._renames))

    def p(self, *rel):
        return os.path.join(self.root, *rel)

    def run(self):
        for t in self.threads:
            t.start()
        sys.stdin.read()               # until the parent closes it
        self.stop.set()
        for t in self.threads:
            t.join()

    def say(self, kind, text):
        with self.out:
            print("%s %.3f %s" % (kind, time.time(), text), flush=True)

    def _files(self, tid):
        n = 0
        while not self.stop.is_set():
            n += 1
            rel = "work/t%d-%05d" % (tid, n)
            data = content_for(rel)
            try:
                write_durable(self.p(rel), data)
            except OSError as e:
                self.say("E", "write %s: %s" % (rel, e))
                time.sleep(0.05)
                continue
            self.say("F", rel)
            # Now and then overwrite an acknowledged file with new content.
            if n % 5 == 0:
                rel2 = "work/t%d-%05d" % (tid, n - 3)
                data2 = content_for(rel2 + "v2")
                try:
                    write_durable(self.p(rel2), data2)
                    self.say("F", rel2 + " v2")
                except OSError as e:
                    # Either version may be there now; forget it.
                    self.say("P", rel2)
                    self.say("E", "overwrite %s: %s" % (rel2, e))

    def _renames(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            d_old, d_new = "work/dir%04d" % n, "work/moved%04d" % n
            data = content_for(d_old)
            try:
                os.mkdir(self.p(d_old))
                write_durable(self.p(d_old, "f"), data)
                os.rename(self.p(d_old), self.p(d_new))
            except OSError as e:
                self.say("E", "mkdir/rename %s: %s" % (d_old, e))
                time.sleep(0.05)
                continue
            self.say("R", "%s %s" % (d_old, d_new))


def verify(mnt, wl, what):
    bad = []
    with wl.lock:
        files = dict(wl.acked_files)
        renames = list(wl.acked_renames)
    for rel, data in sorted(files.items()):
        try:
            got = read_file(mnt.p(rel))
        except OSError as e:
            bad.append("%s: %s" % (rel, e))
            continue
        if got != data:
            bad.append("%s: %d bytes, expected %d (content differs)" % (rel, len(got), len(data)))
    for old, new, data in renames:
        if os.path.lexists(mnt.p(old)):
            bad.append("%s still exists after its acknowledged rename to %s" % (old, new))
        try:
            if read_file(mnt.p(new, "f")) != data:
                bad.append("%s/f: content differs" % new)
        except OSError as e:
            bad.append("%s/f: %s" % (new, e))
    if bad:
        fail("%s: %d of %d acknowledged files/renames lost or wrong:\n  %s"
             % (what, len(bad), len(files) + len(renames), "\n  ".join(bad[:15])))
    return len(files), len(renames)


def probe(mnt, tag):
    """An operation after a restart: create, write, read back, list."""
    rel = "probe-%s" % tag
    data = os.urandom(10000)
    write_durable(mnt.p(rel), data)
    expect_eq(read_file(mnt.p(rel)), data, "read back %s after restart" % rel)
    expect(rel in os.listdir(mnt.path), "%s not listed after restart" % rel)


@test(timeout=280)
def kill9_under_writes_then_restart_and_fsck(ctx):
    rng = random.Random(os.environ.get("CAIRN_TEST_SEED") or time.time())
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    wl = Workload(a, nthreads=2, server=srv)
    wl.start()
    cycles = 3 if H.ASAN else 5
    kill_times = []
    try:
        for cycle in range(cycles):
            time.sleep(rng.uniform(0.3, 1.5))
            n_before = wl.mount_acked()
            srv.kill9()
            kill_times.append(time.time())
            time.sleep(rng.uniform(0.0, 0.5))
            srv.start()
            # The mount must carry on by itself.
            H.with_deadline(RECOVER_S, "probe after restart #%d" % (cycle + 1), probe, a, str(cycle))
            # And the writers must make progress again.
            t0 = time.time()
            while True:
                n_now = wl.mount_acked()
                if n_now > n_before + 2:
                    break
                if time.time() - t0 > RECOVER_S:
                    fail("writers on the mount made no progress within %ds after restart #%d (acked %d -> %d); "
                         "last errors: %s" % (RECOVER_S, cycle + 1, n_before, n_now,
                                              [e for _, e in wl.errors[-3:]]))
                time.sleep(0.1)
        # The last kill happens while the writers are still running.
        time.sleep(rng.uniform(0.2, 0.8))
        srv.kill9()
        kill_times.append(time.time())
    finally:
        stuck = wl.finish(timeout=5 if srv.running() else 1)
    srv.start()
    stuck = [t for t in wl.threads if t.is_alive()]
    if stuck:
        # Their pending calls should complete now that the server is back.
        for t in stuck:
            t.join(RECOVER_S)
        stuck = [t.name for t in wl.threads if t.is_alive()]
        expect(not stuck, "writer threads still blocked %ds after the final restart: %s"
               % (RECOVER_S, stuck))

    # Errors are allowed only around a kill (an in-flight call may fail).
    late = [e for t, e in wl.errors if not any(k - 0.5 <= t <= k + RECOVER_S for k in kill_times)]
    expect(not late, "operations failed away from any kill: %s" % late[:5])
    if wl.errors:
        print("# note: %d operations failed around kills, e.g. %s" % (len(wl.errors), wl.errors[0][1]))

    # A fresh mount reads what the server has (not A's cache).
    b = ctx.mount(srv, "b")
    nf, nr = H.with_deadline(120, "verify on fresh mount", verify, b, wl, "fresh mount after %d kills" % len(kill_times))
    expect(nf >= 10, "too little work acknowledged to mean anything (%d files)" % nf)
    print("# %d files and %d renames acknowledged across %d kills, all intact" % (nf, nr, len(kill_times)))
    H.with_deadline(60, "verify on mount A", verify, a, wl, "mount A after restart")
    H.with_deadline(RECOVER_S, "probe on A after final restart", probe, a, "final")

    for m in ctx.mounts:
        m.umount()
    rc = srv.stop()
    expect_eq(rc, 0, "exit status of cairn serve after SIGTERM")
    p = H.run_cairn(["fsck", "--data", srv.data], timeout=120)
    if p.returncode != 0:
        fail("cairn fsck --data %s exited %d after %d kills:\n%s%s"
             % (srv.data, p.returncode, len(kill_times), p.stdout[-2000:], p.stderr[-2000:]))


@test(timeout=120)
def kill9_during_large_fsync(ctx):
    """A large file being written when the server dies: after restart the
    client finishes it (or fails it cleanly) and the store stays sane."""
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    done = {}

    def big():
        try:
            write_durable(a.p("big"), b"\xab" * (32 << 20))
            done["ok"] = True
        except OSError as e:
            done["err"] = e
    t = threading.Thread(target=big, daemon=True)
    t.start()
    time.sleep(0.3)
    srv.kill9()
    time.sleep(0.2)
    srv.start()
    t.join(RECOVER_S + 30)
    expect(not t.is_alive(), "32 MiB write+fsync never finished after the server restarted")
    if done.get("ok"):
        b = ctx.mount(srv, "b")
        got = H.with_deadline(60, "read big file", read_file, b.p("big"))
        expect(got == b"\xab" * (32 << 20), "32 MiB file acknowledged by fsync is wrong after restart "
               "(%d bytes)" % len(got))
    H.with_deadline(RECOVER_S, "probe after restart", probe, a, "big")
    for m in ctx.mounts:
        m.umount()
    expect_eq(srv.stop(), 0, "exit status of cairn serve after SIGTERM")
    p = H.run_cairn(["fsck", "--data", srv.data], timeout=120)
    expect(p.returncode == 0, "cairn fsck exited %d: %s%s" % (p.returncode, p.stdout[-1500:], p.stderr[-1500:]))


@test(timeout=120)
def clean_restart_keeps_everything(ctx):
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    os.makedirs(a.p("x", "y"))
    write_durable(a.p("x", "y", "f"), b"kept")
    os.symlink("y/f", a.p("x", "link"))
    os.setxattr(a.p("x", "y", "f"), "user.k", b"v")
    os.chmod(a.p("x", "y", "f"), 0o640)
    # A chmod goes through the write-back journal like a write: durable
    # (on the server) once fsync returns.
    fd = os.open(a.p("x", "y", "f"), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    expect_eq(srv.stop(), 0, "exit status of cairn serve after SIGTERM")
    p = H.run_cairn(["fsck", "--data", srv.data], timeout=60)
    expect(p.returncode == 0, "fsck after clean stop exited %d: %s%s" % (p.returncode, p.stdout, p.stderr))
    srv.start()
    got = H.with_deadline(RECOVER_S, "read after clean restart", read_file, a.p("x", "link"))
    expect_eq(got, b"kept", "file through symlink after restart (same mount)")
    b = ctx.mount(srv, "b")
    expect_eq(read_file(b.p("x", "y", "f")), b"kept", "file on fresh mount after restart")
    expect_eq(os.getxattr(b.p("x", "y", "f"), "user.k"), b"v", "xattr after restart")
    expect_eq(os.stat(b.p("x", "y", "f")).st_mode & 0o777, 0o640, "mode after restart")


@test
def second_serve_on_same_data_dir_refuses(ctx):
    srv = ctx.server()
    t0 = time.time()
    p = H.run_cairn(["serve", "--data", srv.data, "--listen", "127.0.0.1:0"], timeout=15)
    expect(p.returncode != 0, "second cairn serve on %s exited 0 (it must refuse)" % srv.data)
    expect(p.returncode != 2, "second serve exited 2 (usage error) instead of a refusal")
    msg = p.stderr + p.stdout
    expect(srv.data in msg, "refusal message does not name the data dir %s: %r" % (srv.data, msg.strip()))
    expect(time.time() - t0 < 10, "second serve took %.1fs to refuse" % (time.time() - t0))
    # The first server is unharmed.
    expect(srv.running(), "first server died when a second one tried the same data dir")
    a = ctx.mount(srv, "a")
    write_durable(a.p("f"), b"fine")
    expect_eq(read_file(a.p("f")), b"fine", "first server still serves")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@test
def mount_unreachable_fails_fast(ctx):
    cases = [("127.0.0.1:%d" % free_port(), "nothing listens"),
             ("192.0.2.1:7070", "unroutable TEST-NET address")]
    for addr, why in cases:
        mnt = ctx.path("mnt-" + why.split()[0])
        os.makedirs(mnt)
        t0 = time.time()
        try:
            p = subprocess.run([H.CAIRN, "mount", "--cache-dir", ctx.path("cache-x"), addr, mnt],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            H.Mount(ctx, None, mnt, ctx.path("cache-x"), ctx.path("x.log")).umount()
            fail("cairn mount %s (%s) still running after 20 s" % (addr, why))
        took = time.time() - t0
        if H.is_mounted(mnt):
            H.Mount(ctx, None, mnt, ctx.path("cache-x"), ctx.path("x.log")).umount()
            fail("cairn mount %s (%s) mounted something" % (addr, why))
        expect(p.returncode not in (0, 2), "cairn mount %s (%s): exit %d, expected a failure status "
               "(not 0, not the usage status 2)" % (addr, why, p.returncode))
        expect(took <= 10.5, "cairn mount %s (%s) took %.1fs to fail (limit 10 s)" % (addr, why, took))
        expect(addr in p.stderr, "cairn mount %s (%s): message does not name the address: %r"
               % (addr, why, p.stderr.strip()))


@test
def mount_foreground_and_umount(ctx):
    """`cairn mount -f` stays in the foreground while mounted; `cairn
    umount` ends it with status 0; umount of a non-mount fails cleanly."""
    srv = ctx.server()
    mnt, cache = ctx.path("fg"), ctx.path("cache-fg")
    os.makedirs(mnt)
    log = open(ctx.path("fg.log"), "wb")
    p = subprocess.Popen([H.CAIRN, "mount", "-f", "--cache-dir", cache, srv.addr, mnt],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    H._record_pid(p.pid)
    m = H.Mount(ctx, srv, mnt, cache, ctx.path("fg.log"))
    m.pid = p.pid
    ctx.mounts.append(m)
    end = time.time() + 15
    while time.time() < end and not H.is_mounted(mnt) and p.poll() is None:
        time.sleep(0.05)
    expect(H.is_mounted(mnt), "cairn mount -f: not mounted after 15 s (exit %s)" % p.poll())
    expect(p.poll() is None, "cairn mount -f returned while mounted (exit %s)" % p.poll())
    write = os.path.join(mnt, "f")
    with open(write, "wb") as f:
        f.write(b"fg")
    u = H.run_cairn(["umount", mnt], timeout=20)
    expect_eq(u.returncode, 0, "exit status of cairn umount (stderr %r)" % u.stderr.strip())
    try:
        rc = p.wait(15)
    except subprocess.TimeoutExpired:
        fail("cairn mount -f still running 15 s after cairn umount")
    expect_eq(rc, 0, "exit status of cairn mount -f after cairn umount")
    expect(not H.is_mounted(mnt), "still mounted after cairn umount")
    # umount of something that is not a Cairn mount: failure, not usage.
    u = H.run_cairn(["umount", mnt], timeout=20)
    expect(u.returncode not in (0, 2), "cairn umount of a plain directory exited %d" % u.returncode)
    expect(mnt in u.stderr, "cairn umount error does not name the path: %r" % u.stderr.strip())


@test
def umount_of_a_busy_mount_says_so_and_waits_out_a_moment(ctx):
    """A process standing in a mount keeps it: `cairn umount` tries again
    for a second, then says the mount is busy, exits 1 and leaves it
    mounted and serving. A hold of a moment is waited out: a path lookup
    in progress holds a mount too (the client's own statfs right after
    `cairn mount -f`, which made a umount right after it fail under
    load)."""
    srv = ctx.server()
    m = ctx.mount(srv, "busy")
    write_file(m.p("f"), b"kept")
    inside = subprocess.Popen(["sleep", "60"], cwd=m.path, stdin=subprocess.DEVNULL)
    H._record_pid(inside.pid)
    try:
        u = H.run_cairn(["umount", m.path], timeout=20)
        expect_eq(u.returncode, 1, "exit status of cairn umount with a process inside")
        expect("busy" in u.stderr and m.path in u.stderr,
               "cairn umount does not say the mount is busy: %r" % u.stderr.strip())
        expect(H.is_mounted(m.path), "unmounted although a process stands in it")
        expect_eq(read_file(m.p("f")), b"kept", "the mount still serves after the refusal")
    finally:
        inside.kill()
        inside.wait(10)
    # A hold of a moment (here an open directory, 0.3 s) is waited out.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
         "print('open', flush=True)\n"
         "time.sleep(0.3)\n"
         "os.close(fd)\n", m.path],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    H._record_pid(holder.pid)
    try:
        expect_eq(holder.stdout.readline().strip(), b"open", "the holder's first line")
        u = H.run_cairn(["umount", m.path], timeout=20)
    finally:
        holder.kill()
        holder.wait(10)
    expect_eq(u.returncode, 0, "exit status of cairn umount while a directory was open for "
              "0.3 s more (stderr %r)" % u.stderr.strip())
    expect(not H.is_mounted(m.path), "still mounted after cairn umount")


@test
def usage_errors_exit_2(ctx):
    d = ctx.path("d")
    os.makedirs(d)
    cases = [
        [],
        ["no-such-command"],
        ["serve"],
        ["serve", "--no-such-option"],
        ["serve", "--data"],
        ["serve", "--data", d, "extra-arg"],
        ["mount"],
        ["mount", "127.0.0.1:1"],
        ["mount", "--no-such-option", "127.0.0.1:1", d],
        ["mount", "127.0.0.1:1", d, "extra"],
        ["umount"],
        ["umount", d, "extra"],
        ["umount", "--no-such-option", d],
        ["fsck"],
        ["fsck", "--no-such-option"],
        ["fsck", "--data"],
        ["status", "--no-such-option"],
        ["status", "a", "b", "c"],
    ]
    bad = []
    for args in cases:
        p = H.run_cairn(args, timeout=15)
        if p.returncode != 2:
            bad.append("cairn %s: exit %d (stderr %r)" % (" ".join(args), p.returncode, p.stderr.strip()[:120]))
        elif "usage" not in p.stderr.lower():
            bad.append("cairn %s: exit 2 but no usage message on stderr (%r)"
                       % (" ".join(args), p.stderr.strip()[:120]))
    expect(not bad, "wrong usage handling:\n" + "\n".join(bad))
    expect(not H.is_mounted(d), "a usage error mounted something")


@test
def help_for_every_subcommand(ctx):
    bad = []
    for cmd in ("serve", "mount", "umount", "fsck", "status"):
        p = H.run_cairn([cmd, "--help"], timeout=15)
        if p.returncode != 0 or "usage" not in (p.stdout + p.stderr).lower():
            bad.append("cairn %s --help: exit %d, output %r" % (cmd, p.returncode,
                                                               (p.stdout + p.stderr).strip()[:100]))
    expect(not bad, "\n".join(bad))


@test
def fsck_on_fresh_and_missing_store(ctx):
    srv = ctx.server()
    expect_eq(srv.stop(), 0, "exit status of cairn serve after SIGTERM")
    p = H.run_cairn(["fsck", "--data", srv.data], timeout=60)
    expect(p.returncode == 0, "fsck of a fresh store exited %d: %s%s" % (p.returncode, p.stdout, p.stderr))
    missing = ctx.path("no-such-dir")
    p = H.run_cairn(["fsck", "--data", missing], timeout=60)
    expect(p.returncode not in (0, 2), "fsck of a missing data dir exited %d" % p.returncode)
    expect(missing in p.stderr, "fsck error does not name the data dir: %r" % p.stderr.strip())


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--mount-writers":
        MountWriters(sys.argv[2], int(sys.argv[3])).run()
    else:
        H.main()
