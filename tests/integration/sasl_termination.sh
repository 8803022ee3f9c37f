#!/bin/bash
# SASL termination (issue 9, [listener] sasl = terminate): krelay is the
# clients' SASL server, against a credentials file krelay-passwd wrote;
# the mock brokers behind it have no SASL at all.
#
# Checked:
#  1. kcat sasl_plaintext as alice: PLAIN produces, SCRAM-SHA-512
#     consumes back;
#  2. kcat with api.version.request=false broker.version.fallback=0.10.0:
#     SaslHandshake v0 and a raw PLAIN token (librdkafka's SCRAM then
#     takes SaslHandshake v1 with SaslAuthenticate v0: consumes back);
#  3. a wrong password and an unknown user: the client sees an
#     authentication error, krelay logs one line each with the client and
#     the mechanism, no password;
#  4. a deny rule on principal User:bob refuses bob's Produce, not
#     alice's;
#  5. kafka-python produces (PLAIN) and, as a 0.10 client (SaslHandshake
#     v0, raw SCRAM-SHA-256 tokens), consumes;
#  6. a client that skips SASL is closed before its first request;
#  7. the audit log: authentication lines (success, failure and its
#     reason: bad_password, unknown_user; mechanisms,
#     principals) and request lines with the verified principal; no
#     password in any log;
#  8. clients that never log in (20 bare connections, one ApiVersions
#     answered by krelay itself) make no broker connection (the mock's
#     accept log), and are closed at sasl_auth_timeout_ms.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_need_py kafka
kr_setup 90
W=$KR_WORK
case $(kcat -X list 2>/dev/null | grep '^builtin.features') in
*sasl_scram*) ;;
*) kr_skip "kcat with SASL SCRAM" ;;
esac
PASSWD=$top_builddir/krelay-passwd
[ -x "$PASSWD" ] || kr_fail "$PASSWD not built"

# the credentials file: alice with both SCRAM entries, bob SHA-512 only
umask 077
{
    printf 'alice-test-pw\n' | "$PASSWD" -m SCRAM-SHA-512 -i 4096 alice
    printf 'alice-test-pw\n' | "$PASSWD" -m SCRAM-SHA-256 -i 4096 alice
    printf 'bob-test-pw\n' | "$PASSWD" -m SCRAM-SHA-512 -i 4096 bob
} >"$W/users" || kr_fail "krelay-passwd failed"
grep -q "test-pw" "$W/users" && kr_fail "a password in the credentials file"

kr_start_mock term:1
cat >"$W/rules.ini" <<EOR
[rule all]
audit = true

[rule no-bob]
api = Produce
principal = User:bob
deny = true

[audit]
target = $W/audit.log
EOR
KR_EXTRA_CONF=$W/rules.ini
KR_LISTENER_CONF="sasl = terminate
sasl_credentials = $W/users
sasl_login_rate = 50,100
sasl_auth_timeout_ms = 1500"
KRELAY_LOG_LEVEL=info
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: krelay is the subject"

KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000
    -X security.protocol=sasl_plaintext)
PLAIN_ALICE=(-X sasl.mechanisms=PLAIN -X sasl.username=alice
             -X sasl.password=alice-test-pw)
SCRAM_ALICE=(-X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=alice
             -X sasl.password=alice-test-pw)
SCRAM_BOB=(-X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=bob
           -X sasl.password=bob-test-pw)
V0=(-X api.version.request=false -X broker.version.fallback=0.10.0)

# ---- 1. alice produces (PLAIN) and consumes back (SCRAM-SHA-512)
kr_payloads "$W/in.txt" 20 term
kr_run 30 "${KC[@]}" "${PLAIN_ALICE[@]}" -P -t term -X linger.ms=5 \
    <"$W/in.txt" 2>"$W/kcat-P.log" ||
    kr_fail "kcat -P as alice (PLAIN) failed: $(tail -3 "$W/kcat-P.log")"
kr_run 30 "${KC[@]}" "${SCRAM_ALICE[@]}" -C -t term -o beginning -e -q \
    -f '%s\n' >"$W/out.txt" 2>"$W/kcat-C.log" ||
    kr_fail "kcat -C as alice (SCRAM-SHA-512) failed: $(tail -3 "$W/kcat-C.log")"
cmp -s <(sort "$W/in.txt") <(sort "$W/out.txt") ||
    kr_fail "consumed messages differ: $(diff <(sort "$W/in.txt") <(sort "$W/out.txt") | head -5)"
kr_log "alice: 20 messages produced (PLAIN) and consumed (SCRAM-SHA-512)"

# ---- 2. SaslHandshake v0, raw tokens
echo "v0-plain" >"$W/v0.txt"
kr_run 30 "${KC[@]}" "${V0[@]}" "${PLAIN_ALICE[@]}" -P -t term \
    <"$W/v0.txt" 2>"$W/kcat-v0P.log" ||
    kr_fail "kcat -P over SaslHandshake v0 (PLAIN) failed: $(tail -3 "$W/kcat-v0P.log")"
kr_run 30 "${KC[@]}" "${V0[@]}" -X sasl.mechanisms=SCRAM-SHA-256 \
    -X sasl.username=alice -X sasl.password=alice-test-pw \
    -C -t term -o beginning -e -q -f '%s\n' >"$W/v0out.txt" \
    2>"$W/kcat-v0C.log" ||
    kr_fail "kcat -C with fallback 0.10.0 (SCRAM-SHA-256) failed: $(tail -3 "$W/kcat-v0C.log")"
grep -qx "v0-plain" "$W/v0out.txt" ||
    kr_fail "v0: the message produced over raw tokens not consumed back"
grep -q "SASL PLAIN authentication succeeded: User:alice (verified)" \
    "$W/krelay.log" && grep -q "SASL SCRAM-SHA-256 authentication succeeded" \
    "$W/krelay.log" || kr_fail "v0: no success logged"
kr_log "SaslHandshake v0 with a raw PLAIN token; SCRAM-SHA-256 with SaslAuthenticate v0"

# ---- 3. a wrong password, an unknown user
for who in "alice wrong-test-pw PLAIN" "mallory nobody-test-pw SCRAM-SHA-512"; do
    set -- $who
    if kr_run 30 "${KC[@]}" -X sasl.mechanisms="$3" -X sasl.username="$1" \
            -X sasl.password="$2" -L -m 2 >"$W/wrong.txt" \
            2>"$W/kcat-wrong-$1.log"; then
        kr_fail "kcat -L as $1 with a wrong password succeeded"
    fi
    grep -qi "authentication failed" "$W/kcat-wrong-$1.log" ||
        kr_fail "$1: no authentication error at the client: $(tail -3 "$W/kcat-wrong-$1.log")"
    kr_wait_for 10 grep -q "SASL $3 authentication failed for User:$1: " \
        "$W/krelay.log" ||
        kr_fail "$1: krelay logged no failure: $(grep -i sasl "$W/krelay.log" | tail -3)"
done
# one message for both (the client cannot tell a user that does not exist)
grep -h -o "Authentication failed during authentication due to invalid credentials with SASL mechanism [A-Z0-9-]*" \
    "$W/kcat-wrong-alice.log" "$W/kcat-wrong-mallory.log" | sort -u >"$W/msgs"
[ "$(wc -l <"$W/msgs")" = 2 ] ||
    kr_fail "the clients did not see Kafka's credentials message: $(cat "$W"/kcat-wrong-*.log | tail -4)"
kr_log "wrong password and unknown user refused: $(grep -c 'authentication failed for' "$W/krelay.log") failure lines"

# ---- 4. bob's Produce denied by the rule on User:bob
echo "from-bob" >"$W/bob.txt"
kr_run 30 "${KC[@]}" "${SCRAM_BOB[@]}" -P -t term -X message.timeout.ms=8000 \
    -X retries=0 <"$W/bob.txt" >"$W/kcat-bob.out" 2>"$W/kcat-bob.log" || true
grep -qi "authoriz" "$W/kcat-bob.log" ||
    kr_fail "bob's Produce not refused: $(tail -3 "$W/kcat-bob.log")"
kr_log "bob: Produce refused ($(grep -i -m1 authoriz "$W/kcat-bob.log"))"

# ---- 5. kafka-python: PLAIN produces; as a 0.10 client (SaslHandshake v0,
#      raw SCRAM-SHA-256 tokens) consumes
kr_run 60 "$KR_PY" - "$KR_BOOTSTRAP" >"$W/py.txt" 2>"$W/py.log" <<'PYEOF' ||
import sys
from kafka import KafkaConsumer, KafkaProducer
common = dict(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT",
              sasl_plain_username="alice", sasl_plain_password="alice-test-pw",
              request_timeout_ms=20000)
p = KafkaProducer(sasl_mechanism="PLAIN", **common)
for i in range(5):
    p.send("term", b"py-%d" % i)
p.flush()
p.close()
c = KafkaConsumer("term", sasl_mechanism="SCRAM-SHA-256", api_version=(0, 10, 1),
                  auto_offset_reset="earliest", consumer_timeout_ms=5000,
                  **common)
print("consumed:", sum(1 for m in c if m.value.startswith(b"py-")))
c.close()
PYEOF
    kr_fail "kafka-python failed: $(tail -3 "$W/py.log")"
grep -q "consumed: 5" "$W/py.txt" || kr_fail "kafka-python: $(cat "$W/py.txt")"
kr_log "kafka-python: 5 produced (PLAIN), consumed over raw SCRAM-SHA-256 tokens"

# ---- 6. a client without SASL: closed at its first request
kr_run 30 kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=5000 -L -m 3 \
    >"$W/nosasl.txt" 2>"$W/kcat-nosasl.log" &&
    grep -q "broker" "$W/nosasl.txt" && kr_fail "a client without SASL got metadata"
kr_wait_for 10 grep -q "Metadata request before SASL authentication" \
    "$W/krelay.log" ||
    kr_fail "no close logged for a client without SASL: $(tail -3 "$W/krelay.log")"
kr_log "a client without SASL: closed at its Metadata request"

# ---- 8. clients that never log in: no broker connection
nacc=$(wc -l <"$KR_ACCEPT_LOG")
ntmo=$(grep -c "no SASL authentication within sasl_auth_timeout_ms 1500 of connecting" \
    "$W/krelay.log" || true)
kr_run 20 "$KR_PY" - "$KR_BOOTSTRAP" >"$W/bare.txt" 2>"$W/bare.log" <<'PYEOF' ||
import socket, struct, sys, time
host, port = sys.argv[1].rsplit(":", 1)
bare = [socket.create_connection((host, int(port))) for _ in range(20)]
s = socket.create_connection((host, int(port)))
# ApiVersions v0, CorrelationId 7, ClientId "bare"
req = struct.pack(">hhih", 18, 0, 7, 4) + b"bare"
s.sendall(struct.pack(">i", len(req)) + req)
n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
body = s.recv(n, socket.MSG_WAITALL)
corr, err, cnt = struct.unpack(">ihi", body[:10])
keys = {struct.unpack(">hhh", body[10 + 6 * i:16 + 6 * i])[0] for i in range(cnt)}
assert corr == 7 and err == 0 and {0, 1, 3, 17, 36} <= keys, (corr, err, keys)
time.sleep(2.5)         # past sasl_auth_timeout_ms: krelay closed them all
closed = sum(1 for c in bare + [s] if c.recv(1) == b"")
print("ApiKeys %d, closed %d of 21" % (cnt, closed))
PYEOF
    kr_fail "bare connections: $(tail -3 "$W/bare.log")"
grep -q "closed 21 of 21" "$W/bare.txt" || kr_fail "bare connections: $(cat "$W/bare.txt")"
[ "$(wc -l <"$KR_ACCEPT_LOG")" = "$nacc" ] ||
    kr_fail "clients that never logged in made broker connections: $(tail -n +"$((nacc + 1))" "$KR_ACCEPT_LOG" | head -3)"
ntmo2=$(grep -c "no SASL authentication within sasl_auth_timeout_ms 1500 of connecting" \
    "$W/krelay.log" || true)
[ "$((ntmo2 - ntmo))" -ge 21 ] ||
    kr_fail "login timeouts logged: $((ntmo2 - ntmo)) of 21"
kr_log "21 clients that never logged in: no broker connection, closed at the login deadline ($(cat "$W/bare.txt"))"

# ---- 7. logs and audit, once krelay stopped
post_checks() {
    if grep -l -e "test-pw" "$W/krelay.log" "$W/krelay.out.log" \
            "$W/audit.log"; then
        kr_fail "a password in krelay's log or audit log"
    fi
    "$KR_PY" - "$W/audit.log" <<'PYEOF' >"$W/audit.txt" 2>&1 ||
import json, sys
auth, prod = set(), set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("type") == "authentication":
        auth.add((e.get("mechanism"), e.get("outcome"), e.get("principal"),
                  e.get("handshake_version"), e.get("reason")))
    elif e.get("api") == "Produce":
        prod.add((e.get("principal"), ",".join(e.get("actions", []))))
# a failure's reason: krelay's (the client was told neither)
want = {("PLAIN", "success", "User:alice", 1, None),
        ("SCRAM-SHA-512", "success", "User:alice", 1, None),
        ("PLAIN", "success", "User:alice", 0, None),
        ("SCRAM-SHA-256", "success", "User:alice", 0, None),
        ("PLAIN", "failure", "User:alice", 1, "bad_password"),
        ("SCRAM-SHA-512", "failure", "User:mallory", 1, "unknown_user"),
        ("SCRAM-SHA-512", "success", "User:bob", 1, None)}
print("auth:", sorted(auth))
print("produce:", sorted(prod))
ok = want <= auth and ("User:alice", "forwarded") in prod and \
     ("User:bob", "denied") in prod and \
     all(p in ("User:alice", "User:bob") for p, _ in prod)
sys.exit(0 if ok else 1)
PYEOF
        kr_fail "audit log: $(cat "$W/audit.txt")"
    kr_log "audit: $(head -1 "$W/audit.txt")"
}
kr_finish post_checks
