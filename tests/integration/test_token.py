#!/usr/bin/env python3
# timeout: 120
"""test_token.py - write tokens (docs/PROTOCOL.md, "Write tokens") straight
against a live `cairn serve --recall-timeout 800`, with raw protocol
clients A and B (proto_client.py), no FUSE in between.

While A holds a file's token, each kind of request of B that reads or
changes the file (GETATTR, READ, LOOKUP and BULKSTAT of its name, WRITE,
SETATTR, LINK, CREATE of its existing name) gets no reply; A gets
CB_RECALL; A's own requests run; what A writes under the token before it
answers WT_RETURN is what B then sees. A holder that stays silent loses
the token after the recall timeout (logged, counted) and its WR_TOKEN
and SA_TOKEN changes are refused with ECANCELED; one whose connection
ends loses it at once. WT_DV grants only at the expected data version;
bad flags and symlinks give EINVAL; a parked change of a HELLO_REPLAY
client runs once; CREATE with CR_TOKEN hands the new file's token to its
creator (not for a directory or a name that existed). A directory's token
(refused with EBUSY while another client holds a promise on it)
holds off other clients' lookups, listings and changes in it the same way
while the holder creates in it with FIDs taken ahead (FIDS, CR_FID), which
are idempotent, as is REMOVE with RM_FID. The server stops cleanly and
`cairn fsck` passes.
"""

import errno
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import proto_client as P  # noqa: E402
from harness import test, expect, expect_eq  # noqa: E402

RECALL_MS = 800
HELLO_REPLAY = 2


def setup(ctx):
    ctx.srv = ctx.server(extra=("--recall-timeout", str(RECALL_MS)))
    ctx.n = 0


def conn(ctx, flags=0):
    c = P.Conn("127.0.0.1", ctx.srv.port)
    c.root = c.hello(flags=flags)["fid"]
    return c


def err_of(fn, *a, **kw):
    try:
        fn(*a, **kw)
        return 0
    except P.CairnError as e:
        return e.errno


def fresh(ctx, a, data=b"old"):
    """A new directory and file f in it, written by a: (dir, f attr)."""
    ctx.n += 1
    d = a.mkdir(a.root, "t%02d" % ctx.n)["child"]["fid"]
    f = a.create(d, "f", 0o100644)["child"]
    a.write(f["fid"], 0, data)
    return d, a.getattr(f["fid"])


def parked(b, op, **fields):
    """Send op on b; expect no reply for 0.3 s. Its id."""
    id = b.send_op(op, **fields)
    expect(b.reply_of(op, id, timeout=0.3) is None,
           "%s of B was answered while A held the token" % op)
    return id


def status(ctx):
    c = conn(ctx)
    try:
        return c.status()
    finally:
        c.close()


@test
def grant_breaks_others_and_holder_runs_freely(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        d, f = fresh(ctx, a)
        b.getattr(f["fid"])          # B holds a promise
        b.drain_breaks()
        t = a.wtoken(f["fid"])
        expect_eq(t["dv"], f["dv"], "the grant's data version")
        expect(b.expect_break((f["fid"], ""), 2.0),
               "B got no CB_BREAK when A took the token")
        # The holder's own requests do not wait, and a second grant is
        # a no-op.
        a.getattr(f["fid"])
        a.read(f["fid"], 0, 10)
        a.wtoken(f["fid"])
        a.write(f["fid"], 0, b"new", P.WR_TOKEN)
        expect(not a.recalls, "A was recalled by its own requests")
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        expect_eq(b.read(f["fid"], 0, 10)["data"], b"new",
                  "B's read after the return")
    finally:
        a.close()
        b.close()


def recall_case(ctx, op, fields, check=None, setup_b=None):
    """A holds f's token; B's op (fields from (d, f)) waits; A is recalled,
    writes under the token and returns it; B's reply then comes (check
    it with check(reply, d, f))."""
    a, b = conn(ctx), conn(ctx)
    try:
        d, f = fresh(ctx, a)
        if setup_b:
            setup_b(b, d, f)
        a.wtoken(f["fid"])
        id = parked(b, op, **fields(d, f))
        expect(a.expect_recall(f["fid"], 2.0), "A got no CB_RECALL")
        a.write(f["fid"], 0, b"NEWDATA", P.WR_TOKEN)
        expect(b.reply_of(op, id, timeout=0.2) is None,
               "B was answered before A returned the token")
        t0 = time.time()
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        rep = b.reply_of(op, id, timeout=5)
        expect(rep is not None, "B's %s not answered after the return" % op)
        expect(time.time() - t0 < 2, "B's reply took %.1f s after the "
               "return" % (time.time() - t0))
        if check:
            check(rep, d, b.getattr(f["fid"]))
    finally:
        a.close()
        b.close()


@test
def getattr_waits_for_recall(ctx):
    recall_case(ctx, "GETATTR", lambda d, f: {"fid": f["fid"]},
                lambda r, d, f: expect_eq(r["attr"]["size"], 7,
                                          "size B sees"))


@test
def read_waits_for_recall(ctx):
    recall_case(ctx, "READ", lambda d, f: {"fid": f["fid"], "offset": 0,
                                           "length": 100},
                lambda r, d, f: expect_eq(r["data"], b"NEWDATA",
                                          "data B reads"))


@test
def lookup_and_bulkstat_wait_for_recall(ctx):
    recall_case(ctx, "LOOKUP", lambda d, f: {"dir": d, "name": "f"},
                lambda r, d, f: expect_eq(r["child"]["size"], 7,
                                          "size LOOKUP gives"))

    def bulk_ok(r, d, f):
        sizes = [e["attr"]["size"] for e in r["items"]]
        expect_eq(sizes, [7], "sizes BULKSTAT gives")
    recall_case(ctx, "BULKSTAT", lambda d, f: {"dir": d, "cookie": 0,
                                               "max_bytes": P.BULKSTAT_MAX,
                                               "flags": 0}, bulk_ok)


@test
def changes_wait_for_recall(ctx):
    # B's write lands after A's: B's bytes over A's.
    recall_case(ctx, "WRITE", lambda d, f: {"fid": f["fid"], "offset": 0,
                                            "flags": 0, "data": b"bb"},
                lambda r, d, f: expect_eq(f["size"], 7, "size after both"))
    recall_case(ctx, "SETATTR",
                lambda d, f: {"fid": f["fid"], "valid": P.SA_SIZE,
                              "mode": 0, "uid": 0, "gid": 0, "size": 3,
                              "atime": (0, 0), "mtime": (0, 0),
                              "ctime": (0, 0)},
                lambda r, d, f: expect_eq(r["attr"]["size"], 3,
                                          "size after B's truncate"))
    recall_case(ctx, "LINK", lambda d, f: {"target": f["fid"], "dir": d,
                                           "name": "g"},
                lambda r, d, f: expect_eq(r["target"]["nlink"], 2,
                                          "nlink after B's link"))
    recall_case(ctx, "CREATE", lambda d, f: {"dir": d, "name": "f",
                                             "mode": 0o100644, "uid": 0,
                                             "gid": 0, "rdev": 0,
                                             "flags": 0,
                                             "new_fid": (0, 0, 0),
                                             "new_time": (0, 0),
                                             "data": b""},
                lambda r, d, f: expect_eq((r["created"],
                                           r["child"]["size"]), (0, 7),
                                          "O_CREAT of the existing file"))


@test
def create_hands_the_token_to_the_creator(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        ctx.n += 1
        d = a.mkdir(a.root, "t%02d" % ctx.n)["child"]["fid"]
        f = a.create(d, "new", 0o100644, flags=P.CR_TOKEN)["child"]
        a.write(f["fid"], 0, b"by A", P.WR_TOKEN)     # A holds it
        id = parked(b, "LOOKUP", dir=d, name="new")
        expect(a.expect_recall(f["fid"], 2.0), "A got no CB_RECALL")
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        rep = b.reply_of("LOOKUP", id, timeout=5)
        expect(rep is not None, "B's LOOKUP not answered after the return")
        expect_eq(rep["child"]["size"], 4, "size B's LOOKUP gives")
        # A directory's comes too (CREATED_TOKEN): B's lookup in it waits
        # for A's return; not for a name that existed.
        cr = a.create(d, "sub", 0o040755, flags=P.CR_EXCL | P.CR_TOKEN)
        sub = cr["child"]
        expect(sub["mode"] & 0o040000, "mkdir with CR_TOKEN")
        expect_eq(cr["created"], 3, "created flags of a mkdir with its token")
        id = parked(b, "LOOKUP", dir=sub["fid"], name="x")
        expect(a.expect_recall(sub["fid"], 2.0), "A got no CB_RECALL of sub")
        a.wtoken(sub["fid"], flags=P.WT_RETURN)
        expect_eq(err_of(b.reply_of, "LOOKUP", id, timeout=5), errno.ENOENT,
                  "B's LOOKUP in sub after the return")
        expect_eq(err_of(a.write, f["fid"], 0, b"x", P.WR_TOKEN), errno.ECANCELED,
                  "WR_TOKEN after the return")
        again = a.create(d, "new", 0o100644, flags=P.CR_TOKEN)
        expect_eq(again["created"], 0, "created flag of an existing name")
        expect_eq(err_of(a.write, f["fid"], 0, b"x", P.WR_TOKEN), errno.ECANCELED,
                  "WR_TOKEN after CR_TOKEN of an existing name")
    finally:
        a.close()
        b.close()


@test
def wreturn_gives_back_many(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        d, f = fresh(ctx, a)
        g = a.create(d, "g", 0o100644)["child"]
        a.wtoken(f["fid"])
        a.wtoken(g["fid"])
        a.wreturn([f["fid"], g["fid"], d])      # d: not held, ignored
        for x in (f, g):
            id = b.send_op("GETATTR", fid=x["fid"])
            expect(b.reply_of("GETATTR", id, timeout=2) is not None,
                   "B's GETATTR waited after WRETURN")
        expect(not a.recalls, "A recalled after WRETURN")
        expect_eq(err_of(a.wreturn, []), errno.EINVAL, "WRETURN of nothing")
        expect_eq(err_of(a.write, f["fid"], 0, b"x", P.WR_TOKEN), errno.ECANCELED,
                  "WR_TOKEN after WRETURN")
    finally:
        a.close()
        b.close()


@test
def silent_holder_is_revoked(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        before = status(ctx)["tokens_revoked"]
        d, f = fresh(ctx, a)
        a.wtoken(f["fid"])
        t0 = time.time()
        id = b.send_op("GETATTR", fid=f["fid"])
        rep = b.reply_of("GETATTR", id, timeout=RECALL_MS / 1000 + 5)
        took = time.time() - t0
        expect(rep is not None, "B never answered with a silent holder")
        expect(took >= RECALL_MS / 1000 * 0.8,
               "B answered after %.2f s, before the recall timeout" % took)
        expect_eq(rep["attr"]["size"], 3, "B sees what the server had")
        expect_eq(err_of(a.write, f["fid"], 0, b"late", P.WR_TOKEN),
                  errno.ECANCELED, "A's WR_TOKEN write after revocation")
        expect_eq(err_of(a.setattr, f["fid"], P.SA_SIZE | P.SA_TOKEN,
                         size=0), errno.ECANCELED,
                  "A's SA_TOKEN truncate after revocation")
        expect_eq(b.read(f["fid"], 0, 10)["data"], b"old",
                  "data after the refused writes")
        expect_eq(status(ctx)["tokens_revoked"], before + 1,
                  "STATUS tokens_revoked")
        expect(any("revoked" in ln for ln in ctx.srv.log_lines()),
               "the revocation is not logged")
        # Without WR_TOKEN A writes through as any client.
        a.write(f["fid"], 0, b"new")
    finally:
        a.close()
        b.close()


@test
def holder_still_sending_is_not_revoked(ctx):
    """The recall timeout is for a silent holder: one that keeps sending
    changes under the recalled token (a long journal, a slow machine)
    keeps it for three times the timeout, every write taken; B's request
    runs once A returns it, and reads A's last write."""
    a, b = conn(ctx), conn(ctx)
    try:
        before = status(ctx)["tokens_revoked"]
        d, f = fresh(ctx, a)
        a.wtoken(f["fid"])
        id = b.send_op("GETATTR", fid=f["fid"])
        expect(a.expect_recall(f["fid"], 2.0), "A got no CB_RECALL")
        end = time.time() + 3 * RECALL_MS / 1000
        i = 0
        while time.time() < end:
            a.write(f["fid"], 0, b"w%05d" % i, P.WR_TOKEN)
            i += 1
            time.sleep(RECALL_MS / 1000 / 4)
        expect(b.reply_of("GETATTR", id, timeout=0.05) is None,
               "B was answered while A was still sending under the token")
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        rep = b.reply_of("GETATTR", id, timeout=5)
        expect(rep is not None, "B's GETATTR not answered after the return")
        expect_eq(rep["attr"]["size"], 6, "B's size after A's writes")
        expect_eq(b.read(f["fid"], 0, 10)["data"], b"w%05d" % (i - 1),
                  "B reads A's last write")
        expect_eq(status(ctx)["tokens_revoked"], before, "STATUS tokens_revoked")
    finally:
        a.close()
        b.close()


@test
def holder_disconnect_frees_waiters(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        d, f = fresh(ctx, a)
        a.wtoken(f["fid"])
        id = parked(b, "GETATTR", fid=f["fid"])
        a.close()
        rep = b.reply_of("GETATTR", id, timeout=2)
        expect(rep is not None, "B still waits after A's connection ended")
        # A new connection of A holds nothing.
        a = conn(ctx)
        expect_eq(err_of(a.write, f["fid"], 0, b"x", P.WR_TOKEN),
                  errno.ECANCELED, "WR_TOKEN on a new connection")
    finally:
        a.close()
        b.close()


@test
def grant_conditions(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        d, f = fresh(ctx, a)
        expect_eq(err_of(a.wtoken, f["fid"], dv=f["dv"] + 5, flags=P.WT_DV),
                  errno.ECANCELED, "WT_DV at another version")
        expect_eq(a.wtoken(f["fid"], dv=f["dv"], flags=P.WT_DV)["dv"],
                  f["dv"], "WT_DV at the file's version")
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        ln = a.symlink(d, "ln", "f")["child"]["fid"]
        expect_eq(err_of(a.wtoken, ln), errno.EINVAL, "a symlink's token")
        expect_eq(err_of(a.wtoken, f["fid"], flags=8), errno.EINVAL,
                  "an undefined flag")
        expect_eq(err_of(a.wtoken, f["fid"], flags=P.WT_RETURN | P.WT_DV),
                  errno.EINVAL, "WT_RETURN with WT_DV")
        expect_eq(err_of(a.write, f["fid"], 0, b"x", P.WR_TOKEN),
                  errno.ECANCELED, "WR_TOKEN without the token")
        # Returning a token one does not hold changes nothing.
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        b.wtoken(f["fid"])
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        expect_eq(b.write(f["fid"], 0, b"B", P.WR_TOKEN)["size"], 3,
                  "B still holds it after A's stray return")
        b.wtoken(f["fid"], flags=P.WT_RETURN)
    finally:
        a.close()
        b.close()


def dir_recall_case(ctx, op, fields, check):
    """A holds directory d's token and creates "mine" in it with CR_FID;
    B's op on d (fields from d) waits; A is recalled and returns the
    token; B's reply (or its CairnError) then comes and sees "mine"
    (check(reply, b, d, fid of "mine"))."""
    a, b = conn(ctx), conn(ctx)
    try:
        ctx.n += 1
        d = a.mkdir(a.root, "t%02d" % ctx.n)["child"]["fid"]
        b.getattr(d)                             # B holds a promise on d
        b.drain_breaks()
        # Not while another client looks at it (its promise).
        expect_eq(err_of(a.wtoken, d), errno.EBUSY,
                  "a directory's token while B holds a promise on it")
        a.create(d, "old", 0o100644)             # breaks B's promise
        expect(b.expect_break((d, "old"), 2.0),
               "B got no CB_BREAK when A created in the directory")
        a.wtoken(d)
        id = parked(b, op, **fields(d))
        expect(a.expect_recall(d, 2.0), "A got no CB_RECALL of the directory")
        fid = a.fids(1)[0]
        a.create(d, "mine", 0o100644, flags=P.CR_EXCL | P.CR_FID, fid=fid,
                 time=(1700000000, 5))
        expect(b.reply_of(op, id, timeout=0.2) is None,
               "B was answered before A returned the directory's token")
        a.wtoken(d, flags=P.WT_RETURN)
        try:
            rep = b.reply_of(op, id, timeout=5)
        except P.CairnError as e:
            rep = e
        expect(rep is not None, "B's %s not answered after the return" % op)
        check(rep, b, d, fid)
    finally:
        a.close()
        b.close()


@test
def directory_token_holds_off_other_clients(ctx):
    dir_recall_case(ctx, "LOOKUP", lambda d: {"dir": d, "name": "mine"},
                    lambda r, b, d, f: expect_eq(r["child"]["mtime"],
                                           (1700000000, 5),
                                           "mtime of the entry B looks up"))
    dir_recall_case(ctx, "BULKSTAT",
                    lambda d: {"dir": d, "cookie": 0,
                               "max_bytes": P.BULKSTAT_MAX, "flags": 0},
                    lambda r, b, d, f: expect_eq(
                        sorted(e["name"] for e in r["items"]),
                        [b"mine", b"old"], "names BULKSTAT gives"))
    dir_recall_case(ctx, "READDIR",
                    lambda d: {"dir": d, "cookie": 0, "max_entries": 100},
                    lambda r, b, d, f: expect_eq(
                        sorted(e["name"] for e in r["items"]),
                        [b"mine", b"old"], "names READDIR gives"))
    dir_recall_case(ctx, "GETATTR", lambda d: {"fid": d},
                    lambda r, b, d, f: expect_eq(r["attr"]["mtime"],
                                           (1700000000, 5),
                                           "the directory's mtime"))
    # B's own create of the name A made waits, then finds it taken.
    dir_recall_case(ctx, "CREATE",
                    lambda d: {"dir": d, "name": "mine", "mode": 0o100644,
                               "uid": 0, "gid": 0, "rdev": 0,
                               "flags": P.CR_EXCL, "new_fid": (0, 0, 0),
                               "new_time": (0, 0), "data": b""},
                    lambda r, b, d, f: expect_eq(getattr(r, "errno", None),
                                                 errno.EEXIST,
                                                 "B's CR_EXCL create of the "
                                                 "name A made"))
    dir_recall_case(ctx, "REMOVE",
                    lambda d: {"dir": d, "name": "old", "flags": 0,
                               "victim": (0, 0, 0)},
                    lambda r, b, d, f: expect_eq(b.listdir(d), ["mine"],
                                                 "names after B's unlink"))
    dir_recall_case(ctx, "RENAME",
                    lambda d: {"src_dir": d, "src_name": "mine",
                               "dst_dir": d, "dst_name": "moved",
                               "flags": 0},
                    lambda r, b, d, f: expect_eq(
                        tuple(b.lookup(d, "moved")["fid"]), tuple(f),
                        "FID of the entry B renamed"))


@test
def fids_and_creates_named_ahead(ctx):
    a, b = conn(ctx), conn(ctx)
    try:
        ctx.n += 1
        d = a.mkdir(a.root, "t%02d" % ctx.n)["child"]["fid"]
        f1 = a.fids(3)
        f2 = b.fids(2)
        expect_eq(len(f1) + len(f2), 5, "FIDs handed out")
        expect(not set(x[1] for x in f1) & set(x[1] for x in f2),
               "two FIDS answers overlap: %r %r" % (f1, f2))
        for n in (0, 4097):
            expect_eq(err_of(a.fids, n), errno.EINVAL, "FIDS of %d" % n)
        t = (1700000001, 123456789)
        r = a.create(d, "ahead", 0o100640, flags=P.CR_EXCL | P.CR_FID,
                     fid=f1[0], time=t)
        c = r["child"]
        expect_eq((r["created"], tuple(c["fid"]), c["mtime"], c["ctime"],
                   c["atime"], c["mode"], c["size"]),
                  (1, tuple(f1[0]), t, t, t, 0o100640, 0),
                  "the object CR_FID made")
        expect_eq((r["dir"]["mtime"], r["dir"]["ctime"]), (t, t),
                  "the directory's times")
        # Another client finds it under that FID.
        expect_eq(tuple(b.lookup(d, "ahead")["fid"]), tuple(f1[0]),
                  "FID of B's lookup")
        dv = b.getattr(d)["dv"]
        # The same request again (a resend, a replay): done, unchanged.
        again = a.create(d, "ahead", 0o100640, flags=P.CR_EXCL | P.CR_FID,
                         fid=f1[0], time=t)
        expect_eq((again["created"], tuple(again["child"]["fid"])),
                  (1, tuple(f1[0])), "a CR_FID create resent")
        a.rename(d, "ahead", d, "renamed")
        again = a.create(d, "ahead", 0o100640, flags=P.CR_EXCL | P.CR_FID,
                         fid=f1[0], time=t)
        expect_eq(a.listdir(d), ["renamed"],
                  "entries after a replay of a create renamed since")
        expect_eq(b.getattr(d)["dv"], dv + 1,
                  "directory version (only the rename changed it)")
        # Refused: an existing name, a vnode never handed out, a known
        # vnode with another uniq.
        expect_eq(err_of(a.create, d, "renamed", 0o100644,
                         flags=P.CR_FID, fid=f1[1], time=t),
                  errno.EEXIST, "CR_FID on an existing name")
        vol, vn, uq = f2[-1]
        expect_eq(err_of(a.create, d, "x", 0o100644, flags=P.CR_FID,
                         fid=(vol, vn + 1000, uq), time=t),
                  errno.EINVAL, "CR_FID with a vnode never handed out")
        expect_eq(err_of(a.create, d, "y", 0o100644, flags=P.CR_FID,
                         fid=(f1[0][0], f1[0][1], f1[0][2] ^ 1), time=t),
                  errno.EEXIST, "CR_FID with another uniq")
        # A directory named ahead; CR_TOKEN hands over a file's token.
        sub = a.create(d, "sub", 0o040755, flags=P.CR_EXCL | P.CR_FID,
                       fid=f1[1], time=t)["child"]
        expect_eq((tuple(sub["fid"]), sub["nlink"]), (tuple(f1[1]), 2),
                  "a directory made with CR_FID")
        g = a.create(d, "tok", 0o100644,
                     flags=P.CR_EXCL | P.CR_FID | P.CR_TOKEN, fid=f1[2],
                     time=t)["child"]
        expect_eq(a.write(g["fid"], 0, b"held", P.WR_TOKEN)["size"], 4,
                  "WR_TOKEN write to a CR_FID | CR_TOKEN file")
        # A file's first bytes may come with its CR_FID create: written
        # once (a resend writes them only while the file is still at
        # version 1), never without CR_FID.
        f3 = a.fids(2)
        c = a.create(d, "withdata", 0o100644, flags=P.CR_EXCL | P.CR_FID,
                     fid=f3[0], time=t, data=b"first bytes")["child"]
        expect_eq((c["size"], c["dv"]), (11, 2), "size and version with data")
        expect_eq(b.read(f3[0], 0, 100)["data"], b"first bytes", "B reads them")
        a.write(f3[0], 0, b"FIRST", 0)
        again = a.create(d, "withdata", 0o100644, flags=P.CR_EXCL | P.CR_FID,
                         fid=f3[0], time=t, data=b"first bytes")["child"]
        expect_eq((again["dv"], b.read(f3[0], 0, 100)["data"]),
                  (3, b"FIRST bytes"), "a resend after a later write")
        a.create(d, "late", 0o100644, flags=P.CR_EXCL | P.CR_FID, fid=f3[1],
                 time=t)
        late = a.create(d, "late", 0o100644, flags=P.CR_EXCL | P.CR_FID,
                        fid=f3[1], time=t, data=b"late")["child"]
        expect_eq((late["size"], late["dv"]), (4, 2),
                  "a resend whose first copy made the file without its bytes")
        expect_eq(err_of(a.create, d, "nofid", 0o100644, data=b"x"),
                  errno.EINVAL, "data without CR_FID")
        # REMOVE with RM_FID removes the name only while it names the
        # victim: sent again, it removes nothing (ENOENT), nor a new
        # file made under the name meanwhile.
        expect_eq(err_of(a.remove, d, "tok", P.RM_FID, victim=f1[0]),
                  errno.ENOENT, "RM_FID with another victim")
        expect("tok" in a.listdir(d), "tok removed by an RM_FID naming another")
        a.remove(d, "tok", P.RM_FID, victim=g["fid"])
        expect("tok" not in a.listdir(d), "tok still there after RM_FID")
        a.create(d, "tok", 0o100644)
        expect_eq(err_of(a.remove, d, "tok", P.RM_FID, victim=g["fid"]),
                  errno.ENOENT, "RM_FID sent again after the name was reused")
        expect("tok" in a.listdir(d), "the new tok removed by an old RM_FID")
    finally:
        a.close()
        b.close()


@test
def parked_change_of_replay_client_runs_once(ctx):
    a, b = conn(ctx), conn(ctx, flags=HELLO_REPLAY)
    try:
        d, f = fresh(ctx, a)
        a.wtoken(f["fid"])
        m = P._message("SETATTR")
        payload = m.req.encode({"fid": f["fid"], "valid": P.SA_SIZE,
                                "mode": 0, "uid": 0, "gid": 0, "size": 1,
                                "atime": (0, 0), "mtime": (0, 0),
                                "ctime": (0, 0)})
        b.send_raw(P.frame(m.op, payload, id=77))
        time.sleep(0.2)
        b.send_raw(P.frame(m.op, payload, id=77))   # a resend meanwhile
        expect(a.expect_recall(f["fid"], 2.0), "A got no CB_RECALL")
        a.write(f["fid"], 0, b"written-by-A", P.WR_TOKEN)
        a.wtoken(f["fid"], flags=P.WT_RETURN)
        st, _ = b.wait(77)
        expect_eq(st, 0, "the parked SETATTR's status")
        # Both answers came (original and resend) and the truncate ran
        # after A's write, once.
        expect_eq(b.getattr(f["fid"])["size"], 1, "size after both")
        a.write(f["fid"], 0, b"xyz")
        b.poll_breaks(0.3)
        expect_eq(b.getattr(f["fid"])["size"], 3,
                  "the truncate did not run again")
    finally:
        a.close()
        b.close()


@test
def server_stops_cleanly_and_fsck_passes(ctx):
    st = status(ctx)
    expect_eq(st["tokens"], 0, "tokens held once every client left")
    expect(st["tokens_recalled"] >= 8, "recalls counted: %r" % st)
    rc = ctx.srv.stop()
    expect_eq(rc, 0, "cairn serve exit status")
    f = H.run_cairn(["fsck", "--data", ctx.srv.data], timeout=60)
    expect(f.returncode == 0, "fsck: %s" % (f.stdout + f.stderr)[-500:])


if __name__ == "__main__":
    H.main(setup=setup)
