'use strict';

// Unique keys (issue 31): enqueue's and enqueueMany's key, uniqueFor and
// onConflict, their {id, created} answers, retry refused while another job
// holds the key, list's key filter and the rows' key; against a real fenceqd.
//
// Client clock: each test takes its own stretch of time from epoch(), later
// than every earlier test's (the daemon keeps the highest `now` it saw).

const fs = require('node:fs');
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const { withDaemon, rejectsWith, uniqueId, recordRequests, withFakeDaemon } = require('./helpers');

let clockBase = 0;
/** A start time later than any `now` an earlier test of this file used. */
function epoch() {
  clockBase += 100000;
  return clockBase;
}

describe('unique keys, client clock', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (_daemon, client) => { c = client; });

  it('enqueue with a key answers {id, created}: the holder\'s id while it is unfinished', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b, d] = [uniqueId('a'), uniqueId('b'), uniqueId('d')];
    const rec = recordRequests(c);
    let first;
    try {
      first = await c.enqueue(a, { queue: q, key: 'user-7', uniqueFor: 30, onConflict: 'skip', now: t });
    } finally {
      rec.restore();
    }
    assert.deepEqual(first, { id: a, created: true });
    assert.deepEqual(rec.sent, [['enqueue',
      { id: a, queue: q, key: 'user-7', unique_for: 30, on_conflict: 'skip', now: t }]]);

    // Ready: b is not created, and the answer names a.
    assert.deepEqual(await c.enqueue(b, { queue: q, key: 'user-7', payload: 'x', now: t + 1 }),
      { id: a, created: false });
    assert.equal(await c.state(b), null);
    // The id taken: nothing changes, the answer is the request's own id.
    assert.deepEqual(await c.enqueue(a, { queue: q, key: 'other', now: t + 1 }), { id: a, created: false });
    // Without a key, booleans as before, even on a queue with keyed jobs.
    assert.equal(await c.enqueue(d, { queue: q, now: t + 1 }), true);
    assert.equal(await c.enqueue(d, { queue: q, now: t + 1 }), false);
    assert.equal(await c.enqueue(uniqueId('e'), { queue: q, key: undefined, now: t + 1 }), true);
    // The same key in another queue is another key.
    const elsewhere = uniqueId('q');
    assert.deepEqual(await c.enqueue(b, { queue: elsewhere, key: 'user-7', now: t + 1 }),
      { id: b, created: true });

    // Leased: still held.
    const job = await c.claimNext(q, 'w', 30, { now: t + 2 });
    assert.equal(job.id, a);
    const c2 = uniqueId('c');
    assert.deepEqual(await c.enqueue(c2, { queue: q, key: 'user-7', now: t + 3 }), { id: a, created: false });
    // Done, and no uniqueFor: the key is free again.
    assert.equal(await c.complete(a, 'w', job.fence, 'ok', { now: t + 4 }), true);
    assert.deepEqual(await c.enqueue(c2, { queue: q, key: 'user-7', now: t + 5 }), { id: c2, created: true });
  });

  it('uniqueFor: a job enqueued within the window holds the key, finished or not', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b, d] = [uniqueId('a'), uniqueId('b'), uniqueId('d')];
    assert.deepEqual(await c.enqueue(a, { queue: q, key: 'k', uniqueFor: 60, now: t }), { id: a, created: true });
    const job = await c.claimNext(q, 'w', 30, { now: t + 1 });
    assert.equal(await c.complete(a, 'w', job.fence, null, { now: t + 2 }), true);
    // Done 2 s after it was enqueued: within 60 s it still holds the key.
    assert.deepEqual(await c.enqueue(b, { queue: q, key: 'k', uniqueFor: 60, now: t + 30 }),
      { id: a, created: false });
    // ... but not for a request with a shorter window, or none.
    assert.deepEqual(await c.enqueue(b, { queue: q, key: 'k', uniqueFor: 10, now: t + 31 }),
      { id: b, created: true });
    // b is unfinished: it holds the key whatever the window.
    assert.deepEqual(await c.enqueue(d, { queue: q, key: 'k', uniqueFor: 1, now: t + 500 }),
      { id: b, created: false });
    assert.equal(await c.cancel(b, { now: t + 501 }), true);
    // Cancelled and out of a's window: created.
    assert.deepEqual(await c.enqueue(d, { queue: q, key: 'k', uniqueFor: 60, now: t + 600 }),
      { id: d, created: true });
    assert.deepEqual((await c.list({ queue: q, key: 'k', now: t + 600 })).map((r) => [r.id, r.state]).sort(),
      [[a, 'done'], [b, 'cancelled'], [d, 'ready']].sort());
  });

  it('onConflict replace: a waiting holder takes the payload, priority, maxAttempts and delay; id, fence, attempts stay', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    assert.deepEqual(await c.enqueue(a, { queue: q, key: 'k', payload: 'v1', priority: 1, maxAttempts: 5, now: t }),
      { id: a, created: true });
    // One attempt used and failed: a is delayed with fence 1, attempts 1.
    const job = await c.claimNext(q, 'w', 30, { now: t + 1 });
    assert.equal(await c.fail(a, 'w', job.fence, 'boom', { retryIn: 100, now: t + 2 }), true);
    assert.equal((await c.job(a, { now: t + 3 })).state, 'delayed');

    assert.deepEqual(await c.enqueue(b, {
      queue: q, key: 'k', onConflict: 'replace', payload: Buffer.from([1, 2]), priority: 9, maxAttempts: 7,
      delay: 10, now: t + 3,
    }), { id: a, created: false });
    assert.equal(await c.state(b), null);
    const replaced = await c.job(a, { now: t + 3 });
    assert.deepEqual(
      [replaced.id, replaced.key, replaced.state, replaced.priority, replaced.max_attempts,
        replaced.not_before, replaced.fence, replaced.attempts, Buffer.from(replaced.payload)],
      [a, 'k', 'delayed', 9, 7, t + 13, 1, 1, Buffer.from([1, 2])]);
    // The delay is counted from now: not claimable before t + 13.
    assert.equal(await c.claimNext(q, 'w', 30, { now: t + 12 }), null);
    assert.deepEqual(await c.claimNext(q, 'w', 30, { now: t + 13 }),
      { id: a, fence: 2, payload: Buffer.from([1, 2]), attempts: 2 });
  });

  it('onConflict replace never touches a leased holder, nor a finished one in its window', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    await c.enqueue(a, { queue: q, key: 'k', payload: 'v1', priority: 1, now: t });
    const job = await c.claimNext(q, 'w', 30, { now: t + 1 });
    const before = await c.job(a, { now: t + 2 });
    assert.deepEqual(await c.enqueue(b, { queue: q, key: 'k', onConflict: 'replace', payload: 'v2',
      priority: 5, delay: 9, now: t + 2 }), { id: a, created: false });
    assert.deepEqual(await c.job(a, { now: t + 2 }), before);
    assert.equal(before.payload, 'v1');
    assert.equal(await c.complete(a, 'w', job.fence, 'r', { now: t + 3 }), true);
    const done = await c.job(a, { now: t + 4 });
    assert.deepEqual(await c.enqueue(b, { queue: q, key: 'k', onConflict: 'replace', uniqueFor: 60,
      payload: 'v3', now: t + 4 }), { id: a, created: false });
    assert.deepEqual(await c.job(a, { now: t + 4 }), done);
    assert.equal(await c.state(b), null);
  });

  it('enqueueMany: per entry {id, created} with a key, a boolean without, judged in order', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [x, y, z, w, v] = ['x', 'y', 'z', 'w', 'v'].map((p) => uniqueId(p));
    const rec = recordRequests(c);
    let answers;
    try {
      answers = await c.enqueueMany([
        { id: x, queue: q, key: 'k', payload: 'p1' },
        { id: y, queue: q },
        { id: z, queue: q, key: 'k', uniqueFor: 5 },
        { id: w, queue: q, key: 'k', onConflict: 'replace', payload: 'p2', priority: 3 },
        { id: y, queue: q },
        { id: v, queue: q, key: 'k2' },
      ], { now: t });
    } finally {
      rec.restore();
    }
    assert.deepEqual(answers, [
      { id: x, created: true }, true, { id: x, created: false }, { id: x, created: false }, false,
      { id: v, created: true },
    ]);
    assert.deepEqual(rec.sent[0][1].jobs.slice(2, 4), [
      { id: z, queue: q, key: 'k', unique_for: 5 },
      { id: w, queue: q, key: 'k', on_conflict: 'replace', payload: 'p2', priority: 3 },
    ]);
    const holder = await c.job(x, { now: t });
    assert.deepEqual([holder.payload, holder.priority], ['p2', 3]);
    // Only unkeyed entries: booleans only, as before.
    assert.deepEqual(await c.enqueueMany([{ id: uniqueId('u'), queue: q }], { now: t }), [true]);
  });

  it('list filters by key (exact); rows and job records carry key only when the job has one', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b, d] = [uniqueId('a'), uniqueId('b'), uniqueId('d')];
    await c.enqueue(a, { queue: q, key: 'k', now: t });
    await c.enqueue(b, { queue: q, key: 'k1', now: t });
    await c.enqueue(d, { queue: q, now: t });
    const byKey = await c.list({ queue: q, key: 'k', now: t });
    assert.deepEqual(byKey.map((r) => [r.id, r.key]), [[a, 'k']]);
    assert.deepEqual((await c.list({ key: 'k1', prefix: b, now: t })).map((r) => r.id), [b]);
    const rows = await c.list({ queue: q, now: t });
    assert.deepEqual(rows.map((r) => [r.id, 'key' in r, r.key]).sort(),
      [[a, true, 'k'], [b, true, 'k1'], [d, false, undefined]].sort());
    assert.equal((await c.job(a, { now: t })).key, 'k');
    assert.equal('key' in (await c.job(d, { now: t })), false);
    assert.deepEqual(await c.list({ queue: q, key: 'nobody', now: t }), []);
  });

  it('retry of a dead keyed job answers false while another unfinished job holds its key', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    await c.enqueue(a, { queue: q, key: 'k', maxAttempts: 1, now: t });
    const job = await c.claimNext(q, 'w', 30, { now: t + 1 });
    assert.equal(await c.fail(a, 'w', job.fence, 'boom', { now: t + 2 }), true);
    assert.equal((await c.job(a, { now: t + 2 })).state, 'dead');
    assert.deepEqual(await c.enqueue(b, { queue: q, key: 'k', now: t + 3 }), { id: b, created: true });
    assert.equal(await c.retry(a), false);
    assert.equal((await c.job(a, { now: t + 3 })).state, 'dead');
    assert.equal(await c.cancel(b, { now: t + 4 }), true);
    assert.equal(await c.retry(a), true);
    assert.equal((await c.job(a, { now: t + 5 })).state, 'ready');
  });

  it('the client refuses unknown spellings and enqueueAndWait\'s key before sending', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const id = uniqueId('a');
    const rec = recordRequests(c);
    try {
      await rejectsWith(c.enqueue(id, { queue: q, key: 'k', unique_for: 5 }), 'invalid_argument',
        /unique_for.*uniqueFor/);
      await rejectsWith(c.enqueue(id, { queue: q, key: 'k', on_conflict: 'replace' }), 'invalid_argument',
        /on_conflict/);
      await rejectsWith(c.enqueueMany([{ id, queue: q, key: 'k', unique_for: 5 }]), 'invalid_argument',
        /unique_for.*jobs\[0\]/);
      await rejectsWith(c.list({ keys: 'k' }), 'invalid_argument', /keys/);
      for (const options of [{ key: 'k' }, { uniqueFor: 5 }, { onConflict: 'skip' }, { key: undefined }]) {
        await rejectsWith(c.enqueueAndWait(id, { queue: q, ...options }), 'invalid_argument',
          /enqueueAndWait takes no/);
      }
    } finally {
      rec.restore();
    }
    assert.deepEqual(rec.sent, []);
    assert.equal(await c.state(id), null);
    // The daemon refuses the wire's key too.
    await rejectsWith(c.request('enqueue_and_wait', { id, queue: q, key: 'k', now: t }), 'invalid_argument',
      /key/);
    assert.equal(await c.state(id), null);
  });

  it('the daemon refuses bad keys, windows and conflicts with a coded error, and nothing changes', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const id = uniqueId('a');
    const cases = [
      [{ key: '' }, 'invalid_argument', /key/],
      [{ key: 'x'.repeat(1025) }, 'invalid_argument', /key/],
      [{ key: 'k', uniqueFor: 0 }, 'invalid_argument', /unique_for/],
      [{ key: 'k', uniqueFor: -1 }, 'invalid_argument', /unique_for/],
      [{ key: 'k', uniqueFor: 1e9 + 1 }, 'invalid_argument', /unique_for/],
      [{ uniqueFor: 5 }, 'invalid_argument', /unique_for.*key/],
      [{ onConflict: 'skip' }, 'invalid_argument', /on_conflict.*key/],
      [{ key: 'k', onConflict: 'keep' }, 'invalid_argument', /on_conflict/],
      [{ key: 5 }, 'bad_request', /key/],
      [{ key: null }, 'bad_request', /key/],
      [{ key: 'k', uniqueFor: '5' }, 'bad_request', /unique_for/],
      [{ key: 'k', onConflict: true }, 'bad_request', /on_conflict/],
    ];
    for (const [options, code, pattern] of cases) {
      await rejectsWith(c.enqueue(id, { queue: q, ...options, now: t }), code, pattern);
    }
    await rejectsWith(c.enqueueMany([{ id, queue: q, key: 'k' }, { id: uniqueId('b'), queue: q, key: '' }],
      { now: t }), 'invalid_argument', /jobs\[1\].*key/);
    await rejectsWith(c.list({ queue: q, key: '', now: t }), 'invalid_argument', /key/);
    await rejectsWith(c.list({ queue: q, key: 7, now: t }), 'bad_request', /key/);
    assert.equal(await c.state(id), null);
    assert.deepEqual(await c.list({ queue: q, now: t }), []);
    // The largest window is fine.
    assert.deepEqual(await c.enqueue(id, { queue: q, key: 'k', uniqueFor: 1e9, now: t }), { id, created: true });
  });
});

describe('unique keys: the replies are checked', () => {
  let router;
  let endpoint;
  withFakeDaemon((fake) => ({ router, endpoint } = fake));

  const cases = [
    ['enqueue with a key', 'enqueue', (c) => c.enqueue('a', { key: 'k' }),
      [true, null, { id: 'a' }, { created: true }, { id: 1, created: true }, { id: 'a', created: 1 }]],
    ['enqueue without a key', 'enqueue', (c) => c.enqueue('a'), [{ id: 'a', created: true }]],
    ['enqueueMany with keys', 'enqueue_many', (c) => c.enqueueMany([{ id: 'a', key: 'k' }, { id: 'b' }]),
      [[true, true], [{ id: 'a', created: true }, { id: 'b', created: true }],
        [{ id: 'a', created: true }], [{ id: 'a' }, true]]],
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

  it('a daemon before unique keys (booleans for keyed entries): bad_reply saying it ignored the key', async () => {
    for (const [op, call, result] of [
      ['enqueue', (c) => c.enqueue('a', { key: 'k' }), true],
      ['enqueue_many', (c) => c.enqueueMany([{ id: 'a', key: 'k' }, { id: 'b' }]), [true, false]],
    ]) {
      const client = new Client(endpoint, { timeoutMs: 5000 });
      try {
        const pending = call(client);
        const [identity, payload] = await router.receive();
        const request = codec.decode(payload);
        await router.send([identity, codec.encode({ ok: true, rid: request.rid, result })]);
        await rejectsWith(pending, 'bad_reply', new RegExp(`${op} with a key .*predates unique keys`));
      } finally {
        await client.close();
      }
    }
  });

  it('the answers are handed out as {id, created} only (extra fields of a later daemon dropped)', async () => {
    const client = new Client(endpoint, { timeoutMs: 5000 });
    try {
      const pending = client.enqueueMany([{ id: 'a', key: 'k' }, { id: 'b' }]);
      const [identity, payload] = await router.receive();
      const request = codec.decode(payload);
      await router.send([identity, codec.encode({
        ok: true, rid: request.rid, result: [{ id: 'x', created: false, later: 1 }, true],
      })]);
      assert.deepEqual(await pending, [{ id: 'x', created: false }, true]);
    } finally {
      await client.close();
    }
  });
});
