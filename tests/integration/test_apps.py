#!/usr/bin/env python3
# timeout: 240
"""test_apps.py - programs people run on a network file system, as they run
them, on two clients of one server.

- git: a repository made and committed to on A is whole on B (fsck, status,
  log); A keeps committing while the server is restarted (SIGTERM, then a
  new server on the same data directory and port): every commit returns,
  and B then sees all of them, a clean status and a repository fsck finds
  whole; a branch committed on B is A's at once.

- make: a small C program built on A is up to date for make on B
  (`make -q`); a source touched on B is rebuilt on A, alone, and the
  program run on B is the new one.
- tar: an archive (pax format: times to the nanosecond) with hard links,
  a symbolic link, modes and old times, extracted with -p on A, reads on
  B as the same extraction does on local disk: every name's type, mode,
  owner, link count, size, mtime and link target, and every byte.

(SQLite from two clients is in test_locks, rsync and cp in test_writeback.)
"""

import os
import shutil
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Cairn Test", "GIT_AUTHOR_EMAIL": "test@cairn.invalid",
    "GIT_COMMITTER_NAME": "Cairn Test", "GIT_COMMITTER_EMAIL": "test@cairn.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
}


def run(argv, what, check=True, env=None, timeout=120):
    """Run argv; returns the finished process (text output). Fails the
    test, naming `what`, if it runs past timeout or (with check) exits
    non-zero."""
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        fail("%s: no answer within %d s" % (what, timeout))
    if check and p.returncode != 0:
        fail("%s: exit %d: %s" % (what, p.returncode,
                                  (p.stderr or p.stdout).strip()[-600:]))
    return p


def git(repo, *args):
    """Run git in repo; returns its stdout, fails the test on an error."""
    return run(["git", "-C", repo, "-c", "gc.auto=0", "-c", "maintenance.auto=false"]
               + list(args), "git %s in %s" % (" ".join(args), repo), env=GIT_ENV,
               timeout=60).stdout


def commit(repo, msg, path="-A"):
    """git add path (default: everything), commit; returns the new HEAD."""
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", msg)
    return git(repo, "rev-parse", "HEAD").strip()


def seen_whole(repo, ref, rev, what):
    """ref is rev in repo (another client's view), and fsck finds the
    repository whole there."""
    expect_eq(git(repo, "rev-parse", ref).strip(), rev, what)
    git(repo, "fsck", "--strict", "--no-progress")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


@test(timeout=200)
def git_on_two_clients_across_a_server_restart(ctx):
    if not shutil.which("git"):
        fail("git is not installed (scripts/deps.sh installs it)")
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    b = ctx.mount(srv, "b")
    ra, rb = a.p("repo"), b.p("repo")
    os.mkdir(ra)
    git(ra, "init", "-q", "-b", "main")
    for d in range(6):
        for f in range(12):
            write(os.path.join(ra, "d%d" % d, "f%02d.c" % f),
                  "/* file %d/%d */\nint f%d_%d(void) { return %d; }\n"
                  % (d, f, d, f, d * 100 + f))
    first = commit(ra, "first")

    # B: the same repository, whole, at once.
    seen_whole(rb, "HEAD", first, "HEAD on B after A's commit")
    expect_eq(git(rb, "status", "--porcelain"), "", "git status on B after A's commit")

    # A commits while the server is restarted under it.
    done, errors = [], []

    def committer():
        try:
            for i in range(12):
                write(os.path.join(ra, "d%d" % (i % 6), "f%02d.c" % i),
                      "/* round %d */\nint r%d(void) { return %d; }\n" % (i, i, i))
                write(os.path.join(ra, "new", "n%02d.txt" % i), "new %d\n" % i)
                commit(ra, "round %d" % i)
                done.append(i)
        except BaseException as e:  # noqa: B902
            errors.append(e)

    t = threading.Thread(target=committer, daemon=True)
    t.start()
    end = time.time() + 30
    while len(done) < 3 and not errors and time.time() < end:
        time.sleep(0.05)
    at_stop = len(done)
    st = srv.stop()
    expect_eq(st, 0, "exit status of cairn serve after SIGTERM")
    time.sleep(0.5)
    at_start = len(done)
    srv.start()
    t.join(150)
    expect(not t.is_alive(), "A's commits did not finish within 150 s of the restart")
    expect(not errors, "a commit on A failed across the server restart: %s" % (errors[:1],))
    expect_eq(len(done), 12, "commits that returned on A")
    print("# commits on A: %d when the server was stopped, %d when it started "
          "again, %d in all" % (at_stop, at_start, len(done)))
    expect(at_stop < 12, "every commit was done before the restart: it tested nothing")

    seen_whole(rb, "HEAD", git(ra, "rev-parse", "HEAD").strip(),
               "HEAD on B after the restart")
    expect_eq(git(rb, "rev-list", "--count", "HEAD").strip(), "13",
              "commits B sees (the first and 12 rounds)")
    expect_eq(git(rb, "status", "--porcelain"), "", "git status on B after the restart")
    with open(os.path.join(rb, "new", "n11.txt")) as f:
        expect_eq(f.read(), "new 11\n", "the last round's new file on B")

    # B branches, checks out the first commit's tree and commits: A has it.
    git(rb, "checkout", "-q", "-b", "from-b", first)
    write(os.path.join(rb, "b.txt"), "from b\n")
    seen_whole(ra, "from-b", commit(rb, "from b", "b.txt"), "B's branch on A")
    expect_eq(git(ra, "show", "from-b:b.txt"), "from b\n", "B's file in A's view of the branch")


MAKEFILE = """\
prog: main.o a.o b.o
\tcc -o prog main.o a.o b.o
%.o: %.c common.h
\tcc -c -o $@ $<
"""


def make(cwd, *args, check=True):
    return run(["make", "-C", cwd] + list(args),
               "make %s in %s" % (" ".join(args), cwd), check=check)


@test(timeout=120)
def make_on_a_is_up_to_date_on_b(ctx):
    if not shutil.which("make") or not shutil.which("cc"):
        fail("make or cc is not installed (scripts/deps.sh installs build-essential)")
    srv = ctx.server()
    a = ctx.mount(srv, "a")
    b = ctx.mount(srv, "b")
    pa, pb = a.p("proj"), b.p("proj")
    write(os.path.join(pa, "Makefile"), MAKEFILE)
    write(os.path.join(pa, "common.h"), "int fa(void);\nint fb(void);\n")
    write(os.path.join(pa, "main.c"), '#include <stdio.h>\n#include "common.h"\n'
          'int main(void) { printf("%d\\n", fa() + fb()); return 0; }\n')
    write(os.path.join(pa, "a.c"), '#include "common.h"\nint fa(void) { return 1; }\n')
    write(os.path.join(pa, "b.c"), '#include "common.h"\nint fb(void) { return 2; }\n')
    make(pa)
    out = run([os.path.join(pb, "prog")], "the program on B", timeout=30).stdout
    expect_eq(out, "3\n", "the program built on A, run on B")
    q = make(pb, "-q", check=False)
    expect_eq(q.returncode, 0, "make -q on B right after A's build (0: up to date; %s)"
              % (q.stdout + q.stderr).strip()[-300:])
    # A change on B, a second later (make compares mtimes): A rebuilds
    # that object and the program, nothing else.
    time.sleep(1.1)
    write(os.path.join(pb, "b.c"), '#include "common.h"\nint fb(void) { return 40; }\n')
    r = make(pa)
    lines = r.stdout.splitlines()
    expect_eq(sorted(l.split()[-1] for l in lines if l.startswith("cc -c")), ["b.c"],
              "what make on A compiled after b.c changed on B")
    expect(any(l.startswith("cc -o prog") for l in lines),
           "make on A did not link the program again: %s" % lines)
    out = run([os.path.join(pb, "prog")], "the program on B", timeout=30).stdout
    expect_eq(out, "41\n", "the rebuilt program, run on B")
    expect_eq(make(pb, "-q", check=False).returncode, 0, "make -q on B after A's rebuild")


def tree_listing(top):
    """{relative path: (type, mode, uid, gid, nlink, size, mtime_ns, link
    target)} of everything under top, by lstat; a directory's size is left
    out (it is the file system's own)."""
    out = {}
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            isdir = stat.S_ISDIR(st.st_mode)
            out[os.path.relpath(p, top)] = (
                stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid,
                st.st_gid, st.st_nlink, None if isdir else st.st_size,
                st.st_mtime_ns, os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
    return out


@test(timeout=200)
def tar_extracted_on_a_reads_on_b_as_on_local_disk(ctx):
    src = ctx.path("src")
    os.makedirs(src)
    shutil.copytree("/usr/include/linux", os.path.join(src, "linux"), symlinks=True)
    os.link(os.path.join(src, "linux", "fs.h"), os.path.join(src, "hard-fs.h"))
    os.symlink("linux/fs.h", os.path.join(src, "sym-fs.h"))
    priv = os.path.join(src, "private")
    os.mkdir(priv, 0o700)
    write(os.path.join(priv, "f"), "private\n")
    os.chmod(os.path.join(priv, "f"), 0o640)
    os.chown(os.path.join(priv, "f"), 1234, 5678)
    old = 981173106 * 10**9 + 123456789    # 2001-02-03, to the nanosecond
    for p in (os.path.join(priv, "f"), priv):
        os.utime(p, ns=(old, old))
    archive = ctx.path("t.tar")
    run(["tar", "--format=posix", "-C", src, "-cf", archive, "."], "tar -c")

    srv = ctx.server()
    a = ctx.mount(srv, "a")
    b = ctx.mount(srv, "b")
    local = ctx.path("local")
    os.makedirs(local)
    os.mkdir(a.p("x"))
    run(["tar", "-C", local, "-xpf", archive], "tar -x on local disk")
    run(["tar", "-C", a.p("x"), "-xpf", archive], "tar -x on A")
    want = tree_listing(local)
    print("# %d names in the archive" % len(want))
    for side, top in (("A", a.p("x")), ("B", b.p("x"))):
        got = tree_listing(top)
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        expect(not diff, "%s differs from the local extraction in %d names, e.g.:\n  %s"
               % (side, len(diff), "\n  ".join("%s: local %s, %s %s" % (k, want.get(k), side,
                                                                      got.get(k))
                                               for k in diff[:5])))
    bad = []
    for rel, meta in sorted(want.items()):
        if meta[0] == stat.S_IFREG:
            with open(os.path.join(local, rel), "rb") as f1, open(b.p("x", rel), "rb") as f2:
                if f1.read() != f2.read():
                    bad.append(rel)
    expect(not bad, "files whose bytes differ on B: %s" % bad[:10])


if __name__ == "__main__":
    H.main()
