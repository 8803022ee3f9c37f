"""kafka-python client for tests/integration/kafka_python.sh (and tls_kafka_python.sh).

usage: kafka_python_client.py BOOTSTRAP TOPIC COUNT BROKERS_OUT [API_VERSION [EXPECT]]

API_VERSION: auto (the default) or one such as 0.10.
Produces COUNT distinct messages to TOPIC (unless API_VERSION is 0.10,
whose producer sends magic 1 message sets the mock refuses: then it only
consumes what is there), consumes TOPIC from the beginning in a consumer
group, and checks it got back exactly what was produced.  Writes every
broker the client learned from Metadata to BROKERS_OUT as
"NODEID HOST PORT".  Exit 0 on success, 1 with a message on failure.
When it only consumes, it reads until it has at least EXPECT messages
(default 1) and then nothing more arrives for 2 seconds.  Waits end on
success; their bounds are generous (a busy CI machine is slow).

SASL: KR_SASL_MECH, KR_SASL_USER, KR_SASL_PASS (SASL_SSL with KR_TLS_CA).
TLS (tests/integration/tls_*.sh): with KR_TLS_CA set (a CA file) the
client speaks TLS and checks the brokers' certificates against it (and
their host names); KR_TLS_CERT and KR_TLS_KEY add a client certificate.
"""
import logging
import os
import sys
import time

from kafka import KafkaConsumer, KafkaProducer


def main():
    bootstrap, topic, count, brokers_out = sys.argv[1:5]
    api = sys.argv[5] if len(sys.argv) > 5 else "auto"
    count = int(count)
    expect = max(int(sys.argv[6]) if len(sys.argv) > 6 else 1, 1)
    api_version = None if api == "auto" else tuple(int(x) for x in api.split("."))
    logging.basicConfig(level=logging.WARNING)
    common = dict(bootstrap_servers=bootstrap, api_version=api_version,
                  request_timeout_ms=20000, api_version_auto_timeout_ms=10000)
    if os.environ.get("KR_TLS_CA"):
        common.update(security_protocol="SSL",
                      ssl_cafile=os.environ["KR_TLS_CA"],
                      ssl_check_hostname=True,
                      ssl_certfile=os.environ.get("KR_TLS_CERT") or None,
                      ssl_keyfile=os.environ.get("KR_TLS_KEY") or None)
    if os.environ.get("KR_SASL_MECH"):
        # SASL (sasl_termination_clients.sh): over TLS when KR_TLS_CA is set
        common.update(security_protocol="SASL_SSL" if os.environ.get("KR_TLS_CA")
                      else "SASL_PLAINTEXT",
                      sasl_mechanism=os.environ["KR_SASL_MECH"],
                      sasl_plain_username=os.environ["KR_SASL_USER"],
                      sasl_plain_password=os.environ["KR_SASL_PASS"])

    tag = "kpy-%s-%d" % (api, os.getpid())
    sent = []
    if api_version is None or api_version >= (0, 11):
        producer = KafkaProducer(acks="all", linger_ms=5, **common)
        futures = []
        for i in range(count):
            value = ("%s-%05d" % (tag, i)).encode()
            sent.append(value)
            futures.append(producer.send(topic, value=value,
                                         key=str(i % 7).encode()))
        producer.flush(30)
        for f in futures:
            f.get(timeout=30)  # raises on a produce error
        producer.close(10)

    consumer = KafkaConsumer(topic, group_id="kpy-group-" + api.replace(".", "_"),
                             auto_offset_reset="earliest",
                             enable_auto_commit=False,
                             consumer_timeout_ms=15000,
                             session_timeout_ms=10000,
                             heartbeat_interval_ms=1000,
                             **common)
    got = []
    deadline = time.time() + 150
    want = set(sent)
    while time.time() < deadline:
        batch = consumer.poll(timeout_ms=1000)
        for records in batch.values():
            got.extend(r.value for r in records)
        if want and want.issubset(set(got)):
            break
        if not want and len(got) >= expect:
            # consume-only mode: stop once nothing more arrives (a pause
            # of a slow machine before EXPECT messages does not count)
            more = consumer.poll(timeout_ms=2000)
            if not more:
                break
            for records in more.values():
                got.extend(r.value for r in records)
    consumer.commit()
    brokers = consumer._client.cluster.brokers()
    consumer.close()

    with open(brokers_out, "w") as f:
        for b in sorted(brokers, key=lambda b: b.nodeId):
            f.write("%s %s %s\n" % (b.nodeId, b.host, b.port))

    if want:
        mine = [v for v in got if v.startswith(tag.encode())]
        if sorted(mine) != sorted(sent):
            print("FAIL: produced %d, consumed back %d of them (%d total)"
                  % (len(sent), len(mine), len(got)))
            return 1
        if len(mine) != len(set(mine)):
            print("FAIL: duplicates in consumed messages")
            return 1
    elif not got:
        print("FAIL: consumed nothing")
        return 1
    print("OK: api_version=%s produced %d consumed %d, %d brokers"
          % (api, len(sent), len(got), len(brokers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
