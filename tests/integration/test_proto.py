#!/usr/bin/env python3
# timeout: 120
"""test_proto.py - every protocol op straight against a live server, no
FUSE in between: runs proto_client.py's self test (one "ok"/"not ok" line
per check) against a fresh `cairn serve` and passes its lines through.
Afterwards the server must stop cleanly and `cairn fsck` must pass.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) != 2:
        print("usage: %s BUILD_DIR" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    H.setup_process(sys.argv[1])
    ctx = H.Ctx("proto")
    failed = 0
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
