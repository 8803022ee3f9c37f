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
#      writes it (no [upstream]: the demo cluster stands in): its
#      listener, rules and [audit] in front of the demo cluster, at
#      start and on SIGHUP (a reload with no "[upstream] changed"
#      warning);
#   5. --demo -c with conf/examples/audit-only.ini as a user copies it
#      (issue 14): its [audit] target = stdout gets JSON lines only (the
#      banner goes to stderr), the banner names a connectable address
#      for its wildcard listen, and krelay warns at start about what
#      keeps clients from the brokers (advertised_host, a NodeId range
#      short of the demo's 1..3); a copy fixed as the warning says,
#      reloaded, has none, and a reload that brings one back logs it.
#   6. SASL on the demo: a listener with sasl = terminate (a user
#      krelay-passwd wrote) and an [upstream] with sasl_mechanism
#      (origination, which the demo cluster, without SASL, cannot take):
#      a warning at start, the key dropped; the banner's kcat lines carry
#      the SASL options to fill in, and kcat run as printed (USER and
#      PASSWORD filled in) lists the demo's brokers.
# Every banner goes to stderr, never to stdout.
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
# -c: --listen P, --broker-port-base P, so NodeId n is at P + n; with
# DEMO_CONF set: -c DEMO_CONF, which DEMO_CONF_WRITE P writes), stderr
# (log, banner) in $W/NAME.out, stdout in $W/NAME.stdout; waits for the
# banner.  Sets PID (krelay), CHILD (the cluster), PORT.
start_demo() {
    local name=$1 attempt
    shift
    for attempt in 1 2 3; do
        PORT=$(kr_free_ports 4) || exit 99
        if [ -n "${DEMO_CONF:-}" ]; then
            DEMO_CONF_WRITE "$PORT"
            set -- -c "$DEMO_CONF"
        else
            set -- --listen "127.0.0.1:$PORT" --broker-port-base "$PORT"
        fi
        "$KR_KRELAY" --demo "$@" >"$W/$name.stdout" 2>"$W/$name.out" &
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
# "NODEID PORT HOST" a line, into $W/NAME.brokers.
metadata() {
    echo '{"header":{"RequestApiKey":3,"RequestApiVersion":1,"CorrelationId":1,"ClientId":"demo-test"},"body":{"Topics":null}}' |
        kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/raw_client.py" \
            send "127.0.0.1:$PORT" "$CODEC" >"$W/$1.hex" ||
        kr_fail "$1: no Metadata response through krelay"
    "$CODEC" decode --hex --response --api-key Metadata --api-version 1 \
        <"$W/$1.hex" >"$W/$1.json" || kr_fail "$1: bad Metadata response"
    "$KR_PY" -c 'import json, sys
for b in json.load(open(sys.argv[1]))["body"]["Brokers"]:
    print(b["NodeId"], b["Port"], b["Host"])' "$W/$1.json" >"$W/$1.brokers"
}

# check_brokers NAME [HOST]: three brokers, NodeId n at krelay's
# PORT + n on HOST (default 127.0.0.1).
check_brokers() {
    local id port host n=0
    while read -r id port host; do
        n=$((n + 1))
        [ "$port" = $((PORT + id)) ] ||
            kr_fail "$1: NodeId $id at port $port, not krelay's $((PORT + id))"
        [ "$host" = "${2:-127.0.0.1}" ] ||
            kr_fail "$1: NodeId $id at host $host, not ${2:-127.0.0.1}"
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
# the banner is for people: on stderr, whatever reads stdout
[ -s "$W/term.stdout" ] && kr_fail "--demo wrote to stdout: $(cat "$W/term.stdout")"
grep -q "^  kcat -b 127.0.0.1:$PORT -L\$" "$W/term.out" ||
    kr_fail "banner: no kcat line for 127.0.0.1:$PORT: $(cat "$W/term.out")"
# nothing to reread, and the log is on stderr: nothing reopened either
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
# the README leaves [upstream] out: the demo cluster stands in
grep -q '^\[upstream' "$W/try.readme.ini" &&
    kr_fail "README.md's try.ini has an [upstream] again: $(cat "$W/try.readme.ini")"
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

# 5. conf/examples/audit-only.ini as a user tries it: copied, on this
# test's ports, its audit lines to stdout, its [upstream] dropped (the
# demo cluster stands in), one NodeId short of the demo's.  Its listener
# stays on 0.0.0.0 and advertises kafka-proxy.example.com.
DEMO_CONF=$W/audit-only.ini
DEMO_CONF_WRITE() {
    sed -e '/^\[upstream\]$/,/^$/d' \
        -e "s/^listen = 0\.0\.0\.0:19092\$/listen = 0.0.0.0:$1/" \
        -e "s/^broker_port_base = 19100\$/broker_port_base = $1/" \
        -e 's/^node_id_max = 3$/node_id_max = 2/' \
        -e 's/^target = syslog$/;&/' -e 's/^;target = stdout$/target = stdout/' \
        "$top_srcdir/conf/examples/audit-only.ini" >"$DEMO_CONF"
    grep -q "^listen = 0.0.0.0:$1\$" "$DEMO_CONF" &&
        grep -q "^broker_port_base = $1\$" "$DEMO_CONF" &&
        grep -q "^advertised_host = kafka-proxy.example.com\$" "$DEMO_CONF" &&
        grep -q '^node_id_max = 2$' "$DEMO_CONF" &&
        grep -q '^target = stdout$' "$DEMO_CONF" ||
        kr_fail "conf/examples/audit-only.ini changed: $(cat "$DEMO_CONF")"
    grep -q '^\[upstream' "$DEMO_CONF" && kr_fail "[upstream] left in: $(cat "$DEMO_CONF")"
    return 0
}
start_demo example
WANT="krelay: warning: $DEMO_CONF:[0-9]*: \[listener\]: advertised_host ="
WANT="$WANT kafka-proxy.example.com: clients of the demo are told NodeId n is"
WANT="$WANT at kafka-proxy.example.com:$PORT + n and must reach that name"
WANT="$WANT from where they run; to try this file on this machine, copy it"
WANT="$WANT with advertised_host = 127.0.0.1 (--demo keeps it as written)\$"
grep -q "^$WANT" "$W/example.out" ||
    kr_fail "no advertised_host warning at start: $(cat "$W/example.out")"
WANT="krelay: warning: $DEMO_CONF:[0-9]*: \[listener\]: node_id_min..node_id_max"
WANT="$WANT is 1..2, but the demo cluster's brokers are NodeIds 1..3"
grep -q "^$WANT" "$W/example.out" ||
    kr_fail "no NodeId warning at start: $(cat "$W/example.out")"
grep -q "^  kcat -b 127.0.0.1:$PORT -L\$" "$W/example.out" ||
    kr_fail "banner: no connectable kcat line for 0.0.0.0:$PORT: $(cat "$W/example.out")"
grep -q '^Read the warnings above first' "$W/example.out" ||
    kr_fail "banner: no pointer to the warnings: $(cat "$W/example.out")"
# as warned: a Metadata response naming NodeId 3 closes the connection
echo '{"header":{"RequestApiKey":3,"RequestApiVersion":1,"CorrelationId":1,"ClientId":"demo-test"},"body":{"Topics":null}}' |
    kr_run 30 "$KR_PY" "$top_srcdir/tests/integration/raw_client.py" \
        send "127.0.0.1:$PORT" "$CODEC" >"$W/example1.hex" 2>&1 &&
    kr_fail "Metadata went through a listener without NodeId 3"
kr_wait_for 10 grep -q "names NodeId 3, outside this listener's node_id_min..node_id_max 1..2" \
    "$W/example.out" || kr_fail "no NodeId 3 close: $(tail -n 3 "$W/example.out")"
# (the mock answers Produce v5 without LogStartOffset: the decode fails;
# only the audit line matters here)
produce_demo eprod1 >/dev/null 2>&1
kr_wait_for 10 grep -q '"api":"Produce"' "$W/example.stdout" ||
    kr_fail "no Produce audit line on stdout: $(cat "$W/example.stdout")"
"$KR_PY" -c 'import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    try:
        json.loads(line)
    except ValueError:
        sys.exit("stdout line %d is not JSON: %r" % (n, line))' \
    "$W/example.stdout" || kr_fail "[audit] target = stdout: not JSON lines only"
# the range fixed, reloaded: the advertised_host warning is logged again,
# and clients are indeed sent to kafka-proxy.example.com
sed -i 's/^node_id_max = 2$/node_id_max = 3/' "$DEMO_CONF"
kill -HUP "$PID"
kr_wait_for 30 grep -q "notice: SIGHUP: reloaded $DEMO_CONF: " "$W/example.out" ||
    kr_fail "SIGHUP: $(grep -i 'sighup\|reload' "$W/example.out")"
grep -q "warn: reload: warning: $DEMO_CONF:[0-9]*: \[listener\]: advertised_host = kafka-proxy.example.com: clients of the demo" \
    "$W/example.out" || kr_fail "reload: no advertised_host warning: $(grep -i reload "$W/example.out")"
grep -q "reload: warning: .*node_id_min" "$W/example.out" &&
    kr_fail "reload: a NodeId warning for 1..3: $(grep -i reload "$W/example.out")"
metadata example2
check_brokers example2 kafka-proxy.example.com
# and as the warning says, advertised_host = 127.0.0.1: no warning
nwarn=$(grep -c 'reload: warning' "$W/example.out")
sed -i 's/^advertised_host = .*/advertised_host = 127.0.0.1/' "$DEMO_CONF"
kill -HUP "$PID"
reloaded_twice() {
    [ "$(grep -c "notice: SIGHUP: reloaded $DEMO_CONF: " "$W/example.out")" -ge 2 ]
}
kr_wait_for 30 reloaded_twice ||
    kr_fail "SIGHUP: $(grep -i 'sighup\|reload' "$W/example.out")"
[ "$(grep -c 'reload: warning' "$W/example.out")" -eq "$nwarn" ] ||
    kr_fail "a warning at the reload of the fixed copy: $(grep warning "$W/example.out")"
metadata example3
check_brokers example3
kr_stop "$PID" krelay "$W/example.out"
kr_gone "$CHILD" || kr_fail "audit-only.ini: the demo cluster still runs"
grep -q '^krelay demo\|^Stop with' "$W/example.stdout" &&
    kr_fail "the banner went to stdout: $(cat "$W/example.stdout")"
kr_log "5. audit-only.ini on the demo: warned at start, banner on stderr," \
    "JSON alone on stdout, fixed copy reloaded without warnings"
# 6. SASL on the demo
printf 'demo-pw\n' | "$top_builddir/krelay-passwd" -i 4096 alice \
    >"$W/users" || kr_fail "krelay-passwd failed"
printf 'upstream-pw\n' >"$W/up.pw"
chmod 600 "$W/users" "$W/up.pw"
DEMO_CONF=$W/sasl.ini
DEMO_CONF_WRITE() {
    cat >"$DEMO_CONF" <<EOF
[upstream]
bootstrap_servers = 127.0.0.1:1
sasl_mechanism = PLAIN
sasl_username = krelay
sasl_password_file = $W/up.pw
[listener]
listen = 127.0.0.1:$1
broker_port_base = $1
node_id_min = 1
node_id_max = 3
sasl = terminate
sasl_credentials = $W/users
sasl_mechanisms = SCRAM-SHA-512, PLAIN
EOF
}
start_demo sasl
WANT="krelay: warning: $DEMO_CONF:1: [upstream]: sasl_mechanism = PLAIN: the"
WANT="$WANT demo cluster has no SASL: --demo connects to it without"
WANT="$WANT authenticating (the key is not used; trying SASL origination"
WANT="$WANT needs a broker with SASL)"
grep -qxF "$WANT" "$W/sasl.out" ||
    kr_fail "no warning for origination on the demo: $(cat "$W/sasl.out")"
KOPTS="-X security.protocol=sasl_plaintext -X sasl.mechanism=SCRAM-SHA-512"
KOPTS="$KOPTS -X sasl.username=USER -X sasl.password=PASSWORD"
grep -qxF "  kcat -b 127.0.0.1:$PORT $KOPTS -L" "$W/sasl.out" ||
    kr_fail "banner: no SASL options in kcat -L: $(cat "$W/sasl.out")"
grep -qxF "  kcat -b 127.0.0.1:$PORT $KOPTS -t demo -C -e" "$W/sasl.out" ||
    kr_fail "banner: no SASL options in kcat -C: $(cat "$W/sasl.out")"
grep -q "^(SASL: USER and PASSWORD a user of the listener's sasl_credentials" \
    "$W/sasl.out" || kr_fail "banner: no SASL note: $(cat "$W/sasl.out")"
if command -v kcat >/dev/null 2>&1 &&
    kcat -X list 2>/dev/null | grep '^builtin.features' | grep -q sasl_scram
then
    read -r -a cmd < <(sed -n 's/^  kcat \(.*\) -L$/\1/p' "$W/sasl.out" |
        sed 's/USER/alice/; s/PASSWORD/demo-pw/')
    kr_run 30 kcat "${cmd[@]}" -X socket.timeout.ms=10000 -m 10 -L \
        >"$W/sasl-L.out" 2>&1 ||
        kr_fail "the banner's kcat -L as alice failed: $(tail -3 "$W/sasl-L.out")"
    grep -q ' 3 brokers:' "$W/sasl-L.out" ||
        kr_fail "kcat -L through the demo: $(cat "$W/sasl-L.out")"
    kr_log "6. the banner's kcat -L, as alice (SCRAM-SHA-512): 3 brokers"
else
    kr_log "6. no kcat with SCRAM: the banner's command not run"
fi
kr_stop "$PID" krelay "$W/sasl.out"
kr_gone "$CHILD" || kr_fail "sasl.ini: the demo cluster still runs"
kr_log "6. SASL on the demo: origination warned and dropped, termination" \
    "in the banner's kcat lines"
kr_log "PASS"
