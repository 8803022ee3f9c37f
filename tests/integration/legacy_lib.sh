# legacy_lib.sh - issue 10's legacy-client tests (legacy_direct.sh in
# `make check`, legacy_matrix.sh in `make check-long`): old clients run
# against an upstream, each case asserting a named outcome.  Sourced after
# lib.sh and kr_setup.
#
# The clients (each prints one summary line last, and exits 0 when the
# known message set came back byte for byte, 1 on a difference, 2 when
# producing failed, 3 when consuming got nothing):
#   legacy_kpy_client.py   kafka-python 2.0.2 with api_version 0.10.0, 0.9,
#                          0.8.2 or 0.8.1 (its offsets: OffsetCommit v0 and
#                          OffsetFetch v0)
#   leg_kcat_produce/_consume (below)  kcat 1.7.1 (librdkafka 2.0.2) with
#                          -X api.version.request=false -X
#                          broker.version.fallback=0.9.0 or 0.10.0
#   leg_node (below)       kafka-node 5.0.0 (npm, legacy_node_client.js)
# The message sets and their check: legacy_msgs.py.
#
# Two upstreams (krmock): the Kafka-4-like one, `krmock -K 4.0.0` (every
# API restricted to Kafka 4.0.0's versions, Produce still advertised from
# 0 as Kafka 4 does, KAFKA-18659; krmock.c's header says what -K does),
# and a normal one (no restriction).  librdkafka's mock answers a request
# version outside an API's range by closing the connection without a
# response ("unsupported FetchRequest version 0 ... closed: Parse error"
# in its debug log), as Kafka closes on a version it does not support;
# ApiVersions above its range gets UNSUPPORTED_VERSION (35) with a v0
# body.  It refuses magic 0/1 message sets (Produce v0-2 of old clients)
# with UNSUPPORTED_VERSION per partition, whether restricted or not, so an
# old producer fails against both and its cases are proven able to pass
# only through krelay (legacy_through_krelay).
#
# Cases run in the background in parallel (leg_start), then are checked
# (leg_wait, leg_check): failures are collected (kr_spec_fail) and listed
# at the end (kr_spec_finish).  Every case's summary goes to
# $KR_WORK/cases.txt and the log.
#
# Environment:
#   KR_LEGACY_FAIL_WAIT     seconds a client that must fail is given before
#                           it gives up (default 10): long enough for the
#                           same client to succeed against a broker that
#                           accepts it (they take 1-5 s here)
#   KR_LEGACY_THROUGH_KRELAY=0  skip the through-krelay cases (default 1:
#                           run them)
#   KR_LEGACY_LISTENER_CONF, KR_LEGACY_UPSTREAM_CONF  the krelay lines of
#                           those cases (default "translate_legacy = true"
#                           and "broker_profile = kafka-4.0.0"); set them
#                           empty to run the cases through a krelay
#                           without translation (a dry run of the harness:
#                           the old clients then fail as they do direct)

LEG_DIR=$top_srcdir/tests/integration
LEG_KPY=$LEG_DIR/legacy_kpy_client.py
LEG_MSGS=$LEG_DIR/legacy_msgs.py
LEG_NODE=$LEG_DIR/legacy_node_client.js
: "${KR_LEGACY_FAIL_WAIT:=10}"
: "${KR_LEGACY_THROUGH_KRELAY:=1}"
LEG_PIDS=()
LEG_NAMES=()
LEG_HAVE_NODE=

# leg_have_node: true when node finds kafka-node in $KRELAY_DEPS_DIR; when
# it does not, the kafka-node cases are skipped with a log line (a
# failure with KRELAY_REQUIRE_ALL=1).
leg_have_node() {
    if [ -z "$LEG_HAVE_NODE" ]; then
        LEG_HAVE_NODE=no
        export NODE_PATH="$KRELAY_DEPS_DIR/node_modules${NODE_PATH:+:$NODE_PATH}"
        if command -v node >/dev/null 2>&1 &&
           node -e "require('kafka-node')" >/dev/null 2>&1; then
            LEG_HAVE_NODE=yes
        elif [ "$KRELAY_REQUIRE_ALL" = 1 ]; then
            kr_fail "KRELAY_REQUIRE_ALL=1: npm package kafka-node missing" \
                "in $KRELAY_DEPS_DIR (contrib/install-deps.sh --npm)"
        else
            kr_log "kafka-node not in $KRELAY_DEPS_DIR" \
                "(contrib/install-deps.sh --npm): its cases are skipped"
        fi
    fi
    [ "$LEG_HAVE_NODE" = yes ]
}

# leg_have_py_codec CODEC: kafka-python can write CODEC (gzip always;
# snappy and lz4 need python3-snappy, python3-lz4).  A missing one is
# logged (a failure with KRELAY_REQUIRE_ALL=1).
leg_have_py_codec() {
    local mod
    case $1 in
    snappy) mod=snappy ;;
    lz4) mod=lz4.frame ;;
    *) return 0 ;;
    esac
    "$KR_PY" -c "import $mod" >/dev/null 2>&1 && return 0
    [ "$KRELAY_REQUIRE_ALL" = 1 ] &&
        kr_fail "KRELAY_REQUIRE_ALL=1: python module $mod missing (python3-$1)"
    kr_log "python module $mod missing (python3-$1): its cases are skipped"
    return 1
}

# leg_seed ADDR TOPIC TAG COUNT [KCAT_OPTION...]: a modern producer (kcat,
# ApiVersions, Produce v7 RecordBatch v2) writes the set TAG/COUNT; a
# failure ends the test (the cases that read it would prove nothing).
leg_seed() {
    local addr=$1 topic=$2 tag=$3 count=$4 err
    shift 4
    err=$KR_WORK/seed-$topic-${addr##*:}.err
    "$KR_PY" "$LEG_MSGS" kcat-in "$tag" "$count" |
        kr_run 30 kcat -b "$addr" -P -t "$topic" -K '\t' -Z \
            -X socket.timeout.ms=10000 "$@" 2>"$err" ||
        kr_fail "seeding $topic ($tag) with kcat: $(tail -n 3 "$err")"
}

# leg_seed_all ADDR... -- TOPIC TAG COUNT [KCAT_OPTION...] -- ...: every
# (upstream, topic) seed at once (leg_seed each, in the background); a
# failure ends the test.
leg_seed_all() {
    local addrs=() specs=() a pids=() pid spec
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        addrs+=("$1")
        shift
    done
    shift
    while [ $# -gt 0 ]; do
        spec=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do
            spec+=("$1")
            shift
        done
        [ $# -gt 0 ] && shift
        for a in "${addrs[@]}"; do
            leg_seed "$a" "${spec[@]}" &
            pids+=($!)
            KR_PIDS+=($!)
        done
        specs+=("${spec[0]}")
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || kr_fail "seeding failed (see seed-*.err)"
    done
    kr_log "seeded: ${specs[*]} on ${#addrs[@]} upstream(s)"
}

# leg_kcat_produce ADDR TOPIC TAG COUNT FALLBACK CODEC [KCAT_OPTION...]:
# kcat as an old producer (fallback 0.9.0: no ApiVersions, Produce v1 with
# magic 0 messages; 0.10.0: librdkafka 2.0.2 turns api.version.request
# back on for a fallback of 0.10.0 or later, rd_kafka_new's "Enable
# api.version.request=true if fallback.broker.version indicates a
# supporting broker", so it asks ApiVersions and is a modern producer
# wherever ApiVersions is answered in full; through krelay the rule
# LEG_KCAT10_RULE keeps it to 0.10.0's Produce v2 and Fetch v2; client.id
# legacy-kcat-FALLBACK), or FALLBACK "modern" (kcat as it is,
# and it must have compressed: Produce min 0 kept).  CODEC: none, gzip,
# snappy, lz4 (zstd: modern only).  Prints "OK ..." (exit 0),
# "PRODUCE-FAILED kcat: <its most frequent error>" (exit 2) or, modern
# without compression, "FAIL ..." (exit 1).
leg_kcat_produce() {
    local addr=$1 topic=$2 tag=$3 count=$4 fb=$5 codec=$6 err rc
    local ver=(-X api.version.request=false -X broker.version.fallback="$fb"
               -X client.id="legacy-kcat-$fb")
    shift 6
    # FALLBACK "modern": kcat as it is (ApiVersions), its Produce debug
    # lines kept: a compressing producer must still compress; 0.10.0: the
    # requests it sent (-d protocol: which Produce version)
    [ "$fb" = modern ] && ver=(-d msg)
    [ "$fb" = 0.10.0 ] && ver+=(-d protocol)
    err=$KR_WORK/kcat-P-$topic-$tag-${addr##*:}.err
    "$KR_PY" "$LEG_MSGS" kcat-in "$tag" "$count" |
        kr_run 40 kcat -b "$addr" -P -t "$topic" -K '\t' -Z -z "$codec" \
            "${ver[@]}" -X socket.timeout.ms=10000 \
            -X message.timeout.ms=$((KR_LEGACY_FAIL_WAIT * 1000)) \
            "$@" 2>"$err"
    rc=$?
    if [ "$rc" -ne 0 ] || grep -q 'Delivery failed' "$err"; then
        echo "PRODUCE-FAILED kcat $fb $codec (exit $rc): $(grep -v '^%7|' "$err" >"$err.top"; leg_top_line "$err.top")"
        return 2
    fi
    if [ "$fb" = modern ] && [ "$codec" != none ] &&
       ! grep -q "Produce MessageSet with .*, $codec)" "$err"; then
        echo "FAIL kcat modern $codec produce: librdkafka did not compress: $(grep -m 1 'Produce MessageSet\|not compressing' "$err")"
        return 1
    fi
    echo "OK kcat $fb $codec produce: $count messages acked"
}

# leg_kcat_consume ADDR TOPIC TAG COUNT FALLBACK OUT [FIRST [KCAT_OPTION...]]:
# kcat as an old consumer (FALLBACK 0.9.0, 0.10.0, or "modern": kcat as it
# is) from the beginning (or, with FIRST, partition 0
# from offset FIRST) to the end (-e), records as JSON (-J) in OUT, then
# compared with the set (its messages FIRST..COUNT-1).  Prints the
# comparison's summary (exit 0/1) or "CONSUME-FAILED kcat: <its most
# frequent error>" (exit 3).
leg_kcat_consume() {
    local addr=$1 topic=$2 tag=$3 count=$4 fb=$5 out=$6 first=${7:-} err
    local from=(-o beginning)
    local ver=(-X api.version.request=false -X broker.version.fallback="$fb"
               -X client.id="legacy-kcat-$fb")
    shift 6
    [ $# -gt 0 ] && shift
    [ -n "$first" ] && from=(-p 0 -o "$first")
    [ "$fb" = modern ] && ver=()     # kcat as it is: ApiVersions, Fetch v11
    err=$out.err
    # -d protocol: the requests it sent, to name the one a broker closed
    # the connection after
    # bounded by KR_LEGACY_FAIL_WAIT + 20 s, not scaled: kcat retries a
    # refused fetch for ever (one that works ends at -e within seconds)
    timeout -k 5 $((KR_LEGACY_FAIL_WAIT + 20)) \
        kcat -b "$addr" -C -t "$topic" "${from[@]}" -e -J -d protocol \
        "${ver[@]}" -X socket.timeout.ms=10000 "$@" >"$out" 2>"$err"
    if [ "$("$KR_PY" "$LEG_MSGS" count "$out")" = 0 ]; then
        echo "CONSUME-FAILED kcat $fb: nothing consumed: $(leg_kcat_why "$err")"
        return 3
    fi
    "$KR_PY" "$LEG_MSGS" check "$tag" "$count" "$out" \
        "kcat $fb consume${first:+ from offset $first}" "${first:-0}"
}

# leg_kcat_why FILE: why a kcat run (-d protocol) got nothing: "Disconnected
# after FetchRequest (v1)" (the last request sent on the first connection
# that broke), else its first "% ERROR" line, else its most frequent line.
leg_kcat_why() {
    local why
    why=$(awk '
        match($0, /[0-9.]+:[0-9]+\/[0-9a-z]+: Sent [A-Za-z]+Request \(v[0-9]+/) {
            s = substr($0, RSTART, RLENGTH); split(s, a, ": Sent ")
            last[a[1]] = a[2] ")"
        }
        match($0, /[0-9.]+:[0-9]+\/[0-9a-z]+: Disconnected/) {
            s = substr($0, RSTART, RLENGTH); split(s, a, ": Disconnected")
            if (a[1] in last) { print "Disconnected after " last[a[1]]; exit }
        }' "$1")
    [ -n "$why" ] || why=$(grep -m 1 '^% ERROR' "$1")
    [ -n "$why" ] || why=$(leg_top_line "$1")
    printf '%s\n' "$why"
}

# leg_top_line FILE: the most frequent line of FILE (a client's errors),
# timestamps and addresses blanked.
leg_top_line() {
    sed -E 's/^%[0-9]+\|[0-9.]+\|/%|/; s/127\.0\.0\.1:[0-9]+/ADDR/g;
            s/after [0-9]+ms/after Nms/' "$1" | grep -v '^$' | sort |
        uniq -c | sort -rn | head -n 1 | sed -E 's/^ *[0-9]+ //'
}

# leg_node MODE ADDR TOPIC TAG COUNT GROUP WAIT: kafka-node (produce,
# consume or roundtrip) with the set TAG/COUNT; what a consumer read is
# compared with the set.  Prints the summary line (exit as the clients).
leg_node() {
    local mode=$1 addr=$2 topic=$3 tag=$4 count=$5 group=$6 wait=$7 rc
    local port=${addr%%,*}
    port=${port##*:}
    # names with the upstream's port: the same case runs against both
    local set=$KR_WORK/set-$tag-$count-$port.jsonl
    local out=$KR_WORK/node-$mode-$topic-$tag-$port.jsonl
    "$KR_PY" "$LEG_MSGS" json-in "$tag" "$count" >"$set"
    kr_run $((wait + 30)) node "$LEG_NODE" "$mode" "$addr" "$topic" "$set" \
        "$out" "$group" "$wait" >"$out.out" 2>"$out.err"
    rc=$?
    if [ "$rc" -ne 0 ] || [ "$mode" = produce ]; then
        tail -n 1 "$out.out"
        return "$rc"
    fi
    "$KR_PY" "$LEG_MSGS" check "$tag" "$count" "$out" "kafka-node $mode"
}

# leg_kpy ARG...: legacy_kpy_client.py ARG... (its summary last).
leg_kpy() {
    kr_run 150 "$KR_PY" "$LEG_KPY" "$@"
}

# leg_start NAME CMD...: run the case NAME in the background: CMD's output
# in $KR_WORK/case-NAME.out (the summary is its last line), its errors in
# case-NAME.err, its exit status in case-NAME.rc, its seconds in
# case-NAME.time.
leg_start() {
    local name=$1
    shift
    ( start=$SECONDS
      "$@" >"$KR_WORK/case-$name.out" 2>"$KR_WORK/case-$name.err"
      echo $? >"$KR_WORK/case-$name.rc"
      echo $((SECONDS - start)) >"$KR_WORK/case-$name.time" ) &
    LEG_PIDS+=($!)
    KR_PIDS+=($!)
    LEG_NAMES+=("$name")
}

# leg_wait: wait for every case leg_start started.
leg_wait() {
    local pid
    for pid in "${LEG_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    LEG_PIDS=()
}

# leg_check NAME WANT PATTERN: case NAME must have ended with exit status
# WANT (0 ok, 1 a difference, 2 produce failed, 3 consume got nothing) and
# a summary line matching the extended regular expression PATTERN.
leg_check() {
    local name=$1 want=$2 pat=$3 rc summary
    rc=$(cat "$KR_WORK/case-$name.rc" 2>/dev/null || echo none)
    summary=$(grep -E '^(OK|FAIL|PRODUCE-FAILED|CONSUME-FAILED) ' \
        "$KR_WORK/case-$name.out" | tail -n 1)
    printf '%-24s exit %-4s %3ss  %s\n' "$name" "$rc" \
        "$(cat "$KR_WORK/case-$name.time" 2>/dev/null)" "$summary" \
        >>"$KR_WORK/cases.txt"
    if [ "$rc" = "$want" ] && printf '%s\n' "$summary" | grep -Eq -- "$pat"; then
        kr_log "$name: as expected: $summary"
        return 0
    fi
    kr_spec_fail "$name: want exit $want and /$pat/, got exit $rc: ${summary:-$(tail -n 2 "$KR_WORK/case-$name.out" "$KR_WORK/case-$name.err" 2>/dev/null | tr '\n' ' ')}"
}

# leg_run NAME WANT PATTERN CMD...: one case, started and checked now.
leg_run() {
    local name=$1 want=$2 pat=$3
    shift 3
    leg_start "$name" "$@"
    leg_wait
    leg_check "$name" "$want" "$pat"
}

# Patterns of the outcomes (the clients' summary lines).
LEG_OK='^OK .*(identical|acked)'
LEG_35_KPY='^PRODUCE-FAILED UnsupportedVersionError: \[Error 35\]'
LEG_35_KCAT='^PRODUCE-FAILED kcat .*Broker: API version not supported'
LEG_35_NODE='^PRODUCE-FAILED Error: \(no message: an error code kafka-node has no name for\)'
# kcat: the connection closed after REQUEST, e.g. leg_closed_kcat "FetchRequest (v1)"
leg_closed_kcat() {
    echo "^CONSUME-FAILED kcat .*: nothing consumed: Disconnected after ${1//[()]/\\&}\$"
}
# kafka-python: the connection closed after REQUEST (the mock refused its
# version), e.g. leg_closed_kpy JoinGroupRequest_v0
leg_closed_kpy() {
    echo "^CONSUME-FAILED kafka-python .*socket disconnected \\(after $1\\)"
}

# leg_start_mock_pair TOPIC:N...: the two upstreams with the same topics:
# the normal mock (LEG_NORMAL: its bootstrap list; LEG_NORMAL_PID) and the
# Kafka-4-like one, `krmock -K ${LEG_K4_RELEASE:-4.0.0}` (LEG_K4,
# LEG_K4_PID; also KR_MOCK_* as kr_start_mock sets them, for krelay).
leg_start_mock_pair() {
    KR_MOCK_ARGS= kr_start_mock "$@"
    LEG_NORMAL=$KR_MOCK_BOOTSTRAP
    LEG_NORMAL_PID=$KR_MOCK_PID
    KR_MOCK_ARGS="-K ${LEG_K4_RELEASE:-4.0.0}" kr_start_mock "$@"
    LEG_K4=$KR_MOCK_BOOTSTRAP
    LEG_K4_PID=$KR_MOCK_PID
    LEG_K4_BASE=$KR_MOCK_BASE
    grep -q "krmock: -K ${LEG_K4_RELEASE:-4.0.0}: .*Fetch 4\.\." \
        "$KR_WORK/mock.log" ||
        kr_fail "the Kafka-4-like mock did not restrict Fetch: $(cat "$KR_WORK/mock.log")"
    kr_log "upstreams: normal $LEG_NORMAL, Kafka-4-like $LEG_K4" \
        "($(grep -o "krmock: -K .*" "$KR_WORK/mock.log" | head -n 1))"
}

# leg_finish: stop the mocks (and krelay when running), list the cases,
# fail on any unexpected outcome, else PASS.
leg_finish() {
    local pid
    [ -s "$KR_WORK/cases.txt" ] &&
        kr_log "cases (name, exit status, summary):"$'\n'"$(cat "$KR_WORK/cases.txt")"
    kr_spec_finish
    if [ -n "${KR_KRELAY_PID:-}" ] && kill -0 "$KR_KRELAY_PID" 2>/dev/null; then
        kr_stop "$KR_KRELAY_PID" krelay "$KR_WORK/krelay.out.log" \
            "$KR_WORK/krelay.log"
    fi
    for pid in "$LEG_NORMAL_PID" "$LEG_K4_PID"; do
        kr_stop "$pid" krmock "$KR_WORK/mock.log"
    done
    kr_log "PASS"
}

# ---- through krelay with translation (issue 10) -----------------------
# Topics the through-krelay cases write and read: created on both mocks
# by the scripts (LEG_KRELAY_TOPICS: full, LEG_KRELAY_TOPICS_SHORT:
# short), used only on the Kafka-4-like one.
# LEG_KRELAY_TOPICS_SHORT: those of the short run (each topic makes a
# mock start longer: about 50 ms)
LEG_KRELAY_TOPICS_SHORT=(t-kpy:3 t-kcat:3 t-node:3 t-mix1:3 t-mix2:3
                         t-commit:3 t-acks0:3)
LEG_KRELAY_TOPICS=("${LEG_KRELAY_TOPICS_SHORT[@]}" t-grp:3 t-mix3:3
                   t-zstd:1 t-mid:1 t-midz:1 t-commit-0.8.2:3)
for api in 0.10.0 0.9 0.8.2; do
    for codec in none gzip snappy lz4; do
        LEG_KRELAY_TOPICS+=("t-kpy-$api-$codec:3")
    done
done
for fb in 0.9.0 0.10.0; do
    for codec in gzip snappy lz4; do
        LEG_KRELAY_TOPICS+=("t-kcat-$fb-$codec:3")
    done
done
unset api codec fb

# The rule that keeps kcat with fallback 0.10.0 to that release's Produce
# and Fetch versions through krelay (legacy_through_krelay).
LEG_KCAT10_RULE='[rule kcat-0.10.0]
client_id = legacy-kcat-0.10.0
api = Produce, Fetch
clamp_max_version = 2'

# leg_kpy_then_kcat ADDR TOPIC API TAG COUNT OUT: an old kafka-python
# producer, then a modern consumer (kcat as it is) reads the same records.
leg_kpy_then_kcat() {
    leg_kpy produce "$1" "$2" "$3" "$4" "$5" || return
    leg_kcat_consume "$1" "$2" "$4" "$5" modern "$6"
}

# leg_kcat_roundtrip ADDR TOPIC TAG COUNT FALLBACK CODEC OUT: kcat
# produces with FALLBACK and CODEC, then consumes with the same FALLBACK.
leg_kcat_roundtrip() {
    leg_kcat_produce "$1" "$2" "$3" "$4" "$5" "$6" || return
    leg_kcat_consume "$1" "$2" "$3" "$4" "$5" "$7"
}

# leg_kcat_acks0 ADDR TOPIC TAG COUNT OUT: kcat 0.9.0 produces without
# compression and with acks=0 (Produce v1: no response, none to merge),
# then reads back as kcat 0.9.0, again (bounded) until all COUNT are
# there: nothing tells when the last request reached the broker.
leg_kcat_acks0() {
    local i rc=3
    leg_kcat_produce "$1" "$2" "$3" "$4" 0.9.0 none -X acks=0 || return
    for i in 1 2 3 4 5 6 7 8 9 10; do
        leg_kcat_consume "$1" "$2" "$3" "$4" 0.9.0 "$5" && return 0
        rc=$?
        sleep 1
    done
    return "$rc"
}

# leg_modern_then_kpy ADDR TOPIC TAG COUNT CODEC API [FIRST]: a modern
# producer (kcat as it is, CODEC, one batch per partition: linger 500 ms;
# with FIRST all to partition 0), then kafka-python API reads (from
# offset FIRST of partition 0: a fetch in the middle of that batch).
leg_modern_then_kpy() {
    local first=${7:-} part=()
    [ -n "$first" ] && part=(-p 0)
    leg_kcat_produce "$1" "$2" "$3" "$4" modern "$5" -X linger.ms=500 \
        "${part[@]}" || return
    if [ -n "$first" ]; then
        leg_one_batch "$KR_WORK/kcat-P-$2-$3-${1##*:}.err" "$4" || return
        leg_kpy consume "$1" "$2" "$6" "$3" "$4" --partition 0 \
            --offset "$first" --timeout 60
    else
        leg_kpy consume "$1" "$2" "$6" "$3" "$4" --timeout 60
    fi
}

# leg_one_batch FILE COUNT: kcat's -d msg log FILE shows the COUNT
# messages sent as one batch ("Produce MessageSet with COUNT message(s)"),
# so that a fetch from an offset inside it starts in the middle of a batch.
leg_one_batch() {
    grep -q "Produce MessageSet with $2 message(s)" "$1" && return 0
    echo "FAIL not one batch of $2: $(grep -o 'Produce MessageSet with [0-9]* message(s)' "$1" | tr '\n' ' ')"
    return 1
}

# legacy_through_krelay short|full: krelay (translate_legacy = true on the
# listener, broker_profile = kafka-4.0.0 on [upstream]) in front of the
# Kafka-4-like mock (the last one leg_start_mock_pair started); each old
# client produces and consumes the known set through it, byte for byte;
# mixed old and modern clients on one topic; a zstd topic read by old
# consumers; fetches starting in the middle of a batch.  "short": one case
# per kind (legacy_direct.sh), "full": the matrix (legacy_matrix.sh).
# KR_LEGACY_THROUGH_KRELAY=0 skips them (with a log line): the direct
# cases alone.
legacy_through_krelay() {
    local full=$1 N=40 api codec fb W=$KR_WORK
    if [ "$KR_LEGACY_THROUGH_KRELAY" != 1 ]; then
        kr_log "SKIPPED (KR_LEGACY_THROUGH_KRELAY=0): the through-krelay" \
            "legacy translation cases"
        return 0
    fi
    # short: old producers' sets above 4 KiB go up as several Produce
    # requests (legacy_batch_max_bytes; Produce v3+ takes one batch per
    # partition), read back byte for byte by the consumers
    local lconf="translate_legacy = true"
    [ "$full" = short ] && lconf+=$'\n'"legacy_batch_max_bytes = 4096"
    KR_LISTENER_CONF=${KR_LEGACY_LISTENER_CONF-$lconf}
    KR_UPSTREAM_CONF=${KR_LEGACY_UPSTREAM_CONF-broker_profile = kafka-4.0.0}
    # kcat with fallback 0.10.0 (the full run's) asks ApiVersions
    # (leg_kcat_produce): the answer it gets is clamped to the versions a
    # 0.10.0 broker had for the APIs that carry records, so it speaks them
    # as a 0.10.0 client (Produce v2 with magic 1 message sets, Fetch v2),
    # which krelay translates up
    if [ "$full" = full ]; then
        printf '%s\n' "$LEG_KCAT10_RULE" >"$W/legacy-rules.ini"
        KR_EXTRA_CONF=$W/legacy-rules.ini
    fi
    [ "$KR_MOCK_BOOTSTRAP" = "$LEG_K4" ] ||
        kr_fail "legacy_through_krelay: the last mock started is not the Kafka-4-like one"
    # the direct cases connected to the mocks themselves: from now on every
    # connection a mock accepts must be krelay's (kr_check_no_direct)
    : >"$KR_ACCEPT_LOG"
    kr_start_krelay
    local K=$KR_BOOTSTRAP
    kr_log "through krelay ($K): [listener] '$KR_LISTENER_CONF'," \
        "[upstream] '$KR_UPSTREAM_CONF'"

    # each old client, producing and consuming (one case per kind)
    leg_start tk-kpy leg_kpy roundtrip "$K" t-kpy 0.10.0 k1 "$N" \
        --group lk-kpy --out "$W/tk-kpy.jsonl"
    leg_start tk-kcat leg_kcat_roundtrip "$K" t-kcat k1 "$N" 0.9.0 gzip \
        "$W/tk-kcat.json"
    if leg_have_node; then
        leg_start tk-node leg_node roundtrip "$K" t-node k1 "$N" \
            lk-node 60
    fi
    # mixed: an old producer and a modern consumer, and the reverse (the
    # modern producer still compressing: Produce MinVersion 0 kept)
    leg_start tk-old-to-modern leg_kpy_then_kcat "$K" t-mix1 0.10.0 k1 "$N" \
        "$W/tk-mix1.json"
    leg_start tk-modern-to-old leg_modern_then_kpy "$K" t-mix2 k1 "$N" gzip \
        0.10.0
    # the offsets of an old consumer without group membership (0.8.1:
    # OffsetCommit v0 and OffsetFetch v0, which Kafka 4 removed; their
    # ZooKeeper offsets become Kafka's), committed and read back
    leg_start tk-kpy-commit leg_kpy roundtrip "$K" t-commit 0.8.1 k1 "$N" \
        --commit-group lk-commit
    # Acks=0: no responses (short: the split requests' too)
    leg_start tk-kcat-acks0 leg_kcat_acks0 "$K" t-acks0 k0 "$N" \
        "$W/tk-kcat-acks0.json"
    leg_wait
    leg_check tk-kpy 0 "$LEG_OK"
    leg_check tk-kcat 0 "$LEG_OK"
    leg_have_node && leg_check tk-node 0 "$LEG_OK"
    leg_check tk-old-to-modern 0 "$LEG_OK"
    leg_check tk-modern-to-old 0 "$LEG_OK"
    leg_check tk-kpy-commit 0 "$LEG_OK.*; committed offsets \{0: [0-9]+, 1: [0-9]+, 2: [0-9]+\}"
    leg_check tk-kcat-acks0 0 "$LEG_OK"
    for req in "OffsetCommit v0" "OffsetFetch v0"; do
        grep -Eq "\] $req CorrelationId [0-9]+ sent as v[0-9]+ \(translate_legacy\)" \
            "$KR_WORK/krelay.log" || kr_spec_fail "tk-kpy-commit: no $req translated"
    done
    if [ "$full" = short ] && [ -z "${KR_LEGACY_LISTENER_CONF+set}" ]; then
        local split
        split=$(grep -Ec "\] Produce v[0-2] CorrelationId [0-9]+ sent as v[0-9]+ after [1-9][0-9]* Produce requests of krelay's own" \
            "$KR_WORK/krelay.log")
        kr_log "Produce requests split into rounds (legacy_batch_max_bytes" \
            "4096): $split, e.g. $(grep -m 1 -o "Produce v[0-2] CorrelationId [0-9]* sent as v[0-9]* after [0-9]* Produce" \
                "$KR_WORK/krelay.log")"
        [ "$split" -ge 1 ] ||
            kr_spec_fail "no old producer's Produce went up in several requests"
    fi

    if [ "$full" = full ]; then
        # kafka-python's three versions, its codecs (0.8.2: no groups;
        # lz4 with magic 0: the broken header checksum, KAFKA-1493;
        # snappy: xerial framing)
        for api in 0.10.0 0.9 0.8.2; do
            for codec in none gzip snappy lz4; do
                local g=(--group "lk-kpy-$api-$codec")
                [ "$api" = 0.8.2 ] && g=()
                leg_have_py_codec "$codec" || continue
                leg_start "tk-kpy-$api-$codec" leg_kpy roundtrip "$K" \
                    "t-kpy-$api-$codec" "$api" "k-$codec" "$N" \
                    --compression "$codec" "${g[@]}"
            done
        done
        leg_wait
        for api in 0.10.0 0.9 0.8.2; do
            for codec in none gzip snappy lz4; do
                [ -f "$W/case-tk-kpy-$api-$codec.rc" ] || continue
                leg_check "tk-kpy-$api-$codec" 0 "$LEG_OK"
            done
        done
        # kcat with fallback 0.9.0 and 0.10.0, each codec
        for fb in 0.9.0 0.10.0; do
            for codec in gzip snappy lz4; do
                leg_start "tk-kcat-$fb-$codec" leg_kcat_roundtrip "$K" \
                    "t-kcat-$fb-$codec" "k-$codec" "$N" "$fb" "$codec" \
                    "$W/tk-kcat-$fb-$codec.json"
            done
        done
        # the group of three kafka-python 0.10.0 consumers, committing,
        # the set written by kafka-python 0.10.0 once the group is stable
        leg_start tk-kpy-group3 leg_kpy group "$K" t-grp 0.10.0 k1 90 \
            --produce 0.10.0 --timeout 120
        # a zstd topic (a modern producer) read by old consumers: zstd
        # batches recompressed (legacy_zstd = gzip, the default)
        leg_start tk-zstd-kpy leg_modern_then_kpy "$K" t-zstd kz "$N" zstd \
            0.10.0
        leg_wait
        for fb in 0.9.0 0.10.0; do
            for codec in gzip snappy lz4; do
                leg_check "tk-kcat-$fb-$codec" 0 "$LEG_OK"
            done
        done
        # kcat 0.10.0 spoke 0.10.0's versions (LEG_KCAT10_RULE)
        for codec in gzip snappy lz4; do
            grep -q "Sent ProduceRequest (v2," \
                "$W/kcat-P-t-kcat-0.10.0-$codec-k-$codec-${K##*:}.err" &&
                grep -q "Sent FetchRequest (v2," \
                    "$W/tk-kcat-0.10.0-$codec.json.err" ||
                kr_spec_fail "tk-kcat-0.10.0-$codec: not Produce v2 and" \
                    "Fetch v2: $(grep -ho 'Sent \(Produce\|Fetch\)Request (v[0-9]*' \
                        "$W/kcat-P-t-kcat-0.10.0-$codec-k-$codec-${K##*:}.err" \
                        "$W/tk-kcat-0.10.0-$codec.json.err" | sort -u | tr '\n' ' ')"
        done
        leg_check tk-kpy-group3 0 "$LEG_OK.*members own partitions"
        # 0.8.2's offsets: OffsetCommit v1 (its CommitTimestamp dropped)
        leg_run tk-kpy-commit-0.8.2 0 "$LEG_OK.*; committed offsets \{0: [0-9]+" \
            leg_kpy roundtrip "$K" t-commit-0.8.2 0.8.2 k1 "$N" \
            --commit-group lk-commit-0.8.2
        grep -Eq "\] OffsetCommit v1 CorrelationId [0-9]+ sent as v[0-9]+ \(translate_legacy\)" \
            "$KR_WORK/krelay.log" ||
            kr_spec_fail "tk-kpy-commit-0.8.2: no OffsetCommit v1 translated"
        leg_check tk-zstd-kpy 0 "$LEG_OK"
        leg_run tk-zstd-kcat 0 "$LEG_OK" leg_kcat_consume "$K" t-zstd kz \
            "$N" 0.9.0 "$W/tk-zstd-kcat.json"
        # fetches starting in the middle of a batch (one batch in
        # partition 0: records below the fetch offset dropped), without
        # and with compression
        leg_run tk-mid-none 0 "$LEG_OK" leg_modern_then_kpy "$K" t-mid km \
            "$N" none 0.10.0 7
        leg_run tk-mid-kcat 0 "$LEG_OK" leg_kcat_consume "$K" t-mid km \
            "$N" 0.9.0 "$W/tk-mid-kcat.json" 7
        leg_run tk-midz-gzip 0 "$LEG_OK" leg_modern_then_kpy "$K" t-midz \
            kmz "$N" gzip 0.9 13
        leg_run tk-midz-kcat 0 "$LEG_OK" leg_kcat_consume "$K" t-midz kmz \
            "$N" 0.9.0 "$W/tk-midz-kcat.json" 13
        # mixed, the old producer being kcat 0.9.0 (magic 0, lz4)
        leg_start tk-kcat-to-modern leg_kcat_produce "$K" t-mix3 km3 "$N" \
            0.9.0 lz4
        leg_wait
        leg_check tk-kcat-to-modern 0 "$LEG_OK"
        leg_run tk-kcat-to-modern-read 0 "$LEG_OK" leg_kcat_consume "$K" \
            t-mix3 km3 "$N" modern "$W/tk-mix3.json"
    fi
    kr_check_alive
    kr_check_no_direct
    kr_check_no_close
    if [ "$full" = full ]; then
        # krelay's stop line counts what it did (/metrics' legacy_*):
        # translated, the zstd batches recompressed for the old consumers
        # (tk-zstd-*), nothing refused, no partition corrupt
        kr_stop "$KR_KRELAY_PID" krelay "$KR_WORK/krelay.out.log" \
            "$KR_WORK/krelay.log"
        grep -Eq 'legacy translation: [1-9][0-9]* requests translated, 0 refused, [1-9][0-9]* bytes of records in, [1-9][0-9]* out, [1-9][0-9]* zstd batch(es)? recompressed, 0 partitions corrupt$' \
            "$KR_WORK/krelay.log" ||
            kr_spec_fail "krelay's legacy stop line: $(grep 'legacy translation:' "$KR_WORK/krelay.log")"
    fi
}
