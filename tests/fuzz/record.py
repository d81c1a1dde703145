#!/usr/bin/env python3
"""record.py - seed the fuzz corpora with real Cairn traffic.

    tests/fuzz/record.py BUILD_DIR [--out DIR] [--cap BYTES] [--per-kind N]

Starts a `cairn serve` and two `cairn mount`s of it (through the harness of
tests/integration, so everything is cleaned up), with a TCP proxy between
the mounts and the server. The proxy forwards every byte untouched and
splits both directions into frames (16-byte header: u32 len, u16 op,
u16 flags, u32 id, i32 status, little-endian; docs/PROTOCOL.md). Then an
ordinary workload runs on the mounts: create, write, read, ls, rename,
link, symlink, xattrs, truncate, chmod, utimes, fallocate, fsync, statfs,
mkfifo, rm, rmdir, names that do not exist, `cairn status`, and changes on
one mount to what the other has cached, so CB_BREAK pushes and their
acknowledgements flow.

Then it unmounts, stops the server and reads every record of its LMDB
store with mdb_dump (Debian package lmdb-utils; without it the store
corpus is skipped with a note).

What it writes (file names are content hashes, so a re-run adds only
what is new; remove the directories first to start over):
  DIR/fuzz_msg/    one file per distinct payload: a selector byte (the op,
                   | 0x80 for a reply or acknowledgement; tests/fuzz/fuzz_msg.c)
                   then the payload. Error replies (status != 0, empty
                   payload) are left out: they have no reply body to decode.
  DIR/fuzz_frame/  single whole frames (header + payload), and the first
                   frames of each connection in each direction back to back.
  DIR/fuzz_store_rec/  one file per distinct LMDB key or value that has a
                   decoder in server/store_rec.h: a kind byte (the enum of
                   tests/fuzz/fuzz_store_rec.c; xattr values also a buffer
                   size byte, 255 = exact) then the record.
Payloads over --cap bytes (default 3000) are left out, and at most
--per-kind (default 8) payloads are kept per message and direction,
preferring sizes not seen yet, so the corpus stays a few hundred small
files. DIR defaults to tests/fuzz/corpus.
"""

import argparse
import hashlib
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402

HDR = struct.Struct("<IHHIi")
WF_REPLY = 1
OP_CB_BREAK = 64


def op_names():
    """Opcode -> name, read from lib/proto.h's enum cairn_op."""
    with open(os.path.join(ROOT, "lib", "proto.h")) as f:
        text = f.read()
    body = re.search(r"enum cairn_op \{(.*?)\};", text, re.S).group(1)
    names, nxt = {}, 0
    for name, val in re.findall(r"OP_(\w+)\s*(?:=\s*(\d+))?\s*,", body):
        nxt = int(val) if val else nxt
        if not name.startswith("_"):
            names[nxt] = name.lower()
        nxt += 1
    return names


class Recorder:
    def __init__(self, cap, per_kind):
        self.cap, self.per_kind = cap, per_kind
        self.lock = threading.Lock()
        self.msg = {}      # (op, reply) -> {sha: bytes}
        self.sizes = {}    # (op, reply) -> set of payload sizes kept
        self.frames = {}   # sha -> bytes
        self.frame_kinds = {}  # (op, flags, status != 0) -> count
        self.seen = 0

    def frame(self, hdr, payload):
        length, op, flags, fid, status = HDR.unpack(hdr)
        reply = 1 if flags & WF_REPLY else 0
        with self.lock:
            self.seen += 1
            if len(payload) <= self.cap:
                kind = (op, flags, status != 0)
                if self.frame_kinds.get(kind, 0) < 2:
                    self.frame_kinds[kind] = self.frame_kinds.get(kind, 0) + 1
                    self._add(self.frames, hdr + payload)
            if status != 0 or len(payload) > self.cap:
                return
            key = (op, reply)
            kept = self.msg.setdefault(key, {})
            sizes = self.sizes.setdefault(key, set())
            data = bytes([op | (0x80 if reply else 0)]) + payload
            sha = hashlib.sha1(data).hexdigest()
            if sha in kept:
                return
            # The first per_kind distinct payloads, then (up to twice as
            # many) only payloads of a size not seen yet.
            if len(kept) < self.per_kind or (len(payload) not in sizes and
                                            len(kept) < 2 * self.per_kind):
                kept[sha] = data
                sizes.add(len(payload))

    def stream_head(self, data):
        with self.lock:
            self._add(self.frames, data)

    @staticmethod
    def _add(d, data):
        d[hashlib.sha1(data).hexdigest()] = data


class Splitter:
    """Cuts one direction of a connection into frames."""
    HEAD = 1024   # bytes of whole frames saved as one multi-frame input

    def __init__(self, rec):
        self.rec, self.buf = rec, b""
        self.head, self.nhead, self.head_done = b"", 0, False

    def feed(self, data):
        self.buf += data
        while len(self.buf) >= HDR.size:
            length = HDR.unpack_from(self.buf)[0]
            if length > (4 << 20) + 4096:
                self.buf = b""      # not Cairn: stop parsing this stream
                return
            end = HDR.size + length
            if len(self.buf) < end:
                return
            frame, self.buf = self.buf[:end], self.buf[end:]
            self.rec.frame(frame[:HDR.size], frame[HDR.size:])
            if not self.head_done:
                if len(self.head) + len(frame) <= self.HEAD:
                    self.head += frame
                    self.nhead += 1
                else:
                    self.flush()

    def flush(self):
        if not self.head_done and self.nhead > 1:
            self.rec.stream_head(self.head)
        self.head_done = True


class Proxy:
    """127.0.0.1:port -> upstream, forwarding both ways, recording."""

    def __init__(self, upstream, rec):
        self.upstream, self.rec = upstream, rec
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.splitters = []
        self.conns = []
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            host, port = self.upstream.rsplit(":", 1)
            try:
                u = socket.create_connection((host, int(port)))
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns += [c, u]
            for src, dst in ((c, u), (u, c)):
                sp = Splitter(self.rec)
                self.splitters.append(sp)
                threading.Thread(target=self._pump, args=(src, dst, sp),
                                 daemon=True).start()

    @staticmethod
    def _pump(src, dst, sp):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                sp.feed(data)
        except OSError:
            pass
        sp.flush()
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.stopping = True
        self.sock.close()
        for s in self.conns:
            try:
                s.close()
            except OSError:
                pass
        for sp in self.splitters:
            sp.flush()


# fuzz_store_rec.c's record kinds, by LMDB database and key or value.
REC_KIND = {
    ("inodes", "val"): 0, ("dirents", "val"): 1, ("dirents", "key"): 2,
    ("dirseq", "key"): 3, ("dirseq", "val"): 4, ("symlinks", "val"): 8,
    ("xattrs", "key"): 9, ("xattrs", "val"): 10,
    ("orphans", "key"): 11, ("orphans", "val"): 12,
}
META_KIND = {"format": 5, "volume": 5, "next_vnode": 6, "server_id": 7}
REC_XATTR_VAL = 10


def mdb_records(env, db):
    """(key, value) pairs of one database of the LMDB env at path env."""
    out = subprocess.run(["mdb_dump", "-s", db, env], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("mdb_dump -s %s %s: %s" % (db, env,
                                                     out.stderr.strip()))
    body = out.stdout.split("HEADER=END\n", 1)[1].split("DATA=END", 1)[0]
    lines = [bytes.fromhex(line.strip()) for line in body.splitlines()
             if line.startswith(" ")]
    return list(zip(lines[0::2], lines[1::2]))


def store_inputs(data, per_kind):
    """fuzz_store_rec inputs from the records of the store in data/."""
    env = os.path.join(data, "meta")
    kept = {}    # kind -> {sha: bytes}
    sizes = {}

    def add(kind, rec, prefix=b""):
        d = kept.setdefault(kind, {})
        seen = sizes.setdefault(kind, set())
        data = bytes([kind]) + prefix + rec
        if len(d) < per_kind or (len(rec) not in seen and
                                 len(d) < 2 * per_kind):
            d[hashlib.sha1(data).hexdigest()] = data
            seen.add(len(rec))

    for db in ("inodes", "dirents", "dirseq", "symlinks", "xattrs", "meta",
               "orphans"):
        for key, val in mdb_records(env, db):
            if db == "meta":
                kind = META_KIND.get(key.decode("latin-1"))
                if kind is not None:
                    add(kind, val)
                continue
            for part, rec in (("key", key), ("val", val)):
                kind = REC_KIND.get((db, part))
                if kind == REC_XATTR_VAL:
                    add(kind, rec, b"\xff")      # buffer of exactly its size
                    add(kind, rec, b"\x00")      # a size query
                    if len(rec) > 1:
                        add(kind, rec, b"\x01")  # too small: -ERANGE
                elif kind is not None:
                    add(kind, rec)
    return kept


class Via:
    """Stands for the server in harness.Mount: the proxy's address."""

    def __init__(self, addr):
        self.addr = addr


def workload(a, b, proxy):
    w = harness.write_file
    d = a.p("d")
    os.mkdir(d)
    for i in range(24):
        w(os.path.join(d, "f%02d" % i), b"x" * (i * 7))
    os.listdir(d)
    os.listdir(b.p("d"))                       # b caches the directory
    w(a.p("hello.txt"), b"hello, world\n")
    harness.read_file(b.p("hello.txt"))        # b caches the file
    with open(a.p("hello.txt"), "ab") as f:    # a changes it: break to b
        f.write(b"more\n")
    harness.read_file(b.p("hello.txt"))
    w(a.p("big"), os.urandom(12000), fsync=True)
    harness.read_file(a.p("big"))
    fd = os.open(a.p("big"), os.O_RDWR)
    os.pwrite(fd, b"patch", 100)
    os.pread(fd, 64, 90)
    os.fdatasync(fd)
    os.fsync(fd)
    os.posix_fallocate(fd, 0, 20000)
    os.ftruncate(fd, 5000)
    os.close(fd)
    os.truncate(a.p("hello.txt"), 3)
    os.chmod(a.p("hello.txt"), 0o600)
    os.chown(a.p("hello.txt"), 1000, 1000)
    os.utime(a.p("hello.txt"), (1000000000, 1234567890))
    os.utime(a.p("hello.txt"))
    os.stat(b.p("hello.txt"))
    os.rename(a.p("hello.txt"), a.p("renamed.txt"))
    os.rename(os.path.join(d, "f01"), a.p("moved"))
    os.rename(a.p("renamed.txt"), os.path.join(d, "f02"))   # replaces
    os.link(a.p("moved"), a.p("hard"))
    os.symlink("moved", a.p("sym"))
    os.symlink("/a/longer/target/" + "t" * 200, a.p("sym2"))
    os.readlink(b.p("sym"))
    os.setxattr(a.p("moved"), "user.colour", b"blue")
    os.setxattr(a.p("moved"), "user.big", b"v" * 300)
    os.setxattr(a.p("moved"), "user.colour", b"red", os.XATTR_REPLACE)
    os.getxattr(b.p("moved"), "user.colour")
    os.listxattr(b.p("moved"))
    os.removexattr(a.p("moved"), "user.big")
    os.setxattr(a.p("big"), "user.empty", b"")
    os.setxattr(a.p("big"), "user." + "n" * 200, bytes(range(256)))
    os.setxattr(d, "user.on-a-dir", b"\x00binary\xff")
    os.symlink("x", a.p("sym3"))
    for fn, args in ((os.getxattr, (a.p("moved"), "user.none")),
                     (os.setxattr, (a.p("moved"), "user.colour", b"x",
                                    os.XATTR_CREATE)),
                     (os.stat, (a.p("nothing"),)),
                     (os.mkdir, (d,)),
                     (os.rmdir, (d,)),
                     (os.unlink, (a.p("nothing"),))):
        harness.errno_of(fn, *args)
    os.mkfifo(a.p("fifo"))
    os.statvfs(a.p("."))
    os.mkdir(a.p("e"))
    os.mkdir(a.p("e/sub"))
    os.listdir(b.p("e"))
    os.rmdir(a.p("e/sub"))                      # break on b's e
    os.listdir(b.p("e"))
    for name in sorted(os.listdir(d))[:12]:
        os.unlink(os.path.join(d, name))
    os.listdir(b.p("d"))
    os.unlink(a.p("hard"))
    os.unlink(b.p("sym"))                       # from the other side
    os.listdir(a.p("."))
    subprocess.run([harness.CAIRN, "status", proxy.addr],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--out", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--cap", type=int, default=3000)
    ap.add_argument("--per-kind", type=int, default=8)
    args = ap.parse_args()

    harness.setup_process(args.build)
    rec = Recorder(args.cap, args.per_kind)
    ctx = harness.Ctx("record")
    proxy = None
    try:
        srv = ctx.server()
        proxy = Proxy(srv.addr, rec)
        via = Via(proxy.addr)
        a = harness.Mount(ctx, via, ctx.path("a"), ctx.path("cache-a"),
                          ctx.path("a.log"))
        b = harness.Mount(ctx, via, ctx.path("b"), ctx.path("cache-b"),
                          ctx.path("b.log"))
        ctx.mounts += [a, b]
        a.mount()
        b.mount()
        workload(a, b, proxy)
        time.sleep(0.5)
        a.umount()
        b.umount()
        srv.stop()
        if shutil.which("mdb_dump"):
            store = store_inputs(srv.data, args.per_kind)
        else:
            store = None
            print("record: no mdb_dump (apt-get install lmdb-utils): "
                  "store records not recorded")
    finally:
        ctx.cleanup()
        if proxy:
            proxy.close()

    names = op_names()
    os.makedirs(os.path.join(args.out, "fuzz_msg"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "fuzz_frame"), exist_ok=True)
    new = kept = 0
    for (op, reply), items in sorted(rec.msg.items()):
        for sha, data in items.items():
            name = "%s-%s-%s" % (names.get(op, "op%d" % op),
                                 "rep" if reply else "req", sha[:16])
            path = os.path.join(args.out, "fuzz_msg", name)
            kept += 1
            if not os.path.exists(path):
                new += 1
                with open(path, "wb") as f:
                    f.write(data)
    for sha, data in rec.frames.items():
        path = os.path.join(args.out, "fuzz_frame", "frame-" + sha[:16])
        kept += 1
        if not os.path.exists(path):
            new += 1
            with open(path, "wb") as f:
                f.write(data)
    if store:
        os.makedirs(os.path.join(args.out, "fuzz_store_rec"), exist_ok=True)
        knames = ["inode", "dirent", "dirent_key", "dirseq_key", "name",
                  "meta_u32", "meta_u64", "meta_id", "symlink", "xattr_key",
                  "xattr_val", "orphan_key", "orphan"]
        for kind, items in sorted(store.items()):
            for sha, data in items.items():
                path = os.path.join(args.out, "fuzz_store_rec",
                                    "%s-%s" % (knames[kind], sha[:16]))
                kept += 1
                if not os.path.exists(path):
                    new += 1
                    with open(path, "wb") as f:
                        f.write(data)
        print("record: fuzz_store_rec per record: " + ", ".join(
            "%s %d" % (knames[k], len(v)) for k, v in sorted(store.items())))
    kinds = ", ".join("%s %s %d" % (names.get(op, op), "rep" if r else "req",
                                    len(v))
                      for (op, r), v in sorted(rec.msg.items()))
    print("record: %d frames seen; kept %d inputs (%d new) in %s" % (
        rec.seen, kept, new, args.out))
    print("record: fuzz_msg per message: " + kinds)
    missing = [n for op, n in sorted(names.items())
               if (op, 0) not in rec.msg]
    if missing:
        print("record: no request seen for: " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
