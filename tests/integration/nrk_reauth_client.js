// nrk_reauth_client.js - node-rdkafka (librdkafka 2.12, which does
// KIP-368 re-authentication) producing over SASL for a while, then
// (unless --no-consume) consuming every message back: the SASL tests'
// busy client across re-authentications (sasl_termination_clients.sh,
// sasl_passthrough_clients.sh, sasl_origination_mechs.sh).
//
// usage: node nrk_reauth_client.js BOOTSTRAP USER PASSWORD TOPIC GROUP
//            [--ssl CA_FILE] [--secs N] [--no-consume]
// Produces one message every 20 ms for N seconds (default 8), tagged with
// the process id; prints "sent S delivered D failed F" and, consuming,
// "consumed C of S".  Exit 0 when every message was delivered (and
// consumed back), 1 otherwise or after 100 s.
'use strict';
const Kafka = require('node-rdkafka');

const [bootstrap, user, password, topic, group, ...rest] =
    process.argv.slice(2);
let ca = null, secs = 8, consumeBack = true;
for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--ssl') { ca = rest[++i]; }
    else if (rest[i] === '--secs') { secs = Number(rest[++i]); }
    else if (rest[i] === '--no-consume') { consumeBack = false; }
    else { console.log(`unknown option ${rest[i]}`); process.exit(2); }
}
if (!group) {
    console.log('usage: nrk_reauth_client.js BOOTSTRAP USER PASSWORD TOPIC ' +
                'GROUP [--ssl CA] [--secs N] [--no-consume]');
    process.exit(2);
}
const sasl = {
    'metadata.broker.list': bootstrap,
    'security.protocol': ca ? 'sasl_ssl' : 'sasl_plaintext',
    'sasl.mechanisms': 'SCRAM-SHA-512',
    'sasl.username': user, 'sasl.password': password,
    'socket.timeout.ms': 10000,
};
if (ca) { sasl['ssl.ca.location'] = ca; }
const p = new Kafka.Producer({ ...sasl, 'dr_cb': true, 'linger.ms': 5,
                               'message.timeout.ms': 20000 });
let sent = 0, ok = 0, bad = 0;
const tag = `${topic}-${process.pid}-`;
setTimeout(() => { console.log(`timed out: sent ${sent} delivered ${ok}`);
                   process.exit(1); }, 100000).unref();
p.on('delivery-report', (err) => { if (err) { bad++; } else { ok++; } });
p.on('event.error', (e) => console.log('producer error:', String(e)));
p.setPollInterval(50);
p.connect();
p.on('ready', () => {
    const t = setInterval(() => {
        p.produce(topic, null, Buffer.from(tag + sent), null);
        sent++;
    }, 20);
    setTimeout(() => {
        clearInterval(t);
        // the last delivery reports come with the polls after flush
        p.flush(20000, () => setTimeout(() => {
            console.log(`sent ${sent} delivered ${ok} failed ${bad}`);
            const good = ok === sent && bad === 0;
            p.disconnect(() => good && consumeBack ? consume()
                                                   : process.exit(good ? 0 : 1));
        }, 500));
    }, secs * 1000);
});

function consume() {
    const c = new Kafka.KafkaConsumer({ ...sasl, 'group.id': group,
                                        'enable.auto.commit': false },
                                      { 'auto.offset.reset': 'earliest' });
    const seen = new Set();
    c.on('event.error', (e) => console.log('consumer error:', String(e)));
    c.on('ready', () => { c.subscribe([topic]); c.consume(); });
    c.on('data', (m) => {
        const v = m.value.toString();
        if (v.startsWith(tag)) { seen.add(v); }
        if (seen.size === sent) {
            console.log(`consumed ${seen.size} of ${sent}`);
            c.disconnect(() => process.exit(0));
        }
    });
    c.connect();
}
