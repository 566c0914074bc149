'use strict';
// producer.js plays a Node.js booking service whose expiry jobs die in every
// way a job can: a failing worker publishes copies to the dead-letter queue
// with failure headers, and RabbitMQ dead-letters others itself (reject, TTL,
// max-length, a quorum queue's delivery limit). Every message carries every
// basic property and, on some cases, a header of every AMQP wire type.
//
// It writes a record of exactly what it sent (decoded from the bytes amqplib
// put on the wire, see wire.js) and of what RabbitMQ then held in the DLQ (it
// browses the DLQ and puts everything back for `expiryctl dlq ingest`). It
// exits 1 when a case did not dead-letter as intended or RabbitMQ changed
// more than its own dead-lettering changes.
//
// Usage: node producer.js CONFIG.json   (written by e2e/node_interop_test.go)

const fs = require('node:fs');
const zlib = require('node:zlib');
const wire = require('./wire');

let lastSent = null;
wire.captureSentProperties((raw) => {
  lastSent = raw;
});
wire.captureReceivedProperties();
const amqp = require('amqplib');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

// The headers RabbitMQ itself writes when it dead-letters a message.
function brokerHeader(key) {
  return key === 'x-death' || key === 'x-delivery-count' || key.startsWith('x-first-death-') || key.startsWith('x-last-death-');
}

// typedHeaders is one header of every AMQP wire type, through amqplib's
// {'!': type, value} trapdoor, and plain JS values whose type amqplib picks.
function typedHeaders(now) {
  return {
    'x-int8': { '!': 'int8', value: -7 },
    'x-uint8': { '!': 'uint8', value: 200 },
    'x-int16': { '!': 'int16', value: -1234 },
    'x-uint16': { '!': 'uint16', value: 65000 },
    'x-int32': { '!': 'int32', value: -123456789 },
    'x-uint32': { '!': 'uint32', value: 4000000000 },
    'x-int64': { '!': 'int64', value: 9007199254740993n },
    'x-float': { '!': 'float', value: 1.5 },
    'x-float-inexact': { '!': 'float', value: 0.1 },
    'x-double': { '!': 'double', value: Math.PI },
    'x-decimal': { '!': 'decimal', value: { places: 2, digits: 12345 } },
    'x-timestamp': { '!': 'timestamp', value: 1796041200 },
    // Node code writes Date.now() into timestamps: milliseconds.
    'x-timestamp-ms': { '!': 'timestamp', value: now },
    'x-bool': true,
    'x-bool-false': false,
    'x-void': null,
    'x-bytes': Buffer.from([0x00, 0xff, 0x10, 0x80, 0x7f]),
    'x-string': 'réservation ✓',
    'x-empty-string': '',
    'x-table': {
      level: 1,
      name: 'inner',
      big: 70000,
      unsigned: { '!': 'uint16', value: 7 },
      deep: { flag: false, at: { '!': 'timestamp', value: 1796041260 }, none: null },
    },
    'x-empty-table': {},
    'x-array': [
      1,
      300,
      70000,
      2 ** 40,
      2.5,
      'two',
      true,
      null,
      Buffer.from('ab'),
      { '!': 'float', value: 0.25 },
      { '!': 'uint32', value: 7 },
      { '!': 'timestamp', value: 1796041200 },
      { k: 'v', n: { '!': 'int64', value: 1 } },
      [1, 'nested'],
    ],
    'x-empty-array': [],
    'x-plain-byte': 5,
    'x-plain-short': 1000,
    'x-plain-int': 100000,
    'x-plain-long': 2 ** 40,
    'x-plain-negative': -129,
    'x-plain-double': 0.1,
  };
}

function job(n, camel) {
  const key = `expire:r-${n}:v1`;
  const j = camel
    ? { reservationId: `r-${n}`, expectedVersion: 1, holdUntil: 1796041200000, idempotencyKey: key }
    : { reservation_id: `r-${n}`, expected_version: 1, hold_until: 1796041200000, idempotency_key: key };
  return { key, body: Buffer.from(JSON.stringify(j)) };
}

// properties are every basic property a Node service sets; overrides win.
function properties(messageId, user, overrides) {
  return {
    contentType: 'application/json',
    contentEncoding: 'identity',
    correlationId: 'corr-16',
    replyTo: 'booking-api.replies',
    appId: 'booking-api@4.2.0',
    type: 'reservation.expire.v1',
    priority: 5,
    userId: user,
    messageId,
    timestamp: Date.now(),
    persistent: true,
    expiration: '86400000',
    clusterId: 'booking-eu-1',
    ...overrides,
  };
}

function failureHeaders(errorClass, lastError, attempts) {
  const start = Date.now() - attempts * 1000;
  const history = [];
  for (let i = 0; i < attempts; i++) {
    history.push({ timestamp: start + i * 1000, message: `attempt ${i + 1}: ${lastError}` });
  }
  return {
    'x-error-class': errorClass,
    'x-last-error': lastError,
    'x-attempt-history': JSON.stringify(history),
    'x-retry-count': attempts - 1,
    'x-original-exchange': config.exchange,
    'x-original-routing-key': config.routing_key,
  };
}

// returned holds the message ids RabbitMQ returned as unroutable.
const returned = new Set();

function watchReturns(ch) {
  ch.on('return', (m) => returned.add(m.properties.messageId));
}

// publish publishes as mandatory on a confirm channel and resolves on the
// broker's ack with the exact basic-properties bytes amqplib sent. amqplib's
// publish options have no cluster id, so one is put into the properties it
// sends.
async function publish(ch, exchange, routingKey, body, options) {
  const { clusterId, ...opts } = options;
  let confirmed;
  const confirm = new Promise((resolve, reject) => {
    confirmed = (err) => (err ? reject(new Error(`publish to ${JSON.stringify(exchange)} ${routingKey} was nacked: ${err}`)) : resolve());
  });
  if (clusterId !== undefined) {
    const send = ch.sendMessage;
    ch.sendMessage = (fields, props, content) => send.call(ch, fields, { ...props, clusterId }, content);
  }
  lastSent = null;
  try {
    ch.publish(exchange, routingKey, body, { ...opts, mandatory: true }, confirmed);
  } finally {
    delete ch.sendMessage;
  }
  const raw = lastSent;
  if (!raw) throw new Error('amqplib sent no basic properties that wire.captureSentProperties saw');
  await confirm;
  // RabbitMQ sends basic.return before the ack of the same message.
  if (returned.has(opts.messageId)) throw new Error(`${opts.messageId} was unroutable: ${JSON.stringify(exchange)} ${routingKey}`);
  return raw;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

async function waitFor(what, ms, cond) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

async function depth(conn, queue) {
  const ch = await conn.createChannel();
  try {
    return (await ch.checkQueue(queue)).messageCount;
  } finally {
    await ch.close();
  }
}

async function main() {
  const conn = await amqp.connect(config.url);
  const ch = await conn.createConfirmChannel();
  watchReturns(ch);

  const dlx = { deadLetterExchange: '', deadLetterRoutingKey: config.dlq };
  await ch.assertQueue(config.dlq, { durable: true });
  await ch.assertExchange(config.exchange, 'direct', { durable: true });
  await ch.assertQueue(config.work_queue, { durable: true });
  await ch.bindQueue(config.work_queue, config.exchange, config.routing_key);
  const q = config.broker_queues;
  await ch.assertQueue(q['broker-reject'], { durable: true, ...dlx });
  await ch.assertQueue(q['broker-ttl-message'], { durable: true, ...dlx });
  await ch.assertQueue(q['broker-ttl-queue'], { durable: true, ...dlx, messageTtl: 50 });
  await ch.assertQueue(q['broker-maxlen'], { durable: true, ...dlx, maxLength: 1, arguments: { 'x-overflow': 'drop-head' } });
  await ch.assertQueue(q['broker-delivery-limit'], {
    durable: true,
    ...dlx,
    arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 1 },
  });

  const cases = [];
  const add = (c, raw, body) => {
    c.sent = { body: body.toString('base64'), properties: wire.decodeProperties(raw) };
    cases.push(c);
  };
  const user = config.user;

  // a. The failing worker publishes copies to the DLQ itself.
  {
    const { key, body } = job(1, false);
    const p = properties(key, user, {
      headers: { 'x-interop-case': 'worker-etimedout', ...typedHeaders(Date.now()), ...failureHeaders('ETIMEDOUT', 'connect ETIMEDOUT db.internal:5432', 3) },
    });
    add({ name: 'worker-etimedout', shape: 'worker', replay_queue: config.work_queue }, await publish(ch, '', config.dlq, body, p), body);
  }
  {
    const { key, body } = job(2, true);
    const h = failureHeaders('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432', 2);
    const p = properties(key, user, {
      // No delivery mode at all: amqplib leaves it out unless asked.
      persistent: undefined,
      headers: { 'x-interop-case': 'worker-econnrefused', ...h, 'x-attempt': 2, 'x-retries': '1', 'retry-count': 1, 'x-tenant': 'acme' },
    });
    add({ name: 'worker-econnrefused', shape: 'worker', replay_queue: config.work_queue }, await publish(ch, '', config.dlq, body, p), body);
  }
  // b. A gzip body.
  {
    const { key, body: json } = job(3, false);
    const body = zlib.gzipSync(json);
    const p = properties(key, user, {
      contentEncoding: 'gzip',
      headers: { 'x-interop-case': 'gzip', ...failureHeaders('ETIMEDOUT', 'connect ETIMEDOUT db.internal:5432', 3) },
    });
    add({ name: 'gzip', shape: 'worker', replay_queue: config.work_queue }, await publish(ch, '', config.dlq, body, p), body);
  }
  // d. A letter whose user_id is another RabbitMQ user's: RabbitMQ accepts
  // a user_id only from that user's own connection.
  if (config.foreign) {
    const fconn = await amqp.connect(config.foreign.url);
    const fch = await fconn.createConfirmChannel();
    watchReturns(fch);
    const { key, body } = job(4, true);
    const p = properties(key, config.foreign.user, {
      headers: { 'x-interop-case': 'foreign-user', ...failureHeaders('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432', 2) },
    });
    add({ name: 'foreign-user', shape: 'worker', replay_queue: config.work_queue }, await publish(fch, '', config.dlq, body, p), body);
    await fconn.close();
  }

  await waitFor(`the worker's ${cases.length} letters in ${config.dlq}`, 5000, async () => (await depth(conn, config.dlq)) >= cases.length);

  // c. RabbitMQ dead-letters these itself; they carry no failure headers.
  // Each is published to its own queue, made to die there (kill), and
  // waited for in the DLQ before the next.
  const brokerCase = async (name, reason, n, overrides, kill) => {
    const { key, body } = job(n, false);
    const p = properties(key, user, { expiration: '3600000', ...overrides });
    const raw = await publish(ch, '', q[name], body, p);
    const c = { name, shape: 'broker', reason, work_queue: q[name], replay_queue: q[name] };
    add(c, raw, body);
    if (kill) await kill(c);
    await waitFor(`RabbitMQ to dead-letter ${name} (${reason}) into ${config.dlq}`, 10000, async () => (await depth(conn, config.dlq)) >= cases.length);
  };
  await brokerCase('broker-reject', 'rejected', 5, { persistent: false, headers: { 'x-interop-case': 'broker-reject', ...typedHeaders(Date.now()) } }, async () => {
    let msg = false;
    await waitFor('the message to reject', 5000, async () => {
      msg = await ch.get(q['broker-reject'], { noAck: false });
      return msg !== false;
    });
    ch.nack(msg, false, false);
  });
  await brokerCase('broker-ttl-message', 'expired', 6, { expiration: '50', headers: { 'x-interop-case': 'broker-ttl-message', 'x-plain-int': 100000 } });
  await brokerCase('broker-ttl-queue', 'expired', 7, { persistent: undefined, headers: { 'x-interop-case': 'broker-ttl-queue', 'x-tenant': 'acme' } });
  await brokerCase('broker-maxlen', 'maxlen', 8, { headers: { 'x-interop-case': 'broker-maxlen', 'x-uint8': { '!': 'uint8', value: 9 } } }, async () => {
    // The next job pushes it out of the one-message queue (drop-head).
    const { body } = job(80, false);
    await publish(ch, '', q['broker-maxlen'], body, { messageId: 'filler', persistent: true });
  });
  await brokerCase(
    'broker-delivery-limit',
    'delivery_limit',
    9,
    { persistent: false, headers: { 'x-interop-case': 'broker-delivery-limit', 'x-int16': { '!': 'int16', value: -2 } } },
    async (c) => {
      // The handler keeps failing: every delivery is nacked back until the
      // quorum queue's delivery limit dead-letters the job.
      const cch = await conn.createChannel();
      await cch.prefetch(1);
      c.deliveries = 0;
      await cch.consume(q['broker-delivery-limit'], (m) => {
        if (m) {
          c.deliveries++;
          cch.nack(m, false, true);
        }
      });
      await waitFor('the quorum queue to dead-letter at its delivery limit', 10000, async () => (await depth(conn, config.dlq)) >= cases.length);
      await cch.close();
    },
  );

  const problems = await browse(conn, cases);
  await waitFor(`the browsed letters back in ${config.dlq}`, 5000, async () => (await depth(conn, config.dlq)) === cases.length);
  await conn.close();

  fs.writeFileSync(config.record, `${JSON.stringify({ user, dlq: config.dlq, cases }, null, 2)}\n`);
  for (const c of cases) {
    const how = c.shape === 'worker' ? 'published to the DLQ by the worker' : `dead-lettered by RabbitMQ (${c.reason})`;
    console.log(`${c.name.padEnd(22)} ${how}; at the DLQ: ${c.at_dlq ? 'yes' : 'MISSING'}`);
  }
  if (problems.length > 0) {
    console.error(`the DLQ does not hold what the producer meant it to (${problems.length} problems):`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
}

// browse reads every letter in the DLQ without acking, records what RabbitMQ
// delivered, and closes the channel so that all of them go back. It returns
// what is wrong with them.
async function browse(conn, cases) {
  const byId = new Map(cases.map((c) => [c.sent.properties.message_id, c]));
  const problems = [];
  const ch = await conn.createChannel();
  let seen = 0;
  await ch.consume(
    config.dlq,
    (m) => {
      if (!m) return;
      seen++;
      const props = wire.decodeProperties(wire.rawProperties(m));
      const c = byId.get(props.message_id);
      if (!c) {
        problems.push(`an unexpected letter in the DLQ: message_id ${JSON.stringify(props.message_id)}`);
        return;
      }
      if (c.at_dlq) {
        problems.push(`${c.name}: two letters in the DLQ`);
        return;
      }
      c.at_dlq = { body: m.content.toString('base64'), properties: props };
    },
    { noAck: false },
  );
  await waitFor(`${cases.length} letters browsed`, 5000, async () => seen >= cases.length);
  await ch.close();

  for (const c of cases) {
    if (!c.at_dlq) {
      problems.push(`${c.name}: not in the DLQ`);
      continue;
    }
    const sent = c.sent.properties;
    const got = c.at_dlq.properties;
    if (c.at_dlq.body !== c.sent.body) problems.push(`${c.name}: RabbitMQ changed the body`);
    // RabbitMQ drops expiration whenever it dead-letters a message (3.10
    // does so for every reason, not only TTL, and keeps the value as
    // x-death's original-expiration), so the consumer expects expiration as
    // recorded here, not as sent.
    for (const k of wire.PROPERTY_NAMES) {
      if (k === 'headers' || (k === 'expiration' && c.shape === 'broker')) continue;
      if (wire.canonical(sent[k]) !== wire.canonical(got[k])) {
        problems.push(`${c.name}: property ${k} was ${JSON.stringify(sent[k])} when sent, ${JSON.stringify(got[k])} in the DLQ`);
      }
    }
    const h = got.headers || {};
    const own = Object.fromEntries(Object.entries(h).filter(([k]) => !brokerHeader(k)));
    for (const d of wire.diffTyped('', sent.headers || {}, own)) {
      problems.push(`${c.name}: RabbitMQ changed header ${d}`);
    }
    const death = h['x-death'];
    if (c.shape === 'worker') {
      if (death) problems.push(`${c.name}: a worker's letter carries x-death`);
      continue;
    }
    const first = death && death.type === 'A' && death.value[0] && death.value[0].type === 'F' ? death.value[0].value : null;
    const reason = first && first.reason && first.reason.value;
    const queue = first && first.queue && first.queue.value;
    if (reason !== c.reason || queue !== c.work_queue) {
      problems.push(`${c.name}: x-death says ${JSON.stringify(reason)} in ${JSON.stringify(queue)}, want ${c.reason} in ${c.work_queue}`);
    }
  }
  return problems;
}

main().catch((err) => {
  console.error(`producer: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
