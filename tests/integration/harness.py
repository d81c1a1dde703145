"""harness.py - shared helpers for Cairn's integration suites (stdlib only).

A suite is a python script run as `python3 SUITE.py BUILD_DIR`. It declares
tests with @test, then calls main(). Each test receives a Ctx that can start a
real `cairn serve` and real `cairn mount`s in a private temp directory.

Output follows the runner's protocol (tests/run.sh):
    1..N                 the plan (tests the suite means to run)
    ok - NAME            a passed test
    not ok - NAME        a failed test, followed by '# ' diagnostic lines
                         (what was expected, what happened, log tails)
    # skip: ...          informational

Cleanup is layered so nothing is left behind even when a test hangs or the
runner kills the suite: every test's Ctx is torn down in `finally`; the
suite also tears down from atexit and on SIGTERM/SIGINT/SIGHUP; and every
process started here is appended to $CAIRN_TEST_PIDFILE (pid + start time)
so the runner's own EXIT trap can reap what a dead suite could not.
"""

import atexit
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BUILD = None          # build directory (set by main)
CAIRN = None          # path of the cairn binary
ASAN = False          # the build is the sanitizer build (slower)
TMP_ROOT = os.environ.get("CAIRN_TEST_TMP") or None
PIDFILE = os.environ.get("CAIRN_TEST_PIDFILE") or None

_TESTS = []           # (name, fn, opts)
_LIVE = []            # Ctx objects not yet cleaned up


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    pass


# ---------------------------------------------------------------- registry

def test(fn=None, *, name=None, timeout=None, slow=False):
    """Register a test. `slow` tests may reduce their work under ASan."""
    def reg(f):
        _TESTS.append((name or f.__name__.replace("_", " "), f,
                       {"timeout": timeout, "slow": slow}))
        return f
    return reg(fn) if fn is not None else reg


def fail(msg):
    raise TestFailure(msg)


def expect(cond, msg):
    if not cond:
        raise TestFailure(msg)


def expect_eq(got, want, what):
    if got != want:
        raise TestFailure("%s: expected %r, got %r" % (what, short(want), short(got)))


def short(v, n=120):
    if isinstance(v, (bytes, bytearray)) and len(v) > 48:
        return "<%d bytes %r...>" % (len(v), bytes(v[:24]))
    s = repr(v) if not isinstance(v, str) else v
    if isinstance(v, str) and len(v) > n:
        return v[:n] + "...(%d chars)" % len(v)
    return v


def errname(e):
    if e == 0:
        return "success"
    return errno.errorcode.get(e, str(e))


def errno_of(fn, *args, **kw):
    """Run fn; return 0 on success or the OSError's errno."""
    try:
        fn(*args, **kw)
        return 0
    except OSError as e:
        return e.errno


def expect_errno(want, fn, *args, what=None, **kw):
    got = errno_of(fn, *args, **kw)
    if got != want:
        raise TestFailure("%s: expected %s, got %s" % (
            what or getattr(fn, "__name__", "call"), errname(want), errname(got)))


# ---------------------------------------------------------------- processes

def write_file(path, data, mode=0o644, fsync=False):
    """Create/truncate path and write all of data with os.write (no
    buffering layer), optionally fsync, then close."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def _record_pid(pid):
    """Tell the runner about a process so its safety net can kill it."""
    if not PIDFILE:
        return
    try:
        with open("/proc/%d/stat" % pid) as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        with open(PIDFILE, "a") as f:
            f.write("%d %s\n" % (pid, start))
    except OSError:
        pass


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def kill_wait(pid, timeout=5.0):
    """SIGTERM, wait, then SIGKILL. Only for PIDs this harness started."""
    if not pid_alive(pid):
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.time() + wait
        while time.time() < end:
            if not pid_alive(pid):
                return
            time.sleep(0.05)


def tail(path, n=25):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return lines[-n:]


def mountinfo_unescape(field):
    """A /proc/self/mountinfo path field with its octal escapes (\\040 for
    a space, \\011 for a tab, \\134 for a backslash) undone."""
    return re.sub(r"\\([0-3][0-7][0-7])", lambda m: chr(int(m.group(1), 8)), field)


def is_mounted(path):
    path = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                if mountinfo_unescape(line.split()[4]) == path:
                    return True
    except OSError:
        pass
    return False


def run_cairn(args, timeout=30, **kw):
    """Run `cairn ARGS...` to completion; returns CompletedProcess with
    text stdout/stderr. Raises TestFailure on timeout."""
    try:
        return subprocess.run([CAIRN] + list(args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, text=True, errors="replace", **kw)
    except subprocess.TimeoutExpired:
        raise TestFailure("cairn %s: did not finish within %ss" % (" ".join(args), timeout))


class Server:
    def __init__(self, ctx, data, log, port=0, extra=()):
        self.ctx, self.data, self.log = ctx, data, log
        self.proc = None
        self.port = port
        self.extra = list(extra)
        self.key = KEY_FILE   # None: the server's own DATA/cell.key
        # The suites run as root and test root's POSIX semantics: root
        # squash off unless a test turns it on (test_auth.py).
        self.root_squash = False
        # Extra environment for the server process (say,
        # CAIRN_SERVE_WITHOUT to play a server from before an operation).
        self.env = {}

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def start(self, timeout=None):
        timeout = timeout or (30 if ASAN else 15)
        logf = open(self.log, "ab")
        start_off = logf.tell()
        # One cell key for the suite (setup_process; mounts and
        # `cairn status` find it through $CAIRN_KEY), unless the test
        # gives its own --key.
        key = [] if self.key is None or "--key" in self.extra else ["--key", self.key]
        if not self.root_squash:
            key.append("--no-root-squash")
        self.proc = subprocess.Popen(
            [CAIRN, "serve", "--data", self.data, "--listen",
             "127.0.0.1:%d" % self.port] + key + self.extra,
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
            start_new_session=True, env=dict(os.environ, **self.env),
            # Not the test's working directory, which may be in a mount
            # (the server would keep it busy).
            cwd="/")
        logf.close()
        _record_pid(self.proc.pid)
        end = time.time() + timeout
        rx = re.compile(r"listening on \[?[0-9a-fA-F.:]*?\]?:(\d+)")
        while time.time() < end:
            with open(self.log, "rb") as f:
                f.seek(start_off)
                text = f.read().decode("utf-8", "replace")
            m = rx.search(text)
            if m:
                self.port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                raise TestFailure("cairn serve exited with status %s before listening; log:\n%s"
                                  % (self.proc.returncode, text[-2000:]))
            time.sleep(0.05)
        raise TestFailure("cairn serve printed no 'listening on HOST:PORT' line within %ss" % timeout)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout=10):
        """SIGTERM and wait; returns the exit status (None if killed)."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return None
        return self.proc.returncode

    def log_lines(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []


class Mount:
    def __init__(self, ctx, server, mnt, cache, log):
        self.ctx, self.server, self.path, self.cache, self.log = ctx, server, mnt, cache, log
        self.pid = None
        self.env = {}

    @property
    def daemon_log(self):
        return os.path.join(self.cache, "cairn.log")

    def mount(self, timeout=None, extra=()):
        timeout = timeout or (60 if ASAN else 30)
        os.makedirs(self.path, exist_ok=True)
        os.makedirs(self.cache, exist_ok=True)
        args = ["mount", "--cache-dir", self.cache] + list(extra) + [self.server.addr, self.path]
        with open(self.log, "ab") as logf:
            logf.write(("$ cairn %s\n" % " ".join(args)).encode())
            logf.flush()
            try:
                p = subprocess.run([CAIRN] + args, stdin=subprocess.DEVNULL,
                                   stdout=logf, stderr=logf, timeout=timeout,
                                   env=dict(os.environ, **self.env))
            except subprocess.TimeoutExpired:
                self._find_pid()
                raise TestFailure("cairn mount did not return within %ss" % timeout)
        self._find_pid()
        if p.returncode != 0:
            raise TestFailure("cairn mount exited %d; output:\n%s"
                              % (p.returncode, "\n".join(tail(self.log, 15))))
        if not is_mounted(self.path):
            raise TestFailure("cairn mount returned 0 but %s is not a mount point" % self.path)
        return self

    def _find_pid(self):
        """The daemon detaches, so find it by its exact mount point
        argument (never by program name alone) and record it."""
        want = os.fsencode(self.path)
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if (len(argv) > 2 and os.path.basename(argv[0]) == b"cairn"
                    and argv[1] == b"mount" and want in argv):
                self.pid = int(d)
                _record_pid(self.pid)
                return

    def p(self, *parts):
        return os.path.join(self.path, *parts)

    def umount(self):
        """cairn umount, falling back to lazy unmounts; then make sure the
        daemon is gone. Never raises."""
        if is_mounted(self.path):
            try:
                subprocess.run([CAIRN, "umount", self.path], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=15)
            except Exception:
                pass
        for cmd in (["fusermount3", "-u", "-z", self.path], ["umount", "-l", self.path]):
            if not is_mounted(self.path):
                break
            try:
                subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=15)
            except Exception:
                pass
        if self.pid:
            end = time.time() + 10
            while time.time() < end and pid_alive(self.pid):
                time.sleep(0.05)
            kill_wait(self.pid, 2)


class Proxy:
    """A TCP relay between mounts and a server that a test can freeze: a
    network partition without a close. While frozen it passes nothing
    on, neither bytes nor a close, in either direction (it accepts new
    connections but forwards nothing on them either; what it read waits,
    and the senders' windows fill); thaw() sends what it held and goes
    on. Mount through it with ctx.mount(proxy, ...)."""

    def __init__(self, server):
        import socket
        self.server = server
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.socks = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def freeze(self):
        self.flowing.clear()

    def thaw(self):
        self.flowing.set()

    def _accept(self):
        import socket
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.server.port), 5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            self.socks += [c, u]
            for src, dst in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src, dst):
        import socket
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            self.flowing.wait()
            if self.closed:
                return
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self.closed = True
        self.flowing.set()
        for s in [self.lsock] + self.socks:
            try:
                s.close()
            except OSError:
                pass


class Ctx:
    """Private temp dir + the servers and mounts a test started."""

    def __init__(self, name):
        base = TMP_ROOT or tempfile.gettempdir()
        safe = re.sub(r"[^A-Za-z0-9]+", "-", name)[:40]
        self.dir = tempfile.mkdtemp(prefix="cairn-%s-" % safe, dir=base)
        # Non-root test users must be able to reach the mount points.
        os.chmod(self.dir, 0o755)
        self.servers = []
        self.mounts = []
        self.proxies = []
        self._n = 0
        _LIVE.append(self)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def server(self, start=True, data=None, port=0, extra=(), env=None):
        i = len(self.servers)
        s = Server(self, data or self.path("data"), self.path("serve%d.log" % i), port, extra)
        s.env = dict(env or {})
        self.servers.append(s)
        if start:
            s.start()
        return s

    def proxy(self, server):
        """A freezable relay to server (Proxy); mount through it."""
        p = Proxy(server)
        self.proxies.append(p)
        return p

    def mount(self, server, name=None, extra=(), env=None):
        self._n += 1
        name = name or "mnt%d" % self._n
        m = Mount(self, server, self.path(name), self.path("cache-" + name),
                  self.path(name + ".log"))
        m.env = dict(env or {})
        self.mounts.append(m)
        m.mount(extra=extra)
        return m

    def local(self, name="local"):
        """A directory on the local disk, for comparing errnos."""
        d = self.path(name)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        return d

    def diagnostics(self, n=25):
        out = []
        for s in self.servers:
            out.append("--- server log %s (last %d lines)" % (s.log, n))
            out += tail(s.log, n)
        for m in self.mounts:
            out.append("--- mount output %s" % m.log)
            out += tail(m.log, 10)
            if os.path.exists(m.daemon_log):
                out.append("--- mount daemon log %s (last %d lines)" % (m.daemon_log, n))
                out += tail(m.daemon_log, n)
        return out

    def cleanup(self):
        for p in self.proxies:
            p.thaw()
        for m in reversed(self.mounts):
            m.umount()
        for p in self.proxies:
            p.close()
        for s in self.servers:
            if s.proc and s.proc.poll() is None:
                kill_wait(s.proc.pid, 5)
                try:
                    s.proc.wait(1)
                except Exception:
                    pass
        if self in _LIVE:
            _LIVE.remove(self)
        if os.environ.get("CAIRN_KEEP_TMP"):
            return
        if not any(is_mounted(m.path) for m in self.mounts):
            shutil.rmtree(self.dir, ignore_errors=True)


def _cleanup_all():
    for c in list(_LIVE):
        try:
            c.cleanup()
        except Exception:
            pass


def _on_signal(sig, frame):
    # Unwind through the tests' finally blocks, then atexit.
    signal.signal(sig, signal.SIG_DFL)
    raise KeyboardInterrupt("signal %d" % sig)


# ---------------------------------------------------------------- user switch

def as_user(uid, gid, fn, *args):
    """Run fn(*args) in a forked child with the given uid/gid. Returns
    ("ok", value) or ("err", errno) or ("exc", text)."""
    import pickle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        res = ("exc", "child died")
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.umask(0o022)
            try:
                res = ("ok", fn(*args))
            except OSError as e:
                res = ("err", e.errno)
            except Exception as e:
                res = ("exc", "%s: %s" % (type(e).__name__, e))
            data = pickle.dumps(res)
        except BaseException as e:
            data = pickle.dumps(("exc", repr(e)))
        try:
            os.write(w, data)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:
        return ("exc", "child sent nothing")


def user_errno(uid, gid, fn, *args):
    """Errno (0 = success) of fn run as uid/gid; raises on odd failures."""
    kind, v = as_user(uid, gid, fn, *args)
    if kind == "ok":
        return 0
    if kind == "err":
        return v
    raise TestFailure("child as uid %d: %s" % (uid, v))


# ---------------------------------------------------------------- sanitizers

SAN_DIR = None        # where ASan/UBSan reports of spawned processes go
KEY_FILE = None       # the suite's cell key (setup_process)
_san_seen = set()


def setup_process(build):
    """Common process setup for a suite: paths, signals, atexit,
    sanitizer report collection."""
    global BUILD, CAIRN, ASAN, SAN_DIR, KEY_FILE
    BUILD = os.path.abspath(build)
    # The cell key every server of the suite is started with and every
    # client finds in $CAIRN_KEY (lib/seal.h: 64 hex digits, mode 0600).
    kdir = tempfile.mkdtemp(prefix="cairn-key-", dir=TMP_ROOT or tempfile.gettempdir())
    atexit.register(shutil.rmtree, kdir, True)
    KEY_FILE = os.path.join(kdir, "cell.key")
    fd = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (os.urandom(32).hex() + "\n").encode())
    os.close(fd)
    os.environ["CAIRN_KEY"] = KEY_FILE
    CAIRN = os.path.join(BUILD, "cairn")
    ASAN = os.environ.get("CAIRN_ASAN") == "1" or "asan" in os.path.basename(BUILD)
    sys.stdout.reconfigure(line_buffering=True)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    atexit.register(_cleanup_all)
    if ASAN:
        # Daemons lose stderr, so every sanitizer report goes to a file we
        # read after each test.
        SAN_DIR = tempfile.mkdtemp(prefix="cairn-san-", dir=TMP_ROOT or tempfile.gettempdir())
        os.chmod(SAN_DIR, 0o777)   # processes running as other users too
        os.environ["ASAN_OPTIONS"] = "log_path=%s/asan:detect_leaks=1" % SAN_DIR
        os.environ["UBSAN_OPTIONS"] = "print_stacktrace=1:log_path=%s/ubsan" % SAN_DIR
        os.environ["LSAN_OPTIONS"] = "suppressions=%s:print_suppressions=0" % os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lsan.supp")
        atexit.register(shutil.rmtree, SAN_DIR, True)


def sanitizer_reports():
    """Text of sanitizer reports written since the last call."""
    if not SAN_DIR or not os.path.isdir(SAN_DIR):
        return []
    out = []
    for name in sorted(os.listdir(SAN_DIR)):
        if name in _san_seen:
            continue
        _san_seen.add(name)
        lines = tail(os.path.join(SAN_DIR, name), 400)
        # The stack traces are what matter; the shadow byte map is noise.
        cut = [i for i, l in enumerate(lines) if l.startswith("Shadow bytes around")]
        lines = lines[:cut[0] if cut else 60][:60]
        out.append("--- sanitizer report %s:" % name)
        out += lines
    return out


def sanitizer_check(tag):
    """Print a test line for reports not yet attributed; returns the
    number of failures (0 or 1). Only in sanitizer builds."""
    if not ASAN:
        return 0
    rep = sanitizer_reports()
    if not rep:
        print("ok - %s: no sanitizer reports" % tag)
        return 0
    print("not ok - %s: no sanitizer reports" % tag)
    for line in rep:
        print("#   " + line)
    return 1


# ---------------------------------------------------------------- main

def main(setup=None, teardown=None):
    """Run every registered test (or those named in $CAIRN_TEST_ONLY,
    comma separated substrings). setup(ctx) may build a shared fixture in
    a suite-wide Ctx; each test gets that ctx (or a fresh one if no
    setup). In sanitizer builds a last test checks for reports written at
    shutdown. Exit status 0 iff all passed."""
    if len(sys.argv) != 2:
        print("usage: %s BUILD_DIR" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    setup_process(sys.argv[1])
    suite = os.path.basename(sys.argv[0]).replace(".py", "")

    # CAIRN_TEST_ONLY selects suites (by file name, in tests/run.sh) and
    # tests (by name, here); an entry naming this suite selects all of it.
    only = [s for s in os.environ.get("CAIRN_TEST_ONLY", "").split(",") if s]
    if any(o in os.path.basename(sys.argv[0]) for o in only):
        only = []
    tests = [t for t in _TESTS if not only or any(o in t[0] for o in only)]
    print("1..%d" % (len(tests) + (1 if ASAN else 0)))
    if not os.access(CAIRN, os.X_OK):
        for name, _, _ in tests:
            print("not ok - %s" % name)
            print("# %s does not exist or is not executable" % CAIRN)
        sys.exit(1)

    failed = 0
    shared = None
    try:
        if setup:
            shared = Ctx(suite)
            try:
                setup(shared)
            except Exception as e:
                for name, _, _ in tests:
                    print("not ok - %s" % name)
                print("# suite setup failed: %s" % e)
                for line in traceback.format_exc().splitlines()[-6:]:
                    print("#   " + line)
                for line in shared.diagnostics() + sanitizer_reports():
                    print("#   " + line)
                failed += len(tests)
                tests = []
        for name, fn, opts in tests:
            failed += _run_one(name, fn, opts, shared)
    except KeyboardInterrupt:
        failed += 1
    finally:
        if teardown and shared:
            try:
                teardown(shared)
            except Exception:
                pass
        if shared:
            shared.cleanup()
    failed += sanitizer_check(suite + " shutdown")
    sys.exit(1 if failed else 0)


def _run_one(name, fn, opts, shared):
    """Run one test, print its result line and diagnostics; 1 if failed."""
    ctx = shared or Ctx(name)
    t0 = time.time()
    err, diag = None, []
    try:
        if opts["timeout"]:
            signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(opts["timeout"])
        fn(ctx)
    except Skip as e:
        err = "skip"
        diag = [str(e)]
    except KeyboardInterrupt:
        signal.alarm(0)
        print("not ok - %s" % name)
        print("# interrupted")
        if ctx is not shared:
            ctx.cleanup()
        raise
    except (TestFailure, OSError) as e:
        # Expected-vs-got failures, and system calls that failed where the
        # test expected success: the message plus the test's line say it.
        err = "fail"
        diag = str(e).splitlines()
        if isinstance(e, OSError):
            diag = ["unexpected error: %s" % e]
        tb = traceback.extract_tb(e.__traceback__)
        here = [f for f in tb if os.path.basename(f.filename) != "harness.py"]
        for f in here[-3:]:
            diag.append("at %s:%d: %s" % (os.path.basename(f.filename), f.lineno, f.line))
    except BaseException:
        err = "fail"
        diag = traceback.format_exc().splitlines()[-12:]
    finally:
        signal.alarm(0)
    if err == "fail":
        diag += ctx.diagnostics(15)
    if ctx is not shared:
        ctx.cleanup()
    san = sanitizer_reports()
    dt = time.time() - t0
    if err == "skip" and not san:
        print("ok - %s  # skip %s" % (name, diag[0] if diag else ""))
        return 0
    if err is None and not san:
        print("ok - %s  (%.1fs)" % (name, dt))
        return 0
    print("not ok - %s  (%.1fs)" % (name, dt))
    for line in diag + san:
        print("#   " + line)
    return 1


def _alarm(sig, frame):
    raise TestFailure("test timed out (alarm)")


# ---------------------------------------------------------------- mount state
# Appended helpers (issue 7's two-client tests): a mount's own counters, the
# kernel's caches, and a daemon killed on purpose.

def mount_status(m, timeout=15):
    """`cairn status MOUNTPOINT` of mount m as {key: int or str}; raises
    TestFailure when it does not answer."""
    r = run_cairn(["status", m.path], timeout=timeout)
    if r.returncode != 0:
        raise TestFailure("cairn status %s exited %d: %s"
                          % (m.path, r.returncode, r.stderr.strip()))
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def wb_idle(m, timeout=20):
    """Wait until mount m's write-back journal has sent everything and
    given back every write token (client/wback.c; a token goes back after
    a second without writes), so that what a test counts next is its own
    doing, not the journal's background calls."""
    end = time.time() + timeout
    while True:
        st = mount_status(m)
        if st.get("wb.pending_changes", 0) == 0 and st.get("wb.tokens", 0) == 0:
            return
        if time.time() > end:
            raise TestFailure("write-back of %s not idle within %d s: %r"
                              % (m.path, timeout,
                                 {k: v for k, v in st.items() if k.startswith("wb.")}))
        time.sleep(0.1)


def drop_kernel_caches():
    """Drop the kernel's unused dentries and inodes (drop_caches = 2): FUSE
    then sends FORGET for every inode of a mount that nothing holds. System
    wide, and harmless to anything else but its speed."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def exit_inode_count(m):
    """The count of the daemon's last 'inode table at exit: N inodes' log
    line (client/fs.c, fs_destroy), or None when it logged none."""
    found = None
    for line in tail(m.daemon_log, 100000):
        mo = re.search(r"inode table at exit: (\d+) inodes", line)
        if mo:
            found = int(mo.group(1))
    return found


def with_deadline(seconds, what, fn, *args):
    """fn(*args) in a thread; fail if it does not return within seconds (a
    hung mount must fail the test, not hang the suite). Its result, or
    the exception it raised."""
    box = {}

    def run():
        try:
            box["v"] = fn(*args)
        except BaseException as e:  # noqa: B902
            box["e"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        fail("%s: did not finish within %ds (mount hung?)" % (what, seconds))
    if "e" in box:
        raise box["e"]
    return box.get("v")


def sigstop(pid, timeout=10.0):
    """SIGSTOP pid and wait until every thread of it has stopped: kill()
    returns before they do, and a request that arrives meanwhile is still
    answered (a test that counts what went while a server was stopped
    then sees a change answered that should have waited)."""
    os.kill(pid, signal.SIGSTOP)
    end = time.time() + timeout
    while time.time() < end:
        states = []
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in ("T", "t", "Z", "X") for st in states):
            return
        time.sleep(0.005)
    fail("pid %d did not stop within %ss" % (pid, timeout))


def kill9_daemon(m, timeout=10.0):
    """SIGKILL the `cairn mount` daemon of mount m (the PID the harness
    found for it, checked again against its command line first) and wait
    until it is gone. Returns the seconds it took to go. The mount stays,
    dead, until m.umount()."""
    if not m.pid or not pid_alive(m.pid):
        raise TestFailure("no live daemon recorded for %s" % m.path)
    try:
        with open("/proc/%d/cmdline" % m.pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        argv = []
    if b"mount" not in argv or os.fsencode(m.path) not in argv:
        raise TestFailure("PID %d is no longer the daemon of %s: %r" % (m.pid, m.path, argv))
    t0 = time.time()
    os.kill(m.pid, signal.SIGKILL)
    while pid_alive(m.pid):
        if time.time() - t0 > timeout:
            raise TestFailure("daemon %d of %s still alive %.0fs after SIGKILL"
                              % (m.pid, m.path, timeout))
        time.sleep(0.01)
    return time.time() - t0
