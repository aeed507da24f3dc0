'use strict';

// Queue control (issue 18) through the Node client, against a real fenceqd:
// the fenced cancel, and progress on renew and renewMany.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { work } = require('../lib/worker');
const { withDaemon, rejectsWith, uniqueId, sleep } = require('./helpers');

describe('queue control', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('cancel: the holder\'s renew, complete, fail and check are refused; retry revives it', async () => {
    const id = uniqueId('cancel');
    const q = uniqueId('q');
    assert.equal(await c.enqueue(id, { queue: q, now: 10 }), true);
    const job = await c.claimNext(q, 'w', 100, { now: 10 });
    assert.equal(job.fence, 1);
    assert.equal(await c.cancel(id), true);
    assert.equal(await c.cancel(id), false);
    assert.equal(await c.renew(id, 'w', 1, 100, { now: 11 }), false);
    assert.equal(await c.complete(id, 'w', 1, 'late', { now: 11 }), false);
    assert.equal(await c.fail(id, 'w', 1, 'late', { now: 11 }), false);
    assert.equal(await c.check(id, 'w', 1, { now: 11 }), false);
    assert.deepEqual(await c.state(id), { id, owner: null, until: 0, fence: 2, result: null, done: false });
    const rows = await c.list({ queue: q, state: 'cancelled' });
    assert.deepEqual(rows.map((r) => r.id), [id]);
    assert.equal((await c.stats()).queues[q].cancelled, 1);
    assert.equal(await c.claimNext(q, 'v', 10, { now: 500 }), null);
    assert.equal(await c.retry(id), true);
    assert.equal((await c.claimNext(q, 'v', 10, { now: 500 })).fence, 3);
    assert.equal(await c.cancel(uniqueId('missing')), false);
    await rejectsWith(c.cancel('x'.repeat(1025)), 'invalid_argument');
  });

  it('progress: kept with the lease, shown by state and list, a stale renew stores nothing', async () => {
    const id = uniqueId('progress');
    assert.equal(await c.enqueue(id, { now: 1000 }), true);
    const fence = await c.claim(id, 'w', 10, { now: 1000 });
    assert.equal('progress' in await c.state(id), false);
    assert.equal(await c.renew(id, 'w', fence, 10, { now: 1001, progress: '1/2' }), true);
    assert.equal((await c.state(id)).progress, '1/2');
    assert.equal(await c.renew(id, 'w', fence + 1, 10, { now: 1002, progress: 'stale' }), false);
    assert.equal((await c.state(id)).progress, '1/2');
    assert.deepEqual(await c.renewMany([{ id, owner: 'w', fence, progress: '2/2' }], 10, { now: 1002 }), [true]);
    assert.equal((await c.state(id)).progress, '2/2');
    const [row] = (await c.list({ state: 'leased' })).filter((r) => r.id === id);
    assert.equal(row.progress, '2/2');
    await rejectsWith(c.renew(id, 'w', fence, 10, { now: 1003, progress: 'x'.repeat(4097) }),
      'invalid_argument');
    assert.equal((await c.state(id)).until, 1012);
  });

  it('work(): a cancelled job\'s renew is refused, the worker aborts and says so', async () => {
    const id = uniqueId('work');
    assert.equal(await c.enqueue(id), true);
    const logged = [];
    let aborted = false;
    const running = work(c, id, 'w', 0.6, async ({ signal }) => {
      while (!signal.aborted) await sleep(20);
      aborted = true;
      return 'never stored';
    }, { clock: () => Date.now() / 1000, renewEveryMs: 100, log: (m) => logged.push(m) });
    await sleep(150);
    assert.equal(await c.cancel(id), true);
    const outcome = await running;
    assert.equal(aborted, true);
    assert.equal(outcome.completed, false);
    assert.equal((await c.state(id)).result, null);
    assert.ok(logged.some((m) => m.includes('refused (cancelled')), logged.join('\n'));
  });
});
