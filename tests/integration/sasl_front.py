#!/usr/bin/python3
"""sasl_front.py - a Kafka SASL_PLAINTEXT front for the mock brokers.

The test upstream (tests/mock/krmock, librdkafka's mock cluster) has no
SASL.  This program listens on one port per mock broker and behaves there
as a Kafka broker's SASL_PLAINTEXT listener does (Kafka's
SaslServerAuthenticator): the client authenticates with the front, then
every frame is relayed both ways, unchanged, to that mock broker.  It is
the tests' independent judge of SASL: krelay (SASL passthrough or
origination) talks to it as to a real broker, and its events file says
who authenticated how and as WHICH principal each request was relayed.
Python 3 standard library only (run with /usr/bin/python3).

Usage:
  sasl_front.py --listen PORT=UPHOST:UPPORT [--listen ...]
                (--user NAME:PASSWORD ... | --users FILE)
                [--mechanisms PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER]
                [--iterations 4096] [--session-lifetime-ms N]
                [--oauth-claim sub] [--scram-nonce-check endswith|equals]
                [--sasl-delay-ms N]
                [--advertise HOST]
                [--events FILE] [--ready-file FILE] [--host 127.0.0.1]
  sasl_front.py --selftest-rfc7677

  --listen PORT=UPHOST:UPPORT  one per broker: listen on HOST:PORT (0: the
      kernel chooses; the ready file says which), relay to UPHOST:UPPORT.
  --user NAME:PASSWORD, --users FILE (lines NAME:PASSWORD, # comments):
      the accounts.  SCRAM credentials are derived at start, per
      mechanism, with a random 16-byte salt and --iterations (Kafka's
      minimum and librdkafka's usual: 4096).  Passwords are used as they
      are (no SASLprep: use ASCII test passwords).
  --mechanisms  enabled, in the order SaslHandshake lists them (default:
      all four).
  --session-lifetime-ms N  Kafka's connections.max.reauth.ms: 0 = none.
      OAUTHBEARER sessions also end at the token's exp (Kafka takes the
      smaller).  SaslAuthenticate v1+ carries the lifetime.
  --scram-nonce-check endswith|equals  the client-final nonce must end
      with the server-first nonce (default: Kafka 3.8.1-3.9, which
      librdkafka < 2.6.1 such as kcat's 2.0.2 needs: it sends its client
      nonce twice, librdkafka#4895) or equal it (Kafka 4.x, RFC 5802).
  --sasl-delay-ms N  each SASL answer (SaslHandshake, SaslAuthenticate,
      raw tokens) sent N ms late, later answers waiting behind it: a
      broker far away, whose SASL round trips take time.
  --oauth-claim  the JWT claim naming the principal (Kafka's
      unsecuredValidatorPrincipalClaimName, default sub).
  --advertise HOST  for a direct client only (the self-test): rewrite
      the brokers of Metadata responses whose address is one of the
      --listen upstreams to HOST:that front's port.  Never with krelay
      (krelay rewrites Metadata itself and dials fronts by dial.N).
  --events FILE  JSON lines, one per event, flushed at once (below).
  --ready-file FILE  written (atomically) once every port listens:
      one line "HOST:PORT,HOST:PORT,..." in --listen order.
  --selftest-rfc7677  run this file's SCRAM server on the RFC 7677
      section 3 example (fixed nonces and salt) and exit 0 when it
      reproduces the RFC's server-first and server-final messages.

What it does, as Kafka's SaslServerAuthenticator does:
- Before authentication: ApiVersions (once successfully; an
  UNSUPPORTED_VERSION answer allows another), then SaslHandshake v0-1.
  Any other request closes the connection without an answer ("Unexpected
  Kafka request of type ... during SASL handshake"); frames over 512 KiB
  too (sasl.server.max.receive.size).
- ApiVersions before authentication is relayed to the mock (its versions
  stay truthful) and its response patched: SaslHandshake 0-1 and
  SaslAuthenticate 0-2 are added (replacing what the mock says, if
  anything).  An error response (the mock's UNSUPPORTED_VERSION answer,
  v0 layout) is passed as it is.  ApiVersions after authentication is a
  relayed request like any other, patched the same way.
- SaslHandshake: an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM (33)
  with the enabled list, then the connection closes.  v0: the frames that
  follow are raw tokens, each answered by a raw size-prefixed frame; a
  failure closes with no answer.  v1: SaslAuthenticate v0-2 requests
  carry the tokens; any other request closes the connection.
- Failures: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED (58) with
  Kafka's ErrorMessage, then the connection closes.  Kafka's messages:
  PLAIN "Authentication failed: Invalid username or password" (and its
  authzid / empty-field messages); SCRAM and malformed messages the
  generic "Authentication failed during authentication due to invalid
  credentials with SASL mechanism M" (Kafka sends no SCRAM "e=" server
  final, and neither does the front); OAUTHBEARER (RFC 7628): an invalid
  token is answered with the error challenge {"status":"invalid_token"}
  (ErrorCode 0), the client's %x01 then fails with that text.
- OAUTHBEARER tokens: unsecured JWS as Kafka's default
  OAuthBearerUnsecuredJws validator: header alg "none", empty signature,
  the --oauth-claim claim (principal), exp required and in the future,
  iat (if present) not in the future and before exp; no clock skew.
- Success: SaslAuthenticate v1+ carries SessionLifetimeMs.  With a
  lifetime, once it has passed the next frame that is not a SaslHandshake
  closes the connection (KIP-368's expired-session close).  A SaslHandshake
  after authentication starts a re-authentication (KIP-368) when the
  session has a lifetime and the last one started at least 1 s before;
  otherwise it is answered ILLEGAL_SASL_STATE (34) and the connection
  stays (Kafka's KafkaApis answer).  A re-authentication must use the same
  mechanism (else the next SaslAuthenticate fails with Kafka's message) and
  end with the same principal (else "Cannot change principals during
  re-authentication from User:A: User:B"); a failure closes.  Answers stay
  in request order: SASL answers wait behind relayed requests still in
  flight (a per-connection queue).  A non-SaslAuthenticate request during
  a re-authentication closes the connection (Kafka answers it with an
  error first; the front does not build error responses for other APIs).
- Produce with acks=0 has no response: nothing is awaited for it (the
  mock of librdkafka 2.0.2 answers one anyway: that answer is dropped).

Events (--events), one JSON object per line:
  {"event":"listen","port":P,"upstream":"H:P"}
  {"event":"accept","port":P,"conn":ID,"peer":"H:P"}
  {"event":"apiversions","port":P,"conn":ID,"api_version":V,
   "correlation_id":C,"error_code":E}   (before authentication: relayed)
  {"event":"handshake","port":P,"conn":ID,"mechanism":M,
   "handshake_version":V,"error_code":E,"reauth":bool}
  {"event":"auth","port":P,"conn":ID,"mechanism":M,"principal":NAME|null,
   "user":NAME|null,"outcome":"ok|failed|reauth_ok|reauth_failed",
   "handshake_version":V,"authenticate_version":V|null (v0 raw),
   "session_lifetime_ms":N,"error":MESSAGE|null}
  {"event":"request","port":P,"conn":ID,"principal":NAME,"api_key":K,
   "api_version":V,"correlation_id":C}   (every relayed request after
   authentication: nothing else reaches the mock but the ApiVersions
   above)
  {"event":"close","port":P,"conn":ID,"why":TEXT}
Principals are the names (Kafka's User:NAME without "User:"); "user" is
the name a client claimed (also on failures).  No password, token, proof
or key is ever written anywhere.
"""

import argparse
import asyncio
import base64
import collections
import hashlib
import hmac
import json
import os
import secrets
import signal
import struct
import sys
import time

API_PRODUCE = 0
API_METADATA = 3
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36

ERR_NONE = 0
ERR_UNSUPPORTED_SASL_MECHANISM = 33
ERR_ILLEGAL_SASL_STATE = 34
ERR_UNSUPPORTED_VERSION = 35
ERR_SASL_AUTHENTICATION_FAILED = 58

SASL_HANDSHAKE_MAX = 1
SASL_AUTHENTICATE_MAX = 2
MAX_PREAUTH_FRAME = 524288          # Kafka's sasl.server.max.receive.size
MAX_FRAME = 256 * 1024 * 1024
MIN_REAUTH_INTERVAL_S = 1.0         # KafkaChannel.MIN_REAUTH_INTERVAL
ALL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class WireError(Exception):
    """A frame that does not decode as the front expects."""


# ---- the few Kafka primitives the front decodes (header, SASL, patches)

class Reader:
    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise WireError("truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def int16(self):
        return struct.unpack(">h", self.take(2))[0]

    def int32(self):
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self):
        v = shift = 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 28:
                raise WireError("varint too long")

    def nstring(self):                      # int16 length, -1 = null
        n = self.int16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def cnstring(self):                     # compact: uvarint length + 1
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def bytes32(self):
        n = self.int32()
        return b"" if n < 0 else self.take(n)

    def cbytes(self):
        n = self.uvarint() - 1
        return b"" if n < 0 else self.take(n)

    def tagged(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def nstring(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def cnstring(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def request_header_flexible(key, version):
    """Header v2 (tagged fields) for the requests the front decodes."""
    return ((key == API_API_VERSIONS and version >= 3) or
            (key == API_SASL_AUTHENTICATE and version >= 2) or
            (key == API_PRODUCE and version >= 9) or
            (key == API_METADATA and version >= 9))


def parse_request_header(payload):
    """(api_key, api_version, correlation_id, body Reader)."""
    r = Reader(payload)
    key, version, corr = r.int16(), r.int16(), r.int32()
    r.nstring()                                         # ClientId
    if request_header_flexible(key, version):
        r.tagged()
    return key, version, corr, r


def produce_acks(version, r):
    """Produce's Acks (0: the broker sends no response)."""
    if version >= 3:
        if version >= 9:
            r.cnstring()                                # TransactionalId
        else:
            r.nstring()
    return r.int16()


def patch_apiversions(version, payload):
    """An ApiVersions response with SaslHandshake 0-1 and SaslAuthenticate
    0-2 in its ApiKeys (the mock has neither).  Its header is always v0.
    Error responses (v0 layout) are returned as they are."""
    r = Reader(payload, 4)
    err = r.int16()
    if err != ERR_NONE:
        return payload
    flexible = version >= 3
    n = r.uvarint() - 1 if flexible else r.int32()
    entries = {}
    for _ in range(max(n, 0)):
        k, lo, hi = r.int16(), r.int16(), r.int16()
        start = r.pos
        if flexible:
            r.tagged()
        entries[k] = (lo, hi, payload[start:r.pos])
    tag0 = b"\x00" if flexible else b""
    entries[API_SASL_HANDSHAKE] = (0, SASL_HANDSHAKE_MAX, tag0)
    entries[API_SASL_AUTHENTICATE] = (0, SASL_AUTHENTICATE_MAX, tag0)
    out = bytearray(payload[:6])
    out += uvarint(len(entries) + 1) if flexible else struct.pack(">i", len(entries))
    for k in sorted(entries):
        lo, hi, tags = entries[k]
        out += struct.pack(">hhh", k, lo, hi) + tags
    out += payload[r.pos:]
    return bytes(out)


def rewrite_metadata(version, payload, addrs):
    """A Metadata response whose brokers at an upstream address in addrs
    ((host, port) -> (host, port)) are named by that front instead."""
    flexible = version >= 9
    r = Reader(payload, 4)
    if flexible:
        r.tagged()                                      # response header v1
    if version >= 3:
        r.int32()                                       # ThrottleTimeMs
    head = payload[:r.pos]
    n = r.uvarint() - 1 if flexible else r.int32()
    out = bytearray(head)
    out += uvarint(n + 1) if flexible else struct.pack(">i", n)
    for _ in range(max(n, 0)):
        node = r.int32()
        host = r.cnstring() if flexible else r.nstring()
        port = r.int32()
        rest = r.pos
        if version >= 1:
            r.cnstring() if flexible else r.nstring()   # Rack
        if flexible:
            r.tagged()
        tail = payload[rest:r.pos]
        host, port = addrs.get((host, port), (host, port))
        out += struct.pack(">i", node)
        out += cnstring(host) if flexible else nstring(host)
        out += struct.pack(">i", port) + tail
    out += payload[r.pos:]
    return bytes(out)


# ---- SASL mechanisms, server side ------------------------------------

CONTINUE, DONE, FAIL = "continue", "done", "fail"


def generic_failure(mechanism, reauth):
    return ("Authentication failed during %s due to invalid credentials "
            "with SASL mechanism %s" %
            ("re-authentication" if reauth else "authentication", mechanism))


class Plain:
    """RFC 4616 as Kafka's PlainSaslServer checks it."""

    def __init__(self, front, reauth):
        self.front = front
        self.reauth = reauth
        self.user = self.principal = None
        self.credential_expiry_ms = None

    def step(self, token):
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            return FAIL, None, generic_failure("PLAIN", self.reauth)
        authzid, user, password = parts
        self.user = user or None
        if not user:
            return FAIL, None, "Authentication failed: username not specified"
        if not password:
            return FAIL, None, "Authentication failed: password not specified"
        known = self.front.passwords.get(user)
        if known is None or not hmac.compare_digest(known.encode(),
                                                    password.encode()):
            return FAIL, None, "Authentication failed: Invalid username or password"
        if authzid and authzid != user:
            return FAIL, None, ("Authentication failed: Client requested an "
                                "authorization id that is different from username")
        self.principal = user
        return DONE, b"", None


def scram_saslname(s):
    return s.replace("=2C", ",").replace("=3D", "=")


class ScramCredential:
    """RFC 5802 section 3: what a server stores for a user."""

    def __init__(self, hname, password, salt, iterations):
        salted = hashlib.pbkdf2_hmac(hname, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hname).digest()
        self.salt = salt
        self.iterations = iterations
        self.stored_key = hashlib.new(hname, client_key).digest()
        self.server_key = hmac.new(salted, b"Server Key", hname).digest()


class Scram:
    """RFC 5802 / RFC 7677 server side, as Kafka's ScramSaslServer."""

    def __init__(self, mechanism, credentials, reauth, nonce=None,
                 nonce_check="endswith"):
        self.mechanism = mechanism
        self.nonce_check = nonce_check          # "endswith" or "equals"
        self.hname = SCRAM_HASHES[mechanism]
        self.credentials = credentials          # name -> ScramCredential
        self.reauth = reauth
        self.nonce_suffix = nonce               # tests only
        self.user = self.principal = None
        self.credential_expiry_ms = None
        self.stage = 0

    def fail(self):
        return FAIL, None, generic_failure(self.mechanism, self.reauth)

    def step(self, token):
        try:
            msg = token.decode("utf-8")
        except UnicodeDecodeError:
            return self.fail()
        if self.stage == 0:
            return self.client_first(msg)
        if self.stage == 1:
            return self.client_final(msg)
        return self.fail()

    def client_first(self, msg):
        # gs2-header "n," [ "a=" authzid ] "," then client-first-bare
        if not msg.startswith("n,"):
            return self.fail()              # no channel binding in Kafka
        comma = msg.find(",", 2)
        if comma < 0:
            return self.fail()
        authzid = msg[2:comma]
        if authzid and not authzid.startswith("a="):
            return self.fail()
        self.gs2_header = msg[:comma + 1]
        self.client_first_bare = msg[comma + 1:]
        attrs = self.client_first_bare.split(",")
        if (len(attrs) < 2 or not attrs[0].startswith("n=") or
                not attrs[1].startswith("r=") or len(attrs[1]) < 3):
            return self.fail()
        if len(attrs) > 2:
            return self.fail()  # extensions: Kafka's tokenauth only; no tokens here
        self.user = scram_saslname(attrs[0][2:])
        cred = self.credentials.get(self.user)
        if cred is None:
            return self.fail()
        if authzid and scram_saslname(authzid[2:]) != self.user:
            return FAIL, None, ("Authentication failed: Client requested an "
                                "authorization id that is different from username")
        suffix = self.nonce_suffix
        if suffix is None:
            suffix = base64.b64encode(secrets.token_bytes(18)).decode()
        self.nonce = attrs[1][2:] + suffix
        self.cred = cred
        self.server_first = "r=%s,s=%s,i=%d" % (
            self.nonce, base64.b64encode(cred.salt).decode(), cred.iterations)
        self.stage = 1
        return CONTINUE, self.server_first.encode(), None

    def client_final(self, msg):
        p = msg.rfind(",p=")
        if p < 0:
            return self.fail()
        without_proof = msg[:p]
        attrs = without_proof.split(",")
        if (len(attrs) < 2 or attrs[0] != "c=" +
                base64.b64encode(self.gs2_header.encode()).decode() or
                not attrs[1].startswith("r=")):
            return self.fail()
        # Kafka 3.8.1-3.9 accept a nonce that ends with the server's (what
        # librdkafka < 2.6.1 sends: its client nonce once more in front,
        # librdkafka#4895); Kafka 4 wants it equal (RFC 5802, CVE-2024-56128)
        nonce = attrs[1][2:]
        if not (nonce == self.nonce or (self.nonce_check == "endswith" and
                                        nonce.endswith(self.nonce))):
            return self.fail()
        try:
            proof = base64.b64decode(msg[p + 3:], validate=True)
        except ValueError:
            return self.fail()
        auth_message = ",".join((self.client_first_bare, self.server_first,
                                 without_proof)).encode()
        signature = hmac.new(self.cred.stored_key, auth_message,
                             self.hname).digest()
        if len(proof) != len(signature):
            return self.fail()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hname, client_key).digest(),
                                   self.cred.stored_key):
            return self.fail()
        server_signature = hmac.new(self.cred.server_key, auth_message,
                                    self.hname).digest()
        self.stage = 2
        self.principal = self.user
        return DONE, b"v=" + base64.b64encode(server_signature), None


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class OAuthBearer:
    """RFC 7628 client response and Kafka's unsecured JWS validation
    (OAuthBearerSaslServer with OAuthBearerUnsecuredValidatorCallbackHandler)."""

    def __init__(self, claim, reauth):
        self.claim = claim
        self.reauth = reauth
        self.user = self.principal = None
        self.credential_expiry_ms = None
        self.error = None

    def step(self, token):
        if token == b"\x01" and self.error is not None:
            return FAIL, None, self.error
        self.error = None
        try:
            msg = token.decode("utf-8")
        except UnicodeDecodeError:
            return FAIL, None, generic_failure("OAUTHBEARER", self.reauth)
        # gs2-header kvsep *(key=value kvsep) kvsep
        parts = msg.split("\x01")
        if len(parts) < 3 or parts[-1] != "" or parts[-2] != "":
            return FAIL, None, generic_failure("OAUTHBEARER", self.reauth)
        gs2 = parts[0].split(",")
        if len(gs2) != 3 or gs2[0] != "n" or gs2[2] != "" or (
                gs2[1] and not gs2[1].startswith("a=")):
            return FAIL, None, generic_failure("OAUTHBEARER", self.reauth)
        authzid = gs2[1][2:]
        kv = dict(p.split("=", 1) for p in parts[1:-2] if "=" in p)
        auth = kv.get("auth", "")
        if not auth.startswith("Bearer "):
            return FAIL, None, generic_failure("OAUTHBEARER", self.reauth)
        why = self.validate(auth[7:].strip())
        if why is not None:
            # an error challenge; the client's %x01 then fails with it
            self.error = json.dumps({"status": "invalid_token"},
                                    separators=(",", ":"))
            self.why = why
            return CONTINUE, self.error.encode(), None
        if authzid and authzid != self.user:
            return FAIL, None, (
                "Authentication failed: Client requested an authorization id "
                "(%s) that is different from the token's principal name (%s)"
                % (authzid, self.user))
        self.principal = self.user
        return DONE, b"", None

    def validate(self, jws):
        """None when valid, else why (for the front's log, not the client)."""
        parts = jws.split(".")
        if len(parts) != 3 or parts[2] != "":
            return "not an unsecured JWS"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
        except (ValueError, UnicodeDecodeError):
            return "undecodable JWS"
        if not isinstance(header, dict) or header.get("alg") != "none":
            return "alg is not none"
        if not isinstance(claims, dict):
            return "claims are not an object"
        name = claims.get(self.claim)
        if not isinstance(name, str) or not name.strip():
            return "no %s claim" % self.claim
        self.user = name
        exp, iat = claims.get("exp"), claims.get("iat")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            return "no exp claim"
        if iat is not None and (isinstance(iat, bool) or
                                not isinstance(iat, (int, float))):
            return "iat is not a number"
        now_ms = time.time() * 1000
        exp_ms = int(exp * 1000)
        if now_ms >= exp_ms:
            return "expired"
        if iat is not None:
            if iat * 1000 > now_ms:
                return "issued in the future"
            if iat * 1000 >= exp_ms:
                return "iat not before exp"
        self.credential_expiry_ms = exp_ms
        return None


# ---- connections ------------------------------------------------------

S_HANDSHAKE_OR_VERSIONS = "handshake_or_versions"
S_HANDSHAKE = "handshake"
S_AUTHENTICATE = "authenticate"            # SaslAuthenticate requests
S_AUTHENTICATE_RAW = "authenticate_raw"    # after SaslHandshake v0
S_REAUTH_BAD_MECHANISM = "reauth_bad_mechanism"
S_COMPLETE = "complete"


class Close(Exception):
    """End this connection now: why."""


class Conn:
    serial = 0

    def __init__(self, front, port, upstream, reader, writer):
        Conn.serial += 1
        self.id = Conn.serial
        self.front = front
        self.port = port
        self.upstream = upstream
        self.reader = reader
        self.writer = writer
        self.up_reader = self.up_writer = None
        self.up_task = None
        self.state = S_HANDSHAKE_OR_VERSIONS
        self.mechanism = self.principal = None
        self.mech = None
        self.reauth_from = None         # (mechanism, principal) during one
        self.handshake_version = None
        self.authenticate_version = None
        self.expiry = None              # monotonic seconds, or None
        self.last_reauth_start = None
        self.out = asyncio.Queue()      # futures, in request order
        self.relays = collections.deque()   # (corr, future, transform)
        self.closed = False
        self.closing = False            # a last answer, then close

    def event(self, kind, **kw):
        self.front.event(kind, port=self.port, conn=self.id, **kw)

    # -- output in request order
    def answer(self, data):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        delay = self.front.sasl_delay_ms
        if delay > 0:
            loop.call_later(delay / 1000,
                            lambda: fut.done() or fut.set_result(data))
        else:
            fut.set_result(data)
        self.out.put_nowait(fut)

    def answer_then_close(self, data, why):
        if data is not None:
            self.answer(data)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(Close(why))
        self.out.put_nowait(fut)
        self.closing = True

    async def writer_loop(self):
        try:
            while True:
                fut = await self.out.get()
                data = await fut
                if isinstance(data, Close):
                    self.shut(str(data))
                    return
                self.writer.write(data)
                await self.writer.drain()
        except ConnectionError:
            self.shut("client closed (writing)")

    # -- upstream
    async def ensure_upstream(self):
        if self.up_writer is not None:
            return
        host, port = self.upstream
        try:
            self.up_reader, self.up_writer = await asyncio.open_connection(host, port)
        except OSError as e:
            raise Close("upstream %s:%d: %s" % (host, port, e.strerror or e))
        self.up_task = asyncio.ensure_future(self.upstream_loop())

    async def upstream_loop(self):
        why = "upstream closed"
        try:
            while True:
                n = struct.unpack(">i", await self.up_reader.readexactly(4))[0]
                if n < 4 or n > MAX_FRAME:
                    why = "upstream frame of %d bytes" % n
                    break
                payload = await self.up_reader.readexactly(n)
                corr = struct.unpack_from(">i", payload)[0]
                # acks=0 Produce: Kafka sends nothing, librdkafka 2.0.2's
                # mock answers; the client expects nothing: dropped
                while (self.relays and self.relays[0][1] is None and
                       self.relays[0][0] != corr):
                    self.relays.popleft()
                if not self.relays:
                    why = "upstream response %d with nothing in flight" % corr
                    break
                want, fut, transform = self.relays.popleft()
                if fut is None:
                    continue
                if corr != want:
                    why = "upstream CorrelationId %d, want %d" % (corr, want)
                    break
                try:
                    payload = transform(payload) if transform else payload
                except WireError as e:
                    why = "upstream response %d: %s" % (corr, e)
                    break
                fut.set_result(frame(payload))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            return
        self.shut(why)

    async def relay(self, payload, key, version, corr, expect_response):
        await self.ensure_upstream()
        fut = None
        if expect_response:
            transform = None
            if key == API_API_VERSIONS:
                transform = lambda p, v=version: patch_apiversions(v, p)
            elif key == API_METADATA and self.front.advertise_map:
                amap = self.front.advertise_map
                transform = lambda p, v=version: rewrite_metadata(v, p, amap)
            fut = asyncio.get_running_loop().create_future()
            self.relays.append((corr, fut, transform))
            self.out.put_nowait(fut)
        else:
            self.relays.append((corr, None, None))
        self.up_writer.write(frame(payload))
        return fut

    def shut(self, why):
        if self.closed:
            return
        self.closed = True
        self.event("close", why=why)
        self.front.log("conn %d (port %d): closed: %s" % (self.id, self.port, why))
        for w in (self.writer, self.up_writer):
            if w is not None:
                try:
                    w.close()
                except Exception:
                    pass
        if self.up_task is not None:
            self.up_task.cancel()
        for _, fut, _ in self.relays:
            if fut is not None and not fut.done():
                fut.cancel()

    # -- the client side
    async def run(self):
        peer = self.writer.get_extra_info("peername")
        self.event("accept", peer="%s:%d" % peer[:2] if peer else None)
        wtask = asyncio.ensure_future(self.writer_loop())
        why = "client closed"
        try:
            while not self.closed and not self.closing:
                head = await self.reader.readexactly(4)
                n = struct.unpack(">i", head)[0]
                limit = MAX_FRAME if self.state == S_COMPLETE else MAX_PREAUTH_FRAME
                if n < 0 or n > limit:
                    raise Close("frame of %d bytes in state %s" % (n, self.state))
                payload = await self.reader.readexactly(n)
                await self.on_frame(payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Close as e:
            why = str(e)
        except WireError as e:
            why = "malformed request: %s" % e
        except asyncio.CancelledError:
            why = "front stopping"
        if self.closing and not self.closed:
            # the last answers, then the writer closes
            try:
                await asyncio.wait_for(wtask, 30)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        self.shut(why)
        wtask.cancel()

    async def on_frame(self, payload):
        st = self.state
        if st == S_AUTHENTICATE_RAW:
            return self.raw_token(payload)
        key, version, corr, body = parse_request_header(payload)
        if st == S_COMPLETE:
            if key == API_SASL_HANDSHAKE:
                return self.reauth_handshake(version, corr, body)
            if self.expiry is not None and time.monotonic() > self.expiry:
                raise Close("session expired (KIP-368): ApiKey %d after %d ms"
                            % (key, self.lifetime_ms))
            if key == API_SASL_AUTHENTICATE:
                return self.answer(self.authenticate_response(
                    version, corr, ERR_ILLEGAL_SASL_STATE,
                    "SaslAuthenticate request received after successful "
                    "authentication", b"", 0))
            expect = True
            if key == API_PRODUCE:
                expect = produce_acks(version, body) != 0
            self.event("request", principal=self.principal, api_key=key,
                       api_version=version, correlation_id=corr)
            await self.relay(payload, key, version, corr, expect)
            return
        if st in (S_HANDSHAKE_OR_VERSIONS, S_HANDSHAKE):
            if key == API_API_VERSIONS and st == S_HANDSHAKE_OR_VERSIONS:
                fut = await self.relay(payload, key, version, corr, True)
                rsp = await fut
                err = struct.unpack_from(">h", rsp, 8)[0]
                self.event("apiversions", api_version=version,
                           correlation_id=corr, error_code=err)
                if err == ERR_NONE:
                    self.state = S_HANDSHAKE
                return
            if key == API_SASL_HANDSHAKE:
                return self.handshake(version, corr, body, reauth=False)
            raise Close("unexpected Kafka request ApiKey %d v%d during SASL "
                        "handshake" % (key, version))
        # S_AUTHENTICATE, S_REAUTH_BAD_MECHANISM
        if key != API_SASL_AUTHENTICATE:
            raise Close("unexpected Kafka request ApiKey %d v%d during SASL "
                        "authentication" % (key, version))
        if version > SASL_AUTHENTICATE_MAX:
            raise Close("SaslAuthenticate v%d not supported" % version)
        token = body.cbytes() if version >= 2 else body.bytes32()
        self.authenticate_version = version
        if st == S_REAUTH_BAD_MECHANISM:
            return self.failed(version, corr, self.bad_mechanism)
        outcome, rsp, err = self.mech.step(token)
        if outcome == FAIL:
            return self.failed(version, corr, err)
        lifetime = 0
        if outcome == DONE:
            err = self.principal_check()
            if err is not None:
                return self.failed(version, corr, err)
            lifetime = self.complete()
        self.answer(self.authenticate_response(version, corr, ERR_NONE, None,
                                               rsp or b"", lifetime))

    def handshake(self, version, corr, body, reauth):
        if version > SASL_HANDSHAKE_MAX:
            raise Close("SaslHandshake v%d not supported" % version)
        mechanism = body.nstring()
        enabled = self.front.mechanisms
        err = ERR_NONE if mechanism in enabled else ERR_UNSUPPORTED_SASL_MECHANISM
        self.event("handshake", mechanism=mechanism, handshake_version=version,
                   error_code=err, reauth=reauth)
        rsp = frame(struct.pack(">ih", corr, err) + struct.pack(">i", len(enabled)) +
                    b"".join(nstring(m) for m in enabled))
        if err != ERR_NONE:
            return self.answer_then_close(rsp, "unsupported SASL mechanism %r"
                                          % mechanism)
        self.answer(rsp)
        self.handshake_version = version
        self.authenticate_version = None
        self.state = S_AUTHENTICATE if version >= 1 else S_AUTHENTICATE_RAW
        if reauth and mechanism != self.reauth_from[0]:
            self.bad_mechanism = (
                "SASL mechanism '%s' requested by client is not supported for "
                "re-authentication of mechanism '%s'" % (mechanism, self.reauth_from[0]))
            self.state = S_REAUTH_BAD_MECHANISM
            self.pending_mechanism = mechanism
            return
        self.mechanism = mechanism
        self.mech = self.front.new_mechanism(mechanism, reauth)

    def reauth_handshake(self, version, corr, body):
        now = time.monotonic()
        if self.expiry is None or (self.last_reauth_start is not None and
                                   now - self.last_reauth_start < MIN_REAUTH_INTERVAL_S):
            # KafkaApis: a SaslHandshake after authentication
            self.event("handshake", mechanism=None, handshake_version=version,
                       error_code=ERR_ILLEGAL_SASL_STATE, reauth=False)
            return self.answer(frame(struct.pack(">ihi", corr,
                                                 ERR_ILLEGAL_SASL_STATE, 0)))
        self.last_reauth_start = now
        self.reauth_from = (self.mechanism, self.principal)
        self.handshake(version, corr, body, reauth=True)

    def principal_check(self):
        if self.reauth_from and self.mech.principal != self.reauth_from[1]:
            return ("Cannot change principals during re-authentication from "
                    "User:%s: User:%s" % (self.reauth_from[1], self.mech.principal))
        return None

    def complete(self):
        """Authentication done: the session's lifetime (ms, 0 = none)."""
        cfg = self.front.session_lifetime_ms
        cred = self.mech.credential_expiry_ms
        lifetime, expiring = 0, False
        if cred is not None or cfg > 0:
            expiring = True
            left = cred - int(time.time() * 1000) if cred is not None else None
            if cred is None:
                lifetime = cfg
            elif cfg <= 0:
                lifetime = left
            else:
                lifetime = min(left, cfg)
            lifetime = max(lifetime, 0)
        self.expiry = time.monotonic() + lifetime / 1000 if expiring else None
        self.lifetime_ms = lifetime
        outcome = "reauth_ok" if self.reauth_from else "ok"
        self.principal = self.mech.principal
        self.state = S_COMPLETE
        self.event("auth", mechanism=self.mechanism, principal=self.principal,
                   user=self.mech.user, outcome=outcome,
                   handshake_version=self.handshake_version,
                   authenticate_version=self.authenticate_version,
                   session_lifetime_ms=lifetime, error=None)
        self.front.log("conn %d (port %d): %s as %s (%s), session lifetime %d ms"
                       % (self.id, self.port, outcome, self.principal,
                          self.mechanism, lifetime))
        self.reauth_from = None
        return lifetime

    def failed_event(self, err):
        mech = self.mechanism
        if self.state == S_REAUTH_BAD_MECHANISM:
            mech = self.pending_mechanism
        self.event("auth", mechanism=mech, principal=None,
                   user=self.mech.user if self.mech else None,
                   outcome="reauth_failed" if self.reauth_from else "failed",
                   handshake_version=self.handshake_version,
                   authenticate_version=self.authenticate_version,
                   session_lifetime_ms=0, error=err)

    def failed(self, version, corr, err):
        self.failed_event(err)
        self.answer_then_close(
            self.authenticate_response(version, corr, ERR_SASL_AUTHENTICATION_FAILED,
                                       err, b"", 0),
            "authentication failed: %s" % err)

    def raw_token(self, token):
        outcome, rsp, err = self.mech.step(token)
        if outcome == FAIL:
            self.failed_event(err)
            raise Close("authentication failed (v0 raw): %s" % err)
        if outcome == DONE:
            err = self.principal_check()
            if err is not None:
                self.failed_event(err)
                raise Close("authentication failed (v0 raw): %s" % err)
            self.complete()
        self.answer(frame(rsp or b""))

    @staticmethod
    def authenticate_response(version, corr, err, message, auth, lifetime):
        if version >= 2:
            out = struct.pack(">i", corr) + b"\x00"         # header v1
            out += struct.pack(">h", err) + cnstring(message)
            out += uvarint(len(auth) + 1) + auth
        else:
            out = struct.pack(">ih", corr, err) + nstring(message)
            out += struct.pack(">i", len(auth)) + auth
        if version >= 1:
            out += struct.pack(">q", lifetime)
        if version >= 2:
            out += b"\x00"
        return frame(out)


class Front:
    def __init__(self, args):
        self.mechanisms = args.mechanisms
        self.session_lifetime_ms = args.session_lifetime_ms
        self.sasl_delay_ms = args.sasl_delay_ms
        self.claim = args.oauth_claim
        self.passwords = args.accounts
        self.scram = {}
        for mech, hname in SCRAM_HASHES.items():
            if mech in self.mechanisms:
                self.scram[mech] = {
                    u: ScramCredential(hname, p, secrets.token_bytes(16),
                                       args.iterations)
                    for u, p in self.passwords.items()}
        self.events = open(args.events, "a", encoding="utf-8") if args.events else None
        self.advertise_map = {}
        self.args = args

    def log(self, msg):
        sys.stderr.write("sasl_front: %s\n" % msg)
        sys.stderr.flush()

    def event(self, kind, **kw):
        if self.events is None:
            return
        rec = {"event": kind}
        rec.update(kw)
        self.events.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self.events.flush()

    def new_mechanism(self, mechanism, reauth):
        if mechanism == "PLAIN":
            return Plain(self, reauth)
        if mechanism in SCRAM_HASHES:
            return Scram(mechanism, self.scram[mechanism], reauth,
                         nonce_check=self.args.scram_nonce_check)
        return OAuthBearer(self.claim, reauth)

    async def serve(self):
        servers, bound = [], []
        for port, up in self.args.listen:
            async def handle(r, w, up=up):
                port = w.get_extra_info("sockname")[1]
                await Conn(self, port, up, r, w).run()
            srv = await asyncio.start_server(handle, self.args.host, port)
            real = srv.sockets[0].getsockname()[1]
            servers.append(srv)
            bound.append(real)
            self.event("listen", port=real, upstream="%s:%d" % up)
            if self.args.advertise:
                self.advertise_map[up] = (self.args.advertise, real)
        if self.args.ready_file:
            tmp = self.args.ready_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(",".join("%s:%d" % (self.args.host, p) for p in bound) + "\n")
            os.rename(tmp, self.args.ready_file)
        self.log("listening on %s (mechanisms %s, session lifetime %d ms)" % (
            ", ".join("%d -> %s:%d" % (p, *u) for p, (_, u)
                      in zip(bound, self.args.listen)),
            ",".join(self.mechanisms), self.session_lifetime_ms))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for s in servers:
            s.close()
        self.log("stopping")


# ---- RFC 7677 section 3, reproduced ------------------------------------

def selftest_rfc7677():
    """The RFC's SCRAM-SHA-256 exchange (user "user", password "pencil")
    through the front's own server class: its server-first and
    server-final messages must be the RFC's, byte for byte."""
    cred = ScramCredential("sha256", "pencil",
                           base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    s = Scram("SCRAM-SHA-256", {"user": cred}, False,
              nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    out, first, _ = s.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    want_first = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                  b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    ok = out == CONTINUE and first == want_first
    out, final, _ = s.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    ok = ok and out == DONE and final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    ok = ok and s.principal == "user"
    # the same exchange with one proof bit flipped must fail
    s2 = Scram("SCRAM-SHA-256", {"user": cred}, False,
               nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    s2.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    out2, _, err2 = s2.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU=")
    ok = ok and out2 == FAIL and "SCRAM-SHA-256" in err2
    print("rfc7677: %s" % ("ok" if ok else "MISMATCH"))
    print("  server-first %s" % first.decode())
    print("  server-final %s" % (final or b"").decode())
    return 0 if ok else 1


def parse_args(argv):
    p = argparse.ArgumentParser(description="Kafka SASL front for the mock brokers")
    p.add_argument("--listen", action="append", default=[],
                   help="PORT=UPSTREAMHOST:UPSTREAMPORT (repeatable)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--user", action="append", default=[], help="NAME:PASSWORD")
    p.add_argument("--users", help="file of NAME:PASSWORD lines")
    p.add_argument("--mechanisms", default=",".join(ALL_MECHANISMS))
    p.add_argument("--iterations", type=int, default=4096)
    p.add_argument("--session-lifetime-ms", type=int, default=0)
    p.add_argument("--sasl-delay-ms", type=int, default=0)
    p.add_argument("--oauth-claim", default="sub")
    p.add_argument("--scram-nonce-check", choices=("endswith", "equals"),
                   default="endswith")
    p.add_argument("--advertise")
    p.add_argument("--events")
    p.add_argument("--ready-file")
    p.add_argument("--selftest-rfc7677", action="store_true")
    a = p.parse_args(argv)
    if a.selftest_rfc7677:
        return a
    listen = []
    for spec in a.listen:
        try:
            port, up = spec.split("=", 1)
            uh, up_port = up.rsplit(":", 1)
            listen.append((int(port), (uh, int(up_port))))
        except ValueError:
            p.error("--listen %r: want PORT=HOST:PORT" % spec)
    if not listen:
        p.error("at least one --listen")
    a.listen = listen
    lines = list(a.user)
    if a.users:
        with open(a.users, encoding="utf-8") as f:
            lines += [l.strip() for l in f
                      if l.strip() and not l.lstrip().startswith("#")]
    a.accounts = {}
    for l in lines:
        name, sep, pw = l.partition(":")
        if not sep or not name:
            p.error("an account is NAME:PASSWORD (got one without ':')")
        a.accounts[name] = pw
    a.mechanisms = [m.strip() for m in a.mechanisms.split(",") if m.strip()]
    for m in a.mechanisms:
        if m not in ALL_MECHANISMS:
            p.error("unknown mechanism %s (known: %s)" % (m, ",".join(ALL_MECHANISMS)))
    if a.iterations < 1 or a.session_lifetime_ms < 0:
        p.error("--iterations >= 1, --session-lifetime-ms >= 0")
    return a


def main(argv):
    args = parse_args(argv)
    if args.selftest_rfc7677:
        return selftest_rfc7677()
    asyncio.run(Front(args).serve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
