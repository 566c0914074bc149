'use strict';
// consumer.js plays the Node.js expiry worker that receives the jobs
// `expiryctl replay run` republished. It reads the raw bytes of every
// message (wire.js), so that it sees wire types that amqplib's own decoding
// erases, and checks each case against the producer's record:
//
//   body          the same bytes
//   properties    content_type, content_encoding, correlation_id, reply_to,
//                 message_id, timestamp (the original, not the replay's),
//                 type, app_id, priority as sent; expiration as RabbitMQ
//                 delivered it to the DLQ
//   delivery_mode 2 (a replay marks a letter replayed on the broker's
//                 confirm, which a transient message would not survive)
//   user_id       kept when it is the replaying connection's user;
//                 otherwise absent, and in header x-original-user-id
//   cluster_id    lost: amqp091-go can neither read nor write it (reported
//                 as a known loss, not a difference)
//   headers       every header as the DLQ held it, same wire type and value,
//                 less the broker's and the failure bookkeeping (Removed),
//                 plus the replay's own (x-replay-*, x-replayed-*,
//                 x-approved-by); key order does not matter
//
// It prints one row per case (captured as, replayed, ok or differences)
// and exits 1 on any difference.
//
// Usage: node consumer.js CONFIG.json EXPECT.json   (written by e2e/node_interop_test.go)

const fs = require('node:fs');
const wire = require('./wire');

wire.captureReceivedProperties();
const amqp = require('amqplib');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const expect = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const record = JSON.parse(fs.readFileSync(config.record, 'utf8'));

// Removed are the headers a replay must not carry: RabbitMQ's own and the
// failure bookkeeping of the earlier attempts.
const REMOVED = new Set([
  'x-death',
  'x-delivery-count',
  'x-error-class',
  'x-last-error',
  'x-attempt-history',
  'x-attempt',
  'x-retry-count',
  'x-retries',
  'retry-count',
]);

function removed(key) {
  return REMOVED.has(key) || key.startsWith('x-first-death-') || key.startsWith('x-last-death-');
}

// The headers a replay adds; other x-replay-* headers are allowed by the
// message contract ("ignore any you don't know").
const ADDED = ['x-replay-request', 'x-replay-count', 'x-replayed-by', 'x-approved-by', 'x-replay-item', 'x-replayed-at', 'x-original-user-id'];

const SAME_AS_SENT = ['content_type', 'content_encoding', 'correlation_id', 'reply_to', 'message_id', 'timestamp', 'type', 'app_id', 'priority'];

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function showProp(v) {
  return v === undefined ? 'absent' : JSON.stringify(v);
}

async function receive() {
  const byId = new Map();
  const unexpected = [];
  const wanted = new Set(record.cases.map((c) => c.sent.properties.message_id));
  const conn = await amqp.connect(config.url);
  const ch = await conn.createChannel();
  await ch.prefetch(100);
  for (const q of new Set(record.cases.map((c) => c.replay_queue))) {
    await ch.consume(
      q,
      (m) => {
        if (!m) return;
        const props = wire.decodeProperties(wire.rawProperties(m));
        const got = { queue: q, body: m.content, properties: props };
        if (wanted.has(props.message_id)) {
          if (!byId.has(props.message_id)) byId.set(props.message_id, []);
          byId.get(props.message_id).push(got);
        } else {
          unexpected.push(got);
        }
        ch.ack(m);
      },
      { noAck: false },
    );
  }
  const deadline = Date.now() + (expect.wait_ms || 15000);
  while (byId.size < wanted.size && Date.now() < deadline) await sleep(20);
  // A little longer, to see a second copy of anything.
  await sleep(200);
  await conn.close();
  return { byId, unexpected };
}

function compare(c, got) {
  const diffs = [];
  const losses = [];
  const sent = c.sent.properties;
  const dlq = c.at_dlq.properties;
  const p = got.properties;

  const wantBody = Buffer.from(c.sent.body, 'base64');
  if (!wantBody.equals(got.body)) {
    let at = 0;
    while (at < wantBody.length && at < got.body.length && wantBody[at] === got.body[at]) at++;
    diffs.push(`body: ${got.body.length} bytes, want the ${wantBody.length} sent; they differ from byte ${at}`);
  }
  for (const k of SAME_AS_SENT) {
    if (wire.canonical(sent[k]) !== wire.canonical(p[k])) diffs.push(`${k}: want ${showProp(sent[k])}, got ${showProp(p[k])}`);
  }
  if (dlq.expiration !== p.expiration) {
    diffs.push(`expiration: want ${showProp(dlq.expiration)} (as RabbitMQ delivered it to the DLQ), got ${showProp(p.expiration)}`);
  }
  if (p.delivery_mode !== 2) {
    diffs.push(`delivery_mode: want 2 (sent ${showProp(sent.delivery_mode)}), got ${showProp(p.delivery_mode)}`);
  }

  // Headers: the DLQ's, less Removed, plus the replay's.
  const want = Object.create(null);
  for (const [k, v] of Object.entries(dlq.headers || {})) {
    if (!removed(k)) want[k] = v;
  }
  const letter = expect.letters[c.name] || {};
  want['x-replay-request'] = { type: 'l', value: String(expect.request_id) };
  want['x-replay-count'] = { type: 'l', value: '1' };
  want['x-replayed-by'] = { type: 'S', value: expect.replayed_by };
  want['x-approved-by'] = { type: 'S', value: expect.approved_by };
  want['x-replay-item'] = { type: 'l', value: String(letter.id) };
  const h = p.headers || {};
  const at = h['x-replayed-at'];
  const from = Math.floor(expect.run_started_ms / 1000) - 1;
  const to = Math.ceil(expect.run_finished_ms / 1000) + 1;
  if (at && at.type === 'T' && Number(at.value) >= from && Number(at.value) <= to) {
    want['x-replayed-at'] = at;
  } else {
    want['x-replayed-at'] = { type: 'T', value: `${from}..${to} (during the run, in seconds)` };
  }

  if (sent.user_id === undefined || sent.user_id === expect.replaying_user) {
    if (sent.user_id !== p.user_id) diffs.push(`user_id: want ${showProp(sent.user_id)}, got ${showProp(p.user_id)}`);
  } else {
    want['x-original-user-id'] = { type: 'S', value: sent.user_id };
    if (p.user_id !== undefined) {
      diffs.push(`user_id: want absent (sent ${showProp(sent.user_id)}, the replaying user is ${JSON.stringify(expect.replaying_user)}), got ${showProp(p.user_id)}`);
    }
  }
  if (p.cluster_id !== sent.cluster_id) {
    if (p.cluster_id === undefined) losses.push(`cluster_id ${showProp(sent.cluster_id)} lost (amqp091-go can neither read nor write it)`);
    else diffs.push(`cluster_id: want ${showProp(sent.cluster_id)}, got ${showProp(p.cluster_id)}`);
  }

  const gotHeaders = Object.create(null);
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith('x-replay') && !ADDED.includes(k)) {
      losses.push(`extra header ${k} = ${wire.show(v)} (allowed: x-replay-* headers may be added)`);
      continue;
    }
    gotHeaders[k] = v;
  }
  for (const d of wire.diffTyped('', want, gotHeaders)) diffs.push(`header ${d}`);
  return { diffs, losses };
}

async function main() {
  const { byId, unexpected } = await receive();
  const rows = [];
  let failed = 0;
  let lost = 0;
  for (const c of record.cases) {
    const letter = expect.letters[c.name];
    const captured = letter ? `#${letter.id} ${letter.category}` : 'not captured';
    const copies = byId.get(c.sent.properties.message_id) || [];
    const row = { name: c.name, captured, replayed: copies.length ? `yes, ${copies[0].queue === config.work_queue ? 'work queue' : 'its queue'}` : 'no', diffs: [], losses: [] };
    if (!letter) row.diffs.push('not captured by dlq ingest');
    if (copies.length === 0) {
      row.diffs.push(`not replayed: nothing with message_id ${JSON.stringify(c.sent.properties.message_id)} reached ${c.replay_queue}`);
    } else {
      if (copies.length > 1) row.diffs.push(`received ${copies.length} copies, want 1`);
      if (copies[0].queue !== c.replay_queue) row.diffs.push(`replayed to ${copies[0].queue}, want ${c.replay_queue}`);
      const { diffs, losses } = compare(c, copies[0]);
      row.diffs.push(...diffs);
      row.losses.push(...losses);
    }
    if (row.diffs.length) failed++;
    lost += row.losses.length;
    rows.push(row);
  }

  const w = [Math.max(4, ...rows.map((r) => r.name.length)), Math.max(8, ...rows.map((r) => r.captured.length)), Math.max(8, ...rows.map((r) => r.replayed.length))];
  const line = (a, b, c2, d) => `${a.padEnd(w[0])}  ${b.padEnd(w[1])}  ${c2.padEnd(w[2])}  ${d}`;
  console.log(line('CASE', 'CAPTURED', 'REPLAYED', 'RESULT'));
  for (const r of rows) {
    console.log(line(r.name, r.captured, r.replayed, r.diffs.length ? `${r.diffs.length} differences` : 'ok'));
    for (const d of r.diffs) console.log(`    ${d}`);
    for (const l of r.losses) console.log(`    known: ${l}`);
  }
  for (const u of unexpected) {
    console.log(`unexpected message in ${u.queue}: message_id ${showProp(u.properties.message_id)}`);
  }
  console.log(`${rows.length} cases: ${rows.length - failed} ok, ${failed} with differences; ${lost} known losses; ${unexpected.length} unexpected messages`);
  if (failed > 0 || unexpected.length > 0) process.exit(1);
}

main().catch((err) => {
  console.error(`consumer: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
