#!/bin/bash
# SASL origination (issue 9) with PLAIN and with OAUTHBEARER (make
# check-long; SCRAM-SHA-512 is sasl_origination.sh's): kcat without SASL
# -> krelay -> sasl_front.py -> the mock.
#  1. PLAIN (sasl_password inline: krelay -t warns): produce and consume
#     back; every relayed request as bob;
#  2. OAUTHBEARER with an unsecured JWS in a token file (principal carol),
#     replaced between two clients: the second authentication reads the
#     new token (principal dave): the fronts saw both principals, each
#     relayed request as one of them, and no token in any log.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 90
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: krelay originates SASL"
W=$KR_WORK

kr_start_mock smech:2
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
kr_finish
