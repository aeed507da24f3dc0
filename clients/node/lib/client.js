'use strict';

// The fenceq client: one ZeroMQ DEALER socket to one daemon endpoint.
//
// Invariants that make pipelining safe:
//  - Every request carries a fresh integer `rid`; a reply settles exactly the
//    call that owns its rid. A reply whose rid is not pending (the call timed
//    out or the client never sent it) is dropped: a late reply never resolves
//    another call.
//  - One receive loop reads every reply; one send pump writes every request
//    in call order (zeromq@6 allows one send in progress per socket).
//  - A call that times out before the pump reached it is never sent, and
//    neither is one that timed out while its send found no room (ZMQ_IMMEDIATE:
//    no daemon connected): ZeroMQ never holds a request to hand to a daemon
//    that comes up later (_send).
//  - A request is one frame, the payload (docs/clients.md: `[payload]`), and
//    so is its reply. With ZMQ_IMMEDIATE, libzmq drops a connection's pipe
//    when the daemon goes; a message of two frames caught half-read or
//    half-written then aborts the process in libzmq 4.3.5 (`Assertion failed:
//    !_more (fq.cpp:80)`, seen beside a SIGTERM'd daemon with 2000 replies in
//    flight), and a reply of one frame cannot be caught so.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const zmq = require('zeromq');
const codec = require('./codec');
const { FenceqError } = require('./errors');
const { work, workNext } = require('./worker');
const { activeTraceHeaders, withTraceHeaders } = require('./trace');

/** The installed service's socket (systemd/fenceqd.conf): step 3 of resolveEndpoint. */
const SERVICE_ENDPOINT = 'ipc:///run/fenceq/fenceqd.sock';
/** The development default, where `make run` serves: step 4 of resolveEndpoint. */
const DEFAULT_ENDPOINT = 'ipc://var/fenceqd.sock';
const DEFAULT_TIMEOUT_MS = 5000;
const PROTOCOL_VERSION = 1;
// setTimeout fires at once beyond this (about 24.8 days): such a timeout is
// treated as no timeout at all.
const MAX_TIMER_MS = 2 ** 31 - 1;
// The send pump and the receive loop yield to the event loop after this many
// messages in a row (zeromq's own bound for promises it settles at once).
const YIELD_EVERY = 512;
// The longest pause between two tries of a send that found no room (_send).
const SEND_RETRY_MAX_MS = 10;

// The ops' tables, generated from protocol/ops/ops.json (issue 57: no
// hand-typed list of op names, option fields or answer shapes here).
const opsGen = require('./ops_gen');
const { answerMatches, isPlainMap } = require('./answers');

/**
 * The bad_reply of a keyed enqueue answered with booleans: a daemon before
 * unique keys ignores `key` (unknown keys are ignored) and enqueues anyway.
 */
function keysIgnored(op) {
  return new FenceqError('bad_reply',
    `fenceq: ${op} with a key answered a boolean: this daemon predates unique keys (issue 31) ` +
    'and ignored key, unique_for and on_conflict (a job may have been created without its key)');
}

/**
 * An array of `count` booleans: enqueue_many's answer from a daemon before
 * unique keys, which ignored each entry's key (keysIgnored).
 */
function isBoolArray(r, count) {
  return Array.isArray(r) && r.length === count && r.every((b) => typeof b === 'boolean');
}

/** The pages retryAll, cancelAll and purgeAll ask for at most, by default. */
const DEFAULT_MAX_PAGES = 10000;
/** purgeMany's `limit` when no filter is given: the daemon's default page. */
const DEFAULT_BULK_LIMIT = 1000;

/** How an error names each step of resolveEndpoint's order. */
const CHOSEN_BY = {
  given: 'given explicitly',
  environment: 'from FENCEQ_ENDPOINT',
  service: 'the installed service\'s socket',
  development: 'the development default',
};

/**
 * Whether SERVICE_ENDPOINT's file is there. One in a folder this user may not
 * search (/run/fenceq outside group fenceq) counts: the service is, and the
 * error then says who may connect.
 */
function serviceSocketExists() {
  try {
    fs.statSync(SERVICE_ENDPOINT.slice('ipc://'.length));
    return true;
  } catch (err) {
    return err.code === 'EACCES';
  }
}

/**
 * The endpoint a Client connects to, and the step of the order that chose it
 * (as in every fenceq client: docs/operating.md, "Which endpoint a client
 * uses"): 1. `endpoint`, when given and not empty; 2. env FENCEQ_ENDPOINT,
 * when set and not empty; 3. SERVICE_ENDPOINT, when its socket file exists;
 * 4. DEFAULT_ENDPOINT, the development default.
 *
 * @param {string} [endpoint]
 * @param {{env?: Record<string, string|undefined>, serviceSocketExists?: boolean}} [inputs]
 *   the order's other inputs, given by tests (default: process.env, and a look
 *   at the file)
 * @returns {{endpoint: string, source: 'given'|'environment'|'service'|'development'}}
 */
function resolveEndpoint(endpoint, inputs) {
  if (endpoint !== undefined && endpoint !== null && endpoint !== '') {
    return { endpoint, source: 'given' };
  }
  const fromEnv = (inputs?.env ?? process.env).FENCEQ_ENDPOINT;
  if (fromEnv) return { endpoint: fromEnv, source: 'environment' };
  if (inputs?.serviceSocketExists ?? serviceSocketExists()) {
    return { endpoint: SERVICE_ENDPOINT, source: 'service' };
  }
  return { endpoint: DEFAULT_ENDPOINT, source: 'development' };
}

/**
 * Why nothing can answer on an ipc:// endpoint, when its socket file says so
 * ('' otherwise): none there (its absolute path: a relative one is read from
 * the current folder), not a socket, or one this user may not connect to.
 */
function ipcProblem(endpoint) {
  if (!endpoint.startsWith('ipc://') || endpoint.length === 6 || endpoint[6] === '@') return '';
  const file = endpoint.slice(6);
  const absolute = path.resolve(file);
  const denied = `this user may not connect to ${absolute} (permission denied: fenceqd's --ipc-mode sets who may)`;
  let st;
  try {
    st = fs.statSync(file);
  } catch (err) {
    if (err.code === 'EACCES') return denied;  // a folder on the way is not ours to search
    return `there is no socket at ${absolute} (is fenceqd running? \`make run\` starts one ` +
      'that serves ipc://var/fenceqd.sock from the repository\'s folder)';
  }
  if (!st.isSocket()) return `${absolute} is not a socket`;
  try {
    fs.accessSync(file, fs.constants.W_OK);
  } catch {
    return denied;
  }
  return '';
}

// What each op's result must look like is ops.json's (lib/answers.js reads
// it): anything else is a bad_reply instead of a value the caller would
// misread.

// The options each method takes, JS name -> wire name: an op's optional
// fields as ops.json declares them (lib/ops_gen.js), `now` last. An unknown
// key is refused rather than dropped: `{max_attempts: 3}` (the wire spelling)
// would otherwise enqueue a job with no limit and no complaint. Options (and
// ENTRY_FIELDS' entry fields) are sent in the order of these tables, whatever
// the order of the caller's object.
const OPTION_FIELDS = {
  ...opsGen.OPTION_FIELDS,
  // purge(olderThan, options) is the purge by age (an int answered): its
  // filters, which make the answer a page, are purgeMany's.
  purge: pick(opsGen.OPTION_FIELDS.purge, ['queue', 'now']),
  // enqueueAndWait offers enqueue's options but those of a key (refused by the
  // method, saying why) and of parents.
  enqueue_and_wait: omit(opsGen.OPTION_FIELDS.enqueue_and_wait,
    ['key', 'uniqueFor', 'onConflict', 'after', 'afterFailure']),
  // Methods of this client, not ops. purgeMany is the op purge with a filter,
  // its fields in the C++ encoder's order (protocol/op_fields.cpp).
  purge_many: {
    queue: 'queue', olderThan: 'older_than', state: 'state', prefix: 'prefix', group: 'group',
    limit: 'limit', now: 'now',
  },
  enqueue_fan_in: { queue: 'queue', now: 'now' },
};

/** `table` with only the keys `keys`, in the table's order. */
function pick(table, keys) {
  return Object.fromEntries(Object.entries(table).filter(([key]) => keys.includes(key)));
}

/** `table` without the keys `keys`. */
function omit(table, keys) {
  return Object.fromEntries(Object.entries(table).filter(([key]) => !keys.includes(key)));
}

/** The entry table of a batch op's field (ops.json: the field's `entries`). */
function entryTable(op, field) {
  return { name: field, fields: opsGen.ENTRY_FIELDS[opsGen.BATCH_FIELDS[op][field]] };
}

// The fields of one entry of a batch, JS name -> wire name, checked like
// options: a misspelt key would otherwise be dropped without a word (an
// entry's `max_attempts`, a `results` that would complete with null).
const ENTRY_FIELDS = {
  enqueueMany: entryTable('enqueue_many', 'jobs'),
  completeMany: entryTable('complete_many', 'items'),
  renewMany: entryTable('renew_many', 'items'),
  next: entryTable('complete_many', 'next'),
};

/**
 * The wire form of one batch entry (or of complete_many's `next`): its known
 * keys renamed, undefined values left out. completeMany's `result` defaults
 * to null, as complete's does. The values are the daemon's to judge (a
 * missing fence is its bad_request, naming the entry).
 * @throws {FenceqError} invalid_argument: not an object, or an unknown key
 */
function entryFields(kind, entry, where) {
  const { fields: known } = ENTRY_FIELDS[kind];
  if (!isPlainMap(entry)) {
    throw new FenceqError('invalid_argument',
      `fenceq: ${where} must be an object {${Object.keys(known).join(', ')}}`);
  }
  const given = Object.keys(entry);
  for (const key of given) {
    if (!Object.hasOwn(known, key)) {
      throw new FenceqError('invalid_argument',
        `fenceq: unknown key '${key}' in ${where} (expected one of: ${Object.keys(known).join(', ')})`);
    }
  }
  const wire = {};
  for (const [key, name] of Object.entries(known)) {  // the table's order: the wire's
    if (given.includes(key) && entry[key] !== undefined) wire[name] = entry[key];
  }
  if (kind === 'completeMany' && wire.result === undefined) wire.result = null;
  return wire;
}

/**
 * The wire entries of a batch method's array argument.
 * @throws {FenceqError} invalid_argument: not an array, or a bad entry
 */
function batchEntries(method, entries) {
  const { name } = ENTRY_FIELDS[method];
  if (!Array.isArray(entries)) {
    throw new FenceqError('invalid_argument', `fenceq: ${method}: ${name} must be an array`);
  }
  return entries.map((entry, i) => entryFields(method, entry, `${method} ${name}[${i}]`));
}

/**
 * The wire fields of an options object, in the table's order (the wire's);
 * undefined values (and a null `now`, which is never a valid time) are left
 * out.
 * @throws {FenceqError} invalid_argument: not an object, or an unknown key
 */
function optionFields(op, options) {
  const fields = {};
  if (options === undefined || options === null) return fields;
  if (!isPlainMap(options)) {
    throw new FenceqError('invalid_argument', `fenceq: ${op} options must be an object`);
  }
  const known = OPTION_FIELDS[op];
  const given = Object.keys(options);
  for (const key of given) {
    if (!Object.hasOwn(known, key)) {
      throw new FenceqError('invalid_argument',
        `fenceq: unknown ${op} option '${key}' (expected one of: ${Object.keys(known).join(', ')})`);
    }
  }
  for (const [key, name] of Object.entries(known)) {
    if (!given.includes(key)) continue;
    const value = options[key];
    if (value === undefined || (key === 'now' && value === null)) continue;
    fields[name] = value;
  }
  return fields;
}

// A msgpack bin decodes as a Uint8Array view into the reply frame: hand out
// a Buffer of its own.
function payloadOf(value) {
  return value instanceof Uint8Array ? Buffer.from(value) : value;
}

/**
 * A job's saved steps (C3.22) as the methods hand them out: an object of
 * each step's name to its value, a bin value as a Buffer (a string or null
 * as saved).
 */
function stepsOf(steps) {
  const out = {};
  for (const [name, value] of Object.entries(steps)) out[name] = payloadOf(value);
  return out;
}

/**
 * A claimed job as the methods hand it out: its four fields, a bin payload as
 * a Buffer, `after` (its parents' ids, issue 32) only for a job that has
 * some, `headers` (issue 33) only for a job that has some, `steps` (C3.22,
 * bin values as Buffers) only for a job that saved some, and `signal`
 * (C3.23, a bin as a Buffer; null too) only for a job a signal woke since it
 * last suspended, as on the wire: other jobs keep their four fields.
 */
function claimedJob(job) {
  if (job === null) return null;
  const out = { id: job.id, fence: job.fence, payload: payloadOf(job.payload), attempts: job.attempts };
  if (job.after !== undefined) out.after = job.after;
  if (job.headers !== undefined) out.headers = job.headers;
  if (job.steps !== undefined) out.steps = stepsOf(job.steps);
  if (job.signal !== undefined) out.signal = payloadOf(job.signal);  // present with null: a signal of nil
  return out;
}

/**
 * A job's record (`job`, `awaitJob`, `enqueueAndWait`) as the daemon sent it,
 * but for its `steps` (C3.22, only for a job that saved some) and its
 * `signal` (C3.23, only for a job a signal woke): bin values as Buffers, as
 * a claim hands them out.
 */
function detailRecord(record) {
  if (record === null) return record;
  if (record.steps !== undefined) record.steps = stepsOf(record.steps);
  if (record.signal !== undefined) record.signal = payloadOf(record.signal);
  return record;
}

/** A bulk action's answer as the methods hand it out: `{count, more}`. */
function bulkResult(r) {
  return { count: r.count, more: r.more };
}

/**
 * A *All helper's options split into its `maxPages` (an integer >= 1,
 * default DEFAULT_MAX_PAGES) and the options of the page method.
 * @throws {FenceqError} invalid_argument: options not an object, a bad maxPages
 */
function pagedOptions(method, options) {
  if (options === undefined || options === null) return { maxPages: DEFAULT_MAX_PAGES, rest: undefined };
  if (!isPlainMap(options)) {
    throw new FenceqError('invalid_argument', `fenceq: ${method} options must be an object`);
  }
  const { maxPages = DEFAULT_MAX_PAGES, ...rest } = options;
  if (!Number.isInteger(maxPages) || maxPages < 1) {
    throw new FenceqError('invalid_argument',
      `fenceq: ${method}: maxPages must be an integer >= 1, got ${String(maxPages)}; nothing was sent`);
  }
  return { maxPages, rest };
}

/** How much longer than the client's timeout a long-poll may take: its `wait` in ms. */
function waitExtensionMs(wait) {
  return typeof wait === 'number' && wait > 0 && Number.isFinite(wait) ? wait * 1000 : 0;
}

// `now` is sent only when given: nil is never a valid time, so `{now: null}`
// means "not given" too (the server clock refuses any `now` key, C2.3).
function nowOf(options) {
  return options?.now ?? undefined;
}

// ZeroMQ CURVE keys travel as Z85 text: 40 characters for 32 bytes.
const Z85_ALPHABET =
  '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#';
const Z85_KEY_CHARS = 40;

/**
 * The 32 bytes of a 40-character Z85 key, or null when `text` is not one: a
 * character outside the Z85 alphabet, or a 5-character group beyond 2^32 - 1
 * (which libzmq's decoder refuses too).
 */
function z85Key(text) {
  if (typeof text !== 'string' || text.length !== Z85_KEY_CHARS) return null;
  const bytes = Buffer.alloc(32);
  for (let group = 0; group < Z85_KEY_CHARS / 5; group++) {
    let value = 0;
    for (let i = group * 5; i < group * 5 + 5; i++) {
      const digit = Z85_ALPHABET.indexOf(text[i]);
      if (digit < 0) return null;
      value = value * 85 + digit;
    }
    if (value > 0xffffffff) return null;
    bytes.writeUInt32BE(value, group * 4);
  }
  return bytes;
}

function isZ85Key(text) {
  return z85Key(text) !== null;
}

function z85Encode(bytes) {
  let text = '';
  for (let offset = 0; offset < bytes.length; offset += 4) {
    let value = bytes.readUInt32BE(offset);
    let group = '';
    for (let i = 0; i < 5; i++) {
      group = Z85_ALPHABET[value % 85] + group;
      value = Math.floor(value / 85);
    }
    text += group;
  }
  return text;
}

// PKCS#8 DER of an X25519 private key, up to its 32 raw bytes (RFC 8410).
const X25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');

/**
 * The Z85 public key that belongs to a Z85 CURVE secret key (CURVE keys are
 * X25519 keys), or null when this Node's crypto cannot tell.
 */
function curvePublicOf(secretKey) {
  try {
    const secret = crypto.createPrivateKey({
      key: Buffer.concat([X25519_PKCS8_PREFIX, z85Key(secretKey)]), format: 'der', type: 'pkcs8',
    });
    return z85Encode(crypto.createPublicKey(secret).export({ format: 'der', type: 'spki' }).subarray(-32));
  } catch {
    return null;
  }
}

/**
 * This client's CURVE key pair from a file written by `fenceqd --curve-keygen`
 * (zcert format: `public-key = "..."` and `secret-key = "..."` lines; lines
 * whose first non-blank character is `#` are comments, `curve` and `metadata`
 * are section names, other `name = "value"` properties are ignored), paired
 * with the daemon's public key: bare (40 Z85 characters) or as the line
 * `fenceqd --curve-keygen` printed (`public-key = "KEY"`).
 *
 * @param {string} keyFile
 * @param {string} serverPublic
 * @returns {{serverPublic: string, publicKey: string, secretKey: string}}
 *   Z85 strings of 40 characters: the `curve` option of `new Client`
 * @throws {FenceqError} invalid_argument naming the file (and line) when it
 *   cannot be read, a key is missing, given twice or not a 40-character Z85
 *   key, or the public key does not belong to the secret key; or when
 *   serverPublic is not a key
 */
function curveKeys(keyFile, serverPublic) {
  if (typeof keyFile !== 'string' || keyFile === '') {
    throw new FenceqError('invalid_argument', 'fenceq: curveKeys: keyFile must be a non-empty string');
  }
  const server = serverPublicKey(serverPublic);
  let text;
  try {
    text = fs.readFileSync(keyFile, 'utf8');
  } catch (err) {
    throw new FenceqError('invalid_argument',
      `fenceq: cannot read CURVE key file ${keyFile}: ${err.message}`);
  }
  const found = { 'public-key': null, 'secret-key': null };
  const lines = text.split(/\r?\n/);
  for (let n = 1; n <= lines.length; n++) {
    const words = lines[n - 1].trim().split(/\s+/);
    // Only whole lines are comments: '#' is also a Z85 digit.
    if (words[0] === '' || words[0].startsWith('#')) continue;
    const where = `CURVE key file ${keyFile}:${n}`;
    if (words[1] === '=') { // a zcert property: only the two keys matter
      const name = words[0];
      if (!Object.hasOwn(found, name)) continue;
      if (found[name] !== null) {
        throw new FenceqError('invalid_argument',
          `fenceq: ${where}: a second ${name} line (the first is line ${found[name].line})`);
      }
      const quoted = words.slice(2).join(' ');
      if (quoted.length !== Z85_KEY_CHARS + 2 || !quoted.startsWith('"') || !quoted.endsWith('"')) {
        throw new FenceqError('invalid_argument',
          `fenceq: ${where}: expected ${name} = "<40 Z85 chars>"`);
      }
      const key = quoted.slice(1, -1);
      if (!isZ85Key(key)) {
        throw new FenceqError('invalid_argument',
          `fenceq: ${where}: ${name} is not a 40-character Z85 key`);
      }
      found[name] = { key, line: n };
    } else if (words.length !== 1 || (words[0] !== 'curve' && words[0] !== 'metadata')) {
      throw new FenceqError('invalid_argument',
        `fenceq: ${where}: expected public-key = "..." or secret-key = "..." ` +
        '(a key pair file written by fenceqd --curve-keygen)');
    }
  }
  for (const name of ['public-key', 'secret-key']) {
    if (found[name] === null) {
      throw new FenceqError('invalid_argument',
        `fenceq: CURVE key file ${keyFile} has no ${name} line ` +
        '(expected a key pair file written by fenceqd --curve-keygen)');
    }
  }
  const publicKey = found['public-key'].key;
  const secretKey = found['secret-key'].key;
  const derived = curvePublicOf(secretKey);
  if (derived !== null && derived !== publicKey) {
    throw new FenceqError('invalid_argument',
      `fenceq: CURVE key file ${keyFile}: its public-key (line ${found['public-key'].line}) ` +
      `does not belong to its secret-key (line ${found['secret-key'].line})`);
  }
  return { serverPublic: server, publicKey, secretKey };
}

/** The daemon's public key, given bare or as `public-key = "KEY"`. */
function serverPublicKey(given) {
  if (typeof given === 'string') {
    const text = given.trim();
    const line = /^public-key\s*=\s*"([^"]*)"$/.exec(text);
    const key = line ? line[1] : text;
    if (isZ85Key(key)) return key;
  }
  let shown;
  if (typeof given !== 'string') shown = typeof given;
  else if (/^\s*secret-key\b/.test(given)) shown = 'a secret-key line (never hand out a secret key)';
  else shown = JSON.stringify(given.length > 64 ? `${given.slice(0, 64)}...` : given);
  throw new FenceqError('invalid_argument',
    'fenceq: the server public key must be 40 Z85 characters, bare or as the line ' +
    `fenceqd --curve-keygen printed (public-key = "..."), got ${shown}`);
}

const CURVE_FIELDS = ['serverPublic', 'publicKey', 'secretKey'];

/**
 * The zeromq socket options of a `curve` client option, checked: an object
 * of exactly the three keys, each 40 Z85 characters (the secret is never
 * echoed).
 * @throws {FenceqError} invalid_argument
 */
function curveSocketOptions(curve) {
  if (!isPlainMap(curve)) {
    throw new FenceqError('invalid_argument',
      'fenceq: the curve option must be an object {serverPublic, publicKey, secretKey} (see curveKeys)');
  }
  for (const key of Object.keys(curve)) {
    if (!CURVE_FIELDS.includes(key)) {
      throw new FenceqError('invalid_argument',
        `fenceq: unknown curve option '${key}' (expected: ${CURVE_FIELDS.join(', ')})`);
    }
  }
  for (const key of CURVE_FIELDS) {
    if (!isZ85Key(curve[key])) {
      throw new FenceqError('invalid_argument',
        `fenceq: curve.${key} must be a 40-character Z85 key` +
        (typeof curve[key] === 'string' ? ` (got ${curve[key].length} characters)` : ''));
    }
  }
  return {
    curveServerKey: curve.serverPublic,
    curvePublicKey: curve.publicKey,
    curveSecretKey: curve.secretKey,
  };
}

class Client {
  /**
   * Connects lazily: ZeroMQ connects in the background, so constructing
   * never waits and never fails because the daemon is down. A request is
   * handed to ZeroMQ only while a daemon is connected (ZMQ_IMMEDIATE), and
   * only while its call waits: a call made while no daemon is there times
   * out unsent, and a daemon that comes up later never applies it.
   *
   * @param {string} [endpoint] e.g. 'ipc:///run/fenceq/fenceqd.sock'; default
   *   (also for ''): resolveEndpoint's order; `endpointSource` says which step
   *   chose it
   * @param {{timeoutMs?: number, curve?: {serverPublic: string, publicKey: string,
   *   secretKey: string}, traceContext?: boolean}} [options] timeoutMs: per
   *   call, default 5000; Infinity waits forever. curve: ZeroMQ CURVE keys
   *   (40-character Z85 strings, see curveKeys), needed for the daemon's
   *   tcp:// endpoints; a refused handshake (unlisted key, wrong server key)
   *   shows only as timeouts. traceContext (default true): when the
   *   application has @opentelemetry/api, inject the active W3C trace
   *   context into each enqueued job's headers, and run workNext's job
   *   functions in the context extracted from them (lib/trace.js); false
   *   turns both off
   * @throws {FenceqError} invalid_argument for a malformed endpoint, timeout,
   *   curve key or traceContext (before any socket is made)
   */
  constructor(endpoint, options) {
    if (isPlainMap(endpoint) && options === undefined) {
      options = endpoint;
      endpoint = undefined;
    }
    const timeoutMs = options?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) {
      throw new FenceqError('invalid_argument',
        `fenceq: timeoutMs must be a positive number, got ${String(timeoutMs)}`);
    }
    const chosen = resolveEndpoint(endpoint);
    this.endpoint = chosen.endpoint;
    /** Which step of resolveEndpoint's order chose the endpoint. */
    this.endpointSource = chosen.source;
    if (typeof this.endpoint !== 'string') {
      throw new FenceqError('invalid_argument', 'fenceq: endpoint must be a non-empty string');
    }
    const curve = options?.curve ?? undefined;
    const curveOptions = curve === undefined ? {} : curveSocketOptions(curve);
    if (curve !== undefined && !this.endpoint.startsWith('tcp://')) {
      throw new FenceqError('invalid_argument',
        `fenceq: CURVE keys are for tcp:// endpoints; fenceqd serves ${this.endpoint} without CURVE`);
    }
    const traceContext = options?.traceContext ?? true;
    if (typeof traceContext !== 'boolean') {
      throw new FenceqError('invalid_argument',
        `fenceq: traceContext must be a boolean, got ${typeof traceContext}`);
    }
    this.timeoutMs = timeoutMs;
    /**
     * Whether enqueues inject the active OpenTelemetry trace context into the
     * job's headers, and workNext runs job functions in the one extracted
     * from them (only when the application has @opentelemetry/api).
     */
    this.traceContext = traceContext;

    this._nextRid = 1;
    this._answered = false;
    /** rid -> { op, resolve, reject, timer, sent } (sent: handed to ZeroMQ) for every call not yet settled. */
    this._pending = new Map();
    /** { rid, frames } in call order, not yet handed to ZeroMQ. */
    this._sendQueue = [];
    this._sendHead = 0;
    this._sending = false;
    this._closed = false;

    // Set before connect (docs/clients.md: libzmq applies some options only to
    // connections made after them). linger 0: close() must not wait for
    // requests nobody will read. immediate (ZMQ_IMMEDIATE): a request is
    // queued only on a completed connection, never for a daemon that comes
    // up later (issue 57; the kit's `fake` group checks it). Timeouts 0, for
    // good: see _send and _receive.
    this._socket = new zmq.Dealer({
      linger: 0, immediate: true, sendTimeout: 0, receiveTimeout: 0, ...curveOptions,
    });
    try {
      this._socket.connect(this.endpoint);
    } catch (err) {
      this._closed = true;
      this._socket.close();
      throw new FenceqError('invalid_argument',
        `fenceq: cannot connect to endpoint ${JSON.stringify(this.endpoint)}: ${err.message}`);
    }
    this._receiving = this._receiveLoop();
  }

  /**
   * Checks the daemon is there and which protocol and clock it runs. With
   * `{describe: true}` the answer also has `ops`: each op's name mapped to
   * the fields this daemon takes (a daemon refuses any other field).
   * @param {{describe?: boolean}} [options]
   * @returns {Promise<{protocol: number, version: string, clock: 'server'|'client', ops?: Object<string, string[]>}>}
   */
  ping(options = {}) {
    if (!isPlainMap(options) || Object.keys(options).some((k) => k !== 'describe') ||
        (options.describe !== undefined && typeof options.describe !== 'boolean')) {
      return Promise.reject(new FenceqError('invalid_argument',
        'fenceq: ping takes {describe: boolean} or nothing'));
    }
    return this._typed('ping', options.describe ? { describe: true } : {});
  }

  /**
   * C3.1: true when the job was inserted, false when the id already existed
   * (nothing changes: a lease in progress is kept, and the options of the
   * repeated enqueue are ignored).
   *
   * With `key` (issue 31: the job's unique key within its queue, 1..1024
   * bytes) it resolves `{id, created}` instead, the shape following whether
   * `key` was given (as claimNext's follows `max`): `created` true, `id` the
   * new job's; or `created` false and nothing created, because the id
   * existed (`id` is then this request's own) or because a job of the same
   * queue and key holds it (`id` is that job's): one not finished (ready,
   * delayed or leased), or, with `uniqueFor` (seconds, 0 < x <= 1e9), one
   * enqueued within the last `uniqueFor` seconds, finished or not. With
   * `onConflict: 'replace'` (default 'skip') a holder that is ready or
   * delayed takes this request's payload, priority, maxAttempts and delay
   * (counted from now), keeping its id, fence and attempts: debounce, the
   * last write wins. A leased or finished holder is never changed.
   *
   * With `group` (issue 31: 1..256 bytes, such as a customer) the job
   * belongs to that group of its queue: claimNext serves, within one
   * priority, the groups with claimable jobs in turn (the least recently
   * served first; jobs without a group are one group of their own), and the
   * queue's groupMaxLeased / groupRate settings limit each group alike. The
   * answer's shape does not change.
   *
   * With `after` (issue 32: an array of 1..1000 distinct job ids, each an
   * existing job other than this one) the job is created `blocked` (listed
   * and counted in that state, never claimed) until every parent is done;
   * then it is ready, or delayed when it has a `delay` (counted from then).
   * When a parent becomes dead or is cancelled, a blocked job is cancelled
   * (error 'parent ID dead' / 'parent ID cancelled'), and so are its blocked
   * descendants, unless its `afterFailure` is 'run' (default 'cancel'): then
   * that parent no longer holds it back. Its code reads the parents' results
   * with `results`. The answer's shape does not change.
   *
   * With `maxRuntime` (issue 33, C3.15: seconds, 0 < x <= 1e9) each attempt
   * is capped, counted from its claim: no claim or renew sets the lease end
   * past claim time + maxRuntime (the renew still resolves true); from then
   * on the holder's writes are refused, and the daemon writes the attempt
   * down as a failure ('max_runtime exceeded', the fence raised by one):
   * retried after the backoff, or dead when its attempts are used up.
   *
   * With `headers` (issue 33, C3.18: an object of string to string, keys not
   * empty, at most 4,096 bytes of keys and values in all, such as a W3C
   * `traceparent`) the job keeps them: every claim of it hands them back
   * (`job.headers`), and so does `job`. When the application has
   * @opentelemetry/api with a propagator registered, the active context's
   * trace context is added to them (unless `headers` has a `traceparent`
   * already, or the client's traceContext option is false): see lib/trace.js.
   *
   * With `deadline` (issue 60, C3.24: Unix seconds, 0 < x <= 1e11) the job is
   * claimed by then or never: from that time on no claim takes it, whatever
   * held it back (a delay, its parents, a paused queue, a suspension); it
   * reads as `dead`, and the daemon writes it down dead with the error
   * 'deadline passed' at its next reap, counted in its queue's
   * `totals.deadline_passed`. A job leased at its deadline keeps its lease.
   *
   * @param {string} id
   * @param {{queue?: string, payload?: Uint8Array|string|null, priority?: number,
   *   delay?: number, maxAttempts?: number, key?: string, uniqueFor?: number,
   *   onConflict?: 'skip'|'replace', group?: string, after?: string[],
   *   afterFailure?: 'cancel'|'run', maxRuntime?: number,
   *   headers?: Record<string, string>, deadline?: number, now?: number}} [options]
   *   queue: default 'default'; payload: a Buffer/Uint8Array travels as msgpack
   *   bin, a string as str, and claimNext gives back the same type; priority:
   *   32-bit int, higher first; delay: seconds before it can be claimed;
   *   maxAttempts: claims allowed before the job is dead (default 25; 0: no limit);
   *   key, uniqueFor, onConflict: see above (the last two only with `key`);
   *   group, after, afterFailure (only with `after`), maxRuntime, headers,
   *   deadline: see above; now: client clock only, optional (default: the latest now the
   *   daemon saw)
   * @returns {Promise<boolean|{id: string, created: boolean}>} a boolean
   *   without `key`, `{id, created}` with it
   * @throws {FenceqError} invalid_argument (nothing sent): an unknown option
   *   key; from the daemon: invalid_argument for an empty or over-1024-byte
   *   key, a uniqueFor out of range, an onConflict other than 'skip' or
   *   'replace', or uniqueFor or onConflict without a key, an empty or
   *   over-256-byte group; an empty or over-1000 `after`, an empty, repeated
   *   or unknown parent id or the job's own, afterFailure without `after` or
   *   other than 'cancel' or 'run' (the PostgreSQL store refuses `after` for
   *   now), a maxRuntime of 0 or less or above 1e9, an empty header key or
   *   headers over 4,096 bytes; bad_request for a value of the wrong type
   *   (`after` not an array, an id not a string, a maxRuntime not a number,
   *   headers not an object or a header value not a string); a deadline of
   *   0 or less or past 1e11 (invalid_argument; not a number: bad_request).
   *   Nothing is created.
   */
  enqueue(id, options) {
    let fields;
    try {
      fields = this._enqueueFields('enqueue', options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (fields.key === undefined) return this._typed('enqueue', { id, ...fields });
    const request = { id, ...fields };
    // A boolean too: a daemon before unique keys, which ignored the key.
    return this._typed('enqueue', request, undefined,
      (r) => answerMatches('enqueue', r, request) || typeof r === 'boolean')
      .then((r) => {
        if (typeof r === 'boolean') throw keysIgnored('enqueue');
        return { id: r.id, created: r.created };
      });
  }

  /**
   * C3.2: the committed row `{id, owner, until, fence, result, done}`, or null
   * when the id does not exist.
   */
  state(id) {
    return this._typed('state', { id });
  }

  /**
   * C3.3: the new fence (an integer) when the lease is taken; null when the job
   * is missing, done, or leased until after now. ttl <= 0 rejects with
   * invalid_argument. `now` is required in client clock mode, refused in
   * server clock mode (C2).
   */
  claim(id, owner, ttl, options) {
    return this._typed('claim', { id, owner, ttl, now: nowOf(options) });
  }

  /**
   * C3.4: true when the lease (owner and fence) is current and now extended to
   * now + ttl; false otherwise. An expired lease is never revived.
   * `options.progress` (a string, at most 4 KiB), when given, is kept with the
   * lease and shown by state and list (key `progress`, present once a renew
   * stored one); a refused renew stores nothing.
   */
  renew(id, owner, fence, ttl, options) {
    return this._typed('renew', { id, owner, fence, ttl, progress: options?.progress ?? undefined,
      now: nowOf(options) });
  }

  /**
   * C3.5: true when the lease is current and `result` (a string, or null) is
   * stored with done = 1; false otherwise, and the stored result is kept.
   */
  complete(id, owner, fence, result, options) {
    return this._typed('complete', {
      id, owner, fence, result: result === undefined ? null : result, now: nowOf(options),
    });
  }

  /**
   * C3.6: true when owner and fence match and the job is not done: the lease is
   * dropped (owner null, until 0) and the fence kept. False otherwise.
   */
  release(id, owner, fence) {
    return this._typed('release', { id, owner, fence });
  }

  /**
   * Claims the most urgent claimable job of `queue` (priority, then enqueue
   * order) exactly as `claim` would. With `wait` > 0 (seconds, at most 3600)
   * the daemon holds the request until a job becomes claimable or the wait
   * ends; this call's timeout is extended by `wait`.
   *
   * With `max` (an integer, 1..1000) it claims up to `max` jobs at once and
   * always resolves an array (empty: none), most urgent first, each claimed
   * exactly as a single claimNext would (its own fence, lease and attempt).
   * With `wait` as well, the daemon answers as soon as at least one job is
   * claimable. `max: 1` still answers an array: the shape follows whether
   * `max` was given.
   *
   * @param {string} queue
   * @param {string} owner
   * @param {number} ttl  lease length in seconds (> 0)
   * @param {{wait?: number, max?: number, now?: number}} [options]
   * @returns {Promise<null | {id: string, fence: number,
   *   payload: Buffer|string|null, attempts: number, after?: string[],
   *   headers?: Record<string, string>, steps?: Record<string, Buffer|string|null>,
   *   signal?: Buffer|string|null}>}
   *   without `max`; null: no claimable job (within `wait`). `payload` has
   *   the type it was enqueued with (bin: Buffer, str: string); `attempts`
   *   counts this claim; `after`, only for a job enqueued with `after`
   *   (issue 32): its parents' ids in id order (read their results with
   *   `results`; `job.after ?? []` reads every job alike); `headers`, only
   *   for a job enqueued with some (issue 33): as they were enqueued
   *   (`job.headers ?? {}` reads every job alike); `steps`, only for a job
   *   that saved some (C3.22); `signal`, only for a job that a signal woke
   *   since it last suspended (C3.23): the signal's value, null too
   *   (`'signal' in job` tells a signal of nil from none). With `max`: an
   *   array of such jobs.
   */
  claimNext(queue, owner, ttl, options) {
    let fields;
    try {
      fields = optionFields('claim_next', options);
    } catch (err) {
      return Promise.reject(err);
    }
    const timeoutMs = this.timeoutMs + waitExtensionMs(fields.wait);
    if (fields.max !== undefined) {
      return this._typed('claim_next', { queue, owner, ttl, ...fields }, timeoutMs)
        .then((jobs) => jobs.map(claimedJob));
    }
    return this._typed('claim_next', { queue, owner, ttl, ...fields }, timeoutMs).then(claimedJob);
  }

  /**
   * `complete` and then `claimNext` in one round trip (the `complete_next`
   * op). `completed` is what `complete` would answer (C3.5: true only while
   * that lease is current; a refusal keeps the stored result). `next` is what
   * `claimNext(queue, owner, ttl)` would answer, whatever the completion's
   * outcome: a refused completion still claims a job (perhaps `id` itself
   * again, if its lease had expired). A job in `next` is leased to `owner`:
   * run it or release it. There is no `wait`: on `next === null`, call
   * `claimNext` with one to long-poll. A refused request (ttl <= 0, an empty
   * queue: invalid_argument) applies neither half.
   *
   * @param {string} id
   * @param {string} owner
   * @param {number} fence
   * @param {string|null} result
   * @param {string} queue  the queue to claim the next job from
   * @param {number} ttl    the next job's lease, seconds (> 0)
   * @param {{now?: number}} [options]
   * @returns {Promise<{completed: boolean, next: null | {id: string, fence: number,
   *   payload: Buffer|string|null, attempts: number, after?: string[],
   *   headers?: Record<string, string>}}>}
   *   `next` as claimNext resolves a job (with `after` when it has parents,
   *   `headers` when it has some)
   */
  completeAndClaimNext(id, owner, fence, result, queue, ttl, options) {
    let fields;
    try {
      fields = optionFields('complete_next', options);
    } catch (err) {
      return Promise.reject(err);
    }
    return this._typed('complete_next', {
      id, owner, fence, result: result === undefined ? null : result, queue, ttl, ...fields,
    }).then(({ completed, next }) => ({ completed, next: claimedJob(next) }));
  }

  /**
   * `enqueue` for each job, in one request and one commit (the `enqueue_many`
   * op), judged in input order: resolves one answer per job, in input order,
   * what `enqueue` would answer: for a job without `key` a boolean, true when
   * created, false when the id already existed (nothing changed, C3.1); for a
   * job with `key`, `{id, created}` (an earlier entry of the same batch can
   * hold the key). One bad entry (a bad field, or an empty or over-1000
   * array) refuses the whole request with invalid_argument or bad_request
   * naming its index (`jobs[3]: ...`), and nothing is applied (C3.8).
   *
   * @param {Array<{id: string, queue?: string, payload?: Uint8Array|string|null,
   *   priority?: number, delay?: number, maxAttempts?: number, key?: string,
   *   uniqueFor?: number, onConflict?: 'skip'|'replace', group?: string,
   *   after?: string[], afterFailure?: 'cancel'|'run', maxRuntime?: number,
   *   headers?: Record<string, string>, deadline?: number}>} jobs
   *   1..1000 entries, each with enqueue's options (`now` is the request's);
   *   an entry's `after` may name earlier entries of the same batch (a graph
   *   in one request: enqueueFanIn); each entry's headers get the active
   *   trace context as enqueue's do
   * @param {{now?: number}} [options] client clock only, optional
   * @returns {Promise<Array<boolean|{id: string, created: boolean}>>} only
   *   booleans when no entry has a key
   * @throws {FenceqError} invalid_argument (nothing sent): `jobs` not an array,
   *   an entry not an object or with an unknown key (such as `max_attempts`)
   */
  enqueueMany(jobs, options) {
    try {
      const entries = batchEntries('enqueueMany', jobs);
      const injected = this._traceHeaders();
      for (const entry of entries) {
        // `headers` is an entry's last field: set here, it stays in the wire's order.
        const headers = withTraceHeaders(entry.headers, injected);
        if (headers !== entry.headers) entry.headers = headers;
      }
      const request = { jobs: entries, ...optionFields('enqueue_many', options) };
      // Only booleans too: a daemon before unique keys, which ignored the keys.
      return this._typed('enqueue_many', request, undefined,
        (r) => answerMatches('enqueue_many', r, request) || isBoolArray(r, entries.length))
        .then((answers) => {
          if (!answerMatches('enqueue_many', answers, request)) throw keysIgnored('enqueue_many');
          return answers.map((a) => (typeof a === 'boolean' ? a : { id: a.id, created: a.created }));
        });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Fan-out/fan-in in one `enqueueMany` request (one round trip, one
   * transaction, issue 32): every job of `parts`, then the job `then`
   * waiting for all of them (its `after` is the parts' ids, followed by any
   * ids `then` names in its own `after`). Resolves enqueueMany's answer, one
   * per job: the parts' in order, then `then`'s last.
   *
   * `then`'s `afterFailure` says what a dead or cancelled part does to it
   * (default: cancels it; 'run': it runs without that part's result). Once
   * claimed, the child lists its parents in `after` (in id order) and reads
   * their results with `results` (`c.results(child.after)`). An existing
   * part id is not enqueued again (its answer is false) and still counts as
   * a parent.
   *
   * @param {Array<string|{id: string}>} parts 1..999 jobs: enqueueMany's
   *   entries, or bare ids
   * @param {string|{id: string}} then the child: an enqueueMany entry, or a bare id
   * @param {{queue?: string, now?: number}} [options] queue: the queue of
   *   every job that names none (default: the daemon's); now: the request's
   * @returns {Promise<Array<boolean|{id: string, created: boolean}>>}
   * @throws {FenceqError} invalid_argument (nothing sent): no part, a part or
   *   `then` without a string id or with an unknown key, `then`'s own
   *   `after` not an array, an unknown option; from the daemon as for
   *   enqueueMany (a part's id repeated, `then`'s id among the parts, an
   *   unknown parent: invalid_argument, and nothing is created)
   */
  enqueueFanIn(parts, then, options) {
    try {
      const { queue, now } = optionFields('enqueue_fan_in', options);
      if (!Array.isArray(parts) || parts.length === 0) {
        throw new FenceqError('invalid_argument', 'fenceq: enqueueFanIn: parts must be a non-empty array');
      }
      const spec = (job, where) => {
        const entry = typeof job === 'string' ? { id: job } : job;
        if (!isPlainMap(entry) || typeof entry.id !== 'string') {
          throw new FenceqError('invalid_argument',
            `fenceq: enqueueFanIn: ${where} must be a job id or an object {id, ...} with a string id`);
        }
        return queue === undefined || entry.queue !== undefined ? { ...entry } : { ...entry, queue };
      };
      const jobs = parts.map((part, i) => spec(part, `parts[${i}]`));
      const child = spec(then, 'then');
      if (child.after !== undefined && !Array.isArray(child.after)) {
        throw new FenceqError('invalid_argument', 'fenceq: enqueueFanIn: then.after must be an array of ids');
      }
      child.after = [...jobs.map((job) => job.id), ...(child.after ?? [])];
      jobs.push(child);
      return this.enqueueMany(jobs, { now });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * `complete` for each item, in order, in one request and one commit (the
   * `complete_many` op). Each item is judged on its own, exactly as
   * `complete` would judge it (C3.5): a stale one answers false and the
   * others are stored all the same. An item naming a lease twice is judged
   * twice (the second answers false).
   *
   * Without `next`, resolves one boolean per item. With `next: {queue, ttl,
   * max}` the completes are followed, in the same round trip, by a claim of
   * up to `max` (1..1000) jobs of `queue` with leases of `ttl` seconds, for
   * the owner of the last item, whatever the completes answered; resolves
   * `{completed: boolean[], next: job[]}`. There is no `wait`: on an empty
   * `next`, long-poll with `claimNext`. A refused request (a bad item, a bad
   * `next`) applies nothing.
   *
   * @param {Array<{id: string, owner: string, fence: number, result?: string|null}>} items
   *   1..1000; a missing `result` stores null
   * @param {{next?: {queue: string, ttl: number, max: number} | null, now?: number}} [options]
   * @returns {Promise<boolean[] | {completed: boolean[], next: Array<{id: string,
   *   fence: number, payload: Buffer|string|null, attempts: number, after?: string[],
   *   headers?: Record<string, string>}>}>}
   *   `next`'s jobs as claimNext resolves them (`after` when they have
   *   parents, `headers` when they have some)
   * @throws {FenceqError} invalid_argument (nothing sent): `items` not an
   *   array, an item or `next` not an object or with an unknown key
   */
  completeMany(items, options) {
    try {
      const entries = batchEntries('completeMany', items);
      const fields = optionFields('complete_many', options);
      if (fields.next === null) delete fields.next;
      if (fields.next === undefined) {
        return this._typed('complete_many', { items: entries, ...fields });
      }
      fields.next = entryFields('next', fields.next, 'completeMany option next');
      return this._typed('complete_many', { items: entries, ...fields })
        .then(({ completed, next }) => ({ completed, next: next.map(claimedJob) }));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * `renew` for each item, in one request and one commit (the `renew_many`
   * op): a worker holding several jobs renews them all at once. Resolves one
   * boolean per item: true when that lease was current and now ends at now +
   * ttl, false otherwise (C3.4; a stale item fails alone).
   *
   * @param {Array<{id: string, owner: string, fence: number}>} items 1..1000
   * @param {number} ttl seconds (> 0), for every item
   * @param {{now?: number}} [options]
   * @returns {Promise<boolean[]>}
   * @throws {FenceqError} invalid_argument (nothing sent): `items` not an
   *   array, an item not an object or with an unknown key
   */
  renewMany(items, ttl, options) {
    try {
      const entries = batchEntries('renewMany', items);
      return this._typed('renew_many', { items: entries, ttl, ...optionFields('renew_many', options) });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * The current owner reports a failure: when the lease is current, `error`
   * (a string, at most 64 KiB) is kept, the lease ends, and the job is
   * claimable again after `retryIn` seconds (default: min(2^(attempts-1),
   * 3600)), or dead once its attempts are used up. Answers true; false when
   * the lease is not current (nothing changes).
   * @param {{retryIn?: number, now?: number}} [options]
   */
  fail(id, owner, fence, error, options) {
    return this._withOptions('fail', { id, owner, fence, error }, options);
  }

  /**
   * C3.14: the current owner puts the job off ("not now, later": someone
   * else's rate limit, a resource not there yet). When the lease is current
   * it ends, the attempt it used is given back (`attempts` goes down by one:
   * a job snoozed any number of times never becomes dead), the fence is
   * kept, no error is recorded, and the job can be claimed again `delay`
   * seconds from now. Answers true; false when the lease is not current
   * (nothing changes: a stale worker cannot snooze a job it no longer holds).
   * @param {string} id
   * @param {string} owner
   * @param {number} fence
   * @param {number} delay seconds, 0..1e9
   * @param {{now?: number}} [options]
   * @returns {Promise<boolean>}
   * @throws {FenceqError} invalid_argument (nothing sent): an unknown option
   *   key; from the daemon: invalid_argument for a delay out of range,
   *   bad_request for a missing one or one that is not a number
   */
  snooze(id, owner, fence, delay, options) {
    return this._withOptions('snooze', { id, owner, fence, delay }, options);
  }

  /**
   * C3.22: the current owner saves a step of its job: the result of one
   * part of the work (a charge's id, a file's name), kept with the job so
   * that a later attempt skips that part. Answers true when the lease is
   * current (as for `complete`) and the job has no step of that name: the
   * step is saved, and every later claim of the job (claimNext,
   * completeAndClaimNext's and completeMany's `next`) hands it back in the
   * job's `steps`, and so does `job`. Answers false otherwise, with nothing
   * changed: a stale, expired or released lease saves nothing, and a step
   * once saved is never overwritten, not even by the lease that saved it.
   * The worker helpers' `job.step(name, fn)` is built on it.
   * @param {string} id
   * @param {string} owner
   * @param {number} fence
   * @param {string} step the step's name, 1..256 bytes of UTF-8
   * @param {Uint8Array|string|null} value a payload: a Buffer/Uint8Array goes
   *   as msgpack bin and comes back as a Buffer, a string as str; null too
   * @param {{now?: number}} [options]
   * @returns {Promise<boolean>}
   * @throws {FenceqError} invalid_argument (nothing sent): an unknown option
   *   key; from the daemon: invalid_argument for an empty step name or one
   *   over 256 bytes, or past a job's bounds (64 steps, 256 KiB of values in
   *   all); bad_request for a name that is not a string, or a value that is
   *   not a payload (undefined leaves it out: a missing value)
   */
  stepSave(id, owner, fence, step, value, options) {
    return this._withOptions('step_save', { id, owner, fence, step, value }, options);
  }

  /**
   * C3.23: the current owner suspends its job until a signal wakes it (a
   * payment's webhook, a person's approval) or `timeout` seconds pass. When
   * the lease (owner and fence) is current, as for `complete`, it ends, the
   * attempt is given back (as `snooze` gives it), the fence is kept, and the
   * job is `suspended` (no claim takes it): resolves the job's signal token,
   * a string of 32 hex digits, to hand to whoever will answer (`signal`).
   * Resolves null otherwise, nothing changed: a stale, expired or released
   * lease cannot suspend the job. Each suspend answers a new token; the one
   * of an earlier wait no longer wakes the job, and the signal that woke it
   * before is forgotten.
   *
   * When the wait times out with no signal, the job is ready again with the
   * error 'suspend timed out' and no `signal` (`onTimeout: 'retry'`, the
   * default), or dead with that error (`onTimeout: 'fail'`). The daemon
   * writes that down at its next reap (every batch on SQLite, within about
   * 250 ms on PostgreSQL), not at the very second. While it waits, `job`
   * shows `suspended: {timeout, on_timeout}` (`timeout`: the Unix time the
   * wait ends), `list` rows and the `state` filter say 'suspended', and
   * `stats` counts the queue's `suspended` jobs. The worker helpers'
   * `job.suspend(timeout)` is built on it.
   * @param {string} id
   * @param {string} owner
   * @param {number} fence
   * @param {number} timeout seconds to wait for the signal, 1..2592000 (30 days)
   * @param {{onTimeout?: 'retry'|'fail', now?: number}} [options] onTimeout:
   *   'retry' (the default, not sent) or 'fail'; now: client clock, required
   * @returns {Promise<string|null>} the token, or null: not the current lease
   * @throws {FenceqError} invalid_argument (nothing sent): an unknown option
   *   key; from the daemon: invalid_argument for a timeout out of range or
   *   an onTimeout other than 'retry' or 'fail'; bad_request for a timeout
   *   that is not a number
   */
  suspend(id, owner, fence, timeout, options) {
    let fields;
    try {
      fields = optionFields('suspend', options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (fields.on_timeout === 'retry') delete fields.on_timeout;  // the default: left out on the wire
    // A token or false: `true` never comes (ops.json's `token` answer allows it), a bad_reply.
    return this._typed('suspend', { id, owner, fence, timeout, ...fields }, undefined,
      (r) => typeof r === 'string' || r === false)
      .then((r) => (r === false ? null : r));
  }

  /**
   * C3.23: wakes the job that `token` (its `suspend`'s answer) suspended,
   * once: true when the token's job is suspended and its wait has not timed
   * out: the job is ready again at once, the token is used up, and every
   * later claim of the job (claimNext, the `next` of completeAndClaimNext and
   * completeMany, a worker's job), and `job`, carry `signal`: `value` as it
   * was sent (a bin as a Buffer; null, also when left out), until the job
   * suspends again. False for a token used before (of racing signals
   * exactly one is true: a webhook delivered twice wakes the job once),
   * unknown, or whose wait timed out; nothing changed.
   * @param {string} token 1..256 bytes
   * @param {{value?: Uint8Array|string|null, now?: number}} [options]
   *   value: a payload (at most 256 KiB; a Buffer/Uint8Array travels as bin,
   *   a string as str; undefined leaves it out: nil); now: client clock,
   *   optional
   * @returns {Promise<boolean>}
   * @throws {FenceqError} invalid_argument (nothing sent): an unknown option
   *   key; from the daemon: invalid_argument for an empty token or one over
   *   256 bytes; bad_request for a token that is not a string or a value
   *   that is not a payload
   */
  signal(token, options) {
    return this._withOptions('signal', { token }, options);
  }

  /**
   * Whether that lease (owner and fence) is current; changes nothing. For an
   * outside system that must verify a token before it acts (C2.4).
   * @param {{now?: number}} [options]
   */
  check(id, owner, fence, options) {
    return this._withOptions('check', { id, owner, fence }, options);
  }

  /**
   * Operator: revives a dead job (attempts start over, claimable at once, the
   * fence continues). false when the job is missing or not dead (or
   * cancelled), and for a job with a unique key while another unfinished job
   * of its queue holds that key.
   */
  retry(id) {
    return this._typed('retry', { id });
  }

  /**
   * Operator: cancels a job that is not done (issue 18). It becomes
   * `cancelled` (final, listed and counted as such; retry revives it), its
   * lease ends and its fence goes up by one, so its holder's renew,
   * complete, fail and check are refused from then on and no result is
   * stored. false when the job is missing, done or cancelled already.
   * @param {{now?: number}} [options]
   */
  cancel(id, options) {
    return this._withOptions('cancel', { id }, options);
  }

  /**
   * Operator: one job's whole record, its `list` row (with `key` and `group`
   * when it has them) with `result` and `payload` (a string, a Uint8Array when it was sent as bytes, or null);
   * null when the id does not exist. Field names as on the wire. Jobs that
   * wait for jobs (issue 32): `after`, its parents' ids in id order, only
   * for a job enqueued with `after`; `blocked_children`, the ids of its
   * children (the jobs with it in their `after`) still blocked, by it or by
   * another parent (the first 1000 in id order), only while there are any.
   * Headers (issue 33): `headers`, as the job was enqueued with them, only
   * for a job that has some (`record.headers ?? {}` reads every job alike).
   * Steps (C3.22): `steps`, each saved step's name to its value (a bin as a
   * Buffer, a string, or null), only for a job that saved some.
   * Suspensions (C3.23): `signal`, the value of the signal that woke the job
   * since it last suspended (a bin as a Buffer; null too), only for such a
   * job; `suspended: {timeout, on_timeout}` (the Unix time its wait ends),
   * only while it is suspended.
   * @param {{now?: number}} [options] client clock mode: the time its state is judged at
   */
  job(id, options) {
    return this._withOptions('job', { id }, options).then(detailRecord);
  }

  /**
   * The state and result of up to 1000 jobs in one round trip (the op
   * `results`, issue 32: a job reads its parents' results, fan-in). Resolves
   * an object keyed by each id of `ids`, once (duplicates collapse):
   * `{state, result}` (`state` as `list` reports it, `result` what a
   * `complete` stored, null until then), or null for an id that does not
   * exist. Changes nothing. The wire's map is in the order first asked, but
   * a JS object lists integer-like keys ('7') first: iterate `ids` for that
   * order. (The msgpack decoder refuses a key '__proto__': asking for such
   * an id times out.)
   * @param {string[]} ids 1..1000 non-empty ids, sent as given
   * A reply holds about 1 MiB of results (issue 56): the later ones come
   * back `{state, result: null, omitted: true}`; ask again for those.
   * @param {{now?: number, statesOnly?: boolean}} [options] now: client clock mode, the time
   *   `state` is judged at; statesOnly: no result at all (each one there `omitted`)
   * @returns {Promise<Record<string, {state: string, result: string|null, omitted?: true} | null>>}
   * @throws {FenceqError} from the daemon: invalid_argument for an empty
   *   array, more than 1000 ids or an empty id; bad_request when `ids` is
   *   not an array or an id is not a string
   */
  results(ids, options) {
    return this._withOptions('results', { ids }, options);
  }

  /**
   * Operator: counts per queue and state, and the daemon's figures:
   * `{queues: {NAME: {ready, delayed, leased, done, dead, oldest_ready_age}},
   * requests, commits, batches, failed_commits, mean_batch, waiting_claims,
   * uptime}`. A queue with settings (queueConfig, or a group's own:
   * groupConfig) also has `paused`,
   * `max_leased`, `rate` and `per`; a queue without any has none of these keys.
   * A queue with group settings (groupMaxLeased or groupRate > 0, or a group
   * with settings of its own) also has `group_max_leased`, `group_rate` and
   * `group_per`. A queue whose groups have settings of their own
   * (groupConfig, C3.25) has `group_overrides` (how many) and `group_config`
   * (group -> {max_leased?, rate?, per?}, the first 100 by group name;
   * both absent when none). A queue with groups
   * waiting has `groups_waiting` (issue 31): how many of its groups have a
   * ready job (absent when none, so other queues keep their shape). A queue
   * with jobs waiting for their parents (enqueue's `after`, issue 32) has
   * `blocked`: how many (absent when none, likewise). A queue with a
   * retention (queueConfig's keepDone, keepDead, keepCancelled, issue 33)
   * has `keep_done`, `keep_dead`, `keep_cancelled` (seconds), each only when
   * set; its `totals.removed` counts the jobs its retention removed (0 also
   * from a daemon before retention, which sends none). A queue with
   * suspended jobs (C3.23) has `suspended`: how many (absent when none); one
   * whose jobs' deadlines passed (C3.24) has `totals.deadline_passed`
   * (absent while 0).
   * @param {{now?: number}} [options]
   */
  stats(options) {
    return this._withOptions('stats', {}, options).then((stats) => {
      for (const row of Object.values(stats.queues)) {
        if (isPlainMap(row) && isPlainMap(row.totals) && row.totals.removed === undefined) {
          row.totals.removed = 0;
        }
      }
      return stats;
    });
  }

  /**
   * Operator: jobs in id order, or by age with `order` 'created' (oldest
   * first) or '-created' (newest first), ties by id; at most `limit`
   * (1..1000, default 100); only ids that start with `prefix` when given.
   * Paging: pass the last row's id as `after`, and in created order its
   * `created` as `afterCreated` too. Each is `{id, queue, state, priority,
   * attempts, max_attempts, fence, owner, until, not_before, error, created}`
   * (`created`: when the job was enqueued, Unix seconds), and `key` and
   * `group` each only for a job enqueued with one. `key`: only the jobs of
   * that unique key (exact); `group`: only the jobs of that group (exact).
   * @param {{queue?: string,
   *   state?: 'ready'|'delayed'|'leased'|'done'|'dead'|'cancelled'|'blocked'|'suspended',
   *   limit?: number, after?: string, order?: 'id'|'created'|'-created',
   *   afterCreated?: number, prefix?: string, key?: string, group?: string,
   *   now?: number}} [options]
   */
  list(options) {
    return this._withOptions('list', {}, options);
  }

  /**
   * Operator: removes the done and dead jobs (of `queue`, or of every queue)
   * that finished at least `olderThan` seconds ago; resolves how many. The
   * fence of a purged id is kept: enqueued again, it continues from there.
   * By state, prefix or group, a page at a time: purgeMany and purgeAll.
   * @param {number} olderThan seconds >= 0
   * @param {{queue?: string, now?: number}} [options]
   */
  purge(olderThan, options) {
    return this._withOptions('purge', { older_than: olderThan }, options);
  }

  /**
   * Operator, bulk action by filter (issue 33, the op `retry_many`): one page
   * of `retry`. Up to `limit` (1..10000; the daemon's default 1000) jobs of
   * `queue` in `state` ('dead' or 'cancelled'; default both), whose id
   * starts with `prefix`, of `group` (each filter only when given), are
   * each retried as `retry` would: attempts start over, claimable at once,
   * the fence continues (C1.2). A keyed job whose key another unfinished job
   * holds stays as it is. Resolves `{count, more}`: how many were retried,
   * and whether jobs that pass the filter are left (ask again: the next
   * request goes on where this one stopped; retryAll loops). A page also
   * stops early, with `more` true, once the daemon has worked on it a few
   * milliseconds.
   * @param {string} queue
   * @param {{state?: 'dead'|'cancelled', prefix?: string, group?: string,
   *   limit?: number, now?: number}} [options] now: client clock only
   * @returns {Promise<{count: number, more: boolean}>}
   * @throws {FenceqError} invalid_argument (nothing sent): an unknown option
   *   key; from the daemon (nothing changed): invalid_argument for a state the
   *   op cannot change ('done') or a limit out of range, bad_request for a
   *   wrong type
   */
  retryMany(queue, options) {
    return this._withOptions('retry_many', { queue }, options).then(bulkResult);
  }

  /**
   * Operator, bulk action by filter (issue 33, the op `cancel_many`): one
   * page of `cancel`. Up to `limit` jobs of `queue` in `state` ('ready',
   * 'delayed', 'leased', 'blocked', 'suspended' or 'dead'; default all six),
   * of `prefix` and `group`, each cancelled as `cancel` would: the fence
   * goes up, so a holder's later writes are refused. Resolves `{count, more}` (cancelAll
   * loops). Filters and errors as for retryMany.
   * @param {string} queue
   * @param {{state?: 'ready'|'delayed'|'leased'|'blocked'|'suspended'|'dead', prefix?: string,
   *   group?: string, limit?: number, now?: number}} [options]
   * @returns {Promise<{count: number, more: boolean}>}
   */
  cancelMany(queue, options) {
    return this._withOptions('cancel_many', { queue }, options).then(bulkResult);
  }

  /**
   * Operator, bulk action by filter (issue 33, the op `purge` with a
   * filter): one page of `purge`. Up to `limit` finished jobs (of `queue`,
   * or of every queue) in `state` ('done', 'dead' or 'cancelled'; default
   * all three), of `prefix` and `group`, that finished at least `olderThan`
   * seconds ago (default 0), are removed; each id's fence is kept (enqueued
   * again, it continues from it). Resolves `{count, more}` (purgeAll
   * loops). Given no state, prefix, group nor limit it sends limit 1000, so
   * that the daemon answers a page, never the unbounded `purge`.
   * @param {{queue?: string, olderThan?: number, state?: 'done'|'dead'|'cancelled',
   *   prefix?: string, group?: string, limit?: number, now?: number}} [options]
   * @returns {Promise<{count: number, more: boolean}>}
   * @throws {FenceqError} as retryMany
   */
  purgeMany(options) {
    let fields;
    try {
      fields = optionFields('purge_many', options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!['state', 'prefix', 'group', 'limit'].some((k) => k in fields)) {
      const { now, ...rest } = fields;  // limit before now, as the encoder writes them
      fields = { ...rest, limit: DEFAULT_BULK_LIMIT, ...(now === undefined ? {} : { now }) };
    }
    return this._typed('purge', fields).then(bulkResult);  // with a filter: a page's answer
  }

  /**
   * Operator: retryMany page after page while `more`; resolves how many jobs
   * were retried in all. Bounded: at most `maxPages` requests (an integer >=
   * 1, default 10000), and it stops after a page that retried none (its jobs
   * cannot be retried, such as keyed jobs whose key another job holds:
   * asking again would find the same ones). Jobs that pass the filter may be
   * left then: `list` shows them. A page's error rejects after the earlier
   * pages were applied.
   * @param {string} queue
   * @param {{state?: 'dead'|'cancelled', prefix?: string, group?: string,
   *   limit?: number, maxPages?: number, now?: number}} [options]
   * @returns {Promise<number>}
   * @throws {FenceqError} invalid_argument (nothing sent): a bad maxPages
   */
  async retryAll(queue, options) {
    const { maxPages, rest } = pagedOptions('retryAll', options);
    return this._bulkAll(() => this.retryMany(queue, rest), maxPages);
  }

  /**
   * Operator: cancelMany page after page while `more` (bounded as
   * retryAll); resolves how many jobs were cancelled in all.
   * @param {string} queue
   * @param {{state?: 'ready'|'delayed'|'leased'|'blocked'|'suspended'|'dead', prefix?: string,
   *   group?: string, limit?: number, maxPages?: number, now?: number}} [options]
   * @returns {Promise<number>}
   */
  async cancelAll(queue, options) {
    const { maxPages, rest } = pagedOptions('cancelAll', options);
    return this._bulkAll(() => this.cancelMany(queue, rest), maxPages);
  }

  /**
   * Operator: purgeMany page after page while `more` (bounded as retryAll);
   * resolves how many jobs were removed in all.
   * @param {{queue?: string, olderThan?: number, state?: 'done'|'dead'|'cancelled',
   *   prefix?: string, group?: string, limit?: number, maxPages?: number,
   *   now?: number}} [options]
   * @returns {Promise<number>}
   */
  async purgeAll(options) {
    const { maxPages, rest } = pagedOptions('purgeAll', options);
    return this._bulkAll(() => this.purgeMany(rest), maxPages);
  }

  async _bulkAll(page, maxPages) {
    let total = 0;
    for (let i = 0; i < maxPages; i++) {
      const { count, more } = await page();
      total += count;
      if (!more || count === 0) break;
    }
    return total;
  }

  /**
   * Operator: the `stats` figures in the Prometheus text format.
   * @param {{now?: number}} [options]
   */
  metrics(options) {
    return this._withOptions('metrics', {}, options);
  }

  /**
   * Operator: changes the settings of `queue` (issue 18) and resolves true.
   * They are stored (a restart keeps them) and hold back every claim of the
   * queue, by claimNext and by claim, on every daemon of a shared database.
   * A setting left out (undefined) keeps its stored value. Settings that
   * hold nothing back (not paused, no limit; `per` alone) are removed, and
   * `stats` no longer shows them.
   * @param {string} queue
   * @param {{paused?: boolean, maxLeased?: number, rate?: number, per?: number,
   *   groupMaxLeased?: number, groupRate?: number, groupPer?: number,
   *   keepDone?: number|null, keepDead?: number|null, keepCancelled?: number|null}} [settings]
   *   paused: no job handed out until false (which wakes parked claims);
   *   maxLeased (0..1e9): at most this many jobs leased at once, 0: no limit;
   *   rate (0..100000) per `per` seconds (0 < per <= 86400, default 1): at
   *   most `rate` claims in any `per` seconds, 0: no limit. The group
   *   settings (issue 31) limit each group of the queue alike (jobs without
   *   a group by none): groupMaxLeased (0..1e9) jobs of one group leased at
   *   once, groupRate (0..100000) claims of one group in any groupPer
   *   seconds (0 < groupPer <= 86400, default 1); 0: no limit.
   *   Retention (issue 33): keepDone, keepDead, keepCancelled (seconds,
   *   0..1e10): the queue's done, dead or cancelled jobs are removed by the
   *   daemon this many seconds after they finished, as purge would (fences
   *   kept), and counted in stats as `totals.removed`; null (or Infinity)
   *   removes that retention (sent as nil: kept until purged, the default);
   *   undefined, as every setting, keeps the stored one
   * @returns {Promise<boolean>}
   * @throws {FenceqError} invalid_argument (nothing sent): settings not an
   *   object or with an unknown key; from the daemon: invalid_argument or
   *   bad_request for a bad value (nothing changes)
   */
  queueConfig(queue, settings) {
    let fields;
    try {
      fields = optionFields('queue_config', settings);
    } catch (err) {
      return Promise.reject(err);
    }
    for (const name of ['keep_done', 'keep_dead', 'keep_cancelled']) {
      if (fields[name] === Infinity) fields[name] = null;  // kept forever: the retention goes
    }
    return this._typed('queue_config', { queue, ...fields });
  }

  /**
   * Operator: `queueConfig(queue, {paused: true})`: no job of `queue` is handed
   * out (claims wait, long-polls stay parked) until `resume`.
   * @returns {Promise<boolean>}
   */
  pause(queue) {
    return this.queueConfig(queue, { paused: true });
  }

  /**
   * Operator: `queueConfig(queue, {paused: false})`: the queue hands out jobs
   * again, first to the claims parked on it.
   * @returns {Promise<boolean>}
   */
  resume(queue) {
    return this.queueConfig(queue, { paused: false });
  }

  /**
   * Operator (C3.25): overrides the queue's group settings (queueConfig's
   * groupMaxLeased, groupRate and groupPer) for one group of `queue`, a
   * tenant on a larger plan or an account that must stay slow, and resolves
   * true. Overrides are stored (a restart keeps them) and hold back every
   * claim of that group (claim, claimNext, the next jobs of
   * completeAndClaimNext and completeMany), on every daemon of a shared
   * database; a group held back under its old setting is looked at again at
   * once. A setting left out (undefined) keeps the group's stored override;
   * null removes it (sent as nil): the group follows the queue's setting
   * again. A group whose three overrides are all removed has none. `stats`
   * shows a queue's overrides as `group_overrides` (how many) and
   * `group_config` (group -> {max_leased?, rate?, per?}, the first 100 by
   * group name).
   * @param {string} queue 1..256 bytes
   * @param {string} group 1..256 bytes
   * @param {{maxLeased?: number|null, rate?: number|null, per?: number|null}} [settings]
   *   maxLeased (0..1e9): at most this many jobs of the group leased at
   *   once; rate (0..100000) per `per` seconds (0 < per <= 86400): at most
   *   `rate` claims of the group in any `per` seconds. 0 (maxLeased, rate)
   *   lifts that limit for this group alone, even where the queue sets one;
   *   null removes the override; undefined keeps the stored one
   * @returns {Promise<boolean>}
   * @throws {FenceqError} invalid_argument (nothing sent): settings not an
   *   object or with an unknown key; from the daemon: invalid_argument for an
   *   empty or over-256-byte queue or group or a value out of range,
   *   bad_request for a value of the wrong type (nothing changes)
   */
  groupConfig(queue, group, settings) {
    return this._withOptions('group_config', { queue, group }, settings);
  }

  /**
   * Waits up to `wait` seconds (0..3600, default 0) for job `id` to be
   * finished (done, dead or cancelled) and resolves its whole record, as
   * `job` does (its `list` row with `result` and `payload`); null when the
   * wait passes first (at once with no `wait`, for a job not finished yet).
   * The daemon holds the request (the op `await`) and answers as soon as a
   * complete, a fail that leaves the job dead, or a cancel finishes it; this
   * call's timeout is extended by `wait`.
   * @param {string} id
   * @param {{wait?: number, now?: number}} [options] now: client clock mode,
   *   the time the job's state is judged at
   * @returns {Promise<object|null>}
   * @throws {FenceqError} invalid_argument: no job `id`, or `wait` out of range
   */
  awaitJob(id, options) {
    let fields;
    try {
      fields = optionFields('await', options);
    } catch (err) {
      return Promise.reject(err);
    }
    return this._typed('await', { id, ...fields }, this.timeoutMs + waitExtensionMs(fields.wait))
      .then(detailRecord);
  }

  /**
   * `enqueue` then `awaitJob`, in one request (the op enqueue_and_wait;
   * against a daemon without it, two): the job's record once a worker
   * finished it, null when `wait` passes first. An id that exists already is
   * awaited all the same (the enqueue changes nothing, C3.1), so the call is
   * safe to repeat.
   * @param {string} id
   * @param {{queue?: string, payload?: Uint8Array|string|null, priority?: number,
   *   delay?: number, maxAttempts?: number, group?: string, maxRuntime?: number,
   *   headers?: Record<string, string>, wait?: number, now?: number}} [options]
   *   enqueue's options (`group`, `maxRuntime` and `headers` too, the active
   *   trace context added as enqueue adds it; not `key`), and awaitJob's
   *   `wait` (seconds, default 0); `now` goes with both requests
   * @returns {Promise<object|null>}
   */
  async enqueueAndWait(id, options) {
    for (const name of ['key', 'uniqueFor', 'onConflict']) {
      if (isPlainMap(options) && Object.hasOwn(options, name)) {
        throw new FenceqError('invalid_argument',
          `fenceq: enqueueAndWait takes no '${name}': enqueue with the key, then awaitJob the id it answers`);
      }
    }
    const fields = this._enqueueFields('enqueue_and_wait', options);  // a bad option: nothing is sent
    try {
      return detailRecord(await this._typed('enqueue_and_wait', { id, ...fields },
        this.timeoutMs + waitExtensionMs(fields.wait)));
    } catch (err) {
      if (!(err instanceof FenceqError) || err.code !== 'unknown_op') throw err;
    }
    // A daemon before enqueue_and_wait: the same in two requests.
    const { wait, ...enqueueOptions } = options ?? {};
    await this.enqueue(id, enqueueOptions);
    return this.awaitJob(id, { wait, now: enqueueOptions.now });
  }

  /**
   * Operator: a periodic job (issue 18). At each tick of `cron` (5 fields:
   * minute hour day-of-month month day-of-week, or a macro such as
   * `@daily`), read in the IANA zone `tz` (default 'UTC'), the daemon
   * enqueues one job `NAME@YYYY-MM-DDTHH:MMZ` (the tick in UTC) into `queue`
   * with the payload, priority and maxAttempts given; once per tick whatever
   * restarts or daemons, and after downtime only the latest tick missed.
   * Replaces a schedule of that name; resolves true.
   * @param {string} name 1..200 bytes
   * @param {string} cron at most 256 bytes
   * @param {{tz?: string, queue?: string, payload?: Uint8Array|string|null,
   *   priority?: number, maxAttempts?: number, now?: number}} [options]
   *   now: client clock mode, the time the schedule counts from
   * @returns {Promise<boolean>}
   * @throws {FenceqError} invalid_argument: a bad cron or tz (the message
   *   names the field), a 1001st schedule, an unknown option key
   */
  scheduleSet(name, cron, options) {
    return this._withOptions('schedule_set', { name, cron }, options);
  }

  /**
   * Operator: removes the schedule `name`; false when there is none. The jobs
   * it enqueued stay.
   * @returns {Promise<boolean>}
   */
  scheduleDelete(name) {
    return this._typed('schedule_delete', { name });
  }

  /**
   * Operator: every schedule, by name: `[{name, cron, tz, queue, payload,
   * priority, max_attempts, next, last}]`; `next` is the next tick (Unix
   * seconds; null: none within five years), `last` the last tick enqueued
   * (null: none yet).
   * @param {{now?: number}} [options] client clock mode: the time `next` follows
   * @returns {Promise<object[]>}
   */
  scheduleList(options) {
    return this._withOptions('schedule_list', {}, options);
  }

  /**
   * Claims `id`, runs `fn` while renewing the lease, then completes with the
   * fence; releases the lease if `fn` throws. A `Snooze` thrown by `fn`
   * snoozes the job instead (its attempt given back): the outcome has
   * `snoozed`. A job `fn` suspended (`job.suspend`, C3.23) is left as it
   * is: the outcome has `suspended: true` and the `token`. See lib/worker.js.
   * @returns {Promise<null | {fence: number, completed: boolean, snoozed?: boolean,
   *   suspended?: true, token?: string, result: any}>}
   */
  work(id, owner, ttl, fn, options) {
    return work(this, id, owner, ttl, fn, options);
  }

  /**
   * Claims the next job of `queue` (long-polling up to `wait` seconds, default
   * 20), runs `fn` while renewing the lease, then completes with the fence;
   * if `fn` throws, reports the failure with `fail` (the job is retried after
   * a backoff, or dead) and rethrows; if it throws a `Snooze`, snoozes the job
   * (its attempt given back, no error kept) and resolves an outcome with
   * `snoozed`; if it suspends the job (`job.suspend`, C3.23), sends nothing
   * more and resolves an outcome with `suspended: true` and the `token`
   * (the job function's `job.signalled` and `job.signalValue`: the signal
   * that woke the job). With `takeNext`, the completion also
   * claims the following job (`next` in the outcome: pass it back as `job`);
   * `stopSignal` stops that hand-over. With `prefetch: N`, a round of up to N
   * jobs (claimNext with max, or the previous round's `next` passed as
   * `jobs`), their leases kept with renewMany, their results stored with
   * completeMany, whose `next` takes the next round. See lib/worker.js.
   * @returns {Promise<null | {id: string, fence: number, attempts: number,
   *   completed: boolean, snoozed?: boolean, suspended?: true, token?: string,
   *   result: any, next?: object|null} |
   *   {outcomes: object[], next: object[]}>}
   */
  workNext(queue, owner, ttl, fn, options) {
    return workNext(this, queue, owner, ttl, fn, options);
  }

  /**
   * Low level: sends `{op, v: 1, ...fields, rid}` and resolves with the
   * reply's `result` unchecked. For ops this client has no method for yet.
   * Fields whose value is undefined are left out.
   * @param {{timeoutMs?: number}} [options] this call's timeout, default the
   *   client's (e.g. longer than a claim_next `wait`)
   * @returns {Promise<unknown>}
   */
  request(op, fields, options) {
    const timeoutMs = options?.timeoutMs ?? this.timeoutMs;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) {
      return Promise.reject(new FenceqError('invalid_argument',
        `fenceq: timeoutMs must be a positive number, got ${String(timeoutMs)}`));
    }
    if (this._closed) {
      return Promise.reject(new FenceqError('misuse', `fenceq: ${op} on a closed client`));
    }
    // Until the first reply, a missing or foreign ipc:// socket file fails
    // at once (a wrong endpoint, or no daemon); afterwards the daemon is known
    // to be there, and a missing file is a restart worth waiting for.
    if (!this._answered) {
      const why = ipcProblem(this.endpoint);
      if (why) {
        // Which step chose the endpoint, and what the caller changes.
        const choose = 'pass it as new Client(endpoint)' + (this.endpointSource === 'given'
          ? ' (FENCEQ_ENDPOINT is read only when none is given)' : ' or set FENCEQ_ENDPOINT');
        return Promise.reject(new FenceqError('unreachable',
          `fenceq: ${op}: nothing serves ${this.endpoint} (${CHOSEN_BY[this.endpointSource]}): ` +
          `${why}; to use another endpoint, ${choose}; the request was not sent`));
      }
    }
    const rid = this._nextRid++;
    let payload;
    try {
      // `v` may be overridden (tests of unsupported_version); `op` and `rid` not.
      payload = codec.encode(Object.assign({ op, v: PROTOCOL_VERSION }, fields, { op, rid }));
    } catch (err) {
      return Promise.reject(new FenceqError('invalid_argument',
        `fenceq: cannot encode ${op} request: ${err.message}`));
    }
    return new Promise((resolve, reject) => {
      const call = { op, resolve, reject, timer: null, sent: false };
      if (timeoutMs <= MAX_TIMER_MS) {
        call.timer = setTimeout(() => {
          this._pending.delete(rid);
          reject(new FenceqError('timeout',
            `fenceq: no reply to ${op} from ${this.endpoint} within ${timeoutMs} ms` +
            (call.sent ? '' : '; the request was not sent (no daemon connected, or no room ' +
              'in its pipe)') +
            (ipcProblem(this.endpoint) ? `; ${ipcProblem(this.endpoint)}` : '')));
        }, timeoutMs);
      }
      this._pending.set(rid, call);
      this._sendQueue.push({ rid, frames: [payload] });  // one frame: see the top of this file
      this._pump();
    });
  }

  /**
   * Rejects every pending call with code `closed` and closes the socket.
   * Idempotent. Later calls reject with `misuse`. A Node process with an open
   * client does not exit: close it when done.
   * @returns {Promise<void>} resolves once the receive loop has stopped
   */
  close() {
    if (!this._closed) {
      this._closed = true;
      for (const [, call] of this._pending) {
        clearTimeout(call.timer);
        call.reject(new FenceqError('closed', `fenceq: client closed before ${call.op} was answered`));
      }
      this._pending.clear();
      this._sendQueue = [];
      this._sendHead = 0;
      this._socket.close();
    }
    return this._receiving;
  }

  /** true after close(). */
  get closed() {
    return this._closed;
  }

  /** The active trace context's headers to inject (lib/trace.js), or null: none, or traceContext off. */
  _traceHeaders() {
    return this.traceContext ? activeTraceHeaders() : null;
  }

  /**
   * An enqueue's (or enqueue_and_wait's) option fields, its `headers` with
   * the active trace context added (lib/trace.js), in the wire's order.
   */
  _enqueueFields(op, options) {
    const fields = optionFields(op, options);
    const headers = withTraceHeaders(fields.headers, this._traceHeaders());
    if (headers === fields.headers) return fields;
    return optionFields(op, { ...options, headers });
  }

  _withOptions(op, fields, options) {
    try {
      return this._typed(op, { ...fields, ...optionFields(op, options) });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * `request`, and a bad_reply unless the result has `shape` (default: what
   * ops.json says the op answers to these fields).
   */
  _typed(op, fields, timeoutMs, shape = (r) => answerMatches(op, r, fields)) {
    return this.request(op, fields, { timeoutMs }).then((result) => {
      if (!shape(result)) {
        throw new FenceqError('bad_reply',
          `fenceq: ${op} answered an unexpected result: ${JSON.stringify(result)}`);
      }
      return result;
    });
  }

  /**
   * Sends one request while its call `rid` waits, and never after. The send
   * timeout stays 0: zeromq sends at once instead of first asking libzmq
   * whether the socket has room (two system calls a request, about a tenth
   * of this client's CPU in a `completeAndClaimNext` loop; bench/README.md),
   * and a send is done or refused (EAGAIN) before this returns: ZeroMQ never
   * holds a request of ours that it may deliver later.
   *
   * EAGAIN: no room. The pipe is full (a daemon that does not read), or,
   * with ZMQ_IMMEDIATE, there is no pipe at all (no daemon connected). Then
   * the send is tried again after a pause (1 ms, doubling up to
   * SEND_RETRY_MAX_MS) for as long as the call waits: once it timed out (or
   * the client closed), the request is dropped, never sent. A send that
   * zeromq itself waited out (a send timeout above 0) could instead complete
   * after the call had timed out, and deliver the request to a daemon that
   * came up meanwhile, with nobody told.
   * @returns {Promise<boolean>} false: dropped, its call settled meanwhile
   */
  async _send(rid, frames) {
    for (let pause = 1; ; pause = Math.min(pause * 2, SEND_RETRY_MAX_MS)) {
      const call = this._pending.get(rid);
      if (this._closed || call === undefined) return false;
      try {
        await this._socket.send(frames);
        call.sent = true;
        return true;
      } catch (err) {
        if (err.code !== 'EAGAIN' || this._closed) throw err;
      }
      await new Promise((resolve) => { setTimeout(resolve, pause); });
    }
  }

  /**
   * The next reply's frames. As in _send, a receive timeout of 0 reads what is
   * there without asking first; only when nothing is (EAGAIN) does it wait.
   * A wait may also end in EAGAIN: zeromq saw a reply there, and with
   * ZMQ_IMMEDIATE libzmq dropped it with its connection (a daemon gone)
   * before it was read; then it waits again.
   */
  async _receive() {
    try {
      return await this._socket.receive();
    } catch (err) {
      if (err.code !== 'EAGAIN' || this._closed) throw err;
    }
    this._socket.receiveTimeout = -1;
    try {
      for (let inRow = 1; ; inRow++) {
        try {
          return await this._socket.receive();
        } catch (err) {
          if (err.code !== 'EAGAIN' || this._closed) throw err;
        }
        if (inRow % YIELD_EVERY === 0) await new Promise(setImmediate);
      }
    } finally {
      if (!this._closed) this._socket.receiveTimeout = 0;
    }
  }

  async _pump() {
    if (this._sending) return;
    this._sending = true;
    let inRow = 0;
    try {
      while (!this._closed && this._sendHead < this._sendQueue.length) {
        // Sends that never wait never yield: let timers and I/O run now and then
        // (then look again: close() may have emptied the queue meanwhile).
        if (++inRow % YIELD_EVERY === 0) {
          await new Promise(setImmediate);
          continue;
        }
        const { rid, frames } = this._sendQueue[this._sendHead];
        this._sendQueue[this._sendHead++] = undefined;
        if (this._sendHead > 1024 && this._sendHead * 2 > this._sendQueue.length) {
          this._sendQueue = this._sendQueue.slice(this._sendHead);
          this._sendHead = 0;
        }
        if (!this._pending.has(rid)) continue; // timed out while queued: never send it
        try {
          // false: it found no room (no daemon connected, or a full pipe)
          // before its call timed out: never sent.
          await this._send(rid, frames);
        } catch (err) {
          if (this._closed) break;
          this._settle(rid, null, new FenceqError('transport',
            `fenceq: cannot send to ${this.endpoint}: ${err.message}`));
        }
      }
    } finally {
      this._sending = false;
    }
  }

  async _receiveLoop() {
    let inRow = 0;
    while (!this._closed) {
      if (++inRow % YIELD_EVERY === 0) await new Promise(setImmediate); // as in _pump
      let frames;
      try {
        frames = await this._receive();
      } catch (err) {
        if (this._closed) return;
        // Not expected (_receive waits out EAGAIN); fail loudly
        // rather than leave every later call to time out.
        this._failAll(new FenceqError('transport', `fenceq: receive failed: ${err.message}`));
        return;
      }
      this._dispatch(frames[frames.length - 1]);
    }
  }

  _dispatch(payload) {
    let reply;
    try {
      reply = codec.decode(payload);
    } catch {
      reply = undefined;
    }
    if (!isPlainMap(reply)) {
      // No rid to match it to: with one call waiting it is that call's
      // (bad_reply, as every client answers); with several, none can be told.
      if (this._pending.size === 1) {
        const [rid, call] = this._pending.entries().next().value;
        this._settle(rid, null, new FenceqError('bad_reply',
          `fenceq: the reply to ${call.op} is ${reply === undefined ? 'not msgpack' : 'not a map'}`));
      }
      return;
    }
    if (!this._pending.has(reply.rid)) return; // late or foreign
    this._answered = true;
    if (reply.ok === true && 'result' in reply) {
      this._settle(reply.rid, reply.result, null);
    } else if (reply.ok === false && isPlainMap(reply.error) && typeof reply.error.code === 'string') {
      const message = typeof reply.error.message === 'string' ? reply.error.message : '';
      this._settle(reply.rid, null, new FenceqError(reply.error.code, message));
    } else {
      this._settle(reply.rid, null, new FenceqError('bad_reply',
        `fenceq: malformed reply to ${this._pending.get(reply.rid).op}`));
    }
  }

  _settle(rid, result, error) {
    const call = this._pending.get(rid);
    if (!call) return;
    this._pending.delete(rid);
    clearTimeout(call.timer);
    if (error) call.reject(error);
    else call.resolve(result);
  }

  _failAll(error) {
    this._closed = true;
    for (const [rid] of this._pending) this._settle(rid, null, error);
    this._socket.close();
  }
}

// curveSocketOptions: for lib/events.js's Subscriber (the same `curve` option); not in index.js.
module.exports = {
  Client, DEFAULT_ENDPOINT, SERVICE_ENDPOINT, resolveEndpoint, curveKeys, curveSocketOptions,
};
