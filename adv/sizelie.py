#!/usr/bin/env python3
"""sizelie.py - a large Produce request whose size prefix lies: shorter
than the body (the frame ends inside a batch header or a records field;
the rest reads as the next frame), or longer (krelay waits; the client
then closes).  S (streamed) and H (held) must agree: line keys (wording
of decode_error aside), bytes upstream, the client's fate."""
import struct
import sys
import time

from advlib import (Pair, RecBroker, batch, connect, norm, produce,
                    read_frame, asan_problems)
from mutate import metadata


def run(k, broker, data):
    before = len(k.audit_lines())
    s = connect(k.port)
    s.settimeout(2)
    s.sendall(data)
    got = []
    while True:
        f = read_frame(s)
        if f is None:
            got.append("closed/timeout")
            break
        got.append(struct.unpack(">i", f[4:8])[0])
        if got[-1] == 99:
            break
    s.close()
    time.sleep(0.4)
    lines = [x for x in k.audit_lines()[before:] if x.get("type") == "request"]
    ups = [bytes(c.raw) for c in broker.conns]
    broker.reset()
    return got, lines, ups


def main():
    broker = RecBroker()
    pair = Pair(broker)
    bad = 0
    body = produce(8, [("t1", [(0, batch(700, 100, 1) + batch(3, 100, 2)),
                               (1, batch(2, 50, 3))])], txn="tx", corr=7)
    real = len(body) - 4
    try:
        for d in (-1, -10, -20, -61, -62, -200, -1000, -40000, 1, 100):
            n = real + d
            if n < 65536 and d < 0:
                pass
            f = struct.pack(">i", n) + body[4:]
            data = f + metadata(99)
            rs = run(pair.s, broker, data)
            rh = run(pair.h, broker, data)
            a = [norm(x) for x in rs[1]]
            b = [norm(x) for x in rh[1]]
            for x in a + b:
                x.pop("decode_error", None)
                x.pop("note", None)
            same = rs[0] == rh[0] and a == b and \
                [u.endswith(data[:n + 4]) or data[:n + 4] in u
                 for u in rs[2]] == [u.endswith(data[:n + 4]) or
                                     data[:n + 4] in u for u in rh[2]]
            print("size %+d: S %r H %r; S lines %r; H lines %r %s" % (
                d, rs[0], rh[0],
                [(x["correlation_id"], x.get("decode_error"), x.get("note"))
                 for x in rs[1]],
                [(x["correlation_id"], x.get("decode_error"), x.get("note"))
                 for x in rh[1]], "ok" if same else "DIFFER"))
            if not same:
                bad += 1
                print("   S", [(x.get("topics"), x.get("incomplete")) for x in rs[1]])
                print("   H", [(x.get("topics"), x.get("incomplete")) for x in rh[1]])
    finally:
        for rc, out in pair.stop():
            p = asan_problems(out)
            if p or rc not in (0, None):
                print("krelay exit %r %s\n%s" % (rc, p, out[-3000:]))
                bad += 1
        pair.cleanup()
        broker.stop()
    print("bad:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
