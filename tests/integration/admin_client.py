#!/usr/bin/python3
"""tests/integration/admin.sh's client: confluent-kafka (librdkafka)
produces N messages through krelay with statistics.interval.ms, then,
while the producer stays connected and idle, scrapes krelay's /metrics
and /connections between two statistics reports that agree (no request
went out in between).  Writes metrics.txt, connections.json and
client.json (what librdkafka counted, summed over its brokers, and per
broker: per_broker) into DIR.

  admin_client.py BOOTSTRAP ADMIN_URL TOKEN N TOPIC CLIENT_ID DIR
"""
import json
import sys
import time
import urllib.request

from confluent_kafka import Producer


def get(url, token, path):
    req = urllib.request.Request(url + path,
                                 headers={'Authorization': 'Bearer ' + token})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def main():
    boot, url, token, n, topic, cid, out = sys.argv[1:]
    n = int(n)
    last = {}

    def on_stats(s):
        last['s'] = json.loads(s)
        last['t'] = time.monotonic()

    delivered = []
    p = Producer({'bootstrap.servers': boot, 'client.id': cid,
                  'statistics.interval.ms': 100, 'stats_cb': on_stats,
                  'linger.ms': 5, 'batch.num.messages': 50,
                  'socket.timeout.ms': 10000})
    for i in range(n):
        p.produce(topic, ('admin-%d' % i).encode(),
                  on_delivery=lambda e, m: delivered.append(e is None))
        p.poll(0)
    if p.flush(30) != 0:
        sys.exit('flush: messages left')

    def totals(s):
        t = {'tx': 0, 'txbytes': 0, 'produce': 0, 'brokers': 0,
             'per_broker': []}
        for b in s['brokers'].values():
            if b.get('source') == 'internal':
                continue
            t['brokers'] += b['state'] == 'UP'      # connected now
            t['tx'] += b['tx']
            t['txbytes'] += b['txbytes']
            t['produce'] += b['req'].get('Produce', 0)
            t['per_broker'].append({
                'nodeid': b['nodeid'], 'state': b['state'],
                'connects': b.get('connects'), 'tx': b['tx'],
                'txbytes': b['txbytes'],
                'produce': b['req'].get('Produce', 0)})
        t['per_broker'].sort(key=lambda x: x['nodeid'])
        return t

    def fresh_stats():
        since = time.monotonic()
        while last.get('t', 0) <= since:
            p.poll(0.05)
        return totals(last['s'])

    for attempt in range(20):
        time.sleep(0.3)
        a = fresh_stats()
        metrics = get(url, token, '/metrics')
        conns = get(url, token, '/connections?limit=1000')
        b = fresh_stats()
        if a == b:
            break
    else:
        sys.exit('the client kept sending: no quiet moment to scrape in')
    with open(out + '/metrics.txt', 'w') as f:
        f.write(metrics)
    with open(out + '/connections.json', 'w') as f:
        f.write(conns)
    a['delivered'] = sum(delivered)
    a['failed'] = len(delivered) - sum(delivered)
    with open(out + '/client.json', 'w') as f:
        json.dump(a, f)
    print(json.dumps(a))


if __name__ == '__main__':
    main()
