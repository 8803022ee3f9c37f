#!/bin/bash
# mTLS principals (issue 8): a listener with ssl_client_ca gives each
# connection the principal Kafka's default principal builder would,
# "User:" + the client certificate's subject as Java's
# X500Principal.getName() writes it, through ssl_principal_mapping_rules.
# Client certificates are made now (tests/tools/tls_certs.sh's CA), with
# an emailAddress, a multi-valued RDN written in another order than its
# DER's, non-ASCII text and an escaped comma.  The expected names are the
# JDK's, asked now (tests/tools/X500Names.java) when javac is there, else
# the ones committed below (from the same JDK; with a JDK a difference
# fails: update them from the message).  kcat (librdkafka, OpenSSL 3):
#   1. no mapping rules (DEFAULT): a rule `principal = User:CN=alice*`
#      with `deny = true` denies alice's Produce, bob's passes; the audit
#      lines (a rule audits their Produce requests: open, Produce, close)
#      of each connection carry its principal exactly;
#   2. reload with RULE:^CN=([^,]+),.*$/$1/L (and no DEFAULT), the deny
#      rule on User:alice: the mapped names are matched and audited; a
#      client whose subject no rule maps (CN=carol) is refused with one
#      log line, and so is one whose subject is empty (no critical
#      subjectAltName: the JDK refuses it); a resumed TLS session has its
#      first handshake's principal;
#   3. SASL (sasl = terminate) on the mTLS listener: the SASL principal
#      replaces the certificate's for rules and audit lines (issue 9).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat openssl
kr_setup 60
case $(kcat -X list 2>/dev/null | grep '^builtin.features') in
*[\ ,]ssl,*) ;;
*) kr_skip "kcat with SSL support" ;;
esac
W=$KR_WORK
C=$W/certs
bash "$top_srcdir/tests/tools/tls_certs.sh" "$C" ||
    kr_fail "tls_certs.sh could not make the certificates"

# leaf NAME SUBJECT: a client certificate of the test CA (UTF-8 values;
# '+' joins the AVAs of one RDN)
leaf() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
        -out "$C/$1.key" 2>/dev/null &&
    openssl req -new -utf8 -multivalue-rdn -key "$C/$1.key" -subj "$2" \
        -out "$C/$1.csr" 2>/dev/null &&
    printf '%s\n' basicConstraints=CA:false \
        keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth \
        >"$C/$1.ext" &&
    openssl x509 -req -in "$C/$1.csr" -CA "$C/ca.pem" -CAkey "$C/ca.key" \
        -CAcreateserial -days 2 -extfile "$C/$1.ext" -out "$C/$1.pem" \
        2>/dev/null || kr_fail "openssl: certificate $1"
}
leaf alice "/emailAddress=alice@example.com/O=Exämple, Zürich/UID=a1+OU=ops/CN=alice"
leaf bob "/emailAddress=bob@example.com/O=Exämple, Zürich/CN=bob"
leaf carol "/CN=carol"
leaf nobody "/"         # an empty subject, no subjectAltName

# The JDK's names (hex of their UTF-8), committed from OpenJDK 17.0.21:
#   alice  CN=alice,OU=ops+UID=a1,O=Exämple\, Zürich,1.2.840.113549.1.9.1=#16116...
#   bob    CN=bob,O=Exämple\, Zürich,1.2.840.113549.1.9.1=#160f...
#   carol  CN=carol
declare -A NAME=(
[alice]=434e3d616c6963652c4f553d6f70732b5549443d61312c4f3d4578c3a46d706c655c2c205ac3bc726963682c312e322e3834302e3131333534392e312e392e313d233136313136313663363936333635343036353738363136643730366336353265363336663664
[bob]=434e3d626f622c4f3d4578c3a46d706c655c2c205ac3bc726963682c312e322e3834302e3131333534392e312e392e313d2331363066363236663632343036353738363136643730366336353265363336663664
[carol]=434e3d6361726f6c
)
if command -v javac >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
    javac -d "$W/java" "$top_srcdir/tests/tools/X500Names.java" ||
        kr_fail "javac X500Names.java"
    java -cp "$W/java" X500Names "$C/alice.pem" "$C/bob.pem" "$C/carol.pem" \
        >"$W/jdk.txt" || kr_fail "java X500Names"
    for who in alice bob carol; do
        got=$(awk -F'\t' -v f="$C/$who.pem" '$1 == f && $2 == "ok" { print $4 }' \
            "$W/jdk.txt")
        [ -n "$got" ] || kr_fail "the JDK has no name for $who: $(cat "$W/jdk.txt")"
        [ "$got" = "${NAME[$who]}" ] ||
            kr_fail "the JDK names $who [$who]=$got, not the committed one"
    done
    kr_log "expected names: the JDK's ($(java -version 2>&1 | head -1))"
else
    [ "$KRELAY_REQUIRE_ALL" = 1 ] && kr_fail "no JDK (javac, java)"
    kr_log "expected names: committed (no JDK here)"
fi
# refused_client WHO: WHO's certificate gets no answer to an ApiVersions
# request (krelay closes the connection after the handshake)
refused_client() {
    "$KR_PY" - "$KR_PORT" "$C" "$1" <<'PYEOF' || kr_fail "$1 was not refused"
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2] + "/ca.pem")
ctx.load_cert_chain("%s/%s.pem" % (sys.argv[2], sys.argv[3]),
                    "%s/%s.key" % (sys.argv[2], sys.argv[3]))
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])),
                                             timeout=10),
                    server_hostname="localhost")
try:
    s.sendall(b"\0\0\0\x0e\0\x12\0\0\0\0\0\x01\0\x04test")  # ApiVersions v0
    got = s.recv(100)
except (ssl.SSLError, ConnectionError):
    got = b""
assert got == b"", got
PYEOF
}
unhex() { "$KR_PY" -c 'import sys; sys.stdout.write(bytes.fromhex(sys.argv[1]).decode())' "$1"; }
declare -A P
for who in alice bob carol; do
    P[$who]=User:$(unhex "${NAME[$who]}")
done

# ---- krelay: one mTLS listener; deny alice's Produce, audit principals
KR_LISTENER_CONF="ssl = true
ssl_certificate = $C/server-full.pem
ssl_client_ca = $C/ca.pem"
rules() {       # rules ALICE BOB: their principals' globs
    cat <<EOF

[audit]
target = $W/audit.log

[rule audit-produce]
api = Produce
principal = $1, $2
audit = true

[rule deny-alice]
api = Produce
principal = $1
deny = true
EOF
}
rules 'User:CN=alice*' 'User:CN=bob*' >"$W/rules.ini"
KR_EXTRA_CONF=$W/rules.ini
kr_start_mock p:1
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no TLS"

# kcat as WHO with ClientId WHO-TAG: produce 5 messages to p (kcat exits
# 0 either way: its delivery report lines tell), then read p back
produce() {     # produce WHO TAG
    kr_payloads "$W/in-$1-$2.txt" 5 "$1-$2"
    kr_run 30 kcat -b "$KR_BOOTSTRAP" -X security.protocol=ssl \
        -X "ssl.ca.location=$C/ca.pem" \
        -X "ssl.certificate.location=$C/$1.pem" \
        -X "ssl.key.location=$C/$1.key" -X "client.id=$1-$2" \
        -X message.send.max.retries=0 -X socket.timeout.ms=10000 \
        -P -t p -v <"$W/in-$1-$2.txt" >"$W/kcat-$1-$2.log" 2>&1
}
consumed() {    # consumed TAG: how many of TAG's lines p holds
    kr_run 30 kcat -b "$KR_BOOTSTRAP" -X security.protocol=ssl \
        -X "ssl.ca.location=$C/ca.pem" \
        -X "ssl.certificate.location=$C/client.pem" \
        -X "ssl.key.location=$C/client.key" -X client.id=reader \
        -C -t p -o beginning -e -q -f '%s\n' >"$W/out.txt" 2>"$W/kcat-C.log" ||
        kr_fail "kcat -C failed: $(tail -3 "$W/kcat-C.log")"
    grep -c "^$1-" "$W/out.txt"
}
round() {       # round TAG: alice denied, bob delivered
    produce alice "$1"
    grep -q "Topic authorization failed" "$W/kcat-alice-$1.log" ||
        kr_fail "$1: alice's Produce was not denied: $(tail -3 "$W/kcat-alice-$1.log")"
    produce bob "$1" || kr_fail "$1: kcat -P as bob failed"
    grep -qi "fail" "$W/kcat-bob-$1.log" &&
        kr_fail "$1: bob's Produce failed: $(grep -i fail "$W/kcat-bob-$1.log" | head -3)"
    [ "$(consumed "alice-$1")" = 0 ] || kr_fail "$1: alice's messages got in"
    [ "$(consumed "bob-$1")" = 5 ] || kr_fail "$1: bob's messages are not all in p"
    kr_log "$1: alice's Produce denied on her principal, bob's 5 messages in"
}

# ---- 1. the subject as Kafka writes it (DEFAULT)
round default
grep -qF "client certificate: ${P[alice]}" "$W/krelay.log" ||
    kr_fail "no debug line with alice's principal"

# ---- 2. mapping rules; a subject no rule maps is refused
rules User:alice User:bob >"$W/rules.ini"
KR_LISTENER_CONF="$KR_LISTENER_CONF
ssl_principal_mapping_rules = RULE:^CN=([^,]+),.*\$/\$1/L"
kr_write_conf "$W/krelay.ini"
grep -qxF 'ssl_principal_mapping_rules = RULE:^CN=([^,]+),.*$/$1/L' \
    "$W/krelay.ini" || kr_fail "no mapping rule in krelay.ini"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 20 grep -q "reloaded $W/krelay.ini" "$W/krelay.log" ||
    kr_fail "the reload did not happen: $(tail -3 "$W/krelay.log")"
round mapped
refused_client carol
kr_wait_for 10 grep -q "client certificate refused" "$W/krelay.log" ||
    kr_fail "no refusal line for carol"
refused=$(grep "client certificate refused" "$W/krelay.log")
[ "$(printf '%s\n' "$refused" | wc -l)" = 1 ] || kr_fail "not one line: $refused"
printf '%s\n' "$refused" | grep -qF ": warn: [c#" || kr_fail "not a warning: $refused"
printf '%s\n' "$refused" | grep -qF " 127.0.0.1:" || kr_fail "no client named: $refused"
printf '%s\n' "$refused" | grep -qF "] client certificate refused: no ssl_principal_mapping_rules rule maps its subject \"CN=carol\" (Kafka refuses such a client too)" ||
    kr_fail "refusal line: $refused"
id=$(printf '%s\n' "$refused" | grep -o '\[c#[0-9.]* ' | tr -d '[ ')
[ "$(grep "\[$id " "$W/krelay.log" | grep -vc ': debug: ')" = 1 ] ||
    kr_fail "$id: more than one line above debug"
kr_log "mapped: User:alice denied, User:bob passes; carol refused, one line"

# an empty subject without a critical subjectAltName: the JDK refuses the
# certificate, so Kafka the client; so does krelay, with one line
refused_client nobody
kr_wait_for 10 grep -q "its subject is empty" "$W/krelay.log" ||
    kr_fail "no refusal line for an empty subject: $(tail -3 "$W/krelay.log")"
[ "$(grep -c "client certificate refused: its subject is empty and its subjectAltName is not critical (the JDK, so Kafka, refuses such a certificate)" "$W/krelay.log")" = 1 ] ||
    kr_fail "empty subject: $(grep 'subject is empty' "$W/krelay.log")"
kr_log "an empty subject without a critical subjectAltName: refused, one line"

# a resumed TLS session: the principal of its first, verified handshake
# (ApiVersions v0 twice, the second time in the first one's session)
"$KR_PY" - "$KR_PORT" "$C" <<'PYEOF' || kr_fail "bob: no resumed session"
import socket, ssl, struct, sys
ctx = ssl.create_default_context(cafile=sys.argv[2] + "/ca.pem")
ctx.load_cert_chain(sys.argv[2] + "/bob.pem", sys.argv[2] + "/bob.key")
sess = None
for _ in range(2):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1",
                                                  int(sys.argv[1])),
                                                 timeout=10),
                        server_hostname="localhost", session=sess)
    s.sendall(b"\0\0\0\x15\0\x12\0\0\0\0\0\x01\0\x0bbob-resumed")
    n = struct.unpack(">i", s.recv(4))[0]
    while n > 0:
        n -= len(s.recv(n))
    resumed, sess = s.session_reused, s.session
    s.close()
assert resumed, "not resumed"
PYEOF
id=$(grep "\] tls handshake with the client done: .* resumed$" "$W/krelay.log" |
    tail -1 | grep -o '\[c#[0-9.]* ' | tr -d '[ ')
[ -n "$id" ] || kr_fail "no resumed handshake logged"
grep -F "[$id " "$W/krelay.log" | grep -qF "] client certificate: User:bob" ||
    kr_fail "$id (resumed): no principal User:bob"
kr_log "a resumed session ($id) has its first handshake's principal"

# ---- the audit log: each connection's lines carry its principal exactly
kr_check_alive
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
"$KR_PY" - "$W/audit.log" "${P[alice]}" "${P[bob]}" <<'PYEOF' ||
import json, sys
want = {"alice-default": sys.argv[2], "bob-default": sys.argv[3],
        "alice-mapped": "User:alice", "bob-mapped": "User:bob",
        "bob-resumed": "User:bob"}
conns = {}
for l in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(l)
    conns.setdefault(r["conn_id"], []).append(r)
seen = {}
for cid, rs in conns.items():
    ids = {r["client_id"] for r in rs if r.get("client_id")}
    assert len(ids) == 1 and ids <= want.keys(), (cid, ids)
    who = ids.pop()
    for r in rs:
        assert r.get("principal") == want[who], (who, r)
    ev = [r["event"] for r in rs if r["type"] == "connection"]
    assert ev == ["open", "close"], (cid, ev)
    for r in rs:
        if r.get("api") == "Produce":
            seen.setdefault(who, set()).add(tuple(r["actions"]))
assert seen == {"alice-default": {("denied",)}, "bob-default": {("forwarded",)},
                "alice-mapped": {("denied",)}, "bob-mapped": {("forwarded",)}}, seen
print("audit: %d connections, each line with its principal" % len(conns))
PYEOF
    kr_fail "audit lines: principals (above)"
grep -q "PRIVATE KEY" "$W/krelay.log" "$W/krelay.out.log" &&
    kr_fail "a private key in krelay's log"
# ---- 3. SASL on the mTLS listener (issue 9): the principal SASL verified
#      replaces the certificate's, as on a SASL_SSL broker (sasl =
#      terminate here; passthrough sets it on the same path): alice's
#      certificate logged in as bob is not denied by the rule on alice's
#      subject, bob's certificate logged in as carol is by the rule on
#      User:carol; their audit lines name the SASL principals
PASSWD=$top_builddir/krelay-passwd
[ -x "$PASSWD" ] || kr_fail "$PASSWD not built"
(umask 077
 for u in bob carol; do
     printf '%s-test-pw\n' "$u" | "$PASSWD" -m SCRAM-SHA-512 -i 4096 "$u"
 done >"$W/users") || kr_fail "krelay-passwd failed"
cat >"$W/rules.ini" <<EOF

[audit]
target = $W/audit-sasl.log

[rule audit-produce]
api = Produce
audit = true

[rule deny-cert-alice]
api = Produce
principal = User:CN=alice*
deny = true

[rule deny-carol]
api = Produce
principal = User:carol
deny = true
EOF
KR_LISTENER_CONF="ssl = true
ssl_certificate = $C/server-full.pem
ssl_client_ca = $C/ca.pem
sasl = terminate
sasl_credentials = $W/users"
kr_start_krelay
sasl_produce() {        # sasl_produce CERT USER
    kr_payloads "$W/in-sasl-$1.txt" 5 "sasl-$1"
    kr_run 30 kcat -b "$KR_BOOTSTRAP" -X security.protocol=sasl_ssl \
        -X "ssl.ca.location=$C/ca.pem" \
        -X "ssl.certificate.location=$C/$1.pem" \
        -X "ssl.key.location=$C/$1.key" -X "client.id=sasl-$1-as-$2" \
        -X sasl.mechanisms=PLAIN -X "sasl.username=$2" \
        -X "sasl.password=$2-test-pw" -X message.send.max.retries=0 \
        -X socket.timeout.ms=10000 -P -t p -v <"$W/in-sasl-$1.txt" \
        >"$W/kcat-sasl-$1.log" 2>&1
}
sasl_produce alice bob ||
    kr_fail "kcat with alice's certificate as bob: $(tail -3 "$W/kcat-sasl-alice.log")"
grep -qi "fail" "$W/kcat-sasl-alice.log" &&
    kr_fail "alice's certificate logged in as bob: $(grep -i fail "$W/kcat-sasl-alice.log" | head -3)"
sasl_produce bob carol
grep -q "Topic authorization failed" "$W/kcat-sasl-bob.log" ||
    kr_fail "bob's certificate logged in as carol: not denied: $(tail -3 "$W/kcat-sasl-bob.log")"
kr_check_alive
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
"$KR_PY" - "$W/audit-sasl.log" <<'PYEOF' ||
import json, sys
seen = set()
for l in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(l)
    if r.get("api") == "Produce":
        seen.add((r["client_id"], r.get("principal"),
                  r.get("principal_state"), tuple(r["actions"])))
assert seen == {("sasl-alice-as-bob", "User:bob", "verified", ("forwarded",)),
                ("sasl-bob-as-carol", "User:carol", "verified", ("denied",))}, seen
print("Produce lines as User:bob (forwarded) and User:carol (denied)")
PYEOF
    kr_fail "audit lines with SASL over mTLS (above)"
grep -q "test-pw" "$W/krelay.log" "$W/audit-sasl.log" &&
    kr_fail "a password in krelay's log or audit log"
kr_log "SASL over mTLS: the SASL principal replaces the certificate's"
kr_stop "$KR_MOCK_PID" krmock "$W/mock.log"
kr_log "PASS"
