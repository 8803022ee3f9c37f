#!/bin/bash
# install.sh - `make install DESTDIR=...` (issue 14), checked as a new
# user would meet it:
#   - each file where it belongs, none elsewhere; no @dir@ left unwritten;
#     krelay(8) and krelay.ini(5) name the configuration and
#     doc/audit.md where this installation put them; README.md's relative
#     links lead to installed files;
#   - every man page renders without a warning (man --warnings, groff -ww);
#   - the installed sample krelay.ini and examples pass `krelay -t`, also
#     as nobody (setpriv) when run as root;
#   - the unit: its ExecStartPre command line, parsed from the installed
#     unit with the paths under DESTDIR, passes as nobody; ExecStart runs
#     the same; DynamicUser, LogsDirectory, StateDirectory; each
#     Documentation= page or file is installed; `systemd-analyze verify`
#     accepts it (when systemd-analyze exists: systemd need not run);
#   - a second `make install` keeps a changed krelay.ini, `make uninstall`
#     keeps it too and removes everything else, and the sample as shipped
#     is removed.
# The directories come from the Makefile (AM_TESTS_ENVIRONMENT).
# Exit codes: 0 pass, 1 fail, 77 skip, 99 hard error.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
set -o pipefail

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${KRELAY_REQUIRE_ALL:=0}"
for v in KR_MAKE kr_bindir kr_sysconfdir kr_docdir kr_mandir; do
    if [ -z "${!v:-}" ]; then
        echo "install.sh: $v not set: run through make check" >&2
        exit 99
    fi
done
: "${kr_unitdir:=}"                     # empty: the unit is not installed
: "${kr_bin_programs:=krelay krelay-codec krelay-passwd}"
: "${kr_pkglibexec_programs=}"          # krelay-demo-cluster, with librdkafka
: "${kr_pkglibexecdir:=}"

FAILS=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
die() { echo "FAIL: $*"; exit 1; }
missing() {
    if [ "$KRELAY_REQUIRE_ALL" = 1 ]; then
        die "missing dependency: $*"
    fi
    echo "SKIP: missing dependency: $*"
    exit 77
}
command -v man >/dev/null 2>&1 || missing "man (package man-db)"

# Under /tmp, readable by everyone: nobody must reach the installed files.
umask 022
WORK=$(mktemp -d "${TMPDIR:-/tmp}/krelay-install.XXXXXX") || exit 99
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
D=$WORK/root

mk() {
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $KR_MAKE -C "$top_builddir" \
        "$@" DESTDIR="$D" >"$WORK/make.log" 2>&1 ||
        { cat "$WORK/make.log"; die "make $* DESTDIR=... failed"; }
}

AS_NOBODY=()
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null 2>&1 || missing "setpriv (util-linux)"
    AS_NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
else
    echo "install.sh: not root: every check runs as $(id -un)"
fi

# ---- files -----------------------------------------------------------------
mk install
CONF=$D$kr_sysconfdir/krelay/krelay.ini
UNIT=${kr_unitdir:+$D$kr_unitdir/krelay.service}
want=()
for p in $kr_bin_programs; do
    want+=("$D$kr_bindir/$p")
done
for p in $kr_pkglibexec_programs; do
    want+=("$D$kr_pkglibexecdir/$p")
done
want+=("$CONF" "$D$kr_docdir/krelay.ini"
       "$D$kr_mandir/man1/krelay-codec.1" "$D$kr_mandir/man1/krelay-passwd.1"
       "$D$kr_mandir/man5/krelay.ini.5"
       "$D$kr_mandir/man8/krelay.8")
# doc/audit.md where README.md's link finds it
for f in README.md ChangeLog HACKING.md LICENSE NOTICE doc/audit.md; do
    want+=("$D$kr_docdir/$f")
done
for f in "$top_srcdir"/conf/examples/*.ini; do
    want+=("$D$kr_docdir/examples/$(basename "$f")")
done
[ -n "$UNIT" ] && want+=("$UNIT")
printf '%s\n' "${want[@]}" | sort >"$WORK/want"
find "$D" -type f -o -type l | sort >"$WORK/got"
if cmp -s "$WORK/want" "$WORK/got"; then
    pass "make install: the ${#want[@]} files expected, where expected"
else
    fail "make install: files differ (- expected, + installed):"
    diff "$WORK/want" "$WORK/got" | grep '^[<>]' | sed 's/^</  -/; s/^>/  +/'
fi
for p in $kr_bin_programs; do
    [ -x "$D$kr_bindir/$p" ] || fail "$kr_bindir/$p is not executable"
done
for p in $kr_pkglibexec_programs; do
    [ -x "$D$kr_pkglibexecdir/$p" ] ||
        fail "$kr_pkglibexecdir/$p is not executable"
done
cmp -s "$top_srcdir/conf/krelay.ini" "$CONF" &&
    pass "the sample krelay.ini in $kr_sysconfdir/krelay" ||
    fail "$CONF is not conf/krelay.ini"
for f in "$top_srcdir"/conf/examples/*.ini; do
    cmp -s "$f" "$D$kr_docdir/examples/$(basename "$f")" ||
        fail "examples/$(basename "$f") differs from the source"
done
grep -l '@[a-z_]*dir@\|@PACKAGE_VERSION@' "$D$kr_mandir/man8/krelay.8" \
    "$D$kr_mandir/man5/krelay.ini.5" ${UNIT:+"$UNIT"} &&
    fail "a @...@ left unwritten in the files above"
# the pages name the files where this installation put them
for page in man8/krelay.8 man5/krelay.ini.5; do
    for f in "$kr_sysconfdir/krelay/krelay.ini" "$kr_docdir/doc/audit.md"; do
        [ -f "$D$f" ] || fail "$f is not installed"
        MANWIDTH=200 man -l "$D$kr_mandir/$page" 2>/dev/null | grep -qF "$f" ||
            fail "$page does not name $f"
    done
done
# README.md's relative links lead to installed files
for l in $(grep -o '](\([^)#:]*\))' "$D$kr_docdir/README.md" |
           sed 's/^](//; s/)$//'); do
    [ -f "$D$kr_docdir/$l" ] || fail "README.md links $l: not installed"
done

# ---- man pages ---------------------------------------------------------------
for page in "$D$kr_mandir"/man*/*; do
    name=${page#"$D$kr_mandir"/}
    MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l "$page" \
        >"$WORK/page.txt" 2>"$WORK/page.err"
    rc=$?
    if [ $rc -ne 0 ] || [ -s "$WORK/page.err" ]; then
        fail "man -l $name: exit $rc: $(head -5 "$WORK/page.err")"
    elif ! grep -q '^NAME' "$WORK/page.txt" ||
         [ "$(wc -l <"$WORK/page.txt")" -lt 20 ]; then
        fail "man -l $name: no NAME section, or too short"
    else
        pass "man -l $name renders without a warning"
    fi
    if command -v groff >/dev/null 2>&1; then
        groff -man -ww -z -Tutf8 "$page" 2>"$WORK/groff.err"
        [ -s "$WORK/groff.err" ] &&
            fail "groff -ww $name: $(head -5 "$WORK/groff.err")"
    fi
done
# every key of the table has its entry in krelay.ini(5)
if [ -x "$top_builddir/tools/krconfkeys" ]; then
    MANWIDTH=200 man -l "$D$kr_mandir/man5/krelay.ini.5" 2>/dev/null \
        >"$WORK/ini5.txt"
    n=0
    while IFS=$'\t' read -r _ name _; do
        [ "$name" = dial. ] && name=dial.NODEID
        grep -q "^ *$name\( \|$\)" "$WORK/ini5.txt" ||
            fail "krelay.ini(5) has no entry for $name"
        n=$((n + 1))
    done < <("$top_builddir/tools/krconfkeys" | tail -n +2)
    pass "krelay.ini(5) has an entry for each of the $n keys"
fi

# ---- krelay -t on what was installed ------------------------------------------
# (an example with TLS names its files under /etc/krelay/tls/: they are
# made here, tests/tools/tls_certs.sh, and the copy checked names them)
KRELAY=$D$kr_bindir/krelay
TLSDIR=
for c in "$CONF" "$D$kr_docdir"/examples/*.ini; do
    if grep -q '^ssl_[a-z_]* = /etc/krelay/tls/' "$c"; then
        if [ -z "$TLSDIR" ]; then
            command -v openssl >/dev/null 2>&1 || missing "openssl"
            TLSDIR=$WORK/tls
            bash "$top_srcdir/tests/tools/tls_certs.sh" --examples \
                "$TLSDIR" || die "tls_certs.sh failed"
        fi
        sed "/^ssl_[a-z_]* = /s|/etc/krelay/tls/|$TLSDIR/|" "$c" \
            >"$WORK/$(basename "$c")" || die "cannot copy $c"
        c=$WORK/$(basename "$c")
    fi
    "$KRELAY" -t -c "$c" >"$WORK/t.out" 2>&1 &&
        grep -q 'configuration OK' "$WORK/t.out" ||
        fail "krelay -t -c ${c#"$D"}: $(cat "$WORK/t.out")"
    if [ "${#AS_NOBODY[@]}" -gt 0 ]; then
        "${AS_NOBODY[@]}" "$KRELAY" -t -c "$c" >"$WORK/t.out" 2>&1 &&
            grep -q 'configuration OK' "$WORK/t.out" ||
            fail "as nobody: krelay -t -c ${c#"$D"}: $(cat "$WORK/t.out")"
    fi
done
pass "installed krelay -t: the sample and the examples${AS_NOBODY:+, also as nobody}"

# ---- the systemd unit -----------------------------------------------------------
# A unit line's command, its absolute paths moved under DESTDIR when they
# are installed there (systemd's prefixes -@:+! dropped).
exec_line() {
    local key=$1 line w out=()
    line=$(sed -n "s/^$key=//p" "$UNIT")
    [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] ||
        { echo "one $key= line expected in the unit" >&2; return 1; }
    line=${line#[-@:+!]}
    case $line in *[\"\'\\]*)
        echo "$key=: quoting or escapes this test cannot parse" >&2
        return 1 ;;
    esac
    for w in $line; do
        if [ "${w:0:1}" = / ] && [ -e "$D$w" ]; then w=$D$w; fi
        out+=("$w")
    done
    printf '%s\n' "${out[@]}"
}
if [ -z "$UNIT" ]; then
    echo "install.sh: configured --without-systemdsystemunitdir: no unit"
else
    mapfile -t pre < <(exec_line ExecStartPre) && [ "${#pre[@]}" -gt 0 ] ||
        die "the unit's ExecStartPre cannot be read"
    mapfile -t start < <(exec_line ExecStart)
    [ "${pre[0]}" = "$KRELAY" ] ||
        fail "ExecStartPre runs ${pre[0]#"$D"}, not $kr_bindir/krelay"
    printf '%s\n' "${pre[@]}" | grep -qx -- -t ||
        fail "ExecStartPre does not run krelay -t"
    [ "$(printf '%s\n' "${pre[@]}" | grep -vx -- -t)" = \
      "$(printf '%s\n' "${start[@]}")" ] ||
        fail "ExecStart is not ExecStartPre without -t: ${start[*]}"
    "${AS_NOBODY[@]}" "${pre[@]}" >"$WORK/pre.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'configuration OK' "$WORK/pre.out"; then
        pass "ExecStartPre (${pre[*]#"$D"}) passes${AS_NOBODY:+ as nobody}"
    else
        fail "ExecStartPre${AS_NOBODY:+ as nobody}: exit $rc: $(cat "$WORK/pre.out")"
    fi
    for kv in DynamicUser=yes LogsDirectory=krelay StateDirectory=krelay \
              'ExecReload=/bin/kill -HUP $MAINPID'; do
        grep -qxF "$kv" "$UNIT" || fail "the unit has no line $kv"
    done
    docs=$(sed -n 's/^Documentation=//p' "$UNIT")
    [ -n "$docs" ] || fail "the unit has no Documentation="
    for d in $docs; do
        case $d in
        man:*\(*\))
            n=${d#man:}; s=${n#*\(}; s=${s%\)}; n=${n%%\(*}
            f=$D$kr_mandir/man$s/$n.$s ;;
        file:/*) f=$D${d#file:} ;;
        *) f=; fail "Documentation=$d: neither man: nor file:" ;;
        esac
        [ -z "$f" ] || [ -f "$f" ] ||
            fail "Documentation=$d: not installed (${f#"$D"})"
    done
    pass "the unit: DynamicUser, directories, reload, Documentation ($docs)"
    if command -v systemd-analyze >/dev/null 2>&1; then
        # a copy with the installed paths under DESTDIR, the man pages
        # found there: verify checks that Exec programs and man: pages exist
        mkdir -p "$WORK/verify"
        while IFS= read -r l; do
            case $l in
            Exec*=*)
                k=${l%%=*}
                printf '%s=%s\n' "$k" "$(exec_line "$k" | tr '\n' ' ' |
                                         sed 's/ $//')" ;;
            *) printf '%s\n' "$l" ;;
            esac
        done <"$UNIT" >"$WORK/verify/krelay.service"
        # anything said is a finding ("..., ignoring" keeps exit 0)
        if MANPATH=$D$kr_mandir \
            systemd-analyze verify "$WORK/verify/krelay.service" \
            >"$WORK/verify.out" 2>&1 && [ ! -s "$WORK/verify.out" ]; then
            pass "systemd-analyze verify accepts the unit, silently"
        else
            fail "systemd-analyze verify: $(cat "$WORK/verify.out")"
        fi
    else
        echo "install.sh: no systemd-analyze: the unit is not verified"
    fi
fi

# ---- a second install, uninstall ---------------------------------------------
echo "; changed here" >>"$CONF"
mk install
if tail -1 "$CONF" | grep -qx '; changed here' &&
   grep -q "keeping $CONF" "$WORK/make.log"; then
    pass "a second make install keeps a changed krelay.ini (and says so)"
else
    fail "a second make install replaced the changed krelay.ini"
fi
mk uninstall
left=$(find "$D" -type f -o -type l)
if [ "$left" = "$CONF" ] && grep -q "keeping $CONF" "$WORK/make.log"; then
    pass "make uninstall removes all but the changed krelay.ini"
else
    fail "make uninstall left: ${left:-nothing} (want the changed $CONF)"
fi
cp "$top_srcdir/conf/krelay.ini" "$CONF"
mk uninstall
left=$(find "$D" -type f -o -type l)
[ -z "$left" ] && pass "make uninstall removes the sample as shipped" ||
    fail "make uninstall left: $left"

echo "install.sh: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
