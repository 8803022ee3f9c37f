#!/bin/bash
# readme_dist.sh - every file README.md names in its code (``` blocks and
# `code` spans: contrib/..., conf/..., tests/data/..., man/..., src/...)
# is in the distribution `make dist` builds, so a user of the tarball can
# run what the README says (contrib/quickstart.sh was missing once).  The
# distribution's files come from `make list-distfiles` (Makefile.am: the
# DISTFILES automake copies; a directory there stands for what is under
# it); a path with * matches as a glob.  Exit 0 pass, 1 fail, 77 skip.
set -u

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir/build}"
PY=$(command -v python3 || true)
[ -n "$PY" ] || { echo "SKIP: python3 missing"; exit 77; }
[ -f "$top_builddir/Makefile" ] ||
    { echo "FAIL: no $top_builddir/Makefile"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/readme_dist.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
# a make of its own: not the jobserver of the make running the tests
if ! MAKEFLAGS= MAKELEVEL= make -s --no-print-directory -C "$top_builddir" \
     list-distfiles >"$work/dist" 2>"$work/err"; then
    echo "FAIL: make list-distfiles: $(cat "$work/err")"
    exit 1
fi

# not exec: the EXIT trap removes $work once python is done
"$PY" - "$top_srcdir/README.md" "$work/dist" <<'PYEOF'
import fnmatch
import re
import sys

readme, dist_file = sys.argv[1], sys.argv[2]
dist = set(open(dist_file).read().split())
text = open(readme).read()
if not dist or "README.md" not in dist:
    sys.exit("FAIL: the distribution's file list is wrong: %r"
             % sorted(dist)[:5])
PATH_RE = re.compile(r"(?<![\w./-])((?:contrib|conf|tests|doc|man|tools|src|"
                     r"include|\.ci)/[\w./*-]*)")
code = (re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M) +
        re.findall(r"`([^`\n]+)`", text))
named = sorted({m.group(1).rstrip(".") for c in code
                for m in PATH_RE.finditer(c)})


def shipped(path):
    p = path.rstrip("/")
    if "*" in p:
        return any(fnmatch.fnmatchcase(d, p) for d in dist)
    return (p in dist or any(d.startswith(p + "/") for d in dist) or
            any(p.startswith(d + "/") for d in dist))


missing = [p for p in named if not shipped(p)]
for p in named:
    print("%s: %s" % ("ok" if p not in missing else "NOT SHIPPED", p))
# the ones this test was written for must be among those checked
for want in ("contrib/quickstart.sh", "contrib/install-deps.sh"):
    if want not in named:
        sys.exit("FAIL: README.md no longer names %s: update this test"
                 % want)
if missing:
    sys.exit("FAIL: README.md names %d path(s) `make dist` does not ship "
             "(add them to EXTRA_DIST in Makefile.am): %s"
             % (len(missing), ", ".join(missing)))
print("all %d paths README.md names are in the distribution" % len(named))
PYEOF
