'use strict';
// sqs_consumer.js plays the Node.js expiry worker on Amazon SQS, in one of
// two modes:
//
//   fail    the handler fails: it receives every job sqs_producer.js sent to
//           the work queue and deletes none, so that once their visibility
//           timeout runs out the queue's redrive policy moves them to the
//           DLQ. It exits 1 on a message the producer did not send or when
//           a job does not arrive.
//   drain N after the replay: it receives from the work queue until N jobs
//           of the producer's record are back (or 20 s pass), and a little
//           longer to see a second copy or one more, deletes each, and
//           prints each message as one JSON line on stdout:
//
//             {"message_id", "body" (base64 of its bytes),
//              "attributes": {NAME: {"type", "string"|"bytes" (base64)}},
//              "system_attributes": {…},
//              "md5_of_body" (the server's; the SDK checked it),
//              "md5_of_message_attributes": {"server", and "sqs" and
//              "goaws" as each computes it over what was received}}
//
//           The Go side compares them with the record; this script only
//           reports what arrived, so that the expectations live in one
//           place.
//
// Usage: node sqs_consumer.js CONFIG.json fail|drain N   (run by e2e/sqs_node_interop_test.go)

const fs = require('node:fs');
const sqs = require('./sqs');
const { ReceiveMessageCommand, DeleteMessageCommand } = require('@aws-sdk/client-sqs');

const config = sqs.readConfig(process.argv[2]);
const mode = process.argv[3];
const record = JSON.parse(fs.readFileSync(config.record, 'utf8'));

function receive(client, visibility) {
  return client.send(
    new ReceiveMessageCommand({
      QueueUrl: config.work_queue.url,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: visibility,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['All'],
    }),
  );
}

// fail receives the redriven cases once each and leaves them in flight.
// The receive takes the queue's own visibility timeout (1 s in the test),
// after which the redrive moves them.
async function fail(client) {
  const want = new Map(record.cases.filter((c) => c.path === 'redrive').map((c) => [c.message_id, c.name]));
  const seen = new Set();
  const deadline = Date.now() + 10000;
  while (seen.size < want.size && Date.now() < deadline) {
    const out = await receive(client, undefined);
    for (const m of out.Messages || []) {
      if (!want.has(m.MessageId)) throw new Error(`an unexpected message in ${config.work_queue.name}: ${m.MessageId}`);
      if (seen.has(m.MessageId)) continue;
      seen.add(m.MessageId);
      console.log(`${want.get(m.MessageId).padEnd(17)} received (receive count ${m.Attributes.ApproximateReceiveCount}); the handler failed, not deleted`);
    }
  }
  const missing = [...want].filter(([id]) => !seen.has(id)).map(([, name]) => name);
  if (missing.length) throw new Error(`never received from ${config.work_queue.name}: ${missing.join(', ')}`);
}

// drain receives, prints and deletes until want cases are back, then keeps
// receiving for a moment to catch a duplicate. A replay is a new message
// with a message id of its own, so a case is known by its body. A
// visibility timeout of 30 s on the receive keeps the queue's 1 s from
// redriving a message before it is deleted.
async function drain(client, want) {
  const bodies = new Set(record.cases.map((c) => c.body));
  const got = new Set();
  const deadline = Date.now() + 20000;
  let quietUntil = Infinity;
  while (Date.now() < Math.min(deadline, quietUntil)) {
    const out = await receive(client, 30);
    for (const m of out.Messages || []) {
      const body = Buffer.from(m.Body || '', 'utf8');
      const line = {
        message_id: m.MessageId,
        body: body.toString('base64'),
        attributes: sqs.typed(m.MessageAttributes),
        system_attributes: m.Attributes || {},
        md5_of_body: m.MD5OfBody,
        md5_of_message_attributes: sqs.md5s(m.MessageAttributes, m.MD5OfMessageAttributes),
      };
      console.log(JSON.stringify(line));
      await client.send(new DeleteMessageCommand({ QueueUrl: config.work_queue.url, ReceiptHandle: m.ReceiptHandle }));
      if (bodies.has(line.body)) got.add(line.body);
    }
    if (quietUntil === Infinity && got.size >= want) quietUntil = Date.now() + 1500;
  }
}

async function main() {
  const client = sqs.client(config);
  if (mode === 'fail') await fail(client);
  else if (mode === 'drain') await drain(client, Number(process.argv[4] || record.cases.length));
  else throw new Error(`unknown mode ${JSON.stringify(mode)}: want fail or drain`);
}

main().catch((err) => {
  console.error(`sqs_consumer: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
