#!/bin/bash
# Reload of [upstream] (issue 12): SIGHUP with a config whose
# bootstrap_servers moved from mock cluster A to mock cluster B.  A
# producer connected before the reload keeps producing to A on its open
# connections; a producer that connects after it goes to B.  Checked by
# consuming each cluster directly (not through krelay).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_need_py confluent_kafka
kr_setup 90
W=$KR_WORK

# two clusters: B first, in a directory of its own (kr_start_mock's files)
mkdir -p "$W/b" || exit 99
KR_WORK=$W/b
kr_start_mock upr:1
B_BOOT=$KR_MOCK_BOOTSTRAP
KR_WORK=$W
kr_start_mock upr:1
A_BOOT=$KR_MOCK_BOOTSTRAP
[ "$A_BOOT" != "$B_BOOT" ] || kr_fail "test bug: one cluster twice"
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no reload"
CONF=$W/krelay.ini

# A producer on its own connections: "old-N" every 10 ms, at least 300,
# until the reload is done ($W/reload.done), then 100 more after it.
kr_run 120 "$KR_PY" "$(dirname "$0")/steady_producer.py" "$KR_BOOTSTRAP" upr old \
    "$W/old.started" "$W/reload.done" 300 100 >"$W/old.txt" 2>"$W/old.log" &
OLD=$!
KR_PIDS+=("$OLD")
kr_wait_for 60 test -e "$W/old.started" ||
    kr_fail "the first producer delivered nothing: $(tail -n 5 "$W/old.log")"

# the reload: bootstrap_servers now B's
sed -i "s/^bootstrap_servers = .*/bootstrap_servers = $B_BOOT/" "$CONF"
grep -q "^bootstrap_servers = $B_BOOT\$" "$CONF" || kr_fail "test bug: sed"
kill -HUP "$KR_KRELAY_PID"
kr_wait_for 60 grep -q "reloaded .*krelay.ini" "$W/krelay.log" ||
    kr_fail "no reload line: $(grep -i reload "$W/krelay.log" | tail -3)"
grep -q "\[upstream\] bootstrap_servers changed: new connections go to" \
    "$W/krelay.log" || kr_fail "the reload did not say what it did"
grep -q "restart" <(grep "reload" "$W/krelay.log") &&
    kr_fail "the reload still asks for a restart: $(grep restart "$W/krelay.log")"
: >"$W/reload.done"

# a new client, after the reload: B
for i in 1 2 3 4 5; do echo "new-$i"; done |
    kr_run 30 kcat -b "$KR_BOOTSTRAP" -P -t upr 2>"$W/kcat-P.log" ||
    kr_fail "producing through krelay after the reload failed"

wait "$OLD" || kr_fail "the first producer failed: $(tail -n 5 "$W/old.log")"
cat "$W/old.txt"
read -r _ NOLD _ NBAD _ NPROD <"$W/old.txt"
[ "$NBAD" = 0 ] && [ "$NOLD" = "$NPROD" ] && [ "$NOLD" -ge 300 ] ||
    kr_fail "the first producer lost messages: $(cat "$W/old.txt")"

# every connection either cluster accepted so far was krelay's; the
# direct consumers below are this test's own (taken out of A's accept
# log again for kr_finish's check)
kr_check_no_direct
A_ACCEPT=$KR_ACCEPT_LOG
KR_ACCEPT_LOG=$W/b/accept.txt
kr_check_no_direct
KR_ACCEPT_LOG=$A_ACCEPT

# each cluster, directly
kr_run 30 kcat -b "$A_BOOT" -C -t upr -o beginning -e -q -f '%s\n' \
    >"$W/a.txt" 2>"$W/kcat-a.log" || kr_fail "consuming A failed"
kr_run 30 kcat -b "$B_BOOT" -C -t upr -o beginning -e -q -f '%s\n' \
    >"$W/b.txt" 2>"$W/kcat-b.log" || kr_fail "consuming B failed"
sed -i '/ comm=kcat$/d' "$KR_ACCEPT_LOG"
NA_OLD=$(grep -c '^old-' "$W/a.txt")
NA_NEW=$(grep -c '^new-' "$W/a.txt")
NB_OLD=$(grep -c '^old-' "$W/b.txt")
NB_NEW=$(grep -c '^new-' "$W/b.txt")
kr_log "A: $NA_OLD old, $NA_NEW new; B: $NB_OLD old, $NB_NEW new"
[ "$(grep '^old-' "$W/a.txt" | sort -u | wc -l)" -eq "$NOLD" ] ||
    kr_fail "A has $NA_OLD of the first producer's $NOLD messages"
[ "$NA_NEW" -eq 0 ] || kr_fail "the new client's messages went to A"
[ "$NB_OLD" -eq 0 ] ||
    kr_fail "the first producer's open connections went to B ($NB_OLD)"
[ "$NB_NEW" -eq 5 ] || kr_fail "B has $NB_NEW of the new client's 5"
# the connection opened before the reload produced after it too: its
# last messages (the 100 after reload.done) are in A
grep -q "^old-$(printf '%05d' $((NPROD - 1)))\$" "$W/a.txt" ||
    kr_fail "the first producer's last message is not in A"
# krelay closed no connection of the first producer
if grep -E "\] (upstream|idle|cannot|malformed|closing)" "$W/krelay.log" |
   grep -v "debug:" | grep -q .; then
    kr_fail "krelay closed a connection: $(grep -E "\] (upstream|idle|cannot|malformed|closing)" "$W/krelay.log" | head -3)"
fi
kr_log "upstream reload: open connections stayed with A ($NOLD messages)," \
    "new ones went to B"
kr_finish
