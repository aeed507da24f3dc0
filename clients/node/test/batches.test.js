'use strict';

// Batches (PROTOCOL.md, "Batches"): Client#enqueueMany, claimNext with max,
// completeMany (with and without next) and renewMany. Against real daemons;
// a fake ROUTER answers the malformed replies.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const { RawPeer, withDaemon, rejectsWith, uniqueId, recordRequests, withFakeDaemon } = require('./helpers');

/** Enqueues `n` jobs of queue `q` (ids q-00, q-01, ...) at `now`; resolves their ids. */
async function fill(client, q, n, now) {
  const ids = Array.from({ length: n }, (_, i) => `${q}-${String(i).padStart(2, '0')}`);
  assert.deepEqual(await client.enqueueMany(ids.map((id) => ({ id, queue: q })), { now }),
    ids.map(() => true));
  return ids;
}

describe('batches, client clock', () => {
  let daemon, c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [daemon, c, other] = f; });

  describe('enqueueMany', () => {
    it('answers created or already there in input order, each with its options (sent snake_case)', async () => {
      const q = uniqueId('q');
      const [a, b, d] = [uniqueId('a'), uniqueId('b'), uniqueId('d')];
      assert.equal(await c.enqueue(a, { queue: q, now: 1 }), true);
      const rec = recordRequests(c);
      let created;
      try {
        created = await c.enqueueMany([
          { id: b, queue: q, payload: Buffer.from([7, 8]), priority: 5, maxAttempts: 2 },
          { id: a, queue: uniqueId('elsewhere'), priority: 99 },
          { id: d, queue: q, payload: 'text', delay: 50 },
        ], { now: 2 });
      } finally {
        rec.restore();
      }
      assert.deepEqual(created, [true, false, true]);
      assert.deepEqual(rec.sent, [['enqueue_many', {
        jobs: [
          { id: b, queue: q, payload: Buffer.from([7, 8]), priority: 5, max_attempts: 2 },
          { id: a, queue: rec.sent[0][1].jobs[1].queue, priority: 99 },
          { id: d, queue: q, payload: 'text', delay: 50 },
        ],
        now: 2,
      }]]);
      // The existing job kept its queue and priority; the new ones have theirs.
      const rows = await c.list({ queue: q, now: 3 });
      assert.deepEqual(rows.map((r) => [r.id, r.state, r.priority, r.max_attempts]).sort(),
        [[a, 'ready', 0, 25], [b, 'ready', 5, 2], [d, 'delayed', 0, 25]].sort());
      assert.deepEqual(await c.claimNext(q, 'w', 100, { max: 5, now: 3 }), [
        { id: b, fence: 1, payload: Buffer.from([7, 8]), attempts: 1 },
        { id: a, fence: 1, payload: null, attempts: 1 },
      ]);
      assert.deepEqual(await c.claimNext(q, 'w', 30, { max: 5, now: 52 }),
        [{ id: d, fence: 1, payload: 'text', attempts: 1 }]);
    });

    it('a bad entry refuses the whole batch, naming its index, and nothing is applied (C3.8)', async () => {
      const q = uniqueId('q');
      const [x, y, z] = [uniqueId('x'), uniqueId('y'), uniqueId('z')];
      await rejectsWith(c.enqueueMany([{ id: x, queue: q }, { id: y, queue: q, priority: 1.5 }]),
        'bad_request', /jobs\[1\]/);
      await rejectsWith(c.enqueueMany([{ id: x, queue: q }, { id: y, queue: q }, { id: z, delay: -1 }]),
        'invalid_argument', /jobs\[2\].*delay/);
      await rejectsWith(c.enqueueMany([{ id: x, queue: '' }, { id: y }]), 'invalid_argument', /jobs\[0\]/);
      await rejectsWith(c.enqueueMany([{ id: x }, { queue: q }]), 'bad_request', /jobs\[1\].*id/);
      await rejectsWith(c.enqueueMany([]), 'invalid_argument');
      await rejectsWith(c.enqueueMany(Array.from({ length: 1001 }, (_, i) => ({ id: `${x}-${i}` }))),
        'invalid_argument');
      for (const id of [x, y, z, `${x}-0`]) assert.equal(await c.state(id), null, id);
      assert.deepEqual(await c.list({ queue: q, now: 1 }), []);
      // The same jobs, fixed, go in.
      assert.deepEqual(await c.enqueueMany([{ id: x, queue: q }, { id: y, queue: q, priority: 1 }]),
        [true, true]);
    });

    it('refuses what it cannot send as asked on the client, before sending: nothing applied', async () => {
      const x = uniqueId('x');
      const rec = recordRequests(c);
      try {
        await rejectsWith(c.enqueueMany([{ id: x }, { id: uniqueId('y'), max_attempts: 3 }]),
          'invalid_argument', /unknown key 'max_attempts' in enqueueMany jobs\[1\].*maxAttempts/);
        await rejectsWith(c.enqueueMany([{ id: x }, 'y']), 'invalid_argument', /jobs\[1\] must be an object/);
        await rejectsWith(c.enqueueMany([{ id: x, now: 5 }]), 'invalid_argument', /unknown key 'now'/);
        await rejectsWith(c.enqueueMany({ id: x }), 'invalid_argument', /jobs must be an array/);
        await rejectsWith(c.enqueueMany(undefined), 'invalid_argument', /jobs must be an array/);
        await rejectsWith(c.enqueueMany([{ id: x }], { queue: 'q' }), 'invalid_argument',
          /unknown enqueue_many option 'queue'/);
      } finally {
        rec.restore();
      }
      assert.deepEqual(rec.sent.filter(([op]) => op === 'enqueue_many'), []);
      assert.equal(await c.state(x), null);
    });
  });

  describe('claimNext with max', () => {
    it('claims the most urgent first (priority, then enqueue order), each with its own fence and lease', async () => {
      const q = uniqueId('q');
      const ids = await fill(c, q, 3, 10); // priority 0, in this order
      const [hi, mid] = [uniqueId('hi'), uniqueId('mid')];
      await c.enqueueMany([{ id: mid, queue: q, priority: 5 }, { id: hi, queue: q, priority: 9, payload: 'h' }],
        { now: 10 });
      assert.equal(await other.claim(ids[0], 'someone', 30, { now: 10 }), 1); // leased: skipped
      assert.equal(await c.release(ids[0], 'someone', 1), true);
      assert.equal(await other.claim(ids[0], 'someone', 30, { now: 10 }), 2);

      const jobs = await c.claimNext(q, 'w', 30, { max: 3, now: 11 });
      assert.deepEqual(jobs, [
        { id: hi, fence: 1, payload: 'h', attempts: 1 },
        { id: mid, fence: 1, payload: null, attempts: 1 },
        { id: ids[1], fence: 1, payload: null, attempts: 1 },
      ]);
      for (const job of jobs) {
        assert.deepEqual(await c.state(job.id),
          { id: job.id, owner: 'w', until: 41, fence: 1, result: null, done: false });
      }
      // The rest: fewer than max; then an empty array, at once.
      assert.deepEqual(await c.claimNext(q, 'w2', 30, { max: 10, now: 12 }),
        [{ id: ids[2], fence: 1, payload: null, attempts: 1 }]);
      assert.deepEqual(await c.claimNext(q, 'w2', 30, { max: 10, now: 12 }), []);
      // Once a lease ends, its job is claimable again, with the next fence
      // (ids[0]'s ended at 40 too; ids[2]'s lasts until 42).
      assert.deepEqual((await c.claimNext(q, 'w3', 30, { max: 10, now: 41 })).map((j) => [j.id, j.fence]),
        [[hi, 2], [mid, 2], [ids[0], 3], [ids[1], 2]]);
    });

    it('max 1 still answers an array; without max claimNext answers one job or null, as before', async () => {
      const q = uniqueId('q');
      const [a, b] = await fill(c, q, 2, 20);
      const rec = recordRequests(c);
      let one;
      let single;
      let none;
      try {
        one = await c.claimNext(q, 'w', 30, { max: 1, now: 20 });
        single = await c.claimNext(q, 'w', 30, { now: 20 });
        none = await c.claimNext(q, 'w', 30, { now: 20, max: undefined });
      } finally {
        rec.restore();
      }
      assert.deepEqual(one, [{ id: a, fence: 1, payload: null, attempts: 1 }]);
      assert.deepEqual(single, { id: b, fence: 1, payload: null, attempts: 1 });
      assert.equal(none, null);
      assert.deepEqual(rec.sent.map(([, fields]) => fields.max), [1, undefined, undefined]);
      assert.equal('max' in rec.sent[1][1], false);
    });

    it('refuses max 0, over 1000, fractional or nil, with the daemon\'s codes', async () => {
      const q = uniqueId('q');
      await fill(c, q, 1, 30);
      await rejectsWith(c.claimNext(q, 'w', 30, { max: 0, now: 30 }), 'invalid_argument', /max/);
      await rejectsWith(c.claimNext(q, 'w', 30, { max: 1001, now: 30 }), 'invalid_argument', /max/);
      await rejectsWith(c.claimNext(q, 'w', 30, { max: 1.5, now: 30 }), 'bad_request', /max/);
      await rejectsWith(c.claimNext(q, 'w', 30, { max: null, now: 30 }), 'bad_request', /max/);
      assert.equal((await c.list({ queue: q, state: 'ready', now: 30 })).length, 1);
    });

    it('with wait: answered once a job arrives, with what is there; [] when the wait ends', async () => {
      const q = uniqueId('q');
      const started = Date.now();
      assert.deepEqual(await c.claimNext(q, 'w', 30, { max: 4, wait: 0.3, now: 40 }), []);
      assert.ok(Date.now() - started >= 250, 'the daemon held the claim for the wait');

      const held = c.claimNext(q, 'w', 30, { max: 4, wait: 10, now: 40 });
      const a = uniqueId('a');
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(await other.enqueueMany([{ id: a, queue: q, payload: 'p' }], { now: 40 }), [true]);
      assert.deepEqual(await held, [{ id: a, fence: 1, payload: 'p', attempts: 1 }]);
    });
  });

  describe('renewMany', () => {
    it('renews every current lease; a stale one fails alone (C3.4)', async () => {
      const q = uniqueId('q');
      const ids = await fill(c, q, 4, 100);
      const jobs = await c.claimNext(q, 'w', 30, { max: 4, now: 100 }); // until 130
      // ids[1]'s lease ends and a thief takes it; ids[3] is done.
      assert.equal(await other.claim(ids[1], 'thief', 30, { now: 130 }), 2);
      assert.equal(await c.complete(ids[3], 'w', 1, 'done', { now: 101 }), true);
      const items = jobs.map(({ id, fence }) => ({ id, owner: 'w', fence }));
      const rec = recordRequests(c);
      let renewed;
      try {
        renewed = await c.renewMany([...items, { id: ids[0], owner: 'w', fence: 0 },
          { id: ids[2], owner: 'not-w', fence: 1 }, { id: uniqueId('missing'), owner: 'w', fence: 1 }],
        60, { now: 120 });
      } finally {
        rec.restore();
      }
      assert.deepEqual(renewed, [true, false, true, false, false, false, false]);
      assert.deepEqual(rec.sent[0][0], 'renew_many');
      assert.equal(rec.sent[0][1].ttl, 60);
      assert.equal(rec.sent[0][1].now, 120);
      assert.equal((await c.state(ids[0])).until, 180);
      assert.equal((await c.state(ids[2])).until, 180);
      assert.deepEqual(await c.state(ids[1]),
        { id: ids[1], owner: 'thief', until: 160, fence: 2, result: null, done: false });
      // Past the old until, the renewed leases are still current: only the
      // thief's job, whose lease ended at 160, can be claimed.
      assert.equal(await other.check(ids[0], 'w', 1, { now: 170 }), true);
      assert.deepEqual(await other.claimNext(q, 'x', 30, { max: 4, now: 170 }),
        [{ id: ids[1], fence: 3, payload: null, attempts: 3 }]);
    });

    it('an expired lease is never revived; a bad ttl or item refuses the whole batch', async () => {
      const q = uniqueId('q');
      const ids = await fill(c, q, 2, 200);
      await c.claimNext(q, 'w', 10, { max: 2, now: 200 }); // until 210
      const items = ids.map((id) => ({ id, owner: 'w', fence: 1 }));
      assert.deepEqual(await c.renewMany(items, 10, { now: 210 }), [false, false]);
      assert.equal(await c.claim(ids[0], 'w', 10, { now: 211 }), 2);
      await rejectsWith(c.renewMany([{ id: ids[0], owner: 'w', fence: 2 }], 0, { now: 212 }),
        'invalid_argument', /ttl/);
      await rejectsWith(c.renewMany([{ id: ids[0], owner: 'w', fence: 2 }, { id: ids[1], owner: 'w' }],
        10, { now: 212 }), 'bad_request', /items\[1\].*fence/);
      await rejectsWith(c.renewMany([{ id: ids[0], owner: 'w', fence: 2 }], 10), 'invalid_argument', /now/);
      assert.equal((await c.state(ids[0])).until, 221); // none of the refused ones applied
      await rejectsWith(c.renewMany([{ id: ids[0], owner: 'w', fence: 2, result: 'r' }], 10, { now: 212 }),
        'invalid_argument', /unknown key 'result' in renewMany items\[0\]/);
      await rejectsWith(c.renewMany([], 10, { now: 212 }), 'invalid_argument');
    });
  });

  describe('completeMany', () => {
    it('stores each current lease\'s result; a stale job fails alone (C3.5)', async () => {
      const q = uniqueId('q');
      const ids = await fill(c, q, 4, 300);
      await c.claimNext(q, 'w', 30, { max: 4, now: 300 }); // until 330
      assert.equal(await other.claim(ids[1], 'thief', 30, { now: 330 }), 2); // ids[1] stolen
      const rec = recordRequests(c);
      let completed;
      try {
        completed = await c.completeMany([
          { id: ids[0], owner: 'w', fence: 1, result: 'r0' },
          { id: ids[1], owner: 'w', fence: 1, result: 'late' },
          { id: ids[2], owner: 'w', fence: 1 }, // no result: null
          { id: ids[0], owner: 'w', fence: 1, result: 'again' }, // the same lease twice
          { id: ids[3], owner: 'w', fence: 1, result: null },
        ], { now: 329 });
      } finally {
        rec.restore();
      }
      assert.deepEqual(completed, [true, false, true, false, true]);
      assert.deepEqual(rec.sent[0][1].items[2], { id: ids[2], owner: 'w', fence: 1, result: null });
      assert.equal('next' in rec.sent[0][1], false);
      assert.deepEqual(await c.state(ids[0]),
        { id: ids[0], owner: 'w', until: 330, fence: 1, result: 'r0', done: true });
      assert.deepEqual(await c.state(ids[1]),
        { id: ids[1], owner: 'thief', until: 360, fence: 2, result: null, done: false });
      assert.equal((await c.state(ids[2])).done, true);
      assert.equal((await c.state(ids[2])).result, null);
      // The thief's complete is its own, and goes through.
      assert.deepEqual(await other.completeMany([{ id: ids[1], owner: 'thief', fence: 2, result: 'thief' }],
        { now: 331 }), [true]);
    });

    it('with next: the completes, then up to max jobs claimed for the last item\'s owner, in one request', async () => {
      const q = uniqueId('q');
      const ids = await fill(c, q, 6, 400);
      const first = await c.claimNext(q, 'w', 30, { max: 2, now: 400 });
      const rec = recordRequests(c);
      let both;
      try {
        both = await c.completeMany(first.map(({ id, fence }) => ({ id, owner: 'w', fence, result: `r-${id}` })),
          { next: { queue: q, ttl: 20, max: 3 }, now: 401 });
      } finally {
        rec.restore();
      }
      assert.equal(rec.sent.length, 1);
      assert.deepEqual(rec.sent[0][1].next, { queue: q, ttl: 20, max: 3 });
      assert.deepEqual(Object.keys(both).sort(), ['completed', 'next']);
      assert.deepEqual(both.completed, [true, true]);
      assert.deepEqual(both.next, ids.slice(2, 5).map((id) => ({ id, fence: 1, payload: null, attempts: 1 })));
      for (const id of ids.slice(2, 5)) {
        assert.deepEqual(await c.state(id), { id, owner: 'w', until: 421, fence: 1, result: null, done: false });
      }
      // A refused completion still claims; an empty queue leaves next [].
      const stale = await c.completeMany([{ id: ids[0], owner: 'w', fence: 1, result: 'x' }],
        { next: { queue: q, ttl: 20, max: 3 }, now: 402 });
      assert.deepEqual(stale, { completed: [false], next: [{ id: ids[5], fence: 1, payload: null, attempts: 1 }] });
      assert.deepEqual(await c.completeMany(ids.slice(2).map((id) => ({ id, owner: 'w', fence: 1 })),
        { next: { queue: q, ttl: 20, max: 3 }, now: 403 }), { completed: [true, true, true, true], next: [] });
      // next: null is no next.
      assert.deepEqual(await c.completeMany([{ id: ids[2], owner: 'w', fence: 1 }], { next: null, now: 404 }),
        [false]);
      // The jobs claimed go to the owner of the last item.
      await c.enqueue(uniqueId('z'), { queue: q, now: 405 });
      const mixed = await c.completeMany([{ id: ids[2], owner: 'w', fence: 1 }, { id: ids[3], owner: 'v', fence: 1 }],
        { next: { queue: q, ttl: 20, max: 1 }, now: 405 });
      assert.equal((await c.state(mixed.next[0].id)).owner, 'v');
    });

    it('a refused request (a bad item, a bad next) applies neither the completes nor the claim', async () => {
      const q = uniqueId('q');
      const ids = await fill(c, q, 3, 500);
      await c.claimNext(q, 'w', 30, { max: 1, now: 500 });
      const item = { id: ids[0], owner: 'w', fence: 1, result: 'r' };
      await rejectsWith(c.completeMany([item], { next: { queue: q, ttl: 20, max: 0 }, now: 501 }),
        'invalid_argument', /next.*max/);
      await rejectsWith(c.completeMany([item], { next: { queue: q, ttl: 0, max: 1 }, now: 501 }),
        'invalid_argument', /next.*ttl/);
      await rejectsWith(c.completeMany([item], { next: { queue: q, ttl: 20 }, now: 501 }),
        'bad_request', /max/);
      await rejectsWith(c.completeMany([item, { id: ids[1], owner: 'w', result: 'r' }], { now: 501 }),
        'bad_request', /items\[1\].*fence/);
      await rejectsWith(c.completeMany([item, { id: ids[1], owner: 'w', fence: 1, result: 5 }], { now: 501 }),
        'bad_request', /items\[1\].*result/);
      await rejectsWith(c.completeMany([item]), 'invalid_argument', /now/);
      assert.deepEqual(await c.state(ids[0]),
        { id: ids[0], owner: 'w', until: 530, fence: 1, result: null, done: false });
      assert.equal((await c.list({ queue: q, state: 'ready', now: 501 })).length, 2);
      // Refused on the client, before sending.
      const rec = recordRequests(c);
      try {
        await rejectsWith(c.completeMany([{ ...item, results: 'r' }], { now: 501 }), 'invalid_argument',
          /unknown key 'results' in completeMany items\[0\]/);
        await rejectsWith(c.completeMany([item], { next: { queue: q, ttl: 20, max: 1, wait: 5 }, now: 501 }),
          'invalid_argument', /unknown key 'wait' in completeMany option next/);
        await rejectsWith(c.completeMany([item], { next: 'q', now: 501 }), 'invalid_argument',
          /next must be an object/);
        await rejectsWith(c.completeMany(item, { now: 501 }), 'invalid_argument', /items must be an array/);
        await rejectsWith(c.completeMany([item], { wait: 5 }), 'invalid_argument',
          /unknown complete_many option 'wait'/);
      } finally {
        rec.restore();
      }
      assert.deepEqual(rec.sent, []);
      assert.equal((await c.state(ids[0])).done, false);
    });
  });
});

describe('batches, server clock', () => {
  let daemon, c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [daemon, c] = f; });

  it('every batch op works without now, and C2.3 refuses one', async () => {
    const q = uniqueId('q');
    const ids = [uniqueId('a'), uniqueId('b')];
    assert.deepEqual(await c.enqueueMany(ids.map((id) => ({ id, queue: q }))), [true, true]);
    const jobs = await c.claimNext(q, 'w', 30, { max: 5 });
    assert.deepEqual(jobs.map((j) => j.id), ids);
    const items = jobs.map(({ id, fence }) => ({ id, owner: 'w', fence }));
    assert.deepEqual(await c.renewMany(items, 30), [true, true]);
    assert.deepEqual(await c.completeMany(items), [true, true]);
    await rejectsWith(c.enqueueMany([{ id: uniqueId('x') }], { now: 1 }), 'invalid_argument', /now/);
    await rejectsWith(c.claimNext(q, 'w', 30, { max: 5, now: 1 }), 'invalid_argument', /now/);
    await rejectsWith(c.renewMany(items, 30, { now: 1 }), 'invalid_argument', /now/);
    await rejectsWith(c.completeMany(items, { now: 1 }), 'invalid_argument', /now/);
  });

  // The protocol says []; fenceqd 0.1.0 answers nil, which claimNext turns
  // into [] (tested above). This records the daemon's side.
  it('a max claim whose wait ends is answered [] on the wire', async () => {
    const raw = new RawPeer(daemon.endpoint);
    try {
      const reply = await raw.request(codec.encode({
        op: 'claim_next', queue: uniqueId('q'), owner: 'w', ttl: 30, max: 3, wait: 0.1,
      }));
      assert.deepEqual(reply, { ok: true, result: [] });
    } finally {
      raw.close();
    }
  });
});

describe('batches: the replies are checked', () => {
  let router;
  let endpoint;
  withFakeDaemon((fake) => ({ router, endpoint } = fake));

  const job = { id: 'j', fence: 1, payload: null, attempts: 1 };
  const item = { id: 'j', owner: 'w', fence: 1 };
  const cases = [
    ['enqueueMany', 'enqueue_many', (c) => c.enqueueMany([{ id: 'a' }, { id: 'b' }]),
      [null, true, [true], [true, true, true], [true, 1], { 0: true, 1: true }]],
    ['claimNext max', 'claim_next', (c) => c.claimNext('q', 'w', 30, { max: 2 }),
      [job, [job, job, job], [{ id: 'j', fence: 1 }], [null], 'j']],
    ['completeMany', 'complete_many', (c) => c.completeMany([item]),
      [true, [], [true, false], [1], { completed: [true], next: [] }]],
    ['completeMany next', 'complete_many', (c) => c.completeMany([item], { next: { queue: 'q', ttl: 5, max: 1 } }),
      [[true], { completed: [true] }, { completed: [true, true], next: [] }, { completed: [true], next: null },
        { completed: [true], next: [job, job] }, { completed: [true], next: [{ ...job, fence: 1.5 }] }]],
    ['renewMany', 'renew_many', (c) => c.renewMany([item, item], 5),
      [null, [true], [true, 'yes'], true]],
  ];
  for (const [name, op, call, results] of cases) {
    for (const result of results) {
      it(`${name}: bad_reply for the result ${JSON.stringify(result)}`, async () => {
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
  }
});
