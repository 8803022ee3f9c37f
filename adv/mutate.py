#!/usr/bin/env python3
"""mutate.py - one byte of a large Produce request changed at every
structural offset (header, body fields, each batch header, the tail),
sent to S (audit only: streamed) and H (audit_body: held), each followed
by a Metadata request on the same connection.  Reports where the two
krelays differ: audit line (decode_error wording aside), upstream bytes,
responses the client got, connection kept or closed.

Usage: mutate.py VERSION [VALUES]   (VALUES: comma list of byte values or
'x' for orig^1; default 0,255,127,x)"""
import socket
import struct
import sys
import time

from advlib import (Pair, RecBroker, batch, connect, norm, produce,
                    read_frame, asan_problems)


def metadata(corr):
    p = struct.pack(">hhi", 3, 1, corr) + struct.pack(">h", 3) + b"adv" + \
        struct.pack(">i", 0)
    return struct.pack(">i", len(p)) + p


def offsets(frame, ver):
    """Structural offsets: everything but record bodies."""
    out = set(range(4, 80))
    # find batches: RecordBatch magic 2 start with baseOffset 0 ... search
    # for the records of our known layout by scanning for b'\x02' at +16
    i = 0
    while True:
        j = frame.find(b"\x00\x00\x00\x00\x00\x00\x00\x00", i)
        if j < 0:
            break
        if j + 17 < len(frame) and frame[j + 16] == 2 and \
                frame[j + 12:j + 16] == b"\xff\xff\xff\xff":
            out.update(range(j - 24, j + 62))
            i = j + 61
        else:
            i = j + 1
    out.update(range(len(frame) - 40, len(frame)))
    return sorted(o for o in out if 4 <= o < len(frame))


def one(k, broker, frame, corr):
    before = len(k.audit_lines())
    s = connect(k.port)
    s.settimeout(3)
    try:
        s.sendall(frame + metadata(corr + 1000))
    except OSError:
        pass
    got = []
    while True:
        f = read_frame(s)
        if f is None:
            got.append("closed")
            break
        c = struct.unpack(">i", f[4:8])[0]
        got.append(c)
        if c == corr + 1000:
            break
    s.close()
    t0 = time.time()
    lines = []
    while time.time() - t0 < 2:
        lines = [x for x in k.audit_lines()[before:]
                 if x.get("type") == "request" and x.get("api") == "Produce"]
        if lines:
            break
        time.sleep(0.02)
    ups = [f for f in broker.produce_frames()]
    broker.reset()
    return got, lines, ups


def main():
    ver = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    vals = (sys.argv[2] if len(sys.argv) > 2 else "0,255,127,x").split(",")
    rec = batch(600, 100, 1)
    t1 = "t1" if ver < 13 else bytes(range(1, 17))
    frame = produce(ver, [(t1, [(0, rec + batch(3, 100, 2)),
                                (1, batch(2, 50, 3))]),
                          ("t2" if ver < 13 else bytes(range(2, 18)),
                           [(0, batch(1, 10, 4))])],
                    txn="tx" if ver >= 3 else None, corr=7)
    assert len(frame) - 4 >= 65536
    broker = RecBroker()
    pair = Pair(broker)
    diffs = 0
    n = 0
    stats = {"lines": 0, "derr": 0, "closed": 0, "norecords": 0}
    try:
        for off in offsets(frame, ver):
            for v in vals:
                m = bytearray(frame)
                nv = m[off] ^ 1 if v == "x" else int(v)
                if nv == m[off]:
                    continue
                m[off] = nv
                m = bytes(m)
                corr = struct.unpack(">i", m[8:12])[0]
                n += 1
                rs = one(pair.s, broker, m, corr)
                rh = one(pair.h, broker, m, corr)
                why = []
                if rs[0] != rh[0]:
                    why.append("responses S %r H %r" % (rs[0], rh[0]))
                if len(rs[1]) != len(rh[1]):
                    why.append("lines S %d H %d" % (len(rs[1]), len(rh[1])))
                elif rs[1]:
                    a, b = norm(rs[1][0]), norm(rh[1][0])
                    a.pop("decode_error", None) if "decode_error" in b \
                        else None
                    b.pop("decode_error", None)
                    if a != b:
                        why.append("line %r" % {
                            x: (a.get(x), b.get(x)) for x in set(a) | set(b)
                            if a.get(x) != b.get(x)})
                    if ("decode_error" in rs[1][0]) != \
                            ("decode_error" in rh[1][0]):
                        why.append("decode_error S %r H %r" % (
                            rs[1][0].get("decode_error"),
                            rh[1][0].get("decode_error")))
                if rs[2] != rh[2]:
                    why.append("upstream S %d frames H %d frames, S==sent %s"
                               % (len(rs[2]), len(rh[2]), rs[2] == [m]))
                if rs[2] and rs[2] != [m]:
                    why.append("S upstream != sent")
                stats["lines"] += bool(rs[1])
                stats["derr"] += bool(rs[1] and "decode_error" in rs[1][0])
                stats["closed"] += "closed" in rs[0]
                stats["norecords"] += bool(rs[1] and any(
                    "records" not in t for t in rs[1][0].get("topics", [])))
                if why:
                    diffs += 1
                    print("off %d (%02x->%02x): %s" % (off, frame[off], nv,
                                                       "; ".join(why)))
                    sys.stdout.flush()
                if not pair.s.alive() or not pair.h.alive():
                    print("krelay died at off %d" % off)
                    raise SystemExit(2)
    finally:
        for rc, out in pair.stop():
            p = asan_problems(out)
            if p or rc not in (0, None):
                print("krelay exit %r %s\n%s" % (rc, p, out[-4000:]))
                diffs += 1
        pair.cleanup()
        broker.stop()
    print("v%d: %d mutations, %d differ; S: %r" % (ver, n, diffs, stats))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
