#!/bin/bash
# run.sh - krelay's benchmark harness (issue 4; `make bench`).
#
# Starts librdkafka's mock cluster (3 brokers), HAProxy (mode tcp, one
# listener per broker, the brokers advertising HAProxy's ports) and krelay
# (one worker), then runs every workload directly against the mock,
# through HAProxy and through krelay, alternating the order from one
# repetition to the next, REPS times each.  Prints medians and ratios as
# a Markdown table and writes the JSON described in
# contrib/bench/results/README.md.  Loopback only; every process started
# here is stopped at the end; every wait is bounded.
#
#   contrib/bench/run.sh [--reps N] [--quick] [--out FILE]
#                        [--workloads LIST] [--targets LIST] [--note TEXT]
#                        [--ab KRELAY_A KRELAY_B [--label-a T] [--label-b T]]
#
#   --reps N        repetitions of each workload and target (default 5)
#   --quick         smoke run: 1 repetition, short and small workloads
#   --out FILE      results JSON (default $top_builddir/bench-results.json)
#   --workloads L   comma list of produce1k,produce100,produce1rec,fetch,
#                   latency,idle,codec,auditline,records,legacy_produce,
#                   legacy_fetch,tls_produce,tls_fetch,
#                   tls_handshake,tls_idle,blast_produce,tls_blast_produce,
#                   blast_scale
#                   (default: all; produce_1k, produce_100 and
#                   produce_1rec, the JSON's names, also do).  The
#                   blast workloads (krbench blast and krbench canned,
#                   tests/bench/kb_blast.c) put the proxy alone on its
#                   CPU between a cheap load generator and a scripted
#                   upstream: the proxy is the bottleneck.  The legacy
#                   workloads (issue 10) run kcat through krelay
#                   translating (Produce/Fetch v2 for krmock -K 4.0.0)
#                   and passing through, whatever --targets says;
#                   blast_scale (issue 12) runs krelay with 1 worker and
#                   with 2 (KRBENCH_SCALE_WORKERS) behind a rule-heavy
#                   configuration (audit + clamp) between krbench blast
#                   and its own krbench canned, whatever --targets says
#   --targets L     comma list of direct,haproxy,krelay,krelay_audit,
#                   krelay_sasl,krelay_tls,haproxy_tls (default: all).
#                   krelay_audit is a second krelay, the same binary,
#                   whose one rule audits every request to a file (issue
#                   14: what an audit line costs); krelay_sasl another,
#                   whose listener terminates SASL (sasl = terminate,
#                   SCRAM-SHA-512, a credentials file made here with
#                   krelay-passwd) for clients that log in with
#                   SCRAM-SHA-512 (issue 9: what SASL costs once
#                   authenticated); both run the throughput workloads
#                   (produce1k, produce100, produce1rec, fetch), not
#                   latency, idle or blast.  krelay_tls and haproxy_tls
#                   (issue 8) terminate TLS (1.3, TLS_AES_128_GCM_SHA256,
#                   X25519, an ECDSA P-256 certificate made at run time)
#                   in front of the same mock; they run the tls_*
#                   workloads only, and the other targets never run those
#   --latency-mode M  interleaved (default: one client, the targets'
#                   requests interleaved in one run) or separate (one
#                   run per target, the method before 2026-11-30)
#   --latency-prio P  rt (default: the latency client, the mock and the
#                   proxies run SCHED_FIFO during the latency workload,
#                   so that other load on the machine does not delay
#                   them; needs chrt and CAP_SYS_NICE, else normal) or
#                   normal
#   --note TEXT     free text stored in the JSON (e.g. the machine)
#   --ab A B        A/B mode: two krelay binaries (A the baseline, B the
#                   candidate) side by side against the same mock, both
#                   long-lived on the proxy CPU, their runs interleaved
#                   (the order alternating per repetition; latency: one
#                   client, both in one run); targets krelay_a,krelay_b
#                   (--targets may add direct), workloads produce1k,
#                   produce100,fetch,latency (idle allowed, codec not:
#                   it does not depend on the binary); the JSON gains an
#                   "ab" section (medians, B/A, verdicts against the
#                   thresholds; contrib/bench/results/README.md); default
#                   --out $top_builddir/bench-ab-results.json.
#                   `make bench KRELAY_A=... KRELAY_B=...` (either one
#                   defaults to this build's krelay); contrib/bench/ab.sh
#                   builds two git revisions and runs this
#   --label-a T, --label-b T   names of A and B in the JSON and the table
#                   (e.g. the git revision; default: the paths)
#
# Environment:
#   top_builddir, top_srcdir   set by `make bench`; default: the current
#                              directory and this file's ../..
#   KRELAY_DEPS_DIR            where contrib/install-deps.sh put
#                              node-rdkafka (librdkafka 2.12: its mock can
#                              advertise HAProxy's ports); default
#                              ~/.cache/krelay
#   KRBENCH_CPU_CLIENT, KRBENCH_CPU_MOCK, KRBENCH_CPU_PROXY,
#   KRBENCH_CPU_PROXY_FETCH    CPU lists for taskset (defaults 0, 1, 1
#                              and 0 for the fetch workload on a 2-core
#                              machine; see README.md)
#   KRBENCH_CPU_CANNED         the blast workloads' scripted upstream
#                              (default: the client's CPU)
#   KRBENCH_SYSTEM_RDKAFKA=1   use the system librdkafka (the automake-
#                              built krbench) even when 2.12 is there
#   KRBENCH_KEEP=1             keep the work directory
#   KRBENCH_PRODUCE_SECS, KRBENCH_LAT_RATE (per target),
#   KRBENCH_LAT_COUNT (measured requests per target),
#   KRBENCH_LAT_WARM (open-loop warm-up seconds, not measured),
#   KRBENCH_LAT_VERSION, KRBENCH_IDLE_CONNS, KRBENCH_FETCH_PARTS,
#   KRBENCH_CODEC_SECS, KRBENCH_HANDSHAKES (per repetition and target),
#   KRBENCH_TLS_IDLE_CONNS,
#   KRBENCH_BLAST_CONNS, KRBENCH_BLAST_DEPTH (requests in flight per
#   connection), KRBENCH_BLAST_RECORDS, KRBENCH_BLAST_SIZE (records per
#   request and their bytes), KRBENCH_BLAST_VERSION (Produce)
#                              workload sizes (defaults below)
#   KRBENCH_LEGACY_RECORDS, KRBENCH_LEGACY_FETCH_PARTS
#                              legacy_produce's values per run (1 KiB
#                              each), legacy_fetch's partitions (4 MiB of
#                              1 KiB values each)
#   KRBENCH_BLAST_QUOTA        the blast workloads' proxy CPU cap, a share
#                              of one CPU (default 0.5; 0: none), by a
#                              cgroup (v1 cpu or v2 cpu.max) around the
#                              proxy during its blast runs: on loopback
#                              the peers cost about what the proxy does
#                              per request, so only a cap makes the proxy
#                              the bottleneck on 2 CPUs
#   KRBENCH_SCALE_WORKERS      blast_scale's legs, worker counts (default
#                              1,2; the 1-worker leg is the base)
#   KRBENCH_SCALE_CONNS, KRBENCH_SCALE_DEPTH, KRBENCH_SCALE_RECORDS,
#   KRBENCH_SCALE_SIZE, KRBENCH_SCALE_VERSION, KRBENCH_SCALE_CLAMP
#                              its generator's shape (64 connections, 64
#                              in flight, 1 record of 100 bytes, Produce
#                              v9) and the version krelay clamps it to (7)
#   KRBENCH_SCALE_PAUSE, KRBENCH_SCALE_PAUSE_CANNED
#                              µs its generator and its scripted upstream
#                              sleep between polls (3000, 2000)
#   KRBENCH_SCALE_QUOTA        a share of one CPU per worker (default 0:
#                              none): each leg's workers capped at N x
#                              that (cgroup), every leg on every CPU, so
#                              that on a small machine N workers and the
#                              peers need not compete for the CPUs
#   KRBENCH_SCALE_AUDIT_DIR    where its krelays write their audit files
#                              (default: a directory on /dev/shm, else the
#                              work directory)
#   KRBENCH_LAT_MODE, KRBENCH_LAT_PRIO
#                              defaults of --latency-mode, --latency-prio
#   KRBENCH_LOG_LEVEL          the krelay instances' [log] level (default
#                              notice; info also logs krelay_sasl's
#                              logins, counted into the JSON's meta)
#   KRELAY_PASSWD_BIN          krelay-passwd for krelay_sasl's credentials
#                              (default: beside the krelay binary, else
#                              $top_builddir/krelay-passwd)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${top_srcdir:=$(cd "$HERE/../.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${KRELAY_DEPS_DIR:=${HOME:-/root}/.cache/krelay}"
PY=/usr/bin/python3

REPS=5
QUICK=0
OUT=$top_builddir/bench-results.json
WORKLOADS=produce1k,produce100,produce1rec,fetch,latency,idle,codec,auditline
WORKLOADS=$WORKLOADS,records,legacy_produce,legacy_fetch
WORKLOADS=$WORKLOADS,tls_produce,tls_fetch,tls_handshake,tls_idle
WORKLOADS=$WORKLOADS,blast_produce,tls_blast_produce,blast_scale
TARGETS=direct,haproxy,krelay,krelay_audit,krelay_sasl,krelay_tls,haproxy_tls
LAT_MODE=${KRBENCH_LAT_MODE:-interleaved}
LAT_PRIO=${KRBENCH_LAT_PRIO:-rt}
NOTE=
AB=0
KRELAY_A=
KRELAY_B=
LABEL_A=
LABEL_B=
SET_WL=0
SET_TG=0
SET_OUT=0
while [ $# -gt 0 ]; do
    case $1 in
    --reps) REPS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --out) OUT=$2; SET_OUT=1; shift 2 ;;
    --workloads) WORKLOADS=$2; SET_WL=1; shift 2 ;;
    --targets) TARGETS=$2; SET_TG=1; shift 2 ;;
    --latency-mode) LAT_MODE=$2; shift 2 ;;
    --latency-prio) LAT_PRIO=$2; shift 2 ;;
    --note) NOTE=$2; shift 2 ;;
    --ab)
        [ $# -ge 3 ] || { echo "run.sh: --ab needs two krelay binaries" >&2; exit 2; }
        AB=1; KRELAY_A=$2; KRELAY_B=$3; shift 3 ;;
    --label-a) LABEL_A=$2; shift 2 ;;
    --label-b) LABEL_B=$2; shift 2 ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { print; next } { exit }' "$0"
               exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
case $REPS in ''|*[!0-9]*) echo "run.sh: bad --reps" >&2; exit 2 ;; esac
# the JSON's names (produce_1k, produce_100, produce_1rec) accepted too
WORKLOADS=${WORKLOADS//produce_/produce}
case $LAT_MODE in
interleaved|separate) ;;
*) echo "run.sh: --latency-mode is interleaved or separate" >&2; exit 2 ;;
esac
case $LAT_PRIO in
rt|normal) ;;
*) echo "run.sh: --latency-prio is rt or normal" >&2; exit 2 ;;
esac
if [ "$AB" = 1 ]; then
    [ "$SET_WL" = 1 ] || WORKLOADS=produce1k,produce100,fetch,latency
    [ "$SET_TG" = 1 ] || TARGETS=krelay_a,krelay_b
    [ "$SET_OUT" = 1 ] || OUT=$top_builddir/bench-ab-results.json
    for t in ${TARGETS//,/ }; do
        case $t in
        direct|krelay_a|krelay_b) ;;
        *) echo "run.sh: --ab: targets are direct, krelay_a, krelay_b" >&2
           exit 2 ;;
        esac
    done
    case ",$TARGETS," in
    *,krelay_a,*) ;;
    *) echo "run.sh: --ab: the targets must include krelay_a" >&2; exit 2 ;;
    esac
    case ",$TARGETS," in
    *,krelay_b,*) ;;
    *) echo "run.sh: --ab: the targets must include krelay_b" >&2; exit 2 ;;
    esac
    for k in "$KRELAY_A" "$KRELAY_B"; do
        if [ ! -f "$k" ] || [ ! -x "$k" ]; then
            echo "run.sh: --ab: $k is not an executable file" >&2
            exit 2
        fi
    done
    KRELAY_A=$(cd "$(dirname "$KRELAY_A")" && pwd)/$(basename "$KRELAY_A")
    KRELAY_B=$(cd "$(dirname "$KRELAY_B")" && pwd)/$(basename "$KRELAY_B")
    : "${LABEL_A:=$KRELAY_A}"
    : "${LABEL_B:=$KRELAY_B}"
fi

NCPU=$(nproc)
if [ "$NCPU" -ge 3 ]; then
    DEF_CLIENT=0 DEF_MOCK=1 DEF_PROXY=2 DEF_PROXY_FETCH=2
else
    # Too few CPUs for one each: the proxy (HAProxy or krelay alike)
    # shares the CPU of the process with more room in the direct leg.
    # Producing, the load generator is the busiest (a librdkafka
    # producer at 100% of its CPU) and the mock uses well under half of
    # its own: the proxy shares the mock's.  Fetching, the mock is the
    # busier (it builds the responses) and the consumer has room: the
    # proxy shares the consumer's.  On loopback a sender also runs the
    # receiver's TCP input (softirq), so this keeps the mock's CPU for
    # the mock.
    DEF_CLIENT=0 DEF_MOCK=$((NCPU - 1)) DEF_PROXY=$((NCPU - 1))
    DEF_PROXY_FETCH=0
fi
CPU_CLIENT=${KRBENCH_CPU_CLIENT:-$DEF_CLIENT}
CPU_MOCK=${KRBENCH_CPU_MOCK:-$DEF_MOCK}
CPU_PROXY=${KRBENCH_CPU_PROXY:-$DEF_PROXY}
CPU_PROXY_FETCH=${KRBENCH_CPU_PROXY_FETCH:-${KRBENCH_CPU_PROXY:-$DEF_PROXY_FETCH}}
# blast: the load generator and the scripted upstream (both far cheaper
# per request than a proxy) share the client's CPU, the proxy has its own
CPU_CANNED=${KRBENCH_CPU_CANNED:-$CPU_CLIENT}

if [ "$QUICK" = 1 ]; then
    REPS=1
    D_PRODUCE=1 D_WARM=0.5 D_FETCH_PARTS=16 D_LAT_COUNT=2000
    D_LAT_WARM=0.2 D_IDLE=500 D_CODEC=0.1 D_HANDSHAKES=200 D_TLS_IDLE=300
    D_LEGACY_RECORDS=32768 D_LEGACY_FETCH_PARTS=8
else
    D_PRODUCE=3 D_WARM=1 D_FETCH_PARTS=512 D_LAT_COUNT=20000
    D_LAT_WARM=1 D_IDLE=5000 D_CODEC=0.5 D_HANDSHAKES=2000 D_TLS_IDLE=2000
    D_LEGACY_RECORDS=262144 D_LEGACY_FETCH_PARTS=64
fi
PRODUCE_SECS=${KRBENCH_PRODUCE_SECS:-$D_PRODUCE}
PRODUCE_WARM=${KRBENCH_PRODUCE_WARM:-$D_WARM}
FETCH_PARTS=${KRBENCH_FETCH_PARTS:-$D_FETCH_PARTS}
FETCH_PER_PART=4096             # 1 KiB records: 4 MiB per partition,
                                # under the mock's 5 MiB retention (2 GiB
                                # in all: a window of seconds, not one)
# legacy_produce: values of 1 KiB per run (256 MiB); legacy_fetch: 64
# partitions of FETCH_PER_PART values (256 MiB)
LEGACY_RECORDS=${KRBENCH_LEGACY_RECORDS:-$D_LEGACY_RECORDS}
LEGACY_FETCH_PARTS=${KRBENCH_LEGACY_FETCH_PARTS:-$D_LEGACY_FETCH_PARTS}
LAT_RATE=${KRBENCH_LAT_RATE:-5000}
LAT_COUNT=${KRBENCH_LAT_COUNT:-$D_LAT_COUNT}
LAT_WARM=${KRBENCH_LAT_WARM:-$D_LAT_WARM}
# open-loop warm-up rounds (one request per target each)
LAT_WARM_ROUNDS=$(awk -v r="$LAT_RATE" -v s="$LAT_WARM" \
                  'BEGIN { printf "%d", r * s }')
LAT_SIZE=100
IDLE_CONNS=${KRBENCH_IDLE_CONNS:-$D_IDLE}
CODEC_SECS=${KRBENCH_CODEC_SECS:-$D_CODEC}
HANDSHAKES=${KRBENCH_HANDSHAKES:-$D_HANDSHAKES}
TLS_IDLE_CONNS=${KRBENCH_TLS_IDLE_CONNS:-$D_TLS_IDLE}
# blast: connections, requests in flight on each, records per request,
# record bytes, Produce version (9: no KIP-951 tagged fields for krelay to
# look for in the responses; librdkafka 2.12 sends v10)
BLAST_CONNS=${KRBENCH_BLAST_CONNS:-64}
BLAST_DEPTH=${KRBENCH_BLAST_DEPTH:-4}
BLAST_RECORDS=${KRBENCH_BLAST_RECORDS:-16}
BLAST_SIZE=${KRBENCH_BLAST_SIZE:-1024}
BLAST_VERSION=${KRBENCH_BLAST_VERSION:-9}
BLAST_QUOTA=${KRBENCH_BLAST_QUOTA:-0.5}
# blast_scale (issue 12): krelay's worker counts, the generator's
# connections and requests in flight on each, records per request and
# their bytes, the Produce version it sends and the one krelay's clamp
# rule translates it to, the peers' pause between polls (µs: generator,
# scripted upstream), where the audit file goes
SCALE_WORKERS=${KRBENCH_SCALE_WORKERS:-1,2}
SCALE_CONNS=${KRBENCH_SCALE_CONNS:-64}
SCALE_DEPTH=${KRBENCH_SCALE_DEPTH:-64}
SCALE_RECORDS=${KRBENCH_SCALE_RECORDS:-1}
SCALE_SIZE=${KRBENCH_SCALE_SIZE:-100}
SCALE_VERSION=${KRBENCH_SCALE_VERSION:-9}
SCALE_CLAMP=${KRBENCH_SCALE_CLAMP:-7}
SCALE_PAUSE=${KRBENCH_SCALE_PAUSE:-3000}
SCALE_PAUSE_CANNED=${KRBENCH_SCALE_PAUSE_CANNED:-2000}
SCALE_AUDIT_DIR=${KRBENCH_SCALE_AUDIT_DIR:-}
SCALE_QUOTA=${KRBENCH_SCALE_QUOTA:-0}
SCALE_QUOTA_US=0
SCALE_AUDIT_THREAD=named
# What both TLS-terminating targets accept, and all the clients offer.
TLS_SUITE=TLS_AES_128_GCM_SHA256
TLS_GROUP=X25519

log() {
    printf '%s [bench] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

has() {
    case ",$1," in *",$2,"*) return 0 ;; esac
    return 1
}

# ---- processes: every one started here is stopped on exit ---------------
PIDS=()
WORK=
cleanup() {
    local rc=$? i pid
    trap - EXIT INT TERM
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill -TERM "${PIDS[$i]}" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    # the blast workloads' cgroup, empty once its proxy is gone
    [ -n "${CG_DIR:-}" ] && rmdir "$CG_DIR" 2>/dev/null
    [ -n "${CG_SCALE:-}" ] && rmdir "$CG_SCALE" 2>/dev/null
    # blast_scale's audit files (tmpfs)
    [ -n "${SCALE_AUDIT_TMP:-}" ] && rm -rf "$SCALE_AUDIT_TMP"
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "${KRBENCH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
            log "work directory kept: $WORK"
        else
            rm -rf "$WORK"
        fi
    fi
    exit "$rc"
}

# forget PID: remove a stopped process from PIDS
forget() {
    local keep=() p
    for p in "${PIDS[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    PIDS=("${keep[@]}")
}

stop_pid() {
    local pid=$1
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    forget "$pid"
}

# bounded VAR TPIDVAR CPUS CMD...: start CMD pinned to CPUS in the
# background under timeout(1), so that it stops by itself even if this
# script is killed; VAR gets CMD's own pid (for /proc), TPIDVAR the pid
# to stop (timeout passes SIGTERM on).  Redirect the call's output.
bounded() {
    local var=$1 tvar=$2 cpus=$3 tpid c=
    shift 3
    timeout -k 5 "$LIFETIME" taskset -c "$cpus" "$@" &
    tpid=$!
    PIDS+=("$tpid")
    for _ in $(seq 100); do
        c=$(cat "/proc/$tpid/task/$tpid/children" 2>/dev/null)
        c=${c%% *}
        [ -n "$c" ] && break
        sleep 0.02
    done
    printf -v "$var" '%s' "${c:-$tpid}"
    printf -v "$tvar" '%s' "$tpid"
}

# free_ports N: first port P such that P..P+N-1 are free on 127.0.0.1
# (below the ephemeral range when there is room)
free_ports() {
    "$PY" "$top_srcdir/tests/integration/free_ports.py" "$1"
}

# listening PORT: something listens on 127.0.0.1:PORT (no probe connection)
listening() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
                      END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

wait_ports() {
    local p
    for p in "$@"; do
        for _ in $(seq 100); do
            listening "$p" && break
            sleep 0.1
        done
        listening "$p" || return 1
    done
}

# cpu_ticks PID: utime + stime in clock ticks (0 when gone)
cpu_ticks() {
    if [ -z "$1" ] || [ ! -r "/proc/$1/stat" ]; then
        echo 0
        return
    fi
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# busy_ticks: clock ticks all CPUs spent in processes (/proc/stat user,
# nice, system, steal; not irq/softirq, where loopback traffic goes
# uncharged), to notice load from outside the benchmark
busy_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $9; exit }' /proc/stat
}

# rss_kb PID [FIELD]: VmRSS (or FIELD of /proc/PID/status: RssAnon,
# RssShmem) in KiB
rss_kb() {
    awk -v f="${2:-VmRSS}:" '$1 == f { print $2 }' "/proc/$1/status" \
        2>/dev/null || echo 0
}

# cpu_ns PID: the run time of PID's threads in nanoseconds (schedstat:
# utime + stime at full precision; 0 when gone).  The A/B mode's CPU per
# GiB, where a clock tick (10 ms) is several per cent of a small run.
cpu_ns() {
    if [ -z "$1" ] || [ ! -d "/proc/$1/task" ]; then
        echo 0
        return
    fi
    cat "/proc/$1/task/"*/schedstat 2>/dev/null |
        awk '{ s += $1 } END { printf "%.0f\n", s }'
}

TICK=$(getconf CLK_TCK)

# ---- binaries --------------------------------------------------------------
KRELAY=${KRELAY_BIN:-$top_builddir/krelay}
# The krelay instances, by target name: "krelay", "krelay_audit" (the
# same binary, auditing every request), "krelay_sasl" (the same binary,
# terminating SASL) and "krelay_tls", or in A/B mode "krelay_a" and
# "krelay_b".  Binary, pid (KR_PID, for /proc), pid to
# stop (KR_TPID), client port and broker port base.
declare -A KR_BIN=() KR_PID=() KR_TPID=() KR_PORT=() KR_BASE=()
if [ "$AB" = 1 ]; then
    KR_BIN[krelay_a]=$KRELAY_A
    KR_BIN[krelay_b]=$KRELAY_B
    KRELAYS=(krelay_a krelay_b)
    [ "$KRELAY_A" -ef "$KRELAY_B" ] &&
        log "A and B are the same file: an A/A run of one binary"
else
    KR_BIN[krelay]=$KRELAY
    KR_BIN[krelay_audit]=$KRELAY
    KR_BIN[krelay_sasl]=$KRELAY
    KR_BIN[krelay_tls]=$KRELAY
    KRELAYS=(krelay krelay_audit krelay_sasl krelay_tls)
fi
BENCH_CODEC=$top_builddir/tests/bench/bench_codec
BENCH_AUDIT=$top_builddir/tests/bench/bench_audit
BENCH_RECORDS=$top_builddir/tests/bench/bench_records
KRBENCH=$top_builddir/tests/bench/krbench
PREFIX=$KRELAY_DEPS_DIR/node_modules/node-rdkafka/build/deps
if [ ! -f "$PREFIX/pkgconfig/rdkafka.pc" ] &&
   [ -f /root/.cache/krelay-deps/node_modules/node-rdkafka/build/deps/pkgconfig/rdkafka.pc ]; then
    PREFIX=/root/.cache/krelay-deps/node_modules/node-rdkafka/build/deps
fi
LIBRDKAFKA_NOTE="system librdkafka"
if [ "${KRBENCH_SYSTEM_RDKAFKA:-0}" != 1 ] &&
   [ -f "$PREFIX/pkgconfig/rdkafka.pc" ] &&
   [ -f "$PREFIX/include/librdkafka/rdkafka_mock.h" ]; then
    # krbench against librdkafka 2.12 (mock and clients), rebuilt when
    # the sources are newer: its mock advertises any host:port.
    K212=$top_builddir/tests/bench/krbench-rdkafka212
    SRC=$top_srcdir/tests/bench/krbench.c
    SRC2=$top_srcdir/tests/bench/kb_blast.c
    if [ ! -x "$K212" ] || [ "$SRC" -nt "$K212" ] || [ "$SRC2" -nt "$K212" ] ||
       [ "$top_srcdir/tests/bench/kb_blast.h" -nt "$K212" ] ||
       [ "$top_srcdir/tests/bench/kb_wire.h" -nt "$K212" ]; then
        mkdir -p "$top_builddir/tests/bench"
        CF=$(PKG_CONFIG_PATH=$PREFIX/pkgconfig pkg-config --cflags rdkafka |
             sed 's/-I/-isystem /g')
        LF=$(PKG_CONFIG_PATH=$PREFIX/pkgconfig pkg-config --libs rdkafka)
        # the TLS clients (handshake, idle -S) use OpenSSL directly
        CF="$CF $(pkg-config --cflags openssl 2>/dev/null)"
        LF="$LF $(pkg-config --libs openssl 2>/dev/null || echo -lssl -lcrypto)"
        # shellcheck disable=SC2086
        ${CC:-cc} -std=gnu11 -O2 -g -Wall -Wextra $CF -o "$K212.tmp" "$SRC" \
            "$SRC2" \
            $LF -Wl,-rpath,"$PREFIX" -ljansson -lpthread -ldl -rdynamic ||
            die "cannot build krbench against $PREFIX"
        mv -f "$K212.tmp" "$K212"
        log "built $K212"
    fi
    KRBENCH=$K212
    LIBRDKAFKA_NOTE="librdkafka from $PREFIX"
fi
[ -x "$KRBENCH" ] || die "$KRBENCH not built (make bench builds it)"
command -v taskset >/dev/null || die "taskset (util-linux) not found"
HAPROXY=$(command -v haproxy || true)
# drop_target T: T leaves TARGETS
drop_target() {
    TARGETS=$(echo ",$TARGETS," | sed "s/,$1,/,/; s/^,//; s/,\$//")
}
if [ -z "$HAPROXY" ]; then
    for t in haproxy haproxy_tls; do
        if has "$TARGETS" $t; then
            log "haproxy not installed: the $t leg is skipped"
            drop_target $t
        fi
    done
fi
if { has "$TARGETS" krelay_tls || has "$TARGETS" haproxy_tls; } &&
   ! command -v openssl >/dev/null; then
    log "openssl (the CLI) not installed: no certificate, no TLS targets"
    drop_target krelay_tls
    drop_target haproxy_tls
fi

WORK=$(mktemp -d "$top_builddir/bench.XXXXXX") || exit 1
trap cleanup EXIT
trap 'exit 1' INT TERM
RUNS=$WORK/runs.jsonl
: >"$RUNS"
# blast_scale's audit files: tmpfs when there is one (a file's cost, not a
# disk's), else the work directory
SCALE_AUDIT_TMP=
if has "$WORKLOADS" blast_scale && [ -z "$SCALE_AUDIT_DIR" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ] &&
       SCALE_AUDIT_TMP=$(mktemp -d /dev/shm/krbench.XXXXXX 2>/dev/null); then
        SCALE_AUDIT_DIR=$SCALE_AUDIT_TMP
    else
        SCALE_AUDIT_DIR=$WORK
    fi
fi
# Watchdog: the whole run is bounded (30 min; 5 for --quick).
LIMIT=1800
[ "$QUICK" = 1 ] && LIMIT=300
( trap 'kill "$spid" 2>/dev/null; exit 0' TERM
  sleep "$LIMIT" & spid=$!
  wait "$spid" && { log "timed out after ${LIMIT}s"; kill -TERM $$; } ) &
PIDS+=($!)
LIFETIME=$((LIMIT + 120))            # of the mock and the proxies
# 5,000 client connections and as many upstream ones per proxy.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
[ "$NOFILE" = unlimited ] && NOFILE=65536
HAPROXY_MAXCONN=$(( (NOFILE - 100) / 2 ))
[ "$HAPROXY_MAXCONN" -gt 20000 ] && HAPROXY_MAXCONN=20000
if [ $((IDLE_CONNS + 100)) -gt "$HAPROXY_MAXCONN" ]; then
    IDLE_CONNS=$((HAPROXY_MAXCONN - 100))
    log "file-descriptor limit $NOFILE: idle connections cut to $IDLE_CONNS"
fi
if [ $((TLS_IDLE_CONNS + 100)) -gt "$HAPROXY_MAXCONN" ]; then
    TLS_IDLE_CONNS=$((HAPROXY_MAXCONN - 100))
    log "file-descriptor limit $NOFILE: TLS idle connections cut to" \
        "$TLS_IDLE_CONNS"
fi

# ---- TLS: a CA and the targets' certificate, made now --------------------
# tests/tools/tls_certs.sh: ECDSA P-256, server.pem for CN=localhost with
# IP:127.0.0.1 (what the clients check), server-full.pem for HAProxy.
TLS_DIR=$WORK/tls
if has "$TARGETS" krelay_tls || has "$TARGETS" haproxy_tls; then
    if ! bash "$top_srcdir/tests/tools/tls_certs.sh" "$TLS_DIR" \
            >"$WORK/tls_certs.log" 2>&1; then
        log "cannot make the certificates" \
            "($(tail -n 1 "$WORK/tls_certs.log")): no TLS targets"
        drop_target krelay_tls
        drop_target haproxy_tls
    fi
fi

# ---- SASL: krelay_sasl's credentials file, made now -----------------------
# One user, SCRAM-SHA-512 at 4096 iterations (Kafka's default), and a
# fake password made for the run, given to the clients in the environment
# (krbench -A reads KRBENCH_SASL_PASSWORD), never on a command line.
SASL_MECH=SCRAM-SHA-512
SASL_USER=krbench
SASL_CREDS=$WORK/sasl-users
if has "$TARGETS" krelay_sasl; then
    KPW=${KRELAY_PASSWD_BIN:-$(dirname "$KRELAY")/krelay-passwd}
    [ -x "$KPW" ] || KPW=$top_builddir/krelay-passwd
    KRBENCH_SASL_PASSWORD=bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    export KRBENCH_SASL_PASSWORD
    if [ ! -x "$KPW" ] ||
       ! (umask 077 && printf '%s\n' "$KRBENCH_SASL_PASSWORD" |
          "$KPW" -m "$SASL_MECH" -i 4096 "$SASL_USER" >"$SASL_CREDS") \
          2>"$WORK/krelay-passwd.log"; then
        log "cannot make the SASL credentials with $KPW" \
            "($(tail -n 1 "$WORK/krelay-passwd.log" 2>/dev/null)):" \
            "the krelay_sasl leg is skipped"
        drop_target krelay_sasl
    fi
fi

# ---- the mock cluster --------------------------------------------------------
HBASE=$(free_ports 8) || die "no free ports"
HPORTS=$((HBASE + 1)),$((HBASE + 2)),$((HBASE + 3))
# haproxy_tls's listeners (the -G ports the mock advertises on SIGHUP)
TBASE=$((HBASE + 4))
TPORTS=$((TBASE + 1)),$((TBASE + 2)),$((TBASE + 3))
log "placement: client cpu $CPU_CLIENT, mock cpu $CPU_MOCK, proxy cpu $CPU_PROXY ($CPU_PROXY_FETCH for fetch) ($NCPU cpus)"
bounded MOCK_PID MOCK_TPID "$CPU_MOCK" "$KRBENCH" mock -b 3 -t bench:8 \
    -t small:8 -t "fetch:$FETCH_PARTS" -t lat:1 -H "$HPORTS" -G "$TPORTS" \
    -r "$WORK/mock.ready" >"$WORK/mock.out" 2>"$WORK/mock.log"
for _ in $(seq 100); do
    [ -s "$WORK/mock.ready" ] && break
    kill -0 "$MOCK_PID" 2>/dev/null || break
    sleep 0.1
done
[ -s "$WORK/mock.ready" ] || die "the mock did not start: $(cat "$WORK/mock.log")"
IFS=, read -r M1 M2 M3 <"$WORK/mock.ready"
MOCK_VERSION=$(sed -n 's/.*librdkafka \([^,]*\),.*/\1/p' "$WORK/mock.log")
log "mock cluster (librdkafka $MOCK_VERSION) at ports $M1,$M2,$M3"
# Small requests: Produce v10 (what librdkafka 2.12 sends; its response
# carries the KIP-951 tagged fields krelay rewrites) when the mock has it,
# else v7 (librdkafka 2.0.2's mock and client).
case $MOCK_VERSION in
2.[0-9].*|1.*|0.*) D_LAT_VERSION=7 ;;
*) D_LAT_VERSION=10 ;;
esac
LAT_VERSION=${KRBENCH_LAT_VERSION:-$D_LAT_VERSION}

# advertise direct|haproxy|haproxy_tls: which ports the mock brokers
# advertise (haproxy_tls: the TLS-terminating HAProxy's).
ADV=
ADV_OK=1
NADV=0
advertise() {
    [ "$ADV" = "$1" ] && return 0
    [ "$ADV_OK" = 1 ] || { ADV=$1; return 0; }
    case $1 in
    haproxy) kill -USR2 "$MOCK_PID" ;;
    haproxy_tls) kill -HUP "$MOCK_PID" ;;
    *) kill -USR1 "$MOCK_PID" ;;
    esac
    NADV=$((NADV + 1))
    for _ in $(seq 100); do
        [ "$(grep -c '^advertise' "$WORK/mock.out")" -ge "$NADV" ] && break
        sleep 0.05
    done
    [ "$(grep -c '^advertise' "$WORK/mock.out")" -ge "$NADV" ] ||
        die "the mock did not switch its advertised ports"
    if grep -q '^advertise unsupported' "$WORK/mock.out"; then
        # librdkafka < 2.10: clients map the mock's ports to HAProxy's.
        ADV_OK=0
        log "the mock cannot advertise HAProxy's ports; clients map them"
    fi
    ADV=$1
}
# Find out now whether the mock can switch (bootstrap_of and map_of
# depend on it).
advertise direct

# What the proxies forward to: the mock, or during the blast workloads
# the scripted upstream (krbench canned, at CANNED_PORT)
UPSTREAM=mock
CANNED_PORT=
CANNED_PID=
CANNED_TPID=

# ---- HAProxy ------------------------------------------------------------------
# Two instances from one template: "haproxy" (mode tcp, listeners at
# HBASE + n) and "haproxy_tls" (the same, its listeners at TBASE + n
# terminating TLS with the settings krelay_tls has: bind ... ssl).
HAPROXY_PID=
HAPROXY_TPID=
HAPROXY_TLS_PID=
HAPROXY_TLS_TPID=
# start_haproxy [haproxy|haproxy_tls]
start_haproxy() {
    local name=${1:-haproxy} n up ports base bind='' hpid htpid
    ports=(0 "$M1" "$M2" "$M3")
    # the blast workloads: every listener to the scripted upstream
    [ "$UPSTREAM" = canned ] &&
        ports=(0 "$CANNED_PORT" "$CANNED_PORT" "$CANNED_PORT")
    base=$HBASE
    if [ "$name" = haproxy_tls ]; then
        base=$TBASE
        bind=" ssl crt $TLS_DIR/server-full.pem ssl-min-ver TLSv1.3"
        bind="$bind ciphersuites $TLS_SUITE curves $TLS_GROUP"
    fi
    {
        sed -e "s|@WORK@|$WORK|g" -e "s|@MAXCONN@|$HAPROXY_MAXCONN|g" \
            -e "s|@NAME@|$name|g" -e '/^#@BROKER@/d' \
            "$top_srcdir/contrib/bench/haproxy.cfg.in"
        for n in 1 2 3; do
            up=${ports[$n]}
            sed -n 's/^#@BROKER@//p' "$top_srcdir/contrib/bench/haproxy.cfg.in" |
                sed -e "s/@NODEID@/$n/g" -e "s/@PORT@/$((base + n))/g" \
                    -e "s/@UPSTREAM@/$up/g" -e "s|@BIND@|$bind|g"
        done
    } >"$WORK/$name.cfg"
    bounded hpid htpid "$CPU_PROXY" "$HAPROXY" -db \
        -f "$WORK/$name.cfg" >>"$WORK/$name.log" 2>&1
    if [ "$name" = haproxy_tls ]; then
        HAPROXY_TLS_PID=$hpid HAPROXY_TLS_TPID=$htpid
    else
        HAPROXY_PID=$hpid HAPROXY_TPID=$htpid
    fi
    wait_ports $((base + 1)) $((base + 2)) $((base + 3)) ||
        die "$name did not start: $(tail -n 5 "$WORK/$name.log")"
}
# stop_haproxy [haproxy|haproxy_tls]
stop_haproxy() {
    if [ "${1:-haproxy}" = haproxy_tls ]; then
        stop_pid "$HAPROXY_TLS_TPID"
        HAPROXY_TLS_PID=
        HAPROXY_TLS_TPID=
    else
        stop_pid "$HAPROXY_TPID"
        HAPROXY_PID=
        HAPROXY_TPID=
    fi
}

# ---- krelay -------------------------------------------------------------------
# start_krelay NAME: start the instance NAME (krelay, krelay_a, krelay_b)
# with its own ports (the same ones on a restart) and files NAME.*
start_krelay() {
    local n=$1 kport kbase kpid ktpid
    if [ -z "${KR_PORT[$n]:-}" ]; then
        kport=$(free_ports 5) || die "no free ports"
        KR_PORT[$n]=$kport
        KR_BASE[$n]=$((kport + 1))  # NodeId n at KBASE + n
    fi
    kport=${KR_PORT[$n]}
    kbase=${KR_BASE[$n]}
    local tls=
    if [ "$n" = krelay_tls ]; then
        # TLS to the clients (the settings haproxy_tls has; krelay has no
        # key for the groups: OpenSSL's default list, X25519 first, and
        # the clients offer X25519 only), plaintext to the mock.
        printf -v tls '%s\n' "ssl = true" \
            "ssl_certificate = $TLS_DIR/server.pem" \
            "ssl_key = $TLS_DIR/server.key" "ssl_min_protocol = TLSv1.3" \
            "ssl_ciphersuites = $TLS_SUITE"
    fi
    if [ "$n" = krelay_sasl ]; then
        # SASL termination (issue 9): the clients log in to krelay with
        # SCRAM-SHA-512 (krbench -A); plaintext to the mock.  The login
        # rate stays at its default (5 a second, a burst of 20, per
        # address): a client run makes about 5 logins.
        printf -v tls '%s\n' "sasl = terminate" \
            "sasl_mechanisms = $SASL_MECH" \
            "sasl_credentials = $SASL_CREDS"
    fi
    local u1=$M1 u2=$M2 u3=$M3
    if [ "$UPSTREAM" = canned ]; then
        # the blast workloads: the scripted upstream is the bootstrap and
        # every broker (it answers krelay's ApiVersions and Metadata as
        # NodeId 1)
        u1=$CANNED_PORT u2=$CANNED_PORT u3=$CANNED_PORT
    fi
    cat >"$WORK/$n.ini" <<EOF
; written by contrib/bench/run.sh
[upstream]
bootstrap_servers = 127.0.0.1:$u1,127.0.0.1:$u2,127.0.0.1:$u3
; the mock may advertise HAProxy's ports: dial the brokers themselves
dial.1 = 127.0.0.1:$u1
dial.2 = 127.0.0.1:$u2
dial.3 = 127.0.0.1:$u3

[listener]
listen = 127.0.0.1:$kport
advertised_host = 127.0.0.1
broker_port_base = $kbase
node_id_min = 1
node_id_max = 3
max_connections = 20000
splice_min_bytes = ${KRBENCH_SPLICE_MIN:-65536}
$tls
[log]
level = ${KRBENCH_LOG_LEVEL:-notice}
target = $WORK/$n.log
EOF
    if [ "$n" = krelay_audit ]; then
        # One rule without match keys: every request and response of
        # every connection gets its audit line (no bodies), to a file.
        cat >>"$WORK/$n.ini" <<EOF

[audit]
target = $WORK/$n.audit.jsonl

[rule audit-all]
audit = true
EOF
    fi
    bounded kpid ktpid "$CPU_PROXY" "${KR_BIN[$n]}" \
        -c "$WORK/$n.ini" >>"$WORK/$n.out" 2>&1
    KR_PID[$n]=$kpid
    KR_TPID[$n]=$ktpid
    if ! wait_ports "$kport" $((kbase + 1)) $((kbase + 2)) $((kbase + 3)) ||
       ! kill -0 "$kpid" 2>/dev/null; then
        log "$n did not start: $(tail -n 5 "$WORK/$n.out" "$WORK/$n.log" 2>/dev/null)"
        stop_krelay "$n"
        return 1
    fi
}
stop_krelay() {
    stop_pid "${KR_TPID[$1]:-}"
    KR_PID[$1]=
    KR_TPID[$1]=
}

if has "$TARGETS" haproxy; then
    start_haproxy
    log "haproxy $("$HAPROXY" -v | sed -n '1s/HAProxy version \([^ ]*\).*/\1/p') (pid $HAPROXY_PID) at ports $HPORTS"
fi
if has "$TARGETS" haproxy_tls; then
    start_haproxy haproxy_tls
    log "haproxy_tls (pid $HAPROXY_TLS_PID) at ports $TPORTS"
fi
for k in "${KRELAYS[@]}"; do
    has "$TARGETS" "$k" || continue
    if [ -x "${KR_BIN[$k]}" ] && start_krelay "$k"; then
        log "$k (pid ${KR_PID[$k]}) at 127.0.0.1:${KR_PORT[$k]}, NodeId n at ${KR_BASE[$k]}+n: ${KR_BIN[$k]}"
    elif [ "$AB" = 1 ]; then
        die "$k did not start: no A/B comparison"
    else
        log "$k is not available: the $k leg is skipped"
        TARGETS=$(echo ",$TARGETS," | sed "s/,$k,/,/; s/^,//; s/,\$//")
    fi
done
# TLIST: the plaintext targets (every workload but tls_*), SLIST: the
# TLS-terminating ones (tls_* only)
TLIST=()
SLIST=()
IFS=, read -r -a ALL <<<"$TARGETS"
for t in "${ALL[@]}"; do
    case $t in
    *_tls) SLIST+=("$t") ;;
    *) TLIST+=("$t") ;;
    esac
done
log "targets: ${ALL[*]}; $REPS repetitions"

# Per-target addresses.  Leader of lat/0 and of every partition p: NodeId
# (p % 3) + 1.
bootstrap_of() {
    case $1 in
    direct) echo "127.0.0.1:$M1" ;;
    haproxy) if [ "$ADV_OK" = 1 ]; then echo "127.0.0.1:$((HBASE + 1))";
             else echo "127.0.0.1:$M1"; fi ;;
    haproxy_tls) if [ "$ADV_OK" = 1 ]; then echo "127.0.0.1:$((TBASE + 1))";
                 else echo "127.0.0.1:$M1"; fi ;;
    krelay*) echo "127.0.0.1:${KR_PORT[$1]}" ;;
    esac
}
broker_of() {                       # broker_of TARGET NODEID
    case $1 in
    direct) local p=(0 "$M1" "$M2" "$M3"); echo "127.0.0.1:${p[$2]}" ;;
    haproxy) echo "127.0.0.1:$((HBASE + $2))" ;;
    haproxy_tls) echo "127.0.0.1:$((TBASE + $2))" ;;
    krelay*) echo "127.0.0.1:$((${KR_BASE[$1]} + $2))" ;;
    esac
}
map_of() {                          # krbench -m for librdkafka < 2.10
    local b=$HBASE
    [ "$1" = haproxy_tls ] && b=$TBASE
    case $ADV_OK:$1 in
    0:haproxy|0:haproxy_tls)
        echo "-m $M1:$((b + 1)),$M2:$((b + 2)),$M3:$((b + 3))" ;;
    esac
}
# tls_of TARGET: krbench's -S for the TLS-terminating targets
tls_of() {
    case $1 in
    *_tls) echo "-S $TLS_DIR/ca.pem" ;;
    esac
}
# sasl_of TARGET: krbench's -A for the SASL-terminating target (the
# password: KRBENCH_SASL_PASSWORD, exported above)
sasl_of() {
    case $1 in
    krelay_sasl) echo "-A $SASL_MECH:$SASL_USER" ;;
    esac
}
proxy_pid_of() {
    case $1 in
    haproxy) echo "$HAPROXY_PID" ;;
    haproxy_tls) echo "$HAPROXY_TLS_PID" ;;
    krelay*) echo "${KR_PID[$1]:-}" ;;
    *) echo "" ;;
    esac
}
# The processes whose CPU run_client reads from schedstat (nanoseconds,
# every thread): the krelay instances and haproxy_tls
SCHED=("${KRELAYS[@]}")
[ "$AB" = 1 ] || SCHED+=(haproxy_tls)

# peers: the -C list (CPU time inside the window): mock, haproxy, krelay,
# 0, 0, krelay_audit, krelay_tls, haproxy_tls, krelay_sasl; in A/B mode
# mock, 0, 0, krelay_a, krelay_b (report.py's PEERS)
peers() {
    if [ "$AB" = 1 ]; then
        echo "$MOCK_PID,0,0,${KR_PID[krelay_a]:-0},${KR_PID[krelay_b]:-0}"
    else
        local p="$MOCK_PID,${HAPROXY_PID:-0},${KR_PID[krelay]:-0},0,0"
        p="$p,${KR_PID[krelay_audit]:-0},${KR_PID[krelay_tls]:-0}"
        echo "$p,${HAPROXY_TLS_PID:-0},${KR_PID[krelay_sasl]:-0}"
    fi
}

# advertise_of TARGET: what the mock advertises while TARGET is measured
advertise_of() {
    case $1 in
    haproxy|haproxy_tls) echo "$1" ;;
    *) echo direct ;;
    esac
}

# run_client WORKLOAD TARGET REP SECONDS CMD...: run one client pinned to
# the client CPU, record its JSON with the CPU time the mock and the
# proxies used meanwhile.
run_client() {
    local wl=$1 tg=$2 rep=$3 limit=$4 out rc t0 t1 m0 m1 h0 h1 s0 s1
    local n extra='' ns0=() ns1=() i alog
    shift 4
    advertise "$(advertise_of "$tg")"
    # RUN_AUDIT_LOG: the audit file of the instance measured (blast_scale)
    alog=${RUN_AUDIT_LOG:-$WORK/krelay_audit.audit.jsonl}
    # the audit leg's lines of this run only (the writer appends)
    { [ "$tg" = krelay_audit ] || [ -n "${RUN_AUDIT_LOG:-}" ]; } &&
        [ -f "$alog" ] && : >"$alog"
    for n in "${SCHED[@]}"; do
        ns0+=("$(cpu_ns "$(proxy_pid_of "$n")")")
    done
    m0=$(cpu_ticks "$MOCK_PID"); h0=$(cpu_ticks "$HAPROXY_PID")
    s0=$(busy_ticks)
    t0=$(date +%s.%N)
    out=$(timeout -k 5 "$limit" taskset -c "$CPU_CLIENT" "$@" \
          2>>"$WORK/client.log")
    rc=$?
    t1=$(date +%s.%N)
    m1=$(cpu_ticks "$MOCK_PID"); h1=$(cpu_ticks "$HAPROXY_PID")
    s1=$(busy_ticks)
    # "krelay_cpu_s", "krelay_audit_cpu_s", "krelay_sasl_cpu_s",
    # "krelay_tls_cpu_s", "haproxy_tls_cpu_s" (A/B: "krelay_a_cpu_s",
    # "krelay_b_cpu_s"): each instance's CPU seconds over the run, at
    # full precision (schedstat, every thread: the audit writer too)
    for n in "${SCHED[@]}"; do
        ns1+=("$(cpu_ns "$(proxy_pid_of "$n")")")
    done
    for i in "${!SCHED[@]}"; do
        [ -n "$(proxy_pid_of "${SCHED[$i]}")" ] || continue
        extra=$extra$(awk -v n="${SCHED[$i]}" -v a="${ns0[$i]}" \
            -v b="${ns1[$i]}" 'BEGIN {
            printf "\"%s_cpu_s\":%.4f,", n, (b - a) / 1e9 }')
    done
    if [ "$tg" = krelay_audit ] || [ -n "${RUN_AUDIT_LOG:-}" ]; then
        # lines the run wrote (those still in the writer's 10 ms batch
        # at this moment are missed)
        extra=$extra"\"audit_lines\":$(wc -l <"$alog" 2>/dev/null || echo 0),"
    fi
    if [ -n "${RUN_AUDIT_LOG:-}" ]; then
        # blast_scale: the request lines whose version the clamp changed
        # (actions "clamped", upstream_version set), then the file emptied
        i=$(grep -c '"actions":\["forwarded","clamped"\]' "$alog" 2>/dev/null)
        extra=$extra"\"audit_clamped\":${i:-0},"
        : >"$alog"
    fi
    out=$(printf '%s\n' "$out" | grep '^{' | tail -n 1)
    [ -n "$out" ] || out='{}'
    awk -v wl="$wl" -v tg="$tg" -v rep="$rep" -v rc="$rc" -v t0="$t0" \
        -v t1="$t1" -v m="$((m1 - m0))" -v h="$((h1 - h0))" \
        -v s="$((s1 - s0))" -v tick="$TICK" \
        -v extra="$extra" -v out="$out" 'BEGIN {
        printf "{\"workload\":\"%s\",\"target\":\"%s\",\"rep\":%d,\"rc\":%d,", wl, tg, rep, rc
        printf "\"wall_s\":%.3f,\"mock_cpu_s\":%.2f,\"haproxy_cpu_s\":%.2f,", t1 - t0, m / tick, h / tick
        printf "\"system_cpu_s\":%.2f,%s", s / tick, extra
        printf "\"client\":%s}\n", out }' >>"$RUNS"
    if [ "$rc" -ne 0 ]; then
        log "$wl via $tg (rep $rep): client exit $rc; see client.log"
    else
        log "$wl via $tg (rep $rep): $(printf '%s' "$out" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
keys = ["mb_per_s", "records_per_s", "p50_us", "p99_us", "p999_us",
        "handshakes", "handshakes_per_s", "version", "cipher", "group"]
if "targets" in d:
    print("late=%s;" % d.get("late"), "; ".join(
        "%s p50/p99/p99.9=%.0f/%.0f/%.0f" % (t, v["p50_us"], v["p99_us"],
                                             v["p999_us"])
        for t, v in d["targets"].items()))
else:
    print(" ".join("%s=%s" % (k, d[k]) for k in keys if k in d))')"
    fi
}

# lat_prio rt|normal: the scheduling class of the mock and the proxies
# (every thread) during the latency workload; LAT_CHRT prefixes the
# latency client.  SCHED_FIFO priority 10: they preempt other processes
# on their CPU as soon as a request or response arrives (they are far
# from busy at these rates, and the kernel's RT throttling keeps 5% of
# each CPU for the rest anyway).  Falls back to normal when chrt fails.
LAT_CHRT=()
lat_prio() {
    local pid ok=1
    [ "$LAT_PRIO" = rt ] || return 0
    LAT_CHRT=()
    for pid in "$MOCK_PID" "$HAPROXY_PID" "${KR_PID[@]}"; do
        [ -n "$pid" ] || continue
        if [ "$1" = rt ]; then
            chrt -a -f -p 10 "$pid" >/dev/null 2>&1 || ok=0
        else
            chrt -a -o -p 0 "$pid" >/dev/null 2>&1 || true
        fi
    done
    if [ "$1" = rt ] && [ "$ok" = 0 ]; then
        log "chrt failed (no CAP_SYS_NICE?): latency at normal priority"
        lat_prio normal
        LAT_PRIO=normal
    elif [ "$1" = rt ]; then
        LAT_CHRT=(chrt -f 10)
    fi
}
command -v chrt >/dev/null || LAT_PRIO=normal

# order REP [SKIP...]: the targets rotated by REP (alternating which goes
# first), without the SKIP targets (latency, idle and blast: $THRU_ONLY)
order() {
    local n=${#TLIST[@]} i t
    for ((i = 0; i < n; i++)); do
        t=${TLIST[$(((i + $1) % n))]}
        case " ${*:2} " in
        *" $t "*) ;;
        *) echo "$t" ;;
        esac
    done
}
# the targets that run the throughput workloads only
THRU_ONLY="krelay_audit krelay_sasl"

# sorder REP: the same for the TLS targets (SLIST)
sorder() {
    local n=${#SLIST[@]} i
    for ((i = 0; i < n; i++)); do
        echo "${SLIST[$(((i + $1) % n))]}"
    done
}

# ---- workloads -------------------------------------------------------------------
# place_proxies CPUS: pin HAProxy and krelay (every thread) to CPUS
place_proxies() {
    local pid
    for pid in "$HAPROXY_PID" "$HAPROXY_TLS_PID" "${KR_PID[@]}"; do
        [ -n "$pid" ] || continue
        taskset -a -p -c "$1" "$pid" >/dev/null 2>&1 ||
            log "taskset -p $1 $pid failed"
    done
}

if has "$WORKLOADS" fetch || { has "$WORKLOADS" tls_fetch &&
                               [ ${#SLIST[@]} -gt 0 ]; }; then
    log "preloading fetch: $FETCH_PARTS partitions x $FETCH_PER_PART records of 1 KiB"
    advertise direct
    timeout -k 5 120 taskset -c "$CPU_CLIENT" "$KRBENCH" produce \
        -B "127.0.0.1:$M1" -t fetch -p "$FETCH_PARTS" -s 1024 \
        -n $((FETCH_PARTS * FETCH_PER_PART)) -l 1000 -q >"$WORK/preload.json" \
        2>>"$WORK/client.log" || die "preload failed: $(tail -n 5 "$WORK/client.log")"
fi

for ((rep = 1; rep <= REPS; rep++)); do
    for tg in $(order "$rep"); do
        # shellcheck disable=SC2046
        if has "$WORKLOADS" produce1k; then
            run_client produce_1k "$tg" "$rep" 90 "$KRBENCH" produce \
                -B "$(bootstrap_of "$tg")" $(map_of "$tg") $(sasl_of "$tg") \
                -t bench -p 8 -C "$(peers)" -s 1024 -d "$PRODUCE_SECS" \
                -w "$PRODUCE_WARM"
        fi
    done
    for tg in $(order "$rep"); do
        # shellcheck disable=SC2046
        if has "$WORKLOADS" produce100; then
            run_client produce_100 "$tg" "$rep" 90 "$KRBENCH" produce \
                -B "$(bootstrap_of "$tg")" $(map_of "$tg") $(sasl_of "$tg") \
                -t small -p 8 -C "$(peers)" -s 100 -d "$PRODUCE_SECS" \
                -w "$PRODUCE_WARM"
        fi
    done
    for tg in $(order "$rep"); do
        # One 100-byte record per Produce request (batch.num.messages=1,
        # linger.ms=0): what a request costs, as kcat sending one message
        # at a time.
        # shellcheck disable=SC2046
        if has "$WORKLOADS" produce1rec; then
            run_client produce_1rec "$tg" "$rep" 90 "$KRBENCH" produce \
                -B "$(bootstrap_of "$tg")" $(map_of "$tg") $(sasl_of "$tg") \
                -t small -p 8 -C "$(peers)" -s 100 -b 1 -l 0 \
                -d "$PRODUCE_SECS" -w "$PRODUCE_WARM"
        fi
    done
    [ "$CPU_PROXY_FETCH" = "$CPU_PROXY" ] ||
        { has "$WORKLOADS" fetch && place_proxies "$CPU_PROXY_FETCH"; }
    for tg in $(order "$rep"); do
        # shellcheck disable=SC2046
        if has "$WORKLOADS" fetch; then
            run_client fetch "$tg" "$rep" 120 "$KRBENCH" consume \
                -B "$(bootstrap_of "$tg")" $(map_of "$tg") $(sasl_of "$tg") \
                -t fetch -p "$FETCH_PARTS" -d 100 -C "$(peers)"
        fi
    done
    [ "$CPU_PROXY_FETCH" = "$CPU_PROXY" ] ||
        { has "$WORKLOADS" fetch && place_proxies "$CPU_PROXY"; }
    if has "$WORKLOADS" latency && [ "$LAT_MODE" = interleaved ]; then
        # One client, one connection per target, all to the leader of
        # lat/0 (NodeId 1): the targets' requests interleaved (order
        # drawn per round, seeded by the repetition).
        la= ln=
        for tg in $(order "$rep" $THRU_ONLY); do
            la=$la${la:+,}$(broker_of "$tg" 1)
            ln=$ln${ln:+,}$tg
        done
        lat_prio rt
        run_client latency interleaved "$rep" 180 \
            ${LAT_CHRT[@]+"${LAT_CHRT[@]}"} "$KRBENCH" latency \
            -a "$la" -N "$ln" -t lat -P 0 -R "$LAT_RATE" -n "$LAT_COUNT" \
            -O "$LAT_WARM_ROUNDS" -S "$rep" -s "$LAT_SIZE" \
            -V "$LAT_VERSION" -C "$(peers)"
        lat_prio normal
    fi
    for tg in $(order "$rep" $THRU_ONLY); do
        if has "$WORKLOADS" latency && [ "$LAT_MODE" = separate ]; then
            lat_prio rt
            run_client latency "$tg" "$rep" 120 \
                ${LAT_CHRT[@]+"${LAT_CHRT[@]}"} "$KRBENCH" latency \
                -a "$(broker_of "$tg" 1)" -t lat -P 0 -R "$LAT_RATE" \
                -n "$LAT_COUNT" -O "$LAT_WARM_ROUNDS" -s "$LAT_SIZE" \
                -V "$LAT_VERSION" -C "$(peers)"
            lat_prio normal
        fi
    done
    # ---- TLS termination (issue 8): krelay_tls and haproxy_tls only --------
    for tg in $(sorder "$rep"); do
        # 1 KiB records, as produce_1k, over TLS
        # shellcheck disable=SC2046
        if has "$WORKLOADS" tls_produce; then
            run_client tls_produce "$tg" "$rep" 90 "$KRBENCH" produce \
                -B "$(bootstrap_of "$tg")" $(map_of "$tg") $(tls_of "$tg") \
                -t bench -p 8 -C "$(peers)" -s 1024 -d "$PRODUCE_SECS" \
                -w "$PRODUCE_WARM"
        fi
    done
    if has "$WORKLOADS" tls_fetch && [ ${#SLIST[@]} -gt 0 ]; then
        [ "$CPU_PROXY_FETCH" = "$CPU_PROXY" ] ||
            place_proxies "$CPU_PROXY_FETCH"
        for tg in $(sorder "$rep"); do
            # shellcheck disable=SC2046
            run_client tls_fetch "$tg" "$rep" 120 "$KRBENCH" consume \
                -B "$(bootstrap_of "$tg")" $(map_of "$tg") $(tls_of "$tg") \
                -t fetch -p "$FETCH_PARTS" -d 100 -C "$(peers)"
        done
        [ "$CPU_PROXY_FETCH" = "$CPU_PROXY" ] || place_proxies "$CPU_PROXY"
    fi
    for tg in $(sorder "$rep"); do
        # full handshakes, one connection each, to NodeId 1's port (the
        # proxy dials the mock broker after each, as it would for a client)
        if has "$WORKLOADS" tls_handshake; then
            # shellcheck disable=SC2046
            run_client tls_handshake "$tg" "$rep" 120 "$KRBENCH" handshake \
                -a "$(broker_of "$tg" 1)" -n "$HANDSHAKES" $(tls_of "$tg") \
                -C "$(peers)"
        fi
    done
done

# HAProxy's own count of sessions per broker listener: every broker must
# have been reached through HAProxy (else clients bypassed it).
# haproxy_sessions SOCKET: "broker1:N,broker2:N,broker3:N"
haproxy_sessions() {
    "$PY" - "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
out = []
for line in data.decode().splitlines():
    f = line.split(",")
    if len(f) > 7 and f[1] == "FRONTEND" and f[0].startswith("broker"):
        out.append("%s:%s" % (f[0], f[7]))
print(",".join(out))
EOF
}
HAPROXY_SESSIONS=
if [ -n "$HAPROXY_PID" ] && [ -S "$WORK/haproxy.sock" ]; then
    HAPROXY_SESSIONS=$(haproxy_sessions "$WORK/haproxy.sock")
    log "HAProxy sessions per listener: $HAPROXY_SESSIONS"
fi
# haproxy_tls: before its idle measurement restarts it
HAPROXY_TLS_SESSIONS=
if [ -n "$HAPROXY_TLS_PID" ] && [ -S "$WORK/haproxy_tls.sock" ]; then
    HAPROXY_TLS_SESSIONS=$(haproxy_sessions "$WORK/haproxy_tls.sock")
    log "haproxy_tls sessions per listener: $HAPROXY_TLS_SESSIONS"
fi

# ---- blast: the proxy is the bottleneck ---------------------------------------
# krbench blast (CONNS connections, DEPTH prebuilt Produce requests in
# flight on each) and krbench canned (the scripted upstream that answers
# them) share the client's CPU; the proxy under test, restarted to
# forward to the scripted upstream, runs alone on its CPU (the mock and
# the other proxies are idle meanwhile).  blast_produce: direct, haproxy,
# krelay; tls_blast_produce: krelay_tls, haproxy_tls, terminating TLS as
# in the tls_* workloads.  -C: the scripted upstream, then the proxy.
BLAST_TARGETS=()
if has "$WORKLOADS" blast_produce; then
    for t in $(order 1 $THRU_ONLY); do
        BLAST_TARGETS+=("$t")
    done
fi
if has "$WORKLOADS" tls_blast_produce; then
    BLAST_TARGETS+=("${SLIST[@]}")
fi
if [ ${#BLAST_TARGETS[@]} -gt 0 ]; then
    bounded CANNED_PID CANNED_TPID "$CPU_CANNED" "$KRBENCH" canned \
        -l 127.0.0.1:0 -r "$WORK/canned.ready" >"$WORK/canned.out" \
        2>"$WORK/canned.log"
    for _ in $(seq 100); do
        [ -s "$WORK/canned.ready" ] && break
        kill -0 "$CANNED_PID" 2>/dev/null || break
        sleep 0.05
    done
    [ -s "$WORK/canned.ready" ] ||
        die "the scripted upstream did not start: $(cat "$WORK/canned.log")"
    CANNED_PORT=$(cat "$WORK/canned.ready")
    UPSTREAM=canned
    for t in "${BLAST_TARGETS[@]}"; do
        case $t in
        haproxy|haproxy_tls) stop_haproxy "$t"; start_haproxy "$t" ;;
        krelay*) stop_krelay "$t"; start_krelay "$t" ||
                     die "$t did not start with the scripted upstream" ;;
        esac
    done
    log "blast: scripted upstream (pid $CANNED_PID) at 127.0.0.1:$CANNED_PORT, cpu $CPU_CANNED; proxies restarted to forward to it"
    # The proxy's CPU cap (KRBENCH_BLAST_QUOTA): a cgroup made here,
    # cgroup v1's cpu controller or v2's cpu.max; none where neither is
    # writable (the JSON's blast_proxy_quota says 0 then).
    CG_DIR= CG_ROOT= CG_KIND=
    q_us=$(awk -v q="$BLAST_QUOTA" 'BEGIN { printf "%d", q * 100000 }')
    if [ "$q_us" -gt 0 ]; then
        if [ -w /sys/fs/cgroup/cpu/tasks ] &&
           mkdir "/sys/fs/cgroup/cpu/krbench.$$" 2>/dev/null; then
            CG_KIND=v1 CG_ROOT=/sys/fs/cgroup/cpu
            CG_DIR=/sys/fs/cgroup/cpu/krbench.$$
            echo 100000 >"$CG_DIR/cpu.cfs_period_us"
            echo "$q_us" >"$CG_DIR/cpu.cfs_quota_us"
        elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null &&
             mkdir "/sys/fs/cgroup/krbench.$$" 2>/dev/null; then
            CG_KIND=v2 CG_ROOT=/sys/fs/cgroup
            CG_DIR=/sys/fs/cgroup/krbench.$$
            echo "$q_us 100000" >"$CG_DIR/cpu.max"
        else
            log "blast: no writable cgroup cpu controller: the proxy runs uncapped"
            BLAST_QUOTA=0
        fi
    else
        BLAST_QUOTA=0
    fi
    [ -n "$CG_DIR" ] &&
        log "blast: proxies capped at $BLAST_QUOTA of a CPU (cgroup $CG_KIND $CG_DIR)"
    # cg_move PID DIR: every thread of PID into the cgroup DIR
    cg_move() {
        local t
        if [ "$CG_KIND" = v1 ]; then
            for t in /proc/"$1"/task/*; do
                echo "${t##*/}" >"$2/tasks" 2>/dev/null || true
            done
        else
            echo "$1" >"$2/cgroup.procs" 2>/dev/null || true
        fi
    }
    # blast_run WORKLOAD TARGET REP
    blast_run() {
        local addr pid
        addr=$(broker_of "$2" 1)
        [ "$2" = direct ] && addr=127.0.0.1:$CANNED_PORT
        pid=$(proxy_pid_of "$2")
        [ -n "$CG_DIR" ] && [ -n "$pid" ] && cg_move "$pid" "$CG_DIR"
        # shellcheck disable=SC2046
        run_client "$1" "$2" "$3" 90 "$KRBENCH" blast -a "$addr" \
            -c "$BLAST_CONNS" -D "$BLAST_DEPTH" -r "$BLAST_RECORDS" \
            -s "$BLAST_SIZE" -V "$BLAST_VERSION" $(tls_of "$2") \
            -d "$PRODUCE_SECS" -w "$PRODUCE_WARM" \
            -C "$CANNED_PID,${pid:-0}"
        [ -n "$CG_DIR" ] && [ -n "$pid" ] && cg_move "$pid" "$CG_ROOT"
        return 0
    }
    for ((rep = 1; rep <= REPS; rep++)); do
        if has "$WORKLOADS" blast_produce; then
            for tg in $(order "$rep" $THRU_ONLY); do
                blast_run blast_produce "$tg" "$rep"
            done
        fi
        if has "$WORKLOADS" tls_blast_produce; then
            for tg in $(sorder "$rep"); do
                blast_run tls_blast_produce "$tg" "$rep"
            done
        fi
    done
    [ -n "$CG_DIR" ] && rmdir "$CG_DIR" 2>/dev/null && CG_DIR=
    # back to the mock: the idle measurements restart their proxy
    UPSTREAM=mock
    stop_pid "$CANNED_TPID"
    log "blast: the scripted upstream said $(grep '^{' "$WORK/canned.out" | tail -n 1)"
fi

# ---- RSS per idle connection: a fresh proxy per measurement -----------------
# run_idle TARGET REP [WORKLOAD]: proxy restarted, warmed with one
# connection per broker, RSS before; IDLE_CONNS connections after
# ApiVersions and Metadata; RSS after.  WORKLOAD tls_idle: TLS_IDLE_CONNS
# TLS connections (krelay_tls, haproxy_tls), each after its handshake.
run_idle() {
    local tg=$1 rep=$2 wl=${3:-idle} pid addrs r0 r1 fds out rc line
    local n=$IDLE_CONNS a0 a1 h0 h1
    # shellcheck disable=SC2046
    set -- $(tls_of "$tg")
    [ "$wl" = tls_idle ] && n=$TLS_IDLE_CONNS
    case $tg in
    haproxy|haproxy_tls) stop_haproxy "$tg"; start_haproxy "$tg"
                         pid=$(proxy_pid_of "$tg") ;;
    krelay*) stop_krelay "$tg"; start_krelay "$tg" || return 0
             pid=${KR_PID[$tg]} ;;
    *) return 0 ;;
    esac
    advertise "$(advertise_of "$tg")"
    addrs="$(broker_of "$tg" 1),$(broker_of "$tg" 2),$(broker_of "$tg" 3)"
    timeout -k 5 30 taskset -c "$CPU_CLIENT" "$KRBENCH" idle -a "$addrs" \
        -n 3 -T 0 "$@" >/dev/null 2>>"$WORK/client.log"
    sleep 0.5
    r0=$(rss_kb "$pid")
    a0=$(rss_kb "$pid" RssAnon)
    h0=$(rss_kb "$pid" RssShmem)
    timeout -k 5 400 taskset -c "$CPU_CLIENT" "$KRBENCH" idle -a "$addrs" \
        -n "$n" -T 300 "$@" >"$WORK/idle.out" 2>>"$WORK/client.log" &
    local cpid=$!
    PIDS+=("$cpid")
    line=
    for _ in $(seq 3000); do        # up to 300 s to open them all
        line=$(grep '^ready' "$WORK/idle.out" 2>/dev/null)
        [ -n "$line" ] && break
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.1
    done
    sleep 1
    r1=$(rss_kb "$pid")
    a1=$(rss_kb "$pid" RssAnon)
    h1=$(rss_kb "$pid" RssShmem)
    fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    # timeout(1) passes SIGTERM on to krbench, which closes and reports.
    kill -TERM "$cpid" 2>/dev/null
    wait "$cpid"
    rc=$?
    forget "$cpid"
    out=$(grep '^{' "$WORK/idle.out" | tail -n 1)
    [ -n "$out" ] || out='{}'
    printf '{"workload":"%s","target":"%s","rep":%d,"rc":%d,%s,"fds":%s,%s}\n' \
        "$wl" "$tg" "$rep" "$rc" "$(printf '"rss_%s_kb":%s,' \
            before "${r0:-0}" after "${r1:-0}" anon_before "${a0:-0}" \
            anon_after "${a1:-0}" shmem_before "${h0:-0}" \
            shmem_after "${h1:-0}" | sed 's/,$//')" "${fds:-0}" \
        "\"client\":$out" >>"$RUNS"
    log "$wl via $tg (rep $rep): $line; RSS ${r0} -> ${r1} KiB" \
        "(anonymous ${a0} -> ${a1}, shared ${h0} -> ${h1}), $fds fds" \
        "(exit $rc)"
}
if has "$WORKLOADS" idle; then
    for ((rep = 1; rep <= REPS; rep++)); do
        for tg in $(order "$rep" $THRU_ONLY); do
            run_idle "$tg" "$rep"
        done
    done
fi
if has "$WORKLOADS" tls_idle; then
    for ((rep = 1; rep <= REPS; rep++)); do
        for tg in $(sorder "$rep"); do
            run_idle "$tg" "$rep" tls_idle
        done
    done
fi

# ---- codec micro-benchmarks (one core, nothing else running) ---------------
if has "$WORKLOADS" codec && [ "$AB" = 1 ]; then
    log "codec: not in A/B mode (bench_codec is this build's, not A's or B's)"
elif has "$WORKLOADS" codec; then
    [ -x "$BENCH_CODEC" ] || die "$BENCH_CODEC not built (make bench builds it)"
    for ((rep = 1; rep <= REPS; rep++)); do
        out=$(timeout -k 5 120 taskset -c "$CPU_MOCK" "$BENCH_CODEC" \
              -t "$CODEC_SECS" 2>>"$WORK/client.log" | tr -d '\n')
        rc=$?
        [ -n "$out" ] || out='{}'
        printf '{"workload":"codec","target":"codec","rep":%d,"rc":%d,"client":%s}\n' \
            "$rep" "$rc" "$out" >>"$RUNS"
        log "codec (rep $rep): exit $rc"
    done
fi

# ---- audit line micro-benchmarks (one core, nothing else running) ----------
if has "$WORKLOADS" auditline && [ "$AB" = 1 ]; then
    log "auditline: not in A/B mode (bench_audit is this build's)"
elif has "$WORKLOADS" auditline; then
    [ -x "$BENCH_AUDIT" ] || die "$BENCH_AUDIT not built (make bench builds it)"
    for ((rep = 1; rep <= REPS; rep++)); do
        out=$(timeout -k 5 120 taskset -c "$CPU_MOCK" "$BENCH_AUDIT" \
              -t "$CODEC_SECS" 2>>"$WORK/client.log" | tr -d '\n')
        rc=$?
        [ -n "$out" ] || out='{}'
        printf '{"workload":"auditline","target":"auditline","rep":%d,"rc":%d,"client":%s}\n' \
            "$rep" "$rc" "$out" >>"$RUNS"
        log "auditline (rep $rep): exit $rc"
    done
fi

# ---- record converter micro-benchmark (issue 10; one core) ----------------
if has "$WORKLOADS" records && [ "$AB" = 1 ]; then
    log "records: not in A/B mode (bench_records is this build's)"
elif has "$WORKLOADS" records; then
    [ -x "$BENCH_RECORDS" ] || die "$BENCH_RECORDS not built (make bench builds it)"
    for ((rep = 1; rep <= REPS; rep++)); do
        out=$(timeout -k 5 120 taskset -c "$CPU_MOCK" "$BENCH_RECORDS" \
              -t "$CODEC_SECS" 2>>"$WORK/client.log" | tr -d '\n')
        rc=$?
        [ -n "$out" ] || out='{}'
        printf '{"workload":"records","target":"records","rep":%d,"rc":%d,"client":%s}\n' \
            "$rep" "$rc" "$out" >>"$RUNS"
        log "records (rep $rep): exit $rc"
    done
fi

# ---- legacy translation through krelay (issue 10) ----------------------------
# legacy_produce, legacy_fetch: krelay's CPU seconds per GiB of record
# values while it translates an old client's requests for a Kafka-4-like
# upstream, against the same client at its own versions passing through
# a plain krelay, in the same run.  The upstream is krmock -K 4.0.0
# (tests/mock/krmock.c: Fetch 4-11 accepted, Produce v0-2 refused; one
# for both legs, started here, the mock of the other workloads idle).
# The client is kcat (librdkafka 2.0.2) for both legs, 1 KiB values,
# uncompressed, acks=1.  librdkafka 2.0.2 cannot be made to skip
# ApiVersions with a broker.version.fallback of 0.10.0 or later (it turns
# api.version.request back on), so the old client is kcat with client.id
# legacy-krbench behind a clamp rule (clamp_max_version = 2 for Produce
# and Fetch, what the ApiVersions answer offers it): it then sends
# Produce v2 with magic 1 message sets and Fetch v2, which krelay
# (translate_legacy = true) sends up as Produce v3 (records converted to
# RecordBatch v2) and Fetch v4 (records converted back to magic 1).  The
# pass-through leg: kcat as it is (Produce v7, Fetch v11) through a
# krelay with the benchmark's ordinary configuration.  Each run has a
# fresh krelay (pinned as krelay is for produce and fetch); its stop
# report's "legacy translation:" line proves what it did: a translated
# run that did not translate (or converted fewer record bytes than it
# carried), or a pass-through run that did, fails (rc 5 or 6).
LEGACY_WL=
for w in legacy_produce legacy_fetch; do
    has "$WORKLOADS" "$w" && LEGACY_WL="$LEGACY_WL $w"
done
KCAT_BIN=$(command -v kcat || true)
KRMOCK=$top_builddir/tests/mock/krmock
LEGACY_FAILED=0
if [ -n "$LEGACY_WL" ] && [ "$AB" = 1 ]; then
    log "legacy:$LEGACY_WL not in A/B mode"
elif [ -n "$LEGACY_WL" ] && [ -z "$KCAT_BIN" ]; then
    log "kcat not installed: the legacy workloads are skipped"
elif [ -n "$LEGACY_WL" ]; then
    [ -x "$KRMOCK" ] || die "$KRMOCK not built (make bench builds it)"
    bounded LMOCK_PID LMOCK_TPID "$CPU_MOCK" "$KRMOCK" -K 4.0.0 -b 3 \
        -t lproduce:8 -t "lfetch:$LEGACY_FETCH_PARTS" \
        -r "$WORK/lmock.ready" >"$WORK/lmock.out" 2>"$WORK/lmock.log"
    # creating the topics takes krmock seconds on a busy machine
    for _ in $(seq 600); do
        [ -s "$WORK/lmock.ready" ] && break
        kill -0 "$LMOCK_PID" 2>/dev/null || break
        sleep 0.1
    done
    [ -s "$WORK/lmock.ready" ] ||
        die "krmock -K 4.0.0 did not start: $(cat "$WORK/lmock.log")"
    LMOCK=$(cat "$WORK/lmock.ready")
    log "legacy: krmock -K 4.0.0 (pid $LMOCK_PID) at $LMOCK; $(grep -m 1 -- '-K 4.0.0' "$WORK/lmock.log")"
    LVAL=$(head -c 1024 /dev/zero | tr '\0' x)
    LK_PORT=$(free_ports 5) || die "no free ports"
    LK_PID= LK_TPID=
    # lk_start MODE CPUS: a fresh krelay for one run (translated: legacy
    # translation and the clamp rule; passthrough: the ordinary
    # configuration), same ports, its log emptied
    lk_start() {
        local mode=$1 extra=
        if [ "$mode" = translated ]; then
            printf -v extra '%s\n' "translate_legacy = true" "" \
                "[rule legacy-krbench]" "client_id = legacy-*" \
                "api = Produce, Fetch" "clamp_max_version = 2"
        fi
        cat >"$WORK/legacy_$mode.ini" <<LKEOF
; written by contrib/bench/run.sh (legacy workloads)
[upstream]
bootstrap_servers = $LMOCK

[listener]
listen = 127.0.0.1:$LK_PORT
advertised_host = 127.0.0.1
broker_port_base = $((LK_PORT + 1))
node_id_min = 1
node_id_max = 3
max_connections = 20000
splice_min_bytes = ${KRBENCH_SPLICE_MIN:-65536}
$extra
[log]
level = ${KRBENCH_LOG_LEVEL:-notice}
target = $WORK/legacy_$mode.log
LKEOF
        : >"$WORK/legacy_$mode.log"
        bounded LK_PID LK_TPID "$2" "$KRELAY" -c "$WORK/legacy_$mode.ini" \
            >>"$WORK/legacy_$mode.out" 2>&1
        wait_ports "$LK_PORT" $((LK_PORT + 2)) $((LK_PORT + 3)) \
            $((LK_PORT + 4)) && kill -0 "$LK_PID" 2>/dev/null
    }
    if has "$WORKLOADS" legacy_fetch; then
        # one partition after the other, so that batches reach 1 MB
        # (modern kcat straight to the mock: Produce v7)
        log "legacy: preloading lfetch: $LEGACY_FETCH_PARTS partitions x $FETCH_PER_PART values of 1 KiB"
        for ((p = 0; p < LEGACY_FETCH_PARTS; p++)); do
            yes "$LVAL" | head -n "$FETCH_PER_PART" |
                timeout -k 5 60 taskset -c "$CPU_CLIENT" "$KCAT_BIN" -P \
                    -b "$LMOCK" -t lfetch -p "$p" -X acks=1 \
                    -X linger.ms=100 -z none 2>>"$WORK/legacy_client.log"
            [ "${PIPESTATUS[2]}" = 0 ] ||
                die "legacy: preloading lfetch/$p failed (legacy_client.log)"
        done
        grep -q 'Delivery failed' "$WORK/legacy_client.log" &&
            die "legacy: preloading lfetch failed (legacy_client.log)"
    fi
    # legacy_run WORKLOAD MODE REP: one client run through a fresh krelay
    legacy_run() {
        local wl=$1 mode=$2 rep=$3 cpus=$CPU_PROXY cid=modern-krbench
        local c0 c1 m0 m1 s0 s1 t0 t1 rc n=0 b=0 lt=0 rin=0 rout=0
        local err=$WORK/legacy_run.err why=ok line
        [ "$wl" = legacy_fetch ] && cpus=$CPU_PROXY_FETCH
        [ "$mode" = translated ] && cid=legacy-krbench
        if ! lk_start "$mode" "$cpus"; then
            log "$wl via $mode (rep $rep): krelay did not start: $(tail -n 3 "$WORK/legacy_$mode.out" "$WORK/legacy_$mode.log" 2>/dev/null)"
            stop_pid "$LK_TPID"
            LEGACY_FAILED=1
            return 0
        fi
        : >"$err"
        c0=$(cpu_ns "$LK_PID"); m0=$(cpu_ticks "$LMOCK_PID")
        s0=$(busy_ticks); t0=$(date +%s.%N)
        if [ "$wl" = legacy_produce ]; then
            yes "$LVAL" | head -n "$LEGACY_RECORDS" |
                timeout -k 5 300 taskset -c "$CPU_CLIENT" "$KCAT_BIN" -P \
                    -b "127.0.0.1:$LK_PORT" -t lproduce -X client.id=$cid \
                    -X acks=1 -X linger.ms=5 -z none 2>>"$err"
            rc=${PIPESTATUS[2]}
            n=$LEGACY_RECORDS
            [ "$rc" = 0 ] && grep -q 'Delivery failed' "$err" && rc=4
        else
            timeout -k 5 300 taskset -c "$CPU_CLIENT" "$KCAT_BIN" -C \
                -b "127.0.0.1:$LK_PORT" -t lfetch -o beginning -e -q \
                -f '%S\n' -X client.id=$cid 2>>"$err" |
                awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }' \
                    >"$WORK/legacy_fetch.count"
            rc=${PIPESTATUS[0]}
            read -r n b <"$WORK/legacy_fetch.count"
            # every value once: anything else is a failed run
            [ "$rc" = 0 ] &&
                [ "$n" != $((LEGACY_FETCH_PARTS * FETCH_PER_PART)) ] && rc=4
        fi
        [ "$wl" = legacy_produce ] && b=$((n * 1024))
        t1=$(date +%s.%N); c1=$(cpu_ns "$LK_PID")
        m1=$(cpu_ticks "$LMOCK_PID"); s1=$(busy_ticks)
        stop_pid "$LK_TPID"
        { echo "== $wl $mode rep $rep: exit $rc"; cat "$err"; } \
            >>"$WORK/legacy_client.log"
        [ "$rc" = 4 ] && why="client: $n values, $b bytes"
        line=$(grep -o 'legacy translation: .*' "$WORK/legacy_$mode.log" |
               tail -n 1)
        if [ -n "$line" ]; then
            read -r lt rin rout < <(printf '%s\n' "$line" | sed -n \
                's/^legacy translation: \([0-9]*\) request.* \([0-9]*\) bytes of records in, \([0-9]*\) out.*/\1 \2 \3/p')
        fi
        if [ "$rc" = 0 ] && [ "$mode" = translated ] &&
           { [ "${lt:-0}" -eq 0 ] || [ "${rin:-0}" -lt "$b" ] ||
             [ "${rout:-0}" -lt "$b" ]; }; then
            rc=5 why="NOT translated: ${line:-no legacy translation line}"
        elif [ "$rc" = 0 ] && [ "$mode" = passthrough ] && [ -n "$line" ]; then
            rc=6 why="translated in the pass-through leg: $line"
        fi
        [ "$rc" = 0 ] || LEGACY_FAILED=1
        awk -v wl="$wl" -v tg="$mode" -v rep="$rep" -v rc="$rc" \
            -v t0="$t0" -v t1="$t1" -v m="$((m1 - m0))" -v s="$((s1 - s0))" \
            -v tick="$TICK" -v c="$((c1 - c0))" -v n="$n" -v b="$b" \
            -v lt="${lt:-0}" -v rin="${rin:-0}" -v rout="${rout:-0}" \
            -v why="$why" 'BEGIN {
            w = t1 - t0
            printf "{\"workload\":\"%s\",\"target\":\"%s\",\"rep\":%d,\"rc\":%d,", wl, tg, rep, rc
            printf "\"wall_s\":%.3f,\"mock_cpu_s\":%.2f,\"system_cpu_s\":%.2f,", w, m / tick, s / tick
            printf "\"krelay_cpu_s\":%.4f,\"check\":\"%s\",", c / 1e9, why
            printf "\"legacy\":{\"translated\":%d,\"records_in\":%d,\"records_out\":%d},", lt, rin, rout
            printf "\"client\":{\"records\":%d,\"value_bytes\":%d,\"mb_per_s\":%.1f}}\n", n, b, (w > 0 ? b / w / 1e6 : 0) }' \
            >>"$RUNS"
        log "$wl via $mode (rep $rep): exit $rc, $n values in" \
            "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s," \
            "krelay $(awk -v c="$((c1 - c0))" -v b="$b" 'BEGIN {
                printf "%.3f CPU s per GiB", (b > 0 ? c / 1e9 / (b / 1073741824) : 0) }');" \
            "$why"
    }
    for ((rep = 1; rep <= REPS; rep++)); do
        for wl in $LEGACY_WL; do
            if [ $((rep % 2)) = 1 ]; then
                legacy_run "$wl" translated "$rep"
                legacy_run "$wl" passthrough "$rep"
            else
                legacy_run "$wl" passthrough "$rep"
                legacy_run "$wl" translated "$rep"
            fi
        done
    done
    stop_pid "$LMOCK_TPID"
    [ "$LEGACY_FAILED" = 1 ] &&
        log "ERROR: legacy: some runs failed or did not translate (see the table and legacy_client.log)"
fi

# ---- blast_scale: krelay's workers (issue 12, "every core") ------------------
# krelay alone is the bottleneck, once with 1 worker and once with each
# count in SCALE_WORKERS (default 1,2): krbench blast (SCALE_CONNS
# connections, SCALE_DEPTH prebuilt Produce requests in flight on each,
# one small record each) at krbench canned (a scripted upstream, its own
# instance here) through a krelay with a rule-heavy configuration: every
# request audited to a file (tmpfs by default: the audit writer's cost is
# a file's, not a disk's) and Produce clamped to v7, so that krelay
# decodes each v9 request, re-encodes it at v7, and does the reverse for
# its response (the audit line says "clamped"; a run without clamped
# lines is reported as such).  Both peers pause SCALE_PAUSE /
# SCALE_PAUSE_CANNED microseconds between polls: with thousands of
# requests in flight krelay never runs dry, and each wake-up of the
# peers then handles many connections' traffic (the peers' CPU per
# request is what issue 12 limits to 0.2x krelay's).  Placement: with
# more CPUs than workers, the workers get CPUs 1..N and the peers and
# krelay's audit writer thread CPU 0; otherwise every process and thread
# shares every CPU (2 workers on 2 CPUs: what the peers use is taken
# from the workers, README.md "blast_scale").  krelay's CPU is its
# process's minus the audit writer's (krbench -C PID/krelay-audit);
# the writer counts with the peers.  KRBENCH_SCALE_QUOTA caps each leg's
# workers at N x a share of a CPU instead (every leg on every CPU).
SCALE_WL=0
has "$WORKLOADS" blast_scale && SCALE_WL=1
SCALE_LEGS=()
SCALE_KEY=
if [ "$SCALE_WL" = 1 ] && [ "$AB" = 1 ]; then
    log "blast_scale: not in A/B mode"
elif [ "$SCALE_WL" = 1 ]; then
    bounded SC_PID SC_TPID "$CPU_CLIENT" "$KRBENCH" canned \
        -l 127.0.0.1:0 -i "$SCALE_PAUSE_CANNED" -r "$WORK/scanned.ready" \
        >"$WORK/scanned.out" 2>"$WORK/scanned.log"
    for _ in $(seq 100); do
        [ -s "$WORK/scanned.ready" ] && break
        kill -0 "$SC_PID" 2>/dev/null || break
        sleep 0.05
    done
    [ -s "$WORK/scanned.ready" ] ||
        die "blast_scale: the scripted upstream did not start: $(cat "$WORK/scanned.log")"
    SC_PORT=$(cat "$WORK/scanned.ready")
    # KRBENCH_SCALE_QUOTA: each leg's workers capped at N x that share of
    # a CPU (cgroup v1 cpu: the worker threads only, the audit writer
    # stays out; v2 cpu.max: the whole process), every leg on every CPU
    SCALE_QUOTA_US=$(awk -v q="$SCALE_QUOTA" 'BEGIN { printf "%d", q * 100000 }')
    SCG_DIR= SCG_ROOT= SCG_KIND=
    if [ "$SCALE_QUOTA_US" -gt 0 ]; then
        if [ -w /sys/fs/cgroup/cpu/tasks ] &&
           mkdir "/sys/fs/cgroup/cpu/krbench-scale.$$" 2>/dev/null; then
            SCG_KIND=v1 SCG_ROOT=/sys/fs/cgroup/cpu
            SCG_DIR=/sys/fs/cgroup/cpu/krbench-scale.$$
            echo 100000 >"$SCG_DIR/cpu.cfs_period_us"
        elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null &&
             mkdir "/sys/fs/cgroup/krbench-scale.$$" 2>/dev/null; then
            SCG_KIND=v2 SCG_ROOT=/sys/fs/cgroup
            SCG_DIR=/sys/fs/cgroup/krbench-scale.$$
        else
            log "blast_scale: no writable cgroup cpu controller: no quota"
            SCALE_QUOTA=0 SCALE_QUOTA_US=0
        fi
    else
        SCALE_QUOTA=0 SCALE_QUOTA_US=0
    fi
    CG_SCALE=$SCG_DIR                   # for cleanup
    # scg_move PID DIR: krelay's threads but its audit writer into DIR
    # (v2: the process)
    scg_move() {
        local t
        if [ "$SCG_KIND" = v1 ]; then
            for t in /proc/"$1"/task/*; do
                [ "$(cat "$t/comm" 2>/dev/null)" = krelay-audit ] && continue
                echo "${t##*/}" >"$2/tasks" 2>/dev/null || true
            done
        else
            echo "$1" >"$2/cgroup.procs" 2>/dev/null || true
        fi
    }
    declare -A SC_CPUS=() SC_PCPUS=()
    # sc_ini N [nokey]: krelay_wN's configuration
    sc_ini() {
        local n=$1 port=${KR_PORT[krelay_w$1]}
        {
            echo "; written by contrib/bench/run.sh (blast_scale)"
            if [ "${2:-}" != nokey ]; then
                printf '%s\n' "[process]" "workers = $n" ""
            fi
            cat <<SCEOF
[upstream]
bootstrap_servers = 127.0.0.1:$SC_PORT
dial.1 = 127.0.0.1:$SC_PORT

[listener]
listen = 127.0.0.1:$port
advertised_host = 127.0.0.1
broker_port_base = $port
node_id_min = 1
node_id_max = 1
max_connections = 20000

[log]
level = ${KRBENCH_LOG_LEVEL:-notice}
target = $WORK/krelay_w$n.log

[audit]
target = $SCALE_AUDIT_DIR/krelay_w$n.audit.jsonl

; every request and response audited
[rule audit-all]
audit = true

; the generator sends Produce v$SCALE_VERSION: krelay translates each
; request down to v$SCALE_CLAMP and its response back up
[rule clamp-produce]
api = Produce
clamp_max_version = $SCALE_CLAMP
SCEOF
        } >"$WORK/krelay_w$n.ini"
    }
    for n in ${SCALE_WORKERS//,/ }; do
        case $n in ''|*[!0-9]*|0) die "blast_scale: bad worker count '$n'" ;; esac
        KR_PORT[krelay_w$n]=$(free_ports 3) || die "no free ports"
        if [ "$NCPU" -gt "$n" ] && [ "$SCALE_QUOTA_US" = 0 ]; then
            SC_CPUS[$n]=1-$n SC_PCPUS[$n]=0
            [ "$n" = 1 ] && SC_CPUS[$n]=1
        else
            SC_CPUS[$n]=0-$((NCPU - 1)) SC_PCPUS[$n]=0-$((NCPU - 1))
        fi
        sc_ini "$n"
        if ! "$KRELAY" -t -c "$WORK/krelay_w$n.ini" >"$WORK/krelay_w$n.t" 2>&1; then
            if grep -q workers "$WORK/krelay_w$n.t" && [ "$n" = 1 ]; then
                # a krelay before [process] workers: one event loop anyway
                sc_ini "$n" nokey
                SCALE_KEY=rejected
                log "blast_scale: krelay does not know [process] workers; the 1-worker leg runs without the key"
            elif grep -q workers "$WORK/krelay_w$n.t"; then
                SCALE_KEY=rejected
                log "blast_scale: krelay does not know [process] workers: the $n-worker leg is skipped"
                continue
            else
                die "blast_scale: krelay -t refuses krelay_w$n.ini: $(tail -n 3 "$WORK/krelay_w$n.t")"
            fi
        else
            [ -n "$SCALE_KEY" ] || SCALE_KEY=accepted
        fi
        bounded kpid ktpid "${SC_CPUS[$n]}" "$KRELAY" -c "$WORK/krelay_w$n.ini" \
            >>"$WORK/krelay_w$n.out" 2>&1
        KR_PID[krelay_w$n]=$kpid KR_TPID[krelay_w$n]=$ktpid
        wait_ports "${KR_PORT[krelay_w$n]}" $((${KR_PORT[krelay_w$n]} + 1)) ||
            die "blast_scale: krelay_w$n did not start: $(tail -n 5 "$WORK/krelay_w$n.out" "$WORK/krelay_w$n.log" 2>/dev/null)"
        # the audit writer goes with the peers
        atid=
        for t in /proc/"$kpid"/task/*; do
            [ "$(cat "$t/comm" 2>/dev/null)" = krelay-audit ] && atid=${t##*/}
        done
        if [ -n "$atid" ]; then
            taskset -p -c "${SC_PCPUS[$n]}" "$atid" >/dev/null 2>&1 ||
                log "blast_scale: taskset -p ${SC_PCPUS[$n]} $atid failed"
        else
            log "blast_scale: krelay_w$n has no thread named krelay-audit: its audit writer counts as krelay's"
            SCALE_AUDIT_THREAD=unnamed
        fi
        SCALE_LEGS+=("$n")
        log "blast_scale: krelay_w$n (pid $kpid) at 127.0.0.1:${KR_PORT[krelay_w$n]}, workers on cpu ${SC_CPUS[$n]}, peers and audit writer on cpu ${SC_PCPUS[$n]}; threads: $(cat /proc/"$kpid"/task/*/comm 2>/dev/null | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')"
    done
    log "blast_scale: scripted upstream (pid $SC_PID) at 127.0.0.1:$SC_PORT; audit files in $SCALE_AUDIT_DIR"
    [ -n "$SCG_DIR" ] &&
        log "blast_scale: N workers capped at N x $SCALE_QUOTA of a CPU (cgroup $SCG_KIND $SCG_DIR)"
    # sc_run N REP: one blast run through krelay_wN
    sc_run() {
        local n=$1 kpid=${KR_PID[krelay_w$1]}
        taskset -a -p -c "${SC_PCPUS[$n]}" "$SC_PID" >/dev/null 2>&1
        if [ -n "$SCG_DIR" ]; then
            if [ "$SCG_KIND" = v1 ]; then
                echo $((n * SCALE_QUOTA_US)) >"$SCG_DIR/cpu.cfs_quota_us"
            else
                echo "$((n * SCALE_QUOTA_US)) 100000" >"$SCG_DIR/cpu.max"
            fi
            scg_move "$kpid" "$SCG_DIR"
        fi
        RUN_AUDIT_LOG=$SCALE_AUDIT_DIR/krelay_w$n.audit.jsonl \
        CPU_CLIENT=${SC_PCPUS[$n]} \
            run_client blast_scale "krelay_w$n" "$2" 90 "$KRBENCH" blast \
            -a "127.0.0.1:$((${KR_PORT[krelay_w$n]} + 1))" \
            -c "$SCALE_CONNS" -D "$SCALE_DEPTH" -r "$SCALE_RECORDS" \
            -s "$SCALE_SIZE" -V "$SCALE_VERSION" -i "$SCALE_PAUSE" \
            -d "$PRODUCE_SECS" -w "$PRODUCE_WARM" \
            -C "$SC_PID,$kpid,$kpid/krelay-audit"
        [ -n "$SCG_DIR" ] && scg_move "$kpid" "$SCG_ROOT"
        log "blast_scale via krelay_w$n (rep $2): $(tail -n 1 "$RUNS" | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
c = r.get("client", {})
n, p = c.get("requests") or 0, c.get("peer_cpu_window_s") or []
if n and len(p) == 3 and min(p) >= 0:
    k = p[1] - p[2]
    print("%.0f requests/s; CPU us/request: krelay %.2f, generator %.2f, "
          "upstream %.2f, audit writer %.2f; peers/krelay %.3f; %s of %s "
          "audit lines clamped" % (
              c["requests_per_s"], k / n * 1e6,
              c["client_cpu_window_s"] / n * 1e6, p[0] / n * 1e6,
              p[2] / n * 1e6,
              (c["client_cpu_window_s"] + p[0] + p[2]) / k if k > 0 else -1,
              r.get("audit_clamped"), r.get("audit_lines")))
else:
    print("no figures (exit %s)" % r.get("rc"))')"
    }
    for ((rep = 1; rep <= REPS; rep++)); do
        if [ $((rep % 2)) = 1 ]; then
            for n in "${SCALE_LEGS[@]}"; do sc_run "$n" "$rep"; done
        else
            for ((i = ${#SCALE_LEGS[@]} - 1; i >= 0; i--)); do
                sc_run "${SCALE_LEGS[$i]}" "$rep"
            done
        fi
    done
    for n in "${SCALE_LEGS[@]}"; do
        stop_krelay "krelay_w$n"
        rm -f "$SCALE_AUDIT_DIR/krelay_w$n.audit.jsonl"
    done
    stop_pid "$SC_TPID"
    [ -n "$SCG_DIR" ] && rmdir "$SCG_DIR" 2>/dev/null && CG_SCALE=
    log "blast_scale: the scripted upstream said $(grep '^{' "$WORK/scanned.out" | tail -n 1)"
fi

# krelay_sasl's log: its failed logins (logged at notice, so always
# counted) and its successful ones (at info: counted with
# KRBENCH_LOG_LEVEL=info, else empty)
SASL_FAILED=
SASL_LOGINS=
if [ -f "$WORK/krelay_sasl.log" ]; then
    SASL_FAILED=$(grep -c 'authentication failed' "$WORK/krelay_sasl.log")
    case ${KRBENCH_LOG_LEVEL:-notice} in
    info|debug)
        SASL_LOGINS=$(grep -c 'SASL .*authentication succeeded' \
                      "$WORK/krelay_sasl.log") ;;
    esac
    log "krelay_sasl: $SASL_FAILED failed logins;" \
        "${SASL_LOGINS:-? (KRBENCH_LOG_LEVEL=info counts them)} succeeded"
fi

# ---- report -----------------------------------------------------------------------
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
AB_META=()
if [ "$AB" = 1 ]; then
    AB_META=(--meta "ab=1" --meta "targets=$TARGETS"
             --meta "workloads=$WORKLOADS"
             --meta "krelay_a=$KRELAY_A" --meta "krelay_b=$KRELAY_B"
             --meta "label_a=$LABEL_A" --meta "label_b=$LABEL_B"
             --meta "krelay_a_version=$("$KRELAY_A" -V 2>/dev/null | head -n 1)"
             --meta "krelay_b_version=$("$KRELAY_B" -V 2>/dev/null | head -n 1)"
             --meta "krelay_a_sha256=$(sha256sum <"$KRELAY_A" | cut -c1-16)"
             --meta "krelay_b_sha256=$(sha256sum <"$KRELAY_B" | cut -c1-16)")
fi
"$PY" "$top_srcdir/contrib/bench/report.py" --runs "$RUNS" --out "$OUT" \
    --meta "reps=$REPS" --meta "quick=$QUICK" \
    --meta "cpu_client=$CPU_CLIENT" --meta "cpu_mock=$CPU_MOCK" \
    --meta "cpu_proxy=$CPU_PROXY" --meta "cpu_proxy_fetch=$CPU_PROXY_FETCH" \
    --meta "ncpu=$NCPU" \
    --meta "cpu_model=$CPU_MODEL" --meta "kernel=$(uname -r)" \
    --meta "mem_total_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)" \
    --meta "os=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release)" \
    --meta "mock_librdkafka=$MOCK_VERSION" \
    --meta "librdkafka_build=$LIBRDKAFKA_NOTE" \
    --meta "mock_advertises_haproxy=$ADV_OK" \
    --meta "haproxy_sessions=$HAPROXY_SESSIONS" \
    --meta "haproxy_tls_sessions=$HAPROXY_TLS_SESSIONS" \
    --meta "krelay_log_level=${KRBENCH_LOG_LEVEL:-notice}" \
    --meta "sasl=$(has "$TARGETS" krelay_sasl && echo "$SASL_MECH")" \
    --meta "sasl_logins=$SASL_LOGINS" \
    --meta "sasl_failed_logins=$SASL_FAILED" \
    --meta "tls=TLSv1.3 $TLS_SUITE $TLS_GROUP, ECDSA P-256" \
    --meta "openssl=$(openssl version 2>/dev/null)" \
    --meta "handshakes=$HANDSHAKES" --meta "tls_idle_conns=$TLS_IDLE_CONNS" \
    --meta "cpu_canned=$CPU_CANNED" --meta "blast_conns=$BLAST_CONNS" \
    --meta "blast_depth=$BLAST_DEPTH" --meta "blast_records=$BLAST_RECORDS" \
    --meta "blast_record_bytes=$BLAST_SIZE" \
    --meta "blast_produce_version=$BLAST_VERSION" \
    --meta "blast_proxy_quota=$BLAST_QUOTA" \
    --meta "scale_workers=$(IFS=,; echo "${SCALE_LEGS[*]}")" \
    --meta "scale_workers_key=$SCALE_KEY" \
    --meta "scale_conns=$SCALE_CONNS" --meta "scale_depth=$SCALE_DEPTH" \
    --meta "scale_records=$SCALE_RECORDS" \
    --meta "scale_record_bytes=$SCALE_SIZE" \
    --meta "scale_produce_version=$SCALE_VERSION" \
    --meta "scale_clamp_version=$SCALE_CLAMP" \
    --meta "scale_pause_us=$SCALE_PAUSE" \
    --meta "scale_pause_canned_us=$SCALE_PAUSE_CANNED" \
    --meta "scale_quota=$SCALE_QUOTA" \
    --meta "scale_audit_thread=$([ "$SCALE_WL" = 1 ] && echo "$SCALE_AUDIT_THREAD")" \
    --meta "scale_audit_dir=$([ "$SCALE_WL" = 1 ] && { [ -n "$SCALE_AUDIT_TMP" ] && echo tmpfs || echo "$SCALE_AUDIT_DIR"; })" \
    --meta "scale_cpus=$(for n in "${SCALE_LEGS[@]}"; do printf '%sw%s %s/%s' "${sep:-}" "$n" "${SC_CPUS[$n]}" "${SC_PCPUS[$n]}"; sep=', '; done)" \
    --meta "haproxy=$([ -n "$HAPROXY" ] && "$HAPROXY" -v | sed -n '1s/HAProxy version \([^ ]*\).*/\1/p')" \
    --meta "krelay=$([ "$AB" = 1 ] || "$KRELAY" -V 2>/dev/null | head -n 1)" \
    --meta "krelay_commit=$(git -C "$top_srcdir" rev-parse --short HEAD 2>/dev/null)" \
    --meta "krelay_dirty=$(git -C "$top_srcdir" status --porcelain 2>/dev/null | wc -l)" \
    --meta "produce_secs=$PRODUCE_SECS" --meta "fetch_partitions=$FETCH_PARTS" \
    --meta "fetch_records=$((FETCH_PARTS * FETCH_PER_PART))" \
    --meta "latency_rate=$LAT_RATE" --meta "latency_count=$LAT_COUNT" \
    --meta "latency_mode=$LAT_MODE" --meta "latency_warmup_s=$LAT_WARM" \
    --meta "latency_priority=$LAT_PRIO" \
    --meta "legacy_records=$(has "$WORKLOADS" legacy_produce && echo "$LEGACY_RECORDS")" \
    --meta "legacy_fetch_records=$(has "$WORKLOADS" legacy_fetch && echo $((LEGACY_FETCH_PARTS * FETCH_PER_PART)))" \
    --meta "legacy_client=$([ -n "$LEGACY_WL" ] && [ -n "$KCAT_BIN" ] && "$KCAT_BIN" -V 2>/dev/null | sed -n 's/^Version \([^ ]*\) .*librdkafka \([^ ]*\) .*/kcat \1, librdkafka \2/p')" \
    --meta "idle_conns=$IDLE_CONNS" --meta "latency_produce_version=$LAT_VERSION" --meta "codec_secs=$CODEC_SECS" \
    ${AB_META[@]+"${AB_META[@]}"} \
    --meta "note=$NOTE" || die "report failed"
log "results written to $OUT"
[ "$LEGACY_FAILED" = 1 ] &&
    die "legacy: some runs failed or did not translate (legacy_client.log)"
exit 0
