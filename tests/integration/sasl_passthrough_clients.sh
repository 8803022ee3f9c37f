#!/bin/bash
# SASL passthrough's client matrix (issue 9; make check-long): krelay in
# front of the SASL fronts (sasl_front.py, the judge), the clients
# authenticating through krelay with the fronts.  The clients and
# mechanisms of sasl_termination_clients.sh, against the fronts instead.
#
#  1. kafka-python, PLAIN and SCRAM-SHA-256: each produces 100 messages
#     and consumes them back in a group (kafka_python_client.py);
#  2. kafkajs, SCRAM-SHA-512: the same (kafkajs_client.js);
#     the fronts relayed each of their requests as alice, only after the
#     connection authenticated;
#  3. KIP-368 through krelay: the fronts restarted with 2000 ms sessions,
#     node-rdkafka (librdkafka 2.12 re-authenticates) produces for 8 s and
#     consumes back: every message delivered and consumed; on the fronts
#     every connection that carried a Produce re-authenticated at least
#     twice (reauth_ok), no re-authentication failed, no session expired,
#     every relayed request ran as the principal of its connection;
#     krelay's audit log has authentication lines with reauth true
#     (SCRAM-SHA-512, User:alice, verified) and every Produce line as the
#     verified User:alice.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_setup 240
W=$KR_WORK
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: krelay is the subject"
export NODE_PATH="$KRELAY_DEPS_DIR/node_modules${NODE_PATH:+:$NODE_PATH}"

kr_start_mock py256:3 pyplain:3 kjs:3 nrk:3
kr_start_sasl_fronts --mechanisms PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
cat >"$W/rules.ini" <<EOR
[rule all]
audit = true

[audit]
target = $W/audit.log
EOR
KR_EXTRA_CONF=$W/rules.ini
KR_UPSTREAM_BOOTSTRAP=$KR_SASL_BOOTSTRAP
KR_UPSTREAM_CONF=$KR_SASL_DIAL
KRELAY_LOG_LEVEL=info
kr_start_krelay

# the fronts' events: each relayed request as its connection's principal
# (alice), after its authentication; ARGS: what else to assert (python)
check_events() {
    "$KR_PY" - "$KR_SASL_EVENTS" "$@" <<'PYEOF'
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
want = sys.argv[2:]
who, bad, reauth, prod_conns = {}, [], collections.Counter(), set()
mechs = collections.Counter()
for e in ev:
    if e["event"] == "auth":
        if e["outcome"] == "ok":
            who[e["conn"]] = e["principal"]
            mechs[e["mechanism"]] += 1
        elif e["outcome"] == "reauth_ok":
            assert who.get(e["conn"]) == e["principal"], e
            reauth[e["conn"]] += 1
        else:
            bad.append(e)
    elif e["event"] == "request":
        if e["principal"] != "alice" or who.get(e["conn"]) != "alice":
            bad.append(e)
        if e["api_key"] == 0:
            prod_conns.add(e["conn"])
    elif e["event"] == "close" and "expired" in e["why"]:
        bad.append(e)
assert not bad, bad[:3]
nreq = sum(1 for e in ev if e["event"] == "request")
for m in want:
    if m == "reauth":
        assert prod_conns, "no Produce relayed"
        few = {c: reauth[c] for c in prod_conns if reauth[c] < 2}
        assert not few, "re-authentications per Produce connection: %r" % few
    else:
        assert mechs[m] > 0, "no %s authentication: %r" % (m, mechs)
per = ""
if "reauth" in want:
    per = " (%s on the %d Produce connections)" % (
        "/".join(str(reauth[c]) for c in sorted(prod_conns)), len(prod_conns))
print("authentications %s, re-authentications %d%s, %d requests relayed, "
      "all as alice" % (dict(mechs), sum(reauth.values()), per, nreq))
PYEOF
}

# ---- 1. kafka-python: PLAIN, SCRAM-SHA-256
if "$KR_PY" -c 'import kafka' 2>/dev/null; then
    for mt in PLAIN:pyplain SCRAM-SHA-256:py256; do
        m=${mt%%:*} t=${mt#*:}
        KR_SASL_MECH=$m KR_SASL_USER=alice KR_SASL_PASS=alice-test-pw \
            kr_run 120 "$KR_PY" \
            "$top_srcdir/tests/integration/kafka_python_client.py" \
            "$KR_BOOTSTRAP" "$t" 100 "$W/brokers-$t.txt" >"$W/$t.log" 2>&1 ||
            kr_fail "kafka-python $m: $(tail -3 "$W/$t.log")"
        kr_check_brokers "$W/brokers-$t.txt"
        kr_log "kafka-python $m: $(tail -1 "$W/$t.log")"
    done
    PY_MECHS="PLAIN SCRAM-SHA-256"
else
    kr_log "kafka-python not installed: skipped"
    PY_MECHS=
fi

# ---- 2. kafkajs, SCRAM-SHA-512
if command -v node >/dev/null && node -e "require('kafkajs')" 2>/dev/null; then
    KR_SASL_MECH=SCRAM-SHA-512 KR_SASL_USER=alice KR_SASL_PASS=alice-test-pw \
        kr_run 180 node "$top_srcdir/tests/integration/kafkajs_client.js" \
        "$KR_BOOTSTRAP" kjs 100 "$W/brokers-kjs.txt" >"$W/kjs.log" 2>&1 ||
        kr_fail "kafkajs SCRAM-SHA-512: $(tail -3 "$W/kjs.log")"
    kr_check_brokers "$W/brokers-kjs.txt"
    kr_log "kafkajs SCRAM-SHA-512: $(tail -1 "$W/kjs.log")"
    JS_MECHS=SCRAM-SHA-512
else
    kr_log "kafkajs not installed: skipped"
    JS_MECHS=
fi
kr_check_alive
if [ -n "$PY_MECHS$JS_MECHS" ]; then
    # shellcheck disable=SC2086
    check_events $PY_MECHS $JS_MECHS >"$W/events1.txt" 2>&1 ||
        kr_fail "the fronts' events: $(cat "$W/events1.txt")"
    kr_log "fronts: $(cat "$W/events1.txt")"
fi

# ---- 3. node-rdkafka across re-authentications (KIP-368)
if ! command -v node >/dev/null ||
   ! node -e "require('node-rdkafka')" 2>/dev/null; then
    kr_log "node-rdkafka not installed: KIP-368 skipped"
    kr_finish
    exit 0
fi
kr_check_no_direct
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kr_stop "$KR_SASL_PID" "SASL fronts" "$W/sasl_front.log"
: >"$KR_ACCEPT_LOG"      # the mock appends: the new fronts' from here on
mv "$KR_SASL_EVENTS" "$W/sasl_events-1.jsonl"
mv "$W/audit.log" "$W/audit-1.log"
mv "$W/krelay.log" "$W/krelay-1.log"
kr_start_sasl_fronts --mechanisms SCRAM-SHA-512 --session-lifetime-ms 2000
KR_UPSTREAM_BOOTSTRAP=$KR_SASL_BOOTSTRAP
KR_UPSTREAM_CONF=$KR_SASL_DIAL
kr_start_krelay
kr_run 120 node "$top_srcdir/tests/integration/nrk_reauth_client.js" \
    "$KR_BOOTSTRAP" alice alice-test-pw nrk nrk-reauth >"$W/nrk.log" 2>&1 ||
    kr_fail "node-rdkafka across re-authentications: $(tail -3 "$W/nrk.log")"
kr_log "node-rdkafka: $(grep '^sent' "$W/nrk.log"), $(grep '^consumed' "$W/nrk.log")"
kr_check_alive
check_events SCRAM-SHA-512 reauth >"$W/events2.txt" 2>&1 ||
    kr_fail "the fronts' events (KIP-368): $(cat "$W/events2.txt")"
kr_log "fronts (2000 ms sessions): $(cat "$W/events2.txt")"
grep -q "session lifetime .* ran out\|expired" "$W/krelay.log" &&
    kr_fail "an expired session: $(grep -m1 'ran out\|expired' "$W/krelay.log")"

audit_checks() {
    "$KR_PY" - "$W/audit.log" <<'PYEOF' >"$W/audit.txt" 2>&1 ||
import collections, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
auth = [l for l in lines if l["type"] == "authentication"]
kinds = collections.Counter((a["mechanism"], a.get("principal"),
                             a.get("principal_state"), a["outcome"],
                             a["reauth"]) for a in auth)
print("authentication lines:", dict(kinds))
assert set(kinds) == {("SCRAM-SHA-512", "User:alice", "verified",
                       "success", False),
                      ("SCRAM-SHA-512", "User:alice", "verified",
                       "success", True)}, kinds
re = [a for a in auth if a["reauth"]]
per = collections.Counter(a["conn_id"] for a in re)
assert len(re) >= 2 and max(per.values()) >= 2, per
assert all(a["session_lifetime_ms"] == 2000 for a in auth), auth[:2]
prod = [l for l in lines if l["type"] == "request" and l["api"] == "Produce"]
assert prod, "no Produce lines"
assert all(p["principal"] == "User:alice" and
           p["principal_state"] == "verified" and
           "forwarded" in p["actions"] for p in prod), prod[:2]
print("re-authentication lines %d on %d connections; %d Produce lines as "
      "User:alice (verified)" % (len(re), len(per), len(prod)))
PYEOF
        kr_fail "audit log: $(cat "$W/audit.txt")"
    kr_log "audit: $(tr '\n' ' ' <"$W/audit.txt")"
    grep -l "test-pw" "$W"/krelay*.log "$W"/audit*.log "$W"/sasl_front.log &&
        kr_fail "a password in a log"
    return 0
}
kr_finish audit_checks
