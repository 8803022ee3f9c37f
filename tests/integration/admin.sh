#!/bin/bash
# The admin endpoint ([admin], src/kr_admin.c): /healthz and /readyz with
# the upstream down (clients whose broker krelay cannot reach counted by
# broker), then up, then dead; a confluent-kafka producer's own
# count (librdkafka statistics: Produce requests, requests and bytes
# sent, summed over its brokers) against /metrics scraped while it is
# connected and idle, and per broker (requests and bytes sent) against
# /connections; the whole scrape under a strict exposition-format
# checker (prom_check.py); /connections shows the client with its
# ClientId; an HTTP request and an oversized frame count in
# frames_refused by kind; /config hides a SASL password; a refused reload counts in
# /metrics; the bearer token is asked (401) everywhere but /healthz.
# upstream_latency counts one observation per request the producer sent
# (each forwarded, each answered); a broker's error in a response krelay
# does not decode (Heartbeat v1, the mock told to answer
# UNKNOWN_MEMBER_ID: ErrorCode after ThrottleTimeMs) counts once in
# response_errors by its Kafka name.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_py confluent_kafka
kr_setup 120
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no admin endpoint"
W=$KR_WORK
N=500
CID=admin-test-producer
TOKEN=fake-admin-token-$$
SECRET=fake-sasl-password-$$
CHECK=("$KR_PY" "$top_srcdir/tests/integration/prom_check.py")
printf '%s\n' "$TOKEN" >"$W/token"
chmod 600 "$W/token"

# A second, unused [upstream] carries a SASL password for /config: the
# lib's [upstream] is renamed "main" and the listener names it.
eval "$(declare -f kr_write_conf | sed '1s/kr_write_conf/kr_write_conf_lib/')"
kr_write_conf() {
    kr_write_conf_lib "$1"
    sed -i 's/^\[upstream\]$/[upstream main]/' "$1"
}
KR_LISTENER_CONF="upstream = main"
KR_UPSTREAM_CONF="metadata_refresh_ms = 1000"

# http PATH [TOKEN]: GET the admin endpoint; the status in CODE, the body
# in $W/body.
http() {
    CODE=$("$KR_PY" - "http://127.0.0.1:$ADMIN_PORT$1" "${2:-}" \
               "$W/body" <<'EOF'
import sys, urllib.request, urllib.error
url, token, out = sys.argv[1:]
h = {'Authorization': 'Bearer ' + token} if token else {}
try:
    with urllib.request.urlopen(urllib.request.Request(url, headers=h),
                                timeout=10) as r:
        code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
open(out, 'wb').write(body)
print(code)
EOF
) || CODE=none
}

start_with_admin() {
    ADMIN_PORT=$(kr_free_ports 1) || exit 99
    cat >"$W/admin.ini" <<EOF

[upstream spare]
bootstrap_servers = 127.0.0.1:$DEAD_PORT
sasl_mechanism = PLAIN
sasl_username = fake-user
sasl_password = $SECRET

[admin]
listen = :$ADMIN_PORT
bearer_token_file = $W/token
EOF
    KR_EXTRA_CONF=$W/admin.ini
    kr_start_krelay
    kr_wait_port "$ADMIN_PORT" 30 "$KR_KRELAY_PID" ||
        kr_fail "the admin endpoint does not listen on 127.0.0.1:$ADMIN_PORT"
}

ready_is() {
    http /readyz "$TOKEN"
    [ "$CODE" = "$1" ]
}

# 1. No upstream yet (nothing listens where it points): alive, not ready.
DEAD_PORT=$(kr_free_ports 1) || exit 99
KR_UPSTREAM_BOOTSTRAP=127.0.0.1:$DEAD_PORT
start_with_admin
http /healthz
[ "$CODE" = 200 ] && [ "$(cat "$W/body")" = ok ] ||
    kr_fail "/healthz: $CODE $(cat "$W/body")"
kr_wait_for 20 ready_is 503 || kr_fail "/readyz with no upstream: $CODE"
grep -q 'upstream main: no metadata fetch' "$W/body" ||
    kr_fail "/readyz gives no reason: $(cat "$W/body")"
kr_log "no upstream: /healthz 200, /readyz 503: $(cat "$W/body")"
# a client of the bootstrap port and one of NodeId 2's: krelay cannot
# reach their brokers and closes them, counted by broker
for port in "$KR_PORT" $((KR_BROKER_BASE + 2)); do
    "$KR_PY" - "$port" <<'PYEOF' || kr_fail "krelay did not close a client of port $port"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
while s.recv(4096):
    pass
PYEOF
done
http /metrics "$TOKEN"
grep -qx 'krelay_upstream_connect_failures_total{broker="bootstrap"} 1' "$W/body" &&
    grep -qx 'krelay_upstream_connect_failures_total{broker="2"} 1' "$W/body" &&
    [ "$(grep -c '^krelay_upstream_connect_failures_total{' "$W/body")" = 2 ] ||
    kr_fail "upstream connect failures: $(grep upstream_connect "$W/body")"
kr_log "upstream unreachable: a client each of bootstrap and NodeId 2 closed, counted: $(grep -c '^krelay_upstream_connect_failures_total{' "$W/body") brokers"
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
mv "$W/krelay.log" "$W/krelay-first.log"

# 2. The mock up: ready.
unset KR_UPSTREAM_BOOTSTRAP
# the next Heartbeat gets UNKNOWN_MEMBER_ID (section 4: response_errors)
KR_MOCK_ARGS="-e 12:25:1"
kr_start_mock admin:3
start_with_admin
kr_wait_for 20 ready_is 200 || kr_fail "/readyz with the mock up: $CODE $(cat "$W/body")"

# 3. The token: 401 without it or with another one, not for /healthz.
for p in /metrics /readyz /connections /config /nothing; do
    http "$p"
    [ "$CODE" = 401 ] || kr_fail "$p without the token: $CODE"
    http "$p" "not-$TOKEN"
    [ "$CODE" = 401 ] || kr_fail "$p with a wrong token: $CODE"
done
http /nothing "$TOKEN"
[ "$CODE" = 404 ] || kr_fail "/nothing with the token: $CODE"
kr_log "bearer token: 401 without it and with a wrong one"

# 3b. Frames refused, by kind: an HTTP request on the Kafka listener
# (wrong_protocol) and a size prefix above max_frame_bytes (oversized),
# each closed by krelay (EOF, no byte back).
for bytes in 'GET / HTTP/1.0\r\n\r\n' '\x7f\xff\xff\xff\x00\x12\x00\x00'; do
    "$KR_PY" - "$KR_PORT" "$bytes" <<'PYEOF' || kr_fail "krelay did not close a client that sent $bytes"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(sys.argv[2].encode().decode('unicode_escape').encode('latin-1'))
assert s.recv(4096) == b''
PYEOF
done
http /metrics "$TOKEN"
grep -qx 'krelay_frames_refused_total{kind="wrong_protocol"} 1' "$W/body" &&
    grep -qx 'krelay_frames_refused_total{kind="oversized"} 1' "$W/body" &&
    [ "$(grep -c '^krelay_frames_refused_total{' "$W/body")" = 2 ] ||
    kr_fail "frames refused: $(grep frames_refused "$W/body")"
kr_log "frames refused: $(grep '^krelay_frames_refused_total{' "$W/body" | tr '\n' ' ')"

# 4. A producer's own count against /metrics.
kr_run 60 "$KR_PY" "$top_srcdir/tests/integration/admin_client.py" \
    "$KR_BOOTSTRAP" "http://127.0.0.1:$ADMIN_PORT" "$TOKEN" "$N" admin \
    "$CID" "$W" >"$W/client.out" 2>"$W/client.log" ||
    kr_fail "admin_client.py failed: $(tail -3 "$W/client.log")"
"${CHECK[@]}" "$W/metrics.txt" >"$W/prom_check.out" 2>&1 ||
    kr_fail "exposition format: $(cat "$W/prom_check.out")"
kr_log "/metrics: $(cat "$W/prom_check.out")"
"$KR_PY" - "$W/client.json" "$W/metrics.txt" "$N" <<'EOF' ||
import json, re, sys
c = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
n = int(sys.argv[3])

def total(name, **labels):
    s = 0
    for line in text.splitlines():
        m = re.match(r'(\w+)(?:\{(.*)\})? (\S+)$', line)
        if not m or m.group(1) != name:
            continue
        ls = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ''))
        if all(ls.get(k) == v for k, v in labels.items()):
            s += float(m.group(3))
    return int(s)

bad = []
def eq(what, krelay, client):
    print('%-46s krelay %8d  client %8d' % (what, krelay, client))
    if krelay != client:
        bad.append(what)

eq('messages delivered (client) = N', n, c['delivered'])
eq('Produce requests', total('krelay_api_requests_total', api='Produce'),
   c['produce'])
eq('Produce responses', total('krelay_api_responses_total', api='Produce'),
   c['produce'])
eq('requests (all APIs)', total('krelay_requests_total'), c['tx'])
eq('request bytes (client txbytes = client_to_upstream_bytes)',
   total('krelay_client_to_upstream_bytes_total'), c['txbytes'])
eq('connections open = brokers connected', total('krelay_conn_active'),
   c['brokers'])
eq('upstream latencies observed = requests sent',
   total('krelay_upstream_latency_seconds_count'), c['tx'])
eq('upstream latencies <= 30 s (none in +Inf alone)',
   total('krelay_upstream_latency_seconds_bucket', le='30'), c['tx'])
# librdkafka asks ApiVersions v3 first, which the mock may answer
# UNSUPPORTED_VERSION (then v0): one such error per extra ApiVersions of
# a connection, and no other error
eq('response errors: UNSUPPORTED_VERSION (ApiVersions retried)',
   total('krelay_response_errors_total'),
   total('krelay_api_requests_total', api='ApiVersions') - c['brokers'])
eq('response errors other than UNSUPPORTED_VERSION',
   total('krelay_response_errors_total') -
   total('krelay_response_errors_total', error='UNSUPPORTED_VERSION'), 0)
if c['produce'] < 2:
    bad.append('too few Produce requests to mean anything')
sys.exit('mismatch: ' + ', '.join(bad) if bad else 0)
EOF
    kr_fail "/metrics does not match the client's count"
"$KR_PY" - "$W/connections.json" "$CID" <<'EOF' >"$W/conns.out" ||
import json, sys
d = json.load(open(sys.argv[1]))
cs = d['connections']
assert d['total'] == len(cs) > 0, d
mine = [c for c in cs if c['client_id'] == sys.argv[2]]
assert len(mine) == len(cs), cs
for c in mine:
    assert c['client_address'] == '127.0.0.1' and c['client_port'] > 0, c
    assert c['bytes_from_client'] > 0 and c['bytes_to_client'] > 0, c
    assert c['in_flight'] == 0 and c['age_seconds'] > 0, c
    assert c['listener_address'].startswith('127.0.0.1:'), c
    # the unnamed [listener], named as in the audit log (doc/audit.md)
    assert c['listener'] == 'default', c
print('%d connections of %s' % (len(mine), sys.argv[2]))
EOF
    kr_fail "/connections: $(cat "$W/conns.out") $(head -c 600 "$W/connections.json")"
kr_log "/connections: $(cat "$W/conns.out")"
# per broker: each broker connection librdkafka made once and holds (so
# its counts are that connection's) against krelay's count of the
# connection of that route: requests and request bytes; the Produce
# requests all went to brokers so compared (librdkafka's count per broker)
"$KR_PY" - "$W/client.json" "$W/connections.json" "$CID" <<'EOF' >"$W/per_broker.out" 2>&1 ||
import json, sys
c = json.load(open(sys.argv[1]))
conns = [x for x in json.load(open(sys.argv[2]))['connections']
         if x['client_id'] == sys.argv[3]]
seen, produce = 0, 0
for b in c['per_broker']:
    if b['state'] != 'UP' or b['connects'] != 1:
        continue
    route = 'bootstrap' if b['nodeid'] < 0 else 'NodeId %d' % b['nodeid']
    k = [x for x in conns if x['route'] == route]
    assert len(k) == 1, (route, conns)
    assert (k[0]['requests'], k[0]['bytes_from_client']) == \
        (b['tx'], b['txbytes']), (route, b, k[0])
    print('%s: %d requests, %d bytes' % (route, b['tx'], b['txbytes']))
    seen += 1
    produce += b['produce']
assert seen >= 2 and produce == c['produce'], (seen, produce, c)
EOF
    kr_fail "per broker: $(cat "$W/per_broker.out")"
kr_log "per broker: $(tr '\n' ';' <"$W/per_broker.out")"
http "/connections?offset=1&limit=1" "$TOKEN"
[ "$CODE" = 200 ] && grep -q '"offset": 1' "$W/body" ||
    kr_fail "/connections?offset=1&limit=1: $CODE"
http "/connections?limit=x" "$TOKEN"
[ "$CODE" = 400 ] || kr_fail "/connections?limit=x: $CODE"

# 4b. A Heartbeat v1 the mock answers UNKNOWN_MEMBER_ID (-e 12:25:1):
# krelay does not decode it (no rule), its ErrorCode sits after
# ThrottleTimeMs: counted once, by name; its latency observed.
"$KR_PY" - "$KR_PORT" >"$W/heartbeat.out" 2>&1 <<'EOF' ||
import socket, struct, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=30)
def string(b):
    return struct.pack('>h', len(b)) + b
body = string(b'admin-group') + struct.pack('>i', 1) + string(b'member-x')
req = struct.pack('>hhi', 12, 1, 77) + string(b'admin-heartbeat') + body
s.sendall(struct.pack('>i', len(req)) + req)
n = struct.unpack('>i', s.recv(4, socket.MSG_WAITALL))[0]
rsp = s.recv(n, socket.MSG_WAITALL)
corr, throttle, code = struct.unpack('>iih', rsp[:10])
print('CorrelationId %d ErrorCode %d' % (corr, code))
sys.exit(0 if (corr, code) == (77, 25) else 1)
EOF
    kr_fail "Heartbeat through krelay: $(cat "$W/heartbeat.out")"
http /metrics "$TOKEN"
grep -qx 'krelay_response_errors_total{error="UNKNOWN_MEMBER_ID"} 1' "$W/body" &&
    [ "$(grep '^krelay_response_errors_total{' "$W/body" |
         grep -cv -e UNKNOWN_MEMBER_ID -e UNSUPPORTED_VERSION)" = 0 ] ||
    kr_fail "response_errors after the Heartbeat: $(grep '^krelay_response_errors' "$W/body")"
UP_COUNT=$(sed -n 's/^krelay_upstream_latency_seconds_count //p' "$W/body")
REQS=$(sed -n 's/^krelay_requests_total //p' "$W/body")
[ -n "$UP_COUNT" ] && [ "$UP_COUNT" = "$REQS" ] ||
    kr_fail "upstream latencies $UP_COUNT, requests $REQS"
kr_log "Heartbeat answered UNKNOWN_MEMBER_ID: $(cat "$W/heartbeat.out"), counted once; upstream latencies = requests = $UP_COUNT"

# 5. /config: the effective configuration, the SASL password hidden.
http /config "$TOKEN"
[ "$CODE" = 200 ] || kr_fail "/config: $CODE"
grep -q '^sasl_password = (not shown: a secret)$' "$W/body" ||
    kr_fail "/config does not list sasl_password as hidden"
grep -q "bearer_token_file = $W/token" "$W/body" ||
    kr_fail "/config does not show the token's file name"
if grep -q -e "$SECRET" -e "$TOKEN" "$W/body"; then
    kr_fail "/config shows a secret"
fi
if grep -q -e "$SECRET" -e "$TOKEN" "$W/krelay.log" "$W/krelay.out.log"; then
    kr_fail "a secret reached the log"
fi
kr_log "/config: the SASL password and the token are not shown"

# 6. A reload refused (a broken file) counts as failed; a good one as ok.
cp "$W/krelay.ini" "$W/krelay.ini.good"
echo "[broken" >>"$W/krelay.ini"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 20 grep -q 'reload of .* refused' "$W/krelay.log" ||
    kr_fail "the broken reload was not refused"
http /metrics "$TOKEN"
grep -qx 'krelay_reloads_total{result="failed"} 1' "$W/body" ||
    kr_fail "failed reload not counted: $(grep reloads "$W/body")"
cp "$W/krelay.ini.good" "$W/krelay.ini"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 20 grep -q ': reloaded ' "$W/krelay.log" ||
    kr_fail "the good reload did not happen"
http /metrics "$TOKEN"
grep -qx 'krelay_reloads_total{result="ok"} 1' "$W/body" ||
    kr_fail "reload not counted: $(grep reloads "$W/body")"
kr_log "reloads: refused and applied, both counted"
# A reload that removes [admin] leaves the endpoint as it started: its
# token is still asked.  It removes [upstream spare] too (the section
# before [admin]): said naming the line it was at, not a line of the
# file as it is now.
SPARE_LINE=$(grep -n '^\[upstream spare\]$' "$W/krelay.ini.good" | cut -d: -f1)
sed '/^\[upstream spare\]$/,$d' "$W/krelay.ini.good" >"$W/krelay.ini"
[ -n "$SPARE_LINE" ] && [ "$(wc -l <"$W/krelay.ini")" -lt "$SPARE_LINE" ] ||
    kr_fail "test bug: [upstream spare] at line '$SPARE_LINE'"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 20 grep -q '\[admin\] removed: the admin endpoint changes only at a restart' \
    "$W/krelay.log" || kr_fail "removing [admin] by a reload not logged"
grep -q "notice: reload: $W/krelay.ini: \[upstream spare\] removed (it was at line $SPARE_LINE before the reload): its open connections stay" \
    "$W/krelay.log" ||
    kr_fail "removing [upstream spare]: $(grep 'upstream spare' "$W/krelay.log")"
http /metrics
[ "$CODE" = 401 ] || kr_fail "[admin] removed: /metrics without the token: $CODE"
http /metrics "$TOKEN"
[ "$CODE" = 200 ] && grep -qx 'krelay_reloads_total{result="ok"} 2' "$W/body" ||
    kr_fail "[admin] removed: /metrics with the token: $CODE"
cp "$W/krelay.ini.good" "$W/krelay.ini"
kr_log "a reload without [admin] and [upstream spare]: the endpoint keeps its token, the removal names its old line"

# 7. The upstream dies: not ready, with the reason; still alive.
kr_check_alive
kr_check_no_direct
kr_stop "$KR_MOCK_PID" krmock "$W/mock.log"
kr_wait_for 20 ready_is 503 || kr_fail "/readyz with the mock gone: $CODE"
grep -q 'upstream main: the last metadata fetch failed' "$W/body" ||
    kr_fail "/readyz reason: $(cat "$W/body")"
kr_log "upstream dead: /readyz 503: $(cat "$W/body")"
http /healthz
[ "$CODE" = 200 ] || kr_fail "/healthz with the mock gone: $CODE"
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kr_log "PASS"
