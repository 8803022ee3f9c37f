#!/bin/bash
# Rules (issue 3): a deny rule on a topic makes a producer's writes to it
# fail with TOPIC_AUTHORIZATION_FAILED while another topic works; deny
# rules for admin APIs answer hand-built CreateTopics, DeleteTopics and
# IncrementalAlterConfigs requests (the mock broker has none of them)
# with their own error responses; a produce policy refuses a gzip
# producer and accepts a zstd one.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_py confluent_kafka
kr_setup 90
W=$KR_WORK
cat >"$W/rules.ini" <<EOR
[rule secret-topics]
api = Produce
topic = secret-*
deny = true

[rule no-admin]
api = CreateTopics, DeleteTopics, IncrementalAlterConfigs
deny = true
deny_error = CLUSTER_AUTHORIZATION_FAILED

# no deny_error: the default follows the request, as a broker's would
[rule no-coordinators]
api = FindCoordinator
deny = true

[rule compression-policy]
api = Produce
topic = pol
allowed_compression = none, zstd
EOR
KR_EXTRA_CONF=$W/rules.ini
kr_start_mock open:2 secret-a:1 pol:1
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no rules"

# 1. produce: denied topic, open topic, gzip and zstd to the policy topic
kr_run 60 "$KR_PY" - "$KR_BOOTSTRAP" >"$W/produce.txt" 2>"$W/produce.log" <<'PYEOF' ||
import sys
from confluent_kafka import Producer

def run(topic, compression, n=20):
    res = {}
    def cb(err, msg):
        k = err.name() if err is not None else "OK"
        res[k] = res.get(k, 0) + 1
    p = Producer({"bootstrap.servers": sys.argv[1],
                  "compression.type": compression, "linger.ms": 5,
                  "message.timeout.ms": 15000, "retries": 2})
    for i in range(n):
        # compressible payloads: librdkafka sends a batch uncompressed
        # when compression does not make it smaller
        p.produce(topic, ("%s-%03d-" % (topic, i)) + "x" * 400, on_delivery=cb)
    p.flush(30)
    print(topic, compression, sorted(res.items()))

run("secret-a", "none")
run("open", "none")
run("pol", "gzip")
run("pol", "zstd")
PYEOF
    kr_fail "producer script failed"
cat "$W/produce.txt"
grep -qx "secret-a none \[('TOPIC_AUTHORIZATION_FAILED', 20)\]" "$W/produce.txt" ||
    kr_fail "secret-a was not denied with TOPIC_AUTHORIZATION_FAILED"
grep -qx "open none \[('OK', 20)\]" "$W/produce.txt" ||
    kr_fail "open topic did not work"
grep -qx "pol gzip \[('UNSUPPORTED_COMPRESSION_TYPE', 20)\]" "$W/produce.txt" ||
    kr_fail "gzip producer not refused with UNSUPPORTED_COMPRESSION_TYPE"
grep -qx "pol zstd \[('OK', 20)\]" "$W/produce.txt" ||
    kr_fail "zstd producer refused"

# 2. admin APIs: hand-built requests, answered by krelay
cat >"$W/admin.jsonl" <<'EOR'
{"header":{"RequestApiKey":19,"RequestApiVersion":4,"CorrelationId":11,"ClientId":"admin"},"body":{"Topics":[{"Name":"new-a","NumPartitions":3,"ReplicationFactor":1,"Assignments":[],"Configs":[]},{"Name":"new-b","NumPartitions":1,"ReplicationFactor":1,"Assignments":[],"Configs":[]}],"timeoutMs":5000,"validateOnly":false}}
{"header":{"RequestApiKey":20,"RequestApiVersion":3,"CorrelationId":12,"ClientId":"admin"},"body":{"TopicNames":["open","pol"],"TimeoutMs":5000}}
{"header":{"RequestApiKey":44,"RequestApiVersion":1,"CorrelationId":13,"ClientId":"admin"},"body":{"Resources":[{"ResourceType":2,"ResourceName":"open","Configs":[{"Name":"retention.ms","ConfigOperation":0,"Value":"1000"}]},{"ResourceType":4,"ResourceName":"1","Configs":[]}],"ValidateOnly":false}}
{"header":{"RequestApiKey":10,"RequestApiVersion":2,"CorrelationId":15,"ClientId":"admin"},"body":{"Key":"group-1","KeyType":0}}
{"header":{"RequestApiKey":10,"RequestApiVersion":2,"CorrelationId":16,"ClientId":"admin"},"body":{"Key":"txn-1","KeyType":1}}
{"header":{"RequestApiKey":3,"RequestApiVersion":1,"CorrelationId":14,"ClientId":"admin"},"body":{"Topics":null}}
EOR
kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/rules_client.py" \
    "$KR_BOOTSTRAP" "$top_builddir/krelay-codec" <"$W/admin.jsonl" \
    >"$W/admin-rsp.jsonl" 2>"$W/admin.log" || kr_fail "raw client failed"
"$KR_PY" - "$W/admin-rsp.jsonl" <<'PYEOF' || kr_fail "admin responses wrong"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 6, r
ct, dt, iac, fcg, fct, md = (x["body"] for x in r)
assert [x["header"]["CorrelationId"] for x in r] == [11, 12, 13, 15, 16, 14], r
# FindCoordinator: GROUP_AUTHORIZATION_FAILED for a group key,
# TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional one
assert (fcg["ErrorCode"], fct["ErrorCode"]) == (30, 53), (fcg, fct)
assert [(t["Name"], t["ErrorCode"]) for t in ct["Topics"]] == \
    [("new-a", 31), ("new-b", 31)], ct
assert [(t["Name"], t["ErrorCode"]) for t in dt["Responses"]] == \
    [("open", 31), ("pol", 31)], dt
assert [(x["ResourceType"], x["ResourceName"], x["ErrorCode"])
        for x in iac["Responses"]] == [(2, "open", 31), (4, "1", 31)], iac
assert len(md["Brokers"]) == 3, md      # the connection is still usable
print("admin APIs denied: CreateTopics, DeleteTopics, "
      "IncrementalAlterConfigs answered CLUSTER_AUTHORIZATION_FAILED")
PYEOF
grep -q "CreateTopics v4 CorrelationId 11 denied by \[rule no-admin\]" \
    "$W/krelay.log" || kr_fail "no log line for the denied CreateTopics"
kr_finish
