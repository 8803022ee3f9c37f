#!/usr/bin/env python3
"""audit_keys.py - hold krelay's audit lines and their schema, doc/audit.md,
together.

    audit_keys.py --doc DOC --source SRC
        every key SRC (src/kr_audit.c) can write is listed in DOC, and
        every key DOC lists is one SRC can write
    audit_keys.py --doc DOC [--lenient] FILE...
        every key of every audit line in FILEs is listed in DOC (with
        --lenient, lines that are not JSON objects are skipped: a test's
        own lines in an audit file, not krelay's)

DOC's keys are the first backquoted word of its table rows ("| `key` |");
a key of an entry of "topics" is "topics[].key".  SRC's keys are the
string literals its line-building calls name as their second argument:
the kr_jsonw writer's member calls (kr_jsonw_key(w, "key"),
kr_jsonw_kstr, kr_jsonw_kcstr, kr_jsonw_kint, kr_jsonw_kbool, ...),
set_str(w, "key", ...) and set_kept(w, "key", ...) (which also writes
"key_truncated" when it cut the string), and tset_*(w, "key", ...) for the
entries of "topics" (kr_audit.c writes those through tset_* so that they
can be told apart).  A key written through any other call,
or not as a literal, is not seen: kr_audit.c keeps to these.
The "errors" object's keys are Kafka's error names and the bodies' are the
schema's field names: neither is a key of the line.

Output: what does not match, one key per line.  Exit status: 0 all
listed, 1 a key missing on either side, 2 usage or unreadable input.
Python 3 standard library only.
"""

import argparse
import json
import re
import sys

ROW_RE = re.compile(r"^\| `([^`]+)` \|")
CALL_RE = re.compile(
    r"\b(kr_jsonw_key|kr_jsonw_k[a-z]+|set_str|set_kept|tset_[a-z]+)"
    r"\(\s*&?\w+\s*,\s*\"([a-z0-9_]+)\"")


def doc_keys(path):
    keys = set()
    with open(path, encoding="utf-8") as f:
        for row in f:
            m = ROW_RE.match(row)
            if m:
                keys.add(m.group(1))
    if not keys:
        raise ValueError("%s: no \"| `key` |\" rows" % path)
    return keys


def source_keys(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    keys = set()
    for call, key in CALL_RE.findall(text):
        keys.add("topics[]." + key if call.startswith("tset_") else key)
        if call == "set_kept":
            keys.add(key + "_truncated")
    if not keys:
        raise ValueError("%s: no line-building calls found" % path)
    return keys


def line_keys(path, lenient):
    keys = set()
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except ValueError as e:
                if lenient:
                    continue
                raise ValueError("%s:%d: not JSON: %s" % (path, n, e))
            if not isinstance(obj, dict):
                if lenient:
                    continue
                raise ValueError("%s:%d: not a JSON object" % (path, n))
            keys.update(obj)
            for t in obj.get("topics") or []:
                if isinstance(t, dict):
                    keys.update("topics[]." + k for k in t)
    return keys


def main(argv):
    ap = argparse.ArgumentParser(description="audit keys vs doc/audit.md")
    ap.add_argument("--doc", required=True)
    ap.add_argument("--source")
    ap.add_argument("--lenient", action="store_true")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args(argv)
    if bool(args.source) == bool(args.files):
        ap.error("give --source SRC or audit FILEs")
    try:
        doc = doc_keys(args.doc)
        bad = []
        if args.source:
            src = source_keys(args.source)
            bad += ["written by %s, not in %s: %s" % (args.source, args.doc, k)
                    for k in sorted(src - doc)]
            bad += ["in %s, never written by %s: %s" % (args.doc, args.source,
                                                       k)
                    for k in sorted(doc - src)]
        for path in args.files:
            bad += ["%s: key not in %s: %s" % (path, args.doc, k)
                    for k in sorted(line_keys(path, args.lenient) - doc)]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        sys.stderr.write("audit_keys.py: %s\n" % e)
        return 2
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
