#!/bin/bash
# The legacy-client matrix of issue 10 (make check-long): every old client
# variant straight at Kafka-4-like upstreams (`krmock -K 4.0.0`, and -K
# 4.0.1 where JoinGroup v0-1 came back) fails in its named way, and reads
# a normal mock where it can; then the same clients through krelay with
# translation (legacy_lib.sh; KR_LEGACY_THROUGH_KRELAY=0 skips them).
# legacy_direct.sh is the short version in `make check`; the clients and
# the outcomes are legacy_lib.sh's.
#
# Variants: kafka-python api_version 0.10.0, 0.9 and 0.8.2 (no groups
# for 0.8.2), uncompressed and gzip; kcat with api.version.request=false
# and broker.version.fallback 0.9.0 and 0.10.0, each with gzip, snappy and
# lz4; kafka-node; a group of three kafka-python 0.10.0 consumers; fetches
# from an offset inside a batch; a zstd topic.
#
# Observed, and asserted below (besides legacy_direct.sh's):
#   - kafka-python fetches from an explicit offset with Fetch v2 (0.10.0),
#     v1 (0.9), v0 (0.8.2): each closed by the Kafka-4-like mock; its
#     consumers from the beginning ask ListOffsets v0 first (closed);
#     0.10.0 and 0.9 groups send JoinGroup v0 (closed with 4.0.0; with
#     4.0.1 JoinGroup passes and ListOffsets v0 is the first refused).
#   - kcat with fallback 0.9.0 fetches with Fetch v1 (closed), produces
#     Produce v1 magic 0 with any codec (error 35, "Broker: API version
#     not supported").
#   - kcat with fallback 0.10.0 is NOT an old client with librdkafka
#     2.0.2: a fallback of 0.10.0 or later turns api.version.request back
#     on (rd_kafka_new), so it asks ApiVersions, and produces (Produce v7,
#     RecordBatch v2, still compressed) and consumes (Fetch v11) straight
#     against the Kafka-4-like mock.  Through krelay a clamp rule on its
#     client.id (legacy_lib.sh's LEG_KCAT10_RULE) answers its ApiVersions
#     with 0.10.0's Produce and Fetch versions: it then sends Produce v2
#     (magic 1) and Fetch v2 (asserted from its -d protocol log), which
#     krelay translates.
#   - On the normal mock, kafka-python 0.10.0/0.9/0.8.2 and kcat 0.9.0 read
#     RecordBatch v2 (zstd included: the Debian kafka-python finds
#     python3-zstandard; librdkafka has zstd) from any offset; kafka-node
#     cannot ("Not a message set. Magic byte is 2").
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/legacy_lib.sh"

kr_need_py kafka
kr_need_cmd kcat
kr_setup 400
W=$KR_WORK
N=40
F=$KR_LEGACY_FAIL_WAIT
KPY_APIS=(0.10.0 0.9 0.8.2)
declare -A FETCH_V=([0.10.0]=2 [0.9]=1 [0.8.2]=0)

topics=("${LEG_KRELAY_TOPICS[@]}" c-all:3 f-all:1 z-all:1 mid:1 midz:1
        p-node:3 g3:3)
for api in "${KPY_APIS[@]}"; do
    topics+=("p-kpy-$api:3" "pz-kpy-$api:3")
done
for codec in gzip snappy lz4; do
    topics+=("p-kcat09-$codec:3" "p-kcat10-$codec:3")
done
leg_start_mock_pair "${topics[@]}"
NORMAL=$LEG_NORMAL
K4=$LEG_K4
# c-all: the set from a modern producer over 3 partitions; f-all: all in
# partition 0; z-all: zstd; mid/midz: one batch in partition 0 (linger
# 500 ms), uncompressed and gzip, read from offsets inside it
leg_seed_all "$K4" "$NORMAL" -- c-all d1 "$N" -- f-all d1 "$N" -p 0 -- \
    z-all d1 "$N" -z zstd -- mid dm "$N" -p 0 -X linger.ms=500 -d msg -- \
    midz dm "$N" -p 0 -z gzip -X linger.ms=500 -d msg
for f in "$W/seed-mid-${NORMAL##*:}.err" "$W/seed-midz-${NORMAL##*:}.err"; do
    out=$(leg_one_batch "$f" "$N") || kr_fail "$(basename "$f"): $out"
done

# 1. The Kafka-4-like upstream (4.0.0).
for api in "${KPY_APIS[@]}"; do
    leg_start "k4-kpy-$api-produce" leg_kpy produce "$K4" "p-kpy-$api" \
        "$api" dp "$N" --timeout "$F"
    leg_start "k4-kpy-$api-gzip" leg_kpy produce "$K4" "pz-kpy-$api" \
        "$api" dp "$N" --compression gzip --timeout "$F"
    if [ "$api" = 0.8.2 ]; then
        leg_start "k4-kpy-$api-begin" leg_kpy consume "$K4" c-all "$api" \
            d1 "$N" --timeout "$F"
    else
        leg_start "k4-kpy-$api-group" leg_kpy consume "$K4" c-all "$api" \
            d1 "$N" --group "lm-$api" --timeout "$F"
    fi
    leg_start "k4-kpy-$api-fetch" leg_kpy consume "$K4" f-all "$api" d1 \
        "$N" --partition 0 --offset 0 --timeout "$F"
done
leg_start k4-kpy-group3 leg_kpy group "$K4" g3 0.10.0 d3 "$N" \
    --produce auto --timeout 20
for codec in gzip snappy lz4; do
    leg_start "k4-kcat09-$codec" leg_kcat_produce "$K4" "p-kcat09-$codec" \
        dp "$N" 0.9.0 "$codec"
done
leg_start k4-kcat09-begin leg_kcat_consume "$K4" c-all d1 "$N" 0.9.0 \
    "$W/k4-kcat09-begin.json"
leg_start k4-kcat09-fetch leg_kcat_consume "$K4" f-all d1 "$N" 0.9.0 \
    "$W/k4-kcat09-fetch.json" 0
if leg_have_node; then
    leg_start k4-node-produce leg_node produce "$K4" p-node dp "$N" lm "$F"
    leg_start k4-node-consume leg_node consume "$K4" c-all d1 "$N" lm "$F"
fi
leg_wait
for api in "${KPY_APIS[@]}"; do
    leg_check "k4-kpy-$api-produce" 2 "$LEG_35_KPY"
    leg_check "k4-kpy-$api-gzip" 2 "$LEG_35_KPY"
    if [ "$api" = 0.8.2 ]; then
        leg_check "k4-kpy-$api-begin" 3 "$(leg_closed_kpy OffsetRequest_v0)"
    else
        leg_check "k4-kpy-$api-group" 3 "$(leg_closed_kpy JoinGroupRequest_v0)"
    fi
    leg_check "k4-kpy-$api-fetch" 3 \
        "$(leg_closed_kpy "FetchRequest_v${FETCH_V[$api]}")"
done
leg_check k4-kpy-group3 1 '^FAIL .*the members never all owned partitions'
for codec in gzip snappy lz4; do
    leg_check "k4-kcat09-$codec" 2 "$LEG_35_KCAT"
done
leg_check k4-kcat09-begin 3 "$(leg_closed_kcat "ListOffsetsRequest (v0)")"
leg_check k4-kcat09-fetch 3 "$(leg_closed_kcat "FetchRequest (v1)")"
if leg_have_node; then
    leg_check k4-node-produce 2 "$LEG_35_NODE"
    leg_check k4-node-consume 3 \
        "^CONSUME-FAILED kafka-node: 0 of $N .*below the broker's minimum: fetch v2 \\(min 4\\), joinGroup v0 \\(min 2\\), offset v0 \\(min 1\\)"
fi

# kcat with fallback 0.10.0 asks ApiVersions anyway: it works there.
for codec in gzip snappy lz4; do
    leg_start "k4-kcat10-$codec" leg_kcat_roundtrip "$K4" "p-kcat10-$codec" \
        "d10$codec" "$N" 0.10.0 "$codec" "$W/k4-kcat10-$codec.json"
done

# 2. The normal upstream: what the old consumers can read.
for api in "${KPY_APIS[@]}"; do
    g=(--group "lm-n-$api")
    [ "$api" = 0.8.2 ] && g=()
    leg_start "n-kpy-$api" leg_kpy consume "$NORMAL" c-all "$api" d1 "$N" \
        "${g[@]}" --timeout 60
    leg_start "n-kpy-$api-zstd" leg_kpy consume "$NORMAL" z-all "$api" d1 \
        "$N" --partition 0 --offset 0 --timeout 60
done
leg_start n-kpy-produce leg_kpy produce "$NORMAL" p-kpy-0.10.0 0.10.0 dp \
    "$N" --timeout "$F"
leg_start n-kpy-mid leg_kpy consume "$NORMAL" mid 0.10.0 dm "$N" \
    --partition 0 --offset 7 --timeout 60
leg_start n-kpy-midz leg_kpy consume "$NORMAL" midz 0.9 dm "$N" \
    --partition 0 --offset 13 --timeout 60
leg_start n-kcat09 leg_kcat_consume "$NORMAL" c-all d1 "$N" 0.9.0 \
    "$W/n-kcat09.json"
leg_start n-kcat09-zstd leg_kcat_consume "$NORMAL" z-all d1 "$N" 0.9.0 \
    "$W/n-kcat09-zstd.json"
leg_start n-kcat09-midz leg_kcat_consume "$NORMAL" midz dm "$N" 0.9.0 \
    "$W/n-kcat09-midz.json" 13
leg_wait
leg_start n-kpy-group3 leg_kpy group "$NORMAL" g3 0.10.0 d3 90 \
    --produce auto --timeout 90
if leg_have_node; then
    leg_start n-node-consume leg_node consume "$NORMAL" c-all d1 "$N" lm-n 60
fi
leg_wait
for codec in gzip snappy lz4; do
    leg_check "k4-kcat10-$codec" 0 "$LEG_OK"
done
for api in "${KPY_APIS[@]}"; do
    leg_check "n-kpy-$api" 0 "$LEG_OK"
    leg_check "n-kpy-$api-zstd" 0 "$LEG_OK"
done
leg_check n-kpy-produce 2 "$LEG_35_KPY"
leg_check n-kpy-mid 0 "^OK kafka-python 0.10.0 consume from offset 7: 33 messages .*identical"
leg_check n-kpy-midz 0 "^OK kafka-python 0.9 consume from offset 13: 27 messages .*identical"
leg_check n-kcat09 0 "$LEG_OK"
leg_check n-kcat09-zstd 0 "$LEG_OK"
leg_check n-kcat09-midz 0 "^OK kcat 0.9.0 consume from offset 13: 27 messages .*identical"
leg_check n-kpy-group3 0 "$LEG_OK.*members own partitions"
if leg_have_node; then
    leg_check n-node-consume 3 \
        "^CONSUME-FAILED kafka-node: 0 of $N .*Not a message set\\. Magic byte is 2"
fi

# 3. Kafka 4.0.1: JoinGroup v0-1 accepted again (KAFKA-19444), so an old
# group gets past JoinGroup and fails at ListOffsets v0.
LEG_K4_PREV=$LEG_K4_PID
KR_MOCK_ARGS="-K 4.0.1" kr_start_mock c401:3
K401=$KR_MOCK_BOOTSTRAP
grep -q "krmock: -K 4.0.1: .*Fetch 4\.\." "$W/mock.log" ||
    kr_fail "-K 4.0.1 did not restrict: $(grep 'krmock: -K' "$W/mock.log")"
grep "krmock: -K 4.0.1: " "$W/mock.log" | grep -q JoinGroup &&
    kr_fail "-K 4.0.1 restricted JoinGroup: $(grep 'krmock: -K 4.0.1' "$W/mock.log")"
leg_seed_all "$K401" -- c401 d1 "$N"
leg_run k401-kpy-0.10.0-group 3 "$(leg_closed_kpy OffsetRequest_v0)" \
    leg_kpy consume "$K401" c401 0.10.0 d1 "$N" --group lm-401 --timeout "$F"
kr_stop "$KR_MOCK_PID" krmock "$W/mock.log"
# the through-krelay part runs in front of the 4.0.0 mock
KR_MOCK_PID=$LEG_K4_PREV
KR_MOCK_BOOTSTRAP=$LEG_K4
KR_MOCK_BASE=$LEG_K4_BASE

# 4. Through krelay with translation (legacy_lib.sh).
legacy_through_krelay full

leg_finish
