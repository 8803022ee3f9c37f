#!/bin/bash
# Rules (issue 3): a version clamp makes kcat use lower Produce and Fetch
# versions, seen in the audit log, and every message still arrives; every
# audit line is JSON with the right topics, sizes and error codes for a
# produce + consume run with an injected broker error.  Issue 14: the
# lines say which krelay (the host name) and connection (c#W.N, as the
# log names it), where the requests went, kcat's software (KIP-511),
# Produce acks and records per topic (200 messages: 200 records in the
# Produce requests that succeeded), the record bytes the Fetch responses
# returned (streamed: equal to what the successful Produce requests
# sent, which the mock stores as sent), and close lines with bytes,
# requests, cause and the connection's ClientId (also where no request
# took the rules path).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 90
W=$KR_WORK
cat >"$W/rules.ini" <<EOR
[audit]
target = $W/audit.log

[rule old-versions]
api = Produce, Fetch
clamp_max_version = 4

[rule audit-data]
api = Produce, Fetch
audit = true
EOR
KR_EXTRA_CONF=$W/rules.ini
# The first two Produce requests fail with NOT_LEADER_OR_FOLLOWER (6):
# librdkafka retries them, the audit log shows the error.
KR_MOCK_ARGS="-e 0:6:2"
kr_start_mock rca:1
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no audit log"

KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000)
kr_payloads "$W/in.txt" 200 rca
kr_run 60 "${KC[@]}" -P -t rca -X linger.ms=5 -X retry.backoff.ms=50 \
    <"$W/in.txt" 2>"$W/kcat-P.log" || kr_fail "kcat -P failed"
kr_run 60 "${KC[@]}" -C -t rca -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
sort "$W/in.txt" >"$W/in.sorted"
sort "$W/out.txt" >"$W/out.sorted"
cmp -s "$W/in.sorted" "$W/out.sorted" ||
    kr_fail "consumed messages differ: $(diff "$W/in.sorted" "$W/out.sorted" | head -5)"
kr_log "200 messages produced and consumed back through the clamp"

# krelay writes audit lines from a thread: wait (bounded) for the last
# kinds of line the check below needs, a Fetch and a connection close.
audit_has_fetch_and_close() {
    grep -q '"api":"Fetch"' "$W/audit.log" 2>/dev/null &&
        grep -q '"event":"close"' "$W/audit.log" 2>/dev/null
}
kr_wait_for 60 audit_has_fetch_and_close
# every connection closed (kcat is gone): its close line is written
kr_wait_for 60 kr_audit_closed "$W/audit.log"
"$KR_PY" - "$W/audit.log" "$W/krelay.log" <<'PYEOF' || kr_fail "audit log check failed"
import json, re, socket, sys
lines = open(sys.argv[1]).read().splitlines()
log = open(sys.argv[2]).read()
assert lines, "empty audit log"
recs = [json.loads(l) for l in lines]          # every line is JSON
req = [r for r in recs if r.get("type") == "request"]
conn = [r for r in recs if r.get("type") == "connection"]
prod = [r for r in req if r["api"] == "Produce"]
fetch = [r for r in req if r["api"] == "Fetch"]
assert prod and fetch, "no Produce or Fetch lines"
for r in req:
    assert r["api_key"] in (0, 1), r
    assert r["api_version"] <= 4, "version above the clamp: %r" % r
    if r.get("incomplete"):
        # a Fetch long poll the consumer left when it closed (issue 14)
        assert r["api"] == "Fetch" and r["request_bytes"] > 0, r
        assert r["note"].startswith("connection closed "), r
        continue
    assert r["request_bytes"] > 0 and r["response_bytes"] > 0, r
    assert r["total_us"] >= r["upstream_us"] >= 0, r
    assert r["client_addr"] == "127.0.0.1" and r["client_port"] > 0, r
    assert [t["name"] for t in r["topics"]] == ["rca"], r
    assert r["time"].endswith("Z") and "." in r["time"], r
errs = {}
for r in prod:
    for k, v in r["errors"].items():
        errs[k] = errs.get(k, 0) + v
assert errs == {"NOT_LEADER_OR_FOLLOWER": 2}, errs
ok = [r for r in prod if not r["errors"]]
assert ok, "no successful Produce"
assert all(r["topics"][0]["partitions"] == 1 for r in prod), prod
events = sorted({c["event"] for c in conn})
assert events == ["close", "open"], events
# issue 14: who and where
host = socket.gethostname()
opened = {c["conn_id"] for c in conn if c["event"] == "open"}
closed = {c["conn_id"]: c for c in conn if c["event"] == "close"}
for r in recs:
    assert r["instance"] == host, r
    assert re.fullmatch(r"c#[0-9]+\.[0-9]+", r["conn_id"]), r
    assert r["conn_id"] in opened, "no open line: %r" % r
    assert "[%s 127.0.0.1:%d > " % (r["conn_id"], r["client_port"]) in log, \
        "the log does not name %s" % r["conn_id"]
    if r["route"] == "node":
        assert r["node_id"] in (1, 2, 3), r
    else:
        assert r["route"] == "bootstrap" and "node_id" not in r, r
for r in req:
    assert re.fullmatch(r"127\.0\.0\.1:[0-9]+", r["upstream_addr"]), r
    assert r["client_software_name"] == "librdkafka", r
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+.*",
                        r["client_software_version"]), r
    assert "upstream_version" not in r, "nothing was translated: %r" % r
    assert r["conn_id"] in closed, "no close line: %r" % r
for r in prod:
    assert r["route"] == "node" and r["acks"] == -1, r
    assert "transactional_id" not in r, r
    t = r["topics"][0]
    assert t["records"] > 0 and t["record_bytes"] > 61 * 1, r
fetch = [r for r in fetch if not r.get("incomplete")]
records = sum(r["topics"][0]["records"] for r in ok)
assert records == 200, "records in the successful Produce lines: %d" % records
sent = sum(r["topics"][0]["record_bytes"] for r in ok)
got = sum(t.get("record_bytes", 0) for r in fetch for t in r["topics"])
assert all("record_bytes" in t for r in fetch for t in r["topics"]), fetch
assert got == sent, "Fetch returned %d record bytes, Produce sent %d" % (
    got, sent)
for c in closed.values():
    assert c["cause"] == "client", c
    # the last ClientId the connection sent, whether its requests took
    # the rules path or went cut-through (kcat's client.id: rdkafka)
    assert c.get("client_id") == "rdkafka", c
    assert c["reason"].startswith("client closed"), c
    assert c["bytes_from_client"] > 0 and c["bytes_to_client"] > 0, c
    assert c["requests"] >= 1 and c["duration_us"] > 0, c
    own = [r for r in req if r["conn_id"] == c["conn_id"]]
    assert c["requests"] >= len(own), (c, len(own))
    assert c["bytes_from_client"] >= sum(r["request_bytes"] for r in own), c
    assert c["bytes_to_client"] >= sum(r.get("response_bytes", 0)
                                       for r in own), c
print("audit: %d lines, %d Produce (max v%d, %d records, %d bytes), "
      "%d Fetch (max v%d, %d bytes), errors %r"
      % (len(recs), len(prod), max(r["api_version"] for r in prod), records,
         sent, len(fetch), max(r["api_version"] for r in fetch), got, errs))
PYEOF
kr_finish
