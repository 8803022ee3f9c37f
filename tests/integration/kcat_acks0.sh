#!/bin/bash
# kcat -X acks=0 through krelay.  librdkafka 2.0.2's mock broker answers
# Produce requests with Acks=0 (Kafka never does): krelay drops those
# responses, which the client does not expect, instead of closing the
# connection ("no request in flight").
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_need_cmd kcat
kr_setup 120
kr_start_mock acks0:2
kr_start_krelay

W=$KR_WORK
KC=(kcat -b "$KR_BOOTSTRAP" -X socket.timeout.ms=10000)

kr_payloads "$W/in.txt" 500 acks0
kr_run 60 "${KC[@]}" -P -t acks0 -X acks=0 -X linger.ms=5 \
    -X batch.num.messages=20 <"$W/in.txt" 2>"$W/kcat-P.log" ||
    kr_fail "kcat -P -X acks=0 failed: $(head -5 "$W/kcat-P.log")"
# a connection krelay closed shows up as librdkafka FAIL/ERROR lines
grep -qi "error\|fail\|disconnect" "$W/kcat-P.log" &&
    kr_fail "kcat -P reported errors: $(head -5 "$W/kcat-P.log")"
# Nothing tells when the last acks=0 request reached the broker: krelay
# may still be writing them when kcat -P has exited.  Read the topic
# again (bounded) until all 500 are there.
consume_acks0() {
    kr_run 60 "${KC[@]}" -C -t acks0 -o beginning -e -q -f '%s\n' \
        >"$W/out.txt" 2>"$W/kcat-C.log" || kr_fail "kcat -C failed"
    kr_is_direct || [ "$(wc -l <"$W/out.txt")" -ge 500 ]
}
kr_wait_for 30 consume_acks0
# What arrives must be ours.
sort "$W/in.txt" >"$W/in.sorted"
sort "$W/out.txt" >"$W/out.sorted"
extra=$(comm -13 "$W/in.sorted" "$W/out.sorted" | head -3)
[ -z "$extra" ] || kr_fail "consumed messages never produced: $extra"
got=$(wc -l <"$W/out.txt")
kr_log "kcat: $got of 500 messages produced with acks=0 consumed back"
# kcat closes right after its last write.  Through krelay every request
# it wrote must still reach the broker: krelay finishes writing them and
# half-closes the upstream (a reset would make the broker drop requests
# it has not read yet; talking to the mock directly loses a few that way).
if ! kr_is_direct; then
    [ "$got" -eq 500 ] ||
        kr_fail "only $got of 500 acks=0 messages reached the broker"
fi
if ! kr_is_direct; then
    grep -q "no request in flight" "$W/krelay.log" &&
        kr_fail "krelay closed a connection: $(grep "no request" "$W/krelay.log")"
    if [ "$KRELAY_LOG_LEVEL" = debug ] || [ "$KRELAY_LOG_LEVEL" = trace ]; then
        grep -q "answers Produce requests with Acks=0" "$W/krelay.log" ||
            kr_fail "no debug line about the answered Acks=0 Produce"
    fi
fi
kr_finish
