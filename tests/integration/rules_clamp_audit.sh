#!/bin/bash
# Rules (issue 3): a version clamp makes kcat use lower Produce and Fetch
# versions, seen in the audit log, and every message still arrives; every
# audit line is JSON with the right topics, sizes and error codes for a
# produce + consume run with an injected broker error.
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
"$KR_PY" - "$W/audit.log" <<'PYEOF' || kr_fail "audit log check failed"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
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
print("audit: %d lines, %d Produce (max v%d), %d Fetch (max v%d), errors %r"
      % (len(recs), len(prod), max(r["api_version"] for r in prod),
         len(fetch), max(r["api_version"] for r in fetch), errs))
PYEOF
kr_finish
