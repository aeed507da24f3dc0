'use strict';

// The answer shapes of protocol/ops/ops.json ("answers", copied into
// lib/ops_gen.js by protocol/ops/generate.py) are the client's only idea of
// what each op answers (lib/answers.js). Here they are held to a real
// daemon: every op's answers, in each of their forms, match the declaration
// strictly (the records the client hands on unread included), and the
// interpreter refuses what the declaration does not allow.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { withDaemon, uniqueId } = require('./helpers');
const opsGen = require('../lib/ops_gen');
const { answerMatches } = require('../lib/answers');

const SPEC = JSON.parse(fs.readFileSync(
  path.resolve(__dirname, '..', '..', '..', 'protocol', 'ops', 'ops.json'), 'utf8'));

describe('ops_gen.js is ops.json\'s', () => {
  it('every op, its answer, and its options with `now` last exactly when it carries now', () => {
    assert.deepEqual(opsGen.OPS, SPEC.ops.map((op) => op.name));
    for (const op of SPEC.ops) {
      assert.equal(opsGen.ANSWER_OF[op.name], op.answer);
      assert.ok(Object.hasOwn(opsGen.ANSWERS, op.answer), `${op.name}: answer ${op.answer} not declared`);
      const options = Object.keys(opsGen.OPTION_FIELDS[op.name]);
      assert.equal(options.at(-1) === 'now', op.time !== 'none', op.name);
      assert.equal(opsGen.NOW_OPS.includes(op.name), op.time !== 'none', op.name);
    }
    assert.deepEqual(opsGen.OPTION_FIELDS.list.afterCreated, 'after_created');
  });
});

describe('a real daemon answers every op as ops.json declares', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });
  const asked = new Set();

  /** `op` through request() (unchecked), then held to the declaration, strictly. */
  async function ask(op, fields) {
    const result = await c.request(op, fields);
    asked.add(op);
    assert.ok(answerMatches(op, result, fields, true),
      `${op} ${JSON.stringify(fields)} answered ${JSON.stringify(result)}, not what ops.json declares`);
    return result;
  }

  it('each op, each form of its answer', async () => {
    const q = uniqueId('q');
    const [a, b, d] = [uniqueId('a'), uniqueId('b'), uniqueId('d')];
    const now = 100;
    await ask('ping', {});
    await ask('ping', { describe: true });
    assert.equal(await ask('enqueue', { id: a, queue: q, payload: 'p', headers: { traceparent: 'x' }, now }), true);
    assert.deepEqual(await ask('enqueue', { id: b, queue: q, key: 'k', now }), { id: b, created: true });
    await ask('enqueue_many', { jobs: [{ id: d, queue: q, after: [a] }, { id: uniqueId('e'), queue: q, key: 'k2' }], now });
    assert.equal(await ask('state', { id: uniqueId('missing') }), null);
    const fence = await ask('claim', { id: a, owner: 'w', ttl: 10, now });
    assert.equal(await ask('claim', { id: a, owner: 'w2', ttl: 10, now }), null);
    await ask('renew', { id: a, owner: 'w', fence, ttl: 10, progress: 'half', now });
    assert.ok((await ask('state', { id: a })).progress === 'half');
    await ask('check', { id: a, owner: 'w', fence, now });
    assert.equal(await ask('complete', { id: a, owner: 'w', fence, result: 'A', now }), true);
    await ask('job', { id: d, now });  // with after, blocked no more
    await ask('job', { id: a, now });  // with headers
    assert.equal(await ask('job', { id: uniqueId('missing'), now }), null);
    await ask('await', { id: a, now });
    const next = await ask('claim_next', { queue: q, owner: 'w', ttl: 10, now });
    assert.notEqual(next, null);
    await ask('complete_next', { id: next.id, owner: 'w', fence: next.fence, result: null, queue: q, ttl: 10, now });
    await ask('claim_next', { queue: q, owner: 'w', ttl: 10, max: 2, now });
    assert.equal(await ask('claim_next', { queue: uniqueId('empty'), owner: 'w', ttl: 10, now }), null);
    const [j1, j2] = [uniqueId('j'), uniqueId('j')];
    await ask('enqueue_many', { jobs: [{ id: j1, queue: q }, { id: j2, queue: q }], now });
    const [c1, c2] = await ask('claim_next', { queue: q, owner: 'w', ttl: 10, max: 2, now });
    await ask('renew_many', { items: [{ id: c1.id, owner: 'w', fence: c1.fence }], ttl: 10, now });
    await ask('complete_many', { items: [{ id: c1.id, owner: 'w', fence: c1.fence, result: 'r' }], now });
    await ask('complete_many', { items: [{ id: c2.id, owner: 'w', fence: c2.fence, result: 'r' }],
      next: { queue: q, ttl: 10, max: 3 }, now });
    const f = uniqueId('f');
    await ask('enqueue', { id: f, queue: q, max_attempts: 1, now });
    const ff = await ask('claim', { id: f, owner: 'w', ttl: 10, now });
    await ask('fail', { id: f, owner: 'w', fence: ff, error: 'boom', now });
    await ask('retry', { id: f });
    const sf = await ask('claim', { id: f, owner: 'w', ttl: 10, now });
    await ask('snooze', { id: f, owner: 'w', fence: sf, delay: 5, now });
    await ask('release', { id: f, owner: 'w', fence: sf });
    await ask('cancel', { id: f, now });
    await ask('retry_many', { queue: q, now });
    await ask('cancel_many', { queue: q, state: 'ready', now });
    await ask('queue_config', { queue: q, max_leased: 5, group_max_leased: 2, keep_done: 3600 });
    await ask('queue_config', { queue: q, paused: true });
    // A group's own settings (C3.25), set and removed; stats then carries them.
    assert.equal(await ask('group_config', { queue: q, group: 'tenant', max_leased: 3, rate: 10, per: 2.5 }), true);
    assert.equal(await ask('group_config', { queue: q, group: 'tenant', rate: null }), true);
    await ask('stats', { now });
    await ask('list', { queue: q, now });
    await ask('metrics', { now });
    await ask('results', { ids: [a, uniqueId('missing')], now });
    await ask('results', { ids: [a], states_only: true, now });
    await ask('schedule_set', { name: uniqueId('s'), cron: '@daily', queue: q, now });
    await ask('schedule_list', { now });
    await ask('schedule_delete', { name: uniqueId('s') });
    const [st, sq] = [uniqueId('st'), uniqueId('sq')];
    await ask('enqueue', { id: st, queue: sq, now });
    const s1 = await ask('claim_next', { queue: sq, owner: 'w', ttl: 10, now });
    assert.equal(await ask('step_save', { id: st, owner: 'w', fence: s1.fence, step: 'bin', value: new Uint8Array([1]), now }), true);
    assert.equal(await ask('step_save', { id: st, owner: 'w', fence: s1.fence, step: 'nil', value: null, now }), true);
    assert.equal(await ask('step_save', { id: st, owner: 'w', fence: s1.fence, step: 'bin', value: 'x', now }), false);
    await ask('release', { id: st, owner: 'w', fence: s1.fence });
    assert.deepEqual(Object.keys((await ask('claim_next', { queue: sq, owner: 'w', ttl: 10, now })).steps).sort(),
      ['bin', 'nil']);  // with steps
    assert.deepEqual(Object.keys((await ask('job', { id: st, now })).steps).sort(), ['bin', 'nil']);
    // suspend's token (or false), signal's flag, and the signal and suspension claims and job carry (C3.23).
    const [su, suq] = [uniqueId('su'), uniqueId('suq')];
    await ask('enqueue', { id: su, queue: suq, deadline: now + 1000, now });
    const u1 = await ask('claim_next', { queue: suq, owner: 'w', ttl: 10, now });
    assert.equal(await ask('suspend', { id: su, owner: 'x', fence: u1.fence, timeout: 60, now }), false);
    const token = await ask('suspend', { id: su, owner: 'w', fence: u1.fence, timeout: 60, on_timeout: 'fail', now });
    assert.match(token, /^[0-9a-f]{32}$/);
    assert.deepEqual((await ask('job', { id: su, now })).suspended, { timeout: now + 60, on_timeout: 'fail' });
    assert.equal((await ask('list', { queue: suq, state: 'suspended', now }))[0].state, 'suspended');
    assert.equal((await ask('stats', { now })).queues[suq].suspended, 1);
    assert.equal(await ask('signal', { token, value: new Uint8Array([1]), now }), true);
    assert.equal(await ask('signal', { token }), false);
    assert.deepEqual([...(await ask('claim_next', { queue: suq, owner: 'w', ttl: 10, now })).signal], [1]);
    assert.deepEqual([...(await ask('job', { id: su, now })).signal], [1]);
    await ask('enqueue_many', { jobs: [{ id: uniqueId('dl'), queue: suq, deadline: now + 1 }], now });
    await ask('claim_next', { queue: suq, owner: 'w', ttl: 10, now: now + 2 });
    assert.equal((await ask('stats', { now: now + 2 })).queues[suq].totals.deadline_passed, 1);
    await ask('enqueue_and_wait', { id: uniqueId('w'), queue: uniqueId('wq'), now });
    assert.equal(typeof await ask('purge', { older_than: 0, now }), 'number');
    assert.deepEqual(Object.keys(await ask('purge', { queue: q, limit: 10, now })).sort(), ['count', 'more']);
    assert.deepEqual(opsGen.OPS.filter((op) => !asked.has(op)), [], 'ops this test does not ask');
  });
});

describe('the interpreter refuses what ops.json does not allow', () => {
  const job = { id: 'a', fence: 1, payload: null, attempts: 1 };
  it('shapes that follow the request: max, entries, keys, filters', () => {
    assert.ok(answerMatches('claim_next', [job, job], { max: 2 }));
    assert.ok(!answerMatches('claim_next', [job, job, job], { max: 2 }));
    assert.ok(!answerMatches('claim_next', job, { max: 2 }));
    assert.ok(answerMatches('claim_next', job, {}));
    assert.ok(!answerMatches('claim_next', [job], {}));
    assert.ok(!answerMatches('claim_next', { ...job, after: [1] }, {}));
    assert.ok(answerMatches('renew_many', [true, false], { items: [{}, {}] }));
    assert.ok(!answerMatches('renew_many', [true], { items: [{}, {}] }));
    const jobs = [{ id: 'a' }, { id: 'b', key: 'k' }];
    assert.ok(answerMatches('enqueue_many', [true, { id: 'x', created: false }], { jobs }));
    assert.ok(!answerMatches('enqueue_many', [true, true], { jobs }));
    assert.ok(answerMatches('purge', 3, { older_than: 1 }));
    assert.ok(!answerMatches('purge', -1, { older_than: 1 }));
    assert.ok(!answerMatches('purge', 3, { limit: 5 }));
    assert.ok(answerMatches('purge', { count: 3, more: false }, { limit: 5 }));
    assert.ok(answerMatches('complete_many', { completed: [true], next: [job] }, { items: [{}], next: { max: 1 } }));
    assert.ok(!answerMatches('complete_many', { completed: [true], next: [job, job] }, { items: [{}], next: { max: 1 } }));
    assert.ok(!answerMatches('complete_many', [true], { items: [{}], next: { max: 1 } }));
  });

  it('a record is checked only strictly; what the client reads, always', () => {
    assert.ok(answerMatches('state', { id: 'a' }, {}));
    assert.ok(!answerMatches('state', { id: 'a' }, {}, true));
    assert.ok(answerMatches('results', { a: { state: 'done', result: 'r', omitted: 1 } }, {}));
    assert.ok(!answerMatches('results', { a: { state: 'done', result: 'r', omitted: 1 } }, {}, true));
    assert.ok(!answerMatches('results', { a: { state: 'done' } }, {}));
    assert.ok(answerMatches('stats', { queues: { q: { ready: 1 } } }, {}));
    assert.ok(!answerMatches('stats', { queues: [] }, {}));
    assert.ok(!answerMatches('job', { id: 'a', headers: { k: 1 } }, {}));
    assert.ok(answerMatches('claim_next', { ...job, signal: null }, {}));
    assert.ok(!answerMatches('claim_next', { ...job, signal: 7 }, {}));
    assert.ok(answerMatches('suspend', 'f'.repeat(32), {}) && answerMatches('suspend', false, {}));
    assert.ok(!answerMatches('suspend', null, {}));
  });
});
