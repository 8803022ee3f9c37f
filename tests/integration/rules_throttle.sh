#!/bin/bash
# Rules (issue 3): injected ThrottleTimeMs values reach the client (a raw
# client decodes the responses it gets), and in enforce mode N produce
# requests of a kcat producer take at least (N-1) x throttle_ms, both for
# KIP-219 versions (krelay stops reading) and for older ones (krelay holds
# the response).  Only lower bounds are asserted.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 90
W=$KR_WORK
T=250
N=6
cat >"$W/rules.ini" <<EOR
[audit]
target = $W/audit.log

[rule audit-produce]
api = Produce
audit = true

[rule inject-set]
api = FindCoordinator, Metadata
throttle_ms = 777

[rule inject-add]
api = ApiVersions
throttle_ms = 40
throttle_op = add

[rule fault-offsets]
api = ListOffsets
client_id = raw
fault_latency_ms = 400
fault_error = NOT_LEADER_OR_FOLLOWER

[rule old-clients]
client_id = old-*
api = Produce
clamp_max_version = 4

[rule enforce-produce]
api = Produce
topic = thr
throttle_ms = $T
throttle_mode = enforce
EOR
KR_EXTRA_CONF=$W/rules.ini
kr_start_mock thr:1
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no rules"

# 1. inject: the client sees krelay's ThrottleTimeMs.
cat >"$W/req.jsonl" <<'EOR'
{"header":{"RequestApiKey":10,"RequestApiVersion":2,"CorrelationId":1,"ClientId":"raw"},"body":{"Key":"g1","KeyType":0}}
{"header":{"RequestApiKey":3,"RequestApiVersion":1,"CorrelationId":2,"ClientId":"raw"},"body":{"Topics":null}}
{"header":{"RequestApiKey":18,"RequestApiVersion":2,"CorrelationId":3,"ClientId":"raw"},"body":{}}
EOR
kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/rules_client.py" \
    "$KR_BOOTSTRAP" "$top_builddir/krelay-codec" <"$W/req.jsonl" \
    >"$W/rsp.jsonl" 2>"$W/client.log" || kr_fail "raw client failed"
"$KR_PY" - "$W/rsp.jsonl" <<'PYEOF' || kr_fail "ThrottleTimeMs check failed"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 3, r
assert r[0]["header"]["CorrelationId"] == 1, r[0]
assert r[0]["body"]["ThrottleTimeMs"] == 777, r[0]["body"]
# the coordinator is krelay's address (broker rewrite and rules together)
assert r[0]["body"]["Port"] > 0 and r[0]["body"]["Host"] == "127.0.0.1", r[0]
assert "ThrottleTimeMs" not in r[1]["body"], r[1]["body"]   # v1 has none
assert len(r[1]["body"]["Brokers"]) == 3, r[1]["body"]
assert r[2]["body"]["ThrottleTimeMs"] >= 40, r[2]["body"]   # added
assert r[2]["body"]["ErrorCode"] == 0 and r[2]["body"]["ApiKeys"], r[2]
print("ThrottleTimeMs as sent to the client: FindCoordinator v2 %d, "
      "ApiVersions v2 %d" % (r[0]["body"]["ThrottleTimeMs"],
                             r[2]["body"]["ThrottleTimeMs"]))
PYEOF

# 1b. fault injection: a delayed ListOffsets response with its error
# replaced (probability 1).
echo '{"header":{"RequestApiKey":2,"RequestApiVersion":1,"CorrelationId":9,"ClientId":"raw"},"body":{"ReplicaId":-1,"Topics":[{"Name":"thr","Partitions":[{"PartitionIndex":0,"Timestamp":-1}]}]}}' \
    >"$W/lo.jsonl"
t0=$(date +%s%N)
kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/rules_client.py" \
    "$KR_BOOTSTRAP" "$top_builddir/krelay-codec" <"$W/lo.jsonl" \
    >"$W/lo-rsp.jsonl" 2>"$W/client-lo.log" || kr_fail "raw client failed"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -ge 400 ] || kr_fail "fault_latency_ms 400: answered in $ms ms"
grep -q '"Partitions":\[{"PartitionIndex":0,"ErrorCode":6,' "$W/lo-rsp.jsonl" ||
    kr_fail "fault_error not in the response: $(cat "$W/lo-rsp.jsonl")"
kr_log "fault: ListOffsets answered after $ms ms with NOT_LEADER_OR_FOLLOWER"

# 2. enforce: N one-message Produce requests on one connection.
enforce_run() {
    local cid=$1 t0 t1 ms
    kr_payloads "$W/in-$cid.txt" "$N" "$cid"
    t0=$(date +%s%N)
    kr_run 60 kcat -b "$KR_BOOTSTRAP" -P -t thr -p 0 -X client.id="$cid" \
        -X linger.ms=0 -X batch.num.messages=1 -X queue.buffering.max.ms=0 \
        <"$W/in-$cid.txt" 2>"$W/kcat-$cid.log" || kr_fail "kcat $cid failed"
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    [ "$ms" -ge $(( (N - 1) * T )) ] ||
        kr_fail "$cid: $N throttled Produce requests took $ms ms < $(( (N - 1) * T ))"
    kr_log "$cid: $N Produce requests with enforce throttle $T ms took $ms ms"
}
enforce_run new-client          # Produce v7: KIP-219, krelay stops reading
enforce_run old-client          # clamped to v4: krelay holds responses
"$KR_PY" - "$W/audit.log" <<'PYEOF' || kr_fail "audit check failed"
import json, sys
v = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("api") == "Produce":
        v.setdefault(r["client_id"], set()).add(r["api_version"])
        assert "throttled" in r["actions"], r
assert max(v["old-client"]) <= 4 < min(v["new-client"]), v
print("Produce versions per client: %r" % v)
PYEOF
kr_run 30 kcat -b "$KR_BOOTSTRAP" -C -t thr -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
[ "$(wc -l <"$W/out.txt")" -eq $((2 * N)) ] ||
    kr_fail "expected $((2 * N)) messages, got $(wc -l <"$W/out.txt")"
kr_finish
