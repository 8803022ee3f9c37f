#!/bin/bash
# SNI routing (issue 8): one TLS port serves the bootstrap route and every
# broker, the name each client's ClientHello sends picking the broker.
# Clients resolve kafka.test and broker-N.kafka.test through a hosts file
# the test writes, bind-mounted over /etc/hosts in a mount namespace of
# their own (unshare --mount: the network stays shared, the mount ends
# with the namespace, nothing to undo).  The certificate names kafka.test
# and *.kafka.test (tests/tools/tls_certs.sh).
#
# One krelay, two SNI listeners in front of the mock (3 brokers):
#   s   sni_bootstrap_name = kafka.test, sni_fallback = close (default)
#   f   no bootstrap name, sni_fallback = bootstrap
# Checked: kcat's metadata names every broker broker-N.kafka.test on the
# one port; kcat and kafka-python produce to and consume from every
# partition (each NodeId leads two), and krelay routed a connection to each
# NodeId by its name and dialled that broker; a TLS 1.2 and a TLS 1.3
# session resumed under another name go by the new name; no SNI, an
# unknown name and a NodeId outside the range are closed on s with one
# line each, and no SNI on f gets the bootstrap route; krelay -t refuses a
# pattern without $(node_id), SNI routing without ssl, and
# broker_port_base with it, and warns of a certificate that does not name
# the names it advertises.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat openssl unshare mount
kr_need_py kafka ssl
kr_setup 60
unshare --mount true 2>/dev/null ||
    kr_skip "unshare --mount (a mount namespace: root or user namespaces)"
case $(kcat -X list 2>/dev/null | grep '^builtin.features') in
*[\ ,]ssl,*) ;;
*) kr_skip "kcat with SSL support" ;;
esac
kr_start_mock sni:6
W=$KR_WORK
C=$W/certs
bash "$top_srcdir/tests/tools/tls_certs.sh" "$C" ||
    kr_fail "tls_certs.sh could not make the certificates"
PY="$KR_PY $top_srcdir/tests/integration/tls_sni_client.py"

# ---- krelay: two listeners, one port each
write_conf() {
    cat <<EOF
[upstream]
bootstrap_servers = $KR_MOCK_BOOTSTRAP

[listener s]
listen = 127.0.0.1:$PS
ssl = true
ssl_certificate = $C/sni-full.pem
node_id_min = 1
node_id_max = 3
sni_broker_name = broker-\$(node_id).kafka.test
sni_bootstrap_name = kafka.test

[listener f]
listen = 127.0.0.1:$PF
ssl = true
ssl_certificate = $C/sni-full.pem
node_id_min = 1
node_id_max = 3
sni_broker_name = broker-\$(node_id).kafka.test
sni_fallback = bootstrap

[log]
level = $KRELAY_LOG_LEVEL
target = $W/krelay.log

[audit]
target = $W/audit.log

[rule audit-s]
listener = s
api = ApiVersions
audit = true
EOF
}
for attempt in 1 2 3; do
    PS=$(kr_free_ports 2) || exit 99
    PF=$((PS + 1))
    write_conf >"$W/krelay.ini"
    "$KR_KRELAY" -c "$W/krelay.ini" >>"$W/krelay.out.log" 2>&1 &
    KR_KRELAY_PID=$!
    KR_PIDS+=("$KR_KRELAY_PID")
    if kr_wait_port "$PF" 30 "$KR_KRELAY_PID"; then
        break
    fi
    kill "$KR_KRELAY_PID" 2>/dev/null
    wait "$KR_KRELAY_PID" 2>/dev/null
    KR_KRELAY_PID=
done
[ -n "$KR_KRELAY_PID" ] || kr_fail "krelay did not start: $(cat "$W/krelay.out.log")"
grep -q "listening on 127.0.0.1:$PS (s/SNI routing)" "$W/krelay.log" ||
    kr_fail "no SNI routing listener logged"
[ "$(grep -c 'listening on' "$W/krelay.log")" = 2 ] ||
    kr_fail "not one port per SNI listener: $(grep 'listening on' "$W/krelay.log")"
kr_log "krelay: s=$PS f=$PF (SNI routing)"

# ---- the clients, with the test's names: one mount namespace
{
    printf '127.0.0.1 localhost\n127.0.0.1 kafka.test'
    printf ' broker-%d.kafka.test' 1 2 3
    printf '\n'
} >"$W/hosts"
cat >"$W/clients.sh" <<EOF
set -e
mount --bind "$W/hosts" /etc/hosts
getent hosts broker-3.kafka.test | grep -q '^127\.0\.0\.1 '
K="-b kafka.test:$PS -X security.protocol=ssl -X ssl.ca.location=$C/ca.pem"
kcat \$K -L -m 10 >"$W/kcat-L.txt"
for p in 0 1 2 3 4 5; do
    echo "kcat-sni-\$p" | kcat \$K -t sni -p \$p -P -X linger.ms=1
done
$PY kafka kafka.test:$PS $C/ca.pem sni 6 >"$W/kafka-python.txt"
kcat \$K -t sni -C -o beginning -e -q -f '%p %s\n' >"$W/kcat-C.txt"
EOF
kr_run 60 unshare --mount bash "$W/clients.sh" >"$W/clients.log" 2>&1 ||
    kr_fail "clients: $(tail -5 "$W/clients.log")"
for n in 1 2 3; do
    grep -q "broker $n at broker-$n.kafka.test:$PS\$" "$W/kcat-L.txt" ||
        kr_fail "kcat -L: broker $n not at broker-$n.kafka.test:$PS: $(cat "$W/kcat-L.txt")"
    grep -q "^broker $n broker-$n.kafka.test:$PS\$" "$W/kafka-python.txt" ||
        kr_fail "kafka-python: broker $n not at its name: $(cat "$W/kafka-python.txt")"
done
grep -q "127\.0\.0\.1\|localhost" "$W/kcat-L.txt" &&
    kr_fail "kcat -L: an address, not a name: $(cat "$W/kcat-L.txt")"
for p in 0 1 2 3 4 5; do
    grep -q "^$p kcat-sni-$p\$" "$W/kcat-C.txt" ||
        kr_fail "kcat: partition $p: its message not consumed back"
    grep -q "^$p kpy-sni-$p\$" "$W/kcat-C.txt" ||
        kr_fail "kafka-python's message in partition $p not consumed back"
done
grep -q "^OK$" "$W/kafka-python.txt" || kr_fail "kafka-python: $(cat "$W/kafka-python.txt")"
# each NodeId's broker reached through the one port: routed by its name,
# and that broker dialled (krelay's log, the mock's accept log)
for n in 1 2 3; do
    grep -q "> s/NodeId $n by SNI\] routed by SNI name \"broker-$n.kafka.test\"" \
        "$W/krelay.log" || kr_fail "NodeId $n: no connection routed by its name"
    grep -q "> s/NodeId $n by SNI\] connected to upstream 127.0.0.1:$((KR_MOCK_BASE + n))\$" \
        "$W/krelay.log" || kr_fail "NodeId $n: its broker was not dialled"
    grep -q "^accept port=$((KR_MOCK_BASE + n)) .* pid=$KR_KRELAY_PID " \
        "$KR_ACCEPT_LOG" || kr_fail "broker $n accepted no connection from krelay"
done
grep -q "> s/bootstrap by SNI\] routed by SNI name \"kafka.test\"" \
    "$W/krelay.log" || kr_fail "no bootstrap connection routed by kafka.test"
kr_log "kcat and kafka-python: every broker through port $PS, by name"

# ---- a session resumed under another name goes by the new one
$PY resume "$PS" "$C/ca.pem" broker-1.kafka.test broker-3.kafka.test \
    >"$W/resume.txt" 2>&1 || kr_fail "resume: $(cat "$W/resume.txt")"
for v in TLSv1.2 TLSv1.3; do
    port=$(awk -v v="$v" '$1 == "resumed" && $2 == v { print $3 }' "$W/resume.txt")
    [ -n "$port" ] || kr_fail "$v: no resumed connection: $(cat "$W/resume.txt")"
    grep -q "127.0.0.1:$port > s/SNI routing\] tls handshake with the client done: $v .* resumed\$" \
        "$W/krelay.log" || kr_fail "$v: krelay did not resume the session"
    grep -q "127.0.0.1:$port > s/NodeId 3 by SNI\] routed by SNI name \"broker-3.kafka.test\"" \
        "$W/krelay.log" || kr_fail "$v: the resumed session was not routed by its new name"
    grep -q "127.0.0.1:$port > s/NodeId 3 by SNI\] connected to upstream 127.0.0.1:$((KR_MOCK_BASE + 3))\$" \
        "$W/krelay.log" || kr_fail "$v: the resumed session's broker 3 was not dialled"
    # its audit lines: the route its name chose, from the open line on
    id=$(grep -o "\[c#[0-9.]* 127.0.0.1:$port > s/NodeId 3 by SNI\] routed" \
        "$W/krelay.log" | grep -o 'c#[0-9.]*')
    kr_wait_for 10 "$KR_PY" -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
mine = [e for e in ev if e["conn_id"] == sys.argv[2]]
kinds = sorted(e.get("event", e["type"]) for e in mine)
assert kinds == ["close", "open", "request"], kinds
assert all(e["route"] == "node" and e["node_id"] == 3 for e in mine), mine
' "$W/audit.log" "$id" ||
        kr_fail "$v: audit lines of $id: $(grep "\"$id\"" "$W/audit.log")"
done
kr_log "TLS 1.2 and 1.3 sessions resumed under another name: routed by the new name"

# ---- names that route nowhere: one line each; closed, or the bootstrap
probe() {       # probe PORT NAME WANT: "answered" or "closed"
    local out
    out=$($PY probe "$1" "$C/ca.pem" "$2" 2>&1) || kr_fail "probe $2: $out"
    [ "${out%% *}" = "$3" ] || kr_fail "probe $1 $2: $out, want $3"
    PROBE_PORT=${out##* }
}
probe "$PS" - closed
kr_wait_for 10 grep -q "127.0.0.1:$PROBE_PORT > s/SNI routing\] TLS client sent no SNI name (a client that dials an IP address sends none): closed (sni_fallback = close)" \
    "$W/krelay.log" || kr_fail "no SNI: no close line"
probe "$PS" broker-1x.kafka.test closed
kr_wait_for 10 grep -q "127.0.0.1:$PROBE_PORT > s/SNI routing\] TLS client sent SNI name \"broker-1x.kafka.test\", neither the bootstrap name kafka.test nor a broker's name (sni_broker_name = broker-\$(node_id).kafka.test): closed" \
    "$W/krelay.log" || kr_fail "unknown name: no close line"
probe "$PS" broker-7.kafka.test closed
kr_wait_for 10 grep -q "127.0.0.1:$PROBE_PORT > s/SNI routing\] TLS client sent SNI name \"broker-7.kafka.test\" of NodeId 7, outside node_id_min..node_id_max 1..3: closed" \
    "$W/krelay.log" || kr_fail "NodeId 7: no close line"
probe "$PF" - answered
grep -q "127.0.0.1:$PROBE_PORT > f/SNI routing\] TLS client sent no SNI name .*: the bootstrap route (sni_fallback = bootstrap)" \
    "$W/krelay.log" || kr_fail "f: no fallback line"
grep -q "127.0.0.1:$PROBE_PORT > f/bootstrap by SNI\] connected to upstream" \
    "$W/krelay.log" || kr_fail "f: no bootstrap route"
probe "$PF" BROKER-2.Kafka.Test answered
grep -q "127.0.0.1:$PROBE_PORT > f/NodeId 2 by SNI\] connected to upstream 127.0.0.1:$((KR_MOCK_BASE + 2))\$" \
    "$W/krelay.log" || kr_fail "f: a name in capitals did not reach NodeId 2"
# a name with bytes a log line must not carry as they are (a control
# byte, a backslash, UTF-8): shown as \xHH, the line stays one line of
# text (openssl s_client sends the name as given)
timeout 10 openssl s_client -connect "127.0.0.1:$PS" -quiet \
    -servername "$(printf 'x\001\\y\303\251.kafka.test')" </dev/null \
    >"$W/s_client.out" 2>&1 || true
kr_wait_for 10 grep -qF 'TLS client sent SNI name "x\x01\x5cy\xc3\xa9.kafka.test", neither' \
    "$W/krelay.log" || kr_fail "an odd name: not shown as \\xHH: $(grep -a 'x.*kafka.test", neither' "$W/krelay.log")"
LC_ALL=C grep -q "$(printf '\001')" "$W/krelay.log" &&
    kr_fail "a control byte of a client's SNI name reached the log"
for what in "no SNI name" "broker-1x" "broker-7"; do
    [ "$(grep -c ": warn: .*TLS client sent .*$what" "$W/krelay.log")" = 1 ] ||
        kr_fail "$what: not one line"
done
kr_log "no name, unknown names, NodeIds outside the range: one line; closed or the bootstrap route"

# ---- krelay -t: what SNI routing refuses, at its line
check_t() {     # check_t WANT SED-EXPRESSION...
    local want=$1
    shift
    sed "$@" "$W/krelay.ini" >"$W/bad.ini"
    if "$KR_KRELAY" -t -c "$W/bad.ini" >"$W/bad.out" 2>&1; then
        kr_fail "krelay -t passed: $want"
    fi
    grep -q "^krelay: $W/bad.ini:[0-9]*: $want" "$W/bad.out" ||
        kr_fail "krelay -t: want \"$want\": $(cat "$W/bad.out")"
}
check_t "\[listener s\]: sni_broker_name = broker.kafka.test: no \$(node_id) in it" \
    -e '0,/^sni_broker_name/s/^sni_broker_name = .*/sni_broker_name = broker.kafka.test/'
check_t "\[listener s\]: sni_broker_name needs ssl = true" -e '0,/^ssl = true/{/^ssl = true/d}'
check_t "\[listener s\]: broker_port_base does not go with sni_broker_name" \
    -e "s/^\[listener s\]/&\nbroker_port_base = 19100/"

# a certificate that does not name what SNI routing advertises: -t warns
# (exit 0), naming the first name and how many more; -t -W fails; the
# test's own certificate (kafka.test, *.kafka.test) draws no warning
"$KR_KRELAY" -t -c "$W/krelay.ini" >"$W/good.out" 2>&1 ||
    kr_fail "krelay -t failed: $(cat "$W/good.out")"
grep -q "does not name" "$W/good.out" &&
    kr_fail "krelay -t warned of the test's certificate: $(cat "$W/good.out")"
sed "0,/sni-full.pem/s/sni-full.pem/other-full.pem/" "$W/krelay.ini" >"$W/other.ini"
"$KR_KRELAY" -t -c "$W/other.ini" >"$W/other.out" 2>&1 ||
    kr_fail "krelay -t failed on a warning: $(cat "$W/other.out")"
grep -q "other.ini:[0-9]*: .*\[listener s\]: the certificate (ssl_certificate) does not name kafka.test (nor 3 other names SNI routing advertises)" "$W/other.out" ||
    kr_fail "krelay -t: no warning of the certificate's names: $(cat "$W/other.out")"
if "$KR_KRELAY" -t -W -c "$W/other.ini" >"$W/other-W.out" 2>&1; then
    kr_fail "krelay -t -W passed a warning"
fi
kr_log "krelay -t warns of a certificate that does not name the SNI names"

grep -q "PRIVATE KEY" "$W/krelay.log" "$W/krelay.out.log" &&
    kr_fail "a private key in krelay's log"
# no client reached a broker itself (kr_check_no_direct, but for pid=-1:
# krelay dials once a client's handshake is done, and kafka-python
# resets some connections right after theirs, so the upstream one may be
# gone before the mock looks up its owner)
bad=$(grep -v " pid=$KR_KRELAY_PID \| pid=-1 " "$KR_ACCEPT_LOG" || true)
[ -z "$bad" ] || kr_fail "connections to mock brokers not from krelay: $bad"
kr_check_alive
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kr_stop "$KR_MOCK_PID" krmock "$W/mock.log"
kr_log "PASS"
