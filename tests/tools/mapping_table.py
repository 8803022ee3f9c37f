#!/usr/bin/env python3
"""mapping_table.py - (re)write tests/data/principal/mapping.txt with the JDK.

Each record of the table is one Kafka mapping rule and names to map:

  name TEXT       what it shows
  pattern TEXT    the rule RULE:pattern/replacement/CASE as Kafka's
  replace TEXT    ssl.principal.mapping.rules writes it (pattern and
  case L|U        replacement as they stand between the slashes; case
                  optional)
  krelay TEXT     "unsupported": Java takes the pattern, krelay refuses it
  input TEXT      a name (X500Principal.getName() form) ...
  java TEXT       ... and what Kafka maps it to, or
  java! WHAT      nomatch | pattern-error MESSAGE | replacement-error
                  MESSAGE (tests/tools/MappingRules.java)

TEXT is UTF-8 with %XX for the bytes of control characters, of '%' and of
a final white-space character.  The java and java! lines are recomputed
with tests/tools/MappingRules.java (java.util.regex itself); the other
lines are kept.

usage: mapping_table.py --java-classes DIR [--check] TABLE [OUT]
"""
import argparse
import difflib
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from x500_table import parse, text_enc  # noqa: E402


def text_dec(s):
    """The inverse of text_enc: %XX -> that byte."""
    out = bytearray()
    b = s.encode("utf-8")
    i = 0
    while i < len(b):
        if b[i] == 0x25 and i + 2 < len(b) and \
                all(c in b"0123456789ABCDEFabcdef" for c in b[i + 1:i + 3]):
            out.append(int(b[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(b[i])
            i += 1
    return out.decode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--java-classes", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("table")
    ap.add_argument("out", nargs="?")
    a = ap.parse_args()
    with open(a.table, encoding="utf-8") as f:
        old = f.read()
    header, records = parse(old)
    queries = []
    for rec in records:
        d = dict(rec)
        for k, v in rec:
            if k == "input":
                queries.append(" ".join([
                    text_dec(d["pattern"]).encode().hex(),
                    text_dec(d.get("replace", "")).encode().hex(),
                    d.get("case", "-"),
                    text_dec(v).encode().hex()]))
    out = subprocess.run(["java", "-cp", a.java_classes, "MappingRules"],
                         input=("\n".join(queries) + "\n").encode(),
                         check=True, stdout=subprocess.PIPE).stdout
    answers = iter(out.decode().split("\n"))
    lines = list(header)
    for rec in records:
        lines.append("")
        for k, v in rec:
            if k in ("java", "java!"):
                continue
            lines.append("%s %s" % (k, v) if v else k)
            if k == "input":
                ans = next(answers)
                if ans.startswith("ok "):
                    res = text_enc(bytes.fromhex(ans[3:]))
                    lines.append("java " + res if res else "java")
                else:
                    lines.append("java! " + ans)
    new = "\n".join(lines) + "\n"
    if a.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True),
                a.table, "regenerated"))
            return 1
        return 0
    with open(a.out or a.table, "w", encoding="utf-8") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
