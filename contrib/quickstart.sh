#!/bin/bash
# quickstart.sh - from a fresh Debian 12 machine to Kafka traffic through
# krelay, in one command:
#
#   1. installs the build and test dependencies (contrib/install-deps.sh);
#   2. builds krelay out of tree in ./build;
#   3. runs `krelay --demo` (krelay in front of an in-process 3-broker
#      librdkafka mock cluster) and sends real client traffic through it
#      with kcat: metadata, produce, consume;
#   4. shows what the client saw and krelay's log, then stops the demo.
#
# Environment: KRELAY_BUILD (default ./build), KRELAY_DEMO_PORT (bootstrap
# port, default 9092), KRELAY_DEMO_BROKER_BASE (default 19092: NodeId n
# listens on BASE+n), KRELAY_SKIP_DEPS=1 to skip step 1.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KRELAY_BUILD:-$SRC/build}
PORT=${KRELAY_DEMO_PORT:-9092}
BASE=${KRELAY_DEMO_BROKER_BASE:-19092}
TOPIC=demo

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [ "${KRELAY_SKIP_DEPS:-0}" != 1 ]; then
    say "Installing dependencies (apt-get, npm)"
    "$SRC/contrib/install-deps.sh"
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

# The demo's port must be free: a client would otherwise talk to whatever
# listens there (a real Kafka on a developer's machine) and "pass".
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    echo "FAILED: 127.0.0.1:$PORT is in use by another program; stop it," \
         "or choose another port: KRELAY_DEMO_PORT=9192 $0" >&2
    exit 1
fi

LOG=$(mktemp -t krelay-demo.XXXXXX.log)
say "Starting: $BUILD/krelay --demo --listen 127.0.0.1:$PORT --broker-port-base $BASE"
"$BUILD/krelay" --demo -v --listen "127.0.0.1:$PORT" \
    --broker-port-base "$BASE" >"$LOG" 2>&1 &
KRELAY_PID=$!
cleanup() {
    kill "$KRELAY_PID" 2>/dev/null || true
    wait "$KRELAY_PID" 2>/dev/null || true
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
   ! grep -q '\[c#[0-9]* 127\.0\.0\.1:' "$LOG"; then
    echo "FAILED: the messages did not go through this krelay (it exited" \
         "or accepted no client)" >&2
    exit 1
fi
say "OK: 5 messages produced and consumed through krelay."
echo "Run it yourself:  $BUILD/krelay --demo   (then: kcat -b 127.0.0.1:9092 -L)"
echo "Run every test:   make -C $BUILD check"
rm -f "$LOG"
