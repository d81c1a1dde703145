#!/usr/bin/env python3
# timeout: 120
"""test_drc.py - the duplicate request cache (docs/PROTOCOL.md,
"Retransmission after a reconnect").

A raw protocol client that says HELLO_REPLAY sends a change, drops the
connection without reading the reply, reconnects with the same client id
and resends the change with the same id: it gets the original outcome
(status 0), the change happened exactly once, and STATUS drc_hits counts
it. Also: a resend while the original still waits for a callback
acknowledgement is answered when the original is; a new id is executed
(real errors are not hidden); a client without HELLO_REPLAY keeps the old
behaviour (a resent REMOVE says -ENOENT).
"""

import errno
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import proto_client as P  # noqa: E402
from harness import test, expect, expect_eq  # noqa: E402

HELLO_CB_ACK = 1
HELLO_REPLAY = 2


def setup(ctx):
    ctx.srv = ctx.server()
    ctx.n = 0


def connect(ctx, cid, flags=HELLO_REPLAY):
    """A raw connection that said HELLO with client id cid and flags."""
    c = P.Conn("127.0.0.1", ctx.srv.port)
    c.client_id = cid
    r = c.call(P.OP_HELLO, P.u32(P.MAGIC) + P.u32(P.VERSION) + cid +
               P.u32(flags))
    r.u32()
    r.take(16)
    r.u64()
    root = r.attr()
    r.u32()          # reply flags (HELLO_REP_RO)
    r.end()
    c.root = root["fid"]
    return c


def hits(ctx):
    c = P.Conn("127.0.0.1", ctx.srv.port)
    try:
        c.hello()
        return c.status()["drc_hits"]
    finally:
        c.close()


def fresh_dir(ctx, c, tag):
    ctx.n += 1
    return c.mkdir(c.root, "%02d-%s" % (ctx.n, tag))["child"]["fid"]


def send_and_drop(c, op, payload, id):
    """Send request `id` and close without reading its reply."""
    c.send_raw(P.frame(op, payload, id=id))
    time.sleep(0.2)  # the server executes it meanwhile
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def resend(c, op, payload, id):
    c.send_raw(P.frame(op, payload, id=id))
    return c.wait(id)


def lookup_errno(c, d, name):
    try:
        c.lookup(d, name)
        return 0
    except P.CairnError as e:
        return e.errno


def remove_req(d, name, flags=0):
    return P.fid(d) + P.bstr(name) + P.u32(flags) + P.fid((0, 0, 0))


@test
def resent_remove_gets_the_original_outcome(ctx):
    cid = os.urandom(16)
    a = connect(ctx, cid)
    d = fresh_dir(ctx, a, "rm")
    a.create(d, "f", 0o100644)
    before = hits(ctx)
    send_and_drop(a, P.OP_REMOVE, remove_req(d, "f"), 1000)
    b = connect(ctx, cid)
    try:
        status, payload = resend(b, P.OP_REMOVE, remove_req(d, "f"), 1000)
        expect_eq(status, 0, "status of the resent REMOVE")
        r = P.Reader(payload)
        expect_eq(r.attr()["fid"], d, "the reply's directory")
        r.end()
        expect_eq(lookup_errno(b, d, "f"), errno.ENOENT,
                  "lookup of the removed file")
        expect_eq(hits(ctx), before + 1, "drc_hits")
        # A new id for the same change is executed: the real error.
        status, _ = resend(b, P.OP_REMOVE, remove_req(d, "f"), 1001)
        expect_eq(status, -errno.ENOENT, "REMOVE with a new id")
        expect_eq(hits(ctx), before + 1, "drc_hits after a new id")
    finally:
        b.close()


@test
def resent_mkdir_gets_the_original_outcome(ctx):
    cid = os.urandom(16)
    a = connect(ctx, cid)
    d = fresh_dir(ctx, a, "mkdir")
    req = (P.fid(d) + P.bstr("sub") + P.u32(0o040755) + P.u32(0) + P.u32(0) +
           P.u32(0) + P.u32(P.CR_EXCL) + P.fid((0, 0, 0)) +
           P.ttime((0, 0)) + P.blob(b""))
    before = hits(ctx)
    send_and_drop(a, P.OP_CREATE, req, 77)
    b = connect(ctx, cid)
    try:
        status, payload = resend(b, P.OP_CREATE, req, 77)
        expect_eq(status, 0, "status of the resent mkdir")
        r = P.Reader(payload)
        created, child = r.u8(), r.attr()
        r.attr()
        r.end()
        expect_eq(created, 1, "created")
        expect_eq(b.lookup(d, "sub")["fid"], child["fid"],
                  "the directory the reply names")
        expect_eq(b.listdir(d), ["sub"], "entries (made once)")
        expect_eq(hits(ctx), before + 1, "drc_hits")
        status, _ = resend(b, P.OP_CREATE, req, 78)
        expect_eq(status, -errno.EEXIST, "mkdir with a new id")
    finally:
        b.close()


@test
def resent_rename_gets_the_original_outcome(ctx):
    cid = os.urandom(16)
    a = connect(ctx, cid)
    d = fresh_dir(ctx, a, "rename")
    f = a.create(d, "old", 0o100644)["child"]["fid"]
    a.write(f, 0, b"data")
    req = P.fid(d) + P.bstr("old") + P.fid(d) + P.bstr("new") + P.u32(0)
    before = hits(ctx)
    send_and_drop(a, P.OP_RENAME, req, 5)
    b = connect(ctx, cid)
    try:
        status, _ = resend(b, P.OP_RENAME, req, 5)
        expect_eq(status, 0, "status of the resent RENAME")
        expect_eq(b.lookup(d, "new")["fid"], f, "the renamed file")
        expect_eq(sorted(b.listdir(d)), ["new"], "entries")
        expect_eq(hits(ctx), before + 1, "drc_hits")
    finally:
        b.close()


@test
def resend_while_the_original_waits_for_an_ack(ctx):
    """The original REMOVE waits for another client's acknowledgement; the
    resend on the new connection waits too, and is answered (once, with
    the original's outcome) when the acknowledgement comes."""
    cid = os.urandom(16)
    a = connect(ctx, cid)
    d = fresh_dir(ctx, a, "wait")
    a.create(d, "f", 0o100644)
    w = connect(ctx, os.urandom(16), HELLO_CB_ACK)  # holds a promise on d
    try:
        w.getattr(d)
        before = hits(ctx)
        a.send_raw(P.frame(P.OP_REMOVE, remove_req(d, "f"), id=9))
        # The break reaches w; w does not acknowledge yet.
        op, flags, bid, _, _ = w.recv_frame()
        expect(op == P.OP_CB_BREAK and flags & P.WF_PUSH and bid,
               "w gets a break (op %d flags %d id %d)" % (op, flags, bid))
        a.sock.shutdown(socket.SHUT_RDWR)
        a.close()
        b = connect(ctx, cid)
        try:
            b.send_raw(P.frame(P.OP_REMOVE, remove_req(d, "f"), id=9))
            b.sock.settimeout(0.5)
            try:
                early = b.recv_frame()
            except socket.timeout:
                early = None
            b.sock.settimeout(b.timeout)
            expect(early is None,
                   "resend answered before the ack: %r" % (early,))
            w.send_raw(P.frame(P.OP_CB_BREAK, b"", flags=P.WF_REPLY, id=bid))
            status, _ = b.wait(9)
            expect_eq(status, 0, "status of the resent REMOVE")
            expect_eq(lookup_errno(b, d, "f"), errno.ENOENT,
                      "lookup of the removed file")
            expect_eq(hits(ctx), before + 1, "drc_hits")
        finally:
            b.close()
    finally:
        w.close()


@test
def client_without_replay_keeps_the_old_behaviour(ctx):
    cid = os.urandom(16)
    a = connect(ctx, cid, 0)
    d = fresh_dir(ctx, a, "noreplay")
    a.create(d, "f", 0o100644)
    before = hits(ctx)
    send_and_drop(a, P.OP_REMOVE, remove_req(d, "f"), 1000)
    b = connect(ctx, cid, 0)
    try:
        status, _ = resend(b, P.OP_REMOVE, remove_req(d, "f"), 1000)
        expect_eq(status, -errno.ENOENT, "resent REMOVE without HELLO_REPLAY")
        expect_eq(hits(ctx), before, "drc_hits")
    finally:
        b.close()


@test
def many_changes_stay_bounded(ctx):
    """More changes than the cache holds: every one is answered, STATUS
    reports at most 256 entries per client."""
    cid = os.urandom(16)
    a = connect(ctx, cid)
    try:
        d = fresh_dir(ctx, a, "many")
        f = a.create(d, "f", 0o100644)["child"]["fid"]
        for i in range(300):
            a.write(f, i, b"x")
        st = a.status()
        expect(st["drc_entries"] <= 256 * st["drc_clients"],
               "drc_entries %d for %d clients" % (st["drc_entries"],
                                                  st["drc_clients"]))
        expect_eq(a.read(f, 0, 400)["data"], b"x" * 300, "file content")
    finally:
        a.close()


def encode(op, **fields):
    m = P._message(op)
    return m.op, m.req.encode(fields)


@test
def resent_changes_after_a_restart_run_once(ctx):
    """The duplicate request cache is in memory, but every namespace change
    also records its request id in its own transaction: a change resent
    after a server restart (with the same client id and request id) is
    answered from the current state, not executed again."""
    cid = os.urandom(16)
    a = connect(ctx, cid)
    d = fresh_dir(ctx, a, "restart")
    f = a.create(d, "f", 0o100644)["child"]["fid"]
    a.create(d, "victim", 0o100644)
    reqs = [
        ("mkdir", encode("CREATE", dir=d, name="sub", mode=0o040755, uid=0,
                         gid=0, rdev=0, flags=P.CR_EXCL, new_fid=(0, 0, 0),
                         new_time=(0, 0), data=b""), 3001),
        ("remove", encode("REMOVE", dir=d, name="victim", flags=0,
                          victim=(0, 0, 0)), 3002),
        ("rename", encode("RENAME", src_dir=d, src_name="f", dst_dir=d,
                          dst_name="g", flags=0), 3003),
        ("link", encode("LINK", target=f, dir=d, name="h"), 3004),
        ("symlink", encode("SYMLINK", dir=d, name="s", target="g", uid=0,
                           gid=0), 3005),
    ]
    first = {}
    for what, (op, payload), rid in reqs:
        a.send_raw(P.frame(op, payload, id=rid))
        status, rep = a.wait(rid)
        expect_eq(status, 0, "status of the first " + what)
        first[what] = P.decode(op, rep, reply=True)
    a.close()
    ctx.srv.stop()
    ctx.srv.start()
    b = connect(ctx, cid)
    try:
        for what, (op, payload), rid in reqs:
            status, rep = resend(b, op, payload, rid)
            expect_eq(status, 0, "status of the %s resent after a restart"
                      % what)
            if what in ("mkdir", "symlink"):
                again = P.decode(op, rep, reply=True)
                expect_eq(again["child"]["fid"], first[what]["child"]["fid"],
                          "the object the resent %s names" % what)
            if what == "mkdir":
                expect_eq(again["created"], 1, "created in the resent mkdir")
        expect_eq(sorted(b.listdir(d)), ["g", "h", "s", "sub"],
                  "entries: each change made once")
        expect_eq(b.getattr(f)["nlink"], 2, "links of the linked file")
        # New ids are executed: their real errors are not hidden.
        status, _ = resend(b, *encode("REMOVE", dir=d, name="victim",
                                      flags=0, victim=(0, 0, 0)), 3100)
        expect_eq(status, -errno.ENOENT, "REMOVE of the same name, new id")
        status, _ = resend(b, *encode("CREATE", dir=d, name="sub",
                                      mode=0o040755, uid=0, gid=0, rdev=0,
                                      flags=P.CR_EXCL, new_fid=(0, 0, 0),
                                      new_time=(0, 0), data=b""), 3101)
        expect_eq(status, -errno.EEXIST, "mkdir of the same name, new id")
        # A client that does not resend with the same ids is not tagged:
        # the same id from another client id runs normally.
        c = connect(ctx, os.urandom(16))
        try:
            status, _ = resend(c, *encode("LINK", target=f, dir=d,
                                          name="h2"), 3004)
            expect_eq(status, 0, "LINK with a used id from another client")
        finally:
            c.close()
    finally:
        b.close()
    log = open(ctx.srv.log, "rb").read().decode("utf-8", "replace")
    expect("REMOVE id 3002 was applied before" in log,
           "the server logs the replayed REMOVE")


if __name__ == "__main__":
    H.main(setup=setup)
