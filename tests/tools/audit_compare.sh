#!/bin/bash
# audit_compare.sh - does a change alter krelay's audit log?  Runs the
# integration tests that write an audit file against two builds (or a
# build and a stored baseline), normalises every file with
# audit_normalise.py and diffs the two sides (HACKING.md, "Refactoring
# without behaviour change").
#
#   tests/tools/audit_compare.sh [-s SRCDIR] [-t 'TEST...'] [-w WORK] A B
#       compare; A and B are each a build directory or a baseline
#   tests/tools/audit_compare.sh [-s SRCDIR] [-t 'TEST...'] -o BASE A
#       run the tests against build A and store its raw audit files in
#       BASE (a baseline for a later comparison)
#
# A build directory is a configured (--with-rdkafka) and built tree: the
# tests need krelay, krelay-codec and tests/mock/krmock (`make check`
# builds the last; or `make tests/mock/krmock`).  Its tests run from its
# own source tree (abs_top_srcdir in its Makefile), or from SRCDIR with
# -s for both sides: the same test scripts against two binaries.  That
# tree's tests/integration/lib.sh must know KR_AUDIT_KEEP (this commit
# and later).  A baseline is a directory that -o wrote: the raw audit
# files, results.txt (each test's exit status) and about.txt.
#
# The tests: -t, or every tests/integration/*.sh with an [audit] section
# at the start of a line in the source tree.  They run one after another
# (about 30 s per side), each with KR_AUDIT_KEEP, so each audit file lands
# as <test>.<file>.jsonl (lib.sh).  norm_opts below says which tests
# need audit_normalise.py's relaxations, and why.
#
# Output: each test's exit status per side, then `diff -u` of the
# normalised files (a file only one side has shows in full).  The work
# directory (WORK, or a temporary one) holds raw/, norm/ and logs/ for
# each side; a temporary one is removed when everything matched.
#
# Exit status: 0 the normalised audit files are identical and no test
# failed; 1 they differ or a test failed (exit status not 0 or 77); 2
# usage or harness error.

set -u
set -o pipefail

ME=audit_compare.sh
TOOLS=$(cd "$(dirname "$0")" && pwd)
NORMALISE=$TOOLS/audit_normalise.py

TMPWORK=                        # a temporary directory of ours

die() {
    echo "$ME: $*" >&2
    [ -z "$TMPWORK" ] || rm -rf "$TMPWORK"
    exit 2
}

usage() {
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

# norm_opts TEST: audit_normalise.py's options for TEST's files.  Every
# other test's audit output was identical (after the normaliser's fixed
# rules) in 8 runs at 665136f.
norm_opts() {
    case $1 in
    rules_reload)
        # librdkafka produces without pause while krelay reloads: how
        # many Produce requests, and how many records each carries
        # (linger.ms), is the client's timing
        echo --collapse-runs --drop-record-sizes ;;
    rules_failopen)
        # kcat produces in 20 bursts 0.1 s apart with linger.ms=5 to
        # random partitions, then consumes: the number of Produce batches
        # per broker and of Fetches, and their sizes, are timing
        echo --collapse-runs --drop-record-sizes ;;
    tls_principal)
        # kcat producers: whether librdkafka asks for Metadata once or
        # twice on the bootstrap connection (the close line's requests
        # and bytes), and how its 5 messages are cut into batches, are
        # its timing (only Produce is audited)
        echo --collapse-runs --drop-record-sizes ;;
    esac
}

# srcdir_of BUILD: the source tree BUILD was configured from.
srcdir_of() {
    sed -n 's/^abs_top_srcdir = //p' "$1/Makefile" | head -n 1
}

is_build() {
    [ -f "$1/Makefile" ] && [ -x "$1/krelay" ]
}

is_baseline() {
    [ -f "$1/results.txt" ]
}

# audit_tests SRC: the tests to run (-t, or those with an [audit] sink).
audit_tests() {
    local f
    if [ -n "$TESTS" ]; then
        echo "$TESTS"
        return
    fi
    for f in "$1"/tests/integration/*.sh; do
        grep -q '^\[audit\]' "$f" && basename "$f" .sh
    done | tr '\n' ' '
}

# collect SIDE OUT: OUT/raw/*.jsonl and OUT/results.txt for SIDE (a build:
# run the tests; a baseline: copy it).
collect() {
    local side=$1 out=$2 src t rc
    mkdir -p "$out/raw" "$out/logs" || exit 2
    if is_baseline "$side"; then
        if [ -n "$TESTS" ]; then        # only what -t asked for
            for t in $TESTS; do
                cp "$side/$t".*.jsonl "$out/raw/" 2>/dev/null
                grep "^$t " "$side/results.txt" >>"$out/results.txt"
            done
        else
            cp "$side"/*.jsonl "$out/raw/" 2>/dev/null
            cp "$side/results.txt" "$out/results.txt" || exit 2
        fi
        echo "$ME: $side: baseline ($(head -n 1 "$side/about.txt" 2>/dev/null))"
        return
    fi
    is_build "$side" || die "$side: neither a build directory nor a baseline"
    src=${SRCDIR:-$(srcdir_of "$side")}
    if ! src=$(cd "$src" 2>/dev/null && pwd) ||
       [ ! -f "$src/tests/integration/lib.sh" ]; then
        die "$side: no source tree (${src:-no abs_top_srcdir in its Makefile})"
    fi
    grep -q KR_AUDIT_KEEP "$src/tests/integration/lib.sh" ||
        die "$src/tests/integration/lib.sh does not know KR_AUDIT_KEEP" \
            "(use -s with a tree that does)"
    [ -x "$side/tests/mock/krmock" ] ||
        die "$side: no tests/mock/krmock (make -C $side tests/mock/krmock)"
    : >"$out/results.txt"
    for t in $(audit_tests "$src"); do
        [ -f "$src/tests/integration/$t.sh" ] || die "$src: no test $t"
        (cd "$side" &&
         env top_srcdir="$src" top_builddir="$side" \
             KRELAY_SHARED="$src/../shared" KRELAY_TEST_DIRECT=0 \
             KR_AUDIT_KEEP="$out/raw" \
             bash "$src/tests/integration/$t.sh") >"$out/logs/$t.log" 2>&1
        rc=$?
        echo "$t $rc" >>"$out/results.txt"
        echo "$ME: $side: $t: exit $rc"
    done
    echo "$src $(git -C "$src" describe --always --dirty 2>/dev/null)" \
        >"$out/about.txt"
}

# normalise OUT: OUT/norm/<file> for each OUT/raw/<file>.
normalise() {
    local out=$1 f b
    mkdir -p "$out/norm" || exit 2
    for f in "$out"/raw/*.jsonl; do
        [ -f "$f" ] || continue
        b=$(basename "$f")
        # shellcheck disable=SC2046  # the options are words
        python3 "$NORMALISE" $(norm_opts "${b%%.*}") "$f" >"$out/norm/$b" ||
            echo "$ME: $f: audit_normalise.py failed" | tee -a "$out/norm/$b"
    done
}

# failed OUT: the tests that failed (not 0, not 77) on that side.
failed() {
    awk '$2 != 0 && $2 != 77 { printf "%s(exit %s) ", $1, $2 }' "$1/results.txt"
}

SRCDIR=
TESTS=
WORK=
SAVE=
while getopts 's:t:w:o:h' opt; do
    case $opt in
    s) SRCDIR=$(cd "$OPTARG" && pwd) || die "-s $OPTARG: no such directory" ;;
    t) TESTS=$OPTARG ;;
    w) WORK=$OPTARG ;;
    o) SAVE=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
command -v python3 >/dev/null || die "python3 not found"

# count FILE...: how many of the (globbed) names exist.
count() {
    local n=0 f
    for f in "$@"; do
        [ -e "$f" ] && n=$((n + 1))
    done
    echo "$n"
}

abs() {
    (cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
}

if [ -n "$SAVE" ]; then
    [ $# -eq 1 ] || usage
    A=$(abs "$1") || exit 2
    is_build "$A" || die "$A: not a build directory"
    mkdir -p "$SAVE" || die "cannot create $SAVE"
    [ -z "$(ls -A "$SAVE")" ] || die "$SAVE is not empty"
    TMPWORK=$(mktemp -d) || exit 2
    collect "$A" "$TMPWORK"
    cp "$TMPWORK"/raw/*.jsonl "$TMPWORK/results.txt" "$TMPWORK/about.txt" \
        "$SAVE/" || die "cannot write $SAVE"
    rm -rf "$TMPWORK"
    echo "$ME: baseline of $A in $SAVE: $(count "$SAVE"/*.jsonl) files"
    bad=$(failed "$SAVE")
    [ -z "$bad" ] || { echo "$ME: failed tests: $bad"; exit 1; }
    exit 0
fi

[ $# -eq 2 ] || usage
A=$(abs "$1") || exit 2
B=$(abs "$2") || exit 2
keep=1
if [ -z "$WORK" ]; then
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/audit_compare.XXXXXX") || exit 2
    TMPWORK=$WORK
    keep=0
fi
mkdir -p "$WORK" || die "cannot create $WORK"
WORK=$(abs "$WORK") || exit 2
rm -rf "$WORK/a" "$WORK/b"
collect "$A" "$WORK/a"
collect "$B" "$WORK/b"
normalise "$WORK/a"
normalise "$WORK/b"

rc=0
for s in a b; do
    bad=$(failed "$WORK/$s")
    if [ -n "$bad" ]; then
        echo "$ME: side $s: failed tests: $bad"
        [ "$(count "$WORK/$s"/logs/*)" -eq 0 ] ||
            echo "$ME: (their output: $WORK/$s/logs)"
        rc=1
    fi
done
if (cd "$WORK" && diff -ruN a/norm b/norm) >"$WORK/audit.diff"; then
    echo "$ME: identical: $(count "$WORK"/a/norm/*) audit files," \
        "$(cat "$WORK"/a/norm/* | wc -l) normalised lines"
else
    cat "$WORK/audit.diff"
    echo "$ME: the audit logs DIFFER (above; $WORK/audit.diff; word by" \
        "word: git diff --no-index --word-diff $WORK/a/norm $WORK/b/norm)"
    rc=1
fi
if [ "$rc" -eq 0 ] && [ "$keep" -eq 0 ]; then
    rm -rf "$WORK"
else
    echo "$ME: work directory: $WORK"
fi
exit "$rc"
