#!/bin/bash
# A hostile old producer against legacy translation (issue 10): bad
# partitions each answered with their own error while the others are
# stored, 20000 bad partitions answered in linear time, gzip bombs
# sharing the request's max_frame_bytes, pipelined old and new versions
# answered in order, Acks=0 with bad records (every partition, and one of
# two: the good one stored), a frame that does not decode.  The cases:
# legacy_adversary.py.  One broker (`krmock -K 4.0.0` -b 1): every
# partition's leader is the bootstrap connection's.
#
# Then: krelay is alive, and its log names the client and the fault for
# the three connections it closed (the two Acks=0 and the malformed frame,
# which is not forwarded: the broker refuses its version), each line
# whole, and no other connection was closed by krelay; at stop, its
# legacy line counts what was translated, refused and corrupt.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

kr_setup 120
KR_NODEIDS=1
KR_MOCK_ARGS="-K 4.0.0"
KR_UPSTREAM_CONF="broker_profile = kafka-4.0.0"
KR_LISTENER_CONF="translate_legacy = true
max_frame_bytes = 4194304"
kr_start_mock adv:10
kr_start_krelay
kr_is_direct && kr_skip "KRELAY_TEST_DIRECT=1: the cases test krelay"
# a one-broker mock connects to itself once as it starts (pid krmock in
# the accept log): the clients' connections are counted from here
: >"$KR_ACCEPT_LOG"

kr_run 90 "$KR_PY" "$top_srcdir/tests/integration/legacy_adversary.py" \
    "$KR_PORT" >"$KR_WORK/cases.txt" 2>&1
rc=$?
cat "$KR_WORK/cases.txt" >&2
[ "$rc" = 0 ] || kr_spec_fail "$rc case(s) failed (above)"

kr_check_alive
# the two closes krelay made, each one line naming the client and fault
closes=$(kr_closes_not_by_client)
n=$(printf '%s' "$closes" | grep -c . || true)
grep -q 'CorrelationId 31 with Acks=0 .*: closing the connection (no response can carry CORRUPT_MESSAGE) (' \
    "$KR_WORK/krelay.log" ||
    kr_spec_fail "no whole log line for the Acks=0 Produce closed" \
        "(CorrelationId 31)"
grep -Eq 'CorrelationId 32 with Acks=0 has records that do not convert in 1 partition \(topic adv partition 8: corrupt: .*: others forwarded, closing the connection \(no response can carry CORRUPT_MESSAGE\) \(' \
    "$KR_WORK/krelay.log" ||
    kr_spec_fail "no whole log line for the Acks=0 Produce with a bad" \
        "partition, forwarded then closed (CorrelationId 32)"
grep -Eq '\[c#[0-9]+\.[0-9]+ 127\.0\.0\.1:[0-9]+ > bootstrap\] Produce v2 CorrelationId 41 ClientId adversary .*does not decode.*not forwarded' \
    "$KR_WORK/krelay.log" ||
    kr_spec_fail "no log line naming the client and the fault for the" \
        "malformed frame (CorrelationId 41), or it was forwarded"
grep -q 'upstream .* closed the connection' "$KR_WORK/krelay.log" &&
    kr_spec_fail "an upstream closed a connection (the malformed frame" \
        "forwarded?)"
[ "$n" -le 3 ] ||
    kr_spec_fail "$n connections closed by krelay, want 3: $closes"

# at stop: refused 2 (acks0, every partition bad; malformed), corrupt
# partitions 6 + 20000 + 1 + 2 + 1 + 1 (partitions, many, the bombs,
# acks0, acks0part); translated: the Produce requests forwarded and
# acks0part's ListOffsets v0, as many as it took
legacy_stop_line() {
    local want="legacy translation: [0-9]+ requests translated, 2 refused, [0-9]+ bytes of records in, [0-9]+ out, 0 zstd batches recompressed, 20011 partitions corrupt\$"
    grep -Eq "$want" "$KR_WORK/krelay.log" ||
        kr_spec_fail "stop line: want /$want/, got:" \
            "$(grep 'legacy translation:' "$KR_WORK/krelay.log")"
    kr_spec_finish
}
kr_finish legacy_stop_line
