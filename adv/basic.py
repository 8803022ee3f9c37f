#!/usr/bin/env python3
"""basic.py - streamed (S) vs held (H) audit lines and upstream bytes for a
set of well-formed and malformed large Produce requests, v0..v13, sent
whole, byte by byte, and in random pieces.  Prints a line per case and
a summary of mismatches.  Usage: basic.py [CASE-SUBSTRING]"""
import struct
import sys
import time

from advlib import (Pair, RecBroker, batch, connect, norm, produce,
                    produce_acks, read_frame, req_lines, send_pieces,
                    wait_for, asan_problems)

TID = bytes(range(1, 17))


def big(n=800, seed=0, **kw):
    return batch(n, 100, seed, **kw)


def cases():
    c = []
    for v in range(0, 14):
        name = TID if v >= 13 else "t1"
        c.append(("v%d-plain" % v, produce(v, [(name, [(0, big())])],
                                            txn="tx" if v >= 3 else None,
                                            corr=10 + v)))
    for v in (3, 8, 9, 12):
        c.append(("v%d-many-topics" % v, produce(
            v, [("t%d" % i, [(0, big(10, i)), (1, None)]) for i in range(80)],
            corr=100 + v)))
        c.append(("v%d-two-batches" % v, produce(
            v, [("t1", [(0, big(400, 1) + big(400, 2))])], corr=120 + v)))
        c.append(("v%d-null-records" % v, produce(
            v, [("t1", [(0, None), (1, big())])], corr=130 + v)))
        c.append(("v%d-empty-records" % v, produce(
            v, [("t1", [(0, b""), (1, big())])], corr=140 + v)))
        c.append(("v%d-dup-topic" % v, produce(
            v, [("t1", [(0, big(400))]), ("t1", [(1, big(400, 3))])],
            corr=150 + v)))
        c.append(("v%d-long-topic" % v, produce(
            v, [("x" * 300, [(0, big())]), ("y" * 2000, [(0, big(5))])],
            corr=160 + v)))
        c.append(("v%d-long-txn" % v, produce(
            v, [("t1", [(0, big())])], txn="T" * 1500, corr=170 + v)))
        c.append(("v%d-utf8-cut-txn" % v, produce(
            v, [("t1", [(0, big())])], txn="\u20ac" * 600, corr=180 + v)))
        c.append(("v%d-utf8-cut-topic" % v, produce(
            v, [("\u20ac" * 100, [(0, big())])], corr=190 + v)))
        c.append(("v%d-null-cid" % v, produce(
            v, [("t1", [(0, big())])], client_id=None, corr=200 + v)))
        c.append(("v%d-empty-topic" % v, produce(
            v, [("", [(0, big())])], corr=210 + v)))
        c.append(("v%d-acks1" % v, produce(
            v, [("t1", [(0, big())])], acks=1, corr=220 + v)))
        c.append(("v%d-zero-topics" % v, produce(v, [], corr=230 + v)))
        # records: malformed batches
        good = big()
        bad_len = bytearray(good)
        struct.pack_into(">i", bad_len, 8, len(good))     # past the field
        c.append(("v%d-batchlen-past" % v, produce(
            v, [("t1", [(0, bytes(bad_len))])], corr=240 + v)))
        neg = bytearray(good)
        struct.pack_into(">i", neg, 8, -5)
        c.append(("v%d-batchlen-neg" % v, produce(
            v, [("t1", [(0, bytes(neg))])], corr=250 + v)))
        m3 = bytearray(good)
        m3[16] = 3
        c.append(("v%d-magic3" % v, produce(
            v, [("t1", [(0, bytes(m3))])], corr=260 + v)))
        negc = bytearray(good)
        struct.pack_into(">i", negc, 57, -1)
        c.append(("v%d-count-neg" % v, produce(
            v, [("t1", [(0, bytes(negc))])], corr=270 + v)))
        short = bytearray(good)
        struct.pack_into(">i", short, 8, 48)               # < 49
        c.append(("v%d-batchlen-48" % v, produce(
            v, [("t1", [(0, bytes(short) + big(1))])], corr=280 + v)))
        c.append(("v%d-trunc-hdr" % v, produce(
            v, [("t1", [(0, good + good[:30])])], corr=290 + v)))
        c.append(("v%d-trunc-hdr17" % v, produce(
            v, [("t1", [(0, good + good[:17])])], corr=300 + v)))
        c.append(("v%d-zero-batch" % v, produce(
            v, [("t1", [(0, b"\x00" * 70000)])], corr=310 + v)))
        c.append(("v%d-trailing" % v, produce(
            v, [("t1", [(0, good)])], corr=320 + v, trailing=b"\x00\x00")))
        # magic 0/1 message sets
        c.append(("v%d-magic0" % v, produce(
            v, [("t1", [(0, big(600, magic=0))])], corr=330 + v)))
        c.append(("v%d-magic1-gzip" % v, produce(
            v, [("t1", [(0, big(600, magic=1, attrs=1))])], corr=340 + v)))
        c.append(("v%d-magic1gz-then-bad" % v, produce(
            v, [("t1", [(0, big(600, magic=1, attrs=1) + bytes(m3))])],
            corr=350 + v)))
        c.append(("v%d-magic1-short" % v, produce(
            v, [("t1", [(0, struct.pack(">qi", 0, 5) + b"\x00" * 5 +
                        big(600, magic=1))])], corr=360 + v)))
        c.append(("v%d-count-sum-big" % v, produce(
            v, [("t1", [(0, _counts(good, 0x7fffffff)),
                        (1, _counts(good, 0x7fffffff))])], corr=370 + v)))
    for v in (9, 12, 13):
        name = TID if v >= 13 else "t1"
        c.append(("v%d-body-tags" % v, produce(
            v, [(name, [(0, big())])], corr=400 + v,
            body_tags=b"\x02\x00\x03abc\x05\x02xy")))
        c.append(("v%d-hdr-tags" % v, produce(
            v, [(name, [(0, big())])], corr=410 + v,
            hdr_tags=b"\x01\x07\x04abcd")))
    c.append(("v13-zero-uuid", produce(
        13, [(b"\x00" * 16, [(0, big())]), (TID, [(0, big(5))])], corr=420)))
    return c


def _counts(b, n):
    b = bytearray(b)
    struct.pack_into(">i", b, 57, n)
    return bytes(b)


def run_case(pair, broker, name, frame, how):
    broker.reset()
    corr = struct.unpack(">i", frame[8:12])[0]
    res = {}
    for tag, k in (("S", pair.s), ("H", pair.h)):
        before = len(req_lines(k))
        s = connect(k.port)
        if how == "whole":
            s.sendall(frame)
        elif how == "bytes":
            send_pieces(s, frame, pieces=lambda i: 1 if i < 200 or
                        len(frame) - i < 300 else 4096)
        else:
            send_pieces(s, frame)
        rsp = None
        if produce_acks(frame) != 0:
            rsp = read_frame(s)
        time.sleep(0.05)
        s.close()
        lines = wait_for(lambda: [x for x in req_lines(k)[before:]
                                  if x.get("correlation_id") == corr], 5)
        ups = wait_for(lambda: [f for f in broker.produce_frames()
                                if f[8:12] == frame[8:12]], 3)
        res[tag] = (lines, ups, rsp)
        broker.reset()
    problems = []
    sl, su, sr = res["S"]
    hl, hu, hr = res["H"]
    if len(sl) != 1 or len(hl) != 1:
        problems.append("lines S %d H %d" % (len(sl), len(hl)))
    else:
        a, b = norm(sl[0]), norm(hl[0])
        if a != b:
            diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b)
                    if a.get(k) != b.get(k)}
            if set(diff) != {"decode_error"}:
                problems.append("audit differs: %r" % diff)
            else:
                problems.append("(decode_error wording only) %r" % diff)
    if su != [frame]:
        problems.append("S upstream bytes differ (%d frames)" % len(su))
    if hu != [frame] and "decode_error" not in (hl[0] if hl else {}):
        problems.append("H upstream bytes differ (%d frames)" % len(hu))
    if (sr is None) != (hr is None):
        problems.append("response S %r H %r" % (sr is not None,
                                                hr is not None))
    return problems, res


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    broker = RecBroker()
    pair = Pair(broker)
    bad = 0
    try:
        for name, frame in cases():
            if only not in name:
                continue
            for how in ("whole", "bytes", "random"):
                probs, res = run_case(pair, broker, name, frame, how)
                real = [p for p in probs if not p.startswith("(")]
                sline = res["S"][0][0] if res["S"][0] else None
                if real:
                    bad += 1
                print("%-28s %-6s %s %s" % (name, how,
                                            "BAD" if real else "ok",
                                            "; ".join(probs)))
                if real and sline:
                    print("    S:", {k: sline.get(k) for k in
                                     ("topics", "acks", "decode_error",
                                      "note", "transactional_id")})
                    hline = res["H"][0][0] if res["H"][0] else {}
                    print("    H:", {k: hline.get(k) for k in
                                     ("topics", "acks", "decode_error",
                                      "note", "transactional_id")})
                sys.stdout.flush()
                if real:
                    break
    finally:
        for rc, out in pair.stop():
            p = asan_problems(out)
            if p or rc not in (0, None):
                print("krelay exit %r %s\n%s" % (rc, p, out[-3000:]))
                bad += 1
        slog = pair.s.logtext()
        print("S streamed totals:", [x for x in slog.splitlines()
                                     if "totals" in x][-1:])
        pair.cleanup()
        broker.stop()
    print("BAD cases: %d" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
