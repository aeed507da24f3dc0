'use strict';

// Headers (issue 33, C3.18): a map of string to string kept with a job (a
// W3C traceparent, at most 4,096 bytes), given back by every claim of the
// job and by job, only when the job has some; workNext hands them to the job
// function. The plain path: no OpenTelemetry propagator is registered in this
// process, so the client adds nothing (trace.test.js does the rest). Against
// a real daemon with the server clock.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { withDaemon, rejectsWith, uniqueId, recordRequests } = require('./helpers');

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACE = { traceparent: TRACEPARENT, tracestate: 'vendor=a' };

describe('headers: the request', () => {
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [, c] = f; });

  it('are sent as given, only when given, after max_runtime (before wait)', async () => {
    const q = uniqueId('q');
    const { sent, restore } = recordRequests(c);
    try {
      assert.equal(await c.enqueue(`${q}-a`, { queue: q }), true);
      // The caller's key order does not matter: the wire's is the C++ encoder's.
      assert.equal(await c.enqueue(`${q}-b`, { headers: TRACE, maxRuntime: 60, group: 'g', queue: q }), true);
      const keyed = await c.enqueue(`${q}-c`, { headers: { x: '1' }, key: uniqueId('k'), queue: q });
      assert.equal(keyed.created, true);
      assert.deepEqual(await c.enqueueMany([
        { headers: { y: '2' }, id: `${q}-d`, queue: q }, { id: `${q}-e` }, { id: `${q}-f`, headers: undefined },
      ]), [true, true, true]);
      assert.equal(await c.enqueueAndWait(`${q}-g`, { headers: { z: '3' }, wait: 0, maxRuntime: 30, queue: q }),
        null);
      assert.deepEqual(await c.enqueueFanIn([{ id: `${q}-h1`, headers: { p: '1' } }],
        { id: `${q}-h`, headers: { c: '2' } }), [true, true]);
    } finally {
      restore();
    }
    const fields = sent.map(([, f]) => f);
    assert.deepEqual(fields[0], { id: `${q}-a`, queue: q });
    assert.deepEqual(Object.keys(fields[1]), ['id', 'queue', 'group', 'max_runtime', 'headers']);
    assert.deepEqual(fields[1].headers, TRACE);
    assert.deepEqual(Object.keys(fields[2]), ['id', 'queue', 'key', 'headers']);
    assert.deepEqual(fields[3].jobs, [{ id: `${q}-d`, queue: q, headers: { y: '2' } }, { id: `${q}-e` },
      { id: `${q}-f` }]);
    assert.deepEqual(Object.keys(fields[4]), ['id', 'queue', 'max_runtime', 'headers', 'wait']);
    assert.deepEqual(fields[5].jobs, [{ id: `${q}-h1`, headers: { p: '1' } },
      { id: `${q}-h`, after: [`${q}-h1`], headers: { c: '2' } }]);
  });

  it('traceContext must be a boolean', async () => {
    const { Client, FenceqError } = require('fenceq');
    assert.throws(() => new Client('ipc:///tmp/fq-none.sock', { traceContext: 'no' }),
      (err) => err instanceof FenceqError && err.code === 'invalid_argument');
    const off = new Client('ipc:///tmp/fq-none.sock', { traceContext: false });
    assert.equal(off.traceContext, false);
    assert.equal(c.traceContext, true);
    await off.close();
  });
});

describe('headers: given back', () => {
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [, c] = f; });

  it('C3.18 by claimNext, completeAndClaimNext\'s next and job; absent for a job without', async () => {
    const q = uniqueId('h');
    assert.equal(await c.enqueue(`${q}-one`, { queue: q, headers: TRACE }), true);
    assert.equal(await c.enqueue(`${q}-plain`, { queue: q }), true);
    const job = await c.claimNext(q, 'W', 30);
    assert.equal(job.id, `${q}-one`);
    assert.deepEqual(job.headers, TRACE);
    assert.deepEqual((await c.job(`${q}-one`)).headers, TRACE);
    const r = await c.completeAndClaimNext(job.id, 'W', job.fence, 'ok', q, 30);
    assert.equal(r.completed, true);
    assert.equal(r.next.id, `${q}-plain`);
    assert.deepEqual(Object.keys(r.next).sort(), ['attempts', 'fence', 'id', 'payload']);
    assert.equal('headers' in (await c.job(`${q}-plain`)), false);
    assert.deepEqual((await c.job(`${q}-one`)).headers, TRACE); // still there once done
  });

  it('by claimNext with max and completeMany\'s next, for the entries of a mixed enqueueMany', async () => {
    const q = uniqueId('m');
    assert.deepEqual(await c.enqueueMany([
      { id: `${q}-1`, queue: q, headers: { a: '1' } },
      { id: `${q}-2`, queue: q },
      { id: `${q}-3`, queue: q, headers: { b: '', c: 'é' } },
    ]), [true, true, true]);
    const jobs = await c.claimNext(q, 'W', 30, { max: 2 });
    assert.deepEqual(jobs.map((j) => [j.id, j.headers]), [[`${q}-1`, { a: '1' }], [`${q}-2`, undefined]]);
    assert.equal('headers' in jobs[1], false);
    const done = await c.completeMany(jobs.map((j) => ({ id: j.id, owner: 'W', fence: j.fence, result: 'ok' })),
      { next: { queue: q, ttl: 30, max: 5 } });
    assert.deepEqual(done.completed, [true, true]);
    assert.deepEqual(done.next.map((j) => [j.id, j.headers]), [[`${q}-3`, { b: '', c: 'é' }]]);
  });

  it('kept across attempts, and in awaitJob\'s and enqueueAndWait\'s records', async () => {
    const q = uniqueId('r');
    const id = `${q}-r`;
    assert.equal(await c.enqueue(id, { queue: q, headers: TRACE }), true);
    const first = await c.claimNext(q, 'W', 30);
    assert.equal(await c.fail(id, 'W', first.fence, 'boom', { retryIn: 0 }), true);
    const second = await c.claimNext(q, 'W', 30);
    assert.equal(second.attempts, 2);
    assert.deepEqual(second.headers, TRACE);
    assert.equal(await c.complete(id, 'W', second.fence, 'ok'), true);
    assert.deepEqual((await c.awaitJob(id)).headers, TRACE);
    const record = await c.enqueueAndWait(id, { headers: { ignored: 'x' } }); // exists: unchanged
    assert.equal(record.state, 'done');
    assert.deepEqual(record.headers, TRACE);
  });

  it('{} is no headers; 4,096 bytes of keys and values (UTF-8) are taken', async () => {
    const q = uniqueId('e');
    assert.equal(await c.enqueue(`${q}-empty`, { queue: q, headers: {} }), true);
    assert.equal('headers' in (await c.claimNext(q, 'W', 30)), false);
    const headers = { k: `${'é'.repeat(2047)}x` }; // 1 + 4094 + 1 bytes
    assert.equal(Buffer.byteLength(Object.keys(headers)[0]) + Buffer.byteLength(headers.k), 4096);
    assert.equal(await c.enqueue(`${q}-big`, { queue: q, headers }), true);
    assert.deepEqual((await c.claimNext(q, 'W', 30)).headers, headers);
  });
});

describe('headers: bad input', () => {
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [, c] = f; });

  const cases = [
    ['a value that is not a string', { a: 1 }, 'bad_request'],
    ['not a map', ['traceparent', TRACEPARENT], 'bad_request'],
    ['a string', 'traceparent', 'bad_request'],
    ['a 5,000-byte value', { k: 'x'.repeat(5000) }, 'invalid_argument'],
    ['4,098 bytes in all', { a: 'x'.repeat(2048), b: 'y'.repeat(2048) }, 'invalid_argument'],
    ['an empty key', { '': 'x' }, 'invalid_argument'],
  ];
  for (const [name, headers, code] of cases) {
    it(`${name}: ${code}, in every enqueue-like method, and nothing changes`, async () => {
      const q = uniqueId('bad');
      assert.equal(await c.enqueue(`${q}-keep`, { queue: q }), true);
      await rejectsWith(c.enqueue(`${q}-1`, { queue: q, headers }), code);
      await rejectsWith(c.enqueue(`${q}-2`, { queue: q, key: 'k', headers }), code);
      await rejectsWith(c.enqueueAndWait(`${q}-3`, { queue: q, headers }), code);
      await rejectsWith(c.enqueueMany([{ id: `${q}-4`, queue: q }, { id: `${q}-5`, queue: q, headers }]),
        code, /jobs\[1\]/);
      for (const n of [1, 2, 3, 4, 5]) assert.equal(await c.job(`${q}-${n}`), null);
      assert.equal((await c.stats()).queues[q].ready, 1);
    });
  }
});

describe('headers: workNext hands them to the job function', () => {
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [, c] = f; });

  /** Enqueues three jobs (with, without, with other headers) on a new queue. */
  async function threeJobs() {
    const q = uniqueId('work');
    assert.deepEqual(await c.enqueueMany([
      { id: `${q}-1`, queue: q, headers: { traceparent: TRACEPARENT } },
      { id: `${q}-2`, queue: q },
      { id: `${q}-3`, queue: q, headers: { tenant: '42' } },
    ]), [true, true, true]);
    return q;
  }

  const expected = (q) => [[`${q}-1`, { traceparent: TRACEPARENT }], [`${q}-2`, undefined],
    [`${q}-3`, { tenant: '42' }]];

  it('one at a time, the next job taken with the completion (takeNext)', async () => {
    const q = await threeJobs();
    const seen = [];
    let next = null;
    for (let i = 0; i < 3; i++) {
      const outcome = await c.workNext(q, 'W', 30, (job) => {
        seen.push([job.id, job.headers]);
        return job.headers?.traceparent ?? 'none';
      }, { takeNext: true, job: next, wait: 1 });
      next = outcome.next;
    }
    assert.equal(next, null);
    assert.deepEqual(seen, expected(q));
    assert.equal((await c.job(`${q}-1`)).result, TRACEPARENT);
    assert.equal((await c.job(`${q}-2`)).result, 'none');
  });

  it('with prefetch: claimNext with max and completeMany\'s next', async () => {
    const q = await threeJobs();
    const seen = [];
    let held = [];
    while (seen.length < 3) {
      const round = await c.workNext(q, 'W', 30, (job) => {
        seen.push([job.id, job.headers]);
        return 'ok';
      }, { prefetch: 2, jobs: held, wait: 1 });
      held = round?.next ?? [];
    }
    assert.deepEqual(seen, expected(q));
  });
});
