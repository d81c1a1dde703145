#!/usr/bin/env python3
# timeout: 180
"""test_auth.py - only holders of the cell key get in (docs/SECURITY.md,
docs/PROTOCOL.md "Handshake").

A real `cairn serve`, real mounts and `cairn status`, and a protocol
client for what a mount would never send: no key, a wrong key, a
group-readable key, a recorded handshake replayed, a frame altered on the
way, a HELLO without AUTH. A TCP relay between a mount and the server
records every byte: file contents and names never cross in the clear.
"""

import errno
import os
import select
import socket
import stat
import struct
import sys
import threading
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

import proto_client as P  # noqa: E402


def write_key(path, mode=0o600, key=None):
    key = key or os.urandom(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, (key.hex() + "\n").encode())
    os.close(fd)
    os.chmod(path, mode)
    return key


def suite_key():
    with open(H.KEY_FILE) as f:
        return bytes.fromhex(f.read().strip())


def mount_fails(ctx, srv, name, extra=(), env=None):
    """Run `cairn mount` that must fail; returns its stderr."""
    mnt = ctx.path(name)
    os.makedirs(mnt, exist_ok=True)
    r = H.run_cairn(["mount", "--cache-dir", ctx.path("cache-" + name)] + list(extra)
                    + [srv.addr, mnt], timeout=30, env=env)
    if r.returncode == 0 or H.is_mounted(mnt):
        H.run_cairn(["umount", mnt], timeout=30)
        fail("cairn mount %s succeeded; it must be refused" % " ".join(extra))
    return r.stderr.strip()


def log_has(srv, text, since=0, timeout=5):
    end = time.time() + timeout
    while time.time() < end:
        if any(text in l for l in srv.log_lines()[since:]):
            return True
        time.sleep(0.05)
    return False


def recv_all(sock, timeout=3):
    """Everything the peer sends until it closes (or timeout)."""
    sock.settimeout(timeout)
    out = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    return out


@test
def server_creates_a_private_key_at_first_start(ctx):
    srv = ctx.server(start=False)
    srv.key = None            # no --key: DATA/cell.key
    srv.start()
    srv_key = os.path.join(srv.data, "cell.key")
    st = os.stat(srv_key)
    expect_eq(stat.S_IMODE(st.st_mode), 0o600, "mode of DATA/cell.key")
    with open(srv_key) as f:
        text = f.read()
    expect(len(text.strip()) == 64 and int(text, 16) >= 0, "cell.key is 64 hex digits")
    expect(log_has(srv, "created the cell key " + srv_key),
           "the server does not say where it created the key")
    # The suite's key is not this server's: refused. Its own key works.
    err = mount_fails(ctx, srv, "wrong")
    expect("does not know this key" in err,
           "error for a mount with another cell's key: %r" % err)
    m = ctx.mount(srv, "right", extra=["--key", srv_key])
    H.write_file(m.p("f"), b"keyed")
    expect_eq(H.read_file(m.p("f")), b"keyed", "content through the right key")


@test
def missing_and_group_readable_keys_refused(ctx):
    srv = ctx.server()
    env = dict(os.environ)
    env.pop("CAIRN_KEY", None)
    nokey = ctx.path("no-such.key")
    err = mount_fails(ctx, srv, "nokey", extra=["--key", nokey])
    expect("cannot read the cell key %s" % nokey in err and "--key" in err,
           "error for a missing key file: %r" % err)
    loose = ctx.path("loose.key")
    with open(H.KEY_FILE) as f:
        key = bytes.fromhex(f.read().strip())
    write_key(loose, 0o640, key)
    err = mount_fails(ctx, srv, "loose", extra=["--key", loose])
    expect("accessible to group or others" in err and "0640" in err,
           "error for a group-readable key: %r" % err)
    bad = ctx.path("bad.key")
    with open(bad, "w") as f:
        f.write("not a key\n")
    os.chmod(bad, 0o600)
    err = mount_fails(ctx, srv, "bad", extra=["--key", bad])
    expect("is not a key" in err, "error for a malformed key file: %r" % err)
    # The server refuses a group-readable key too, and says so.
    r = H.run_cairn(["serve", "--data", ctx.path("data2"), "--listen", "127.0.0.1:0",
                     "--key", loose], timeout=15)
    expect(r.returncode != 0 and "accessible to group or others" in r.stderr,
           "cairn serve with a 0640 key: exit %d, %r" % (r.returncode, r.stderr.strip()))
    # cairn status HOST needs the key as well.
    r = H.run_cairn(["status", "--key", nokey, srv.addr], timeout=15)
    expect(r.returncode != 0 and "cannot read the cell key" in r.stderr,
           "cairn status without a key: exit %d, %r" % (r.returncode, r.stderr.strip()))
    r = H.run_cairn(["status", srv.addr], timeout=15)
    expect(r.returncode == 0 and "uptime_s" in r.stdout,
           "cairn status with the key: exit %d, %r" % (r.returncode, r.stderr.strip()))


@test
def wrong_key_gets_nothing(ctx):
    srv = ctx.server()
    other = os.urandom(32)
    # A key the server does not hold: AUTH refused with EACCES, logged.
    mark = len(srv.log_lines())
    try:
        P.Conn("127.0.0.1", srv.port, key=other)
        fail("AUTH with an unknown key was answered")
    except P.CairnError as e:
        expect_eq(e.errno, errno.EACCES, "errno of AUTH with an unknown key")
    expect(log_has(srv, "names a key this server does not hold", mark),
           "no log line about the unknown key")
    time.sleep(1.1)   # failures are logged at most once a second
    # One that ignores the proof and says HELLO sealed with its own key:
    # the server logs it and closes; no HELLO reply (no root FID) comes.
    mark = len(srv.log_lines())
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    nc = os.urandom(32)
    # It names the suite's key (known to the server) but holds another.
    s.sendall(P.frame(P.OP_AUTH, P.u32(P.MAGIC) + P.u32(P.VERSION) + nc
                      + P.key_id(suite_key())))
    hdr = recv_exact(s, P.HDR_SIZE)
    n, op, flags, rid, status = P.HDR.unpack(hdr)
    expect_eq((op, status, n), (P.OP_AUTH, 0, 64), "(op, status, len) of the AUTH reply")
    ns = recv_exact(s, 64)[:32]
    tx = P.Seal(other, nc, ns, b"cairn client to server key")
    hello = P.u32(P.MAGIC) + P.u32(P.VERSION) + os.urandom(16) + P.u32(0)
    h = P.HDR.pack(len(hello) + P.TAG_SIZE, P.OP_HELLO, 0, 1, 0)
    t0 = time.time()
    s.sendall(h + tx.seal(h, hello))
    rest = recv_all(s, 5)
    s.close()
    expect_eq(rest, b"", "bytes the server sent after a HELLO that does not verify")
    expect(time.time() - t0 >= 0.9, "closed after %.2f s; a failed handshake is held 1 s"
           % (time.time() - t0))
    expect(log_has(srv, "handshake failed", mark), "no log line about the failed handshake")
    expect(any("handshake failed" in l and "127.0.0.1:" in l for l in srv.log_lines()[mark:]),
           "the failed handshake's log line does not name the peer")


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise EOFError("closed after %d of %d bytes" % (len(out), n))
        out += b
    return out


@test
def replayed_handshake_refused(ctx):
    srv = ctx.server()
    # Record what a real client sends: AUTH and its sealed HELLO.
    with open(H.KEY_FILE) as f:
        key = bytes.fromhex(f.read().strip())
    c = P.Conn("127.0.0.1", srv.port, auth=False)
    nc = os.urandom(32)
    sent = [P.frame(P.OP_AUTH, P.auth_payload(key, nc))]
    seal_stream = c.seal_stream

    def recorded(data):
        out = seal_stream(data)
        sent.append(out)
        return out
    c.seal_stream = recorded
    c.authenticate(key, nonce=nc)
    root = c.hello()
    expect(root["fid"], "the recorded client got the root")
    c.close()
    expect(len(sent) == 2, "recorded %d sends (AUTH, HELLO expected)" % len(sent))
    # Replayed byte for byte on a new connection: the server's nonce is
    # new, so the HELLO does not open; nothing but the AUTH reply comes.
    mark = len(srv.log_lines())
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.sendall(sent[0])
    hdr = recv_exact(s, P.HDR_SIZE)
    n = P.HDR.unpack(hdr)[0]
    recv_exact(s, n)
    s.sendall(sent[1])
    expect_eq(recv_all(s, 5), b"", "bytes after a replayed HELLO")
    s.close()
    expect(log_has(srv, "handshake failed", mark), "no log line about the replayed handshake")


@test
def hello_without_auth_refused(ctx):
    srv = ctx.server()
    mark = len(srv.log_lines())
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.sendall(P.frame(P.OP_HELLO, P.u32(P.MAGIC) + P.u32(P.VERSION) + os.urandom(16) + P.u32(0)))
    expect_eq(recv_all(s, 5), b"", "bytes a HELLO without AUTH gets back")
    s.close()
    expect(log_has(srv, "first frame is not an AUTH", mark), "no log line for a HELLO without AUTH")
    # AUTH with a version the server does not speak: a clear refusal.
    c = P.Conn("127.0.0.1", srv.port, auth=False)
    c.sock.sendall(P.frame(P.OP_AUTH, P.auth_payload(suite_key(), os.urandom(32), version=99)))
    op, flags, rid, status, payload = c.recv_frame()
    expect_eq((op, status, payload), (P.OP_AUTH, -errno.EPROTONOSUPPORT, b""),
              "(op, status, payload) of AUTH version 99")
    expect(c.closed_by_server(5), "connection open after AUTH version 99")
    c.close()
    # AUTH again on an authenticated connection: -EISCONN.
    c = P.Conn("127.0.0.1", srv.port)
    c.hello()
    try:
        c.auth()
        fail("a second AUTH was accepted")
    except P.CairnError as e:
        expect_eq(e.errno, errno.EISCONN, "errno of a second AUTH")
    c.ping()
    c.close()


@test
def altered_frame_closes_the_connection(ctx):
    srv = ctx.server()
    c = P.Conn("127.0.0.1", srv.port)
    root = c.hello()
    mark = len(srv.log_lines())
    # A GETATTR sealed properly, one payload bit flipped on the way.
    body = P.fid(root["fid"])
    h = P.HDR.pack(len(body) + P.TAG_SIZE, P.OP_GETATTR, 0, 77, 0)
    sealed = bytearray(c.tx.seal(h, body))
    sealed[3] ^= 0x01
    c.sock.sendall(h + bytes(sealed))
    expect(c.closed_by_server(5), "connection open after an altered frame")
    c.close()
    expect(log_has(srv, "does not verify", mark), "no log line for the altered frame")
    # A frame replayed within a connection (same bytes twice) fails too.
    c = P.Conn("127.0.0.1", srv.port)
    c.hello()
    h = P.HDR.pack(P.TAG_SIZE, P.OP_PING, 0, 5, 0)
    ping = h + c.tx.seal(h, b"")
    c.sock.sendall(ping)
    op, flags, rid, status, payload = c.recv_frame()
    expect_eq((op, rid, status), (P.OP_PING, 5, 0), "the first PING answered")
    c.sock.sendall(ping)
    expect(c.closed_by_server(5), "connection open after a frame sent twice")
    c.close()


@test
def read_only_export_refuses_every_change(ctx):
    ro = ctx.path("ro.key")
    rokey = write_key(ro)
    srv = ctx.server(extra=["--ro-key", ro])
    expect(log_has(srv, "read-only export: clients holding " + ro),
           "the server does not log its read-only export")
    rw = ctx.mount(srv, "rw")
    H.write_file(rw.p("f"), b"shared")
    os.mkdir(rw.p("d"))
    m = ctx.mount(srv, "ro", extra=["--key", ro])
    expect_eq(H.read_file(m.p("f")), b"shared", "read through the read-only key")
    expect_eq(sorted(os.listdir(m.path)), ["d", "f"], "listing through the read-only key")
    # The mount is read-only: the kernel says EROFS to every change.
    attempts = {
        "create": lambda: open(m.p("new"), "w"),
        "open for writing": lambda: open(m.p("f"), "r+b"),
        "mkdir": lambda: os.mkdir(m.p("x")),
        "unlink": lambda: os.unlink(m.p("f")),
        "rmdir": lambda: os.rmdir(m.p("d")),
        "chmod": lambda: os.chmod(m.p("f"), 0o600),
        "rename": lambda: os.rename(m.p("f"), m.p("g")),
        "symlink": lambda: os.symlink("f", m.p("s")),
        "setxattr": lambda: os.setxattr(m.p("f"), "user.a", b"1"),
    }
    for what, fn in attempts.items():
        try:
            fn()
            fail("%s on the read-only mount succeeded" % what)
        except OSError as e:
            expect_eq(e.errno, errno.EROFS, "errno of %s on the read-only mount" % what)
    # The server refuses them itself, whatever a client's kernel does.
    c = P.Conn("127.0.0.1", srv.port, key=rokey)
    root = c.hello()
    expect(c.hello_flags & 1, "HELLO reply to a read-only key lacks HELLO_REP_RO")
    f = c.lookup(root["fid"], "f")
    changes = {
        "CREATE": lambda: c.create(root["fid"], "n", 0o100644),
        "SETATTR": lambda: c.setattr(f["fid"], P.SA_MODE, mode=0o100600),
        "WRITE": lambda: c.write(f["fid"], 0, b"x"),
        "REMOVE": lambda: c.remove(root["fid"], "f"),
        "RENAME": lambda: c.rename(root["fid"], "f", root["fid"], "g"),
        "LINK": lambda: c.link(f["fid"], root["fid"], "l"),
        "SYMLINK": lambda: c.symlink(root["fid"], "s", "f"),
        "SETXATTR": lambda: c.setxattr(f["fid"], "user.a", b"1"),
        "REMOVEXATTR": lambda: c.removexattr(f["fid"], "user.a"),
        "FALLOCATE": lambda: c.fallocate(f["fid"], 0, 0, 4096),
        "WTOKEN": lambda: c.wtoken(f["fid"]),
        "ATIME": lambda: c.atime([f["fid"]]),
    }
    for what, fn in changes.items():
        try:
            fn()
            fail("%s with a read-only key succeeded" % what)
        except P.CairnError as e:
            expect_eq(e.errno, errno.EROFS, "errno of %s with a read-only key" % what)
    c.ping()
    expect_eq(c.read(f["fid"], 0, 6)["data"], b"shared", "READ with a read-only key")
    c.close()
    # Nothing changed; the read-write client still writes.
    expect_eq(sorted(os.listdir(rw.path)), ["d", "f"], "names after the refused changes")
    H.write_file(rw.p("f"), b"changed")
    expect_eq(H.read_file(rw.p("f")), b"changed", "a write through the cell key")


class Relay:
    """A TCP relay to the server that records both directions and can
    flip one byte of what the server sends after `flip_after` bytes."""

    def __init__(self, port):
        self.port = port
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.addr = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.up = bytearray()
        self.down = bytearray()
        self.flip_after = None
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        pairs = []
        while not self.stop:
            socks = [self.lsock] + [s for p in pairs for s in p]
            r, _, _ = select.select(socks, [], [], 0.1)
            for s in r:
                if s is self.lsock:
                    a, _ = self.lsock.accept()
                    b = socket.create_connection(("127.0.0.1", self.port))
                    pairs.append((a, b))
                    continue
                for a, b in pairs:
                    if s in (a, b):
                        break
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    a.close()
                    b.close()
                    pairs.remove((a, b))
                    continue
                if s is a:
                    self.up += data
                    b.sendall(data)
                else:
                    if self.flip_after is not None and len(self.down) + len(data) > self.flip_after:
                        i = self.flip_after - len(self.down)
                        if i >= 0:
                            data = data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1:]
                        self.flip_after = None
                    self.down += data
                    a.sendall(data)
        for a, b in pairs:
            a.close()
            b.close()
        self.lsock.close()

    def close(self):
        self.stop = True
        self.t.join(5)


@test
def contents_and_names_never_cross_in_the_clear(ctx):
    srv = ctx.server()
    relay = Relay(srv.port)
    try:
        m = ctx.mount(types.SimpleNamespace(addr=relay.addr), "relayed",
                      extra=["--write-through"])
        marker = b"CAIRN-PLAINTEXT-MARKER-" + os.urandom(4).hex().encode()
        name = "secret-name-" + os.urandom(4).hex()
        H.write_file(m.p(name), marker * 100)
        expect_eq(H.read_file(m.p(name)), marker * 100, "content through the relay")
        os.sync()
        H.run_cairn(["umount", m.path], timeout=30)
        ctx.mounts.remove(m)
        # A second client reads it through the relay (the data comes down).
        m2 = ctx.mount(types.SimpleNamespace(addr=relay.addr), "relayed2",
                       extra=["--cache-size", "0"])
        expect_eq(H.read_file(m2.p(name)), marker * 100, "content read through the relay")
        up, down = bytes(relay.up), bytes(relay.down)
        expect(len(up) > len(marker) * 100 and len(down) > len(marker) * 100,
               "the relay saw %d bytes up, %d down" % (len(up), len(down)))
        for what, data in (("client to server", up), ("server to client", down)):
            expect(marker not in data, "file content in the clear, %s" % what)
            expect(name.encode() not in data, "file name in the clear, %s" % what)
    finally:
        relay.close()


@test
def client_notices_a_frame_altered_by_the_network(ctx):
    srv = ctx.server()
    relay = Relay(srv.port)
    try:
        m = ctx.mount(types.SimpleNamespace(addr=relay.addr), "altered")
        H.write_file(m.p("f"), b"x" * 100000)
        # A payload byte of the next frame the server sends (the reply
        # to the CREATE below) is altered: the client drops the
        # connection, reconnects, resends, and goes on.
        time.sleep(0.5)
        relay.flip_after = len(relay.down) + P.HDR_SIZE + 2
        H.write_file(m.p("g"), b"after")
        expect_eq(H.read_file(m.p("g")), b"after", "file created across the altered reply")
        end = time.time() + 10
        seen = False
        while time.time() < end and not seen:
            with open(m.daemon_log, errors="replace") as f:
                seen = "does not verify" in f.read()
            time.sleep(0.2)
        expect(seen, "the client did not log a frame that does not verify")
        expect_eq(H.read_file(m.p("f")), b"x" * 100000, "content after the reconnect")
    finally:
        relay.close()


if __name__ == "__main__":
    H.main()
