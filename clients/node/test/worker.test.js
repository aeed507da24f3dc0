'use strict';

// Client#work: claim, renew while the job runs, complete with the fence,
// release on throw. Against a real daemon, with real and with simulated time.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { FenceqError } = require('fenceq');
const { withDaemon, rejectsWith, uniqueId, sleep } = require('./helpers');

describe('work() with the server clock', () => {
  let daemon, c, other;
  withDaemon({ clock: 'server' }, 2, (...f) => { [daemon, c, other] = f; });

  it('C3.4 renews while a job outlives its ttl, then C3.5 completes with the fence', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    const seen = [];
    const outcome = await c.work(id, 'w1', 1, async (job) => {
      assert.equal(job.id, id);
      assert.equal(job.owner, 'w1');
      assert.equal(job.fence, 1);
      // Well past the first ttl: only renewals keep the lease ours.
      for (let i = 0; i < 4; i++) {
        await sleep(350);
        seen.push(await other.claim(id, 'thief', 10));
      }
      assert.equal(job.signal.aborted, false);
      return 'done';
    });
    assert.deepEqual(seen, [null, null, null, null]);
    assert.deepEqual(outcome, { fence: 1, completed: true, result: 'done' });
    const row = await c.state(id);
    assert.equal(row.done, true);
    assert.equal(row.result, 'done');
    assert.equal(row.owner, 'w1');
  });

  it('C3.6 releases the lease when the job throws, and rethrows', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    const boom = new Error('job failed');
    await assert.rejects(c.work(id, 'w1', 30, async () => {
      throw boom;
    }), (err) => err === boom);
    assert.deepEqual(await c.state(id),
      { id, owner: null, until: 0, fence: 1, result: null, done: false });
    // Free again, and the fence goes on from 1 (C1.2).
    const outcome = await c.work(id, 'w2', 30, ({ fence }) => `fence ${fence}`);
    assert.deepEqual(outcome, { fence: 2, completed: true, result: 'fence 2' });
  });

  it('C3.3 a refused claim resolves null and never runs the job', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    assert.equal(await other.claim(id, 'holder', 30), 1);
    let ran = false;
    assert.equal(await c.work(id, 'w1', 30, () => { ran = true; }), null);
    assert.equal(await c.work(uniqueId('missing'), 'w1', 30, () => { ran = true; }), null);
    assert.equal(ran, false);
  });

  it('C3.3 a bad ttl rejects before the job runs', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    let ran = false;
    await rejectsWith(c.work(id, 'w1', 0, () => { ran = true; }), 'invalid_argument', /ttl/);
    assert.equal(ran, false);
  });

  it('a result the protocol cannot carry fails the job and releases the lease', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    await rejectsWith(c.work(id, 'w1', 30, () => ({ not: 'a string' })), 'bad_request', /result/);
    const row = await c.state(id);
    assert.equal(row.owner, null);
    assert.equal(row.done, false);
  });
});

describe('work() with the client clock', () => {
  let daemon, c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [daemon, c] = f; });

  it('stale-worker story: a lost lease aborts the job and its result is not stored (C3.4, C3.5)', async () => {
    const id = uniqueId('story');
    await c.enqueue(id);
    let t = 100;
    const clock = () => t;
    const outcome = await c.work(id, 'A', 10, async ({ fence, signal }) => {
      assert.equal(fence, 1);
      // A stalls past its lease; B takes the job over and completes it.
      t = 111;
      assert.equal(await c.claim(id, 'B', 10, { now: t }), 2);
      assert.equal(await c.complete(id, 'B', 2, 'B did it', { now: t }), true);
      // A's next renew is refused: its signal says so.
      for (let i = 0; i < 100 && !signal.aborted; i++) await sleep(20);
      assert.equal(signal.aborted, true);
      assert.ok(signal.reason instanceof FenceqError);
      assert.equal(signal.reason.code, 'lease_lost');
      return 'A did it';
    }, { clock, renewEveryMs: 20 });
    assert.deepEqual(outcome, { fence: 1, completed: false, result: 'A did it' });
    const row = await c.state(id);
    assert.equal(row.result, 'B did it');
    assert.equal(row.fence, 2);
  });

  it('C2.2 renewals and complete carry the clock\'s now', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    let t = 1000;
    const outcome = await c.work(id, 'w1', 5, async () => {
      t = 1004; // inside the lease: the renewals move until to 1009
      await sleep(100);
      t = 1008; // past the first until (1005), inside the renewed one
      return 'ok';
    }, { clock: () => t, renewEveryMs: 20 });
    assert.deepEqual(outcome, { fence: 1, completed: true, result: 'ok' });
    assert.equal((await c.state(id)).until, 1009);
  });

  it('C2.2 without a clock the claim is refused with invalid_argument', async () => {
    const id = uniqueId('work');
    await c.enqueue(id);
    await rejectsWith(c.work(id, 'w1', 5, () => 'never'), 'invalid_argument', /now/);
  });
});
