# lib.sh - shared harness for krelay's integration tests (sourced by bash).
#
# A test sources this file, calls kr_setup, then kr_start_mock and
# kr_start_krelay, and talks to $KR_BOOTSTRAP (krelay's bootstrap
# listener).  Every process started here is stopped on exit (trap); every
# wait is bounded.
#
# Environment:
#   top_srcdir, top_builddir  set by `make check` (AM_TESTS_ENVIRONMENT);
#                             default: guessed from this file's location
#   KRELAY_REQUIRE_ALL=1      a missing dependency fails instead of
#                             skipping (exit 77)
#   KRELAY_DEPS_DIR           npm packages (contrib/install-deps.sh),
#                             default ~/.cache/krelay
#   KRELAY_TEST_DIRECT=1      harness check only: clients talk to the mock
#                             brokers directly, krelay is not started and
#                             the krelay-specific assertions are skipped
#   KRELAY_TEST_KEEP=1        keep the work directory
#   KR_AUDIT_KEEP=DIR         at teardown, copy every audit file the test
#                             left in its work directory (audit*.log, the
#                             [audit] targets the tests configure) to
#                             DIR/<test>.<file>.jsonl, e.g.
#                             rules_failsafe.audit-deny.jsonl; unset: no
#                             copy (tests/tools/audit_compare.sh uses it)
#   KRELAY_LOG_LEVEL          krelay's [log] level (default debug)
#   KRELAY_TEST_TIME_SCALE    multiplies the watchdog (kr_setup) and the
#                             client limits (kr_run); default 3: these
#                             bounds only catch hangs, a busy CI machine
#                             (sanitizers, parallel jobs) is much slower
#                             than a desk, and a passing run never waits
#                             for them
#
# Exit codes: 0 pass, 1 fail, 77 skip, 99 hard error (automake's).

set -u
set -o pipefail

KR_TEST_NAME=$(basename "$0" .sh)
: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${KRELAY_DEPS_DIR:=${HOME:-/root}/.cache/krelay}"
: "${KRELAY_REQUIRE_ALL:=0}"
: "${KRELAY_TEST_DIRECT:=0}"
: "${KRELAY_LOG_LEVEL:=debug}"
: "${KRELAY_TEST_TIME_SCALE:=3}"
case ${KR_AUDIT_KEEP:-} in
    '' | /*) ;;
    *) KR_AUDIT_KEEP=$PWD/$KR_AUDIT_KEEP ;;  # before any test changes dir
esac
KR_PY=/usr/bin/python3          # Debian's, with kafka-python
KR_KRELAY=${KRELAY_BIN:-$top_builddir/krelay}
KR_KRMOCK=${KRMOCK_BIN:-$top_builddir/tests/mock/krmock}
KR_NODEIDS=3                    # mock brokers, NodeIds 1..3
KR_PIDS=()                      # started processes, stopped on exit
KR_WORK=
KR_MOCK_PID=
KR_KRELAY_PID=

kr_log() {
    printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "$KR_TEST_NAME" "$*" >&2
}

kr_fail() {
    kr_log "FAIL: $*"
    exit 1
}

# Spec assertions that do not stop a test: kr_spec_fail MESSAGE logs and
# remembers one; kr_spec_finish fails the test listing every one (it
# returns when there were none).
KR_SPEC_FAILED=()
kr_spec_fail() {
    kr_log "FAILED: $*"
    KR_SPEC_FAILED+=("$*")
}

kr_spec_finish() {
    local f

    [ "${#KR_SPEC_FAILED[@]}" -eq 0 ] && return 0
    kr_log "${#KR_SPEC_FAILED[@]} assertion(s) failed:"
    for f in "${KR_SPEC_FAILED[@]}"; do
        kr_log "  - $f"
    done
    kr_fail "${#KR_SPEC_FAILED[@]} spec assertion(s) failed (see above)"
}

kr_skip() {
    if [ "$KRELAY_REQUIRE_ALL" = 1 ]; then
        kr_log "FAIL (KRELAY_REQUIRE_ALL=1): missing dependency: $*"
        exit 1
    fi
    kr_log "SKIP: missing dependency: $*"
    exit 77
}

# kr_need_cmd CMD... : skip unless every command is on PATH (or a path).
kr_need_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || kr_skip "$c"
    done
}

# kr_need_py MODULE... : skip unless /usr/bin/python3 imports them.
kr_need_py() {
    local m
    [ -x "$KR_PY" ] || kr_skip "$KR_PY"
    for m in "$@"; do
        "$KR_PY" -c "import $m" >/dev/null 2>&1 ||
            kr_skip "python module $m for $KR_PY"
    done
}

# kr_need_node PACKAGE... : skip unless node finds them in the deps dir.
kr_need_node() {
    local p
    kr_need_cmd node
    export NODE_PATH="$KRELAY_DEPS_DIR/node_modules${NODE_PATH:+:$NODE_PATH}"
    for p in "$@"; do
        node -e "require('$p')" >/dev/null 2>&1 ||
            kr_skip "npm package $p in $KRELAY_DEPS_DIR (contrib/install-deps.sh)"
    done
}

# kr_audit_keep: with KR_AUDIT_KEEP=DIR, copy the audit files of this
# test (krelay stopped: flushed) to DIR/<test>.<file>.jsonl.  Never fails
# the test: a copy that fails is logged.
kr_audit_keep() {
    local f base
    [ -n "${KR_AUDIT_KEEP:-}" ] || return 0
    if ! mkdir -p "$KR_AUDIT_KEEP"; then
        kr_log "KR_AUDIT_KEEP: cannot create $KR_AUDIT_KEEP"
        return 0
    fi
    for f in "$KR_WORK"/audit*.log; do
        [ -f "$f" ] || continue
        base=$(basename "$f" .log)
        cp "$f" "$KR_AUDIT_KEEP/$KR_TEST_NAME.$base.jsonl" ||
            kr_log "KR_AUDIT_KEEP: cannot copy $f"
    done
}

# kr_audit_closed FILE: every connection with an "open" line in the
# audit file FILE has its "close" line (for kr_wait_for: lines come from
# the writer thread, closes after the client has gone).
kr_audit_closed() {
    "$KR_PY" - "$1" <<'PYEOF'
import json, sys
ev = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") == "connection":
        ev.setdefault(r["event"], set()).add(r["conn_id"])
sys.exit(0 if ev.get("open", set()) <= ev.get("close", set()) else 1)
PYEOF
}

# kr_audit_keys_documented: every key of the audit lines this test left
# (audit*.log in its work directory, krelay stopped) is in doc/audit.md,
# the schema (tests/tools/audit_keys.py).  Logs what is not.
kr_audit_keys_documented() {
    local f files=() out
    for f in "$KR_WORK"/audit*.log; do
        [ -s "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 0
    if ! out=$("$KR_PY" "$top_srcdir/tests/tools/audit_keys.py" \
                --doc "$top_srcdir/doc/audit.md" --lenient "${files[@]}" \
                2>&1); then
        kr_log "FAIL: audit lines with keys doc/audit.md does not list:"
        printf '%s\n' "$out" >&2
        return 1
    fi
    return 0
}

kr_cleanup() {
    local rc=$? i pid
    trap - EXIT INT TERM
    # Stop in reverse order: clients, krelay, then the mock.
    for ((i = ${#KR_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${KR_PIDS[$i]}
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${KR_PIDS[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$KR_WORK" ] && [ -d "$KR_WORK" ]; then
        kr_audit_keep
        if [ "$rc" -eq 0 ] && ! kr_audit_keys_documented; then
            rc=1
        fi
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
            local f
            for f in "$KR_WORK"/*.log; do
                [ -s "$f" ] || continue
                echo "----- $(basename "$f") (last 60 lines) -----" >&2
                tail -n 60 "$f" >&2
            done
        fi
        if [ "${KRELAY_TEST_KEEP:-0}" = 1 ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; }; then
            kr_log "work directory kept: $KR_WORK"
        else
            rm -rf "$KR_WORK"
        fi
    fi
    exit "$rc"
}

# kr_setup: work directory in the build tree, traps, a global deadline.
# $1: seconds before the whole test is killed (default 120), times
# KRELAY_TEST_TIME_SCALE.
kr_setup() {
    local limit=$(( ${1:-120} * KRELAY_TEST_TIME_SCALE ))
    # Port picking and the raw-protocol clients use Debian's python3.
    [ -x "$KR_PY" ] || kr_skip "$KR_PY (package python3)"
    mkdir -p "$top_builddir/tests/integration" || exit 99
    KR_WORK=$(mktemp -d "$top_builddir/tests/integration/$KR_TEST_NAME.XXXXXX") ||
        exit 99
    trap kr_cleanup EXIT
    trap 'exit 1' INT TERM
    # Watchdog: a hung client or daemon fails the test instead of hanging
    # `make check`.
    ( trap 'kill "$spid" 2>/dev/null; exit 0' TERM
      sleep "$limit" & spid=$!
      wait "$spid" && { kr_log "FAIL: timed out after ${limit}s";
                        kill -TERM $$ 2>/dev/null; } ) &
    KR_PIDS+=($!)
    kr_log "work directory $KR_WORK"
}

# kr_free_ports N: print the first port P (between 20000 and 60000) such
# that P..P+N-1 are all free on 127.0.0.1.  Below the kernel's ephemeral
# range when there is room: a port found free must stay free until krelay
# or the mock binds it (seconds later for rules_reload.sh), and outgoing
# connections of every process on the machine take ephemeral ports.
kr_free_ports() {
    "$KR_PY" "$top_srcdir/tests/integration/free_ports.py" "$1"
}

# kr_listening PORT: true when something listens on 127.0.0.1:PORT (or
# the wildcard), read from /proc/net/tcp{,6} without connecting: a probe
# connection would make krelay dial the upstream for nothing.
kr_listening() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
                      END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# kr_wait_for SECONDS CMD...: run CMD every 0.1 s until it succeeds;
# false when it has not within SECONDS of wall-clock time.  Waits are
# bounded generously (a busy machine is slow; a wait ends as soon as CMD
# succeeds), never by a count of rounds.
kr_wait_for() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

# kr_wait_port PORT [SECONDS [PID]]: wait until PORT is listening; with
# PID, false as soon as that process is gone.
kr_wait_port() {
    local port=$1 end=$((SECONDS + ${2:-60})) pid=${3:-}
    until kr_listening "$port"; do
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

# kr_mock_ready_or_gone: the mock wrote its ready file, or exited.
kr_mock_ready_or_gone() {
    [ -s "$KR_WORK/mock.ready" ] || ! kill -0 "$KR_MOCK_PID" 2>/dev/null
}

# kr_start_mock [KRMOCK] [TOPIC:PARTS...]: start a 3-broker mock cluster.
# Sets KR_MOCK_BASE (NodeId n at KR_MOCK_BASE+n), KR_MOCK_BOOTSTRAP,
# KR_MOCK_PID, KR_ACCEPT_LOG.
kr_start_mock() {
    local bin=$KR_KRMOCK
    if [ $# -gt 0 ] && [ -x "$1" ]; then
        bin=$1
        shift
    fi
    [ -x "$bin" ] || kr_skip "$bin (built only with librdkafka-dev)"
    local topics=() t attempt
    for t in "$@"; do
        topics+=(-t "$t")
    done
    KR_ACCEPT_LOG=$KR_WORK/accept.txt
    for attempt in 1 2 3; do
        KR_MOCK_BASE=$(kr_free_ports $((KR_NODEIDS + 1))) || exit 99
        rm -f "$KR_WORK/mock.ready"
        # shellcheck disable=SC2086  # KR_MOCK_ARGS: extra krmock options
        "$bin" -b "$KR_NODEIDS" -p "$KR_MOCK_BASE" "${topics[@]}" \
            -r "$KR_WORK/mock.ready" -a "$KR_ACCEPT_LOG" ${KR_MOCK_ARGS:-} \
            >"$KR_WORK/mock.out" 2>>"$KR_WORK/mock.log" &
        KR_MOCK_PID=$!
        KR_PIDS+=("$KR_MOCK_PID")
        # up to 60 s while it runs (a bind conflict makes it exit)
        kr_wait_for 60 kr_mock_ready_or_gone
        if [ -s "$KR_WORK/mock.ready" ]; then
            KR_MOCK_BOOTSTRAP=$(head -n 1 "$KR_WORK/mock.ready")
            kr_log "mock cluster ($(basename "$bin")) at $KR_MOCK_BOOTSTRAP"
            return 0
        fi
        kill "$KR_MOCK_PID" 2>/dev/null
        wait "$KR_MOCK_PID" 2>/dev/null
        kr_log "mock did not start (attempt $attempt), retrying"
    done
    kr_fail "the mock cluster did not start"
}

# kr_write_conf FILE: krelay's config for the running mock.
# KR_LISTENER_CONF: lines added to its [listener] section as they are
# (e.g. "max_frame_bytes = 16777216").  KR_UPSTREAM_BOOTSTRAP replaces
# the mock's bootstrap list, KR_UPSTREAM_CONF adds lines to [upstream]
# (the SASL fronts: see kr_start_sasl_fronts).  KR_LISTENER_NAME names
# the [listener] section (needed when KR_EXTRA_CONF adds another one).
kr_write_conf() {
    cat >"$1" <<EOF
; written by tests/integration/lib.sh for $KR_TEST_NAME
[upstream]
bootstrap_servers = ${KR_UPSTREAM_BOOTSTRAP:-$KR_MOCK_BOOTSTRAP}
${KR_UPSTREAM_CONF:-}

[listener${KR_LISTENER_NAME:+ $KR_LISTENER_NAME}]
listen = 127.0.0.1:$KR_PORT
advertised_host = 127.0.0.1
broker_port_base = $KR_BROKER_BASE
node_id_min = 1
node_id_max = $KR_NODEIDS
${KR_LISTENER_CONF:-}

[log]
level = $KRELAY_LOG_LEVEL
target = $KR_WORK/krelay.log
EOF
    # Rules and [audit] of the rules_*.sh tests: a file appended as is.
    if [ -n "${KR_EXTRA_CONF:-}" ]; then
        cat "$KR_EXTRA_CONF" >>"$1"
    fi
}

# kr_start_krelay: krelay in front of the mock.  Sets KR_BOOTSTRAP (what
# clients use), KR_PORT, KR_BROKER_BASE (NodeId n at KR_BROKER_BASE+n),
# KR_KRELAY_PID.  With KRELAY_TEST_DIRECT=1 clients use the mock instead.
kr_start_krelay() {
    if [ "$KRELAY_TEST_DIRECT" = 1 ]; then
        KR_BOOTSTRAP=$KR_MOCK_BOOTSTRAP
        KR_PORT=$((KR_MOCK_BASE + 1))
        KR_BROKER_BASE=$KR_MOCK_BASE
        kr_log "KRELAY_TEST_DIRECT=1: clients talk to the mock directly"
        return 0
    fi
    [ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"
    local attempt
    for attempt in 1 2 3; do
        local base
        base=$(kr_free_ports $((KR_NODEIDS + 2))) || exit 99
        KR_PORT=$base
        KR_BROKER_BASE=$((base + 1))   # NodeId n: base + 1 + n
        kr_write_conf "$KR_WORK/krelay.ini"
        : >"$KR_WORK/krelay.log"
        "$KR_KRELAY" -c "$KR_WORK/krelay.ini" \
            >>"$KR_WORK/krelay.out.log" 2>&1 &
        KR_KRELAY_PID=$!
        KR_PIDS+=("$KR_KRELAY_PID")
        # a bind conflict (the ports were free a moment ago) makes krelay
        # exit: try other ports at once
        if kr_wait_port "$KR_PORT" 60 "$KR_KRELAY_PID" &&
           kr_wait_port $((KR_BROKER_BASE + KR_NODEIDS)) 60 \
               "$KR_KRELAY_PID"; then
            if kill -0 "$KR_KRELAY_PID" 2>/dev/null; then
                KR_BOOTSTRAP=127.0.0.1:$KR_PORT
                kr_log "krelay (pid $KR_KRELAY_PID) at $KR_BOOTSTRAP," \
                    "NodeId n at port $KR_BROKER_BASE+n"
                return 0
            fi
        fi
        kill "$KR_KRELAY_PID" 2>/dev/null
        wait "$KR_KRELAY_PID" 2>/dev/null
        kr_log "krelay did not start (attempt $attempt)"
    done
    kr_fail "krelay did not start; see krelay.out.log / krelay.log"
}

# kr_is_direct: true when the krelay-specific checks must be skipped.
kr_is_direct() {
    [ "$KRELAY_TEST_DIRECT" = 1 ]
}

# kr_closes_not_by_client: print krelay's connection-close lines (from
# $KR_WORK/krelay.log) whose cause is not the client closing: krelay
# closed (bad input, a response it could not handle, a timeout, a
# refusal) or the upstream did.  Every close is one line naming the
# connection ("[c#W.N ...]"): at warn/error level as it is, at
# notice/info/debug level ending in "(N bytes up, M down)".  A client's
# own close reads "client closed the connection".  Closes are logged at
# info (timeouts, an upstream's orderly close), notice (refusals) or
# warn/error: complete at KRELAY_LOG_LEVEL info, debug (the default) or
# trace; at notice the info ones are missed.
kr_closes_not_by_client() {
    grep -E ': (warn|error): \[c#[0-9]+\.[0-9]+ |: [a-z]+: \[c#[0-9]+\.[0-9]+ .*\([0-9]+ bytes up, [0-9]+ down\)$' \
        "$KR_WORK/krelay.log" | grep -v '\] client closed the connection' ||
        true
}

# kr_check_no_close: fail when krelay's log shows a connection closed
# for any other reason than its client closing it.
kr_check_no_close() {
    kr_is_direct && return 0
    local bad
    bad=$(kr_closes_not_by_client)
    [ -z "$bad" ] ||
        kr_fail "$(printf '%s\n' "$bad" | wc -l) connection(s) closed, not" \
            "by their client: $(printf '%s\n' "$bad" | head -3)"
}

# kr_check_brokers FILE: FILE holds one "NODEID HOST PORT" per broker a
# client was told about; each must be krelay (127.0.0.1, KR_BROKER_BASE +
# NodeId), none a mock port.
kr_check_brokers() {
    local file=$1 n=0 id host port
    [ -s "$file" ] || kr_fail "no brokers in $file"
    while read -r id host port; do
        n=$((n + 1))
        if kr_is_direct; then
            continue    # KRELAY_TEST_DIRECT=1: the mock's own addresses
        fi
        [ "$host" = 127.0.0.1 ] ||
            kr_fail "broker $id advertised as host $host, not krelay's"
        [ "$port" = $((KR_BROKER_BASE + id)) ] ||
            kr_fail "broker $id advertised at port $port, want $((KR_BROKER_BASE + id))"
        if [ "$port" -gt "$KR_MOCK_BASE" ] &&
           [ "$port" -le $((KR_MOCK_BASE + KR_NODEIDS)) ]; then
            kr_fail "broker $id advertised at a mock port $port"
        fi
    done <"$file"
    [ "$n" -eq "$KR_NODEIDS" ] ||
        kr_fail "$n brokers listed in $file, want $KR_NODEIDS"
    if kr_is_direct; then
        kr_log "metadata: $n brokers (direct: not checked)"
    else
        kr_log "metadata: $n brokers, all at krelay's addresses"
    fi
}

# kr_check_no_direct: every connection a mock broker accepted came from
# the krelay process (the mock's accept log names each peer's owner), or
# with the SASL fronts (kr_start_sasl_fronts) from the fronts' process.
# An owner of pid=-1 is a connection its peer had closed before the mock
# accepted it (krelay dials a broker at a client's login, and a client
# may go at once): it carried nothing, and is not counted against.
kr_check_no_direct() {
    kr_is_direct && return 0
    [ -s "$KR_ACCEPT_LOG" ] || kr_fail "the mock accepted no connection"
    local bad pid=$KR_KRELAY_PID who=krelay
    if [ -n "${KR_SASL_PID:-}" ]; then
        pid=$KR_SASL_PID
        who="the SASL fronts"
    fi
    bad=$(grep -v -e " pid=$pid " -e " pid=-1 " "$KR_ACCEPT_LOG" || true)
    if [ -n "$bad" ]; then
        kr_fail "connections to mock brokers not from $who (pid $pid): $bad"
    fi
    kr_log "mock brokers accepted $(wc -l <"$KR_ACCEPT_LOG") connections, all from $who"
}

# kr_check_alive: krelay must still be running (no crash during the test).
kr_check_alive() {
    kr_is_direct && return 0
    kill -0 "$KR_KRELAY_PID" 2>/dev/null || kr_fail "krelay exited during the test"
}

# kr_gone PID: the process has exited.
kr_gone() {
    ! kill -0 "$1" 2>/dev/null
}

# kr_stop PID NAME LOG...: SIGTERM, wait (bounded), fail unless it exits
# 0 and its logs hold no sanitizer report (ASan, UBSan, LSan, TSan).
kr_stop() {
    local pid=$1 name=$2 rc
    shift 2
    kill -TERM "$pid" 2>/dev/null || kr_fail "$name (pid $pid) already gone"
    # a sanitizer build's exit (leak check) on a busy machine takes a while
    kr_wait_for 60 kr_gone "$pid" ||
        kr_fail "$name did not stop within 60 s of SIGTERM"
    wait "$pid"
    rc=$?
    if grep -l 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer' \
        "$@" >/dev/null 2>&1; then
        kr_fail "$name: sanitizer report in $*"
    fi
    [ "$rc" -eq 0 ] || kr_fail "$name exited with status $rc on SIGTERM"
}

# kr_finish [FN]: the checks every test ends with, then PASS.  krelay
# still runs, no mock broker accepted a connection from anything else, and
# krelay and the mock stop cleanly on SIGTERM; FN, when given, runs once
# krelay stopped (its stop report is in $KR_WORK/krelay.log).
kr_finish() {
    kr_check_alive
    kr_check_no_direct
    if ! kr_is_direct; then
        kr_stop "$KR_KRELAY_PID" krelay "$KR_WORK/krelay.out.log" \
            "$KR_WORK/krelay.log"
        [ -z "${1:-}" ] || "$1"
    fi
    kr_stop "$KR_MOCK_PID" krmock "$KR_WORK/mock.log"
    kr_log "PASS"
}

# kr_run SECONDS CMD...: run a client with a bounded time (SECONDS times
# KRELAY_TEST_TIME_SCALE), its output in $KR_WORK/<name>.log is shown on
# failure.
kr_run() {
    local limit=$(( $1 * KRELAY_TEST_TIME_SCALE ))
    shift
    timeout -k 5 "$limit" "$@"
}

# kr_payloads FILE N TAG: N distinct lines (test payloads), each as long
# as the others (a fixed-width random part): the frames that carry them
# have the same sizes in every run, which keeps the audit lines' sizes
# comparable between runs (tests/tools/audit_compare.sh).
kr_payloads() {
    local i
    for ((i = 1; i <= $2; i++)); do
        printf '%s-%05d-%05d%05d\n' "$3" "$i" "$RANDOM" "$RANDOM"
    done >"$1"
}

# ---- TLS clients (issue 8's client matrix, tests/integration/tls_*.sh,
# make check-long) --------------------------------------------------------

# kr_start_krelay_tls: krelay in front of the mock with two TLS listeners,
# the CA and certificates made now (tests/tools/tls_certs.sh) in
# KR_CERTS:
#   tls   the server certificate only: port KR_TLS_PORT, NodeId n at
#         KR_TLS_BROKER_BASE+n
#   mtls  a client certificate of ca.pem required: KR_MTLS_PORT,
#         KR_MTLS_BROKER_BASE+n
# Clients bootstrap at localhost:PORT (a host name check), brokers are
# advertised as 127.0.0.1 (the certificate's IP SAN).  Sets
# KR_KRELAY_PID.  Skips with KRELAY_TEST_DIRECT=1 (the mock has no TLS).
kr_start_krelay_tls() {
    local attempt base n=$((KR_NODEIDS + 2))
    kr_is_direct && kr_skip "a TLS listener (KRELAY_TEST_DIRECT=1: none)"
    kr_need_cmd openssl
    [ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"
    KR_CERTS=$KR_WORK/certs
    bash "$top_srcdir/tests/tools/tls_certs.sh" "$KR_CERTS" ||
        kr_fail "tests/tools/tls_certs.sh could not make the certificates"
    for attempt in 1 2 3; do
        base=$(kr_free_ports $((2 * n))) || exit 99
        KR_TLS_PORT=$base
        KR_TLS_BROKER_BASE=$((base + 1))
        KR_MTLS_PORT=$((base + n))
        KR_MTLS_BROKER_BASE=$((base + n + 1))
        cat >"$KR_WORK/krelay.ini" <<EOC
; written by tests/integration/lib.sh (kr_start_krelay_tls) for $KR_TEST_NAME
[upstream]
bootstrap_servers = $KR_MOCK_BOOTSTRAP

[listener tls]
listen = 127.0.0.1:$KR_TLS_PORT
advertised_host = 127.0.0.1
broker_port_base = $KR_TLS_BROKER_BASE
node_id_min = 1
node_id_max = $KR_NODEIDS
ssl = true
ssl_certificate = $KR_CERTS/server-full.pem

[listener mtls]
listen = 127.0.0.1:$KR_MTLS_PORT
advertised_host = 127.0.0.1
broker_port_base = $KR_MTLS_BROKER_BASE
node_id_min = 1
node_id_max = $KR_NODEIDS
ssl = true
ssl_certificate = $KR_CERTS/server.pem
ssl_key = $KR_CERTS/server.key
ssl_client_ca = $KR_CERTS/ca.pem

[log]
level = $KRELAY_LOG_LEVEL
target = $KR_WORK/krelay.log
EOC
        : >"$KR_WORK/krelay.log"
        "$KR_KRELAY" -c "$KR_WORK/krelay.ini" \
            >>"$KR_WORK/krelay.out.log" 2>&1 &
        KR_KRELAY_PID=$!
        KR_PIDS+=("$KR_KRELAY_PID")
        if kr_wait_port $((KR_MTLS_BROKER_BASE + KR_NODEIDS)) 60 \
               "$KR_KRELAY_PID" &&
           kr_wait_port "$KR_TLS_PORT" 5 "$KR_KRELAY_PID"; then
            kr_log "krelay (pid $KR_KRELAY_PID): TLS at $KR_TLS_PORT," \
                "mTLS at $KR_MTLS_PORT"
            return 0
        fi
        kill "$KR_KRELAY_PID" 2>/dev/null
        wait "$KR_KRELAY_PID" 2>/dev/null
        kr_log "krelay did not start (attempt $attempt)"
    done
    kr_fail "krelay did not start; see krelay.out.log / krelay.log"
}

# kr_tls_matrix NAME COUNT CMD...: run the client CMD... BOOTSTRAP TOPIC
# COUNT BROKERS_OUT (it produces COUNT messages and consumes them back,
# exit 0 when all came back: kafka_python_client.py, kafkajs_client.js,
# confluent_kafka_client.py) through kr_start_krelay_tls's listeners:
# topic tls with KR_TLS_CA (the CA file only), topic mtls with a client
# certificate too (KR_TLS_CERT, KR_TLS_KEY).  Its output goes to
# $KR_WORK/NAME-LISTENER.log.  Checked: each run passed, its Metadata
# named only that listener's addresses, krelay logged a TLS handshake on
# each listener and the client certificate's subject on mtls.
kr_tls_matrix() {
    local name=$1 count=$2 l port log
    shift 2
    for l in tls mtls; do
        export KR_TLS_CA=$KR_CERTS/ca.pem
        if [ "$l" = tls ]; then
            port=$KR_TLS_PORT
            KR_BROKER_BASE=$KR_TLS_BROKER_BASE
            unset KR_TLS_CERT KR_TLS_KEY
        else
            port=$KR_MTLS_PORT
            KR_BROKER_BASE=$KR_MTLS_BROKER_BASE
            export KR_TLS_CERT=$KR_CERTS/client.pem
            export KR_TLS_KEY=$KR_CERTS/client.key
        fi
        log=$KR_WORK/$name-$l.log
        kr_run 90 "$@" "localhost:$port" "$l" "$count" \
            "$KR_WORK/brokers-$l.txt" >"$log" 2>&1 ||
            kr_fail "$name on $l: $(tail -n 5 "$log")"
        kr_log "$name on $l: $(tail -n 1 "$log")"
        kr_check_brokers "$KR_WORK/brokers-$l.txt"
        grep -Eq "> $l/(bootstrap|NodeId [0-9]+)\] tls handshake with the client done: TLSv1\.[23] " \
            "$KR_WORK/krelay.log" ||
            kr_fail "$name on $l: no TLS handshake logged"
    done
    unset KR_TLS_CA KR_TLS_CERT KR_TLS_KEY
    grep -Eq "> mtls/(bootstrap|NodeId [0-9]+)\] client certificate: .*CN=krelay-test-client" \
        "$KR_WORK/krelay.log" ||
        kr_fail "$name on mtls: no client certificate subject logged"
}

# ---- SASL upstream (issue 9): tests/integration/sasl_front.py ----------

# kr_start_sasl_fronts [OPTION...]: SASL_PLAINTEXT brokers in front of
# the running mock (kr_start_mock): one sasl_front.py process listening
# on one port per mock broker, relaying to that broker once the client
# has authenticated as a Kafka broker wants (sasl_front.py's header says
# what it checks; it never trusts krelay).  OPTIONs go to sasl_front.py
# as they are: --mechanisms, --session-lifetime-ms, --scram-nonce-check,
# --oauth-claim, --iterations, --user NAME:PASSWORD / --users FILE
# (without either: the test accounts alice:alice-test-pw and
# bob:bob-test-pw).  Sets:
#   KR_SASL_BASE       NodeId n's front at 127.0.0.1:$((KR_SASL_BASE + n))
#   KR_SASL_BOOTSTRAP  "127.0.0.1:P1,127.0.0.1:P2,..." (all fronts)
#   KR_SASL_DIAL       krelay [upstream] lines "dial.n = 127.0.0.1:Pn"
#   KR_SASL_EVENTS     the events file (JSON lines: auth, request with
#                      the principal each request was relayed as, close)
#   KR_SASL_PID        the process (stopped at exit; kr_check_no_direct
#                      then wants every mock connection from it)
# Its log: $KR_WORK/sasl_front.log.  krelay in front of the fronts:
#   KR_UPSTREAM_BOOTSTRAP=$KR_SASL_BOOTSTRAP
#   KR_UPSTREAM_CONF="$KR_SASL_DIAL
#   <krelay's upstream SASL keys>"
#   kr_start_krelay
kr_start_sasl_fronts() {
    local attempt base n a listen accounts=(--user alice:alice-test-pw
                                            --user bob:bob-test-pw)
    for a in "$@"; do
        case $a in --user | --users) accounts=() ;; esac
    done
    KR_SASL_EVENTS=$KR_WORK/sasl_events.jsonl
    for attempt in 1 2 3; do
        base=$(kr_free_ports "$KR_NODEIDS") || exit 99
        KR_SASL_BASE=$((base - 1))
        listen=()
        KR_SASL_DIAL=
        for ((n = 1; n <= KR_NODEIDS; n++)); do
            listen+=(--listen "$((KR_SASL_BASE + n))=127.0.0.1:$((KR_MOCK_BASE + n))")
            KR_SASL_DIAL+="dial.$n = 127.0.0.1:$((KR_SASL_BASE + n))"$'\n'
        done
        rm -f "$KR_WORK/sasl_front.ready"
        "$KR_PY" "$top_srcdir/tests/integration/sasl_front.py" "${listen[@]}" \
            "${accounts[@]}" --events "$KR_SASL_EVENTS" \
            --ready-file "$KR_WORK/sasl_front.ready" "$@" \
            2>>"$KR_WORK/sasl_front.log" &
        KR_SASL_PID=$!
        KR_PIDS+=("$KR_SASL_PID")
        kr_wait_for 30 kr_sasl_ready_or_gone
        if [ -s "$KR_WORK/sasl_front.ready" ]; then
            KR_SASL_BOOTSTRAP=$(head -n 1 "$KR_WORK/sasl_front.ready")
            kr_log "SASL fronts (pid $KR_SASL_PID) at $KR_SASL_BOOTSTRAP"
            return 0
        fi
        kill "$KR_SASL_PID" 2>/dev/null
        wait "$KR_SASL_PID" 2>/dev/null
        kr_log "SASL fronts did not start (attempt $attempt)"
    done
    kr_fail "the SASL fronts did not start; see sasl_front.log"
}

# kr_sasl_ready_or_gone: the fronts wrote their ready file, or exited.
kr_sasl_ready_or_gone() {
    [ -s "$KR_WORK/sasl_front.ready" ] || ! kill -0 "$KR_SASL_PID" 2>/dev/null
}

# start_sasl_fronts: the name issue 9's plan uses for kr_start_sasl_fronts.
start_sasl_fronts() {
    kr_start_sasl_fronts "$@"
}
