#!/bin/bash
# Old clients straight at a Kafka-4-like upstream, without krelay (issue
# 10, "Tests"): `krmock -K 4.0.0` has only the versions Kafka 4.0.0
# accepts (KIP-896), and each old client fails there, each in its own
# named way; against a normal mock (no restriction) the consumers that can
# read it do, so the client scripts are proven able to pass.  One client
# per kind (kafka-python 0.10.0, kcat with fallback 0.9.0, kafka-node);
# the whole matrix is legacy_matrix.sh (make check-long).  The clients and
# the outcomes: legacy_lib.sh.
#
# Observed (librdkafka 2.0.2's mock, kafka-python 2.0.2, kcat 1.7.1,
# kafka-node 5.0.0), and asserted below:
#   Kafka-4-like mock:
#     kafka-python 0.10.0 produce   Produce v2, magic 1: UnsupportedVersionError
#                                   [Error 35] per partition (the mock
#                                   refuses magic 0/1)
#     kafka-python 0.10.0 group     JoinGroup v0: the connection is closed
#                                   (JoinGroup 2-5), again and again
#     kafka-python 0.10.0 fetch     from an explicit offset (no ListOffsets,
#                                   no group): Fetch v2 closed (Fetch 4-11)
#     kcat fallback 0.9.0 produce   Produce v1, magic 0: "Delivery failed ...
#       (gzip)                      Broker: API version not supported"
#     kcat fallback 0.9.0 consume   from the beginning: ListOffsets v0 (to
#                                   find it) closed, "Broker transport
#                                   failure ... Disconnected"; kcat exits 1
#     kafka-node produce            Produce v2, magic 1: error 35, which
#                                   kafka-node has no name for (an Error
#                                   with an empty message)
#     kafka-node consume            nothing: it takes the highest version it
#                                   knows up to the broker's maximum and
#                                   ignores the minimum (JoinGroup v0, Fetch
#                                   v2, ListOffsets v0, all below)
#   normal mock, the set written by a modern kcat:
#     kafka-python 0.10.0 group     reads it back identical (Fetch v2 with
#                                   RecordBatch v2 inside: kafka-python reads
#                                   magic 2 whatever the Fetch version)
#     kcat fallback 0.9.0 consume   identical
#     kafka-node consume            fails: "Not a message set. Magic byte
#                                   is 2" (it reads only magic 0/1: what
#                                   krelay's down-conversion is for)
# Meanwhile (with the direct cases: they wait for their clients to fail),
# issue 10's reorder: an old producer's set split into several Produce
# requests (legacy_batch_max_bytes 4096) through a krelay of its own, to
# a Kafka-4-like mock of its own whose first Produce is answered
# NOT_LEADER_OR_FOLLOWER (krmock -e 0:6:1): kafka-python 0.10.0 with
# retries (one request in flight) must read the set back once, in order,
# and krelay must say the set's first Produce failed (and the rest of it
# was not sent).  With the rounds pipelined (before) the others were
# stored and the retry stored them again after them: the partition read
# a part of the set, then all of it.
# Then kcat (fallback 0.9.0: no ApiVersions) through a fresh krelay with
# translate_legacy and no broker_profile: krelay asks the brokers'
# ApiVersions itself on each connection (issue 10), byte for byte.  Then
# the same clients through krelay with translation and the profile
# (legacy_lib.sh's legacy_through_krelay short: one case per kind, byte
# for byte).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/legacy_lib.sh"

kr_need_py kafka
kr_need_cmd kcat
kr_setup 120
W=$KR_WORK
N=40                    # messages per set: 20 B to 4 KiB, 10 null keys
F=$KR_LEGACY_FAIL_WAIT

# topics: p- written by old producers, c- read by old consumers (seeded
# by a modern kcat), f- one partition read from an offset
leg_start_mock_pair "${LEG_KRELAY_TOPICS_SHORT[@]}" p-kpy:3 p-kcat:3 p-node:3 \
    c-kpy:3 c-kcat:3 c-node:3 \
    f-kpy:1 t-ask:3
leg_seed_all "$LEG_K4" "$LEG_NORMAL" -- c-kpy d1 "$N" -- c-kcat d1 "$N" -- \
    c-node d1 "$N" -- f-kpy d1 "$N" -p 0

# 0. The reorder case's mock and krelay, its client started (checked
# after section 2's).  kr_start_mock's variables go back to the pair's
# Kafka-4-like mock.
KR_MOCK_ARGS="-K 4.0.0 -e 0:6:1" kr_start_mock r-kpy:1
R_MOCK=$KR_MOCK_BOOTSTRAP
R_MOCK_PID=$KR_MOCK_PID
KR_MOCK_BOOTSTRAP=$LEG_K4
KR_MOCK_PID=$LEG_K4_PID
KR_MOCK_BASE=$LEG_K4_BASE
KR_UPSTREAM_BOOTSTRAP=$R_MOCK \
KR_LISTENER_CONF=$'translate_legacy = true\nlegacy_batch_max_bytes = 4096' \
KR_UPSTREAM_CONF="broker_profile = kafka-4.0.0" kr_start_krelay
leg_start r-kpy-retry leg_kpy roundtrip "$KR_BOOTSTRAP" r-kpy 0.10.0 kr \
    "$N" --partition 0 --retries 3 --out "$W/r-kpy-retry.jsonl"

# 1. The Kafka-4-like upstream: every old client fails.  All at once
# (each failing consumer waits F seconds).
leg_start k4-kpy-produce leg_kpy produce "$LEG_K4" p-kpy 0.10.0 dp "$N" \
    --timeout "$F"
leg_start k4-kpy-group leg_kpy consume "$LEG_K4" c-kpy 0.10.0 d1 "$N" \
    --group ld-kpy --timeout "$F"
leg_start k4-kpy-fetch leg_kpy consume "$LEG_K4" f-kpy 0.10.0 d1 "$N" \
    --partition 0 --offset 0 --timeout "$F"
leg_start k4-kcat-produce leg_kcat_produce "$LEG_K4" p-kcat dp "$N" 0.9.0 gzip
leg_start k4-kcat-consume leg_kcat_consume "$LEG_K4" c-kcat d1 "$N" 0.9.0 \
    "$W/k4-kcat.json"
if leg_have_node; then
    leg_start k4-node-produce leg_node produce "$LEG_K4" p-node dp "$N" \
        ld-node "$F"
    leg_start k4-node-consume leg_node consume "$LEG_K4" c-node d1 "$N" \
        ld-node "$F"
fi
# 2. The normal upstream: the consumers that can read it do.
leg_start n-kpy-group leg_kpy consume "$LEG_NORMAL" c-kpy 0.10.0 d1 "$N" \
    --group ld-kpy --timeout 60
leg_start n-kcat-consume leg_kcat_consume "$LEG_NORMAL" c-kcat d1 "$N" \
    0.9.0 "$W/n-kcat.json"
if leg_have_node; then
    # ends at its 50th error (it fails on every fetch): a longer bound
    leg_start n-node-consume leg_node consume "$LEG_NORMAL" c-node d1 "$N" \
        ld-node 60
fi
leg_wait

leg_check k4-kpy-produce 2 "$LEG_35_KPY"
leg_check k4-kpy-group 3 "$(leg_closed_kpy JoinGroupRequest_v0)"
leg_check k4-kpy-fetch 3 "$(leg_closed_kpy FetchRequest_v2)"
leg_check k4-kcat-produce 2 "$LEG_35_KCAT"
leg_check k4-kcat-consume 3 "$(leg_closed_kcat "ListOffsetsRequest (v0)")"
leg_check n-kpy-group 0 "$LEG_OK"
leg_check n-kcat-consume 0 "$LEG_OK"
# 0. the reorder case: back once, in order; its first Produce failed in
# a round of krelay's own, and nothing more of that set went up
leg_check r-kpy-retry 0 "$LEG_OK"
failed=$(grep -c "\] Produce v2 CorrelationId [0-9]* not sent: krelay's own Produce v[0-9]* ahead of it (1 of [0-9]*, .*) was answered with NOT_LEADER_OR_FOLLOWER (6) for topic r-kpy partition 0: krelay answers it" \
    "$W/krelay.log")
kr_log "r-kpy-retry: sets answered by krelay after a failed round:" \
    "$failed: $(grep -m 1 -o "Produce v2 CorrelationId [0-9]* not sent: .*" \
        "$W/krelay.log")"
[ "$failed" = 1 ] ||
    kr_spec_fail "r-kpy-retry: want one set answered by krelay after its" \
        "first round failed, got $failed"
kr_check_no_close
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
mv "$W/krelay.log" "$W/krelay-retry.log"
kr_stop "$R_MOCK_PID" krmock "$W/mock.log"
if leg_have_node; then
    leg_check k4-node-produce 2 "$LEG_35_NODE"
    leg_check k4-node-consume 3 \
        "^CONSUME-FAILED kafka-node: 0 of $N .*below the broker's minimum: fetch v2 \\(min 4\\), joinGroup v0 \\(min 2\\), offset v0 \\(min 1\\)"
    leg_check n-node-consume 3 \
        "^CONSUME-FAILED kafka-node: 0 of $N .*Not a message set\\. Magic byte is 2"
fi

# 3. A fresh krelay with translate_legacy and no broker_profile: kcat
# with fallback 0.9.0 sends no ApiVersions, and no client taught this
# krelay anything before.  krelay asks the broker itself on each of
# kcat's upstream connections (its own ApiVersions v0 before the first
# request below Kafka 4's versions: Produce v1, ListOffsets v0, Fetch v1;
# the answer never reaches kcat), then translates from what it learned:
# produced and consumed byte for byte.
: >"$KR_ACCEPT_LOG"
KR_LISTENER_CONF="translate_legacy = true" KR_UPSTREAM_CONF= kr_start_krelay
leg_run ta-kcat 0 "$LEG_OK" leg_kcat_roundtrip "$KR_BOOTSTRAP" t-ask ka "$N" \
    0.9.0 gzip "$W/ta-kcat.json"
asks=$(grep -c "asks upstream .* ApiVersions v0 before " "$W/krelay.log")
learned=$(grep -c "ApiVersions v0: .*Kafka 4" "$W/krelay.log")
kr_log "krelay asked ApiVersions $asks time(s), learned Kafka 4 $learned" \
    "time(s): $(grep -m 1 "asks upstream" "$W/krelay.log")"
[ "$asks" -ge 2 ] && [ "$learned" = "$asks" ] ||
    kr_spec_fail "krelay asked ApiVersions on $asks connection(s) and" \
        "learned Kafka 4 on $learned: want the same, at least 2 (the" \
        "producer's and the consumer's)"
grep -Eq "sent as v[0-9]+ \(translate_legacy\)" "$W/krelay.log" ||
    kr_spec_fail "no request translated"
kr_check_no_close
kr_check_no_direct
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
mv "$W/krelay.log" "$W/krelay-ask.log"

# 4. Through krelay with translation (legacy_lib.sh).
legacy_through_krelay short

leg_finish
