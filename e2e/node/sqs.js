'use strict';
// sqs.js is what sqs_producer.js and sqs_consumer.js share: a client of the
// test's SQS server, message attributes in the form the record and the
// consumer's output write them, and SQS's MD5 of message attributes.

// The pinned SDK supports Node.js 20 and warns, on every run, that versions
// published after January 2027 will not. That is about a future upgrade, not
// this run, and it would only clutter the test's output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const crypto = require('node:crypto');
const fs = require('node:fs');
const { SQSClient } = require('@aws-sdk/client-sqs');

// readConfig reads the JSON config e2e/sqs_node_interop_test.go writes:
//
//   endpoint, region   the SQS server and the region to sign for
//   work_queue, dlq    {url, arn, name} of the test's own queues; the work
//                      queue redrives into the DLQ after one receive
//   record             where the producer writes what it sent
function readConfig(path) {
  return JSON.parse(fs.readFileSync(path, 'utf8'));
}

// client is a client of the test's server. Any credentials do for an
// emulator. Requests go to the endpoint, never to a queue URL's host: goaws
// puts the region in front of its host name, which does not resolve.
function client(config) {
  return new SQSClient({
    endpoint: config.endpoint,
    region: config.region,
    credentials: { accessKeyId: 'expiryctl-node', secretAccessKey: 'expiryctl-node' },
    maxAttempts: 3,
  });
}

function isBinary(dataType) {
  return dataType === 'Binary' || dataType.startsWith('Binary.');
}

// typed is a message's attributes as the record and the consumer's output
// write them, in name order: {type, string} for the String and Number types,
// custom ones included, and {type, bytes: base64} for the Binary ones, so
// that the Go side reads values and types, never the SDK's shapes.
function typed(attributes) {
  const out = {};
  for (const name of Object.keys(attributes || {}).sort()) {
    const a = attributes[name];
    out[name] = isBinary(a.DataType)
      ? { type: a.DataType, bytes: Buffer.from(a.BinaryValue || []).toString('base64') }
      : { type: a.DataType, string: a.StringValue };
  }
  return out;
}

// md5OfAttributes is SQS's MD5OfMessageAttributes: over the attributes in
// name order, each as its name, its data type (custom suffix included), a
// transport byte (1 for String and Number, 2 for Binary) and its value, each
// of the three prefixed with its length as 4 bytes, big-endian. The SDK for
// JavaScript checks only the body's MD5; SDKs that check this one (Java's)
// reject a message whose attributes do not hash to what the server said.
//
// With asGoaws it is the digest goaws v0.5.4 answers instead: it hashes the
// transport byte and the value only for the types exactly String and
// Binary, so that for Number and every custom type only the name and the
// type count. The test accepts either, and says which it got.
function md5OfAttributes(attributes, asGoaws) {
  const names = Object.keys(attributes || {}).sort();
  if (names.length === 0) return undefined;
  const hash = crypto.createHash('md5');
  const field = (bytes) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(bytes.length);
    hash.update(len);
    hash.update(bytes);
  };
  for (const name of names) {
    const a = attributes[name];
    field(Buffer.from(name, 'utf8'));
    field(Buffer.from(a.DataType, 'utf8'));
    if (asGoaws && a.DataType !== 'String' && a.DataType !== 'Binary') continue;
    if (isBinary(a.DataType)) {
      hash.update(Buffer.from([2]));
      field(Buffer.from(a.BinaryValue || []));
    } else {
      hash.update(Buffer.from([1]));
      field(Buffer.from(a.StringValue, 'utf8'));
    }
  }
  return hash.digest('hex');
}

// md5s are a message's attribute digests: SQS's, goaws's and the one the
// server answered.
function md5s(attributes, server) {
  return { sqs: md5OfAttributes(attributes, false), goaws: md5OfAttributes(attributes, true), server };
}

// checkMD5 fails when md5OfAttributes disagrees with the digests SQS's
// documentation and other SQS implementations publish, so that a mistake
// in it is reported as one, not as goaws's.
function checkMD5() {
  const samples = [
    [{ SellerName: { DataType: 'String', StringValue: 'Example Store' } }, 'cd28f3b68aeee4b2eac9c66f2f694b58'],
    [
      {
        test_attribute_name_2: { DataType: 'String', StringValue: 'test_attribute_value_2' },
        test_attribute_name_1: { DataType: 'String', StringValue: 'test_attribute_value_1' },
      },
      'd53f3b558fe951154770f25cb63dbba9',
    ],
    [{ test_attribute_name: { DataType: 'Binary', BinaryValue: Buffer.from('test_attribute_value') } }, '23f6bd27ea87aab7dfeadcc9aebee495'],
    [
      { ordinal: { DataType: 'Number', StringValue: '1' }, category: { DataType: 'String', StringValue: 'test' } },
      'd21ae90c49061e927f57df5f5d72be1f',
    ],
  ];
  for (const [attrs, want] of samples) {
    const got = md5OfAttributes(attrs);
    if (got !== want) throw new Error(`the test's MD5 of ${JSON.stringify(attrs)} is ${got}, SQS's is ${want}`);
  }
}

module.exports = { readConfig, client, typed, md5s, checkMD5 };
