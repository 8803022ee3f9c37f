#!/bin/bash
# krelay at its open-file limit: accept(2) fails with EMFILE while the
# pending connections stay in the backlog, so the listening socket stays
# readable.  krelay must stop accepting for a while and say so once (not
# retry at once in a loop: a busy CPU and a flood of libevent warnings),
# and accept again once descriptors are free.
#
# The upstream refuses connections (nothing listens on its port), so
# krelay never learns where NodeId 1 is: each client connection to NodeId
# 1's port holds one descriptor while it waits (connect_timeout_ms), and
# 80 of them exhaust a limit of 40 in accept(2) itself.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

if kr_is_direct; then
    kr_log "SKIP: KRELAY_TEST_DIRECT=1 (this tests krelay itself)"
    exit 77
fi
kr_setup 120
W=$KR_WORK
KR_NODEIDS=1
KR_MOCK_BOOTSTRAP=127.0.0.1:$(kr_free_ports 1) || exit 99
# one worker: the subject is one listener's pause and its log line (each
# worker's listener pauses and logs on its own), and 40 descriptors are
# counted for one event loop
printf '[process]\nworkers = 1\n' >"$W/process.ini"
KR_EXTRA_CONF=$W/process.ini
HARD=$(ulimit -Hn)
# Only krelay gets the low limit: lower the soft one around its start.
ulimit -Sn 40 || kr_skip "cannot lower the open-file limit"
kr_start_krelay
ulimit -Sn "$HARD"
grep -q "^Max open files *40 " "/proc/$KR_KRELAY_PID/limits" ||
    kr_fail "krelay's limit: $(grep "open files" "/proc/$KR_KRELAY_PID/limits")"

# 80 idle connections for 3 s, then closed.
N1=$((KR_BROKER_BASE + 1))
"$KR_PY" - "$N1" <<'PY' || kr_fail "client script failed"
import socket, sys, time
port = int(sys.argv[1])
conns = []
for _ in range(80):
    try:
        conns.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        pass
time.sleep(3)
for c in conns:
    c.close()
PY
kr_check_alive

# One line for all the pauses (500 ms each; one per 10 s at most), naming
# the cause; libevent itself warns of nothing (its "Error from accept() call" is what a retry loop writes,
# thousands of lines a second).
kr_wait_for 30 grep -q "not accepting for 500 ms (1 time since" "$W/krelay.log" ||
    kr_fail "no 'not accepting' line: $(tail -5 "$W/krelay.log")"
grep -q "Too many open files: not accepting.*raise the open-file limit" \
    "$W/krelay.log" ||
    kr_fail "the EMFILE cause is not named"
n=$(grep -c "warn: accept on .* not accepting for" "$W/krelay.log")
[ "$n" -eq 1 ] || kr_fail "$n 'not accepting' lines (one per 10 s at most)"
if grep -q "libevent:" "$W/krelay.log" "$W/krelay.out.log"; then
    kr_fail "libevent warned: $(grep -h "libevent:" "$W/krelay.log" \
        "$W/krelay.out.log" | head -3)"
fi

# Descriptors are free again once krelay has closed the sessions of the
# clients that left: a new connection is accepted (found by its port).
"$KR_PY" - "$N1" >"$W/new.port" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
print(s.getsockname()[1], flush=True)
time.sleep(10)
PY
KR_PIDS+=($!)
accepted_new() {
    local p
    p=$(cat "$W/new.port" 2>/dev/null)
    [ -n "$p" ] && grep -q "127.0.0.1:$p > NodeId 1\] accepted" "$W/krelay.log"
}
kr_wait_for 30 accepted_new || kr_fail "krelay does not accept again"
kr_check_alive
kr_stop "$KR_KRELAY_PID" krelay "$W/krelay.out.log" "$W/krelay.log"
kr_log "PASS: krelay paused accepting at its fd limit, then accepted again"
