#!/bin/sh
# modgraph.sh - issue 11: no cycle between krelay's modules and the layer
# rules of tools/modgraph.rules hold (tools/modgraph.py over libkrcodec.a
# and libkrelay.a, which `make check` builds first).
#
# The checker is first run on a made-up tree of three modules compiled
# here, where it must find a cycle, a layer broken through a symbol and
# one broken through an include: a checker that sees nothing cannot pass.
# Exit codes: 0 pass, 1 fail, 77 skip (no python3), 99 hard error.

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${KRELAY_REQUIRE_ALL:=0}"
CC=${KRELAY_CC:-cc}

PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
    echo "modgraph: python3 not found" >&2
    [ "$KRELAY_REQUIRE_ALL" = 1 ] && exit 1
    exit 77
fi
MG="$PY $top_srcdir/tools/modgraph.py"
for lib in libkrcodec.a libkrelay.a; do
    if [ ! -f "$top_builddir/$lib" ]; then
        echo "modgraph: $top_builddir/$lib not built" >&2
        exit 99
    fi
done

W=$(mktemp -d "${TMPDIR:-/tmp}/krelay-modgraph.XXXXXX") || exit 99
trap 'rm -rf "$W"' EXIT
PASSES=0 FAILS=0
pass() { echo "PASS: $*"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

# ---- the checker on a made-up tree -----------------------------------------
# m_a -> m_b -> m_c and m_b -> libevent; m_b.h includes m_c.h.  Two m_c:
# acyclic/m_c.o uses nothing, m_c.o calls m_a_f (a cycle of three).
mkdir -p "$W/src" "$W/include" "$W/acyclic" || exit 99
cat >"$W/include/m_b.h" <<'H'
#include "m_c.h"
void m_b_f(void);
H
cat >"$W/include/m_c.h" <<'H'
void m_c_f(void);
H
cat >"$W/src/m_a.c" <<'C'
#include "m_b.h"
void m_a_f(void) { m_b_f(); }
C
cat >"$W/src/m_b.c" <<'C'
#include "m_b.h"
void *event_base_new(void);
void m_b_f(void) { (void)event_base_new(); m_c_f(); }
C
cat >"$W/src/m_c.c" <<'C'
#include "m_c.h"
void m_a_f(void);
void m_c_f(void) { m_a_f(); }
C
cat >"$W/acyclic.c" <<'C'
void m_c_f(void) { }
C
# m_b's object gets automake's per-target prefix, as libkrelay's do.
$CC -c -o "$W/m_a.o" "$W/src/m_a.c" -I"$W/include" &&
$CC -c -o "$W/libx_a-m_b.o" "$W/src/m_b.c" -I"$W/include" &&
$CC -c -o "$W/m_c.o" "$W/src/m_c.c" -I"$W/include" &&
$CC -c -o "$W/acyclic/m_c.o" "$W/acyclic.c" || exit 99

# $1 name, $2 expected exit code, $3 text the output must hold ("" none),
# $4 rules text, then modgraph.py's arguments.
expect() {
    name=$1 want=$2 text=$3
    printf '%s\n' "$4" >"$W/rules"
    shift 4
    $MG --rules "$W/rules" --srcdir "$W" "$@" >"$W/out" 2>&1
    rc=$?
    if [ "$rc" != "$want" ]; then
        fail "$name: exit $rc, want $want"
        sed 's/^/    /' "$W/out"
    elif [ -n "$text" ] && ! grep -qF -- "$text" "$W/out"; then
        fail "$name: no '$text' in"
        sed 's/^/    /' "$W/out"
    else
        pass "$name"
    fi
}
EXT='extern libevent ^event_'
ACYC="$W/m_a.o $W/libx_a-m_b.o $W/acyclic/m_c.o"
CYC="$W/m_a.o $W/libx_a-m_b.o $W/m_c.o"

expect "acyclic tree passes" 0 "0 failure(s)" "$EXT" $ACYC
expect "a cycle fails" 1 "FAIL: link cycle between m_a m_b m_c" "$EXT" $CYC
expect "a cycle names its symbols" 1 "m_c -> m_a (1): m_a_f" "$EXT" $CYC
expect "an allowed cycle warns" 0 "warning: link cycle between m_a m_b m_c" \
    "$EXT
allow-cycle m_a m_b m_c" $CYC
expect "a partly allowed cycle fails" 1 "FAIL: link cycle" \
    "$EXT
allow-cycle m_a m_b" $CYC
expect "a stale allow-cycle is named" 0 "no such cycle any more" \
    "$EXT
allow-cycle m_a m_c" $ACYC
expect "a layer broken through a module fails" 1 \
    "m_a must not depend on libevent: m_a -> m_b -> libevent" \
    "$EXT
deny m_a -> libevent" $ACYC
expect "a layer kept passes" 0 "0 failure(s)" "$EXT
deny m_c -> m_a libevent" $ACYC
expect "an include through a header fails" 1 \
    "src/m_a.c:1 includes m_b.h, include/m_b.h:1 includes m_c.h" \
    "deny-include m_a -> m_c.h" $ACYC
expect "a missing module is skipped" 0 "skipped for m_zz" \
    "deny m_zz -> m_a
deny-include m_zz -> m_c.h" $ACYC
expect "a missing module fails with --strict" 1 "skipped for m_zz" \
    "deny m_zz -> m_a" $ACYC --strict
expect "a bad rules line is an error" 2 "unknown rule" "forbid m_a" $ACYC
# m_c a part of m_a: the m_a <-> m_c calls are inside one module, and
# what m_c uses, m_a uses (m_a -> m_b -> m_a is still a cycle).
expect "parts of one module: their calls are no cycle" 0 "0 failure(s)" \
    "$EXT
module m_a m_c" $W/m_a.o $W/acyclic/m_c.o $W/m_c.o
expect "parts of one module: a cycle through another still fails" 1 \
    "FAIL: link cycle between m_a m_b" "$EXT
module m_a m_c" $CYC
# m_a.c -> m_b.h -> m_c.h -> m_a.h: a cycle of includes, no symbol needed
echo '#include "m_a.h"' >>"$W/include/m_c.h" && : >"$W/include/m_a.h" ||
    exit 99
expect "an include cycle fails" 1 \
    "FAIL: include cycle between m_a m_b m_c" "" $ACYC
expect "an include cycle names its lines" 1 \
    "m_c -> m_a: include/m_c.h:2" "" $ACYC

# ---- krelay's modules ------------------------------------------------------
$MG --strict --rules "$top_srcdir/tools/modgraph.rules" --srcdir "$top_srcdir" \
    "$top_builddir/libkrcodec.a" "$top_builddir/libkrelay.a"
case $? in
    0) pass "krelay's modules: no cycle, layers kept" ;;
    1) fail "krelay's modules (see above; tools/modgraph.rules)" ;;
    *) exit 99 ;;
esac

echo "modgraph: $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
