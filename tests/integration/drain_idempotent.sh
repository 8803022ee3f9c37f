#!/bin/bash
# drain_idempotent.sh - SIGTERM during a produce, then krelay again on the
# same ports (issue 12): an idempotent producer (confluent-kafka,
# enable.idempotence, drain_idempotent.py) sends numbered messages through
# krelay without a pause; krelay is stopped with SIGTERM while the
# producer has requests in flight and started again at once, twice.  The
# mock answers each request 200 ms after it came (krmock -R 200), so the
# producer's connections have requests in flight at any moment.
#
# Checked:
#   - each SIGTERM drained: krelay's sessions closed in order after the
#     responses owed ("krelay drains: closed after the responses owed",
#     never "; then ..."), "drain: done" (not drain_timeout_ms), exit 0;
#     and at least one SIGTERM found requests in flight (the sessions'
#     debug lines "closing after N responses owed" add up to N > 0), so
#     the test cannot pass without a drain to do;
#   - the producer rode it out: no fatal error, a successful delivery
#     report for every message it produced, more acked after each restart
#     (it reconnected);
#   - the topic read straight from the mock: every acked message exactly
#     once, no number twice, each partition in order.  The mock appends
#     a non-transactional idempotent producer's retried batches without
#     deduplication, so a duplicate could only be a request that reached
#     the broker and whose response krelay did not deliver.
# A request frame krelay has forwarded in part when the drain starts is
# finished first: check_session's drain_finishes_partial_request.
#
# Nothing here depends on how many workers krelay runs.
. "$(dirname "$0")/lib.sh"
kr_setup 120
kr_need_py confluent_kafka

PEER=$top_srcdir/tests/integration/drain_idempotent.py
P=$KR_WORK/producer             # the producer's files (acked, stop, result)
KRELAY_LOG_LEVEL=debug          # the "closing after N responses owed" lines
KR_MOCK_ARGS="-R 200"
kr_start_mock idem:3
printf '[process]\ndrain_timeout_ms = 60000\n' >"$KR_WORK/extra.ini"
KR_EXTRA_CONF=$KR_WORK/extra.ini
kr_start_krelay
kr_is_direct && kr_skip "krelay (KRELAY_TEST_DIRECT=1: nothing to restart)"
KRELAY_PIDS=("$KR_KRELAY_PID")
OWED=0

acked() {
    cat "$P/acked" 2>/dev/null || echo 0
}

acked_at_least() {
    [ "$(acked)" -ge "$1" ]
}

# more_acked N: wait until N more messages than now are acked.
more_acked() {
    local want=$(( $(acked) + $1 ))
    kr_wait_for 120 acked_at_least "$want" ||
        kr_fail "acked stuck at $(acked) (want $want)"
}

# restart N: the N-th SIGTERM to krelay; check its drain, start it again
# on the same ports.  Adds the responses owed at SIGTERM to OWED.
restart() {
    local from rc seg owed
    from=$(wc -l <"$KR_WORK/krelay.log")
    kill -TERM "$KR_KRELAY_PID"
    kr_wait_for 90 kr_gone "$KR_KRELAY_PID" ||
        kr_fail "krelay still runs 90 s after SIGTERM"
    wait "$KR_KRELAY_PID"
    rc=$?
    [ "$rc" -eq 0 ] || kr_fail "krelay exited $rc after a drain"
    seg=$KR_WORK/drain-$1.log
    tail -n +"$((from + 1))" "$KR_WORK/krelay.log" >"$seg"
    grep -q 'SIGTERM: draining' "$seg" || kr_fail "no drain line after SIGTERM"
    grep -q 'drain: done in' "$seg" ||
        kr_fail "drain $1 did not end with every connection closed:" \
            "$(grep 'drain:' "$seg")"
    if grep 'krelay drains: closed after the responses owed; then' "$seg" >&2; then
        kr_fail "drain $1: a connection did not end in order"
    fi
    owed=$(sed -n 's/.* closing after \([0-9]*\) responses owed.*/\1/p' "$seg" |
           awk '{ s += $1 } END { print s + 0 }')
    OWED=$((OWED + owed))
    kr_log "drain $1: $owed responses owed at SIGTERM," \
        "$(grep -c 'krelay drains: closed after the responses owed' "$seg")" \
        "connections closed in order, $(acked) acked so far"
    "$KR_KRELAY" -c "$KR_WORK/krelay.ini" >>"$KR_WORK/krelay.out.log" 2>&1 &
    KR_KRELAY_PID=$!
    KR_PIDS+=("$KR_KRELAY_PID")
    KRELAY_PIDS+=("$KR_KRELAY_PID")
    if ! kr_wait_port "$KR_PORT" 30 "$KR_KRELAY_PID" ||
       ! kr_wait_port $((KR_BROKER_BASE + KR_NODEIDS)) 30 "$KR_KRELAY_PID"; then
        kr_fail "krelay did not start again on the same ports"
    fi
}

mkdir -p "$P"
kr_run 300 "$KR_PY" "$PEER" produce "$KR_BOOTSTRAP" idem "$P" \
    >"$KR_WORK/producer.log" 2>&1 &
PPID_=$!
KR_PIDS+=("$PPID_")
more_acked 150
restart 1
more_acked 150
restart 2
more_acked 100
touch "$P/stop"
wait "$PPID_" || kr_fail "producer: $(tail -n 3 "$KR_WORK/producer.log")"
kr_log "producer: $(tail -n 1 "$KR_WORK/producer.log")"
[ "$OWED" -gt 0 ] ||
    kr_fail "no SIGTERM found a request in flight: the drains proved nothing"
kr_check_alive

# Every mock connection so far came from one of the krelay processes (the
# check below reads the mock directly).
pats=(-e ' pid=-1 ')
for pid in "${KRELAY_PIDS[@]}"; do
    pats+=(-e " pid=$pid ")
done
bad=$(grep -v "${pats[@]}" "$KR_ACCEPT_LOG" || true)
[ -z "$bad" ] || kr_fail "mock connections not from krelay: $bad"

out=$(kr_run 200 "$KR_PY" "$PEER" verify "$KR_MOCK_BOOTSTRAP" idem "$P" \
      2>>"$KR_WORK/verify.log") || kr_fail "verify: $out"
kr_log "read from the mock: $out"

kr_stop "$KR_KRELAY_PID" krelay "$KR_WORK/krelay.out.log" "$KR_WORK/krelay.log"
kr_stop "$KR_MOCK_PID" krmock "$KR_WORK/mock.log"
kr_log PASS
