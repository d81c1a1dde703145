#!/usr/bin/env python3
"""proto_client.py - a minimal Cairn protocol client (docs/PROTOCOL.md).

A library for tests that talk to a live `cairn serve` without FUSE:
frame encoding and decoding, the AUTH handshake and sealed frames (the
cell key from $CAIRN_KEY unless given; docs/PROTOCOL.md "Handshake"),
HELLO, one helper per request op, and raw access for malformed-frame
tests (send_raw seals the whole frames it is given once authenticated and
sends anything else as it is).

No message layout is written here: at import the module reads the
"## Frames", "## Value types" and "## Messages" tables of
docs/PROTOCOL.md ($CAIRN_SRC_DIR/docs/PROTOCOL.md if set) and encodes and
decodes every message by them (encode(), decode(), Conn.request()), so
the document, this client and the C codec (tests/unit/test_msg_doc.c
checks the same tables against it) agree; test_proto.py checks this
client against the C encoders' bytes. The helpers below keep their
argument lists and return shapes whatever the tables call the fields.

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
import hashlib
import hmac
import os
import re
import select
import socket
import struct
import sys
import time

MAGIC = 0x4E524143
VERSION = 9
MAX_PAYLOAD = (4 << 20) + 4096
TAG_SIZE = 16
MAX_IO = 1 << 20

WF_REPLY = 1
WF_PUSH = 2
WF_CRED = 4

SA_MODE, SA_UID, SA_GID, SA_SIZE = 1, 2, 4, 8
SA_ATIME, SA_MTIME, SA_ATIME_NOW, SA_MTIME_NOW, SA_CTIME = 16, 32, 64, 128, 256
CR_EXCL = 1
CR_TOKEN = 2
CR_FID = 4
CREATED, CREATED_TOKEN, CREATED_ATTRS = 1, 2, 4   # CREATE reply's created
RM_DIR, RM_KEEP, RM_SELF, RM_FID = 1, 2, 4, 8
CB_ORPHANED = 1   # CB_BREAK record flags (lib/proto.h)
CB_ATTRS_ONLY = 2
RN_NOREPLACE, RN_EXCHANGE, RN_KEEP = 1, 2, 0x100
WR_SYNC = 1
WR_KEEPTIME = 2
WR_TOKEN = 4
WT_RETURN, WT_DV = 1, 2
LK_UN, LK_RD, LK_WR = 0, 1, 2
LK_FLOCK, LK_WAIT, LK_RECLAIM, LK_CANCEL, LK_RETURN = 1, 2, 4, 8, 16
LK_EOF = (1 << 63) - 1
LKD_DELEG = 1
LK_DELEG = 1 << 5
LKR_TOKEN = 1
SA_TOKEN = 1024
SA_SYNC = 2048
HELLO_REP_SA_SYNC = 4
SA_STEPS = 4096
HELLO_REP_SA_STEPS = 8
HELLO_REP_CR_SYNC = 16
HELLO_REP_CREATES_BIG = 32
CR_SYNC = 8
SA_MTIME, SA_CTIME, SA_KEEPTIME = 32, 256, 512
FS_DATASYNC = 1
XA_CREATE, XA_REPLACE = 1, 2
BS_LIST = 1
BULKSTAT_MAX = 256 * 1024
ORPHAN_DROP_MAX = 1024


class ProtocolError(Exception):
    pass


class LayoutError(Exception):
    """docs/PROTOCOL.md has a table or layout this module cannot read."""


# --- primitive encoders (also the raw access for malformed frames) ------------

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
    def fid(self): return TYPES["fid"].decode(self)
    def attr(self): return TYPES["attr"].decode(self)

    def end(self):
        if self.off != len(self.b):
            raise ProtocolError("%d trailing bytes" % (len(self.b) - self.off))


# --- the layouts, read from docs/PROTOCOL.md ------------------------------------
#
# The "## Messages" table gives each message's request and reply layout,
# the "## Value types" table the composite types (fid, time, attr, statfs)
# and "## Frames" the header. The same tables are checked against the C
# encoders by tests/unit/test_msg_doc.c (same grammar), so this client, the
# C codec and the document agree. A field's key is its name in the table,
# lower case, spaces as "_" ("u64 server epoch": "server_epoch"); an
# unnamed field is keyed by its type ("fid", "attr"); a "count × (...)"
# group is keyed "items", a list of dicts. fid and time decode to tuples
# (vol, vnode, uniq) and (sec, nsec), other composites to dicts; str and
# blob decode to bytes and encode from bytes or str.

INTS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i32": "i", "i64": "q"}
TUPLE_TYPES = ("fid", "time")
TIMES = "\u00d7"
EMPTY = "\u2013"


def _doc_path():
    root = os.environ.get("CAIRN_SRC_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")
    return os.path.join(root, "docs", "PROTOCOL.md")


def _table(text, heading):
    """Rows (lists of cells) of the first table after the line `heading`;
    the header row first, the separator row dropped."""
    lines = text.split("\n")
    try:
        i = lines.index(heading)
    except ValueError:
        raise LayoutError("PROTOCOL.md has no %r" % heading)
    rows = []
    for line in lines[i + 1:]:
        if not line.startswith("|"):
            if rows or line.startswith("## "):
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if all(set(c) <= set("-: ") for c in cells):
            continue
        rows.append(cells)
    if len(rows) < 2:
        raise LayoutError("PROTOCOL.md: no table under %r" % heading)
    return rows


def _split_items(text):
    """Split at commas outside parentheses and backticks."""
    items, cur, depth, tick = [], "", 0, False
    for ch in text:
        if ch == "`":
            tick = not tick
        elif not tick and ch == "(":
            depth += 1
        elif not tick and ch == ")":
            depth -= 1
        elif not tick and not depth and ch == ",":
            items.append(cur.strip())
            cur = ""
            continue
        cur += ch
    items.append(cur.strip())
    return items


def _field_name(words):
    """(name, value) of the words after a type: parenthesised remarks are
    dropped, except "(`VALUE`)", which is the field's value."""
    m = re.search(r"\(`([^`]*)`\)", words)
    value = int(m.group(1), 0) if m else None
    return " ".join(re.sub(r"\([^)]*\)", "", words).split()), value


def _key(name, default):
    return name.lower().replace(" ", "_") if name else default


class Field:
    __slots__ = ("kind", "key", "arg", "value", "sub")

    def __init__(self, kind, key, arg=None, value=None, sub=None):
        self.kind, self.key, self.arg = kind, key, arg
        self.value, self.sub = value, sub


class Layout:
    """One layout cell, compiled: decode(Reader) -> dict, encode(dict) ->
    bytes."""

    def __init__(self, text, types):
        self.text = text
        self.fields = []
        self.counts = {}     # key of a count field -> key of its group
        if text == EMPTY or text.startswith(("acknowledged:",
                                             "not acknowledged:")):
            return
        for item in _split_items(text):
            self._item(item[5:] if item.startswith("then ") else item,
                       types)
        keys = [f.key for f in self.fields]
        if len(set(keys)) != len(keys):
            raise LayoutError("%r: two fields with one name" % text)

    def _item(self, item, types):
        m = re.match(r"^(.+?) %s \((.*)\)$" % TIMES, item)
        if m:
            var = _key(_field_name(m.group(1))[0], None)
            if var not in [f.key for f in self.fields if f.kind == "int"]:
                raise LayoutError("%r: no integer %r before it" %
                                  (self.text, var))
            self.counts[var] = "items"
            self.fields.append(Field("repeat", "items", var,
                                     sub=Layout(m.group(2), types)))
            return
        m = re.match(r"^(\d+) bytes\b(.*)$", item)
        if m:
            name, _ = _field_name(m.group(2))
            self.fields.append(Field("bytes", _key(name, "bytes"),
                                     int(m.group(1))))
            return
        word, _, rest = item.partition(" ")
        name, value = _field_name(rest)
        if word in INTS:
            self.fields.append(Field("int", _key(name, word),
                                     struct.Struct("<" + INTS[word]), value))
        elif word in ("str", "blob"):
            self.fields.append(Field(word, _key(name, word)))
        elif word in types:
            self.fields.append(Field("type", _key(name, word), word))
        else:
            raise LayoutError("%r: unknown type %r" % (self.text, word))

    def size(self):
        """Encoded size if fixed, else None."""
        n = 0
        for f in self.fields:
            if f.kind == "int":
                n += f.arg.size
            elif f.kind == "bytes":
                n += f.arg
            elif f.kind == "type" and TYPES[f.arg].layout.size() is not None:
                n += TYPES[f.arg].layout.size()
            else:
                return None
        return n

    def decode(self, r):
        out = {}
        for f in self.fields:
            k = f.kind
            if k == "int":
                v = f.arg.unpack(r.take(f.arg.size))[0]
            elif k == "bytes":
                v = r.take(f.arg)
            elif k == "str":
                v = r.str()
            elif k == "blob":
                v = r.blob()
            elif k == "type":
                v = TYPES[f.arg].decode(r)
            else:
                v = [f.sub.decode(r) for _ in range(out[f.arg])]
            out[f.key] = v
        return out

    def encode(self, fields):
        out = []
        for f in self.fields:
            k = f.kind
            if k == "int":
                if f.key in fields:
                    v = fields[f.key]
                elif f.value is not None:
                    v = f.value
                elif f.key in self.counts:
                    v = len(fields[self.counts[f.key]])
                else:
                    raise KeyError("%r: no value for %r" % (self.text, f.key))
                out.append(f.arg.pack(v))
            elif k == "bytes":
                v = fields[f.key]
                if len(v) != f.arg:
                    raise ValueError("%s: %d bytes, not %d" %
                                     (f.key, len(v), f.arg))
                out.append(v)
            elif k == "str":
                out.append(bstr(fields[f.key]))
            elif k == "blob":
                out.append(blob(fields[f.key]))
            elif k == "type":
                out.append(TYPES[f.arg].encode(fields[f.key]))
            else:
                out.extend(f.sub.encode(_as_dict(f.sub, it))
                           for it in fields[f.key])
        return b"".join(out)


def _as_dict(layout, v):
    """Fields given as a dict, or as a tuple in layout order."""
    if isinstance(v, dict):
        return v
    keys = [f.key for f in layout.fields]
    if len(v) != len(keys):
        raise ValueError("%r: %d values for %d fields" %
                         (layout.text, len(v), len(keys)))
    return dict(zip(keys, v))


class ValueType:
    """A composite of the Value types table (fid, time, attr, statfs)."""

    def __init__(self, name, text, types):
        self.name = name
        m = re.match(r"^(.*?)\s*\((\d+) bytes\)$", text)
        self.layout = Layout(m.group(1) if m else text, types)
        self.doc_size = int(m.group(2)) if m else None
        self.as_tuple = name in TUPLE_TYPES

    def decode(self, r):
        d = self.layout.decode(r)
        return tuple(d.values()) if self.as_tuple else d

    def encode(self, v):
        return self.layout.encode(_as_dict(self.layout, v))


class Message:
    def __init__(self, op, name, push, req, rep):
        self.op, self.name, self.push = op, name, push
        self.req, self.rep = req, rep


def _load(path):
    """The frame header's struct and {name: Message}, from the doc at
    path; sets TYPES."""
    global TYPES
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise LayoutError("cannot read the protocol tables: %s" % e)
    # Rows come in order of use: attr is made of fid and time.
    TYPES = {}
    for row in _table(text, "## Value types")[1:]:
        if len(row) < 2 or "/" in row[0] or row[0] in ("str", "blob"):
            continue
        TYPES[row[0]] = ValueType(row[0], row[1], TYPES)
    for t in TYPES.values():
        if t.doc_size is not None and t.layout.size() != t.doc_size:
            raise LayoutError("%s: %s bytes by its fields, %d in the doc" %
                              (t.name, t.layout.size(), t.doc_size))
    fmt, off = "<", 0
    for row in _table(text, "## Frames")[1:]:
        if int(row[0]) != off or row[1] not in INTS:
            raise LayoutError("## Frames: row %r" % row)
        fmt += INTS[row[1]]
        off = struct.calcsize(fmt)
    msgs = {}
    head = _table(text, "## Messages")
    if head[0] != ["op", "name", "request", "reply"]:
        raise LayoutError("## Messages: columns %r" % head[0])
    for row in head[1:]:
        name = row[1]
        push = name.endswith(" (push)")
        if push:
            name = name[:-len(" (push)")]
        msgs[name] = Message(int(row[0]), name, push,
                             Layout(row[2], TYPES), Layout(row[3], TYPES))
    return struct.Struct(fmt), msgs


TYPES = {}
HDR, MESSAGES = _load(_doc_path())
HDR_SIZE = HDR.size
OP = {m.name: m.op for m in MESSAGES.values()}
globals().update({"OP_" + k: v for k, v in OP.items()})
OPS = [""] * (max(m.op for m in MESSAGES.values() if not m.push) + 1)
for _m in MESSAGES.values():
    if not _m.push:
        OPS[_m.op] = _m.name
del _m
_NAMES = {m.op: m.name for m in MESSAGES.values()}


def _message(op):
    if isinstance(op, str):
        return MESSAGES[op]
    return MESSAGES[_NAMES[op]]


def encode(op, reply=False, **fields):
    """Payload of message op (name or number), request or reply, from its
    fields by their PROTOCOL.md names."""
    m = _message(op)
    return (m.rep if reply else m.req).encode(fields)


def decode(op, payload, reply=False):
    """Fields of a payload of message op as a dict; ProtocolError unless
    the layout consumes exactly the payload."""
    m = _message(op)
    r = Reader(payload)
    out = (m.rep if reply else m.req).decode(r)
    r.end()
    return out


class CairnError(Exception):
    """A reply with a non-zero status; .errno is the positive errno."""

    def __init__(self, op, status):
        self.errno = -status
        self.op = op
        super().__init__("%s: %s" % (_NAMES.get(op, op), os.strerror(-status)))


# --- encoding helpers ---------------------------------------------------------

def fid(f):
    return TYPES["fid"].encode(f)


def ttime(t):
    return TYPES["time"].encode(t)


def frame(op, payload=b"", flags=0, id=0, status=0, length=None):
    """One frame; `length` overrides the header's len (for bad frames)."""
    n = len(payload) if length is None else length
    return HDR.pack(n, op, flags, id, status) + payload


def decode_breaks(payload):
    return [(it["fid"], it["name"].decode())
            for it in decode("CB_BREAK", payload)["items"]]


# --- the handshake and sealed frames (lib/seal.h) ------------------------------

def load_key(path=None):
    """The cell key (32 bytes) from path, or $CAIRN_KEY."""
    path = path or os.environ.get("CAIRN_KEY")
    if not path:
        raise ProtocolError("no cell key: set CAIRN_KEY or pass key=")
    with open(path) as f:
        return bytes.fromhex(f.read().strip())


def _derive(key, label, nc, ns):
    return hmac.new(key, label + nc + ns, hashlib.sha256).digest()


def server_proof(key, nc, ns):
    return _derive(key, b"cairn server proof", nc, ns)


def key_id(key):
    """The 8 bytes naming a key in AUTH (lib/seal.h cellkey_id)."""
    return _derive(key, b"cairn key id", bytes(32), bytes(32))[:8]


def auth_payload(key, nc, version=VERSION, magic=MAGIC):
    return u32(magic) + u32(version) + nc + key_id(key)


class Seal:
    """One direction: AES-256-GCM, the nonce the count of frames before."""

    def __init__(self, key, nc, ns, label):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        self.g = AESGCM(_derive(key, label, nc, ns))
        self.seq = 0

    def _nonce(self):
        n = b"\0" * 4 + struct.pack("<Q", self.seq)
        self.seq += 1
        return n

    def seal(self, hdr, payload):
        return self.g.encrypt(self._nonce(), payload, hdr)

    def open(self, hdr, data):
        from cryptography.exceptions import InvalidTag
        try:
            return self.g.decrypt(self._nonce(), data, hdr)
        except InvalidTag:
            raise ProtocolError("a frame from the server does not verify")


# --- connection -------------------------------------------------------------

class Conn:
    def __init__(self, host="127.0.0.1", port=7070, timeout=10.0, key=None,
                 auth=True):
        """Connect and, with auth, do the AUTH handshake with the cell
        key (key: bytes, a path, or None for $CAIRN_KEY)."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.tx = self.rx = None
        # (uid, gid, [groups]) sent with every request (WF_CRED), or None:
        # requests then go as the client daemon's own.
        self.cred = None
        self.next_id = 1
        self.replies = {}    # id -> (op, status, payload)
        self.breaks = []     # list of [(fid, name), ...] per CB_BREAK
        self.recalls = []    # FIDs of CB_RECALL pushes, in order
        self.lockwakes = []  # FIDs of CB_LOCKWAKE pushes, in order
        self.orphaned = []   # FIDs of CB_BREAK records flagged CB_ORPHANED
        self.rec_flags = []  # (fid, flags) of every object record
        self.buf = b""
        self.client_id = os.urandom(16)
        if auth:
            self.authenticate(key if isinstance(key, bytes) else load_key(key))

    def authenticate(self, key, nonce=None):
        """AUTH: check the server's proof, then seal every frame."""
        nc = nonce or os.urandom(32)
        self.auth_nonce = nc
        self.sock.sendall(frame(OP_AUTH, auth_payload(key, nc)))
        op, flags, id, status, payload = self.recv_frame()
        if op != OP_AUTH or not flags & WF_REPLY:
            raise ProtocolError("unexpected answer to AUTH (op %d)" % op)
        if status:
            raise CairnError(OP_AUTH, status)
        ns, proof = payload[:32], payload[32:]
        if len(payload) != 64 or not hmac.compare_digest(proof, server_proof(key, nc, ns)):
            raise ProtocolError("the server does not prove it holds the cell key")
        self.tx = Seal(key, nc, ns, b"cairn client to server key")
        self.rx = Seal(key, nc, ns, b"cairn server to client key")
        return ns

    def close(self):
        self.sock.close()

    def seal_stream(self, data):
        """data as it goes on the wire: once authenticated each whole
        frame in it sealed; a header whose payload is not all there (or
        is over the limit) and anything after it as it is."""
        if not self.tx:
            return data
        out, off = [], 0
        while len(data) - off >= HDR_SIZE:
            n, op, flags, id, status = HDR.unpack(data[off:off + HDR_SIZE])
            body = data[off + HDR_SIZE:off + HDR_SIZE + n]
            if n > MAX_PAYLOAD or len(body) < n:
                out.append(HDR.pack(min(n + TAG_SIZE, 0xFFFFFFFF), op, flags, id, status))
                out.append(data[off + HDR_SIZE:])
                off = len(data)
                break
            hdr = HDR.pack(n + TAG_SIZE, op, flags, id, status)
            out.append(hdr + self.tx.seal(hdr, body))
            off += HDR_SIZE + n
        out.append(data[off:])
        return b"".join(out)

    # raw I/O
    def send_raw(self, data):
        self.sock.sendall(self.seal_stream(data))

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
        hb = self.recv_exact(HDR_SIZE)
        n, op, flags, id, status = HDR.unpack(hb)
        if n > MAX_PAYLOAD + (TAG_SIZE if self.rx else 0):
            raise ProtocolError("server sent a %d-byte frame" % n)
        payload = self.recv_exact(n)
        if self.rx:
            if n < TAG_SIZE:
                raise ProtocolError("sealed frame shorter than its tag")
            payload = self.rx.open(hb, payload)
        return op, flags, id, status, payload

    def _dispatch(self, fr):
        op, flags, id, status, payload = fr
        if flags & WF_PUSH and op == OP_CB_RECALL:
            self.recalls += [tuple(it["fid"]) for it in
                             decode("CB_RECALL", payload)["items"]]
        elif flags & WF_PUSH and op == OP_CB_LOCKWAKE:
            self.lockwakes += [tuple(it["fid"]) for it in
                               decode("CB_LOCKWAKE", payload)["items"]]
        elif flags & WF_PUSH:
            if op != OP_CB_BREAK:
                raise ProtocolError("unknown push op %d" % op)
            self.breaks.append(decode_breaks(payload))
            items = decode("CB_BREAK", payload)["items"]
            self.orphaned += [it["fid"] for it in items
                              if it["flags"] & CB_ORPHANED]
            self.rec_flags += [(it["fid"], it["flags"]) for it in items
                               if not it["name"]]
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
        if self.cred:
            uid, gid, groups = self.cred
            block = u32(uid) + u32(gid) + u32(len(groups)) + b"".join(u32(g) for g in groups)
            self.send_raw(frame(op, block + payload, flags=WF_CRED, id=id))
        else:
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

    def all_breaks(self, quiet=0.5):
        """Every CB_BREAK record that comes until none has for quiet
        seconds, as one set."""
        got = set()
        while True:
            brk = self.wait_break(quiet)
            if not brk:
                return got
            got |= set(brk)

    # --- ops: fields by their PROTOCOL.md names -----------------------------

    def request(self, op, **fields):
        """Send message op (name or number) with fields; its decoded reply
        (a dict). Raises CairnError on a non-zero status."""
        m = _message(op)
        r = self.call(m.op, m.req.encode(fields))
        return decode(m.name, r.b, reply=True)

    def hello(self, version=VERSION, magic=MAGIC, client_id=None, flags=0):
        if client_id is not None:
            self.client_id = client_id
        rep = self.request("HELLO", magic=magic, version=version,
                           client_id=self.client_id, flags=flags)
        self.server_id = rep["server_id"]
        self.epoch = rep["server_epoch"]
        self.version = rep["version"]
        self.hello_flags = rep["flags"]
        return rep["root"]

    def auth(self, nonce=None):
        """AUTH once more on an authenticated connection (the server
        answers -EISCONN: see authenticate for the handshake)."""
        return self.request("AUTH", magic=MAGIC, version=VERSION,
                            client_nonce=nonce or os.urandom(32),
                            key_id=bytes(8))

    def ping(self):
        self.request("PING")

    def getattr(self, f):
        return self.request("GETATTR", fid=f)["attr"]

    def lookup(self, d, name):
        return self.request("LOOKUP", dir=d, name=name)["child"]

    def setattr(self, f, valid, mode=0, uid=0, gid=0, size=0,
                atime=(0, 0), mtime=(0, 0), ctime=(0, 0)):
        return self.request("SETATTR", fid=f, valid=valid, mode=mode,
                            uid=uid, gid=gid, size=size, atime=atime,
                            mtime=mtime, ctime=ctime)["attr"]

    def create(self, d, name, mode, uid=0, gid=0, rdev=0, flags=0,
               fid=(0, 0, 0), time=(0, 0), data=b""):
        rep = self.request("CREATE", dir=d, name=name, mode=mode, uid=uid,
                           gid=gid, rdev=rdev, flags=flags, new_fid=fid,
                           new_time=time, data=data)
        return {"created": rep["created"], "child": rep["child"],
                "dir": rep["dir"]}

    def mkdir(self, d, name, mode=0o755):
        return self.create(d, name, 0o040000 | mode, flags=CR_EXCL)

    def symlink(self, d, name, target, uid=0, gid=0):
        rep = self.request("SYMLINK", dir=d, name=name, target=target,
                           uid=uid, gid=gid)
        return {"child": rep["child"], "dir": rep["dir"]}

    def readlink(self, f):
        return self.request("READLINK", fid=f)["target"].decode()

    def link(self, f, d, name):
        rep = self.request("LINK", target=f, dir=d, name=name)
        return {"target": rep["target"], "dir": rep["dir"]}

    def remove(self, d, name, flags=0, victim=(0, 0, 0)):
        return self.request("REMOVE", dir=d, name=name, flags=flags,
                            victim=victim)["dir"]

    def removes(self, d, ents):
        """REMOVES of ents [(name, flags, victim)] in d: (dir attr,
        [status per entry]), status 0 or a negative errno."""
        rep = self.request("REMOVES", dir=d,
                           items=[(n, fl, v) for n, fl, v in ents])
        return rep["dir"], [e["status"] for e in rep["items"]]

    def removesat(self, d, ents):
        """REMOVESAT of ents [(name, flags, victim, (sec, nsec))] in d:
        as removes."""
        rep = self.request("REMOVESAT", dir=d,
                           items=[(n, fl, v, t) for n, fl, v, t in ents])
        return rep["dir"], [e["status"] for e in rep["items"]]

    def creates(self, d, ents):
        """CREATES of ents [(name, mode, flags, fid, time, data)] in d
        (uid and gid 0): (dir attr, [(status, created, child attr)])."""
        rep = self.request("CREATES", dir=d,
                           items=[(n, mode, 0, 0, fl, fid, t, data)
                                  for n, mode, fl, fid, t, data in ents])
        return rep["dir"], [(e["status"], e["created"], e["child"])
                            for e in rep["items"]]

    def createattr(self, d, ents):
        """CREATEATTR of ents [(name, mode, flags, fid, time, data, valid,
        steps, attrs)] in d (uid and gid 0; attrs: a dict of the attribute
        changes' mode, uid, gid, atime, mtime, ctime, default 0): (dir
        attr, [(status, created, child attr)])."""
        items = []
        for n, mode, fl, fid, t, data, valid, steps, at in ents:
            items.append((n, mode, 0, 0, fl, fid, t, valid,
                          at.get("mode", 0), at.get("uid", 0),
                          at.get("gid", 0), steps, at.get("atime", (0, 0)),
                          at.get("mtime", (0, 0)), at.get("ctime", (0, 0)),
                          data))
        rep = self.request("CREATEATTR", dir=d, items=items)
        return rep["dir"], [(e["status"], e["created"], e["child"])
                            for e in rep["items"]]

    def rename(self, sd, sname, dd, dname, flags=0):
        rep = self.request("RENAME", src_dir=sd, src_name=sname, dst_dir=dd,
                           dst_name=dname, flags=flags)
        return {"src": rep["src_dir"], "dst": rep["dst_dir"]}

    def readdir(self, d, cookie=0, max_entries=1000):
        rep = self.request("READDIR", dir=d, cookie=cookie,
                           max_entries=max_entries)
        ents = [(e["next_cookie"], e["name"].decode(), e["attr"])
                for e in rep["items"]]
        return ents, rep["eof"]

    def listdir(self, d, chunk=1000):
        """Every entry name, following cookies."""
        names, cookie = [], 0
        while True:
            ents, eof = self.readdir(d, cookie, chunk)
            names += [e[1] for e in ents]
            if eof or not ents:
                return names
            cookie = ents[-1][0]

    def bulkstat(self, d, cookie=0, max_bytes=BULKSTAT_MAX, flags=0):
        """One BULKSTAT page: (dir attr, new entry cookie,
        [(cookie, name, attr)], eof)."""
        rep = self.request("BULKSTAT", dir=d, cookie=cookie,
                           max_bytes=max_bytes, flags=flags)
        ents = [(e["next_cookie"], e["name"].decode(), e["attr"])
                for e in rep["items"]]
        return rep["dir"], rep["new_entry_cookie"], ents, rep["eof"]

    def read(self, f, off, length):
        rep = self.request("READ", fid=f, offset=off, length=length)
        return {"attr": rep["attr"], "data": rep["data"]}

    def write(self, f, off, data, flags=0):
        return self.request("WRITE", fid=f, offset=off, flags=flags,
                            data=data)["attr"]

    def writeattr(self, f, off, data, valid, steps=1, flags=0, mode=0,
                  uid=0, gid=0, atime=(0, 0), mtime=(0, 0), ctime=(0, 0)):
        """WRITEATTR: a WRITE and `steps` merged attribute changes."""
        return self.request("WRITEATTR", fid=f, offset=off, flags=flags,
                            valid=valid, mode=mode, uid=uid, gid=gid,
                            steps=steps, atime=atime, mtime=mtime,
                            ctime=ctime, data=data)["attr"]

    def fids(self, count):
        """FIDS: count object ids for CR_FID creates, as a list."""
        rep = self.request("FIDS", count=count)
        vol, vnode, uniq = rep["first"]
        return [(vol, vnode + i, uniq) for i in range(rep["count"])]

    def wtoken(self, f, dv=0, flags=0):
        """Take (or with WT_RETURN give back) f's write token; the
        file's attr."""
        return self.request("WTOKEN", fid=f, dv=dv, flags=flags)["attr"]

    def wreturn(self, fids):
        """Give back the write tokens of fids (a list)."""
        self.request("WRETURN", items=[(f,) for f in fids])

    def lock(self, f, owner, start=0, end=LK_EOF, type=LK_WR, flags=0,
             pid=0):
        """LOCK (docs/PROTOCOL.md "Locks"); the file's attr."""
        return self.request("LOCK", fid=f, owner=owner, start=start,
                            end=end, pid=pid, type=type,
                            flags=flags)["attr"]

    def getlk(self, f, owner, start=0, end=LK_EOF, type=LK_WR, flags=0,
              pid=0):
        """GETLK: {type, start, end, pid} of a conflicting lock."""
        return self.request("GETLK", fid=f, owner=owner, start=start,
                            end=end, pid=pid, type=type, flags=flags)

    def lockd(self, f, owner, start=0, end=LK_EOF, type=LK_WR, flags=0,
              pid=0):
        """LOCKD: LOCK that may delegate the file's locks; (attr,
        delegated)."""
        rep = self.request("LOCKD", fid=f, owner=owner, start=start,
                           end=end, pid=pid, type=type, flags=flags)
        return rep["attr"], bool(rep["flags"] & LKD_DELEG)

    def lkreturn(self, f, locks, flags=0):
        """LKRETURN: every lock held of f, [(owner, start, end, pid,
        type, lock flags)], ending its delegation."""
        self.request("LKRETURN", fid=f, flags=flags,
                     items=[tuple(l) for l in locks])

    def send_op(self, op, **fields):
        """Send op without waiting; its id (finish with reply_of)."""
        m = _message(op)
        return self.send(m.op, m.req.encode(fields))

    def reply_of(self, op, id, timeout=None):
        """Decoded reply of request id sent with send_op, or a
        CairnError; None if it does not come within timeout seconds."""
        m = _message(op)
        end = None if timeout is None else time.time() + timeout
        while id not in self.replies:
            if end is not None:
                left = end - time.time()
                if left <= 0:
                    return None
                if not self.buf:
                    r, _, _ = select.select([self.sock], [], [], left)
                    if not r:
                        return None
            self._dispatch(self.recv_frame())
        _, status, payload = self.replies.pop(id)
        if status:
            raise CairnError(m.op, status)
        return decode(m.name, Reader(payload).b, reply=True)

    def expect_recall(self, f, timeout=2.0):
        """True once a CB_RECALL of f arrives."""
        end = time.time() + timeout
        while tuple(f) not in self.recalls:
            left = end - time.time()
            if left <= 0:
                return False
            self.poll_breaks(min(left, 0.05))
        self.recalls.remove(tuple(f))
        return True

    def fsync(self, f, flags=0):
        self.request("FSYNC", fid=f, flags=flags)

    def statfs(self):
        return self.request("STATFS")["statfs"]

    def setxattr(self, f, name, value, flags=0):
        self.request("SETXATTR", fid=f, name=name, flags=flags, value=value)

    def getxattr(self, f, name, size=65536):
        rep = self.request("GETXATTR", fid=f, name=name, size=size)
        return rep["value_size"], rep["value"]

    def listxattr(self, f, size=65536):
        rep = self.request("LISTXATTR", fid=f, size=size)
        return rep["list_size"], [x.decode() for x in rep["names"].split(b"\0")
                                  if x]

    def removexattr(self, f, name):
        self.request("REMOVEXATTR", fid=f, name=name)

    def fallocate(self, f, mode, off, length):
        return self.request("FALLOCATE", fid=f, mode=mode, offset=off,
                            length=length)["attr"]

    def orphan_drop(self, fids):
        """Free those of fids (vol, vnode, uniq) that are orphans this
        client id holds; the others are ignored."""
        self.request("ORPHAN_DROP", items=[(f,) for f in fids])

    def atime(self, fids):
        """Move the atime of fids (vol, vnode, uniq) where relatime owes
        one, as a READ would."""
        self.request("ATIME", items=[(f,) for f in fids])

    def status(self):
        """STATUS text parsed into {key: int-or-str}."""
        text = self.request("STATUS")["text"].decode()
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
                             "" if cond or not detail else " (%s)" % (detail,)))
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

    # A kernel with the FUSE writeback cache keeps the times itself.
    time.sleep(0.01)
    kw = a.write(f["fid"], 0, b"abcd", WR_KEEPTIME)
    check("WR_KEEPTIME leaves mtime and ctime",
          kw["mtime"] == st["mtime"] and kw["ctime"] == st["ctime"] and
          kw["size"] == 4 and kw["dv"] == st["dv"] + 1, (st, kw))
    kt = a.setattr(f["fid"], SA_SIZE | SA_KEEPTIME, size=2)
    check("SA_KEEPTIME truncate leaves mtime and ctime",
          kt["size"] == 2 and kt["mtime"] == st["mtime"] and
          kt["ctime"] == st["ctime"], kt)
    kg = a.setattr(f["fid"], SA_MTIME | SA_CTIME | SA_KEEPTIME,
                   mtime=(1000, 5), ctime=(2000, 6))
    check("SA_KEEPTIME with the times sets them",
          kg["mtime"] == (1000, 5) and kg["ctime"] == (2000, 6), kg)
    kd = a.setattr(d["fid"], SA_MODE | SA_KEEPTIME, mode=0o755)
    check("SA_KEEPTIME is ignored for a directory",
          kd["ctime"] != a.getattr(f["fid"])["ctime"] and
          kd["ctime"] >= st["ctime"], kd)
    expect_err("WRITE unknown flag EINVAL", _errno.EINVAL, a.write,
               f["fid"], 0, b"x", 8)
    # fsync in one round trip: the last change durable before its reply.
    check("HELLO says SETATTR takes SA_SYNC",
          a.hello_flags & HELLO_REP_SA_SYNC, a.hello_flags)
    b.getattr(f["fid"])
    b.drain_breaks()
    ks = a.setattr(f["fid"], SA_MTIME | SA_CTIME | SA_KEEPTIME | SA_SYNC,
                   mtime=(3000, 7), ctime=(3000, 8))
    check("SA_SYNC: the change is made, one version further",
          ks["mtime"] == (3000, 7) and ks["dv"] == kg["dv"] + 1 and
          a.getattr(f["fid"])["mtime"] == (3000, 7), (kg, ks))
    check("SA_SYNC: the other client's promise is broken",
          b.expect_break((f["fid"], "")), b.breaks)
    kds = a.setattr(d["fid"], SA_MODE | SA_SYNC, mode=0o750)
    check("SA_SYNC of a directory", kds["mode"] & 0o7777 == 0o750, kds)
    a.setattr(d["fid"], SA_MODE, mode=0o755)
    # A client's consecutive attribute changes merged into one SETATTR:
    # the data version moves by as many as it stands for (in `size`).
    check("HELLO says SETATTR takes SA_STEPS",
          a.hello_flags & HELLO_REP_SA_STEPS, a.hello_flags)
    b.getattr(f["fid"])
    b.drain_breaks()
    before = a.getattr(f["fid"])
    km = a.setattr(f["fid"], SA_MODE | SA_MTIME | SA_STEPS, mode=0o604,
                   mtime=(4000, 9), size=3)
    check("SA_STEPS: the changes are made, that many versions further",
          km["mode"] & 0o7777 == 0o604 and km["mtime"] == (4000, 9) and
          km["dv"] == before["dv"] + 3 and km["size"] == before["size"] and
          a.getattr(f["fid"])["dv"] == km["dv"], (before, km))
    check("SA_STEPS: the other client's promise is broken",
          b.expect_break((f["fid"], "")), b.breaks)
    for what, valid, steps in (("no count", SA_MODE | SA_STEPS, 0),
                               ("a count above 1024", SA_MODE | SA_STEPS, 1025),
                               ("with SA_SIZE", SA_SIZE | SA_STEPS, 2)):
        expect_err("SA_STEPS %s EINVAL" % what, _errno.EINVAL, a.setattr,
                   f["fid"], valid, mode=0o644, size=steps)
    check("a refused SA_STEPS changes nothing",
          a.getattr(f["fid"])["dv"] == km["dv"], a.getattr(f["fid"]))
    expect_err("SETATTR unknown valid bit EINVAL", _errno.EINVAL,
               a.setattr, f["fid"], 8192)
    # A write and the attribute changes after it in one commit: the data
    # version moves by 1 + steps, the bytes and the attributes are there.
    b.getattr(f["fid"])
    b.drain_breaks()
    before = a.getattr(f["fid"])
    kw = a.writeattr(f["fid"], before["size"], b"WA",
                     SA_MODE | SA_MTIME | SA_CTIME | SA_KEEPTIME, steps=2,
                     flags=WR_KEEPTIME, mode=0o614, mtime=(5000, 11),
                     ctime=(5001, 12))
    check("WRITEATTR: the write and its attribute changes, 1 + steps "
          "versions further",
          kw["dv"] == before["dv"] + 3 and
          kw["size"] == before["size"] + 2 and
          kw["mode"] & 0o7777 == 0o614 and kw["mtime"] == (5000, 11) and
          kw["ctime"] == (5001, 12) and
          a.getattr(f["fid"])["dv"] == kw["dv"] and
          a.read(f["fid"], before["size"], 2)["data"] == b"WA",
          (before, kw))
    check("WRITEATTR: the other client's promise is broken",
          b.expect_break((f["fid"], "")), b.breaks)
    for what, valid, steps, data, flags in (
            ("with SA_SIZE", SA_SIZE | SA_MTIME, 1, b"x", 0),
            ("with SA_STEPS", SA_MTIME | SA_STEPS, 1, b"x", 0),
            ("with SA_TOKEN", SA_MTIME | SA_TOKEN, 1, b"x", 0),
            ("with SA_SYNC", SA_MTIME | SA_SYNC, 1, b"x", 0),
            ("with no attribute", SA_KEEPTIME, 1, b"x", 0),
            ("with no count", SA_MTIME, 0, b"x", 0),
            ("with a count above 1024", SA_MTIME, 1025, b"x", 0),
            ("with no bytes", SA_MTIME, 1, b"", 0),
            ("with an unknown write flag", SA_MTIME, 1, b"x", 8)):
        expect_err("WRITEATTR %s EINVAL" % what, _errno.EINVAL, a.writeattr,
                   f["fid"], 0, data, valid, steps=steps, flags=flags,
                   mtime=(6000, 0))
    check("a refused WRITEATTR changes nothing",
          a.getattr(f["fid"])["dv"] == kw["dv"], a.getattr(f["fid"]))
    # Its permissions are SETATTR's too: another user may write the file
    # (mode 0666) but not chmod it.
    a.setattr(f["fid"], SA_MODE, mode=0o666)
    dv0 = a.getattr(f["fid"])["dv"]
    a.cred = (4242, 4242, [])
    try:
        expect_err("WRITEATTR: another user's chmod EPERM", _errno.EPERM,
                   a.writeattr, f["fid"], 0, b"p", SA_MODE, mode=0o600)
        check("WRITEATTR: refused, its write is not made either",
              a.getattr(f["fid"])["dv"] == dv0, a.getattr(f["fid"]))
        kx = a.writeattr(f["fid"], 0, b"q", SA_MTIME | SA_CTIME |
                         SA_KEEPTIME, flags=WR_KEEPTIME, mtime=(7000, 1),
                         ctime=(7000, 2))
        check("WRITEATTR: a writer's times from another user who may write",
              kx["dv"] == dv0 + 2 and kx["mtime"] == (7000, 1), kx)
    finally:
        a.cred = None
    # Breaks say whether only attributes changed.
    for what, change, attrs_only in (
            ("chmod", lambda: a.setattr(f["fid"], SA_MODE, mode=0o640), True),
            ("write", lambda: a.write(f["fid"], 0, b"z"), False),
            ("truncate", lambda: a.setattr(f["fid"], SA_SIZE, size=1), False),
            ("utimens", lambda: a.setattr(f["fid"], SA_MTIME, mtime=(5, 0)), False),
            ("setxattr", lambda: a.setxattr(f["fid"], "user.k", b"v"), True)):
        b.getattr(f["fid"])
        b.drain_breaks()
        b.rec_flags = []
        change()
        got = b.expect_break((f["fid"], ""))
        flags = [fl for fid, fl in b.rec_flags if fid == f["fid"]]
        check("%s breaks %s CB_ATTRS_ONLY" % (what, "with" if attrs_only else "without"),
              got and flags and bool(flags[-1] & CB_ATTRS_ONLY) == attrs_only,
              (got, flags))
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

    # BULKSTAT: the listing with every entry's status, the directory's
    # attributes from the same transaction, paged by bytes; it promises
    # the directory and each entry.
    da, newc, ents, eof = a.bulkstat(d["fid"])
    check("bulkstat", eof and sorted(e[1] for e in ents) ==
          ["f", "g", "s", "sub"] and da["fid"] == d["fid"] and
          all(e[2]["fid"] == a.lookup(d["fid"], e[1])["fid"] for e in ents),
          ents)
    check("bulkstat new entry cookie above every entry's",
          all(newc > e[0] for e in ents), (newc, ents))
    page, cookie, seen = 0, 0, []
    while True:
        _, _, p1, eof1 = a.bulkstat(d["fid"], cookie, 120)
        seen += [e[1] for e in p1]
        page += 1
        if eof1 or not p1 or page > 10:
            break
        cookie = p1[-1][0]
    check("bulkstat paged by bytes", page >= 4 and sorted(seen) ==
          ["f", "g", "s", "sub"], (page, seen))
    da0, _, e0, _ = a.bulkstat(d["fid"], 0, 0)
    check("bulkstat max bytes 0: attributes only", e0 == [] and
          da0["dv"] == da["dv"])
    expect_err("bulkstat bad flags", _errno.EINVAL, a.bulkstat, d["fid"],
               0, 1000, 0x80)
    expect_err("bulkstat of a file", _errno.ENOTDIR, a.bulkstat, f["fid"])
    b.bulkstat(d["fid"])
    b.drain_breaks()
    a.write(f["fid"], 0, b"x")
    check("bulkstat promises each entry", b.expect_break((f["fid"], "")),
          b.breaks)
    b.bulkstat(d["fid"])
    b.drain_breaks()
    a.symlink(d["fid"], "s2", "f")
    check("bulkstat promises the directory",
          b.expect_break((d["fid"], "s2")), b.breaks)
    da2, newc2, _, _ = a.bulkstat(d["fid"])
    check("a change adds one to the directory's dv and uses the new "
          "entry cookie", da2["dv"] == da["dv"] + 1 and newc2 == newc + 1,
          (da["dv"], da2["dv"], newc, newc2))
    a.remove(d["fid"], "s2")

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

    # The remover gets a break for the object it removed (its links and
    # ctime changed) unless it says RM_SELF; other holders always do.
    def own_break_after(flags, name, obj):
        a.getattr(obj)
        b.getattr(obj)
        a.drain_breaks()
        b.drain_breaks()
        a.remove(d["fid"], name, flags)
        others = b.expect_break((obj, ""))
        a.poll_breaks(0.3)
        own = any((obj, "") in recs for recs in a.breaks)
        return others, own
    o = a.create(d["fid"], "o1", 0o100644)["child"]["fid"]
    a.link(o, d["fid"], "o2")
    a.link(o, d["fid"], "o3")
    check("REMOVE breaks the remover's promise on the object",
          own_break_after(0, "o1", o) == (True, True))
    check("REMOVE with RM_SELF: no break for the remover, others get one",
          own_break_after(RM_SELF, "o2", o) == (True, False))
    check("RM_SELF of the last link: no break for the remover",
          own_break_after(RM_SELF, "o3", o) == (True, False))
    a.mkdir(d["fid"], "rs")
    expect_err("RM_SELF with RM_DIR EINVAL", _errno.EINVAL, a.remove,
               d["fid"], "rs", RM_DIR | RM_SELF)
    a.remove(d["fid"], "rs", RM_DIR)

    # REMOVES: each entry on its own, in order, one status each; the
    # other client's breaks name every entry removed.
    x1 = a.create(d["fid"], "x1", 0o100644)["child"]
    x2 = a.create(d["fid"], "x2", 0o100644)["child"]
    xd = a.mkdir(d["fid"], "xd")["child"]
    b.listdir(d["fid"])
    b.getattr(x1["fid"])
    b.drain_breaks()
    dir_before = a.getattr(d["fid"])
    da, st = a.removes(d["fid"], [("x1", 0, x1["fid"]),
                                  ("x2", 0, x1["fid"]),   # not x2's FID
                                  ("xd", RM_DIR, xd["fid"]),
                                  ("nope", 0, x2["fid"])])
    check("REMOVES: a status per entry, each on its own",
          st == [0, -_errno.ENOENT, 0, -_errno.ENOENT], st)
    check("REMOVES: the directory after all of them",
          da["dv"] == dir_before["dv"] + 2 and
          da["nlink"] == dir_before["nlink"] - 1, (dir_before, da))
    check("REMOVES: names left", sorted(a.listdir(d["fid"])) ==
          sorted(n for n in ["h", "s", "x2"]), a.listdir(d["fid"]))
    brk = b.wait_break()
    got = set(r for recs in b.breaks for r in recs) if b.breaks else set()
    if brk:
        got |= set(brk)
    check("REMOVES: the other client's break names each entry removed",
          (d["fid"], "x1") in got and (d["fid"], "xd") in got, got)
    expect_err("REMOVES with RM_FID EINVAL", _errno.EINVAL, a.removes,
               d["fid"], [("x2", RM_FID, x2["fid"])])
    expect_err("REMOVES of none EINVAL", _errno.EINVAL, a.removes,
               d["fid"], [])
    expect_err("REMOVES of 17 EINVAL", _errno.EINVAL, a.removes,
               d["fid"], [("x2", 0, x2["fid"])] * 17)
    _, st = a.removes(d["fid"], [("x2", 0, x2["fid"])])
    check("REMOVES of one", st == [0], st)

    # REMOVESAT: the entries' times are the directory's mtime and ctime
    # (the last one's) and the ctime of an object that keeps a link.
    y1 = a.create(d["fid"], "y1", 0o100644)["child"]
    y2 = a.create(d["fid"], "y2", 0o100644)["child"]
    a.link(y1["fid"], d["fid"], "y1b")
    da, st = a.removesat(d["fid"], [("y1", 0, y1["fid"], (1000, 7)),
                                    ("y2", 0, y2["fid"], (2000, 9))])
    check("REMOVESAT: a status per entry", st == [0, 0], st)
    check("REMOVESAT: the directory's times are the last entry's",
          da["mtime"] == (2000, 9) and da["ctime"] == (2000, 9), da)
    check("REMOVESAT: an object that keeps a link takes its entry's time",
          a.getattr(y1["fid"])["ctime"] == (1000, 7), a.getattr(y1["fid"]))
    da, st = a.removesat(d["fid"], [("y1b", 0, y1["fid"], (0, 0))])
    check("REMOVESAT: a zero time is the server's clock",
          st == [0] and da["mtime"][0] > 2000, (st, da))

    # CREATES: each on its own, in order; first bytes inline or in a data
    # file; a resend finds the files made (idempotent by FID).
    ids = a.fids(4)
    b.listdir(d["fid"])
    b.drain_breaks()
    dir_before = a.getattr(d["fid"])
    big = bytes(range(256)) * 64          # 16 KiB: the most it may carry
    ents = [("c1", 0o100644, CR_EXCL | CR_FID | CR_TOKEN, ids[0], (5, 6),
             b"one"),
            ("h", 0o100644, CR_EXCL | CR_FID, ids[1], (5, 6), b""),
            ("c2", 0o644, CR_EXCL | CR_FID, ids[2], (5, 6), big),
            ("c3", 0o100600, CR_EXCL | CR_FID | CR_TOKEN, ids[3], (5, 6), b"")]
    da, res = a.creates(d["fid"], ents)
    check("CREATES: a status per entry, each on its own",
          [r[0] for r in res] == [0, -_errno.EEXIST, 0, 0], res)
    check("CREATES: the files as CREATE makes them",
          res[0][2]["fid"] == ids[0] and res[0][2]["size"] == 3 and
          res[0][2]["mtime"] == (5, 6) and res[2][2]["size"] == len(big) and
          res[3][2]["mode"] == 0o100600 and res[1][2]["fid"] == (0, 0, 0),
          res)
    check("CREATES: the token where asked",
          [r[1] for r in res] == [CREATED | CREATED_TOKEN, 0, CREATED,
                                  CREATED | CREATED_TOKEN], res)
    check("CREATES: the directory after all of them",
          da["dv"] == dir_before["dv"] + 3, (dir_before, da))
    check("CREATES: the bytes read back",
          a.read(ids[0], 0, 10)["data"] == b"one" and
          a.read(ids[2], 0, len(big) + 1)["data"] == big)
    got = b.all_breaks()
    check("CREATES: the other client's break names each file made",
          {(d["fid"], n) for n in ("c1", "c2", "c3")} <= got, got)
    _, res = a.creates(d["fid"], ents[:1])
    check("CREATES resent: the file made before, no token",
          res[0][0] == 0 and res[0][1] == CREATED and
          res[0][2]["fid"] == ids[0] and res[0][2]["size"] == 3, res)
    expect_err("CREATES without CR_FID EINVAL", _errno.EINVAL, a.creates,
               d["fid"], [("c9", 0o100644, CR_EXCL, (0, 0, 0), (0, 0), b"")])
    # CR_SYNC: the creation durable before its reply (a client's fsync
    # of a file it made, in one round trip); any further bit EINVAL.
    check("HELLO says CREATE takes CR_SYNC",
          a.hello_flags & HELLO_REP_CR_SYNC, a.hello_flags)
    sids = a.fids(3)
    cs = a.create(d["fid"], "cs1", 0o100644, flags=CR_EXCL | CR_FID | CR_SYNC,
                  fid=sids[0], time=(5, 6), data=b"synced")
    check("CREATE with CR_SYNC makes the file with its first bytes",
          cs["created"] & CREATED and cs["child"]["fid"] == sids[0] and
          cs["child"]["size"] == 6 and
          a.read(sids[0], 0, 100)["data"] == b"synced", cs)
    cs = a.create(d["fid"], "cs1", 0o100644, flags=CR_EXCL | CR_FID | CR_SYNC,
                  fid=sids[0], time=(5, 6), data=b"synced")
    check("CREATE with CR_SYNC resent: the file made before",
          cs["created"] == CREATED and cs["child"]["fid"] == sids[0], cs)
    _, res = a.creates(d["fid"], [("cs2", 0o100644, CR_EXCL | CR_FID | CR_SYNC,
                                   sids[1], (5, 6), b"two")])
    check("CREATES entry with CR_SYNC", res[0][0] == 0 and
          res[0][2]["fid"] == sids[1] and res[0][2]["size"] == 3, res)
    expect_err("CREATE with flag 16 EINVAL", _errno.EINVAL, a.create,
               d["fid"], "cs3", 0o100644, flags=CR_EXCL | CR_FID | 16,
               fid=sids[2], time=(5, 6))
    expect_err("CREATES entry with flag 16 EINVAL", _errno.EINVAL, a.creates,
               d["fid"], [("cs3", 0o100644, CR_EXCL | CR_FID | 16, sids[2],
                           (5, 6), b"")])
    expect_err("CREATES of a directory EINVAL", _errno.EINVAL, a.creates,
               d["fid"], [("c9", 0o040755, CR_EXCL | CR_FID, ids[1], (0, 0),
                           b"")])
    # Past 16 KiB: up to 256 KiB an entry, 1 MiB in all
    # (HELLO_REP_CREATES_BIG).
    check("HELLO says CREATES takes 256 KiB an entry",
          a.hello_flags & HELLO_REP_CREATES_BIG, a.hello_flags)
    huge = bytes(range(256)) * 1024       # 256 KiB
    bids = a.fids(5)
    _, res = a.creates(d["fid"], [
        ("b1", 0o100644, CR_EXCL | CR_FID, bids[0], (5, 6), big + b"x"),
        ("b2", 0o100644, CR_EXCL | CR_FID, bids[1], (5, 6), huge),
        ("b3", 0o100644, CR_EXCL | CR_FID, bids[2], (5, 6), b"small")])
    check("CREATES with entries past 16 KiB: each made whole",
          [r[0] for r in res] == [0, 0, 0] and
          a.read(bids[0], 0, 1 << 20)["data"] == big + b"x" and
          a.read(bids[1], 0, 1 << 20)["data"] == huge and
          a.read(bids[2], 0, 100)["data"] == b"small", res)
    expect_err("CREATES with 256 KiB + 1 EINVAL", _errno.EINVAL, a.creates,
               d["fid"], [("c9", 0o100644, CR_EXCL | CR_FID, ids[1], (0, 0),
                           huge + b"x")])
    expect_err("CREATES with over 1 MiB in all EINVAL", _errno.EINVAL,
               a.creates, d["fid"],
               [("b%d" % (9 + i), 0o100644, CR_EXCL | CR_FID, bids[3 + i % 2],
                 (0, 0), huge if i < 4 else b"z") for i in range(5)])
    expect_err("a refused CREATES makes nothing", _errno.ENOENT,
               a.lookup, d["fid"], "b9")

    # CREATEATTR: CREATES with the attribute changes made after each
    # creation, applied in its commit (CREATED_ATTRS, steps further).
    ids = a.fids(6)
    cd = a.mkdir(d["fid"], "ca")["child"]  # A holds c1's token: B's
    b.listdir(cd["fid"])                   # listing of d would wait
    b.drain_breaks()
    TIMES = SA_MODE | SA_ATIME | SA_MTIME | SA_KEEPTIME
    mid = bytes(range(256)) * 80          # 20 KiB: more than CREATES takes
    ents = [("ca1", 0o100600, CR_EXCL | CR_FID | CR_TOKEN, ids[0], (5, 6),
             b"abc", TIMES, 2,
             {"mode": 0o644, "atime": (100, 1), "mtime": (200, 2)}),
            ("ca2", 0o100644, CR_EXCL | CR_FID, ids[1], (5, 6), b"", 0, 0,
             {}),
            ("ca3", 0o100644, CR_EXCL | CR_FID, ids[2], (5, 6), b"",
             SA_UID | SA_GID, 1, {"uid": 7, "gid": 8})]
    _, res = a.createattr(cd["fid"], ents)
    check("CREATEATTR: a status per entry",
          [r[0] for r in res] == [0, 0, 0], res)
    check("CREATEATTR: CREATED_ATTRS where it had attribute changes",
          [r[1] for r in res] == [CREATED | CREATED_TOKEN | CREATED_ATTRS,
                                  CREATED, CREATED | CREATED_ATTRS], res)
    c1, c2, c3 = (r[2] for r in res)
    check("CREATEATTR: the file as its creation, its bytes and its "
          "attribute changes leave it, steps versions further",
          c1["fid"] == ids[0] and c1["size"] == 3 and
          c1["mode"] == 0o100644 and c1["atime"] == (100, 1) and
          c1["mtime"] == (200, 2) and c1["ctime"] == (5, 6) and
          c1["dv"] == 4 and a.getattr(ids[0]) == c1 and
          a.read(ids[0], 0, 10)["data"] == b"abc", c1)
    check("CREATEATTR: an entry without attribute changes as CREATES's",
          c2["dv"] == 1 and c2["mode"] == 0o100644 and c2["mtime"] == (5, 6),
          c2)
    check("CREATEATTR: root gives the file another owner",
          c3["uid"] == 7 and c3["gid"] == 8 and c3["dv"] == 2, c3)
    got = b.all_breaks()
    check("CREATEATTR: the other client's break names each file made",
          {(cd["fid"], n) for n in ("ca1", "ca2", "ca3")} <= got, got)
    _, res = a.createattr(cd["fid"], ents[:1])
    check("CREATEATTR resent: the file made before, no token, its "
          "attribute changes not made again",
          res[0][0] == 0 and res[0][1] == CREATED and
          res[0][2]["dv"] == 4, res)
    _, res = a.createattr(cd["fid"], [("ca4", 0o100644, CR_EXCL | CR_FID,
                                      ids[3], (5, 6), mid, SA_MTIME, 1,
                                      {"mtime": (300, 3)})])
    check("CREATEATTR of one: first bytes past CREATES' 16 KiB",
          res[0][0] == 0 and res[0][1] == CREATED | CREATED_ATTRS and
          res[0][2]["size"] == len(mid) and res[0][2]["dv"] == 3 and
          res[0][2]["mtime"] == (300, 3) and
          a.read(ids[3], 0, len(mid) + 1)["data"] == mid, res)
    one = ("ca9", 0o100644, CR_EXCL | CR_FID, ids[4], (0, 0), b"")
    for what, valid, steps, data, n in (
            ("with SA_SIZE", SA_SIZE | SA_MTIME, 1, b"", 1),
            ("with SA_TOKEN", SA_MTIME | SA_TOKEN, 1, b"", 1),
            ("with SA_STEPS", SA_MTIME | SA_STEPS, 1, b"", 1),
            ("with no count", SA_MTIME, 0, b"", 1),
            ("with a count and no change", 0, 1, b"", 1),
            ("with a count above 1024", SA_MTIME, 1025, b"", 1),
            ("of two with 256 KiB + 1", SA_MTIME, 1,
             bytes(256 * 1024 + 1), 2),
            ("of one with 1 MiB + 1", SA_MTIME, 1, b"y" * (1048576 + 1), 1)):
        e = one[:5] + (data, valid, steps, {"mtime": (1, 0)})
        expect_err("CREATEATTR %s EINVAL" % what, _errno.EINVAL,
                   a.createattr, cd["fid"], [e] * n)
    expect_err("a refused CREATEATTR makes nothing", _errno.ENOENT,
               a.lookup, cd["fid"], "ca9")
    # Another user: its file is its own; its chmod and times are made,
    # a chown to root is not (the file is made without them: the client
    # sends them as SETATTR, which says why).
    pub = a.mkdir(cd["fid"], "pub", 0o777)["child"]
    a.cred = (4242, 4242, [])
    try:
        _, res = a.createattr(pub["fid"], [
            ("u1", 0o100600, CR_EXCL | CR_FID, ids[4], (5, 6), b"",
             SA_MODE | SA_MTIME | SA_KEEPTIME, 2,
             {"mode": 0o640, "mtime": (400, 4)}),
            ("u2", 0o100600, CR_EXCL | CR_FID, ids[5], (5, 6), b"",
             SA_MODE | SA_UID, 2, {"mode": 0o640, "uid": 0})])
    finally:
        a.cred = None
    check("CREATEATTR by another user: its chmod and times made",
          res[0][0] == 0 and res[0][1] == CREATED | CREATED_ATTRS and
          res[0][2]["uid"] == 4242 and res[0][2]["mode"] == 0o100640 and
          res[0][2]["mtime"] == (400, 4), res)
    check("CREATEATTR by another user: a chown to root not made, the file "
          "made without it",
          res[1][0] == 0 and res[1][1] == CREATED and
          res[1][2]["uid"] == 4242 and res[1][2]["mode"] == 0o100600 and
          res[1][2]["dv"] == 1, res)
    for n in ("u1", "u2"):
        a.remove(pub["fid"], n)
    a.remove(cd["fid"], "pub", RM_DIR)
    for n in ("ca1", "ca2", "ca3", "ca4"):
        a.remove(cd["fid"], n)
    a.remove(d["fid"], "ca", RM_DIR)
    for n in ("c1", "c2", "c3", "cs1", "cs2", "b1", "b2", "b3"):
        a.remove(d["fid"], n)
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
          stt.get("connections", 0) >= 2 and "cb_breaks" in stt and
          "orphans" in stt, stt)

    # ORPHAN_DROP: 1..1024 FIDs; what is not an orphan of ours is ignored.
    expect_err("orphan_drop of none", _errno.EINVAL, a.orphan_drop, [])
    expect_err("orphan_drop of 1025", _errno.EINVAL, a.orphan_drop,
               [f["fid"]] * (ORPHAN_DROP_MAX + 1))
    a.orphan_drop([f["fid"], root["fid"], (d["fid"][0], 1 << 40, 7)] *
                  (ORPHAN_DROP_MAX // 3))
    check("orphan_drop ignores linked and unknown FIDs",
          a.getattr(f["fid"])["nlink"] == 1)
    # ATIME: relatime for reads the server did not see; 1..1024 FIDs,
    # directories and unknown FIDs skipped, no data version change.
    expect_err("atime of none", _errno.EINVAL, a.atime, [])
    expect_err("atime of 1025", _errno.EINVAL, a.atime,
               [f["fid"]] * (ORPHAN_DROP_MAX + 1))
    a.setattr(f["fid"], SA_ATIME, atime=(1000, 0))
    before = a.getattr(f["fid"])
    # Server times come from the coarse clock (one tick): an atime moved
    # in the tick of the ctime would still be due (atime <= ctime).
    time.sleep(0.02)
    a.atime([f["fid"], d["fid"], (d["fid"][0], 1 << 40, 7)])
    after = a.getattr(f["fid"])
    check("atime moves an owed atime", after["atime"][0] > 1000,
          (before["atime"], after["atime"]))
    check("atime keeps the data version", after["dv"] == before["dv"],
          (before["dv"], after["dv"]))
    a.atime([f["fid"]])
    check("atime twice moves nothing more (not due)",
          a.getattr(f["fid"])["atime"] == after["atime"])
    expect_err("remove with an undefined flag", _errno.EINVAL, a.remove,
               d["fid"], "h", 16)
    expect_err("rename with an undefined flag", _errno.EINVAL, a.rename,
               d["fid"], "h", d["fid"], "h2", 0x200)

    # Pipelining: many requests in flight, replies matched by id.
    ids = [a.send(OP_GETATTR, fid(f["fid"])) for _ in range(200)]
    ok = all(a.wait(i)[0] == 0 for i in reversed(ids))
    check("200 pipelined requests", ok)
    check("unknown opcode ENOSYS", a.wait(a.send(40))[0] == -_errno.ENOSYS)

    a.remove(d["fid"], "h")
    a.remove(d["fid"], "s")
    a.remove(root["fid"], tag, RM_DIR)

    # Malformed frames after AUTH (sealed by send_raw): each closes only
    # its own connection.
    hello_payload = u32(MAGIC) + u32(VERSION) + os.urandom(16) + u32(0)
    bad = {
        "oversized len": frame(OP_PING, length=MAX_PAYLOAD + 1),
        "unknown flag bits": frame(OP_HELLO, hello_payload, flags=0x80),
        "frame after AUTH not HELLO": frame(OP_PING, id=1),
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
