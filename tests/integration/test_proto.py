#!/usr/bin/env python3
# timeout: 120
"""test_proto.py - every protocol op straight against a live server, no
FUSE in between: runs proto_client.py's self test (one "ok"/"not ok" line
per check) against a fresh `cairn serve` and passes its lines through.
Afterwards the server must stop cleanly and `cairn fsck` must pass.

Before that, offline: proto_client.py's codec (built from the tables of
docs/PROTOCOL.md) must read every message the C encoders write. The
encodings come from `BUILD/tests/test_msg_doc --vectors` (tagged values,
see tests/unit/msg_cases.h); each must decode to exactly its bytes, encode
back to the same bytes, and each field must hold the value tagged with
its own name, so the Python keys and the C struct fields agree. Every
message needs a helper of its lower-case name on proto_client.Conn.
"""

import os
import subprocess
import sys

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
