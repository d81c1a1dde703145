#!/usr/bin/env python3
# timeout: 120
"""test_proto.py - every protocol op straight against a live server, no
FUSE in between: runs proto_client.py's self test (one "ok"/"not ok" line
per check) against a fresh `cairn serve` and passes its lines through.
Afterwards the server must stop cleanly and `cairn fsck` must pass.

Then orphans (docs/PROTOCOL.md, REMOVE RM_KEEP, RENAME RN_KEEP,
ORPHAN_DROP) against a server of their own with `--orphan-grace 3`: a
file removed with RM_KEEP is read, written, truncated, chmod'ed,
fsync'ed, fallocated and given xattrs by FID with nlink 0, has no name
(LOOKUP, READDIR, BULKSTAT, LINK), its directory can be removed;
another client id cannot drop it, its holder can (then -ESTALE,
idempotent); a rename over a file keeps it the same way; a holder that
disconnects loses its orphans after the grace period (one log line), one
that reconnects with its id in time keeps them, also across a server
restart, while those of a holder that never comes back go; STATUS
counts them and `cairn fsck` accepts and counts them.

Before that, offline: proto_client.py's codec (built from the tables of
docs/PROTOCOL.md) must read every message the C encoders write. The
encodings come from `BUILD/tests/test_msg_doc --vectors` (tagged values,
see tests/unit/msg_cases.h); each must decode to exactly its bytes, encode
back to the same bytes, and each field must hold the value tagged with
its own name, so the Python keys and the C struct fields agree. Every
message needs a helper of its lower-case name on proto_client.Conn.
"""

import errno
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import proto_client as P  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def name_hash(s):
    h = 2166136261   # FNV-1a, as tests/unit/msg_cases.h
    for c in s.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


# (tag bits, mask) per struct format: msg_cases.h's tag_value/tag_mask.
def tag(fmt, name):
    h = name_hash(name)
    return {"B": (1, 0xFF),   # a u8 is a flag: 1
            "H": (0xB200 | (h & 0xFF), 0xFFFF),
            "I": (0x34000000 | (h & 0xFFF) << 12, 0xFFFFF000),
            "i": (0xC4000000 | (h & 0xFFF) << 12, 0xFFFFF000),
            "Q": (0xA8 << 56 | (h & 0xFFFF) << 40, 0xFFFFFFFFFF000000),
            "q": (0xC8 << 56 | (h & 0xFFFF) << 40, 0xFFFFFFFFFF000000)}[fmt]


def tag_errors(layout, value, where):
    """Fields of decoded `value` that do not hold their own name's tag."""
    errs = []
    if isinstance(value, tuple):
        value = dict(zip([f.key for f in layout.fields], value))
    for f in layout.fields:
        v, name = value[f.key], f.key.replace("_", " ")
        at = "%s.%s" % (where, f.key)
        if f.kind == "int" and f.value is None and f.key not in layout.counts:
            fmt = f.arg.format.lstrip("<")
            want, mask = tag(fmt, name)
            bits = v & ((1 << 8 * f.arg.size) - 1)
            if bits & mask != want:
                errs.append("%s = %#x, not tagged %r" % (at, v, name))
        elif f.kind in ("str", "blob") and v and \
                not v.startswith(name.encode() + b"#"):
            errs.append("%s = %r..., not tagged %r" % (at, v[:20], name))
        elif f.kind == "type":
            errs += tag_errors(P.TYPES[f.arg].layout, v, at)
        elif f.kind == "repeat":
            for i, it in enumerate(v):
                errs += tag_errors(f.sub, it, "%s[%d]" % (at, i))
    return errs


def check_codec(build):
    """proto_client's codec against the C encoders; returns failures."""
    failed = 0

    def report(name, errs):
        nonlocal failed
        print("%s - proto codec %s" % ("not ok" if errs else "ok", name))
        for e in errs[:10]:
            print("#   " + e)
        failed += bool(errs)

    exe = os.path.join(build, "tests", "test_msg_doc")
    try:
        out = subprocess.run([exe, "--vectors"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        report("vectors from test_msg_doc", ["%s --vectors: %s" % (exe, e)])
        return failed
    seen, errs = set(), []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) not in (2, 3) or parts[1] not in ("req", "rep"):
            errs.append("unreadable vector line %r" % line)
            continue
        name, rep = parts[0], parts[1] == "rep"
        payload = bytes.fromhex(parts[2] if len(parts) == 3 else "")
        seen.add(name)
        where = "%s %s" % (name, parts[1])
        if name not in P.MESSAGES:
            errs.append("%s: not in proto_client's table" % where)
            continue
        try:
            v = P.decode(name, payload, reply=rep)
            again = P.encode(name, reply=rep, **v)
        except (P.ProtocolError, KeyError, ValueError) as e:
            errs.append("%s (%d bytes): %s" % (where, len(payload), e))
            continue
        if again != payload:
            errs.append("%s: encodes back to other bytes" % where)
        m = P.MESSAGES[name]
        errs += tag_errors(m.rep if rep else m.req, v, where)
    missing = set(P.MESSAGES) - seen
    if missing:
        errs.append("no C encoding for %s" % sorted(missing))
    report("reads and writes every C encoding (%d messages)" % len(seen),
           errs)
    report("has a Conn helper per message",
           ["no Conn.%s" % n.lower() for n, m in P.MESSAGES.items()
            if not m.push and not callable(getattr(P.Conn, n.lower(), None))])
    return failed


GRACE = 3


def check_orphans(ctx):
    """The orphan checks; returns the number of failures."""
    failed = 0

    def check(name, cond, detail=""):
        nonlocal failed
        print("%s - proto orphan %s" % ("ok" if cond else "not ok", name))
        if not cond:
            failed += 1
            if detail != "":
                print("#   %s" % H.short(detail, 300))

    def err_of(fn, *a):
        try:
            fn(*a)
            return 0
        except P.CairnError as e:
            return e.errno

    def gone_within(conn, fid, secs):
        end = time.time() + secs
        while time.time() < end:
            if err_of(conn.getattr, fid) == errno.ESTALE:
                return True
            time.sleep(0.1)
        return False

    def new_conn(client_id=None):
        c = P.Conn("127.0.0.1", srv.port)
        c.root = c.hello(client_id=client_id)
        return c

    srv = ctx.server(data=ctx.path("orphan-data"),
                     extra=("--orphan-grace", str(GRACE)))
    a, b = new_conn(), new_conn()
    root = a.root
    d = a.mkdir(root["fid"], "od")["child"]
    f = a.create(d["fid"], "f", 0o100644, flags=P.CR_EXCL)["child"]
    a.write(f["fid"], 0, b"hello")
    a.setxattr(f["fid"], "user.k", b"v")
    dv = a.remove(d["fid"], "f", P.RM_KEEP)
    check("remove with RM_KEEP", dv["fid"] == d["fid"])
    st = a.getattr(f["fid"])
    check("getattr by FID: nlink 0", st["nlink"] == 0 and st["size"] == 5,
          st)
    check("read", a.read(f["fid"], 0, 100)["data"] == b"hello")
    w = a.write(f["fid"], 5, b" world")
    check("write", w["nlink"] == 0 and w["size"] == 11 and
          a.read(f["fid"], 0, 100)["data"] == b"hello world", w)
    st = a.setattr(f["fid"], P.SA_SIZE | P.SA_MODE, mode=0o600, size=8)
    check("setattr truncate and chmod", st["size"] == 8 and
          st["mode"] & 0o7777 == 0o600 and st["nlink"] == 0, st)
    a.fsync(f["fid"])
    st = a.fallocate(f["fid"], 0, 0, 4096)
    check("fsync and fallocate", st["size"] == 4096, st)
    a.setxattr(f["fid"], "user.j", b"w")
    check("xattrs", a.getxattr(f["fid"], "user.k") == (1, b"v") and
          sorted(a.listxattr(f["fid"])[1]) == ["user.j", "user.k"])
    check("no name: lookup", err_of(a.lookup, d["fid"], "f") ==
          errno.ENOENT)
    check("no name: readdir and bulkstat", a.listdir(d["fid"]) == [] and
          a.bulkstat(d["fid"])[2] == [])
    check("no name again: link is ENOENT",
          err_of(a.link, f["fid"], d["fid"], "back") == errno.ENOENT)
    check("status counts it", a.status().get("orphans") == 1)
    a.remove(root["fid"], "od", P.RM_DIR)
    check("its directory can be removed",
          err_of(a.lookup, root["fid"], "od") == errno.ENOENT)
    b.orphan_drop([f["fid"]])
    st = b.getattr(f["fid"])
    check("another client id cannot drop it (and reads it by FID)",
          st["nlink"] == 0 and a.read(f["fid"], 0, 5)["data"] == b"hello")
    a.orphan_drop([f["fid"]])
    check("its holder drops it: ESTALE",
          err_of(a.getattr, f["fid"]) == errno.ESTALE and
          err_of(b.read, f["fid"], 0, 5) == errno.ESTALE)
    a.orphan_drop([f["fid"]])
    check("drop is idempotent", a.status().get("orphans") == 0)

    # Another client holding a promise on it is made a holder too: its
    # break says so (CB_ORPHANED), and the file lives until both drop it.
    g = a.create(root["fid"], "og", 0o100644, flags=P.CR_EXCL)["child"]
    a.write(g["fid"], 0, b"shared")
    b.getattr(g["fid"])
    a.remove(root["fid"], "og", P.RM_KEEP)
    check("the other promise holder's break is flagged CB_ORPHANED",
          b.expect_break((g["fid"], "")) and g["fid"] in b.orphaned,
          b.orphaned)
    a.poll_breaks(0.2)
    check("the remover's own breaks are not flagged",
          g["fid"] not in a.orphaned, a.orphaned)
    a.orphan_drop([g["fid"]])
    check("the remover's drop leaves it to the other holder",
          b.read(g["fid"], 0, 6)["data"] == b"shared" and
          a.status().get("orphans") == 1)
    b.orphan_drop([g["fid"]])
    check("the last holder's drop frees it",
          err_of(a.getattr, g["fid"]) == errno.ESTALE and
          a.status().get("orphans") == 0)

    # RENAME with RN_KEEP over a file.
    x = a.create(root["fid"], "ox", 0o100644, flags=P.CR_EXCL)["child"]
    y = a.create(root["fid"], "oy", 0o100644, flags=P.CR_EXCL)["child"]
    a.write(y["fid"], 0, b"target")
    a.rename(root["fid"], "ox", root["fid"], "oy", P.RN_KEEP)
    st = a.getattr(y["fid"])
    check("rename over with RN_KEEP keeps the target",
          st["nlink"] == 0 and a.read(y["fid"], 0, 6)["data"] == b"target"
          and a.lookup(root["fid"], "oy")["fid"] == x["fid"], st)
    a.remove(root["fid"], "oy")
    check("without RM_KEEP the last link frees the file",
          err_of(a.getattr, x["fid"]) == errno.ESTALE)

    # Holders that go away. c disconnects for good; e reconnects in time.
    c, e = new_conn(), new_conn()
    oc = c.create(root["fid"], "oc", 0o100644, flags=P.CR_EXCL)["child"]
    c.write(oc["fid"], 0, b"c")
    c.remove(root["fid"], "oc", P.RM_KEEP)
    oe = e.create(root["fid"], "oe", 0o100644, flags=P.CR_EXCL)["child"]
    e.remove(root["fid"], "oe", P.RM_KEEP)
    cid, eid = c.client_id, e.client_id
    c.close()
    e.close()
    e = new_conn(eid)
    check("kept during the grace period", b.getattr(oc["fid"])["nlink"] == 0)
    check("a disconnected holder's orphan is freed after the grace period",
          gone_within(b, oc["fid"], GRACE + 3))
    log = "\n".join(srv.log_lines())
    check("one log line names the client",
          "orphans: released 1 of client %s" % cid[:8].hex() in log, log[-600:])
    check("a holder that reconnected in time keeps its orphan",
          b.getattr(oe["fid"])["nlink"] == 0)

    # Across a restart: e comes back and keeps its orphan, a does not
    # and loses y and one made now.
    oa = a.create(root["fid"], "oa", 0o100644, flags=P.CR_EXCL)["child"]
    a.remove(root["fid"], "oa", P.RM_KEEP)
    for conn in (a, b, e):
        conn.close()
    rc = srv.stop()
    check("server stops cleanly", rc == 0, rc)
    fs = H.run_cairn(["fsck", "--data", srv.data], timeout=60)
    check("fsck accepts and counts orphans", fs.returncode == 0 and
          "3 orphan(s)" in fs.stdout, fs.stdout + fs.stderr)
    srv.start()
    e = new_conn(eid)
    b = new_conn()
    check("the holder of an orphan found at start loses it after the "
          "grace period", gone_within(b, oa["fid"], GRACE + 3) and
          gone_within(b, y["fid"], 1))
    check("one that reconnected keeps it", b.getattr(oe["fid"])["nlink"] == 0)
    e.orphan_drop([oe["fid"]])
    check("and drops it", err_of(b.getattr, oe["fid"]) == errno.ESTALE and
          b.status().get("orphans") == 0)
    e.close()
    b.close()
    rc = srv.stop()
    fs = H.run_cairn(["fsck", "--data", srv.data], timeout=60)
    check("fsck clean at the end", rc == 0 and fs.returncode == 0 and
          "0 orphan(s)" in fs.stdout, fs.stdout + fs.stderr)
    return failed


def main():
    if len(sys.argv) != 2:
        print("usage: %s BUILD_DIR" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    H.setup_process(sys.argv[1])
    ctx = H.Ctx("proto")
    failed = check_codec(H.BUILD)
    try:
        srv = ctx.server()
        try:
            p = subprocess.run([sys.executable, os.path.join(HERE, "proto_client.py"),
                                str(srv.port)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", timeout=90)
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or ""), "timeout"
        n = 0
        for line in out.splitlines():
            if line.startswith("ok - ") or line.startswith("not ok - "):
                n += 1
                print("ok - proto " + line[5:] if line.startswith("ok - ")
                      else "not ok - proto " + line[9:])
                failed += line.startswith("not ok")
            else:
                print("# " + line)
        if rc != 0 and not failed:
            print("not ok - proto self test exit status")
            print("#   proto_client.py exited %s with no failed check" % rc)
            failed += 1
        if n == 0:
            print("not ok - proto self test produced no results")
            failed += 1
        rc = srv.stop()
        if rc != 0:
            print("not ok - proto server stops cleanly")
            print("#   cairn serve exited %s after SIGTERM" % rc)
            failed += 1
        else:
            print("ok - proto server stops cleanly")
        f = H.run_cairn(["fsck", "--data", srv.data], timeout=60)
        if f.returncode != 0:
            print("not ok - proto fsck after the self test")
            for line in (f.stdout + f.stderr).splitlines()[-20:]:
                print("#   " + line)
            failed += 1
        else:
            print("ok - proto fsck after the self test")
        failed += check_orphans(ctx)
        if failed:
            for line in ctx.diagnostics(20):
                print("#   " + line)
    except H.TestFailure as e:
        print("not ok - proto setup")
        print("#   %s" % e)
        failed += 1
    finally:
        ctx.cleanup()
    failed += H.sanitizer_check("proto")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
