"""legacy_kpy_client.py - kafka-python 2.0.2 as an old client, for the
legacy-translation tests (tests/integration/legacy_*.sh, issue 10).

usage: legacy_kpy_client.py MODE BOOTSTRAP TOPIC API TAG COUNT [OPTIONS]

API is the client's api_version ("0.10.0", "0.9", "0.8.2", "0.8.1"):
kafka-python then speaks only that broker's protocol versions and sends
no ApiVersions (0.10.0: Produce v2 with magic 1 messages, Fetch v2,
ListOffsets v0, Metadata v1, JoinGroup v0, OffsetCommit v2, OffsetFetch
v1; 0.9: Produce v1, Fetch v1, magic 0; 0.8.2: Produce v0, Fetch v0,
magic 0, no consumer groups, offsets committed with OffsetCommit v1 and
read with OffsetFetch v1; 0.8.1: the same, offsets with OffsetCommit v0
and OffsetFetch v0, which kept them in ZooKeeper).  TAG and COUNT name
the known message set (legacy_msgs.py).

MODE:
  produce    send the set (keyed as the set says), wait for every ack
  consume    read TOPIC until the set is back (or --timeout), write the
             records to --out (JSON lines), compare, print the summary
  roundtrip  produce, then consume
  group      --members N consumers (threads) join one consumer group;
             once each owns partitions (stable for 2 s) the set is
             produced (--produce API) or expected there; each member
             commits after every poll that returned records; together they
             must read the set exactly, without a rebalance, and the
             group's committed offsets must be one past each partition's
             last record

OPTIONS:
  --out FILE         consumed records (default /dev/null)
  --group G          consume in consumer group G (not with 0.8.x); without
                     it the partitions are assigned (all, or --partition)
  --commit-group G   consume mode, assigned partitions: then commit the
                     offsets read for group G (no group membership: what
                     0.8.x clients did) and read them back with a fresh
                     consumer of G: they must be one past each partition's
                     last record
  --partition P      consume only partition P (assigned) ...
  --offset O         ... from offset O (a fetch in the middle of a batch);
                     the set's messages O..COUNT-1 are then expected (the
                     set was written to partition P alone, in order)
  --compression C    gzip, snappy, lz4 or none (the default); snappy and
                     lz4 need python3-snappy and python3-lz4 (kafka-python
                     writes xerial-framed snappy, and for magic 0 the LZ4
                     frame with the wrong header checksum, KAFKA-1493)
  --timeout S        consume deadline in seconds (default 60)
  --members N        group mode (default 3)
  --produce API      group mode: produce with this api_version ("auto": a
                     modern kafka-python, for runs without krelay)
  --retries N        produce: retry a failed batch up to N times (default
                     0), one request in flight, linger 500 ms

Output: progress and errors on stderr; the last line on stdout is the
summary: "OK ..." or "FAIL ..." (legacy_msgs.compare), or for a produce
failure "PRODUCE-FAILED <ExceptionClass>: <message> (k of COUNT acked)",
for a consumer that got nothing "CONSUME-FAILED ...".  Exit status 0 when
the set came back identical (or, produce mode, was acked), 1 on a
difference, 2 when produce failed, 3 when consume got nothing.
"""
import argparse
import logging
import os
import re
import signal
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.coordinator.assignors.roundrobin import \
    RoundRobinPartitionAssignor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import legacy_msgs  # noqa: E402


def api_tuple(s):
    """"0.10.0" -> (0, 10, 0); "auto" -> None (kafka-python asks the
    broker: a modern client)."""
    return None if s == "auto" else tuple(int(x) for x in s.split("."))


def common(args):
    return dict(bootstrap_servers=args.bootstrap,
                api_version=api_tuple(args.api),
                request_timeout_ms=args.request_timeout_ms,
                client_id="legacy-kpy-" + args.api)


def produce(args):
    msgs = legacy_msgs.messages(args.tag, args.count)
    kw = dict(acks="all", linger_ms=20, retries=0,
              max_block_ms=args.timeout * 1000, **common(args))
    if args.retries > 0:
        # one request in flight: a retried batch cannot land after the
        # next one (kafka-python's own reordering); the set queued whole
        # before the first request goes (its batches of 16 KiB)
        kw.update(retries=args.retries, linger_ms=500,
                  max_in_flight_requests_per_connection=1)
    if args.compression != "none":
        kw["compression_type"] = args.compression
    acked = 0
    try:
        producer = KafkaProducer(**kw)
        futures = []
        for key, value in msgs:
            kwargs = dict(key=key, value=value)
            if args.partition is not None:
                kwargs["partition"] = args.partition
            futures.append(producer.send(args.topic, **kwargs))
        producer.flush(args.timeout)
        for f in futures:
            f.get(timeout=args.timeout)
            acked += 1
        producer.close(10)
    except Exception as e:  # noqa: BLE001 - the class is the result
        print("PRODUCE-FAILED %s: %s (%d of %d acked)"
              % (type(e).__name__, e, acked, args.count))
        sys.stdout.flush()
        return 2
    sys.stderr.write("produced %d messages (api %s, %s)\n"
                     % (acked, args.api, args.compression))
    return 0


def want_count(args):
    return args.count - (args.offset or 0)


def consume_into(consumer, args, got, deadline):
    """Poll until the expected number of records is back (then one short
    poll more: duplicates would show) or the deadline passes."""
    while time.time() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
        if len(got) >= want_count(args):
            for records in consumer.poll(timeout_ms=300).values():
                got.extend(records)
            return


class LateLeaderAssignor(RoundRobinPartitionAssignor):
    """Round robin, the leader's SyncGroup sent 0.5 s late.  librdkafka's
    mock (2.0.2, and 2.12's classic groups) completes a generation as soon
    as the leader's SyncGroup brings every member's assignment, answering
    only the members already waiting in SyncGroup; a follower whose
    SyncGroup comes after the leader's finds the group Stable and gets
    INVALID_REQUEST (42) (rd_kafka_mock_cgrp_check_state), which
    kafka-python raises from poll().  A broker answers it with the
    assignment.  Seen with three kafka-python members at once."""
    name = "roundrobin"

    @classmethod
    def assign(cls, cluster, members):
        time.sleep(0.5)
        return super().assign(cluster, members)


def make_consumer(args, group, manual=False):
    kw = dict(auto_offset_reset="earliest", enable_auto_commit=False,
              fetch_max_wait_ms=200, **common(args))
    if group and manual:
        # offsets only, no membership (the session timeout is unused, but
        # kafka-python wants it below the request timeout)
        kw.update(group_id=group, session_timeout_ms=10000)
    elif group:
        kw.update(group_id=group, session_timeout_ms=10000,
                  heartbeat_interval_ms=1000,
                  partition_assignment_strategy=[LateLeaderAssignor])
    return KafkaConsumer(**kw)


def committed_offsets(args, group, parts):
    """{partition: committed offset} of group, as a fresh consumer of it
    reads them (OffsetFetch)."""
    c = make_consumer(args, group, manual=not args.group)
    try:
        return {p: c.committed(TopicPartition(args.topic, p)) for p in parts}
    finally:
        c.close(autocommit=False)


def next_offsets(got, parts):
    """{partition: one past its last record read} (None: none read)."""
    want = {p: None for p in parts}
    for r in got:
        want[r.partition] = max(want[r.partition] or 0, r.offset + 1)
    return want


def write_and_check(args, got, label):
    """Write the records to --out, compare: (exit status, summary)."""
    with open(args.out, "w") as f:
        for r in got:
            f.write(legacy_msgs.record_line(r.key, r.value, r.partition,
                                            r.offset) + "\n")
    if not got:
        return 3, ("CONSUME-FAILED %s: nothing consumed within %d s"
                   % (label, args.timeout))
    first = args.offset or 0
    pairs = [(r.key, r.value) for r in got]
    ok, line = legacy_msgs.compare(args.tag, args.count, pairs, label, first)
    fault = legacy_msgs.order_fault(
        args.tag, pairs, [(r.partition, r.offset) for r in got]) if ok \
        else None
    if fault is not None:
        ok, line = False, "FAIL %s: %s" % (label, fault)
    if ok and args.offset is not None:
        low = min(r.offset for r in got)
        if low != args.offset:
            ok, line = False, ("FAIL %s: first offset %d, want %d"
                               % (label, low, args.offset))
    return (0 if ok else 1), line


class Deadline(BaseException):
    """Raised in the main thread by SIGALRM: kafka-python 2.0.2 blocks
    without a bound in places (an offset reset waits forever for a
    ListOffsets answer; poll() waits for the group to be joined).  A
    BaseException, as KeyboardInterrupt: kafka-python's own "except
    Exception" (its group join retries) would take an Exception and go on
    looping (a JoinGroup v0 refused by a Kafka-4-like mock looped past
    the test's watchdog); and the timer repeats each second until one
    gets through."""


def _alarm(signum, frame):
    raise Deadline()


class ErrorLog(logging.Handler):
    """kafka-python's warnings and errors, counted by text (numbers and
    addresses blanked): the most frequent says why a client failed.  A
    "socket disconnected" is told with the last request sent on that
    connection (kafka.conn's debug lines, kept here, not printed)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.counts = {}
        self.last_sent = {}

    def emit(self, record):
        raw = record.getMessage()
        conn = re.match(r"<BrokerConnection node_id=(\S+)", raw)
        conn = conn.group(1) if conn else "?"
        if record.levelno < logging.WARNING:
            sent = re.search(r"> Request \d+: (\w+Request_v\d+)", raw)
            if sent:
                self.last_sent[conn] = sent.group(1)
            return
        msg = re.sub(r"<BrokerConnection .*?\)\]>", "<conn>", raw)
        msg = re.sub(r"127\.0\.0\.1:\d+", "ADDR", msg)
        msg = re.sub(r"(coordinator-|node |Node )\d+", r"\1N", msg)
        if msg.endswith("socket disconnected") and conn in self.last_sent:
            msg += " (after %s)" % self.last_sent[conn]
        self.counts[msg] = self.counts.get(msg, 0) + 1

    def top(self, n=2):
        """The n most frequent, those naming a request first."""
        if not self.counts:
            return ""
        ranked = sorted(self.counts.items(),
                        key=lambda kv: ("Request" not in kv[0], -kv[1]))
        return " (logged: %s)" % "; ".join(
            "%dx %s" % (c, m[:160]) for m, c in ranked[:n])


ERRORS = ErrorLog()


def consume(args):
    label = "kafka-python %s consume%s" % (
        args.api, " from offset %d" % args.offset if args.offset else "")
    got = []
    consumer = None
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, args.timeout, 1.0)
    parts = []
    try:
        consumer = make_consumer(args, args.group or args.commit_group,
                                 manual=bool(args.commit_group))
        if args.group:
            consumer.subscribe([args.topic])
        else:
            parts = ([args.partition] if args.partition is not None else
                     sorted(consumer.partitions_for_topic(args.topic) or []))
            if not parts:
                print("CONSUME-FAILED %s: no partitions for %s (metadata)%s"
                      % (label, args.topic, ERRORS.top()))
                return 3
            tps = [TopicPartition(args.topic, p) for p in parts]
            consumer.assign(tps)
            if args.offset is not None:
                consumer.seek(tps[0], args.offset)
            else:
                consumer.seek_to_beginning(*tps)
        consume_into(consumer, args, got, time.time() + args.timeout)
        if (args.group or args.commit_group) and got:
            try:
                consumer.commit()
            except Exception as e:  # noqa: BLE001 - reported
                signal.setitimer(signal.ITIMER_REAL, 0)
                write_and_check(args, got, label)
                print("FAIL %s: %d records read, then the commit failed: "
                      "%s" % (label, len(got), type(e).__name__))
                return 1
    except Deadline:
        signal.setitimer(signal.ITIMER_REAL, 0)
        write_and_check(args, got, label)
        print("CONSUME-FAILED %s: %d of %d records when the %d s deadline "
              "passed inside kafka-python%s"
              % (label, len(got), want_count(args), args.timeout,
                 ERRORS.top()))
        # no close(): leaving a group it never joined, or closing fetches
        # the broker refuses, waits a request timeout more
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if consumer is not None:
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001 - closing a failed client
                pass
    rc, line = write_and_check(args, got, label)
    if rc == 3:
        line += ERRORS.top()
    if rc == 0 and args.commit_group:
        committed = committed_offsets(args, args.commit_group, parts)
        want = next_offsets(got, parts)
        if committed != want:
            print("FAIL %s: committed offsets of %s %s, want %s"
                  % (label, args.commit_group, committed, want))
            return 1
        line += "; committed offsets %s" % committed
    print(line)
    return rc


def group(args):
    """--members consumers in one group: they join (the topic may be
    empty), and once each owns partitions and the assignment has been
    stable for 2 s the set is produced (--produce API) or taken as
    already there; each member commits after every poll that returned
    records; the union must be the set exactly, and the group's committed
    offsets one past the last record of each partition."""
    label = "kafka-python %s group of %d" % (args.api, args.members)
    g = args.group or "legacy-kpy-group-%d" % os.getpid()
    lock, stop = threading.Lock(), threading.Event()
    got, owned, errors = [], {}, []
    deadline = time.time() + args.timeout

    def member(i):
        c = make_consumer(args, g)
        try:
            c.subscribe([args.topic])
            while not stop.is_set() and time.time() < deadline:
                batch = c.poll(timeout_ms=500)
                recs = [r for rs in batch.values() for r in rs]
                if recs:
                    c.commit()
                with lock:
                    got.extend(recs)
                    owned[i] = tuple(sorted(tp.partition
                                            for tp in c.assignment()))
        except Exception as e:  # noqa: BLE001 - reported
            with lock:
                errors.append("member %d: %s: %s"
                              % (i, type(e).__name__, e))
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True)
               for i in range(args.members)]
    for t in threads:
        t.start()
    stable_since, last = None, None
    while time.time() < deadline and not errors:
        time.sleep(0.2)
        with lock:
            now = dict(owned)
        if len(now) == args.members and all(now.values()):
            if now != last:
                stable_since, last = time.time(), now
            elif time.time() - stable_since >= 2:
                break
        else:
            stable_since, last = None, None
    else:
        stop.set()
        for t in threads:
            t.join(5)
        print("FAIL %s: the members never all owned partitions: %s %s"
              % (label, dict(owned), "; ".join(errors)))
        return 1
    sys.stderr.write("group %s stable: %s\n" % (g, last))
    if args.produce:
        pargs = argparse.Namespace(**vars(args))
        pargs.api = args.produce
        rc = produce(pargs)
        if rc != 0:
            stop.set()
            return rc
    while time.time() < deadline and not errors:
        with lock:
            if len(got) >= want_count(args):
                break
        time.sleep(0.2)
    time.sleep(1)       # duplicates, if any, would arrive now
    stop.set()
    for t in threads:
        t.join(5)
    if errors:
        print("FAIL %s: %s" % (label, "; ".join(errors)))
        return 1
    rc, line = write_and_check(args, got, label)
    if rc != 0:
        print(line)
        return rc
    if dict(owned) != last:
        print("FAIL %s: the assignment changed while consuming: %s, then %s"
              % (label, last, dict(owned)))
        return 1
    # the group's committed offsets, as a fresh consumer of it sees them
    c = make_consumer(args, g)
    try:
        parts = sorted(c.partitions_for_topic(args.topic) or [])
        committed = {p: c.committed(TopicPartition(args.topic, p))
                     for p in parts}
    finally:
        c.close()
    want = next_offsets(got, parts)
    if committed != want:
        print("FAIL %s: committed offsets %s, want %s"
              % (label, committed, want))
        return 1
    print("%s; members own partitions %s, committed offsets %s"
          % (line, last, committed))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("produce", "consume", "roundtrip",
                                    "group"))
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("api")
    p.add_argument("tag")
    p.add_argument("count", type=int)
    p.add_argument("--out", default=os.devnull)
    p.add_argument("--group")
    p.add_argument("--commit-group")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", type=int)
    p.add_argument("--compression", default="none",
                   choices=("none", "gzip", "snappy", "lz4"))
    p.add_argument("--timeout", type=int, default=60)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--produce", metavar="API",
                   help="group mode: produce the set with this api_version "
                   "(or auto) once the group is stable")
    p.add_argument("--request-timeout-ms", type=int, default=15000)
    p.add_argument("--retries", type=int, default=0)
    args = p.parse_args()
    if args.api.startswith("0.8.") and args.group:
        p.error("0.8.x has no consumer groups")
    if args.commit_group and (args.group or args.mode not in
                              ("consume", "roundtrip")):
        p.error("--commit-group: consume or roundtrip, without --group")
    # stderr shows KR_KPY_LOG (default ERROR) and above; ERRORS also sees
    # kafka.conn's debug lines (the requests sent)
    shown = logging.StreamHandler(sys.stderr)
    shown.setLevel(os.environ.get("KR_KPY_LOG", "ERROR"))
    shown.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logging.getLogger().addHandler(shown)
    logging.getLogger().setLevel(os.environ.get("KR_KPY_LOG", "ERROR"))
    logging.getLogger("kafka").addHandler(ERRORS)
    logging.getLogger("kafka.conn").setLevel(logging.DEBUG)
    if args.mode in ("produce", "roundtrip"):
        rc = produce(args)
        if rc != 0 or args.mode == "produce":
            if rc == 0:
                print("OK kafka-python %s produce: %d messages acked"
                      % (args.api, args.count))
            return rc
    if args.mode == "group":
        rc = group(args)
        # members still blocked in kafka-python (a group that never
        # formed) must not hold the exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return consume(args)


if __name__ == "__main__":
    sys.exit(main())
