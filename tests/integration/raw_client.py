#!/usr/bin/python3
"""raw_client.py - raw Kafka frames for the integration tests.

  raw_client.py send HOST:PORT KRELAY_CODEC < requests.jsonl
      Each stdin line is a request in krelay-codec's JSON form.  It is
      encoded with `krelay-codec encode` and sent on one connection, and
      its response frame read whole.  Each response is printed as one line
      of hex, its 4-byte size prefix included (what `krelay-codec decode
      --hex --response ...` reads), nothing decoded: the bytes as the peer
      sent them.  A response that does not come within 20 s, or a closed
      connection, ends the run with exit status 3 (the lines printed so far
      stay).

  raw_client.py batch VALUE...
      Print, in base64, a magic 2 RecordBatch of uncompressed records with
      null keys and these values (for a Produce request's Records).

  raw_client.py batch-attrs < BASE64
      Read from stdin a Records value (one or more RecordBatches back to back, as in a
      decoded Fetch response) and print one line per batch:
      "BASEOFFSET MAGIC ATTRIBUTES RECORDS BYTES" (decimal), where BYTES
      is the batch's length on the wire.
"""
import base64
import socket
import struct
import sys

from krwire import exchange, record_batch


def batch_attrs(data):
    """(BaseOffset, Magic, Attributes, RecordCount, bytes) per batch."""
    out = []
    p = 0
    while p + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, p)
        if length < 49 or p + 12 + length > len(data):
            break       # a partial batch at the end (Fetch may cut one)
        magic = data[p + 16]
        attrs, = struct.unpack_from(">h", data, p + 21)
        count, = struct.unpack_from(">i", data, p + 57)
        out.append((base, magic, attrs, count, 12 + length))
        p += 12 + length
    return out


def send(addr, codec):
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=20)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rsp = exchange(sock, codec, line)
        if rsp is None:
            sys.stderr.write("raw_client: no response (connection closed "
                             "or 20 s timeout)\n")
            return 3
        sys.stdout.write(rsp.hex() + "\n")
        sys.stdout.flush()
    sock.close()
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "send":
        return send(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 3 and sys.argv[1] == "batch":
        vals = [v.encode() for v in sys.argv[2:]]
        print(base64.b64encode(record_batch(vals)).decode())
        return 0
    if len(sys.argv) == 2 and sys.argv[1] == "batch-attrs":
        for b in batch_attrs(base64.b64decode(sys.stdin.read().strip())):
            print("%d %d %d %d %d" % b)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
