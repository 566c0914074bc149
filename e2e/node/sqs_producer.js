'use strict';
// sqs_producer.js plays a Node.js booking service on Amazon SQS whose expiry
// jobs die in both ways an SQS job can:
//
//   redrive   jobs sent to the work queue, whose redrive policy moves them
//             to the DLQ once a failing worker (sqs_consumer.js fail) has
//             received them maxReceiveCount times; SQS adds nothing to them
//   worker    a job the worker sends to the DLQ itself, with the message
//             contract's failure attributes and its origin in
//             x-original-queue
//
// The jobs carry message attributes of every data type (String, Number,
// integer and decimal, Binary, and custom types such as Number.float,
// String.json and Binary.png), unicode values and contract bodies in
// snake_case and camelCase. Most carry seven or eight attributes, so that a
// replay's own fit within SQS's ten; one carries ten, to see what a replay
// does when nothing more fits.
//
// It writes a record of exactly what it sent, with the MD5 of the message
// attributes as SQS and as goaws compute it and the one the server
// answered, and exits 1 when a send fails.
//
// Usage: node sqs_producer.js CONFIG.json   (written by e2e/sqs_node_interop_test.go)

const crypto = require('node:crypto');
const fs = require('node:fs');
const sqs = require('./sqs');
const { SendMessageCommand } = require('@aws-sdk/client-sqs');

const config = sqs.readConfig(process.argv[2]);

// hold_until is in the past, in milliseconds as Node code writes it, so that
// a replay does not wait for the hold to run out.
const HOLD_UNTIL = 1796041200000;

function job(n, camel, extra) {
  const key = `expire:r-sqs-${n}:v1`;
  const j = camel
    ? { reservationId: `r-sqs-${n}`, expectedVersion: 1, holdUntil: HOLD_UNTIL, idempotencyKey: key }
    : { reservation_id: `r-sqs-${n}`, expected_version: 1, hold_until: HOLD_UNTIL, idempotency_key: key };
  return JSON.stringify({ ...j, ...extra });
}

const str = (v) => ({ DataType: 'String', StringValue: v });
const typedString = (type, v) => ({ DataType: type, StringValue: v });
const bin = (type, bytes) => ({ DataType: type, BinaryValue: Buffer.from(bytes) });

const HANDLER = str('booking-worker@4.2.0');
const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52];

function attemptHistory(attempts, lastError) {
  const start = Date.now() - attempts * 1000;
  const history = [];
  for (let i = 0; i < attempts; i++) {
    history.push({ timestamp: start + i * 1000, error_class: 'ETIMEDOUT', message: `attempt ${i + 1}: ${lastError}` });
  }
  return JSON.stringify(history);
}

function cases() {
  const workerBody = job(4, false);
  const lastError = 'connect ETIMEDOUT db.internal:5432';
  return [
    {
      name: 'redrive-snake',
      path: 'redrive',
      body: job(1, false, { customer: 'Zoë Ångström ✓ 🎉' }),
      attributes: {
        'x-handler-version': HANDLER,
        'x-tenant': str('acmé ✓ 🎉 テナント'),
        // Beyond 2^53: a Number is text, and so must it stay.
        'x-int': typedString('Number', '-9007199254740993'),
        'x-decimal': typedString('Number', '-273.15'),
        // Bytes no UTF-8 decoder would pass through unchanged.
        'x-bytes': bin('Binary', [0x00, 0xff, 0x10, 0x80, 0x7f, 0xc3, 0x28]),
        'x-float': typedString('Number.float', '0.1'),
        'x-json': typedString('String.json', '{"k":[1,2],"é":"✓"}'),
      },
    },
    {
      name: 'redrive-camel',
      path: 'redrive',
      body: job(2, true),
      attributes: {
        'x-handler-version': HANDLER,
        'x-png': bin('Binary.png', PNG),
        // SQS's limit: 38 significant digits.
        'x-big': typedString('Number', '12345678901234567890123456789012345678'),
        'x-pi': typedString('Number', '3.1415926535897932384626433832795028'),
        'x-sent-at': typedString('Number', String(Date.now())),
        'x-count': typedString('Number.int', '7'),
        'x-correlation-id': str('corr-33'),
      },
    },
    {
      // The most a letter may carry of its own for a replay to add
      // x-replay-request and x-replay-count, and nothing more.
      name: 'redrive-eight',
      path: 'redrive',
      body: job(5, true, { note: 'Ωμέγα 𝄞' }),
      attributes: {
        'x-handler-version': HANDLER,
        'x-tenant': str('𝄞 music ♫'),
        'x-request-id': typedString('String.uuid', '0b6f2f5e-1c1d-4c55-9a43-8d0c7a1e2f10'),
        'x-negative': typedString('Number', '-1'),
        'x-ratio': typedString('Number.double', '2.718281828459045'),
        'x-thumb': bin('Binary.jpeg', [0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
        'x-raw': bin('Binary', [0xde, 0xad, 0xbe, 0xef]),
        'x-region': str('eu-west-1'),
      },
    },
    {
      name: 'redrive-ten',
      path: 'redrive',
      body: job(3, false),
      attributes: {
        'x-handler-version': HANDLER,
        'x-tenant': str('αβγ'),
        'x-correlation-id': str('corr-10'),
        'x-number': typedString('Number', '10'),
        'x-decimal': typedString('Number', '2.5'),
        'x-binary': bin('Binary', [1, 2, 3]),
        'x-float': typedString('Number.float', '1.5'),
        'x-json': typedString('String.json', '{"ten":10}'),
        'x-png': bin('Binary.png', PNG.slice(0, 8)),
        'x-region': str('eu-west-1'),
      },
    },
    {
      name: 'worker-etimedout',
      path: 'worker',
      body: workerBody,
      attributes: {
        'x-error-class': str('ETIMEDOUT'),
        'x-last-error': str(lastError),
        'x-attempt-history': str(attemptHistory(3, lastError)),
        'x-retry-count': typedString('Number', '2'),
        'x-original-queue': str(config.work_queue.arn),
        'x-handler-version': HANDLER,
        'x-body-sha256': bin('Binary', crypto.createHash('sha256').update(workerBody).digest()),
      },
    },
  ];
}

async function main() {
  sqs.checkMD5();
  const client = sqs.client(config);
  const record = { work_queue: config.work_queue.arn, dlq: config.dlq.arn, cases: [] };
  for (const c of cases()) {
    const queue = c.path === 'redrive' ? config.work_queue : config.dlq;
    // The SDK checks the body's MD5 in the answer and throws on a mismatch.
    const out = await client.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: c.body, MessageAttributes: c.attributes }));
    record.cases.push({
      name: c.name,
      path: c.path,
      queue: queue.arn,
      message_id: out.MessageId,
      body: Buffer.from(c.body, 'utf8').toString('base64'),
      attributes: sqs.typed(c.attributes),
      md5_of_message_attributes: sqs.md5s(c.attributes, out.MD5OfMessageAttributes),
    });
    console.log(`${c.name.padEnd(17)} ${Object.keys(c.attributes).length} attributes, sent to ${queue.name} as ${out.MessageId}`);
  }
  fs.writeFileSync(config.record, `${JSON.stringify(record, null, 2)}\n`);
}

main().catch((err) => {
  console.error(`sqs_producer: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
