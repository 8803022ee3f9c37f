#!/bin/bash
# quickstart.sh - from a fresh Debian 12 machine to Kafka traffic through
# krelay, in one command; then what the tests need:
#
#   1. installs what building krelay and its demo need
#      (contrib/install-deps.sh --demo: Debian packages only);
#   2. builds krelay out of tree in ./build;
#   3. runs `krelay --demo` (krelay in front of a 3-broker mock cluster,
#      the program krelay-demo-cluster that krelay starts) and sends real
#      client traffic through it with kcat: metadata, produce, consume;
#   4. shows what the client saw and krelay's log, then stops the demo;
#   5. installs what only the tests use (contrib/install-deps.sh --tests:
#      Debian packages, then the npm packages kafkajs and node-rdkafka,
#      which builds librdkafka 2.12) and lets configure see them, so that
#      `make -C build check` runs every test.  A failure here costs no
#      build and no demo: it says which tests will be skipped and the
#      command that retries, and the script still ends with status 0
#      (1 under KRELAY_REQUIRE_ALL=1, as in CI).
#
# Environment:
#   KRELAY_BUILD             build directory (default ./build)
#   KRELAY_DEMO_PORT         the demo's bootstrap port (default 9092)
#   KRELAY_DEMO_BROKER_BASE  NodeId n listens on BASE+n (default 19092)
#   KRELAY_SKIP_DEPS=1       install nothing (steps 1 and 5)
#   KRELAY_SKIP_TEST_DEPS=1  skip step 5: build and demo only
#   KRELAY_SKIP_NPM=1        skip step 5's npm packages (no npm registry,
#                            a proxy that re-signs TLS): kafkajs.sh and
#                            modern.sh are then skipped by `make check`
#   KRELAY_REQUIRE_ALL=1     a failed step 5 fails this script too
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KRELAY_BUILD:-$SRC/build}
PORT=${KRELAY_DEMO_PORT:-9092}
BASE=${KRELAY_DEMO_BROKER_BASE:-19092}
TOPIC=demo

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [ "${KRELAY_SKIP_DEPS:-0}" != 1 ]; then
    say "Installing what the build and the demo need (install-deps.sh --demo)"
    "$SRC/contrib/install-deps.sh" --demo
fi

say "Building krelay in $BUILD"
if [ ! -x "$SRC/configure" ]; then
    (cd "$SRC" && ./autogen.sh)
fi
mkdir -p "$BUILD"
cd "$BUILD"
if [ ! -f Makefile ]; then
    "$SRC/configure"
fi
make -j"$(nproc)"
if [ ! -x "$BUILD/krelay-demo-cluster" ]; then
    echo "FAILED: $BUILD/krelay-demo-cluster was not built: configure did" \
         "not find librdkafka (install-deps.sh --demo installs" \
         "librdkafka-dev; then: cd $BUILD && ./config.status --recheck &&" \
         "./config.status && make)" >&2
    exit 1
fi

# The demo's ports must be free (the bootstrap port and the three brokers'
# BASE+1..BASE+3): a client would otherwise talk to whatever listens there
# (a real Kafka, another demo) and "pass".
for p in "$PORT" $((BASE + 1)) $((BASE + 2)) $((BASE + 3)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        echo "FAILED: 127.0.0.1:$p is in use by another program (another" \
             "krelay demo?); stop it, or choose other ports:" \
             "KRELAY_DEMO_PORT=9192 KRELAY_DEMO_BROKER_BASE=19192 $0" >&2
        exit 1
    fi
done

LOG=$(mktemp -t krelay-demo.XXXXXX.log)
say "Starting: $BUILD/krelay --demo --listen 127.0.0.1:$PORT --broker-port-base $BASE"
"$BUILD/krelay" --demo -v --listen "127.0.0.1:$PORT" \
    --broker-port-base "$BASE" >"$LOG" 2>&1 &
KRELAY_PID=$!
cleanup() {
    if [ -n "$KRELAY_PID" ]; then
        kill "$KRELAY_PID" 2>/dev/null || true
        wait "$KRELAY_PID" 2>/dev/null || true
    fi
    rm -f "$LOG"
}
trap cleanup EXIT

# Wait until the bootstrap listener answers a metadata request.
ok=0
for _ in $(seq 1 50); do
    if ! kill -0 "$KRELAY_PID" 2>/dev/null; then
        break
    fi
    if kcat -b "127.0.0.1:$PORT" -L -m 2 >/dev/null 2>&1; then
        ok=1
        break
    fi
    sleep 0.2
done
if [ "$ok" != 1 ] || ! kill -0 "$KRELAY_PID" 2>/dev/null ||
   ! grep -q 'krelay .* started' "$LOG"; then
    echo "krelay did not come up; its log:" >&2
    cat "$LOG" >&2
    exit 1
fi

say "kcat -L: the cluster as a client sees it (every broker is krelay)"
kcat -b "127.0.0.1:$PORT" -L -t "$TOPIC" -m 5

say "kcat -P: producing 5 messages to '$TOPIC' through krelay"
for i in 1 2 3 4 5; do
    echo "hello krelay $i"
done | kcat -b "127.0.0.1:$PORT" -P -t "$TOPIC" -p 0 -m 10

say "kcat -C: consuming them back through krelay"
got=$(kcat -b "127.0.0.1:$PORT" -C -t "$TOPIC" -p 0 -o beginning -e -q \
      -m 10 -f '%t[%p]@%o: %s\n')
echo "$got"
n=$(printf '%s\n' "$got" | grep -c 'hello krelay' || true)

say "krelay's log"
cat "$LOG"

if [ "$n" -lt 5 ]; then
    echo "FAILED: consumed $n of 5 messages" >&2
    exit 1
fi
# ... and through this krelay: it still runs and served the clients
if ! kill -0 "$KRELAY_PID" 2>/dev/null ||
   ! grep -q '\[c#[0-9][0-9.]* 127\.0\.0\.1:' "$LOG"; then
    echo "FAILED: the messages did not go through this krelay (it exited" \
         "or accepted no client)" >&2
    exit 1
fi
kill "$KRELAY_PID"
wait "$KRELAY_PID" || { echo "FAILED: krelay did not stop cleanly" >&2; exit 1; }
KRELAY_PID=
say "OK: 5 messages produced and consumed through krelay."

# ---- 5. what only the tests need ------------------------------------------
# skipped_without PACKAGE: what `make check` skips without a package of
# install-deps.sh --tests (tests/integration/lib.sh: kr_need_*).
skipped_without() {
    case $1 in
    check) echo "the unit tests, tests/unit/check_* (configure disables" \
                "them without Check)" ;;
    python3) echo "every tests/integration/*.sh, tests/modgraph.sh" ;;
    python3-kafka) echo "tests/integration/kafka_python.sh," \
                        "legacy_direct.sh" ;;
    python3-snappy | python3-lz4 | python3-xxhash | python3-zstandard)
        echo "nothing (the snappy, lz4 and zstd cases of" \
             "tests/integration/legacy_matrix.sh, \`make check-long\`," \
             "need it)" ;;
    python3-confluent-kafka) echo "tests/integration/rules_deny.sh," \
                                  "rules_reload.sh" ;;
    nodejs | npm | libnode-dev | zlib1g-dev | libzstd-dev | liblz4-dev |\
    libsasl2-dev)
        echo "tests/integration/kafkajs.sh, modern.sh (the npm packages" \
             "need it)" ;;
    valgrind) echo "nothing (\`make check-valgrind\` needs it)" ;;
    haproxy) echo "tests/integration/tls.sh (and \`make bench\` needs" \
                  "it)" ;;
    openssl) echo "tests/integration/tls.sh, rules_examples.sh," \
                  "krelay_cli.sh, tests/install.sh (they make test" \
                  "certificates with it)" ;;
    git) echo "nothing (tests/tools/audit_compare.sh needs it)" ;;
    man-db) echo "tests/install.sh (it renders the installed man pages" \
                 "with man)" ;;
    openjdk-17-jdk-headless) echo "tests/principal_jdk.sh (the JDK's" \
                 "answers for TLS principals)" ;;
    *) echo "no test that we know of (contrib/install-deps.sh says why" \
            "it is in --tests)" ;;
    esac
}
# npm_failed: what a failed `install-deps.sh --npm` costs, and the ways on.
npm_failed() {
    echo "WARNING: the npm packages were not installed (above: npm's own" \
         "error; behind a proxy that re-signs TLS, npm needs its CA: npm" \
         "config set cafile FILE).  Built and demo: fine." \
         "\`make -C $BUILD check\` will skip tests/integration/kafkajs.sh" \
         "(kafkajs) and tests/integration/modern.sh (node-rdkafka," \
         "librdkafka 2.12)."
    echo "  Retry: $SRC/contrib/install-deps.sh --npm"
    echo "  Or leave npm out next time: KRELAY_SKIP_NPM=1 $0"
}
# closing_hints: how to go on, with the ports this run's demo used.
closing_hints() {
    local demo="$BUILD/krelay --demo"
    if [ "$PORT" != 9092 ] || [ "$BASE" != 19092 ]; then
        demo="$demo --listen 127.0.0.1:$PORT --broker-port-base $BASE"
    fi
    echo "Run it yourself:  $demo   (then: kcat -b 127.0.0.1:$PORT -L)"
    echo "Try rules:        $BUILD/krelay --demo -c FILE   (README.md:" \
         "\"Try rules on the demo\"; FILE's [listener] says the ports)"
    echo "Run every test:   make -C $BUILD check"
}
# Never fatal under set -e: the build and the demo are done.  Each part
# that fails says which tests `make check` will skip and how to retry.
test_deps_failed=0
if [ "${KRELAY_SKIP_DEPS:-0}" != 1 ] && [ "${KRELAY_SKIP_TEST_DEPS:-0}" != 1 ]; then
    say "Installing what only the tests use: Debian packages (install-deps.sh --tests)"
    if ! KRELAY_SKIP_NPM=1 "$SRC/contrib/install-deps.sh" --tests; then
        test_deps_failed=1
        echo "WARNING: Debian packages only the tests use were not" \
             "installed (above: apt-get's error).  Built and demo: fine." \
             "Missing, and what \`make -C $BUILD check\` skips without" \
             "each:" >&2
        for p in $("$SRC/contrib/install-deps.sh" --list tests); do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
                grep -q 'install ok installed' ||
                echo "  $p: $(skipped_without "$p")" >&2
        done
        echo "  Retry: $SRC/contrib/install-deps.sh --tests &&" \
             "(cd $BUILD && ./config.status --recheck && ./config.status)" >&2
    fi
    # configure decides on Check (the unit tests) when it runs: let it see
    # what was just installed (config.status keeps its options)
    (cd "$BUILD" && ./config.status --recheck >/dev/null &&
     ./config.status >/dev/null) ||
        { echo "FAILED: $BUILD: ./config.status --recheck" >&2; exit 1; }
    if [ "${KRELAY_SKIP_NPM:-0}" = 1 ]; then
        echo "KRELAY_SKIP_NPM=1: npm packages not installed.  Without" \
             "them \`make -C $BUILD check\` skips" \
             "tests/integration/kafkajs.sh (kafkajs) and" \
             "tests/integration/modern.sh (node-rdkafka, librdkafka 2.12)." \
             "Later: $SRC/contrib/install-deps.sh --npm"
    else
        say "Installing the npm packages the tests use (install-deps.sh --npm: kafkajs, node-rdkafka, which builds librdkafka 2.12: a few minutes)"
        if ! "$SRC/contrib/install-deps.sh" --npm; then
            test_deps_failed=1
            npm_failed >&2
        fi
    fi
fi

closing_hints
if [ "$test_deps_failed" = 1 ] && [ "${KRELAY_REQUIRE_ALL:-0}" = 1 ]; then
    echo "FAILED (KRELAY_REQUIRE_ALL=1): what the tests need is not installed" >&2
    exit 1
fi
