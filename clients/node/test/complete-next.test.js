'use strict';

// complete_next (PROTOCOL.md, "The work queue"): Client#completeAndClaimNext,
// and workNext's one-round-trip-a-job mode (takeNext / job / stopSignal).
// Against real daemons; a fake ROUTER answers the malformed replies.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const { withDaemon, rejectsWith, uniqueId, sleep, withFakeDaemon } = require('./helpers');

/** Records the op of every request `client` sends (its typed methods go through request()). */
function recordOps(client) {
  const ops = [];
  const original = client.request.bind(client);
  client.request = (op, fields, options) => {
    ops.push(op);
    return original(op, fields, options);
  };
  return ops;
}

/** The daemon's request count, not counting the stats request that asks. */
async function requestsServed(client, time) {
  return (await client.stats(time)).requests - 1;
}

describe('completeAndClaimNext, client clock', () => {
  let daemon, c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [daemon, c, other] = f; });

  it('completes the job and claims the next one in one request', async () => {
    const q = uniqueId('q');
    const [a, b, d] = [uniqueId('a'), uniqueId('b'), uniqueId('d')];
    await c.enqueue(a, { queue: q, payload: 'first', now: 10 });
    await c.enqueue(b, { queue: q, payload: Buffer.from([0, 1, 2]), now: 10 });
    await c.enqueue(d, { queue: q, now: 10 });
    await c.enqueue(uniqueId('elsewhere'), { queue: uniqueId('q'), priority: 99, now: 10 });
    const job = await c.claimNext(q, 'w', 30, { now: 10 });
    assert.equal(job.id, a);

    const sent = [];
    const original = c.request.bind(c);
    c.request = (op, fields, options) => {
      sent.push([op, fields]);
      return original(op, fields, options);
    };
    let reply;
    try {
      reply = await c.completeAndClaimNext(a, 'w', job.fence, 'r1', q, 30, { now: 11 });
    } finally {
      delete c.request;
    }
    assert.deepEqual(sent, [['complete_next',
      { id: a, owner: 'w', fence: 1, result: 'r1', queue: q, ttl: 30, now: 11 }]]);
    assert.equal(reply.completed, true);
    assert.deepEqual(Object.keys(reply).sort(), ['completed', 'next']);
    assert.deepEqual(reply.next, { id: b, fence: 1, payload: Buffer.from([0, 1, 2]), attempts: 1 });
    assert.ok(Buffer.isBuffer(reply.next.payload));
    assert.deepEqual(await c.state(a), { id: a, owner: 'w', until: 40, fence: 1, result: 'r1', done: true });
    assert.equal(await other.check(b, 'w', 1, { now: 11 }), true);

    // An undefined result is sent as nil; the last job leaves next null.
    assert.deepEqual(await c.completeAndClaimNext(b, 'w', 1, undefined, q, 30, { now: 12 }),
      { completed: true, next: { id: d, fence: 1, payload: null, attempts: 1 } });
    assert.equal((await c.state(b)).result, null);
    assert.deepEqual(await c.completeAndClaimNext(d, 'w', 1, 'r3', q, 30, { now: 13 }),
      { completed: true, next: null });
  });

  it('a stale fence completes nothing, yet the next job is still claimed', async () => {
    const q = uniqueId('q');
    const [s1, s2] = [uniqueId('s1'), uniqueId('s2')];
    await c.enqueue(s1, { queue: q, now: 100 });
    await c.enqueue(s2, { queue: q, payload: 'p2', now: 100 });
    assert.equal((await c.claimNext(q, 'w', 30, { now: 100 })).id, s1);
    assert.equal(await c.release(s1, 'w', 1), true);
    assert.equal(await other.claim(s1, 'w2', 30, { now: 101 }), 2); // a newer lease
    const before = await c.state(s1);

    assert.deepEqual(await c.completeAndClaimNext(s1, 'w', 1, 'stale', q, 30, { now: 102 }),
      { completed: false, next: { id: s2, fence: 1, payload: 'p2', attempts: 1 } });
    assert.deepEqual(await c.state(s1), before);
    assert.equal(before.done, false);
    assert.equal(before.result, null);

    // The current lease completes; once done, a second completion is refused (queue empty).
    assert.deepEqual(await other.completeAndClaimNext(s1, 'w2', 2, 'fresh', q, 30, { now: 103 }),
      { completed: true, next: null });
    assert.deepEqual(await other.completeAndClaimNext(s1, 'w2', 2, 'again', q, 30, { now: 104 }),
      { completed: false, next: null });
    assert.equal((await c.state(s1)).result, 'fresh');
  });

  it('after the lease ended, the claim that follows may take the same job, with the next fence', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    await c.enqueue(id, { queue: q, payload: 'x', now: 200 });
    const job = await c.claimNext(q, 'w', 10, { now: 200 });
    assert.deepEqual(await c.completeAndClaimNext(id, 'w', job.fence, 'late', q, 10, { now: 210 }),
      { completed: false, next: { id, fence: 2, payload: 'x', attempts: 2 } });
    assert.equal((await c.state(id)).done, false);
  });

  it('an empty queue: next is null, at once (there is no wait)', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    await c.enqueue(id, { queue: q, now: 300 });
    await c.enqueue(uniqueId('later'), { queue: q, delay: 60, now: 300 });
    const job = await c.claimNext(q, 'w', 30, { now: 300 });
    const started = Date.now();
    assert.deepEqual(await c.completeAndClaimNext(id, 'w', job.fence, 'ok', q, 30, { now: 301 }),
      { completed: true, next: null });
    assert.deepEqual(await c.completeAndClaimNext(uniqueId('missing'), 'w', 1, 'x', uniqueId('q'), 30,
      { now: 301 }), { completed: false, next: null });
    assert.ok(Date.now() - started < 1000);
    assert.equal((await c.stats({ now: 301 })).waiting_claims, 0);
  });

  it('a refused request applies neither half', async () => {
    const q = uniqueId('q');
    const [a, b] = [uniqueId('a'), uniqueId('b')];
    await c.enqueue(a, { queue: q, now: 400 });
    await c.enqueue(b, { queue: q, now: 400 });
    const { fence } = await c.claimNext(q, 'w', 30, { now: 400 });
    await rejectsWith(c.completeAndClaimNext(a, 'w', fence, 'r', q, 0, { now: 401 }), 'invalid_argument', /ttl/);
    await rejectsWith(c.completeAndClaimNext(a, 'w', fence, 'r', '', 30, { now: 401 }),
      'invalid_argument', /queue/);
    await rejectsWith(c.completeAndClaimNext(a, 'w', fence, 'r', q, 30), 'invalid_argument', /now/);
    await rejectsWith(c.completeAndClaimNext(a, 'w', 1.5, 'r', q, 30, { now: 401 }), 'bad_request', /fence/);
    await rejectsWith(c.completeAndClaimNext(a, 'w', fence, 42, q, 30, { now: 401 }), 'bad_request', /result/);
    // Checked on the client, nothing sent: there is no wait, and options are an object.
    await rejectsWith(c.completeAndClaimNext(a, 'w', fence, 'r', q, 30, { wait: 5, now: 401 }),
      'invalid_argument', /wait/);
    await rejectsWith(c.completeAndClaimNext(a, 'w', fence, 'r', q, 30, 401), 'invalid_argument', /object/);
    assert.equal((await c.state(a)).done, false);
    assert.equal(await c.check(a, 'w', fence, { now: 401 }), true);
    assert.equal((await c.list({ queue: q, state: 'ready', now: 401 }))[0]?.id, b);
  });
});

describe('completeAndClaimNext: the reply is checked', () => {
  const malformed = [
    null, true, [], { completed: true }, { next: null }, { completed: 1, next: null },
    { completed: true, next: 'c2' }, { completed: true, next: { id: 'c2', fence: 1 } },
    { completed: true, next: { id: 'c2', fence: 1.5, payload: null, attempts: 1 } },
    { completed: false, next: { id: 'c2', fence: 1, payload: 7, attempts: 1 } },
  ];
  let router;
  let endpoint;
  withFakeDaemon((fake) => ({ router, endpoint } = fake));

  for (const result of malformed) {
    it(`bad_reply for the result ${JSON.stringify(result)}`, async () => {
      const client = new Client(endpoint, { timeoutMs: 5000 });
      try {
        const call = client.completeAndClaimNext('c1', 'w', 1, 'r', 'q', 10);
        const [identity, payload] = await router.receive();
        const request = codec.decode(payload);
        assert.equal(request.op, 'complete_next');
        await router.send([identity, codec.encode({ ok: true, rid: request.rid, result })]);
        await rejectsWith(call, 'bad_reply', /complete_next/);
      } finally {
        await client.close();
      }
    });
  }
});

describe('workNext with takeNext: one round trip a job', () => {
  let daemon, c, other;
  withDaemon({ clock: 'server' }, 2, (...f) => { [daemon, c, other] = f; });

  /** The loop a worker runs: takeNext, and the next job passed back as `job`. */
  async function drain(client, q, fn, options = {}) {
    const outcomes = [];
    let next = null;
    for (;;) {
      const outcome = await client.workNext(q, 'w', 30, fn, { wait: 0, ...options, takeNext: true, job: next });
      if (outcome === null) return outcomes;
      outcomes.push(outcome);
      next = outcome.next;
    }
  }

  it('drains 10 jobs with 10 complete_next and one claim_next per idle spell (not ~20 requests)', async () => {
    const q = uniqueId('q');
    const ids = Array.from({ length: 10 }, (_, i) => `${q}-${String(i).padStart(2, '0')}`);
    for (const id of ids) await other.enqueue(id, { queue: q, payload: id });
    const worker = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      const ops = recordOps(worker);
      const before = await requestsServed(other);
      const outcomes = await drain(worker, q, ({ payload }) => `did ${payload}`);
      const used = await requestsServed(other) - before - 1; // - the first requestsServed
      assert.deepEqual(outcomes.map((o) => o.id), ids);
      assert.ok(outcomes.every((o) => o.completed && o.result === `did ${o.id}`));
      assert.deepEqual(ops, ['claim_next', ...Array(10).fill('complete_next'), 'claim_next']);
      assert.equal(used, ops.length);
      assert.ok(used <= 10 + 2, `${used} requests for 10 jobs`);
      assert.deepEqual(outcomes[0], { id: ids[0], fence: 1, attempts: 1, completed: true,
        result: `did ${ids[0]}`, next: { id: ids[1], fence: 1, payload: ids[1], attempts: 1 } });
      assert.equal(outcomes[9].next, null);
    } finally {
      await worker.close();
    }
    const stats = (await other.stats()).queues[q];
    assert.equal(stats.done, 10);
    assert.equal(stats.leased, 0);
  });

  it('without takeNext: a claim_next and a complete a job, and the outcome has no next', async () => {
    const q = uniqueId('q');
    for (let i = 0; i < 3; i++) await other.enqueue(`${q}-${i}`, { queue: q });
    const worker = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      const ops = recordOps(worker);
      const outcome = await worker.workNext(q, 'w', 30, () => 'r', { wait: 0 });
      assert.deepEqual(outcome, { id: `${q}-0`, fence: 1, attempts: 1, completed: true, result: 'r' });
      assert.deepEqual(ops, ['claim_next', 'complete']);
      assert.equal((await other.state(`${q}-1`)).fence, 0);
    } finally {
      await worker.close();
    }
  });

  it('a refused completion is lost, and the job that came with it runs next', async () => {
    const q = uniqueId('q');
    const [r1, r2] = [uniqueId('r1'), uniqueId('r2')];
    await other.enqueue(r1, { queue: q, priority: 1 });
    await other.enqueue(r2, { queue: q });
    const outcomes = await drain(c, q, async ({ id, owner, fence }) => {
      if (id === r1) { // taken over without the renewer noticing (renewEveryMs is long)
        assert.equal(await other.release(id, owner, fence), true);
        assert.equal(await other.claim(id, 'other', 30), fence + 1);
      }
      return `result of ${id}`;
    }, { renewEveryMs: 60000 });
    assert.deepEqual(outcomes.map((o) => [o.id, o.completed]), [[r1, false], [r2, true]]);
    assert.equal(outcomes[0].next.id, r2);
    assert.equal((await other.state(r1)).owner, 'other');
    assert.equal((await other.state(r1)).done, false);
    assert.equal((await other.state(r2)).result, `result of ${r2}`);
  });

  it('a job that throws is failed as before: no next is claimed, and it rethrows', async () => {
    const q = uniqueId('q');
    const [f1, f2] = [uniqueId('f1'), uniqueId('f2')];
    await other.enqueue(f1, { queue: q, priority: 1 });
    await other.enqueue(f2, { queue: q });
    const boom = new Error('no');
    await assert.rejects(c.workNext(q, 'w', 30, () => { throw boom; }, { wait: 0, takeNext: true }),
      (err) => err === boom);
    const rows = await other.list({ queue: q });
    assert.deepEqual(rows.map((r) => [r.id, r.state, r.error]).sort(),
      [[f1, 'delayed', 'no'], [f2, 'ready', null]].sort());
  });

  it('stop during the job: it is completed without claiming the next job', async () => {
    const q = uniqueId('q');
    const [s1, s2] = [uniqueId('s1'), uniqueId('s2')];
    await other.enqueue(s1, { queue: q, priority: 1 });
    await other.enqueue(s2, { queue: q });
    const stop = new AbortController();
    const ops = recordOps(c);
    try {
      const outcome = await c.workNext(q, 'w', 30, ({ signal }) => {
        stop.abort();
        assert.equal(signal.aborted, false, 'the stop does not abort the job');
        return 'done';
      }, { wait: 0, takeNext: true, stopSignal: stop.signal });
      assert.deepEqual(outcome, { id: s1, fence: 1, attempts: 1, completed: true, result: 'done', next: null });
      assert.deepEqual(ops, ['claim_next', 'complete']);
    } finally {
      delete c.request;
    }
    assert.equal((await other.state(s2)).fence, 0);
    // Stopped: nothing more is claimed.
    assert.equal(await c.workNext(q, 'w', 30, () => 'never', { wait: 0, stopSignal: stop.signal }), null);
    assert.equal((await other.state(s2)).fence, 0);
  });

  it('stop while the completion is on its way: the job it claimed is released untouched', async () => {
    const q = uniqueId('q');
    const ids = [uniqueId('x1'), uniqueId('x2'), uniqueId('x3')];
    for (const [i, id] of ids.entries()) await other.enqueue(id, { queue: q, priority: 3 - i });
    const stop = new AbortController();
    const worker = new Client(daemon.endpoint, { timeoutMs: 5000 });
    const original = worker.completeAndClaimNext.bind(worker);
    worker.completeAndClaimNext = async (...args) => {
      const reply = await original(...args);
      stop.abort(); // as if a SIGTERM handler ran meanwhile
      return reply;
    };
    const ran = [];
    try {
      const outcome = await worker.workNext(q, 'w', 30, ({ id }) => { ran.push(id); return 'ok'; },
        { wait: 0, takeNext: true, stopSignal: stop.signal });
      assert.equal(outcome.completed, true);
      assert.equal(outcome.next, null);
    } finally {
      await worker.close();
    }
    assert.deepEqual(ran, [ids[0]]);
    const [x2, x3] = [await other.state(ids[1]), await other.state(ids[2])];
    assert.equal(x2.owner, null);
    assert.equal(x2.fence, 1); // claimed once, released untouched
    assert.equal(x3.fence, 0);
    assert.equal((await other.claimNext(q, 'next', 30)).id, ids[1]);
  });

  it('stop before a held job runs: it is released untouched and fn is not called', async () => {
    const q = uniqueId('q');
    const [h1, h2] = [uniqueId('h1'), uniqueId('h2')];
    await other.enqueue(h1, { queue: q, priority: 1 });
    await other.enqueue(h2, { queue: q });
    const first = await c.workNext(q, 'w', 30, () => 'ok', { wait: 0, takeNext: true });
    assert.equal(first.next.id, h2);
    assert.equal(await other.check(h2, 'w', first.next.fence), true);
    const stop = new AbortController();
    stop.abort();
    let called = false;
    assert.equal(await c.workNext(q, 'w', 30, () => { called = true; },
      { takeNext: true, job: first.next, stopSignal: stop.signal }), null);
    assert.equal(called, false);
    const row = await other.state(h2);
    assert.deepEqual([row.owner, row.fence, row.done], [null, 1, false]);
  });

  it('stop during the long-poll: a job that arrives afterwards is released untouched', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    const stop = new AbortController();
    let called = false;
    const running = c.workNext(q, 'w', 30, () => { called = true; },
      { wait: 5, takeNext: true, stopSignal: stop.signal });
    for (let i = 0; i < 200 && (await other.stats()).waiting_claims < 1; i++) await sleep(10);
    stop.abort();
    await other.enqueue(id, { queue: q });
    assert.equal(await running, null);
    assert.equal(called, false);
    const row = await other.state(id);
    assert.deepEqual([row.owner, row.fence], [null, 1]);
  });

  it('refuses malformed takeNext, job and stopSignal options before claiming anything', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    await other.enqueue(id, { queue: q });
    let ran = false;
    const fn = () => { ran = true; };
    await rejectsWith(c.workNext(q, 'w', 30, fn, { takeNext: 'yes' }), 'invalid_argument', /takeNext/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { job: id }), 'invalid_argument', /job/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { job: { id, fence: '1', attempts: 1 } }),
      'invalid_argument', /job/);
    await rejectsWith(c.workNext(q, 'w', 30, fn, { stopSignal: true }), 'invalid_argument', /stopSignal/);
    assert.equal(ran, false);
    assert.equal((await other.state(id)).fence, 0);
  });
});
