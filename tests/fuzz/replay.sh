#!/bin/sh
# replay.sh - run every fuzz target's replay driver (tests/fuzz/replay.c)
# over its committed seed corpus, tests/fuzz/corpus/<target>/.  A broken
# invariant or a sanitizer report fails the test.
: "${top_srcdir:=.}" "${top_builddir:=.}"
rc=0
for t in request response json conf frame; do
    "$top_builddir/tests/fuzz/replay_$t" "$top_srcdir/tests/fuzz/corpus/$t" \
        || { echo "replay.sh: $t FAILED" >&2; rc=1; }
done
exit $rc
