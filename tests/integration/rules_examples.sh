#!/bin/bash
# conf/examples/*.ini pass `krelay -t` (which prints the compiled rule
# table), and a config with rule errors is refused with FILE:LINE.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_setup 30
W=$KR_WORK
[ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"
n=0
for f in "$top_srcdir"/conf/examples/*.ini; do
    # -t opens the [log] and [audit] files: point them at the work dir
    sed "s|/var/log/krelay/|$W/|" "$f" >"$W/example.ini"
    "$KR_KRELAY" -t -c "$W/example.ini" >"$W/t.out" 2>&1 ||
        kr_fail "$(basename "$f"): $(cat "$W/t.out")"
    grep -q "configuration OK" "$W/t.out" || kr_fail "$f: no OK line"
    grep -q "^rules: [1-9]" "$W/t.out" || kr_fail "$f: no rule table"
    grep -q "^compiled table" "$W/t.out" || kr_fail "$f: no compiled table"
    n=$((n + 1))
done
[ "$n" -ge 4 ] || kr_fail "expected at least 4 examples, found $n"
grep -q "^  Produce v8-" <("$KR_KRELAY" -t -c \
    "$top_srcdir/conf/examples/clamp-old-clients.ini") ||
    kr_fail "clamp example: Produce v8+ not in the table"

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
kr_log "PASS: $n examples check, broken rules refused with FILE:LINE"
