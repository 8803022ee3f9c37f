#!/bin/bash
# SASL termination's client matrix (issue 9; make check-long): krelay the
# clients' SASL server in front of the mock (no SASL there), on a
# plaintext listener and a TLS one (SASL_SSL).
#
#  1. kcat over sasl_ssl: PLAIN produces, SCRAM-SHA-512 consumes back;
#  2. kafka-python, PLAIN and SCRAM-SHA-256 over SASL_SSL: each produces
#     and consumes in a group (kafka_python_client.py);
#  3. kafkajs, SCRAM-SHA-512 over SASL_PLAINTEXT (kafkajs_client.js);
#  4. node-rdkafka (librdkafka 2.12 re-authenticates, KIP-368) with
#     sasl_session_lifetime_ms = 2000 keeps producing for 9 s across
#     several re-authentications: every message delivered, krelay logged
#     re-authentications and closed nothing for an expired session.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_need_cmd openssl
kr_setup 240
W=$KR_WORK
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: krelay is the SASL server"
PASSWD=$top_builddir/krelay-passwd
[ -x "$PASSWD" ] || kr_fail "$PASSWD not built"
umask 077
{
    printf 'alice-test-pw\n' | "$PASSWD" -m SCRAM-SHA-512 -i 4096 alice
    printf 'alice-test-pw\n' | "$PASSWD" -m SCRAM-SHA-256 -i 4096 alice
} >"$W/users" || kr_fail "krelay-passwd failed"
umask 022
KR_CERTS=$W/certs
bash "$top_srcdir/tests/tools/tls_certs.sh" "$KR_CERTS" ||
    kr_fail "tests/tools/tls_certs.sh could not make the certificates"

kr_start_mock term:3 pyplain:3 py:3 kjs:3 nrk:3
n=$((KR_NODEIDS + 2))
for attempt in 1 2 3; do
    base=$(kr_free_ports $((2 * n))) || exit 99
    PT=$base
    ST=$((base + n))
    cat >"$W/krelay.ini" <<EOC
[upstream]
bootstrap_servers = $KR_MOCK_BOOTSTRAP

[listener plain]
listen = 127.0.0.1:$PT
advertised_host = 127.0.0.1
broker_port_base = $((PT + 1))
node_id_min = 1
node_id_max = $KR_NODEIDS
sasl = terminate
sasl_credentials = $W/users
sasl_session_lifetime_ms = 2000
sasl_login_rate = 0

[listener tls]
listen = 127.0.0.1:$ST
advertised_host = 127.0.0.1
broker_port_base = $((ST + 1))
node_id_min = 1
node_id_max = $KR_NODEIDS
ssl = true
ssl_certificate = $KR_CERTS/server-full.pem
sasl = terminate
sasl_credentials = $W/users
sasl_login_rate = 0

[log]
level = info
target = $W/krelay.log
EOC
    : >"$W/krelay.log"
    "$KR_KRELAY" -c "$W/krelay.ini" >>"$W/krelay.out.log" 2>&1 &
    KR_KRELAY_PID=$!
    KR_PIDS+=("$KR_KRELAY_PID")
    if kr_wait_port $((ST + 1 + KR_NODEIDS)) 60 "$KR_KRELAY_PID" &&
       kr_wait_port "$PT" 5 "$KR_KRELAY_PID"; then
        break
    fi
    kill "$KR_KRELAY_PID" 2>/dev/null
    wait "$KR_KRELAY_PID" 2>/dev/null
    [ "$attempt" = 3 ] && kr_fail "krelay did not start"
done
kr_log "krelay: SASL at $PT (lifetime 2000 ms), SASL_SSL at $ST"

# ---- 1. kcat over sasl_ssl
KC=(kcat -b "127.0.0.1:$ST" -X socket.timeout.ms=10000
    -X security.protocol=sasl_ssl -X "ssl.ca.location=$KR_CERTS/ca.pem"
    -X sasl.username=alice -X sasl.password=alice-test-pw)
kr_payloads "$W/in.txt" 50 term
kr_run 30 "${KC[@]}" -X sasl.mechanisms=PLAIN -P -t term <"$W/in.txt" \
    2>"$W/kcat-P.log" ||
    kr_fail "kcat -P over sasl_ssl (PLAIN): $(tail -3 "$W/kcat-P.log")"
kr_run 30 "${KC[@]}" -X sasl.mechanisms=SCRAM-SHA-512 -C -t term \
    -o beginning -e -q -f '%s\n' >"$W/out.txt" 2>"$W/kcat-C.log" ||
    kr_fail "kcat -C over sasl_ssl (SCRAM-SHA-512): $(tail -3 "$W/kcat-C.log")"
cmp -s <(sort "$W/in.txt") <(sort "$W/out.txt") ||
    kr_fail "kcat over sasl_ssl: consumed messages differ"
kr_log "kcat sasl_ssl: 50 produced (PLAIN), consumed (SCRAM-SHA-512)"

# ---- 2. kafka-python, PLAIN and SCRAM-SHA-256 over SASL_SSL
if "$KR_PY" -c 'import kafka' 2>/dev/null; then
    for mt in PLAIN:pyplain SCRAM-SHA-256:py; do
        m=${mt%%:*} t=${mt#*:}
        KR_TLS_CA=$KR_CERTS/ca.pem KR_SASL_MECH=$m KR_SASL_USER=alice \
            KR_SASL_PASS=alice-test-pw kr_run 120 "$KR_PY" \
            "$top_srcdir/tests/integration/kafka_python_client.py" \
            "127.0.0.1:$ST" "$t" 100 "$W/$t-brokers.txt" >"$W/$t.log" 2>&1 ||
            kr_fail "kafka-python $m over SASL_SSL: $(tail -3 "$W/$t.log")"
        kr_log "kafka-python SASL_SSL $m: $(tail -1 "$W/$t.log")"
    done
else
    kr_log "kafka-python not installed: skipped"
fi

# ---- 3. kafkajs, SCRAM-SHA-512
export NODE_PATH="$KRELAY_DEPS_DIR/node_modules${NODE_PATH:+:$NODE_PATH}"
if command -v node >/dev/null && node -e "require('kafkajs')" 2>/dev/null; then
    KR_SASL_MECH=SCRAM-SHA-512 KR_SASL_USER=alice KR_SASL_PASS=alice-test-pw \
        kr_run 180 node "$top_srcdir/tests/integration/kafkajs_client.js" \
        "127.0.0.1:$PT" kjs 100 "$W/kjs-brokers.txt" >"$W/kjs.log" 2>&1 ||
        kr_fail "kafkajs SCRAM-SHA-512: $(tail -3 "$W/kjs.log")"
    kr_log "kafkajs SCRAM-SHA-512: $(tail -1 "$W/kjs.log")"
else
    kr_log "kafkajs not installed: skipped"
fi

# ---- 4. node-rdkafka across re-authentications
if command -v node >/dev/null && node -e "require('node-rdkafka')" 2>/dev/null; then
    kr_run 90 node "$top_srcdir/tests/integration/nrk_reauth_client.js" \
        "127.0.0.1:$PT" alice alice-test-pw nrk nrk --secs 9 --no-consume \
        >"$W/nrk.log" 2>&1 ||
        kr_fail "node-rdkafka across re-authentications: $(tail -3 "$W/nrk.log")"
    reauth=$(grep -c "SASL SCRAM-SHA-512 re-authentication succeeded" \
        "$W/krelay.log")
    [ "$reauth" -ge 3 ] ||
        kr_fail "node-rdkafka: $reauth re-authentications logged (want >= 3)"
    grep -q "session lifetime .* ran out" "$W/krelay.log" &&
        kr_fail "a connection closed for an expired session: $(grep -m1 'ran out' "$W/krelay.log")"
    kr_log "node-rdkafka: $(tail -1 "$W/nrk.log"), $reauth re-authentications" \
        "on $(grep "SASL SCRAM-SHA-512 re-authentication succeeded" \
              "$W/krelay.log" | grep -o '\[c#[0-9.]*' | sort -u | wc -l) connections"
else
    kr_log "node-rdkafka not installed: skipped"
fi

if grep -l -e "test-pw" "$W/krelay.log" "$W/krelay.out.log"; then
    kr_fail "a password in krelay's log"
fi
kr_finish
