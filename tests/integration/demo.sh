#!/bin/bash
# krelay --demo and its child process krelay-demo-cluster (kr_demo.h):
#   1. --demo: the cluster runs as krelay's child, ready when krelay says
#      so (its brokers listen), reached through krelay (Metadata names
#      krelay's ports); SIGHUP says plainly there is no file to reread;
#      SIGTERM stops krelay and its cluster (nothing left);
#   2. SIGKILL to krelay: the cluster stops by itself (end of file on
#      its stdin, PR_SET_PDEATHSIG): no orphan;
#   3. the cluster dying stops krelay, with exit status 1 and a line
#      saying what happened;
#   4. --demo -c FILE, FILE as README.md's "Try rules on the demo"
#      writes it: its listener, rules and [audit] with its upstream
#      pointed at the demo cluster, at start and on SIGHUP (a reload
#      with no "[upstream] changed" warning).
# The missing program and krelay's ldd are krelay_cli.sh's (no librdkafka
# needed).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

DEMO_BIN=$top_builddir/krelay-demo-cluster
[ -x "$DEMO_BIN" ] || kr_skip "$DEMO_BIN (built only with librdkafka-dev)"
kr_setup 120
W=$KR_WORK
[ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"
CODEC=$top_builddir/krelay-codec

# start_demo NAME [ARGS...]: krelay --demo ARGS on free ports (without
# -c: --listen P, --broker-port-base P, so NodeId n is at P + n), output
# in $W/NAME.out; waits for the banner.  Sets PID (krelay), CHILD (the
# cluster), PORT.  With -c the caller's file must use $PORT.
start_demo() {
    local name=$1 attempt
    shift
    for attempt in 1 2 3; do
        PORT=$(kr_free_ports 4) || exit 99
        if [ -n "${DEMO_CONF:-}" ]; then
            DEMO_CONF_WRITE "$PORT"
            set -- -c "$DEMO_CONF"
        fi
        "$KR_KRELAY" --demo --listen "127.0.0.1:$PORT" \
            --broker-port-base "$PORT" "$@" >"$W/$name.out" 2>&1 &
        PID=$!
        KR_PIDS+=("$PID")
        if kr_wait_for 60 grep -q '^Stop with Ctrl-C\.$' "$W/$name.out"; then
            CHILD=$(pgrep -P "$PID") ||
                kr_fail "$name: krelay (pid $PID) has no child process"
            KR_PIDS+=("$CHILD")     # stopped on exit if a check fails
            kr_log "$name: krelay pid $PID, demo cluster pid $CHILD," \
                "bootstrap 127.0.0.1:$PORT"
            return 0
        fi
        kill "$PID" 2>/dev/null
        wait "$PID" 2>/dev/null
        kr_log "$name: krelay --demo did not start (attempt $attempt):" \
            "$(tail -n 3 "$W/$name.out")"
    done
    kr_fail "krelay --demo did not start: $(cat "$W/$name.out")"
}

# gone_or_zombie PID: the process exited (a zombie has exited too: only
# its parent's wait is missing).
gone_or_zombie() {
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$st" ] || [ "$st" = Z ]
}

# metadata NAME: Metadata v1 through krelay; its brokers, one
# "NODEID PORT" a line, into $W/NAME.brokers.
metadata() {
    echo '{"header":{"RequestApiKey":3,"RequestApiVersion":1,"CorrelationId":1,"ClientId":"demo-test"},"body":{"Topics":null}}' |
        kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/raw_client.py" \
            send "127.0.0.1:$PORT" "$CODEC" >"$W/$1.hex" ||
        kr_fail "$1: no Metadata response through krelay"
    "$CODEC" decode --hex --response --api-key Metadata --api-version 1 \
        <"$W/$1.hex" >"$W/$1.json" || kr_fail "$1: bad Metadata response"
    "$KR_PY" -c 'import json, sys
for b in json.load(open(sys.argv[1]))["body"]["Brokers"]:
    print(b["NodeId"], b["Port"])' "$W/$1.json" >"$W/$1.brokers"
}

# check_brokers NAME: three brokers, NodeId n at krelay's PORT + n.
check_brokers() {
    local id port n=0
    while read -r id port; do
        n=$((n + 1))
        [ "$port" = $((PORT + id)) ] ||
            kr_fail "$1: NodeId $id at port $port, not krelay's $((PORT + id))"
    done <"$W/$1.brokers"
    [ "$n" -eq 3 ] || kr_fail "$1: $n brokers, want 3: $(cat "$W/$1.json")"
}

# 1. --demo: ready, reached through krelay, SIGHUP, SIGTERM
start_demo term
cmd=$(tr '\0' ' ' <"/proc/$CHILD/cmdline")
[ "$cmd" = "krelay-demo-cluster -b 3 -t demo:3,events:6 -w " ] ||
    kr_fail "the child is not the demo cluster: '$cmd'"
# in a process group of its own: a terminal's Ctrl-C reaches krelay
# alone, which stops the cluster after its own connections
[ "$(ps -o pgid= -p "$CHILD")" != "$(ps -o pgid= -p "$PID")" ] ||
    kr_fail "the demo cluster is in krelay's process group"
# its brokers listened before krelay said it was ready
bs=$(sed -n 's/^krelay demo: a mock Kafka cluster (3 brokers at \([^ ]*\), topics .*/\1/p' \
     "$W/term.out")
[ -n "$bs" ] || kr_fail "no bootstrap list in the banner: $(cat "$W/term.out")"
for hp in ${bs//,/ }; do
    kr_listening "${hp##*:}" ||
        kr_fail "demo broker $hp does not listen (banner: $bs)"
done
metadata term
check_brokers term
kr_log "1. demo cluster at $bs behind krelay; Metadata names krelay's ports"
kill -HUP "$PID"
kr_wait_for 30 grep -q "notice: SIGHUP: no configuration file to reread (krelay --demo without -c; --demo -c FILE reloads FILE); no log or audit file to reopen$" \
    "$W/term.out" || kr_fail "SIGHUP: $(grep -i sighup "$W/term.out")"
if grep -E ': (error|warn): ' "$W/term.out"; then
    kr_fail "an error or warning line in --demo (after SIGHUP)"
fi
kr_stop "$PID" krelay "$W/term.out"
kr_gone "$CHILD" || kr_fail "SIGTERM: krelay exited, its demo cluster" \
    "(pid $CHILD) still runs"
kr_log "1. SIGHUP said there is no file; SIGTERM stopped krelay and its cluster"

# 2. SIGKILL to krelay: the cluster stops by itself
start_demo kill
kill -KILL "$PID"
wait "$PID" 2>/dev/null
kr_wait_for 10 gone_or_zombie "$CHILD" ||
    kr_fail "krelay SIGKILLed: its demo cluster (pid $CHILD) still runs" \
        "(an orphan)"
kr_log "2. krelay SIGKILLed: its demo cluster stopped by itself"

# 3. the cluster dies: krelay stops, exit status 1, a line saying so
start_demo lost
kill -KILL "$CHILD"
kr_wait_for 30 kr_gone "$PID" ||
    kr_fail "the demo cluster was killed; krelay still runs"
wait "$PID"
rc=$?
[ "$rc" -eq 1 ] || kr_fail "krelay exited with $rc after losing its cluster, want 1"
grep -q "error: the demo cluster ($top_builddir/krelay-demo-cluster) was killed by signal 9 (Killed): stopping$" \
    "$W/lost.out" || kr_fail "no line for the lost cluster: $(tail -n 4 "$W/lost.out")"
kr_log "3. the demo cluster killed: krelay said so and stopped (status 1)"

# 4. --demo -c FILE, FILE as README.md ("Try rules on the demo") writes
# it (on this test's ports): its listener, its rules and [audit], the
# upstream retargeted at start and on SIGHUP
DEMO_CONF=$W/try.ini
sed -n "/^cat >try.ini <<'END'\$/,/^END\$/p" "$top_srcdir/README.md" |
    sed '1d;$d' >"$W/try.readme.ini"
grep -q '^\[rule no-writes-to-demo\]$' "$W/try.readme.ini" ||
    kr_fail "README.md: no try.ini example: $(cat "$W/try.readme.ini")"
DEMO_CONF_WRITE() {
    sed -e "s/^listen = 127\.0\.0\.1:9092 */listen = 127.0.0.1:$1 /" \
        -e "s/^broker_port_base = 19092 */broker_port_base = $1 /" \
        -e "s|^target = audit\.jsonl\$|target = $W/audit.jsonl|" \
        "$W/try.readme.ini" >"$DEMO_CONF"
    printf '[log]\nlevel = info\n' >>"$DEMO_CONF"
    grep -q "^listen = 127.0.0.1:$1 " "$DEMO_CONF" &&
        grep -q "^broker_port_base = $1 " "$DEMO_CONF" ||
        kr_fail "README.md's try.ini changed: $(cat "$DEMO_CONF")"
}
start_demo file
grep -q "^Rules and \[audit\] come from the -c file" "$W/file.out" ||
    kr_fail "no -c line in the banner: $(cat "$W/file.out")"
metadata file
check_brokers file
# a Produce to topic demo: refused by krelay (TOPIC_AUTHORIZATION_FAILED)
produce_demo() {
    local rec
    rec=$("$KR_PY" "$top_srcdir/tests/integration/raw_client.py" batch hello)
    printf '{"header":{"RequestApiKey":0,"RequestApiVersion":5,"CorrelationId":7,"ClientId":"demo-test"},"body":{"TransactionalId":null,"Acks":1,"TimeoutMs":5000,"TopicData":[{"Name":"demo","PartitionData":[{"Index":0,"Records":"%s"}]}]}}\n' "$rec" |
        kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/raw_client.py" \
            send "127.0.0.1:$PORT" "$CODEC" >"$W/$1.hex" ||
        kr_fail "$1: no Produce response through krelay"
    "$CODEC" decode --hex --response --api-key Produce --api-version 5 \
        <"$W/$1.hex" | "$KR_PY" -c 'import json, sys
r = json.load(sys.stdin)["body"]["Responses"][0]["PartitionResponses"][0]
print(r["ErrorCode"])'
}
got=$(produce_demo produce1)
[ "$got" = 29 ] || kr_fail "Produce to demo: ErrorCode $got, want 29 (the README's deny rule)"
kr_wait_for 10 grep -q '"api":"Metadata"' "$W/audit.jsonl" ||
    kr_fail "no Metadata audit line: $(cat "$W/audit.jsonl" 2>/dev/null)"
kr_wait_for 10 grep -q '"api":"Produce".*"actions":\["denied"\]' "$W/audit.jsonl" ||
    kr_fail "no Produce deny audit line: $(grep Produce "$W/audit.jsonl")"
kill -HUP "$PID"
kr_wait_for 30 grep -q "notice: SIGHUP: reloaded $DEMO_CONF: " "$W/file.out" ||
    kr_fail "SIGHUP with -c FILE: $(grep -i 'sighup\|reload' "$W/file.out")"
if grep -E ': (error|warn): ' "$W/file.out"; then
    kr_fail "an error or warning line in --demo -c (after SIGHUP)"
fi
metadata file2
check_brokers file2
got=$(produce_demo produce2)
[ "$got" = 29 ] || kr_fail "after SIGHUP, Produce to demo: ErrorCode $got, want 29"
kr_stop "$PID" krelay "$W/file.out"
kr_gone "$CHILD" || kr_fail "-c FILE: the demo cluster still runs"
kr_log "4. --demo -c FILE (README's try.ini): denied, audited, reloaded" \
    "without an upstream warning"
kr_log "PASS"
