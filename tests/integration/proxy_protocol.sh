#!/bin/bash
# The PROXY protocol (issue 12): HAProxy (`send-proxy`, `send-proxy-v2`)
# in front of krelay, kcat through it; scripted senders (Python).
#
# krelay's listeners listen on 127.0.0.2 and advertise 127.0.0.1, where
# HAProxy listens on the same ports (bootstrap and every broker port) and
# forwards to krelay with a header, so every connection of kcat's goes
# through HAProxy:
#   v1   proxy_protocol = v1, HAProxy `send-proxy`
#   v2   proxy_protocol = v2, HAProxy `send-proxy-v2`
#   tls  ssl = true, proxy_protocol = any (scripted: header, then TLS)
#   ut   proxy_protocol = any from 10.0.0.0/8 only (127.0.0.1 untrusted)
# Checked: kcat produces and consumes through v1 and v2; every audit line
# of theirs carries the source port of kcat's own connection to HAProxy
# as client_port and HAProxy's outgoing port as proxy_port (HAProxy's log
# gives both, %cp and %bp); a scripted sender whose header claims
# 203.0.113.7:4242 (v1 text, v2 binary, v2 then TLS) is that address in
# the audit log and is refused by a `client_address = 203.0.113.0/24`
# deny rule while a claim of 198.51.100.9 is not, and is that address in
# the admin endpoint's /connections while its connection is open; a
# header sent from an address outside proxy_protocol_from is refused at
# accept; a malformed header closes its connection; one log line each.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat haproxy openssl
kr_setup 90
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no PROXY protocol"
"$KR_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0))' \
    2>/dev/null || kr_skip "binding 127.0.0.2 (loopback beyond 127.0.0.1)"
kr_start_mock pp:2
W=$KR_WORK
C=$W/certs
bash "$top_srcdir/tests/tools/tls_certs.sh" "$C" ||
    kr_fail "tls_certs.sh could not make the certificates"

# Ports: P + 4*i for listener i (bootstrap; NodeId n at P + 4*i + n).
L=(v1 v2 tls ut)
write_conf() {
    local i
    cat <<EOF
[upstream]
bootstrap_servers = $KR_MOCK_BOOTSTRAP
EOF
    for i in "${!L[@]}"; do
        local host=127.0.0.2
        [ "${L[$i]}" = ut ] && host=127.0.0.1
        cat <<EOF

[listener ${L[$i]}]
listen = $host:$((P + 4 * i))
advertised_host = 127.0.0.1
broker_port_base = $((P + 4 * i))
node_id_min = 1
node_id_max = 3
EOF
        case ${L[$i]} in
        v1) printf 'proxy_protocol = v1\nproxy_protocol_from = 127.0.0.1\n' ;;
        v2) printf 'proxy_protocol = v2\nproxy_protocol_from = 127.0.0.0/8, ::1\n' ;;
        tls) printf 'proxy_protocol = any\nproxy_protocol_from = 127.0.0.1\n'
             printf 'ssl = true\nssl_certificate = %s\n' "$C/server-full.pem" ;;
        ut) printf 'proxy_protocol = any\nproxy_protocol_from = 10.0.0.0/8\n' ;;
        esac
    done
    cat <<EOF

[audit]
target = $W/audit.log

[rule all]
audit = true

[rule doc-net]
client_address = 203.0.113.0/24
api = FindCoordinator
deny = true

[admin]
listen = 127.0.0.1:$ADMIN_PORT

[log]
level = $KRELAY_LOG_LEVEL
target = $W/krelay.log
EOF
}
for attempt in 1 2 3; do
    P=$(kr_free_ports $((${#L[@]} * 4 + 1))) || exit 99
    ADMIN_PORT=$((P + ${#L[@]} * 4))
    write_conf >"$W/krelay.ini"
    "$KR_KRELAY" -c "$W/krelay.ini" >>"$W/krelay.out.log" 2>&1 &
    KR_KRELAY_PID=$!
    KR_PIDS+=("$KR_KRELAY_PID")
    if kr_wait_port $((P + 15)) 30 "$KR_KRELAY_PID" &&
       kr_wait_port "$ADMIN_PORT" 30 "$KR_KRELAY_PID"; then
        break
    fi
    kill "$KR_KRELAY_PID" 2>/dev/null
    wait "$KR_KRELAY_PID" 2>/dev/null
    KR_KRELAY_PID=
done
[ -n "$KR_KRELAY_PID" ] || kr_fail "krelay did not start: $(cat "$W/krelay.out.log")"

# ---- HAProxy on 127.0.0.1, each port forwarded to krelay's on
# 127.0.0.2 with a header; its log: client and outgoing address per
# session (at its end)
{
    printf 'global\n    maxconn 200\n    nbthread 1\n'
    printf '    log stdout format raw local0\n'
    printf 'defaults\n    mode tcp\n    log global\n'
    printf '    log-format "hap %%ci:%%cp %%bi:%%bp %%ft %%si:%%sp"\n'
    printf '    timeout connect 5s\n'
    printf '    timeout client 60s\n    timeout server 60s\n'
    for i in 0 1; do
        for n in 0 1 2 3; do
            printf 'listen %s-%d\n    bind 127.0.0.1:%d\n' "${L[$i]}" "$n" \
                $((P + 4 * i + n))
            printf '    server s 127.0.0.2:%d %s\n' $((P + 4 * i + n)) \
                "$([ "$i" = 0 ] && echo send-proxy || echo send-proxy-v2)"
        done
    done
} >"$W/haproxy.cfg"
# listening on 127.0.0.1:$1 itself (krelay has the port on 127.0.0.2)
hap_listening() {
    local hex
    hex=$(printf '0100007F:%04X' "$1")
    awk -v a="$hex" '$2 == a && $4 == "0A" { f = 1 } END { exit !f }' \
        /proc/net/tcp && kill -0 "$HAPROXY_PID" 2>/dev/null
}
haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.log" 2>&1 &
HAPROXY_PID=$!
KR_PIDS+=("$HAPROXY_PID")
for port in $(seq "$P" $((P + 7))); do
    kr_wait_for 30 hap_listening "$port" ||
        kr_fail "HAProxy did not start: $(cat "$W/haproxy.log")"
done
kr_log "krelay v1=$P v2=$((P + 4)) tls=$((P + 8)) ut=$((P + 12)) on 127.0.0.2, HAProxy in front on 127.0.0.1"

# 1. kcat through HAProxy: produce and consume, via v1 and via v2
for i in 0 1; do
    KC=(kcat -b "127.0.0.1:$((P + 4 * i))" -X socket.timeout.ms=10000)
    kr_payloads "$W/in-$i.txt" 20 "pp$i"
    kr_run 60 "${KC[@]}" -P -t pp -p "$i" <"$W/in-$i.txt" \
        2>"$W/kcat-P$i.log" || kr_fail "kcat -P through ${L[$i]} failed"
    kr_run 60 "${KC[@]}" -C -t pp -p "$i" -o beginning -e -q -f '%s\n' \
        >"$W/out-$i.txt" 2>"$W/kcat-C$i.log" ||
        kr_fail "kcat -C through ${L[$i]} failed"
    cmp -s "$W/in-$i.txt" "$W/out-$i.txt" ||
        kr_fail "${L[$i]}: consumed messages differ"
done
kr_log "kcat: 20 messages each through HAProxy's send-proxy and send-proxy-v2, back identical"

# 2. scripted senders: a v1 and a v2 header claiming 203.0.113.7:4242, a
# v2 one then TLS, 198.51.100.9 (not in the deny rule's network), an
# untrusted peer, a malformed header
cat >"$W/sender.py" <<'PYEOF'
import json, socket, ssl, struct, subprocess, sys, urllib.request
sys.path.insert(0, sys.argv[1])
from krwire import exchange, recv_exact
codec, port0, ca, admin = sys.argv[2], int(sys.argv[3]), sys.argv[4], \
    int(sys.argv[5])
SIG = b"\r\n\r\n\x00\r\nQUIT\n"

def v2(src, sport, dst, dport):
    a = socket.inet_aton(src) + socket.inet_aton(dst)
    return SIG + b"\x21\x11" + struct.pack(">H", 12) + a + \
        struct.pack(">HH", sport, dport)

def fc(cid):
    return json.dumps({"header": {"RequestApiKey": 10, "RequestApiVersion": 2,
                                  "CorrelationId": cid, "ClientId": "pp"},
                       "body": {"Key": "g", "KeyType": 0}})

def md(cid):
    return json.dumps({"header": {"RequestApiKey": 3, "RequestApiVersion": 1,
                                  "CorrelationId": cid, "ClientId": "pp"},
                       "body": {"Topics": None}})

def decode(frame, key, ver):
    out = subprocess.run([codec, "decode", "--hex", "--response",
                          "--api-key", str(key), "--api-version", str(ver)],
                         input=frame.hex().encode(), capture_output=True,
                         check=True).stdout
    return json.loads(out)["body"]

def listed(name, s):
    """Connection s as /connections lists it (krelay sees s's own port as
    the proxy's)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/connections" % admin,
                                timeout=10) as r:
        d = json.load(r)
    return sorted("%s %s %s:%s via %s" % (name, c["listener"],
                                         c["client_address"],
                                         c["client_port"],
                                         c.get("proxy_address"))
                  for c in d["connections"]
                  if c.get("proxy_port") == s.getsockname()[1])

def run(name, port, header, tls=False):
    s = socket.create_connection(("127.0.0.2", port), timeout=20)
    s.sendall(header)
    if tls:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.check_hostname = False
        s = ctx.wrap_socket(s, server_hostname="localhost")
    m = decode(exchange(s, codec, md(1)), 3, 1)
    f = decode(exchange(s, codec, fc(2)), 10, 2)
    print(name, len(m["Brokers"]), f["ErrorCode"], flush=True)
    for l in listed(name, s):
        print(l, flush=True)
    s.close()

def refused(name, host, port, data):
    s = socket.create_connection((host, port), timeout=20)
    try:
        s.sendall(data)
        got = s.recv(100)
    except (ConnectionResetError, BrokenPipeError):
        got = b""
    print(name, "closed" if got == b"" else "answered", flush=True)
    s.close()

run("v1", port0, b"PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n")
run("v2", port0 + 4, v2("203.0.113.7", 4242, "127.0.0.1", 9092))
run("tls", port0 + 8, v2("203.0.113.7", 4242, "127.0.0.1", 9092), tls=True)
run("other", port0, b"PROXY TCP4 198.51.100.9 127.0.0.1 5151 9092\r\n")
refused("untrusted", "127.0.0.1", port0 + 12,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n")
refused("malformed", "127.0.0.2", port0 + 4,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 4242 9092\r\n")
PYEOF
kr_run 60 "$KR_PY" "$W/sender.py" "$top_srcdir/tests/integration" \
    "$top_builddir/krelay-codec" "$P" "$C/ca.pem" "$ADMIN_PORT" \
    >"$W/sender.txt" 2>"$W/sender.log" ||
    kr_fail "the scripted sender failed: $(cat "$W/sender.log")"
# each sender's connection, while open, is in /connections as the
# client its header named, the proxy beside it
cat >"$W/sender.want" <<'EOF'
v1 3 30
v1 v1 203.0.113.7:4242 via 127.0.0.1
v2 3 30
v2 v2 203.0.113.7:4242 via 127.0.0.1
tls 3 30
tls tls 203.0.113.7:4242 via 127.0.0.1
other 3 0
other v1 198.51.100.9:5151 via 127.0.0.1
untrusted closed
malformed closed
EOF
cmp -s "$W/sender.txt" "$W/sender.want" ||
    kr_fail "scripted senders: $(diff "$W/sender.want" "$W/sender.txt")"
kr_log "scripted senders: 203.0.113.7 (v1, v2, v2 then TLS) denied FindCoordinator by client_address and listed so in /connections, 198.51.100.9 not denied; untrusted and malformed closed"

# 3. the log: one line each for the refusals
grep -q "listener ut/bootstrap (127.0.0.1:$((P + 12))): 127.0.0.1:[0-9]* is not in proxy_protocol_from: closed at accept" \
    "$W/krelay.log" || kr_fail "no log line for the untrusted peer"
grep -q "PROXY protocol header refused (proxy_protocol = v2): a v1 header where only v2 is accepted" \
    "$W/krelay.log" || kr_fail "no log line for the malformed header"
grep -q "\[c#[0-9.]* 203.0.113.7:4242 via 127.0.0.1:[0-9]* > .*\] FindCoordinator v2 CorrelationId 2 denied by \[rule doc-net\]" \
    "$W/krelay.log" || kr_fail "no deny line naming 203.0.113.7:4242 via the proxy"

# 4. the audit log: kcat's own ports (HAProxy's %cp) as client_port,
# HAProxy's outgoing ones (%bp) as proxy_port; the senders' claims
kill -TERM "$HAPROXY_PID" 2>/dev/null     # its log complete
kr_wait_for 20 kr_gone "$HAPROXY_PID" || kr_fail "HAProxy did not stop"
kr_wait_for 20 kr_audit_closed "$W/audit.log" ||
    kr_fail "audit: connections without their close line"
"$KR_PY" - "$W/audit.log" "$W/haproxy.log" <<'PYEOF' || kr_fail "audit lines wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
hap = set()
for l in open(sys.argv[2]):
    f = l.split()
    if len(f) >= 3 and f[0] == "hap":
        c, b = f[1].rsplit(":", 1), f[2].rsplit(":", 1)
        hap.add((c[0], int(c[1]), b[0], int(b[1])))
assert hap, "HAProxy logged no session"
mine = {r["conn_id"] for r in lines if r.get("client_id") == "pp"}
kc = [r for r in lines if r["listener"] in ("v1", "v2")
      and r["conn_id"] not in mine]
assert len(kc) > 10, len(kc)
conns = {}
for r in kc:
    t = (r["client_addr"], r["client_port"], r["proxy_addr"], r["proxy_port"])
    assert t in hap, "audit %s not in HAProxy's log %s" % (t, sorted(hap))
    assert r["client_port"] != r["proxy_port"], r
    conns[r["conn_id"]] = (r["listener"], t)
byl = {}
for l, t in conns.values():
    byl.setdefault(l, set()).add(t)
# kcat's bootstrap and broker connections through both kinds of header
assert len(byl.get("v1", ())) >= 2 and len(byl.get("v2", ())) >= 2, byl
req = [r for r in kc if r["type"] == "request"]
assert {r["api"] for r in req} >= {"Produce", "Fetch", "Metadata"}, \
    {r["api"] for r in req}
# the scripted senders' claims
pp = [r for r in lines if r.get("client_id") == "pp" and
      r["type"] == "request"]
got = sorted((r["listener"], r["api"], r["client_addr"], r["client_port"],
              r["proxy_addr"], r["actions"][0]) for r in pp)
want = sorted([(l, "Metadata", "203.0.113.7", 4242, "127.0.0.1", "forwarded")
               for l in ("v1", "v2", "tls")] +
              [(l, "FindCoordinator", "203.0.113.7", 4242, "127.0.0.1",
                "denied") for l in ("v1", "v2", "tls")] +
              [("v1", "Metadata", "198.51.100.9", 5151, "127.0.0.1",
                "forwarded"),
               ("v1", "FindCoordinator", "198.51.100.9", 5151, "127.0.0.1",
                "forwarded")])
assert got == want, "\n%s\n%s" % (got, want)
# neither the untrusted nor the malformed connection has a line
assert not [r for r in lines if r["listener"] == "ut"]
print("audit: %d kcat connections (%d lines) with kcat's own ports as "
      "HAProxy logged them; the senders' claims" % (len(conns), len(kc)))
PYEOF
kr_finish
