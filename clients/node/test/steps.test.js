'use strict';

// Steps (C3.22): Client#stepSave, the `steps` that claims and `job` carry,
// and the worker helpers' `job.step(name, fn)`. A step is saved under the
// current lease, once per job (never overwritten); every later claim of the
// job hands it back, so that a retried job skips the steps its earlier
// attempts finished; a stale lease saves nothing. Against a real daemon in
// client clock mode, so that leases run out exactly when a test says.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { FenceqError } = require('fenceq');
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

describe('stepSave and the steps of claims and records', () => {
  let c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [, c, other] = f; });

  it('C3.22 saves a step once: a second save of the name answers false, even by its lease', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: t });
    const job = await c.claimNext(q, 'A', 30, { now: t + 1 });
    assert.equal(job.steps, undefined); // a job without steps has no `steps`
    assert.deepEqual(Object.keys(job).sort(), ['attempts', 'fence', 'id', 'payload']);
    assert.equal(await c.stepSave(id, 'A', 1, 'charge', 'ch_1', { now: t + 2 }), true);
    assert.equal(await c.stepSave(id, 'A', 1, 'charge', 'ch_2', { now: t + 2 }), false);
    assert.equal(await c.stepSave(id, 'A', 1, 'charge', null, { now: t + 2 }), false);
    assert.deepEqual((await c.job(id, { now: t + 3 })).steps, { charge: 'ch_1' });
  });

  it('C3.22 bin, str and nil values come back as saved, through claimNext, job and the next of completions',
    async () => {
      const t = nextBase();
      const q = uniqueId('q');
      const id = uniqueId('o');
      const bytes = Buffer.from([0, 1, 2, 255]);
      await c.enqueue(id, { queue: q, now: t });
      await c.claimNext(q, 'A', 30, { now: t + 1 });
      assert.equal(await c.stepSave(id, 'A', 1, 'bin', bytes, { now: t + 2 }), true);
      assert.equal(await c.stepSave(id, 'A', 1, 'u8', new Uint8Array([7, 8]), { now: t + 2 }), true);
      assert.equal(await c.stepSave(id, 'A', 1, 'str', 'text é', { now: t + 2 }), true);
      assert.equal(await c.stepSave(id, 'A', 1, 'nil', null, { now: t + 2 }), true);
      assert.equal(await c.stepSave(id, 'A', 1, 'empty', '', { now: t + 2 }), true);
      const expected = { bin: bytes, u8: Buffer.from([7, 8]), str: 'text é', nil: null, empty: '' };
      const checkSteps = (steps, where) => {
        assert.deepEqual(steps, expected, where);
        assert.ok(Buffer.isBuffer(steps.bin) && Buffer.isBuffer(steps.u8), `${where}: bins are Buffers`);
      };
      checkSteps((await c.job(id, { now: t + 3 })).steps, 'job');
      assert.equal(await c.release(id, 'A', 1), true);

      const claimed = await c.claimNext(q, 'B', 30, { now: t + 4 });
      assert.deepEqual([claimed.id, claimed.fence, claimed.attempts], [id, 2, 2]);
      checkSteps(claimed.steps, 'claimNext');
      assert.equal(await c.release(id, 'B', 2), true);
      const [many] = await c.claimNext(q, 'B', 30, { max: 5, now: t + 5 });
      checkSteps(many.steps, 'claimNext with max');
      assert.equal(await c.release(id, 'B', 3), true);

      // The next job of complete_next and complete_many carries its steps too.
      const first = uniqueId('first');
      await c.enqueue(first, { queue: `${q}-other`, now: t + 6 });
      const f = await c.claimNext(`${q}-other`, 'B', 30, { now: t + 6 });
      const { completed, next } = await c.completeAndClaimNext(first, 'B', f.fence, 'ok', q, 30, { now: t + 7 });
      assert.equal(completed, true);
      checkSteps(next.steps, 'completeAndClaimNext next');
      assert.equal(await c.release(id, 'B', next.fence), true);
      const second = uniqueId('second');
      await c.enqueue(second, { queue: `${q}-other`, now: t + 8 });
      const s = await c.claimNext(`${q}-other`, 'B', 30, { now: t + 8 });
      const batch = await c.completeMany([{ id: second, owner: 'B', fence: s.fence, result: null }],
        { next: { queue: q, ttl: 30, max: 2 }, now: t + 9 });
      assert.deepEqual(batch.completed, [true]);
      checkSteps(batch.next[0].steps, 'completeMany next');

      // claim (by id) answers the fence alone: the steps are read with job.
      assert.equal(await c.release(id, 'B', batch.next[0].fence), true);
      assert.equal(await c.claim(id, 'C', 30, { now: t + 10 }), 6);
      checkSteps((await other.job(id, { now: t + 10 })).steps, 'job after claim');
    });

  it('C3.22 a stale, expired or released lease saves nothing', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: t });
    await c.claimNext(q, 'A', 10, { now: t + 1 });
    assert.equal(await c.stepSave(id, 'B', 1, 'x', 'v', { now: t + 2 }), false); // not the owner
    assert.equal(await c.stepSave(id, 'A', 2, 'x', 'v', { now: t + 2 }), false); // not the fence
    assert.equal(await c.stepSave(id, 'A', 1, 'x', 'v', { now: t + 11 }), false); // expired
    assert.equal((await c.claimNext(q, 'B', 10, { now: t + 12 })).fence, 2);
    assert.equal(await c.stepSave(id, 'A', 1, 'x', 'late', { now: t + 13 }), false); // stale
    assert.equal(await c.stepSave(id, 'B', 2, 'x', 'b', { now: t + 13 }), true);
    assert.equal(await c.release(id, 'B', 2), true);
    assert.equal(await c.stepSave(id, 'B', 2, 'y', 'v', { now: t + 14 }), false); // released
    assert.equal(await c.stepSave(uniqueId('missing'), 'A', 1, 'x', 'v', { now: t + 14 }), false);
    assert.deepEqual((await c.job(id, { now: t + 14 })).steps, { x: 'b' });
  });

  it('bad input: the daemon names the step or value; an unknown option is refused before sending', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: t });
    await c.claimNext(q, 'A', 30, { now: t + 1 });
    const now = { now: t + 2 };
    await rejectsWith(c.stepSave(id, 'A', 1, '', 'v', now), 'invalid_argument', /step/);
    await rejectsWith(c.stepSave(id, 'A', 1, 's'.repeat(257), 'v', now), 'invalid_argument', /step/);
    assert.equal(await c.stepSave(id, 'A', 1, 's'.repeat(256), 'v', now), true);
    await rejectsWith(c.stepSave(id, 'A', 1, 7, 'v', now), 'bad_request', /step/);
    await rejectsWith(c.stepSave(id, 'A', 1, 'v', undefined, now), 'bad_request', /value/);
    await rejectsWith(c.stepSave(id, 'A', 1, 'v', { a: 1 }, now), 'bad_request', /value/);
    await rejectsWith(c.stepSave(id, 'A', 1, 'v', 'x'), 'invalid_argument', /now/); // client clock
    const { sent, restore } = recordRequests(c);
    await rejectsWith(c.stepSave(id, 'A', 1, 'v', 'x', { retryIn: 1 }), 'invalid_argument',
      /unknown step_save option 'retryIn'/);
    restore();
    assert.equal(sent.length, 0);
    assert.deepEqual(Object.keys((await c.job(id, now)).steps), ['s'.repeat(256)]);
  });

  it('C3.22 the per-job bounds: 64 steps, 256 KiB of values in all (invalid_argument, nothing saved)', async () => {
    const t = nextBase();
    const q = uniqueId('q');
    const id = uniqueId('o');
    await c.enqueue(id, { queue: q, now: t });
    await c.claimNext(q, 'A', 30, { now: t + 1 });
    const now = { now: t + 2 };
    assert.equal(await c.stepSave(id, 'A', 1, 'big', Buffer.alloc(200 * 1024, 1), now), true);
    await rejectsWith(c.stepSave(id, 'A', 1, 'more', Buffer.alloc(60 * 1024, 2), now), 'invalid_argument');
    for (let n = 1; n < 64; n++) assert.equal(await c.stepSave(id, 'A', 1, `s${n}`, null, now), true, `s${n}`);
    await rejectsWith(c.stepSave(id, 'A', 1, 's64', null, now), 'invalid_argument');
    const steps = (await c.job(id, now)).steps;
    assert.equal(Object.keys(steps).length, 64);
    assert.equal(steps.big.length, 200 * 1024);
    assert.ok(!('more' in steps) && !('s64' in steps));
  });
});

describe('job.step in the worker helpers', () => {
  let c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [, c, other] = f; });

  it('the story: charge then a failing email; the retry skips charge, runs email again and completes', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('order');
    await c.enqueue(id, { queue: q, payload: 'order-7', now: clock.t });
    const calls = { charge: 0, email: 0 };
    let smtpUp = false;
    const handler = async (job) => {
      const charge = await job.step('charge', async () => {
        calls.charge += 1;
        return `ch_${job.payload}`;
      });
      await job.step('email', async () => {
        calls.email += 1;
        if (!smtpUp) throw new Error('smtp down');
        return null;
      });
      return `done ${charge}`;
    };
    await assert.rejects(c.workNext(q, 'w', 60, handler, { wait: 0, clock: clock.now, retryIn: 0 }),
      /smtp down/);
    let row = await c.job(id, { now: clock.t });
    assert.deepEqual([row.state, row.attempts, row.error], ['ready', 1, 'smtp down']);
    assert.deepEqual(row.steps, { charge: 'ch_order-7' }); // email threw: nothing saved for it
    assert.deepEqual(calls, { charge: 1, email: 1 });

    smtpUp = true;
    clock.t += 1;
    const outcome = await c.workNext(q, 'w', 60, handler, { wait: 0, clock: clock.now });
    assert.deepEqual(outcome, { id, fence: 2, attempts: 2, completed: true, result: 'done ch_order-7' });
    assert.deepEqual(calls, { charge: 1, email: 2 }); // charge ran exactly once across both attempts
    row = await c.job(id, { now: clock.t });
    assert.equal(row.state, 'done');
    assert.deepEqual(row.steps, { charge: 'ch_order-7', email: null });
  });

  it('a stalled attempt: B took the job and saved charge; A\'s late step fails with lease_lost, B\'s value stays',
    async () => {
      const clock = clockFrom(nextBase());
      const q = uniqueId('q');
      const id = uniqueId('stall');
      await c.enqueue(id, { queue: q, now: clock.t });
      const logged = [];
      const warn = console.warn;
      let aAfter = false;
      let aSignal = null;
      const aCharge = { calls: 0 };
      console.warn = (m) => logged.push(m);
      let aOutcome;
      try {
        aOutcome = c.workNext(q, 'A', 10, async (job) => {
          aSignal = job.signal;
          // A stalls past its lease; B claims the job and saves charge.
          clock.t += 11;
          const b = await other.workNext(q, 'B', 30, async (bJob) => {
            assert.equal(bJob.fence, 2);
            return bJob.step('charge', () => 'ch_B');
          }, { wait: 0, clock: clock.now });
          assert.deepEqual(b, { id, fence: 2, attempts: 2, completed: true, result: 'ch_B' });
          await job.step('charge', () => {
            aCharge.calls += 1; // A cannot know B saved it: its side effect runs, its save is refused
            return 'ch_A';
          });
          aAfter = true;
          return 'A done';
        }, { wait: 0, clock: clock.now });
        await rejectsWith(aOutcome, 'lease_lost', /step 'charge' was not saved/);
      } finally {
        console.warn = warn;
      }
      assert.equal(aAfter, false, 'nothing after the refused step ran');
      assert.equal(aCharge.calls, 1);
      assert.ok(aSignal.aborted);
      assert.equal(aSignal.reason.code, 'lease_lost');
      assert.ok(logged.some((m) => m.includes("step_save of 'charge' was refused")), logged.join('\n'));
      const row = await c.job(id, { now: clock.t });
      assert.deepEqual([row.state, row.fence, row.result], ['done', 2, 'ch_B']);
      assert.deepEqual(row.steps, { charge: 'ch_B' });
    });

  it('a step after the lease is known lost rejects with lease_lost and does not call its function', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('lost');
    await c.enqueue(id, { queue: q, now: clock.t });
    const ran = [];
    const warn = console.warn;
    console.warn = () => {};
    try {
      await rejectsWith(c.workNext(q, 'A', 10, async (job) => {
        assert.equal(await other.cancel(id, { now: clock.t }), true);
        await rejectsWith(job.step('one', () => { ran.push('one'); return '1'; }), 'lease_lost');
        return job.step('two', () => { ran.push('two'); return '2'; });
      }, { wait: 0, clock: clock.now }), 'lease_lost');
    } finally {
      console.warn = warn;
    }
    assert.deepEqual(ran, ['one']);
    const row = await c.job(id, { now: clock.t });
    assert.equal(row.state, 'cancelled');
    assert.equal(row.steps, undefined);
  });

  it('values: bin comes back a Buffer, undefined is saved as null, a non-payload is refused unsaved', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('vals');
    await c.enqueue(id, { queue: q, now: clock.t });
    const seen = [];
    const handler = async (job) => {
      seen.push({ ...(job.steps ?? {}) });
      const bin = await job.step('bin', () => new Uint8Array([1, 2, 3]));
      assert.ok(Buffer.isBuffer(bin));
      assert.deepEqual([...bin], [1, 2, 3]);
      assert.equal(await job.step('none', () => {}), null);
      assert.equal(await job.step('text', async () => 'abc'), 'abc');
      await rejectsWith(job.step('num', () => 42), 'invalid_argument', /a step's value is/);
      await rejectsWith(job.step('', () => 'x'), 'invalid_argument', /name/);
      await rejectsWith(job.step('nofn'), 'invalid_argument', /fn/);
      assert.deepEqual(job.steps, { bin: Buffer.from([1, 2, 3]), none: null, text: 'abc' });
      if (job.attempts === 1) throw new Error('again');
      return 'ok';
    };
    await assert.rejects(c.workNext(q, 'w', 60, handler, { wait: 0, clock: clock.now, retryIn: 0 }), /again/);
    const outcome = await c.workNext(q, 'w', 60, handler, { wait: 0, clock: clock.now });
    assert.equal(outcome.completed, true);
    assert.deepEqual(seen, [{}, { bin: Buffer.from([1, 2, 3]), none: null, text: 'abc' }]);
    assert.deepEqual((await c.job(id, { now: clock.t })).steps,
      { bin: Buffer.from([1, 2, 3]), none: null, text: 'abc' });
  });

  it('two calls of one step at once share one run of its function', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const id = uniqueId('twice');
    await c.enqueue(id, { queue: q, now: clock.t });
    let runs = 0;
    const outcome = await c.workNext(q, 'w', 60, async (job) => {
      const fn = async () => {
        runs += 1;
        await new Promise((resolve) => { setTimeout(resolve, 20); });
        return `run ${runs}`;
      };
      const [a, b] = await Promise.all([job.step('s', fn), job.step('s', fn)]);
      assert.equal(a, b);
      return a;
    }, { wait: 0, clock: clock.now });
    assert.deepEqual([outcome.completed, outcome.result, runs], [true, 'run 1', 1]);
  });

  it('takeNext: the next job carries its steps, and its step skips what an earlier attempt saved', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const [a, b] = [`${q}-a`, `${q}-b`];
    await c.enqueueMany([{ id: a, queue: q, priority: 2 }, { id: b, queue: q, priority: 1 }], { now: clock.t });
    // b's first attempt saves a step and is released.
    assert.equal(await c.claim(b, 'x', 30, { now: clock.t }), 1);
    assert.equal(await c.stepSave(b, 'x', 1, 'fetch', 'from-x', { now: clock.t }), true);
    assert.equal(await c.release(b, 'x', 1), true);
    let fetched = 0;
    const fn = async (job) => job.step('fetch', () => { fetched += 1; return `from-${job.id}`; });
    const first = await c.workNext(q, 'w', 60, fn, { wait: 0, clock: clock.now, takeNext: true });
    assert.deepEqual([first.id, first.result, first.next.id, first.next.steps], [a, `from-${a}`, b, { fetch: 'from-x' }]);
    const second = await c.workNext(q, 'w', 60, fn, { clock: clock.now, takeNext: true, job: first.next });
    assert.deepEqual([second.id, second.completed, second.result, second.next], [b, true, 'from-x', null]);
    assert.equal(fetched, 1);
  });

  it('work (a job by id): the first step reads the saved steps with job', async () => {
    const clock = clockFrom(nextBase());
    const id = uniqueId('by-id');
    await c.enqueue(id, { now: clock.t });
    const calls = [];
    const fn = async (job) => {
      const one = await job.step('one', () => { calls.push(`one@${job.fence}`); return `1@${job.fence}`; });
      const two = await job.step('two', () => { calls.push(`two@${job.fence}`); return `2@${job.fence}`; });
      if (job.fence === 1) throw new Error('first attempt fails');
      return `${one} ${two}`;
    };
    await assert.rejects(c.work(id, 'w', 60, fn, { clock: clock.now }), /first attempt fails/);
    const { sent, restore } = recordRequests(c);
    let outcome;
    try {
      outcome = await c.work(id, 'w', 60, fn, { clock: clock.now });
    } finally {
      restore();
    }
    assert.deepEqual(outcome, { fence: 2, completed: true, result: '1@1 2@1' });
    assert.deepEqual(calls, ['one@1', 'two@1']);
    assert.deepEqual(sent.map(([op]) => op), ['claim', 'job', 'complete']); // one read, no save
  });

  it('prefetch: a job whose step save is refused is lost alone; the others complete', async () => {
    const clock = clockFrom(nextBase());
    const q = uniqueId('q');
    const all = ['a', 'b', 'c'].map((x) => `${q}-${x}`);
    await c.enqueueMany(all.map((id) => ({ id, queue: q })), { now: clock.t });
    const logged = [];
    const round = await c.workNext(q, 'w', 60, async (job) => {
      if (job.id === all[1]) assert.equal(await other.cancel(job.id, { now: clock.t }), true);
      const v = await job.step('s', () => `s-${job.id}`);
      return v;
    }, { wait: 0, clock: clock.now, prefetch: 3, log: (m) => logged.push(m) });
    assert.deepEqual(round.outcomes.map((o) => [o.id, o.status, o.completed]), [
      [all[0], 'completed', true],
      [all[1], 'lost', false],
      [all[2], 'completed', true],
    ]);
    assert.ok(round.outcomes[1].error instanceof FenceqError && round.outcomes[1].error.code === 'lease_lost');
    assert.ok(logged.some((m) => m.includes(all[1]) && m.includes("step_save of 's' was refused")), logged.join('\n'));
    assert.deepEqual((await c.job(all[0], { now: clock.t })).steps, { s: `s-${all[0]}` });
    assert.equal((await c.job(all[1], { now: clock.t })).steps, undefined);
  });
});
