"""legacy_msgs.py - the known message sets of the legacy-client tests
(tests/integration/legacy_*.sh, issue 10), and the byte-for-byte check of
what a client consumed back.

A set is named by TAG and COUNT: message i (0 <= i < COUNT) has
  key    None (a null key) when i % 4 == 0, else b"TAG-k<i % 13>" (keys
         repeat: a keyed producer spreads them over partitions)
  value  b"TAG-<i, 5 digits>-" then printable filler (letters and digits
         from a fixed generator seeded by i) up to SIZES[i % len(SIZES)]
         bytes: 20 B to 4 KiB.  No tab, no newline: kcat reads lines.
Values are distinct, so a set compares as a multiset of (key, value).

  legacy_msgs.py kcat-in TAG COUNT
      print the set for `kcat -P -K '\\t' -Z`: "KEY<TAB>VALUE" a line,
      KEY empty for a null key (-Z sends an empty key as null)
  legacy_msgs.py json-in TAG COUNT
      print the set as JSON lines {"k": HEX|null, "v": HEX} (kafka-node)
  legacy_msgs.py check TAG COUNT FILE [LABEL [FIRST]]
      compare what a client consumed (FILE) with the set (its messages
      FIRST..COUNT-1: a consumer that started at offset FIRST of a
      partition the set was written to alone, in order); FILE holds JSON
      lines, either {"k": HEX|null, "v": HEX|null, ...} (legacy clients
      here) or kcat -J's {"key": STR|null, "payload": STR|null, ...};
      where lines name their partition and offset, each partition's
      messages must be in the order produced.  Prints one summary line ("OK LABEL: ..." or "FAIL LABEL: ..." with
      the first differences) and exits 0 when identical, 1 otherwise.
  legacy_msgs.py count FILE
      print the number of records in FILE (0 for a missing file)

From Python: import legacy_msgs; messages(tag, count), compare(...),
compare_list(want, got, label), record_line(...), read_records(path).
"""
import json
import sys

SIZES = (20, 100, 1000, 3000, 4096, 333)
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _filler(seed, n):
    out = bytearray()
    x = (seed * 2654435761 + 12345) & 0xFFFFFFFF
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(_ALPHABET[(x >> 16) % len(_ALPHABET)])
    return bytes(out)


def message(tag, i):
    """(key, value) of message i of set tag: key None or bytes."""
    key = None if i % 4 == 0 else ("%s-k%d" % (tag, i % 13)).encode()
    head = ("%s-%05d-" % (tag, i)).encode()
    size = max(SIZES[i % len(SIZES)], len(head))
    return key, head + _filler(i, size - len(head))


def messages(tag, count):
    return [message(tag, i) for i in range(count)]


def _show(b):
    if b is None:
        return "null"
    s = b[:24].decode("ascii", "replace")
    return "%r%s (%d B)" % (s, "..." if len(b) > 24 else "", len(b))


def compare(tag, count, got, label, first=0):
    """got: a list of (key, value); the set's messages first..count-1
    expected.  Returns (ok, summary line)."""
    return compare_list(messages(tag, count)[first:], got, label)


def compare_list(want, got, label):
    """want, got: lists of (key, value).  Returns (ok, summary line)."""
    count = len(want)
    pending = {}
    for kv in want:
        pending[kv] = pending.get(kv, 0) + 1
    extra = []
    for kv in got:
        if pending.get(kv, 0) > 0:
            pending[kv] -= 1
        else:
            extra.append(kv)
    missing = [kv for kv, n in pending.items() for _ in range(n)]
    nbytes = sum(len(v) for _, v in want)
    nulls = sum(1 for k, _ in want if k is None)
    if not missing and not extra:
        return True, ("OK %s: %d messages (%d null keys, %d value bytes, "
                      "largest %d B) consumed back identical"
                      % (label, count, nulls, nbytes,
                         max(len(v) for _, v in want)))
    parts = ["FAIL %s: want %d, got %d: %d missing, %d unexpected"
             % (label, count, len(got), len(missing), len(extra))]
    for k, v in missing[:3]:
        parts.append("missing key=%s value=%s" % (_show(k), _show(v)))
    for k, v in extra[:3]:
        # the same value with another key: say so
        near = [kv for kv in want if kv[1] == v]
        why = ""
        if near and near[0][0] == k:
            why = " (a duplicate)"
        elif near:
            why = " (expected key %s)" % _show(near[0][0])
        parts.append("unexpected key=%s value=%s%s"
                     % (_show(k), _show(v), why))
    return False, "; ".join(parts)


def _unhex(x):
    return None if x is None else bytes.fromhex(x)


def _unstr(x):
    return None if x is None else x.encode("latin-1")


def read_records(path, where=None):
    """(key, value) pairs from a JSON-lines file of either form; with a
    list where, each record's (partition, offset) appended to it ((-1,
    -1) when the line has none)."""
    out = []
    try:
        f = open(path)
    except FileNotFoundError:
        return out
    with f:
        for line in f:
            line = line.strip()
            if not line or not line.startswith("{"):
                continue
            r = json.loads(line)
            if "payload" in r:          # kcat -J
                out.append((_unstr(r.get("key")), _unstr(r.get("payload"))))
                pos = (r.get("partition", -1), r.get("offset", -1))
            else:
                out.append((_unhex(r.get("k")), _unhex(r.get("v"))))
                pos = (r.get("p", -1), r.get("o", -1))
            if where is not None:
                where.append(pos)
    return out


def order_fault(tag, got, where):
    """Within each partition, by offset, the set's messages must come in
    the order they were produced (their index i in "TAG-<i>-"): a Kafka
    partition keeps a producer's order, and so must every request krelay
    splits.  None, or what is out of order.  Records without a partition
    and offset are not checked."""
    head = ("%s-" % tag).encode()
    parts = {}
    for (k, v), (p, o) in zip(got, where):
        if p is None or o is None or p < 0 or o < 0 or v is None or \
                not v.startswith(head):
            continue
        try:
            i = int(v[len(head):len(head) + 5])
        except ValueError:
            continue
        parts.setdefault(p, []).append((o, i))
    for p in sorted(parts):
        seq = sorted(parts[p])
        for (o1, i1), (o2, i2) in zip(seq, seq[1:]):
            if i2 <= i1:
                return ("partition %d: message %d at offset %d after "
                        "message %d at offset %d (not the order produced)"
                        % (p, i2, o2, i1, o1))
    return None


def record_line(key, value, partition=-1, offset=-1):
    """One JSON line in this module's form (what the clients write)."""
    return json.dumps({"k": None if key is None else key.hex(),
                       "v": None if value is None else value.hex(),
                       "p": partition, "o": offset})


def main(argv):
    if len(argv) >= 3 and argv[0] == "kcat-in":
        out = sys.stdout.buffer
        for k, v in messages(argv[1], int(argv[2])):
            out.write((k or b"") + b"\t" + v + b"\n")
        return 0
    if len(argv) >= 3 and argv[0] == "json-in":
        for k, v in messages(argv[1], int(argv[2])):
            print(record_line(k, v))
        return 0
    if len(argv) >= 4 and argv[0] == "check":
        label = argv[4] if len(argv) > 4 else argv[3]
        first = int(argv[5]) if len(argv) > 5 else 0
        where = []
        got = read_records(argv[3], where)
        ok, line = compare(argv[1], int(argv[2]), got, label, first)
        fault = order_fault(argv[1], got, where) if ok else None
        if fault is not None:
            ok, line = False, "FAIL %s: %s" % (label, fault)
        print(line)
        return 0 if ok else 1
    if len(argv) == 2 and argv[0] == "count":
        print(len(read_records(argv[1])))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
