#!/bin/bash
# daemon.sh - krelay as an operator runs it (the operations issue):
#   1. SIGTERM drains: a client has 5 requests in flight at a slow scripted
#      broker (daemon_peers.py slow-broker, 0.5 s per request) when
#      SIGTERM arrives: all 5 are answered, a connection made during the
#      drain is closed at once (EOF, no byte), krelay exits 0 well within
#      drain_timeout_ms, one log line per phase, the drain's end counting
#      the connections closed at accept.  A second case: SIGTERM twice
#      stops at once (the requests in flight are not waited for); a
#      third: SIGINT alone stops at once, without a drain.
#   2. -d -p: the command returns 0 once krelay serves; the pid file holds
#      the daemon's pid, locked (flock); the daemon leads its own session
#      with no terminal; a second krelay with the pid file refuses; SIGTERM
#      ends it and removes the file.  -d with the log on stderr refuses.
#   3. [process] user = nobody (run as root, as CI is; skipped otherwise):
#      after start /proc/PID/status shows uid, gid and groups nobody's; a
#      reload of a config only root may read is refused, saying why.
#   4. sd_notify: a scripted NOTIFY_SOCKET (daemon_peers.py notify, in the
#      abstract namespace) receives READY=1 after start, RELOADING=1 then
#      READY=1 around a SIGHUP, STOPPING=1 at SIGTERM, in that order;
#      through libsystemd's sd_notify when configure found it, else
#      krelay's own sender (./configure --without-libsystemd); the log
#      line says which.
#   5. SIGUSR1 (same krelay): the log and audit files, moved away, are
#      opened again under their names; the moved ones get nothing more.
#   6. krelay -T prints the effective configuration; that output, given
#      to -T again, prints the same (a value starting with ';' included).
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

# busy_krelay N MS: a krelay (drainN.ini, drain_timeout_ms MS) with 5
# requests in flight from the pipeline client (pipelineN.out), which
# krelay forwarded (one debug-free sign: the upstream connection, after
# 0.3 s); KPID, CPID
busy_krelay() {
    conf "$KR_WORK/drain$1.ini" '[process]' "drain_timeout_ms = $2"
    : >"$KR_WORK/krelay.log"
    "$KR_KRELAY" -c "$KR_WORK/drain$1.ini" >>"$KR_WORK/krelay.out.log" 2>&1 &
    KPID=$!
    KR_PIDS+=("$KPID")
    kr_wait_port "$PORT" 20 "$KPID" || kr_fail "krelay did not start"
    rm -f "$KR_WORK/sent"
    "$KR_PY" "$PEERS" pipeline "127.0.0.1:$PORT" 5 "$KR_WORK/sent" \
        >"$KR_WORK/pipeline$1.out" 2>&1 &
    CPID=$!
    kr_wait_for 10 test -e "$KR_WORK/sent" || kr_fail "client did not send"
    sleep 0.3
}

# ---- 1. SIGTERM drains ------------------------------------------------------
start_slow 0.5
busy_krelay "" 10000
T0=$(date +%s%N)
kill -TERM "$KPID"
kr_wait_for 5 grep -q 'SIGTERM: draining' "$KR_WORK/krelay.log" ||
    kr_fail "no drain line after SIGTERM"
probe=$("$KR_PY" "$PEERS" probe "127.0.0.1:$PORT")
[ "$probe" = eof ] || kr_fail "a connection during the drain: $probe, want eof"
# one that sends at once (as Kafka clients do) sees FIN too, not RST
probe=$("$KR_PY" "$PEERS" probe-send "127.0.0.1:$PORT")
[ "$probe" = eof ] ||
    kr_fail "a connection sending during the drain: $probe, want eof (FIN)"
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
# both probes counted (conn_drain_closed), said when the drain ends
grep -q 'drain: done in [0-9]* ms: .*; 2 new connections closed at accept$' \
    "$KR_WORK/krelay.log" ||
    kr_fail "the drain's end does not count the 2 probes: $(grep 'drain: ' "$KR_WORK/krelay.log")"
kr_log "drain: 5 of 5 requests in flight answered, new connection closed at accept, exit 0 after $ms ms"

# ---- 1b. SIGTERM twice: at once ---------------------------------------------
busy_krelay 2 20000
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

# ---- 1c. SIGINT: at once, no drain -------------------------------------------
busy_krelay 3 20000
kill -INT "$KPID"
kr_wait_for 3 kr_gone "$KPID" || kr_fail "SIGINT did not stop krelay at once"
wait "$KPID" || kr_fail "krelay exited $? after SIGINT"
wait "$CPID"
grep -q 'notice: SIGINT: stopping at once' "$KR_WORK/krelay.log" ||
    kr_fail "no line for SIGINT: $(tail -n 3 "$KR_WORK/krelay.log")"
if grep -q 'SIGTERM: draining\|drain: ' "$KR_WORK/krelay.log"; then
    kr_fail "SIGINT drained"
fi
got=$(cat "$KR_WORK/pipeline3.out")
case $got in
    "answered 5 "*) kr_fail "SIGINT waited for every response: $got" ;;
esac
kr_log "SIGINT: stopped at once, no drain ($got)"

# ---- 2. -d and -p ------------------------------------------------------------
W=$(cd "$KR_WORK" && pwd)      # -d runs in /: absolute paths
conf "$W/d.ini"
sed -i "s|^target = .*|target = $W/krelay.log|" "$W/d.ini"
: >"$W/krelay.log"
"$KR_KRELAY" -d -p "$W/krelay.pid" -c "$W/d.ini" >"$W/d.out" 2>&1 ||
    kr_fail "krelay -d exited $?: $(cat "$W/d.out")"
[ ! -s "$W/d.out" ] || kr_fail "krelay -d wrote on its terminal: $(cat "$W/d.out")"
DPID=$(cat "$W/krelay.pid")
KR_PIDS+=("$DPID")
kr_listening "$PORT" || kr_fail "krelay -d returned before listening"
[ "$(cat "/proc/$DPID/comm")" = krelay ] || kr_fail "pid file: $DPID is not krelay"
read -r -a st <"/proc/$DPID/stat"
[ "${st[5]}" = "$DPID" ] || kr_fail "the daemon is not a session leader (sid ${st[5]})"
[ "${st[6]}" = 0 ] || kr_fail "the daemon has a terminal (tty_nr ${st[6]})"
[ "$(readlink "/proc/$DPID/fd/2")" = /dev/null ] || kr_fail "stderr is $(readlink "/proc/$DPID/fd/2")"
flock -n "$W/krelay.pid" true && kr_fail "the pid file is not locked"
"$KR_KRELAY" -d -p "$W/krelay.pid" -c "$W/d.ini" >"$W/d2.out" 2>&1 &&
    kr_fail "a second krelay with the same pid file started"
grep -q "krelay: -p $W/krelay.pid: another krelay (pid $DPID) holds this pid file: not starting" "$W/d2.out" ||
    kr_fail "second krelay: $(cat "$W/d2.out")"
grep -q "started (1 listener group, [0-9][0-9]* workers*), in the background, pid file $W/krelay.pid" "$W/krelay.log" ||
    kr_fail "no start line naming -d and the pid file"
kill -TERM "$DPID"
kr_wait_for 10 kr_gone "$DPID" || kr_fail "krelay -d did not stop on SIGTERM"
[ ! -e "$W/krelay.pid" ] || kr_fail "the pid file is left after exit"
conf "$W/d3.ini"
sed -i "s|^target = .*|target = stderr|" "$W/d3.ini"
"$KR_KRELAY" -d -c "$W/d3.ini" >"$W/d3.out" 2>&1 && kr_fail "-d with the log on stderr started"
grep -q 'krelay: -d: the log goes to stderr' "$W/d3.out" || kr_fail "-d, log on stderr: $(cat "$W/d3.out")"
kr_log "-d -p: ready before return, pid file locked and removed, second one refused"

# ---- 3. [process] user --------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
    NUID=$(id -u nobody) NGID=$(id -g nobody)
    conf "$W/u.ini" '[process]' 'user = nobody'
    sed -i "s|^target = .*|target = $W/krelay.log|" "$W/u.ini"
    chmod 600 "$W/u.ini"
    : >"$W/krelay.log"
    "$KR_KRELAY" -c "$W/u.ini" >>"$W/krelay.out.log" 2>&1 &
    KPID=$!
    KR_PIDS+=("$KPID")
    kr_wait_for 20 grep -q 'krelay .* started' "$W/krelay.log" ||
        kr_fail "krelay with user = nobody did not start: $(tail -3 "$W/krelay.log")"
    kr_listening "$PORT" || kr_fail "not listening after the drop"
    uids=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$KPID/status")
    gids=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$KPID/status")
    groups=$(awk '/^Groups:/ { $1 = ""; print }' "/proc/$KPID/status" | xargs)
    [ "$uids" = "$NUID $NUID $NUID $NUID" ] || kr_fail "Uid: $uids, want $NUID x4"
    [ "$gids" = "$NGID $NGID $NGID $NGID" ] || kr_fail "Gid: $gids, want $NGID x4"
    [ "$groups" = "$NGID" ] || kr_fail "Groups: '$groups', want $NGID"
    grep -q "running as user nobody (uid $NUID), group .* (gid $NGID)" "$W/krelay.log" ||
        kr_fail "no line saying the user"
    kill -HUP "$KPID"
    kr_wait_for 10 grep -q 'reload: krelay runs as uid .* every file a reload reads' "$W/krelay.log" ||
        kr_fail "a reload of a root-only file did not say why: $(tail -3 "$W/krelay.log")"
    kr_stop "$KPID" krelay "$W/krelay.log"
    kr_log "user = nobody: uid/gid/groups $NUID/$NGID/$groups after start; root-only reload explained"
else
    kr_log "not root: [process] user not tested"
fi

# ---- 4. sd_notify -------------------------------------------------------------
NSOCK="@krelay-test-$$-$RANDOM"
: >"$W/notify.txt"
"$KR_PY" "$PEERS" notify "$NSOCK" "$W/notify.txt" >>"$W/notify.log" 2>&1 &
KR_PIDS+=($!)
kr_wait_for 10 grep -q "@krelay-test-$$" /proc/net/unix || kr_fail "notify socket not bound"
conf "$W/n.ini" '[audit]' "target = $W/audit.log" '[rule all]' 'audit = true'
sed -i "0,/^target = .*/s|^target = .*|target = $W/krelay.log|" "$W/n.ini"
: >"$W/krelay.log"
NOTIFY_SOCKET=$NSOCK "$KR_KRELAY" -c "$W/n.ini" >>"$W/krelay.out.log" 2>&1 &
KPID=$!
KR_PIDS+=("$KPID")
kr_wait_for 20 grep -q '^READY=1' "$W/notify.txt" || kr_fail "no READY=1 after start"
kr_listening "$PORT" || kr_fail "READY=1 before the listener was bound"
kill -HUP "$KPID"
kr_wait_for 10 grep -q 'reloaded' "$W/krelay.log" || kr_fail "SIGHUP: no reload"
kr_wait_for 5 test "$(grep -c '^READY=1' "$W/notify.txt")" = 2 || kr_fail "no READY=1 after the reload"

# ---- 5. SIGUSR1 (same krelay) -----------------------------------------------
"$KR_PY" "$PEERS" pipeline "127.0.0.1:$PORT" 1 "$W/sent5" >"$W/p5.out" 2>&1 &
kr_wait_for 10 test -e "$W/sent5" || kr_fail "client did not send"
kr_wait_for 10 grep -q '"api_key":18\|"ApiVersions"' "$W/audit.log" ||
    kr_fail "no audit line before SIGUSR1"
mv "$W/krelay.log" "$W/krelay.log.1"
mv "$W/audit.log" "$W/audit.log.1"
kill -USR1 "$KPID"
kr_wait_for 10 grep -q 'SIGUSR1: reopening the log and audit files' "$W/krelay.log" ||
    kr_fail "SIGUSR1: no new log file with its line"
old_audit=$(wc -c <"$W/audit.log.1")
"$KR_PY" "$PEERS" pipeline "127.0.0.1:$PORT" 1 "$W/sent6" >"$W/p6.out" 2>&1
[ "$(cat "$W/p6.out")" = "answered 1 ids 1" ] || kr_fail "after SIGUSR1: $(cat "$W/p6.out")"
kr_wait_for 10 test -s "$W/audit.log" || kr_fail "SIGUSR1: the audit file was not opened again"
[ "$(wc -c <"$W/audit.log.1")" = "$old_audit" ] || kr_fail "the moved audit file still grows"
grep -q 'SIGUSR1' "$W/krelay.log.1" && kr_fail "the moved log got the SIGUSR1 line"
kr_log "SIGUSR1: log and audit files reopened after a move"

kr_stop "$KPID" krelay "$W/krelay.log"
kr_wait_for 5 grep -q '^STOPPING=1' "$W/notify.txt" || kr_fail "no STOPPING=1"
got=$(sed 's/ MONOTONIC_USEC=[0-9]*$//' "$W/notify.txt" | tr '\n' ' ')
[ "$got" = "READY=1 RELOADING=1 READY=1 STOPPING=1 " ] ||
    kr_fail "notifications: '$got', want READY=1 RELOADING=1 READY=1 STOPPING=1"
grep -q '^RELOADING=1 MONOTONIC_USEC=[0-9][0-9]*$' "$W/notify.txt" ||
    kr_fail "RELOADING=1 without MONOTONIC_USEC"
# which sender this build has (the README says both are tested: this
# test runs with whichever configure chose)
if grep -q '^#define HAVE_LIBSYSTEMD 1' "$top_builddir/config.h" 2>/dev/null; then
    how="libsystemd's sd_notify"
else
    how="krelay's own sender (no libsystemd)"
fi
kr_log "sd_notify through $how: $got"

# ---- 6. -T --------------------------------------------------------------------
conf "$W/t.ini" '[rule r]' 'client_id =;x,#y' 'deny = true' '[process]' 'drain_timeout_ms = 0'
"$KR_KRELAY" -T -c "$W/t.ini" >"$W/t1.ini" 2>"$W/t1.err" || kr_fail "-T: $(cat "$W/t1.err")"
grep -qx 'client_id =;x,#y' "$W/t1.ini" || kr_fail "-T: client_id: $(grep client_id "$W/t1.ini")"
grep -qx 'drain_timeout_ms = 0' "$W/t1.ini" || kr_fail "-T: no drain_timeout_ms = 0"
grep -qx 'max_inflight = [0-9]*' "$W/t1.ini" || kr_fail "-T: defaults not printed"
"$KR_KRELAY" -T -c "$W/t1.ini" >"$W/t2.ini" 2>"$W/t2.err" || kr_fail "-T of -T: $(cat "$W/t2.err")"
diff <(tail -n +2 "$W/t1.ini") <(tail -n +2 "$W/t2.ini") >"$W/t.diff" ||
    kr_fail "-T's output does not load back the same: $(head -5 "$W/t.diff")"
kr_log "-T: $(wc -l <"$W/t1.ini") lines, loads back the same"

kr_log PASS
