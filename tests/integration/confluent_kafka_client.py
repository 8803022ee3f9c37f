"""confluent-kafka client for tests/integration/tls_confluent_kafka.sh.

usage: confluent_kafka_client.py BOOTSTRAP TOPIC COUNT BROKERS_OUT

Produces COUNT distinct messages to TOPIC (acks all, every delivery
report checked), consumes TOPIC from the beginning in a consumer group
and checks it got back exactly what was produced, committing at the end.
Writes every broker the client learned from Metadata to BROKERS_OUT as
"NODEID HOST PORT".  Exit 0 on success, 1 with a message on failure.

TLS: with KR_TLS_CA set (a CA file) the client speaks TLS
(security.protocol ssl) and checks the brokers' certificates against it,
host names included; KR_TLS_CERT and KR_TLS_KEY add a client
certificate.  Waits end on success; their bounds are generous (a busy
CI machine is slow).
"""
import os
import sys
import time

from confluent_kafka import Consumer, Producer


def main():
    bootstrap, topic, count, brokers_out = sys.argv[1:5]
    count = int(count)
    common = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 20000}
    if os.environ.get("KR_TLS_CA"):
        common.update({"security.protocol": "ssl",
                       "ssl.ca.location": os.environ["KR_TLS_CA"],
                       "ssl.endpoint.identification.algorithm": "https"})
        if os.environ.get("KR_TLS_CERT"):
            common.update({"ssl.certificate.location":
                           os.environ["KR_TLS_CERT"],
                           "ssl.key.location": os.environ["KR_TLS_KEY"]})

    tag = "ck-%d" % os.getpid()
    sent = [("%s-%05d" % (tag, i)).encode() for i in range(count)]
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))

    producer = Producer(dict(common, **{"acks": "all", "linger.ms": 5,
                                        "message.timeout.ms": 30000}))
    for i, value in enumerate(sent):
        producer.produce(topic, value=value, key=str(i % 7).encode(),
                         on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(60)
    if left or errors:
        print("FAIL: %d not delivered, errors: %s" % (left, errors[:3]))
        return 1

    consumer = Consumer(dict(common, **{"group.id": "ck-group-" + topic,
                                        "auto.offset.reset": "earliest",
                                        "enable.auto.commit": False,
                                        "session.timeout.ms": 10000}))
    consumer.subscribe([topic])
    want = set(sent)
    got = []
    deadline = time.time() + 150
    while time.time() < deadline and not want.issubset(set(got)):
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            print("consumer: %s" % msg.error())
            continue
        got.append(msg.value())
    md = consumer.list_topics(timeout=10)
    if got:
        consumer.commit(asynchronous=False)
    consumer.close()

    with open(brokers_out, "w") as f:
        for b in sorted(md.brokers.values(), key=lambda b: b.id):
            f.write("%s %s %s\n" % (b.id, b.host, b.port))

    mine = [v for v in got if v.startswith(tag.encode())]
    if sorted(mine) != sorted(sent):
        print("FAIL: produced %d, consumed back %d of them (%d total)"
              % (len(sent), len(mine), len(got)))
        return 1
    if len(mine) != len(set(mine)):
        print("FAIL: duplicates in consumed messages")
        return 1
    print("OK: produced %d consumed %d, %d brokers"
          % (len(sent), len(got), len(md.brokers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
