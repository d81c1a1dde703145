#!/usr/bin/env python3
# timeout: 120
"""test_mount.py - what `cairn mount` and `cairn umount` do to the mount
itself, beyond serving files: the readahead raised after FUSE INIT, before
`cairn mount` returns, on mount points whose paths need escaping in
/proc/self/mountinfo too.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def mountinfo_dev(path):
    """MAJ:MIN of the newest mount on path, from mountinfo (unescaped)."""
    dev = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mp = H.mountinfo_unescape(fields[4])
            if mp == path:
                dev = fields[2]
    return dev


def readahead_kb(path):
    dev = mountinfo_dev(path)
    H.expect(dev is not None, "%r not found in /proc/self/mountinfo" % path)
    with open("/sys/class/bdi/%s/read_ahead_kb" % dev) as f:
        return int(f.read())


def expect_readahead(m, want):
    # `cairn mount` returns only once the daemon serves with the
    # readahead raised: the first read already goes in 1 MiB requests.
    H.expect_eq(readahead_kb(m.path), want,
                "read_ahead_kb of %r right after cairn mount returned" % m.path)


def check_mount(ctx, name):
    srv = ctx.servers[0] if ctx.servers else ctx.server()
    m = ctx.mount(srv, name=name)
    expect_readahead(m, 1024)
    H.write_file(m.p("f"), b"x" * 100000)
    H.expect_eq(H.read_file(m.p("f")), b"x" * 100000, "content")
    r = H.run_cairn(["umount", m.path], timeout=30)
    H.expect(r.returncode == 0, "cairn umount %r exited %d: %s"
             % (m.path, r.returncode, r.stderr.strip()))
    H.expect(not H.is_mounted(m.path), "%r still mounted after umount" % m.path)


@H.test
def readahead_raised_to_1_MiB(ctx):
    check_mount(ctx, "plain")


@H.test
def readahead_raised_with_a_space_in_the_path(ctx):
    check_mount(ctx, "with space")


@H.test
def readahead_raised_with_a_tab_and_backslash_in_the_path(ctx):
    check_mount(ctx, "tab\there\\and")


if __name__ == "__main__":
    H.main()
