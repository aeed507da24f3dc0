'use strict';

// The shared protocol vectors (protocol/vectors/*.json, see its README), each
// suite run twice against its own fresh daemon:
//  - bytes: the exact request bytes through a raw DEALER, the reply checked
//    as the README says, and reply_hex checked against the client's decoder;
//  - client: the same steps through the Client API (typed methods where the
//    request is exactly a method call, `request()` otherwise), so the client's
//    encoder, rid matching and error mapping meet every vector. Steps whose
//    meaning depends on msgpack types a JS value cannot carry (a float 1.0,
//    bin, a non-map, a bad rid) are sent as raw bytes in this pass too, to
//    keep the suite's state sequence intact.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Client, FenceqError } = require('fenceq');
const codec = require('../lib/codec');
const { RawPeer, startDaemon } = require('./helpers');

const VECTORS_DIR = process.env.FENCEQ_VECTORS ||
  path.resolve(__dirname, '..', '..', '..', 'protocol', 'vectors');

function loadSuites() {
  const files = fs.existsSync(VECTORS_DIR)
    ? fs.readdirSync(VECTORS_DIR).filter((f) => f.endsWith('.json')).sort()
    : [];
  return files.map((f) => ({ file: f, ...JSON.parse(fs.readFileSync(path.join(VECTORS_DIR, f), 'utf8')) }));
}

function isMap(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Every key of `expected` is in `actual` with an equal value, recursively. */
function assertSubset(actual, expected, where = 'reply') {
  if (isMap(expected)) {
    assert.ok(isMap(actual), `${where}: expected a map, got ${JSON.stringify(actual)}`);
    for (const key of Object.keys(expected)) {
      assert.ok(key in actual, `${where}.${key} is missing`);
      assertSubset(actual[key], expected[key], `${where}.${key}`);
    }
  } else {
    assert.deepEqual(actual, expected, where);
  }
}

/** The README's comparison of a decoded reply with the step's `reply`. */
function assertReply(actual, step) {
  const expected = step.reply;
  if ('error' in expected) {
    assert.ok(isMap(actual), `reply is not a map: ${JSON.stringify(actual)}`);
    assert.equal(actual.ok, expected.ok);
    if ('rid' in expected) assert.deepEqual(actual.rid, expected.rid, 'rid');
    assert.ok(isMap(actual.error), 'error is a map');
    assert.equal(actual.error.code, expected.error.code, `code (message: ${actual.error.message})`);
    assert.equal(typeof actual.error.message, 'string');
    assert.ok(actual.error.message.length > 0, 'error.message is empty');
  } else if (step.compare === 'subset') {
    assertSubset(actual, expected);
  } else {
    assert.deepEqual(actual, expected);
  }
}

// Which wire fields each typed method sends: required ones, then optional ones.
// Methods are the op in camelCase, except complete_next: completeAndClaimNext,
// await: awaitJob, claim_next with max: claimNext with the max option, and
// purge with a filter (state, prefix, group or limit; issue 33): purgeMany,
// here the pseudo-op purge_many.
const METHODS = {
  ping: [[], []],
  enqueue: [['id'], ['queue', 'payload', 'priority', 'delay', 'max_attempts', 'now', 'key',
    'unique_for', 'on_conflict', 'group', 'after', 'after_failure', 'max_runtime', 'headers', 'deadline']],
  state: [['id'], []],
  claim: [['id', 'owner', 'ttl'], ['now']],
  renew: [['id', 'owner', 'fence', 'ttl'], ['progress', 'now']],
  complete: [['id', 'owner', 'fence', 'result'], ['now']],
  release: [['id', 'owner', 'fence'], []],
  claim_next: [['queue', 'owner', 'ttl'], ['wait', 'max', 'now']],
  fail: [['id', 'owner', 'fence', 'error'], ['retry_in', 'now']],
  check: [['id', 'owner', 'fence'], ['now']],
  retry: [['id'], []],
  cancel: [['id'], ['now']],
  job: [['id'], ['now']],
  stats: [[], ['now']],
  list: [[], ['queue', 'state', 'limit', 'after', 'now', 'key', 'group']],
  purge: [['older_than'], ['queue', 'now']],
  metrics: [[], ['now']],
  complete_next: [['id', 'owner', 'fence', 'result', 'queue', 'ttl'], ['now']],
  enqueue_many: [['jobs'], ['now']],
  complete_many: [['items'], ['next', 'now']],
  renew_many: [['items', 'ttl'], ['now']],
  queue_config: [['queue'], ['paused', 'max_leased', 'rate', 'per', 'group_max_leased', 'group_rate',
    'group_per', 'keep_done', 'keep_dead', 'keep_cancelled']],
  await: [['id'], ['wait', 'now']],
  schedule_set: [['name', 'cron'], ['tz', 'queue', 'payload', 'priority', 'max_attempts', 'now']],
  schedule_delete: [['name'], []],
  schedule_list: [[], ['now']],
  results: [['ids'], ['now']],
  snooze: [['id', 'owner', 'fence', 'delay'], ['now']],
  step_save: [['id', 'owner', 'fence', 'step', 'value'], ['now']],
  suspend: [['id', 'owner', 'fence', 'timeout'], ['on_timeout', 'now']],
  signal: [['token'], ['value', 'now']],
  group_config: [['queue', 'group'], ['max_leased', 'rate', 'per']],
  retry_many: [['queue'], ['state', 'prefix', 'group', 'limit', 'now']],
  cancel_many: [['queue'], ['state', 'prefix', 'group', 'limit', 'now']],
  purge_many: [[], ['queue', 'older_than', 'state', 'prefix', 'group', 'limit', 'now']],
};

/** The fields that make a purge one page by filter (purgeMany), not purge by age. */
const PURGE_FILTER = ['state', 'prefix', 'group', 'limit'];

// The wire keys a batch method's entries carry (their JS names: camelCase).
const ENTRY_KEYS = {
  enqueue_many: { field: 'jobs', keys: ['id', 'queue', 'payload', 'priority', 'delay', 'max_attempts', 'key', 'unique_for', 'on_conflict', 'group', 'after', 'after_failure', 'max_runtime', 'headers', 'deadline'] },
  complete_many: { field: 'items', keys: ['id', 'owner', 'fence', 'result'] },
  renew_many: { field: 'items', keys: ['id', 'owner', 'fence', 'progress'] },
};

/** Whether a batch method can carry these fields' entries (and complete_many's next) as they are. */
function entriesExpressible(op, fields) {
  const spec = ENTRY_KEYS[op];
  if (spec === undefined) return true;
  const entries = fields[spec.field];
  if (!Array.isArray(entries)) return false;
  const fits = (entry, keys) => isMap(entry) && Object.keys(entry).every((k) => keys.includes(k));
  if (!entries.every((entry) => fits(entry, spec.keys))) return false;
  // completeMany sends an absent result as nil: an item without one is not
  // what the vector sends.
  if (op === 'complete_many' && !entries.every((entry) => 'result' in entry)) return false;
  if (op === 'complete_many' && 'next' in fields) {
    return fields.next === null || fits(fields.next, ['queue', 'ttl', 'max']);
  }
  return true;
}

/** The wire fields `names` of `f` as a method's options (snake_case to camelCase). */
function optionsOf(f, names) {
  const options = {};
  for (const name of names) {
    if (name in f) options[name.replace(/_([a-z])/g, (_, ch) => ch.toUpperCase())] = f[name];
  }
  return options;
}

/** A batch's wire entries as a method's (every key of the entry, camelCase). */
function entriesOf(entries) {
  return entries.map((entry) => optionsOf(entry, Object.keys(entry)));
}

function callTyped(client, op, f) {
  const time = 'now' in f ? { now: f.now } : undefined;
  const options = optionsOf(f, METHODS[op][1]);
  switch (op) {
    case 'ping': return client.ping();
    case 'enqueue': return client.enqueue(f.id, options);
    case 'state': return client.state(f.id);
    case 'claim': return client.claim(f.id, f.owner, f.ttl, time);
    case 'renew': return client.renew(f.id, f.owner, f.fence, f.ttl, options);
    case 'complete': return client.complete(f.id, f.owner, f.fence, f.result, time);
    case 'release': return client.release(f.id, f.owner, f.fence);
    case 'claim_next': return client.claimNext(f.queue, f.owner, f.ttl, options);
    case 'fail': return client.fail(f.id, f.owner, f.fence, f.error, options);
    case 'check': return client.check(f.id, f.owner, f.fence, options);
    case 'retry': return client.retry(f.id);
    case 'cancel': return client.cancel(f.id, options);
    case 'job': return client.job(f.id, options);
    case 'stats': return client.stats(options);
    case 'list': return client.list(options);
    case 'purge': return client.purge(f.older_than, options);
    case 'complete_next':
      return client.completeAndClaimNext(f.id, f.owner, f.fence, f.result, f.queue, f.ttl, options);
    case 'metrics': return client.metrics(options);
    case 'enqueue_many': return client.enqueueMany(entriesOf(f.jobs), options);
    case 'complete_many': return client.completeMany(entriesOf(f.items), options);
    case 'renew_many': return client.renewMany(entriesOf(f.items), f.ttl, options);
    case 'queue_config': return client.queueConfig(f.queue, options);
    case 'await': return client.awaitJob(f.id, options);
    case 'schedule_set': return client.scheduleSet(f.name, f.cron, options);
    case 'schedule_delete': return client.scheduleDelete(f.name);
    case 'schedule_list': return client.scheduleList(options);
    case 'results': return client.results(f.ids, options);
    case 'snooze': return client.snooze(f.id, f.owner, f.fence, f.delay, options);
    case 'step_save': return client.stepSave(f.id, f.owner, f.fence, f.step, f.value, options);
    // suspend resolves null where the wire says false (a lease that is not current).
    case 'suspend': return client.suspend(f.id, f.owner, f.fence, f.timeout, options).then((t) => t ?? false);
    case 'signal': return client.signal(f.token, options);
    case 'group_config': return client.groupConfig(f.queue, f.group, options);
    case 'retry_many': return client.retryMany(f.queue, options);
    case 'cancel_many': return client.cancelMany(f.queue, options);
    case 'purge_many': return client.purgeMany(options);
    default: throw new Error(`no typed method for ${op}`);
  }
}

/** claimNext hands out a bin payload as a Buffer; the vectors decode it as a Uint8Array. */
function plain(value) {
  if (Buffer.isBuffer(value)) return new Uint8Array(value);
  if (Array.isArray(value)) return value.map(plain);
  if (isMap(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  return value;
}

/**
 * How the client pass sends a step: 'typed', 'request', or 'raw' when the
 * request cannot be expressed as JS values without changing its meaning.
 */
function clientRoute(step) {
  const bytes = Buffer.from(step.request_hex, 'hex');
  let decoded;
  try {
    decoded = codec.decode(bytes);
  } catch {
    return { how: 'raw' };
  }
  if (!isMap(decoded) || typeof decoded.op !== 'string') return { how: 'raw' };
  const { op: wireOp, rid, ...fields } = decoded;
  const op = wireOp === 'purge' && PURGE_FILTER.some((k) => k in fields) ? 'purge_many' : wireOp;
  if (rid !== undefined && rid !== null && typeof rid !== 'string' && !Number.isInteger(rid)) {
    return { how: 'raw' }; // the client would put its own, valid rid there
  }
  // An error may hinge on exact msgpack types (float 1.0 fence, bin id): only
  // a request our encoder rebuilds byte for byte (rid aside) is sent as values.
  // A success does not (ttl/now: int or float alike), so it always is.
  if ('error' in step.reply && !codec.encode(decoded).equals(bytes)) return { how: 'raw' };
  const keys = Object.keys(fields);
  // suspend leaves on_timeout "retry" (the default) out: not the request's bytes.
  if (op === 'suspend' && fields.on_timeout === 'retry') return { how: 'request', op: wireOp, fields };
  if (Object.hasOwn(METHODS, op)) {
    const [required, optional] = METHODS[op];
    // Only a request whose every field a method parameter carries (and a
    // nil `now` is "not given" to a method, so it goes as it is).
    if (keys.every((k) => required.includes(k) || optional.includes(k)) &&
      required.every((k) => keys.includes(k)) && fields.now !== null &&
      entriesExpressible(op, fields)) {
      return { how: 'typed', op, fields };
    }
  }
  return { how: 'request', op: wireOp, fields };
}

const suites = loadSuites();

it('the shared vectors are there', () => {
  assert.ok(suites.length > 0, `no *.json vectors in ${VECTORS_DIR}`);
});

it('every complete_next step goes through completeAndClaimNext', () => {
  const steps = suites.flatMap((suite) => suite.steps)
    .filter((step) => step.request?.op === 'complete_next');
  assert.ok(steps.length > 0, 'no complete_next step in the vectors');
  for (const step of steps) {
    assert.equal(clientRoute(step).how, 'typed', step.name);
  }
});

const BATCH_OPS = ['enqueue_many', 'complete_many', 'renew_many'];

/** A step of a batch op: enqueue_many, complete_many, renew_many, or claim_next with max. */
function isBatchStep(step) {
  const request = step.request;
  return isMap(request) && (BATCH_OPS.includes(request.op) ||
    (request.op === 'claim_next' && 'max' in request));
}

it('the batch steps go through enqueueMany, claimNext with max, completeMany and renewMany', () => {
  const steps = suites.flatMap((suite) => suite.steps).filter(isBatchStep);
  assert.ok(steps.length > 0, 'no batch step in the vectors');
  const typed = new Set();
  for (const step of steps) {
    const route = clientRoute(step);
    // Every answered batch goes through its method. A refusal does too when
    // the client's encoder rebuilds its bytes and the method can say it (not
    // an entry that is not a map, nor a missing required argument: those go
    // through request()); else it goes raw, as for the other ops.
    if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
    if (route.how === 'typed') typed.add(route.op === 'claim_next' ? 'claim_next max' : route.op);
  }
  assert.deepEqual([...typed].sort(), ['claim_next max', ...BATCH_OPS].sort());
});

const POLICY_OPS = ['queue_config', 'await', 'schedule_set', 'schedule_delete', 'schedule_list'];

it('the steps of queue settings, await and schedules go through their methods', () => {
  const steps = suites.flatMap((suite) => suite.steps)
    .filter((step) => isMap(step.request) && POLICY_OPS.includes(step.request.op));
  const typed = new Set();
  for (const step of steps) {
    const route = clientRoute(step);
    if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
    if (route.how === 'typed') typed.add(route.op);
  }
  assert.deepEqual([...typed].sort(), [...POLICY_OPS].sort());
});

it('the snooze steps go through snooze', () => {
  const steps = suites.flatMap((suite) => suite.steps)
    .filter((step) => isMap(step.request) && step.request.op === 'snooze');
  assert.ok(steps.some((step) => !('error' in step.reply)), 'no answered snooze step in the vectors');
  for (const step of steps) {
    // Every answered snooze goes through the method. A refusal does too when
    // the client's encoder rebuilds its bytes (not a float `now` such as 10.0,
    // nor a missing delay, which the method cannot leave out), else it goes raw.
    if (!('error' in step.reply)) assert.equal(clientRoute(step).how, 'typed', step.name);
    if (!('delay' in step.request)) assert.notEqual(clientRoute(step).how, 'typed', step.name);
  }
});

it('the step_save steps go through stepSave, and claimNext, completeAndClaimNext and job give the steps back', () => {
  const steps = suites.flatMap((suite) => suite.steps)
    .filter((step) => isMap(step.request) && step.request.op === 'step_save');
  assert.ok(steps.some((step) => !('error' in step.reply)), 'no answered step_save step in the vectors');
  assert.ok(steps.some((step) => 'error' in step.reply), 'no refused step_save step in the vectors');
  for (const step of steps) {
    // Every answered one goes through the method. A refusal does too when the
    // client's encoder rebuilds its bytes; not one without its value, which
    // the method does not leave out.
    if (!('error' in step.reply)) assert.equal(clientRoute(step).how, 'typed', step.name);
    if (!('value' in step.request)) assert.notEqual(clientRoute(step).how, 'typed', step.name);
  }
  const giving = suites.flatMap((suite) => suite.steps)
    .filter((step) => JSON.stringify(step.reply?.result ?? null).includes('"steps"'));
  const typed = new Set();
  for (const step of giving) {
    const route = clientRoute(step);
    assert.equal(route.how, 'typed', step.name);
    typed.add(route.op);
  }
  assert.deepEqual([...typed].sort(), ['claim_next', 'complete_next', 'job']);
});

/** An enqueue with a deadline, or an enqueue_many with one in an entry (C3.24). */
function hasDeadline(request) {
  if (!isMap(request)) return false;
  if (request.op === 'enqueue') return 'deadline' in request;
  return request.op === 'enqueue_many' && Array.isArray(request.jobs) &&
    request.jobs.some((job) => isMap(job) && 'deadline' in job);
}

it('the suspend and signal steps go through suspend and signal, the deadlines through enqueue and enqueueMany', () => {
  const all = suites.flatMap((suite) => suite.steps);
  for (const op of ['suspend', 'signal']) {
    const steps = all.filter((step) => isMap(step.request) && step.request.op === op);
    assert.ok(steps.some((step) => !('error' in step.reply)), `no answered ${op} step in the vectors`);
    assert.ok(steps.some((step) => 'error' in step.reply), `no refused ${op} step in the vectors`);
    for (const step of steps) {
      // Every answered one goes through the method; a refusal does too when
      // the client's encoder rebuilds its bytes, but not one without a
      // required field (suspend's timeout), which the method always sends.
      const route = clientRoute(step);
      if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
      if (op === 'suspend' && !('timeout' in step.request)) assert.notEqual(route.how, 'typed', step.name);
    }
  }
  const deadlines = all.filter((step) => hasDeadline(step.request));
  assert.ok(deadlines.some((step) => step.request.op === 'enqueue_many'), 'no enqueue_many deadline step');
  assert.ok(deadlines.some((step) => 'error' in step.reply), 'no refused deadline step in the vectors');
  for (const step of deadlines) {
    const route = clientRoute(step);
    if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
    assert.notEqual(route.how, 'request', step.name);
  }
});

/** A bulk action's step (issue 33): retry_many, cancel_many, purge with a filter, queue_config with a keep_*. */
function isBulkStep(request) {
  if (!isMap(request)) return false;
  if (request.op === 'purge') return PURGE_FILTER.some((k) => k in request);
  if (request.op === 'queue_config') return ['keep_done', 'keep_dead', 'keep_cancelled'].some((k) => k in request);
  return request.op === 'retry_many' || request.op === 'cancel_many';
}

it('the bulk steps go through retryMany, cancelMany, purgeMany and queueConfig (keepDone...)', () => {
  const steps = suites.flatMap((suite) => suite.steps).filter((step) => isBulkStep(step.request));
  const typed = new Set();
  for (const step of steps) {
    const route = clientRoute(step);
    // Every answered bulk step goes through its method. A refusal does too
    // when the client's encoder rebuilds its bytes (not a float `now` such as
    // 16.0), else it goes raw; but one without its queue, which retryMany and
    // cancelMany cannot leave out, never goes typed.
    if (!('queue' in step.request) && ['retry_many', 'cancel_many'].includes(step.request.op)) {
      assert.notEqual(route.how, 'typed', step.name);
      continue;
    }
    if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
    assert.notEqual(route.how, 'request', step.name);
    if (route.how === 'typed') typed.add(route.op);
  }
  assert.deepEqual([...typed].sort(), ['cancel_many', 'purge_many', 'queue_config', 'retry_many']);
});

/** An enqueue with a max_runtime, or an enqueue_many with one in an entry (issue 33). */
function hasMaxRuntime(request) {
  if (!isMap(request)) return false;
  if (request.op === 'enqueue') return 'max_runtime' in request;
  return request.op === 'enqueue_many' && Array.isArray(request.jobs) &&
    request.jobs.some((job) => isMap(job) && 'max_runtime' in job);
}

it('the max_runtime steps go through enqueue and enqueueMany (maxRuntime)', () => {
  const steps = suites.flatMap((suite) => suite.steps).filter((step) => hasMaxRuntime(step.request));
  assert.ok(steps.some((step) => !('error' in step.reply)), 'no answered max_runtime step in the vectors');
  assert.ok(steps.some((step) => step.request.op === 'enqueue_many'), 'no enqueue_many max_runtime step');
  for (const step of steps) {
    // Every answered one goes through the method; a refusal does too when the
    // client's encoder rebuilds its bytes (not a float `now` such as 32.0).
    const route = clientRoute(step);
    if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
    assert.notEqual(route.how, 'request', step.name);
  }
});

/** An enqueue with headers, or an enqueue_many with them in an entry (issue 33). */
function hasHeaders(request) {
  if (!isMap(request)) return false;
  if (request.op === 'enqueue') return 'headers' in request;
  return request.op === 'enqueue_many' && Array.isArray(request.jobs) &&
    request.jobs.some((job) => isMap(job) && 'headers' in job);
}

it('the headers steps go through enqueue and enqueueMany (headers), and claimNext and job give them back', () => {
  const steps = suites.flatMap((suite) => suite.steps).filter((step) => hasHeaders(step.request));
  assert.ok(steps.some((step) => !('error' in step.reply)), 'no answered headers step in the vectors');
  assert.ok(steps.some((step) => 'error' in step.reply), 'no refused headers step in the vectors');
  assert.ok(steps.some((step) => step.request.op === 'enqueue_many'), 'no enqueue_many headers step');
  for (const step of steps) {
    // Every answered one goes through the method; a refusal does too when the
    // client's encoder rebuilds its bytes (not a float `now` such as 4.0).
    const route = clientRoute(step);
    if (!('error' in step.reply)) assert.equal(route.how, 'typed', step.name);
    assert.notEqual(route.how, 'request', step.name);
  }
  // The replies that carry headers come back through claimNext and job.
  const giving = suites.flatMap((suite) => suite.steps)
    .filter((step) => JSON.stringify(step.reply?.result ?? null).includes('"headers"'));
  assert.ok(giving.length > 0, 'no reply with headers in the vectors');
  const typed = new Set();
  for (const step of giving) {
    const route = clientRoute(step);
    assert.equal(route.how, 'typed', step.name);
    typed.add(route.op);
  }
  assert.ok(typed.has('claim_next') && typed.has('job'), [...typed].join(', '));
});

for (const suite of suites) {
  describe(`vectors ${suite.file} (${suite.name}, clock ${suite.clock}): bytes`, () => {
    let daemon;
    let raw;
    before(async () => {
      daemon = await startDaemon({ clock: suite.clock });
      raw = new RawPeer(daemon.endpoint);
    });
    after(async () => {
      raw?.close();
      await daemon?.stop();
    });

    for (const step of suite.steps) {
      it(step.name, async () => {
        const bytes = Buffer.from(step.request_hex, 'hex');
        if (step.request !== undefined) {
          assert.deepEqual(codec.decode(bytes), step.request, 'request_hex decodes to request');
        }
        if (step.reply_hex !== undefined) {
          assert.deepEqual(codec.decode(Buffer.from(step.reply_hex, 'hex')), step.reply,
            'reply_hex decodes to reply');
        }
        const replyBytes = await raw.exchange(bytes);
        assertReply(codec.decode(replyBytes), step);
        if (step.reply_hex !== undefined) {
          assert.equal(replyBytes.toString('hex'), step.reply_hex, 'reply bytes');
        }
      });
    }
  });

  describe(`vectors ${suite.file} (${suite.name}, clock ${suite.clock}): client`, () => {
    let daemon;
    let raw;
    let client;
    before(async () => {
      daemon = await startDaemon({ clock: suite.clock });
      raw = new RawPeer(daemon.endpoint);
      client = new Client(daemon.endpoint, { timeoutMs: 5000 });
    });
    after(async () => {
      raw?.close();
      await client?.close();
      await daemon?.stop();
    });

    for (const step of suite.steps) {
      const route = clientRoute(step);
      it(`${step.name} [${route.how}]`, async () => {
        if (route.how === 'raw') {
          assertReply(await raw.request(Buffer.from(step.request_hex, 'hex')), step);
          return;
        }
        const call = route.how === 'typed'
          ? callTyped(client, route.op, route.fields)
          : client.request(route.op, route.fields);
        if ('error' in step.reply) {
          await assert.rejects(call, (err) => {
            assert.ok(err instanceof FenceqError);
            assert.equal(err.code, step.reply.error.code, err.message);
            assert.ok(err.message.length > 0);
            return true;
          });
        } else {
          const { rid: _rid, ...expected } = step.reply; // the client matched its own rid
          assertReply({ ok: true, result: plain(await call) }, { ...step, reply: expected });
        }
      });
    }
  });
}
