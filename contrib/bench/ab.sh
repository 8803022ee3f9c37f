#!/bin/bash
# ab.sh - build two revisions of krelay and benchmark them side by side
# (issue 11: a refactoring step must show no change in CPU per GiB and
# latency p99 against its parent).
#
#   contrib/bench/ab.sh [--builddir DIR] [--keep] REV_A REV_B [RUN.SH OPTIONS]
#
#   REV_A           the baseline (e.g. the parent commit, HEAD~1)
#   REV_B           the candidate (e.g. HEAD)
#                   Each is a git revision of this repository, built from
#                   `git archive` in a temporary directory (autogen.sh,
#                   configure $KRELAY_AB_CONFIGURE, make krelay), or the
#                   path of a krelay binary already built (used as it is).
#                   The same revision twice gives two separate builds (an
#                   A/A run: how much the harness itself moves).
#   --builddir DIR  the build directory of this checkout whose harness
#                   runs (run.sh, report.py, krbench): default
#                   $top_builddir, else the current directory when it has
#                   a Makefile, else ./build beside this script's ../..;
#                   `make bench-programs` is run there first
#   --keep          keep the temporary directory (the binaries and the
#                   build logs) and print its path
#   RUN.SH OPTIONS  passed on to contrib/bench/run.sh after
#                   --ab A B --label-a ... --label-b ..., e.g. --reps 7,
#                   --out FILE, --note TEXT, --workloads latency
#
# Environment:
#   KRELAY_AB_CONFIGURE   configure arguments for both builds (default:
#                         none: -O2 -g, as a plain build)
#   KRELAY_AB_JOBS        make -j for the builds (default 2)
#   TMPDIR                where the temporary directory goes (/tmp)
#
# Both revisions are built one after the other in the same directory
# path, with the same configure arguments, and only the binaries are
# kept: two builds of one commit come out identical (the JSON's
# meta.krelay_a_sha256 / krelay_b_sha256 say so).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
JOBS=${KRELAY_AB_JOBS:-2}
BUILDDIR=
KEEP=0

log() {
    printf '%s [ab] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

usage() {
    awk 'NR == 1 { next } /^#/ { print; next } { exit }' "$0"
}

while [ $# -gt 0 ]; do
    case $1 in
    --builddir) BUILDDIR=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "ab.sh: unknown option $1 (run.sh's go after REV_A REV_B)" >&2
        exit 2 ;;
    *) break ;;
    esac
done
[ $# -ge 2 ] || { usage >&2; exit 2; }
REV_A=$1
REV_B=$2
shift 2

if [ -z "$BUILDDIR" ]; then
    if [ -n "${top_builddir:-}" ]; then
        BUILDDIR=$top_builddir
    elif [ -f Makefile ] && grep -q '^bench-programs:' Makefile; then
        BUILDDIR=$(pwd)
    else
        BUILDDIR=$SRC/build
    fi
fi
[ -f "$BUILDDIR/Makefile" ] ||
    die "no configured build in $BUILDDIR (see HACKING.md; or --builddir)"
BUILDDIR=$(cd "$BUILDDIR" && pwd)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/krelay-ab.XXXXXX") || exit 1
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ "$KEEP" = 1 ]; then
        log "kept $TMP"
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# build NAME REV: $TMP/NAME/krelay from REV; LABEL gets what to call it.
# Every build happens in $TMP/tree (the same path each time), then only
# the binary and the logs are kept.
LABEL=
build() {
    local name=$1 rev=$2 sha subject out=$TMP/$1
    mkdir -p "$out"
    if [ -f "$rev" ] && [ -x "$rev" ]; then
        cp "$rev" "$out/krelay"
        LABEL="$rev (a binary)"
        log "$name: the binary $rev"
        return 0
    fi
    sha=$(git -C "$SRC" rev-parse --verify --quiet "$rev^{commit}") ||
        die "$name: $rev is neither a git revision nor a krelay binary"
    subject=$(git -C "$SRC" log -1 --format=%s "$sha")
    LABEL="$rev = ${sha:0:12} $subject"
    log "$name: building $rev (${sha:0:12} $subject)"
    rm -rf "$TMP/tree"
    mkdir -p "$TMP/tree/src" "$TMP/tree/build"
    git -C "$SRC" archive --format=tar "$sha" | tar -x -C "$TMP/tree/src" ||
        die "$name: git archive $sha failed"
    # shellcheck disable=SC2086
    if ! { (cd "$TMP/tree/src" && ./autogen.sh) &&
           (cd "$TMP/tree/build" &&
            ../src/configure ${KRELAY_AB_CONFIGURE:-} &&
            make -j"$JOBS" krelay); } >"$out/build.log" 2>&1; then
        tail -n 20 "$out/build.log" >&2
        KEEP=1
        die "$name: the build of $rev failed (log: $out/build.log)"
    fi
    cp "$TMP/tree/build/krelay" "$out/krelay"
    rm -rf "$TMP/tree"
}

build a "$REV_A"
LABEL_A=$LABEL
build b "$REV_B"
LABEL_B=$LABEL
if cmp -s "$TMP/a/krelay" "$TMP/b/krelay"; then
    log "A and B are identical binaries (an A/A run)"
fi

log "harness: $SRC with the build $BUILDDIR"
make -C "$BUILDDIR" -j"$JOBS" bench-programs >"$TMP/harness.log" 2>&1 || {
    tail -n 20 "$TMP/harness.log" >&2
    die "make bench-programs failed in $BUILDDIR"
}
top_srcdir=$SRC top_builddir=$BUILDDIR \
    bash "$SRC/contrib/bench/run.sh" --ab "$TMP/a/krelay" "$TMP/b/krelay" \
    --label-a "$LABEL_A" --label-b "$LABEL_B" "$@"
