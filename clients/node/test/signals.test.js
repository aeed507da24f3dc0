'use strict';

// Suspend, signal and deadlines (issue 60): Client#suspend and #signal
// (C3.23), the `signal` that claims and `job` carry, the worker helpers'
// `job.suspend(timeout)` and `job.signalled` / `job.signalValue`, and
// enqueue's `deadline` (C3.24). Against a real daemon in client clock mode,
// so that leases, waits and deadlines end exactly when a test says; a wait
// that times out is written down at the daemon's next batch, so the tests
// that wait for one poll (a bounded number of claims, each a second later).

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { FenceqError } = require('fenceq');
const { withDaemon, rejectsWith, uniqueId, recordRequests } = require('./helpers');

const TOKEN = /^[0-9a-f]{32}$/;

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

/** Runs `fn` with console.warn collected (the worker helpers log a lost lease there). */
async function quietly(fn) {
  const logged = [];
  const warn = console.warn;
  console.warn = (m) => logged.push(m);
  try {
    await fn();
  } finally {
    console.warn = warn;
  }
  return logged;
}

/**
 * Polls `attempt()` (a claim, or a worker's round) up to `tries` times, the
 * clock one second later each time, until it answers something but null: a
 * wait that timed out is written down at the daemon's next batch, not at once.
 */
async function poll(clock, attempt, tries = 20) {
  for (let i = 0; i < tries; i++) {
    clock.t += 1;
    const got = await attempt();
    if (got !== null) return got;
  }
  throw new Error(`nothing came within ${tries} polls`);
}

describe('C3.23 suspend and signal: the client calls', () => {
  let c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [, c, other] = f; });

  it('C3.23 suspend answers a token and suspends the job; one signal wakes it, and every claim path carries the value',
    async () => {
      const t = nextBase();
      const q = uniqueId('q');
      const id = uniqueId('o');
      await c.enqueue(id, { queue: q, now: t });
      const claimed = await c.claimNext(q, 'A', 30, { now: t + 1 });
      assert.equal(claimed.signal, undefined);
      assert.ok(!('signal' in claimed)); // never signalled: no key at all
      const token = await c.suspend(id, 'A', claimed.fence, 3600, { now: t + 2 });
      assert.match(token, TOKEN);

      let row = await c.job(id, { now: t + 3 });
      assert.deepEqual([row.state, row.owner, row.fence, row.attempts], ['suspended', null, 1, 0]);
      assert.deepEqual(row.suspended, { timeout: t + 2 + 3600, on_timeout: 'retry' });
      assert.ok(!('signal' in row));
      assert.deepEqual((await c.list({ queue: q, state: 'suspended', now: t + 3 })).map((r) => r.id), [id]);
      assert.equal((await c.stats({ now: t + 3 })).queues[q].suspended, 1);
      assert.equal(await c.claimNext(q, 'B', 30, { now: t + 4 }), null); // no claim takes it
      assert.equal(await c.complete(id, 'A', 1, 'late', { now: t + 4 }), false); // its lease ended

      const value = Buffer.from([0, 1, 255]);
      assert.equal(await other.signal(token, { value, now: t + 5 }), true);
      assert.equal(await other.signal(token, { value: 'again', now: t + 5 }), false); // used up
      row = await c.job(id, { now: t + 5 });
      assert.equal(row.state, 'ready');
      assert.ok(Buffer.isBuffer(row.signal));
      assert.deepEqual(row.signal, value);
      assert.equal(row.suspended, undefined);
      assert.equal((await c.stats({ now: t + 5 })).queues[q].suspended, undefined);

      const woken = await c.claimNext(q, 'B', 30, { now: t + 6 });
      assert.deepEqual([woken.id, woken.fence, woken.attempts], [id, 2, 1]);
      assert.ok(Buffer.isBuffer(woken.signal));
      assert.deepEqual(woken.signal, value);

      // Until it suspends again, every claim carries it: claimNext with max,
      // and the next job of complete_next and complete_many.
      assert.equal(await c.release(id, 'B', 2), true);
      const [many] = await c.claimNext(q, 'B', 30, { max: 3, now: t + 7 });
      assert.deepEqual(many.signal, value);
      assert.equal(await c.release(id, 'B', many.fence), true);
      const first = uniqueId('first');
      await c.enqueue(first, { queue: `${q}-other`, now: t + 8 });
      const f = await c.claimNext(`${q}-other`, 'B', 30, { now: t + 8 });
      const { next } = await c.completeAndClaimNext(first, 'B', f.fence, null, q, 30, { now: t + 9 });
      assert.deepEqual([next.id, next.signal], [id, value]);
      assert.equal(await c.release(id, 'B', next.fence), true);
      const second = uniqueId('second');
      await c.enqueue(second, { queue: `${q}-other`, now: t + 10 });
      const s = await c.claimNext(`${q}-other`, 'B', 30, { now: t + 10 });
      const batch = await c.completeMany([{ id: second, owner: 'B', fence: s.fence }],
        { next: { queue: q, ttl: 30, max: 2 }, now: t + 11 });
      assert.deepEqual(batch.next.map((j) => [j.id, j.signal]), [[id, value]]);

      // A new suspend forgets the old signal: woken by its timeout, no signal.
      const again = await c.suspend(id, 'B', batch.next[0].fence, 1, { now: t + 12 });
      assert.match(again, TOKEN);
      assert.notEqual(again, token);
      assert.equal(await c.signal(token, { now: t + 12 }), false); // the old wait's token wakes nothing
      assert.ok(!('signal' in (await c.job(id, { now: t + 12 }))));
    });

  it('C3.23 a signal without a value wakes the job with a signal of nil: present, null', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: t });
    await c.claimNext(q, 'A', 30, { now: t + 1 });
    const token = await c.suspend(id, 'A', 1, 60, { onTimeout: 'fail', now: t + 2 });
    assert.deepEqual((await c.job(id, { now: t + 2 })).suspended, { timeout: t + 62, on_timeout: 'fail' });
    assert.equal(await c.signal(token), true); // now is optional for signal
    const woken = await c.claimNext(q, 'B', 30, { now: t + 3 });
    assert.ok('signal' in woken);
    assert.equal(woken.signal, null);
    const row = await c.job(id, { now: t + 3 });
    assert.ok('signal' in row);
    assert.equal(row.signal, null);
  });

  it('C3.23 what goes on the wire: on_timeout only when fail, the value only when given', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    await c.enqueueMany([{ id: a, queue: q }, { id: b, queue: q }], { now: t });
    const [ja, jb] = await c.claimNext(q, 'A', 30, { max: 2, now: t + 1 });
    const { sent, restore } = recordRequests(c);
    let ta;
    try {
      ta = await c.suspend(ja.id, 'A', ja.fence, 60, { onTimeout: 'retry', now: t + 2 });
      await c.suspend(jb.id, 'A', jb.fence, 60, { onTimeout: 'fail', now: t + 2 });
      await c.signal(ta);
      await c.signal('0'.repeat(32), { value: null, now: t + 3 });
    } finally {
      restore();
    }
    assert.deepEqual(sent, [
      ['suspend', { id: ja.id, owner: 'A', fence: ja.fence, timeout: 60, now: t + 2 }],
      ['suspend', { id: jb.id, owner: 'A', fence: jb.fence, timeout: 60, on_timeout: 'fail', now: t + 2 }],
      ['signal', { token: ta }],
      ['signal', { token: '0'.repeat(32), value: null, now: t + 3 }],
    ]);
  });

  it('C3.23 a stale, expired, released or foreign lease cannot suspend the job: null, nothing changed', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: t });
    await c.claimNext(q, 'A', 10, { now: t + 1 });
    assert.equal(await c.suspend(id, 'B', 1, 60, { now: t + 2 }), null); // not the owner
    assert.equal(await c.suspend(id, 'A', 2, 60, { now: t + 2 }), null); // not the fence
    let row = await c.job(id, { now: t + 2 });
    assert.deepEqual([row.state, row.owner, row.fence, row.attempts], ['leased', 'A', 1, 1]);
    assert.equal(await c.suspend(id, 'A', 1, 60, { now: t + 11 }), null); // expired
    assert.equal((await c.claimNext(q, 'B', 10, { now: t + 12 })).fence, 2);
    assert.equal(await c.suspend(id, 'A', 1, 60, { now: t + 13 }), null); // stale: B holds it
    row = await c.job(id, { now: t + 13 });
    assert.deepEqual([row.state, row.owner, row.fence, row.attempts], ['leased', 'B', 2, 2]);
    assert.equal(row.suspended, undefined);
    assert.equal(await c.release(id, 'B', 2), true);
    assert.equal(await c.suspend(id, 'B', 2, 60, { now: t + 14 }), null); // released
    assert.equal(await c.suspend(uniqueId('missing'), 'A', 1, 60, { now: t + 14 }), null);
    assert.equal((await c.job(id, { now: t + 14 })).state, 'ready');
    assert.deepEqual(await c.list({ queue: q, state: 'suspended', now: t + 14 }), []);
  });

  it('C3.23 a suspended job can be cancelled, by cancelMany too: its token then wakes nothing', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    await c.enqueueMany([{ id: a, queue: q }, { id: b, queue: q }], { now: t });
    const [ja, jb] = await c.claimNext(q, 'A', 30, { max: 2, now: t + 1 });
    const ta = await c.suspend(ja.id, 'A', ja.fence, 600, { now: t + 2 });
    const tb = await c.suspend(jb.id, 'A', jb.fence, 600, { now: t + 2 });
    assert.equal(await c.cancel(ja.id, { now: t + 3 }), true);
    assert.deepEqual(await c.cancelMany(q, { state: 'suspended', now: t + 3 }), { count: 1, more: false });
    for (const [id, token] of [[ja.id, ta], [jb.id, tb]]) {
      assert.equal((await c.job(id, { now: t + 4 })).state, 'cancelled', id);
      assert.equal(await c.signal(token, { now: t + 4 }), false, id);
    }
  });

  it('C3.23 a wait that times out: ready again with "suspend timed out" and no signal; its token then wakes nothing',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const id = uniqueId('o');
      await c.enqueue(id, { queue: q, now: clock.t });
      await c.claimNext(q, 'A', 30, { now: clock.t });
      const token = await c.suspend(id, 'A', 1, 1, { now: clock.t });
      clock.t += 1;
      const again = await poll(clock, () => c.claimNext(q, 'B', 30, { now: clock.t }));
      assert.deepEqual([again.id, again.fence, again.attempts], [id, 2, 1]);
      assert.ok(!('signal' in again));
      const row = await c.job(id, { now: clock.t });
      assert.deepEqual([row.state, row.error], ['leased', 'suspend timed out']);
      assert.equal(await c.signal(token, { value: 'late', now: clock.t }), false);
    });

  it('C3.23 on_timeout fail: the job is dead with "suspend timed out"', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: clock.t });
    await c.claimNext(q, 'A', 30, { now: clock.t });
    assert.match(await c.suspend(id, 'A', 1, 1, { onTimeout: 'fail', now: clock.t }), TOKEN);
    clock.t += 1;
    // A claim of the queue runs a batch (the daemon's reap); a read then shows the job.
    const dead = await poll(clock, async () => {
      assert.equal(await c.claimNext(q, 'B', 30, { now: clock.t }), null); // never claimed again
      const row = await c.job(id, { now: clock.t });
      return row.state === 'dead' ? row : null;
    });
    assert.equal(dead.error, 'suspend timed out');
    assert.ok(!('signal' in dead));
  });

  it('C3.23 bad input: a coded error from the daemon (the job keeps its lease); an unknown option is refused before sending',
    async () => {
      const t = nextBase();
      const q = uniqueId('q');
      const id = uniqueId('o');
      await c.enqueue(id, { queue: q, now: t });
      await c.claimNext(q, 'A', 30, { now: t + 1 });
      const now = { now: t + 2 };
      await rejectsWith(c.suspend(id, 'A', 1, 0, now), 'invalid_argument', /timeout/);
      await rejectsWith(c.suspend(id, 'A', 1, 0.5, now), 'invalid_argument', /timeout/);
      await rejectsWith(c.suspend(id, 'A', 1, 2592001, now), 'invalid_argument', /timeout/);
      await rejectsWith(c.suspend(id, 'A', 1, '1h', now), 'bad_request', /timeout/);
      await rejectsWith(c.suspend(id, 'A', 1, 60, { onTimeout: 'x', ...now }), 'invalid_argument', /on_timeout/);
      await rejectsWith(c.suspend(id, 'A', 1, 60), 'invalid_argument', /now/); // client clock: now is required
      await rejectsWith(c.signal(''), 'invalid_argument', /token/);
      await rejectsWith(c.signal('t'.repeat(257)), 'invalid_argument', /token/);
      await rejectsWith(c.signal(7), 'bad_request', /token/);
      await rejectsWith(c.signal('t', { value: { a: 1 } }), 'bad_request', /value/);
      const { sent, restore } = recordRequests(c);
      try {
        await rejectsWith(c.suspend(id, 'A', 1, 60, { on_timeout: 'fail', ...now }), 'invalid_argument',
          /unknown suspend option 'on_timeout'/);
        await rejectsWith(c.signal('t', { val: 'x' }), 'invalid_argument', /unknown signal option 'val'/);
      } finally {
        restore();
      }
      assert.equal(sent.length, 0);
      const row = await c.job(id, now);
      assert.deepEqual([row.state, row.owner, row.fence], ['leased', 'A', 1]);
      assert.match(await c.suspend(id, 'A', 1, 2592000, now), TOKEN); // 30 days: the bound itself
    });
});

describe('C3.24 deadlines', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('C3.24 a job not claimed by its deadline is never claimed: dead, "deadline passed", counted', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const [late, many, early] = [uniqueId('late'), uniqueId('many'), uniqueId('early')];
    assert.equal(await c.enqueue(late, { queue: q, delay: 50, deadline: t + 40, now: t }), true);
    assert.deepEqual(await c.enqueueMany([{ id: many, queue: q, deadline: t + 40, priority: -1 }], { now: t }),
      [true]);
    assert.equal(await c.claimNext(q, 'A', 30, { now: t + 45 }), null); // late's delay holds it past its deadline... and many's passed
    for (const id of [late, many]) {
      const row = await c.job(id, { now: t + 46 });
      assert.deepEqual([row.state, row.error, row.attempts], ['dead', 'deadline passed', 0], id);
    }
    assert.equal((await c.stats({ now: t + 46 })).queues[q].totals.deadline_passed, 2);
    assert.equal(await c.claimNext(q, 'A', 30, { now: t + 100 }), null); // nor later

    // Claimed before it, a job is worked as any other.
    await c.enqueue(early, { queue: q, deadline: t + 200, now: t + 150 });
    const job = await c.claimNext(q, 'A', 30, { now: t + 160 });
    assert.equal(job.id, early);
    assert.equal(await c.complete(early, 'A', job.fence, 'ok', { now: t + 170 }), true);
    assert.equal((await c.job(early, { now: t + 170 })).state, 'done');
  });

  it('C3.24 bad input: a deadline of 0 or less or past 1e11 is invalid_argument, not a number bad_request; nothing created',
    async () => {
      const t = nextBase();
      const q = uniqueId('q');
      const id = uniqueId('d');
      await rejectsWith(c.enqueue(id, { queue: q, deadline: 0, now: t }), 'invalid_argument', /deadline/);
      await rejectsWith(c.enqueue(id, { queue: q, deadline: -5, now: t }), 'invalid_argument', /deadline/);
      await rejectsWith(c.enqueue(id, { queue: q, deadline: 2e11, now: t }), 'invalid_argument', /deadline/);
      await rejectsWith(c.enqueue(id, { queue: q, deadline: 'soon', now: t }), 'bad_request', /deadline/);
      await rejectsWith(c.enqueueMany([{ id, queue: q, deadline: 0 }], { now: t }), 'invalid_argument', /deadline/);
      await rejectsWith(c.enqueueAndWait(id, { queue: q, deadline: 0, now: t }), 'invalid_argument', /deadline/);
      assert.equal(await c.job(id, { now: t }), null);
    });
});

describe('job.suspend and the signal in the worker helpers', () => {
  let c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [, c, other] = f; });

  it('C3.22 C3.23 the story: charge once, a failing email, a stalled attempt that saves nothing, then approval by signal',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('orders');
      const id = uniqueId('order');
      await c.enqueue(id, { queue: q, payload: 'order-7', now: clock.t });
      const calls = { charge: 0, email: 0 };
      let smtpUp = false;
      let approvalToken = null;
      const seen = [];
      const handler = async (job) => {
        seen.push({ attempts: job.attempts, signalled: job.signalled, value: job.signalValue });
        const charge = await job.step('charge', async () => {
          calls.charge += 1;
          return `ch_${job.payload}`;
        });
        await job.step('email', async () => {
          calls.email += 1;
          if (!smtpUp) throw new Error('smtp down');
          return 'sent';
        });
        if (!job.signalled) {
          approvalToken = await job.suspend(3600); // wait for a person's approval
          return null;
        }
        return `shipped ${charge}, ${job.signalValue}`;
      };

      // Attempt 1 (A) charges, then stalls past its lease; attempt 2 (B)
      // finds charge saved and fails at the email; A wakes up late.
      const logged = await quietly(async () => {
        const a = c.workNext(q, 'A', 10, async (job) => {
          const charge = await job.step('charge', async () => {
            calls.charge += 1;
            return `ch_${job.payload}`;
          });
          clock.t += 11; // A stalls: its lease runs out
          await assert.rejects(other.workNext(q, 'B', 30, handler, { wait: 0, clock: clock.now, retryIn: 0 }),
            /smtp down/);
          // A, late: its fence is stale, it cannot save charge again (nor anything)
          assert.equal(await other.stepSave(id, 'A', job.fence, 'charge', 'ch_again', { now: clock.t }), false);
          await job.step('email', () => 'sent by A'); // refused: lease_lost
          return charge;
        }, { wait: 0, clock: clock.now });
        await rejectsWith(a, 'lease_lost', /step 'email' was not saved/);
      });
      assert.ok(logged.some((m) => m.includes("step_save of 'email' was refused")), logged.join('\n'));
      assert.deepEqual(calls, { charge: 1, email: 1 });
      let row = await c.job(id, { now: clock.t });
      assert.deepEqual([row.state, row.fence, row.error], ['ready', 2, 'smtp down']);
      assert.deepEqual(row.steps, { charge: 'ch_order-7' });

      // Attempt 3 (C): charge skipped, the email goes out, then it suspends for approval.
      smtpUp = true;
      clock.t += 1;
      const suspended = await c.workNext(q, 'C', 30, handler, { wait: 0, clock: clock.now });
      assert.deepEqual(suspended, {
        id, fence: 3, attempts: 3, completed: false, suspended: true, token: approvalToken, result: null,
      });
      assert.match(approvalToken, TOKEN);
      row = await c.job(id, { now: clock.t });
      assert.deepEqual([row.state, row.attempts, row.owner], ['suspended', 2, null]); // the attempt given back
      assert.equal(await c.claimNext(q, 'D', 30, { now: clock.t + 1 }), null);

      // The approval: one signal wakes the job; a second one (a webhook delivered twice) is false.
      clock.t += 2;
      assert.equal(await other.signal(approvalToken, { value: 'approved by Ann', now: clock.t }), true);
      assert.equal(await other.signal(approvalToken, { value: 'approved twice', now: clock.t }), false);

      // Attempt 4 (D): the claim carries the signal and the steps; it completes.
      const claimedBy = recordRequests(c);
      let done;
      try {
        done = await c.workNext(q, 'D', 30, handler, { wait: 0, clock: clock.now });
      } finally {
        claimedBy.restore();
      }
      assert.deepEqual(done, { id, fence: 4, attempts: 3, completed: true, result: 'shipped ch_order-7, approved by Ann' });
      assert.deepEqual(claimedBy.sent.map(([op]) => op), ['claim_next', 'complete']); // no step saved again
      assert.deepEqual(calls, { charge: 1, email: 2 }); // charged once across four attempts
      assert.deepEqual(seen, [
        { attempts: 2, signalled: false, value: null },
        { attempts: 3, signalled: false, value: null },
        { attempts: 3, signalled: true, value: 'approved by Ann' },
      ]);
      row = await c.job(id, { now: clock.t });
      assert.deepEqual([row.state, row.result, row.signal], ['done', 'shipped ch_order-7, approved by Ann',
        'approved by Ann']);
      assert.deepEqual(row.steps, { charge: 'ch_order-7', email: 'sent' });
    });

  it('C3.23 a worker\'s suspend that times out: the job is claimable again, not signalled, with "suspend timed out"',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const id = uniqueId('o');
      await c.enqueue(id, { queue: q, now: clock.t });
      const seen = [];
      const handler = async (job) => {
        seen.push([job.attempts, job.signalled, job.signalValue]);
        if (job.attempts === 1 && seen.length === 1) {
          await job.suspend(1);
          return null;
        }
        return 'woken by the timeout';
      };
      const first = await c.workNext(q, 'w', 30, handler, { wait: 0, clock: clock.now });
      assert.equal(first.suspended, true);
      clock.t += 1;
      const second = await poll(clock, () => c.workNext(q, 'w', 30, handler, { wait: 0, clock: clock.now }));
      assert.deepEqual([second.id, second.completed, second.result], [id, true, 'woken by the timeout']);
      assert.deepEqual(seen, [[1, false, null], [1, false, null]]);
      const row = await c.job(id, { now: clock.t });
      assert.deepEqual([row.state, row.error], ['done', 'suspend timed out']);
      assert.ok(!('signal' in row));
    });

  it('C3.23 a worker\'s suspend with onTimeout fail: dead once the wait times out', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: clock.t });
    const outcome = await c.workNext(q, 'w', 30, async (job) => {
      await job.suspend(1, { onTimeout: 'fail' });
    }, { wait: 0, clock: clock.now });
    assert.deepEqual([outcome.suspended, outcome.completed], [true, false]);
    assert.deepEqual((await c.job(id, { now: clock.t })).suspended, { timeout: clock.t + 1, on_timeout: 'fail' });
    clock.t += 1;
    const dead = await poll(clock, async () => {
      assert.equal(await c.claimNext(q, 'B', 30, { now: clock.t }), null);
      const row = await c.job(id, { now: clock.t });
      return row.state === 'dead' ? row : null;
    });
    assert.equal(dead.error, 'suspend timed out');
  });

  it('C3.23 a suspend the daemon refuses (the lease is gone) rejects with lease_lost and changes nothing', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: clock.t });
    let jobSignal = null;
    let after = false;
    const logged = await quietly(async () => {
      await rejectsWith(c.workNext(q, 'A', 10, async (job) => {
        jobSignal = job.signal;
        clock.t += 11; // A stalls; B takes the job
        assert.equal((await other.claimNext(q, 'B', 30, { now: clock.t })).fence, 2);
        await job.suspend(60);
        after = true;
        return 'A done';
      }, { wait: 0, clock: clock.now }), 'lease_lost', /was not suspended/);
    });
    assert.equal(after, false);
    assert.ok(jobSignal.aborted);
    assert.equal(jobSignal.reason.code, 'lease_lost');
    assert.ok(logged.some((m) => m.includes('its suspend was refused')), logged.join('\n'));
    const row = await c.job(id, { now: clock.t });
    assert.deepEqual([row.state, row.owner, row.fence, row.attempts], ['leased', 'B', 2, 2]);
    assert.equal(row.suspended, undefined);
  });

  it('C3.23 after a suspend the job is not the worker\'s: no renew, no complete, a later step or suspend rejects',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const id = uniqueId('o');
      await c.enqueue(id, { queue: q, now: clock.t });
      const ran = [];
      const { sent, restore } = recordRequests(c);
      let outcome;
      const logged = await quietly(async () => {
        try {
          outcome = await c.workNext(q, 'w', 30, async (job) => {
            const token = await job.suspend(600);
            // Long enough for several renewals, were they still running.
            await new Promise((resolve) => { setTimeout(resolve, 120); });
            await rejectsWith(job.step('s', () => { ran.push('s'); return 'x'; }), 'lease_lost', /was suspended/);
            await rejectsWith(job.suspend(60), 'lease_lost', /was suspended/);
            assert.equal(job.signal.aborted, false); // ended by the worker, not lost
            return `told ${token}`;
          }, { wait: 0, clock: clock.now, renewEveryMs: 20 });
        } finally {
          restore();
        }
      });
      assert.deepEqual(ran, []);
      assert.deepEqual(logged, []);
      assert.deepEqual(sent.map(([op]) => op), ['claim_next', 'suspend']);
      assert.deepEqual([outcome.completed, outcome.suspended, outcome.result], [false, true, `told ${outcome.token}`]);
      assert.equal((await c.job(id, { now: clock.t })).state, 'suspended');
    });

  it('C3.23 a suspend not awaited still ends the attempt; a throw after a suspend is rethrown, nothing failed',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const [a, b] = [uniqueId('a'), uniqueId('b')];
      await c.enqueueMany([{ id: a, queue: q, priority: 1 }, { id: b, queue: q }], { now: clock.t });
      let token = null;
      const unawaited = await c.workNext(q, 'w', 30, (job) => {
        job.suspend(60).then((tk) => { token = tk; });
        return 'returned at once';
      }, { wait: 0, clock: clock.now });
      assert.deepEqual([unawaited.id, unawaited.completed, unawaited.suspended, unawaited.token],
        [a, false, true, token]);
      assert.match(token, TOKEN);
      assert.equal((await c.job(a, { now: clock.t })).state, 'suspended');

      const { sent, restore } = recordRequests(c);
      try {
        await assert.rejects(c.workNext(q, 'w', 30, async (job) => {
          await job.suspend(60);
          throw new Error('could not send the approval mail');
        }, { wait: 0, clock: clock.now }), /could not send the approval mail/);
      } finally {
        restore();
      }
      assert.deepEqual(sent.map(([op]) => op), ['claim_next', 'suspend']); // no fail, no release
      const row = await c.job(b, { now: clock.t });
      assert.deepEqual([row.state, row.error], ['suspended', null]);
    });

  it('C3.23 a bad timeout rejects with the daemon\'s error and the job keeps its lease (renewed, completable)',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const id = uniqueId('o');
      await c.enqueue(id, { queue: q, now: clock.t });
      const outcome = await c.workNext(q, 'w', 30, async (job) => {
        await rejectsWith(job.suspend(0), 'invalid_argument', /timeout/);
        await rejectsWith(job.suspend(60, { onTimeout: 'x' }), 'invalid_argument', /on_timeout/);
        await rejectsWith(job.suspend(60, { now: 5 }), 'invalid_argument', /unknown job.suspend option 'now'/);
        return job.step('after', () => 'still ours');
      }, { wait: 0, clock: clock.now });
      assert.deepEqual([outcome.completed, outcome.result, outcome.suspended], [true, 'still ours', undefined]);
      assert.equal((await c.job(id, { now: clock.t })).state, 'done');
    });

  it('C3.23 work (a job by id) suspends too; takeNext claims no next job for a suspended one', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    await c.enqueue(a, { queue: q, now: clock.t });
    const byId = await c.work(a, 'w', 30, async (job) => {
      assert.equal(job.signalled, undefined); // a claim by id answers the fence alone
      await job.suspend(60);
      return 'waiting';
    }, { clock: clock.now });
    assert.deepEqual(byId, { fence: 1, completed: false, suspended: true, token: byId.token, result: 'waiting' });
    assert.match(byId.token, TOKEN);
    assert.equal(await other.signal(byId.token, { value: 'go', now: clock.t }), true);
    assert.deepEqual((await c.job(a, { now: clock.t })).signal, 'go');

    await c.enqueue(b, { queue: q, priority: -1, now: clock.t });
    const taken = await c.workNext(q, 'w', 30, async (job) => {
      assert.deepEqual([job.id, job.signalled, job.signalValue], [a, true, 'go']);
      await job.suspend(60);
    }, { wait: 0, clock: clock.now, takeNext: true });
    assert.deepEqual([taken.id, taken.suspended, taken.next], [a, true, null]);
    const next = await c.workNext(q, 'w', 30, async (job) => job.id, { wait: 0, clock: clock.now, takeNext: true });
    assert.deepEqual([next.id, next.completed], [b, true]);
  });

  it('C3.23 prefetch: a job that suspends is no longer held (status suspended, with its token); the others complete',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const all = ['a', 'b', 'c'].map((x) => `${q}-${x}`);
      await c.enqueueMany(all.map((id) => ({ id, queue: q })), { now: clock.t });
      const logged = [];
      const round = await c.workNext(q, 'w', 30, async (job) => {
        if (job.id === all[1]) {
          await job.suspend(600);
          await new Promise((resolve) => { setTimeout(resolve, 80); }); // renewals go on for the others
          return 'not stored';
        }
        return `done ${job.id}`;
      }, { wait: 0, clock: clock.now, prefetch: 3, renewEveryMs: 20, log: (m) => logged.push(m) });
      assert.deepEqual(round.outcomes.map((o) => [o.id, o.status, o.completed]), [
        [all[0], 'completed', true],
        [all[1], 'suspended', false],
        [all[2], 'completed', true],
      ]);
      assert.match(round.outcomes[1].token, TOKEN);
      assert.equal(round.outcomes[1].error, undefined);
      assert.deepEqual(logged, []); // the suspended job's lease was not renewed, so never refused
      const row = await c.job(all[1], { now: clock.t });
      assert.deepEqual([row.state, row.result], ['suspended', null]);
      assert.equal(await other.signal(round.outcomes[1].token, { now: clock.t }), true);
      const woken = await c.workNext(q, 'w', 30, async (job) => [job.signalled, job.signalValue].join(' '),
        { wait: 0, clock: clock.now, prefetch: 3 });
      assert.deepEqual(woken.outcomes.map((o) => [o.id, o.status, o.result]), [[all[1], 'completed', 'true ']]);
    });

  it('C3.23 prefetch: a refused suspend loses that job alone (lease_lost), the round goes on', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const all = ['a', 'b'].map((x) => `${q}-${x}`);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })), { now: clock.t });
    const logged = [];
    const round = await c.workNext(q, 'w', 30, async (job) => {
      if (job.id === all[0]) {
        assert.equal(await other.cancel(job.id, { now: clock.t }), true);
        await job.suspend(600);
      }
      return 'ok';
    }, { wait: 0, clock: clock.now, prefetch: 2, log: (m) => logged.push(m) });
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status]), [[all[0], 'lost'], [all[1], 'completed']]);
    assert.ok(round.outcomes[0].error instanceof FenceqError && round.outcomes[0].error.code === 'lease_lost');
    assert.ok(logged.some((m) => m.includes(all[0]) && m.includes('its suspend was refused')), logged.join('\n'));
  });
});
