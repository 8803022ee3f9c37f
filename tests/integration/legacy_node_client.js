// legacy_node_client.js - kafka-node 5.0.0 (npm) as an old client, for the
// legacy-translation tests (tests/integration/legacy_*.sh, issue 10).
//
// usage: node legacy_node_client.js MODE BOOTSTRAP TOPIC SET.jsonl OUT.jsonl
//                                   [GROUP [TIMEOUT_S]]
//
// kafka-node asks ApiVersions v0 and then uses, per API, the highest
// version it knows up to the broker's maximum (it ignores the minimum):
// Produce v2 with magic 1 messages, Fetch v0-2, ListOffsets v0,
// Metadata v0-1, JoinGroup/SyncGroup/Heartbeat/LeaveGroup v0, OffsetCommit
// v2, OffsetFetch v1.
//
// SET.jsonl is the known message set (`legacy_msgs.py json-in TAG COUNT`):
// {"k": HEX|null, "v": HEX} a line.
//   produce    send every message (keyed ones with a KeyedMessage and the
//              keyed partitioner, null keys as plain messages), acks from
//              all (requireAcks -1), wait for every ack
//   consume    a ConsumerGroup (GROUP, default legacy-node-group) from the
//              earliest offset reads until it has as many records as SET
//              has, commits, and writes them to OUT.jsonl ({"k","v","p","o"})
//   roundtrip  produce, then consume
// The comparison is legacy_msgs.py check's (the shell runs it); this
// program prints one summary line last: "OK ...", or
// "PRODUCE-FAILED <error>" (exit 2), "CONSUME-FAILED <why>" (exit 3).
// Every wait is bounded by TIMEOUT_S (default 60).
'use strict';

const fs = require('fs');
const util = require('util');
const kafka = require('kafka-node');

const [mode, bootstrap, topic, setFile, outFile] = process.argv.slice(2, 7);
const groupId = process.argv[7] || 'legacy-node-group';
const timeoutS = parseInt(process.argv[8] || '60', 10);
if (!['produce', 'consume', 'roundtrip'].includes(mode) || !outFile) {
  console.error('usage: legacy_node_client.js produce|consume|roundtrip ' +
                'BOOTSTRAP TOPIC SET.jsonl OUT.jsonl [GROUP [TIMEOUT_S]]');
  process.exit(64);
}

const set = fs.readFileSync(setFile, 'utf8').split('\n').filter(Boolean)
  .map(l => JSON.parse(l))
  .map(r => ({ k: r.k === null ? null : Buffer.from(r.k, 'hex'),
               v: Buffer.from(r.v, 'hex') }));

// an error as one line: kafka-node's produce errors are often plain
// objects or arrays (per partition), not Error instances
function describe (err) {
  if (err instanceof Error) {
    // new Error(ERROR_CODE[code]) of a code kafka-node does not list
    // (UNSUPPORTED_VERSION, 35, among them) has no message
    return err.name + ': ' + (err.message ||
      '(no message: an error code kafka-node has no name for)');
  }
  return util.inspect(err, { depth: 4, breakLength: Infinity });
}

// Print the summary and exit; with closer (a function taking a callback),
// close the client first (bounded: 5 s), so that its connections end
// with a FIN rather than a reset (krelay's log tells the two apart).
function finish (code, line, closer) {
  console.log(line.replace(/\s*\n\s*/g, ' '));
  if (!closer) {
    // kafka-node keeps sockets and timers: leave without waiting for them
    process.exit(code);
  }
  setTimeout(() => process.exit(code), 5000).unref();
  closer(() => process.exit(code));
}

// The APIs kafka-node uses at a version below the minimum a broker
// advertised ("joinGroup v0 (min 2)"): kafka-node takes the highest
// version it knows up to the broker's maximum and ignores the minimum.
function belowMinimum (client) {
  const seen = new Set();
  for (const b of Object.values((client && client.brokers) || {})) {
    for (const [api, v] of Object.entries(b.apiSupport || {})) {
      if (typeof v === 'object' && v && v.usable !== false &&
          v.usable !== undefined && v.usable < v.min) {
        seen.add(api + ' v' + v.usable + ' (min ' + v.min + ')');
      }
    }
  }
  return [...seen].sort().join(', ');
}

function clientOptions () {
  return { kafkaHost: bootstrap, connectTimeout: 5000, requestTimeout: 10000,
           clientId: 'legacy-kafka-node' };
}

function produce (done) {
  const client = new kafka.KafkaClient(clientOptions());
  // partitionerType 3: keyed (the payload's key); null keys go by the
  // same partitioner with an undefined key
  const producer = new kafka.Producer(client, { requireAcks: -1,
                                                ackTimeoutMs: 10000,
                                                partitionerType: 3 });
  const timer = setTimeout(() => finish(2, 'PRODUCE-FAILED timeout: ' +
    'no ack for every message within ' + timeoutS + ' s'), timeoutS * 1000);
  producer.on('error', err => {
    clearTimeout(timer);
    finish(2, 'PRODUCE-FAILED ' + describe(err));
  });
  producer.on('ready', () => {
    const payloads = set.map(m => m.k === null
      ? { topic, messages: [m.v] }
      : { topic, key: m.k, messages: [new kafka.KeyedMessage(m.k, m.v)] });
    producer.send(payloads, (err, res) => {
      clearTimeout(timer);
      if (err) {
        finish(2, 'PRODUCE-FAILED ' + describe(err));
      }
      console.error('produced ' + set.length + ' messages: ' +
                    JSON.stringify(res));
      producer.close(() => done());
    });
  });
}

function consume () {
  const got = [];
  const cg = new kafka.ConsumerGroup(Object.assign(clientOptions(), {
    groupId, fromOffset: 'earliest', encoding: 'buffer',
    keyEncoding: 'buffer', autoCommit: false, sessionTimeout: 10000,
    protocol: ['roundrobin'], fetchMaxWaitMs: 200
  }), [topic]);
  let errors = 0;
  let lastError = '';
  const timer = setTimeout(() => {
    write();
    const below = belowMinimum(cg.client);
    finish(3, 'CONSUME-FAILED kafka-node: ' + got.length + ' of ' +
           set.length + ' records within ' + timeoutS + ' s' +
           (errors ? ' (' + errors + ' errors, last: ' + lastError + ')' : '') +
           (below ? ' (versions it chose below the broker\'s minimum: ' +
            below + ')' : ''));
  }, timeoutS * 1000);
  function write () {
    fs.writeFileSync(outFile, got.map(m => JSON.stringify({
      k: m.key == null ? null : Buffer.from(m.key).toString('hex'),
      v: m.value == null ? null : Buffer.from(m.value).toString('hex'),
      p: m.partition, o: m.offset })).join('\n') + (got.length ? '\n' : ''));
  }
  cg.on('error', err => {
    errors++;
    lastError = describe(err);
    console.error('consumer error: ' + lastError);
    // a response it cannot read comes back on every fetch: once it has
    // failed 50 times with nothing read, waiting longer proves nothing
    if (errors >= 50 && got.length === 0) {
      clearTimeout(timer);
      write();
      finish(3, 'CONSUME-FAILED kafka-node: 0 of ' + set.length +
             ' records (' + errors + ' errors, last: ' + lastError + ')');
    }
  });
  cg.on('message', m => {
    got.push(m);
    if (got.length === set.length) {
      // a short wait: duplicates would arrive now
      setTimeout(() => {
        cg.commit(true, err => {
          clearTimeout(timer);
          write();
          if (err) {
            finish(1, 'FAIL kafka-node: commit: ' + err.message);
          }
          finish(0, 'OK kafka-node consume: ' + got.length + ' records ' +
                 '(group ' + groupId + ', committed)',
                 done => cg.close(false, () => done()));
        });
      }, 1000);
    }
  });
}

if (mode === 'consume') {
  consume();
} else {
  produce(() => {
    if (mode === 'produce') {
      finish(0, 'OK kafka-node produce: ' + set.length + ' messages acked');
    }
    consume();
  });
}
