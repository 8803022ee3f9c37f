#!/bin/bash
# [process] workers = 2 (issue 12, "Every core"): two event loops, each
# accepting on its own SO_REUSEPORT socket of every listener address.
#   1. kcat producers and a consumer through krelay: every message comes
#      back, and both workers served connections (c#0.* and c#1.* in the
#      log and in the audit log).
#   2. SIGHUP adds a deny rule: producers on new connections are denied by
#      both workers (audit lines "denied" from c#0.* and c#1.*); SIGUSR1
#      reopens the log.
#   3. SIGTERM with requests in flight on both workers (their responses
#      held by fault_latency_ms): every one is answered, krelay exits 0,
#      and the stop report's totals are the sum over the workers (the
#      connections the log says were accepted, the requests the audit log
#      has: every request is audited).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_need_py confluent_kafka
kr_setup 150
W=$KR_WORK
cat >"$W/rules.ini" <<EOR

[process]
workers = 2

[audit]
target = $W/audit.log

[rule audit-all]
audit = true
EOR
KR_EXTRA_CONF=$W/rules.ini
kr_start_mock wk:3 wkd:1 slow:1
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT: no workers"
CONF=$W/krelay.ini
grep -q "started (1 listener group, 2 workers)" "$W/krelay.log" ||
    kr_fail "not 2 workers: $(grep started "$W/krelay.log")"

# conn_ids of worker $1 in the audit lines matching $2 (a grep pattern)
audit_conns() {
    grep -- "$2" "$W/audit.log" | grep -o "\"conn_id\":\"c#$1\.[0-9]*\"" |
        sort -u | wc -l
}

# 1. eight producers at once (each its own connections), one consumer
KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000)
pids=()
for i in 1 2 3 4 5 6 7 8; do
    kr_payloads "$W/in.$i" 40 "wk$i"
    kr_run 60 "${KC[@]}" -P -t wk <"$W/in.$i" 2>"$W/kcat-P$i.log" &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || kr_fail "a kcat producer failed: $(cat "$W"/kcat-P*.log)"
done
kr_run 60 "${KC[@]}" -C -t wk -o beginning -e -q -f '%s\n' >"$W/out.txt" \
    2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
cmp -s <(sort "$W"/in.*) <(sort "$W/out.txt") ||
    kr_fail "consumed messages differ: $(diff <(sort "$W"/in.*) \
        <(sort "$W/out.txt") | head -5)"
for w in 0 1; do
    grep -Eq "\[c#$w\.[0-9]+ [^]]*\] accepted" "$W/krelay.log" ||
        kr_fail "worker $w accepted no connection"
    n=$(audit_conns "$w" '"api":"Produce"')
    [ "$n" -ge 1 ] || kr_fail "no Produce audited on worker $w"
done
kr_log "1: 320 messages through both workers: Produce on" \
    "$(audit_conns 0 '"api":"Produce"') connections of worker 0," \
    "$(audit_conns 1 '"api":"Produce"') of worker 1"

# 2. SIGHUP: a deny rule for topic wkd, and fault latency for topic slow
cat >>"$CONF" <<EOR

[rule deny-wkd]
api = Produce
topic = wkd
deny = true

[rule slow]
api = Produce
topic = slow
fault_latency_ms = 3000
EOR
kill -HUP "$KR_KRELAY_PID"
# the line comes once both workers applied the reload: every producer
# after it is denied, whichever worker accepts it (check_worker's
# reload_line_after_every_worker holds a worker to show the line waits)
kr_wait_for 20 grep -q "SIGHUP: reloaded .*: 1 listener group (0 new), 3 rules" \
    "$W/krelay.log" || kr_fail "no reload: $(tail -5 "$W/krelay.log")"
kill -USR1 "$KR_KRELAY_PID"
kr_wait_for 20 grep -q "SIGUSR1: reopening the log and audit files" \
    "$W/krelay.log" || kr_fail "no reopen: $(tail -5 "$W/krelay.log")"
# sixteen producers, sixteen connections to the broker of wkd: denied
kr_run 60 "$KR_PY" - "$KR_BOOTSTRAP" >"$W/deny.txt" 2>"$W/deny.log" <<'PYEOF' ||
import sys
from confluent_kafka import Producer
res = {}
def cb(err, msg):
    k = err.name() if err is not None else "OK"
    res[k] = res.get(k, 0) + 1
ps = [Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 0,
                "message.timeout.ms": 20000, "retries": 0})
      for _ in range(16)]
for i, p in enumerate(ps):
    p.produce("wkd", "denied-%02d" % i, on_delivery=cb)
for p in ps:
    p.flush(30)
print(sorted(res.items()))
PYEOF
    kr_fail "deny client failed: $(tail -5 "$W/deny.log")"
grep -qx "\[('TOPIC_AUTHORIZATION_FAILED', 16)\]" "$W/deny.txt" ||
    kr_fail "want 16 denied, got: $(cat "$W/deny.txt")"
for w in 0 1; do
    n=$(audit_conns "$w" '"actions":\["denied"\]')
    [ "$n" -ge 1 ] || kr_fail "worker $w denied nothing after the reload"
done
kr_log "2: after SIGHUP both workers deny: $(audit_conns 0 denied) and" \
    "$(audit_conns 1 denied) connections"

# 3. sixteen producers, each with a Produce held 3 s by krelay when
# SIGTERM comes (kr_finish sends it): every one is answered
kr_run 90 "$KR_PY" - "$KR_BOOTSTRAP" "$W" >"$W/drain.txt" 2>"$W/drain.log" <<'PYEOF' &
import os, sys, time
from confluent_kafka import Producer
res = {}
def cb(err, msg):
    k = err.name() if err is not None else "OK"
    res[k] = res.get(k, 0) + 1
ps = [Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 0,
                "message.timeout.ms": 60000, "retries": 0})
      for _ in range(16)]
# connected first (one slow round), then the messages SIGTERM finds
for i, p in enumerate(ps):
    p.produce("slow", "warm-%02d" % i, on_delivery=cb)
for p in ps:
    p.flush(30)
for i, p in enumerate(ps):
    p.produce("slow", "held-%02d" % i, on_delivery=cb)
    p.poll(0)
time.sleep(1)
open(os.path.join(sys.argv[2], "inflight"), "w").close()
for p in ps:
    p.flush(60)
print(sorted(res.items()))
PYEOF
DRAIN=$!
KR_PIDS+=("$DRAIN")
kr_wait_for 60 test -e "$W/inflight" ||
    kr_fail "the drain client never got going: $(tail -5 "$W/drain.log")"

after_stop() {
    wait "$DRAIN" || kr_fail "drain client failed: $(tail -5 "$W/drain.log")"
    grep -qx "\[('OK', 32)\]" "$W/drain.txt" ||
        kr_fail "want 32 delivered, got: $(cat "$W/drain.txt")"
    grep -q "drain: done in" "$W/krelay.log" ||
        kr_fail "no drain end: $(grep drain "$W/krelay.log")"
    for w in 0 1; do
        n=$(grep "\"name\":\"slow\"" "$W/audit.log" | grep '"delayed"' |
            grep -c "\"conn_id\":\"c#$w\.")
        [ "$n" -ge 1 ] || kr_fail "worker $w held no slow Produce"
    done
    # the totals: every worker's connections and requests
    local line conns reqs acc aud
    line=$(grep "notice: totals: " "$W/krelay.log") ||
        kr_fail "no stop report"
    conns=$(sed -E 's/.*totals: ([0-9]+) connections?, .*/\1/' <<<"$line")
    reqs=$(sed -E 's/.*, ([0-9]+) requests? \(.*/\1/' <<<"$line")
    acc=$(grep -Ec "\[c#[01]\.[0-9]+ [^]]*\] accepted" "$W/krelay.log")
    aud=$(grep -c '"type":"request"' "$W/audit.log")
    [ "$conns" = "$acc" ] ||
        kr_fail "totals: $conns connections, the log accepted $acc: $line"
    [ "$reqs" = "$aud" ] ||
        kr_fail "totals: $reqs requests, the audit log has $aud: $line"
    kr_log "3: SIGTERM drained both workers: 32 delivered;" \
        "totals $conns connections = accepted by workers 0 and 1," \
        "$reqs requests = audited"
}
kr_finish after_stop
