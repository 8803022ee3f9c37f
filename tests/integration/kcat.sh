#!/bin/bash
# kcat (librdkafka 2.0.2) through krelay: metadata, produce, consume,
# idempotent zstd produce, and a consumer group with committed offsets.
# (make check runs *.sh with $(SHELL), which may be dash)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 150
kr_start_mock kcat:3 kgrp:2
kr_start_krelay

W=$KR_WORK
KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000
    -X topic.metadata.refresh.interval.ms=5000)

# 1. Metadata: every broker is krelay's.
kr_run 30 "${KC[@]}" -L >"$W/metadata.txt" 2>"$W/kcat-L.log" ||
    kr_fail "kcat -L failed"
awk '$1 == "broker" && $3 == "at" {
        n = split($4, hp, ":"); print $2, hp[1], hp[n] }' \
    "$W/metadata.txt" >"$W/brokers.txt"
kr_check_brokers "$W/brokers.txt"
grep -q 'topic "kcat" with 3 partitions' "$W/metadata.txt" ||
    kr_fail "topic kcat not in metadata: $(cat "$W/metadata.txt")"

# 2. Produce 300 messages over all partitions, consume them back.
kr_payloads "$W/in.txt" 300 kcat
kr_run 60 "${KC[@]}" -P -t kcat -X linger.ms=5 <"$W/in.txt" \
    2>"$W/kcat-P.log" || kr_fail "kcat -P failed"
kr_run 60 "${KC[@]}" -C -t kcat -o beginning -e -q -f '%s\n' \
    >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
sort "$W/in.txt" >"$W/in.sorted"
sort "$W/out.txt" >"$W/out.sorted"
cmp -s "$W/in.sorted" "$W/out.sorted" ||
    kr_fail "consumed messages differ: $(diff "$W/in.sorted" "$W/out.sorted" | head -5)"
kr_log "kcat: 300 messages produced and consumed back identical"

# 3. Keys and partition: an idempotent, zstd-compressed producer to
# partition 1, read back from that partition with key and offset.
kr_payloads "$W/idem.txt" 100 idem
sed 's/^\(idem-[0-9]*\)-/\1:/' "$W/idem.txt" >"$W/idem.kv"
kr_run 60 "${KC[@]}" -P -t kcat -p 1 -K : -z zstd \
    -X enable.idempotence=true <"$W/idem.kv" 2>"$W/kcat-idem.log" ||
    kr_fail "idempotent kcat -P failed"
kr_run 60 "${KC[@]}" -C -t kcat -p 1 -o beginning -e -q -f '%k:%s\n' \
    >"$W/p1.txt" 2>"$W/kcat-C1.log" || kr_fail "kcat -C -p 1 failed"
grep '^idem-' "$W/p1.txt" >"$W/p1.idem" || true
cmp -s "$W/idem.kv" "$W/p1.idem" ||
    kr_fail "partition 1 differs: $(diff "$W/idem.kv" "$W/p1.idem" | head -5)"
kr_log "kcat: 100 idempotent zstd messages with keys, in order"

# 4. Consumer group: read everything, commit; then only new messages.
kr_payloads "$W/g1.txt" 50 grp1
kr_run 60 "${KC[@]}" -P -t kgrp <"$W/g1.txt" 2>"$W/kcat-gP1.log" ||
    kr_fail "kcat -P kgrp failed"
GC=("${KC[@]}" -G krelay-test-group -X auto.offset.reset=earliest
    -X enable.auto.commit=true -X auto.commit.interval.ms=200
    -X session.timeout.ms=6000 -q -f '%s\n')
kr_run 60 "${GC[@]}" -c 50 kgrp >"$W/g1.out" 2>"$W/kcat-G1.log" ||
    kr_fail "kcat -G (first) failed"
cmp -s <(sort "$W/g1.txt") <(sort "$W/g1.out") ||
    kr_fail "group consumer 1 got: $(head -3 "$W/g1.out")"
kr_payloads "$W/g2.txt" 20 grp2
kr_run 60 "${KC[@]}" -P -t kgrp <"$W/g2.txt" 2>"$W/kcat-gP2.log" ||
    kr_fail "kcat -P kgrp (2) failed"
kr_run 60 "${GC[@]}" -c 20 kgrp >"$W/g2.out" 2>"$W/kcat-G2.log" ||
    kr_fail "kcat -G (second) failed"
cmp -s <(sort "$W/g2.txt") <(sort "$W/g2.out") ||
    kr_fail "group consumer 2 (after commit) got: $(head -3 "$W/g2.out")"
kr_log "kcat: consumer group resumed from its committed offsets"

kr_finish
