// node-rdkafka 3.6.1 (librdkafka 2.12: Metadata v12, Produce v10, Fetch
// v16) client for tests/integration/modern.sh.
//
// usage: node node_rdkafka_client.js BOOTSTRAP TOPIC COUNT GROUP BROKERS_OUT
//
// Writes the brokers of a Metadata response ("NODEID HOST PORT") to
// BROKERS_OUT, produces COUNT distinct messages (idempotent, lz4) to
// TOPIC, then consumes TOPIC from the beginning in consumer group GROUP
// until all of them came back.  Messages not produced by this run (other
// runs, other tools) are ignored.  Exit 0 on success, 1 with a message.
'use strict';

const fs = require('fs');
const Kafka = require('node-rdkafka');

const [bootstrap, topic, countArg, group, brokersOut] = process.argv.slice(2);
const count = parseInt(countArg, 10);
const tag = `nrk-${process.pid}-${Date.now()}`;
const common = {
    'metadata.broker.list': bootstrap,
    'client.id': 'krelay-node-rdkafka',
    'socket.timeout.ms': 10000,
    'topic.metadata.refresh.interval.ms': 2000,
    // NRK_DEBUG=cgrp,fetch,...: librdkafka debug logs (node-rdkafka's
    // event.log path has been seen to crash under load: diagnosis only).
    ...(process.env.NRK_DEBUG ? { debug: process.env.NRK_DEBUG } : {}),
};

function fail(msg) {
    console.log(`FAIL: ${msg}`);
    process.exit(1);
}

const progress = { delivered: 0, consumed: 0, phase: 'start' };
function phase(name) {
    progress.phase = name;
    console.log(`phase ${name}: ${progress.delivered} delivered, ` +
                `${progress.consumed} consumed`);
}
setTimeout(() => fail(`timed out in phase ${progress.phase}: ` +
                      `${progress.delivered} delivered, ` +
                      `${progress.consumed} consumed of ${count}`),
           240000).unref();    // generous: a busy CI machine is slow

function produce() {
    return new Promise((resolve, reject) => {
        const p = new Kafka.Producer({
            ...common,
            'dr_cb': true,
            'enable.idempotence': true,
            'compression.codec': 'lz4',
            'linger.ms': 5,
        });
        let delivered = 0;
        p.on('event.error', (e) => console.log(`producer event.error: ${e}`));
        if (process.env.NRK_DEBUG) {
            p.on('event.log', (l) => console.log(`producer ${l.fac} ${l.message}`));
        }
        p.on('delivery-report', (err) => {
            if (err) {
                reject(new Error(`delivery failed: ${err}`));
                return;
            }
            progress.delivered = ++delivered;
            if (delivered === count) {
                // Do not wait for the close handshake: the test is about
                // what went through krelay, not about client shutdown.
                phase('producer-disconnect');
                setImmediate(() => p.disconnect(() => resolve()));
                setTimeout(resolve, 5000).unref();
            }
        });
        p.on('ready', () => {
            p.getMetadata({ timeout: 10000 }, (err, md) => {
                if (err) {
                    reject(new Error(`metadata: ${err}`));
                    return;
                }
                fs.writeFileSync(brokersOut, md.brokers
                    .map((b) => `${b.id} ${b.host} ${b.port}\n`).join(''));
                for (let i = 0; i < count; i++) {
                    p.produce(topic, null,
                              Buffer.from(`${tag}-${String(i).padStart(5, '0')}`),
                              String(i % 5));
                }
                p.setPollInterval(20);
            });
        });
        p.connect({ timeout: 10000 }, (err) => {
            if (err) {
                reject(new Error(`producer connect: ${err}`));
            }
        });
    });
}

function consume() {
    return new Promise((resolve, reject) => {
        const c = new Kafka.KafkaConsumer({
            ...common,
            'group.id': group,
            'enable.auto.commit': true,
            'session.timeout.ms': 6000,
        }, { 'auto.offset.reset': 'earliest' });
        const got = new Set();
        let mine = 0;
        c.on('event.error', (e) => console.log(`consumer event.error: ${e}`));
        if (process.env.NRK_DEBUG) {
            c.on('event.log', (l) => console.log(`consumer ${l.fac} ${l.message}`));
        }
        // Non-flowing consume(n, cb) and disconnect outside of any
        // librdkafka callback: node-rdkafka 3.6.1 has been seen to crash
        // when a flowing consumer is disconnected from its 'data' handler.
        const loop = () => c.consume(100, (err, msgs) => {
            if (err) {
                reject(new Error(`consume: ${err}`));
                return;
            }
            for (const m of msgs) {
                const v = m.value ? m.value.toString() : '';
                if (!v.startsWith(tag)) {
                    continue;
                }
                if (got.has(v)) {
                    reject(new Error(`duplicate message ${v}`));
                    return;
                }
                got.add(v);
                mine++;
            }
            progress.consumed = got.size;
            if (got.size < count) {
                setImmediate(loop);
                return;
            }
            phase('consumer-disconnect');
            setImmediate(() => c.disconnect(() => resolve(mine)));
            setTimeout(() => resolve(mine), 5000).unref();
        });
        c.on('ready', () => {
            c.subscribe([topic]);
            loop();
        });
        c.connect({ timeout: 10000 }, (err) => {
            if (err) {
                reject(new Error(`consumer connect: ${err}`));
            }
        });
    });
}

(async () => {
    phase('produce');
    await produce();
    phase('consume');
    const n = await consume();
    console.log(`OK: librdkafka ${Kafka.librdkafkaVersion}: produced ${count}, ` +
                `consumed ${n} back in group ${group}`);
    process.exit(0);
})().catch((e) => fail(e && e.stack ? e.stack : e));
