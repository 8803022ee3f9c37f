#!/usr/bin/python3
"""sasl_front_check.py - raw-protocol checks of sasl_front.py (run by
sasl_front.sh, which starts the mock and the fronts).

  sasl_front_check.py PORT_A PORT_B EVENTS_A FIRST_LINE EVENTS_B

PORT_A: a front with the accounts alice, bob (passwords below), every
mechanism, no session lifetime; PORT_B: the same accounts, PLAIN and
SCRAM-SHA-256, --session-lifetime-ms 1500.  Both relay to a mock broker
with the topic "sasl".  EVENTS_A, EVENTS_B: their events files, A's read
from line FIRST_LINE (1-based) on.  Every request is built and every answer decoded
here, by hand, independently of the front's own code.  Prints one line
per check; exit 0 when all passed.
"""
import base64
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from krwire import record_batch  # noqa: E402

PASSWORDS = {"alice": "alice-test-pw", "bob": "bob-test-pw"}
FAILED = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAILED", what))
    if not cond:
        FAILED.append(what)
    return cond


def s16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def read_uvarint(p, pos):
    v = shift = 0
    while True:
        b = p[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 100
        self.held = None

    def send(self, key, ver, body, flexible=False):
        self.corr += 1
        hdr = struct.pack(">hhi", key, ver, self.corr) + s16("sasl-check")
        if flexible:
            hdr += b"\x00"
        self.raw(hdr + body)
        return self.corr

    def raw(self, payload):
        data = struct.pack(">i", len(payload)) + payload
        if self.held is not None:
            self.held += data           # hold(): sent at once by flush()
        else:
            self.sock.sendall(data)

    def hold(self):
        self.held = b""

    def flush(self):
        data, self.held = self.held, None
        self.sock.sendall(data)

    def recv(self):
        """A response frame's payload, or None once the front closed."""
        head = self.exact(4)
        if head is None:
            return None
        return self.exact(struct.unpack(">i", head)[0])

    def exact(self, n):
        buf = b""
        while len(buf) < n:
            try:
                got = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not got:
                return None
            buf += got
        return buf

    def closed(self):
        """True when the front closes without sending anything more."""
        return self.recv() is None

    # -- SASL requests, decoded by hand
    def handshake(self, mech, ver=1):
        c = self.send(17, ver, s16(mech))
        p = self.recv()
        if p is None:
            return None
        corr, err, n = struct.unpack_from(">ihi", p)
        pos, mechs = 10, []
        for _ in range(n):
            ln, = struct.unpack_from(">h", p, pos)
            mechs.append(p[pos + 2:pos + 2 + ln].decode())
            pos += 2 + ln
        assert corr == c, (corr, c)
        return err, mechs

    def authenticate_send(self, token, ver=1):
        if ver >= 2:
            return self.send(36, ver, uvarint(len(token) + 1) + token + b"\x00",
                             flexible=True)
        return self.send(36, ver, struct.pack(">i", len(token)) + token)

    def authenticate_recv(self, ver=1):
        p = self.recv()
        if p is None:
            return None
        corr, = struct.unpack_from(">i", p)
        pos = 4
        if ver >= 2:
            pos += 1                                    # header tags (0)
            err, = struct.unpack_from(">h", p, pos)
            n, pos = read_uvarint(p, pos + 2)
            msg = None if n == 0 else p[pos:pos + n - 1].decode()
            pos += max(n - 1, 0)
            n, pos = read_uvarint(p, pos)
            auth = p[pos:pos + n - 1]
            pos += n - 1
        else:
            err, n = struct.unpack_from(">hh", p, pos)
            pos += 4
            msg = None if n < 0 else p[pos:pos + n].decode()
            pos += max(n, 0)
            n, = struct.unpack_from(">i", p, pos)
            auth = p[pos + 4:pos + 4 + n]
            pos += 4 + n
        life = struct.unpack_from(">q", p, pos)[0] if ver >= 1 else None
        return {"corr": corr, "err": err, "msg": msg, "auth": auth, "life": life}

    def authenticate(self, token, ver=1):
        self.authenticate_send(token, ver)
        return self.authenticate_recv(ver)

    def metadata(self):
        """Metadata v1, all topics: its CorrelationId and the response's."""
        c = self.send(3, 1, struct.pack(">i", -1))
        p = self.recv()
        return c, (None if p is None else struct.unpack_from(">i", p)[0])

    def apiversions(self, ver=0):
        c = self.send(18, ver, b"")
        p = self.recv()
        corr, err, n = struct.unpack_from(">ihi", p)
        keys = {}
        for i in range(n):
            k, lo, hi = struct.unpack_from(">hhh", p, 10 + 6 * i)
            keys[k] = (lo, hi)
        assert corr == c
        return err, keys


def plain(user, pw, authzid=""):
    return ("%s\0%s\0%s" % (authzid, user, pw)).encode()


def scram_login(cl, mech, user, pw, ver=1):
    """RFC 5802 client side; (final answer, server signature verified)."""
    hname = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mech]
    cnonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = "n=%s,r=%s" % (user, cnonce)
    r = cl.authenticate(("n,," + first_bare).encode(), ver)
    if r is None or r["err"] != 0:
        return r, False
    server_first = r["auth"].decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    assert attrs["r"].startswith(cnonce)
    salted = hashlib.pbkdf2_hmac(hname, pw.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hname).digest()
    stored = hashlib.new(hname, client_key).digest()
    without_proof = "c=biws,r=" + attrs["r"]
    auth_msg = ",".join((first_bare, server_first, without_proof)).encode()
    sig = hmac.new(stored, auth_msg, hname).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    r = cl.authenticate((without_proof + ",p=" +
                         base64.b64encode(proof).decode()).encode(), ver)
    if r is None or r["err"] != 0:
        return r, False
    server_key = hmac.new(salted, b"Server Key", hname).digest()
    want = b"v=" + base64.b64encode(hmac.new(server_key, auth_msg, hname).digest())
    return r, r["auth"] == want


def jws(claims):
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    return "%s.%s." % (enc({"alg": "none"}), enc(claims))


def oauth(token, authzid=""):
    return ("n,%s,\x01auth=Bearer %s\x01\x01" %
            ("a=" + authzid if authzid else "", token)).encode()


def main():
    pa, pb = int(sys.argv[1]), int(sys.argv[2])
    events_a, first, events_b = sys.argv[3], int(sys.argv[4]), sys.argv[5]

    # 1. ApiVersions patched; SaslHandshake v0 then a raw PLAIN token
    cl = Client(pa)
    err, keys = cl.apiversions(0)
    check(err == 0 and keys.get(17) == (0, 1) and keys.get(36) == (0, 2)
          and keys.get(3, (0, -1))[1] >= 1,
          "ApiVersions v0: SaslHandshake 0-1, SaslAuthenticate 0-2 added, "
          "Metadata %s kept" % (keys.get(3),))
    r = cl.handshake("PLAIN", 0)
    check(r == (0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]),
          "SaslHandshake v0 PLAIN: %r" % (r,))
    cl.raw(plain("alice", PASSWORDS["alice"]))
    check(cl.recv() == b"", "v0 raw PLAIN token answered by an empty raw frame")
    c, got = cl.metadata()
    check(got == c, "after v0 raw PLAIN: Metadata relayed (CorrelationId %s)" % got)
    cl.sock.close()

    # 2. SCRAM-SHA-512 with SaslAuthenticate v1, server signature checked
    cl = Client(pa)
    r = cl.handshake("SCRAM-SHA-512")
    check(r is not None and r[0] == 0, "SaslHandshake v1 SCRAM-SHA-512")
    r, verified = scram_login(cl, "SCRAM-SHA-512", "bob", PASSWORDS["bob"])
    check(r is not None and r["err"] == 0 and verified and r["life"] == 0,
          "SCRAM-SHA-512 v1: authenticated, server-final v= verified, "
          "SessionLifetimeMs 0 (%s)" % (r,))
    c, got = cl.metadata()
    check(got == c, "after SCRAM-SHA-512: Metadata relayed")
    # acks=0 Produce has no response: the next answer is the Metadata's
    body = (struct.pack(">hhi", -1, 0, 5000) + struct.pack(">i", 1) + s16("sasl")
            + struct.pack(">i", 1) + struct.pack(">i", 0))
    batch = record_batch([b"acks0-one"])
    cl.send(0, 3, body + struct.pack(">i", len(batch)) + batch)
    c, got = cl.metadata()
    check(got == c, "acks=0 Produce relayed, the following Metadata answered in turn")
    cl.sock.close()

    # 3. OAUTHBEARER with SaslAuthenticate v2 (flexible): the token's exp
    # is the session's lifetime (no configured one)
    cl = Client(pa)
    cl.handshake("OAUTHBEARER")
    now = time.time()
    r = cl.authenticate(oauth(jws({"sub": "carol", "exp": now + 60, "iat": now})), 2)
    check(r is not None and r["err"] == 0 and 50000 <= r["life"] <= 60000,
          "OAUTHBEARER v2 as carol: SessionLifetimeMs %s (the token's exp)"
          % (r and r["life"]))
    c, got = cl.metadata()
    check(got == c, "after OAUTHBEARER: Metadata relayed")
    cl.sock.close()

    # 4. an expired token: the error challenge, %x01, then 58 and closed
    cl = Client(pa)
    cl.handshake("OAUTHBEARER")
    r = cl.authenticate(oauth(jws({"sub": "carol", "exp": now - 10})), 1)
    check(r is not None and r["err"] == 0 and
          json.loads(r["auth"]) == {"status": "invalid_token"},
          "expired token: error challenge %r" % (r and r["auth"]))
    r = cl.authenticate(b"\x01", 1)
    check(r is not None and r["err"] == 58 and r["msg"] == '{"status":"invalid_token"}'
          and cl.closed(), "expired token: %%x01 -> 58 %r, closed" % (r and r["msg"]))

    # 5-7. wrong passwords, a foreign authzid: 58 with Kafka's text, closed
    cases = [
        ("PLAIN", plain("alice", "wrong-pw"),
         "Authentication failed: Invalid username or password"),
        ("PLAIN", plain("alice", PASSWORDS["alice"], "bob"),
         "Authentication failed: Client requested an authorization id that "
         "is different from username"),
    ]
    for mech, token, want in cases:
        cl = Client(pa)
        cl.handshake(mech)
        r = cl.authenticate(token, 1)
        check(r is not None and r["err"] == 58 and r["msg"] == want and
              cl.closed(), "%s refused: 58 %r, closed" % (mech, r and r["msg"]))
    cl = Client(pa)
    cl.handshake("SCRAM-SHA-256")
    r, _ = scram_login(cl, "SCRAM-SHA-256", "bob", "wrong-pw", 0)
    check(r is not None and r["err"] == 58 and r["msg"] ==
          "Authentication failed during authentication due to invalid "
          "credentials with SASL mechanism SCRAM-SHA-256" and cl.closed(),
          "SCRAM-SHA-256 wrong password (SaslAuthenticate v0): 58, closed")

    # 8. an unknown mechanism: 33 with the enabled list, closed
    cl = Client(pa)
    r = cl.handshake("GSSAPI")
    check(r == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
          and cl.closed(), "GSSAPI: 33 with the enabled list, closed")

    # 9. a request before authentication: closed, no answer; so is a
    # second ApiVersions, and a Metadata between handshake and authenticate
    cl = Client(pa)
    cl.send(3, 1, struct.pack(">i", -1))
    check(cl.closed(), "Metadata before authentication: closed, no answer")
    cl = Client(pa)
    cl.apiversions(0)
    cl.send(18, 0, b"")
    check(cl.closed(), "a second ApiVersions before authentication: closed")
    cl = Client(pa)
    cl.handshake("PLAIN")
    cl.send(3, 1, struct.pack(">i", -1))
    check(cl.closed(), "Metadata between SaslHandshake and SaslAuthenticate: closed")

    # 10. front B (1500 ms sessions): pipelined re-authentication answered
    # in order behind a relayed request; after expiry a re-authentication
    # still works; too soon a SaslHandshake gets 34; expired: closed
    cl = Client(pb)
    cl.handshake("PLAIN")
    r = cl.authenticate(plain("alice", PASSWORDS["alice"]), 1)
    check(r is not None and r["err"] == 0 and r["life"] == 1500,
          "front B: SessionLifetimeMs %s" % (r and r["life"]))
    cl.hold()                           # the three in one segment
    cm = cl.send(3, 1, struct.pack(">i", -1))
    ch = cl.send(17, 1, s16("PLAIN"))
    token = plain("alice", PASSWORDS["alice"])
    ca = cl.send(36, 1, struct.pack(">i", len(token)) + token)
    cl.flush()
    order = []
    for _ in range(3):
        p = cl.recv()
        order.append(None if p is None else struct.unpack_from(">i", p)[0])
    check(order == [cm, ch, ca], "pipelined Metadata + re-authentication "
          "answered in request order: %s (want %s)" % (order, [cm, ch, ca]))
    c, got = cl.metadata()
    check(got == c, "after re-authentication: Metadata relayed")
    time.sleep(1.7)
    r = cl.handshake("PLAIN")
    r2 = cl.authenticate(plain("alice", PASSWORDS["alice"]), 1)
    check(r == (0, ["PLAIN", "SCRAM-SHA-256"]) and r2 is not None and
          r2["err"] == 0 and r2["life"] == 1500,
          "re-authentication after expiry accepted")
    r = cl.handshake("PLAIN")
    check(r == (34, []), "a SaslHandshake within 1 s of the last "
          "re-authentication: 34 (%r)" % (r,))
    c, got = cl.metadata()
    check(got == c, "the connection stays after that 34")
    time.sleep(1.7)
    cl.send(3, 1, struct.pack(">i", -1))
    check(cl.closed(), "expired session: the next request closes the connection")

    # 11. re-authentication as another principal, or another mechanism
    cl = Client(pb)
    cl.handshake("PLAIN")
    cl.authenticate(plain("alice", PASSWORDS["alice"]), 1)
    cl.handshake("PLAIN")
    r = cl.authenticate(plain("bob", PASSWORDS["bob"]), 1)
    check(r is not None and r["err"] == 58 and r["msg"] ==
          "Cannot change principals during re-authentication from User:alice: "
          "User:bob" and cl.closed(), "re-authentication as bob refused: %r"
          % (r and r["msg"]))
    cl = Client(pb)
    cl.handshake("PLAIN")
    cl.authenticate(plain("alice", PASSWORDS["alice"]), 1)
    r = cl.handshake("SCRAM-SHA-256")
    r2 = cl.authenticate(b"n,,n=alice,r=abcdefgh", 1)
    check(r is not None and r[0] == 0 and r2 is not None and r2["err"] == 58
          and r2["msg"] == "SASL mechanism 'SCRAM-SHA-256' requested by client "
          "is not supported for re-authentication of mechanism 'PLAIN'"
          and cl.closed(), "re-authentication with another mechanism refused")

    # 12. the events these connections left
    time.sleep(0.3)
    with open(events_a) as f:
        ev = [json.loads(l) for l in f.readlines()[first - 1:]]
    with open(events_b) as f:
        ev += [json.loads(l) for l in f]
    auth = [e for e in ev if e["event"] == "auth"]
    oks = sorted((e["mechanism"], e["principal"], e["handshake_version"],
                  e["authenticate_version"], e["port"] == pb)
                 for e in auth if e["outcome"] == "ok")
    want = sorted([("PLAIN", "alice", 0, None, False),
                   ("SCRAM-SHA-512", "bob", 1, 1, False),
                   ("OAUTHBEARER", "carol", 1, 2, False)] +
                  [("PLAIN", "alice", 1, 1, True)] * 3)
    check(oks == want, "auth ok events: %s" % oks)
    check(sorted(e["outcome"] for e in auth if e["outcome"] != "ok") ==
          ["failed"] * 4 + ["reauth_failed"] * 2 + ["reauth_ok"] * 2,
          "4 failed, 2 reauth_failed, 2 reauth_ok: %s"
          % [e["outcome"] for e in auth if e["outcome"] != "ok"])
    check([e["session_lifetime_ms"] for e in auth if e["outcome"] == "reauth_ok"]
          == [1500, 1500], "reauth_ok lifetimes 1500")
    # every relayed request after its connection's authentication, as
    # that principal; nothing relayed for connections never authenticated
    principal, bad = {}, []
    for e in ev:
        if e["event"] == "auth" and e["outcome"] in ("ok", "reauth_ok"):
            principal[e["port"], e["conn"]] = e["principal"]
        elif (e["event"] == "request" and
              principal.get((e["port"], e["conn"])) != e["principal"]):
            bad.append(e)
    reqs = [e for e in ev if e["event"] == "request"]
    check(not bad and len(reqs) == 8 and
          sorted(set(e["principal"] for e in reqs)) == ["alice", "bob", "carol"],
          "%d requests relayed, each after its authentication as its "
          "principal (bad: %s)" % (len(reqs), bad))
    check(sum(1 for e in reqs if e["api_key"] == 0 and e["principal"] == "bob")
          == 1, "the acks=0 Produce relayed as bob")
    whys = [e["why"] for e in ev if e["event"] == "close"]
    for w in ("session expired (KIP-368): ApiKey 3 after 1500 ms",
              "unexpected Kafka request ApiKey 3 v1 during SASL handshake",
              "unexpected Kafka request ApiKey 18 v0 during SASL handshake",
              "unexpected Kafka request ApiKey 3 v1 during SASL authentication",
              "unsupported SASL mechanism 'GSSAPI'"):
        check(w in whys, "close event: %s" % w)
    text = open(events_a).read() + open(events_b).read()
    check(not any(pw in text for pw in PASSWORDS.values()) and
          "Bearer" not in text and "p=" not in text,
          "no password, token or proof in the events")
    print("%d check(s) failed" % len(FAILED) if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
