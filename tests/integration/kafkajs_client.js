// kafkajs 2.2.4 client for tests/integration/kafkajs.sh (and tls_kafkajs.sh).
//
// usage: node kafkajs_client.js BOOTSTRAP TOPIC COUNT BROKERS_OUT
//
// Writes the brokers of a Metadata response ("NODEID HOST PORT" lines) to
// BROKERS_OUT, produces COUNT distinct messages to TOPIC, consumes TOPIC
// from the beginning in a consumer group and checks that exactly those
// messages came back.  Exit 0 on success, 1 with a message on failure.
// TLS (tests/integration/tls_*.sh): with KR_TLS_CA set (a CA file) the
// client speaks TLS and checks the brokers' certificates against it;
// KR_TLS_CERT and KR_TLS_KEY add a client certificate.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, countArg, brokersOut] = process.argv.slice(2);
const count = parseInt(countArg, 10);

const env = process.env;
const ssl = env.KR_TLS_CA ? {
    ca: [fs.readFileSync(env.KR_TLS_CA)],
    ...(env.KR_TLS_CERT ? { cert: fs.readFileSync(env.KR_TLS_CERT),
                            key: fs.readFileSync(env.KR_TLS_KEY) } : {}),
} : undefined;

// SASL (sasl_termination_clients.sh): KR_SASL_MECH (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512), KR_SASL_USER, KR_SASL_PASS.
const sasl = env.KR_SASL_MECH ? {
    mechanism: env.KR_SASL_MECH.toLowerCase(),
    username: env.KR_SASL_USER,
    password: env.KR_SASL_PASS,
} : undefined;

const kafka = new Kafka({
    clientId: 'krelay-kafkajs',
    brokers: bootstrap.split(','),
    ssl,
    sasl,
    logLevel: logLevel.WARN,
    connectionTimeout: 10000,
    requestTimeout: 20000,
    retry: { retries: 5 },
});

async function main() {
    const admin = kafka.admin();
    await admin.connect();
    const cluster = await admin.describeCluster();
    fs.writeFileSync(brokersOut, cluster.brokers
        .map((b) => `${b.nodeId} ${b.host} ${b.port}\n`).join(''));
    await admin.disconnect();

    const tag = `kjs-${process.pid}`;
    const sent = [];
    for (let i = 0; i < count; i++) {
        sent.push(`${tag}-${String(i).padStart(5, '0')}`);
    }
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    for (let i = 0; i < count; i += 50) {
        await producer.send({
            topic,
            acks: -1,
            messages: sent.slice(i, i + 50)
                .map((v, j) => ({ key: String((i + j) % 7), value: v })),
        });
    }
    await producer.disconnect();

    const consumer = kafka.consumer({
        groupId: 'kjs-group',
        sessionTimeout: 10000,
        heartbeatInterval: 1000,
        rebalanceTimeout: 10000,
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const got = [];
    const done = new Promise((resolve) => {
        consumer.run({
            eachMessage: async ({ message }) => {
                got.push(message.value.toString());
                if (got.length >= count) {
                    resolve();
                }
            },
        });
    });
    const timeout = new Promise((_, reject) => setTimeout(
        () => reject(new Error(`timeout: consumed ${got.length}/${count}`)),
        180000));      // generous: a busy CI machine is slow
    await Promise.race([done, timeout]);
    await consumer.disconnect();

    const a = [...sent].sort();
    const b = [...got].sort();
    if (a.length !== b.length || a.some((v, i) => v !== b[i])) {
        throw new Error(`consumed ${got.length} messages, not the ${count} produced`);
    }
    console.log(`OK: produced ${count} consumed ${got.length}, ` +
                `${cluster.brokers.length} brokers`);
}

main().then(() => process.exit(0), (e) => {
    console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
});
