#!/bin/bash
# Produce MinVersion through krelay (issue 13, "ApiVersions"): the mock is
# restricted to Produce 3-7, as Kafka 4.0 accepts it (KIP-896 removed
# Produce v0-v2).  krelay advertises Produce 0-7 anyway (it keeps
# MinVersion 0 whenever the computed minimum is 3 or lower), so that kcat
# (librdkafka 2.0.2) keeps compressing: its gzip batch must reach the
# broker gzip-compressed (RecordBatch attributes & 7 == 1).
#
# Why: librdkafka decides whether a broker supports gzip, snappy and lz4
# by asking whether the broker accepts Produce v0 exactly (librdkafka
# issue 4956, fixed in 2.8.0; Kafka's side: KAFKA-18659, Kafka 4.0 brokers
# advertise Produce v0-v12 although they refuse v0-v2).  Measured with
# kcat 1.7.1 / librdkafka 2.0.2 straight at `krmock -V 0:3:7` (no krelay),
# `-d feature,protocol,msg`:
#   ApiKey Produce (0) Versions 3..7
#   Feature MsgVer1: Produce (2..2) NOT supported by broker
#   Disabling feature MsgVer1
#   Feature ThrottleTime: Produce (1..2) NOT supported by broker
#   pmv [0]: Broker does not support compression type gzip: not
#            compressing batch
#   Produce MessageSet with 50 message(s) (652 bytes, ApiVersion 7,
#            MsgVersion 2, ..., uncompressed)
# and the stored batch has attributes 0: a producer configured for gzip
# silently sends uncompressed data (more bandwidth and storage, and an
# `allowed_compression` rule would see "none").
#
# The stored batch is read back with a hand-built Fetch v4 (krelay-codec
# encode, through krelay), its response decoded with krelay-codec decode
# --response --api-key 1 --api-version 4, and the RecordBatch header read
# (raw_client.py batch-attrs).  What kcat itself took from ApiVersions is
# read from its `-d feature` log ("ApiKey Produce (0) Versions 0..7").
# Requests stay 3-7 on the wire: kcat picks v7.  KRELAY_TEST_DIRECT=1 runs the same against the mock (the harness,
# and librdkafka's own behaviour, shown in the log; nothing asserted about
# the codec).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 60
W=$KR_WORK
CODEC=$top_builddir/krelay-codec
RAW=$top_srcdir/tests/integration/raw_client.py
[ -x "$CODEC" ] || kr_fail "$CODEC not built"
N=50
# -V APIKEY:MIN:MAX: rd_kafka_mock_set_apiversion (krmock -h)
KR_MOCK_ARGS="-V 0:3:7"
kr_start_mock pmv:1

# raw NAME ADDR: send the JSON requests on stdin with raw_client.py; the
# response frames (hex) go to $W/NAME.hex.  No response is a failure (so
# never call it in a pipeline: kr_fail would end only a subshell).
raw() {
    kr_run 20 "$KR_PY" "$RAW" send "$2" "$CODEC" >"$W/$1.hex" \
        2>"$W/$1.log" ||
        kr_fail "$1: no response from $2: $(cat "$W/$1.log")"
}

# 0. The mock itself advertises Produce 3-7 (the -V option works): asked
# directly, before krelay starts; that connection is the test's, not a
# client's, so the accept log starts again after it (kr_check_no_direct).
raw av-mock "${KR_MOCK_BOOTSTRAP%%,*}" \
    <<<'{"header":{"RequestApiKey":18,"RequestApiVersion":0,"CorrelationId":1,"ClientId":"pmv-direct"},"body":{}}'
: >"$KR_ACCEPT_LOG"
kr_start_krelay

# 1. ApiVersions v0 and v2 through krelay: Produce is advertised 0-7.
# (kcat sends v3 first; the mock refuses it and kcat falls back to v0.)
for v in 0 2; do
    raw "av$v" "${KR_BOOTSTRAP%%,*}" \
        <<<"{\"header\":{\"RequestApiKey\":18,\"RequestApiVersion\":$v,\"CorrelationId\":$((10 + v)),\"ClientId\":\"pmv-av\"},\"body\":{}}"
    "$CODEC" decode --hex --response --api-key 18 --api-version "$v" \
        <"$W/av$v.hex" >"$W/av$v.json" ||
        kr_fail "ApiVersions v$v response does not decode: $(cat "$W/av$v.json")"
done
produce_range() {   # FILE: "MIN MAX" of Produce in a decoded ApiVersions
    "$KR_PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["body"]["ErrorCode"] == 0, d
p = [k for k in d["body"]["ApiKeys"] if k["ApiKey"] == 0]
print(" ".join(str(k[x]) for k in p for x in ("MinVersion", "MaxVersion")))' "$1"
}
"$CODEC" decode --hex --response --api-key 18 --api-version 0 \
    <"$W/av-mock.hex" >"$W/av-mock.json" || kr_fail "mock ApiVersions"
got=$(produce_range "$W/av-mock.json") || kr_fail "mock ApiVersions: $got"
[ "$got" = "3 7" ] ||
    kr_fail "harness: the mock advertises Produce '$got', not '3 7' (krmock -V)"
for v in 0 2; do
    got=$(produce_range "$W/av$v.json") ||
        kr_fail "ApiVersions v$v through krelay: $got"
    if kr_is_direct; then
        kr_log "direct: ApiVersions v$v advertises Produce $got"
    elif [ "$got" != "0 7" ]; then
        kr_spec_fail "ApiVersions v$v through krelay advertises Produce" \
            "${got/ /-}, want 0-7 (MinVersion 0 when the computed minimum" \
            "is 3 or lower)"
    else
        kr_log "ApiVersions v$v through krelay: Produce 0-7"
    fi
done

# 2. kcat produces N messages with gzip to partition 0.
kr_payloads "$W/in.txt" "$N" pmv
kr_run 30 kcat -b "$KR_BOOTSTRAP" -P -t pmv -p 0 -X compression.codec=gzip \
    -X linger.ms=50 -d feature,msg <"$W/in.txt" 2>"$W/kcat-P.log" ||
    kr_fail "kcat -P failed: $(grep -v '|' "$W/kcat-P.log" | head -5)"
grep -q "Produce MessageSet with" "$W/kcat-P.log" ||
    kr_fail "harness: no 'Produce MessageSet' debug line from kcat -d msg"
# what librdkafka itself took from ApiVersions (-d feature), per broker
seen=$(grep -o 'ApiKey Produce (0) Versions [0-9]*\.\.[0-9]*' "$W/kcat-P.log" |
    sort -u | sed 's/.* //')
[ -n "$seen" ] ||
    kr_fail "harness: no 'ApiKey Produce (0) Versions' line from kcat -d feature"
if kr_is_direct; then
    kr_log "direct: kcat saw Produce $seen"
elif [ "$seen" != "0..7" ]; then
    kr_spec_fail "kcat saw Produce versions $(echo "$seen" | tr '\n' ' ')through" \
        "krelay, want 0..7"
fi
if grep -q "not compressing batch" "$W/kcat-P.log"; then
    why=$(grep -o 'Broker does not support.*' "$W/kcat-P.log" | head -1)
    if kr_is_direct; then
        kr_log "direct: kcat says: $why"
    else
        kr_spec_fail "kcat did not compress: $why"
    fi
fi

# 3. A hand-built Fetch v4 of partition 0 from offset 0, through krelay
# (in direct mode: to the mock's leader of partition 0, NodeId 1).
raw fetch "127.0.0.1:$((KR_BROKER_BASE + 1))" \
    <<<'{"header":{"RequestApiKey":1,"RequestApiVersion":4,"CorrelationId":20,"ClientId":"pmv-fetch"},"body":{"ReplicaId":-1,"MaxWaitMs":500,"MinBytes":1,"MaxBytes":1048576,"IsolationLevel":0,"Topics":[{"Topic":"pmv","Partitions":[{"Partition":0,"FetchOffset":0,"PartitionMaxBytes":1048576}]}]}}' 
"$CODEC" decode --hex --response --api-key 1 --api-version 4 \
    <"$W/fetch.hex" >"$W/fetch.json" ||
    kr_fail "Fetch v4 response does not decode: $(head -c 300 "$W/fetch.json")"
"$KR_PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
p = d["body"]["Responses"][0]["Partitions"][0]
assert d["body"]["Responses"][0]["Topic"] == "pmv", d
assert p["PartitionIndex"] == 0 and p["ErrorCode"] == 0, p
assert p["HighWatermark"] == int(sys.argv[2]), p
print(p["Records"])' "$W/fetch.json" "$N" >"$W/records.b64" ||
    kr_fail "Fetch v4: not partition 0 of pmv with $N messages, no error"
"$KR_PY" "$RAW" batch-attrs <"$W/records.b64" >"$W/batches.txt" ||
    kr_fail "cannot read the RecordBatch headers"
# one batch (linger.ms=50, the mock returns one batch per partition)
read -r base magic attrs count _ <"$W/batches.txt" ||
    kr_fail "harness: no RecordBatch in the Fetch response"
if [ "$base" != 0 ] || [ "$magic" != 2 ] || [ "$count" != "$N" ]; then
    kr_fail "harness: first batch: offset $base magic $magic with $count" \
        "records, want offset 0, magic 2, $N records (one batch)"
fi
codec=$((attrs & 7))
kr_log "stored batch: $count records, attributes $attrs (codec $codec:" \
    "0 none, 1 gzip)"
if kr_is_direct; then
    kr_log "direct: librdkafka 2.0.2 against Produce 3-7 sent codec $codec"
elif [ "$codec" -ne 1 ]; then
    kr_spec_fail "the stored batch's attributes are $attrs (codec $codec), want" \
        "gzip (1): kcat, told Produce 3-7, stopped compressing"
fi

# 4. The messages read back through krelay are the ones produced.
kr_run 30 kcat -b "$KR_BOOTSTRAP" -C -t pmv -p 0 -o beginning -e -q \
    -f '%s\n' >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
cmp -s "$W/in.txt" "$W/out.txt" ||
    kr_fail "consumed messages differ: $(diff "$W/in.txt" "$W/out.txt" | head -5)"
kr_log "kcat: $N messages consumed back in order"

kr_check_no_close
kr_spec_finish
kr_finish
