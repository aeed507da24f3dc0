'use strict';

// Bulk actions by filter and retention (issue 33; PROTOCOL.md, "Bulk actions
// and retention"): Client#retryMany, cancelMany, purgeMany and their *All
// helpers; queueConfig's keepDone, keepDead and keepCancelled; stats'
// retention keys and totals.removed. Against real daemons: the client clock
// (every call that needs a time passes `now`) unless a block says otherwise;
// retention runs on the server clock, since the daemon removes jobs as its
// own time passes. Every wait is bounded.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const { withDaemon, rejectsWith, recordRequests, uniqueId, sleep } = require('./helpers');

/**
 * `n` jobs of `queue` (`<prefix>00`, ...) enqueued with maxAttempts 1,
 * claimed and failed: dead. Resolves their ids.
 */
async function deadJobs(c, queue, prefix, n, now) {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
  assert.deepEqual(await c.enqueueMany(ids.map((id) => ({ id, queue, maxAttempts: 1 })), { now }),
    ids.map(() => true));
  const jobs = await c.claimNext(queue, 'w', 100, { max: n, now });
  assert.deepEqual(jobs.map((j) => j.id).sort(), ids);
  for (const job of jobs) assert.equal(await c.fail(job.id, 'w', job.fence, 'boom', { now: now + 1 }), true);
  return ids;
}

/** Each job's state (up to 1000 jobs of the filter), by id. */
async function states(c, options) {
  const rows = await c.list({ limit: 1000, ...options });
  return Object.fromEntries(rows.map((r) => [r.id, r.state]));
}

describe('bulk actions, client clock', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('retryMany pages dead jobs back to ready, and their fences continue', async () => {
    const q = uniqueId('rq');
    const ids = await deadJobs(c, q, 'r-', 30, 10);
    assert.equal((await c.stats({ now: 12 })).queues[q].dead, 30);
    const { sent, restore } = recordRequests(c);
    const pages = [];
    for (let i = 0; i < 4; i++) pages.push(await c.retryMany(q, { state: 'dead', limit: 10, now: 12 }));
    restore();
    assert.deepEqual(pages, [{ count: 10, more: true }, { count: 10, more: true },
      { count: 10, more: false }, { count: 0, more: false }]);
    // The fields in the C++ encoder's order, each only when given.
    assert.deepEqual(sent[0], ['retry_many', { queue: q, state: 'dead', limit: 10, now: 12 }]);
    assert.deepEqual(Object.keys(sent[0][1]), ['queue', 'state', 'limit', 'now']);
    const row = (await c.stats({ now: 12 })).queues[q];
    assert.deepEqual([row.ready, row.dead], [30, 0]);
    const listed = await c.list({ queue: q, limit: 1000, now: 12 });
    assert.deepEqual(listed.map((r) => r.id), ids);
    assert.ok(listed.every((r) => r.state === 'ready' && r.attempts === 0 && r.fence === 1));
    // Attempts start over and the fence continues (C1.2): the next claim gets fence 2.
    const again = await c.claimNext(q, 'v', 100, { max: 30, now: 13 });
    assert.equal(again.length, 30);
    assert.ok(again.every((j) => j.fence === 2 && j.attempts === 1));
    assert.equal(await c.complete(again[0].id, 'w', 1, 'stale', { now: 13 }), false);
  });

  it('retryMany takes dead and cancelled by default, and filters by prefix and group', async () => {
    const q = uniqueId('rg');
    await deadJobs(c, q, 'a-', 3, 10);
    await deadJobs(c, q, 'b-', 2, 10);
    assert.equal(await c.enqueue('c-1', { queue: q, group: 'g1', now: 10 }), true);
    assert.equal(await c.enqueue('c-2', { queue: q, group: 'g2', now: 10 }), true);
    assert.equal(await c.cancel('c-1', { now: 11 }), true);
    assert.equal(await c.cancel('c-2', { now: 11 }), true);
    assert.deepEqual(await c.retryMany(q, { prefix: 'b-', now: 12 }), { count: 2, more: false });
    assert.deepEqual(await c.retryMany(q, { group: 'g2', now: 12 }), { count: 1, more: false });
    assert.deepEqual(await states(c, { queue: q, now: 12 }), {
      'a-00': 'dead', 'a-01': 'dead', 'a-02': 'dead', 'b-00': 'ready', 'b-01': 'ready',
      'c-1': 'cancelled', 'c-2': 'ready',
    });
    assert.deepEqual(await c.retryMany(q, { now: 12 }), { count: 4, more: false });
    assert.deepEqual(new Set(Object.values(await states(c, { queue: q, now: 12 }))), new Set(['ready']));
    assert.deepEqual(await c.retryMany(uniqueId('empty'), { now: 12 }), { count: 0, more: false });
  });
});

describe('bulk helpers and purge, client clock', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('retryAll loops until more is false, bounded by maxPages', async () => {
    const q = uniqueId('ra');
    await deadJobs(c, q, 'x-', 25, 10);
    let spy = recordRequests(c);
    assert.equal(await c.retryAll(q, { state: 'dead', limit: 4, maxPages: 3, now: 12 }), 12);
    spy.restore();
    assert.equal(spy.sent.length, 3);  // stopped by maxPages with jobs left
    assert.ok(!('maxPages' in spy.sent[0][1]) && !('max_pages' in spy.sent[0][1]));
    assert.equal((await c.stats({ now: 12 })).queues[q].dead, 13);
    spy = recordRequests(c);
    assert.equal(await c.retryAll(q, { limit: 4, now: 12 }), 13);
    spy.restore();
    assert.deepEqual(spy.sent.map(([op]) => op), Array(4).fill('retry_many'));  // 4 + 4 + 4 + 1
    assert.equal((await c.stats({ now: 12 })).queues[q].dead, 0);
    assert.equal(await c.retryAll(q, { now: 12 }), 0);
  });

  it('retryAll stops after a page that retried none (keyed jobs whose key is held)', async () => {
    const q = uniqueId('rk');
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await c.enqueue(`${q}-k-${i}`, { queue: q, key: `key-${i}`, maxAttempts: 1, now: 10 }),
        { id: `${q}-k-${i}`, created: true });
    }
    for (const job of await c.claimNext(q, 'w', 100, { max: 3, now: 10 })) {
      assert.equal(await c.fail(job.id, 'w', job.fence, 'boom', { now: 11 }), true);
    }
    for (let i = 0; i < 3; i++) {
      assert.equal((await c.enqueue(`${q}-again-${i}`, { queue: q, key: `key-${i}`, now: 12 })).created, true);
    }
    const spy = recordRequests(c);
    assert.equal(await c.retryAll(q, { state: 'dead', limit: 2, maxPages: 50, now: 12 }), 0);
    spy.restore();
    assert.equal(spy.sent.length, 1);
    assert.equal((await c.stats({ now: 12 })).queues[q].dead, 3);
  });

  it('cancelMany on a prefix cancels those jobs and refuses the holder\'s writes', async () => {
    const q = uniqueId('cq');
    for (let i = 0; i < 5; i++) assert.equal(await c.enqueue(`${q}-imp-${i}`, { queue: q, now: 10 }), true);
    for (let i = 0; i < 3; i++) assert.equal(await c.enqueue(`${q}-keep-${i}`, { queue: q, now: 10 }), true);
    const held = await c.claimNext(q, 'w', 100, { now: 10 });
    assert.deepEqual([held.id, held.fence], [`${q}-imp-0`, 1]);
    assert.deepEqual(await c.cancelMany(q, { prefix: `${q}-imp-`, now: 11 }), { count: 5, more: false });
    const expected = {};
    for (let i = 0; i < 5; i++) expected[`${q}-imp-${i}`] = 'cancelled';
    for (let i = 0; i < 3; i++) expected[`${q}-keep-${i}`] = 'ready';
    assert.deepEqual(await states(c, { queue: q, now: 11 }), expected);
    assert.equal(await c.complete(held.id, 'w', 1, 'late', { now: 12 }), false);
    const after = await c.state(held.id);
    assert.deepEqual([after.fence, after.result], [2, null]);
    assert.equal((await c.stats({ now: 12 })).queues[q].cancelled, 5);
    assert.deepEqual(await c.cancelMany(q, { prefix: `${q}-imp-`, now: 12 }), { count: 0, more: false });
  });

  it('cancelMany by state, and cancelAll in pages', async () => {
    const q = uniqueId('cs');
    for (let i = 0; i < 12; i++) {
      assert.equal(await c.enqueue(`${q}-d-${String(i).padStart(2, '0')}`, { queue: q, delay: 100, now: 10 }), true);
    }
    for (let i = 0; i < 3; i++) assert.equal(await c.enqueue(`${q}-r-${i}`, { queue: q, now: 10 }), true);
    assert.deepEqual(await c.cancelMany(q, { state: 'ready', now: 11 }), { count: 3, more: false });
    const spy = recordRequests(c);
    assert.equal(await c.cancelAll(q, { state: 'delayed', limit: 5, now: 11 }), 12);
    spy.restore();
    assert.deepEqual(spy.sent.map(([op, f]) => [op, f.limit]), Array(3).fill(['cancel_many', 5]));
    const row = (await c.stats({ now: 11 })).queues[q];
    assert.deepEqual([row.cancelled, row.delayed, row.ready], [15, 0, 0]);
  });

  it('purgeMany by state keeps the other jobs and each id\'s fence', async () => {
    const q = uniqueId('pq');
    const dead = await deadJobs(c, q, `${q}-dead-`, 4, 10);
    for (let i = 0; i < 3; i++) {
      assert.equal(await c.enqueue(`${q}-done-${i}`, { queue: q, now: 10 }), true);
      const job = await c.claimNext(q, 'w', 100, { now: 10 });
      assert.equal(await c.complete(job.id, 'w', job.fence, 'ok', { now: 11 }), true);
    }
    assert.equal(await c.enqueue(`${q}-gone`, { queue: q, now: 10 }), true);
    assert.equal(await c.cancel(`${q}-gone`, { now: 11 }), true);
    const spy = recordRequests(c);
    assert.deepEqual(await c.purgeMany({ queue: q, state: 'dead', now: 12 }), { count: 4, more: false });
    spy.restore();
    assert.deepEqual(spy.sent, [['purge', { queue: q, state: 'dead', now: 12 }]]);
    assert.deepEqual(await states(c, { queue: q, now: 12 }), {
      [`${q}-done-0`]: 'done', [`${q}-done-1`]: 'done', [`${q}-done-2`]: 'done', [`${q}-gone`]: 'cancelled',
    });
    // A purged id enqueued again continues from its fence (C1.2).
    assert.equal(await c.enqueue(dead[0], { queue: q, now: 12 }), true);
    assert.equal(await c.claim(dead[0], 'w', 10, { now: 12 }), 2);
    // olderThan: finished at 11, judged at 12: none is 5 s old; at 20 all three are.
    assert.deepEqual(await c.purgeMany({ queue: q, state: 'done', olderThan: 5, now: 12 }), { count: 0, more: false });
    assert.deepEqual(await c.purgeMany({ queue: q, state: 'done', olderThan: 5, now: 20 }), { count: 3, more: false });
    assert.deepEqual(await states(c, { queue: q, now: 20 }), { [dead[0]]: 'leased', [`${q}-gone`]: 'cancelled' });
  });

  it('purgeMany without a filter sends limit 1000 (a page); purgeAll loops; the old purge answers a number', async () => {
    const qa = uniqueId('pa');
    const qb = uniqueId('pb');
    await deadJobs(c, qa, `${qa}-`, 7, 30);
    await deadJobs(c, qb, `${qb}-`, 2, 30);
    let spy = recordRequests(c);
    assert.deepEqual(await c.purgeMany({ queue: qb, now: 32 }), { count: 2, more: false });
    spy.restore();
    assert.deepEqual(spy.sent, [['purge', { queue: qb, limit: 1000, now: 32 }]]);
    assert.deepEqual(Object.keys(spy.sent[0][1]), ['queue', 'limit', 'now']);
    spy = recordRequests(c);
    assert.equal(await c.purgeAll({ queue: qa, limit: 3, now: 32 }), 7);
    spy.restore();
    assert.deepEqual(spy.sent.map(([op, f]) => [op, f.limit]), Array(3).fill(['purge', 3]));
    assert.deepEqual(await c.list({ queue: qa, now: 32 }), []);
    // The old purge by age is unchanged: an integer, every match removed.
    const qo = uniqueId('po');
    await deadJobs(c, qo, `${qo}-`, 2, 40);
    spy = recordRequests(c);
    assert.equal(await c.purge(0, { queue: qo, now: 42 }), 2);
    spy.restore();
    assert.deepEqual(spy.sent, [['purge', { older_than: 0, queue: qo, now: 42 }]]);
    // Of every queue: no queue sent (the prefix keeps other tests' jobs out).
    const tag = uniqueId('every');
    await deadJobs(c, `${tag}-c`, `${tag}-c-`, 2, 50);
    await deadJobs(c, `${tag}-d`, `${tag}-d-`, 2, 50);
    spy = recordRequests(c);
    assert.equal(await c.purgeAll({ state: 'dead', prefix: `${tag}-`, limit: 3, now: 52 }), 4);
    spy.restore();
    assert.ok(!('queue' in spy.sent[0][1]));
    assert.deepEqual(await c.list({ prefix: `${tag}-`, now: 52 }), []);
  });
});

describe('bulk actions and retention: bad input', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('a state the op cannot change, a limit out of range or a wrong type is refused and nothing changes', async () => {
    const q = uniqueId('bq');
    await deadJobs(c, q, `${q}-`, 3, 10);
    assert.equal(await c.enqueue(`${q}-ready`, { queue: q, now: 10 }), true);
    const before = await c.list({ queue: q, now: 12 });
    const invalid = [
      [() => c.retryMany(q, { state: 'done', now: 12 }), /state/],
      [() => c.retryMany(q, { state: 'ready', now: 12 }), /state/],
      [() => c.retryMany(q, { limit: 0, now: 12 }), /limit/],
      [() => c.retryMany(q, { limit: 10001, now: 12 }), /limit/],
      [() => c.retryMany('', { now: 12 }), /queue/],
      [() => c.cancelMany(q, { state: 'done', now: 12 }), /state/],
      [() => c.cancelMany(q, { state: 'cancelled', now: 12 }), /state/],
      [() => c.cancelMany(q, { limit: 0, now: 12 }), /limit/],
      [() => c.purgeMany({ queue: q, state: 'ready', now: 12 }), /state/],
      [() => c.purgeMany({ queue: q, limit: 0, now: 12 }), /limit/],
      [() => c.retryAll(q, { state: 'done', now: 12 }), /state/],
      [() => c.cancelAll(q, { limit: 0, now: 12 }), /limit/],
      [() => c.purgeAll({ queue: q, state: 'leased', now: 12 }), /state/],
    ];
    for (const [call, pattern] of invalid) await rejectsWith(call(), 'invalid_argument', pattern);
    await rejectsWith(c.retryMany(q, { limit: 2.5, now: 12 }), 'bad_request');
    await rejectsWith(c.cancelMany(q, { prefix: 5, now: 12 }), 'bad_request');
    await rejectsWith(c.purgeMany({ queue: q, state: 1, now: 12 }), 'bad_request');
    assert.deepEqual(await c.list({ queue: q, now: 12 }), before);
    // The client's own refusals: nothing is sent.
    const spy = recordRequests(c);
    for (const maxPages of [0, -1, 1.5, null, '3', Infinity]) {
      await rejectsWith(c.retryAll(q, { maxPages }), 'invalid_argument', /maxPages/);
      await rejectsWith(c.purgeAll({ maxPages }), 'invalid_argument', /maxPages/);
    }
    await rejectsWith(c.retryMany(q, { max_pages: 2 }), 'invalid_argument', /unknown retry_many option/);
    await rejectsWith(c.retryMany(q, { maxPages: 2 }), 'invalid_argument', /unknown/);
    await rejectsWith(c.purgeMany({ older_than: 2 }), 'invalid_argument', /unknown/);
    await rejectsWith(c.cancelAll(q, 'dead'), 'invalid_argument', /options must be an object/);
    await rejectsWith(c.queueConfig(q, { keep_done: 5 }), 'invalid_argument', /unknown/);
    spy.restore();
    assert.deepEqual(spy.sent, []);
  });

  it('a bulk answer of the wrong shape is bad_reply', async () => {
    for (const answer of [3, { count: 1 }, { count: -1, more: false }, { count: 1.5, more: false },
      { count: 1, more: 0 }, null]) {
      const fake = new Client(c.endpoint);
      fake.request = async () => answer;
      try {
        await rejectsWith(fake.retryMany('q'), 'bad_reply');
        await rejectsWith(fake.cancelMany('q'), 'bad_reply');
        await rejectsWith(fake.purgeMany(), 'bad_reply');
        await rejectsWith(fake.purgeAll(), 'bad_reply');
      } finally {
        await fake.close();
      }
    }
  });

  it('queueConfig sends keepDone, keepDead, keepCancelled; null or Infinity removes one', async () => {
    const q = uniqueId('kq');
    let spy = recordRequests(c);
    assert.equal(await c.queueConfig(q, { keepDone: 86400, keepDead: 0.5, keepCancelled: 0 }), true);
    spy.restore();
    assert.deepEqual(spy.sent, [['queue_config', { queue: q, keep_done: 86400, keep_dead: 0.5, keep_cancelled: 0 }]]);
    let row = (await c.stats({ now: 1 })).queues[q];
    assert.deepEqual([row.keep_done, row.keep_dead, row.keep_cancelled], [86400, 0.5, 0]);
    // Left out: kept as stored.
    assert.equal(await c.queueConfig(q, { maxLeased: 3 }), true);
    assert.equal((await c.stats({ now: 1 })).queues[q].keep_done, 86400);
    spy = recordRequests(c);
    assert.equal(await c.queueConfig(q, { keepDone: null, keepCancelled: Infinity, keepDead: undefined }), true);
    spy.restore();
    assert.deepEqual(spy.sent, [['queue_config', { queue: q, keep_done: null, keep_cancelled: null }]]);
    row = (await c.stats({ now: 1 })).queues[q];
    assert.deepEqual([row.keep_done, row.keep_dead, row.keep_cancelled], [undefined, 0.5, undefined]);
    assert.ok(!('keep_done' in row) && !('keep_cancelled' in row));
    assert.equal(await c.queueConfig(q, { keepDead: null }), true);
    row = (await c.stats({ now: 1 })).queues[q];
    assert.ok(!('keep_done' in row) && !('keep_dead' in row) && !('keep_cancelled' in row));
  });

  it('bad retention values are refused and change nothing', async () => {
    const q = uniqueId('kb');
    assert.equal(await c.queueConfig(q, { keepDone: 60 }), true);
    for (const settings of [{ keepDone: -1 }, { keepDead: 1e11 }, { keepCancelled: NaN }, { keepDone: -Infinity }]) {
      await rejectsWith(c.queueConfig(q, settings), 'invalid_argument');
    }
    await rejectsWith(c.queueConfig(q, { keepDone: 'a day' }), 'bad_request');
    const row = (await c.stats({ now: 1 })).queues[q];
    assert.deepEqual([row.keep_done, row.keep_dead, row.keep_cancelled], [60, undefined, undefined]);
  });

  it('stats: totals.removed is 0 by default (also from an older daemon); keeps absent when unset', async () => {
    const q = uniqueId('plain');
    assert.equal(await c.enqueue(uniqueId('s'), { queue: q, now: 1 }), true);
    const row = (await c.stats({ now: 1 })).queues[q];
    assert.equal(row.totals.removed, 0);
    assert.deepEqual([row.keep_done, row.keep_dead, row.keep_cancelled], [undefined, undefined, undefined]);
    const fake = new Client(c.endpoint);
    fake.request = async () => ({ queues: { old: { ready: 0, totals: { claimed: 0 } }, bare: { ready: 1 } } });
    try {
      const stats = await fake.stats();
      assert.deepEqual(stats.queues.old.totals, { claimed: 0, removed: 0 });
      assert.equal(stats.queues.bare.totals, undefined);
    } finally {
      await fake.close();
    }
  });
});

describe('retention, server clock', () => {
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [, c] = f; });

  it('keepDone 0.5: the daemon removes the done jobs, counts them in totals.removed, keeps fences', async () => {
    const q = uniqueId('ret');
    const other = uniqueId('elsewhere');
    assert.equal(await c.queueConfig(q, { keepDone: 0.5 }), true);
    assert.equal((await c.stats()).queues[q].keep_done, 0.5);
    for (let i = 0; i < 6; i++) assert.equal(await c.enqueue(`${q}-${i}`, { queue: q }), true);
    assert.equal(await c.enqueue(`${other}-1`, { queue: other }), true);
    for (let i = 0; i < 4; i++) {
      const job = await c.claimNext(q, 'w', 30);
      assert.equal(await c.complete(job.id, 'w', job.fence, 'ok'), true);
    }
    const job = await c.claimNext(other, 'w', 30);
    assert.equal(await c.complete(job.id, 'w', job.fence, 'ok'), true);
    // A pass every second: poll up to 10 s.
    const deadline = Date.now() + 10000;
    let row;
    for (;;) {
      row = (await c.stats()).queues[q];
      if ((row.done === 0 && row.totals.removed === 4) || Date.now() > deadline) break;
      await sleep(100);
    }
    assert.deepEqual([row.ready, row.done, row.totals.removed, row.totals.completed], [2, 0, 4, 4]);
    assert.deepEqual((await c.list({ queue: q })).map((r) => r.id), [`${q}-4`, `${q}-5`]);
    // No retention on the other queue: its done job stays.
    const otherRow = (await c.stats()).queues[other];
    assert.deepEqual([otherRow.done, otherRow.totals.removed], [1, 0]);
    // A removed id enqueued again continues from its fence.
    assert.equal(await c.enqueue(`${q}-0`, { queue: q }), true);
    assert.equal(await c.claim(`${q}-0`, 'w', 30), 2);
    // Without the retention, done jobs stay.
    assert.equal(await c.queueConfig(q, { keepDone: null }), true);
    const last = await c.claimNext(q, 'w', 30);
    assert.equal(await c.complete(last.id, 'w', last.fence, 'ok'), true);
    await sleep(1500);  // more than a retention pass
    row = (await c.stats()).queues[q];
    assert.deepEqual([row.done, row.totals.removed, row.keep_done], [1, 4, undefined]);
  });
});
