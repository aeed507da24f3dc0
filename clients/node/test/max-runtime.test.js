'use strict';

// maxRuntime (issue 33, C3.15): enqueue's (and every enqueue-like method's)
// hard cap on one attempt, counted from its claim. No claim and no renew
// sets the lease end past claim time + maxRuntime; from the deadline on the
// holder's writes are refused, and the daemon writes the attempt down as a
// failure ('max_runtime exceeded', the fence raised), retried after the
// backoff or dead. Against a real daemon in client clock mode, so that the
// deadlines are exact; every call passes `now`.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { withDaemon, rejectsWith, uniqueId, recordRequests, sleep } = require('./helpers');

// Each test's times start past the previous test's: one daemon serves each block's tests.
let base = 0;
function nextBase() {
  base += 10000;
  return base;
}

/** The lease end `job` shows for `id`. */
async function until(c, id, now) {
  return (await c.job(id, { now })).until;
}

/**
 * `id`'s row once the daemon wrote its overrun attempt down (its error set).
 * The daemon does that with a batch of writes (SQLite), so this enqueues jobs
 * of a queue of their own at `now` until it shows.
 */
async function writtenDown(c, id, now) {
  for (let tick = 0; tick < 100; tick++) {
    await c.enqueue(`tick-${id}-${tick}`, { queue: 'ticks', now });
    const row = await c.job(id, { now });
    if (row.error !== null) return row;
    await sleep(50);
  }
  assert.fail(`${id}: the overrun was not written down`);
}

describe('maxRuntime: the request', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('is sent as max_runtime only when given, after the job\'s other fields', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const p = uniqueId('p');
    await c.enqueue(p, { queue: q, now: t });
    const { sent, restore } = recordRequests(c);
    try {
      assert.equal(await c.enqueue(uniqueId('a'), { queue: q, now: t }), true);
      // The caller's key order does not matter: the wire's is the C++ encoder's.
      assert.equal(await c.enqueue(uniqueId('b'), {
        now: t, maxRuntime: 600, afterFailure: 'run', after: [p], group: 'g', queue: q,
      }), true);
      const keyed = await c.enqueue(uniqueId('c'), { maxRuntime: 2.5, key: uniqueId('k'), queue: q, now: t });
      assert.equal(keyed.created, true);
      assert.deepEqual(await c.enqueueMany([
        { maxRuntime: 60, id: `${q}-d`, queue: q }, { id: `${q}-e` }, { id: `${q}-f`, maxRuntime: undefined },
      ], { now: t }), [true, true, true]);
      assert.equal(await c.enqueueAndWait(`${q}-g`, { maxRuntime: 30, wait: 0, group: 'g', queue: q, now: t }),
        null);
      assert.deepEqual(await c.enqueueFanIn([`${q}-h1`, { id: `${q}-h2`, maxRuntime: 5 }],
        { id: `${q}-h`, maxRuntime: 7 }, { now: t }), [true, true, true]);
    } finally {
      restore();
    }
    const fields = sent.map(([, f]) => f);
    assert.deepEqual(Object.keys(fields[0]), ['id', 'queue', 'now']);
    assert.deepEqual(Object.keys(fields[1]), ['id', 'queue', 'group', 'after', 'after_failure', 'max_runtime', 'now']);
    assert.equal(fields[1].max_runtime, 600);
    assert.deepEqual(Object.keys(fields[2]), ['id', 'queue', 'key', 'max_runtime', 'now']);
    assert.deepEqual(fields[3].jobs, [{ id: `${q}-d`, queue: q, max_runtime: 60 }, { id: `${q}-e` }, { id: `${q}-f` }]);
    assert.deepEqual(Object.keys(fields[4]), ['id', 'queue', 'group', 'max_runtime', 'wait', 'now']);
    assert.deepEqual(fields[5].jobs, [{ id: `${q}-h1` }, { id: `${q}-h2`, max_runtime: 5 },
      { id: `${q}-h`, after: [`${q}-h1`, `${q}-h2`], max_runtime: 7 }]);
  });

  it('bad values are the daemon\'s coded errors and create nothing; max_runtime is not an option', async () => {
    const t = nextBase();
    const id = uniqueId('x');
    for (const bad of [0, -5, 1e9 + 1, Infinity, NaN]) {
      await rejectsWith(c.enqueue(id, { maxRuntime: bad, now: t }), 'invalid_argument', /max_runtime/);
    }
    for (const bad of ['10', true, [1], null]) {
      await rejectsWith(c.enqueue(id, { maxRuntime: bad, now: t }), 'bad_request', /max_runtime/);
    }
    await rejectsWith(c.enqueueMany([{ id: uniqueId('ok') }, { id, maxRuntime: 2e9 }], { now: t }),
      'invalid_argument', /jobs\[1\].*max_runtime/);
    await rejectsWith(c.enqueue(id, { key: 'k', maxRuntime: 0, now: t }), 'invalid_argument', /max_runtime/);
    await rejectsWith(c.enqueueAndWait(id, { maxRuntime: -1, wait: 5, now: t }), 'invalid_argument', /max_runtime/);
    await rejectsWith(c.enqueueFanIn([uniqueId('ok')], { id, maxRuntime: 0 }, { now: t }),
      'invalid_argument', /max_runtime/);
    assert.equal(await c.job(id, { now: t }), null);
    // The wire spelling is refused before anything is sent (it would enqueue without a cap).
    const { sent, restore } = recordRequests(c);
    try {
      await rejectsWith(c.enqueue(id, { max_runtime: 10, now: t }), 'invalid_argument',
        /unknown enqueue option 'max_runtime'/);
      await rejectsWith(c.enqueueMany([{ id, max_runtime: 10 }], { now: t }), 'invalid_argument',
        /unknown key 'max_runtime'/);
      await rejectsWith(c.enqueueAndWait(id, { max_runtime: 10, now: t }), 'invalid_argument',
        /unknown enqueue_and_wait option 'max_runtime'/);
    } finally {
      restore();
    }
    assert.equal(sent.length, 0);
    assert.equal(await c.enqueue(uniqueId('edge'), { maxRuntime: 1e9, now: t }), true); // the bound is fine
  });
});

describe('maxRuntime: the cap on claims and renewals', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('C3.15 every claim path ends the lease at claim time + maxRuntime at the latest', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const m = uniqueId('m');
    await c.enqueue(m, { queue: q, maxRuntime: 10, now: t });
    assert.equal(await c.claim(m, 'W', 60, { now: t + 1 }), 1);
    assert.equal(await until(c, m, t + 1.5), t + 11); // the ttl would give t + 61
    const n = uniqueId('n');
    assert.deepEqual(await c.enqueueMany([1, 2, 3].map((i) => ({ id: `${n}-${i}`, queue: n, maxRuntime: 4 })),
      { now: t + 2 }), [true, true, true]);
    const jobs = await c.claimNext(n, 'W', 60, { max: 2, now: t + 3 });
    assert.deepEqual(await Promise.all(jobs.map((j) => until(c, j.id, t + 3))), [t + 7, t + 7]);
    const r = await c.completeAndClaimNext(jobs[0].id, 'W', jobs[0].fence, 'ok', n, 60, { now: t + 4 });
    assert.deepEqual([r.completed, r.next.id], [true, `${n}-3`]);
    assert.equal(await until(c, `${n}-3`, t + 4), t + 8);
    const short = uniqueId('short');
    await c.enqueue(short, { queue: short, maxRuntime: 100, now: t + 5 });
    assert.equal((await c.claimNext(short, 'W', 5, { now: t + 6 })).id, short);
    assert.equal(await until(c, short, t + 6), t + 11); // the ttl ends first
    const free = uniqueId('free');
    await c.enqueue(free, { now: t + 7 });
    assert.equal(await c.claim(free, 'W', 60, { now: t + 8 }), 1);
    assert.equal(await until(c, free, t + 8), t + 68); // no maxRuntime: no cap
  });

  it('C3.15 a renew is applied but never past the deadline, and refused from it on', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('m');
    await c.enqueue(id, { queue: q, maxRuntime: 10, now: t });
    const { fence } = await c.claimNext(q, 'A', 30, { now: t + 1 }); // deadline t + 11
    assert.equal(await until(c, id, t + 1), t + 11);
    assert.equal(await c.renew(id, 'A', fence, 60, { now: t + 4 }), true);
    assert.equal(await until(c, id, t + 4), t + 11);
    assert.equal(await c.renew(id, 'A', fence, 3, { now: t + 5 }), true);
    assert.equal(await until(c, id, t + 5), t + 8); // a shorter renew is as asked
    assert.equal(await c.renew(id, 'A', fence, 60, { now: t + 7 }), true);
    assert.equal(await until(c, id, t + 7), t + 11);
    assert.equal(await c.renew(id, 'A', fence, 60, { now: t + 11 }), false);
    assert.equal(await c.check(id, 'A', fence, { now: t + 11 }), false);
  });

  it('enqueueAndWait and enqueueFanIn cap their jobs', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    assert.equal(await c.enqueueAndWait(`${q}-w`, { queue: q, maxRuntime: 8, wait: 0, now: t }), null);
    assert.equal((await c.claimNext(q, 'A', 60, { now: t + 1 })).id, `${q}-w`);
    assert.equal(await until(c, `${q}-w`, t + 1), t + 9);
    assert.deepEqual(await c.enqueueFanIn([{ id: `${q}-p`, maxRuntime: 3 }], { id: `${q}-c`, maxRuntime: 6 },
      { queue: q, now: t + 2 }), [true, true]);
    assert.equal((await c.claimNext(q, 'A', 60, { now: t + 3 })).id, `${q}-p`);
    assert.equal(await until(c, `${q}-p`, t + 3), t + 6);
    assert.equal(await c.complete(`${q}-p`, 'A', 1, 'part', { now: t + 4 }), true);
    const child = await c.claimNext(q, 'A', 60, { now: t + 5 });
    assert.deepEqual([child.id, child.after], [`${q}-c`, [`${q}-p`]]);
    assert.equal(await until(c, `${q}-c`, t + 5), t + 11);
  });
});

describe('maxRuntime: an attempt past its deadline', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('C3.15 a complete at or after the deadline is refused; the attempt is failed with the fence raised', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('m');
    await c.enqueue(id, { queue: q, maxRuntime: 10, now: t });
    assert.equal(await c.claim(id, 'W', 60, { now: t + 1 }), 1); // deadline t + 11
    assert.equal(await c.complete(id, 'W', 1, 'late', { now: t + 11 }), false);
    const row = await writtenDown(c, id, t + 12);
    assert.deepEqual([row.error, row.fence, row.owner, row.attempts, row.result],
      ['max_runtime exceeded', 2, null, 1, null]);
    assert.ok(['ready', 'delayed'].includes(row.state), row.state);
    assert.equal(await c.complete(id, 'W', 1, 'later still', { now: t + 20 }), false);
    assert.equal(await c.release(id, 'W', 1), false); // the fence was raised
    const again = await c.claimNext(q, 'V', 60, { now: t + 20 });
    assert.deepEqual([again.id, again.fence, again.attempts], [id, 3, 2]);
    assert.equal(await c.complete(id, 'V', 3, 'in time', { now: t + 25 }), true);
    assert.equal((await c.job(id, { now: t + 25 })).result, 'in time');
  });

  it('C3.15 an overrun last attempt makes the job dead', async () => {
    const t = nextBase();
    const id = uniqueId('once');
    await c.enqueue(id, { maxAttempts: 1, maxRuntime: 5, now: t });
    assert.equal(await c.claim(id, 'A', 60, { now: t + 1 }), 1); // deadline t + 6
    const row = await writtenDown(c, id, t + 7);
    assert.deepEqual([row.state, row.error, row.fence], ['dead', 'max_runtime exceeded', 2]);
  });

  it('workNext: a function still running at the deadline has its result refused', async () => {
    const clock = { t: nextBase() };
    const q = uniqueId('q');
    const id = uniqueId('slow');
    await c.enqueue(id, { queue: q, maxRuntime: 15, now: clock.t });
    const outcome = await c.workNext(q, 'w', 60, () => {
      clock.t += 16; // past the deadline, claim + 15
      return 'too late';
    }, { wait: 0, clock: () => clock.t });
    assert.deepEqual(outcome, { id, fence: 1, attempts: 1, completed: false, result: 'too late' });
    const row = await writtenDown(c, id, clock.t);
    assert.deepEqual([row.error, row.result, row.fence], ['max_runtime exceeded', null, 2]);
  });
});
