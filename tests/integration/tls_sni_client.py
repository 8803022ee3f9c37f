"""Clients of tests/integration/tls_sni.sh (SNI routing, issue 8).

usage:
  tls_sni_client.py kafka BOOTSTRAP CAFILE TOPIC PARTITIONS
      kafka-python over TLS: one message to each partition, then a
      consumer reads them back; prints every broker it learned
      ("broker NODEID HOST:PORT") and "OK".
  tls_sni_client.py resume PORT CAFILE NAME1 NAME2
      Python's ssl at 127.0.0.1:PORT, TLS 1.2 then TLS 1.3: a connection
      that sends NAME1 as SNI, then one that resumes its session sending
      NAME2; each sends ApiVersions v0 and reads the answer.  Prints
      "resumed VERSION PORT NAME2" (PORT: the second connection's own
      port); fails unless the session was resumed.
  tls_sni_client.py probe PORT CAFILE NAME
      One connection sending NAME as SNI (- for none), ApiVersions v0:
      prints "answered LOCALPORT" or "closed LOCALPORT" (krelay closed
      after the handshake).

Exit 0 on success, 1 with a message.  Hostnames are checked against the
certificate (its names cover kafka.test and *.kafka.test) except for a
connection without SNI.
"""
import socket
import ssl
import struct
import sys

import krwire


def api_versions(s, corr):
    """ApiVersions v0 on s: True when answered, False when closed."""
    client = b"sni-test"
    body = struct.pack(">hhih", 18, 0, corr, len(client)) + client
    try:
        s.sendall(struct.pack(">i", len(body)) + body)
        head = krwire.recv_exact(s, 4)
        if head is None:
            return False
        rsp = krwire.recv_exact(s, struct.unpack(">i", head)[0])
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return False
    if rsp is None:
        return False
    got = struct.unpack(">ih", rsp[:6])
    if got != (corr, 0):
        raise SystemExit("FAIL: ApiVersions answer %r" % (got,))
    return True


def context(cafile, version, check=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile)
    ctx.check_hostname = check
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def connect(ctx, port, name, session=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    return ctx.wrap_socket(raw, server_hostname=name, session=session)


def resume(port, cafile, first, second):
    for ver in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = context(cafile, ver)
        s = connect(ctx, port, first)
        if not api_versions(s, 1):
            raise SystemExit("FAIL: %s: no answer for %s" % (ver.name, first))
        sess = s.session
        s.close()
        if sess is None:
            raise SystemExit("FAIL: %s: no session to resume" % ver.name)
        s = connect(ctx, port, second, sess)
        if not s.session_reused:
            raise SystemExit("FAIL: %s: the session was not resumed"
                             % ver.name)
        if not api_versions(s, 2):
            raise SystemExit("FAIL: %s: no answer for %s (resumed)"
                             % (ver.name, second))
        print("resumed %s %d %s" % (s.version(), s.getsockname()[1], second))
        s.close()
    return 0


def probe(port, cafile, name):
    ctx = context(cafile, None, check=name != "-")
    s = connect(ctx, port, None if name == "-" else name)
    mine = s.getsockname()[1]
    print("%s %d" % ("answered" if api_versions(s, 3) else "closed", mine))
    s.close()
    return 0


def kafka(bootstrap, cafile, topic, partitions):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    common = dict(bootstrap_servers=bootstrap, security_protocol="SSL",
                  ssl_cafile=cafile, request_timeout_ms=20000,
                  api_version_auto_timeout_ms=10000)
    producer = KafkaProducer(acks="all", **common)
    sent = set()
    for p in range(partitions):
        value = ("kpy-sni-%d" % p).encode()
        producer.send(topic, value=value, partition=p).get(timeout=30)
        sent.add(value)
    producer.close(10)
    consumer = KafkaConsumer(auto_offset_reset="earliest",
                             enable_auto_commit=False,
                             consumer_timeout_ms=15000, **common)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = set()
    for _ in range(60):
        for records in consumer.poll(timeout_ms=500).values():
            got.update(r.value for r in records)
        if sent <= got:
            break
    brokers = consumer._client.cluster.brokers()
    consumer.close()
    for b in sorted(brokers, key=lambda b: b.nodeId):
        print("broker %s %s:%s" % (b.nodeId, b.host, b.port))
    if not sent <= got:
        print("FAIL: consumed %d of the %d messages" % (len(sent & got),
                                                       len(sent)))
        return 1
    print("OK")
    return 0


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "kafka":
        return kafka(args[0], args[1], args[2], int(args[3]))
    if mode == "resume":
        return resume(int(args[0]), args[1], args[2], args[3])
    if mode == "probe":
        return probe(int(args[0]), args[1], args[2])
    raise SystemExit("usage: see the top of this file")


if __name__ == "__main__":
    sys.exit(main())
