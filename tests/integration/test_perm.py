#!/usr/bin/env python3
# timeout: 120
"""test_perm.py - the server checks permissions itself (docs/SECURITY.md,
docs/PROTOCOL.md "Credentials"), whatever a client's kernel did.

A protocol client holding the cell key sends requests with someone else's
credentials (WF_CRED), as a client whose kernel skipped its checks would:
it cannot read another user's 0600 file, create in a directory it may not
write, remove or rename another user's file out of a sticky directory,
chmod or chown what it does not own, or look into a directory it may not
search. Root squash: uid 0 acts as nobody unless the server runs with
--no-root-squash, through a protocol client and through a real mount.
"""

import errno
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

import proto_client as P  # noqa: E402

ALICE, BOB = 2000, 1000
REG, DIR = 0o100000, 0o040000


def expect_err(what, want, fn, *args):
    try:
        fn(*args)
        fail("%s succeeded (expected %s)" % (what, errno.errorcode[want]))
    except P.CairnError as e:
        expect_eq(e.errno, want, "errno of %s" % what)


def setup_tree(c, root):
    """As the daemon (no credentials): alice's private file, her 0755
    directory, her 0700 directory, and a sticky /tmp with her file."""
    top = c.mkdir(root, "perm-%d" % os.getpid(), 0o777)["child"]["fid"]
    secret = c.create(top, "secret", REG | 0o600, uid=ALICE, gid=ALICE)["child"]["fid"]
    c.write(secret, 0, b"alice's secret")
    c.setxattr(secret, "user.note", b"alice's note")
    ro = c.create(top, "alicedir", DIR | 0o755, uid=ALICE, gid=ALICE,
                  flags=P.CR_EXCL)["child"]["fid"]
    private = c.create(top, "private", DIR | 0o700, uid=ALICE, gid=ALICE,
                       flags=P.CR_EXCL)["child"]["fid"]
    c.create(private, "inside", REG | 0o644, uid=ALICE, gid=ALICE)
    tmp = c.create(top, "tmp", DIR | 0o1777, flags=P.CR_EXCL)["child"]["fid"]
    victim = c.create(tmp, "hers", REG | 0o644, uid=ALICE, gid=ALICE)["child"]["fid"]
    return dict(top=top, secret=secret, ro=ro, private=private, tmp=tmp, victim=victim)


@test
def forged_credentials_get_no_more_than_the_user_may(ctx):
    srv = ctx.server()
    c = P.Conn("127.0.0.1", srv.port)
    root = c.hello()["fid"]
    t = setup_tree(c, root)
    c.cred = (BOB, BOB, [])
    expect_err("READ of alice's 0600 file as bob", errno.EACCES, c.read, t["secret"], 0, 100)
    expect_err("WRITE to alice's 0600 file as bob", errno.EACCES,
               c.write, t["secret"], 0, b"bob was here")
    expect_err("CREATE in alice's 0755 directory as bob", errno.EACCES,
               c.create, t["ro"], "bobs", REG | 0o644, BOB, BOB)
    expect_err("MKDIR in alice's 0755 directory as bob", errno.EACCES,
               c.mkdir, t["ro"], "bobdir")
    expect_err("SYMLINK in alice's 0755 directory as bob", errno.EACCES,
               c.symlink, t["ro"], "l", "x", BOB, BOB)
    expect_err("LINK into alice's 0755 directory as bob", errno.EACCES,
               c.link, t["victim"], t["ro"], "l")
    expect_err("LOOKUP in alice's 0700 directory as bob", errno.EACCES,
               c.lookup, t["private"], "inside")
    expect_err("READDIR of alice's 0700 directory as bob", errno.EACCES,
               c.readdir, t["private"])
    expect_err("REMOVE of alice's file from the sticky directory as bob", errno.EPERM,
               c.remove, t["tmp"], "hers")
    expect_err("RENAME of alice's file out of the sticky directory as bob", errno.EPERM,
               c.rename, t["tmp"], "hers", t["top"], "stolen")
    expect_err("chmod of alice's file as bob", errno.EPERM,
               c.setattr, t["secret"], P.SA_MODE, 0o100666)
    expect_err("chown of alice's file to bob as bob", errno.EPERM,
               c.setattr, t["secret"], P.SA_UID, 0, BOB)
    expect_err("truncate of alice's 0600 file as bob", errno.EACCES,
               c.setattr, t["secret"], P.SA_SIZE, 0, 0, 0, 0)
    expect_err("explicit mtime on alice's file as bob", errno.EPERM,
               c.setattr, t["secret"], P.SA_MTIME, 0, 0, 0, 0, (0, 0), (1, 0))
    expect_err("SETXATTR user.* on alice's 0600 file as bob", errno.EACCES,
               c.setxattr, t["secret"], "user.note", b"bob")
    expect_err("GETXATTR user.* of alice's 0600 file as bob", errno.EACCES,
               c.getxattr, t["secret"], "user.note")
    expect_err("SETXATTR trusted.* as bob", errno.EPERM,
               c.setxattr, t["victim"], "trusted.x", b"1")
    expect_err("write token for alice's 0600 file as bob", errno.EACCES,
               c.wtoken, t["secret"])
    expect_err("chown as alice to bob", errno.EPERM,
               lambda: (setattr(c, "cred", (ALICE, ALICE, [])),
                        c.setattr(t["secret"], P.SA_UID, 0, BOB))[1])
    # What they may do, they can: alice reads her file, bob creates in
    # the sticky directory and removes his own file there, bob in
    # alice's group reads a group-readable file.
    c.cred = (ALICE, ALICE, [])
    expect_eq(c.read(t["secret"], 0, 100)["data"], b"alice's secret", "alice reads her file")
    c.wtoken(t["secret"])                       # she may: granted
    c.wtoken(t["secret"], flags=P.WT_RETURN)
    c.setxattr(t["secret"], "user.note", b"alice's note")
    c.cred = (BOB, BOB, [])
    mine = c.create(t["tmp"], "bobs", REG | 0o644, BOB, BOB)["child"]
    expect_eq(mine["uid"], BOB, "owner of bob's new file")
    c.remove(t["tmp"], "bobs")
    c.cred = (ALICE, ALICE, [])
    c.setattr(t["secret"], P.SA_MODE, 0o100640)
    c.cred = (BOB, BOB, [ALICE])
    expect_eq(c.read(t["secret"], 0, 5)["data"], b"alice", "bob in alice's group reads 0640")
    # A client cannot give a new file to someone else.
    c.cred = (BOB, BOB, [])
    f = c.create(t["tmp"], "gift", REG | 0o644, ALICE, ALICE)["child"]
    expect_eq((f["uid"], f["gid"]), (BOB, BOB), "owner of a file bob created 'for alice'")
    # Nothing bob tried changed anything.
    c.cred = None
    expect_eq(c.read(t["secret"], 0, 100)["data"], b"alice's secret", "alice's file afterwards")
    expect_eq(c.lookup(t["tmp"], "hers")["uid"], ALICE, "alice's file in the sticky directory")
    c.close()


@test
def write_back_ships_as_the_opener(ctx):
    # Through a mount: a user writes a file (the kernel's write-back, the
    # journal, then a write token taken with the opener's credentials);
    # the server grants it and the data arrives.
    srv = ctx.server()
    m = ctx.mount(srv, "wb")
    d = m.p("shared")
    os.mkdir(d)
    os.chmod(d, 0o777)
    path = os.path.join(d, "bobs")

    def write_as_bob():
        with open(path, "wb") as f:
            f.write(b"bob's data" * 1000)
            os.fsync(f.fileno())
    expect_eq(H.user_errno(BOB, BOB, write_as_bob), 0, "bob writes his file")
    st = os.stat(path)
    expect_eq((st.st_uid, st.st_size), (BOB, 10000), "owner and size of bob's file")
    c = P.Conn("127.0.0.1", srv.port)
    root = c.hello()["fid"]
    f = c.lookup(c.lookup(root, "shared")["fid"], "bobs")
    expect_eq(c.read(f["fid"], 0, 10)["data"], b"bob's data", "bob's data on the server")
    c.close()


@test
def root_is_squashed_unless_told(ctx):
    srv = ctx.server(start=False)
    srv.root_squash = True
    srv.start()
    c = P.Conn("127.0.0.1", srv.port)
    root = c.hello()["fid"]
    t = setup_tree(c, root)
    c.cred = (0, 0, [])
    expect_err("READ of alice's 0600 file as squashed root", errno.EACCES,
               c.read, t["secret"], 0, 100)
    expect_err("chown of alice's file as squashed root", errno.EPERM,
               c.setattr, t["secret"], P.SA_UID, 0, 0)
    f = c.create(t["top"], "roots", REG | 0o644, 0, 0)["child"]
    expect_eq((f["uid"], f["gid"]), (65534, 65534), "owner of squashed root's new file")
    c.close()
    # Through a real mount: root reads nothing of alice's and chowns
    # nothing, though its kernel lets it.
    m = ctx.mount(srv, "squashed")
    names = [n for n in os.listdir(m.path) if n.startswith("perm-")]
    expect(len(names) == 1, "the test tree on the mount: %s" % names)
    top = m.p(names[0])
    try:
        with open(os.path.join(top, "secret"), "rb") as fh:
            fh.read()
        fail("root read alice's 0600 file through a squashed mount")
    except OSError as e:
        expect_eq(e.errno, errno.EACCES, "errno of root reading alice's 0600 file")
    try:
        os.chown(os.path.join(top, "tmp", "hers"), 0, 0)
        fail("root chowned alice's file through a squashed mount")
    except OSError as e:
        expect_eq(e.errno, errno.EPERM, "errno of root's chown")
    expect_eq(os.stat(os.path.join(top, "tmp", "hers")).st_uid, ALICE,
              "owner of alice's file after root's chown")


@test
def no_root_squash_keeps_root(ctx):
    srv = ctx.server()          # the suites' default: --no-root-squash
    expect(any("no root squash" in l for l in srv.log_lines()),
           "the server does not say root is not squashed")
    c = P.Conn("127.0.0.1", srv.port)
    root = c.hello()["fid"]
    t = setup_tree(c, root)
    c.cred = (0, 0, [])
    expect_eq(c.read(t["secret"], 0, 5)["data"], b"alice", "root reads alice's file")
    c.setattr(t["secret"], P.SA_UID | P.SA_GID, 0, BOB, BOB)
    expect_eq(c.getattr(t["secret"])["uid"], BOB, "owner after root's chown")
    c.close()


if __name__ == "__main__":
    H.main()
