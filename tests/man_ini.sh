#!/bin/bash
# man_ini.sh - man/krelay.ini.5.in (make writes the installation's
# directories into it: man/krelay.ini.5) is what tools/krmanini.py writes
# from the
# key table (tools/krconfkeys: every key's type, unit, range, default and
# reload attribute, as src/kr_conf.c has them) and its template: a key
# added or changed without `make regen-man` fails here.  Also: every key
# of the table is documented in conf/krelay.ini.
# Exit codes: 0 pass, 1 fail, 77 skip (no python3), 99 hard error.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
set -o pipefail

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${KRELAY_REQUIRE_ALL:=0}"

KEYS=$top_builddir/tools/krconfkeys
PAGE=$top_srcdir/man/krelay.ini.5.in
fail() { echo "FAIL: $*"; exit 1; }

[ -x "$KEYS" ] || { echo "man_ini: $KEYS not built" >&2; exit 99; }
PY=$(command -v python3) || {
    echo "man_ini: python3 not found" >&2
    [ "$KRELAY_REQUIRE_ALL" = 1 ] && exit 1
    exit 77
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/krelay-man-ini.XXXXXX") || exit 99
trap 'rm -rf "$WORK"' EXIT

"$KEYS" >"$WORK/keys.tsv" || fail "krconfkeys failed"
"$PY" "$top_srcdir/tools/krmanini.py" --keys "$WORK/keys.tsv" \
    --template "$top_srcdir/man/krelay.ini.5.tmpl" \
    --out "$WORK/krelay.ini.5" || fail "krmanini.py failed"
if ! cmp -s "$WORK/krelay.ini.5" "$PAGE"; then
    diff -u "$PAGE" "$WORK/krelay.ini.5" | head -40
    fail "man/krelay.ini.5.in is not what the key table gives: run" \
        "\`make regen-man\` and commit the page"
fi
nkeys=$(($(wc -l <"$WORK/keys.tsv") - 1))
[ "$nkeys" -ge 40 ] || fail "only $nkeys keys in the table?"
echo "PASS: man/krelay.ini.5.in matches the key table ($nkeys keys)"

missing=0
while IFS=$'\t' read -r sect name _; do
    if [ "$name" = dial. ]; then pat='dial\.[0-9]+'; else pat=$name; fi
    if ! grep -Eq "^;? ?$pat = " "$top_srcdir/conf/krelay.ini"; then
        echo "FAIL: [$sect] $name: not in conf/krelay.ini"
        missing=$((missing + 1))
    fi
done < <(tail -n +2 "$WORK/keys.tsv")
[ "$missing" -eq 0 ] || exit 1
echo "PASS: every key is in conf/krelay.ini"
