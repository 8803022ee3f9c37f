#!/bin/bash
# quickstart_text.sh - what contrib/quickstart.sh tells a user, without
# running it (it installs packages): its message functions, taken from
# the script as written, called here.
#   - skipped_without: every package `install-deps.sh --list tests` names
#     (and nodejs, npm, libnode-dev, added when node is missing) says what
#     `make check` skips without it; man-db names tests/install.sh;
#   - closing_hints: the commands name the port the demo ran on
#     (KRELAY_DEMO_PORT, KRELAY_DEMO_BROKER_BASE), 9092 only by default;
#   - npm_failed: says how to retry, and that KRELAY_SKIP_NPM=1 leaves npm
#     out.
# Exit 0 pass, 1 fail.
set -u

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
QS=$top_srcdir/contrib/quickstart.sh
DEPS=$top_srcdir/contrib/install-deps.sh
failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}
ok() {
    echo "ok: $*"
}

for fn in skipped_without npm_failed closing_hints; do
    def=$(sed -n "/^$fn() {\$/,/^}\$/p" "$QS")
    [ -n "$def" ] || { echo "FAIL: $QS has no function $fn"; exit 1; }
    eval "$def"
done

# every package of the tests set names what goes without it
pkgs=$("$DEPS" --list tests) || { echo "FAIL: $DEPS --list tests"; exit 1; }
[ -n "$pkgs" ] || { echo "FAIL: $DEPS --list tests printed nothing"; exit 1; }
for p in $pkgs nodejs npm libnode-dev; do
    what=$(skipped_without "$p")
    case $what in
    "" | "?" | "no test that we know of"*)
        fail "skipped_without $p: '$what': say what make check skips" ;;
    *) ok "$p: $what" ;;
    esac
done
case $(skipped_without man-db) in
*tests/install.sh*) ok "man-db names tests/install.sh" ;;
*) fail "man-db: $(skipped_without man-db)" ;;
esac

# the closing hints, with the default ports and with others
SRC=/src BUILD=/src/build
PORT=9092 BASE=19092
out=$(closing_hints)
printf '%s\n' "$out" | grep -q "^Run it yourself:  /src/build/krelay --demo   (then: kcat -b 127.0.0.1:9092 -L)$" &&
    ok "default ports: plain --demo" || fail "default ports: $out"
PORT=9192 BASE=19192
out=$(closing_hints)
printf '%s\n' "$out" | grep -q "^Run it yourself:  /src/build/krelay --demo --listen 127.0.0.1:9192 --broker-port-base 19192   (then: kcat -b 127.0.0.1:9192 -L)$" &&
    ok "KRELAY_DEMO_PORT=9192: its ports" || fail "port 9192: $out"
if printf '%s\n' "$out" | grep -q 9092; then
    fail "port 9192: the hints still name 9092: $out"
fi

# npm's failure: retry, and KRELAY_SKIP_NPM=1
out=$(npm_failed)
printf '%s\n' "$out" | grep -q "Retry: /src/contrib/install-deps.sh --npm" &&
    ok "npm_failed: retry" || fail "npm_failed, no retry: $out"
printf '%s\n' "$out" | grep -q "KRELAY_SKIP_NPM=1 " &&
    ok "npm_failed: KRELAY_SKIP_NPM=1" || fail "npm_failed, no KRELAY_SKIP_NPM=1: $out"

[ "$failed" -eq 0 ] || exit 1
echo "all checks passed"
