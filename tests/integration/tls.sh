#!/bin/bash
# TLS on both sides (issue 8), with kcat (librdkafka 2.0.2, OpenSSL 3).
# The mock has no TLS: one HAProxy `bind ... ssl crt` frontend per mock
# broker gives TLS brokers, reached through dial.N = localhost:PORT; the
# name checked is the advertised one (the mock advertises 127.0.0.1: an
# IP, against the certificate's IP SAN); the bootstrap server is
# localhost:PORT (a DNS name check).  The
# CA and certificates are made now (tests/tools/tls_certs.sh).
#
# One krelay, one listener per case:
#   pp  plain -> plain        tp  TLS -> plain (ssl_handshake_timeout_ms 1500)
#   pt  plain -> TLS          tt  TLS with client certificates -> TLS
#   bn  plain -> a broker whose certificate names another host
#   bi  plain -> the same broker dialled by IP (no IP SAN)
#   tn  TLS -> plain, ssl_resumption = false
#   st  SASL terminated (sasl = terminate, credentials krelay-passwd made)
#       -> TLS
#   rf  plain -> TLS where nothing listens (the connect refused)
# Checked: kcat produces and consumes real messages through each of the
# four combinations (TLS with and without a client certificate); without
# one the mTLS listener refuses the handshake; a wrong host name or IP
# fails the upstream handshake with one log line and the client gets a
# clean end; plaintext Kafka and HTTP on a TLS port are closed at once
# with one line each; a stalled handshake is closed at the timeout, a
# probe that leaves before its first two bytes at once;
# krelay -t and a reload name a certificate file that does not load with
# FILE:LINE; a reload with another CA's certificates applies them;
# sessions (Python's ssl module) resume on tt with the client
# certificate's subject, never on tn, and not after a reload; kcat
# (sasl_plaintext, SCRAM-SHA-512) logs in to krelay on st, produces and
# consumes through the TLS brokers (issue 9: termination with a TLS
# upstream); a TLS upstream where nothing listens is logged as refused
# (krelay's own metadata fetch, and a client's connection), never as
# closed by the broker.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat haproxy openssl
kr_setup 60
kr_start_mock tls:3
W=$KR_WORK
C=$W/certs
bash "$top_srcdir/tests/tools/tls_certs.sh" "$C" ||
    kr_fail "tls_certs.sh could not make the certificates"
case $(kcat -X list 2>/dev/null | grep '^builtin.features') in
*[\ ,]ssl,*) ;;
*) kr_skip "kcat with SSL support" ;;
esac
# st's credentials: alice, SCRAM-SHA-512 (a test password)
PASSWD=$top_builddir/krelay-passwd
[ -x "$PASSWD" ] || kr_fail "$PASSWD not built"
(umask 077 && printf 'alice-test-pw\n' |
    "$PASSWD" -m SCRAM-SHA-512 -i 4096 alice >"$W/users") ||
    kr_fail "krelay-passwd failed"

# ---- HAProxy: a TLS frontend per mock broker, and two with the other
# certificate (a name check, an IP check) in front of broker 1
HP=$(kr_free_ports 5) || exit 99
{
    printf 'global\n    maxconn 200\n    nbthread 1\n'
    printf 'defaults\n    mode tcp\n    timeout connect 5s\n'
    printf '    timeout client 60s\n    timeout server 60s\n'
    for n in 1 2 3; do
        printf 'listen b%d\n    bind 127.0.0.1:%d ssl crt %s\n' \
            "$n" $((HP + n - 1)) "$C/server-full.pem"
        printf '    server s 127.0.0.1:%d\n' $((KR_MOCK_BASE + n))
    done
    printf 'listen other\n    bind 127.0.0.1:%d ssl crt %s\n' \
        $((HP + 3)) "$C/other-full.pem"
    printf '    server s 127.0.0.1:%d\n' $((KR_MOCK_BASE + 1))
} >"$W/haproxy.cfg"
haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.log" 2>&1 &
KR_PIDS+=($!)
HAPROXY_PID=$!
kr_wait_port $((HP + 3)) 30 "$HAPROXY_PID" ||
    kr_fail "HAProxy did not start: $(cat "$W/haproxy.log")"

# ---- krelay
L=(pp tp pt tt bn bi tn st rf)
write_conf() {
    local i=0 l
    cat <<EOF
[upstream plain]
bootstrap_servers = $KR_MOCK_BOOTSTRAP

[upstream tls]
bootstrap_servers = localhost:$HP
ssl = true
ssl_ca = $C/ca.pem
dial.1 = localhost:$HP
dial.2 = localhost:$((HP + 1))
dial.3 = localhost:$((HP + 2))

[upstream badname]
bootstrap_servers = localhost:$((HP + 3))
ssl = true
ssl_ca = $C/ca.pem

[upstream badip]
bootstrap_servers = 127.0.0.1:$((HP + 3))
ssl = true
ssl_ca = $C/ca.pem

[upstream refused]
bootstrap_servers = 127.0.0.1:$RP
ssl = true
ssl_ca = $C/ca.pem
EOF
    for l in "${L[@]}"; do
        cat <<EOF

[listener $l]
listen = 127.0.0.1:$((KB + i * 4))
advertised_host = 127.0.0.1
broker_port_base = $((KB + i * 4))
node_id_min = 1
node_id_max = 3
EOF
        case $l in
        pp) echo "upstream = plain" ;;
        tp) printf 'upstream = plain\nssl = true\nssl_certificate = %s\n%s\n' \
                "$C/server.pem" "ssl_key = $C/server.key" 
            echo "ssl_handshake_timeout_ms = 1500" ;;
        pt) echo "upstream = tls" ;;
        tt) printf 'upstream = tls\nssl = true\nssl_certificate = %s\n' \
                "$C/server-full.pem"
            echo "ssl_client_ca = $C/ca.pem" ;;
        bn) echo "upstream = badname" ;;
        bi) echo "upstream = badip" ;;
        tn) printf 'upstream = plain\nssl = true\nssl_certificate = %s\n' \
                "$C/server-full.pem"
            echo "ssl_resumption = false" ;;
        st) printf 'upstream = tls\nsasl = terminate\nsasl_credentials = %s\n' \
                "$W/users" ;;
        rf) echo "upstream = refused" ;;
        esac
        i=$((i + 1))
    done
    printf '\n[admin]\nlisten = 127.0.0.1:%s\n' "$ADMIN_PORT"
    printf '\n[log]\nlevel = %s\ntarget = %s\n' "$KRELAY_LOG_LEVEL" \
        "$W/krelay.log"
}
# rf's upstream: a port nothing listens on
RP=$(kr_free_ports 1) || exit 99
for attempt in 1 2 3; do
    KB=$(kr_free_ports $((${#L[@]} * 4 + 1))) || exit 99
    ADMIN_PORT=$((KB + ${#L[@]} * 4))
    write_conf >"$W/krelay.ini"
    "$KR_KRELAY" -c "$W/krelay.ini" >>"$W/krelay.out.log" 2>&1 &
    KR_KRELAY_PID=$!
    KR_PIDS+=("$KR_KRELAY_PID")
    if kr_wait_port $((KB + ${#L[@]} * 4 - 1)) 30 "$KR_KRELAY_PID" &&
       kr_wait_port "$ADMIN_PORT" 30 "$KR_KRELAY_PID"; then
        break
    fi
    kill "$KR_KRELAY_PID" 2>/dev/null
    wait "$KR_KRELAY_PID" 2>/dev/null
    KR_KRELAY_PID=
done
[ -n "$KR_KRELAY_PID" ] || kr_fail "krelay did not start: $(cat "$W/krelay.out.log")"
port() {        # port LISTENER: its bootstrap port
    local i
    for i in "${!L[@]}"; do
        [ "${L[$i]}" = "$1" ] && echo $((KB + i * 4)) && return
    done
}
kr_log "krelay: $(for l in "${L[@]}"; do printf '%s=%s ' "$l" "$(port "$l")"; done)"

# krelay -t: a certificate that does not load, at its line
sed "s|^ssl_certificate = $C/server.pem|ssl_certificate = $C/missing.pem|" \
    "$W/krelay.ini" >"$W/bad.ini"
line=$(grep -n "missing.pem" "$W/bad.ini" | cut -d: -f1)
if "$KR_KRELAY" -t -c "$W/bad.ini" >"$W/bad.out" 2>&1; then
    kr_fail "krelay -t passed a missing certificate"
fi
grep -q "^krelay: $W/bad.ini:$line: \[listener tp\]: ssl_certificate: cannot open $C/missing.pem: No such file or directory" \
    "$W/bad.out" || kr_fail "krelay -t: $(cat "$W/bad.out")"

SSL=(-X security.protocol=ssl -X "ssl.ca.location=$C/ca.pem")
CERT=(-X "ssl.certificate.location=$C/client.pem"
      -X "ssl.key.location=$C/client.key")
kc() {          # kc LISTENER HOST: KC=(kcat and options for that listener)
    KC=(kcat -b "$2:$(port "$1")" -X socket.timeout.ms=10000
        -X topic.metadata.refresh.interval.ms=5000)
}

# ---- 1. the four combinations: produce, consume back
ROUND=0
roundtrip() {   # roundtrip LISTENER HOST kcat-options...
    local l=$1 h=$2 t
    shift 2
    ROUND=$((ROUND + 1))
    t=tls$ROUND-$l
    kr_payloads "$W/in-$t.txt" 30 "$t"
    kc "$l" "$h"
    kr_run 30 "${KC[@]}" "$@" -P -t tls -X linger.ms=5 <"$W/in-$t.txt" \
        2>"$W/kcat-P-$t.log" || kr_fail "$l: kcat -P failed: $(tail -3 "$W/kcat-P-$t.log")"
    kr_run 30 "${KC[@]}" "$@" -C -t tls -o beginning -e -q -f '%s\n' \
        >"$W/out-$t.txt" 2>"$W/kcat-C-$t.log" ||
        kr_fail "$l: kcat -C failed: $(tail -3 "$W/kcat-C-$t.log")"
    cmp -s <(sort "$W/in-$t.txt") <(grep "^$t-" "$W/out-$t.txt" | sort) ||
        kr_fail "$l: consumed messages differ"
    kr_log "$l: 30 messages produced and consumed back"
}
roundtrip pp 127.0.0.1
roundtrip tp localhost "${SSL[@]}"
roundtrip pt 127.0.0.1
roundtrip tt 127.0.0.1 "${SSL[@]}" "${CERT[@]}"
# TLS on both sides, and every broker through HAProxy (not the mock)
grep -Eq '\] tls handshake with the client done: TLSv1\.[23] ' "$W/krelay.log" ||
    kr_fail "no client TLS handshake logged"
grep -Eq "\] tls handshake with the upstream done: TLSv1\.[23] " "$W/krelay.log" ||
    kr_fail "no upstream TLS handshake logged"
for n in 1 2 3; do
    grep -q "connecting to upstream localhost:$((HP + n - 1)) (host name \"127.0.0.1\", tls transport)" \
        "$W/krelay.log" || kr_fail "broker $n: not dialled at dial.$n, or not named as it advertises itself"
done
grep -q "client certificate: .*krelay-test-client" \
    "$W/krelay.log" || kr_fail "mTLS: no client certificate subject logged"
# SASL terminated by krelay, TLS to the brokers: the session that logged
# in dialled a TLS front and did its handshake
case $(kcat -X list 2>/dev/null | grep '^builtin.features') in
*sasl_scram*)
    roundtrip st 127.0.0.1 -X security.protocol=sasl_plaintext \
        -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=alice \
        -X sasl.password=alice-test-pw
    ids=$(grep -o "\[c#[0-9.]* [0-9.:]* > st/[a-z0-9]*\] SASL SCRAM-SHA-512 authentication succeeded: User:alice (verified)" \
        "$W/krelay.log" | grep -o 'c#[0-9.]*')
    [ -n "$ids" ] || kr_fail "st: no SCRAM-SHA-512 login logged"
    for id in $ids; do
        grep -Eq "\[$id [0-9.:]* > st/[a-z0-9]*\] tls handshake with the upstream done: TLSv1\.[23] " \
            "$W/krelay.log" || kr_fail "st: $id logged in but did no upstream TLS handshake: $(grep "\[$id " "$W/krelay.log" | head -8)"
    done
    kr_log "st: sasl = terminate to TLS brokers: $(echo "$ids" | wc -l) logins, each upstream over TLS"
    ;;
*) kr_log "st: skipped (kcat without SASL SCRAM)" ;;
esac

# ---- 2. mTLS without a client certificate: refused, one line each
before=$(grep -c 'tls handshake with the client failed' "$W/krelay.log")
kc tt 127.0.0.1
if kr_run 20 "${KC[@]}" "${SSL[@]}" -L -m 3 >"$W/nocert.txt" \
        2>"$W/kcat-nocert.log"; then
    kr_fail "mTLS listener: kcat -L without a certificate succeeded"
fi
kr_wait_for 10 grep -q 'tls handshake with the client failed: .*certificate' \
    "$W/krelay.log" || kr_fail "mTLS: no handshake failure logged"
grep 'tls handshake with the client failed' "$W/krelay.log" | tail -n +$((before + 1)) |
    grep -v "peer did not return a certificate\|certificate required" &&
    kr_fail "mTLS: another reason logged"
kr_log "mTLS listener: a client without a certificate is refused"

# ---- 3. a wrong name, a wrong IP: the upstream handshake fails
for l in bn bi; do
    t0=$SECONDS
    kc "$l" 127.0.0.1
    if kr_run 20 "${KC[@]}" -L -m 3 >"$W/$l.txt" 2>"$W/kcat-$l.log"; then
        kr_fail "$l: kcat -L succeeded through a broker of another name"
    fi
    [ $((SECONDS - t0)) -le 15 ] || kr_fail "$l: the client waited $((SECONDS - t0)) s"
done
grep -Eq "> bn/bootstrap\] tls handshake with upstream localhost:$((HP + 3)) \(name \"localhost\"\) failed: certificate verify failed: hostname mismatch$" \
    "$W/krelay.log" || kr_fail "bn: no hostname mismatch line"
grep -Eq "> bi/bootstrap\] tls handshake with upstream 127.0.0.1:$((HP + 3)) \(name \"127.0.0.1\"\) failed: certificate verify failed: IP address mismatch$" \
    "$W/krelay.log" || kr_fail "bi: no IP address mismatch line"
grep -q "upstream badname: metadata fetch from localhost:$((HP + 3)) failed: TLS: certificate verify failed: hostname mismatch" \
    "$W/krelay.log" || kr_fail "badname: krelay's own fetch: no mismatch line"
# one line per connection: each failed one is named once at warn
for id in $(grep -o "\[c#[0-9.]* [0-9.:]* > b[ni]/bootstrap\] tls handshake with upstream" \
        "$W/krelay.log" | grep -o 'c#[0-9.]*'); do
    [ "$(grep -c ": warn: \[$id " "$W/krelay.log")" = 1 ] ||
        kr_fail "$id: not one warn line: $(grep "\[$id " "$W/krelay.log")"
done
kr_log "a broker certificate of another name or without the IP: refused"

# ---- 3b. a TLS upstream where nothing listens: the refused connect is
# named as the plaintext path names it, by krelay's fetch and a client's
# connection alike (libevent reports a refused connect under TLS as the
# handshake's end: it was "connection closed by the broker")
kr_listening "$RP" && kr_skip "port $RP taken since it was chosen"
kr_wait_for 20 grep -q "upstream refused: metadata fetch from 127.0.0.1:$RP failed: Connection refused$" \
    "$W/krelay.log" || kr_fail "refused: krelay's fetch: no refused line: $(grep "upstream refused:" "$W/krelay.log" | head -3)"
kc rf 127.0.0.1
if kr_run 20 "${KC[@]}" -L -m 3 >"$W/rf.txt" 2>"$W/kcat-rf.log"; then
    kr_fail "rf: kcat -L succeeded with nothing upstream"
fi
grep -Eq "> rf/bootstrap\] connect to upstream 127.0.0.1:$RP: Connection refused$" \
    "$W/krelay.log" || kr_fail "rf: no refused line for the client's connection"
grep "upstream refused: \|> rf/" "$W/krelay.log" | grep "closed by the broker" &&
    kr_fail "refused: a refused connect logged as closed by the broker"
kr_log "a TLS upstream where nothing listens: Connection refused, fetch and client alike"

# ---- 4. plaintext Kafka and HTTP on a TLS port: one line each, closed
kc tp 127.0.0.1
if kr_run 20 "${KC[@]}" -L -m 2 >"$W/plain.txt" 2>"$W/kcat-plain.log"; then
    kr_fail "plaintext kcat -L on the TLS listener succeeded"
fi
grep -Eq "> tp/bootstrap\] plaintext Kafka \(ApiVersions v[0-9]+ request, [0-9]+ bytes\) on a TLS listener" \
    "$W/krelay.log" || kr_fail "no plaintext Kafka line"
"$KR_PY" - "$(port tp)" "$(port tt)" <<'PYEOF' || kr_fail "HTTP / stall checks failed"
import socket, sys, time
def ended(port, send, wait):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    t0 = time.monotonic()
    if send:
        s.sendall(send)
    s.settimeout(wait)
    try:
        got = s.recv(100)
    except ConnectionResetError:
        got = b""               # closed with the request unread: a reset
    return got, time.monotonic() - t0
got, dt = ended(sys.argv[1], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 5)
assert got == b"" and dt < 1, ("HTTP", got, dt)
got, dt = ended(sys.argv[2], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 5)
assert got == b"" and dt < 1, ("HTTP on mTLS", got, dt)
# stalls: nothing at all, and a record header without its record
for send in (b"", b"\x16\x03\x01"):
    got, dt = ended(sys.argv[1], send, 10)
    assert got == b"" and 1.2 < dt < 5, ("stall", send, got, dt)
# a probe that leaves before its ClientHello's first two bytes (half
# closed, to see when krelay closes): at once, not at the timeout
for send in (b"", b"\x16"):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    t0 = time.monotonic()
    s.sendall(send)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(5)
    got = s.recv(100)
    dt = time.monotonic() - t0
    assert got == b"" and dt < 1, ("probe", send, got, dt)
    s.close()
PYEOF
kr_wait_for 10 grep -q "> tt/bootstrap\] HTTP request on a TLS listener" "$W/krelay.log" ||
    kr_fail "no HTTP line"
grep -q "> tp/bootstrap\] HTTP request on a TLS listener" "$W/krelay.log" ||
    kr_fail "no HTTP line for tp"
[ "$(grep -c "> tp/bootstrap\] no TLS handshake within ssl_handshake_timeout_ms 1500" "$W/krelay.log")" = 2 ] ||
    kr_fail "stalls: want 2 timeout lines: $(grep 'ssl_handshake_timeout' "$W/krelay.log")"
grep -q "ssl_handshake_timeout_ms 1500 (stalled in the handshake after 3 bytes" \
    "$W/krelay.log" || kr_fail "no stalled-handshake line"
[ "$(grep -Ec "> tp/bootstrap\] client closed the connection \([01] bytes up, 0 down\)" "$W/krelay.log")" = 2 ] ||
    kr_fail "probes: want 2 close lines: $(grep '> tp/' "$W/krelay.log" | tail -5)"
kr_log "plaintext Kafka and HTTP refused at once, stalled handshakes closed at 1.5 s, probes at once"

# ---- 5. session resumption: resumed on tt with the subject its first
# handshake verified; never on tn (ssl_resumption = false); after a reload
# (the same files) a full handshake.  One ApiVersions round trip each
# (TLS 1.3 tickets come after the handshake).
"$KR_PY" - "$(port tt)" "$(port tn)" "$C" "$KR_KRELAY_PID" "$W/krelay.log" \
    >"$W/resume.txt" 2>&1 <<'PYEOF' || kr_fail "resumption: $(cat "$W/resume.txt")"
import os, signal, socket, ssl, struct, sys, time
tt, tn, cdir, pid, log = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:]
def recvn(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        assert k, "closed"
        b += k
    return b
def context(cert):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.load_verify_locations(cdir + "/ca.pem")
    if cert:
        c.load_cert_chain(cdir + "/client.pem", cdir + "/client.key")
    return c
ctx = {True: context(True), False: context(False)}
def visit(port, cert, sess=None):
    s = ctx[cert].wrap_socket(socket.create_connection(("127.0.0.1", port), 10),
                      server_hostname="localhost", session=sess)
    req = struct.pack(">hhih", 18, 0, 7, 6) + b"resume"   # ApiVersions v0
    s.sendall(struct.pack(">i", len(req)) + req)
    n, = struct.unpack(">i", recvn(s, 4))
    assert struct.unpack(">i", recvn(s, n)[:4]) == (7,), "correlation id"
    out = (s.session_reused, s.session, s.version())
    s.unwrap()
    s.close()
    return out
r, sess, v = visit(tt, True)
assert not r and v == "TLSv1.3", (r, v)
r, sess2, _ = visit(tt, True, sess)
assert r, "tt: not resumed"
print("tt: resumed")
r, s, _ = visit(tn, False)
r2, _, _ = visit(tn, False, s)
assert not r and not r2, "tn: resumed"
print("tn: not resumed")
n0 = open(log).read().count("reloaded ")
os.kill(int(pid), signal.SIGHUP)
t0 = time.monotonic()
while open(log).read().count("reloaded ") == n0:
    assert time.monotonic() - t0 < 20, "no reload"
    time.sleep(0.1)
r, _, _ = visit(tt, True, sess2)
assert not r, "tt: resumed after a reload"
print("tt after a reload: a full handshake")
PYEOF
kr_log "resumption: $(tr '\n' ';' <"$W/resume.txt")"
# krelay says so, and the resumed connection has the first one's subject
id=$(grep -o "\[c#[0-9.]* [0-9.:]* > tt/bootstrap\] tls handshake with the client done: TLSv1\.3 [A-Z0-9_]* resumed" \
    "$W/krelay.log" | head -n 1 | grep -o 'c#[0-9.]*')
[ -n "$id" ] || kr_fail "tt: no resumed handshake logged"
grep -q "\[$id .*\] client certificate: .*krelay-test-client" "$W/krelay.log" ||
    kr_fail "tt: the resumed connection has no client subject: $(grep "\[$id " "$W/krelay.log")"
grep -q "> tn/bootstrap\] tls handshake with the client done: .* resumed" \
    "$W/krelay.log" && kr_fail "tn: a resumed handshake logged"
[ "$(grep -c "> tt/bootstrap\] tls handshake with the client done: .* resumed" "$W/krelay.log")" = 1 ] ||
    kr_fail "tt: want exactly one resumed handshake"

# ---- 6. reload: a file that does not load is refused at its line, the
# running contexts stay; then another CA's certificates for tt: new
# handshakes use them, the upstream's (reloaded too) still work
cp "$W/krelay.ini" "$W/good.ini"
cp "$W/bad.ini" "$W/krelay.ini"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 20 grep -q "reload of $W/krelay.ini refused" "$W/krelay.log" ||
    kr_fail "the broken reload was not refused"
grep -q "reload refused: $W/krelay.ini:$line: \[listener tp\]: ssl_certificate: cannot open" \
    "$W/krelay.log" || kr_fail "reload: no FILE:LINE for the certificate"
bash "$top_srcdir/tests/tools/tls_certs.sh" "$W/certs2" || kr_fail "tls_certs.sh (2)"
sed -e "/^\[listener tt\]/,/^\[/s|^ssl_certificate = .*|ssl_certificate = $W/certs2/server-full.pem|" \
    -e "/^\[listener tt\]/,/^\[/s|^ssl_client_ca = .*|ssl_client_ca = $W/certs2/ca.pem|" \
    "$W/good.ini" >"$W/krelay.ini"
grep -q "certs2/server-full.pem" "$W/krelay.ini" || kr_fail "sed: no new certificate"
# the reload before (section 5's) logged "reloaded" too: wait for one more
reloads() { grep -c "reloaded $W/krelay.ini" "$W/krelay.log"; }
reloads_past() { [ "$(reloads)" -gt "$1" ]; }
n0=$(reloads)
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 20 reloads_past "$n0" ||
    kr_fail "the reload with new certificates did not happen"
# the line comes once every worker applied the reload (each from its own
# loop): ten handshakes in a row with the new CA (new connections, spread
# over the workers' sockets) before kcat's
"$KR_PY" - "$(port tt)" "$W/certs2" <<'PYEOF' >"$W/newca.out" 2>&1 ||
import socket, ssl, sys, time
port, d = int(sys.argv[1]), sys.argv[2]
c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
c.load_verify_locations(d + "/ca.pem")
c.load_cert_chain(d + "/client.pem", d + "/client.key")
ok, t0 = 0, time.monotonic()
while ok < 10:
    assert time.monotonic() - t0 < 20, "the new certificate not served"
    try:
        with c.wrap_socket(socket.create_connection(("127.0.0.1", port), 10),
                           server_hostname="localhost"):
            ok += 1
    except ssl.SSLError:
        ok = 0
        time.sleep(0.05)
PYEOF
    kr_fail "tt after the reload: $(cat "$W/newca.out")"
roundtrip tt 127.0.0.1 -X security.protocol=ssl \
    -X "ssl.ca.location=$W/certs2/ca.pem" \
    -X "ssl.certificate.location=$W/certs2/client.pem" \
    -X "ssl.key.location=$W/certs2/client.key"
kc tt 127.0.0.1
if kr_run 20 "${KC[@]}" "${SSL[@]}" "${CERT[@]}" -L -m 3 >"$W/oldca.txt" \
        2>"$W/kcat-oldca.log"; then
    kr_fail "tt after the reload: the old CA's client still got in"
fi
kr_log "reload: a broken certificate refused at its line; new ones used"

# ---- 7. a key only root can read, krelay run as another user (krelay
# drops no privileges itself: the systemd unit hands keys over with
# LoadCredential=): the check says which file and why, at its line
if command -v setpriv >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    P=$(mktemp -d "$W/priv.XXXXXX")
    chmod 711 "$W"                      # nobody may pass through to P
    chmod 755 "$P"
    cp "$C/server.pem" "$C/server.key" "$P/"
    chmod 644 "$P/server.pem"
    chmod 600 "$P/server.key"
    cat >"$P/k.ini" <<EOF
[upstream]
bootstrap_servers = $KR_MOCK_BOOTSTRAP

[listener k]
listen = 127.0.0.1:1
broker_port_base = 2
ssl = true
ssl_certificate = $P/server.pem
ssl_key = $P/server.key
EOF
    chmod 644 "$P/k.ini"
    if setpriv --reuid=nobody --regid=nogroup --clear-groups \
            "$KR_KRELAY" -t -c "$P/k.ini" >"$P/out" 2>&1; then
        kr_fail "krelay -t as nobody passed with a key only root reads"
    fi
    grep -q "$P/k.ini:9: \\[listener k\\]: ssl_key: cannot open $P/server.key: Permission denied" "$P/out" ||
        kr_fail "krelay -t as nobody: no FILE:LINE for the key: $(cat "$P/out")"
    "$KR_KRELAY" -t -c "$P/k.ini" >"$P/out-root" 2>&1 ||
        kr_fail "krelay -t as root: $(cat "$P/out-root")"
    chmod 700 "$W"
    kr_log "a key only root reads: krelay as nobody names it at its line"
fi

# ---- /metrics: each TLS handshake that failed counted once, by side, as
# the log named them (the mTLS client without a certificate; bn and bi's
# upstream connections to a broker of another name)
"$KR_PY" - "http://127.0.0.1:$ADMIN_PORT/metrics" "$W/krelay.log" <<'PYEOF' >"$W/tlsfail.out" 2>&1 ||
import re, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    text = r.read().decode()
got = {s: 0 for s in ("client", "upstream")}
for m in re.finditer(r'^krelay_tls_handshake_failures_total\{side="(\w+)"\} '
                     r'(\d+)$', text, re.M):
    got[m.group(1)] = int(m.group(2))
log = open(sys.argv[2]).read()
want = {"client": len(re.findall(r"\] tls handshake with the client failed",
                                 log)),
        "upstream": len(re.findall(r"\] tls handshake with upstream .* "
                                   r"failed", log))}
assert want["client"] >= 1 and want["upstream"] >= 2, want
assert got == want, "metrics %s, log lines %s" % (got, want)
print("client %(client)d, upstream %(upstream)d" % got)
PYEOF
    kr_fail "krelay_tls_handshake_failures_total: $(cat "$W/tlsfail.out")"
kr_log "/metrics: TLS handshake failures as logged: $(cat "$W/tlsfail.out")"

# ---- the end: no secret in the log, krelay and the others stop cleanly
grep -q "PRIVATE KEY" "$W/krelay.log" "$W/krelay.out.log" &&
    kr_fail "a private key in krelay's log"
kr_check_alive
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kill "$HAPROXY_PID" 2>/dev/null
kr_stop "$KR_MOCK_PID" krmock "$W/mock.log"
kr_log "PASS"
