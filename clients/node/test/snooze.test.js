'use strict';

// Snooze (issue 33, C3.14): Client#snooze and the worker helpers' `Snooze`.
// The current lease ends with its attempt given back and its fence kept, no
// error is recorded, and the job can be claimed again after the delay; a
// stale snooze is refused and changes nothing. Against a real daemon in
// client clock mode, so that the delays are exact.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { FenceqError, Snooze } = require('fenceq');
const { withDaemon, rejectsWith, uniqueId, recordRequests } = require('./helpers');

// Each test's times start past the previous test's: one daemon serves them all.
let base = 0;
function clockFrom(start) {
  const clock = { t: start };
  clock.now = () => clock.t;
  return clock;
}
function nextBase() {
  base += 10000;
  return base;
}

describe('snooze', () => {
  let c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [, c, other] = f; });

  it('C3.14 gives the attempt back, keeps the fence and delays the job', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('s');
    assert.equal(await c.enqueue(id, { queue: q, now: t }), true);
    const job = await c.claimNext(q, 'A', 30, { now: t + 1 });
    assert.deepEqual([job.id, job.fence, job.attempts], [id, 1, 1]);
    assert.equal(await c.snooze(id, 'A', 1, 5, { now: t + 2 }), true);
    const row = await c.job(id, { now: t + 2.5 });
    assert.deepEqual([row.state, row.attempts, row.fence, row.owner, row.error], ['delayed', 0, 1, null, null]);
    assert.equal(row.not_before, t + 7);
    assert.equal(await c.claimNext(q, 'B', 30, { now: t + 6.9 }), null);
    const again = await c.claimNext(q, 'B', 30, { now: t + 7 });
    assert.deepEqual([again.id, again.fence, again.attempts], [id, 2, 1]);
  });

  it('C3.14 a job snoozed on its only attempt never becomes dead', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('once');
    await c.enqueue(id, { queue: q, maxAttempts: 1, now: t });
    for (let n = 1; n <= 3; n++) {
      const job = await c.claimNext(q, 'A', 30, { now: t + n });
      assert.deepEqual([job.attempts, job.fence], [1, n]);
      assert.equal(await c.snooze(id, 'A', job.fence, 0, { now: t + n }), true);
    }
    const job = await c.claimNext(q, 'A', 30, { now: t + 4 });
    assert.equal(await c.complete(id, 'A', job.fence, 'done', { now: t + 4 }), true);
    const row = await c.job(id, { now: t + 4 });
    assert.deepEqual([row.state, row.attempts, row.error], ['done', 1, null]);
  });

  it('C3.14 a stale snooze is refused and changes nothing', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('s');
    await c.enqueue(id, { queue: q, now: t });
    assert.equal((await c.claimNext(q, 'A', 10, { now: t + 1 })).fence, 1);
    assert.equal(await c.snooze(id, 'B', 1, 5, { now: t + 2 }), false); // not the owner
    assert.equal(await c.snooze(id, 'A', 2, 5, { now: t + 2 }), false); // not the fence
    assert.equal((await c.job(id, { now: t + 2 })).state, 'leased');
    // A's lease runs out at t + 11 and B takes the job: A's late snooze is refused.
    assert.equal((await c.claimNext(q, 'B', 10, { now: t + 11 })).fence, 2);
    assert.equal(await c.snooze(id, 'A', 1, 0, { now: t + 12 }), false);
    const row = await c.job(id, { now: t + 12 });
    assert.deepEqual([row.state, row.owner, row.fence, row.attempts], ['leased', 'B', 2, 2]);
    assert.equal(await c.complete(id, 'B', 2, 'ok', { now: t + 13 }), true);
    assert.equal(await c.snooze(id, 'B', 2, 0, { now: t + 14 }), false); // done
    assert.equal(await c.snooze(uniqueId('missing'), 'A', 1, 0, { now: t + 14 }), false);
  });

  it('bad input: the daemon names the delay; an unknown option is refused before sending', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('s');
    await c.enqueue(id, { queue: q, now: t });
    await c.claimNext(q, 'A', 30, { now: t + 1 });
    await rejectsWith(c.snooze(id, 'A', 1, -1, { now: t + 2 }), 'invalid_argument', /delay/);
    await rejectsWith(c.snooze(id, 'A', 1, 1e9 + 1, { now: t + 2 }), 'invalid_argument', /delay/);
    await rejectsWith(c.snooze(id, 'A', 1, '1', { now: t + 2 }), 'bad_request', /delay/);
    await rejectsWith(c.snooze(id, 'A', 1, undefined, { now: t + 2 }), 'bad_request', /delay/);
    await rejectsWith(c.snooze(id, 'A', 1, 1), 'invalid_argument', /now/); // client clock
    const { sent, restore } = recordRequests(c);
    await rejectsWith(c.snooze(id, 'A', 1, 1, { retryIn: 1 }), 'invalid_argument', /unknown snooze option 'retryIn'/);
    restore();
    assert.equal(sent.length, 0);
    const row = await c.job(id, { now: t + 2 });
    assert.deepEqual([row.state, row.owner, row.attempts], ['leased', 'A', 1]);
  });

  it('the Snooze class checks its delay when thrown', () => {
    const s = new Snooze(2.5, 'rate limited');
    assert.ok(s instanceof Error);
    assert.ok(!(s instanceof FenceqError));
    assert.deepEqual([s.name, s.delay, s.reason, s.message],
      ['Snooze', 2.5, 'rate limited', 'snoozed for 2.5 s: rate limited']);
    assert.deepEqual([new Snooze(0).delay, new Snooze(1e9).delay, new Snooze(0).reason], [0, 1e9, null]);
    for (const delay of [-0.5, 1e9 + 1, NaN, Infinity, '60', undefined, null, true]) {
      assert.throws(() => new Snooze(delay), (err) => err instanceof FenceqError &&
        err.code === 'invalid_argument' && /Snooze: delay must be a number of seconds/.test(err.message),
      String(delay));
    }
    assert.throws(() => new Snooze(1, 42), (err) => err.code === 'invalid_argument' && /reason/.test(err.message));
  });
});

describe('the worker helpers and Snooze', () => {
  let c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [, c, other] = f; });

  it('workNext: a Snooze snoozes the job (no fail, attempt given back), which comes back after the delay', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('call');
    await c.enqueue(id, { queue: q, maxAttempts: 1, now: clock.t });
    const calls = [];
    const fn = ({ attempts, fence }) => {
      calls.push([attempts, fence]);
      if (calls.length === 1) throw new Snooze(30, 'the API said 429');
      return 'done';
    };
    const outcome = await c.workNext(q, 'w', 60, fn, { wait: 0, clock: clock.now });
    assert.deepEqual(outcome, { id, fence: 1, attempts: 1, completed: false, snoozed: true, result: undefined });
    const row = await c.job(id, { now: clock.t });
    assert.deepEqual([row.state, row.attempts, row.fence, row.error, row.not_before],
      ['delayed', 0, 1, null, clock.t + 30]);
    clock.t += 29;
    assert.equal(await c.workNext(q, 'w', 60, fn, { wait: 0, clock: clock.now }), null);
    clock.t += 1;
    const done = await c.workNext(q, 'w', 60, fn, { wait: 0, clock: clock.now, takeNext: true });
    assert.deepEqual(done, { id, fence: 2, attempts: 1, completed: true, result: 'done', next: null });
    assert.deepEqual(calls, [[1, 1], [1, 2]]); // the attempt came back
    const totals = (await c.stats({ now: clock.t })).queues[q].totals;
    assert.equal(totals.failed, 0);
    assert.equal((await c.job(id, { now: clock.t })).error, null);
  });

  it('workNext with takeNext: a snoozed job claims no next one', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    await c.enqueueMany([{ id: `${q}-a`, queue: q, priority: 2 }, { id: `${q}-b`, queue: q, priority: 1 }],
      { now: clock.t });
    const outcome = await c.workNext(q, 'w', 60, () => { throw new Snooze(10); },
      { wait: 0, clock: clock.now, takeNext: true });
    assert.deepEqual(outcome, { id: `${q}-a`, fence: 1, attempts: 1, completed: false, snoozed: true,
      result: undefined, next: null });
    assert.equal((await c.job(`${q}-b`, { now: clock.t })).state, 'ready');
  });

  it('work (a job by id): a Snooze snoozes the job and resolves with snoozed', async () => {
    const clock = clockFrom(nextBase());
    const id = uniqueId('by-id');
    await c.enqueue(id, { now: clock.t });
    const outcome = await c.work(id, 'w', 60, () => { throw new Snooze(20); }, { clock: clock.now });
    assert.deepEqual(outcome, { fence: 1, completed: false, snoozed: true, result: undefined });
    const row = await c.job(id, { now: clock.t });
    assert.deepEqual([row.state, row.attempts, row.not_before, row.error], ['delayed', 0, clock.t + 20, null]);
    assert.equal(await c.work(id, 'w', 60, () => 'early', { clock: clock.now }), null);
    clock.t += 20;
    assert.deepEqual(await c.work(id, 'w', 60, ({ fence }) => `fence ${fence}`, { clock: clock.now }),
      { fence: 2, completed: true, result: 'fence 2' });
  });

  it('C3.14 a Snooze after the job was cancelled stores nothing: snoozed false', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('gone');
    await c.enqueue(id, { queue: q, now: clock.t });
    const outcome = await c.workNext(q, 'w', 60, async (job) => {
      assert.equal(await other.cancel(job.id, { now: clock.t }), true);
      throw new Snooze(5);
    }, { wait: 0, clock: clock.now });
    assert.deepEqual(outcome, { id, fence: 1, attempts: 1, completed: false, snoozed: false, result: undefined });
    assert.equal((await c.job(id, { now: clock.t })).state, 'cancelled');
  });

  it('a Snooze with a bad delay fails the job with a clear error, and workNext rethrows it', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('bad');
    await c.enqueue(id, { queue: q, now: clock.t });
    await rejectsWith(c.workNext(q, 'w', 60, () => { throw new Snooze(-5); },
      { wait: 0, clock: clock.now, retryIn: 0 }), 'invalid_argument', /Snooze: delay/);
    const row = await c.job(id, { now: clock.t });
    assert.equal(row.attempts, 1);
    assert.match(row.error, /Snooze: delay must be a number of seconds in \[0, 1e9\], got -5/);
  });

  it('prefetch: a snoozed job of a round is snoozed at once, the others completed', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const all = ['a', 'b', 'c', 'd'].map((x) => `${q}-${x}`);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })), { now: clock.t });
    const logged = [];
    const round = await c.workNext(q, 'w', 60, async ({ id }) => {
      if (id === all[1]) throw new Snooze(5, 'later');
      if (id === all[2]) {
        assert.equal(await other.cancel(id, { now: clock.t }), true);
        throw new Snooze(5);
      }
      return id;
    }, { wait: 0, clock: clock.now, prefetch: 4, log: (m) => logged.push(m) });
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status, o.completed, o.result]), [
      [all[0], 'completed', true, all[0]],
      [all[1], 'snoozed', false, undefined],
      [all[2], 'lost', false, undefined],
      [all[3], 'completed', true, all[3]],
    ]);
    assert.ok(round.outcomes[1].error instanceof Snooze && round.outcomes[1].error.reason === 'later');
    assert.ok(logged.some((m) => m.includes(all[2]) && m.includes('its snooze was refused')), logged.join('\n'));
    const row = await c.job(all[1], { now: clock.t });
    assert.deepEqual([row.state, row.attempts, row.not_before, row.error], ['delayed', 0, clock.t + 5, null]);
    assert.equal((await c.job(all[2], { now: clock.t })).state, 'cancelled');
  });
});
