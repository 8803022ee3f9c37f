#!/bin/bash
# daemon.sh - krelay as an operator runs it (the operations issue):
#   1. SIGTERM drains: a client has 5 requests in flight at a slow scripted
#      broker (daemon_peers.py slow-broker, 0.5 s per request) when
#      SIGTERM arrives: all 5 are answered, a connection made during the
#      drain is closed at once (EOF, no byte), krelay exits 0 well within
#      drain_timeout_ms, one log line per phase.  A second case: SIGTERM
#      twice stops at once (the requests in flight are not waited for).
. "$(dirname "$0")/lib.sh"
kr_setup 60

PEERS=$top_srcdir/tests/integration/daemon_peers.py

# start_slow DELAY: the scripted broker; sets SLOW_PORT
start_slow() {
    rm -f "$KR_WORK/slow.port"
    "$KR_PY" "$PEERS" slow-broker "$KR_WORK/slow.port" "$1" \
        >>"$KR_WORK/slow.log" 2>&1 &
    KR_PIDS+=($!)
    kr_wait_for 20 test -s "$KR_WORK/slow.port" || kr_fail "slow broker did not start"
    SLOW_PORT=$(cat "$KR_WORK/slow.port")
}

# conf FILE EXTRA...: one bootstrap listener in front of the slow broker
conf() {
    local f=$1
    shift
    PORT=$(kr_free_ports 2) || exit 99
    {
        printf '[upstream]\nbootstrap_servers = 127.0.0.1:%s\n\n' "$SLOW_PORT"
        printf '[listener]\nlisten = 127.0.0.1:%s\nadvertised_host = 127.0.0.1\n' "$PORT"
        printf 'broker_port_base = %s\nnode_id_min = 1\nnode_id_max = 1\n\n' "$((PORT))"
        printf '[log]\nlevel = info\ntarget = %s\n\n' "$KR_WORK/krelay.log"
        printf '%s\n' "$@"
    } >"$f"
}

# ---- 1. SIGTERM drains ------------------------------------------------------
start_slow 0.5
conf "$KR_WORK/drain.ini" '[process]' 'drain_timeout_ms = 10000'
: >"$KR_WORK/krelay.log"
"$KR_KRELAY" -c "$KR_WORK/drain.ini" >>"$KR_WORK/krelay.out.log" 2>&1 &
KPID=$!
KR_PIDS+=("$KPID")
kr_wait_port "$PORT" 20 "$KPID" || kr_fail "krelay did not start"
rm -f "$KR_WORK/sent"
"$KR_PY" "$PEERS" pipeline "127.0.0.1:$PORT" 5 "$KR_WORK/sent" \
    >"$KR_WORK/pipeline.out" 2>&1 &
CPID=$!
kr_wait_for 10 test -e "$KR_WORK/sent" || kr_fail "client did not send"
# krelay forwarded them (one debug-free sign: the upstream connection)
sleep 0.3
T0=$(date +%s%N)
kill -TERM "$KPID"
kr_wait_for 5 grep -q 'SIGTERM: draining' "$KR_WORK/krelay.log" ||
    kr_fail "no drain line after SIGTERM"
probe=$("$KR_PY" "$PEERS" probe "127.0.0.1:$PORT")
[ "$probe" = eof ] || kr_fail "a connection during the drain: $probe, want eof"
kr_wait_for 15 kr_gone "$KPID" || kr_fail "krelay still runs 15 s after SIGTERM"
wait "$KPID"
rc=$?
T1=$(date +%s%N)
[ "$rc" -eq 0 ] || kr_fail "krelay exited $rc after a drain"
wait "$CPID"
got=$(cat "$KR_WORK/pipeline.out")
[ "$got" = "answered 5 ids 1,2,3,4,5" ] ||
    kr_fail "client in flight at SIGTERM: '$got', want all 5 answered"
ms=$(( (T1 - T0) / 1000000 ))
[ "$ms" -lt 10000 ] || kr_fail "drain took $ms ms, over drain_timeout_ms"
for phase in 'SIGTERM: draining: new connections close at accept; 1 open connection:' \
             'drain: done in' 'totals: ' 'krelay stopped'; do
    n=$(grep -c -F "$phase" "$KR_WORK/krelay.log")
    [ "$n" -eq 1 ] || kr_fail "log line '$phase': $n, want 1"
done
grep -q 'krelay drains: closed after the responses owed' "$KR_WORK/krelay.log" ||
    kr_fail "the session's drain close is not logged"
kr_log "drain: 5 of 5 requests in flight answered, new connection closed at accept, exit 0 after $ms ms"

# ---- 1b. SIGTERM twice: at once ---------------------------------------------
conf "$KR_WORK/drain2.ini" '[process]' 'drain_timeout_ms = 20000'
: >"$KR_WORK/krelay.log"
"$KR_KRELAY" -c "$KR_WORK/drain2.ini" >>"$KR_WORK/krelay.out.log" 2>&1 &
KPID=$!
KR_PIDS+=("$KPID")
kr_wait_port "$PORT" 20 "$KPID" || kr_fail "krelay did not start"
rm -f "$KR_WORK/sent"
"$KR_PY" "$PEERS" pipeline "127.0.0.1:$PORT" 5 "$KR_WORK/sent" \
    >"$KR_WORK/pipeline2.out" 2>&1 &
CPID=$!
kr_wait_for 10 test -e "$KR_WORK/sent" || kr_fail "client did not send"
sleep 0.3
kill -TERM "$KPID"
kr_wait_for 5 grep -q 'SIGTERM: draining' "$KR_WORK/krelay.log" ||
    kr_fail "no drain line after SIGTERM"
kill -TERM "$KPID"
kr_wait_for 3 kr_gone "$KPID" || kr_fail "a second SIGTERM did not stop krelay at once"
wait "$KPID" || kr_fail "krelay exited $? after a second SIGTERM"
wait "$CPID"
grep -q 'SIGTERM again while draining: stopping at once' "$KR_WORK/krelay.log" ||
    kr_fail "no line for the second SIGTERM"
got=$(cat "$KR_WORK/pipeline2.out")
case $got in
    "answered 5 "*) kr_fail "second SIGTERM waited for every response: $got" ;;
esac
kr_log "second SIGTERM: stopped at once ($got)"

kr_log PASS
