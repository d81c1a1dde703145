#!/usr/bin/env python3
"""proto_client.py - a minimal Cairn protocol client (docs/PROTOCOL.md).

A library for tests that talk to a live `cairn serve` without FUSE:
frame encoding and decoding, HELLO, one helper per request op, and raw
access for malformed-frame tests.

    from proto_client import Conn, CairnError
    c = Conn("127.0.0.1", port)
    root = c.hello()                       # attr dict of the root
    a = c.create(root["fid"], "f", 0o100644)["child"]
    c.write(a["fid"], 0, b"hello")
    c.read(a["fid"], 0, 5)["data"]        # b"hello"
    try: c.lookup(root["fid"], "nope")
    except CairnError as e: e.errno       # errno.ENOENT

Pushed CB_BREAK frames received while waiting for replies are appended to
`conn.breaks` as lists of (fid, name) records; `conn.wait_break(timeout)`
waits for one.

Run as a script, it exercises every op against a server:
    python3 proto_client.py PORT [HOST]
and prints "ok - NAME" / "not ok - NAME" lines (exit 1 on failure).
"""

import errno as _errno
import os
import select
import socket
import struct
import sys
import time

MAGIC = 0x4E524143
VERSION = 1
HDR = struct.Struct("<IHHIi")
HDR_SIZE = 16
MAX_PAYLOAD = (4 << 20) + 4096
MAX_IO = 1 << 20

WF_REPLY = 1
WF_PUSH = 2

OPS = ["", "HELLO", "PING", "GETATTR", "LOOKUP", "SETATTR", "CREATE",
       "SYMLINK", "READLINK", "LINK", "REMOVE", "RENAME", "READDIR", "READ",
       "WRITE", "FSYNC", "STATFS", "SETXATTR", "GETXATTR", "LISTXATTR",
       "REMOVEXATTR", "FALLOCATE", "STATUS"]
OP = {name: i for i, name in enumerate(OPS) if name}
OP["CB_BREAK"] = 64
globals().update({"OP_" + k: v for k, v in OP.items()})

SA_MODE, SA_UID, SA_GID, SA_SIZE = 1, 2, 4, 8
SA_ATIME, SA_MTIME, SA_ATIME_NOW, SA_MTIME_NOW, SA_CTIME = 16, 32, 64, 128, 256
CR_EXCL = 1
RM_DIR = 1
RN_NOREPLACE, RN_EXCHANGE = 1, 2
WR_SYNC = 1
FS_DATASYNC = 1
XA_CREATE, XA_REPLACE = 1, 2


class CairnError(Exception):
    """A reply with a non-zero status; .errno is the positive errno."""

    def __init__(self, op, status):
        self.errno = -status
        self.op = op
        super().__init__("%s: %s" % (OPS[op] if op < len(OPS) else op,
                                     os.strerror(-status)))


class ProtocolError(Exception):
    pass


# --- encoding ---------------------------------------------------------------

def u8(v): return struct.pack("<B", v)
def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)
def i32(v): return struct.pack("<i", v)
def i64(v): return struct.pack("<q", v)


def bstr(s):
    if isinstance(s, str):
        s = s.encode()
    return u16(len(s)) + s


def blob(b):
    if isinstance(b, str):
        b = b.encode()
    return u32(len(b)) + b


def fid(f):
    return struct.pack("<IQI", *f)


def ttime(t):
    sec, nsec = t
    return struct.pack("<qI", sec, nsec)


def frame(op, payload=b"", flags=0, id=0, status=0, length=None):
    """One frame; `length` overrides the header's len (for bad frames)."""
    n = len(payload) if length is None else length
    return HDR.pack(n, op, flags, id, status) + payload


# --- decoding ---------------------------------------------------------------

class Reader:
    def __init__(self, b):
        self.b = b
        self.off = 0

    def take(self, n):
        if self.off + n > len(self.b):
            raise ProtocolError("short payload")
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def unpack(self, fmt):
        s = struct.Struct("<" + fmt)
        return s.unpack(self.take(s.size))

    def u8(self): return self.unpack("B")[0]
    def u32(self): return self.unpack("I")[0]
    def u64(self): return self.unpack("Q")[0]
    def str(self): return self.take(self.unpack("H")[0])
    def blob(self): return self.take(self.u32())
    def fid(self): return self.unpack("IQI")

    def attr(self):
        f = self.fid()
        (mode, nlink, uid, gid, rdev, size, blocks, asec, ans, msec, mns,
         csec, cns, dv) = self.unpack("IIIIIQQqIqIqIQ")
        return {"fid": f, "mode": mode, "nlink": nlink, "uid": uid,
                "gid": gid, "rdev": rdev, "size": size, "blocks": blocks,
                "atime": (asec, ans), "mtime": (msec, mns),
                "ctime": (csec, cns), "dv": dv}

    def end(self):
        if self.off != len(self.b):
            raise ProtocolError("%d trailing bytes" % (len(self.b) - self.off))


def decode_breaks(payload):
    r = Reader(payload)
    recs = [(r.fid(), r.str().decode()) for _ in range(r.u32())]
    r.end()
    return recs


# --- connection -------------------------------------------------------------

class Conn:
    def __init__(self, host="127.0.0.1", port=7070, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.next_id = 1
        self.replies = {}    # id -> (op, status, payload)
        self.breaks = []     # list of [(fid, name), ...] per CB_BREAK
        self.buf = b""
        self.client_id = os.urandom(16)

    def close(self):
        self.sock.close()

    # raw I/O
    def send_raw(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise EOFError("connection closed by server")
            self.buf += chunk
        v, self.buf = self.buf[:n], self.buf[n:]
        return v

    def recv_frame(self):
        """(op, flags, id, status, payload) of the next frame."""
        n, op, flags, id, status = HDR.unpack(self.recv_exact(HDR_SIZE))
        if n > MAX_PAYLOAD:
            raise ProtocolError("server sent a %d-byte frame" % n)
        return op, flags, id, status, self.recv_exact(n)

    def _dispatch(self, fr):
        op, flags, id, status, payload = fr
        if flags & WF_PUSH:
            if op != OP_CB_BREAK:
                raise ProtocolError("unknown push op %d" % op)
            self.breaks.append(decode_breaks(payload))
        elif flags & WF_REPLY:
            self.replies[id] = (op, status, payload)
        else:
            raise ProtocolError("frame without reply/push flag")

    def closed_by_server(self, timeout=5.0):
        """True if the server closes the connection within timeout."""
        self.sock.settimeout(timeout)
        try:
            while True:
                self._dispatch(self.recv_frame())
        except (EOFError, ConnectionResetError):
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(self.timeout)

    def send(self, op, payload=b""):
        """Send a request; returns its id (see wait)."""
        id = self.next_id
        self.next_id = (self.next_id + 1) & 0xFFFFFFFF or 1
        self.send_raw(frame(op, payload, id=id))
        return id

    def wait(self, id):
        """(status, payload) of request id, collecting pushes meanwhile."""
        while id not in self.replies:
            self._dispatch(self.recv_frame())
        op, status, payload = self.replies.pop(id)
        return status, payload

    def call(self, op, payload=b""):
        """Reply payload of op; raises CairnError on a non-zero status."""
        status, payload = self.wait(self.send(op, payload))
        if status:
            if payload:
                raise ProtocolError("error reply with a payload")
            raise CairnError(op, status)
        return Reader(payload)

    def poll_breaks(self, timeout=0.0):
        """Read whatever pushes arrive within timeout."""
        end = time.time() + timeout
        while True:
            left = max(0.0, end - time.time())
            if not self.buf:
                r, _, _ = select.select([self.sock], [], [], left)
                if not r:
                    return
            self._dispatch(self.recv_frame())
            if left == 0.0 and not self.buf:
                return

    def drain_breaks(self, timeout=0.1):
        """Forget every break received so far (and within timeout)."""
        self.poll_breaks(timeout)
        self.breaks.clear()

    def expect_break(self, record, timeout=2.0):
        """True once a CB_BREAK containing (fid, name) record arrives."""
        end = time.time() + timeout
        while True:
            for i, recs in enumerate(self.breaks):
                if record in recs:
                    del self.breaks[i]
                    return True
            left = end - time.time()
            if left <= 0:
                return False
            self.poll_breaks(min(left, 0.05))

    def wait_break(self, timeout=2.0):
        """Pop the oldest CB_BREAK record list, waiting up to timeout."""
        if not self.breaks:
            self.poll_breaks(timeout)
        return self.breaks.pop(0) if self.breaks else None

    # --- ops ----------------------------------------------------------------

    def hello(self, version=VERSION, magic=MAGIC, client_id=None):
        if client_id is not None:
            self.client_id = client_id
        r = self.call(OP_HELLO, u32(magic) + u32(version) + self.client_id +
                      u32(0))
        v = r.u32()
        self.server_id = r.take(16)
        self.epoch = r.u64()
        root = r.attr()
        r.end()
        self.version = v
        return root

    def ping(self):
        self.call(OP_PING).end()

    def getattr(self, f):
        r = self.call(OP_GETATTR, fid(f))
        a = r.attr()
        r.end()
        return a

    def lookup(self, d, name):
        r = self.call(OP_LOOKUP, fid(d) + bstr(name))
        a = r.attr()
        r.end()
        return a

    def setattr(self, f, valid, mode=0, uid=0, gid=0, size=0,
                atime=(0, 0), mtime=(0, 0), ctime=(0, 0)):
        r = self.call(OP_SETATTR, fid(f) + u32(valid) + u32(mode) + u32(uid) +
                      u32(gid) + u64(size) + ttime(atime) + ttime(mtime) +
                      ttime(ctime))
        a = r.attr()
        r.end()
        return a

    def create(self, d, name, mode, uid=0, gid=0, rdev=0, flags=0):
        r = self.call(OP_CREATE, fid(d) + bstr(name) + u32(mode) + u32(uid) +
                      u32(gid) + u32(rdev) + u32(flags))
        out = {"created": r.u8(), "child": r.attr(), "dir": r.attr()}
        r.end()
        return out

    def mkdir(self, d, name, mode=0o755):
        return self.create(d, name, 0o040000 | mode, flags=CR_EXCL)

    def symlink(self, d, name, target, uid=0, gid=0):
        r = self.call(OP_SYMLINK, fid(d) + bstr(name) + bstr(target) +
                      u32(uid) + u32(gid))
        out = {"child": r.attr(), "dir": r.attr()}
        r.end()
        return out

    def readlink(self, f):
        r = self.call(OP_READLINK, fid(f))
        t = r.str()
        r.end()
        return t.decode()

    def link(self, f, d, name):
        r = self.call(OP_LINK, fid(f) + fid(d) + bstr(name))
        out = {"target": r.attr(), "dir": r.attr()}
        r.end()
        return out

    def remove(self, d, name, flags=0):
        r = self.call(OP_REMOVE, fid(d) + bstr(name) + u32(flags))
        a = r.attr()
        r.end()
        return a

    def rename(self, sd, sname, dd, dname, flags=0):
        r = self.call(OP_RENAME, fid(sd) + bstr(sname) + fid(dd) +
                      bstr(dname) + u32(flags))
        out = {"src": r.attr(), "dst": r.attr()}
        r.end()
        return out

    def readdir(self, d, cookie=0, max_entries=1000):
        r = self.call(OP_READDIR, fid(d) + u64(cookie) + u32(max_entries))
        n, eof = r.u32(), r.u8()
        ents = [(r.u64(), r.str().decode(), r.attr()) for _ in range(n)]
        r.end()
        return ents, eof

    def listdir(self, d, chunk=1000):
        """Every entry name, following cookies."""
        names, cookie = [], 0
        while True:
            ents, eof = self.readdir(d, cookie, chunk)
            names += [e[1] for e in ents]
            if eof or not ents:
                return names
            cookie = ents[-1][0]

    def read(self, f, off, length):
        r = self.call(OP_READ, fid(f) + u64(off) + u32(length))
        out = {"attr": r.attr(), "data": r.blob()}
        r.end()
        return out

    def write(self, f, off, data, flags=0):
        r = self.call(OP_WRITE, fid(f) + u64(off) + u32(flags) + blob(data))
        a = r.attr()
        r.end()
        return a

    def fsync(self, f, flags=0):
        self.call(OP_FSYNC, fid(f) + u32(flags)).end()

    def statfs(self):
        r = self.call(OP_STATFS)
        keys = ["blocks", "bfree", "bavail", "files", "ffree", "bsize",
                "namemax"]
        out = dict(zip(keys, r.unpack("QQQQQII")))
        r.end()
        return out

    def setxattr(self, f, name, value, flags=0):
        self.call(OP_SETXATTR, fid(f) + bstr(name) + u32(flags) +
                  blob(value)).end()

    def getxattr(self, f, name, size=65536):
        r = self.call(OP_GETXATTR, fid(f) + bstr(name) + u32(size))
        n, v = r.u32(), r.blob()
        r.end()
        return n, v

    def listxattr(self, f, size=65536):
        r = self.call(OP_LISTXATTR, fid(f) + u32(size))
        n, v = r.u32(), r.blob()
        r.end()
        return n, [x.decode() for x in v.split(b"\0") if x]

    def removexattr(self, f, name):
        self.call(OP_REMOVEXATTR, fid(f) + bstr(name)).end()

    def fallocate(self, f, mode, off, length):
        r = self.call(OP_FALLOCATE, fid(f) + u32(mode) + u64(off) +
                      u64(length))
        a = r.attr()
        r.end()
        return a

    def status(self):
        """STATUS text parsed into {key: int-or-str}."""
        r = self.call(OP_STATUS)
        text = r.blob().decode()
        r.end()
        out = {}
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v) if v.lstrip("-").isdigit() else v
        return out


# --- self test: every op against a live server --------------------------------

def _selftest(host, port):
    failed = []

    def check(name, cond, detail=""):
        print("%s - %s%s" % ("ok" if cond else "not ok", name,
                             "" if cond or not detail else " (%s)" % detail))
        if not cond:
            failed.append(name)

    def expect_err(name, err, fn, *a, **kw):
        try:
            fn(*a, **kw)
            check(name, False, "no error")
        except CairnError as e:
            check(name, e.errno == err, os.strerror(e.errno))

    a = Conn(host, port)
    b = Conn(host, port)
    root = a.hello()
    rootb = b.hello()
    check("hello", root["fid"] == rootb["fid"] and root["mode"] & 0o040000)
    a.ping()
    check("ping", True)
    check("getattr", a.getattr(root["fid"])["fid"] == root["fid"])
    tag = "t%d" % os.getpid()
    d = a.mkdir(root["fid"], tag)["child"]
    check("mkdir", d["mode"] & 0o170000 == 0o040000)
    expect_err("mkdir EEXIST", _errno.EEXIST, a.mkdir, root["fid"], tag)
    expect_err("lookup ENOENT", _errno.ENOENT, a.lookup, d["fid"], "x")
    expect_err("name '..' EINVAL", _errno.EINVAL, a.lookup, d["fid"], "..")
    expect_err("name with / EINVAL", _errno.EINVAL, a.lookup, d["fid"], "a/b")
    expect_err("name too long", _errno.ENAMETOOLONG, a.lookup, d["fid"],
               "x" * 256)
    expect_err("stale fid", _errno.ESTALE, a.getattr,
               (d["fid"][0], 1 << 40, 7))

    # b caches d (promise), then a creates in it: b must get (d, "f").
    b.getattr(d["fid"])
    b.drain_breaks()
    a.drain_breaks()
    cr = a.create(d["fid"], "f", 0o100644, flags=CR_EXCL)
    f = cr["child"]
    check("create", cr["created"] == 1 and f["size"] == 0)
    check("break on create names the entry",
          b.expect_break((d["fid"], "f")), b.breaks)
    check("changer gets no break", a.wait_break(0.2) is None, a.breaks)
    again = a.create(d["fid"], "f", 0o100644)
    check("create existing without EXCL", again["created"] == 0 and
          again["child"]["fid"] == f["fid"])
    check("lookup", a.lookup(d["fid"], "f")["fid"] == f["fid"])

    b.getattr(f["fid"])
    b.drain_breaks()
    w = a.write(f["fid"], 0, b"hello world")
    check("write", w["size"] == 11 and w["dv"] != f["dv"])
    check("break on write", b.expect_break((f["fid"], "")), b.breaks)
    a.write(f["fid"], 0, b"H")
    check("no second break without a new promise",
          b.wait_break(0.2) is None, b.breaks)
    rd = a.read(f["fid"], 6, 100)
    check("read", rd["data"] == b"world" and rd["attr"]["size"] == 11)
    a.write(f["fid"], 1 << 20, b"x")
    check("read hole", a.read(f["fid"], 1000, 10)["data"] == b"\0" * 10)
    big = os.urandom(MAX_IO)
    a.write(f["fid"], 0, big, WR_SYNC)
    check("write/read 1 MiB", a.read(f["fid"], 0, MAX_IO)["data"] == big)
    a.fsync(f["fid"])
    a.fsync(f["fid"], FS_DATASYNC)
    check("fsync", True)
    st = a.setattr(f["fid"], SA_SIZE | SA_MODE, mode=0o600, size=3)
    check("setattr", st["size"] == 3 and st["mode"] & 0o7777 == 0o600)
    fa = a.fallocate(f["fid"], 0, 0, 8192)
    check("fallocate", fa["size"] == 8192)
    expect_err("fallocate bad mode", _errno.EOPNOTSUPP, a.fallocate,
               f["fid"], 0x40, 0, 10)

    sl = a.symlink(d["fid"], "s", "f")["child"]
    check("symlink/readlink", a.readlink(sl["fid"]) == "f")
    ln = a.link(f["fid"], d["fid"], "g")
    check("link", ln["target"]["nlink"] == 2)
    a.create(d["fid"], "sub", 0o040755, flags=CR_EXCL)
    names = sorted(a.listdir(d["fid"]))
    check("readdir", names == ["f", "g", "s", "sub"], names)
    ents, eof = a.readdir(d["fid"], 0, 1)
    check("readdir paging", len(ents) == 1 and not eof and
          ents[0][0] >= 3)

    b.getattr(d["fid"])
    b.drain_breaks()
    a.rename(d["fid"], "f", d["fid"], "h")
    brk = b.wait_break()
    check("break on rename names both entries", brk is not None and
          (d["fid"], "f") in brk and (d["fid"], "h") in brk, brk)
    expect_err("rename NOREPLACE", _errno.EEXIST, a.rename, d["fid"], "h",
               d["fid"], "g", RN_NOREPLACE)
    expect_err("unlink a dir", _errno.EISDIR, a.remove, d["fid"], "sub")
    a.remove(d["fid"], "sub", RM_DIR)
    a.remove(d["fid"], "g")
    check("remove", sorted(a.listdir(d["fid"])) == ["h", "s"])
    expect_err("rmdir not empty", _errno.ENOTEMPTY, a.remove, root["fid"],
               tag, RM_DIR)

    a.setxattr(f["fid"], "user.k", b"v1")
    check("getxattr", a.getxattr(f["fid"], "user.k") == (2, b"v1"))
    check("getxattr size 0", a.getxattr(f["fid"], "user.k", 0) == (2, b""))
    expect_err("getxattr ERANGE", _errno.ERANGE, a.getxattr, f["fid"],
               "user.k", 1)
    check("listxattr", "user.k" in a.listxattr(f["fid"])[1])
    a.removexattr(f["fid"], "user.k")
    expect_err("getxattr ENODATA", _errno.ENODATA, a.getxattr, f["fid"],
               "user.k")
    sf = a.statfs()
    check("statfs", sf["bsize"] > 0 and sf["namemax"] == 255)
    stt = a.status()
    check("status", stt.get("op.write.calls", 0) >= 3 and
          stt.get("connections", 0) >= 2 and "cb_breaks" in stt, stt)

    # Pipelining: many requests in flight, replies matched by id.
    ids = [a.send(OP_GETATTR, fid(f["fid"])) for _ in range(200)]
    ok = all(a.wait(i)[0] == 0 for i in reversed(ids))
    check("200 pipelined requests", ok)
    check("unknown opcode ENOSYS", a.wait(a.send(40))[0] == -_errno.ENOSYS)

    a.remove(d["fid"], "h")
    a.remove(d["fid"], "s")
    a.remove(root["fid"], tag, RM_DIR)

    # Malformed frames: each closes only its own connection.
    hello_payload = u32(MAGIC) + u32(VERSION) + os.urandom(16) + u32(0)
    bad = {
        "oversized len": frame(OP_PING, length=MAX_PAYLOAD + 1),
        "unknown flag bits": frame(OP_HELLO, hello_payload, flags=0x80),
        "first frame not HELLO": frame(OP_PING, id=1),
        "bad magic": frame(OP_HELLO, u32(0x1234) + hello_payload[4:], id=1),
        "short HELLO": frame(OP_HELLO, hello_payload[:10], id=1),
        "trailing bytes": frame(OP_HELLO, hello_payload + b"x", id=1),
        "closed mid-frame": frame(OP_HELLO, hello_payload, id=1)[:20],
        "garbage": os.urandom(64),
    }
    for name, data in bad.items():
        c = Conn(host, port)
        c.send_raw(data)
        if name == "closed mid-frame":
            c.sock.shutdown(socket.SHUT_WR)
        check("malformed: " + name, c.closed_by_server(), "still open")
        c.close()
    c = Conn(host, port)
    c.hello()
    c.send_raw(frame(OP_GETATTR, fid(root["fid"]) + b"zz", id=9))
    check("malformed: GETATTR with trailing bytes", c.closed_by_server())
    c.close()
    c = Conn(host, port)
    try:
        c.hello(version=99)
        check("HELLO bad version", False, "accepted")
    except CairnError as e:
        check("HELLO bad version EPROTONOSUPPORT",
              e.errno == _errno.EPROTONOSUPPORT and c.closed_by_server())
    c.close()
    a.ping()
    check("server still serves the others", a.getattr(root["fid"]) and True)
    a.close()
    b.close()
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.stderr.write("usage: proto_client.py PORT [HOST]\n")
        sys.exit(2)
    sys.exit(_selftest(sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1",
                       int(sys.argv[1])))
