#!/bin/bash
# A hostile old producer against legacy translation (issue 10): bad
# partitions each answered with their own error while the others are
# stored, 20000 bad partitions answered in linear time, gzip bombs
# sharing the request's max_frame_bytes, pipelined old and new versions
# answered in order, Acks=0 with bad records, a frame that does not
# decode.  The cases: legacy_adversary.py.  One broker (`krmock -K 4.0.0`
# -b 1): every partition's leader is the bootstrap connection's.
#
# Then: krelay is alive, and its log names the client and the fault for
# the two connections it closed (Acks=0 and the malformed frame, which is
# not forwarded: the broker refuses its version), and no other connection
# was closed by krelay.
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
grep -q 'Acks=0 .*CorrelationId 31\|CorrelationId 31 with Acks=0' \
    "$KR_WORK/krelay.log" ||
    kr_spec_fail "no log line for the Acks=0 Produce closed (CorrelationId 31)"
grep -Eq '\[c#[0-9]+\.[0-9]+ 127\.0\.0\.1:[0-9]+ > bootstrap\] Produce v2 CorrelationId 41 ClientId adversary .*does not decode.*not forwarded' \
    "$KR_WORK/krelay.log" ||
    kr_spec_fail "no log line naming the client and the fault for the" \
        "malformed frame (CorrelationId 41), or it was forwarded"
grep -q 'upstream .* closed the connection' "$KR_WORK/krelay.log" &&
    kr_spec_fail "an upstream closed a connection (the malformed frame" \
        "forwarded?)"
[ "$n" -le 2 ] ||
    kr_spec_fail "$n connections closed by krelay, want 2: $closes"
kr_spec_finish
kr_finish
