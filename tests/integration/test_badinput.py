#!/usr/bin/env python3
# timeout: 180
"""test_badinput.py - malformed input against a live server.

Each case opens a connection, completes AUTH (docs/PROTOCOL.md
"Handshake"; its frames are then sealed by the connection, so what is
malformed reaches the server's decoder) and misbehaves; test_auth.py
covers the handshake itself. Afterwards the server
log must hold a line naming that peer (ip:port) and a reason, the server
must still be running, a mount made at the start must still work, and a
new well-behaved connection must still get answers (docs/PROTOCOL.md,
"Frames": the offender is disconnected, nothing else is affected).
"""

import errno
import os
import random
import re
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from harness import test, expect, expect_eq, fail  # noqa: E402

import proto_client as P  # noqa: E402

HDR = P.HDR
MAX_PAYLOAD = P.MAX_PAYLOAD
OP_HELLO, OP_PING, OP_GETATTR, OP_LOOKUP, OP_WRITE = (P.OP_HELLO, P.OP_PING, P.OP_GETATTR,
                                                      P.OP_LOOKUP, P.OP_WRITE)


def frame(op, payload=b"", flags=0, rid=1, status=0, length=None):
    return P.frame(op, payload, flags=flags, id=rid, status=status, length=length)


def hello_payload(version=P.VERSION, magic=P.MAGIC):
    return struct.pack("<II", magic, version) + os.urandom(16) + struct.pack("<I", 0)


def connect(ctx):
    return P.Conn("127.0.0.1", ctx.srv.port, timeout=10)


def peer_of(c):
    return "127.0.0.1:%d" % c.sock.getsockname()[1]


def log_mark(ctx):
    return len(ctx.srv.log_lines())


# Routine per-connection lines (connect, handshake, disconnect) are not
# the "one line naming the peer and the reason" the protocol asks for.
ROUTINE = re.compile(r": (connected|disconnected|hello\b.*)$")


def expect_logged(ctx, mark, peer, what):
    """Exactly one new, non-routine server log line names `peer`, with a
    reason after it."""
    end = time.time() + 5
    lines = []
    while time.time() < end:
        lines = [l for l in ctx.srv.log_lines()[mark:] if peer in l and not ROUTINE.search(l)]
        if lines:
            break
        time.sleep(0.05)
    if not lines:
        new = [l for l in ctx.srv.log_lines()[mark:] if peer in l]
        fail("%s: no server log line gives a reason for dropping peer %s; its lines: %s"
             % (what, peer, new[-5:] if new else "none"))
    time.sleep(0.1)   # let a second line about the same peer show up
    lines = [l for l in ctx.srv.log_lines()[mark:] if peer in l and not ROUTINE.search(l)]
    expect(len(lines) == 1, "%s: %d log lines about one bad peer (one expected): %s"
           % (what, len(lines), lines[:4]))
    rest = lines[0].split(peer, 1)[1]
    expect(len(rest.strip(" :-,()[]")) >= 4, "%s: log line names the peer but no reason: %r"
           % (what, lines[0]))
    print("# %s -> %s" % (what, lines[0].strip()))


def still_serving(ctx, what):
    expect(ctx.srv.running(), "%s: server process died (exit %s)" % (what, ctx.srv.proc.poll()))
    # A new, well-behaved connection is served.
    c = connect(ctx)
    try:
        root = c.hello()
        expect_eq(c.getattr(root["fid"])["fid"], root["fid"],
                  "%s: GETATTR of the root on a new connection" % what)
    except (P.CairnError, P.ProtocolError, EOFError, OSError) as e:
        fail("%s: a new well-behaved connection is not served: %s" % (what, e))
    finally:
        c.close()
    # The mount made before the attack still works.
    ctx.k += 1
    p = ctx.A.p("alive-%d" % ctx.k)
    data = os.urandom(5000)
    with open(p, "wb") as f:
        f.write(data)
    with open(p, "rb") as f:
        expect(f.read() == data, "%s: mount read back wrong data afterwards" % what)
    expect(("alive-%d" % ctx.k) in os.listdir(ctx.A.path), "%s: new file not listed on the mount" % what)


class Sealing:
    """What attacks write to: whole frames sealed (Conn.send_raw), other
    bytes as they are."""

    def __init__(self, c):
        self.c = c

    def sendall(self, data):
        self.c.send_raw(data)

    def shutdown(self, how):
        self.c.sock.shutdown(how)


def attack(ctx, what, send, after_hello=False):
    """Connect (and say HELLO), call send(sock), expect the server to
    close the connection and log one line about it."""
    mark = log_mark(ctx)
    c = connect(ctx)
    peer = peer_of(c)
    try:
        if after_hello:
            c.hello()
        try:
            send(Sealing(c))
        except (BrokenPipeError, ConnectionResetError):
            pass   # the server already hung up: fine
        try:
            closed = c.closed_by_server(5)
        except P.ProtocolError as e:
            fail("%s: server sent a malformed frame back: %s" % (what, e))
        expect(closed, "%s: server did not close the connection" % what)
    finally:
        c.close()
    expect_logged(ctx, mark, peer, what)
    still_serving(ctx, what)


# The server's handshake deadline here (default 10 s; --handshake-timeout).
HANDSHAKE_S = 5


def setup(ctx):
    ctx.srv = ctx.server(extra=("--handshake-timeout", str(HANDSHAKE_S)))
    ctx.A = ctx.mount(ctx.srv, "a")
    ctx.k = 0


@test
def random_garbage(ctx):
    rng = random.Random(1)
    for i in range(3):
        junk = bytes(rng.getrandbits(8) for _ in range(1000 + i * 3000))
        attack(ctx, "random garbage #%d" % i, lambda s: s.sendall(junk))


@test
def garbage_with_plausible_header(ctx):
    # Small len, opcode HELLO, but the payload is junk (bad magic).
    attack(ctx, "HELLO with bad magic", lambda s: s.sendall(frame(OP_HELLO, hello_payload(magic=0x12345678))))


@test
def oversized_frame_header(ctx):
    attack(ctx, "oversized frame header",
           lambda s: s.sendall(HDR.pack(MAX_PAYLOAD + 1, OP_HELLO, 0, 1, 0) + b"x" * 100))
    attack(ctx, "4 GiB frame header after HELLO",
           lambda s: s.sendall(HDR.pack(0xFFFFFFFF, OP_WRITE, 0, 2, 0)), after_hello=True)


@test
def wrong_protocol_version(ctx):
    mark = log_mark(ctx)
    c = connect(ctx)
    peer = peer_of(c)
    try:
        c.send_raw(frame(OP_HELLO, hello_payload(version=99), rid=5))
        try:
            op, flags, rid, status, payload = c.recv_frame()
        except (EOFError, ConnectionResetError):
            fail("no reply to a HELLO with version 99 (expected -EPROTONOSUPPORT), connection closed")
        expect_eq((op, bool(flags & P.WF_REPLY), rid, status), (OP_HELLO, True, 5, -errno.EPROTONOSUPPORT),
                  "(op, reply flag, id, status) of the reply to HELLO version 99")
        expect_eq(payload, b"", "payload of an error reply")
        expect(c.closed_by_server(5), "server did not close after refusing version 99")
    finally:
        c.close()
    expect_logged(ctx, mark, peer, "wrong protocol version")
    still_serving(ctx, "wrong protocol version")


@test
def request_before_hello(ctx):
    attack(ctx, "GETATTR before HELLO",
           lambda s: s.sendall(frame(OP_GETATTR, struct.pack("<IQI", 1, 1, 1))))
    attack(ctx, "PING before HELLO", lambda s: s.sendall(frame(OP_PING)))


@test
def truncated_frame_then_close(ctx):
    def send(s):
        s.sendall(frame(OP_HELLO, hello_payload())[:HDR.size + 10])
        time.sleep(0.1)
        s.shutdown(socket.SHUT_WR)
    attack(ctx, "truncated HELLO then close", send)

    def send_hdr(s):
        s.sendall(HDR.pack(28, OP_HELLO, 0, 1, 0)[:7])
        time.sleep(0.1)
        s.shutdown(socket.SHUT_WR)
    attack(ctx, "half a header then close", send_hdr)

    def send_write(s):
        s.sendall(HDR.pack(100000, OP_WRITE, 0, 3, 0) + b"w" * 5000)
        time.sleep(0.1)
        s.shutdown(socket.SHUT_WR)
    attack(ctx, "WRITE cut off mid-payload then close", send_write, after_hello=True)


@test
def valid_hello_then_truncated_payload(ctx):
    # LOOKUP: fid dir, str name. Name length says 10, 3 bytes present.
    bad = struct.pack("<IQI", 1, 1, 1) + struct.pack("<H", 10) + b"abc"
    attack(ctx, "LOOKUP with truncated name", lambda s: s.sendall(frame(OP_LOOKUP, bad, rid=11)),
           after_hello=True)
    # GETATTR with a short fid.
    attack(ctx, "GETATTR with 5-byte fid", lambda s: s.sendall(frame(OP_GETATTR, b"\1\0\0\0\1", rid=12)),
           after_hello=True)


@test
def trailing_bytes_and_overlong_string(ctx):
    attack(ctx, "GETATTR with a trailing byte",
           lambda s: s.sendall(frame(OP_GETATTR, struct.pack("<IQI", 1, 1, 1) + b"\0", rid=13)),
           after_hello=True)
    # A name over 255 bytes: PROTOCOL.md allows either answer, a clean
    # -ENAMETOOLONG (the string decoded fine, the name is invalid) or a
    # disconnect (the string is over its decoding limit). Nothing else.
    mark = log_mark(ctx)
    c = connect(ctx)
    peer = peer_of(c)
    try:
        root = c.hello()
        try:
            c.lookup(root["fid"], "n" * 300)
            fail("LOOKUP of a 300-byte name succeeded")
        except P.CairnError as e:
            expect_eq(e.errno, errno.ENAMETOOLONG, "errno of LOOKUP with a 300-byte name")
            c.ping()
            closed = False
        except (EOFError, ConnectionResetError):
            closed = True
    finally:
        c.close()
    if closed:
        expect_logged(ctx, mark, peer, "LOOKUP with a 300-byte name")
    still_serving(ctx, "LOOKUP with a 300-byte name")


@test
def unknown_flag_bits(ctx):
    attack(ctx, "PING with unknown flag bits", lambda s: s.sendall(frame(OP_PING, flags=0x80, rid=15)),
           after_hello=True)


@test
def unknown_opcode_answered_enosys(ctx):
    c = connect(ctx)
    try:
        c.hello()
        c.send_raw(frame(999, b"whatever", rid=1000021))
        try:
            r = c.recv_frame()
            # A break of the root (the HELLO reply promised it) may come
            # first: another test's client still sending its changes.
            while r[1] & P.WF_PUSH:
                r = c.recv_frame()
        except (EOFError, ConnectionResetError):
            fail("connection closed on an unknown opcode (expected a -ENOSYS reply)")
        expect_eq((r[0], r[2], r[3]), (999, 1000021, -errno.ENOSYS), "(op, id, status) for unknown opcode")
        c.ping()
    finally:
        c.close()
    still_serving(ctx, "unknown opcode")


@test
def second_hello_and_many_bad_peers(ctx):
    # Fifty bad connections at once: the server keeps serving the mount.
    conns = []
    for i in range(50):
        c = connect(ctx)
        conns.append(c)
        try:
            c.send_raw(os.urandom(64) if i % 2 else frame(OP_GETATTR, b"x" * 16))
        except OSError:
            pass
    for c in conns:
        try:
            c.closed_by_server(2)
        except Exception:
            pass
        c.close()
    expect(ctx.srv.running(), "server died under 50 bad connections")
    still_serving(ctx, "50 bad peers")


@test
def idle_partial_frame_does_not_block_others(ctx):
    # A peer that sends half a header and goes quiet must not stall anyone.
    c = connect(ctx)
    try:
        c.send_raw(HDR.pack(28, OP_HELLO, 0, 1, 0)[:5])
        t0 = time.time()
        still_serving(ctx, "while a peer sits on half a header")
        expect(time.time() - t0 < 10, "serving others took %.1fs while a peer stalls" % (time.time() - t0))
    finally:
        c.close()


def server_rss_kb(ctx):
    with open("/proc/%d/status" % ctx.srv.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@test
def big_first_frame_refused_before_allocation(ctx):
    # A stranger announcing a 4 MiB "HELLO" must be dropped on the header,
    # before the server allocates or reads the payload: 40 such peers
    # holding their connections open must not cost the server 160 MiB.
    before = server_rss_kb(ctx)
    socks = []
    try:
        for i in range(40):
            s = socket.create_connection(("127.0.0.1", ctx.srv.port), timeout=5)
            socks.append(s)
            try:
                s.sendall(HDR.pack(MAX_PAYLOAD, OP_HELLO, 0, 1, 0) + b"\xab" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
        time.sleep(0.5)
        grown = server_rss_kb(ctx) - before
        expect(grown < 64 * 1024, "server grew by %d KiB for 40 oversized first frames" % grown)
    finally:
        for s in socks:
            s.close()
    expect(any("first frame is not an AUTH" in l for l in ctx.srv.log_lines()),
           "no log line says the first frame was refused")
    still_serving(ctx, "oversized first frames")


@test
def silent_peer_dropped_after_handshake_timeout(ctx):
    # A peer that connects and never says HELLO is dropped after
    # --handshake-timeout (HANDSHAKE_S), and the log says so.
    mark = log_mark(ctx)
    c = connect(ctx)
    peer = peer_of(c)
    t0 = time.time()
    try:
        expect(c.closed_by_server(HANDSHAKE_S + 5),
               "silent peer still connected after %d s" % (HANDSHAKE_S + 5))
    finally:
        c.close()
    took = time.time() - t0
    expect(took > HANDSHAKE_S - 1.5,
           "silent peer dropped after %.1f s, before --handshake-timeout %d"
           % (took, HANDSHAKE_S))
    expect_logged(ctx, mark, peer, "silent peer")
    expect(any("no HELLO within %d s" % HANDSHAKE_S in l
               for l in ctx.srv.log_lines()[mark:]),
           "log does not say the peer sent no HELLO within %d s" % HANDSHAKE_S)


@test
def trickling_stranger_dropped_at_deadline(ctx):
    # The handshake limit is a deadline, not a per-read timeout: a peer
    # sending one byte of a HELLO every second is still dropped after
    # about HANDSHAKE_S.
    mark = log_mark(ctx)
    c = connect(ctx)
    peer = peer_of(c)
    hello = frame(OP_HELLO, hello_payload())
    t0 = time.time()
    closed = False
    try:
        for b in hello:
            try:
                c.send_raw(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if c.closed_by_server(1.0):
                closed = True
                break
            if time.time() - t0 > HANDSHAKE_S + 6:
                break
    finally:
        c.close()
    took = time.time() - t0
    expect(closed and took < HANDSHAKE_S + 4,
           "trickling peer still connected after %.1f s" % took)
    # The server may close before its log line reaches the file.
    end = time.time() + 3
    while not any("no HELLO within" in l for l in ctx.srv.log_lines()[mark:]
                  if peer in l) and time.time() < end:
        time.sleep(0.05)
    expect(any("no HELLO within" in l for l in ctx.srv.log_lines()[mark:] if peer in l),
           "log does not say the trickling peer sent no HELLO in time")
    still_serving(ctx, "trickling stranger")

if __name__ == "__main__":
    H.main(setup=setup)
