"""advlib.py - adversarial harness for krelay's streamed Produce audit
(issue 14, commit 6be1ee2): a recording scripted broker, krelay launcher,
Produce frame builder and audit-line comparison.

Not part of `make check`: run the adv/*.py scripts by hand (see
adv/README).  Environment:
  KRELAY   path to the krelay binary (default /tmp/i14adv-asan/krelay)
  KRCODEC  path to krelay-codec (default next to KRELAY)
"""
import json
import os
import random
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import fake_broker  # noqa: E402
from krwire import record_batch, recv_exact, crc32c, varint  # noqa: E402,F401

KRELAY = os.environ.get("KRELAY", "/tmp/i14adv-asan/krelay")
KRCODEC = os.environ.get("KRCODEC",
                         os.path.join(os.path.dirname(KRELAY), "krelay-codec"))
PRODUCE = 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def free_ports(n):
    """First of n consecutive free ports (tests/integration/free_ports.py)."""
    out = subprocess.run([sys.executable, os.path.join(
        HERE, "..", "tests", "integration", "free_ports.py"), str(n)],
        capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


# ---- the broker -----------------------------------------------------------

class Conn:
    """One upstream connection as the broker saw it."""

    def __init__(self, n):
        self.n = n
        self.raw = bytearray()          # every byte received, in order
        self.frames = []                # whole frames (size prefix incl.)
        self.events = []                # strings
        self.closed = False


class RecBroker:
    """A one-broker cluster answering ApiVersions/Metadata like
    fake_broker.py; Produce answered with an empty Produce response
    unless Acks=0.  Records every byte each connection sent.

    mode (per Produce frame, a callable or a string):
      "normal"   answer once the frame is whole
      "early"    answer as soon as the first 64 bytes are in
      "garbage"  send 64 garbage bytes once half the frame is in
      "close"    close the connection once half the frame is in
      "answer0"  answer even Acks=0 Produce requests
    """

    def __init__(self, topics=("t1:2", "t2:1")):
        class A:
            pass
        a = A()
        a.codec = KRCODEC
        self.tmp = tempfile.mkdtemp(prefix="advbroker.")
        a.log = os.path.join(self.tmp, "broker.log")
        a.node_id = 1
        a.topic = list(topics)
        a.garbage = []
        self.b = fake_broker.Broker(a)
        self.mode = "normal"
        self.slow = 0                   # seconds between reads of 64 KiB
        self.conns = []
        self.lock = threading.Lock()
        broker = self

        class H(socketserver.BaseRequestHandler):
            def handle(self):
                broker.handle(self.request)

        class S(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.srv = S(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.b.port = self.port
        self.th = threading.Thread(target=self.srv.serve_forever,
                                   kwargs={"poll_interval": 0.1}, daemon=True)
        self.th.start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def produce_rsp(self, ver, corr):
        # an empty Produce response: header v0 (v1 + tags for v9+)
        hdr = struct.pack(">i", corr) + (b"\x00" if ver >= 9 else b"")
        if ver >= 9:
            body = b"\x01" + struct.pack(">i", 0) + b"\x00"
        else:
            body = struct.pack(">i", 0)
            if ver >= 1:
                body += struct.pack(">i", 0)
        p = hdr + body
        return struct.pack(">i", len(p)) + p

    def handle(self, sock):
        with self.lock:
            c = Conn(len(self.conns) + 1)
            self.conns.append(c)
        sock.settimeout(30)
        slow = self.slow

        def rx(n):
            buf = bytearray()
            while len(buf) < n:
                if slow:
                    time.sleep(slow)
                d = sock.recv(min(n - len(buf), 65536 if slow else n))
                if not d:
                    return None
                c.raw += d
                buf += d
            return bytes(buf)
        try:
            while True:
                size = rx(4)
                if size is None:
                    break
                (ln,) = struct.unpack(">i", size)
                if ln < 8 or ln > 256 << 20:
                    c.events.append("bad size %d" % ln)
                    break
                head = rx(min(ln, 64))
                if head is None:
                    c.events.append("eof in frame")
                    break
                key, ver, corr = struct.unpack(">hhi", head[:8])
                mode = self.mode(key, ver, corr) if callable(self.mode) \
                    else self.mode
                rest_n = ln - len(head)
                if key == PRODUCE and mode == "early":
                    sock.sendall(self.produce_rsp(ver, corr))
                    c.events.append("early answer %d" % corr)
                if key == PRODUCE and mode in ("garbage", "close"):
                    half = rx(rest_n // 2)
                    if half is None:
                        c.events.append("eof in frame")
                        break
                    head += half
                    rest_n -= len(half)
                    if mode == "close":
                        c.events.append("closed mid-frame %d" % corr)
                        break
                    sock.sendall(b"\xde\xad\xbe\xef" * 16)
                    c.events.append("garbage mid-frame %d" % corr)
                rest = rx(rest_n) if rest_n else b""
                if rest is None:
                    c.events.append("eof in frame")
                    break
                frame = size + head + rest
                c.frames.append(frame)
                if key == PRODUCE:
                    if mode == "early":
                        continue
                    acks = produce_acks(frame)
                    if acks == 0 and mode != "answer0":
                        continue
                    sock.sendall(self.produce_rsp(ver, corr))
                    continue
                rsp, _ = self.b.respond(frame)
                if rsp:
                    sock.sendall(rsp)
        except OSError as e:
            c.events.append("oserror %s" % e)
        finally:
            c.closed = True
            try:
                sock.close()
            except OSError:
                pass

    def produce_frames(self):
        out = []
        for c in list(self.conns):
            for f in c.frames:
                if struct.unpack(">h", f[4:6])[0] == PRODUCE:
                    out.append(f)
        return out

    def reset(self):
        with self.lock:
            self.conns = []


def produce_acks(frame):
    """Acks of a Produce frame (size prefix included), None: cannot say."""
    try:
        p = frame[4:]
        key, ver = struct.unpack(">hh", p[:4])
        off = 8
        (cl,) = struct.unpack(">h", p[off:off + 2])
        off += 2 + max(cl, 0)
        if ver >= 9:
            off += 1                     # header tags (assume none)
        if ver >= 3:
            if ver >= 9:
                n, k = uvarint_dec(p, off)
                off = k + max(n - 1, 0)
            else:
                (tl,) = struct.unpack(">h", p[off:off + 2])
                off += 2 + max(tl, 0)
        return struct.unpack(">h", p[off:off + 2])[0]
    except (struct.error, IndexError):
        return None


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def uvarint_dec(p, off):
    n = shift = 0
    while True:
        b = p[off]
        off += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, off


# ---- Produce frames ------------------------------------------------------

def batch(n, vsize=100, seed=0, magic=2, attrs=0):
    rnd = random.Random(seed)
    vals = [bytes(rnd.getrandbits(8) for _ in range(vsize)) for _ in range(n)]
    if magic == 2:
        b = bytearray(record_batch(vals))
        if attrs:
            struct.pack_into(">h", b, 21, attrs)
        return bytes(b)
    out = b""
    for i, v in enumerate(vals):
        # MessageSet entry: offset, size, crc, magic, attrs, [ts], key, value
        m = struct.pack(">bb", magic, attrs)
        if magic == 1:
            m += struct.pack(">q", 0)
        m += struct.pack(">i", -1) + struct.pack(">i", len(v)) + v
        m = struct.pack(">I", 0) + m
        out += struct.pack(">qi", i, len(m)) + m
    return out


def _str16(s):
    if s is None:
        return struct.pack(">h", -1)
    if isinstance(s, str):
        s = s.encode()
    return struct.pack(">h", len(s)) + s


def _cstr(s):
    if s is None:
        return b"\x00"
    if isinstance(s, str):
        s = s.encode()
    return uvarint(len(s) + 1) + s


def produce(ver, topics, acks=-1, txn=None, client_id="adv", corr=1,
            timeout=30000, body_tags=b"\x00", hdr_tags=b"\x00",
            trailing=b""):
    """A Produce request frame (size prefix included).
    topics: [(name_or_uuid_bytes, [(partition, records_bytes_or_None)])]"""
    flex = ver >= 9
    h = struct.pack(">hhi", PRODUCE, ver, corr) + _str16(client_id)
    if flex:
        h += hdr_tags
    b = b""
    if ver >= 3:
        b += _cstr(txn) if flex else _str16(txn)
    b += struct.pack(">hi", acks, timeout)
    b += uvarint(len(topics) + 1) if flex else struct.pack(">i", len(topics))
    for name, parts in topics:
        if ver >= 13:
            assert isinstance(name, bytes) and len(name) == 16
            b += name
        else:
            b += _cstr(name) if flex else _str16(name)
        b += uvarint(len(parts) + 1) if flex else struct.pack(">i",
                                                             len(parts))
        for idx, rec in parts:
            b += struct.pack(">i", idx)
            if flex:
                b += b"\x00" if rec is None else uvarint(len(rec) + 1) + rec
                b += b"\x00"
            else:
                b += struct.pack(">i", -1) if rec is None else \
                    struct.pack(">i", len(rec)) + rec
        if flex:
            b += b"\x00"
    if flex:
        b += body_tags
    p = h + b + trailing
    return struct.pack(">i", len(p)) + p


# ---- krelay --------------------------------------------------------------

class Krelay:
    def __init__(self, upstream_port, rules, listener_extra="", name="k"):
        self.dir = tempfile.mkdtemp(prefix="advkrelay.")
        self.port = free_ports(3)
        base = self.port
        self.audit = os.path.join(self.dir, "audit.log")
        self.log = os.path.join(self.dir, "krelay.log")
        self.conf = os.path.join(self.dir, "krelay.ini")
        self.upstream_port = upstream_port
        self.base = base
        # ADV_LISTENER: extra [listener] keys for every krelay of a run
        # ("splice_min_bytes = 1": a lane for every skippable run)
        self.listener_extra = "\n".join(
            x for x in (listener_extra, os.environ.get("ADV_LISTENER", ""))
            if x)
        self.write_conf(rules)
        self.out = open(os.path.join(self.dir, "krelay.out"), "w")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        self.p = subprocess.Popen([KRELAY, "-c", self.conf], stdout=self.out,
                                  stderr=subprocess.STDOUT, env=env)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if self.p.poll() is not None:
                    raise RuntimeError("krelay exited: " + self.output())
                time.sleep(0.05)
        else:
            raise RuntimeError("krelay did not start")

    def write_conf(self, rules):
        with open(self.conf, "w") as f:
            f.write("""[upstream]
bootstrap_servers = 127.0.0.1:%d

[listener]
listen = 127.0.0.1:%d
advertised_host = 127.0.0.1
broker_port_base = %d
node_id_min = 1
node_id_max = 1
%s

[log]
level = debug
target = %s

[audit]
target = %s

%s
""" % (self.upstream_port, self.port, self.base, self.listener_extra,
                self.log, self.audit, rules))

    def reload(self, rules):
        self.write_conf(rules)
        self.p.send_signal(signal.SIGHUP)

    def output(self):
        if not self.out.closed:
            self.out.flush()
        with open(os.path.join(self.dir, "krelay.out")) as f:
            return f.read()

    def logtext(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def audit_lines(self):
        try:
            with open(self.audit) as f:
                return [json.loads(x) for x in f.read().splitlines() if x]
        except OSError:
            return []

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        """Stop; returns (exit status, output) - ASan reports are in it."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.out.close()
        out = self.output()
        return self.p.returncode, out

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    return s


def send_pieces(sock, data, pieces=None, pause=0.0, rnd=None):
    """Send data cut at the given sizes (list), or at random sizes."""
    i = 0
    rnd = rnd or random.Random(1)
    while i < len(data):
        if pieces is None:
            n = rnd.choice([1, 2, 3, 7, 13, 61, 100, 1000, 4096, 65536])
        elif callable(pieces):
            n = pieces(i)
        else:
            n = pieces[0] if pieces else len(data) - i
            pieces = pieces[1:]
        sock.sendall(data[i:i + n])
        i += n
        if pause:
            time.sleep(pause)


def read_frame(sock):
    try:
        size = recv_exact(sock, 4)
        if size is None:
            return None
        payload = recv_exact(sock, struct.unpack(">i", size)[0])
        return None if payload is None else size + payload
    except (socket.timeout, ConnectionResetError):
        return None


VOLATILE = ("time", "client_port", "conn_id", "upstream_us", "total_us",
            "duration_us", "request_body", "response_body", "client_id")


def norm(line):
    return {k: v for k, v in line.items() if k not in VOLATILE}


def wait_for(fn, t=10.0):
    end = time.time() + t
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    return fn()


def req_lines(k, corr=None):
    return [x for x in k.audit_lines() if x.get("type") == "request" and
            (corr is None or x.get("correlation_id") == corr)]


class Pair:
    """Two krelays on one broker: S (audit only: streams large Produce
    requests) and H (audit_body: holds them)."""

    S_RULES = "[rule a]\napi = Produce\naudit = true\n"
    H_RULES = "[rule a]\napi = Produce\naudit = true\naudit_body = true\n"

    def __init__(self, broker, s_rules=None, h_rules=None, extra=""):
        self.broker = broker
        self.s = Krelay(broker.port, s_rules or self.S_RULES, extra)
        self.h = Krelay(broker.port, h_rules or self.H_RULES, extra)

    def stop(self):
        res = []
        for k in (self.s, self.h):
            rc, out = k.stop()
            res.append((rc, out))
        return res

    def cleanup(self):
        self.s.cleanup()
        self.h.cleanup()


def asan_problems(out):
    bad = []
    for key in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                "runtime error:", "SUMMARY: "):
        if key in out:
            bad.append(key)
    return bad
