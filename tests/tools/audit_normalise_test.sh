#!/bin/bash
# audit_normalise_test.sh - tests/tools/audit_normalise.py on made-up
# audit lines: what varies between runs (times, durations, ports, the
# order of concurrent connections, the "request in flight" race) goes,
# what krelay decided (an action, an error, a size) stays, and the two
# relaxations do what they say.  Exit 0 pass, 1 fail, 77 skip.
set -u

PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY missing"; exit 77; }
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"

exec "$PY" - "$top_srcdir/tests/tools/audit_normalise.py" <<'PYEOF'
import json
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failed = []


def run(lines, *opts):
    """The tool's output (list of dicts) for these lines, and its status."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        for o in lines:
            f.write((o if isinstance(o, str) else json.dumps(o)) + "\n")
        f.flush()
        p = subprocess.run([sys.executable, TOOL] + list(opts) + [f.name],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
    out = [json.loads(t) for t in p.stdout.splitlines()] \
        if p.returncode == 0 else p.stderr
    return out, p.returncode


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok" if cond else "FAIL", name,
                        "" if cond else " " + str(detail)[:600]))
    if not cond:
        failed.append(name)


def cid(port):
    """The c#W.N of a made-up connection: from its port, so it differs
    between runs as the accept order does."""
    return "c#0.%d" % (port % 1000)


def conn(event, port, t, listener="default", client_id=None, reason=None,
         traffic=None):
    o = {"time": "2026-01-01T00:00:%02d.000000Z" % t, "type": "connection",
         "instance": "host-%d" % (port // 1000), "conn_id": cid(port),
         "listener": listener, "client_addr": "127.0.0.1",
         "client_port": port, "route": "bootstrap",
         "upstream_addr": "127.0.0.1:%d" % (port + 3), "event": event}
    if client_id:
        o["client_id"] = client_id
    if reason:
        o["cause"] = "client"
        o["reason"] = reason
        o["bytes_from_client"], o["bytes_to_client"], o["requests"] = \
            traffic or (100, 200, 3)
        o["duration_us"] = port * 7
    return o


def req(port, corr, t, api="Metadata", client_id="c1", actions=None,
        rsp=245, us=100, errors=None, req_bytes=30, topics=None):
    return {"time": "2026-01-01T00:00:%02d.000000Z" % t, "type": "request",
            "instance": "host-%d" % (port // 1000), "conn_id": cid(port),
            "listener": "default", "client_addr": "127.0.0.1",
            "client_port": port, "route": "bootstrap",
            "upstream_addr": "127.0.0.1:%d" % (port + 3),
            "client_id": client_id, "api": api,
            "api_key": 3, "api_version": 9, "correlation_id": corr,
            "request_bytes": req_bytes, "response_bytes": rsp,
            "upstream_us": us, "total_us": us + 7, "topics": topics or [],
            "errors": errors or {}, "actions": actions or ["forwarded"]}


# the client closed while a long-poll Fetch was in flight: as krelay
# words it since issue 14, and as a baseline from before still does
UNANS = "client closed the connection with 1 request in flight"
UNANS_OLD = ("client closed the connection (the upstream then closed with 1 "
             "requests unanswered)")

# Run 1: connection a (port 5001, client c1) then b (5002, client c2).
run1 = [conn("open", 5001, 1), conn("open", 5002, 1),
        req(5001, 1, 2), req(5002, 7, 2, client_id="c2"),
        req(5001, 2, 3, actions=["forwarded", "rewritten"]),
        conn("close", 5001, 4, client_id="c1",
             reason="client closed the connection"),
        conn("close", 5002, 4, client_id="c2",
             reason="cannot rewrite Metadata v9 response from "
                    "127.0.0.1:39819: bad")]
# Run 2: the same exchanges, other ports, times and durations, b's lines
# first, a's two requests written out of CorrelationId order, and the
# close race lost the other way.
run2 = [conn("open", 6002, 5), conn("open", 6001, 5),
        req(6002, 7, 6, client_id="c2", us=900),
        req(6001, 2, 6, actions=["forwarded", "rewritten"], us=3),
        req(6001, 1, 7, us=55555),
        conn("close", 6002, 8, client_id="c2",
             reason="cannot rewrite Metadata v9 response from "
                    "127.0.0.1:40001: bad"),
        conn("close", 6001, 8, client_id="c1", reason=UNANS)]
o1, rc1 = run(run1)
o2, rc2 = run(run2)
o3, rc3 = run([dict(o, reason=UNANS_OLD) if o.get("reason") == UNANS
               else o for o in run2])
o4, _ = run([dict(o, reason="client closed the connection with 2 "
                            "requests in flight")
             if o.get("reason") == UNANS else o for o in run2])
check("exit 0", rc1 == 0 and rc2 == 0, (o1, o2))
check("two runs that differ only in what varies: identical", o1 == o2,
      (o1, o2))
check("no time, *_us, client_port, conn_id or instance left",
      not any(k in ("time", "client_port", "conn_id", "instance") or
              k.endswith("_us") for o in o1 for k in o), o1)
check("host:port of the upstream masked",
      all(o["upstream_addr"] == "127.0.0.1:<port>" for o in o1), o1)
check("connections numbered, c1's first, open/requests/close in order",
      [(o["conn"], o.get("event"), o.get("correlation_id")) for o in o1]
      == [(1, "open", None), (1, None, 1), (1, None, 2), (1, "close", None),
          (2, "open", None), (2, None, 7), (2, "close", None)], o1)
check("host:port in a reason masked",
      o1[-1]["reason"] == "cannot rewrite Metadata v9 response from "
      "127.0.0.1:<port>: bad", o1[-1])
check("the requests-in-flight close reason folded",
      o2[3]["reason"] == "client closed the connection", o2[3])
check("... in the words krelay used before issue 14 too",
      rc3 == 0 and o3 == o1, (o3, o1))
check("... with any number of requests", o4 == o1, (o4, o1))
fault = dict(run2[-1], reason="upstream 127.0.0.1:9092: end of file with 1 "
             "request in flight")
o5, _ = run(run2[:-1] + [fault])
check("an upstream's close with a request in flight is not folded",
      o5[3]["reason"] == "upstream 127.0.0.1:<port>: end of file with 1 "
      "request in flight", o5[3])

# What krelay decides must show: an action, an error, a size.
for what, change in (("action", {"actions": ["forwarded"]}),
                     ("error", {"errors": {"NOT_LEADER_OR_FOLLOWER": 1}}),
                     ("response size", {"response_bytes": 246}),
                     ("route", {"route": "node", "node_id": 2}),
                     ("api version", {"api_version": 8})):
    run3 = [dict(o) for o in run2]
    run3[3].update(change)
    o3, _ = run(run3)
    diff = [(a, b) for a, b in zip(o1, o3) if a != b]
    check("a changed %s: exactly that line differs" % what,
          len(o3) == len(o1) and len(diff) == 1 and
          diff[0][0]["correlation_id"] == 2, diff)
run3 = run2[:2] + run2[3:]
o3, _ = run(run3)
check("a missing request line shows", o3 != o1 and len(o3) == len(o1) - 1)

# A port used again after its close is a new connection.
reuse = [conn("open", 5001, 1), req(5001, 1, 2),
         conn("close", 5001, 3, client_id="c1",
              reason="client closed the connection"),
         conn("open", 5001, 4), req(5001, 1, 5, client_id="c1", rsp=99),
         conn("close", 5001, 6, client_id="c1",
              reason="client closed the connection")]
o, _ = run(reuse)
check("a port used again: two connections",
      sorted(set(x["conn"] for x in o)) == [1, 2] and
      [x["conn"] for x in o] == [1, 1, 1, 2, 2, 2], o)

# Relaxations: a producer whose batches are cut by the clock.
def producer(sizes, port):
    lines = [conn("open", port, 1)]
    for i, n in enumerate(sizes):
        lines.append(req(port, 3 + i, 2, api="Produce", req_bytes=n, rsp=55,
                         topics=[{"name": "t", "partitions": 1,
                                  "records": n // 13, "record_bytes": n - 60}]))
    lines.append(req(port, 3 + len(sizes), 3, api="Metadata"))
    lines.append(conn("close", port, 4, client_id="c1", reason=UNANS,
                      traffic=(sum(sizes), 55 * len(sizes), len(sizes) + 1)))
    return lines


p1 = producer([130, 265, 130], 7001)
p2 = producer([130, 130, 130, 130, 130], 7002)
s1, _ = run(p1)
s2, _ = run(p2)
check("strict: a different batching differs", s1 != s2)
c1, _ = run(p1, "--collapse-runs", "--drop-record-sizes")
c2, _ = run(p2, "--collapse-runs", "--drop-record-sizes")
check("--collapse-runs --drop-record-sizes: the same", c1 == c2, (c1, c2))
check("... as open, one Produce (no size, no CorrelationId), Metadata, "
      "close",
      [(x.get("event"), x.get("api"), "correlation_id" in x,
        "request_bytes" in x) for x in c1]
      == [("open", None, False, False), (None, "Produce", False, False),
          (None, "Metadata", False, True), ("close", None, False, False)],
      c1)
check("... the Produce's topic without its record figures, the close "
      "line without its traffic",
      c1[1]["topics"] == [{"name": "t", "partitions": 1}] and
      not any(k in c1[3] for k in ("bytes_from_client", "bytes_to_client",
                                   "requests")) and
      c1[3]["cause"] == "client", c1)
check("strict: the record figures and the traffic stay",
      s1[1]["topics"][0].get("records") == 10 and
      s1[-1].get("requests") == 4, s1)
p3 = producer([130, 130, 130, 130, 130], 7003)
p3[2]["errors"] = {"NOT_LEADER_OR_FOLLOWER": 1}
c3, _ = run(p3, "--collapse-runs", "--drop-record-sizes")
check("--collapse-runs: an error inside a run still shows", c3 != c2, c3)

# A client retrying on its clock: more of the same connection.
c4, _ = run(p1 + producer([130], 7004), "--collapse-runs",
            "--drop-record-sizes")
c5, _ = run(p1 + producer([130], 7004) + producer([265, 130], 7005),
            "--collapse-runs", "--drop-record-sizes")
check("--collapse-runs: equal connections count once", c4 == c5 == c1,
      (c4, c5))
check("strict: one more connection shows",
      run(p1 + producer([130], 7004))[0] != run(p1)[0])
p6 = producer([130], 7006)
p6[-1]["reason"] = "closed by [rule x]"
c6, _ = run(p1 + p6, "--collapse-runs", "--drop-record-sizes")
check("--collapse-runs: a different connection still shows", c6 != c1, c6)

# Input that is not an audit file.
out, rc = run(['{"type":"connection"}', "not json"])
check("a line that is not JSON: exit 2 naming the line",
      rc == 2 and ":2: not JSON" in out, (rc, out))

if failed:
    print("%d check(s) failed" % len(failed))
    sys.exit(1)
print("all checks passed")
PYEOF
