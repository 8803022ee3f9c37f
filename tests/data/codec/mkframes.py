#!/usr/bin/env python3
"""Build the golden frames in tests/data/codec/*.hex.

An independent, hand-written encoder (not krelay's codec): each frame is
spelled out field by field from Kafka's schemas (4.3.1), so the C codec is
checked against bytes it did not produce.  The seed frames are the
"smallest legal instance" pages in ../shared/seeds, rebuilt from their
object trees.  Run from this directory: python3 mkframes.py
"""
import struct


def i8(x): return struct.pack('>b', x)
def i16(x): return struct.pack('>h', x)
def i32(x): return struct.pack('>i', x)
def i64(x): return struct.pack('>q', x)
def f64(x): return struct.pack('>d', x)
def boolean(x): return b'\x01' if x else b'\x00'


def uvarint(n):
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def cstr(s):
    """compact (nullable) string"""
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def str16(s):
    """classic (nullable) string"""
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def cbytes(b):
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


def carr(items):
    return uvarint(len(items) + 1) + b''.join(items)


def arr32(items):
    return i32(len(items)) + b''.join(items)


def tags(*fields):
    """tagged-field section: fields are (tag, payload) in ascending order"""
    out = uvarint(len(fields))
    for t, data in fields:
        out += uvarint(t) + uvarint(len(data)) + data
    return out


NOTAGS = tags()


def req_hdr2(key, ver, corr, client, *tagfields):
    return i16(key) + i16(ver) + i32(corr) + str16(client) + tags(*tagfields)


def req_hdr1(key, ver, corr, client):
    return i16(key) + i16(ver) + i32(corr) + str16(client)


def rsp_hdr1(corr):
    return i32(corr) + NOTAGS


def rsp_hdr0(corr):
    return i32(corr)


def frame(payload):
    return (i32(len(payload)) + payload).hex()


# An empty RecordBatch v2 (61 bytes: the batch header alone, 0 records),
# as the seed pages use; the codec never looks inside.
BATCH = (i64(0) + i32(49) + i32(0) + i8(2) + i32(0) + i16(0) + i32(-1)
         + i64(-1) + i64(-1) + i64(-1) + i16(-1) + i32(-1) + i32(0))
assert len(BATCH) == 61

UUID = bytes(range(16))


def requests():
    out = []
    # ElectLeaders v2 (seed page), 29 bytes.
    out.append(('ElectLeaders v2 request (seed page)', frame(
        req_hdr2(43, 2, 0, '')
        + i8(0) + carr([cstr('') + carr([i32(0)]) + NOTAGS])
        + i32(0) + NOTAGS)))
    # ListOffsets v10 (seed page), 46 bytes.
    out.append(('ListOffsets v10 request (seed page)', frame(
        req_hdr2(2, 10, 0, '')
        + i32(0) + i8(0)
        + carr([cstr('') + carr([i32(0) + i32(0) + i64(0) + NOTAGS])
                + NOTAGS])
        + i32(0) + NOTAGS)))
    # OffsetForLeaderEpoch v4 (seed page), 37 bytes.
    out.append(('OffsetForLeaderEpoch v4 request (seed page)', frame(
        req_hdr2(23, 4, 0, '')
        + i32(0)
        + carr([cstr('') + carr([i32(0) + i32(0) + i32(0) + NOTAGS])
                + NOTAGS])
        + NOTAGS)))
    # Metadata v12: CorrelationId 7, ClientId "krelay-test", two topics
    # (uuid 00..0f "orders"; zero uuid, null name), AllowAutoTopicCreation
    # true, IncludeTopicAuthorizedOperations false.
    out.append(('Metadata v12 request', frame(
        req_hdr2(3, 12, 7, 'krelay-test')
        + carr([UUID + cstr('orders') + NOTAGS,
                bytes(16) + cstr(None) + NOTAGS])
        + boolean(True) + boolean(False) + NOTAGS)))
    # ListOffsets v10 with int64 extremes and negative int32/int8.
    out.append(('ListOffsets v10 request, int64 extremes', frame(
        req_hdr2(2, 10, 2147483647, None)
        + i32(-1) + i8(1)
        + carr([cstr('t') + carr([
            i32(0) + i32(-1) + i64(-9223372036854775808) + NOTAGS,
            i32(1) + i32(5) + i64(9223372036854775807) + NOTAGS])
                + NOTAGS])
        + i32(30000) + NOTAGS)))
    # Produce v9 (flexible) with one records batch, TransactionalId null.
    out.append(('Produce v9 request with records', frame(
        req_hdr2(0, 9, 3, 'p')
        + cstr(None) + i16(-1) + i32(30000)
        + carr([cstr('orders') + carr([i32(0) + cbytes(BATCH) + NOTAGS])
                + NOTAGS])
        + NOTAGS)))
    # Produce v3 (classic) with records, and null records.
    out.append(('Produce v3 request (not flexible), records and null',
                frame(req_hdr1(0, 3, 4, 'p')
                      + str16('tx') + i16(1) + i32(1000)
                      + arr32([str16('orders') + arr32([
                          i32(0) + i32(len(BATCH)) + BATCH,
                          i32(1) + i32(-1)])]))))
    # AlterClientQuotas v0 (classic) with float64 values 1.5, NaN,
    # +Infinity, -Infinity, -0.0.
    ops = [str16(k) + f64(v) + boolean(r) for k, v, r in [
        ('producer_byte_rate', 1.5, False),
        ('a', float('nan'), False),
        ('b', float('inf'), False),
        ('c', float('-inf'), True),
        ('d', -0.0, False)]]
    out.append(('AlterClientQuotas v0 request, float64 values', frame(
        req_hdr1(49, 0, 9, 'q')
        + arr32([arr32([str16('user') + str16(None)]) + arr32(ops)])
        + boolean(True))))
    # ApiVersions v3 request.
    out.append(('ApiVersions v3 request', frame(
        req_hdr2(18, 3, 1, 'rdkafka')
        + cstr('librdkafka') + cstr('2.12.0') + NOTAGS)))
    # ElectLeaders v2 with an unknown tagged field (tag 5, "abc") in the
    # header and one (tag 9, 00 ff) in the body.
    out.append(('ElectLeaders v2 request, unknown tags in header and body',
                frame(req_hdr2(43, 2, 11, 'x', (5, b'abc'))
                      + i8(1) + uvarint(0)
                      + i32(60000) + tags((9, b'\x00\xff')))))
    return out


def apiversions_v3():
    out = []
    keys = [i16(18) + i16(0) + i16(4) + NOTAGS,
            i16(3) + i16(0) + i16(13) + NOTAGS]
    out.append(('ApiVersions v3 response, no tagged fields', frame(
        rsp_hdr0(1) + i16(0) + carr(keys) + i32(0) + NOTAGS)))
    # SupportedFeatures (tag 0), FinalizedFeaturesEpoch (tag 1) = 5,
    # ZkMigrationReady (tag 3) = true, unknown tag 7 = 01 02 03.
    sf = carr([cstr('metadata.version') + i16(1) + i16(27) + NOTAGS])
    out.append(('ApiVersions v3 response, tagged fields', frame(
        rsp_hdr0(2) + i16(0) + carr(keys) + i32(100)
        + tags((0, sf), (1, i64(5)), (3, boolean(True)),
               (7, b'\x01\x02\x03')))))
    return out


def seeds_responses():
    el = [('ElectLeaders v2 response (seed page)', frame(
        rsp_hdr1(0) + i32(0) + i16(0)
        + carr([cstr('') + carr([i32(0) + i16(0) + cstr('') + NOTAGS])
                + NOTAGS])
        + NOTAGS))]
    lo = [('ListOffsets v10 response (seed page)', frame(
        rsp_hdr1(0) + i32(0)
        + carr([cstr('') + carr([i32(0) + i16(0) + i64(0) + i64(0)
                                 + i32(0) + NOTAGS]) + NOTAGS])
        + NOTAGS))]
    oe = [('OffsetForLeaderEpoch v4 response (seed page)', frame(
        rsp_hdr1(0) + i32(0)
        + carr([cstr('') + carr([i16(0) + i32(0) + i32(0) + i64(0)
                                 + NOTAGS]) + NOTAGS])
        + NOTAGS))]
    # FetchSnapshot v0 response with the page's example values;
    # CurrentLeader is tagged (tag 0), UnalignedRecords 5 raw bytes.
    leader = i32(1) + i32(17) + NOTAGS
    fs = [('FetchSnapshot v0 response (seed page example values)', frame(
        rsp_hdr1(42) + i32(0) + i16(0)
        + carr([cstr('orders') + carr([
            i32(3) + i16(0) + (i64(150382) + i32(17) + NOTAGS)
            + i64(1048576) + i64(0) + cbytes(b'\xde\xad\xbe\xef\x00')
            + tags((0, leader))]) + NOTAGS])
        + NOTAGS))]
    return el, lo, oe, fs


def metadata_v12():
    """A small cluster as a broker describes it: the README's krelay-codec
    example decodes this file."""
    def broker(node, host, port, rack):
        return i32(node) + cstr(host) + i32(port) + cstr(rack) + NOTAGS

    def part(index, leader, replicas):
        return (i16(0) + i32(index) + i32(leader) + i32(7)
                + carr([i32(r) for r in replicas])
                + carr([i32(r) for r in replicas]) + carr([]) + NOTAGS)
    brokers = [broker(1, 'kafka-1.example.com', 9092, 'rack-a'),
               broker(2, 'kafka-2.example.com', 9092, 'rack-b'),
               broker(3, 'kafka-3.example.com', 9092, None)]
    orders = (i16(0) + cstr('orders') + UUID + boolean(False)
              + carr([part(0, 1, [1, 2, 3]), part(1, 2, [2, 3, 1])])
              + i32(-2147483648) + NOTAGS)
    # Topics[1]: asked for by name, does not exist (error 3).
    missing = (i16(3) + cstr('payments') + bytes(16) + boolean(False)
               + carr([]) + i32(-2147483648) + NOTAGS)
    return [('Metadata v12 response: 3 brokers, topic orders with 2 '
             'partitions, topic payments unknown', frame(
                 rsp_hdr1(7) + i32(0) + carr(brokers)
                 + cstr('krelay-example-cluster') + i32(1)
                 + carr([orders, missing]) + NOTAGS))]


def bad_requests():
    """One frame or defect per line; the tool must go on after each."""
    good = requests()
    meta = bytearray.fromhex(good[3][1])
    assert meta[43] == 7  # Topics[0].Name compact length ("orders")
    meta[43] = 101        # claims 100 bytes, 6 follow
    el = good[0][1]
    return [
        ('good: ElectLeaders v2 request', el),
        ('bad: Metadata v12, Topics[0].Name length 100 past the end '
         '(length at frame offset 43)', meta.hex()),
        ('bad: size prefix 32 but 25 bytes follow', '00000020' + el[8:]),
        ('bad: not hex', el[:10] + 'zz' + el[12:]),
        ('bad: unknown ApiKey 1000', frame(req_hdr1(1000, 0, 5, ''))),
        ('good: ListOffsets v10 request', good[1][1]),
    ]


def write(name, header, frames):
    with open(name, 'w') as f:
        f.write('# %s\n# generated by mkframes.py; one frame per line, '
                'size prefix included\n' % header)
        for title, hexs in frames:
            f.write('# %s\n%s\n' % (title, hexs))


if __name__ == '__main__':
    write('requests.hex', 'requests', requests())
    write('bad-requests.hex', 'requests, good and bad mixed',
          bad_requests())
    write('ApiVersions-v3-response.hex', 'ApiVersions v3 responses',
          apiversions_v3())
    el, lo, oe, fs = seeds_responses()
    write('ElectLeaders-v2-response.hex', 'ElectLeaders v2 response', el)
    write('ListOffsets-v10-response.hex', 'ListOffsets v10 response', lo)
    write('OffsetForLeaderEpoch-v4-response.hex',
          'OffsetForLeaderEpoch v4 response', oe)
    write('FetchSnapshot-v0-response.hex', 'FetchSnapshot v0 response', fs)
    write('Metadata-v12-response.hex', 'Metadata v12 response',
          metadata_v12())
