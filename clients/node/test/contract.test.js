'use strict';

// Contract C2 and C3 through the Node client, against a real fenceqd over ipc.
// Client clock mode makes every lease boundary exact; the server clock suite
// checks the same story with real time.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { withDaemon, rejectsWith, uniqueId, sleep } = require('./helpers');

describe('client clock (C2.2)', () => {
  let daemon, c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [daemon, c] = f; });

  /** A job enqueued and claimed by `owner` at now=100 with ttl 10: until 110, fence 1. */
  async function leased(owner = 'w1') {
    const id = uniqueId();
    assert.equal(await c.enqueue(id), true);
    assert.equal(await c.claim(id, owner, 10, { now: 100 }), 1);
    return id;
  }

  it('ping reports protocol 1 and the client clock', async () => {
    const info = await c.ping();
    assert.equal(info.protocol, 1);
    assert.equal(typeof info.version, 'string');
    assert.equal(info.clock, 'client');
    assert.equal(info.ops, undefined);
  });

  it('ping({describe: true}) answers each op\'s fields; a field no op has is refused (issue 57)', async () => {
    const { ops } = await c.ping({ describe: true });
    assert.ok(ops.enqueue.includes('after') && ops.enqueue_many.includes('jobs[].after'));
    assert.ok(ops.enqueue.includes('deadline')); // issue 60 (C3.24)
    assert.ok(!ops.enqueue.includes('visible_after'));
    await rejectsWith(c.request('enqueue', { id: uniqueId(), visible_after: 5 }), 'invalid_argument', /visible_after/);
    await rejectsWith(c.ping({ describe: 1 }), 'invalid_argument', /describe/);
  });

  it('C3.1 enqueue answers true once, then false', async () => {
    const id = uniqueId();
    assert.equal(await c.enqueue(id), true);
    assert.equal(await c.enqueue(id), false);
  });

  it('C3.1 a repeated enqueue keeps the lease in progress', async () => {
    const id = await leased('w1');
    assert.equal(await c.enqueue(id), false);
    assert.deepEqual(await c.state(id),
      { id, owner: 'w1', until: 110, fence: 1, result: null, done: false });
  });

  it('C3.2 state of a new job is the default row', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    assert.deepEqual(await c.state(id),
      { id, owner: null, until: 0, fence: 0, result: null, done: false });
  });

  it('C3.2 state of a missing id is null', async () => {
    assert.equal(await c.state(uniqueId('missing')), null);
  });

  it('C3.2 ids are UTF-8 strings, kept exactly', async () => {
    const id = `${uniqueId()}-żółw-🐢`;
    assert.equal(await c.enqueue(id), true);
    assert.equal((await c.state(id)).id, id);
  });

  it('C3.3 claim answers the new fence and stores owner and until', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    assert.equal(await c.claim(id, 'w1', 10, { now: 100 }), 1);
    assert.deepEqual(await c.state(id),
      { id, owner: 'w1', until: 110, fence: 1, result: null, done: false });
  });

  it('C3.3 claim of a missing job is null', async () => {
    assert.equal(await c.claim(uniqueId('missing'), 'w1', 10, { now: 100 }), null);
  });

  it('C3.3 claim of a leased job is null and changes nothing (C3.8)', async () => {
    const id = await leased('w1');
    const before = await c.state(id);
    assert.equal(await c.claim(id, 'w2', 10, { now: 105 }), null);
    assert.equal(await c.claim(id, 'w1', 10, { now: 109.999 }), null);
    assert.deepEqual(await c.state(id), before);
  });

  it('C3.3 at the boundary now == until the job can be claimed again', async () => {
    const id = await leased('w1');
    assert.equal(await c.claim(id, 'w2', 10, { now: 110 }), 2);
    assert.deepEqual(await c.state(id),
      { id, owner: 'w2', until: 120, fence: 2, result: null, done: false });
  });

  it('C3.3 claim of a done job is null', async () => {
    const id = await leased('w1');
    assert.equal(await c.complete(id, 'w1', 1, 'r', { now: 101 }), true);
    assert.equal(await c.claim(id, 'w2', 10, { now: 1000 }), null);
    assert.equal((await c.state(id)).fence, 1);
  });

  it('C3.3 ttl <= 0 is invalid_argument and changes nothing (C3.8)', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    for (const ttl of [0, -1, -0.5]) {
      await rejectsWith(c.claim(id, 'w1', ttl, { now: 100 }), 'invalid_argument', /ttl/);
    }
    assert.deepEqual(await c.state(id),
      { id, owner: null, until: 0, fence: 0, result: null, done: false });
  });

  it('C2.1 C3.3 fractional ttl and now are seconds as floats', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    assert.equal(await c.claim(id, 'w1', 0.5, { now: 100.25 }), 1);
    assert.equal((await c.state(id)).until, 100.75);
  });

  it('C2.2 now is used verbatim', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    assert.equal(await c.claim(id, 'w1', 1, { now: 1_000_000_000.125 }), 1);
    assert.equal((await c.state(id)).until, 1_000_000_001.125);
  });

  it('C2.2 a claim without now is invalid_argument in client clock mode', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    await rejectsWith(c.claim(id, 'w1', 10), 'invalid_argument', /now/);
    assert.equal((await c.state(id)).fence, 0);
  });

  it('C3.4 renew extends a current lease to now + ttl', async () => {
    const id = await leased('w1');
    assert.equal(await c.renew(id, 'w1', 1, 30, { now: 105 }), true);
    assert.equal((await c.state(id)).until, 135);
  });

  it('C3.4 renew refuses a wrong owner, a wrong fence, an expired lease and a done job', async () => {
    const id = await leased('w1');
    const before = await c.state(id);
    assert.equal(await c.renew(id, 'w2', 1, 10, { now: 105 }), false);
    assert.equal(await c.renew(id, 'w1', 2, 10, { now: 105 }), false);
    assert.equal(await c.renew(id, 'w1', 0, 10, { now: 105 }), false);
    assert.equal(await c.renew(uniqueId('missing'), 'w1', 1, 10, { now: 105 }), false);
    assert.deepEqual(await c.state(id), before);

    const done = await leased('w1');
    assert.equal(await c.complete(done, 'w1', 1, null, { now: 101 }), true);
    assert.equal(await c.renew(done, 'w1', 1, 10, { now: 102 }), false);
  });

  it('C3.4 an expired lease is never revived, not even at now == until', async () => {
    const id = await leased('w1');
    assert.equal(await c.renew(id, 'w1', 1, 10, { now: 110 }), false);
    assert.equal(await c.renew(id, 'w1', 1, 10, { now: 111 }), false);
    assert.equal((await c.state(id)).until, 110);
  });

  it('C3.4 renew with ttl <= 0 is invalid_argument and changes nothing', async () => {
    const id = await leased('w1');
    await rejectsWith(c.renew(id, 'w1', 1, 0, { now: 105 }), 'invalid_argument', /ttl/);
    await rejectsWith(c.renew(id, 'w1', 1, -3, { now: 105 }), 'invalid_argument', /ttl/);
    assert.equal((await c.state(id)).until, 110);
  });

  it('C3.5 complete under a current lease stores the result', async () => {
    const id = await leased('w1');
    assert.equal(await c.complete(id, 'w1', 1, 'the answer', { now: 109 }), true);
    assert.deepEqual(await c.state(id),
      { id, owner: 'w1', until: 110, fence: 1, result: 'the answer', done: true });
  });

  it('C3.5 complete with a null result marks the job done', async () => {
    const id = await leased('w1');
    assert.equal(await c.complete(id, 'w1', 1, null, { now: 101 }), true);
    const row = await c.state(id);
    assert.equal(row.done, true);
    assert.equal(row.result, null);
  });

  it('C3.5 complete refuses a wrong owner, a wrong fence and an expired lease', async () => {
    const id = await leased('w1');
    assert.equal(await c.complete(id, 'w2', 1, 'x', { now: 105 }), false);
    assert.equal(await c.complete(id, 'w1', 2, 'x', { now: 105 }), false);
    assert.equal(await c.complete(id, 'w1', 1, 'x', { now: 110 }), false);
    assert.equal(await c.complete(uniqueId('missing'), 'w1', 1, 'x', { now: 105 }), false);
    assert.deepEqual(await c.state(id),
      { id, owner: 'w1', until: 110, fence: 1, result: null, done: false });
  });

  it('C3.5 stale complete keeps result', async () => {
    const id = await leased('w1');
    assert.equal(await c.complete(id, 'w1', 1, 'first', { now: 101 }), true);
    assert.equal(await c.complete(id, 'w1', 1, 'second', { now: 102 }), false);
    assert.equal((await c.state(id)).result, 'first');
  });

  it('C3.6 release drops the lease, keeps the fence, and the next claim goes on from it (C1.2)', async () => {
    const id = await leased('w1');
    assert.equal(await c.release(id, 'w1', 1), true);
    assert.deepEqual(await c.state(id),
      { id, owner: null, until: 0, fence: 1, result: null, done: false });
    assert.equal(await c.claim(id, 'w2', 10, { now: 101 }), 2);
  });

  it('C3.6 release refuses a wrong owner, a wrong fence, a released lease and a done job', async () => {
    const id = await leased('w1');
    assert.equal(await c.release(id, 'w2', 1), false);
    assert.equal(await c.release(id, 'w1', 2), false);
    assert.equal(await c.release(uniqueId('missing'), 'w1', 1), false);
    assert.equal((await c.state(id)).owner, 'w1');

    const done = await leased('w1');
    assert.equal(await c.complete(done, 'w1', 1, 'r', { now: 101 }), true);
    assert.equal(await c.release(done, 'w1', 1), false);
    assert.deepEqual(await c.state(done),
      { id: done, owner: 'w1', until: 110, fence: 1, result: 'r', done: true });
  });

  it('C1.2 a repeated enqueue after a release does not reset the fence', async () => {
    const id = await leased('w1');
    assert.equal(await c.release(id, 'w1', 1), true);
    assert.equal(await c.enqueue(id), false);
    assert.equal((await c.state(id)).fence, 1);
  });

  it('stale-worker story: the late write of an expired lease is refused (C3.3-C3.5)', async () => {
    const id = uniqueId('story');
    await c.enqueue(id);
    // A claims and stalls.
    const fenceA = await c.claim(id, 'A', 10, { now: 100 });
    assert.equal(fenceA, 1);
    // A's lease ends; B claims the same job and completes it.
    assert.equal(await c.claim(id, 'B', 10, { now: 105 }), null);
    const fenceB = await c.claim(id, 'B', 10, { now: 111 });
    assert.equal(fenceB, 2);
    assert.equal(await c.renew(id, 'B', fenceB, 10, { now: 115 }), true);
    assert.equal(await c.complete(id, 'B', fenceB, 'B did it', { now: 120 }), true);
    // A wakes up: every write it tries is refused, even with a "current" now.
    assert.equal(await c.renew(id, 'A', fenceA, 10, { now: 121 }), false);
    assert.equal(await c.complete(id, 'A', fenceA, 'A did it', { now: 109 }), false);
    assert.equal(await c.release(id, 'A', fenceA), false);
    assert.deepEqual(await c.state(id),
      { id, owner: 'B', until: 125, fence: 2, result: 'B did it', done: true });
  });
});

describe('server clock (C2.3)', () => {
  let daemon, c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [daemon, c] = f; });

  it('ping reports the server clock', async () => {
    assert.equal((await c.ping()).clock, 'server');
  });

  it('C2.3 a request that carries now is invalid_argument and changes nothing', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    await rejectsWith(c.claim(id, 'w1', 10, { now: 100 }), 'invalid_argument', /now/);
    assert.equal((await c.state(id)).fence, 0);
    const fence = await c.claim(id, 'w1', 10);
    await rejectsWith(c.renew(id, 'w1', fence, 10, { now: 100 }), 'invalid_argument', /now/);
    await rejectsWith(c.complete(id, 'w1', fence, 'x', { now: 100 }), 'invalid_argument', /now/);
    const row = await c.state(id);
    assert.equal(row.done, false);
    assert.equal(row.result, null);
  });

  it('C2.3 now: null or undefined means no now, and is not sent', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    assert.equal(await c.claim(id, 'w1', 30, { now: undefined }), 1);
    assert.equal(await c.renew(id, 'w1', 1, 30, { now: null }), true);
    assert.equal(await c.complete(id, 'w1', 1, 'ok', { now: null }), true);
  });

  it('C2.3 C3.3 until is the server time plus ttl', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    const t0 = Date.now() / 1000;
    assert.equal(await c.claim(id, 'w1', 30), 1);
    const t1 = Date.now() / 1000;
    const { until } = await c.state(id);
    // Wall clock made non-decreasing: close to ours, give or take a second.
    assert.ok(until >= t0 + 30 - 1 && until <= t1 + 30 + 1, `until ${until} vs now ${t0}`);
  });

  it('C3.3-C3.5 claim, renew and complete work without now', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    const fence = await c.claim(id, 'w1', 30);
    assert.equal(fence, 1);
    assert.equal(await c.claim(id, 'w2', 30), null);
    assert.equal(await c.renew(id, 'w1', fence, 60), true);
    assert.equal(await c.complete(id, 'w1', fence, 'ok'), true);
    assert.equal((await c.state(id)).result, 'ok');
  });

  it('stale-worker story against the wall clock (C3.3-C3.5)', async () => {
    const id = uniqueId('story');
    await c.enqueue(id);
    const fenceA = await c.claim(id, 'A', 0.2);
    assert.equal(fenceA, 1);
    await sleep(400); // A stalls past its lease
    const fenceB = await c.claim(id, 'B', 30);
    assert.equal(fenceB, 2);
    assert.equal(await c.complete(id, 'B', fenceB, 'B did it'), true);
    assert.equal(await c.renew(id, 'A', fenceA, 30), false);
    assert.equal(await c.complete(id, 'A', fenceA, 'A did it'), false);
    assert.equal(await c.release(id, 'A', fenceA), false);
    const row = await c.state(id);
    assert.equal(row.result, 'B did it');
    assert.equal(row.fence, 2);
    assert.equal(row.done, true);
  });
});
