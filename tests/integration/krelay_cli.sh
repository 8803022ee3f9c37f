#!/bin/bash
# The krelay command itself (no Kafka client, no mock): `krelay -t`
# opens the [log] and [audit] files as the daemon will (FILE-level error
# and a non-zero exit when it cannot, nothing left behind when it can),
# config errors carry the "krelay: " prefix, the daemon logs one
# notice line for SIGHUP and for SIGUSR1 (what a reload did with the log
# and audit targets).  Warnings (issue 14): -t and
# -t -W exit codes, the reload's warning lines, the compiled table's
# names, the stop report's "1 connection".  krelay does not link
# librdkafka, and --demo without its cluster program says so.  --demo -t
# -c (no cluster needed): the warnings about what keeps the demo's
# clients from the brokers, a file without [upstream]; --listen and
# --broker-port-base refused with -c, checked as options; --demo -T, with
# and without -c (no cluster started either).  Started
# with fds 0-2 closed, krelay opens /dev/null on them (no audit line to
# stdout lands in the log file).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_setup 60
W=$KR_WORK
[ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"

base=$(kr_free_ports 2) || exit 99
# conf FILE LOGTARGET [AUDITTARGET]
conf() {
    cat >"$1" <<EOF
[upstream]
bootstrap_servers = 127.0.0.1:1
[listener]
listen = 127.0.0.1:$base
broker_port_base = $base
node_id_min = 1
node_id_max = 1
[log]
level = info
target = $2
EOF
    if [ -n "${3:-}" ]; then
        printf '[audit]\ntarget = %s\n' "$3" >>"$1"
    fi
}

# 1. -t: a [log] file in a directory that does not exist
conf "$W/nolog.ini" "$W/missing/krelay.log"
if "$KR_KRELAY" -t -c "$W/nolog.ini" >"$W/t1.out" 2>&1; then
    kr_fail "-t passed with an unopenable [log] target: $(cat "$W/t1.out")"
fi
grep -q "^krelay: $W/nolog.ini:10: \[log\] target $W/missing/krelay.log: cannot open for append: No such file or directory$" \
    "$W/t1.out" || kr_fail "-t [log] error: $(cat "$W/t1.out")"
grep -q "configuration OK" "$W/t1.out" && kr_fail "-t said OK: $(cat "$W/t1.out")"

# 2. the same for [audit] (the [log] target is fine)
conf "$W/noaudit.ini" stderr "$W/missing/audit.log"
if "$KR_KRELAY" -t -c "$W/noaudit.ini" >"$W/t2.out" 2>&1; then
    kr_fail "-t passed with an unopenable [audit] target: $(cat "$W/t2.out")"
fi
grep -q "^krelay: $W/noaudit.ini:12: \[audit\] target $W/missing/audit.log: cannot open for append" \
    "$W/t2.out" || kr_fail "-t [audit] error: $(cat "$W/t2.out")"

# ... and at start (without -t) the same errors name FILE:LINE too
timeout 10 "$KR_KRELAY" -c "$W/nolog.ini" >"$W/t1s.out" 2>&1 &&
    kr_fail "krelay started with an unopenable [log] target"
grep -q "^krelay: $W/nolog.ini:10: cannot open log $W/missing/krelay.log: No such file or directory$" \
    "$W/t1s.out" || kr_fail "start, [log] error: $(cat "$W/t1s.out")"
timeout 10 "$KR_KRELAY" -c "$W/noaudit.ini" >"$W/t2s.out" 2>&1 &&
    kr_fail "krelay started with an unopenable [audit] target"
grep -q "error: cannot start: $W/noaudit.ini:12: audit: cannot open $W/missing/audit.log: No such file or directory$" \
    "$W/t2s.out" || kr_fail "start, [audit] error: $(cat "$W/t2s.out")"

# 3. openable targets: OK; a missing file is not left behind, an
# existing one is not truncated
echo "old line" >"$W/audit.log"
conf "$W/ok.ini" "$W/krelay-t.log" "$W/audit.log"
"$KR_KRELAY" -t -c "$W/ok.ini" >"$W/t3.out" 2>&1 ||
    kr_fail "-t refused openable targets: $(cat "$W/t3.out")"
grep -q "^krelay: $W/ok.ini: configuration OK$" "$W/t3.out" ||
    kr_fail "-t: no OK line: $(cat "$W/t3.out")"
[ -e "$W/krelay-t.log" ] && kr_fail "-t left $W/krelay-t.log behind"
[ "$(cat "$W/audit.log")" = "old line" ] || kr_fail "-t changed audit.log"

# 4. config errors carry the prefix
"$KR_KRELAY" -t -c "$W/nonexistent.ini" >"$W/t4.out" 2>&1 &&
    kr_fail "-t passed a missing file"
grep -q "^krelay: $W/nonexistent.ini: cannot open: No such file or directory$" \
    "$W/t4.out" || kr_fail "missing config: $(cat "$W/t4.out")"
printf '[listener]\nlisten = 127.0.0.1:x\n' >"$W/bad.ini"
"$KR_KRELAY" -c "$W/bad.ini" >"$W/t5.out" 2>&1 && kr_fail "bad config started"
grep -q "^krelay: $W/bad.ini:2: 'listen': bad value" "$W/t5.out" ||
    kr_fail "bad config: $(cat "$W/t5.out")"
grep -v "^krelay: " "$W/t5.out" && kr_fail "a line without the prefix"

# 5. the daemon: started line, one notice line per SIGUSR1 and SIGHUP
conf "$W/run.ini" "$W/krelay.log"
"$KR_KRELAY" -c "$W/run.ini" >>"$W/krelay.out.log" 2>&1 &
pid=$!
KR_PIDS+=("$pid")
kr_wait_port "$base" 60 "$pid" || kr_fail "krelay did not listen on $base"
# the started line comes after the listeners are bound: wait for it too
wait_line() {
    kr_wait_for 60 grep -q "$1" "$W/krelay.log" ||
        kr_fail "no line '$1' in krelay.log: $(tail -5 "$W/krelay.log")"
}
wait_line "notice: krelay .* started (1 listener group, [0-9][0-9]* workers*)$"
kill -USR1 "$pid"
wait_line "notice: SIGUSR1: reopening the log file$"
kill -HUP "$pid"
wait_line "notice: SIGHUP: reloaded $W/run.ini: 1 listener group (0 new), 0 rules; reopening the log file$"
# a second and a third reload with no connection open: each frees the
# config the one before loaded (a use after free once, seen by ASan)
reloads_at_least() {
    [ "$(grep -c "SIGHUP: reloaded" "$W/krelay.log")" -ge "$1" ]
}
for i in 2 3; do
    kill -HUP "$pid"
    kr_wait_for 60 reloads_at_least "$i" ||
        kr_fail "reload $i: $(tail -5 "$W/krelay.log")"
done
n=$(grep -c "SIGHUP\|SIGUSR1" "$W/krelay.log")
[ "$n" -eq 4 ] || kr_fail "$n signal lines, want 4: $(grep SIG "$W/krelay.log")"
# a reload logs what `krelay -t` warns about (issue 14)
conf "$W/run.ini" "$W/krelay.log"
printf '[rule who]\napi = Produce\nclamp_max_version = 2\n' >>"$W/run.ini"
kill -HUP "$pid"
wait_line "warn: reload: warning: $W/run.ini:13: \[rule who\]: clamp_max_version 2"
# one connection, no request: the stop report says "1 connection"
exec 3<>"/dev/tcp/127.0.0.1/$base" || kr_fail "cannot connect to $base"
exec 3>&-
# its close line: the upstream's refusal, or the client gone first (a
# client that leaves before its first frame is closed at once)
kr_wait_for 60 grep -q "connect to upstream 127.0.0.1:1: \|client closed the connection" \
    "$W/krelay.log" ||
    kr_fail "no connection line: $(tail -3 "$W/krelay.log")"
kr_stop "$pid" krelay "$W/krelay.out.log" "$W/krelay.log"
grep -q "notice: totals: 1 connection, 0 requests (0 audited while streamed), 0 responses (0 held whole, 0 streamed), 0 bytes up, 0 bytes down" \
    "$W/krelay.log" || kr_fail "stop report: $(grep totals "$W/krelay.log")"

# 6. a reload changing a kept listener's upstream: NEWCONN (the key's
# reload attribute, issue 12): said, its new connections go to the new one
two_ups() {
    cat >"$1" <<EOF
[upstream a]
bootstrap_servers = 127.0.0.1:1
[upstream b]
bootstrap_servers = 127.0.0.1:2
[listener]
listen = 127.0.0.1:$base
broker_port_base = $base
node_id_min = 1
node_id_max = 1
upstream = $2
[log]
level = info
target = $W/krelay2.log
EOF
}
two_ups "$W/run2.ini" a
"$KR_KRELAY" -c "$W/run2.ini" >>"$W/krelay.out.log" 2>&1 &
pid=$!
KR_PIDS+=("$pid")
kr_wait_for 60 grep -q "notice: krelay .* started" "$W/krelay2.log" ||
    kr_fail "krelay (two upstreams) did not start: $(tail -3 "$W/krelay2.log")"
two_ups "$W/run2.ini" b
kill -HUP "$pid"
kr_wait_for 60 grep -q "SIGHUP: reloaded" "$W/krelay2.log" ||
    kr_fail "no reload: $(tail -3 "$W/krelay2.log")"
WANT="notice: reload: $W/run2.ini:5: \[listener\] upstream changed: its"
WANT="$WANT new connections go to the new one, its open connections stay"
WANT="$WANT with theirs"
grep -q "$WANT" "$W/krelay2.log" ||
    kr_fail "no line for the listener's upstream: $(grep reload "$W/krelay2.log")"
grep "reload" "$W/krelay2.log" | grep -q "restart" &&
    kr_fail "the reload asks for a restart: $(grep restart "$W/krelay2.log")"
kr_stop "$pid" krelay "$W/krelay.out.log" "$W/krelay2.log"

# 6b. the log to stderr, the audit log to a file: SIGUSR1 says what it
# reopens as it happens ("reopening", before the audit writer has); a
# reopen that fails says that the lines keep going to the file opened
# before.  A reload changing [audit] queue_bytes (RESTART in the key
# table) says that it needs a restart; one changing node_id_max (REBIND)
# says that the listener is rebound, not removed.
audit_conf() {
    cat >"$1" <<EOF
[upstream]
bootstrap_servers = 127.0.0.1:1
[listener]
listen = 127.0.0.1:$base
broker_port_base = $base
node_id_min = 1
node_id_max = $2
[log]
level = info
[audit]
target = $W/audit3.jsonl
queue_bytes = $3
EOF
}
audit_conf "$W/run3.ini" 1 65536
"$KR_KRELAY" -c "$W/run3.ini" >"$W/krelay3.log" 2>&1 &
pid=$!
KR_PIDS+=("$pid")
wait_line3() {
    kr_wait_for 60 grep -q "$1" "$W/krelay3.log" ||
        kr_fail "no line '$1' in krelay3.log: $(tail -5 "$W/krelay3.log")"
}
wait_line3 "notice: krelay .* started"
mv "$W/audit3.jsonl" "$W/audit3.jsonl.1"
mkdir "$W/audit3.jsonl"
kill -USR1 "$pid"
wait_line3 "notice: SIGUSR1: reopening the audit file$"
wait_line3 "error: audit: cannot reopen $W/audit3.jsonl: Is a directory; audit lines keep going to the file opened before$"
grep -q "reopened" "$W/krelay3.log" &&
    kr_fail "a reopen said done: $(grep reopen "$W/krelay3.log")"
audit_conf "$W/run3.ini" 1 131072
kill -HUP "$pid"
wait_line3 "warn: reload: $W/run3.ini: \[audit\] queue_bytes changed: it needs a restart (or a new target): the running audit sink keeps the value it was opened with$"
wait_line3 "notice: SIGHUP: reloaded $W/run3.ini: 1 listener group (0 new), 0 rules; reopening the audit file$"
[ "$(grep -c "queue_bytes changed" "$W/krelay3.log")" -eq 1 ] ||
    kr_fail "queue_bytes: $(grep queue_bytes "$W/krelay3.log")"
# the same file again: the running sink still differs, said again
kill -HUP "$pid"
two_restart_lines() {
    [ "$(grep -c "queue_bytes changed" "$W/krelay3.log")" -eq 2 ]
}
kr_wait_for 60 two_restart_lines ||
    kr_fail "queue_bytes, second reload: $(grep reload "$W/krelay3.log")"
rmdir "$W/audit3.jsonl"
audit_conf "$W/run3.ini" 2 131072
kill -HUP "$pid"
wait_line3 "notice: reload: $W/run3.ini:3: \[listener\] node_id_max changed: its listeners are rebound (new addresses bound, a socket whose address stays taken over with its accept queue, the others closed); its open connections stay, with the values they had$"
wait_line3 "notice: reload: \[listener\] rebound: its 0 connections stay, with the values they had$"
wait_line3 "reloaded $W/run3.ini: 1 listener group (1 new)"
grep -q "removed" "$W/krelay3.log" &&
    kr_fail "a rebound listener said removed: $(grep removed "$W/krelay3.log")"
kr_stop "$pid" krelay "$W/krelay3.log"

# 6c. a reload that changes the targets says what it did with them: an
# [audit] target added opens it ("audit target FILE opened", not "no log
# or audit file to reopen" as before), a target changed opens the new one,
# [audit] removed turns audit off, a [log] target added is said in the new
# file
targets_conf() {
    cat >"$1" <<EOF
[upstream]
bootstrap_servers = 127.0.0.1:1
[listener]
listen = 127.0.0.1:$base
broker_port_base = $base
node_id_min = 1
node_id_max = 1
[log]
level = info
EOF
    [ -z "$3" ] || echo "target = $3" >>"$1"
    [ -z "$2" ] || printf '[audit]\ntarget = %s\n' "$2" >>"$1"
}
targets_conf "$W/run4.ini" "" ""
"$KR_KRELAY" -c "$W/run4.ini" >"$W/krelay4.log" 2>&1 &
pid=$!
KR_PIDS+=("$pid")
wait_line4() {
    kr_wait_for 60 grep -q "$1" "${2:-$W/krelay4.log}" ||
        kr_fail "no line '$1' in ${2:-$W/krelay4.log}: $(tail -5 "${2:-$W/krelay4.log}")"
}
wait_line4 "notice: krelay .* started"
RELOADED="notice: SIGHUP: reloaded $W/run4.ini: 1 listener group (0 new), 0 rules"
kill -HUP "$pid"
wait_line4 "$RELOADED; no log or audit file to reopen$"
targets_conf "$W/run4.ini" "$W/audit4.jsonl" ""
kill -HUP "$pid"
wait_line4 "$RELOADED; audit target $W/audit4.jsonl opened$"
[ -f "$W/audit4.jsonl" ] || kr_fail "the audit target added was not opened"
targets_conf "$W/run4.ini" "$W/audit4b.jsonl" ""
kill -HUP "$pid"
wait_line4 "$RELOADED; audit target $W/audit4b.jsonl opened (was $W/audit4.jsonl)$"
[ -f "$W/audit4b.jsonl" ] || kr_fail "the audit target changed was not opened"
targets_conf "$W/run4.ini" "" "$W/krelay4b.log"
kill -HUP "$pid"
wait_line4 "$RELOADED; audit off (was $W/audit4b.jsonl); log target $W/krelay4b.log (was stderr)$" \
    "$W/krelay4b.log"
grep -c "no log or audit file to reopen" "$W/krelay4.log" | grep -qx 1 ||
    kr_fail "no file to reopen said of a reload that opened one: $(grep reloaded "$W/krelay4.log")"
kr_stop "$pid" krelay "$W/krelay4.log" "$W/krelay4b.log"

# 7. warnings (issue 14): "krelay: warning: FILE:LINE: " on stderr; -t
# still exits 0, -t -W (--strict) exits 1; the table names what the
# config named, not numbers and masks
cat >"$W/warn.ini" <<EOF
[upstream]
bootstrap_servers = 127.0.0.1:1
[listener]
listen = 0.0.0.0:$base
broker_port_base = $base
node_id_min = 1
node_id_max = 1
[rule old]
api = Produce
clamp_max_version = 2
[rule admin]
api = CreateTopics
deny = true
deny_error = CLUSTER_AUTHORIZATION_FAILED
[rule acks]
api = Produce
allowed_acks = all
EOF
"$KR_KRELAY" -t -c "$W/warn.ini" >"$W/t7.out" 2>"$W/t7.err" ||
    kr_fail "-t failed on warnings: $(cat "$W/t7.err")"
grep -q "^krelay: warning: $W/warn.ini:4: \[listener\]: listen = 0.0.0.0:$base is a wildcard address and there is no advertised_host: krelay tells every client that the brokers are at 127.0.0.1" \
    "$W/t7.err" || kr_fail "no wildcard warning: $(cat "$W/t7.err")"
grep -q "^krelay: warning: $W/warn.ini:10: \[rule old\]: clamp_max_version 2 is below the lowest Produce version Kafka 4 accepts (3, " \
    "$W/t7.err" || kr_fail "no clamp warning: $(cat "$W/t7.err")"
[ "$(wc -l <"$W/t7.err")" -eq 2 ] || kr_fail "want 2 warnings: $(cat "$W/t7.err")"
grep -q "^krelay: $W/warn.ini: configuration OK (2 warnings)$" "$W/t7.out" ||
    kr_fail "-t: no OK line: $(cat "$W/t7.out")"
for want in "^  match: api=CreateTopics direction=both$" \
    "^  actions: deny(CLUSTER_AUTHORIZATION_FAILED)$" \
    "^  actions: policy(allowed_acks = all)$" \
    "^  Produce v0-2: acks / -$" "^  Produce v3-13: old,acks / -$" \
    "^  CreateTopics v0-7: admin / -$"; do
    grep -q "$want" "$W/t7.out" || kr_fail "-t table: no '$want': $(cat "$W/t7.out")"
done
grep -E "\([0-9]+\)|mask|error [0-9]" "$W/t7.out" &&
    kr_fail "-t table has numbers: $(cat "$W/t7.out")"
for w in -W --strict; do
    "$KR_KRELAY" -t "$w" -c "$W/warn.ini" >"$W/t8.out" 2>"$W/t8.err"
    rc=$?
    [ "$rc" -eq 1 ] || kr_fail "-t $w with warnings: exit $rc, want 1"
    grep -q "^krelay: warning: $W/warn.ini:4: " "$W/t8.err" ||
        kr_fail "-t $w: $(cat "$W/t8.err")"
    grep -q "^krelay: $W/warn.ini: 2 warnings, which -W makes errors$" \
        "$W/t8.err" || kr_fail "-t $w: $(cat "$W/t8.err")"
    grep -q "configuration OK" "$W/t8.out" && kr_fail "-t $w said OK"
    # no warning: -W changes nothing
    "$KR_KRELAY" -t "$w" -c "$W/ok.ini" >"$W/t9.out" 2>&1 ||
        kr_fail "-t $w refused a config without warnings: $(cat "$W/t9.out")"
done
"$KR_KRELAY" -W -c "$W/ok.ini" >"$W/t10.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || kr_fail "-W without -t: exit $rc, want 2"
grep -q "^krelay: -W (--strict) applies to -t only$" "$W/t10.out" ||
    kr_fail "-W without -t: $(cat "$W/t10.out")"
# a wildcard advertised_host is an error
sed 's/^listen = .*/&\nadvertised_host = [::]/' "$W/warn.ini" >"$W/adv.ini"
"$KR_KRELAY" -t -c "$W/adv.ini" >"$W/t11.out" 2>&1 &&
    kr_fail "-t passed a wildcard advertised_host"
grep -q "^krelay: $W/adv.ini:5: \[listener\]: advertised_host = \[::\] is a wildcard address" \
    "$W/t11.out" || kr_fail "wildcard advertised_host: $(cat "$W/t11.out")"
# issue 10: with a broker_profile, a clamp below its minimum is an error
# (warn.ini's [rule old]: Produce clamp_max_version 2, Kafka 4 takes 3+),
# unless translate_legacy covers those versions on the listener
sed 's/^bootstrap_servers = .*/&\nbroker_profile = kafka-4.0.0/' "$W/warn.ini" \
    >"$W/prof.ini"
"$KR_KRELAY" -t -c "$W/prof.ini" >"$W/t12.out" 2>&1 &&
    kr_fail "-t passed a clamp below broker_profile's minimum"
grep -q "^krelay: $W/prof.ini:11: \[rule old\]: clamp_max_version 2 is below the lowest Produce version the brokers of \[upstream\] accept (broker_profile = kafka-4.0.0: 3): .*set translate_legacy = true there" \
    "$W/t12.out" || kr_fail "clamp below the profile: $(cat "$W/t12.out")"
sed 's/^listen = .*/&\ntranslate_legacy = true/' "$W/prof.ini" >"$W/prof2.ini"
"$KR_KRELAY" -t -c "$W/prof2.ini" >"$W/t13.out" 2>&1 ||
    kr_fail "-t refused a clamp that translation covers: $(cat "$W/t13.out")"
grep -q "clamp_max_version" "$W/t13.out" &&
    kr_fail "-t still says something of the clamp: $(cat "$W/t13.out")"

# 8. krelay never links librdkafka (the demo cluster is a program of its
# own, krelay-demo-cluster): a production install does not need it
ldd "$KR_KRELAY" >"$W/ldd.out" 2>&1 || kr_fail "ldd $KR_KRELAY: $(cat "$W/ldd.out")"
grep -q 'libevent' "$W/ldd.out" || kr_fail "ldd lists no libevent: $(cat "$W/ldd.out")"
if grep rdkafka "$W/ldd.out"; then
    kr_fail "krelay links librdkafka (ldd above)"
fi

# 9. --demo without krelay-demo-cluster: a clear error, exit status 1.
# A krelay copied alone into a directory looks there, then in the
# install directory --help names (skipped when one is installed there).
mkdir -p "$W/bin" "$W/bin2"
cp "$KR_KRELAY" "$W/bin/krelay"
cp "$KR_KRELAY" "$W/bin2/krelay"
libexec=$("$KR_KRELAY" --help |
          sed -n 's/^\(\/.*\); it is built only where configure finds librdkafka\.$/\1/p')
[ -n "$libexec" ] || kr_fail "--help names no install directory: $("$KR_KRELAY" --help | tail -n 3)"
if [ -e "$libexec/krelay-demo-cluster" ]; then
    kr_log "9. skipped the missing case: $libexec/krelay-demo-cluster is installed"
else
    rc=0
    "$W/bin/krelay" --demo --listen "127.0.0.1:$base" \
        --broker-port-base "$base" >"$W/d8.out" 2>&1 || rc=$?
    [ "$rc" -eq 1 ] || kr_fail "--demo without the program: status $rc: $(cat "$W/d8.out")"
    WANT="krelay: --demo: krelay-demo-cluster not found (looked in $W/bin,"
    WANT="$WANT $libexec): it is installed there by make install, and built"
    WANT="$WANT beside krelay when configure finds librdkafka (without it:"
    WANT="$WANT install librdkafka-dev"
    grep -qF "$WANT" "$W/d8.out" ||
        kr_fail "--demo without the program: $(cat "$W/d8.out")"
    [ "$(wc -l <"$W/d8.out")" -eq 1 ] ||
        kr_fail "--demo without the program: more than one line: $(cat "$W/d8.out")"
    kr_listening "$base" && kr_fail "--demo without its cluster listens on $base"
fi
# -t checks the demo's configuration without starting the cluster
"$W/bin/krelay" --demo -t >"$W/d8t.out" 2>&1 ||
    kr_fail "--demo -t needs the program: $(cat "$W/d8t.out")"
grep -q "^krelay: (demo): configuration OK$" "$W/d8t.out" ||
    kr_fail "--demo -t: $(cat "$W/d8t.out")"
# one that exits before it is ready: its status, exit status 1
printf '#!/bin/sh\necho "cannot start: test" >&2\nexit 3\n' \
    >"$W/bin2/krelay-demo-cluster"
chmod 755 "$W/bin2/krelay-demo-cluster"
rc=0
"$W/bin2/krelay" --demo --listen "127.0.0.1:$base" \
    --broker-port-base "$base" >"$W/d9.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || kr_fail "--demo, cluster exits 3: status $rc: $(cat "$W/d9.out")"
grep -qx "krelay: --demo: $W/bin2/krelay-demo-cluster exited with status 3 before it was ready (no bootstrap list; its own messages, if any, are above)" \
    "$W/d9.out" || kr_fail "--demo, cluster exits 3: $(cat "$W/d9.out")"
grep -qx "cannot start: test" "$W/d9.out" ||
    kr_fail "--demo: the cluster's own message is lost: $(cat "$W/d9.out")"

# 10. --demo -c FILE checked with -t (the cluster is not started): an
# example as shipped advertises a name the demo's clients may not reach
# Without a syslog socket (no syslog daemon: this machine may have none)
# a syslog target is warned about too (rules_examples.sh checks that);
# here the examples' syslog targets become stdout, line for line.
EXD=$top_srcdir/conf/examples
if [ ! -S /dev/log ]; then
    mkdir -p "$W/examples"
    for ex in "$top_srcdir"/conf/examples/*.ini; do
        sed 's/^target = syslog$/target = stdout/' "$ex" >"$W/examples/${ex##*/}"
    done
    EXD=$W/examples
fi
EX=$EXD/audit-only.ini
"$KR_KRELAY" --demo -t -c "$EX" >"$W/d10.out" 2>"$W/d10.err" ||
    kr_fail "--demo -t audit-only.ini: $(cat "$W/d10.err")"
WANT="krelay: warning: $EX:10: \[listener\]: advertised_host ="
WANT="$WANT kafka-proxy.example.com: clients of the demo are told NodeId n is"
WANT="$WANT at kafka-proxy.example.com:19100 + n and must reach that name from"
WANT="$WANT where they run; to try this file on this machine, copy it with"
WANT="$WANT advertised_host = 127.0.0.1 (--demo keeps it as written)\$"
grep -q "^$WANT" "$W/d10.err" || kr_fail "--demo -t: $(cat "$W/d10.err")"
[ "$(wc -l <"$W/d10.err")" -eq 1 ] || kr_fail "--demo -t: $(cat "$W/d10.err")"
grep -q "^krelay: $EX: configuration OK (1 warning)$" "$W/d10.out" ||
    kr_fail "--demo -t: $(head -n 1 "$W/d10.out")"
"$KR_KRELAY" --demo -t -W -c "$EX" >/dev/null 2>&1 &&
    kr_fail "--demo -t -W passed audit-only.ini as shipped"
# without --demo it is no warning (the name is right for production)
"$KR_KRELAY" -t -W -c "$EX" >"$W/d10b.out" 2>&1 ||
    kr_fail "-t -W audit-only.ini: $(cat "$W/d10b.out")"
# the README's way to try an example: then every one passes, -W too
# (with the TLS files tls.ini names: made here, as rules_examples.sh does)
command -v openssl >/dev/null 2>&1 || kr_skip "openssl (TLS files)"
bash "$top_srcdir/tests/tools/tls_certs.sh" --examples "$W/tls" ||
    kr_fail "tls_certs.sh could not make the TLS files"
for ex in "$EXD"/*.ini; do
    sed -e 's/^advertised_host = .*/advertised_host = 127.0.0.1/' \
        -e "/^ssl_[a-z_]* = /s|/etc/krelay/tls/|$W/tls/|" "$ex" \
        >"$W/try-${ex##*/}"
    "$KR_KRELAY" --demo -t -W -c "$W/try-${ex##*/}" >"$W/d10c.out" 2>&1 ||
        kr_fail "--demo -t -W, ${ex##*/} with advertised_host = 127.0.0.1:" \
            "$(grep -v '^  \|^rule\|^compiled' "$W/d10c.out")"
done
# a NodeId range short of the demo's, and no [upstream]: loads (the demo
# cluster stands in) with the range warned about
printf '[listener]\nlisten = 127.0.0.1:%s\nbroker_port_base = %s\nnode_id_min = 1\nnode_id_max = 2\n' \
    "$base" "$base" >"$W/short.ini"
"$KR_KRELAY" --demo -t -c "$W/short.ini" >"$W/d11.out" 2>"$W/d11.err" ||
    kr_fail "--demo -t, no [upstream]: $(cat "$W/d11.err")"
WANT="krelay: warning: $W/short.ini:1: \[listener\]: node_id_min..node_id_max is"
WANT="$WANT 1..2, but the demo cluster's brokers are NodeIds 1..3: a client's"
WANT="$WANT connection closes at the first Metadata response naming one"
WANT="$WANT outside the range (set node_id_min = 1, node_id_max = 3)\$"
grep -q "^$WANT" "$W/d11.err" || kr_fail "--demo -t, short range: $(cat "$W/d11.err")"
[ "$(wc -l <"$W/d11.err")" -eq 1 ] || kr_fail "--demo -t: $(cat "$W/d11.err")"
# ... and without --demo, [upstream] is required as always (the error
# says how to try the file on the demo)
"$KR_KRELAY" -t -c "$W/short.ini" >"$W/d12.out" 2>&1 &&
    kr_fail "-t passed a file without [upstream]"
grep -qx "krelay: $W/short.ini:5: no \[upstream\] section (to try this file on the demo cluster: krelay --demo -c FILE)" "$W/d12.out" ||
    kr_fail "-t, no [upstream]: $(cat "$W/d12.out")"

# 11. --listen and --broker-port-base: --demo without -c only (exit 2,
# like -W without -t), checked as options, not as a line of a file
usage_error() {
    local want=$1 rc=0
    shift
    "$KR_KRELAY" "$@" >"$W/u.out" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || kr_fail "krelay $*: exit $rc, want 2: $(cat "$W/u.out")"
    [ "$(head -n 1 "$W/u.out")" = "$want" ] ||
        kr_fail "krelay $*: $(head -n 1 "$W/u.out"), want $want"
    # the error, then at most a pointer to --help (not the whole usage)
    case "$(sed -n 2,\$p "$W/u.out")" in
    "" | "Try 'krelay --help' for the options.") ;;
    *) kr_fail "krelay $*: after the error: $(sed -n 2,\$p "$W/u.out")" ;;
    esac
    if grep -q '(demo)' "$W/u.out"; then
        kr_fail "krelay $*: names (demo): $(cat "$W/u.out")"
    fi
}
WITH_C="applies to --demo without -c only (with -c FILE, FILE's [listener] says where krelay listens)"
usage_error "krelay: --listen $WITH_C" -c "$W/ok.ini" --listen 127.0.0.1:9
usage_error "krelay: --broker-port-base $WITH_C" -c "$W/ok.ini" \
    --broker-port-base 19092
usage_error "krelay: --listen $WITH_C" --demo -c "$W/ok.ini" \
    --listen "127.0.0.1:$base"
usage_error "krelay: --broker-port-base $WITH_C" --demo -t -c "$W/ok.ini" \
    --broker-port-base 19092
usage_error "krelay: --listen $WITH_C" --listen 127.0.0.1:9
usage_error "krelay: --listen nonsense: expected HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)" \
    --demo --listen nonsense
usage_error "krelay: --listen 127.0.0.1:$((base + 2)): port $((base + 2)) is NodeId 2's (--broker-port-base $base: NodeId n listens on $base + n)" \
    --demo --listen "127.0.0.1:$((base + 2))" --broker-port-base "$base"
usage_error "krelay: --broker-port-base 65533: expected a port 1-65532 (NodeId 3 listens on it + 3)" \
    --demo --broker-port-base 65533
kr_listening "$base" && kr_fail "a refused --demo listens on $base"
# a wildcard --listen: warned about as the option, not as "(demo):4"
"$KR_KRELAY" --demo -t --listen "0.0.0.0:$base" --broker-port-base "$base" \
    >"$W/d13.out" 2>"$W/d13.err" || kr_fail "--demo -t --listen 0.0.0.0: $(cat "$W/d13.err")"
WANT="krelay: warning: --listen 0.0.0.0:$base is a wildcard address: the demo"
WANT="$WANT tells every client that the brokers are at 127.0.0.1, so clients on"
WANT="$WANT other machines cannot connect (for them: --demo -c FILE, its"
WANT="$WANT listener with advertised_host)"
[ "$(cat "$W/d13.err")" = "$WANT" ] ||
    kr_fail "--demo -t --listen 0.0.0.0: $(cat "$W/d13.err")"
grep -qx "krelay: (demo): configuration OK (1 warning)" "$W/d13.out" ||
    kr_fail "--demo -t --listen 0.0.0.0: $(head -n 1 "$W/d13.out")"

# 11b. -T goes with what -t goes with: --demo, alone or with -c FILE, and
# does not start the cluster either (bin2's exits 3 at once): FILE as
# --demo -c loads it, less the [upstream] the cluster stands in for, so
# the output loads back the same under --demo; with -t, -d or -p it is
# refused as before
"$W/bin2/krelay" --demo -T -c "$W/short.ini" >"$W/d14.ini" 2>"$W/d14.err" ||
    kr_fail "--demo -T -c: $(cat "$W/d14.err")"
[ ! -s "$W/d14.err" ] || kr_fail "--demo -T -c: $(cat "$W/d14.err")"
grep -qx "; effective configuration from $W/short.ini" "$W/d14.ini" &&
    grep -qx "; no \[upstream\]: krelay --demo points the listeners at its demo cluster" "$W/d14.ini" &&
    grep -qx "listen = 127.0.0.1:$base" "$W/d14.ini" &&
    grep -qx "node_id_max = 2" "$W/d14.ini" ||
    kr_fail "--demo -T -c: $(head -n 12 "$W/d14.ini")"
grep -q '^\[upstream\|^bootstrap_servers\|^upstream =' "$W/d14.ini" &&
    kr_fail "--demo -T -c prints the stand-in: $(grep -A1 upstream "$W/d14.ini")"
"$KR_KRELAY" --demo -T -c "$W/d14.ini" | tail -n +2 >"$W/d14b.ini" &&
    tail -n +2 "$W/d14.ini" | cmp -s - "$W/d14b.ini" ||
    kr_fail "--demo -T of its -T differs: $(tail -n +2 "$W/d14.ini" | diff - "$W/d14b.ini" | head -5)"
"$W/bin2/krelay" --demo -T --listen "127.0.0.1:$base" \
    --broker-port-base "$base" >"$W/d15.ini" 2>"$W/d15.err" ||
    kr_fail "--demo -T: $(cat "$W/d15.err")"
grep -qx "\[listener demo\]" "$W/d15.ini" &&
    grep -qx "listen = 127.0.0.1:$base" "$W/d15.ini" &&
    grep -qx "broker_port_base = $base" "$W/d15.ini" ||
    kr_fail "--demo -T: $(head -n 12 "$W/d15.ini")"
"$KR_KRELAY" --demo -t -W -c "$W/d15.ini" >"$W/d15.out" 2>&1 ||
    kr_fail "--demo -t -W on --demo -T's output: $(cat "$W/d15.out")"
TWITH="krelay: -T goes with -c FILE and --demo only"
usage_error "$TWITH (not with -t)" --demo -T -t -c "$W/ok.ini"
usage_error "$TWITH (not with -t)" -T -t -c "$W/ok.ini"
usage_error "$TWITH (not with -d)" --demo -T -d
usage_error "$TWITH (not with -p)" -T -p "$W/x.pid" -c "$W/ok.ini"

# 12. started with fds 0, 1 and 2 closed (a supervisor's `krelay >&-`):
# they are /dev/null before krelay opens anything, so the log file (or a
# client's socket) cannot become fd 1 and get [audit] target = stdout's
# lines
conf "$W/closed.ini" "$W/closed.log" stdout
printf '[rule a]\naudit = true\n' >>"$W/closed.ini"
"$KR_KRELAY" -c "$W/closed.ini" 0<&- 1>&- 2>&- &
pid=$!
KR_PIDS+=("$pid")
kr_wait_port "$base" 60 "$pid" || kr_fail "krelay (fds closed) did not listen"
for fd in 0 1 2; do
    [ "$(readlink "/proc/$pid/fd/$fd")" = /dev/null ] ||
        kr_fail "krelay started with fd $fd closed: it is" \
            "$(readlink "/proc/$pid/fd/$fd"), not /dev/null"
done
exec 3<>"/dev/tcp/127.0.0.1/$base" || kr_fail "cannot connect to $base"
exec 3>&-
kr_wait_for 60 grep -q "connect to upstream 127.0.0.1:1: \|client closed the connection" \
    "$W/closed.log" ||
    kr_fail "no connection line: $(tail -3 "$W/closed.log")"
kr_stop "$pid" krelay "$W/closed.log"
grep -q '"type":"connection"' "$W/closed.log" &&
    kr_fail "audit lines in the log file: $(grep '"type"' "$W/closed.log")"
kr_log "PASS: -t opens the log and audit targets, prefixed errors, signal" \
    "lines, warnings and -W, no librdkafka in krelay, --demo without its" \
    "cluster, --demo -t -c warnings, --demo -T, --listen refused with -c," \
    "fds 0-2 closed at start"
