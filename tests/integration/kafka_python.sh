#!/bin/bash
# kafka-python 2.0.2 (Debian's /usr/bin/python3) through krelay: produce,
# consume in a group, compare; metadata shows only krelay's addresses.
# Then an old client (api_version 0.10: Metadata v1, Fetch v2) consumes.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_py kafka
kr_setup 150
kr_start_mock kpy:3
kr_start_krelay

W=$KR_WORK
CLIENT=$top_srcdir/tests/integration/kafka_python_client.py

kr_run 90 "$KR_PY" "$CLIENT" "$KR_BOOTSTRAP" kpy 300 "$W/brokers.txt" auto \
    >"$W/kpy-auto.log" 2>&1 ||
    kr_fail "kafka-python (auto): $(tail -n 5 "$W/kpy-auto.log")"
kr_log "$(tail -n 1 "$W/kpy-auto.log")"
kr_check_brokers "$W/brokers.txt"

kr_run 90 "$KR_PY" "$CLIENT" "$KR_BOOTSTRAP" kpy 0 "$W/brokers-010.txt" 0.10 \
    300 >"$W/kpy-010.log" 2>&1 ||
    kr_fail "kafka-python (0.10): $(tail -n 5 "$W/kpy-010.log")"
grep -q "consumed 300," "$W/kpy-010.log" ||
    kr_fail "kafka-python (0.10) did not read the 300 messages: $(tail -n 1 "$W/kpy-010.log")"
kr_log "$(tail -n 1 "$W/kpy-010.log")"
kr_check_brokers "$W/brokers-010.txt"

kr_finish
