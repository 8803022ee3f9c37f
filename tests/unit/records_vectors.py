#!/usr/bin/python3
"""Write tests/unit/records_vectors.h: the golden vectors of check_records.

Run by hand when the cases change (not by make):

    /usr/bin/python3 tests/unit/records_vectors.py > tests/unit/records_vectors.h

Needs kafka-python 2.0.2 (python3-kafka) with python3-snappy, python3-lz4
and python3-zstandard (Debian packages) for its codecs.  Every input and
every expected output is written by kafka-python's own encoders, not by
krelay's:
  - magic 0/1 message sets: kafka.record.legacy_records.
    LegacyRecordBatchBuilder (gzip, xerial snappy, lz4 and for magic 0
    lz4 with the KAFKA-1493 checksum: lz4_encode_old_kafka); raw snappy
    and LogAppendTime wrappers, which it does not write, with its
    _encode_msg and snappy.compress;
  - RecordBatch v2: kafka.record.default_records.DefaultRecordBatchBuilder
    (CRC-32C with kafka.record.util.calc_crc32c), then header fields it
    does not set patched (BaseOffset, PartitionLeaderEpoch -1, timestamp
    type, control bit) and the CRC recomputed with calc_crc32c.
Compressed expected outputs cannot be byte-exact (compressors differ), so
for them the expected bytes hold the payload uncompressed: for an up case
each expected batch has the codec in its attributes but uncompressed
records (the test decompresses krelay's and compares); for a down case a
wrapper's value is its uncompressed inner message set.
"""
import gzip
import struct

import snappy
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32c

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
TS0 = 1700000000000


# ---- magic 0/1 ------------------------------------------------------------

def legacy_set(magic, codec, msgs):
    """msgs: (offset, timestamp, key, value); kafka-python's builder."""
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
    for off, ts, k, v in msgs:
        b.append(off, ts, k, v)
    return bytes(b.build())


def legacy_wrapper(magic, offset, attr, ts, value):
    """One message with the given attributes and value (any bytes)."""
    b = LegacyRecordBatchBuilder(magic, NONE, 1 << 30)
    size = b.size_in_bytes(offset, ts, None, value)
    b._buffer = bytearray(size)
    b._encode_msg(0, offset, ts, None, value, attributes=attr)
    return bytes(b._buffer)


# ---- RecordBatch v2 -------------------------------------------------------

def v2_batch(codec, recs, base_offset=0, lat=False, control=False,
             transactional=False, batch_size=1 << 30):
    """recs: (offset_delta, timestamp, key, value, headers)."""
    b = DefaultRecordBatchBuilder(2, codec, transactional,
                                  7 if transactional else -1,
                                  0 if transactional else -1,
                                  0 if transactional else -1, batch_size)
    for od, ts, k, v, h in recs:
        if b.append(od, ts, k, v, h) is None:
            raise ValueError("batch_size")
    raw = bytearray(b.build())
    if codec != NONE and (struct.unpack_from(">h", raw, 21)[0] & 7) != codec:
        raise ValueError("kafka-python did not compress: use other data")
    return patch_v2(raw, base_offset, lat, control)


def patch_v2(raw, base_offset=0, lat=False, control=False, max_ts=None,
             epoch=-1):
    raw = bytearray(raw)
    struct.pack_into(">q", raw, 0, base_offset)
    struct.pack_into(">i", raw, 12, epoch)
    attr = struct.unpack_from(">h", raw, 21)[0]
    if lat:
        attr |= 0x08
    if control:
        attr |= 0x20
    struct.pack_into(">h", raw, 21, attr)
    if max_ts is not None:
        struct.pack_into(">q", raw, 35, max_ts)
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    return bytes(raw)


def v2_expected(codec, recs, lat=False, max_ts=None):
    """An up case's expected batch: kafka-python's uncompressed batch with
    the codec and timestamp type in its attributes."""
    raw = bytearray(v2_batch(NONE, recs))
    attr = codec | (0x08 if lat else 0)
    struct.pack_into(">h", raw, 21, attr)
    return patch_v2(raw, 0, False, False, max_ts)


def up_recs(msgs, ts_override=None):
    """The records krelay should write for messages (offset deltas 0..)."""
    return [(i, ts_override if ts_override is not None else ts, k, v, [])
            for i, (_, ts, k, v) in enumerate(msgs)]


# ---- the cases ------------------------------------------------------------

out = []


def emit(name, data, comment):
    out.append("/* %s */" % comment)
    out.append("static const uint8_t %s[] = {" % name)
    for i in range(0, len(data), 16):
        out.append("    " + ", ".join("0x%02x" % c for c in data[i:i + 16]) +
                   ",")
    if not data:
        out.append("    0")
    out.append("};")
    out.append("#define %s_LEN %d" % (name.upper(), len(data)))
    out.append("")


M3 = [(0, TS0, b"k0", b"value zero"), (1, TS0 + 5, None, b"value one"),
      (2, TS0 + 2, b"k2", None)]
M3_V0 = [(0, -1, k, v) for _, _, k, v in M3]
# compressible text so kafka-python keeps compression on v2 batches
TXT = [(i, TS0 + 10 * i, b"key-%d" % i,
        b"the quick brown fox jumps over the lazy dog %d " % i * 4)
       for i in range(4)]
TXT_V0 = [(o, -1, k, v) for o, _, k, v in TXT]

# up: plain magic 1, plain magic 0
emit("up_plain_v1_in", legacy_set(1, NONE, M3),
     "up: 3 magic 1 messages, CreateTime, a null key and a null value")
emit("up_plain_v1_exp", v2_expected(NONE, up_recs(M3)),
     "its RecordBatch v2")
emit("up_plain_v0_in", legacy_set(0, NONE, M3_V0), "up: 3 magic 0 messages")
emit("up_plain_v0_exp", v2_expected(NONE, up_recs(M3_V0)),
     "its RecordBatch v2 (timestamps -1)")

# up: wrappers
emit("up_gzip_v1_in", legacy_set(1, GZIP, TXT),
     "up: a magic 1 gzip wrapper of 4 (relative inner offsets)")
emit("up_gzip_v1_exp", v2_expected(GZIP, up_recs(TXT)),
     "its batch (records uncompressed)")
emit("up_snappy_xerial_v0_in", legacy_set(0, SNAPPY, TXT_V0),
     "up: a magic 0 snappy wrapper, xerial framing")
emit("up_snappy_v0_exp", v2_expected(SNAPPY, up_recs(TXT_V0)),
     "its batch (records uncompressed)")
inner_v1 = legacy_set(1, NONE, TXT)
emit("up_snappy_raw_v1_in",
     legacy_wrapper(1, 3, SNAPPY, TS0 + 30, snappy.compress(inner_v1)),
     "up: a magic 1 snappy wrapper, raw snappy")
emit("up_snappy_v1_exp", v2_expected(SNAPPY, up_recs(TXT)),
     "its batch (records uncompressed)")
emit("up_lz4_v0_in", legacy_set(0, LZ4, TXT_V0),
     "up: a magic 0 lz4 wrapper (KAFKA-1493 checksum)")
emit("up_lz4_v0_exp", v2_expected(LZ4, up_recs(TXT_V0)),
     "its batch (records uncompressed)")
emit("up_lz4_v1_in", legacy_set(1, LZ4, TXT),
     "up: a magic 1 lz4 wrapper (correct checksum)")
emit("up_lz4_v1_exp", v2_expected(LZ4, up_recs(TXT)),
     "its batch (records uncompressed)")
LAT_TS = 1800000000000
emit("up_lat_v1_in",
     legacy_wrapper(1, 3, GZIP | 0x08, LAT_TS,
                    gzip.compress(inner_v1, mtime=0)),
     "up: a magic 1 gzip wrapper with LogAppendTime %d" % LAT_TS)
emit("up_lat_v1_exp", v2_expected(GZIP, up_recs(TXT, LAT_TS), lat=True),
     "its batch: every timestamp the wrapper's, LogAppendTime")
TWO = legacy_set(1, GZIP, TXT[:2]) + legacy_set(1, GZIP, TXT[2:])
emit("up_two_wrappers_in", TWO, "up: two magic 1 gzip wrappers of 2")
emit("up_two_wrappers_exp", v2_expected(GZIP, up_recs(TXT)),
     "one batch of the 4")
MIX = legacy_set(1, NONE, M3[:1]) + legacy_set(1, GZIP, TXT[:2]) + \
    legacy_set(1, NONE, M3[1:])
emit("up_mixed_in", MIX, "up: a plain message, a gzip wrapper of 2, "
     "two plain messages")
emit("up_mixed_exp",
     v2_expected(NONE, up_recs(M3[:1])) + v2_expected(GZIP, up_recs(TXT[:2]))
     + v2_expected(NONE, up_recs(M3[1:])), "three batches: none, gzip, none")

# up: split at max_batch_bytes = 400 (kafka-python's builder stops at the
# same point: a record goes in while the batch stays <= batch_size)
SPLIT = [(i, TS0 + i, b"k%d" % i, bytes([65 + i]) * 100) for i in range(7)]
exp = b""
i = 0
while i < len(SPLIT):
    b = DefaultRecordBatchBuilder(2, NONE, False, -1, -1, -1, 400)
    j = i
    while j < len(SPLIT):
        _, ts, k, v = SPLIT[j]
        if b.append(j - i, ts, k, v, []) is None:
            break
        j += 1
    exp += patch_v2(b.build())
    i = j
emit("up_split_in", legacy_set(1, NONE, SPLIT),
     "up: 7 magic 1 messages of 100-byte values")
emit("up_split_exp", exp, "max_batch_bytes 400: batches of 3, 3, 1")

V2IN = v2_batch(NONE, up_recs(M3))
emit("up_v2_in", V2IN, "up: a set that is already a RecordBatch v2")

# down ---------------------------------------------------------------------
R3 = [(0, TS0, b"k0", b"value zero", [("h", b"hv")]),
      (1, TS0 + 5, None, b"value one", []),
      (2, TS0 + 2, b"k2", None, [])]
emit("down_plain_in", v2_batch(NONE, R3, base_offset=100),
     "down: a batch at offset 100 of 3 records, one with a header")
emit("down_plain_v1_exp",
     legacy_set(1, NONE, [(100 + od, ts, k, v) for od, ts, k, v, _ in R3]),
     "as magic 1 messages (headers dropped)")
emit("down_plain_v0_exp",
     legacy_set(0, NONE, [(100 + od, -1, k, v) for od, ts, k, v, _ in R3]),
     "as magic 0 messages")
emit("down_plain_v1_from101_exp",
     legacy_set(1, NONE, [(100 + od, ts, k, v) for od, ts, k, v, _ in R3
                          if od >= 1]),
     "fetch offset 101: the record at 100 dropped")

T4 = [(o, ts, k, v, []) for o, ts, k, v in TXT]
TXT_MAX = max(ts for _, ts, _, _ in TXT)
for codec, cname in ((GZIP, "gzip"), (SNAPPY, "snappy"), (LZ4, "lz4"),
                     (ZSTD, "zstd")):
    emit("down_%s_in" % cname, v2_batch(codec, T4, base_offset=200),
         "down: a %s batch at offset 200 of 4" % cname)
emit("down_z_v1_exp",
     legacy_wrapper(1, 203, 0, TXT_MAX,
                    legacy_set(1, NONE, [(o, ts, k, v) for o, ts, k, v
                                         in TXT])),
     "magic 1: one wrapper at 203 (codec in the test), ts the largest, "
     "relative inner offsets; value uncompressed here")
emit("down_z_v0_exp",
     legacy_wrapper(0, 203, 0, -1,
                    legacy_set(0, NONE, [(200 + o, -1, k, v) for o, ts, k, v
                                         in TXT])),
     "magic 0: one wrapper at 203, absolute inner offsets; value "
     "uncompressed here")
emit("down_zstd_none_v1_exp",
     legacy_set(1, NONE, [(200 + o, ts, k, v) for o, ts, k, v in TXT]),
     "a zstd batch with legacy_zstd = none: plain magic 1 messages")

LATMAX = 1800000000123
emit("down_lat_plain_in",
     patch_v2(v2_batch(NONE, R3), 300, lat=True, max_ts=LATMAX),
     "down: an uncompressed LogAppendTime batch at 300, MaxTimestamp %d"
     % LATMAX)
lat_b = LegacyRecordBatchBuilder(1, NONE, 1 << 30)
lat_exp = b""
for od, ts, k, v, _ in R3:
    m = LegacyRecordBatchBuilder(1, NONE, 1 << 30)
    size = m.size_in_bytes(300 + od, LATMAX, k, v)
    m._buffer = bytearray(size)
    m._encode_msg(0, 300 + od, LATMAX, k, v, attributes=0x08)
    lat_exp += bytes(m._buffer)
emit("down_lat_plain_v1_exp", lat_exp,
     "magic 1 messages with the batch's MaxTimestamp and attribute bit 3")
emit("down_lat_gzip_in",
     patch_v2(v2_batch(GZIP, T4), 400, lat=True, max_ts=LATMAX),
     "down: a gzip LogAppendTime batch at 400")
inner = b""
for o, ts, k, v in TXT:
    m = LegacyRecordBatchBuilder(1, NONE, 1 << 30)
    m._buffer = bytearray(m.size_in_bytes(o, LATMAX, k, v))
    m._encode_msg(0, o, LATMAX, k, v, attributes=0x08)
    inner += bytes(m._buffer)
emit("down_lat_gzip_v1_exp", legacy_wrapper(1, 403, 0x08, LATMAX, inner),
     "one wrapper at 403, attribute bit 3, ts MaxTimestamp, inner the same "
     "(codec in the test)")

# control batch between a transactional data batch and a plain one
txn = v2_batch(NONE, R3[:2], base_offset=500, transactional=True)
ctl = v2_batch(NONE, [(0, TS0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00"
                       b"\x00", [])], base_offset=502, control=True,
               transactional=True)
tail = v2_batch(NONE, [(0, TS0 + 2, b"k2", None, [])], base_offset=503)
emit("down_ctl_in", txn + ctl + tail,
     "down: a transactional batch (500-501), an abort marker (502, "
     "control), a batch at 503")
emit("down_ctl_v1_exp",
     legacy_set(1, NONE, [(500, TS0, b"k0", b"value zero"),
                          (501, TS0 + 5, None, b"value one"),
                          (503, TS0 + 2, b"k2", None)]),
     "the data served (aborted or not: old clients cannot filter), the "
     "marker skipped")

# limits: three uncompressed batches of 2 records of 50-byte values
LIM = [v2_batch(NONE, [(0, TS0 + 2 * j, b"a%d" % j, bytes([97 + j]) * 50,
                        []),
                       (1, TS0 + 2 * j + 1, b"b%d" % j,
                        bytes([65 + j]) * 50, [])], base_offset=600 + 2 * j)
       for j in range(3)]
emit("down_lim_in", b"".join(LIM), "down: three batches at 600, 602, 604 "
     "of two records of 50-byte values")
emit("down_lim_v1_exp",
     legacy_set(1, NONE, [(600 + 2 * j + r, TS0 + 2 * j + r,
                           (b"a%d" if r == 0 else b"b%d") % j,
                           bytes([(97 if r == 0 else 65) + j]) * 50)
                          for j in range(3) for r in range(2)]),
     "all six as magic 1 messages (the tests cut it)")

print("/* GENERATED by tests/unit/records_vectors.py (kafka-python %s): do "
      "not edit. */" % __import__("kafka").__version__)
print("#include <stdint.h>")
print()
print("\n".join(out))
