#!/bin/bash
# SASL origination (issue 9): kcat WITHOUT SASL -> krelay (its [upstream]
# authenticates as alice with SCRAM-SHA-512, the password from a file)
# -> sasl_front.py (SASL_PLAINTEXT brokers, 1500 ms sessions, the judge;
# Kafka 4.x's exact SCRAM nonce check, --scram-nonce-check equals: krelay's
# client-final must carry the server's nonce exactly; each SASL answer
# 30 ms late, a broker some way off) -> the mock.
#  1. krelay's metadata connection authenticated (krelay's log, the
#     fronts' events) before any client came;
#  2. metadata, produce and consume through krelay; the fronts relayed
#     every request as alice, and each connection's requests only after
#     its authentication;
#  3. a busy producer (3000 messages over about 5 s) keeps producing
#     across re-authentications (KIP-368: krelay re-authenticates before
#     the 1500 ms session ends): every message delivered, consumed back;
#     at least 2 re-authentications on the fronts, none failed, no
#     session expired;
#  3a. an idle consumer for 3 s (its Fetch long-polls nearly always in
#     flight when a re-authentication falls due): krelay re-authenticates
#     once per session, never a second SaslHandshake right after a
#     success (a broker answers that ILLEGAL_SASL_STATE, within 1 s of the
#     last: krelay closed the connection when a poll was left pending);
#  3b. the bridging deployment: a second listener with sasl = terminate
#     (krelay-passwd credentials for carol) in front of the same
#     originating upstream; `krelay -t` accepts the config; kcat as carol
#     (SCRAM-SHA-512) produces and (PLAIN) consumes back through it, while
#     the fronts see only alice (krelay's own user): every request in that
#     window relayed as alice, carol never named to a front;
#  4. a client that starts SASL itself is refused (its credentials would
#     never reach the broker), one line;
#  5. the password file changed to a wrong password and reloaded: the
#     client's connection is closed, one krelay line naming upstream,
#     mechanism and the broker's message, the front logs the failure;
#     no password in any log;
#  6. the control: kcat (librdkafka 2.0.2, nonce sent twice) straight to
#     a front is refused by the exact nonce check krelay passed.
#  7. the bridge (sasl = terminate on the listener, origination
#     upstream): a client that never logs in (ApiVersions, answered by
#     krelay; a kcat without SASL) makes krelay log in to no broker; a
#     client that logs in (carol, PLAIN) reaches the brokers as alice.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 90
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: krelay originates SASL"
W=$KR_WORK

kr_start_mock sorig:3
kr_start_sasl_fronts --session-lifetime-ms 1500 --scram-nonce-check equals \
    --sasl-delay-ms 30
printf 'alice-test-pw\n' >"$W/krelay.pw"
chmod 600 "$W/krelay.pw"
PASSWD=$top_builddir/krelay-passwd
[ -x "$PASSWD" ] || kr_fail "$PASSWD not built"
umask 077
{
    printf 'carol-test-pw\n' | "$PASSWD" -m SCRAM-SHA-512 -i 4096 carol
} >"$W/users" || kr_fail "krelay-passwd failed"
umask 022
# 3b's listener: sasl = terminate in front of the originating upstream
BR=$(kr_free_ports $((KR_NODEIDS + 2))) || exit 99
cat >"$W/bridge.ini" <<EOC

[listener bridge]
listen = 127.0.0.1:$BR
advertised_host = 127.0.0.1
broker_port_base = $((BR + 1))
node_id_min = 1
node_id_max = $KR_NODEIDS
sasl = terminate
sasl_credentials = $W/users
EOC
KR_LISTENER_NAME=plain
KR_UPSTREAM_BOOTSTRAP=$KR_SASL_BOOTSTRAP
KR_UPSTREAM_CONF="$KR_SASL_DIAL
sasl_mechanism = SCRAM-SHA-512
sasl_username = alice
sasl_password_file = $W/krelay.pw"
# a rule that matches the SASL APIs: a client's own SaslHandshake must be
# closed before any rule could forward it onto krelay's authenticated
# upstream (step 4)
cat >"$W/rules.conf" <<EOF

[audit]
target = $W/audit.log

[rule audit-sasl]
api = SaslHandshake, SaslAuthenticate
audit = true
EOF
cat "$W/bridge.ini" >>"$W/rules.conf"
KR_EXTRA_CONF=$W/rules.conf
kr_start_krelay
kr_wait_port $((BR + 1 + KR_NODEIDS)) 30 "$KR_KRELAY_PID" ||
    kr_fail "krelay's bridge listener is not listening"
"$KR_KRELAY" -t -c "$W/krelay.ini" >"$W/t.txt" 2>&1 ||
    kr_fail "krelay -t refused the bridging config: $(cat "$W/t.txt")"

# ---- 1. krelay's own metadata connection
md_authenticated() {
    grep -q "metadata connection to 127.0.0.1:[0-9]* SASL authenticated (SCRAM-SHA-512)" \
        "$W/krelay.log"
}
kr_wait_for 20 md_authenticated ||
    kr_fail "no SASL-authenticated metadata connection in krelay's log"
kr_log "krelay's metadata connection authenticated"

# ---- 2. kcat without SASL through krelay
KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000)
kr_run 30 "${KC[@]}" -L >"$W/metadata.txt" 2>"$W/kcat-L.log" ||
    kr_fail "kcat -L failed: $(tail -3 "$W/kcat-L.log")"
awk '$1 == "broker" && $3 == "at" {
        n = split($4, hp, ":"); print $2, hp[1], hp[n] }' \
    "$W/metadata.txt" >"$W/brokers.txt"
kr_check_brokers "$W/brokers.txt"
kr_payloads "$W/in.txt" 200 sorig
kr_run 30 "${KC[@]}" -P -t sorig -X linger.ms=5 <"$W/in.txt" \
    2>"$W/kcat-P.log" || kr_fail "kcat -P failed: $(tail -3 "$W/kcat-P.log")"
kr_run 30 "${KC[@]}" -C -t sorig -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
cmp -s <(sort "$W/in.txt") <(sort "$W/out.txt") ||
    kr_fail "consumed messages differ: $(diff <(sort "$W/in.txt") <(sort "$W/out.txt") | head -5)"
kr_log "kcat without SASL: 200 messages produced and consumed back"

# ---- 3. a busy producer across re-authentications
for ((i = 1; i <= 3000; i++)); do
    printf 'busy-%05d\n' "$i"
done >"$W/busy.gen"
# 250 messages every 0.4 s through a FIFO: one producer connection, busy
# for about 5 s (three 1500 ms sessions and more)
mkfifo "$W/busy.fifo"
(
    for ((i = 0; i < 12; i++)); do
        sed -n "$((i * 250 + 1)),$((i * 250 + 250))p" "$W/busy.gen"
        sleep 0.4
    done >"$W/busy.fifo"
) &
FEEDER=$!
kr_run 60 "${KC[@]}" -P -t sorig -p 0 -X linger.ms=5 <"$W/busy.fifo" \
    2>"$W/kcat-busy.log" || kr_fail "busy kcat -P failed: $(tail -3 "$W/kcat-busy.log")"
wait "$FEEDER"
grep -qi "error\|fail" "$W/kcat-busy.log" &&
    kr_fail "the busy producer saw errors: $(head -3 "$W/kcat-busy.log")"
kr_run 30 "${KC[@]}" -C -t sorig -p 0 -o beginning -e -q -f '%s\n' \
    >"$W/busy.out" 2>"$W/kcat-busyC.log" || kr_fail "kcat -C (busy) failed"
got=$(grep -c '^busy-' "$W/busy.out" || true)
[ "$got" = 3000 ] || kr_fail "busy producer: $got of 3000 messages consumed back"
cmp -s "$W/busy.gen" <(grep '^busy-' "$W/busy.out") ||
    kr_fail "busy producer: messages differ or out of order"
kr_log "busy producer: 3000 messages over about 5 s delivered in order"

# ---- 3a. an idle consumer across re-authentications
nev=$(wc -l <"$KR_SASL_EVENTS")
# the duration itself, not a watchdog: no KRELAY_TEST_TIME_SCALE
timeout -k 5 3 "${KC[@]}" -C -t sorig -o end -q >"$W/idle.out" 2>"$W/kcat-idle.log"
rc=$?
[ "$rc" = 124 ] || kr_fail "the idle consumer ended ($rc): $(tail -3 "$W/kcat-idle.log")"
grep -q "re-authentication to upstream .* failed" "$W/krelay.log" &&
    kr_fail "idle consumer: $(grep -m1 "re-authentication to upstream" "$W/krelay.log")"
tail -n +"$((nev + 1))" "$KR_SASL_EVENTS" | "$KR_PY" -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin]
bad = [e for e in ev if e["event"] == "handshake" and e["error_code"] != 0]
assert not bad, bad[:2]
n = sum(1 for e in ev if e["event"] == "auth" and e["outcome"] == "reauth_ok")
assert n >= 2, "re-authentications: %d" % n
print(n)' >"$W/idle.txt" 2>&1 || kr_fail "idle consumer: the fronts' events: $(cat "$W/idle.txt")"
kr_log "idle consumer: $(cat "$W/idle.txt") re-authentications in 3 s, none refused"

# ---- 3b. the bridging deployment: carol logs in to krelay, krelay to the
#      brokers as alice
nev=$(wc -l <"$KR_SASL_EVENTS")
KB=(kcat -b "127.0.0.1:$BR" -X socket.timeout.ms=10000
    -X security.protocol=sasl_plaintext -X sasl.username=carol
    -X sasl.password=carol-test-pw)
kr_payloads "$W/bridge.in" 50 bridge
kr_run 30 "${KB[@]}" -X sasl.mechanisms=SCRAM-SHA-512 -P -t sorig \
    -X linger.ms=5 <"$W/bridge.in" 2>"$W/kcat-bridgeP.log" ||
    kr_fail "kcat -P as carol through the bridge: $(tail -3 "$W/kcat-bridgeP.log")"
kr_run 30 "${KB[@]}" -X sasl.mechanisms=PLAIN -C -t sorig -o beginning -e -q \
    -f '%s\n' >"$W/bridge.out" 2>"$W/kcat-bridgeC.log" ||
    kr_fail "kcat -C as carol through the bridge: $(tail -3 "$W/kcat-bridgeC.log")"
got=$(grep -c '^bridge-' "$W/bridge.out" || true)
cmp -s <(sort "$W/bridge.in") <(grep '^bridge-' "$W/bridge.out" | sort) ||
    kr_fail "bridge: $got of 50 messages consumed back, or different"
for m in SCRAM-SHA-512 PLAIN; do
    grep -q "bridge/.*SASL $m authentication succeeded: User:carol (verified)" \
        "$W/krelay.log" || kr_fail "bridge: no $m login of carol logged"
done
tail -n +"$((nev + 1))" "$KR_SASL_EVENTS" | "$KR_PY" -c '
import collections, json, sys
ev = [json.loads(l) for l in sys.stdin]
reqs = collections.Counter(e["api_key"] for e in ev if e["event"] == "request")
who = {e["principal"] for e in ev if e["event"] == "request"}
assert who == {"alice"}, who
assert reqs[0] > 0 and reqs[1] > 0, reqs
print("%d requests (%d Produce, %d Fetch) relayed as alice" %
      (sum(reqs.values()), reqs[0], reqs[1]))' >"$W/bridge.txt" 2>&1 ||
    kr_fail "bridge: the fronts' events: $(cat "$W/bridge.txt")"
grep -q carol "$KR_SASL_EVENTS" && kr_fail "a front saw carol"
kr_log "bridge: carol (krelay's login) produced and consumed 50; fronts: $(cat "$W/bridge.txt")"

# ---- 4. a client that starts SASL itself
kr_run 20 kcat -b "$KR_BOOTSTRAP" -X security.protocol=sasl_plaintext \
    -X sasl.mechanisms=PLAIN -X sasl.username=bob \
    -X sasl.password=bob-test-pw -m 2 -L >"$W/client-sasl.txt" \
    2>"$W/kcat-client-sasl.log" &&
    kr_fail "a SASL client got metadata through an originating krelay"
grep -q "client sent SaslHandshake v1, but krelay authenticates to upstream .* itself" \
    "$W/krelay.log" || kr_fail "no line for the client's own SaslHandshake"

# ---- the fronts' events so far
"$KR_PY" - "$KR_SASL_EVENTS" <<'PYEOF' >"$W/events.txt" 2>&1 ||
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
authed = set()
reqs = collections.Counter()
bad = []
for e in ev:
    if e["event"] == "auth" and e["outcome"] in ("ok", "reauth_ok"):
        authed.add(e["conn"])
        assert e["mechanism"] == "SCRAM-SHA-512" and e["principal"] == "alice", e
        assert e["session_lifetime_ms"] == 1500, e
    elif e["event"] == "request":
        reqs[e["api_key"]] += 1
        if e["principal"] != "alice" or e["conn"] not in authed:
            bad.append(e)
    elif e["event"] == "auth":
        bad.append(e)
    elif e["event"] == "handshake" and e["error_code"] != 0:
        bad.append(e)
    elif e["event"] == "close" and "expired" in e["why"]:
        bad.append(e)
assert not bad, bad[:3]
ok = sum(1 for e in ev if e["event"] == "auth" and e["outcome"] == "ok")
re = sum(1 for e in ev if e["event"] == "auth" and e["outcome"] == "reauth_ok")
assert reqs[0] > 0 and reqs[1] > 0 and reqs[3] > 0, reqs
assert re >= 2, "re-authentications: %d" % re
print("authentications %d, re-authentications %d, requests as alice %d" %
      (ok, re, sum(reqs.values())))
PYEOF
    kr_fail "the fronts' events: $(cat "$W/events.txt")"
kr_log "fronts: $(cat "$W/events.txt")"

# ---- 5. a wrong password, after a reload
printf 'wrong-test-pw\n' >"$W/krelay.pw"
nlog=$(wc -l <"$W/krelay.log")
kill -HUP "$KR_KRELAY_PID"
reloaded() { tail -n +"$nlog" "$W/krelay.log" | grep -q "reload"; }
kr_wait_for 20 reloaded || kr_fail "no reload line"
nev=$(wc -l <"$KR_SASL_EVENTS")
kr_run 20 "${KC[@]}" -m 2 -L >"$W/wrong.txt" 2>"$W/kcat-wrong.log" &&
    kr_fail "kcat -L got metadata with krelay's password wrong"
tail -n +"$nlog" "$W/krelay.log" | grep "SASL authentication to upstream" \
    >"$W/wrong.lines" || true
[ -s "$W/wrong.lines" ] || kr_fail "no krelay line for the failed authentication"
grep -q "failed (SCRAM-SHA-512, user \"alice\"): authentication failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512" \
    "$W/wrong.lines" || kr_fail "the failure line: $(head -1 "$W/wrong.lines")"
tail -n +"$((nev + 1))" "$KR_SASL_EVENTS" | grep -q '"outcome": *"failed"' ||
    kr_fail "the front logged no failed authentication"
kr_log "wrong password: $(wc -l <"$W/wrong.lines") client connection(s) closed with one line each"

# ---- 6. the control for the exact nonce check: kcat's librdkafka 2.0.2
#      sends its client nonce twice (librdkafka#4895), so straight to a
#      front (no krelay) its SCRAM login is refused, where krelay's passed
nev=$(wc -l <"$KR_SASL_EVENTS")
kr_run 20 kcat -b "${KR_SASL_BOOTSTRAP%%,*}" -X socket.timeout.ms=5000 \
    -X security.protocol=sasl_plaintext -X sasl.mechanisms=SCRAM-SHA-512 \
    -X sasl.username=alice -X sasl.password=alice-test-pw -m 1 -L \
    >"$W/direct.txt" 2>"$W/kcat-direct.log" &&
    kr_fail "kcat 2.0.2's SCRAM passed the fronts' exact nonce check"
tail -n +"$((nev + 1))" "$KR_SASL_EVENTS" |
    grep '"event": *"auth"' | grep -q '"outcome": *"failed"' ||
    kr_fail "control: the front logged no failed SCRAM login for kcat"
kr_log "control: kcat 2.0.2's doubled SCRAM nonce refused by the front"

# ---- 7. the bridge: terminate on the listener, origination upstream
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
printf 'alice-test-pw\n' >"$W/krelay.pw"
(umask 077; printf 'carol-test-pw\n' |
    "$top_builddir/krelay-passwd" -m SCRAM-SHA-512 -i 4096 carol >"$W/users") ||
    kr_fail "krelay-passwd failed"
KR_LISTENER_CONF="sasl = terminate
sasl_credentials = $W/users"
kr_start_krelay
kr_wait_for 20 md_authenticated ||
    kr_fail "bridge: no SASL-authenticated metadata connection"
auths() { grep -c '"event": *"auth"' "$KR_SASL_EVENTS" || true; }
nauth=$(auths)
kr_run 20 "$KR_PY" - "$KR_BOOTSTRAP" >"$W/bridge-av.txt" 2>&1 <<'PYEOF' ||
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
req = struct.pack(">hhih", 18, 0, 9, 6) + b"nologi"
s.sendall(struct.pack(">i", len(req)) + req)
n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
corr, err = struct.unpack(">ih", s.recv(n, socket.MSG_WAITALL)[:6])
assert corr == 9 and err == 0, (corr, err)
print("ApiVersions answered")
PYEOF
    kr_fail "bridge: ApiVersions before login: $(cat "$W/bridge-av.txt")"
kr_run 20 kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=5000 -m 2 -L \
    >"$W/bridge-nosasl.txt" 2>"$W/kcat-bridge-nosasl.log" &&
    kr_fail "bridge: a client without SASL got metadata"
kr_wait_for 10 grep -q "Metadata request before SASL authentication" \
    "$W/krelay.log" || kr_fail "bridge: no close for the client without SASL"
[ "$(auths)" = "$nauth" ] ||
    kr_fail "bridge: krelay logged in upstream for clients that never logged in: $(tail -3 "$KR_SASL_EVENTS")"
kr_run 30 kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000 \
    -X security.protocol=sasl_plaintext -X sasl.mechanisms=PLAIN \
    -X sasl.username=carol -X sasl.password=carol-test-pw -L \
    >"$W/bridge-L.txt" 2>"$W/kcat-bridge-L.log" ||
    kr_fail "bridge: kcat -L as carol failed: $(tail -3 "$W/kcat-bridge-L.log")"
grep -q "broker" "$W/bridge-L.txt" || kr_fail "bridge: no metadata for carol"
[ "$(auths)" -gt "$nauth" ] ||
    kr_fail "bridge: carol's session did not log in upstream"
kr_log "bridge: no upstream login for clients that never logged in; carol's login went upstream as alice"

grep -l "alice-test-pw\|wrong-test-pw\|carol-test-pw" "$W"/krelay*.log \
    "$W"/sasl_front*.log "$KR_SASL_EVENTS" && kr_fail "a password in a log"
kr_finish
