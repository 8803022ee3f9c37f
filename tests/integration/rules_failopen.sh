#!/bin/bash
# Fail-open responses (issue 13, "Responses"): a response that only
# observing rules (audit) wanted decoded and that does not decode is
# forwarded unchanged, the connection stays open, and its audit line
# carries "decode_error" (a string).
#
# The malformed response comes from librdkafka 2.0.2's mock (what krmock
# links with Debian's librdkafka-dev): its Produce handler writes
# LogStartOffset (int64) only for ApiVersion >= 6, while Kafka's schema has
# it from v5 on (ProduceResponse.json: "LogStartOffset", "versions": "5+").
# So a Produce v5 response is exactly a v4 response: per partition
# Index, ErrorCode, BaseOffset, LogAppendTimeMs (1234) and no
# LogStartOffset, 8 bytes short per partition.  For one partition of
# topic fo-raw (46 bytes after the size prefix instead of 54) the decoder
# takes the 4-byte ThrottleTimeMs as the start of LogStartOffset:
#   krelay-codec decode --hex --response --api-key 0 --api-version 5
#   {"error":"truncated int64: 8 bytes needed, 4 left",
#    "field":"Responses[0].PartitionResponses[0].LogStartOffset",
#    "offset":46}
# while the same bytes decode cleanly as v4.  Step 0 checks that on a
# frame captured from the mock directly (skip when the mock's v5 response
# is well formed: another librdkafka).
#
# `[rule c] api = Produce, clamp_max_version = 5` makes krelay advertise
# Produce 0-5, so kcat sends Produce v5; `[rule a] audit = true` wants
# every response decoded (an observing rule only: a clamp needs no
# decoding when the client's version is inside it).
#
# Note on the client's side: librdkafka 2.0.2 (kcat) reads LogStartOffset
# at v5 too, so the mock's v5 answer, forwarded unchanged, fails kcat's own
# parse exactly as when it talks to the mock directly: "Protocol read
# buffer underflow for Produce v5 at 34/38", and each message's delivery
# report is "Local: Read underflow" (a permanent error: not retried, so no
# duplicates), although the mock stored every message.  "Delivered" below
# therefore means: in the topic exactly once (consumed back through
# krelay), with no connection lost; kcat's exit status (1) is not used.
# Before issue 13, krelay closed the connection instead ("cannot decode
# Produce v5 response ... for the rules"): librdkafka then retried the
# in-flight batches on a new connection and the mock stored them twice.
#
# Spec assertions do not stop the test: each failing one is logged and
# the test fails at the end listing them all; a harness problem (the mock
# does not answer, a client fails to run) stops it at once.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 60
W=$KR_WORK
CODEC=$top_builddir/krelay-codec
RAW=$top_srcdir/tests/integration/raw_client.py
[ -x "$CODEC" ] || kr_fail "$CODEC not built"
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no rules without krelay"
cat >"$W/rules.ini" <<EOR
[audit]
target = $W/audit.log

[rule a]
audit = true

[rule c]
api = Produce
clamp_max_version = 5
EOR
KR_EXTRA_CONF=$W/rules.ini
N=400
kr_start_mock fo:3 fo-raw:1

# raw NAME ADDR: send the JSON requests on stdin (raw_client.py send); the
# response frames, hex, go to $W/NAME.hex; exit status as raw_client's.
raw() {
    kr_run 20 "$KR_PY" "$RAW" send "$2" "$CODEC" >"$W/$1.hex" 2>"$W/$1.log"
}
# produce_v5 CORR CLIENTID VALUE: a Produce v5 request (Acks=1) of one
# record to fo-raw partition 0 (led by NodeId 1), in JSON.
produce_v5() {
    local rec
    rec=$("$KR_PY" "$RAW" batch "$3") || kr_fail "raw_client.py batch failed"
    printf '{"header":{"RequestApiKey":0,"RequestApiVersion":5,"CorrelationId":%d,"ClientId":"%s"},"body":{"TransactionalId":null,"Acks":1,"TimeoutMs":5000,"TopicData":[{"Name":"fo-raw","PartitionData":[{"Index":0,"Records":"%s"}]}]}}\n' \
        "$1" "$2" "$rec"
}
# decodes_as FILE VERSION: FILE's frames decode as Produce responses of
# that version (the JSON, or the error, in FILE.vVERSION.json).
decodes_as() {
    "$CODEC" decode --hex --response --api-key 0 --api-version "$2" \
        <"$1" >"$1.v$2.json" 2>&1
}

# ---- 0. the mock's Produce v5 response, straight from the mock ---------
produce_v5 1 failopen-direct direct-0 >"$W/direct.jsonl"
raw direct "${KR_MOCK_BOOTSTRAP%%,*}" <"$W/direct.jsonl" ||
    kr_fail "harness: no Produce v5 response from the mock: $(cat "$W/direct.log")"
# the test's own connection, not a client's through krelay
: >"$KR_ACCEPT_LOG"
if decodes_as "$W/direct.hex" 5; then
    kr_skip "a mock whose Produce v5 response is malformed (librdkafka" \
        "2.0.2's); this one decodes: $(cat "$W/direct.hex.v5.json")"
fi
grep -q '"field":"Responses\[0\].PartitionResponses\[0\].LogStartOffset"' \
    "$W/direct.hex.v5.json" ||
    kr_fail "harness: the mock's Produce v5 response fails elsewhere than" \
        "at LogStartOffset: $(cat "$W/direct.hex.v5.json")"
decodes_as "$W/direct.hex" 4 ||
    kr_fail "harness: the mock's Produce v5 response is not a v4 layout:" \
        "$(cat "$W/direct.hex.v4.json")"
DIRECT_LEN=$(( $(head -n 1 "$W/direct.hex" | tr -d '\n' | wc -c) / 2 ))
kr_log "mock: Produce v5 response of $DIRECT_LEN bytes, no LogStartOffset:" \
    "$(cat "$W/direct.hex.v5.json")"

kr_start_krelay

# ---- 1. raw Produce v5 through krelay: three on one connection ----------
for i in 1 2 3; do
    produce_v5 "$((100 + i))" failopen-raw "raw-$i"
done >"$W/viakrelay.jsonl"
check_raw() {
    if ! raw viakrelay "127.0.0.1:$((KR_BROKER_BASE + 1))" \
        <"$W/viakrelay.jsonl"; then
        kr_spec_fail "Produce v5 through krelay: $(wc -l <"$W/viakrelay.hex")" \
            "of 3 responses, then the connection ended" \
            "($(cat "$W/viakrelay.log")); krelay:" \
            "$(kr_closes_not_by_client | head -1)"
        return
    fi
    if decodes_as "$W/viakrelay.hex" 5; then
        kr_spec_fail "the v5 responses through krelay decode as v5: not the" \
            "mock's bytes"
        return
    fi
    if ! decodes_as "$W/viakrelay.hex" 4; then
        kr_spec_fail "the Produce v5 responses through krelay are not the" \
            "mock's v4 layout (changed on the way):" \
            "$(cat "$W/viakrelay.hex.v4.json")"
        return
    fi
    "$KR_PY" - "$W/viakrelay.hex" "$W/viakrelay.hex.v4.json" "$DIRECT_LEN" \
        <<'PYEOF' ||
import json, sys
frames = [bytes.fromhex(l) for l in open(sys.argv[1]).read().split()]
dec = [json.loads(l) for l in open(sys.argv[2])]
assert len(frames) == 3 and len(dec) == 3, (len(frames), len(dec))
for i, (f, d) in enumerate(zip(frames, dec)):
    assert len(f) == int(sys.argv[3]), "frame %d: %d bytes" % (i, len(f))
    assert d["header"]["CorrelationId"] == 101 + i, d
    p = d["body"]["Responses"][0]["PartitionResponses"][0]
    assert d["body"]["Responses"][0]["Name"] == "fo-raw", d
    assert p["ErrorCode"] == 0 and p["BaseOffset"] == 1 + i, d
    assert p["LogAppendTimeMs"] == 1234, d   # the mock's constant
PYEOF
    {
        kr_spec_fail "Produce v5 responses through krelay: unexpected content"
        return
    }
    kr_log "3 raw Produce v5 answered through krelay on one connection," \
        "forwarded unchanged ($DIRECT_LEN bytes each, the mock's v4 layout)"
}
check_raw

# ---- 2. kcat produces for a while (about 2 s, Produce v5) ----------------
kr_payloads "$W/in.txt" "$N" failopen
for ((i = 0; i < 20; i++)); do
    sed -n "$((i * 20 + 1)),$((i * 20 + 20))p" "$W/in.txt"
    sleep 0.1
done | kr_run 30 kcat -b "$KR_BOOTSTRAP" -P -t fo -X linger.ms=5 \
    -X socket.timeout.ms=10000 -X message.timeout.ms=20000 \
    2>"$W/kcat-P.log"
rc=$?
[ "$rc" -le 1 ] || kr_fail "kcat -P: exit status $rc: $(head -5 "$W/kcat-P.log")"
# Every complaint of kcat's must be its own parse of the mock's v5 answer.
other=$(grep -v -e '^% Delivery failed for message: Local: Read underflow$' \
    -e '|PROTOUFLOW|.*Protocol read buffer underflow for Produce v5 ' \
    "$W/kcat-P.log" | head -3)
[ -z "$other" ] ||
    kr_spec_fail "kcat -P reported other errors (krelay closed?): $other"
nuflow=$(grep -c '^% Delivery failed for message: Local: Read underflow$' \
    "$W/kcat-P.log")
nfail=$(grep -c '^% Delivery failed' "$W/kcat-P.log")
kr_log "kcat -P: Produce v5 through krelay, exit $rc; of $N delivery" \
    "reports, $nuflow 'Local: Read underflow' (kcat's parse of the mock's" \
    "response: expected) and $((nfail - nuflow)) other failures"

# ---- 3. every message is in the topic, once ------------------------------
kr_run 30 kcat -b "$KR_BOOTSTRAP" -C -t fo -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" ||
    kr_fail "kcat -C failed: $(head -5 "$W/kcat-C.log")"
sort "$W/in.txt" >"$W/in.sorted"
sort "$W/out.txt" >"$W/out.sorted"
if ! cmp -s "$W/in.sorted" "$W/out.sorted"; then
    kr_spec_fail "topic fo: $(wc -l <"$W/out.txt") messages for $N produced" \
        "($(comm -13 "$W/in.sorted" "$W/out.sorted" | wc -l) extra," \
        "$(comm -23 "$W/in.sorted" "$W/out.sorted" | wc -l) missing)"
else
    kr_log "topic fo: all $N messages, each once"
fi
closes=$(kr_closes_not_by_client)
if [ -n "$closes" ]; then
    kr_spec_fail "$(printf '%s\n' "$closes" | wc -l) connection(s) closed, not" \
        "by their client: $(printf '%s\n' "$closes" | head -2)"
fi

# ---- 4. the audit lines ----------------------------------------------------
audit_has_fetch_and_close() {
    grep -q '"api":"Fetch"' "$W/audit.log" 2>/dev/null &&
        grep -q '"event":"close"' "$W/audit.log" 2>/dev/null
}
kr_wait_for 20 audit_has_fetch_and_close ||
    kr_fail "harness: audit log: no Fetch line or no close event after 20 s"
"$KR_PY" - "$W/audit.log" "$DIRECT_LEN" <<'PYEOF' ||
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
req = [r for r in recs if r.get("type") == "request"]
prod = [r for r in req if r.get("api") == "Produce"]
fetch = [r for r in req if r.get("api") == "Fetch"]
assert len(prod) >= 4, "%d Produce audit lines" % len(prod)
raw = [r for r in prod if r.get("client_id") == "failopen-raw"]
assert [r["correlation_id"] for r in raw] == [101, 102, 103], raw
bad = []
for r in prod:
    e = r.get("decode_error")
    if (r["api_version"] != 5 or not isinstance(e, str) or not e
            or not r.get("request_bytes", 0) > 0
            or not r.get("response_bytes", 0) > 0):
        bad.append(r)
assert not bad, "%d of %d Produce lines without a decode_error string " \
    "(or not v5, or no sizes), e.g. %r" % (len(bad), len(prod), bad[0])
for r in raw:   # the mock's frame, size prefix included, as it came
    assert r["response_bytes"] == int(sys.argv[2]), r
ok = [r for r in fetch if "decode_error" in r]
assert not ok, "Fetch lines (well-formed) with decode_error: %r" % ok[:1]
closes = [r for r in recs if r.get("type") == "connection"
          and r.get("event") == "close"]
bad = [r for r in closes if not r.get("reason", "").startswith("client closed")]
assert not bad, "connections closed by krelay: %r" % bad[:2]
print("audit: %d Produce lines (v5), each with decode_error, e.g. %r; "
      "%d Fetch lines without; %d connections closed"
      % (len(prod), prod[0]["decode_error"], len(fetch), len(closes)))
PYEOF
    kr_spec_fail "audit log check failed (above)"
kr_spec_finish
kr_finish
