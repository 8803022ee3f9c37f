#!/bin/bash
# A modern upstream and client: librdkafka 2.12 (built by `npm install
# node-rdkafka@3.6.1`, see contrib/install-deps.sh) on both sides.
#   1. krmock is compiled against that librdkafka into the build tree;
#   2. node-rdkafka produces and consumes through krelay (Metadata v12,
#      Produce v10, Fetch v16, flexible group APIs);
#   3. a raw client sends Produce v10 / Fetch v16 to a non-leader: the
#      KIP-951 NodeEndpoints must name krelay's ports;
#   4. the mock moves every partition leader (SIGUSR1); the raw client
#      asks the old leader and must be pointed at the new one, rewritten;
#      node-rdkafka keeps producing and consuming.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_node node-rdkafka
PREFIX=$KRELAY_DEPS_DIR/node_modules/node-rdkafka/build/deps
[ -f "$PREFIX/pkgconfig/rdkafka.pc" ] && [ -f "$PREFIX/include/librdkafka/rdkafka_mock.h" ] ||
    kr_skip "librdkafka 2.12 prefix $PREFIX (contrib/install-deps.sh)"
kr_need_cmd pkg-config "${KRELAY_CC:-cc}"
kr_setup 200

# 1. krmock against librdkafka 2.12, rebuilt when the source is newer.
MOCK212=$top_builddir/tests/mock/krmock-rdkafka212
SRC=$top_srcdir/tests/mock/krmock.c
# krmock starts its cluster with src/kr_mock.c (shared with
# krelay-demo-cluster); config.h is the build's; -K takes Kafka 4's
# minima from krelay's schema tables (kr_api_min_kafka4), compiled here
# too (the build's libkrcodec.a may be a sanitizer build).
SRC_MOCK=$top_srcdir/src/kr_mock.c
SRC_SCHEMA=("$top_srcdir/src/kr_schema.c" "$top_srcdir/src/kr_schema_gen.c")
if [ ! -x "$MOCK212" ] || [ "$SRC" -nt "$MOCK212" ] ||
   [ "$SRC_MOCK" -nt "$MOCK212" ] ||
   [ "$top_srcdir/include/kr_mock.h" -nt "$MOCK212" ] ||
   [ "${SRC_SCHEMA[0]}" -nt "$MOCK212" ] ||
   [ "${SRC_SCHEMA[1]}" -nt "$MOCK212" ]; then
    mkdir -p "$top_builddir/tests/mock"
    # -isystem: librdkafka's own headers are not -Wextra clean.
    PKG_CONFIG_PATH=$PREFIX/pkgconfig
    export PKG_CONFIG_PATH
    CFLAGS212=$(pkg-config --cflags rdkafka | sed 's/-I/-isystem /g')
    LIBS212=$(pkg-config --libs rdkafka)
    # shellcheck disable=SC2086
    "${KRELAY_CC:-cc}" -std=gnu11 -O1 -g -Wall -Wextra $CFLAGS212 \
        -I"$top_srcdir/include" -I"$top_builddir" \
        -o "$MOCK212.tmp" "$SRC" "$SRC_MOCK" "${SRC_SCHEMA[@]}" \
        $LIBS212 -Wl,-rpath,"$PREFIX" \
        -ldl -lpthread -rdynamic >"$KR_WORK/build212.log" 2>&1 ||
        kr_fail "cannot build krmock against $PREFIX: $(tail -n 5 "$KR_WORK/build212.log")"
    mv -f "$MOCK212.tmp" "$MOCK212"
    kr_log "built $MOCK212"
fi
"$MOCK212" -h >/dev/null || kr_fail "$MOCK212 does not run"

kr_start_mock "$MOCK212" modern:3
grep -q "librdkafka 2\.1[2-9]\|librdkafka [3-9]\." "$KR_WORK/mock.log" ||
    kr_fail "the mock is not librdkafka 2.12+: $(cat "$KR_WORK/mock.log")"
kr_start_krelay
W=$KR_WORK
MOCKB=$KR_MOCK_BASE
kr_is_direct && MOCKB=0

# 2. node-rdkafka through krelay.
kr_run 90 node "$top_srcdir/tests/integration/node_rdkafka_client.js" \
    "$KR_BOOTSTRAP" modern 300 nrk-group-1 "$W/brokers.txt" \
    >"$W/nrk1.log" 2>&1 || kr_fail "node-rdkafka (1): $(tail -n 8 "$W/nrk1.log")"
kr_log "$(tail -n 1 "$W/nrk1.log")"
kr_check_brokers "$W/brokers.txt"

# 3. KIP-951 NodeEndpoints from a non-leader, rewritten.
kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/kip951_client.py" \
    --bootstrap "$KR_BOOTSTRAP" --base "$KR_BROKER_BASE" \
    --mock-base "$MOCKB" --topic modern >"$W/kip951-1.log" 2>&1 ||
    kr_fail "KIP-951 check before the move: $(grep -v '^ok' "$W/kip951-1.log")"
LEADER=$(sed -n 's/^leader of modern \[0\]: //p' "$W/kip951-1.log")
[ -n "$LEADER" ] || kr_fail "no leader in kip951-1.log"
kr_log "KIP-951: NodeEndpoints from a non-leader are krelay's (leader $LEADER)"

# 4. Move the leaders; the old leader must point at the new one.
kill -USR1 "$KR_MOCK_PID"
kr_wait_for 60 grep -q "leaders moved 1" "$W/mock.out" ||
    kr_fail "the mock did not move leaders"
NEW=$((LEADER % KR_NODEIDS + 1))
kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/kip951_client.py" \
    --bootstrap "$KR_BOOTSTRAP" --base "$KR_BROKER_BASE" \
    --mock-base "$MOCKB" --topic modern --to "$LEADER" \
    --expect-leader "$NEW" >"$W/kip951-2.log" 2>&1 ||
    kr_fail "KIP-951 check after the move: $(grep -v '^ok' "$W/kip951-2.log")"
kr_log "KIP-951: after a leader move $LEADER -> $NEW, the old leader points at krelay's port $((KR_BROKER_BASE + NEW))"

kr_run 90 node "$top_srcdir/tests/integration/node_rdkafka_client.js" \
    "$KR_BOOTSTRAP" modern 200 nrk-group-2 "$W/brokers2.txt" \
    >"$W/nrk2.log" 2>&1 || kr_fail "node-rdkafka (2): $(tail -n 8 "$W/nrk2.log")"
kr_log "$(tail -n 1 "$W/nrk2.log") (after the leader move)"
kr_check_brokers "$W/brokers2.txt"

kr_finish
