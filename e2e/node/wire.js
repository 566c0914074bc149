'use strict';
// wire.js is the interop test's view of AMQP 0-9-1 bytes: a typed decoder of
// field tables and basic properties, and hooks into amqplib that keep the
// exact bytes of every basic-properties block it sends or receives.
//
// amqplib decodes every header number to a plain JS number, so after its
// decoding a short and a long look alike. The test compares wire types, so it
// decodes the raw bytes itself. A typed value is {type, value}: type is the
// AMQP (RabbitMQ) tag letter, and value is JSON-safe and exact:
//
//   b B s u I i       number
//   l T               decimal string (64 bits do not fit a JS number)
//   f d               number, or "NaN", "Infinity", "-Infinity", "-0"
//   D                 {places, digits}
//   t                 boolean
//   V                 null
//   S                 string; {base64} when the bytes are not UTF-8
//   x                 base64 string
//   F                 table: {key: typed value}
//   A                 array of typed values
//
// Basic properties decode to snake_case names (content_type, …, cluster_id);
// timestamp is a decimal string, headers a typed table, and an absent
// property is absent.

const path = require('node:path');

// amqplib's package.json "exports" hides lib/, so its files are loaded by
// path. Node caches modules by resolved file name, so this is the very module
// object amqplib's own require('./defs') gets.
const amqplibRoot = path.dirname(require.resolve('amqplib'));

function amqplibLib(name) {
  return require(path.join(amqplibRoot, 'lib', `${name}.js`));
}

// amqplib's frame.js and connection.js copy defs.decode and
// defs.encodeProperties when they load: a hook installed after that would
// never run.
function assertAmqplibNotLoaded(what) {
  for (const f of ['frame', 'connection']) {
    if (require.cache[path.join(amqplibRoot, 'lib', `${f}.js`)]) {
      throw new Error(`${what} must run before require('amqplib'): lib/${f}.js already holds its own copy of defs`);
    }
  }
}

// RAW is the key under which captureReceivedProperties leaves the raw
// basic-properties bytes on a message's properties object.
const RAW = Symbol('raw basic properties');

// captureReceivedProperties makes every message amqplib receives carry the
// bytes of its basic-properties block (flags and fields) as
// message.properties[RAW].
function captureReceivedProperties() {
  assertAmqplibNotLoaded('captureReceivedProperties');
  const defs = amqplibLib('defs');
  const decode = defs.decode;
  defs.decode = function decodeKeepingRaw(id, buf) {
    const fields = decode(id, buf);
    if (id === defs.BasicProperties) {
      // A copy: buf is a view of the socket's read buffer.
      Object.defineProperty(fields, RAW, { value: Buffer.from(buf) });
    }
    return fields;
  };
}

// captureSentProperties calls onSent with the bytes of the basic-properties
// block (flags and fields) of every message amqplib sends, synchronously
// inside publish.
function captureSentProperties(onSent) {
  assertAmqplibNotLoaded('captureSentProperties');
  const defs = amqplibLib('defs');
  const encodeProperties = defs.encodeProperties;
  defs.encodeProperties = function encodeKeepingRaw(id, channel, size, fields) {
    const frame = encodeProperties(id, channel, size, fields);
    if (id === defs.BasicProperties) {
      // frame: type(1) channel(2) size(4) class(2) weight(2) body size(8),
      // then flags and fields, then the frame-end octet.
      onSent(Buffer.from(frame.subarray(19, frame.length - 1)));
    }
    return frame;
  };
}

function rawProperties(message) {
  const raw = message.properties && message.properties[RAW];
  if (!raw) {
    throw new Error('a message arrived without its raw properties: call wire.captureReceivedProperties() before loading amqplib');
  }
  return raw;
}

// A Reader walks a buffer; Buffer's own read methods throw RangeError past
// the end, so a truncated value cannot be misread.
class Reader {
  constructor(buf) {
    this.buf = buf;
    this.off = 0;
  }
  more() {
    return this.off < this.buf.length;
  }
  take(n) {
    if (this.off + n > this.buf.length) {
      throw new RangeError(`need ${n} bytes at offset ${this.off} of ${this.buf.length}`);
    }
    const b = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return b;
  }
  u8() {
    return this.take(1).readUInt8(0);
  }
  shortstr() {
    return utf8(this.take(this.u8()));
  }
  longBytes() {
    return this.take(this.take(4).readUInt32BE(0));
  }
}

// utf8 returns the bytes as a string, or {base64} when they are not UTF-8.
function utf8(b) {
  const s = b.toString('utf8');
  return Buffer.from(s, 'utf8').equals(b) ? s : { base64: b.toString('base64') };
}

function jsonNumber(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (Object.is(x, -0)) return '-0';
  return x;
}

function readValue(r) {
  const type = String.fromCharCode(r.u8());
  let value;
  switch (type) {
    case 'b':
      value = r.take(1).readInt8(0);
      break;
    case 'B':
      value = r.take(1).readUInt8(0);
      break;
    case 's':
      value = r.take(2).readInt16BE(0);
      break;
    case 'u':
      value = r.take(2).readUInt16BE(0);
      break;
    case 'I':
      value = r.take(4).readInt32BE(0);
      break;
    case 'i':
      value = r.take(4).readUInt32BE(0);
      break;
    case 'l':
      value = r.take(8).readBigInt64BE(0).toString();
      break;
    case 'T':
      value = r.take(8).readBigUInt64BE(0).toString();
      break;
    case 'f':
      value = jsonNumber(r.take(4).readFloatBE(0));
      break;
    case 'd':
      value = jsonNumber(r.take(8).readDoubleBE(0));
      break;
    case 'D': {
      const places = r.u8();
      value = { places, digits: r.take(4).readUInt32BE(0) };
      break;
    }
    case 't':
      value = r.u8() !== 0;
      break;
    case 'V':
      value = null;
      break;
    case 'S':
      value = utf8(r.longBytes());
      break;
    case 'x':
      value = r.longBytes().toString('base64');
      break;
    case 'F':
      value = decodeTable(r.longBytes());
      break;
    case 'A':
      value = decodeArray(r.longBytes());
      break;
    default:
      throw new TypeError(`unknown field type tag ${JSON.stringify(type)} (0x${type.charCodeAt(0).toString(16)}) at offset ${r.off - 1}`);
  }
  return { type, value };
}

// decodeTable decodes the body of a field table (without its length
// prefix) into {key: typed value}. A key that occurs twice is an error: a
// table is a map, and a silent last-wins would hide a sender's bug.
function decodeTable(buf) {
  const r = new Reader(buf);
  const out = Object.create(null);
  while (r.more()) {
    const key = r.shortstr();
    if (typeof key !== 'string') {
      throw new TypeError(`a table key is not UTF-8 (base64 ${key.base64})`);
    }
    if (Object.hasOwn(out, key)) {
      throw new TypeError(`table key ${JSON.stringify(key)} occurs twice`);
    }
    out[key] = readValue(r);
  }
  return out;
}

function decodeArray(buf) {
  const r = new Reader(buf);
  const out = [];
  while (r.more()) {
    out.push(readValue(r));
  }
  return out;
}

// The basic-properties fields in wire order, with their flag bits.
const PROPERTIES = [
  [0x8000, 'content_type', 'shortstr'],
  [0x4000, 'content_encoding', 'shortstr'],
  [0x2000, 'headers', 'table'],
  [0x1000, 'delivery_mode', 'octet'],
  [0x0800, 'priority', 'octet'],
  [0x0400, 'correlation_id', 'shortstr'],
  [0x0200, 'reply_to', 'shortstr'],
  [0x0100, 'expiration', 'shortstr'],
  [0x0080, 'message_id', 'shortstr'],
  [0x0040, 'timestamp', 'timestamp'],
  [0x0020, 'type', 'shortstr'],
  [0x0010, 'user_id', 'shortstr'],
  [0x0008, 'app_id', 'shortstr'],
  [0x0004, 'cluster_id', 'shortstr'],
];

const PROPERTY_NAMES = PROPERTIES.map((p) => p[1]);

// decodeProperties decodes a basic-properties block: 16 bits of flags, then
// the fields present in wire order.
function decodeProperties(buf) {
  const r = new Reader(buf);
  const flags = r.take(2).readUInt16BE(0);
  if (flags & 0x0001) {
    throw new TypeError('property flags continue past 16 bits: basic properties have no such fields');
  }
  if (flags & 0x0002) {
    throw new TypeError('property flag bit 1 is set: basic properties have no such field');
  }
  const out = {};
  for (const [bit, name, kind] of PROPERTIES) {
    if (!(flags & bit)) continue;
    switch (kind) {
      case 'shortstr':
        out[name] = r.shortstr();
        break;
      case 'octet':
        out[name] = r.u8();
        break;
      case 'timestamp':
        out[name] = r.take(8).readBigUInt64BE(0).toString();
        break;
      case 'table':
        out[name] = decodeTable(r.longBytes());
        break;
    }
  }
  if (r.more()) {
    throw new TypeError(`${buf.length - r.off} bytes left after the basic properties`);
  }
  return out;
}

// encodeTableBody encodes a table with amqplib's own codec, as amqplib
// writes headers, and returns its body without the length prefix.
function encodeTableBody(table) {
  const codec = amqplibLib('codec');
  const buf = Buffer.alloc(65536);
  const n = codec.encodeTable(buf, table, 0);
  return Buffer.from(buf.subarray(4, n));
}

// canonical returns a JSON text of a typed value or table with table keys
// sorted, so that two tables compare equal whatever their key order.
function canonical(v) {
  return JSON.stringify(sortKeys(v));
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const out = Object.create(null);
    for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k]);
    return out;
  }
  return v;
}

// isTyped tells a typed value from a table: a table's members are objects,
// a typed value's type is a one-letter string.
function isTyped(v) {
  return Boolean(v) && typeof v === 'object' && typeof v.type === 'string' && 'value' in v;
}

// show prints a typed value briefly: "l:5", "S:\"text\"", "F{…}".
function show(tv) {
  if (tv === undefined) return 'absent';
  if (!isTyped(tv)) return JSON.stringify(tv);
  const { type, value } = tv;
  if (type === 'F') {
    return `F{${Object.keys(value)
      .sort()
      .map((k) => `${k}: ${show(value[k])}`)
      .join(', ')}}`;
  }
  if (type === 'A') return `A[${value.map(show).join(', ')}]`;
  return `${type}:${JSON.stringify(value)}`;
}

// diffTyped lists how got differs from want (typed values or tables), one
// line per difference, each naming its path: "x-table.deep.flag: want t:true, got absent".
function diffTyped(where, want, got, out = []) {
  if (canonical(want) === canonical(got)) return out;
  const isTable = (v) => Boolean(v) && typeof v === 'object' && !isTyped(v);
  if (isTable(want) && isTable(got)) {
    for (const k of [...new Set([...Object.keys(want), ...Object.keys(got)])].sort()) {
      diffTyped(where ? `${where}.${k}` : k, want[k], got[k], out);
    }
    return out;
  }
  if (want && got && want.type === got.type && want.type === 'F') {
    return diffTyped(where, want.value, got.value, out);
  }
  if (want && got && want.type === got.type && want.type === 'A' && want.value.length === got.value.length) {
    want.value.forEach((w, i) => diffTyped(`${where}[${i}]`, w, got.value[i], out));
    return out;
  }
  out.push(`${where}: want ${show(want)}, got ${show(got)}`);
  return out;
}

module.exports = {
  RAW,
  PROPERTY_NAMES,
  amqplibLib,
  captureReceivedProperties,
  captureSentProperties,
  rawProperties,
  decodeTable,
  decodeProperties,
  encodeTableBody,
  canonical,
  diffTyped,
  isTyped,
  show,
};
