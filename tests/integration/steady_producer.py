#!/usr/bin/env python3
"""A steady producer for the reload tests (rules_reload.sh, upstream_reload.sh).

steady_producer.py BOOTSTRAP TOPIC PREFIX STARTED DONE MIN AFTER

Produces PREFIX-00000, PREFIX-00001, ... to TOPIC every 10 ms on its own
connections (confluent-kafka), creates the file STARTED at its first
delivered message, and goes on until it produced at least MIN and, once
the file DONE exists, AFTER more.  Then flushes and prints
"delivered N failed M produced K" (failed deliveries also on stderr).
"""
import os
import sys
import time

from confluent_kafka import Producer


def main():
    boot, topic, prefix, started, done = sys.argv[1:6]
    least, after_want = int(sys.argv[6]), int(sys.argv[7])
    counts = {'ok': 0, 'bad': 0}

    def cb(err, msg):
        if err is None:
            counts['ok'] += 1
            if counts['ok'] == 1:
                open(started, 'w').close()
        else:
            counts['bad'] += 1
            sys.stderr.write('delivery: %s\n' % err)

    p = Producer({'bootstrap.servers': boot, 'linger.ms': 0,
                  'message.timeout.ms': 20000})
    i = after = 0
    while i < least or after < after_want:
        if os.path.exists(done):
            after += 1
        p.produce(topic, '%s-%05d' % (prefix, i), on_delivery=cb)
        p.poll(0)
        time.sleep(0.01)
        i += 1
    p.flush(30)
    print('delivered', counts['ok'], 'failed', counts['bad'], 'produced', i)


if __name__ == '__main__':
    main()
