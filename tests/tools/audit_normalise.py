#!/usr/bin/env python3
"""audit_normalise.py - krelay's audit log in a canonical form, so that two
runs of the same test (two builds, or one build twice) compare with diff.

    audit_normalise.py [--collapse-runs] [--drop-record-sizes] [FILE...]

Input: audit files as krelay writes them (doc/audit.md, the schema): one
compact JSON object per line, in the order the writer thread got them,
each either a request/response pair ("type": "request") or a connection
event ("type": "connection", "event": "open"|"close").
Each FILE is one krelay's sink (one test run); no FILE or "-" reads
standard input.  Blank lines are skipped; a line that is not a JSON
object is an error (exit 2, naming FILE:LINE): a refactoring must not
produce one.

Output: the same lines as canonical JSON (sorted keys, no spaces, UTF-8),
one per line.  With more than one FILE, each file's lines follow a line
{"file":"<FILE's base name>"}, files in the order given.

What is dropped or rewritten, and why (each varies between two runs of
one build; found by running the audit-writing integration tests
repeatedly, tests/tools/audit_compare.sh):
  - "time": the wall clock.
  - every key ending in "_us" (upstream_us, total_us, duration_us):
    durations.
  - "client_port": the client's ephemeral port, and "conn_id" (c#W.N:
    the order in which connections were accepted).  They tell the
    connections of one run apart, so they are replaced by "conn"
    (below).
  - "instance": the host name by default (a baseline may come from
    another machine).
  - a host:port inside a string (a close "reason", a "note", a
    "decode_error": "cannot rewrite ... response from 127.0.0.1:39819")
    becomes host:<port>: the tests pick free ports at random for the mock
    brokers and for krelay's listeners.  Likewise an integer "Port" inside
    request_body/response_body (audit_body = true; no integration test
    uses it today) becomes "<port>".
  - the close reason "client closed the connection with N request(s) in
    flight" (before issue 14: "client closed the connection (the
    upstream then closed with N requests unanswered)", which a baseline
    built from an older commit still writes) becomes "client closed the
    connection": both are the normal end of a connection
    (src/kr_session.c); which one a run gets depends on whether the
    client closed while its long-poll Fetch was in flight, a race.

How lines are ordered: a connection is (listener, client_addr,
client_port) from its "open" line on (a port used again later in the
file is a new connection; a line without an "open" before it starts
one).  Within a connection: "open" first, then requests by CorrelationId
(lines with the same one keep their order in the file), "close" last.
Then the connections are sorted by (listener, ClientId: the first
non-null one among its lines, the sequence of its lines' kinds: open,
close or the request's API and CorrelationId, then its normalised lines)
and numbered from 1 in that order: "conn" in each line.  So the output
depends neither on the order in which concurrent connections were
written nor on the ports they had, and two identical connections are two
identical blocks.

Two relaxations, for tests whose clients decide how their traffic is cut
into requests from the clock (a librdkafka producer's batches under
linger.ms, a consumer's number of Fetches); audit_compare.sh names the
tests that need them and why:
  --drop-record-sizes  drop "request_bytes" of Produce and
                       "response_bytes" of Fetch, and their topics'
                       "records" and "record_bytes": they carry records,
                       and how many records one batch or one Fetch
                       response holds is the clients' timing (record
                       timestamps are varints too).  krelay never
                       re-encodes records, so these sizes are not its
                       doing.  Close lines lose "bytes_from_client",
                       "bytes_to_client" and "requests" (the sum of that
                       traffic); so they do with --collapse-runs.
  --collapse-runs      within a connection, a run of consecutive request
                       lines that are equal but for "correlation_id" (and,
                       with --drop-record-sizes, the sizes already
                       dropped) becomes one line, without its
                       "correlation_id"; every request line of the file
                       loses "correlation_id", as the run lengths before
                       it shift it.  What stays: each connection's
                       sequence of kinds of request (API, version,
                       topics, errors, actions, decode errors, notes,
                       sizes not dropped) and its open/close lines.
                       Connections whose lines are then all equal count
                       once: a client that retries on its own clock (kcat
                       after a response it cannot parse) opens more or
                       fewer of the same connection from run to run.

Exit status: 0, or 2 on unreadable input.  Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sys

# host:port in free text: IPv4, [IPv6] or a name, then a port number.
HOSTPORT_RE = re.compile(
    r"((?:\d{1,3}(?:\.\d{1,3}){3})|(?:\[[0-9A-Fa-f:.]+\])|localhost):\d{1,5}\b")
UNANSWERED_RE = re.compile(
    r"^client closed the connection (?:with \d+ requests? in flight|"
    r"\(the upstream then closed with \d+ requests? unanswered\))$")
CLIENT_CLOSED = "client closed the connection"
BODY_KEYS = ("request_body", "response_body")
# APIs whose request or response carries records, and which size that is.
RECORD_SIZE = {"Produce": "request_bytes", "Fetch": "response_bytes"}
# A topic's record figures (Produce, Fetch), and a close line's traffic.
TOPIC_RECORDS = ("records", "record_bytes")
CLOSE_TRAFFIC = ("bytes_from_client", "bytes_to_client", "requests")
# Dropped from every line (see above); client_port too, by the caller.
VARYING = ("time", "client_port", "conn_id", "instance")
PHASE = {"open": 0, "close": 2}


class InputError(Exception):
    pass


def mask_text(value):
    """Strings with host:port masked; other values as they are."""
    if isinstance(value, str):
        return HOSTPORT_RE.sub(r"\1:<port>", value)
    return value


def mask_body(node):
    """A decoded body with every integer "Port" masked (recursive)."""
    if isinstance(node, dict):
        return {k: ("<port>" if k == "Port" and isinstance(v, int)
                    else mask_body(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [mask_body(v) for v in node]
    return mask_text(node)


def normalise_line(obj, drop_record_sizes, collapse=False):
    """One line's fields, minus what varies between runs."""
    out = {}
    for key, value in obj.items():
        if key in VARYING or key.endswith("_us"):
            continue
        if key in BODY_KEYS:
            out[key] = mask_body(value)
        elif key == "reason" and isinstance(value, str) and \
                UNANSWERED_RE.match(value):
            out[key] = CLIENT_CLOSED
        else:
            out[key] = mask_text(value)
    if drop_record_sizes and out.get("type") == "request":
        out.pop(RECORD_SIZE.get(out.get("api"), ""), None)
        if out.get("api") in RECORD_SIZE and \
                isinstance(out.get("topics"), list):
            out["topics"] = [
                {k: v for k, v in t.items() if k not in TOPIC_RECORDS}
                if isinstance(t, dict) else t for t in out["topics"]]
    if (drop_record_sizes or collapse) and out.get("event") == "close":
        for k in CLOSE_TRAFFIC:
            out.pop(k, None)
    return out


def dump(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


def read_lines(name, stream):
    """(line number, object) for each non-blank line."""
    for n, text in enumerate(stream, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise InputError("%s:%d: not JSON: %s" % (name, n, e))
        if not isinstance(obj, dict):
            raise InputError("%s:%d: not a JSON object" % (name, n))
        yield n, obj


def split_connections(lines):
    """Lists of (line number, object), one per connection, file order."""
    conns = []
    current = {}
    for n, obj in lines:
        key = (obj.get("listener"), obj.get("client_addr"),
               obj.get("client_port"))
        if key not in current or (obj.get("type") == "connection" and
                                  obj.get("event") == "open"):
            current[key] = []
            conns.append(current[key])
        current[key].append((n, obj))
    return conns


def order_key(item):
    n, obj = item
    corr = obj.get("correlation_id")
    return (PHASE.get(obj.get("event"), 1),
            corr if isinstance(corr, int) else -1, n)


def skeleton(obj):
    """What a line is, not what it says: the first sort key of connections,
    so that a change inside a line (an action, a size) shows in a diff as
    that line changed rather than as connections moving around."""
    corr = obj.get("correlation_id")
    return (PHASE.get(obj.get("event"), 1), str(obj.get("type")),
            str(obj.get("api")), corr if isinstance(corr, int) else -1)


def collapse_runs(objs):
    """Runs of request lines equal but for correlation_id: one line."""
    out = []
    for obj in objs:
        if obj.get("type") == "request":
            obj = {k: v for k, v in obj.items() if k != "correlation_id"}
            if out and out[-1] == obj:
                continue
        out.append(obj)
    return out


def normalise(name, stream, collapse, drop_record_sizes):
    """The canonical lines of one audit file, as strings."""
    blocks = []
    for conn in split_connections(read_lines(name, stream)):
        conn.sort(key=order_key)
        objs = [normalise_line(obj, drop_record_sizes, collapse)
                for _, obj in conn]
        if collapse:
            objs = collapse_runs(objs)
        client_id = next((o["client_id"] for o in objs
                          if isinstance(o.get("client_id"), str)), "")
        listener = objs[0].get("listener")
        blocks.append(((listener if isinstance(listener, str) else "",
                        client_id, [skeleton(o) for o in objs],
                        [dump(o) for o in objs]), objs))
    blocks.sort(key=lambda b: b[0])
    if collapse:
        seen, kept = set(), []
        for b in blocks:
            if tuple(b[0][3]) not in seen:
                seen.add(tuple(b[0][3]))
                kept.append(b)
        blocks = kept
    out = []
    for rank, (_, objs) in enumerate(blocks, 1):
        for obj in objs:
            obj["conn"] = rank
            out.append(dump(obj))
    return out


def main(argv):
    ap = argparse.ArgumentParser(
        description="krelay audit lines in a canonical form (see the "
        "comment at the top of this file)")
    ap.add_argument("--collapse-runs", action="store_true",
                    help="fold runs of equal request lines, drop "
                    "correlation_id from request lines")
    ap.add_argument("--drop-record-sizes", action="store_true",
                    help="drop Produce request_bytes and Fetch "
                    "response_bytes")
    ap.add_argument("files", nargs="*", metavar="FILE",
                    help="audit files (default: standard input)")
    args = ap.parse_args(argv)
    files = args.files or ["-"]
    out = sys.stdout
    try:
        for name in files:
            if len(files) > 1:
                out.write(dump({"file": os.path.basename(name)}) + "\n")
            if name == "-":
                lines = normalise("<stdin>", sys.stdin, args.collapse_runs,
                                  args.drop_record_sizes)
            else:
                with open(name, encoding="utf-8") as f:
                    lines = normalise(name, f, args.collapse_runs,
                                      args.drop_record_sizes)
            for text in lines:
                out.write(text + "\n")
    except (OSError, UnicodeDecodeError, InputError) as e:
        sys.stderr.write("audit_normalise.py: %s\n" % e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
