#!/usr/bin/env python3
"""scenarios.py - hostile brokers and clients around a streamed Produce
request (krelay S: audit only).  Each scenario prints what the client
got, krelay's close lines and the request's audit line, and checks what
the design says (doc/audit.md, commit 6be1ee2).  Usage: scenarios.py
[NAME-SUBSTRING]"""
import socket
import struct
import sys
import threading
import time

from advlib import (Krelay, Pair, RecBroker, batch, connect, produce,
                    read_frame, asan_problems, req_lines, wait_for)
from mutate import metadata

BIG = None


def big(corr, acks=-1, ver=8, n=700, name="t1"):
    return produce(ver, [(name, [(0, batch(n, 100, corr))])], acks=acks,
                   corr=corr, txn="tx" if ver >= 3 else None)


def closes(k):
    return [x for x in k.logtext().splitlines()
            if ("warn:" in x or "error:" in x or "bytes up" in x)]


def lines_for(k, corr, t=3):
    return wait_for(lambda: req_lines(k, corr), t)


class Ctx:
    def __init__(self, broker, k):
        self.broker = broker
        self.k = k
        self.fail = []

    def check(self, cond, what):
        print("   ", "ok  " if cond else "FAIL", what)
        if not cond:
            self.fail.append(what)


def sc_early(c):
    """broker answers after 64 bytes; client sends the rest 0.3 s later"""
    c.broker.mode = "early"
    f = big(11)
    s = connect(c.k.port)
    s.sendall(f[:5000])
    time.sleep(0.3)
    try:
        s.sendall(f[5000:])
    except OSError as e:
        print("    client send:", e)
    r = read_frame(s)
    s.close()
    c.broker.mode = "normal"
    ln = lines_for(c.k, 11)
    print("    client got", None if r is None else len(r), "lines", ln)
    c.check(r is None, "client gets no response (connection closed)")
    c.check(any("before krelay had sent the whole request" in x
                for x in closes(c.k)), "krelay logs the early answer")
    c.check(len(ln) == 1, "one audit line for it")
    if ln:
        c.check(ln[0].get("note", "").startswith(
            "connection closed before krelay read the whole request"),
            "note: not read whole (%r)" % ln[0].get("note"))


def sc_garbage(c):
    """broker sends 64 garbage bytes mid-request"""
    c.broker.mode = "garbage"
    f = big(12)
    s = connect(c.k.port)
    s.sendall(f[:5000])
    time.sleep(0.3)
    try:
        s.sendall(f[5000:])
    except OSError as e:
        print("    client send:", e)
    r = read_frame(s)
    s.close()
    c.broker.mode = "normal"
    ln = lines_for(c.k, 12)
    print("    client got", None if r is None else len(r), "lines", ln)
    c.check(r is None, "client gets no response")
    c.check(len(ln) == 1, "one audit line for it")


def sc_broker_close(c):
    """broker closes mid-request"""
    c.broker.mode = "close"
    f = big(13)
    s = connect(c.k.port)
    s.sendall(f[:5000])
    time.sleep(0.3)
    try:
        s.sendall(f[5000:])
    except OSError as e:
        print("    client send:", e)
    r = read_frame(s)
    s.close()
    c.broker.mode = "normal"
    ln = lines_for(c.k, 13)
    print("    lines", ln)
    c.check(r is None, "client gets no response")
    c.check(len(ln) == 1 and ln[0].get("incomplete"),
            "one audit line, incomplete")


def _client_close(c, acks, corr, cut):
    f = big(corr, acks=acks)
    s = connect(c.k.port)
    s.sendall(f[:cut])
    time.sleep(0.3)
    s.close()
    ln = lines_for(c.k, corr)
    print("    lines", ln)
    c.check(len(ln) == 1, "one audit line")
    if ln:
        c.check(ln[0].get("incomplete") and ln[0].get("note", "").startswith(
            "connection closed before krelay read the whole request"),
            "incomplete, note: not read whole (%r)" % ln[0].get("note"))
        t = ln[0]["topics"][0] if ln[0]["topics"] else {}
        want = 700 if cut > 45 + 61 else 0
        c.check(t.get("records") == want, "records %r (want %d: the batch "
                "headers read)" % (t.get("records"), want))
    time.sleep(0.2)
    ups = [x for x in c.broker.conns if x.raw.find(f[:cut]) >= 0]
    c.check(len(ups) == 1 and ups[0].closed, "upstream got the prefix, "
            "then the close")
    c.broker.reset()


def sc_client_close_acks1(c):
    """client closes mid-request (Acks=-1): in a batch header"""
    _client_close(c, -1, 14, 5000)
    _client_close(c, -1, 15, 60)     # inside the first batch header


def sc_client_close_acks0(c):
    """client closes mid-request (Acks=0)"""
    _client_close(c, 0, 16, 5000)
    _client_close(c, 0, 17, 45)


def sc_acks0_answered(c):
    """Acks=0 streamed; the broker answers it anyway; then a Metadata"""
    c.broker.mode = "answer0"
    f = big(18, acks=0)
    s = connect(c.k.port)
    s.sendall(f + metadata(19))
    got = []
    while True:
        r = read_frame(s)
        if r is None:
            got.append("closed")
            break
        got.append(struct.unpack(">i", r[4:8])[0])
        if got[-1] == 19:
            break
    s.close()
    c.broker.mode = "normal"
    ln = lines_for(c.k, 18)
    print("    got", got, "lines", ln)
    c.check(got[-1] == 19, "Metadata answered")
    c.check(len(ln) == 1, "one audit line for the Acks=0 request")


def sc_acks0_pipeline(c):
    """three Acks=0 streamed requests, a small one, then Acks=-1, in one
    write"""
    fs = [big(20, acks=0), big(21, acks=0, ver=9), big(22, acks=0, ver=3),
          produce(8, [("t1", [(0, batch(1))])], acks=0, corr=23),
          big(24), metadata(25)]
    s = connect(c.k.port)
    s.sendall(b"".join(fs))
    got = []
    while True:
        r = read_frame(s)
        if r is None:
            got.append("closed")
            break
        got.append(struct.unpack(">i", r[4:8])[0])
        if got[-1] == 25:
            break
    s.close()
    print("    got", got)
    c.check(got == [24, 25], "responses 24, 25")
    for corr in (20, 21, 22, 23, 24):
        ln = lines_for(c.k, corr)
        c.check(len(ln) == 1 and "note" not in ln[0] and
                ln[0]["topics"][0].get("records") in (700, 1),
                "line for %d: %r" % (corr, [x.get("topics") for x in ln]))
    time.sleep(0.2)
    c.check(any(bytes(x.raw).endswith(b"".join(fs)) for x in c.broker.conns),
            "upstream got exactly the bytes")
    c.broker.reset()


def sc_reload_deny(c):
    """SIGHUP mid-stream: a deny rule for Produce (then: the rest of the
    streamed request, then another large Produce)"""
    f = big(30)
    s = connect(c.k.port)
    s.sendall(f[:5000])
    time.sleep(0.2)
    c.k.reload("[rule a]\napi = Produce\naudit = true\n\n"
               "[rule d]\napi = Produce\ndeny = true\n")
    time.sleep(0.5)
    s.sendall(f[5000:])
    r = read_frame(s)
    print("    first response:", None if r is None else
          struct.unpack(">i", r[4:8])[0])
    s.sendall(big(31))
    r2 = read_frame(s)
    s.close()
    ln = lines_for(c.k, 30)
    ln2 = lines_for(c.k, 31)
    print("    lines", [(x["correlation_id"], x["actions"], x.get("note"))
                        for x in ln + ln2])
    c.check(r is not None and struct.unpack(">i", r[4:8])[0] == 30,
            "the streamed request (begun before the reload) is answered")
    c.check(len(ln) == 1 and ln[0]["actions"] == ["forwarded"],
            "its line: forwarded")
    c.check(len(ln2) == 1 and "denied" in ln2[0]["actions"],
            "the next one is denied")
    c.k.reload(Pair.S_RULES)
    time.sleep(0.5)


def sc_reload_noaudit(c):
    """SIGHUP mid-stream removes [audit] and every rule; then restores"""
    f = big(32)
    s = connect(c.k.port)
    s.sendall(f[:5000])
    time.sleep(0.2)
    with open(c.k.conf) as fh:
        keep = fh.read()
    txt = keep.split("[audit]")[0]
    with open(c.k.conf, "w") as fh:
        fh.write(txt)
    c.k.p.send_signal(1)
    time.sleep(0.5)
    s.sendall(f[5000:])
    r = read_frame(s)
    s.close()
    c.check(r is not None, "answered")
    with open(c.k.conf, "w") as fh:
        fh.write(keep)
    c.k.p.send_signal(1)
    time.sleep(0.5)
    c.check(c.k.alive(), "krelay alive")


def sc_reload_audit_body(c):
    """SIGHUP mid-stream: the rule now has audit_body"""
    f = big(33)
    s = connect(c.k.port)
    s.sendall(f[:5000])
    time.sleep(0.2)
    c.k.reload(Pair.H_RULES)
    time.sleep(0.5)
    s.sendall(f[5000:] + big(34))
    r = read_frame(s)
    r2 = read_frame(s)
    s.close()
    ln = lines_for(c.k, 33)
    ln2 = lines_for(c.k, 34)
    c.check(r is not None and r2 is not None, "both answered")
    c.check(len(ln) == 1 and "request_body" not in ln[0],
            "streamed one: no body")
    c.check(len(ln2) == 1 and "request_body" in ln2[0], "next: body")
    c.k.reload(Pair.S_RULES)
    time.sleep(0.5)


def sc_max_inflight(c):
    """max_inflight 2 (listener): five large requests in one write"""
    fs = [big(40 + i) for i in range(5)] + [metadata(49)]
    s = connect(c.k.port)
    s.sendall(b"".join(fs))
    got = []
    while True:
        r = read_frame(s)
        if r is None:
            got.append("closed")
            break
        got.append(struct.unpack(">i", r[4:8])[0])
        if got[-1] == 49:
            break
    s.close()
    print("    got", got)
    c.check(got == [40, 41, 42, 43, 44, 49], "all answered in order")
    for corr in range(40, 45):
        ln = lines_for(c.k, corr)
        c.check(len(ln) == 1 and ln[0]["topics"][0].get("records") == 700,
                "line %d" % corr)


def sc_many_topics(c):
    """one request naming 20,000 topics (4096 listed) + 1 big batch"""
    topics = [("topic-%05d" % i, [(0, None)]) for i in range(20000)]
    topics.append(("t1", [(0, batch(700, 100, 1))]))
    f = produce(8, topics, corr=50)
    t0 = time.time()
    s = connect(c.k.port)
    s.sendall(f)
    r = read_frame(s)
    s.close()
    ln = lines_for(c.k, 50, 10)
    print("    %.2f s, request %d bytes, line %d bytes" % (
        time.time() - t0, len(f), len(str(ln))))
    c.check(r is not None, "answered")
    c.check(len(ln) == 1 and ln[0].get("topics_truncated") and
            len(ln[0]["topics"]) == 4096, "4096 topics, topics_truncated")


def sc_v13_resolved(c):
    """Metadata v12 teaches TopicIds; Produce v13 by TopicId resolves"""
    s = connect(c.k.port)
    # Metadata v12 (flexible), all topics: Topics null
    p = struct.pack(">hhi", 3, 12, 60) + struct.pack(">h", 3) + b"adv" + \
        b"\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00"
    s.sendall(struct.pack(">i", len(p)) + p)
    r = read_frame(s)
    c.check(r is not None, "Metadata v12 answered")
    import base64
    import hashlib
    tid = hashlib.md5(b"t1").digest()
    f = produce(13, [(tid, [(0, batch(700, 100, 1))])], corr=61)
    s.sendall(f)
    r = read_frame(s)
    s.close()
    ln = lines_for(c.k, 61)
    print("    topics", ln and ln[0]["topics"],
          base64.urlsafe_b64encode(tid))
    c.check(len(ln) == 1 and ln[0]["topics"][0]["name"] == "t1",
            "TopicId resolved to t1")


def sc_idle_pause(c):
    """client pauses 2.5 s mid-request (request_timeout_ms 1000?)"""
    f = big(70)
    s = connect(c.k.port)
    s.sendall(f[:3000])
    time.sleep(2.5)
    try:
        s.sendall(f[3000:])
        r = read_frame(s)
    except OSError:
        r = None
    s.close()
    ln = lines_for(c.k, 70)
    print("    r", r is not None, "lines", ln)
    c.check(len(ln) == 1, "one line")


SCEN = [sc_early, sc_garbage, sc_broker_close, sc_client_close_acks1,
        sc_client_close_acks0, sc_acks0_answered, sc_acks0_pipeline,
        sc_reload_deny, sc_reload_noaudit, sc_reload_audit_body,
        sc_max_inflight, sc_many_topics, sc_v13_resolved, sc_idle_pause]


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    broker = RecBroker()
    k = Krelay(broker.port, Pair.S_RULES, "max_inflight = 2")
    fails = []
    try:
        for fn in SCEN:
            if only not in fn.__name__:
                continue
            print("==", fn.__name__, "-", fn.__doc__.splitlines()[0])
            c = Ctx(broker, k)
            try:
                fn(c)
            except Exception as e:        # report, go on
                c.fail.append("exception %r" % e)
                print("    EXCEPTION", repr(e))
            broker.mode = "normal"
            broker.reset()
            fails += ["%s: %s" % (fn.__name__, x) for x in c.fail]
            if not k.alive():
                print("krelay died")
                break
    finally:
        rc, out = k.stop()
        p = asan_problems(out)
        if p or rc not in (0, None):
            print("krelay exit %r %s\n%s" % (rc, p, out[-6000:]))
            fails.append("krelay exit %r %s" % (rc, p))
        print("\n".join(closes(k)[-30:]))
        k.cleanup()
        broker.stop()
    print("FAILS:", len(fails))
    for x in fails:
        print("  ", x)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
