"""krwire.py - wire helpers shared by the integration tests' Python
clients and scripted brokers (import krwire: they run from this folder).

crc32c(data): CRC-32C (Castagnoli), the RecordBatch checksum.
recv_exact(sock, n): n bytes from sock, or None at EOF first.
exchange(sock, codec, line): encode one request (krelay-codec's JSON form)
    with `codec encode`, send it, return its response frame (size prefix
    included), or None when the connection closed or timed out first.
varint(n): a zigzag varint (records).
record_batch(values): a magic 2 RecordBatch of uncompressed records
    (bytes values, null keys), base offset 0.
"""
import socket
import struct
import subprocess
import time

_CRC32C_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def varint(n):  # zigzag
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def record_batch(values):
    """A magic 2 RecordBatch of uncompressed records with null keys."""
    now = int(time.time() * 1000)
    recs = bytearray()
    for i, v in enumerate(values):
        body = (b"\x00" + varint(0) + varint(i) + varint(-1) +
                varint(len(v)) + v + varint(0))
        recs += varint(len(body)) + body
    after_crc = (struct.pack(">hiqqqhii", 0, len(values) - 1, now, now,
                             -1, -1, -1, len(values)) + bytes(recs))
    crc = crc32c(after_crc)
    after_len = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def exchange(sock, codec, line):
    frame = subprocess.run([codec, "encode"], input=line.encode(),
                           capture_output=True, check=True).stdout
    sock.sendall(frame)
    try:
        size = recv_exact(sock, 4)
        payload = size and recv_exact(sock, struct.unpack(">i", size)[0])
    except socket.timeout:
        return None
    return None if payload is None else size + payload
