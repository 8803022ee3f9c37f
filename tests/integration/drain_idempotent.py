#!/usr/bin/python3
"""drain_idempotent.py - peers for tests/integration/drain_idempotent.sh.

produce BOOTSTRAP TOPIC DIR
    An idempotent producer (confluent-kafka, enable.idempotence) sending
    numbered messages ("idem-000000", key: the number % 3) one every
    2 ms until the file DIR/stop appears, then flushing.  While it runs
    it rewrites DIR/acked (atomically) with the count of successful
    delivery reports, so the test can time its signals.  krelay going away and
    coming back is what it must ride out: transport errors are logged
    (DIR/errors.log), never fatal.  At the end it writes DIR/result.json:
      produced  messages handed to produce()
      acked     sorted numbers with a successful delivery report
      failed    [number, error] for each failed delivery report
      fatal     the fatal error (error_cb's err.fatal()), or null
      left      messages still queued after the flush
    and exits 0 when every message produced was acked, none failed,
    nothing is left and no fatal error came; 1 otherwise.

verify BOOTSTRAP TOPIC DIR
    Read every partition of TOPIC from its first offset to its high
    watermark (a consumer with assign(), no group commits), straight
    from the mock cluster, and check it against DIR/result.json: every
    acked number is present exactly once, no number appears twice, no
    number appears that was never produced, and each partition holds
    its numbers in increasing order (what an idempotent producer
    promises).  Prints one summary line; exit 0 when all hold, 1 with
    what failed.

The mock cluster does not deduplicate an idempotent producer's
retried batches (librdkafka's rd_kafka_mock_validate_records checks
sequence numbers only for a transactional producer: a
non-transactional one's batches are all appended), so a duplicate in
the log can only come from a request that reached the broker and whose
response the producer never got: a response krelay lost.

Bounds are generous (a busy machine is slow); waits end on success.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def produce(bootstrap, topic, outdir):
    acked = []
    failed = []
    fatal = []
    errlog = open(os.path.join(outdir, "errors.log"), "a")

    def on_error(err):
        errlog.write("%.3f %s%s\n" % (time.time(), err,
                                      " (FATAL)" if err.fatal() else ""))
        errlog.flush()
        if err.fatal():
            fatal.append(str(err))

    def delivered(err, msg):
        n = int(msg.value()[5:11])
        if err is not None:
            failed.append([n, str(err)])
        else:
            acked.append(n)

    p = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 5,
        "message.timeout.ms": 240000,
        "socket.timeout.ms": 60000,
        "retry.backoff.ms": 50,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "error_cb": on_error,
    })
    stop = os.path.join(outdir, "stop")
    ackfile = os.path.join(outdir, "acked")
    i = 0
    last = 0.0
    while not os.path.exists(stop):
        p.produce(topic, value=b"idem-%06d" % i, key=str(i % 3).encode(),
                  on_delivery=delivered)
        i += 1
        p.poll(0.002)
        now = time.monotonic()
        if now - last >= 0.05:
            write_atomic(ackfile, "%d\n" % len(acked))
            last = now
    left = p.flush(240)
    write_atomic(ackfile, "%d\n" % len(acked))
    result = {"produced": i, "acked": sorted(acked), "failed": failed,
              "fatal": fatal[0] if fatal else None, "left": left}
    write_atomic(os.path.join(outdir, "result.json"), json.dumps(result))
    ok = (not failed and not fatal and left == 0 and len(acked) == i)
    print("produced %d, acked %d, failed %d, left %d, fatal %s" %
          (i, len(acked), len(failed), left, result["fatal"]))
    return 0 if ok else 1


def verify(bootstrap, topic, outdir):
    with open(os.path.join(outdir, "result.json")) as f:
        result = json.load(f)
    t0 = time.monotonic()
    c = Consumer({"bootstrap.servers": bootstrap,
                  "group.id": "drain-idempotent-verify",
                  "enable.auto.commit": False,
                  "auto.offset.reset": "earliest",
                  "socket.timeout.ms": 60000})
    md = c.list_topics(topic, timeout=60)
    parts = sorted(md.topics[topic].partitions)
    highs = {}
    for pt in parts:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, pt),
                                         timeout=60)
        highs[pt] = hi
    c.assign([TopicPartition(topic, pt, 0) for pt in parts])
    seen = {pt: [] for pt in parts}
    pos = {pt: 0 for pt in parts}
    deadline = time.monotonic() + 180
    while any(pos[pt] < highs[pt] for pt in parts):
        if time.monotonic() > deadline:
            print("read %s of %s after 180 s" % (pos, highs))
            return 1
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            print("consumer error %s" % m.error())
            return 1
        seen[m.partition()].append(int(m.value()[5:11]))
        pos[m.partition()] = m.offset() + 1
    c.close()

    problems = []
    count = {}
    for pt in parts:
        for n in seen[pt]:
            count[n] = count.get(n, 0) + 1
        if seen[pt] != sorted(seen[pt]):
            bad = next(k for k in range(1, len(seen[pt]))
                       if seen[pt][k] < seen[pt][k - 1])
            problems.append("partition %d out of order at offset %d: "
                            "%d after %d" % (pt, bad, seen[pt][bad],
                                             seen[pt][bad - 1]))
    dups = sorted(n for n, k in count.items() if k > 1)
    acked = set(result["acked"])
    missing = sorted(acked - set(count))
    unknown = sorted(n for n in count if n >= result["produced"] or n < 0)
    if dups:
        problems.append("%d numbers twice or more, e.g. %s" %
                        (len(dups), dups[:10]))
    if missing:
        problems.append("%d acked numbers missing, e.g. %s" %
                        (len(missing), missing[:10]))
    if unknown:
        problems.append("numbers never produced: %s" % unknown[:10])
    total = sum(len(v) for v in seen.values())
    summary = ("%d records in %d partitions (%s), %d distinct, %d acked" %
               (total, len(parts),
                ",".join(str(len(seen[pt])) for pt in parts),
                len(count), len(acked)))
    if problems:
        print("%s: %s" % (summary, "; ".join(problems)))
        return 1
    print("%s (%.1f s)" % (summary, time.monotonic() - t0))
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "produce":
        return produce(sys.argv[2], sys.argv[3], sys.argv[4])
    if cmd == "verify":
        return verify(sys.argv[2], sys.argv[3], sys.argv[4])
    sys.exit("unknown command %s" % cmd)


if __name__ == "__main__":
    sys.exit(main())
