#!/usr/bin/env python3
"""slow.py - a slow broker (reads 64 KiB every 2 ms) under several clients
streaming multi-MB Produce requests in random pieces at once (krelay S:
audit only; backpressure with splice lanes and the scanner), then the
broker is stopped with requests in flight.  Checks: every byte the broker
got equals what its client sent, every line counts its records, ASan
clean."""
import random
import struct
import sys
import threading
import time

from advlib import (Krelay, Pair, RecBroker, batch, connect, produce,
                    read_frame, send_pieces, asan_problems, req_lines)


def client(k, i, out):
    rnd = random.Random(i)
    s = connect(k.port)
    s.settimeout(60)
    frames = []
    for j in range(3):
        parts = [(p, batch(rnd.randrange(200, 3000), rnd.randrange(50, 900),
                           i * 10 + j * 3 + p) if p < 2 else None)
                 for p in range(3)]
        f = produce(rnd.choice([3, 7, 8, 9, 11]), [("t1", parts)],
                    corr=i * 100 + j, client_id="c%d" % i,
                    acks=rnd.choice([-1, 1, 0]))
        frames.append(f)
    data = b"".join(frames)
    send_pieces(s, data, rnd=rnd)
    got = []
    from advlib import produce_acks
    want = [struct.unpack(">i", f[8:12])[0] for f in frames
            if produce_acks(f) != 0]
    while len(got) < len(want):
        r = read_frame(s)
        if r is None:
            break
        got.append(struct.unpack(">i", r[4:8])[0])
    s.close()
    out[i] = (data, frames, got, want)


def main():
    broker = RecBroker()
    broker.slow = 0.002
    k = Krelay(broker.port, Pair.S_RULES)
    bad = 0
    try:
        out = {}
        ths = [threading.Thread(target=client, args=(k, i, out))
               for i in range(4)]
        t0 = time.time()
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        print("4 clients done in %.1f s" % (time.time() - t0))
        time.sleep(0.5)
        raws = [bytes(c.raw) for c in broker.conns]
        lines = req_lines(k)
        for i, (data, frames, got, want) in sorted(out.items()):
            ok_up = any(r.endswith(data) for r in raws)
            ok_rsp = got == want
            print("client %d: %d bytes, upstream %s, responses %s" % (
                i, len(data), "same" if ok_up else "DIFFER",
                "ok" if ok_rsp else "BAD %r vs %r" % (got, want)))
            bad += (not ok_up) + (not ok_rsp)
            for f in frames:
                corr = struct.unpack(">i", f[8:12])[0]
                ln = [x for x in lines if x["correlation_id"] == corr and
                      x["client_id"] == "c%d" % i]
                if len(ln) != 1 or "note" in ln[0]:
                    print("   line for %d: %r" % (corr, ln))
                    bad += 1
        # now requests in flight when the broker goes away
        broker.slow = 0.05
        s = connect(k.port)
        s.sendall(produce(8, [("t1", [(0, batch(3000, 500, 9))])], corr=77))
        time.sleep(0.3)
        broker.stop()
        r = read_frame(s)
        s.close()
        time.sleep(0.5)
        ln = req_lines(k, 77)
        print("broker stopped mid-request: response %r, line %r" % (
            r, [(x.get("note"), x.get("incomplete")) for x in ln]))
    finally:
        rc, out = k.stop()
        p = asan_problems(out)
        if p or rc not in (0, None):
            print("krelay exit %r %s\n%s" % (rc, p, out[-4000:]))
            bad += 1
        print([x for x in k.logtext().splitlines() if "totals" in x])
        k.cleanup()
    print("bad:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
