#!/usr/bin/python3
"""fake_broker.py - a scripted one-broker Kafka upstream for krelay's tests.

Usage: fake_broker.py --codec KRELAY_CODEC --log FILE [--port N]
                      [--ready FILE] [--node-id ID] [--topic NAME:PARTS]...
                      [--garbage KEY[:VERSION]]...

Listens on 127.0.0.1:PORT (PORT 0, the default: one the kernel picks) and
writes "127.0.0.1:PORT" to the ready file once it accepts connections.
It is NodeId ID (default 1) of a one-broker cluster and advertises its own
address in Metadata.  Topics (default open:1 and secret-a:1) get TopicIds
derived from their names (md5), stable from run to run.

Answers:
  ApiVersions v0-v4  built here (v0, v1-v2 and flexible v3-v4 layouts);
                     a newer version gets the KIP-511 answer (v0 body,
                     UNSUPPORTED_VERSION, ApiVersions 0-4).  It advertises
                     the ranges `krelay-codec list` gives, except ONE PAST
                     krelay's max for DeleteTopics, Produce, Metadata and
                     FindCoordinator, plus ApiKey 1000 (0-0).
  Metadata v0-v13    built with `krelay-codec encode`: this broker, the
                     requested topics (all when the request names none;
                     unknown names get UNKNOWN_TOPIC_OR_PARTITION).
  SaslHandshake      ErrorCode 0, Mechanisms [GSSAPI, PLAIN] (the
                     connection stays in Kafka framing: this is a fake).
  Produce Acks=0     no response, as Kafka.
  other (ApiKey, version) krelay-codec knows: the default response
                     (`krelay-codec encode` of an empty body), so a proxy
                     that decodes it finds a valid frame.
  anything else (unknown ApiKey or version, or --garbage): CorrelationId,
                     then the bytes "FAKE <key> v<version>" (not a valid
                     body of any API).

Every event is one JSON line in the log file, written (and flushed) before
the response is sent:
  {"event": "accept", "conn": N, "peer": "IP:PORT", "pid": PID, "comm": C}
      (PID: the process owning the peer socket, from /proc; -1 unknown)
  {"event": "request", "conn": N, "api_key": K, "api_version": V,
   "correlation_id": C, "client_id": S|null, "request_bytes": B (with the
   size prefix), "known": bool (krelay-codec knows K/V), "detail": {...}
   (Metadata/Produce/Fetch "topics", SaslHandshake "mechanism", Produce
   "acks"; "undecodable": true for a known K/V whose body krelay-codec
   cannot decode; "garbage": true for --garbage), "response_hex": the
   response frame sent, size prefix included, or null}
  {"event": "close", "conn": N, "requests": R}  (after the last request of
   the connection was answered)
SIGTERM or SIGINT: exit status 0.  Python 3 standard library only.
"""
import argparse
import base64
import hashlib
import json
import os
import signal
import socketserver
import struct
import subprocess
import sys
import threading
import time

from krwire import recv_exact

API_VERSIONS, METADATA, PRODUCE, SASL_HANDSHAKE = 18, 3, 0, 17
# offered one version past krelay's highest (krelay-codec list), as a
# newer broker would: Produce, Metadata, FindCoordinator, DeleteTopics
ONE_PAST = (0, 3, 10, 20)
UNKNOWN_API = (1000, 0, 0)


class Broker:
    def __init__(self, args):
        self.codec = args.codec
        self.node_id = args.node_id
        self.host = "127.0.0.1"
        self.port = 0
        self.garbage = {}
        for g in args.garbage:
            k, _, v = g.partition(":")
            self.garbage.setdefault(int(k), set()).add(int(v) if v else None)
        self.known = self.codec_versions()
        self.topics = []
        for t in args.topic or ["open:1", "secret-a:1"]:
            name, _, parts = t.partition(":")
            tid = base64.urlsafe_b64encode(
                hashlib.md5(name.encode()).digest()).decode().rstrip("=")
            self.topics.append((name, int(parts or 1), tid))
        self.log = open(args.log, "a")
        self.lock = threading.Lock()
        self.nconn = 0
        self.cache = {}

    def codec_versions(self):
        """{ApiKey: (lo, hi)} from `krelay-codec list`."""
        out = subprocess.run([self.codec, "list"], capture_output=True,
                             check=True, text=True).stdout
        known = {}
        for line in out.splitlines()[1:]:
            f = line.split()
            if len(f) < 3 or not f[0].isdigit():
                continue
            lo, _, hi = f[2].partition("-")
            known[int(f[0])] = (int(lo), int(hi or lo))
        if not known:
            raise SystemExit("fake_broker: `%s list` gave no API" % self.codec)
        return known

    def advertised(self):
        ranges = []
        for k in sorted(self.known):
            lo, hi = self.known[k]
            ranges.append((k, lo, hi + 1 if k in ONE_PAST else hi))
        ranges.append(UNKNOWN_API)
        return ranges

    def is_known(self, key, ver):
        r = self.known.get(key)
        return r is not None and r[0] <= ver <= r[1]

    def emit(self, rec):
        rec["t"] = round(time.time(), 6)
        with self.lock:
            self.log.write(json.dumps(rec, sort_keys=True) + "\n")
            self.log.flush()

    def new_conn(self):
        with self.lock:
            self.nconn += 1
            return self.nconn

    # ---- codec helpers -------------------------------------------------

    def encode(self, obj):
        """One frame (with size prefix) from krelay-codec's JSON form."""
        p = subprocess.run([self.codec, "encode"],
                           input=json.dumps(obj).encode(),
                           capture_output=True)
        if p.returncode != 0 or len(p.stdout) < 8:
            raise RuntimeError("krelay-codec encode %r: %s"
                               % (obj, p.stderr.decode(errors="replace")))
        return p.stdout

    def decode_request(self, frame):
        p = subprocess.run([self.codec, "decode"], input=frame,
                           capture_output=True)
        try:
            out = json.loads(p.stdout.decode())
        except ValueError:
            return None
        return None if "error" in out else out

    # ---- responses ------------------------------------------------------

    def api_versions(self, corr, ver):
        if ver > 4:
            # KIP-511: a v0 body whatever the version, with our range
            body = struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 4)
            return self.frame(struct.pack(">i", corr) + body)
        ranges = self.advertised()
        if ver >= 3:
            body = struct.pack(">h", 0) + uvarint(len(ranges) + 1)
            for k, lo, hi in ranges:
                body += struct.pack(">hhh", k, lo, hi) + b"\x00"
            body += struct.pack(">i", 0) + b"\x00"   # ThrottleTimeMs, tags
        else:
            body = struct.pack(">hi", 0, len(ranges))
            for k, lo, hi in ranges:
                body += struct.pack(">hhh", k, lo, hi)
            if ver >= 1:
                body += struct.pack(">i", 0)           # ThrottleTimeMs
        # ApiVersions responses use header v0 at every version (KIP-511)
        return self.frame(struct.pack(">i", corr) + body)

    def metadata(self, corr, ver, req):
        names = None                  # None: every topic
        if req is not None:
            ts = req["body"].get("Topics")
            if ts:
                names = [t.get("Name") if isinstance(t, dict) else t
                         for t in ts]
        topics = []
        for name in (names if names is not None
                     else [t[0] for t in self.topics]):
            t = [x for x in self.topics if x[0] == name]
            if not t:
                topics.append({"Name": name, "ErrorCode": 3,
                               "Partitions": []})
                continue
            _, parts, tid = t[0]
            # only the fields of this version (MetadataResponse.json)
            p = [{"PartitionIndex": i, "LeaderId": self.node_id,
                  "ReplicaNodes": [self.node_id], "IsrNodes": [self.node_id]}
                 for i in range(parts)]
            if ver >= 7:
                for x in p:
                    x["LeaderEpoch"] = 0
            topic = {"Name": name, "ErrorCode": 0, "Partitions": p}
            if ver >= 10:
                topic["TopicId"] = tid
            topics.append(topic)
        broker = {"NodeId": self.node_id, "Host": self.host,
                  "Port": self.port}
        body = {"Brokers": [broker], "Topics": topics}
        if ver >= 1:
            broker["Rack"] = None
            body["ControllerId"] = self.node_id
        if ver >= 2:
            body["ClusterId"] = "fake-cluster"
        return self.encode({"apiKey": METADATA, "apiVersion": ver,
                            "header": {"CorrelationId": corr},
                            "body": body}), {"topics": names}

    def default(self, key, ver, corr, body=None):
        """The default response of (key, ver), CorrelationId patched in."""
        if body is None:
            t = self.cache.get((key, ver))
            if t is None:
                t = self.encode({"apiKey": key, "apiVersion": ver,
                                 "header": {"CorrelationId": 0},
                                 "body": {}})
                self.cache[(key, ver)] = t
            return t[:4] + struct.pack(">i", corr) + t[8:]
        return self.encode({"apiKey": key, "apiVersion": ver,
                            "header": {"CorrelationId": corr}, "body": body})

    @staticmethod
    def frame(payload):
        return struct.pack(">i", len(payload)) + payload

    def respond(self, frame):
        """(response frame or None, detail dict) for one request frame."""
        key, ver, corr = struct.unpack(">hhi", frame[4:12])
        detail = {}
        if key in self.garbage and (None in self.garbage[key] or
                                    ver in self.garbage[key]):
            detail["garbage"] = True
            return self.garbage_rsp(key, ver, corr), detail
        if key == API_VERSIONS:
            return self.api_versions(corr, ver), detail
        if not self.is_known(key, ver):
            return self.garbage_rsp(key, ver, corr), detail
        req = self.decode_request(frame)
        if req is None:
            detail["undecodable"] = True
        if key == METADATA:
            rsp, d = self.metadata(corr, ver, req)
            detail.update(d)
            return rsp, detail
        if key == SASL_HANDSHAKE:
            if req is not None:
                detail["mechanism"] = req["body"].get("Mechanism")
            return self.default(key, ver, corr, {
                "ErrorCode": 0, "Mechanisms": ["GSSAPI", "PLAIN"]}), detail
        if key == PRODUCE and req is not None:
            detail["acks"] = req["body"].get("Acks")
            detail["topics"] = [t.get("Name") or t.get("TopicId")
                                for t in req["body"].get("TopicData", [])]
            if detail["acks"] == 0:
                return None, detail
        if key == 1 and req is not None:                 # Fetch
            detail["topics"] = [t.get("Topic") or t.get("TopicId")
                                for t in req["body"].get("Topics", [])]
        return self.default(key, ver, corr), detail

    def garbage_rsp(self, key, ver, corr):
        return self.frame(struct.pack(">i", corr) +
                          ("FAKE %d v%d" % (key, ver)).encode())


def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def peer_owner(local, peer):
    """(pid, comm) of the process owning the socket at peer whose remote
    end is local, from /proc/net/tcp; (-1, "?") when not found."""
    def hexaddr(a):
        ip, port = a
        return "%s:%04X" % ("".join("%02X" % int(x)
                                    for x in reversed(ip.split("."))), port)
    want_l, want_r = hexaddr(peer), hexaddr(local)
    inode = None
    try:
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                c = line.split()
                if c[1] == want_l and c[2] == want_r:
                    inode = c[9]
                    break
    except OSError:
        pass
    if inode is None or inode == "0":
        return -1, "?"
    target = "socket:[%s]" % inode
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == target:
                    with open("/proc/%s/comm" % pid) as f:
                        return int(pid), f.read().strip()
        except OSError:
            continue
    return -1, "?"


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        b = self.server.broker
        sock = self.request
        conn = b.new_conn()
        pid, comm = peer_owner(sock.getsockname(), sock.getpeername())
        b.emit({"event": "accept", "conn": conn,
                "peer": "%s:%d" % sock.getpeername(), "pid": pid,
                "comm": comm})
        n = 0
        why = "eof"
        try:
            while True:
                size = recv_exact(sock, 4)
                if size is None:
                    break
                (ln,) = struct.unpack(">i", size)
                if ln < 8 or ln > 64 << 20:
                    why = "bad frame size %d" % ln
                    break
                payload = recv_exact(sock, ln)
                if payload is None:
                    why = "eof in a frame"
                    break
                n += 1
                frame = size + payload
                key, ver, corr = struct.unpack(">hhi", payload[:8])
                cid = None
                if len(payload) >= 10:
                    (cl,) = struct.unpack(">h", payload[8:10])
                    if cl >= 0:
                        cid = payload[10:10 + cl].decode("utf-8", "replace")
                try:
                    rsp, detail = b.respond(frame)
                except Exception as e:      # a harness bug: say it, go on
                    rsp, detail = b.garbage_rsp(key, ver, corr), {
                        "internal_error": repr(e)}
                    sys.stderr.write("fake_broker: %r\n" % e)
                b.emit({"event": "request", "conn": conn, "api_key": key,
                        "api_version": ver, "correlation_id": corr,
                        "client_id": cid, "request_bytes": len(frame),
                        "known": b.is_known(key, ver), "detail": detail,
                        "response_hex": rsp.hex() if rsp else None})
                if rsp:
                    sock.sendall(rsp)
        except OSError as e:
            why = str(e)
        b.emit({"event": "close", "conn": conn, "requests": n, "why": why})


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--codec", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready")
    ap.add_argument("--node-id", type=int, default=1)
    ap.add_argument("--topic", action="append")
    ap.add_argument("--garbage", action="append", default=[])
    args = ap.parse_args()
    broker = Broker(args)

    def stop(signum, frame):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.broker = broker
    broker.port = srv.server_address[1]
    if args.ready:
        tmp = args.ready + ".tmp"
        with open(tmp, "w") as f:
            f.write("127.0.0.1:%d\n" % broker.port)
            for name, parts, tid in broker.topics:
                f.write("topic %s %d %s\n" % (name, parts, tid))
        os.rename(tmp, args.ready)
    sys.stderr.write("fake_broker: NodeId %d at 127.0.0.1:%d\n"
                     % (broker.node_id, broker.port))
    sys.stderr.flush()
    try:
        srv.serve_forever(poll_interval=0.2)
    except SystemExit:
        pass
    sys.stderr.write("fake_broker: stopping after %d connections\n"
                     % broker.nconn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
