'use strict';

// workNext with prefetch: rounds of up to N jobs, claimed with claimNext max
// (or passed back as `jobs`), all their leases kept with one renewMany, the
// results stored with one completeMany whose `next` takes the next round.
// Against real daemons.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { FenceqError } = require('fenceq');
const { withDaemon, rejectsWith, uniqueId, sleep, recordRequests } = require('./helpers');

/** The loop a prefetching worker runs, until a round finds no job; resolves every round. */
async function drain(client, q, owner, ttl, fn, options) {
  const rounds = [];
  let held = [];
  for (;;) {
    const jobs = held;
    held = [];
    const round = await client.workNext(q, owner, ttl, fn, { wait: 0, ...options, jobs });
    if (round === null) return rounds;
    rounds.push(round);
    held = round.next;
  }
}

/** Waits until `predicate()` holds (polling), or fails after `ms`. */
async function until(predicate, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) assert.fail('timed out waiting');
    await sleep(5);
  }
}

function ids(q, n) {
  return Array.from({ length: n }, (_, i) => `${q}-${String(i).padStart(3, '0')}`);
}

describe('workNext with prefetch, server clock', () => {
  let daemon, c, c2, other;
  withDaemon({ clock: 'server' }, 3, (...f) => { [daemon, c, c2, other] = f; });

  it('two prefetching workers process every job exactly once, in batches', async () => {
    const q = uniqueId('q');
    const all = ids(q, 60);
    for (let i = 0; i < all.length; i += 25) {
      await c.enqueueMany(all.slice(i, i + 25).map((id) => ({ id, queue: q, payload: `p-${id}` })));
    }
    const runs = new Map();
    const fn = async ({ id, payload, attempts }) => {
      runs.set(id, (runs.get(id) ?? 0) + 1);
      assert.equal(payload, `p-${id}`);
      assert.equal(attempts, 1);
      await sleep(Math.random() * 4);
      return `r-${id}`;
    };
    const recA = recordRequests(c);
    const recB = recordRequests(c2);
    let roundsA;
    let roundsB;
    try {
      [roundsA, roundsB] = await Promise.all([
        drain(c, q, 'wa', 30, fn, { prefetch: 5, wait: 0.3 }),
        drain(c2, q, 'wb', 30, fn, { prefetch: 5, wait: 0.3 }),
      ]);
    } finally {
      recA.restore();
      recB.restore();
    }
    assert.deepEqual([...runs.keys()].sort(), all);
    assert.ok([...runs.values()].every((n) => n === 1), 'each job ran once');
    const outcomes = [...roundsA, ...roundsB].flatMap((r) => r.outcomes);
    assert.equal(outcomes.length, 60);
    assert.ok(outcomes.every((o) => o.status === 'completed' && o.completed === true && o.result === `r-${o.id}`));
    assert.ok(roundsA.length > 0 && roundsB.length > 0, 'both workers took jobs');
    const done = await other.list({ queue: q, state: 'done', limit: 1000 });
    assert.equal(done.length, 60);
    // Batches: no single claim, renew or complete; rounds of up to 5.
    const ops = [...recA.sent, ...recB.sent].map(([op]) => op);
    for (const op of ['claim', 'renew', 'complete', 'complete_next']) assert.equal(ops.includes(op), false, op);
    assert.ok(ops.filter((op) => op === 'complete_many').length <= roundsA.length + roundsB.length);
    assert.ok(ops.filter((op) => op === 'complete_many').length >= 12);
    for (const [op, fields] of [...recA.sent, ...recB.sent]) {
      if (op === 'claim_next') assert.equal(fields.max, 5);
      if (op === 'complete_many') assert.deepEqual(fields.next, { queue: q, ttl: 30, max: 5 });
    }
  });

  it('never holds more than prefetch leases at a time', async () => {
    const q = uniqueId('q');
    const all = ids(q, 20);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const most = { wa: 0, wb: 0 };
    const fn = (owner) => async () => {
      const leased = await other.list({ queue: q, state: 'leased', limit: 1000 });
      for (const o of Object.keys(most)) {
        most[o] = Math.max(most[o], leased.filter((row) => row.owner === o).length);
      }
      assert.ok(leased.some((row) => row.owner === owner));
      return 'ok';
    };
    await Promise.all([
      drain(c, q, 'wa', 30, fn('wa'), { prefetch: 3, wait: 0.3 }),
      drain(c2, q, 'wb', 30, fn('wb'), { prefetch: 3, wait: 0.3 }),
    ]);
    assert.ok(most.wa <= 3 && most.wb <= 3, JSON.stringify(most));
    assert.equal(Math.max(most.wa, most.wb), 3, 'a worker held a full prefetch');
    assert.equal((await other.list({ queue: q, state: 'done', limit: 1000 })).length, 20);
  });

  it('keeps every held lease alive past its ttl with one renewMany for all of them', async () => {
    const q = uniqueId('q');
    const all = ids(q, 3);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const stolen = [];
    const rec = recordRequests(c);
    let round;
    try {
      round = await c.workNext(q, 'w', 1, async () => {
        await sleep(600); // three of these: 1.8 s, well past the 1 s ttl
        stolen.push(...await other.claimNext(q, 'thief', 30, { max: 3 }));
        for (const id of all) stolen.push(await other.claim(id, 'thief', 30));
        return 'ok';
      }, { prefetch: 3, wait: 1 });
    } finally {
      rec.restore();
    }
    assert.deepEqual(stolen.filter((s) => s !== null), [], 'no job was claimable while held');
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status]), all.map((id) => [id, 'completed']));
    assert.deepEqual(round.next, []);
    const renews = rec.sent.filter(([op]) => op === 'renew_many');
    assert.ok(renews.length >= 3, `renewMany sent ${renews.length} times`);
    // The first renewal (during the first job) carries all three leases.
    assert.deepEqual(renews[0][1].items.map((item) => item.id).sort(), all);
    assert.ok(renews.every(([, fields]) => fields.ttl === 1 && fields.items.every((item) => item.owner === 'w')));
    assert.equal(rec.sent.some(([op]) => op === 'renew'), false);
    for (const id of all) assert.equal((await c.state(id)).result, 'ok');
  });

  it('a job that throws is failed alone, at once; the others are stored', async () => {
    const q = uniqueId('q');
    const all = ids(q, 3);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const boom = new Error('boom');
    const round = await c.workNext(q, 'w', 30, ({ id }) => {
      if (id === all[1]) throw boom;
      return `r-${id}`;
    }, { prefetch: 3, retryIn: 60 });
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status, o.completed]),
      [[all[0], 'completed', true], [all[1], 'failed', false], [all[2], 'completed', true]]);
    assert.equal(round.outcomes[1].error, boom);
    assert.equal('error' in round.outcomes[0], false);
    const [failed] = await other.list({ queue: q, state: 'delayed' });
    assert.equal(failed.id, all[1]);
    assert.equal(failed.error, 'boom');
    assert.equal((await c.state(all[2])).result, `r-${all[2]}`);
  });

  it('a result complete cannot store fails that job alone, and the batch goes through', async () => {
    const q = uniqueId('q');
    const all = ids(q, 3);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const round = await c.workNext(q, 'w', 30, ({ id }) => (id === all[0] ? { not: 'a string' } : null),
      { prefetch: 3, retryIn: 60 });
    assert.deepEqual(round.outcomes.map((o) => o.status), ['failed', 'completed', 'completed']);
    assert.ok(round.outcomes[0].error instanceof FenceqError);
    assert.equal(round.outcomes[0].error.code, 'invalid_argument');
    assert.match((await other.list({ queue: q, state: 'delayed' }))[0].error, /string or null/);
  });

  it('large results go as several completeMany, the last one taking the next jobs', async () => {
    const q = uniqueId('q');
    const all = ids(q, 8);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const big = 'x'.repeat(300 * 1024); // 4 of them: over the daemon's 1 MiB frame limit
    const rec = recordRequests(c);
    let round;
    try {
      round = await c.workNext(q, 'w', 30, () => big, { prefetch: 4 });
    } finally {
      rec.restore();
    }
    assert.ok(round.outcomes.every((o) => o.status === 'completed'));
    const completes = rec.sent.filter(([op]) => op === 'complete_many');
    assert.equal(completes.length, 4);
    assert.deepEqual(completes.map(([, fields]) => 'next' in fields), [false, false, false, true]);
    assert.deepEqual(round.next.map((job) => job.id), all.slice(4));
    for (const id of all.slice(0, 4)) assert.equal((await c.state(id)).result.length, big.length);
  });

  it('stop during a job: it is stored, the ones not started are released untouched, no more claimed', async () => {
    const q = uniqueId('q');
    const all = ids(q, 5);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const stop = new AbortController();
    const ran = [];
    const rec = recordRequests(c);
    let round;
    try {
      round = await c.workNext(q, 'w', 30, async ({ id }) => {
        ran.push(id);
        stop.abort();
        // Released at once, while this job still runs.
        await until(() => rec.sent.filter(([op]) => op === 'release').length === 2);
        return 'first';
      }, { prefetch: 3, stopSignal: stop.signal });
    } finally {
      rec.restore();
    }
    assert.deepEqual(ran, [all[0]]);
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status]),
      [[all[0], 'completed'], [all[1], 'released'], [all[2], 'released']]);
    assert.deepEqual(round.next, []);
    const complete = rec.sent.find(([op]) => op === 'complete_many');
    assert.equal('next' in complete[1], false);
    assert.equal((await c.state(all[0])).result, 'first');
    for (const id of all.slice(1, 3)) {
      assert.deepEqual(await c.state(id), { id, owner: null, until: 0, fence: 1, result: null, done: false });
    }
    assert.equal((await other.list({ queue: q, state: 'ready' })).length, 4);
    // Stopped before a round: held jobs are released and fn is not called.
    const held = await c.claimNext(q, 'w', 30, { max: 2 });
    assert.equal(await c.workNext(q, 'w', 30, () => assert.fail('ran'),
      { prefetch: 3, jobs: held, stopSignal: stop.signal }), null);
    for (const job of held) assert.equal((await c.state(job.id)).owner, null);
    assert.equal(await c.workNext(q, 'w', 30, () => assert.fail('ran'), { prefetch: 3, stopSignal: stop.signal }),
      null);
    assert.equal((await other.list({ queue: q, state: 'ready' })).length, 4);
  });

  it('prefetch 1 works in rounds of one; without prefetch workNext is unchanged', async () => {
    const q = uniqueId('q');
    const all = ids(q, 3);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })));
    const single = await c.workNext(q, 'w', 30, ({ id }) => id, { wait: 0 });
    assert.deepEqual(single, { id: all[0], fence: 1, attempts: 1, completed: true, result: all[0] });
    const rounds = await drain(c, q, 'w', 30, ({ id }) => id, { prefetch: 1 });
    assert.deepEqual(rounds.map((r) => [r.outcomes.map((o) => o.id), r.next.map((j) => j.id)]),
      [[[all[1]], [all[2]]], [[all[2]], []]]);
  });

  it('refuses malformed prefetch options before claiming anything', async () => {
    const q = uniqueId('q');
    await c.enqueue(uniqueId('a'), { queue: q });
    const fn = () => assert.fail('ran');
    const job = { id: 'x', fence: 1, payload: null, attempts: 1 };
    for (const prefetch of [0, 1001, 1.5, '2', null]) {
      await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch }), 'invalid_argument', /prefetch/);
    }
    await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch: 2, jobs: [job, job, job] }), 'invalid_argument', /jobs/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch: 2, jobs: ['x'] }), 'invalid_argument', /jobs/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch: 2, jobs: job }), 'invalid_argument', /jobs/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch: 2, takeNext: true }), 'invalid_argument', /takeNext/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch: 2, job }), 'invalid_argument', /job/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { prefetch: 2, log: 'stderr' }), 'invalid_argument', /log/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { jobs: [job] }), 'invalid_argument', /jobs goes with prefetch/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { log: () => {} }), 'invalid_argument', /log goes with prefetch/);
    assert.equal((await other.list({ queue: q, state: 'ready' })).length, 1);
  });
});

describe('workNext with prefetch: stolen leases, client clock', () => {
  let daemon, c, thief;
  withDaemon({ clock: 'client' }, 2, (...f) => { [daemon, c, thief] = f; });

  /** Three jobs, claimed by a prefetching round at 1000 (ttl 30: until 1030). */
  async function setUp() {
    const q = uniqueId('q');
    const all = ids(q, 3);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })), { now: 1000 });
    return { q, all };
  }

  /** A thief takes `id` once its lease looks ended to it (its own now). */
  async function steal(id) {
    assert.equal(await thief.claim(id, 'thief', 30, { now: 2000 }), 2);
  }

  it('a waiting job whose renew answers false is dropped, never run; the others go on', async () => {
    const { q, all } = await setUp();
    const logs = [];
    const ran = [];
    const rec = recordRequests(c);
    let round;
    try {
      round = await c.workNext(q, 'w', 30, async ({ id }) => {
        ran.push(id);
        if (id === all[0]) {
          await steal(all[1]);
          await until(() => logs.length > 0); // the next renewMany finds it gone
        }
        return `r-${id}`;
      }, { prefetch: 3, clock: () => 1000, renewEveryMs: 20, log: (m) => logs.push(m) });
    } finally {
      rec.restore();
    }
    assert.deepEqual(ran, [all[0], all[2]]);
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status, o.result]),
      [[all[0], 'completed', `r-${all[0]}`], [all[1], 'lost', undefined], [all[2], 'completed', `r-${all[2]}`]]);
    assert.equal(logs.length, 1);
    assert.match(logs[0], new RegExp(`${all[1]} \\(fence 1\\).*renew was refused`));
    // Every renewMany carried the held leases together; the stale one failed alone.
    const renews = rec.sent.filter(([op]) => op === 'renew_many');
    assert.ok(renews.length >= 1);
    assert.deepEqual(renews[0][1].items.map((item) => item.id), all);
    const [complete] = rec.sent.filter(([op]) => op === 'complete_many');
    assert.deepEqual(complete[1].items.map((item) => item.id), [all[0], all[2]]);
    assert.deepEqual(await c.state(all[1]),
      { id: all[1], owner: 'thief', until: 2030, fence: 2, result: null, done: false });
    assert.equal((await c.state(all[2])).result, `r-${all[2]}`);
  });

  it('a running job whose renew answers false is aborted and not completed', async () => {
    const { q, all } = await setUp();
    const logs = [];
    let reason = null;
    const rec = recordRequests(c);
    let round;
    try {
      round = await c.workNext(q, 'w', 30, async ({ id, signal }) => {
        if (id !== all[1]) return `r-${id}`;
        await steal(all[1]);
        await until(() => signal.aborted);
        reason = signal.reason;
        return 'late';
      }, { prefetch: 3, clock: () => 1000, renewEveryMs: 20, log: (m) => logs.push(m) });
    } finally {
      rec.restore();
    }
    assert.ok(reason instanceof FenceqError);
    assert.equal(reason.code, 'lease_lost');
    assert.deepEqual(round.outcomes.map((o) => [o.status, o.result]),
      [['completed', `r-${all[0]}`], ['lost', 'late'], ['completed', `r-${all[2]}`]]);
    assert.equal(logs.length, 1);
    const completes = rec.sent.filter(([op]) => op === 'complete_many' || op === 'complete');
    assert.deepEqual(completes.flatMap(([, fields]) => fields.items.map((item) => item.id)), [all[0], all[2]]);
    assert.deepEqual(await c.state(all[1]),
      { id: all[1], owner: 'thief', until: 2030, fence: 2, result: null, done: false });
  });

  it('a finished job whose complete answers false inside the batch fails alone', async () => {
    const { q, all } = await setUp();
    const logs = [];
    const round = await c.workNext(q, 'w', 30, async ({ id }) => {
      if (id === all[2]) await steal(all[0]); // finished, waiting for the batch
      return `r-${id}`;
    }, { prefetch: 3, clock: () => 1000, renewEveryMs: 60000, log: (m) => logs.push(m) });
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status, o.completed, o.result]), [
      [all[0], 'lost', false, `r-${all[0]}`],
      [all[1], 'completed', true, `r-${all[1]}`],
      [all[2], 'completed', true, `r-${all[2]}`],
    ]);
    assert.equal(logs.length, 1);
    assert.match(logs[0], new RegExp(`${all[0]} \\(fence 1\\).*complete was refused`));
    assert.deepEqual(await c.state(all[0]),
      { id: all[0], owner: 'thief', until: 2030, fence: 2, result: null, done: false });
    assert.equal((await c.state(all[1])).result, `r-${all[1]}`);
    // The thief's lease is its own to complete.
    assert.deepEqual(await thief.completeMany([{ id: all[0], owner: 'thief', fence: 2, result: 'thief' }],
      { now: 2001 }), [true]);
  });

  it('carries the clock\'s now on every batch request', async () => {
    const { q, all } = await setUp();
    let t = 1000;
    const rec = recordRequests(c);
    let round;
    try {
      round = await c.workNext(q, 'w', 30, async ({ id }) => {
        t += 10;
        if (id === all[0]) await sleep(60); // a renewMany or two, at t = 1010
        return id;
      }, { prefetch: 2, clock: () => t, renewEveryMs: 20, log: () => assert.fail('nothing is lost') });
    } finally {
      rec.restore();
    }
    assert.deepEqual(round.outcomes.map((o) => o.status), ['completed', 'completed']);
    assert.deepEqual(round.next.map((job) => job.id), [all[2]]);
    const byOp = (op) => rec.sent.filter(([o]) => o === op).map(([, fields]) => fields.now);
    assert.deepEqual(byOp('claim_next'), [1000]);
    assert.ok(byOp('renew_many').length >= 1 && byOp('renew_many').every((now) => now === 1010));
    assert.deepEqual(byOp('complete_many'), [1020]);
    assert.equal((await c.state(all[2])).until, 1050); // next: claimed at 1020 with ttl 30
  });
});
