#!/bin/bash
# conf/krelay.ini, conf/examples/*.ini and the README's ini blocks pass
# `krelay -t` as shipped (no path changed, but for TLS files: below), as
# this user and, when run as root, as an unprivileged one (nobody,
# through setpriv): no [log] or
# [audit] target needs a directory a new machine lacks.  -t prints the
# compiled rule table, and no warning but the one for a syslog target
# where there is no syslog socket; a config with rule errors is refused
# with FILE:LINE.  The audit file is audit.jsonl everywhere the docs name
# one, and the file targets given as commented alternatives sit in
# /var/log/krelay, the systemd unit's LogsDirectory.  What `krelay -T`
# prints for each of the shipped files passes `krelay -t -W` as well (the
# same syslog warning aside), and prints the same again.
# TLS files: a config with ssl = true names certificates and keys that
# `krelay -t` reads, and no machine has them as shipped; the shipped ones
# name them under /etc/krelay/tls/, which is made here (tests/tools/
# tls_certs.sh --examples: every file they name) and put in its place, the
# one change made to them.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_setup 30
W=$KR_WORK
[ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"

# Copies of krelay and each config (byte for byte, but for TLS files) in a
# directory anyone may enter (the build tree may sit in a home nobody
# cannot enter).
U=$(mktemp -d "${TMPDIR:-/tmp}/krelay-examples.XXXXXX") || exit 99
trap 'rc=$?; rm -rf "$U"; (exit "$rc"); kr_cleanup' EXIT
chmod 755 "$U" && install -m 755 "$KR_KRELAY" "$U/krelay" || exit 99
command -v openssl >/dev/null 2>&1 || kr_skip "openssl (TLS files)"
bash "$top_srcdir/tests/tools/tls_certs.sh" --examples "$U/tls" ||
    kr_fail "tls_certs.sh could not make the TLS files"
# shipped F DST: F copied to DST, /etc/krelay/tls/ in its TLS keys made
# $U/tls/
shipped() {
    sed "/^ssl_[a-z_]* = /s|/etc/krelay/tls/|$U/tls/|" "$1" >"$2" &&
        chmod 644 "$2"
}
AS_NOBODY=()
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null 2>&1 || kr_skip "setpriv (util-linux)"
    AS_NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
else
    kr_log "not root: the checks run as $(id -un) only"
fi
# no_warnings NAME OUT: krelay -t printed no warning (-t -W would pass),
# but the one for a syslog target where there is no syslog socket (this
# machine may have no syslog daemon; the configs log to syslog all the
# same, as a host with one wants)
no_warnings() {
    local other
    other=$(grep '^krelay: warning: ' "$2" | grep -v ': \[\(log\|audit\)\]: target = syslog, but there is no syslog socket at /dev/log ')
    [ -z "$other" ] || kr_fail "$1: krelay -t warns: $other"
    if [ -S /dev/log ] && grep -q '^krelay: warning: ' "$2"; then
        kr_fail "$1: a syslog warning with a syslog socket: $(cat "$2")"
    fi
}
n=0
for f in "$top_srcdir/conf/krelay.ini" "$top_srcdir"/conf/examples/*.ini; do
    b=$(basename "$f")
    shipped "$f" "$U/$b" || exit 99
    "$U/krelay" -t -c "$U/$b" >"$W/t.out" 2>&1 ||
        kr_fail "$b: krelay -t: $(cat "$W/t.out")"
    grep -q "configuration OK" "$W/t.out" || kr_fail "$b: no OK line"
    no_warnings "$b" "$W/t.out"
    if [ "$b" != krelay.ini ]; then
        grep -q "^rules: [1-9]" "$W/t.out" || kr_fail "$b: no rule table"
        grep -q "^compiled table" "$W/t.out" ||
            kr_fail "$b: no compiled table"
    fi
    if [ "${#AS_NOBODY[@]}" -gt 0 ]; then
        "${AS_NOBODY[@]}" "$U/krelay" -t -c "$U/$b" >"$W/u.out" 2>&1 ||
            kr_fail "$b: krelay -t as nobody: $(cat "$W/u.out")"
        cmp -s "$W/t.out" "$W/u.out" ||
            kr_fail "$b: krelay -t as nobody says otherwise: $(cat "$W/u.out")"
    fi
    # krelay -T's output (the effective configuration) passes -t -W too: no
    # key its section does not use is printed, so none loads back as a key
    # given but not used; and its own -T is the same
    "$U/krelay" -T -c "$U/$b" >"$U/$b.T" 2>"$W/T.err" ||
        kr_fail "$b: krelay -T: $(cat "$W/T.err")"
    "$U/krelay" -t -c "$U/$b.T" >"$W/T.out" 2>&1 ||
        kr_fail "$b: krelay -t on its -T: $(cat "$W/T.out")"
    no_warnings "$b's -T" "$W/T.out"
    if ! "$U/krelay" -t -W -c "$U/$b.T" >"$W/T.out" 2>&1 &&
        ! grep -q ': target = syslog, but there is no syslog socket ' "$W/T.out"; then
        kr_fail "$b: krelay -t -W on its -T: $(cat "$W/T.out")"
    fi
    "$U/krelay" -T -c "$U/$b.T" | tail -n +2 >"$W/T2.ini" &&
        tail -n +2 "$U/$b.T" | cmp -s - "$W/T2.ini" ||
        kr_fail "$b: -T of its -T differs: $(tail -n +2 "$U/$b.T" | diff - "$W/T2.ini" | head -5)"
    # file targets only as commented alternatives, in the unit's LogsDirectory
    grep -En '^[;#]? ?target = /' "$f" | grep -v ':[;#] \?target = /var/log/krelay/' &&
        kr_fail "$b: a file target outside /var/log/krelay, or not commented"
    n=$((n + 1))
done
[ "$n" -ge 6 ] || kr_fail "expected at least 6 configs, found $n"
grep -q "^ssl_certificate = $U/tls/krelay.pem" "$U/tls.ini" ||
    kr_fail "tls.ini: its TLS files were not put in place"
# the README's ```ini blocks: each with a [listener] is a whole config, the
# others (rules, [audit]) go after the first whole one; each passes too
"$KR_PY" - "$top_srcdir/README.md" "$U" <<'PYEOF' || kr_fail "README: no ini blocks"
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r'^```ini\n(.*?)^```', text, re.S | re.M)
whole = [b for b in blocks if re.search(r'^\[listener', b, re.M)]
parts = [b for b in blocks if b not in whole]
assert whole, 'no ini block with a [listener]'
for i, b in enumerate(whole):
    open('%s/readme-%d.ini' % (sys.argv[2], i), 'w').write(
        b + ''.join('\n' + p for p in parts) if i == 0 else b)
PYEOF
for f in "$U"/readme-*.ini; do
    shipped "$f" "$f.tmp" && mv "$f.tmp" "$f" || exit 99
    chmod 644 "$f"
    "${AS_NOBODY[@]}" "$U/krelay" -t -c "$f" >"$W/r.out" 2>&1 ||
        kr_fail "README's ini blocks ($(basename "$f")): $(cat "$W/r.out")"
    no_warnings "README's ini blocks ($(basename "$f"))" "$W/r.out"
    n=$((n + 1))
done
# contrib/kubernetes/krelay.yaml's ConfigMap (its krelay.ini: the lines
# indented under "krelay.ini: |") loads with no warning
awk '/^  krelay.ini: \|/ { on = 1; next }
     on && /^    / { print substr($0, 5); next }
     on && /^ *$/ { print ""; next }
     on { exit }' "$top_srcdir/contrib/kubernetes/krelay.yaml" >"$U/k8s.ini"
grep -q '^\[listener\]' "$U/k8s.ini" ||
    kr_fail "no krelay.ini in contrib/kubernetes/krelay.yaml's ConfigMap"
chmod 644 "$U/k8s.ini"
"$U/krelay" -t -c "$U/k8s.ini" >"$W/k.out" 2>&1 ||
    kr_fail "the Kubernetes example's krelay.ini: $(cat "$W/k.out")"
no_warnings "the Kubernetes example's krelay.ini" "$W/k.out"
n=$((n + 1))
grep -q "^  Produce v8-" <("$KR_KRELAY" -t -c \
    "$top_srcdir/conf/examples/clamp-old-clients.ini") ||
    kr_fail "clamp example: Produce v8+ not in the table"
# one name for the audit file
grep -rn 'audit\.log\b' "$top_srcdir/conf" "$top_srcdir/README.md" \
    "$top_srcdir/man" "$top_srcdir/contrib/systemd" &&
    kr_fail "audit.log named above: the audit file is audit.jsonl"
grep -q 'audit\.jsonl' "$top_srcdir/conf/examples/audit-only.ini" ||
    kr_fail "audit-only.ini names no audit.jsonl alternative"

cat >"$W/bad.ini" <<'EOR'
[upstream]
bootstrap_servers = 127.0.0.1:9092
[listener]
listen = 127.0.0.1:19092
broker_port_base = 19100
[rule a]
api = Produce, Fecth
deny = true
[rule b]
throttle_mode = enforce
EOR
if "$KR_KRELAY" -t -c "$W/bad.ini" >"$W/bad.out" 2>&1; then
    kr_fail "a broken config passed krelay -t"
fi
grep -q "^krelay: $W/bad.ini:7: 'api': bad value 'Produce, Fecth'" \
    "$W/bad.out" ||
    kr_fail "no FILE:LINE error for the bad api: $(cat "$W/bad.out")"
grep -q "^krelay: $W/bad.ini:10: \[rule b\]: throttle_mode without throttle_ms" \
    "$W/bad.out" || kr_fail "no FILE:LINE error for rule b: $(cat "$W/bad.out")"
kr_log "PASS: $n configs check as shipped${AS_NOBODY:+ (also as nobody)}, broken rules refused with FILE:LINE"
