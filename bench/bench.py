#!/usr/bin/env python3
"""bench.py - Cairn's seed workloads, each on local disk and on Cairn.

Called by bench/run.sh (`make bench`). Every workload runs twice in the same
run: on a fresh directory of the local disk, then on a fresh Cairn mount
(a new server on loopback with a new data directory, a new client with a
new cache directory; a second mount where two clients are needed). The
output is one table: workload, metric, local figure, Cairn figure, ratio
Cairn/local, and the server round trips Cairn needed (differences of the
server's `cairn status` counters around each phase), plus per workload the
CPU seconds and peak RSS of the server and the client daemons.

Environment:
  BUILD       build directory holding cairn and tools/ (default: build)
  BENCH       comma-separated workloads to run (default: all)
  BENCH_TINY  1: shrink every iteration count (whole run < 60 s)
  BENCH_OUT   directory for the .tsv/.md/.png results (default bench/results)
  BENCH_WORK  scratch directory (run.sh makes one; removed by run.sh)

Anything that touches a mount runs in a child process with a timeout (the
C tools in bench/tools, or bench/worker.py), so a hung or
broken mount turns into an error cell in the table, never a hung run.
"""

import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from report import fmt, write_outputs   # bench/report.py

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "worker.py")
CLK_TCK = os.sysconf("SC_CLK_TCK")
DBENCH_LOAD = "/usr/share/dbench/client.txt"


class PhaseError(Exception):
    """A phase could not produce a figure; the message goes in the cell."""


# ---------------------------------------------------------------- config

FULL = dict(
    stat_n=100000, search_names=2000, search_absent=900, search_passes=10,
    large_mib=100, large_pause=15, nc_records=200, frag_mib=128,
    frag_many=1000, frag_reps=3, tree_src="/usr/include", dbench_s=20,
    coh_rounds=5, lock_pairs=2000, sqlite_tx=500,
    timeout=300,
)
TINY = dict(
    stat_n=2000, search_names=200, search_absent=90, search_passes=1,
    large_mib=8, large_pause=1, nc_records=6, frag_mib=4,
    frag_many=1000, frag_reps=1, tree_src="/usr/include/x86_64-linux-gnu/bits",
    dbench_s=2, coh_rounds=2, lock_pairs=50, sqlite_tx=20, timeout=60,
)


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def short_err(text):
    text = " ".join(str(text).split())
    return "ERR: " + (text[:70] + "..." if len(text) > 73 else text)


# While a phase runs on Cairn, the side's check(): a child working on the
# mount is stopped as soon as the server or client daemon is gone, rather
# than after the client's server-down timeout on each of its calls.
watch = None


def run(argv, timeout, cwd=None, check=True):
    """Runs argv; returns stdout. Raises PhaseError on timeout/failure."""
    try:
        p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    except OSError as e:
        raise PhaseError("%s: %s" % (argv[0], e.strerror))
    deadline = time.time() + timeout
    try:
        while True:
            try:
                out, err = p.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if time.time() > deadline:
                    raise PhaseError("timeout after %ds: %s" % (
                        timeout, os.path.basename(argv[0])))
                if watch:
                    watch()
    except BaseException:
        p.kill()
        p.wait()
        raise
    if check and p.returncode != 0:
        last = (err.strip().splitlines() or out.strip().splitlines()
                or ["exit %d" % p.returncode])[-1]
        raise PhaseError(last)
    return out


def kv(text):
    """Parses `key=value key=value` (tool output) into a dict."""
    out = {}
    for tok in text.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def tool(cfg, name, args, timeout=None):
    out = run([os.path.join(cfg["build"], "tools", name)] + args,
              timeout or cfg["timeout"], check=False)
    d = kv(out.strip().splitlines()[-1] if out.strip() else "")
    if "err" in d or not d:
        raise PhaseError("%s: %s" % (name, out.strip() or "no output"))
    return d


def worker(cfg, op, *args, timeout=None):
    out = run([sys.executable, WORKER, op] + [str(a) for a in args],
              timeout or cfg["timeout"])
    return json.loads(out.strip().splitlines()[-1])


def sync_fs(paths, timeout=120):
    """syncfs() of the file systems holding `paths` (not a global sync,
    which could block on someone else's hung mount)."""
    run(["sync", "-f"] + list(paths), timeout)


def drop_caches(paths):
    sync_fs(paths)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        raise PhaseError("drop_caches: %s (needs root)" % e.strerror)


# ---------------------------------------------------------------- processes

def proc_cpu(pid):
    """utime+stime of a live process in seconds, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_hwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def proc_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def mount_path(path):
    """Canonical path of a mount point without touching the mount point
    itself (a stat there could hang on a broken mount): only its parent,
    on the local disk, is resolved."""
    path = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)),
                        os.path.basename(path))


def is_mounted(path):
    path = mount_path(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == path:
                return True
    return False


class Registry:
    """Every PID and mount this run created, for cleanup on any exit. The
    list is mirrored to WORK/pids and WORK/mounts so run.sh can still clean
    up if this interpreter dies without running its finally blocks."""

    def __init__(self, work):
        self.work = work
        self.pids = set()
        self.mounts = set()
        self.lock = threading.Lock()

    def _save(self):
        with open(os.path.join(self.work, "pids"), "w") as f:
            f.write("".join("%d\n" % p for p in sorted(self.pids)))
        with open(os.path.join(self.work, "mounts"), "w") as f:
            f.write("".join(m + "\n" for m in sorted(self.mounts)))

    def add_pid(self, pid):
        with self.lock:
            self.pids.add(pid)
            self._save()
        # Under tests/run.sh, its safety net also knows "pid starttime".
        pidfile = os.environ.get("CAIRN_TEST_PIDFILE")
        if pidfile:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    start = f.read().rsplit(")", 1)[1].split()[19]
                with open(pidfile, "a") as f:
                    f.write("%d %s\n" % (pid, start))
            except (OSError, IndexError):
                pass

    def drop_pid(self, pid):
        with self.lock:
            self.pids.discard(pid)
            self._save()

    def add_mount(self, mp):
        with self.lock:
            self.mounts.add(mp)
            self._save()

    def drop_mount(self, mp):
        with self.lock:
            self.mounts.discard(mp)
            self._save()


def find_daemon_pid(cairn, mnt, cache, exclude):
    """The client daemon of mount `mnt`: CACHEDIR/pid if the client writes
    one, else the process whose command line is `cairn mount ... mnt`."""
    try:
        with open(os.path.join(cache, "pid")) as f:
            pid = int(f.read().split()[0])
        if proc_alive(pid):
            return pid
    except (OSError, ValueError, IndexError):
        pass
    real = mount_path(mnt)
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in exclude:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv if a]
        if ("mount" in argv and os.path.basename(argv[0]) == "cairn"
                and any(a == mnt or a == real for a in argv[1:])):
            return int(d)
    return None


class Server:
    def __init__(self, reg, cfg, data):
        self.reg, self.cfg = reg, cfg
        self.cairn = cfg["cairn"]
        os.makedirs(data, exist_ok=True)
        self.logpath = data + ".log"
        # In its own session: a Ctrl-C must not kill the server before the
        # mounts that depend on it are unmounted (their calls would hang).
        self.proc = subprocess.Popen(
            [self.cairn, "serve", "--data", data, "--listen", "127.0.0.1:0",
             "--key", cfg["key"], "--no-root-squash"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        reg.add_pid(self.proc.pid)
        self.addr = None
        found = threading.Event()
        logf = open(self.logpath, "w")

        def drain():
            # Keeps reading stderr for the server's whole life, so a chatty
            # server never blocks on a full pipe.
            for line in self.proc.stderr:
                logf.write(line)
                logf.flush()
                m = re.search(r"listening on (\S+:\d+)", line)
                if m and not self.addr:
                    self.addr = m.group(1)
                    found.set()
            logf.close()
            found.set()
        threading.Thread(target=drain, daemon=True).start()
        found.wait(15)
        if not self.addr:
            self.stop()
            try:
                with open(self.logpath) as f:
                    last = ([l.strip() for l in f if l.strip()] or ["no message"])[-1]
            except OSError:
                last = "no message"
            raise PhaseError("cairn serve did not report its address: " + last)

    @property
    def pid(self):
        return self.proc.pid

    def status(self):
        out = run([self.cairn, "status", self.addr], 15)
        d = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                try:
                    d[parts[0].lower()] = float(parts[1])
                except ValueError:
                    pass
        if "rpc.calls" not in d:
            raise PhaseError("cairn status: no rpc.calls")
        return d

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reg.drop_pid(self.proc.pid)


class Mount:
    """One client daemon. CPU and peak RSS are read before every unmount,
    since a remount starts a new daemon process."""

    def __init__(self, reg, cfg, addr, mnt, cache, opts=()):
        self.reg, self.cfg = reg, cfg
        self.addr, self.mnt, self.cache = addr, mnt, cache
        self.opts = list(opts)
        self.cpu = 0.0
        self.hwm = 0
        self.pid = None
        self.fg = None
        self.moving = False
        os.makedirs(mnt, exist_ok=True)
        os.makedirs(cache, exist_ok=True)
        self.mount()

    def mount(self):
        before = set(int(d) for d in os.listdir("/proc") if d.isdigit())
        with open(self.cache.rstrip("/") + ".log", "a") as errlog:
            p = subprocess.Popen(
                [self.cfg["cairn"], "mount", "--cache-dir", self.cache] +
                self.opts + [self.addr, self.mnt], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=errlog)
        self.reg.add_pid(p.pid)
        self.reg.add_mount(self.mnt)
        deadline = time.time() + 20
        # `cairn mount` returns once mounted and leaves a daemon behind; in
        # case it stays in the foreground instead, it is the daemon itself.
        while time.time() < deadline:
            rc = p.poll()
            if rc is not None:
                self.reg.drop_pid(p.pid)
                if rc != 0:
                    raise PhaseError("cairn mount exited %d: %s"
                                     % (rc, self.last_log_line()))
                break
            if is_mounted(self.mnt):
                time.sleep(0.2)
                if p.poll() is None:
                    self.fg = p
                    break
            time.sleep(0.05)
        else:
            p.kill()
            p.wait()
            self.reg.drop_pid(p.pid)
            raise PhaseError("cairn mount did not return within 20 s")
        if not is_mounted(self.mnt):
            raise PhaseError("cairn mount returned 0 but %s is not mounted"
                             % self.mnt)
        if self.fg:
            self.pid = p.pid
        else:
            self.pid = find_daemon_pid(self.cfg["cairn"], self.mnt, self.cache,
                                       before - {os.getpid()})
            if self.pid:
                self.reg.add_pid(self.pid)

    def last_log_line(self):
        try:
            with open(self.cache.rstrip("/") + ".log") as f:
                lines = [l.strip() for l in f if l.strip()]
            return lines[-1] if lines else "no message"
        except OSError:
            return "no message"

    def account(self):
        if self.pid and proc_alive(self.pid):
            self.cpu += proc_cpu(self.pid) or 0.0
            self.hwm = max(self.hwm, proc_hwm_kib(self.pid) or 0)

    def umount(self):
        self.account()
        err = None
        if is_mounted(self.mnt):
            try:
                run([self.cfg["cairn"], "umount", self.mnt], 30)
            except PhaseError as e:
                err = str(e)
            if is_mounted(self.mnt):
                subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                               stderr=subprocess.DEVNULL)
            if is_mounted(self.mnt):
                subprocess.run(["umount", "-l", self.mnt],
                               stderr=subprocess.DEVNULL)
        self.reg.drop_mount(self.mnt)
        if self.pid:
            deadline = time.time() + 10
            while proc_alive(self.pid) and time.time() < deadline:
                time.sleep(0.05)
            if proc_alive(self.pid):
                err = err or "client daemon %d still running 10 s after umount" % self.pid
                os.kill(self.pid, signal.SIGKILL)
            if self.fg:
                self.fg.wait()
            self.reg.drop_pid(self.pid)
            self.pid = None
        if err:
            log("umount %s: %s" % (self.mnt, err))
        return err

    def remount(self):
        self.moving = True      # the daemon is meant to go away now
        try:
            self.umount()
            self.mount()
        finally:
            self.moving = False


# ---------------------------------------------------------------- sides

class LocalSide:
    kind = "local"

    def __init__(self, cfg, root):
        self.cfg = cfg
        self.a = root
        os.makedirs(root)

    def b(self):
        return self.a      # a second "client" of a local disk sees the same dir

    def local_locks(self):
        return self.a

    def no_uring(self):
        return self.a

    def drop_caches(self):
        drop_caches([self.a])

    def remount(self):
        drop_caches([self.a])  # a local disk cannot be remounted here

    def snapshot(self):
        return None

    def check(self):
        pass

    def settle(self):
        pass

    def resources(self):
        return None

    def close(self):
        pass


class CairnSide:
    kind = "cairn"

    def __init__(self, cfg, reg, root):
        self.cfg, self.reg, self.root = cfg, reg, root
        os.makedirs(root)
        self.server = Server(reg, cfg, os.path.join(root, "data"))
        self.mounts = []
        self.ma = self._mount("a")
        self.a = self.ma.mnt
        self.mb = None
        self.first = self.snapshot()

    def _mount(self, name, opts=()):
        m = Mount(self.reg, self.cfg, self.server.addr,
                  os.path.join(self.root, "mnt-" + name),
                  os.path.join(self.root, "cache-" + name), opts)
        self.mounts.append(m)
        return m

    def b(self):
        if not self.mb:
            self.mb = self._mount("b")
        return self.mb.mnt

    def local_locks(self):
        """A second mount with --local-locks (opens and closes skip the
        daemon)."""
        if not getattr(self, "ml", None):
            self.ml = self._mount("l", ("--local-locks",))
        return self.ml.mnt

    def no_uring(self):
        """A second mount with --no-uring (requests read from /dev/fuse):
        what FUSE over io_uring saves."""
        if not getattr(self, "mu", None):
            self.mu = self._mount("u", ("--no-uring",))
        return self.mu.mnt

    def drop_caches(self):
        # The client's cache directory is on the local disk under root.
        drop_caches([self.root] + [m.mnt for m in self.mounts])

    def remount(self):
        self.ma.remount()

    def snapshot(self):
        return self.server.status()

    def check(self):
        """Fails a phase at once when a Cairn process is gone, instead of
        letting it wait out the client's server-down timeout."""
        rc = self.server.proc.poll()
        if rc is not None:
            raise PhaseError("cairn server is gone (exit status %d)" % rc)
        for m in self.mounts:
            if m.pid and not m.moving and not proc_alive(m.pid):
                raise PhaseError("client daemon of %s is gone"
                                 % os.path.basename(m.mnt))

    def wb_busy(self):
        """A mount whose write-back journal still holds changes or write
        tokens (they go back a second after the last write)."""
        for m in self.mounts:
            if not m.pid or not proc_alive(m.pid):
                continue
            try:
                out = run([self.server.cairn, "status", m.mnt], 15)
            except Exception:  # noqa: BLE001 - a busy check only
                continue
            kv = dict(line.split(None, 1) for line in out.splitlines()
                      if len(line.split(None, 1)) == 2)
            if kv.get("wb.pending_changes", "0").strip() != "0" or \
                    kv.get("wb.tokens", "0").strip() != "0":
                return True
        return False

    def settle(self, limit=20):
        """Waits until the server sees no more traffic (write-back after
        close, the write tokens given back) and every journal is empty, so
        a phase's RPC count includes what it sent late."""
        last = self.snapshot()
        deadline = time.time() + limit
        while time.time() < deadline:
            time.sleep(0.5)
            cur = self.snapshot()
            if rpc_diff(last, cur)[0] == 0 and not self.wb_busy():
                return
            last = cur

    def resources(self):
        def live(m):
            alive = m.pid and proc_alive(m.pid)
            return (m.cpu + ((proc_cpu(m.pid) or 0.0) if alive else 0.0),
                    max(m.hwm, (proc_hwm_kib(m.pid) or 0) if alive else 0))
        figs = [live(m) for m in self.mounts]
        try:
            total = rpc_diff(self.first, self.snapshot())
        except PhaseError:
            total = (None, None, None)
        return dict(rpcs=total[0], bytes_in=total[1], bytes_out=total[2],
                    srv_cpu=proc_cpu(self.server.pid),
                    srv_hwm=proc_hwm_kib(self.server.pid),
                    cli_cpu=sum(c for c, _ in figs),
                    cli_hwm=max([h for _, h in figs] or [0]),
                    clients=len(self.mounts),
                    daemon_found=all(m.pid or m.cpu for m in self.mounts))

    def close(self):
        errs = [m.umount() for m in self.mounts]
        self.server.stop()
        return [e for e in errs if e]


def rpc_diff(before, after):
    """(round trips, bytes in, bytes out) between two status snapshots,
    minus the STATUS calls that took the snapshots (each on its own
    connection, so each also costs a HELLO) and the PINGs by which idle
    clients keep their promises (PROTOCOL.md, "Promises and silence")."""
    if before is None or after is None:
        return (None, None, None)

    def d(k):
        return after.get(k, 0) - before.get(k, 0)
    n_status = d("op.status.calls")
    calls = d("rpc.calls") - n_status - min(n_status, d("op.hello.calls")) - \
        d("op.ping.calls")
    hello_share = (d("op.hello.bytes_in") / d("op.hello.calls")
                   if d("op.hello.calls") else 0)
    bin_ = d("rpc.bytes_in") - d("op.status.bytes_in") - hello_share * n_status - \
        d("op.ping.bytes_in")
    hello_out = (d("op.hello.bytes_out") / d("op.hello.calls")
                 if d("op.hello.calls") else 0)
    bout = d("rpc.bytes_out") - d("op.status.bytes_out") - hello_out * n_status - \
        d("op.ping.bytes_out")
    return (int(calls), int(bin_), int(bout))


def top_ops(before, after, n=3):
    """The n operations with most calls between two snapshots, as text;
    STATUS and the HELLO of each status probe are left out."""
    if before is None or after is None:
        return ""
    calls = {}
    for k in after:
        if k.startswith("op.") and k.endswith(".calls"):
            calls[k[3:-6]] = int(after[k] - before.get(k, 0))
    probes = calls.pop("status", 0)
    calls["hello"] = calls.get("hello", 0) - probes
    ops = sorted(((c, op) for op, c in calls.items() if c > 0), reverse=True)
    return " ".join("%s %d" % (op, c) for c, op in ops[:n])


def op_diff(before, after, op, what="calls"):
    if before is None or after is None:
        return None
    k = "op.%s.%s" % (op.lower(), what)
    return int(after.get(k, 0) - before.get(k, 0))


def human_bytes(n):
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1024.0


# ---------------------------------------------------------------- phases

class Results:
    """Collects one value per (workload, metric, side)."""

    def __init__(self):
        self.rows = []      # ordered list of dicts
        self.index = {}
        self.res = {}       # workload -> side resources

    def put(self, wl, metric, unit, kind, side, value, rpcs=None, detail=""):
        key = (wl, metric)
        if key not in self.index:
            row = dict(workload=wl, metric=metric, unit=unit, kind=kind,
                       local=None, cairn=None, rpcs=None, detail="")
            self.index[key] = row
            self.rows.append(row)
        row = self.index[key]
        row[side] = value
        if side == "cairn":
            row["rpcs"] = rpcs
            if detail:
                row["detail"] = detail
        elif detail and not row["detail"]:
            row["detail"] = "local: " + detail

    def fill(self, wl, side, text):
        rows = [r for r in self.rows if r["workload"] == wl]
        for r in rows:
            if r[side] is None:
                r[side] = text
        if not rows:
            self.put(wl, "(setup)", "", "time", side, text)


def phase(R, wl, side, metric, unit, kind, fn, settle=False, detail=None,
          derived=False, runs=1):
    """Runs fn() -> value (or (value, detail)) between two counter
    snapshots. Any failure becomes the cell's text. A `derived` figure is
    computed from earlier phases and has no round trips of its own; when fn
    repeats the operation `runs` times, round trips are reported per run."""
    global watch
    before = None
    try:
        if not derived:
            before = side.snapshot()
    except PhaseError as e:
        log("%s/%s: status: %s" % (wl, metric, e))
    t0 = time.time()
    extra = ""
    own = None
    try:
        side.check()
        watch = side.check
        v = fn()
        if isinstance(v, tuple) and len(v) == 3:
            v, extra, own = v       # fn counted its own round trips
        elif isinstance(v, tuple):
            v, extra = v
        if settle and own is None:
            side.settle()
    except PhaseError as e:
        v = short_err(e)
    except OSError as e:
        v = short_err("%s: %s" % (e.filename or "", e.strerror))
    finally:
        watch = None
    after = None
    try:
        if before is not None:
            after = side.snapshot()
    except PhaseError:
        pass
    if own is not None:
        before, after = own
    calls, bin_, bout = rpc_diff(before, after)
    if calls is not None:
        calls = int(round(calls / runs))
    det = extra
    if detail and before is not None and after is not None:
        det = ", ".join(x for x in [extra, detail(before, after, runs)] if x)
    ops = top_ops(before, after)
    if ops and runs == 1:
        det = "; ".join(x for x in [det, "ops: " + ops] if x)
    R.put(wl, metric, unit, kind, side.kind, v, calls, det)
    log("%-9s %-5s %-42s %-14s rpcs=%s (%.1fs)" % (
        wl, side.kind, metric, fmt(v), calls, time.time() - t0))
    return v


def fetched(before, after, runs=1):
    return "READ %s" % human_bytes(op_diff(before, after, "READ", "bytes_out") / runs)


def writes(before, after, runs=1):
    """WRITE calls: WRITEs and WRITEATTRs (a write with the times after
    it), and the bytes they carried."""
    n = op_diff(before, after, "WRITE")
    b = op_diff(before, after, "WRITE", "bytes_in")
    if n is not None:
        n += op_diff(before, after, "WRITEATTR")
        b += op_diff(before, after, "WRITEATTR", "bytes_in")
    return "%sWRITE calls %d, %s" % (
        "per run: " if runs > 1 else "", round(n / runs),
        human_bytes(b / runs))


# ---------------------------------------------------------------- workloads

def wl_stat(cfg, side, R):
    n = cfg["stat_n"]
    # Paths relative to the mount (statloop -C), so depth 1 is one lookup.
    d1 = "f"
    d27 = os.path.join(*[chr(ord("a") + i) for i in range(26)] + ["f"])
    worker(cfg, "mkfile", os.path.join(side.a, d1), 4096)
    worker(cfg, "mkfile", os.path.join(side.a, d27), 4096)
    side.settle()   # the client's write-back done before anything is timed
    for path in (d1, d27):
        tool(cfg, "statloop", ["-C", side.a, "-n", "10", path])  # warm

    def loop(path, mode="stat", threads=1):
        return lambda: float(tool(cfg, "statloop", [
            "-C", side.a, "-n", str(n), "-m", mode, "-t", str(threads),
            path])["ns_per_op"])
    phase(R, "stat", side, "stat depth 1, %d calls" % n, "ns/call", "time", loop(d1))
    phase(R, "stat", side, "stat depth 27, %d calls" % n, "ns/call", "time", loop(d27))
    phase(R, "stat", side, "open+close depth 1, %d calls" % n, "ns/call", "time",
          loop(d1, "open"))

    def open_on(mount):
        """open+close on another mount of the same volume (made on first
        use by mount())."""
        def f():
            m = mount()
            tool(cfg, "statloop", ["-C", m, "-n", "10", "-m", "open", d1])
            return float(tool(cfg, "statloop", [
                "-C", m, "-n", str(n), "-m", "open", d1])["ns_per_op"])
        return f
    phase(R, "stat", side, "open+close depth 1, --local-locks mount",
          "ns/call", "time", open_on(side.local_locks))
    phase(R, "stat", side, "open+close depth 1, --no-uring mount",
          "ns/call", "time", open_on(side.no_uring))
    rates = {}

    def rate(threads):
        def f():
            rates[threads] = float(tool(cfg, "statloop", [
                "-C", side.a, "-n", str(n), "-t", str(threads), d27])["ops_per_s"])
            return rates[threads] / 1000.0
        return f
    phase(R, "stat", side, "stat loop depth 27, 1 thread", "kstat/s", "rate",
          rate(1))
    phase(R, "stat", side, "stat loop depth 27, 2 threads", "kstat/s", "rate",
          rate(2))

    def scaling():
        if 1 not in rates or 2 not in rates:
            raise PhaseError("thread runs failed")
        return rates[2] / rates[1]
    phase(R, "stat", side, "stat 2 threads / 1 thread", "x", "rate", scaling,
          derived=True)


def wl_search(cfg, side, R):
    rnd = random.Random(42)
    ndirs = 10
    dirs = ["inc%d" % i for i in range(ndirs)]     # relative, as -I dirs
    names = ["hdr%04d.h" % i for i in range(cfg["search_names"])]
    absent = ["missing%04d.h" % i for i in range(cfg["search_absent"])]
    # Header i lives only in dir i % 10: found ones miss 4.5 dirs on
    # average, absent ones miss all 10, so 90% of all stats miss.
    worker(cfg, "mkheaders", side.a, ndirs, len(names))
    side.settle()   # the client's write-back done before anything is timed
    order = names + absent
    rnd.shuffle(order)
    listfile = os.path.join(cfg["work"], "search-names-%s" % side.kind)
    with open(listfile, "w") as f:
        f.write("\n".join(order) + "\n")

    def search(passes):
        def f():
            d = tool(cfg, "statloop", ["-C", side.a, "-I", listfile,
                                       "-n", str(passes)] + dirs)
            miss = 100.0 * int(d["misses"]) / max(1, int(d["ops"]))
            return float(d["ns_per_op"]), "%s stats, %.0f%% miss" % (d["ops"], miss)
        return f
    tool(cfg, "statloop", ["-C", side.a, "-I", listfile, "-n", "1"] + dirs)
    phase(R, "search", side, "include search warm", "ns/stat", "time",
          search(cfg["search_passes"]))

    def cold(prep):
        def f():
            prep()
            return search(1)()
        return f
    phase(R, "search", side, "include search after drop_caches", "ns/stat",
          "time", cold(side.drop_caches))
    phase(R, "search", side, "include search after remount (local: drop_caches)",
          "ns/stat", "time", cold(side.remount))


def wl_large(cfg, side, R):
    mib = cfg["large_mib"]
    path = os.path.join(side.a, "large")
    mbs = lambda d: (mib * MiB / 1e6) / d["secs"]

    phase(R, "large", side, "write %d MiB (1 MiB writes) incl. close" % mib,
          "s", "time", lambda: worker(cfg, "write", path, mib)["secs"],
          settle=True, detail=writes)
    time.sleep(cfg["large_pause"])

    def reread():
        # The first read after the pause is the figure; two more right
        # after it are shown beside it (READ bytes are of all three), to
        # tell a cost of the pause from the page cache's own speed (on
        # Linux 6.18 FUSE's has 4 KiB folios only: 100 MiB in 16-20 ms
        # here against ext4's 6 ms).
        runs = [mbs(worker(cfg, "read", path)) for _ in range(3)]
        return runs[0], "then %s MB/s" % " ".join("%.0f" % x for x in runs[1:])
    phase(R, "large", side, "re-read same client after %ds pause" % cfg["large_pause"],
          "MB/s", "rate", reread, detail=fetched)

    def after_drop():
        side.drop_caches()
        return mbs(worker(cfg, "read", path))
    phase(R, "large", side, "re-read after drop_caches", "MB/s", "rate",
          after_drop, detail=fetched)
    if side.kind == "local":
        for m in ("first read on second client",
                  "first read on second client, 128 KiB reads"):
            R.put("large", m, "MB/s", "rate", "local", "–")
        return

    def second():
        pb = os.path.join(side.b(), "large")
        return mbs(worker(cfg, "read", pb))
    phase(R, "large", side, "first read on second client", "MB/s", "rate",
          second, detail=fetched)

    # The same with 128 KiB reads (cat's, cp's): the kernel's READs then
    # do not follow the cache's chunks, and READ bytes show any chunk
    # fetched twice.
    worker(cfg, "write", path + "2", mib)
    side.settle()

    def second_small():
        pb = os.path.join(side.b(), "large2")
        return mbs(worker(cfg, "read", pb, 128 * 1024))
    phase(R, "large", side, "first read on second client, 128 KiB reads",
          "MB/s", "rate", second_small, detail=fetched)


def wl_netcdf(cfg, side, R):
    path = os.path.join(side.a, "hist.nc")

    def f():
        d = tool(cfg, "ncwrite", ["-r", str(cfg["nc_records"]), path])
        return int(d["ns"]) / 1e9, "%s puts, %s" % (
            d["puts"], human_bytes(int(d["bytes"])))
    phase(R, "netcdf", side, "netCDF-3 writer, %d records" % cfg["nc_records"],
          "s", "time", f, settle=True, detail=writes)


def wl_frag(cfg, side, R):
    mib = cfg["frag_mib"]
    reps = cfg["frag_reps"]
    secs = {}

    def append_once(name, extents, dense, counts=None):
        """Makes the file, then times the append alone; its round trips
        (with the write-back that follows) are added to `counts`."""
        p = os.path.join(side.a, name)
        worker(cfg, "mkextents", p, extents, 1 if dense else 0)
        sync_fs([side.a])
        before = side.snapshot() if counts is not None else None
        secs = worker(cfg, "append", p, mib)["secs"]
        if before is not None:
            side.settle()
            after = side.snapshot()
            for k in set(before) | set(after):
                counts[k] = counts.get(k, 0) + after.get(k, 0) - before.get(k, 0)
        return secs

    def append(name, extents, dense):
        # The best of a few runs: on this VM a 128 MiB append into the page
        # cache takes 0.035 s or 0.4 s at random (first touch of guest
        # memory), which would swamp any structural cost; a cliff in the
        # layout is paid on every run, so the minimum still shows it.
        def f():
            counts = {} if side.kind == "cairn" else None
            runs = [append_once(name, extents, dense, counts)
                    for _ in range(reps)]
            secs[name] = min(runs)
            text = "best of %d: %s" % (reps, " ".join("%.3g" % x for x in runs))
            if counts is None:
                return secs[name], text
            return secs[name], text, ({}, counts)
        return f
    append_once("warmup", 16, True)
    worker(cfg, "unlink", os.path.join(side.a, "warmup"))
    phase(R, "frag", side, "append %d MiB to dense file" % mib, "s", "time",
          append("dense", 16, True), settle=True, detail=writes, runs=reps)
    for n in (16, cfg["frag_many"]):
        phase(R, "frag", side, "append %d MiB after %d sparse extents" % (mib, n),
              "s", "time", append("sparse%d" % n, n, False), settle=True,
              detail=writes, runs=reps)

    for n in (16, cfg["frag_many"]):
        def ratio(n=n):
            a, b = secs.get("sparse%d" % n), secs.get("dense")
            if a is None or b is None:
                raise PhaseError("append runs failed")
            return a / b
        phase(R, "frag", side, "append after %d sparse / dense" % n, "x",
              "time", ratio, derived=True)


def wl_tree(cfg, side, R):
    src = cfg["tree_src"]
    dst = os.path.join(side.a, "tree")
    rel = []
    regular = []
    for root, dnames, fnames in os.walk(src):
        for n in dnames + fnames:
            p = os.path.join(root, n)
            r = os.path.relpath(p, src)
            rel.append(r)
            if os.path.isfile(p) and not os.path.islink(p):
                regular.append(r)
    lst_all = os.path.join(cfg["work"], "tree-all-%s" % side.kind)
    lst_reg = os.path.join(cfg["work"], "tree-reg-%s" % side.kind)
    with open(lst_all, "w") as f:
        f.write("".join(os.path.join("tree", r) + "\n" for r in rel))
    with open(lst_reg, "w") as f:
        f.write("".join(os.path.join("tree", r) + "\n" for r in regular))
    n = len(rel)

    def copy():
        t0 = time.time()
        run(["cp", "-R", src, dst], cfg["timeout"])
        return time.time() - t0
    phase(R, "tree", side, "copy %s (%d entries)" % (src, n), "s", "time",
          copy, settle=True, detail=writes)

    def stat_all(prep=None):
        def f():
            if prep:
                prep()
            d = tool(cfg, "statloop", ["-C", side.a, "-l", lst_all, "-m", "lstat"])
            return int(d["ns"]) / 1e9
        return f
    phase(R, "tree", side, "cold stat of every entry, after drop_caches", "s",
          "time", stat_all(side.drop_caches))
    phase(R, "tree", side, "cold stat, after remount (local: drop_caches)", "s",
          "time", stat_all(side.remount))
    phase(R, "tree", side, "warm stat of every entry", "s", "time", stat_all())

    def read_all():
        side.drop_caches()
        d = tool(cfg, "statloop", ["-C", side.a, "-l", lst_reg, "-m", "read"])
        return int(d["ns"]) / 1e9, "%s files, %s" % (
            d["ops"], human_bytes(int(d["bytes"])))
    phase(R, "tree", side, "cold read of every file, after drop_caches", "s",
          "time", read_all, detail=fetched)

    def rm():
        t0 = time.time()
        run(["rm", "-rf", dst], cfg["timeout"])
        return time.time() - t0
    phase(R, "tree", side, "rm -rf", "s", "time", rm, settle=True)

    # cp -a (tar, rsync -a alike): each file's times and mode set too.
    dst_a = os.path.join(side.a, "tree-a")

    def copy_a():
        t0 = time.time()
        run(["cp", "-a", src, dst_a], cfg["timeout"])
        return time.time() - t0
    phase(R, "tree", side, "copy with cp -a (times, modes kept)", "s",
          "time", copy_a, settle=True, detail=writes)
    run(["rm", "-rf", dst_a], cfg["timeout"])

    # rsync -a: each file written to a temporary name, its mode and times
    # set, then renamed to its own.
    dst_r = os.path.join(side.a, "tree-r")

    def copy_r():
        t0 = time.time()
        run(["rsync", "-a", src + "/", dst_r + "/"], cfg["timeout"])
        return time.time() - t0
    phase(R, "tree", side, "copy with rsync -a (temporary names, renamed)",
          "s", "time", copy_r, settle=True, detail=writes)
    run(["rm", "-rf", dst_r], cfg["timeout"])


def wl_dbench(cfg, side, R):
    t = cfg["dbench_s"]

    def db(clients):
        def f():
            d = os.path.join(side.a, "dbench%d" % clients)
            worker(cfg, "mkdir", d)
            out = run(["dbench", "-D", d, "-t", str(t), "-c", DBENCH_LOAD,
                       str(clients)], t + cfg["timeout"], check=False)
            m = re.search(r"Throughput ([0-9.]+) MB/sec", out)
            if not m:
                lines = [l for l in out.splitlines() if l.strip()]
                raise PhaseError("dbench: " + (lines[-1] if lines else "no output"))
            return float(m.group(1))
        return f
    for c in (1, 2):
        phase(R, "dbench", side, "dbench %d client%s, %d s" % (c, "s" if c > 1 else "", t),
              "MB/s", "rate", db(c))


def wl_coherence(cfg, side, R):
    a = os.path.join(side.a, "shared")
    b = os.path.join(side.b(), "shared")

    def f():
        d = worker(cfg, "coherence", a, b, cfg["coh_rounds"], 10)
        lat = d["latencies"]
        if any(x is None for x in lat):
            raise PhaseError("B never saw the new content within 10 s "
                             "(%d of %d rounds)" % (lat.count(None), len(lat)))
        return statistics.median(lat), "max %.4f s over %d rounds" % (max(lat), len(lat))
    phase(R, "coherence", side, "write+close on A until B reads it (median)",
          "s", "time", f)


def wl_locks(cfg, side, R):
    f = os.path.join(side.a, "lockfile")

    def pairs():
        d = worker(cfg, "lockpairs", f, cfg["lock_pairs"])
        return int(d["ns"]) / 1e3 / int(d["n"]), "%d pairs" % int(d["n"])
    phase(R, "locks", side, "fcntl lock+unlock pair, uncontended (per pair)",
          "us", "time", pairs, runs=cfg["lock_pairs"])

    def sqlite(paths):
        def run_():
            n = cfg["sqlite_tx"]
            db = os.path.join(side.a, "counter.db")
            worker(cfg, "sqlite_init", db)
            side.settle()
            start = time.time() + 1.0
            out, errs = [None] * len(paths), []

            def go(i, p):
                try:
                    out[i] = worker(cfg, "sqlite", os.path.join(p, "counter.db"),
                                    n, start)
                except (PhaseError, OSError) as e:
                    errs.append(str(e))
            ts = [threading.Thread(target=go, args=(i, p))
                  for i, p in enumerate(paths)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            if errs:
                raise PhaseError(errs[0])
            chk = worker(cfg, "sqlite_check", db)
            want = n * len(paths)
            if chk["n"] != want or chk["integrity"] != "ok":
                raise PhaseError("counter %s, want %d; integrity %s" % (
                    chk["n"], want, chk["integrity"]))
            secs = max(int(d["ns"]) for d in out) / 1e9
            return want / secs, "%d transactions, count exact" % want
        return run_
    phase(R, "locks", side, "SQLite, 2 processes on one client", "tx/s",
          "rate", sqlite([side.a, side.a]))
    phase(R, "locks", side, "SQLite, 1 process on each of 2 clients", "tx/s",
          "rate", sqlite([side.a, side.b()]))


WORKLOADS = [
    ("stat", wl_stat), ("search", wl_search), ("large", wl_large),
    ("netcdf", wl_netcdf), ("frag", wl_frag), ("tree", wl_tree),
    ("dbench", wl_dbench), ("coherence", wl_coherence), ("locks", wl_locks),
]


# ---------------------------------------------------------------- main

def run_workload(cfg, reg, R, name, fn):
    wroot = os.path.join(cfg["work"], name)
    for kind in ("local", "cairn"):
        side = None
        try:
            if kind == "local":
                side = LocalSide(cfg, os.path.join(wroot, "local"))
            else:
                side = CairnSide(cfg, reg, os.path.join(wroot, "cairn"))
            fn(cfg, side, R)
            if kind == "cairn":
                R.res[name] = side.resources()
        except (PhaseError, OSError) as e:
            # Setup failed (server, mount, creating files): the error goes in
            # every cell of this side that has no figure yet.
            msg = str(e) if isinstance(e, PhaseError) else "%s: %s" % (
                e.filename or "", e.strerror)
            log("%s/%s: setup: %s" % (name, kind, msg))
            R.fill(name, kind, short_err("setup: " + msg))
            if kind == "cairn":
                R.res[name] = short_err("setup: " + msg)
        finally:
            if isinstance(side, CairnSide):
                for err in side.close():
                    R.put(name, "(unmount)", "", "time", "cairn",
                          short_err("unmount: " + err))
        # Never walk into a mount that would not go away.
        if not any(m.startswith(wroot + "/") for m in reg.mounts):
            shutil.rmtree(os.path.join(wroot, kind), ignore_errors=True)


def on_signal(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def main():
    tiny = os.environ.get("BENCH_TINY", "") not in ("", "0")
    cfg = dict(TINY if tiny else FULL)
    cfg["tiny"] = tiny
    build = os.environ.get("BUILD") or os.path.join(REPO, "build")
    cfg["build"] = os.path.abspath(build)
    cfg["cairn"] = os.path.join(cfg["build"], "cairn")
    cfg["out"] = os.path.abspath(os.environ.get("BENCH_OUT") or
                                 os.path.join(REPO, "bench", "results"))
    work = os.environ.get("BENCH_WORK")
    if not work:
        print("bench.py: BENCH_WORK not set (run bench/run.sh)", file=sys.stderr)
        return 2
    cfg["work"] = os.path.abspath(work)
    # One cell key for every server of the run; mounts and `cairn status`
    # find it through $CAIRN_KEY (docs/SECURITY.md).
    os.makedirs(cfg["work"], exist_ok=True)
    cfg["key"] = os.path.join(cfg["work"], "cell.key")
    if not os.path.exists(cfg["key"]):
        fd = os.open(cfg["key"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (os.urandom(32).hex() + "\n").encode())
        os.close(fd)
    os.environ["CAIRN_KEY"] = cfg["key"]
    wanted = [w for w in os.environ.get("BENCH", "").replace(" ", ",").split(",") if w]
    names = [n for n, _ in WORKLOADS]
    bad = [w for w in wanted if w not in names]
    if bad:
        print("bench.py: unknown workload(s) %s; known: %s" % (
            ",".join(bad), ",".join(names)), file=sys.stderr)
        return 2
    for t in ("statloop", "ncwrite"):
        if not os.access(os.path.join(cfg["build"], "tools", t), os.X_OK):
            print("bench.py: %s/tools/%s missing (make BUILD=%s bench-tools)" % (
                cfg["build"], t, build), file=sys.stderr)
            return 2
    if not os.access(cfg["cairn"], os.X_OK):
        log("%s missing: the Cairn side of every workload will be an error"
            % cfg["cairn"])
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    reg = Registry(cfg["work"])
    R = Results()
    t0 = time.time()
    log("%s run, build %s, work %s" % ("tiny" if tiny else "full",
                                       cfg["build"], cfg["work"]))
    interrupted = False
    try:
        for name, fn in WORKLOADS:
            if wanted and name not in wanted:
                continue
            log("== %s" % name)
            run_workload(cfg, reg, R, name, fn)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; cleaning up")
    finally:
        emergency_cleanup(reg)
    if interrupted:
        return 130
    write_outputs(cfg, R, time.time() - t0)
    return 0


def emergency_cleanup(reg):
    """Unmounts and stops whatever a failed or interrupted run left."""
    for mp in list(reg.mounts):
        if is_mounted(mp):
            subprocess.run(["fusermount3", "-u", "-z", mp], stderr=subprocess.DEVNULL)
        if is_mounted(mp):
            subprocess.run(["umount", "-l", mp], stderr=subprocess.DEVNULL)
        reg.drop_mount(mp)
    for pid in list(reg.pids):
        if proc_alive(pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
    deadline = time.time() + 5
    for pid in list(reg.pids):
        while proc_alive(pid) and time.time() < deadline:
            time.sleep(0.05)
        if proc_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reg.drop_pid(pid)


if __name__ == "__main__":
    sys.exit(main())
