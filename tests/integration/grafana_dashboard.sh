#!/bin/bash
# contrib/grafana/krelay-dashboard.json: valid JSON, and every metric its
# expressions name is one krelay exports, read from a live /metrics
# scrape (checked by prom_check.py: HELP/TYPE lines name every family,
# also those with no sample yet).  krelay runs with an upstream nobody
# listens on: no broker is needed to export every family.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_setup 60
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no admin endpoint"
W=$KR_WORK
ADMIN_PORT=$(kr_free_ports 1) || exit 99
KR_UPSTREAM_BOOTSTRAP=127.0.0.1:$(kr_free_ports 1) || exit 99
printf '\n[admin]\nlisten = 127.0.0.1:%s\n' "$ADMIN_PORT" >"$W/admin.ini"
KR_EXTRA_CONF=$W/admin.ini
kr_start_krelay
kr_wait_port "$ADMIN_PORT" 30 "$KR_KRELAY_PID" ||
    kr_fail "the admin endpoint does not listen on 127.0.0.1:$ADMIN_PORT"
"$KR_PY" - "http://127.0.0.1:$ADMIN_PORT/metrics" "$W/metrics.txt" <<'PY' ||
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    open(sys.argv[2], 'wb').write(r.read())
PY
    kr_fail "cannot scrape /metrics"
"$KR_PY" "$top_srcdir/tests/integration/prom_check.py" --names \
    "$W/metrics.txt" >"$W/names.txt" 2>"$W/prom_check.log" ||
    kr_fail "exposition format: $(cat "$W/prom_check.log")"
"$KR_PY" "$top_srcdir/tests/integration/grafana_names.py" \
    "$top_srcdir/contrib/grafana/krelay-dashboard.json" "$W/names.txt" \
    >"$W/grafana.out" 2>&1 || kr_fail "$(cat "$W/grafana.out")"
kr_log "dashboard: $(cat "$W/grafana.out")"
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kr_log "PASS"
