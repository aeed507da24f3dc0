'use strict';

// The conformance kit's adapter for the Node client (clients/node).
//
// Reads one JSON request per line on stdin, makes the call with fenceq's
// Client and prints the answer as one JSON line
// (protocol/conformance/README.md). Each protocol op maps to the Client
// method in CALLS, its optional wire fields passed as the method's options
// (camelCase); the client's answers are already in wire form, bin payloads
// as Buffers, written back as {"$bin": hex}.

const path = require('node:path');
const readline = require('node:readline');

// The client: clients/node, or a copy of it with its own node_modules
// (FENCEQ_NODE_CLIENT; make test-conformance makes one).
const CLIENT_DIR = process.env.FENCEQ_NODE_CLIENT ||
  path.resolve(__dirname, '..', '..', '..', 'clients', 'node');
const { Client, FenceqError } = require(CLIENT_DIR);

/** This client cannot make the call as asked; nothing was sent. */
class Unsupported extends Error {}

function isMap(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function fromJson(value) {
  if (Array.isArray(value)) return value.map(fromJson);
  if (isMap(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === '$bin') return Buffer.from(value.$bin, 'hex');
    return Object.fromEntries(keys.map((k) => [k, fromJson(value[k])]));
  }
  return value;
}

function toJson(value) {
  if (value instanceof Uint8Array) return { $bin: Buffer.from(value).toString('hex') };
  if (Array.isArray(value)) return value.map(toJson);
  if (isMap(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJson(v)]));
  }
  return value === undefined ? null : value;
}

const camel = (name) => name.replace(/_([a-z])/g, (_, ch) => ch.toUpperCase());

/** Takes the fields `names` out of `a` (each required). */
function take(a, ...names) {
  return names.map((name) => {
    if (!(name in a)) throw new Unsupported(`no field ${name}`);
    const value = a[name];
    delete a[name];
    return value;
  });
}

/** What is left of `a`, as a method's options (camelCase keys). */
function options(a) {
  return Object.fromEntries(Object.entries(a).map(([k, v]) => [camel(k), v]));
}

function entries(list, what) {
  if (!Array.isArray(list) || !list.every(isMap)) {
    throw new Unsupported(`${what} must be an array of maps`);
  }
  return list.map(options);
}

/** A method whose leading parameters are the fields `names`, the rest its options. */
function call(method, ...names) {
  return (c, a) => c[method](...take(a, ...names), options(a));
}

const CALLS = {
  ping: (c) => c.ping(),
  enqueue: call('enqueue', 'id'),
  state: call('state', 'id'),
  claim: call('claim', 'id', 'owner', 'ttl'),
  renew: call('renew', 'id', 'owner', 'fence', 'ttl'),
  complete: call('complete', 'id', 'owner', 'fence', 'result'),
  release: call('release', 'id', 'owner', 'fence'),
  claim_next: call('claimNext', 'queue', 'owner', 'ttl'),
  fail: call('fail', 'id', 'owner', 'fence', 'error'),
  check: call('check', 'id', 'owner', 'fence'),
  retry: call('retry', 'id'),
  stats: call('stats'),
  list: call('list'),
  purge: (c, a) => (['state', 'prefix', 'group', 'limit'].some((k) => k in a)
    ? c.purgeMany(options(a)) : c.purge(...take(a, 'older_than'), options(a))),
  metrics: call('metrics'),
  complete_next: call('completeAndClaimNext', 'id', 'owner', 'fence', 'result', 'queue', 'ttl'),
  enqueue_many: (c, a) => c.enqueueMany(entries(...take(a, 'jobs'), 'jobs'), options(a)),
  complete_many: (c, a) => {
    if ('next' in a && a.next === null) throw new Unsupported('next: null');
    return c.completeMany(entries(...take(a, 'items'), 'items'), options(a));
  },
  renew_many: (c, a) => {
    const items = entries(...take(a, 'items'), 'items');
    return c.renewMany(items, ...take(a, 'ttl'), options(a));
  },
  cancel: call('cancel', 'id'),
  job: call('job', 'id'),
  queue_config: call('queueConfig', 'queue'),
  await: call('awaitJob', 'id'),
  schedule_set: call('scheduleSet', 'name', 'cron'),
  schedule_delete: call('scheduleDelete', 'name'),
  schedule_list: call('scheduleList'),
  enqueue_and_wait: call('enqueueAndWait', 'id'),
  results: call('results', 'ids'),
  snooze: call('snooze', 'id', 'owner', 'fence', 'delay'),
  retry_many: call('retryMany', 'queue'),
  cancel_many: call('cancelMany', 'queue'),
};

let client = null;

async function closeClient() {
  if (client !== null) {
    const old = client;
    client = null;
    await old.close();
  }
}

async function handle(op, args) {
  switch (op) {
    case 'hello':
      return { client: 'node', version: require(path.join(CLIENT_DIR, 'package.json')).version };
    case 'connect':
      await closeClient();
      client = new Client(args.endpoint, { timeoutMs: args.timeout * 1000 });
      return true;
    case 'close':
      await closeClient();
      return true;
    default:
      if (!Object.hasOwn(CALLS, op)) throw new Unsupported(`no op ${op} in this adapter`);
      if (client === null) throw new Error('a protocol op before connect');
      return CALLS[op](client, fromJson(args));
  }
}

async function answer(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (err) {
    return { seq: null, ok: false, error: { code: 'adapter', message: String(err) } };
  }
  const { seq, op, args } = request;
  try {
    return { seq, ok: true, result: toJson(await handle(op, { ...(args ?? {}) })) };
  } catch (err) {
    if (err instanceof FenceqError) {
      return { seq, ok: false, error: { code: err.code, message: err.message || err.code } };
    }
    // A TypeError is the client refusing the call's shape before sending.
    const code = err instanceof Unsupported || err instanceof TypeError ? 'unsupported' : 'adapter';
    return { seq, ok: false, error: { code, message: String(err.message || err) } };
  }
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    process.stdout.write(`${JSON.stringify(await answer(line))}\n`);
  }
  await closeClient();
}

main().catch((err) => {
  process.stderr.write(`node adapter: ${err.stack || err}\n`);
  process.exit(1);
});
