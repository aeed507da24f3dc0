'use strict';

// Jobs that wait for jobs (issue 32): enqueue's and enqueueMany entries'
// `after` and `afterFailure`, the 'blocked' state in job, list and stats,
// enqueueFanIn, and the parents a claimed job and job carry (job also its
// blocked children), against a real client-clock fenceqd (SQLite). Each test
// takes its own stretch of time from epoch() and its own queue.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const { withDaemon, rejectsWith, recordRequests, uniqueId, withFakeDaemon } = require('./helpers');

let clockBase = 0;
/** A start time later than any `now` an earlier test of this file used. */
function epoch() {
  clockBase += 100000;
  return clockBase;
}

describe('after: jobs that wait for jobs', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  async function stateOf(id, now) {
    return (await c.job(id, { now })).state;
  }

  async function finish(id, result, now) {
    const fence = await c.claim(id, 'w', 30, { now });
    assert.notEqual(fence, null, `${id} is not claimable at ${now}`);
    assert.equal(await c.complete(id, 'w', fence, result, { now }), true);
  }

  it('sends after and afterFailure only when given, after group, as the C++ encoder writes them', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [p, a, b, d, e] = ['p', 'a', 'b', 'd', 'e'].map((n) => uniqueId(n));
    assert.equal(await c.enqueue(p, { queue: q, now: t }), true);
    const { sent, restore } = recordRequests(c);
    try {
      assert.equal(await c.enqueue(a, { now: t, afterFailure: 'run', after: [p], group: 'g', queue: q }), true);
      assert.deepEqual(await c.enqueue(b, { queue: q, key: 'k', after: [p], now: t }), { id: b, created: true });
      assert.equal(await c.enqueue(uniqueId('plain'), { queue: q, now: t }), true);
      assert.deepEqual(await c.enqueueMany([{ afterFailure: 'cancel', after: [p], id: d },
        { id: e, after: [p, d] }], { now: t }), [true, true]);
    } finally {
      restore();
    }
    assert.deepEqual(Object.keys(sent[0][1]), ['id', 'queue', 'group', 'after', 'after_failure', 'now']);
    assert.deepEqual(sent[0][1].after, [p]);
    assert.equal(sent[0][1].after_failure, 'run');
    assert.deepEqual(Object.keys(sent[1][1]), ['id', 'queue', 'key', 'after', 'now']);
    assert.deepEqual(Object.keys(sent[2][1]), ['id', 'queue', 'now']);
    assert.deepEqual(sent[3][1].jobs, [{ id: d, after: [p], after_failure: 'cancel' }, { id: e, after: [p, d] }]);
    assert.deepEqual(Object.keys(sent[3][1].jobs[0]), ['id', 'after', 'after_failure']);
    // The wire spelling is refused before anything is sent.
    await rejectsWith(c.enqueue(uniqueId('x'), { after: [p], after_failure: 'run' }), 'invalid_argument',
      /unknown enqueue option 'after_failure'/);
    await rejectsWith(c.enqueueMany([{ id: uniqueId('x'), after_failure: 'run' }]), 'invalid_argument',
      /unknown key 'after_failure'/);
  });

  it('bad after values are the daemon\'s coded errors, and nothing is created', async () => {
    const t = epoch();
    const p = uniqueId('p');
    const x = uniqueId('x');
    assert.equal(await c.enqueue(p, { now: t }), true);
    for (const options of [{ after: [] }, { after: Array.from({ length: 1001 }, (_, i) => `p${i}`) },
      { after: [''] }, { after: [p, p] }, { after: [x] }, { afterFailure: 'run' },
      { after: [p], afterFailure: 'later' }]) {
      await rejectsWith(c.enqueue(x, { ...options, now: t }), 'invalid_argument');
    }
    for (const after of [p, [p, 7], { [p]: 1 }]) {
      await rejectsWith(c.enqueue(x, { after, now: t }), 'bad_request');
    }
    assert.equal(await c.job(x, { now: t }), null);
  });

  it('a child is blocked until both parents complete, then claimable', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [pa, pb, child] = [uniqueId('parent-a'), uniqueId('parent-b'), uniqueId('child')];
    assert.equal(await c.enqueue(pa, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(pb, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(child, { queue: q, after: [pa, pb], now: t }), true);

    assert.equal(await stateOf(child, t), 'blocked');
    assert.deepEqual((await c.list({ queue: q, state: 'blocked', now: t })).map((r) => r.id), [child]);
    assert.equal((await c.stats({ now: t })).queues[q].blocked, 1);
    assert.deepEqual(await c.results([child], { now: t }), { [child]: { state: 'blocked', result: null } });

    // Only the parents are handed out; the child is not claimable by id either.
    const parents = await c.claimNext(q, 'w', 30, { max: 10, now: t + 1 });
    assert.deepEqual(parents.map((j) => j.id).sort(), [pa, pb].sort());
    assert.equal(await c.claim(child, 'w', 30, { now: t + 1 }), null);
    assert.equal(await c.claimNext(q, 'w', 30, { now: t + 1 }), null);
    const fence = Object.fromEntries(parents.map((j) => [j.id, j.fence]));

    assert.equal(await c.complete(pa, 'w', fence[pa], 'A', { now: t + 2 }), true);
    assert.equal(await stateOf(child, t + 2), 'blocked');  // one parent is not enough
    assert.equal(await c.claimNext(q, 'w', 30, { now: t + 2 }), null);

    assert.equal(await c.complete(pb, 'w', fence[pb], 'B', { now: t + 3 }), true);
    assert.equal(await stateOf(child, t + 3), 'ready');
    assert.deepEqual(await c.list({ queue: q, state: 'blocked', now: t + 3 }), []);
    assert.equal('blocked' in (await c.stats({ now: t + 3 })).queues[q], false);  // only while some are
    const job = await c.claimNext(q, 'w', 30, { now: t + 4 });
    assert.equal(job.id, child);
    assert.deepEqual(await c.results([pa, pb], { now: t + 4 }), {
      [pa]: { state: 'done', result: 'A' },
      [pb]: { state: 'done', result: 'B' },
    });
  });

  it('a delay counts from the unblocking; an enqueueMany entry may wait for an earlier one', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [e1, e2, e3] = [uniqueId('e1'), uniqueId('e2'), uniqueId('e3')];
    assert.deepEqual(await c.enqueueMany([{ id: e1, queue: q }, { id: e2, queue: q, after: [e1], delay: 10 },
      { id: e3, queue: q, after: [e2] }], { now: t }), [true, true, true]);
    assert.equal((await c.stats({ now: t })).queues[q].blocked, 2);
    await finish(e1, 'one', t + 50);
    assert.deepEqual([await stateOf(e2, t + 50), await stateOf(e3, t + 50)], ['delayed', 'blocked']);
    assert.equal(await c.claimNext(q, 'w', 30, { now: t + 59 }), null);
    assert.equal((await c.claimNext(q, 'w', 30, { now: t + 60 })).id, e2);
  });

  it('an unknown parent is refused with invalid_argument and nothing is created', async () => {
    const t = epoch();
    const [known, orphan, b1, b2, b3] = ['known', 'orphan', 'b1', 'b2', 'b3'].map((n) => uniqueId(n));
    const nobody = uniqueId('nobody');
    assert.equal(await c.enqueue(known, { now: t }), true);
    await rejectsWith(c.enqueue(orphan, { after: [known, nobody], now: t }), 'invalid_argument',
      new RegExp(nobody));
    // In a batch the whole request is refused: not even the entries before it.
    await rejectsWith(c.enqueueMany([{ id: b1 }, { id: b2, after: [b1] }, { id: b3, after: [nobody] }],
      { now: t }), 'invalid_argument');
    // A parent must come earlier in the batch, not later.
    await rejectsWith(c.enqueueMany([{ id: b1, after: [b2] }, { id: b2 }], { now: t }), 'invalid_argument');
    await rejectsWith(c.enqueueFanIn([b1], { id: b2, after: [nobody] }, { now: t }), 'invalid_argument');
    assert.deepEqual(await c.results([orphan, b1, b2, b3], { now: t }),
      { [orphan]: null, [b1]: null, [b2]: null, [b3]: null });
  });

  it('a cancelled parent cancels a default child (and its blocked descendants) and frees a run child', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const id = Object.fromEntries(['parent', 'other', 'cancelChild', 'explicitChild', 'grandchild',
      'runGrandchild', 'runChild', 'runBoth'].map((n) => [n, uniqueId(n)]));
    assert.equal(await c.enqueue(id.parent, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(id.other, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(id.cancelChild, { queue: q, after: [id.parent], now: t }), true);
    assert.equal(await c.enqueue(id.explicitChild, { queue: q, after: [id.parent], afterFailure: 'cancel', now: t }),
      true);
    assert.equal(await c.enqueue(id.grandchild, { queue: q, after: [id.cancelChild], now: t }), true);
    assert.equal(await c.enqueue(id.runGrandchild, { queue: q, after: [id.cancelChild], afterFailure: 'run', now: t }),
      true);
    assert.equal(await c.enqueue(id.runChild, { queue: q, after: [id.parent], afterFailure: 'run', now: t }), true);
    assert.equal(await c.enqueue(id.runBoth, { queue: q, after: [id.parent, id.other], afterFailure: 'run', now: t }),
      true);
    assert.equal((await c.stats({ now: t })).queues[q].blocked, 6);

    assert.equal(await c.cancel(id.parent, { now: t + 1 }), true);

    const rows = Object.fromEntries((await c.list({ queue: q, now: t + 1 })).map((r) => [r.id, [r.state, r.error]]));
    assert.deepEqual(rows[id.cancelChild], ['cancelled', `parent ${id.parent} cancelled`]);
    assert.deepEqual(rows[id.explicitChild], ['cancelled', `parent ${id.parent} cancelled`]);
    assert.deepEqual(rows[id.grandchild], ['cancelled', `parent ${id.cancelChild} cancelled`]);
    assert.deepEqual(rows[id.runGrandchild], ['ready', null]);
    assert.deepEqual(rows[id.runChild], ['ready', null]);
    assert.deepEqual(rows[id.runBoth], ['blocked', null]);  // `other` still holds it back
    assert.equal((await c.stats({ now: t + 1 })).queues[q].blocked, 1);

    const claimed = await c.claimNext(q, 'w', 30, { max: 10, now: t + 2 });
    assert.deepEqual(claimed.map((j) => j.id).sort(), [id.other, id.runChild, id.runGrandchild].sort());
    assert.deepEqual(await c.results([id.parent], { now: t + 2 }),
      { [id.parent]: { state: 'cancelled', result: null } });
    const other = claimed.find((j) => j.id === id.other);
    assert.equal(await c.complete(id.other, 'w', other.fence, 'O', { now: t + 3 }), true);
    assert.equal(await stateOf(id.runBoth, t + 3), 'ready');
  });

  it('a dead parent cancels a default child with its reason; a run child goes on', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [fragile, after, regardless] = [uniqueId('fragile'), uniqueId('after'), uniqueId('regardless')];
    assert.equal(await c.enqueue(fragile, { queue: q, maxAttempts: 1, now: t }), true);
    assert.equal(await c.enqueue(after, { queue: q, after: [fragile], now: t }), true);
    assert.equal(await c.enqueue(regardless, { queue: q, after: [fragile], afterFailure: 'run', now: t }), true);
    const fence = await c.claim(fragile, 'w', 30, { now: t + 1 });
    assert.equal(await c.fail(fragile, 'w', fence, 'boom', { now: t + 2 }), true);
    assert.equal(await stateOf(fragile, t + 2), 'dead');
    const row = await c.job(after, { now: t + 2 });
    assert.deepEqual([row.state, row.error], ['cancelled', `parent ${fragile} dead`]);
    assert.equal((await c.claimNext(q, 'w', 30, { now: t + 3 })).id, regardless);
  });
});

describe('enqueueFanIn', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('is one request whose child waits for every part, then reads their results', async () => {
    const t = epoch();
    const q = uniqueId('fan');
    const ids = [0, 1, 2, 3].map((n) => uniqueId(`chunk-${n}`));
    const sum = uniqueId('sum');
    const parts = ids.map((id, n) => ({ id, payload: String(n) }));
    const { sent, restore } = recordRequests(c);
    let answer;
    try {
      answer = await c.enqueueFanIn(parts, { id: sum, payload: JSON.stringify(ids) }, { queue: q, now: t });
    } finally {
      restore();
    }
    assert.deepEqual(answer, [true, true, true, true, true]);
    assert.deepEqual(sent.map(([op]) => op), ['enqueue_many']);
    const { jobs, now } = sent[0][1];
    assert.equal(now, t);
    assert.deepEqual(jobs.map((j) => j.id), [...ids, sum]);
    assert.ok(jobs.every((j) => j.queue === q));
    assert.deepEqual(jobs[jobs.length - 1], { id: sum, queue: q, payload: JSON.stringify(ids), after: ids });
    assert.ok(jobs.slice(0, -1).every((j) => !('after' in j)));
    assert.equal((await c.job(sum, { now: t })).state, 'blocked');

    // Workers run the parts (in any order); the child waits for the last one.
    let now2 = t + 1;
    for (let i = 0; i < ids.length; i++) {
      const job = await c.claimNext(q, 'w', 30, { now: now2 });
      assert.ok(ids.includes(job.id));
      assert.equal((await c.job(sum, { now: now2 })).state, 'blocked');
      assert.equal(await c.complete(job.id, 'w', job.fence, String(Number(job.payload) ** 2), { now: now2 }), true);
      now2 += 1;
    }
    const child = await c.claimNext(q, 'w', 30, { now: now2 });
    assert.equal(child.id, sum);
    assert.deepEqual(child.after, [...ids].sort());   // its parents, in id order

    // The child reads its parents' results in one round trip.
    const parentIds = JSON.parse(child.payload);
    const results = await c.results(parentIds, { now: now2 });
    assert.deepEqual(parentIds.map((id) => results[id].state), ['done', 'done', 'done', 'done']);
    const total = parentIds.reduce((acc, id) => acc + Number(results[id].result), 0);
    assert.equal(total, 0 + 1 + 4 + 9);
    assert.equal(await c.complete(sum, 'w', child.fence, String(total), { now: now2 }), true);
  });

  it('keeps each job\'s own fields; bare ids; an existing part is waited for, not enqueued again', async () => {
    const t = epoch();
    const q = uniqueId('own');
    const [earlier, p1, p2, joined, p3, joined2] =
      ['earlier', 'p1', 'p2', 'joined', 'p3', 'joined2'].map((n) => uniqueId(n));
    assert.equal(await c.enqueue(earlier, { queue: q, now: t }), true);
    const { sent, restore } = recordRequests(c);
    try {
      assert.deepEqual(await c.enqueueFanIn([p1, { id: p2, queue: 'elsewhere', priority: 3 }],
        { id: joined, after: [earlier], afterFailure: 'run', group: 'g' }, { queue: q, now: t }), [true, true, true]);
    } finally {
      restore();
    }
    assert.deepEqual(sent[0][1].jobs, [{ id: p1, queue: q }, { id: p2, queue: 'elsewhere', priority: 3 },
      { id: joined, queue: q, group: 'g', after: [p1, p2, earlier], after_failure: 'run' }]);
    assert.deepEqual(await c.enqueueFanIn([p1, { id: p3 }], joined2, { now: t }), [false, true, true]);
    assert.equal((await c.job(joined2, { now: t })).state, 'blocked');
    // A keyed job answers {id, created}, as in enqueueMany.
    const [k1, k2] = [uniqueId('k1'), uniqueId('k2')];
    assert.deepEqual(await c.enqueueFanIn([{ id: k1, queue: q, key: 'k' }], k2, { now: t }),
      [{ id: k1, created: true }, true]);
  });

  it('refuses what it cannot read before sending; the daemon judges the rest', async () => {
    const { sent, restore } = recordRequests(c);
    try {
      await rejectsWith(c.enqueueFanIn([], 'c'), 'invalid_argument', /parts/);
      await rejectsWith(c.enqueueFanIn('p', 'c'), 'invalid_argument', /parts/);
      await rejectsWith(c.enqueueFanIn([{ queue: 'q' }], 'c'), 'invalid_argument', /parts\[0\]/);
      await rejectsWith(c.enqueueFanIn(['p'], 5), 'invalid_argument', /then/);
      await rejectsWith(c.enqueueFanIn(['p'], { id: 'c', after: 'other' }), 'invalid_argument', /then\.after/);
      await rejectsWith(c.enqueueFanIn([{ id: 'p', max_attempts: 2 }], 'c'), 'invalid_argument',
        /unknown key 'max_attempts'/);
      await rejectsWith(c.enqueueFanIn(['p'], 'c', { wait: 1 }), 'invalid_argument', /unknown/);
    } finally {
      restore();
    }
    assert.deepEqual(sent, []);
    const t = epoch();
    const [p, child] = [uniqueId('p'), uniqueId('c')];
    // The child's id among the parts: it would wait for itself.
    await rejectsWith(c.enqueueFanIn([p, child], child, { now: t }), 'invalid_argument');
    assert.equal(await c.job(p, { now: t }), null);
  });
});

describe('after: a claimed job\'s parents, and job\'s parents and blocked children', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('a claimed child carries its parents in id order on every claim path; other jobs keep their four fields', async () => {
    const t = epoch();
    const q = uniqueId('claims');
    const [a, b, solo, z] = ['a', 'b', 'solo', 'z'].map((n) => `${q}-${n}`);
    const [k1, k2, k3, k4] = ['k1', 'k2', 'k3', 'k4'].map((n) => `${q}-${n}`);
    for (const id of [b, a, solo, z]) assert.equal(await c.enqueue(id, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(k1, { queue: q, after: [b, a], now: t }), true);   // given out of order
    assert.equal(await c.enqueue(k2, { queue: q, after: [a], now: t }), true);
    assert.equal(await c.enqueue(k3, { queue: q, after: [z], now: t }), true);

    const first = await c.claimNext(q, 'w', 30, { max: 4, now: t + 1 });
    assert.deepEqual(first.map((j) => j.id).sort(), [a, b, solo, z]);
    for (const j of first) assert.deepEqual(Object.keys(j), ['id', 'fence', 'payload', 'attempts']);
    const fence = Object.fromEntries(first.map((j) => [j.id, j.fence]));
    assert.equal(await c.complete(b, 'w', fence[b], 'B', { now: t + 2 }), true);
    assert.equal(await c.complete(solo, 'w', fence[solo], 'S', { now: t + 2 }), true);

    // completeAndClaimNext's next, claimNext with max, completeMany's next.
    const reply = await c.completeAndClaimNext(a, 'w', fence[a], 'A', q, 30, { now: t + 3 });
    assert.equal(reply.completed, true);
    assert.deepEqual(reply.next, { id: k1, fence: 1, payload: null, attempts: 1, after: [a, b] });
    const many = await c.claimNext(q, 'w', 30, { max: 5, now: t + 4 });
    assert.deepEqual(many.map((j) => [j.id, j.after]), [[k2, [a]]]);
    const done = await c.completeMany([{ id: z, owner: 'w', fence: fence[z], result: 'Z' }],
      { next: { queue: q, ttl: 30, max: 5 }, now: t + 5 });
    assert.deepEqual(done.completed, [true]);
    assert.deepEqual(done.next.map((j) => [j.id, j.after]), [[k3, [z]]]);
    // A single claimNext, and the child reads its parents with results.
    assert.equal(await c.enqueue(k4, { queue: q, after: [k1, a], now: t + 5 }), true);
    assert.equal(await c.complete(k1, 'w', reply.next.fence, 'K1', { now: t + 6 }), true);
    const child = await c.claimNext(q, 'w', 30, { now: t + 7 });
    assert.equal(child.id, k4);
    assert.deepEqual(child.after, [a, k1]);
    assert.deepEqual(await c.results(child.after, { now: t + 7 }), {
      [a]: { state: 'done', result: 'A' }, [k1]: { state: 'done', result: 'K1' } });
  });

  it('job lists a parent\'s still blocked children and a child\'s parents (wire names)', async () => {
    const t = epoch();
    const q = uniqueId('detail');
    const [parent, other, childA, childB] = ['parent', 'other', 'child-a', 'child-b'].map((n) => `${q}-${n}`);
    assert.equal(await c.enqueue(parent, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(other, { queue: q, now: t }), true);
    assert.equal(await c.enqueue(childB, { queue: q, after: [parent], now: t }), true);
    assert.equal(await c.enqueue(childA, { queue: q, after: [parent, other], now: t }), true);

    const p = await c.job(parent, { now: t });
    assert.deepEqual(p.blocked_children, [childA, childB]);   // id order
    assert.equal('after' in p, false);
    const child = await c.job(childA, { now: t });
    assert.deepEqual(child.after, [other, parent]);
    assert.equal('blocked_children' in child, false);

    const finish = async (id, now) => {
      const fence = await c.claim(id, 'w', 30, { now });
      assert.equal(await c.complete(id, 'w', fence, id, { now }), true);
    };
    await finish(parent, t + 1);
    // childB is unblocked by the complete; childA still waits for `other`.
    assert.equal((await c.job(childB, { now: t + 1 })).state, 'ready');
    assert.deepEqual((await c.job(childB, { now: t + 1 })).after, [parent]);   // kept once unblocked
    assert.deepEqual((await c.job(parent, { now: t + 1 })).blocked_children, [childA]);
    await finish(other, t + 2);
    assert.equal((await c.job(childA, { now: t + 2 })).state, 'ready');
    assert.equal('blocked_children' in await c.job(parent, { now: t + 2 }), false);
    assert.equal('blocked_children' in await c.job(other, { now: t + 2 }), false);
  });

  it('a workNext job function gets the job\'s parents, and no after for a job without', async () => {
    const t = epoch();
    const q = uniqueId('worker');
    const [p1, p2, sum] = ['p1', 'p2', 'sum'].map((n) => `${q}-${n}`);
    assert.deepEqual(await c.enqueueFanIn([p1, p2], sum, { queue: q, now: t }), [true, true, true]);
    const seen = {};
    const fn = (job) => { seen[job.id] = 'after' in job ? job.after : 'no after'; return job.id; };
    const clock = () => t + 1;
    // One job, then prefetching rounds: p2's completion claims the child.
    const single = await c.workNext(q, 'w', 30, fn, { wait: 0, clock });
    assert.deepEqual([single.id, single.completed], [p1, true]);
    const round = await c.workNext(q, 'w', 30, fn, { wait: 0, clock, prefetch: 5 });
    assert.deepEqual(round.outcomes.map((o) => o.id), [p2]);
    assert.deepEqual(round.next.map((j) => [j.id, j.after]), [[sum, [p1, p2]]]);
    const last = await c.workNext(q, 'w', 30, fn, { wait: 0, clock, prefetch: 5, jobs: round.next });
    assert.deepEqual(last.outcomes.map((o) => [o.id, o.status]), [[sum, 'completed']]);
    assert.deepEqual(seen, { [p1]: 'no after', [p2]: 'no after', [sum]: [p1, p2] });
  });
});

describe('after: replies whose parents or children are not arrays of ids are bad_reply', () => {
  let router;
  let endpoint;
  withFakeDaemon((fake) => ({ router, endpoint } = fake));

  const job = { id: 'c', fence: 1, payload: null, attempts: 1 };
  const cases = [
    ['claimNext', 'claim_next', (cl) => cl.claimNext('q', 'w', 30), { ...job, after: 'p' }],
    ['claimNext max', 'claim_next', (cl) => cl.claimNext('q', 'w', 30, { max: 2 }), [{ ...job, after: [7] }]],
    ['job after', 'job', (cl) => cl.job('c'), { id: 'c', state: 'ready', after: null }],
    ['job blocked_children', 'job', (cl) => cl.job('c'), { id: 'c', state: 'ready', blocked_children: ['k', 2] }],
  ];
  for (const [name, op, call, result] of cases) {
    it(`${name}: bad_reply for ${JSON.stringify(result)}`, async () => {
      const client = new Client(endpoint, { timeoutMs: 5000 });
      try {
        const pending = call(client);
        const [identity, payload] = await router.receive();
        const request = codec.decode(payload);
        assert.equal(request.op, op);
        await router.send([identity, codec.encode({ ok: true, rid: request.rid, result })]);
        await rejectsWith(pending, 'bad_reply', new RegExp(op));
      } finally {
        await client.close();
      }
    });
  }
});
