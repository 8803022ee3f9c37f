#!/bin/bash
# Fail-safe rules (issue 13): a request krelay cannot decode (an unknown
# ApiKey, a version above the ones its tables know) on a connection where
# an enforcing rule could match it is refused: never forwarded, the
# responses owed before it delivered in order, then the connection closed,
# with a log line and an audit line.  Observing rules (audit) forward it.
# A Fetch naming only TopicIds krelay never learned is answered by krelay
# under an enforcing rule; a SaslHandshake v0 with a mechanism krelay
# cannot follow is answered by krelay with or without rules (issue 9).  ApiVersions advertises at most krelay's own max for
# the APIs such a rule covers.  A reload that adds a deny rule applies to
# a connection opened before it.
#
# The upstream is tests/integration/fake_broker.py: one scripted broker
# (NodeId 1) that offers one version more than krelay knows for
# DeleteTopics, Produce, Metadata and FindCoordinator, plus ApiKey 1000,
# and logs every request it gets: the test asserts what reached it.
# Requests are hand-built (krelay-codec encode, then the version in the
# header raised where krelay-codec cannot encode it).  krelay is restarted
# with another config for each section.
#
# Spec assertions do not stop the test: each failing one is logged, and
# the test fails at the end listing them all.  A harness problem (a
# client that crashes, a process that does not start) stops it at once.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 60
W=$KR_WORK
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no rules without krelay"
CODEC=$top_builddir/krelay-codec
[ -x "$CODEC" ] || kr_fail "$CODEC not built"
KR_NODEIDS=1                    # the fake broker is NodeId 1
EOF_WAIT=$KRELAY_TEST_TIME_SCALE  # s: how long a client waits for EOF
KRELAY_PIDS=()                  # every krelay started (broker accepts)

# The raw client and the assertion helpers: failsafe_client.py.
FT=$top_srcdir/tests/integration/failsafe_client.py

# raw NAME HOST:PORT: run failsafe_client.py raw with the steps on stdin;
# the result is $W/NAME.json.  A client crash is a harness failure.
raw() {
    kr_run 60 "$KR_PY" "$FT" raw "$2" "$CODEC" >"$W/$1.json" \
        2>"$W/$1.err" ||
        kr_fail "raw client $1 failed: $(tail -n 3 "$W/$1.err")"
}

# check DESCRIPTION: run the Python assertions on stdin (failsafe_client.py
# check); a failure is logged and remembered (kr_spec_fail), the test goes
# on.
check() {
    local out
    if out=$("$KR_PY" "$FT" check "$W" 2>&1); then
        kr_log "ok: $1${out:+ ($out)}"
    else
        kr_spec_fail "$1: $out"
    fi
}

# harness DESCRIPTION: as check, but a failure stops the test (the
# harness itself is broken, nothing after it means anything).
harness() {
    local out
    out=$("$KR_PY" "$FT" check "$W" 2>&1) ||
        kr_fail "harness: $1: $out"
    kr_log "harness ok: $1"
}

# ---- the fake broker ------------------------------------------------------
broker_ready_or_gone() {
    [ -s "$W/broker.ready" ] || ! kill -0 "$KR_MOCK_PID" 2>/dev/null
}
: >"$W/broker.jsonl"
"$KR_PY" "$top_srcdir/tests/integration/fake_broker.py" --codec "$CODEC" \
    --log "$W/broker.jsonl" --ready "$W/broker.ready" --node-id 1 \
    --topic open:1 --topic secret-a:1 --garbage 16 2>>"$W/broker.log" &
KR_MOCK_PID=$!
KR_PIDS+=("$KR_MOCK_PID")
kr_wait_for 30 broker_ready_or_gone
[ -s "$W/broker.ready" ] || kr_fail "fake_broker.py did not start"
KR_MOCK_BOOTSTRAP=$(head -n 1 "$W/broker.ready")
FAKE_PORT=${KR_MOCK_BOOTSTRAP##*:}
SECRET_ID=$(awk '$1 == "topic" && $2 == "secret-a" { print $4 }' "$W/broker.ready")
OPEN_ID=$(awk '$1 == "topic" && $2 == "open" { print $4 }' "$W/broker.ready")
RANDOM_ID=$("$KR_PY" -c 'import base64, os
print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')
export FAKE_PORT SECRET_ID OPEN_ID RANDOM_ID CODEC
kr_log "fake broker (NodeId 1) at $KR_MOCK_BOOTSTRAP"

# ---- 0. the harness: the fake broker answers correctly when spoken to ----
kr_run 30 kcat -L -b "$KR_MOCK_BOOTSTRAP" >"$W/kcat-direct.txt" \
    2>"$W/kcat-direct.err" || kr_fail "kcat -L against the fake broker failed"
if ! grep -q "broker 1 at 127.0.0.1:$FAKE_PORT" "$W/kcat-direct.txt" ||
   ! grep -q 'topic "secret-a" with 1 partitions' "$W/kcat-direct.txt"; then
    kr_fail "kcat -L against the fake broker: $(cat "$W/kcat-direct.txt")"
fi
{
    printf '[{"send": ['
    for v in 0 1 2 3 4; do
        printf '{"api": "ApiVersions", "v": %d, "corr": %d},' "$v" $((9000 + v))
    done
    printf '{"api": "ApiVersions", "v": 4, "as_version": 9, "corr": 9009}'
    for v in 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do
        printf ',{"api": "Metadata", "v": %d, "corr": %d}' "$v" $((9100 + v))
    done
    printf ',{"api": "Metadata", "v": 12, "corr": 9120, "topic": "nope"}'
    printf ',{"api": "DeleteTopics", "as_version": 7, "corr": 9200}'
    printf ',{"raw_key": 1000, "corr": 9201}'
    printf ',{"api": "Fetch", "topic_id": "%s", "corr": 9202}' "$RANDOM_ID"
    printf ',{"api": "Produce", "v": 12, "as_version": 14, "corr": 9203}'
    printf ',{"api": "SaslHandshake", "corr": 9204}'
    printf ',{"api": "ListGroups", "corr": 9205}'
    printf ',{"api": "DeleteTopics", "truncate": 3, "corr": 9206}'
    printf ']}, {"recv": 28}]\n'
} >"$W/direct.steps"
raw direct "$KR_MOCK_BOOTSTRAP" <"$W/direct.steps"
harness "the fake broker answers every request directly" <<'PY'
import subprocess
r = R("direct")
assert r["error"] is None and len(r["responses"]) == 28, (r["error"], corrs(r))
assert corrs(r) == [s["corr"] for s in r["sent"]], corrs(r)
# ApiVersions: krelay's ranges, one more for four APIs, plus ApiKey 1000
known = {}
for line in subprocess.run([E["CODEC"], "list"], capture_output=True,
                           text=True).stdout.splitlines()[1:]:
    f = line.split()
    lo, _, hi = f[2].partition("-")
    known[int(f[0])] = (int(lo), int(hi or lo))
want = {k: (lo, hi + 1 if k in (0, 3, 10, 20) else hi)
        for k, (lo, hi) in known.items()}
want[1000] = (0, 0)
for v in range(5):
    x = rsp(r, 9000 + v)[0]
    assert x["decoded"] is not None, (v, x)
    b = x["decoded"]["body"]
    got_ = {e["ApiKey"]: (e["MinVersion"], e["MaxVersion"])
            for e in b["ApiKeys"]}
    assert b["ErrorCode"] == 0 and got_ == want, (v, b)
    assert (v == 0) == ("ThrottleTimeMs" not in b), (v, b)
kip511 = bytes.fromhex(rsp(r, 9009)[0]["hex"])
assert kip511[8:10] == b"\x00\x23", kip511.hex()      # UNSUPPORTED_VERSION
for v in range(14):
    x = rsp(r, 9100 + v)[0]
    assert x["decoded"] is not None, (v, x)
    b = x["decoded"]["body"]
    assert [(y["NodeId"], y["Host"], y["Port"]) for y in b["Brokers"]] == \
        [(1, "127.0.0.1", int(E["FAKE_PORT"]))], (v, b)
    assert sorted(t["Name"] for t in b["Topics"]) == ["open", "secret-a"], b
    if v >= 10:
        ids = {t["Name"]: t["TopicId"] for t in b["Topics"]}
        assert ids == {"open": E["OPEN_ID"], "secret-a": E["SECRET_ID"]}, ids
b = rsp(r, 9120)[0]["decoded"]["body"]
assert [(t["Name"], t["ErrorCode"]) for t in b["Topics"]] == [("nope", 3)], b
for c, key, ver in ((9200, 20, 7), (9201, 1000, 0), (9203, 0, 14),
                    (9205, 16, 4)):       # --garbage 16: ListGroups
    x = rsp(r, c)[0]
    assert bytes.fromhex(x["hex"])[8:] == b"FAKE %d v%d" % (key, ver), x
assert rsp(r, 9202)[0]["decoded"]["body"]["ErrorCode"] == 0, rsp(r, 9202)
assert rsp(r, 9204)[0]["decoded"]["body"] == \
    {"ErrorCode": 0, "Mechanisms": ["GSSAPI", "PLAIN"]}, rsp(r, 9204)
# the broker logged each request, and the response the client got
for s in r["sent"]:
    b = broker(s["corr"])
    assert len(b) == 1 and b[0]["api_key"] == s["api_key"] and \
        b[0]["api_version"] == s["api_version"] and \
        b[0]["client_id"] == "failsafe" and \
        b[0]["request_bytes"] == s["bytes"], (s, b)
    assert b[0]["response_hex"] == rsp(r, s["corr"])[0]["hex"], s
assert broker(9203)[0]["detail"] == {}, broker(9203)   # v14: not decoded
assert broker(9204)[0]["detail"]["mechanism"] == "GSSAPI", broker(9204)
assert broker(9206)[0]["detail"] == {"undecodable": True}, broker(9206)
assert rsp(r, 9206)[0]["decoded"]["body"] == {"ThrottleTimeMs": 0,
                                              "Responses": []}, rsp(r, 9206)
PY
# connections the broker accepts from here on must all be krelay's
DIRECT_LINES=$(wc -l <"$W/broker.jsonl")

# ---- krelay, one config per section ----------------------------------------
SECTION=
# krelay_start NAME: krelay with the rules on stdin ([audit] included
# by the caller when wanted).
krelay_start() {
    SECTION=$1
    cat >"$W/rules-$SECTION.ini"
    KR_EXTRA_CONF=$W/rules-$SECTION.ini
    kr_start_krelay
    KRELAY_PIDS+=("$KR_KRELAY_PID")
    export KR_PORT KR_BROKER_BASE     # for the checks
}

# every connection krelay opened to the broker was closed (the broker logs
# a close after answering the connection's last request)
broker_conns_closed() {
    "$KR_PY" - "$W/broker.jsonl" "$1" <<'PY'
import json, sys
acc, closed = set(), set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "accept" and e["pid"] == int(sys.argv[2]):
        acc.add(e["conn"])
    elif e["event"] == "close":
        closed.add(e["conn"])
sys.exit(0 if acc <= closed else 1)
PY
}

# krelay_stop: SIGTERM (clean exit, audit flushed), keep its log as
# krelay-NAME.log, and wait until the broker has seen everything krelay
# sent it.
krelay_stop() {
    kr_check_alive
    kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
    cp "$W/krelay.log" "$W/krelay-$SECTION.log"
    kr_wait_for 30 broker_conns_closed "$KR_KRELAY_PID" ||
        kr_fail "the fake broker did not see krelay's connections close"
}

# reloads_above N: krelay logged more than N reloads
reloads_above() {
    [ "$(grep -c "reloaded .*krelay.ini" "$W/krelay.log")" -gt "$1" ]
}

# krelay_reload NAME: rewrite krelay.ini with the rules on stdin (same
# ports), SIGHUP, wait for the reload line.
krelay_reload() {
    local n
    cat >"$W/rules-$1.ini"
    KR_EXTRA_CONF=$W/rules-$1.ini
    kr_write_conf "$W/krelay.ini"
    n=$(grep -c "reloaded .*krelay.ini" "$W/krelay.log")
    kill -HUP "$KR_KRELAY_PID"
    kr_wait_for 30 reloads_above "$n" ||
        kr_fail "no reload line after SIGHUP ($1)"
}

# ---- A. no rules: the harness through krelay --------------------------------
krelay_start base </dev/null
kr_run 30 kcat -L -b "$KR_BOOTSTRAP" >"$W/kcat-krelay.txt" \
    2>"$W/kcat-krelay.err" || kr_fail "kcat -L through krelay failed"
if ! grep -q "broker 1 at 127.0.0.1:$((KR_BROKER_BASE + 1))" \
        "$W/kcat-krelay.txt" ||
   ! grep -q 'topic "open" with 1 partitions' "$W/kcat-krelay.txt"; then
    kr_fail "kcat -L through krelay: $(cat "$W/kcat-krelay.txt")"
fi
raw base "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "ApiVersions", "corr": 1001}]}, {"recv": 1},
 {"send": [{"api": "Metadata", "corr": 1002}]}, {"recv": 1},
 {"send": [{"api": "DeleteTopics", "as_version": 7, "corr": 1003}]},
 {"recv": 1},
 {"send": [{"raw_key": 1000, "corr": 1004}]}, {"recv": 1}]
EOF
harness "no rules: krelay forwards and rewrites as before" <<'PY'
r = R("base")
assert r["error"] is None and corrs(r) == [1001, 1002, 1003, 1004], r
b = rsp(r, 1002)[0]["decoded"]["body"]
assert [(x["NodeId"], x["Port"]) for x in b["Brokers"]] == \
    [(1, int(E["KR_BROKER_BASE"]) + 1)], b["Brokers"]
for c in (1001, 1002, 1003, 1004):
    assert got(c), "CorrelationId %d did not reach the broker" % c
for c in (1003, 1004):   # passed unchanged
    assert broker(c)[0]["response_hex"] == rsp(r, c)[0]["hex"], c
PY
AV=$("$KR_PY" -c 'import json, sys
b = [x for x in json.load(open(sys.argv[1]))["responses"]
     if x["corr"] == 1001][0]["decoded"]["body"]
print(" ".join("%d:%d-%d" % (e["ApiKey"], e["MinVersion"], e["MaxVersion"])
               for e in b["ApiKeys"] if e["ApiKey"] in (0, 3, 10, 20, 1000)))' \
    "$W/base.json")
kr_log "no rules: ApiVersions through krelay offers $AV"
# issue 9: SaslHandshake v0 GSSAPI is refused without rules too (krelay
# could not find the Kafka frames after its raw tokens); a first frame
# whose ApiKey starts 0x60 (a Kafka 0.9 client's raw GSSAPI token) closes
raw t0 "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "SaslHandshake", "mechanism": "GSSAPI", "corr": 1011}]},
 {"recv": 1},
 {"send": [{"api": "Metadata", "corr": 1012}]}, {"recv": 1}]
EOF
raw t0g "$KR_BOOTSTRAP" <<EOF
[{"send": [{"raw_key": 24706, "corr": 1021}]}, {"eof": $EOF_WAIT}]
EOF
krelay_stop
check "no rules: SaslHandshake v0 GSSAPI answered by krelay: ErrorCode 33, the mechanisms krelay follows over v0" <<'PY'
r = R("t0")
x = rsp(r, 1011)
assert len(x) == 1 and x[0]["decoded"], r
assert x[0]["decoded"]["body"] == {
    "ErrorCode": 33,
    "Mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}, \
    x[0]["decoded"]
assert not got(1011), "the broker got it: %r" % broker(1011)
PY
check "no rules: the Metadata after it is answered and rewritten" <<'PY'
r = R("t0")
b = rsp(r, 1012)[0]["decoded"]["body"]
assert [(x["NodeId"], x["Port"]) for x in b["Brokers"]] == \
    [(1, int(E["KR_BROKER_BASE"]) + 1)], b["Brokers"]
assert got(1012), "the Metadata request did not reach the broker"
PY
check "no rules: a notice line names the client, the mechanism and why" <<'PY'
ls = klines("base", "CorrelationId 1011", "names SASL mechanism GSSAPI",
            "cannot follow after a v0 handshake", "127.0.0.1",
            "UNSUPPORTED_SASL_MECHANISM")
assert ls and all("notice" in l for l in ls), \
    klines("base", "CorrelationId 1011")
PY
check "no rules: a first frame with ApiKey 0x6082 (a raw GSSAPI token): closed, never forwarded, one line" <<'PY'
r = R("t0g")
assert rsp(r, 1021) == [] and r["eof"] is True, r
assert not got(1021), "the broker got it: %r" % broker(1021)
ls = klines("base", "looks like a raw GSSAPI (Kerberos) token")
assert len(ls) == 1 and "127.0.0.1" in ls[0], ls
PY

# ---- B. deny DeleteTopics: tests 1, 4 and 6 ---------------------------------
krelay_start deny <<EOR
[audit]
target = $W/audit-deny.log

[rule no-delete]
api = DeleteTopics
deny = true
EOR
# 1. DeleteTopics v7: refused; ApiVersions offers DeleteTopics up to v6
raw t1 "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "ApiVersions", "corr": 1101}]}, {"recv": 1},
 {"send": [{"api": "DeleteTopics", "as_version": 7, "corr": 1102}]},
 {"eof": $EOF_WAIT}]
EOF
# control: DeleteTopics v6 is denied by krelay's own error response
raw t1c "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "DeleteTopics", "corr": 1111}]}, {"recv": 1}]
EOF
# 4. three Metadata requests, DeleteTopics v7 and one more Metadata in one
# write: the three responses in order, then EOF
raw t4 "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Metadata", "corr": 1121},
           {"api": "Metadata", "corr": 1122},
           {"api": "Metadata", "corr": 1123},
           {"api": "DeleteTopics", "as_version": 7, "corr": 1124},
           {"api": "Metadata", "corr": 1125}]},
 {"eof": $EOF_WAIT}]
EOF
# spec 3: DeleteTopics v6 whose body does not decode (its response has no
# top-level ErrorCode): refused, after the owed Metadata response
raw t9 "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Metadata", "corr": 1141},
           {"api": "DeleteTopics", "truncate": 3, "corr": 1142}]},
 {"eof": $EOF_WAIT}]
EOF
# 6. SaslHandshake v0 GSSAPI: krelay answers it; Kafka framing goes on
raw t6 "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "SaslHandshake", "mechanism": "GSSAPI", "corr": 1131}]},
 {"recv": 1},
 {"send": [{"api": "Metadata", "corr": 1132}]}, {"recv": 1}]
EOF
krelay_stop
check "control: DeleteTopics v6 denied by krelay (TOPIC_AUTHORIZATION_FAILED)" <<'PY'
r = R("t1c")
x = rsp(r, 1111)
assert len(x) == 1 and x[0]["decoded"], r
errs = [t["ErrorCode"] for t in x[0]["decoded"]["body"]["Responses"]]
assert errs == [29], x[0]["decoded"]
assert not got(1111), "DeleteTopics v6 reached the broker"
PY
check "1: ApiVersions through krelay offers DeleteTopics max 6 (broker: 7)" <<'PY'
r = R("t1")
x = rsp(r, 1101)
assert len(x) == 1 and x[0]["decoded"], r
k = {e["ApiKey"]: (e["MinVersion"], e["MaxVersion"])
     for e in x[0]["decoded"]["body"]["ApiKeys"]}
assert k.get(20) == (0, 6), "DeleteTopics offered as %r" % (k.get(20),)
PY
check "1: DeleteTopics v7 never reaches the broker" <<'PY'
assert got(1101), "the ApiVersions before it did not reach the broker"
assert not got(1102), "the broker got DeleteTopics v7: %r" % broker(1102)
PY
check "1: DeleteTopics v7: no response, the connection is closed" <<'PY'
r = R("t1")
assert rsp(r, 1102) == [], "a response came: %r" % rsp(r, 1102)
assert r["eof"] is True, "the connection stayed open (eof=%r)" % r["eof"]
PY
check "1: DeleteTopics v7: notice log line 'CorrelationId 1102 ... refused ... [rule no-delete]'" <<'PY'
refused_log("deny", 1102, "no-delete")
PY
check "1: DeleteTopics v7: audit line actions [refused] with decode_error" <<'PY'
refused_audit("deny", 1102, "DeleteTopics", 20, 7, "failsafe",
              sent_bytes(R("t1"), 1102))
PY
check "4: owed Metadata responses 1121-1123 delivered in order, then EOF" <<'PY'
r = R("t4")
assert corrs(r) == [1121, 1122, 1123], "responses: %r" % corrs(r)
for x in r["responses"]:
    b = x["decoded"]["body"]
    assert [(y["NodeId"], y["Port"]) for y in b["Brokers"]] == \
        [(1, int(E["KR_BROKER_BASE"]) + 1)], b["Brokers"]
assert r["eof"] is True, "the connection stayed open (eof=%r)" % r["eof"]
PY
check "4: the broker got Metadata 1121-1123, not DeleteTopics v7 1124 nor 1125" <<'PY'
for c in (1121, 1122, 1123):
    assert got(c), "Metadata %d did not reach the broker" % c
assert not got(1124), "the broker got DeleteTopics v7: %r" % broker(1124)
assert not got(1125), "the broker got the Metadata sent after it"
PY
check "4: log and audit lines for DeleteTopics v7 CorrelationId 1124" <<'PY'
refused_log("deny", 1124, "no-delete")
refused_audit("deny", 1124, "DeleteTopics", 20, 7, "failsafe",
              sent_bytes(R("t4"), 1124))
PY
check "spec 3: DeleteTopics v6 with a body that does not decode: refused after the owed response" <<'PY'
r = R("t9")
assert corrs(r) == [1141], "responses: %r" % corrs(r)
assert r["eof"] is True, "the connection stayed open"
assert got(1141) and not got(1142), (broker(1141), broker(1142))
refused_log("deny", 1142, "no-delete")
refused_audit("deny", 1142, "DeleteTopics", 20, 6, "failsafe",
              sent_bytes(r, 1142))
PY
check "6: SaslHandshake v0 GSSAPI answered by krelay with ErrorCode 33" <<'PY'
r = R("t6")
x = rsp(r, 1131)
assert len(x) == 1 and x[0]["decoded"], r
assert x[0]["decoded"]["body"]["ErrorCode"] == 33, x[0]["decoded"]
PY
check "6: SaslHandshake v0 GSSAPI never reaches the broker" <<'PY'
assert not got(1131), "the broker got it: %r" % broker(1131)
PY
check "6: Metadata after it answered normally (Kafka framing, rewritten)" <<'PY'
r = R("t6")
x = rsp(r, 1132)
assert len(x) == 1 and x[0]["decoded"], "no Metadata response: %r" % r
b = x[0]["decoded"]["body"]
assert [(y["NodeId"], y["Host"], y["Port"]) for y in b["Brokers"]] == \
    [(1, "127.0.0.1", int(E["KR_BROKER_BASE"]) + 1)], \
    "broker address not rewritten: %r" % b["Brokers"]
assert got(1132), "the Metadata request did not reach the broker"
PY

# ---- C. deny by ClientId: test 2 ---------------------------------------------
krelay_start evil <<EOR
[audit]
target = $W/audit-evil.log

[rule evil]
client_id = evil
deny = true

# enforcing on every API (throttle_mode = enforce), no api: ApiKey 1000
# leaves ApiVersions, and is refused
[rule slow]
client_id = slow
throttle_ms = 10
throttle_mode = enforce
EOR
raw t2a "$KR_BOOTSTRAP" <<EOF
[{"send": [{"raw_key": 1000, "cid": "evil", "corr": 1201}]},
 {"eof": $EOF_WAIT}]
EOF
raw t2b "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Produce", "v": 12, "as_version": 14, "cid": "evil",
            "corr": 1211}]},
 {"eof": $EOF_WAIT}]
EOF
raw t2c "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "ApiVersions", "cid": "good", "corr": 1221}]},
 {"recv": 1},
 {"send": [{"api": "DeleteTopics", "as_version": 7, "cid": "evil",
            "corr": 1222}]},
 {"eof": $EOF_WAIT}]
EOF
# spec 3: FindCoordinator v2 (a top-level ErrorCode) that does not decode
raw t2f "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "FindCoordinator", "cid": "evil", "truncate": 1,
            "corr": 1251}]}, {"recv": 1}]
EOF
# control: ClientId good is not refused; evil's Metadata is denied; then
# DeleteTopics v7 from good passes (each request's own ClientId counts)
raw t2d "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"raw_key": 1000, "cid": "good", "corr": 1231}]}, {"recv": 1},
 {"send": [{"api": "Metadata", "cid": "evil", "topic": "open",
            "corr": 1232}]}, {"recv": 1},
 {"send": [{"api": "DeleteTopics", "as_version": 7, "cid": "good",
            "corr": 1233}]}, {"recv": 1}]
EOF
raw t2e "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "ApiVersions", "cid": "slow", "corr": 1241}]},
 {"recv": 1},
 {"send": [{"raw_key": 1000, "cid": "slow", "corr": 1242}]},
 {"eof": $EOF_WAIT}]
EOF
krelay_stop
check "control: ApiKey 1000 from ClientId good forwarded unchanged; evil's Metadata denied" <<'PY'
r = R("t2d")
assert corrs(r)[:2] == [1231, 1232], r
assert got(1231) and broker(1231)[0]["response_hex"] == rsp(r, 1231)[0]["hex"]
assert not got(1232), "evil's Metadata reached the broker"
t = rsp(r, 1232)[0]["decoded"]["body"]["Topics"]
assert [(x["Name"], x["ErrorCode"]) for x in t] == [("open", 29)], t
PY
check "2: DeleteTopics v7 from good after evil's denied Metadata: forwarded unchanged" <<'PY'
r = R("t2d")
assert got(1233), "DeleteTopics v7 from ClientId good did not reach the " \
    "broker: %r" % klines("evil", "CorrelationId 1233")
assert rsp(r, 1233) and rsp(r, 1233)[0]["hex"] == \
    broker(1233)[0]["response_hex"], r
PY
check "ApiVersions: ApiKey 1000 dropped for ClientId slow (enforcing rule without api), kept for good" <<'PY'
def keys(name, corr):
    x = rsp(R(name), corr)
    assert len(x) == 1 and x[0]["decoded"], R(name)
    return {e["ApiKey"]: (e["MinVersion"], e["MaxVersion"])
            for e in x[0]["decoded"]["body"]["ApiKeys"]}
p, g = keys("t2e", 1241), keys("t2c", 1221)
assert 1000 not in p, "ApiKey 1000 offered to ClientId slow: %r" % (
    p[1000],)
over = {k: p[k] for k in (0, 3, 10, 20) if p.get(k, (0, 0))[1] >
        {0: 13, 3: 13, 10: 6, 20: 6}[k]}
assert not over, "offered above krelay's max to ClientId slow: %r" % over
assert g.get(1000) == (0, 0), "ApiKey 1000 not offered to ClientId good"
PY
check "2: ApiKey 1000 from ClientId slow (throttle enforce, no api) refused" <<'PY'
r = R("t2e")
assert not got(1242), "the broker got it: %r" % broker(1242)
assert rsp(r, 1242) == [] and r["eof"] is True, r
refused_log("evil", 1242, "slow")
PY
check "spec 3: FindCoordinator v2 (evil) that does not decode: answered INVALID_REQUEST (42)" <<'PY'
r = R("t2f")
x = rsp(r, 1251)
assert len(x) == 1 and x[0]["decoded"], r
assert x[0]["decoded"]["body"]["ErrorCode"] == 42, x[0]["decoded"]["body"]
assert not got(1251), "the broker got it: %r" % broker(1251)
PY
check "2: ApiKey 1000 from ClientId evil refused (not forwarded, closed)" <<'PY'
r = R("t2a")
assert not got(1201), "the broker got it: %r" % broker(1201)
assert rsp(r, 1201) == [] and r["eof"] is True, r
PY
check "2: ApiKey 1000: log line and audit line (api UNKNOWN)" <<'PY'
refused_log("evil", 1201, "evil")
refused_audit("evil", 1201, "UNKNOWN", 1000, 0, "evil",
              sent_bytes(R("t2a"), 1201))
PY
check "2: Produce v14 from ClientId evil refused (not forwarded, closed)" <<'PY'
r = R("t2b")
assert not got(1211), "the broker got it: %r" % broker(1211)
assert rsp(r, 1211) == [] and r["eof"] is True, r
PY
check "2: Produce v14: log line and audit line" <<'PY'
refused_log("evil", 1211, "evil")
refused_audit("evil", 1211, "Produce", 0, 14, "evil",
              sent_bytes(R("t2b"), 1211))
PY
check "2: ApiVersions (good) then DeleteTopics v7 (evil): refused" <<'PY'
r = R("t2c")
assert corrs(r) == [1221], "responses: %r" % corrs(r)
assert got(1221), "ApiVersions did not reach the broker"
assert not got(1222), "the broker got DeleteTopics v7: %r" % broker(1222)
assert r["eof"] is True, "the connection stayed open"
PY
check "2: DeleteTopics v7 (evil): log line and audit line with client_id evil" <<'PY'
refused_log("evil", 1222, "evil")
refused_audit("evil", 1222, "DeleteTopics", 20, 7, "evil",
              sent_bytes(R("t2c"), 1222))
PY

# ---- D. topic rules: tests 3 and 7 --------------------------------------------
krelay_start topics <<EOR
[audit]
target = $W/audit-topics.log

[rule secret-produce]
api = Produce
topic = secret-*
deny = true

[rule secret-fetch]
api = Fetch
topic = secret-*
deny = true
EOR
raw t3a "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Produce", "v": 12, "as_version": 14,
            "topic": "secret-a", "corr": 1301}]},
 {"eof": $EOF_WAIT}]
EOF
raw t3b "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Produce", "v": 12, "as_version": 14, "topic": "open",
            "corr": 1311}]},
 {"eof": $EOF_WAIT}]
EOF
# control: known versions are checked topic by topic
raw t3c "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "Produce", "v": 12, "topic": "secret-a", "corr": 1321}]},
 {"recv": 1},
 {"send": [{"api": "Produce", "v": 12, "topic": "open", "corr": 1322}]},
 {"recv": 1}]
EOF
raw t7 "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Fetch", "topic_id": "$RANDOM_ID", "corr": 1331}]},
 {"recv": 1}]
EOF
# control: TopicIds krelay learned (Metadata v12 through it) are checked
raw t7c "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Metadata", "corr": 1341}]}, {"recv": 1},
 {"send": [{"api": "Fetch", "topic_id": "$SECRET_ID", "corr": 1342}]},
 {"recv": 1},
 {"send": [{"api": "Fetch", "topic_id": "$OPEN_ID", "corr": 1343}]},
 {"recv": 1}]
EOF
krelay_stop
check "control: Produce v12 to secret-a denied (29), to open forwarded" <<'PY'
r = R("t3c")
assert corrs(r) == [1321, 1322], r
b = rsp(r, 1321)[0]["decoded"]["body"]
errs = [p["ErrorCode"] for t in b["Responses"]
        for p in t["PartitionResponses"]]
assert errs == [29], b
assert not got(1321) and got(1322), (broker(1321), broker(1322))
PY
check "3: Produce v14 to secret-a refused (not forwarded, closed, log, audit)" <<'PY'
r = R("t3a")
assert not got(1301), "the broker got it: %r" % broker(1301)
assert rsp(r, 1301) == [] and r["eof"] is True, r
refused_log("topics", 1301, "secret-produce")
refused_audit("topics", 1301, "Produce", 0, 14, "failsafe",
              sent_bytes(r, 1301))
PY
check "3: Produce v14 to open refused too (its topics cannot be checked)" <<'PY'
r = R("t3b")
assert not got(1311), "the broker got it: %r" % broker(1311)
assert rsp(r, 1311) == [] and r["eof"] is True, r
refused_log("topics", 1311, "secret-produce")
PY
check "control: Fetch v13 by learned TopicId: secret-a denied, open forwarded" <<'PY'
r = R("t7c")
assert corrs(r) == [1341, 1342, 1343], r
# a denied Fetch v13+: the top-level error and no partition, as Kafka's
# FetchRequest.getErrorResponse (kr_action.c)
b = rsp(r, 1342)[0]["decoded"]["body"]
assert (b["ErrorCode"], b["Responses"]) == (29, []), b
assert not got(1342), "Fetch of secret-a reached the broker"
assert got(1343), "Fetch of open did not reach the broker"
PY
check "7: Fetch v13 naming an unknown TopicId: answered ErrorCode 100" <<'PY'
r = R("t7")
x = rsp(r, 1331)
assert len(x) == 1 and x[0]["decoded"], r
assert x[0]["decoded"]["body"]["ErrorCode"] == 100, x[0]["decoded"]["body"]
PY
check "7: Fetch v13 naming an unknown TopicId never reaches the broker" <<'PY'
assert not got(1331), "the broker got it: %r" % broker(1331)
PY

# ---- E. audit only: test 5; then a reload adding a deny: test 8 ---------------
AUDIT_RULES="[audit]
target = $W/audit-audit.log

[rule a]
audit = true"
krelay_start audit <<<"$AUDIT_RULES"
raw t5 "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"raw_key": 1000, "corr": 1501}]}, {"recv": 1},
 {"send": [{"api": "DeleteTopics", "as_version": 7, "corr": 1502}]},
 {"recv": 1},
 {"send": [{"api": "Metadata", "corr": 1503}]}, {"recv": 1}]
EOF
raw t5p "$KR_BOOTSTRAP" <<EOF
[{"send": [{"api": "Produce", "v": 12, "as_version": 14, "corr": 1511}]},
 {"recv": 1, "timeout": $EOF_WAIT}]
EOF
# spec 3 and Responses, observing rules only: a request body and a
# response (ListGroups: the fake broker's is garbage) that do not decode
raw t5g "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "DeleteTopics", "truncate": 3, "corr": 1521}]},
 {"recv": 1},
 {"send": [{"api": "ListGroups", "corr": 1531}]}, {"recv": 1},
 {"send": [{"api": "Metadata", "corr": 1532}]}, {"recv": 1}]
EOF
# 8. a connection opened before the reload
rm -f "$W/t8.asked" "$W/t8.go"
raw t8 "$KR_BOOTSTRAP" <<EOF &
[{"send": [{"api": "Metadata", "topic": "open", "corr": 1801}]},
 {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "topic": "open", "session": [7, 0],
            "corr": 1811}]}, {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "session": [7, 1], "no_topics": true,
            "corr": 1812}]}, {"recv": 1},
 {"touch": "$W/t8.asked"}, {"wait": "$W/t8.go"},
 {"send": [{"api": "Metadata", "topic": "open", "corr": 1802}]},
 {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "session": [7, 2], "no_topics": true,
            "corr": 1813}]}, {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "topic": "open", "session": [0, 0],
            "corr": 1814}]}, {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "session": [8, 1], "no_topics": true,
            "corr": 1815}]}, {"recv": 1}]
EOF
T8=$!
kr_wait_for 30 test -e "$W/t8.asked" || kr_fail "the reload client did not start"
krelay_reload audit-reload <<EOR
$AUDIT_RULES

[rule no-md]
api = Metadata
deny = true

[rule no-secret-fetch]
api = Fetch
topic = secret-*
deny = true
EOR
: >"$W/t8.go"
wait "$T8" || kr_fail "the reload client failed"
# 8. a connection opened after that reload continuing a fetch session (a
# session is the broker's, not the connection's): restarted as well
raw t8n "$KR_BOOTSTRAP" <<'EOF'
[{"send": [{"api": "Fetch", "v": 12, "session": [7, 3], "no_topics": true,
            "corr": 1821}]}, {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "topic": "open", "session": [0, 0],
            "corr": 1822}]}, {"recv": 1},
 {"send": [{"api": "Fetch", "v": 12, "session": [9, 1], "no_topics": true,
            "corr": 1823}]}, {"recv": 1}]
EOF
krelay_stop
check "5: ApiKey 1000 and DeleteTopics v7 forwarded, responses unchanged" <<'PY'
r = R("t5")
assert corrs(r) == [1501, 1502, 1503], r
for c in (1501, 1502, 1503):
    assert got(c), "CorrelationId %d did not reach the broker" % c
for c in (1501, 1502):
    assert broker(c)[0]["response_hex"] == rsp(r, c)[0]["hex"], \
        "response %d changed" % c
PY
check "5: audit lines for ApiKey 1000 / DeleteTopics v7: forwarded, decode_error, sizes" <<'PY'
r = R("t5")
for c, api, key, ver in ((1501, "UNKNOWN", 1000, 0),
                         (1502, "DeleteTopics", 20, 7)):
    a = audit("audit", c)
    assert len(a) == 1, "%d audit lines for %d: %r" % (len(a), c, a)
    a = a[0]
    want = {"api": api, "api_key": key, "api_version": ver,
            "correlation_id": c, "client_id": "failsafe",
            "actions": ["forwarded"], "request_bytes": sent_bytes(r, c),
            "response_bytes": rsp(r, c)[0]["bytes"]}
    bad = {k: a.get(k) for k in want if a.get(k) != want[k]}
    assert not bad, "audit line %d: %r, want %r" % (
        c, bad, {k: want[k] for k in bad})
    assert isinstance(a.get("decode_error"), str) and a["decode_error"], a
PY
check "5: Produce v14 forwarded; response unchanged or fail-closed rewrite; audit line" <<'PY'
r = R("t5p")
assert got(1511), "Produce v14 did not reach the broker"
x = rsp(r, 1511)
if x:
    assert x[0]["hex"] == broker(1511)[0]["response_hex"], "changed"
    outcome = "the broker's response, unchanged"
else:
    assert r["eof"] is True, "neither a response nor EOF: %r" % r
    # closed: acceptable only as broker-address rewriting failing closed
    # (a Produce v14 response's NodeEndpoints cannot be found)
    ls = klines("audit", "Produce v14")
    assert [l for l in ls if "rewrit" in l], "the connection was closed, " \
        "not by broker-address rewriting: %r" % ls
    outcome = "closed (broker-address rewriting fails closed)"
a = audit("audit", 1511)
assert len(a) == 1, "%d audit lines for 1511: %r (client got %s)" % (
    len(a), a, outcome)
a = a[0]
assert "forwarded" in a["actions"] and a.get("decode_error"), a
assert a["request_bytes"] == sent_bytes(r, 1511), a
print("Produce v14 response: " + outcome)
PY
check "spec 3 (audit only): DeleteTopics v6 body that does not decode: forwarded unchanged, audited" <<'PY'
r = R("t5g")
b = broker(1521)
assert b and b[0]["request_bytes"] == sent_bytes(r, 1521), \
    "not forwarded as sent: %r" % b
assert rsp(r, 1521) and rsp(r, 1521)[0]["hex"] == b[0]["response_hex"], r
a = audit("audit", 1521)
assert len(a) == 1 and "forwarded" in a[0]["actions"] and \
    isinstance(a[0].get("decode_error"), str) and a[0]["decode_error"], a
PY
check "Responses (audit only): a ListGroups response that does not decode: forwarded unchanged, connection open, audited" <<'PY'
r = R("t5g")
assert corrs(r) == [1521, 1531, 1532], "responses: %r (eof %r)" % (
    corrs(r), r["eof"])
assert rsp(r, 1531)[0]["hex"] == broker(1531)[0]["response_hex"], r
a = audit("audit", 1531)
assert len(a) == 1 and a[0]["actions"] == ["forwarded"] and \
    isinstance(a[0].get("decode_error"), str) and a[0]["decode_error"], a
assert a[0].get("response_bytes") == rsp(r, 1531)[0]["bytes"], a
PY
check "8: Metadata before the reload answered by the broker" <<'PY'
r = R("t8")
x = rsp(r, 1801)
assert len(x) == 1 and x[0]["decoded"], r
t = x[0]["decoded"]["body"]["Topics"]
assert [(y["Name"], y["ErrorCode"]) for y in t] == [("open", 0)], t
assert got(1801)
PY
check "8: Metadata after the reload, same connection: denied (29), not forwarded" <<'PY'
r = R("t8")
x = rsp(r, 1802)
assert len(x) == 1 and x[0]["decoded"], "no response: %r" % r
t = x[0]["decoded"]["body"]["Topics"]
assert [(y["Name"], y["ErrorCode"]) for y in t] == [("open", 29)], t
assert not got(1802), "the broker got it: %r" % broker(1802)
assert klines("audit", "CorrelationId 1802", "denied by [rule no-md]"), \
    "no 'denied by [rule no-md]' log line"
PY
check "8: a fetch session begun before a reload that brought a topic rule: restarted (70), then judged" <<'PY'
r = R("t8")
for c in (1811, 1812, 1814, 1815):
    assert got(c), "Fetch %d did not reach the broker" % c
    assert rsp(r, c) and rsp(r, c)[0]["hex"] == broker(c)[0]["response_hex"], c
# the incremental Fetch after the reload names no partition the new rule
# could judge: FETCH_SESSION_ID_NOT_FOUND, so the client starts again
x = rsp(r, 1813)
assert len(x) == 1 and x[0]["decoded"], "no response: %r" % r
assert x[0]["decoded"]["body"]["ErrorCode"] == 70, x[0]["decoded"]
assert not got(1813), "the broker got it: %r" % broker(1813)
PY
check "8: a new connection continuing a fetch session after the reload: restarted (70), then judged" <<'PY'
r = R("t8n")
x = rsp(r, 1821)
assert len(x) == 1 and x[0]["decoded"], "no response: %r" % r
assert x[0]["decoded"]["body"]["ErrorCode"] == 70, x[0]["decoded"]
assert not got(1821), "the broker got it: %r" % broker(1821)
for c in (1822, 1823):
    assert got(c), "Fetch %d did not reach the broker" % c
    assert rsp(r, c) and rsp(r, c)[0]["hex"] == broker(c)[0]["response_hex"], c
PY

# ---- every broker connection since the harness check came from krelay --------
"$KR_PY" - "$W/broker.jsonl" "$DIRECT_LINES" "${KRELAY_PIDS[@]}" <<'PY' ||
import json, sys
lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]
pids = {int(p) for p in sys.argv[3:]}
ev = [json.loads(l) for l in lines]
nreq = {}
for e in ev:
    if e["event"] == "close":
        nreq[e["conn"]] = e["requests"]
# pid -1: the peer socket was gone when the broker looked (krelay dials
# the upstream at once and closes it when it refuses the first request):
# harmless when nothing came on that connection
bad = [e for e in ev if e["event"] == "accept" and e["pid"] not in pids and
       (e["pid"] != -1 or nreq.get(e["conn"], 1) > 0)]
assert not bad, bad
print("broker: %d connections, all from krelay" %
      sum(1 for l in lines if '"accept"' in l))
PY
    kr_fail "connections to the fake broker not from krelay"
kr_stop "$KR_MOCK_PID" fake_broker "$W/broker.log"
kr_spec_finish
kr_log "PASS"
