#!/bin/bash
# Reload (issue 3): SIGHUP while a client produces loses no message and
# closes no connection; the new rules apply to the running connections;
# a listener added by the reload serves clients; a broken config is
# refused with FILE:LINE errors and traffic goes on.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_need_py confluent_kafka
kr_setup 90
W=$KR_WORK
: >"$W/rules.ini"
KR_EXTRA_CONF=$W/rules.ini
kr_start_mock rld:1
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no reload"
CONF=$W/krelay.ini
cp "$CONF" "$W/krelay-base.ini"
EXTRA_PORT=$(kr_free_ports 5) || exit 99

# A producer on one connection: a message every 10 ms, at least 600
# (about 6 seconds) and until every reload below is done ($W/reloads.done),
# so that it produces across all of them however slow the machine is.
# $W/producer.started appears with its first delivered message.
kr_run 120 "$KR_PY" "$(dirname "$0")/steady_producer.py" "$KR_BOOTSTRAP" rld reload \
    "$W/producer.started" "$W/reloads.done" 600 1 >"$W/producer.txt" \
    2>"$W/producer.log" &
PRODUCER=$!
KR_PIDS+=("$PRODUCER")
# the reloads happen while it produces: wait for its first delivery
kr_wait_for 60 test -e "$W/producer.started" ||
    kr_fail "the producer delivered nothing: $(tail -n 5 "$W/producer.log")"

# 1. a valid reload: a rule, an audit sink and a second listener
cat "$W/krelay-base.ini" >"$CONF"
cat >>"$CONF" <<EOR
[listener extra]
listen = 127.0.0.1:$EXTRA_PORT
advertised_host = 127.0.0.1
broker_port_base = $EXTRA_PORT
node_id_min = 1
node_id_max = 3

[audit]
target = $W/audit.log

[rule audit-produce]
api = Produce
audit = true
EOR
# the unnamed [listener] must be named now that there are two
sed -i 's/^\[listener\]$/[listener main]/' "$CONF"
kill -HUP "$KR_KRELAY_PID"
kr_wait_port "$EXTRA_PORT" 60 "$KR_KRELAY_PID" ||
    kr_fail "the reload did not open the new listener"
# the reload line comes after the new listener is bound: wait for it too
kr_wait_for 60 grep -q "reloaded .*krelay.ini: 2 listener groups" \
    "$W/krelay.log" || kr_fail "no reload line in krelay.log"
# the running producer connection gets the new rule: wait (bounded) for
# one of its Produce requests in the audit log
kr_wait_for 60 grep -q '"api":"Produce"' "$W/audit.log" ||
    kr_fail "the reloaded rule did not apply to the running connection"

# 2. a broken reload: refused with FILE:LINE, traffic goes on
cp "$CONF" "$W/krelay-good.ini"
printf '[rule broken]\napi = NoSuchApi\ndeny = true\n' >>"$CONF"
BAD_LINE=$(( $(wc -l <"$CONF") - 1 ))
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 60 grep -q "reload of .* refused" "$W/krelay.log"
grep -q "reload refused: $CONF:$BAD_LINE: 'api': bad value 'NoSuchApi'" \
    "$W/krelay.log" || kr_fail "broken config: no FILE:LINE error logged"

# The inode of the socket listening on 127.0.0.1:PORT (/proc/net/tcp):
# the same inode is the same socket, never closed and bound again.
listen_inode() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {
        print $10; exit }' /proc/net/tcp
}
# kr_log lines that say PORT was (re)bound
listening_lines() {
    grep -c "listening on 127.0.0.1:$1 " "$W/krelay.log"
}
refusals() {
    grep -c "reload of .* refused" "$W/krelay.log"
}

# 3. a refused reload that drops [listener extra] and adds a listener
# that cannot bind (its broker ports are the mock's): the running extra
# listener is never touched (same socket, not reopened, still listening)
INODE=$(listen_inode "$EXTRA_PORT")
[ -n "$INODE" ] || kr_fail "no listening socket on $EXTRA_PORT"
NLISTEN=$(listening_lines "$EXTRA_PORT")
NREF=$(refusals)
CLASH_PORT=$((EXTRA_PORT + 4))
sed '/^\[listener extra\]$/,$d' "$W/krelay-good.ini" >"$CONF"
cat >>"$CONF" <<EOR
[listener clash]
listen = 127.0.0.1:$CLASH_PORT
advertised_host = 127.0.0.1
broker_port_base = $KR_MOCK_BASE
node_id_min = 1
node_id_max = 3
EOR
grep -q '^\[listener extra\]' "$CONF" && kr_fail "test bug: extra kept"
more_refusals() {
    [ "$(refusals)" -gt "$NREF" ]
}
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 60 more_refusals || kr_fail "the clashing reload was not refused"
grep -q "refused: bind 127.0.0.1:$((KR_MOCK_BASE + 1)) (clash/NodeId 1)" \
    "$W/krelay.log" || kr_fail "the refusal does not name the clashing bind"
[ "$(listening_lines "$EXTRA_PORT")" -eq "$NLISTEN" ] ||
    kr_fail "the refused reload reopened the running listener $EXTRA_PORT"
[ "$(listen_inode "$EXTRA_PORT")" = "$INODE" ] ||
    kr_fail "the refused reload replaced the socket of $EXTRA_PORT"
kr_listening "$CLASH_PORT" &&
    kr_fail "the refused reload left $CLASH_PORT listening"

# 4. a valid reload renaming [listener extra] (same addresses): the new
# group takes the running sockets over, none is closed and bound again
sed 's/^\[listener extra\]$/[listener extra2]/' "$W/krelay-good.ini" >"$CONF"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 60 grep -q "\[listener extra\] removed: its listeners are closed, its [0-9]* connections\{0,1\} stays\{0,1\}$" \
    "$W/krelay.log" || kr_fail "no removed line: $(grep 'listener extra' "$W/krelay.log")"
TOOK="listening on 127.0.0.1:$EXTRA_PORT (extra2/bootstrap): the socket"
TOOK="$TOOK of extra/bootstrap, kept open"
grep -qF "$TOOK" "$W/krelay.log" ||
    kr_fail "the renamed listener did not take the socket over"
[ "$(listen_inode "$EXTRA_PORT")" = "$INODE" ] ||
    kr_fail "the rename reload replaced the socket of $EXTRA_PORT"
[ "$(listen_inode "$((EXTRA_PORT + 3))")" = "" ] &&
    kr_fail "NodeId 3 of the renamed listener is not listening"

: >"$W/reloads.done"
wait "$PRODUCER" || kr_fail "producer failed"
cat "$W/producer.txt"
read -r _ NMSG _ NBAD _ NPROD <"$W/producer.txt"
[ "$NBAD" = 0 ] && [ "$NMSG" = "$NPROD" ] && [ "$NMSG" -ge 600 ] ||
    kr_fail "messages lost across the reloads: $(cat "$W/producer.txt")"

# the running producer connection got the new rule: its later Produce
# requests are in the audit log
grep -q '"api":"Produce"' "$W/audit.log" ||
    kr_fail "the reloaded rule did not apply to the running connection"
# no connection was closed by krelay while the producer ran
if grep -E "\] (upstream|idle|cannot|malformed|closing)" "$W/krelay.log" |
   grep -v "debug:" | grep -q .; then
    kr_fail "krelay closed a connection: $(grep -E "\] (upstream|idle|cannot|malformed|closing)" "$W/krelay.log" | head -3)"
fi

# the new listener serves clients; the old one still does
kr_run 30 kcat -b "127.0.0.1:$EXTRA_PORT" -C -t rld -o beginning -e -q \
    -f '%s\n' >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat via the new listener failed"
[ "$(sort -u "$W/out.txt" | wc -l)" -eq "$NMSG" ] ||
    kr_fail "expected $NMSG messages, got $(sort -u "$W/out.txt" | wc -l)"
echo more | kr_run 30 kcat -b "$KR_BOOTSTRAP" -P -t rld 2>"$W/kcat-P.log" ||
    kr_fail "producing after the refused reload failed"
kr_log "reloads: $NMSG messages delivered, no connection closed, new listener works"
kr_finish
