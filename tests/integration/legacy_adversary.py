#!/usr/bin/python3
"""legacy_adversary.py PORT - a hostile old producer against krelay's
legacy translation (issue 10), through krelay in front of `krmock -K
4.0.0` with one broker (legacy_adversary.sh).  Each case prints one line;
the exit status is the number of cases that failed.

Frames are built here by hand (magic 0/1 messages with zlib's CRC-32, the
Produce v0-2 and Metadata v1 layouts of ../shared/kafka-message-schemas):
what a buggy or hostile client sends is what no client library writes.

Cases:
  partitions  one Produce v2 whose partitions are each bad in their own
              way (CRC, size past the end, negative size, a gzip wrapper
              of garbage, a wrapper inside a wrapper, zstd in magic 1):
              each gets its own error, the good ones are stored (0)
  many        20000 bad partitions and a good one: all answered, quickly
  bombs       gzip bombs (the listener's max_frame_bytes is 4 MiB): eight
              wrappers of 3 MB zeros in one set, and four partitions of
              1.5 MB each: the request's wrappers share the limit
  pipeline    Produce v2 Acks=0, v0, Metadata v1, Produce v1, ApiVersions
              v0 sent at once: the four answers in order, none for the
              Acks=0 one
  acks0       Produce v2 Acks=0 whose every partition is bad: no answer,
              the connection closed (as a broker closes), nothing else
  acks0part   Produce v2 Acks=0 with a good partition and a bad one, an
              ApiVersions behind it: the good one stored (ListOffsets v0
              on another connection finds it), no answer, the connection
              closed after it (as a broker closes on an Acks=0 error)
  malformed   a Produce v2 whose records length runs past its frame: the
              connection closed, no answer
"""
import socket
import struct
import sys
import time
import zlib

TOPIC = "adv"


def s16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def byts(b):
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def msg(magic, value, attr=0, badcrc=False, size=None):
    body = struct.pack(">bb", magic, attr)
    if magic == 1:
        body += struct.pack(">q", 1700000000000)
    body += byts(None) + byts(value)
    crc = zlib.crc32(body) ^ (1 if badcrc else 0)
    m = struct.pack(">I", crc) + body
    return struct.pack(">qi", 0, len(m) if size is None else size) + m


def gz(data):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def frame(key, ver, cid, body):
    b = struct.pack(">hhi", key, ver, cid) + s16("adversary") + body
    return struct.pack(">i", len(b)) + b


def produce(ver, cid, parts, acks=1):
    b = [struct.pack(">hii", acks, 5000, 1), s16(TOPIC),
         struct.pack(">i", len(parts))]
    for idx, rec in parts:
        b.append(struct.pack(">i", idx) + byts(rec))
    return frame(0, ver, cid, b"".join(b))


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        c = s.recv(min(n - len(buf), 1 << 20))
        if not c:
            return None
        buf += c
    return bytes(buf)


def recv_frame(s):
    h = recv_exact(s, 4)
    return None if h is None else recv_exact(s, struct.unpack(">i", h)[0])


def produce_errors(ver, f):
    """{partition: ErrorCode} of a Produce v0-2 response."""
    o, out = 4, {}
    (nt,) = struct.unpack_from(">i", f, o)
    o += 4
    for _ in range(nt):
        (ln,) = struct.unpack_from(">h", f, o)
        o += 2 + ln
        (np_,) = struct.unpack_from(">i", f, o)
        o += 4
        for _ in range(np_):
            idx, ec = struct.unpack_from(">ih", f, o)
            o += 14 + (8 if ver >= 2 else 0)
            out[idx] = ec
    return out


FAILED = []


def check(case, ok, what):
    print("%s: %s: %s" % (case, "ok" if ok else "FAIL", what), flush=True)
    if not ok:
        FAILED.append(case)


def conn(port, timeout=60):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    return s


def case_partitions(port):
    good = msg(1, b"good")
    wrapped = msg(1, gz(msg(1, b"inner")), attr=1)
    parts = [
        (0, good),
        (1, msg(1, b"crc", badcrc=True)),               # CRC
        (2, msg(1, b"past the end", size=500)),         # size past the end
        (3, msg(1, b"negative", size=-20)),             # negative size
        (4, msg(1, b"\x1f\x8b garbage", attr=1)),       # gzip that is not
        (5, msg(1, gz(wrapped), attr=1)),               # wrapper in wrapper
        (6, msg(1, b"zstd?", attr=4)),                  # zstd in magic 1:
        # UNSUPPORTED_COMPRESSION_TYPE (76) is Produce v3+'s (KIP-110); a
        # v2 client gets CORRUPT_MESSAGE (2), as 0.10 brokers answered
        (7, msg(0, b"magic 0") + msg(0, b"twice")),
        (8, wrapped),
    ]
    want = {0: 0, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 0, 8: 0}
    s = conn(port)
    s.sendall(produce(2, 11, parts))
    f = recv_frame(s)
    got = produce_errors(2, f) if f else None
    check("partitions", got == want, "errors %s, want %s" % (got, want))
    s.close()


def case_many(port):
    n = 20000
    bad = struct.pack(">qi", 0, 5) + b"xxxxx"
    parts = [(i + 1, bad) for i in range(n)] + [(0, msg(1, b"good"))]
    s = conn(port)
    t = time.time()
    s.sendall(produce(2, 12, parts))
    f = recv_frame(s)
    took = time.time() - t
    got = produce_errors(2, f) if f else {}
    nbad = sum(1 for k, v in got.items() if k > 0 and v == 2)
    check("many", len(got) == n + 1 and nbad == n and got.get(0) == 0,
          "%d partitions answered (%d CORRUPT_MESSAGE, partition 0: %s) "
          "in %.1f s" % (len(got), nbad, got.get(0), took))
    s.close()


def case_bombs(port):
    bomb = msg(1, gz(msg(1, bytes(3000000))), attr=1)
    s = conn(port)
    s.sendall(produce(2, 13, [(0, bomb * 8), (1, msg(1, b"good"))]))
    f = recv_frame(s)
    got = produce_errors(2, f) if f else None
    check("bombs", got == {0: 2, 1: 0},
          "8 wrappers of 3 MB in one set: %s, want {0: 2, 1: 0}" % got)
    half = msg(1, gz(msg(1, bytes(1500000))), attr=1)
    s.sendall(produce(2, 14, [(i, half) for i in range(4)]))
    f = recv_frame(s)
    got = produce_errors(2, f) if f else None
    want = {0: 0, 1: 0, 2: 2, 3: 2}
    check("bombs", got == want,
          "4 partitions of 1.5 MB: %s, want %s" % (got, want))
    s.close()


def case_pipeline(port):
    frames = [produce(2, 21, [(0, msg(1, b"a")), (1, msg(1, b"b"))],
                      acks=0),
              produce(0, 22, [(0, msg(0, b"c"))]),
              frame(3, 1, 23, struct.pack(">i", 1) + s16(TOPIC)),
              produce(1, 24, [(1, msg(1, b"d"))]),
              frame(18, 0, 25, b"")]
    s = conn(port)
    s.sendall(b"".join(frames))
    cids = []
    for _ in range(4):
        f = recv_frame(s)
        if f is None:
            break
        cids.append(struct.unpack_from(">i", f, 0)[0])
    check("pipeline", cids == [22, 23, 24, 25],
          "CorrelationIds answered %s, want [22, 23, 24, 25]" % cids)
    s.close()


def case_acks0(port):
    s = conn(port, 20)
    s.sendall(produce(2, 31, [(0, msg(1, b"x", True))], acks=0))
    f = recv_frame(s)
    check("acks0", f is None, "all partitions bad with Acks=0: %s" %
          ("closed, no answer" if f is None else "answered"))
    s.close()


def latest_offset(port, part):
    """The latest offset of TOPIC's partition part (ListOffsets v0
    through krelay: translated to v1), or None."""
    s = conn(port, 20)
    body = (struct.pack(">ii", -1, 1) + s16(TOPIC) +
            struct.pack(">iiqi", 1, part, -1, 1))
    s.sendall(frame(2, 0, 51, body))
    f = recv_frame(s)
    s.close()
    if f is None:
        return None
    o = 4 + 4                                   # CorrelationId, [topics]
    (ln,) = struct.unpack_from(">h", f, o)
    o += 2 + ln + 4                             # name, [partitions]
    idx, ec, n = struct.unpack_from(">ihi", f, o)
    if idx != part or ec != 0 or n != 1:
        return None
    return struct.unpack_from(">q", f, o + 10)[0]


def case_acks0part(port):
    before = latest_offset(port, 9)
    s = conn(port, 20)
    s.sendall(produce(2, 32, [(9, msg(1, b"stored")),
                              (8, msg(1, b"crc", badcrc=True))], acks=0) +
              frame(18, 0, 33, b""))
    f = recv_frame(s)
    s.close()
    after = before
    for _ in range(50):                         # the broker appends it
        after = latest_offset(port, 9)
        if before is None or after is None or after > before:
            break
        time.sleep(0.1)
    ok = f is None and before is not None and after == before + 1
    check("acks0part", ok, "a good and a bad partition with Acks=0: %s; "
          "the good one's latest offset %s -> %s" %
          ("closed, no answer" if f is None else "answered", before, after))


def case_malformed(port):
    s = conn(port, 20)
    body = (struct.pack(">hii", 1, 5000, 1) + s16(TOPIC) +
            struct.pack(">iii", 1, 0, 1000) + b"short")
    s.sendall(frame(0, 2, 41, body))
    f = recv_frame(s)
    check("malformed", f is None, "records length past the frame: %s" %
          ("closed, no answer" if f is None else "answered"))
    s.close()


def main():
    port = int(sys.argv[1])
    for case in (case_partitions, case_many, case_bombs, case_pipeline,
                 case_acks0, case_acks0part, case_malformed):
        try:
            case(port)
        except (OSError, struct.error) as e:
            check(case.__name__[5:], False, "%s: %s" % (type(e).__name__, e))
    return len(FAILED)


if __name__ == "__main__":
    sys.exit(main())
