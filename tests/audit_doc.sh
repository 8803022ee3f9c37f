#!/bin/sh
# audit_doc.sh - doc/audit.md lists every key src/kr_audit.c can write in
# an audit line, and nothing else (tests/tools/audit_keys.py; the other
# direction, that each documented key is written by a real line, is
# check_audit's doc_keys).  Skipped (77) without python3.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
exec python3 "$top_srcdir/tests/tools/audit_keys.py" \
    --doc "$top_srcdir/doc/audit.md" --source "$top_srcdir/src/kr_audit.c"
