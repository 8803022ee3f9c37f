#!/usr/bin/env python3
"""tinybatches.py - a Produce request of ~10 MB made of minimal batches
(18-byte magic 0 entries with an empty value... 6-byte bodies; and 61-byte
v2 batch headers with no records): every batch header is read through
user space.  Times S (streamed) against H (held) and compares the lines."""
import struct
import sys
import time

from advlib import (Pair, RecBroker, connect, norm, produce, read_frame,
                    asan_problems, req_lines, wait_for)


def main():
    broker = RecBroker()
    pair = Pair(broker, extra="max_frame_bytes = 33554432")
    m0 = b"".join(struct.pack(">qi", i, 6) + b"\x00\x00\x00\x00\x00\x00"
                  for i in range(10 * 1024 * 1024 // 18))
    v2 = bytearray(61)
    struct.pack_into(">i", v2, 8, 49)
    v2[16] = 2
    struct.pack_into(">i", v2, 57, 3)
    v2 = bytes(v2) * (10 * 1024 * 1024 // 61)
    bad = 0
    for name, rec, corr in (("magic0 x18B", m0, 1), ("v2 x61B", v2, 2)):
        f = produce(8, [("t1", [(0, rec)])], corr=corr)
        res = {}
        for tag, k in (("S", pair.s), ("H", pair.h)):
            s = connect(k.port)
            s.settimeout(60)
            t0 = time.time()
            s.sendall(f)
            r = read_frame(s)
            dt = time.time() - t0
            s.close()
            ln = wait_for(lambda: req_lines(k, corr), 5)
            res[tag] = (dt, ln)
            print("%s %s: %.2f s, response %s, records %r" % (
                name, tag, dt, r is not None,
                ln and ln[0]["topics"][0].get("records")))
        a, b = norm(res["S"][1][0]), norm(res["H"][1][0])
        if a != b:
            bad += 1
            print("  lines differ", a, b)
    for rc, out in pair.stop():
        if asan_problems(out):
            print(out[-3000:])
            bad += 1
    pair.cleanup()
    broker.stop()
    print("bad:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
