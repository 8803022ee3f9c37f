"""Raw-socket Kafka client: checks that KIP-951 NodeEndpoints reach the
client rewritten (tests/integration/modern.sh).

usage: kip951_client.py --bootstrap HOST:PORT --base B --mock-base M
                        --topic T [--to NODEID] [--expect-leader NODEID]

Speaks flexible versions by hand (no client library): Metadata v12 on the
bootstrap address, then Produce v10 and Fetch v16 for partition 0 of T
sent to a broker that is not its leader (NodeId --to, default the next
broker after the leader), reached at 127.0.0.1:B+NodeId.  Such a response
carries NOT_LEADER_OR_FOLLOWER (6) with the CurrentLeader tagged field and
the NodeEndpoints tagged field (KIP-951) naming the leader's address: it
must be exactly 127.0.0.1:B+leader (krelay's, so never a mock broker
port; --mock-base is accepted for the callers' logs and not needed).
Finally a Produce v10 to the leader must succeed.

Prints one line per check; exit 0 when all pass, 1 otherwise.  Field
layouts: Kafka's MetadataRequest/Response.json (v12), Produce*.json
(v10), Fetch*.json (v16).
"""
import argparse
import socket
import struct
import sys

from krwire import record_batch

NOT_LEADER_OR_FOLLOWER = 6


# ---- primitive encoders ---------------------------------------------------
def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact_str(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_bytes(b):
    return uvarint(len(b) + 1) + b


def compact_array(items):
    return uvarint(len(items) + 1) + b"".join(items)


TAGS_NONE = b"\x00"

# ---- a reader over a response --------------------------------------------
class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, n):
        if self.p + n > len(self.d):
            raise ValueError("response truncated at byte %d (+%d of %d)"
                             % (self.p, n, len(self.d)))
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uuid(self):
        return self.take(16)

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 35:
                raise ValueError("varint too long")

    def cstr(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def cbytes(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def carray(self, elem):
        n = self.uvarint()
        return None if n == 0 else [elem(self) for _ in range(n - 1)]

    def tags(self):
        """Tagged fields: {tag: raw bytes}."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


# ---- requests ------------------------------------------------------------
class Conn:
    def __init__(self, host, port, timeout=15):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.corr = 0

    def call(self, api_key, api_version, body):
        self.corr += 1
        hdr = (struct.pack(">hhih", api_key, api_version, self.corr, 6) +
               b"kip951" + TAGS_NONE)  # request header v2
        msg = hdr + body
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._recv(4))[0]
        r = Reader(self._recv(size))
        corr = r.i32()
        if corr != self.corr:
            raise ValueError("CorrelationId %d, want %d" % (corr, self.corr))
        r.tags()  # response header v1
        return r

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise ValueError("connection closed after %d of %d bytes"
                                 % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def close(self):
        self.s.close()


def metadata_v12(conn, topic):
    body = (compact_array([b"\x00" * 16 + compact_str(topic) + TAGS_NONE]) +
            b"\x00" + b"\x00" + TAGS_NONE)
    r = conn.call(3, 12, body)
    r.i32()  # ThrottleTimeMs

    def broker(rr):
        b = (rr.i32(), rr.cstr(), rr.i32(), rr.cstr())
        rr.tags()
        return b
    brokers = r.carray(broker)
    r.cstr()  # ClusterId
    r.i32()  # ControllerId

    def partition(rr):
        p = dict(error=rr.i16(), index=rr.i32(), leader=rr.i32(),
                 epoch=rr.i32())
        rr.carray(lambda x: x.i32())
        rr.carray(lambda x: x.i32())
        rr.carray(lambda x: x.i32())
        rr.tags()
        return p

    def topic_(rr):
        t = dict(error=rr.i16(), name=rr.cstr(), id=rr.uuid())
        rr.i8()  # IsInternal
        t["partitions"] = rr.carray(partition)
        rr.i32()  # TopicAuthorizedOperations
        rr.tags()
        return t
    topics = r.carray(topic_)
    r.tags()
    return brokers, topics


def node_endpoints(raw):
    r = Reader(raw)

    def ep(rr):
        e = (rr.i32(), rr.cstr(), rr.i32(), rr.cstr())
        rr.tags()
        return e
    return r.carray(ep)


def leader_and_epoch(raw):
    r = Reader(raw)
    return r.i32(), r.i32()


def produce_v10(conn, topic, partition, values):
    part = (struct.pack(">i", partition) +
            compact_bytes(record_batch(values)) + TAGS_NONE)
    body = (compact_str(None) + struct.pack(">hi", -1, 10000) +
            compact_array([compact_str(topic) + compact_array([part]) +
                           TAGS_NONE]) + TAGS_NONE)
    r = conn.call(0, 10, body)

    def presp(rr):
        p = dict(index=rr.i32(), error=rr.i16(), base_offset=rr.i64())
        rr.i64()  # LogAppendTimeMs
        rr.i64()  # LogStartOffset

        def rec_err(x):
            x.i32()
            x.cstr()
            x.tags()
        rr.carray(rec_err)
        rr.cstr()  # ErrorMessage
        tags = rr.tags()
        p["current_leader"] = (leader_and_epoch(tags[0]) if 0 in tags
                               else None)
        return p

    def tresp(rr):
        name = rr.cstr()
        parts = rr.carray(presp)
        rr.tags()
        return name, parts
    responses = r.carray(tresp)
    r.i32()  # ThrottleTimeMs
    tags = r.tags()
    eps = node_endpoints(tags[0]) if 0 in tags else None
    return responses[0][1][0], eps


def fetch_v16(conn, topic_id, partition):
    part = (struct.pack(">iiqiqi", partition, -1, 0, -1, -1, 1 << 20) +
            TAGS_NONE)
    topic = topic_id + compact_array([part]) + TAGS_NONE
    body = (struct.pack(">iiibii", 100, 1, 1 << 20, 0, 0, -1) +
            compact_array([topic]) + compact_array([]) + compact_str("") +
            TAGS_NONE)
    r = conn.call(1, 16, body)
    r.i32()  # ThrottleTimeMs
    top_error = r.i16()
    r.i32()  # SessionId

    def presp(rr):
        p = dict(index=rr.i32(), error=rr.i16())
        rr.i64()
        rr.i64()
        rr.i64()

        def aborted(x):
            x.i64()
            x.i64()
            x.tags()
        rr.carray(aborted)
        rr.i32()  # PreferredReadReplica
        rr.cbytes()  # Records
        tags = rr.tags()
        p["current_leader"] = (leader_and_epoch(tags[1]) if 1 in tags
                               else None)
        return p

    def tresp(rr):
        tid = rr.uuid()
        parts = rr.carray(presp)
        rr.tags()
        return tid, parts
    responses = r.carray(tresp)
    tags = r.tags()
    eps = node_endpoints(tags[0]) if 0 in tags else None
    if top_error != 0:
        raise ValueError("Fetch v16 top-level ErrorCode %d" % top_error)
    return responses[0][1][0], eps


# ---- checks ----------------------------------------------------------------
class Checker:
    def __init__(self, args):
        self.a = args
        self.failed = 0

    def ok(self, cond, what):
        print("%s: %s" % ("ok" if cond else "FAIL", what))
        if not cond:
            self.failed += 1
        return cond

    def addr_ok(self, node, host, port):
        # krelay's own port for the NodeId: a port krelay has bound, so
        # never one of the mock's (a range test around --mock-base took
        # krelay's ports for the mock's when kr_free_ports gave krelay
        # the ones just above the mock's)
        want = self.a.base + node
        return host == "127.0.0.1" and port == want

    def endpoints(self, what, eps, leader):
        if not self.ok(eps is not None and len(eps) > 0,
                       "%s carries NodeEndpoints %s" % (what, eps)):
            return
        for node, host, port, _rack in eps:
            self.ok(self.addr_ok(node, host, port),
                    "%s NodeEndpoint NodeId %d at %s:%d (want 127.0.0.1:%d)"
                    % (what, node, host, port, self.a.base + node))
        self.ok(any(e[0] == leader for e in eps),
                "%s NodeEndpoints include the leader %d" % (what, leader))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--base", type=int, required=True)
    ap.add_argument("--mock-base", type=int, default=0)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--to", type=int, default=0)
    ap.add_argument("--expect-leader", type=int, default=0)
    a = ap.parse_args()
    ck = Checker(a)

    host, port = a.bootstrap.split(",")[0].rsplit(":", 1)
    c = Conn(host, int(port))
    brokers, topics = metadata_v12(c, a.topic)
    c.close()
    ck.ok(len(brokers) >= 2, "Metadata v12: %d brokers" % len(brokers))
    for node, bhost, bport, _rack in brokers:
        ck.ok(ck.addr_ok(node, bhost, bport),
              "Metadata v12 broker %d at %s:%d" % (node, bhost, bport))
    t = [x for x in topics if x["name"] == a.topic]
    if not ck.ok(len(t) == 1 and t[0]["error"] == 0,
                 "Metadata v12 topic %s" % a.topic):
        return 1
    p0 = [p for p in t[0]["partitions"] if p["index"] == 0][0]
    leader = p0["leader"]
    print("leader of %s [0]: %d" % (a.topic, leader))
    if a.expect_leader:
        ck.ok(leader == a.expect_leader,
              "leader is %d (want %d after the move)" % (leader,
                                                          a.expect_leader))
    ids = sorted(b[0] for b in brokers)
    other = a.to or ids[(ids.index(leader) + 1) % len(ids)]
    ck.ok(other != leader, "target broker %d is not the leader" % other)

    c = Conn("127.0.0.1", a.base + other)
    pr, eps = produce_v10(c, a.topic, 0, [b"kip951-not-leader"])
    ck.ok(pr["error"] == NOT_LEADER_OR_FOLLOWER,
          "Produce v10 to broker %d: ErrorCode %d" % (other, pr["error"]))
    ck.ok(pr["current_leader"] is not None and
          pr["current_leader"][0] == leader,
          "Produce v10 CurrentLeader %s" % (pr["current_leader"],))
    ck.endpoints("Produce v10", eps, leader)

    fr, eps = fetch_v16(c, t[0]["id"], 0)
    ck.ok(fr["error"] == NOT_LEADER_OR_FOLLOWER,
          "Fetch v16 to broker %d: ErrorCode %d" % (other, fr["error"]))
    ck.ok(fr["current_leader"] is not None and
          fr["current_leader"][0] == leader,
          "Fetch v16 CurrentLeader %s" % (fr["current_leader"],))
    ck.endpoints("Fetch v16", eps, leader)
    c.close()

    c = Conn("127.0.0.1", a.base + leader)
    pr, eps = produce_v10(c, a.topic, 0, [b"kip951-leader-1",
                                          b"kip951-leader-2"])
    ck.ok(pr["error"] == 0,
          "Produce v10 to the leader %d: ErrorCode %d, BaseOffset %d"
          % (leader, pr["error"], pr["base_offset"]))
    c.close()

    print("%s: %d failed checks" % ("FAIL" if ck.failed else "OK",
                                     ck.failed))
    return 1 if ck.failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError, IndexError, struct.error) as e:
        print("FAIL: %s: %s" % (type(e).__name__, e))
        sys.exit(1)
