'use strict';

// The conformance kit's adapter for the Node client (clients/node).
//
// Reads one JSON request per line on stdin, makes the call with fenceq's
// Client and prints the answer as one JSON line
// (conformance/README.md). Each protocol op maps to the Client
// method ops.json names for it (METHODS), its optional wire fields passed as
// the method's options (camelCase); the client's answers are already in wire
// form, bin payloads as Buffers, written back as {"$bin": hex}.

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

// The client: clients/node, or a copy of it with its own node_modules
// (FENCEQ_NODE_CLIENT; make test-conformance makes one).
const CLIENT_DIR = process.env.FENCEQ_NODE_CLIENT ||
  path.resolve(__dirname, '..', '..', 'clients', 'node');
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

// Each protocol op is the Client method ops.json names for it (its `method`,
// else the op's own name, in camelCase), its required fields (in ops.json's
// order) its leading parameters, the rest its options: read from
// protocol/ops/ops.json, not typed here (issue 57). An array of entries
// (enqueue_many's jobs, complete_many's and renew_many's items) is passed
// with each entry's keys in camelCase too. HOOKS are the ops whose call
// says more than that.
const SPEC = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', 'protocol', 'ops', 'ops.json'), 'utf8'));

/** The op's fields in order: its includes first, then its own (generate.py's op_fields). */
function opFields(op) {
  const fields = {};
  for (const inc of op.include ?? []) {
    const [kind, name] = inc.split('.');
    Object.assign(fields, SPEC[kind][name]);
  }
  return Object.assign(fields, op.fields ?? {});
}

const METHODS = Object.fromEntries(SPEC.ops.map((op) => {
  const fields = Object.entries(opFields(op));
  return [op.name, {
    method: camel(op.method ?? op.name),
    required: fields.filter(([, f]) => f.required).map(([name]) => name),
    entries: new Set(fields.filter(([, f]) => f.entries && f.type.split('|').includes('array'))
      .map(([name]) => name)),
  }];
}));

/** The op's method, its required fields as its leading parameters, the rest its options. */
function call(c, op, a) {
  const { method, required, entries: lists } = METHODS[op];
  const leading = take(a, ...required).map((v, i) => (lists.has(required[i]) ? entries(v, required[i]) : v));
  return c[method](...leading, options(a));
}

const HOOKS = {
  purge: (c, a) => (['state', 'prefix', 'group', 'limit'].some((k) => k in a)
    ? c.purgeMany(options(a)) : c.purge(...take(a, 'older_than'), options(a))),
  complete_many: (c, a) => {
    if ('next' in a && a.next === null) throw new Unsupported('next: null');
    return call(c, 'complete_many', a);
  },
  // suspend resolves the token, or null where the wire says false (C3.23).
  suspend: (c, a) => call(c, 'suspend', a).then((token) => token ?? false),
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
    case 'close_keep':
      // Closed, but kept: the next calls are made on the closed client.
      if (client === null) throw new Error('close_keep before connect');
      await client.close();
      return true;
    case 'call_from_thread':
      throw new Unsupported('the Node client runs on one event loop: no second thread can call it');
    default: {
      if (!Object.hasOwn(METHODS, op)) throw new Unsupported(`no op ${op} in this adapter`);
      if (client === null) throw new Error('a protocol op before connect');
      const a = fromJson(args);
      return Object.hasOwn(HOOKS, op) ? HOOKS[op](client, a) : call(client, op, a);
    }
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
