#!/usr/bin/env python3
# timeout: 240
"""test_apps.py - programs people run on a network file system, as they run
them, on two clients of one server.

- git: a repository made and committed to on A is whole on B (fsck, status,
  log); A keeps committing while the server is restarted (SIGTERM, then a
  new server on the same data directory and port): every commit returns,
  and B then sees all of them, a clean status and a repository fsck finds
  whole; a branch committed on B is A's at once.

(SQLite from two clients is in test_locks, rsync and cp in test_writeback.)
"""

import os
import shutil
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


def git(repo, *args, timeout=60):
    """Run git in repo; returns its stdout, fails the test on an error."""
    try:
        p = subprocess.run(["git", "-C", repo, "-c", "gc.auto=0",
                            "-c", "maintenance.auto=false"] + list(args),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout,
                           env=dict(os.environ, **GIT_ENV))
    except subprocess.TimeoutExpired:
        fail("git %s in %s: no answer within %d s" % (" ".join(args), repo, timeout))
    if p.returncode != 0:
        fail("git %s in %s: exit %d: %s" % (" ".join(args), repo, p.returncode,
                                            (p.stderr or p.stdout).strip()[-600:]))
    return p.stdout


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


if __name__ == "__main__":
    H.main()
