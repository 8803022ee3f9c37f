#!/bin/bash
# kafkajs 2.2.4 (npm, from $KRELAY_DEPS_DIR) through krelay: metadata,
# produce, consume in a group, compare.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_node kafkajs
kr_setup 150
kr_start_mock kjs:3
kr_start_krelay

W=$KR_WORK
kr_run 100 node "$top_srcdir/tests/integration/kafkajs_client.js" \
    "$KR_BOOTSTRAP" kjs 400 "$W/brokers.txt" >"$W/kafkajs.log" 2>&1 ||
    kr_fail "kafkajs: $(tail -n 8 "$W/kafkajs.log")"
kr_log "$(tail -n 1 "$W/kafkajs.log")"
kr_check_brokers "$W/brokers.txt"

kr_finish
