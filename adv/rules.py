#!/usr/bin/env python3
"""rules.py - which rule sets stream a large Produce request and which
hold it (kr_rule_eval_header): half of a request is sent, then krelay is
asked whether the broker already has bytes of it.  Each rule set says
what the design wants (stream only when every matching rule only audits,
doc/audit.md); then the rest is sent and the line compared with a
held (audit_body) krelay's.  Usage: rules.py"""
import struct
import sys
import time

from advlib import (Krelay, Pair, RecBroker, batch, connect, norm, produce,
                    read_frame, asan_problems, req_lines, wait_for)

A = "[rule a]\napi = Produce\naudit = true\n"
CASES = [
    # (name, rules, client_id, expect streamed)
    ("audit only", A, "adv", True),
    ("audit, all APIs", "[rule a]\naudit = true\n", "adv", True),
    ("audit + deny other client", A + "\n[rule d]\nclient_id = zzz*\n"
     "deny = true\n", "adv", True),
    ("audit + deny this client", A + "\n[rule d]\nclient_id = ad*\n"
     "deny = true\n", "adv", False),
    ("deny other client first", "[rule d]\nclient_id = zzz*\ndeny = true\n"
     "\n" + A, "adv", True),
    ("audit + topic rule (no match)", A + "\n[rule t]\ntopic = nomatch\n"
     "audit = true\n", "adv", False),
    ("audit + throttle", A + "\n[rule t]\napi = Produce\nthrottle_ms = 5\n",
     "adv", False),
    ("audit + acks policy", A + "\n[rule p]\napi = Produce\n"
     "allowed_acks = all\n", "adv", False),
    ("audit + clamp other API", A + "\n[rule c]\napi = Fetch\n"
     "clamp_max_version = 12\n", "adv", True),
    ("audit + clamp Produce", A + "\n[rule c]\napi = Produce\n"
     "clamp_max_version = 9\n", "adv", False),
    ("audit + fault latency", A + "\n[rule f]\napi = Produce\n"
     "fault_latency_ms = 5\n", "adv", False),
    ("audit_body", A + "audit_body = true\n", "adv", False),
    ("audit client glob, null cid", "[rule a]\napi = Produce\n"
     "client_id = *\naudit = true\n", None, None),
    ("audit client glob", "[rule a]\napi = Produce\nclient_id = a*\n"
     "audit = true\n", "adv", True),
    ("no rule matches", "[rule a]\napi = Fetch\naudit = true\n", "adv",
     None),
    ("audit versions 0-7", "[rule a]\napi = Produce\nversions = 0-7\n"
     "audit = true\n", "adv", None),
    ("response-direction audit", "[rule a]\napi = Produce\n"
     "direction = response\naudit = true\n", "adv", True),
]


def main():
    broker = RecBroker()
    bad = 0
    href = Krelay(broker.port, Pair.H_RULES +
                  "client_id = *\n\n[rule n]\napi = Produce\naudit = true\n"
                  "audit_body = true\n")
    try:
        for i, (name, rules, cid, want) in enumerate(CASES):
            k = None
            try:
                k = Krelay(broker.port, rules)
            except RuntimeError as e:
                print("%-32s conf refused: %s" % (name, str(e)[-200:]))
                continue
            f = produce(8, [("t1", [(0, batch(700, 100, i))])], corr=100 + i,
                        client_id=cid)
            s = connect(k.port)
            s.sendall(f[:30000])
            time.sleep(0.3)
            up = sum(len(c.raw) for c in broker.conns if
                     bytes(c.raw).find(f[:200]) >= 0)
            streamed = up > 0
            s.sendall(f[30000:])
            r = read_frame(s)
            s.close()
            ln = wait_for(lambda: req_lines(k, 100 + i), 2)
            broker.reset()
            # held reference line
            s = connect(href.port)
            s.sendall(f)
            read_frame(s)
            s.close()
            hl = wait_for(lambda: req_lines(href, 100 + i), 2)
            broker.reset()
            same = ""
            if ln and hl:
                a, b = norm(ln[-1]), norm(hl[-1])
                a.pop("actions")
                b.pop("actions")
                same = "line==held" if a == b else "LINE DIFFERS %r" % {
                    x: (a.get(x), b.get(x)) for x in set(a) | set(b)
                    if a.get(x) != b.get(x)}
            ok = want is None or streamed == want
            if not ok or same.startswith("LINE"):
                bad += 1
            print("%-32s streamed=%-5s want=%-5s %s answered=%s lines=%d %s"
                  % (name, streamed, want, "ok " if ok else "BAD",
                     r is not None, len(ln), same))
            rc, out = k.stop()
            if asan_problems(out) or rc not in (0, None):
                print("   krelay exit %r\n%s" % (rc, out[-3000:]))
                bad += 1
            k.cleanup()
    finally:
        rc, out = href.stop()
        if asan_problems(out):
            print(out[-3000:])
        href.cleanup()
        broker.stop()
    print("bad:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
