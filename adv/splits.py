#!/usr/bin/env python3
"""splits.py - a large Produce request (then, pipelined in the same
write, a small Produce and a Metadata request) cut in two at every offset
of its structural regions, with a pause between the two writes; and the
whole thing sent one byte per write.  Against S (audit only: streamed)
only: every audit line must equal the one of the request sent whole, the
broker must get exactly the bytes sent.  Usage: splits.py VERSION"""
import struct
import sys
import time

from advlib import (Krelay, Pair, RecBroker, batch, connect, norm, produce,
                    read_frame, asan_problems)

from mutate import metadata, offsets


def run(k, broker, data, cuts, pause, want_corrs):
    before = len(k.audit_lines())
    s = connect(k.port)
    last = 0
    for c in cuts:
        s.sendall(data[last:c])
        last = c
        if pause:
            time.sleep(pause)
    s.sendall(data[last:])
    got = []
    while len(got) < len(want_corrs):
        f = read_frame(s)
        if f is None:
            got.append("closed")
            break
        got.append(struct.unpack(">i", f[4:8])[0])
    s.close()
    t0 = time.time()
    while time.time() - t0 < 3:
        lines = [x for x in k.audit_lines()[before:]
                 if x.get("type") == "request"]
        if len(lines) >= 2:
            break
        time.sleep(0.02)
    time.sleep(0.05)
    ups = []
    for c in broker.conns:
        ups.append(bytes(c.raw))
    broker.reset()
    return got, [norm(x) for x in lines], ups


def main():
    ver = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    name = "t1" if ver < 13 else bytes(range(1, 17))
    big = produce(ver, [(name, [(0, batch(600, 100, 1) + batch(3, 100, 2)),
                                (1, batch(2, 50, 3))])],
                  txn="tx" if ver >= 3 else None, corr=7)
    small = produce(ver, [(name, [(0, batch(2, 10, 5))])], corr=8)
    data = big + small + metadata(9)
    broker = RecBroker()
    k = Krelay(broker.port, Pair.S_RULES)
    bad = 0
    try:
        ref = run(k, broker, data, [], 0, [7, 8, 9])
        print("reference:", ref[0], [(x["correlation_id"],
                                      x.get("topics")) for x in ref[1]])
        assert ref[0] == [7, 8, 9], ref[0]
        # upstream: the client's bytes, in order (krelay's own requests on
        # the connection come first: ApiVersions)
        assert any(u.endswith(data) for u in ref[2]), "upstream != sent"
        offs = offsets(big, ver)
        offs += list(range(len(big) - 8, len(big) + 40))
        for i in sorted(set(offs)):
            r = run(k, broker, data, [i], 0.005, [7, 8, 9])
            why = []
            if r[0] != ref[0]:
                why.append("responses %r" % r[0])
            if r[1] != ref[1]:
                why.append("lines %r" % r[1])
            if not any(u.endswith(data) for u in r[2]):
                why.append("upstream bytes differ")
            if why:
                bad += 1
                print("cut at %d: %s" % (i, "; ".join(why)))
        t0 = time.time()
        r = run(k, broker, data, list(range(1, len(data))), 0, [7, 8, 9])
        print("one byte per write (%d writes, %.1f s): %s" % (
            len(data), time.time() - t0,
            "ok" if r[0] == ref[0] and r[1] == ref[1] and
            any(u.endswith(data) for u in r[2]) else "BAD %r" % (r[:2],)))
        if not (r[0] == ref[0] and r[1] == ref[1]):
            bad += 1
    finally:
        rc, out = k.stop()
        p = asan_problems(out)
        if p or rc not in (0, None):
            print("krelay exit %r %s\n%s" % (rc, p, out[-4000:]))
            bad += 1
        print([x for x in k.logtext().splitlines() if "totals" in x])
        k.cleanup()
        broker.stop()
    print("v%d: %d bad" % (ver, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
