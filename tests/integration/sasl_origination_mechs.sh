#!/bin/bash
# SASL origination (issue 9) with PLAIN and with OAUTHBEARER (make
# check-long; SCRAM-SHA-512 is sasl_origination.sh's): kcat without SASL
# -> krelay -> sasl_front.py -> the mock.
#  1. PLAIN (sasl_password inline: krelay -t warns): kcat, kafka-python
#     and kafkajs (clients without SASL) produce and consume back; every
#     relayed request as bob;
#  2. OAUTHBEARER with an unsecured JWS in a token file (principal carol),
#     replaced between two clients: the second authentication reads the
#     new token (principal dave): the fronts saw both principals, each
#     relayed request as one of them, and no token in any log;
#  3. the bridging deployment over SASL_SSL with KIP-368 on both sides: a
#     TLS listener with sasl = terminate (carol, 2000 ms sessions) in front
#     of SCRAM-SHA-512 origination as alice to fronts giving 1500 ms
#     sessions; node-rdkafka (librdkafka 2.12 re-authenticates) as carol
#     produces for 8 s and consumes back: every message delivered and
#     consumed; krelay re-authenticated carol (>= 3) and itself with the
#     fronts (>= 2 reauth_ok on every front connection that relayed a
#     Produce, none failed, none expired), every request as alice; the
#     audit log names carol (the client's principal), never alice.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 90
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: krelay originates SASL"
W=$KR_WORK

kr_start_mock smech:2 pyo:2 kjso:2
kr_start_sasl_fronts

# ---- 1. PLAIN
KR_UPSTREAM_BOOTSTRAP=$KR_SASL_BOOTSTRAP
KR_UPSTREAM_CONF="$KR_SASL_DIAL
sasl_mechanism = PLAIN
sasl_username = bob
sasl_password = bob-test-pw"
kr_start_krelay
"$KR_KRELAY" -t -c "$W/krelay.ini" >"$W/t.txt" 2>&1 ||
    kr_fail "krelay -t: $(cat "$W/t.txt")"
grep -q "warning: .*sasl_password: the password is in the config file" \
    "$W/t.txt" || kr_fail "krelay -t did not warn: $(cat "$W/t.txt")"
grep -q "bob-test-pw" "$W/t.txt" && kr_fail "krelay -t printed the password"
KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000)
kr_payloads "$W/in.txt" 100 plain
kr_run 30 "${KC[@]}" -P -t smech -X linger.ms=5 <"$W/in.txt" \
    2>"$W/kcat-P.log" || kr_fail "kcat -P (PLAIN) failed"
kr_run 30 "${KC[@]}" -C -t smech -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C (PLAIN) failed"
cmp -s <(sort "$W/in.txt") <(sort "$W/out.txt") ||
    kr_fail "PLAIN: consumed messages differ"
kr_log "PLAIN: 100 messages produced and consumed back"
if "$KR_PY" -c 'import kafka' 2>/dev/null; then
    kr_run 120 "$KR_PY" "$top_srcdir/tests/integration/kafka_python_client.py" \
        "$KR_BOOTSTRAP" pyo 100 "$W/brokers-pyo.txt" >"$W/pyo.log" 2>&1 ||
        kr_fail "kafka-python through PLAIN origination: $(tail -3 "$W/pyo.log")"
    kr_check_brokers "$W/brokers-pyo.txt"
    kr_log "kafka-python: $(tail -1 "$W/pyo.log")"
else
    kr_log "kafka-python not installed: skipped"
fi
export NODE_PATH="$KRELAY_DEPS_DIR/node_modules${NODE_PATH:+:$NODE_PATH}"
if command -v node >/dev/null && node -e "require('kafkajs')" 2>/dev/null; then
    kr_run 180 node "$top_srcdir/tests/integration/kafkajs_client.js" \
        "$KR_BOOTSTRAP" kjso 100 "$W/brokers-kjso.txt" >"$W/kjso.log" 2>&1 ||
        kr_fail "kafkajs through PLAIN origination: $(tail -3 "$W/kjso.log")"
    kr_check_brokers "$W/brokers-kjso.txt"
    kr_log "kafkajs: $(tail -1 "$W/kjso.log")"
else
    kr_log "kafkajs not installed: skipped"
fi
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
mv "$W/krelay.log" "$W/krelay-plain.log"

# ---- 2. OAUTHBEARER, the token file replaced between two clients
jws() {
    "$KR_PY" - "$1" <<'PYEOF'
import base64, json, sys, time
b = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
now = int(time.time())
print(b({"alg": "none"}) + "." + b({"sub": sys.argv[1], "iat": now,
                                    "exp": now + 3600}) + ".")
PYEOF
}
jws carol >"$W/token"
KR_UPSTREAM_CONF="$KR_SASL_DIAL
sasl_mechanism = OAUTHBEARER
sasl_oauthbearer_token_file = $W/token"
kr_start_krelay
KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000)
kr_run 30 "${KC[@]}" -L >"$W/md1.txt" 2>"$W/kcat-L1.log" ||
    kr_fail "kcat -L (OAUTHBEARER, carol) failed"
jws dave >"$W/token.new"
mv "$W/token.new" "$W/token"
kr_run 30 "${KC[@]}" -C -t smech -o beginning -e -q -f '%s\n' \
    >"$W/out2.txt" 2>"$W/kcat-C2.log" || kr_fail "kcat -C (OAUTHBEARER, dave) failed"
cmp -s <(sort "$W/in.txt") <(sort "$W/out2.txt") ||
    kr_fail "OAUTHBEARER: consumed messages differ"
"$KR_PY" - "$KR_SASL_EVENTS" <<'PYEOF' >"$W/events.txt" 2>&1 ||
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ok = {}
for e in ev:
    if e["event"] == "auth":
        assert e["outcome"] == "ok", e
        ok[e["conn"]] = (e["mechanism"], e["principal"])
seen = set()
for e in ev:
    if e["event"] == "request":
        m, p = ok[e["conn"]]
        seen.add((m, p))
        assert e["principal"] == p, e
assert seen >= {("PLAIN", "bob"), ("OAUTHBEARER", "carol"),
                ("OAUTHBEARER", "dave")}, seen
print(sorted(seen))
PYEOF
    kr_fail "the fronts' events: $(cat "$W/events.txt")"
kr_log "fronts: requests as $(cat "$W/events.txt")"
tok=$(cut -d. -f2 "$W/token")
grep -l "bob-test-pw\|$tok" "$W"/krelay*.log "$W"/sasl_front*.log &&
    kr_fail "a secret in a log"

# ---- 3. the bridge over SASL_SSL, KIP-368 on both sides
if ! command -v node >/dev/null ||
   ! node -e "require('node-rdkafka')" 2>/dev/null; then
    kr_log "node-rdkafka not installed: the bridge with KIP-368 skipped"
    kr_finish
    exit 0
fi
kr_need_cmd openssl
kr_check_no_direct
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kr_stop "$KR_SASL_PID" "SASL fronts" "$W/sasl_front.log"
: >"$KR_ACCEPT_LOG"      # the mock appends: the new fronts' from here on
mv "$W/krelay.log" "$W/krelay-oauth.log"
mv "$KR_SASL_EVENTS" "$W/sasl_events-12.jsonl"
KR_CERTS=$W/certs
bash "$top_srcdir/tests/tools/tls_certs.sh" "$KR_CERTS" >"$W/certs.log" 2>&1 ||
    kr_fail "tests/tools/tls_certs.sh: $(tail -3 "$W/certs.log")"
PASSWD=$top_builddir/krelay-passwd
umask 077
printf 'carol-test-pw\n' | "$PASSWD" -m SCRAM-SHA-512 -i 4096 carol \
    >"$W/users" || kr_fail "krelay-passwd failed"
printf 'alice-test-pw\n' >"$W/krelay.pw"
umask 022
kr_start_sasl_fronts --mechanisms SCRAM-SHA-512 --session-lifetime-ms 1500
KR_UPSTREAM_BOOTSTRAP=$KR_SASL_BOOTSTRAP
KR_UPSTREAM_CONF="$KR_SASL_DIAL
sasl_mechanism = SCRAM-SHA-512
sasl_username = alice
sasl_password_file = $W/krelay.pw"
KR_LISTENER_CONF="ssl = true
ssl_certificate = $KR_CERTS/server-full.pem
sasl = terminate
sasl_credentials = $W/users
sasl_session_lifetime_ms = 2000
sasl_login_rate = 0"
KRELAY_LOG_LEVEL=info
cat >"$W/audit.ini" <<EOR
[rule all]
audit = true

[audit]
target = $W/audit.log
EOR
KR_EXTRA_CONF=$W/audit.ini
kr_start_krelay
"$KR_KRELAY" -t -c "$W/krelay.ini" >"$W/t3.txt" 2>&1 ||
    kr_fail "krelay -t refused the bridging config: $(cat "$W/t3.txt")"
kr_run 120 node "$top_srcdir/tests/integration/nrk_reauth_client.js" \
    "$KR_BOOTSTRAP" carol carol-test-pw smech bridge \
    --ssl "$KR_CERTS/ca.pem" >"$W/nrk.log" 2>&1 ||
    kr_fail "node-rdkafka through the bridge: $(tail -3 "$W/nrk.log")"
kr_check_alive
creauth=$(grep -c "SASL SCRAM-SHA-512 re-authentication succeeded: User:carol" \
    "$W/krelay.log" || true)
[ "$creauth" -ge 3 ] ||
    kr_fail "bridge: $creauth re-authentications of carol logged (want >= 3)"
grep -q "ran out\|expired" "$W/krelay.log" &&
    kr_fail "bridge: an expired session: $(grep -m1 'ran out\|expired' "$W/krelay.log")"
"$KR_PY" - "$KR_SASL_EVENTS" <<'PYEOF' >"$W/events3.txt" 2>&1 ||
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
authed, bad, re, prod = set(), [], collections.Counter(), set()
for e in ev:
    if e["event"] == "auth":
        if e["outcome"] not in ("ok", "reauth_ok") or e["principal"] != "alice":
            bad.append(e)
        authed.add(e["conn"])
        if e["outcome"] == "reauth_ok":
            re[e["conn"]] += 1
    elif e["event"] == "request":
        if e["principal"] != "alice" or e["conn"] not in authed:
            bad.append(e)
        if e["api_key"] == 0:
            prod.add(e["conn"])
    elif e["event"] == "close" and "expired" in e["why"]:
        bad.append(e)
assert not bad, bad[:3]
assert prod and all(re[c] >= 2 for c in prod), {c: re[c] for c in prod}
print("%d requests as alice, re-authentications %s on the Produce "
      "connections (%d in all)" %
      (sum(1 for e in ev if e["event"] == "request"),
       "/".join(str(re[c]) for c in sorted(prod)), sum(re.values())))
PYEOF
    kr_fail "bridge: the fronts' events: $(cat "$W/events3.txt")"
grep -q carol "$KR_SASL_EVENTS" && kr_fail "bridge: a front saw carol"
kr_log "bridge over SASL_SSL: node-rdkafka $(grep '^sent' "$W/nrk.log")," \
    "$(grep '^consumed' "$W/nrk.log"); carol re-authenticated $creauth" \
    "times at krelay; fronts: $(cat "$W/events3.txt")"
bridge_audit() {
    "$KR_PY" - "$W/audit.log" <<'PYEOF' >"$W/audit.txt" 2>&1 ||
import collections, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
auth = collections.Counter((a["mechanism"], a.get("principal"), a["outcome"],
                            a["reauth"]) for a in lines
                           if a["type"] == "authentication")
assert set(auth) == {("SCRAM-SHA-512", "User:carol", "success", False),
                     ("SCRAM-SHA-512", "User:carol", "success", True)}, auth
prod = [l for l in lines if l["type"] == "request" and l["api"] == "Produce"]
assert prod and all(p["principal"] == "User:carol" and
                    p["principal_state"] == "verified" for p in prod), prod[:2]
print("authentication lines %s; %d Produce lines as User:carol" %
      (sorted(auth.values()), len(prod)))
PYEOF
        kr_fail "bridge: audit log: $(cat "$W/audit.txt")"
    kr_log "bridge: audit: $(cat "$W/audit.txt")"
    grep -l "test-pw" "$W"/krelay*.log "$W"/sasl_front*.log "$W"/audit.log &&
        kr_fail "a password in a log"
    return 0
}
kr_finish bridge_audit
