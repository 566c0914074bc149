'use strict';
// wire_selftest.js checks wire.js's typed decoder against what amqplib itself
// writes: a table of every AMQP type (trapdoor and guessed) encoded by
// amqplib's codec.encodeTable, and every basic property encoded by its
// defs.encodeProperties, must decode to exactly the typed values written out
// by hand below. The interop test runs it first, so that a mistake in the
// decoder is reported as one, not as a difference in expiryctl.
//
// Usage: node wire_selftest.js   (exits 1 and names each mismatch)

const wire = require('./wire');

const failures = [];
function check(what, want, got) {
  for (const d of wire.diffTyped(what, want, got)) failures.push(d);
}

const table = {
  int8: { '!': 'int8', value: -7 },
  uint8: { '!': 'uint8', value: 200 },
  int16: { '!': 'int16', value: -1234 },
  uint16: { '!': 'uint16', value: 65000 },
  int32: { '!': 'int32', value: -123456789 },
  uint32: { '!': 'uint32', value: 4000000000 },
  int64: { '!': 'int64', value: 9007199254740993n },
  int64neg: { '!': 'int64', value: -5 },
  float: { '!': 'float', value: 1.5 },
  float_inexact: { '!': 'float', value: 0.1 },
  double: { '!': 'double', value: Math.PI },
  decimal: { '!': 'decimal', value: { places: 2, digits: 12345 } },
  timestamp: { '!': 'timestamp', value: 1796041200 },
  timestamp_ms: { '!': 'timestamp', value: 1796041200123 },
  yes: true,
  no: false,
  void: null,
  bytes: Buffer.from([0x00, 0xff, 0x80]),
  empty_bytes: Buffer.alloc(0),
  string: 'réservation ✓',
  empty: '',
  plain_byte: 5,
  plain_byte_neg: -128,
  plain_short: 1000,
  plain_short_neg: -129,
  plain_int: 100000,
  plain_long: 2 ** 40,
  plain_double: 2.5,
  table: { inner: 'x', n: 1, deeper: { flag: false, u: { '!': 'uint16', value: 7 } } },
  empty_table: {},
  array: [1, 300, 'two', true, null, { '!': 'float', value: 0.25 }, { k: 'v' }, [2], Buffer.from('ab')],
  empty_array: [],
  // A table may have members named like the typed value's own fields.
  odd: { type: 'S-looking', value: 1 },
};

const want = {
  int8: { type: 'b', value: -7 },
  uint8: { type: 'B', value: 200 },
  int16: { type: 's', value: -1234 },
  uint16: { type: 'u', value: 65000 },
  int32: { type: 'I', value: -123456789 },
  uint32: { type: 'i', value: 4000000000 },
  int64: { type: 'l', value: '9007199254740993' },
  int64neg: { type: 'l', value: '-5' },
  float: { type: 'f', value: 1.5 },
  float_inexact: { type: 'f', value: Math.fround(0.1) },
  double: { type: 'd', value: Math.PI },
  decimal: { type: 'D', value: { places: 2, digits: 12345 } },
  timestamp: { type: 'T', value: '1796041200' },
  timestamp_ms: { type: 'T', value: '1796041200123' },
  yes: { type: 't', value: true },
  no: { type: 't', value: false },
  void: { type: 'V', value: null },
  bytes: { type: 'x', value: 'AP+A' },
  empty_bytes: { type: 'x', value: '' },
  string: { type: 'S', value: 'réservation ✓' },
  empty: { type: 'S', value: '' },
  plain_byte: { type: 'b', value: 5 },
  plain_byte_neg: { type: 'b', value: -128 },
  plain_short: { type: 's', value: 1000 },
  plain_short_neg: { type: 's', value: -129 },
  plain_int: { type: 'I', value: 100000 },
  plain_long: { type: 'l', value: String(2 ** 40) },
  plain_double: { type: 'd', value: 2.5 },
  table: {
    type: 'F',
    value: {
      inner: { type: 'S', value: 'x' },
      n: { type: 'b', value: 1 },
      deeper: { type: 'F', value: { flag: { type: 't', value: false }, u: { type: 'u', value: 7 } } },
    },
  },
  empty_table: { type: 'F', value: {} },
  array: {
    type: 'A',
    value: [
      { type: 'b', value: 1 },
      { type: 's', value: 300 },
      { type: 'S', value: 'two' },
      { type: 't', value: true },
      { type: 'V', value: null },
      { type: 'f', value: 0.25 },
      { type: 'F', value: { k: { type: 'S', value: 'v' } } },
      { type: 'A', value: [{ type: 'b', value: 2 }] },
      { type: 'x', value: 'YWI=' },
    ],
  },
  empty_array: { type: 'A', value: [] },
  odd: { type: 'F', value: { type: { type: 'S', value: 'S-looking' }, value: { type: 'b', value: 1 } } },
};

const body = wire.encodeTableBody(table);
check('table', want, wire.decodeTable(body));

// A few exact bytes, so that decoder and expectations cannot be wrong the
// same way: int8 -7 is 'b' 0xf9, uint16 65000 is 'u' 0xfd 0xe8.
function bytesOf(key) {
  const one = wire.encodeTableBody({ [key]: table[key] });
  return one.subarray(1 + Buffer.byteLength(key)).toString('hex');
}
for (const [key, hex] of [
  ['int8', '62f9'],
  ['uint16', '75fde8'],
  ['timestamp', '54000000006b0d69f0'],
  ['decimal', '440200003039'],
]) {
  const got = bytesOf(key);
  if (got !== hex) failures.push(`bytes of ${key}: want ${hex}, got ${got}`);
}

// Reordered keys are the same table; a changed type is not.
if (wire.diffTyped('', want, wire.decodeTable(wire.encodeTableBody({ yes: true, ...table }))).length !== 0) {
  failures.push('key order changed the comparison');
}
if (wire.diffTyped('', want, wire.decodeTable(wire.encodeTableBody({ ...table, int8: { '!': 'int16', value: -7 } }))).length !== 1) {
  failures.push('a widened int8 was not exactly one difference');
}
try {
  wire.decodeTable(Buffer.concat([body, Buffer.from([1, 0x61, 0x51])]));
  failures.push('an unknown type tag was accepted');
} catch (_) {
  // expected
}
try {
  wire.decodeTable(body.subarray(0, body.length - 1));
  failures.push('a truncated table was accepted');
} catch (_) {
  // expected
}

// Every basic property, through amqplib's own properties encoder.
const defs = wire.amqplibLib('defs');
const fields = {
  contentType: 'application/json',
  contentEncoding: 'gzip',
  headers: { a: { '!': 'uint8', value: 1 } },
  deliveryMode: 2,
  priority: 5,
  correlationId: 'corr-16',
  replyTo: 'replies',
  expiration: '60000',
  messageId: 'expire:r-1:v1',
  timestamp: 1796041200123,
  type: 'reservation.expire.v1',
  userId: 'guest',
  appId: 'booking-api@4.2.0',
  clusterId: 'eu-1',
};
const frame = defs.encodeProperties(defs.BasicProperties, 1, 10, fields);
const props = wire.decodeProperties(frame.subarray(19, frame.length - 1));
const wantProps = {
  content_type: 'application/json',
  content_encoding: 'gzip',
  headers: { a: { type: 'B', value: 1 } },
  delivery_mode: 2,
  priority: 5,
  correlation_id: 'corr-16',
  reply_to: 'replies',
  expiration: '60000',
  message_id: 'expire:r-1:v1',
  timestamp: '1796041200123',
  type: 'reservation.expire.v1',
  user_id: 'guest',
  app_id: 'booking-api@4.2.0',
  cluster_id: 'eu-1',
};
if (wire.canonical(props) !== wire.canonical(wantProps)) {
  failures.push(`properties: want ${wire.canonical(wantProps)}, got ${wire.canonical(props)}`);
}
// amqplib's own decoder agrees on the plain fields.
const theirs = defs.decode(defs.BasicProperties, frame.subarray(19, frame.length - 1));
for (const [camel, snake] of [
  ['contentType', 'content_type'],
  ['messageId', 'message_id'],
  ['clusterId', 'cluster_id'],
  ['userId', 'user_id'],
]) {
  if (theirs[camel] !== props[snake]) failures.push(`amqplib decodes ${camel} as ${theirs[camel]}, wire.js ${props[snake]}`);
}
const none = defs.encodeProperties(defs.BasicProperties, 1, 0, {});
if (wire.canonical(wire.decodeProperties(none.subarray(19, none.length - 1))) !== '{}') {
  failures.push('no properties did not decode as {}');
}

if (failures.length > 0) {
  console.error(`wire.js self-test: ${failures.length} mismatches against amqplib's encoder:`);
  for (const f of failures) console.error(`  ${f}`);
  process.exit(1);
}
console.log(`wire.js self-test: ${Object.keys(want).length} table members and ${Object.keys(wantProps).length} properties decode as amqplib encoded them`);
