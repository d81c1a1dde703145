#!/usr/bin/env python3
"""record_ccache.py - seed fuzz_ccache_rec's corpus with the records of a
real chunk cache (client/ccache_rec.h).

    tests/fuzz/record_ccache.py BUILD_DIR [--out DIR]

Starts a `cairn serve` and a `cairn mount` with a small --cache-size
(through the harness of tests/integration, so everything is cleaned up),
writes files of several sizes (a few bytes to a few MiB), remounts and
reads them, so chunks of every length class are cached, some evicted, then
reads the cache directory while the mount is still up (the dirty marker
exists) and once more after unmounting. It keeps, each as a kind byte (the
enum of tests/fuzz/fuzz_ccache_rec.c) and the record:
  - every chunk file's name, whole header, and the header's fixed part;
  - the dirty marker;
  - every key and value of the index's "chunks", "lru" and "lineage"
    databases (mdb_dump, Debian package lmdb-utils; without it they are
    skipped).
File names are KIND-HASH of the content, so a re-run adds only what is
new. DIR defaults to tests/fuzz/corpus/fuzz_ccache_rec.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness as H  # noqa: E402

KINDS = ["key", "val", "tick", "hdr_size", "hdr", "name", "boot", "fid", "lin"]
HDR_FIXED = 44


def save(out, kind, rec, seen):
    body = bytes([KINDS.index(kind)]) + rec
    h = hashlib.sha1(body).hexdigest()[:16]
    if h in seen:
        return
    seen.add(h)
    with open(os.path.join(out, "%s-%s" % (kind, h)), "wb") as f:
        f.write(body)


def hdr_len(fixed):
    """Header size announced by the fixed part (u32 nblk at 40)."""
    nblk = int.from_bytes(fixed[40:44], "little")
    return HDR_FIXED + 4 * nblk + 4


def from_dir(cache, out, seen):
    root = os.path.join(cache, "chunks")
    for d in sorted(os.listdir(root)):
        sub = os.path.join(root, d)
        if len(d) != 2 or not os.path.isdir(sub):
            continue
        for name in sorted(os.listdir(sub)):
            save(out, "name", name.encode(), seen)
            with open(os.path.join(sub, name), "rb") as f:
                head = f.read(HDR_FIXED + 4 * 32 + 4)
            save(out, "hdr_size", head[:HDR_FIXED], seen)
            save(out, "hdr", head[:hdr_len(head)], seen)
    marker = os.path.join(root, "dirty")
    if os.path.exists(marker):
        with open(marker, "rb") as f:
            save(out, "boot", f.read(), seen)
    if not shutil.which("mdb_dump"):
        print("record_ccache: no mdb_dump (lmdb-utils): index records skipped")
        return
    for db, kk, vk in (("chunks", "key", "val"), ("lru", "tick", "key"),
                       ("lineage", "fid", "lin")):
        p = subprocess.run(["mdb_dump", "-s", db, os.path.join(root, "index")],
                           stdout=subprocess.PIPE, text=True, check=True)
        lines = [l.strip() for l in p.stdout.splitlines() if l.startswith(" ")]
        for k, v in zip(lines[0::2], lines[1::2]):
            save(out, kk, bytes.fromhex(k), seen)
            save(out, vk, bytes.fromhex(v), seen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fuzz", "corpus",
                                                  "fuzz_ccache_rec"))
    args = ap.parse_args()
    H.setup_process(args.build)
    os.makedirs(args.out, exist_ok=True)
    seen = {n.split("-", 1)[1] for n in os.listdir(args.out) if "-" in n}
    before = len(seen)
    ctx = H.Ctx("record-ccache")
    try:
        srv = ctx.server()
        extra = ["--cache-size", "6M"]
        m = ctx.mount(srv, "a", extra=extra)
        sizes = [1, 100, 4095, 32768, 32769, 100000, 1 << 20, (1 << 20) + 1,
                 3 << 20, (5 << 20) + 12345]
        for i, n in enumerate(sizes):
            H.write_file(m.p("f%d" % i), os.urandom(n))
        m.umount()
        m.mount(extra=extra)
        # largest first, so that what the limit keeps at the end spans
        # every header size (1 to 32 blocks) and short last chunks
        for i in reversed(range(len(sizes))):
            H.read_file(m.p("f%d" % i))
        from_dir(m.cache, args.out, seen)   # mounted: with the marker
        m.umount()
        from_dir(m.cache, args.out, seen)
    finally:
        ctx.cleanup()
    print("record_ccache: %d new inputs in %s" % (len(seen) - before, args.out))


if __name__ == "__main__":
    main()
