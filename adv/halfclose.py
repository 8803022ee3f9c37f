#!/usr/bin/env python3
"""halfclose.py - the client shuts down its sending side (TCP FIN) in the
middle of a streamed Produce request, and right after a whole one:
what krelay does with the request, its line, and the response."""
import socket
import sys
import time

from advlib import (Krelay, Pair, RecBroker, batch, connect, produce,
                    read_frame, asan_problems, req_lines, wait_for)


def main():
    broker = RecBroker()
    k = Krelay(broker.port, Pair.S_RULES)
    bad = 0
    for corr, cut in ((1, 20000), (2, None)):
        f = produce(8, [("t1", [(0, batch(900, 100, corr))])], corr=corr)
        s = connect(k.port)
        s.sendall(f if cut is None else f[:cut])
        time.sleep(0.2)
        s.shutdown(socket.SHUT_WR)
        r = read_frame(s)
        s.close()
        ln = wait_for(lambda: req_lines(k, corr), 3)
        print("cut %r: response %s, line %r" % (
            cut, r is not None, [(x.get("incomplete"), x.get("note"),
                                  x["topics"][0].get("records"))
                                 for x in ln]))
        if cut is None and r is None:
            bad += 1
        if len(ln) != 1:
            bad += 1
    rc, out = k.stop()
    if asan_problems(out) or rc != 0:
        print(out[-4000:])
        bad += 1
    print([x for x in k.logtext().splitlines() if "closed" in x][-4:])
    k.cleanup()
    broker.stop()
    print("bad:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
