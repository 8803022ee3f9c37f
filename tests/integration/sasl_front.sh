#!/bin/bash
# sasl_front.py, the SASL brokers of krelay's SASL tests (issue 9),
# checked on its own, without krelay: the judge must be right before it
# judges krelay.
#
# sasl_front.py listens on one port per mock broker and behaves there as
# a Kafka SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
# with unsecured JWS, KIP-368 session lifetime and re-authentication),
# relaying to its mock broker once the client authenticated; its events
# file says who authenticated how and as which principal each request was
# relayed.  Other tests start it with kr_start_sasl_fronts (lib.sh), which
# sets KR_SASL_BASE (NodeId n at KR_SASL_BASE+n), KR_SASL_BOOTSTRAP,
# KR_SASL_DIAL (krelay's dial.n lines), KR_SASL_EVENTS and KR_SASL_PID;
# the command line is in sasl_front.py's header.
#
# Checked here:
#  0. its SCRAM server reproduces RFC 7677's example exchange exactly
#     (sasl_front.py --selftest-rfc7677);
#  1. kcat (librdkafka 2.0.2, its own SASL client) through the fronts
#     (--advertise: Metadata names the fronts, for a direct client):
#     metadata with PLAIN, produce with SCRAM-SHA-256 as bob and consume
#     back with SCRAM-SHA-512 as alice, metadata with OAUTHBEARER
#     (librdkafka's unsecured JWT) as carol; a wrong password refused;
#     every mock connection from the fronts' process; the events name
#     bob for every Produce and alice for every Fetch;
#  2. sasl_front_check.py's raw frames: SaslHandshake v0 + raw PLAIN, v1
#     SCRAM-SHA-512 with the server signature verified, OAUTHBEARER over
#     SaslAuthenticate v2 with the token's exp as the session lifetime,
#     an expired token, wrong passwords and authzid (58 with Kafka's
#     texts, closed), an unknown mechanism (33), requests before
#     authentication (closed, nothing relayed), acks=0 Produce; on a
#     second front with 1500 ms sessions: SessionLifetimeMs, a pipelined
#     re-authentication answered in order behind a relayed request,
#     re-authentication after expiry, 34 for one within 1 s, the expired
#     session closed, re-authentication as another principal or with
#     another mechanism refused; the events of all of it (principals,
#     outcomes, counts, no secret);
#  3. the fronts stop cleanly on SIGTERM.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 60
W=$KR_WORK
case $(kcat -X list 2>/dev/null | grep '^builtin.features') in
*sasl_scram*sasl_oauthbearer*) ;;
*) kr_skip "kcat with SASL SCRAM and OAUTHBEARER" ;;
esac

# ---- 0. RFC 7677
"$KR_PY" "$top_srcdir/tests/integration/sasl_front.py" --selftest-rfc7677 \
    >"$W/rfc7677.txt" 2>&1 || kr_fail "RFC 7677 example: $(cat "$W/rfc7677.txt")"
kr_log "SCRAM server: RFC 7677's server-first and server-final reproduced"

kr_start_mock sasl:3
kr_start_sasl_fronts --advertise 127.0.0.1

# ---- 1. kcat through the fronts
KC=(kcat -b "$KR_SASL_BOOTSTRAP" -X socket.timeout.ms=10000
    -X security.protocol=sasl_plaintext)
AS_ALICE=(-X sasl.mechanisms=PLAIN -X sasl.username=alice
          -X sasl.password=alice-test-pw)
kr_run 30 "${KC[@]}" "${AS_ALICE[@]}" -L >"$W/metadata.txt" \
    2>"$W/kcat-L.log" || kr_fail "kcat -L (PLAIN) failed: $(tail -3 "$W/kcat-L.log")"
for n in 1 2 3; do
    grep -q "broker $n at 127.0.0.1:$((KR_SASL_BASE + n))\$" "$W/metadata.txt" ||
        kr_fail "broker $n not at its front: $(cat "$W/metadata.txt")"
done
grep -q 'topic "sasl" with 3 partitions' "$W/metadata.txt" ||
    kr_fail "topic sasl not listed"
kr_payloads "$W/in.txt" 30 sasl
kr_run 30 "${KC[@]}" -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=bob \
    -X sasl.password=bob-test-pw -P -t sasl -X linger.ms=5 <"$W/in.txt" \
    2>"$W/kcat-P.log" || kr_fail "kcat -P (SCRAM-SHA-256) failed: $(tail -3 "$W/kcat-P.log")"
kr_run 30 "${KC[@]}" -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=alice \
    -X sasl.password=alice-test-pw -C -t sasl -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" ||
    kr_fail "kcat -C (SCRAM-SHA-512) failed: $(tail -3 "$W/kcat-C.log")"
cmp -s <(sort "$W/in.txt") <(sort "$W/out.txt") ||
    kr_fail "consumed messages differ: $(diff <(sort "$W/in.txt") <(sort "$W/out.txt") | head -5)"
kr_run 30 "${KC[@]}" -X sasl.mechanisms=OAUTHBEARER \
    -X enable.sasl.oauthbearer.unsecure.jwt=true \
    -X sasl.oauthbearer.config=principal=carol -L >"$W/oauth.txt" \
    2>"$W/kcat-oauth.log" || kr_fail "kcat -L (OAUTHBEARER) failed: $(tail -3 "$W/kcat-oauth.log")"
if kr_run 30 "${KC[@]}" -X sasl.mechanisms=PLAIN -X sasl.username=alice \
        -X sasl.password=wrong-pw -L -m 2 >"$W/wrong.txt" 2>"$W/kcat-wrong.log"; then
    kr_fail "kcat -L with a wrong password succeeded"
fi
grep -q "Authentication failed: Invalid username or password" "$W/kcat-wrong.log" ||
    kr_fail "kcat did not get Kafka's PLAIN failure text: $(tail -3 "$W/kcat-wrong.log")"
kr_log "kcat: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER through the fronts; a wrong password refused"
bad=$(grep -v " pid=$KR_SASL_PID " "$KR_ACCEPT_LOG" || true)
if [ ! -s "$KR_ACCEPT_LOG" ] || [ -n "$bad" ]; then
    kr_fail "mock connections not from the fronts: $bad"
fi
"$KR_PY" - "$KR_SASL_EVENTS" <<'PYEOF' >"$W/kcat-events.txt" 2>&1 ||
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
who = collections.defaultdict(set)
for e in ev:
    if e["event"] == "request":
        who[e["api_key"]].add(e["principal"])
ok = {(e["mechanism"], e["principal"]) for e in ev
      if e["event"] == "auth" and e["outcome"] == "ok"}
failed = [e for e in ev if e["event"] == "auth" and e["outcome"] == "failed"]
print("as:", dict(who), "ok:", sorted(ok), "failed:", len(failed))
assert who[0] == {"bob"}, "Produce not only as bob"
assert who[1] == {"alice"}, "Fetch not only as alice"
assert ok == {("PLAIN", "alice"), ("SCRAM-SHA-256", "bob"),
              ("SCRAM-SHA-512", "alice"), ("OAUTHBEARER", "carol")}, ok
assert failed and all(e["user"] == "alice" and e["error"] ==
    "Authentication failed: Invalid username or password" for e in failed)
PYEOF
    kr_fail "kcat's events: $(cat "$W/kcat-events.txt")"
kr_log "events: $(cat "$W/kcat-events.txt")"

# ---- 2. raw frames: front A = broker 1's front above; front B, 1500 ms
first=$(($(wc -l <"$KR_SASL_EVENTS") + 1))
front_b_ready_or_gone() {
    [ -s "$W/front_b.ready" ] || ! kill -0 "$PB_PID" 2>/dev/null
}
for _ in 1 2 3; do
    PB=$(kr_free_ports 1) || exit 99
    "$KR_PY" "$top_srcdir/tests/integration/sasl_front.py" \
        --listen "$PB=127.0.0.1:$((KR_MOCK_BASE + 1))" \
        --user alice:alice-test-pw --user bob:bob-test-pw \
        --mechanisms PLAIN,SCRAM-SHA-256 --session-lifetime-ms 1500 \
        --events "$W/sasl_events_b.jsonl" --ready-file "$W/front_b.ready" \
        2>>"$W/sasl_front_b.log" &
    PB_PID=$!
    KR_PIDS+=("$PB_PID")
    kr_wait_for 30 front_b_ready_or_gone
    [ -s "$W/front_b.ready" ] && break
    PB_PID=
done
[ -n "$PB_PID" ] || kr_fail "front B did not start: $(cat "$W/sasl_front_b.log")"
kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/sasl_front_check.py" \
    $((KR_SASL_BASE + 1)) "$PB" "$KR_SASL_EVENTS" "$first" \
    "$W/sasl_events_b.jsonl" >"$W/check.txt" 2>&1 ||
    kr_fail "raw checks: $(grep -v '^ok' "$W/check.txt")"
kr_log "raw checks: $(grep -c '^ok' "$W/check.txt") passed"

# ---- 3. no secret in the logs; clean stops
grep -l "alice-test-pw\|bob-test-pw" "$W"/sasl_front*.log "$W"/sasl_events*.jsonl &&
    kr_fail "a password in the fronts' log or events"
kr_stop "$PB_PID" "front B" "$W/sasl_front_b.log"
kr_stop "$KR_SASL_PID" "SASL fronts" "$W/sasl_front.log"
kr_stop "$KR_MOCK_PID" krmock "$W/mock.log"
kr_log "PASS"
