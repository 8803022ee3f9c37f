#!/usr/bin/env python3
"""shutdown.py - krelay stopped (SIGTERM) or its listener removed by a
reload while streamed Produce requests (Acks=0 and Acks=-1) are half
read: no ASan report, no leak; lines written for them (incomplete)."""
import sys
import time

from advlib import (Krelay, Pair, RecBroker, batch, connect, produce,
                    asan_problems, req_lines)


def half(k, corr, acks):
    f = produce(8, [("t1", [(0, batch(900, 100, corr))])], acks=acks,
                corr=corr)
    s = connect(k.port)
    s.sendall(f[:20000])
    return s


def main():
    bad = 0
    broker = RecBroker()
    for how in ("sigterm", "listener-removed"):
        k = Krelay(broker.port, Pair.S_RULES)
        socks = [half(k, 1, 0), half(k, 2, -1), half(k, 3, 1)]
        time.sleep(0.3)
        if how == "sigterm":
            rc, out = k.stop()
        else:
            old = k.port
            with open(k.conf) as f:
                txt = f.read()
            from advlib import free_ports
            newp = free_ports(3)
            txt = txt.replace("listen = 127.0.0.1:%d" % old,
                              "listen = 127.0.0.1:%d" % newp)
            txt = txt.replace("broker_port_base = %d" % k.base,
                              "broker_port_base = %d" % newp)
            with open(k.conf, "w") as f:
                f.write(txt)
            k.p.send_signal(1)
            time.sleep(1.0)
            alive = k.alive()
            rc, out = k.stop()
            print("after the reload: krelay alive %s" % alive)
        lines = [(x["correlation_id"], x.get("incomplete"), x.get("note"),
                  x["topics"][0].get("records") if x["topics"] else None)
                 for x in req_lines(k)]
        closes = [x.get("reason") for x in k.audit_lines()
                  if x.get("event") == "close"]
        p = asan_problems(out)
        print("%s: exit %r, asan %r, lines %r, closes %r" % (
            how, rc, p, lines, closes))
        if p or rc != 0:
            print(out[-5000:])
            bad += 1
        if sorted(x[0] for x in lines) != [1, 2, 3]:
            bad += 1
        for s in socks:
            s.close()
        k.cleanup()
    broker.stop()
    print("bad:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
