#!/bin/sh
# principal_jdk.sh - tests/data/principal/x500.txt and mapping.txt hold
# what the JDK says: X500Principal.getName() of certificate subjects, and
# Kafka's principal mapping rules run by java.util.regex.  This compiles
# tests/tools/X500Names.java and MappingRules.java, asks the JDK again
# (certificates made with the openssl CLI in a temporary directory, keys
# included, all removed at the end) and fails on any difference, printing
# it (a JDK or OpenSSL of another version may differ: regenerate and look
# at the diff).  check_principal tests krelay against the same tables.
#
#   tests/principal_jdk.sh            compare (make check-long)
#   tests/principal_jdk.sh --write    rewrite the tables (from a source
#                                     tree; review and commit the diff)
#
# Needs javac and java (JDK 11+), python3 and openssl; without them it
# skips (exit 77), or fails under KRELAY_REQUIRE_ALL=1.  A few seconds.
# Exit 0 pass, 1 fail, 77 skip.
set -u

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${KRELAY_REQUIRE_ALL:=0}"
PY=/usr/bin/python3
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
mode=--check
if [ "${1:-}" = --write ]; then
    mode=
fi

skip() {
    if [ "$KRELAY_REQUIRE_ALL" = 1 ]; then
        echo "FAIL (KRELAY_REQUIRE_ALL=1): missing dependency: $*"
        exit 1
    fi
    echo "SKIP: missing dependency: $*"
    exit 77
}

command -v javac >/dev/null 2>&1 || skip "javac (a JDK)"
command -v java >/dev/null 2>&1 || skip "java (a JDK)"
command -v openssl >/dev/null 2>&1 || skip "openssl"
[ -x "$PY" ] || skip "$PY"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/principal_jdk.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

tools=$top_srcdir/tests/tools
data=$top_srcdir/tests/data/principal
javac -d "$tmp" "$tools/X500Names.java" "$tools/MappingRules.java" ||
    { echo "FAIL: javac"; exit 1; }

rc=0
"$PY" "$tools/x500_table.py" --java-classes "$tmp" $mode "$data/x500.txt" ||
    { echo "FAIL: x500.txt is not what the JDK says (diff above)"; rc=1; }
"$PY" "$tools/mapping_table.py" --java-classes "$tmp" $mode \
    "$data/mapping.txt" ||
    { echo "FAIL: mapping.txt is not what the JDK says (diff above)"; rc=1; }
[ $rc = 0 ] && echo "PASS: the principal tables are the JDK's (${mode:-written})"
exit $rc
