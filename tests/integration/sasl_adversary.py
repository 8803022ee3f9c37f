"""sasl_adversary.py - hostile SASL clients against krelay's passthrough
(issue 9), in front of the SASL fronts (sasl_front.py).

Usage: sasl_adversary.py HOST:PORT TOPIC

Each case opens its own connection, sends hand-built frames (pipelined,
split byte by byte, malformed) and prints one line "CASE: what happened".
The exit status is 0 when every case saw what it must; the caller checks
the fronts' events (the independent judge: as which principal each
request ran) and krelay's log.  The rule the caller configures: Produce
denied to principal User:bob.  Accounts: alice / bob with the test
passwords sasl_front's lib.sh start gives them.
"""
import socket
import struct
import sys
import time

import krwire

HOST, PORT = sys.argv[1].rsplit(":", 1)
PORT = int(PORT)
TOPIC = sys.argv[2].encode()
PW = {b"alice": b"alice-test-pw", b"bob": b"bob-test-pw"}
FAILED = []


def s16(v):
    return struct.pack(">h", v)


def s32(v):
    return struct.pack(">i", v)


def string(b):
    return s16(len(b)) + b


def frame(key, ver, corr, body):
    p = s16(key) + s16(ver) + s32(corr) + string(b"adv") + body
    return s32(len(p)) + p


def handshake(corr, mech=b"PLAIN", ver=1):
    return frame(17, ver, corr, string(mech))


def authenticate(corr, token):
    return frame(36, 1, corr, s32(len(token)) + token)


def plain(user):
    return b"\0" + user + b"\0" + PW[user]


def produce(corr, value):
    recs = krwire.record_batch([value])
    body = (s16(-1) + s16(1) + s32(5000) + s32(1) + string(TOPIC) + s32(1) +
            s32(0) + s32(len(recs)) + recs)
    return frame(0, 3, corr, body)


def connect():
    s = socket.create_connection((HOST, PORT), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def responses(s, limit=10, timeout=6.0):
    """(CorrelationId, payload) of the answers until the close or the
    time runs out; closed: whether the connection closed."""
    s.settimeout(timeout)
    out = []
    try:
        while len(out) < limit:
            head = krwire.recv_exact(s, 4)
            if head is None:
                return out, True
            n = struct.unpack(">i", head)[0]
            p = krwire.recv_exact(s, n)
            if p is None:
                return out, True
            out.append((struct.unpack_from(">i", p)[0] if n >= 4 else None,
                        p))
    except socket.timeout:
        return out, False
    except ConnectionError:
        return out, True
    return out, False


def produce_error(p):
    """Produce v3 response: the first partition's ErrorCode."""
    # corr, topics[1]: name, partitions[1]: index, error
    off = 4 + 4
    (n,) = struct.unpack_from(">h", p, off)
    off += 2 + n + 4 + 4
    return struct.unpack_from(">h", p, off)[0]


def check(case, ok, what):
    print("%s: %s%s" % (case, what, "" if ok else "  <-- WRONG"))
    if not ok:
        FAILED.append(case)


def send_slowly(s, data):
    for i in range(len(data)):
        s.sendall(data[i:i + 1])
        time.sleep(0.0005)


# 1. a second SaslHandshake pipelined behind the first exchange's steps:
#    the broker authenticates bob (and answers the second exchange
#    ILLEGAL_SASL_STATE); the Produce must not be judged as alice's
s = connect()
s.sendall(handshake(1) + authenticate(2, plain(b"bob")) + handshake(3) +
          authenticate(4, plain(b"alice")) + produce(5, b"adv-pipelined"))
rs, closed = responses(s)
p = [r for c, r in rs if c == 5]
check("pipelined-handshake", closed and (not p or produce_error(p[0]) == 29),
      "answers %s, closed %s, produce %s" %
      ([c for c, _ in rs], closed, [produce_error(x) for x in p]))
s.close()

# 2. bob's Produce behind SaslAuthenticate, every byte its own segment:
#    denied (TOPIC_AUTHORIZATION_FAILED, 29); alice's goes to the broker
#    (the bootstrap's: 0, or NOT_LEADER_OR_FOLLOWER 6)
for user, want in ((b"bob", (29,)), (b"alice", (0, 6))):
    s = connect()
    send_slowly(s, handshake(1) + authenticate(2, plain(user)) +
                produce(3, b"adv-slow-" + user))
    rs, closed = responses(s, limit=3)
    p = [r for c, r in rs if c == 3]
    check("byte-by-byte-" + user.decode(),
          len(p) == 1 and produce_error(p[0]) in want,
          "answers %s, produce %s" % ([c for c, _ in rs],
                                      [produce_error(x) for x in p]))
    s.close()

# 3. SaslHandshake v0, the raw PLAIN token and the Produce in one write
#    (the handshake's answer decides that raw tokens follow)
s = connect()
tok = plain(b"bob")
s.sendall(handshake(1, ver=0) + s32(len(tok)) + tok +
          produce(3, b"adv-raw-bob"))
s.settimeout(6)
rs, closed = [], False
try:
    h = krwire.recv_exact(s, 4)
    hs = krwire.recv_exact(s, struct.unpack(">i", h)[0])
    raw = krwire.recv_exact(s, 4)       # the raw answer: empty
    rs, closed = responses(s, limit=1)
except (socket.timeout, TypeError):
    closed = True
p = [r for c, r in rs if c == 3]
check("v0-raw-pipelined", len(p) == 1 and produce_error(p[0]) == 29,
      "produce %s" % [produce_error(x) for x in p])
s.close()

# 4. a PLAIN token without NULs, a Produce behind it: the front refuses,
#    nothing relayed, the connection closes
s = connect()
s.sendall(handshake(1) + authenticate(2, b"bob" + PW[b"bob"]) +
          produce(3, b"adv-nonul"))
rs, closed = responses(s)
check("plain-no-nul", closed and 3 not in [c for c, _ in rs],
      "answers %s, closed %s" % ([c for c, _ in rs], closed))
s.close()

# 5. a SaslAuthenticate token just above 512 KiB: krelay closes first
s = connect()
big = b"\0bob\0" + b"x" * (512 * 1024)
try:
    s.sendall(handshake(1) + authenticate(2, big))
except ConnectionError:
    pass
rs, closed = responses(s)
check("token-over-cap", closed and 2 not in [c for c, _ in rs],
      "answers %s, closed %s" % ([c for c, _ in rs], closed))
s.close()

# 6. raw v0 token whose size prefix lies (says 100000, sends 10, closes)
s = connect()
s.sendall(handshake(1, ver=0))
responses(s, limit=1)
s.sendall(s32(100000) + b"\0bob\0bob-t")
s.shutdown(socket.SHUT_WR)
rs, closed = responses(s)
check("raw-token-short", closed, "closed %s" % closed)
s.close()

# 7. SaslAuthenticate with no SaslHandshake, a Produce behind it
s = connect()
s.sendall(authenticate(1, plain(b"bob")) + produce(2, b"adv-nohs"))
rs, closed = responses(s)
check("authenticate-first", closed and 2 not in [c for c, _ in rs],
      "answers %s, closed %s" % ([c for c, _ in rs], closed))
s.close()

# 8. SCRAM client-first with a bad escape, then garbage frames
s = connect()
s.sendall(handshake(1, b"SCRAM-SHA-512") +
          authenticate(2, b"n,,n=b=ob,r=abcdefgh") + b"\xff" * 64)
rs, closed = responses(s)
check("scram-bad-escape", closed and 2 not in [c for c, _ in rs[2:]],
      "answers %s, closed %s" % ([c for c, _ in rs], closed))
s.close()

# 9. a request that is not SASL between the handshake and the token
s = connect()
s.sendall(handshake(1) + produce(2, b"adv-between") +
          authenticate(3, plain(b"alice")))
rs, closed = responses(s)
check("request-mid-exchange", closed and 2 not in [c for c, _ in rs],
      "answers %s, closed %s" % ([c for c, _ in rs], closed))
s.close()

# 10. SaslHandshake v0 naming a mechanism krelay cannot follow over raw
#     tokens (GSSAPI): krelay answers UNSUPPORTED_SASL_MECHANISM (33) with
#     the mechanisms it follows over v0; the front never sees it
s = connect()
s.sendall(handshake(1, b"GSSAPI", ver=0))
rs, closed = responses(s, limit=1)
mechs, err = None, None
if rs and rs[0][0] == 1:
    p = rs[0][1]
    (err,) = struct.unpack_from(">h", p, 4)
    (n,) = struct.unpack_from(">i", p, 6)
    off, mechs = 10, []
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">h", p, off)
        mechs.append(p[off + 2:off + 2 + ln].decode())
        off += 2 + ln
check("v0-gssapi-refused",
      err == 33 and mechs == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
      "ErrorCode %s, Mechanisms %s" % (err, mechs))
s.close()

# 11. KIP-368 re-authentication as another principal: alice logs in, then
#     a SaslHandshake, bob's SaslAuthenticate and a Produce: krelay closes
#     on bob's claim (as a broker closes on a principal change), before
#     bob's token or the Produce reach the front
s = connect()
s.sendall(handshake(1) + authenticate(2, plain(b"alice")))
rs, closed = responses(s, limit=2)
ok = [c for c, _ in rs] == [1, 2] and not closed and \
    struct.unpack_from(">h", rs[1][1], 4)[0] == 0
s.sendall(handshake(3) + authenticate(4, plain(b"bob")) +
          produce(5, b"adv-reauth-bob"))
rs, closed = responses(s)
got = [c for c, _ in rs]
check("reauth-other-principal", ok and closed and 4 not in got and
      5 not in got, "alice logged in %s; then answers %s, closed %s" %
      (ok, got, closed))
s.close()

print("FAILED: %s" % FAILED if FAILED else "all cases as expected")
sys.exit(1 if FAILED else 0)
