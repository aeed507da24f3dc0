'use strict';

// The work queue (protocol v1, "The work queue (additive to version 1)")
// through the Node client, against a real fenceqd: enqueue's new fields,
// claimNext with long-poll, fail, check, retry, and the operator ops.
//
// Client clock: every test takes its own stretch of time from epoch(), later
// than every earlier test's, because the daemon keeps the highest `now` it
// saw (C2.2) and uses it for ops that leave `now` out and for held claims.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Client, FenceqError } = require('fenceq');
const { errorText } = require('../lib/worker');
const { startDaemon, withDaemon, rejectsWith, uniqueId, sleep } = require('./helpers');

let clockBase = 0;
/** A start time later than any `now` an earlier test of this file used. */
function epoch() {
  clockBase += 100000;
  return clockBase;
}

/** Polls stats until `n` claims are held by the daemon (<= ~2 s). */
async function waitForParked(client, n, time) {
  for (let i = 0; i < 200; i++) {
    const { waiting_claims: parked } = await client.stats(time);
    if (parked >= n) return;
    await sleep(10);
  }
  assert.fail(`the daemon never held ${n} claim_next requests`);
}

/** The `list` row of one id: the first row after a string just below it. */
async function row(client, id, options) {
  const last = id.charCodeAt(id.length - 1);
  const below = `${id.slice(0, -1)}${String.fromCharCode(last - 1)}\u{10FFFF}`;
  const rows = await client.list({ limit: 1, after: below, ...options });
  assert.equal(rows[0]?.id, id, `list has no row ${id}`);
  return rows[0];
}

/** Polls stats until the daemon holds no claim (<= ~2 s). */
async function waitForNoneParked(client, time) {
  for (let i = 0; i < 200; i++) {
    if ((await client.stats(time)).waiting_claims === 0) return;
    await sleep(10);
  }
  assert.fail('the daemon still holds claim_next requests');
}

describe('work queue, client clock', () => {
  let daemon, c, other;
  withDaemon({ clock: 'client' }, 2, (...f) => { [daemon, c, other] = f; });

  describe('enqueue', () => {
    it('takes queue, payload, priority, delay and maxAttempts (sent snake_case)', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      assert.equal(await c.enqueue(id, {
        queue: q, payload: 'p', priority: 7, delay: 30, maxAttempts: 4, now: t,
      }), true);
      assert.deepEqual(await row(c, id, { now: t }), {
        id, queue: q, state: 'delayed', priority: 7, attempts: 0, max_attempts: 4, fence: 0,
        owner: null, until: 0, not_before: t + 30, error: null, created: t,
      });
      // The C3.2 row is unchanged in shape.
      assert.deepEqual(await c.state(id),
        { id, owner: null, until: 0, fence: 0, result: null, done: false });
    });

    it('C3.1 enqueue(id) alone still works: queue "default", no payload, priority 0', async () => {
      const t = epoch();
      const id = uniqueId();
      assert.equal(await c.enqueue(id), true);
      // Enqueued without `now`: created at the daemon's latest client time.
      const { created, ...rest } = await row(c, id, { now: t });
      assert.equal(typeof created, 'number');
      assert.deepEqual(rest, {
        id, queue: 'default', state: 'ready', priority: 0, attempts: 0, max_attempts: 25, fence: 0,
        owner: null, until: 0, not_before: 0, error: null,
      });
    });

    it('C3.1 a repeated enqueue changes nothing, whatever its options', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      assert.equal(await c.enqueue(id, { queue: q, payload: 'first', priority: 1, now: t }), true);
      const job = await c.claimNext(q, 'w1', 10, { now: t });
      assert.deepEqual(job, { id, fence: 1, payload: 'first', attempts: 1 });
      assert.equal(await c.enqueue(id, {
        queue: uniqueId('q'), payload: 'second', priority: 9, delay: 5, maxAttempts: 1, now: t + 1,
      }), false);
      const r = await row(c, id, { now: t + 1 });
      assert.equal(r.queue, q);
      assert.equal(r.priority, 1);
      assert.equal(r.max_attempts, 25);  // the default it was enqueued with, kept
      assert.equal(r.state, 'leased');
      assert.equal(r.owner, 'w1');
      assert.equal(await c.check(id, 'w1', 1, { now: t + 1 }), true);
    });

    it('refuses bad fields with the daemon\'s codes, and C3.8 creates nothing', async () => {
      const t = epoch();
      const cases = [
        [{ priority: 1.5 }, 'bad_request', /priority/],
        [{ priority: 2 ** 31 }, 'invalid_argument', /priority/],
        [{ priority: -(2 ** 31) - 1 }, 'invalid_argument', /priority/],
        [{ maxAttempts: -1 }, 'invalid_argument', /max_attempts/],
        [{ maxAttempts: 2.5 }, 'bad_request', /max_attempts/],
        [{ delay: -1 }, 'invalid_argument', /delay/],
        [{ delay: NaN }, 'invalid_argument', /delay/],
        [{ queue: '' }, 'invalid_argument', /queue/],
        [{ queue: 'x'.repeat(257) }, 'invalid_argument', /queue/],
        [{ queue: 5 }, 'bad_request', /queue/],
        [{ payload: Buffer.alloc(256 * 1024 + 1) }, 'invalid_argument', /payload/],
        [{ payload: 'x'.repeat(256 * 1024 + 1) }, 'invalid_argument', /payload/],
        [{ payload: 42 }, 'bad_request', /payload/],
        [{ payload: ['a'] }, 'bad_request', /payload/],
      ];
      for (const [options, code, pattern] of cases) {
        const id = uniqueId('refused');
        await rejectsWith(c.enqueue(id, { ...options, now: t }), code, pattern);
        assert.equal(await c.state(id), null, `${JSON.stringify(options)} created the job`);
      }
      // The limits themselves are accepted.
      const edge = uniqueId('edge');
      assert.equal(await c.enqueue(edge, {
        queue: 'x'.repeat(256), payload: Buffer.alloc(256 * 1024), priority: -(2 ** 31), now: t,
      }), true);
    });

    it('refuses unknown or misspelt options on the client, before sending', async () => {
      const id = uniqueId('refused');
      await rejectsWith(c.enqueue(id, { max_attempts: 3 }), 'invalid_argument', /max_attempts.*maxAttempts/);
      await rejectsWith(c.enqueue(id, 'payload'), 'invalid_argument', /options must be an object/);
      await rejectsWith(c.claimNext('q', 'w', 10, { waitSeconds: 1 }), 'invalid_argument', /waitSeconds/);
      await rejectsWith(c.fail(id, 'w', 1, 'e', { retry_in: 1 }), 'invalid_argument', /retry_in/);
      await rejectsWith(c.list({ status: 'dead' }), 'invalid_argument', /status/);
      await rejectsWith(c.purge(0, { olderThan: 1 }), 'invalid_argument', /olderThan/);
      await rejectsWith(c.stats({ queue: 'q' }), 'invalid_argument', /queue/);
      await rejectsWith(c.check(id, 'w', 1, [1]), 'invalid_argument', /options/);
      assert.equal(await c.state(id), null);
    });
  });

  describe('payloads', () => {
    it('bin comes back as a Buffer and str as a string, byte for byte', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const binary = Buffer.from([0x00, 0xff, 0xc1, 0x80, 0x0a]); // not UTF-8
      const cases = [
        ['buffer', binary, binary],
        ['uint8array', new Uint8Array([1, 2, 3]), Buffer.from([1, 2, 3])],
        ['empty buffer', Buffer.alloc(0), Buffer.alloc(0)],
        ['string', 'héllo 🐢', 'héllo 🐢'],
        ['empty string', '', ''],
        ['json text', JSON.stringify({ to: 'a@b' }), '{"to":"a@b"}'],
        ['null', null, null],
        ['absent', undefined, null],
        ['max bin', Buffer.alloc(256 * 1024, 7), Buffer.alloc(256 * 1024, 7)],
      ];
      for (const [name, payload] of cases) {
        assert.equal(await c.enqueue(`${q}-${name}`, { queue: q, payload, now: t }), true);
      }
      for (const [name, , expected] of cases) {
        const job = await c.claimNext(q, 'w', 10, { now: t });
        assert.equal(job.id, `${q}-${name}`);
        if (expected === null) {
          assert.equal(job.payload, null, name);
        } else if (typeof expected === 'string') {
          assert.equal(typeof job.payload, 'string', name);
          assert.equal(job.payload, expected, name);
        } else {
          assert.ok(Buffer.isBuffer(job.payload), `${name}: a Buffer`);
          assert.ok(job.payload.equals(expected), name);
        }
      }
      assert.equal(await c.claimNext(q, 'w', 10, { now: t }), null);
    });

    it('a payload Buffer is the caller\'s own: later replies do not change it', async () => {
      const t = epoch();
      const q = uniqueId('q');
      await c.enqueue(uniqueId(), { queue: q, payload: Buffer.from('aaaa'), now: t });
      await c.enqueue(uniqueId(), { queue: q, payload: Buffer.from('bbbb'), now: t });
      const first = await c.claimNext(q, 'w', 10, { now: t });
      await c.claimNext(q, 'w', 10, { now: t });
      assert.ok(Buffer.isBuffer(first.payload));
      assert.equal(first.payload.toString(), 'aaaa');
    });
  });

  describe('claimNext', () => {
    it('claims by priority, then in enqueue order, as claim would (fence, owner, until)', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const order = [['a', 0], ['b', 5], ['c', 0], ['d', 5], ['e', -1], ['f', 0]];
      for (const [name, priority] of order) {
        await c.enqueue(`${q}-${name}`, { queue: q, priority, now: t });
      }
      await c.enqueue(`${q}-elsewhere`, { queue: `${q}-other`, priority: 100, now: t });
      const claimed = [];
      for (;;) {
        const job = await c.claimNext(q, 'w1', 10, { now: t + 1 });
        if (job === null) break;
        assert.equal(job.fence, 1);
        assert.equal(job.attempts, 1);
        claimed.push(job.id.slice(q.length + 1));
      }
      assert.deepEqual(claimed, ['b', 'd', 'a', 'c', 'f', 'e']);
      assert.deepEqual(await c.state(`${q}-a`),
        { id: `${q}-a`, owner: 'w1', until: t + 11, fence: 1, result: null, done: false });
      assert.equal((await c.state(`${q}-elsewhere`)).owner, null, 'another queue is not touched');
    });

    it('skips leased, done, delayed and dead jobs, and takes back an expired lease (C3.3)', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const [leased, done, delayed, dead] = ['leased', 'done', 'delayed', 'dead'].map((n) => `${q}-${n}`);
      await c.enqueue(leased, { queue: q, priority: 4, now: t });
      await c.enqueue(done, { queue: q, priority: 3, now: t });
      await c.enqueue(delayed, { queue: q, priority: 2, delay: 100, now: t });
      await c.enqueue(dead, { queue: q, priority: 1, maxAttempts: 1, now: t });
      assert.equal(await c.claim(leased, 'holder', 50, { now: t }), 1);
      assert.equal(await c.claim(done, 'holder', 50, { now: t }), 1);
      assert.equal(await c.complete(done, 'holder', 1, 'ok', { now: t }), true);
      assert.equal(await c.claim(dead, 'holder', 50, { now: t }), 1);
      assert.equal(await c.fail(dead, 'holder', 1, 'gave up', { now: t }), true);
      assert.equal(await c.claimNext(q, 'w', 10, { now: t + 49.5 }), null);
      // At now == until the lease has ended: claimable again, with the next fence.
      assert.deepEqual(await c.claimNext(q, 'w', 1000, { now: t + 50 }),
        { id: leased, fence: 2, payload: null, attempts: 2 });
      assert.equal(await c.claimNext(q, 'w', 10, { now: t + 99 }), null);
      assert.deepEqual(await c.claimNext(q, 'w', 10, { now: t + 100 }),
        { id: delayed, fence: 1, payload: null, attempts: 1 });
      assert.equal(await c.claimNext(q, 'w', 10, { now: t + 100 }), null);
    });

    it('refuses bad input: ttl, wait, queue, owner, and a missing now', async () => {
      const t = epoch();
      const q = uniqueId('q');
      await c.enqueue(uniqueId(), { queue: q, now: t });
      await rejectsWith(c.claimNext(q, 'w', 0, { now: t }), 'invalid_argument', /ttl/);
      await rejectsWith(c.claimNext(q, 'w', -1, { now: t }), 'invalid_argument', /ttl/);
      await rejectsWith(c.claimNext(q, 'w', 10), 'invalid_argument', /now/);
      await rejectsWith(c.claimNext(q, 'w', 10, { wait: -1, now: t }), 'invalid_argument', /wait/);
      await rejectsWith(c.claimNext(q, 'w', 10, { wait: 3601, now: t }), 'invalid_argument', /wait/);
      await rejectsWith(c.claimNext(q, 'w', 10, { wait: Infinity, now: t }), 'invalid_argument', /wait/);
      await rejectsWith(c.claimNext('', 'w', 10, { now: t }), 'invalid_argument', /queue/);
      await rejectsWith(c.claimNext(undefined, 'w', 10, { now: t }), 'bad_request', /queue/);
      await rejectsWith(c.claimNext(q, 7, 10, { now: t }), 'bad_request', /owner/);
      // C3.8: none of them claimed the job.
      assert.equal((await c.list({ queue: q, now: t }))[0].state, 'ready');
    });
  });

  describe('delay', () => {
    it('a delayed job is claimable by neither claimNext nor claim before its time', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, delay: 10, now: t });
      assert.equal((await row(c, id, { now: t })).not_before, t + 10);
      assert.equal(await c.claimNext(q, 'w', 10, { now: t + 9.9 }), null);
      assert.equal(await c.claim(id, 'w', 10, { now: t + 9.9 }), null);
      assert.equal((await row(c, id, { now: t + 9.9 })).state, 'delayed');
      assert.equal((await row(c, id, { now: t + 10 })).state, 'ready');
      assert.deepEqual(await c.claimNext(q, 'w', 10, { now: t + 10 }),
        { id, fence: 1, payload: null, attempts: 1 });
    });

    it('delay 0 and fractional delays are accepted', async () => {
      const t = epoch();
      const q = uniqueId('q');
      await c.enqueue(`${q}-0`, { queue: q, delay: 0, now: t });
      await c.enqueue(`${q}-half`, { queue: q, delay: 0.5, priority: 1, now: t });
      assert.equal((await c.claimNext(q, 'w', 10, { now: t })).id, `${q}-0`);
      assert.equal((await c.claimNext(q, 'w', 10, { now: t + 0.5 })).id, `${q}-half`);
    });
  });

  describe('fail', () => {
    it('keeps the error, ends the lease, and the job comes back after retryIn with a larger fence', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, payload: 'work', now: t });
      const first = await c.claimNext(q, 'w1', 30, { now: t });
      assert.equal(first.fence, 1);
      assert.equal(await c.fail(id, 'w1', first.fence, 'smtp timeout', { retryIn: 5, now: t + 1 }), true);
      assert.deepEqual(await row(c, id, { now: t + 1 }), {
        id, queue: q, state: 'delayed', priority: 0, attempts: 1, max_attempts: 25, fence: 1,
        owner: null, until: 0, not_before: t + 6, error: 'smtp timeout', created: t,
      });
      // The failed lease is over: no more writes with it.
      assert.equal(await c.check(id, 'w1', 1, { now: t + 1 }), false);
      assert.equal(await c.complete(id, 'w1', 1, 'late', { now: t + 1 }), false);
      assert.equal(await c.claimNext(q, 'w2', 30, { now: t + 5.9 }), null);
      const second = await c.claimNext(q, 'w2', 30, { now: t + 6 });
      assert.deepEqual(second, { id, fence: 2, payload: 'work', attempts: 2 });
      assert.equal(await c.complete(id, 'w2', 2, 'sent', { now: t + 7 }), true);
    });

    it('without retryIn the daemon backs off min(2^(attempts-1), 3600) seconds', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, now: t });
      let now = t;
      for (const [attempts, backoff] of [[1, 1], [2, 2], [3, 4], [4, 8]]) {
        const job = await c.claimNext(q, 'w', 30, { now });
        assert.equal(job.attempts, attempts);
        assert.equal(await c.fail(id, 'w', job.fence, `attempt ${attempts}`, { now }), true);
        assert.equal((await row(c, id, { now })).not_before, now + backoff, `after attempt ${attempts}`);
        now += backoff;
      }
    });

    it('is refused (false, nothing changes) unless the lease is current', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, now: t });
      const { fence } = await c.claimNext(q, 'w1', 10, { now: t });
      assert.equal(await c.fail(id, 'w2', fence, 'not mine', { now: t }), false);
      assert.equal(await c.fail(id, 'w1', fence + 1, 'future fence', { now: t }), false);
      assert.equal(await c.fail(id, 'w1', fence - 1, 'old fence', { now: t }), false);
      assert.equal(await c.fail(uniqueId('missing'), 'w1', fence, 'missing', { now: t }), false);
      let r = await row(c, id, { now: t });
      assert.equal(r.error, null);
      assert.equal(r.owner, 'w1');
      // After a complete, too.
      assert.equal(await c.complete(id, 'w1', fence, 'ok', { now: t + 9 }), true);
      assert.equal(await c.fail(id, 'w1', fence, 'after done', { now: t + 9 }), false);
      r = await row(c, id, { now: t + 9 });
      assert.equal(r.state, 'done');
      assert.equal(r.error, null);
      // And once the lease has ended (now == until).
      const late = uniqueId();
      await c.enqueue(late, { queue: q, now: t + 9 });
      const lease = await c.claimNext(q, 'w1', 10, { now: t + 9 });
      assert.equal(lease.id, late);
      assert.equal(await c.fail(late, 'w1', lease.fence, 'expired', { now: t + 19 }), false);
      r = await row(c, late, { now: t + 19 });
      assert.equal(r.error, null);
      assert.equal(r.not_before, 0);
    });

    it('refuses bad input with the daemon\'s codes', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, now: t });
      const { fence } = await c.claimNext(q, 'w1', 10, { now: t });
      await rejectsWith(c.fail(id, 'w1', fence, 'e'.repeat(64 * 1024 + 1), { now: t }), 'invalid_argument', /error/);
      await rejectsWith(c.fail(id, 'w1', fence, new Error('x'), { now: t }), 'bad_request', /error/);
      await rejectsWith(c.fail(id, 'w1', fence, null, { now: t }), 'bad_request', /error/);
      await rejectsWith(c.fail(id, 'w1', fence, 'e', { retryIn: -1, now: t }), 'invalid_argument', /retry_in/);
      await rejectsWith(c.fail(id, 'w1', fence + 0.5, 'e', { now: t }), 'bad_request', /fence/);
      await rejectsWith(c.fail(id, 'w1', fence, 'e'), 'invalid_argument', /now/);
      assert.equal(await c.check(id, 'w1', fence, { now: t }), true, 'C3.8: still leased');
      // The limit itself is accepted.
      assert.equal(await c.fail(id, 'w1', fence, 'e'.repeat(64 * 1024), { retryIn: 0, now: t }), true);
    });
  });

  describe('max attempts, dead jobs and retry', () => {
    it('maxAttempts claims, then dead: claims refused until retry revives it with a larger fence', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, payload: 'x', maxAttempts: 2, now: t });
      const one = await c.claimNext(q, 'w', 10, { now: t });
      assert.equal(await c.fail(id, 'w', one.fence, 'first', { retryIn: 0, now: t }), true);
      const two = await c.claimNext(q, 'w', 10, { now: t });
      assert.deepEqual([one.fence, one.attempts, two.fence, two.attempts], [1, 1, 2, 2]);
      assert.equal(await c.fail(id, 'w', two.fence, 'second', { retryIn: 0, now: t }), true);
      const dead = await row(c, id, { now: t + 1 });
      assert.equal(dead.state, 'dead');
      assert.equal(dead.error, 'second');
      assert.equal(dead.attempts, 2);
      assert.equal(await c.claimNext(q, 'w', 10, { now: t + 1 }), null);
      assert.equal(await c.claim(id, 'w', 10, { now: t + 1 }), null);
      assert.equal((await c.list({ queue: q, state: 'dead', now: t + 1 })).length, 1);

      assert.equal(await c.retry(id), true);
      assert.equal(await c.retry(id), false, 'no longer dead');
      const revived = await row(c, id, { now: t + 1 });
      assert.equal(revived.state, 'ready');
      assert.equal(revived.attempts, 0);
      assert.equal(revived.fence, 2, 'C1.2: the fence is kept');
      const three = await c.claimNext(q, 'w', 10, { now: t + 1 });
      assert.deepEqual(three, { id, fence: 3, payload: 'x', attempts: 1 });
      // The old leases stay stale.
      assert.equal(await c.check(id, 'w', 2, { now: t + 1 }), false);
      assert.equal(await c.check(id, 'w', 3, { now: t + 1 }), true);
    });

    it('the last attempt\'s lease expiring without a complete makes the job dead', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, maxAttempts: 1, now: t });
      assert.equal((await c.claimNext(q, 'w', 10, { now: t })).fence, 1);
      assert.equal((await row(c, id, { now: t + 9 })).state, 'leased');
      assert.equal((await row(c, id, { now: t + 10 })).state, 'dead');
      assert.equal(await c.claimNext(q, 'w', 10, { now: t + 10 }), null);
      assert.equal(await c.claim(id, 'w', 10, { now: t + 10 }), null);
      assert.equal(await c.retry(id), true);
      assert.equal(await c.claim(id, 'w', 10, { now: t + 11 }), 2);
    });

    it('retry refuses a job that is missing, ready, leased or done', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const [ready, leased, done] = ['ready', 'leased', 'done'].map((n) => `${q}-${n}`);
      for (const id of [ready, leased, done]) await c.enqueue(id, { queue: q, maxAttempts: 1, now: t });
      await c.claim(leased, 'w', 10, { now: t });
      await c.claim(done, 'w', 10, { now: t });
      await c.complete(done, 'w', 1, 'ok', { now: t });
      for (const id of [ready, leased, done, uniqueId('missing')]) {
        assert.equal(await c.retry(id), false, id);
      }
      assert.equal((await c.state(leased)).owner, 'w');
      assert.equal((await c.state(done)).done, true);
      await rejectsWith(c.retry(42), 'bad_request', /id/);
    });
  });

  describe('check', () => {
    it('is true only for the current lease, and changes nothing', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, now: t });
      const { fence } = await c.claimNext(q, 'w1', 10, { now: t });
      const before = await c.state(id);
      assert.equal(await c.check(id, 'w1', fence, { now: t + 9.9 }), true);
      assert.equal(await c.check(id, 'w2', fence, { now: t }), false);
      assert.equal(await c.check(id, 'w1', fence + 1, { now: t }), false);
      assert.equal(await c.check(id, 'w1', fence - 1, { now: t }), false);
      assert.equal(await c.check(id, 'w1', fence, { now: t + 10 }), false, 'at now == until it has ended');
      assert.equal(await c.check(uniqueId('missing'), 'w1', fence, { now: t }), false);
      assert.deepEqual(await c.state(id), before);
      assert.equal(await c.complete(id, 'w1', fence, 'ok', { now: t + 1 }), true);
      assert.equal(await c.check(id, 'w1', fence, { now: t + 1 }), false, 'done');
    });

    it('refuses bad input', async () => {
      const t = epoch();
      await rejectsWith(c.check('x', 'w', 1), 'invalid_argument', /now/);
      await rejectsWith(c.check('x', 'w', 1.5, { now: t }), 'bad_request', /fence/);
      await rejectsWith(c.check('x', 'w', 1, { now: NaN }), 'invalid_argument', /now/);
      await rejectsWith(c.check('x', undefined, 1, { now: t }), 'bad_request', /owner/);
    });
  });

  describe('purge', () => {
    it('removes finished jobs older than olderThan; a re-enqueued id continues its fence (C1.2)', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const [done, dead, open] = ['done', 'dead', 'open'].map((n) => `${q}-${n}`);
      await c.enqueue(done, { queue: q, now: t });
      await c.enqueue(dead, { queue: q, maxAttempts: 1, now: t });
      await c.enqueue(open, { queue: q, now: t });
      for (let fence = 1; fence <= 3; fence++) { // fence 3 on `done`
        assert.equal(await c.claim(done, 'w', 10, { now: t + fence * 10 }), fence);
      }
      assert.equal(await c.complete(done, 'w', 3, 'ok', { now: t + 30 }), true);
      assert.equal(await c.claim(dead, 'w', 10, { now: t + 30 }), 1);
      assert.equal(await c.fail(dead, 'w', 1, 'no', { now: t + 30 }), true);
      await c.claim(open, 'w', 1000, { now: t + 30 });

      assert.equal(await c.purge(100, { queue: q, now: t + 100 }), 0, 'finished 70 s ago');
      assert.equal(await c.purge(70, { queue: `${q}-other`, now: t + 100 }), 0, 'another queue');
      assert.equal(await c.purge(70, { queue: q, now: t + 100 }), 2);
      assert.equal(await c.state(done), null);
      assert.equal(await c.state(dead), null);
      assert.equal((await c.state(open)).fence, 1, 'an open job is never purged');
      assert.deepEqual((await c.list({ queue: q, now: t + 100 })).map((r) => r.id), [open]);

      assert.equal(await c.enqueue(done, { queue: q, now: t + 100 }), true);
      assert.equal((await c.state(done)).fence, 3);
      assert.deepEqual(await c.claimNext(q, 'w', 10, { now: t + 100 }),
        { id: done, fence: 4, payload: null, attempts: 1 });
      assert.equal(await c.enqueue(dead, { queue: q, now: t + 100 }), true);
      assert.equal(await c.claim(dead, 'w', 10, { now: t + 100 }), 2);
    });

    it('refuses bad input', async () => {
      const t = epoch();
      await rejectsWith(c.purge(-1, { now: t }), 'invalid_argument', /older_than/);
      await rejectsWith(c.purge(NaN, { now: t }), 'invalid_argument', /older_than/);
      await rejectsWith(c.purge(undefined, { now: t }), 'bad_request', /older_than/);
      await rejectsWith(c.purge(0, { queue: '', now: t }), 'invalid_argument', /queue/);
    });
  });

  describe('long-poll', () => {
    it('a held claimNext is answered by another client\'s enqueue', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      const started = Date.now();
      const claimed = c.claimNext(q, 'w', 10, { wait: 10, now: t });
      await waitForParked(other, 1, { now: t });
      assert.equal(await other.enqueue(id, { queue: q, payload: Buffer.from('hi'), now: t }), true);
      const job = await claimed;
      assert.ok(Date.now() - started < 5000, 'answered by the enqueue, not by the wait ending');
      assert.equal(job.id, id);
      assert.equal(job.fence, 1);
      assert.ok(job.payload.equals(Buffer.from('hi')));
      assert.equal((await c.state(id)).owner, 'w');
    });

    it('ends with null when the wait is over, past the client\'s own timeout', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const short = new Client(daemon.endpoint, { timeoutMs: 300 });
      try {
        const started = Date.now();
        assert.equal(await short.claimNext(q, 'w', 10, { wait: 0.7, now: t }), null);
        const took = Date.now() - started;
        assert.ok(took >= 650, `held for the wait (${took} ms)`);
        // Without the extension the same request times out on the client.
        await rejectsWith(short.request('claim_next', { queue: q, owner: 'w', ttl: 10, wait: 0.5, now: t }),
          'timeout', /claim_next/);
        await waitForNoneParked(c, { now: t }); // its wait ends in the daemon too
        await rejectsWith(short.request('ping', {}, { timeoutMs: 0 }), 'invalid_argument', /timeoutMs/);
      } finally {
        await short.close();
      }
    });

    it('a timeout beyond what a timer can hold (~24.8 days) means no timeout, not an instant one', async () => {
      const t = epoch();
      const patient = new Client(daemon.endpoint, { timeoutMs: 2 ** 32 });
      try {
        assert.equal((await patient.ping()).protocol, 1);
        assert.equal(await patient.claimNext(uniqueId('q'), 'w', 10, { wait: 0.1, now: t }), null);
      } finally {
        await patient.close();
      }
    });

    it('wait 0 answers at once; so does a wait when a job is there', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const started = Date.now();
      assert.equal(await c.claimNext(q, 'w', 10, { wait: 0, now: t }), null);
      await c.enqueue(uniqueId(), { queue: q, now: t });
      assert.notEqual(await c.claimNext(q, 'w', 10, { wait: 60, now: t }), null);
      assert.ok(Date.now() - started < 2000);
    });

    it('held claims are served first come, first served, one job each', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const waiters = ['w1', 'w2', 'w3', 'w4'].map((w) => c.claimNext(q, w, 10, { wait: 10, now: t }));
      await waitForParked(other, 4, { now: t });
      const ids = [1, 2, 3].map((i) => `${q}-${i}`);
      await other.enqueue(ids[0], { queue: q, now: t });
      const first = await waiters[0];
      assert.equal(first.id, ids[0]);
      await Promise.all(ids.slice(1).map((id) => other.enqueue(id, { queue: q, now: t })));
      const [second, third] = await Promise.all(waiters.slice(1, 3));
      assert.deepEqual(new Set([second.id, third.id]), new Set(ids.slice(1)));
      // The fourth waiter got nothing: its job comes by a release.
      assert.equal(await other.release(ids[0], 'w1', first.fence), true);
      assert.deepEqual(await waiters[3], { id: ids[0], fence: 2, payload: null, attempts: 2 });
      assert.equal((await other.state(ids[0])).owner, 'w4');
    });

    it('50 held claims and 50 jobs: every claim gets exactly one job, every job one claim', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const N = 50;
      const waiters = Array.from({ length: N }, (_, i) => c.claimNext(q, `w${i}`, 10, { wait: 10, now: t }));
      await waitForParked(other, N, { now: t });
      const ids = Array.from({ length: N }, (_, i) => `${q}-${i}`);
      await Promise.all(ids.map((id) => other.enqueue(id, { queue: q, now: t })));
      const jobs = await Promise.all(waiters);
      assert.deepEqual(jobs.map((j) => j.id).sort(), [...ids].sort());
      assert.ok(jobs.every((j) => j.fence === 1 && j.attempts === 1));
      for (const [i, job] of jobs.entries()) {
        assert.equal(await other.check(job.id, `w${i}`, 1, { now: t }), true);
      }
    });

    it('a held claim is answered by a fail with retryIn 0, and by a retry', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, maxAttempts: 2, now: t });
      const { fence } = await c.claimNext(q, 'a', 10, { now: t });
      let waiting = other.claimNext(q, 'b', 10, { wait: 10, now: t });
      await waitForParked(c, 1, { now: t });
      assert.equal(await c.fail(id, 'a', fence, 'again', { retryIn: 0, now: t }), true);
      const second = await waiting;
      assert.deepEqual(second, { id, fence: 2, payload: null, attempts: 2 });
      assert.equal(await other.fail(id, 'b', 2, 'dead now', { now: t }), true);
      waiting = other.claimNext(q, 'c', 10, { wait: 10, now: t });
      await waitForParked(c, 1, { now: t });
      assert.equal(await c.retry(id), true);
      assert.deepEqual(await waiting, { id, fence: 3, payload: null, attempts: 1 });
    });

    it('with the client clock, a held claim is retried with the highest now seen', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, now: t });
      assert.equal((await c.claimNext(q, 'holder', 10, { now: t })).fence, 1);
      const waiting = other.claimNext(q, 'next', 10, { wait: 10, now: t + 1 });
      await waitForParked(c, 1, { now: t + 1 });
      // Any write that carries now >= until lets the held claim take the job.
      await c.enqueue(uniqueId(), { queue: `${q}-other`, now: t + 10 });
      assert.deepEqual(await waiting, { id, fence: 2, payload: null, attempts: 2 });
    });
  });

  describe('operator views', () => {
    it('stats counts each queue by state and reports the daemon\'s figures', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const ids = ['ready', 'ready2', 'delayed', 'leased', 'done', 'dead'].map((n) => `${q}-${n}`);
      await c.enqueue(ids[0], { queue: q, now: t });
      await c.enqueue(ids[2], { queue: q, delay: 100, now: t });
      for (const id of ids.slice(3)) await c.enqueue(id, { queue: q, maxAttempts: 1, now: t });
      await c.claim(ids[3], 'w', 50, { now: t });
      await c.claim(ids[4], 'w', 50, { now: t });
      await c.complete(ids[4], 'w', 1, 'ok', { now: t });
      await c.claim(ids[5], 'w', 50, { now: t });
      await c.fail(ids[5], 'w', 1, 'no', { now: t });
      await c.enqueue(ids[1], { queue: q, now: t + 20 });

      const stats = await c.stats({ now: t + 30 });
      assert.deepEqual(Object.keys(stats).sort(), ['batches', 'commits', 'failed_commits', 'mean_batch',
        'queues', 'requests', 'uptime', 'waiting_claims', 'writes']);
      assert.deepEqual(stats.queues[q],
        { ready: 2, delayed: 1, leased: 1, done: 1, dead: 1, cancelled: 0, oldest_ready_age: 30,
          totals: { claimed: 3, completed: 1, failed: 1, retried: 0, dead: 1, expired: 0, removed: 0,
            refused: { renew: 0, complete: 0, release: 0, fail: 0 } } });
      for (const key of ['requests', 'commits', 'batches', 'failed_commits', 'waiting_claims']) {
        assert.ok(Number.isInteger(stats[key]) && stats[key] >= 0, key);
      }
      assert.ok(stats.requests >= stats.batches && stats.batches >= 1);
      assert.ok(stats.mean_batch >= 1);
      assert.ok(stats.uptime > 0);
      assert.equal(stats.failed_commits, 0);
      assert.equal(stats.waiting_claims, 0);
      const later = await c.stats({ now: t + 30 });
      assert.ok(later.requests > stats.requests, 'requests are counted');
    });

    it('list filters by queue and state, and pages in id order', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const ids = Array.from({ length: 7 }, (_, i) => `${q}-${i}`);
      for (const id of ids) await c.enqueue(id, { queue: q, now: t });
      await c.enqueue(`${q}-other`, { queue: `${q}-x`, now: t });
      await c.claim(ids[2], 'w', 10, { now: t });
      await c.claim(ids[5], 'w', 10, { now: t });

      const all = await c.list({ queue: q, now: t });
      assert.deepEqual(all.map((r) => r.id), ids);
      assert.deepEqual(Object.keys(all[0]), ['id', 'queue', 'state', 'priority', 'attempts',
        'max_attempts', 'fence', 'owner', 'until', 'not_before', 'error', 'created']);
      assert.equal(all[0].created, t);  // when it was enqueued (the client clock here)
      assert.deepEqual((await c.list({ queue: q, state: 'leased', now: t })).map((r) => r.id),
        [ids[2], ids[5]]);
      assert.deepEqual(await c.list({ queue: q, state: 'dead', now: t }), []);

      const pages = [];
      let after;
      for (;;) {
        const page = await c.list({ queue: q, limit: 3, after, now: t });
        if (page.length === 0) break;
        pages.push(page.map((r) => r.id));
        after = page[page.length - 1].id;
      }
      assert.deepEqual(pages, [ids.slice(0, 3), ids.slice(3, 6), ids.slice(6)]);
      // Without filters: every queue, at most 100 by default.
      const everything = await c.list({ now: t });
      assert.ok(everything.length > 0 && everything.length <= 100);
      assert.equal((await c.list({ limit: 1000, now: t })).length <= 1000, true);
    });

    it('list sorts by age (oldest or newest first, ties by id) and filters by id prefix, ' +
       'paging with the last row\'s id and created', async () => {
      const t = epoch();
      const q = uniqueId('age');
      // Enqueued in an order unlike their ids, two at the same time.
      const order = [['m-5', 0], ['z-1', 1], ['m-1', 2], ['a-9', 2], ['m-3', 3]];
      for (const [id, dt] of order) await c.enqueue(`${q}/${id}`, { queue: q, now: t + dt });
      const ids = async (o) => (await c.list({ queue: q, now: t + 10, ...o }))
        .map((r) => r.id.slice(q.length + 1));
      assert.deepEqual(await ids({ order: 'created' }), ['m-5', 'z-1', 'a-9', 'm-1', 'm-3']);
      assert.deepEqual(await ids({ order: '-created' }), ['m-3', 'm-1', 'a-9', 'z-1', 'm-5']);
      assert.deepEqual(await ids({ prefix: `${q}/m-` }), ['m-1', 'm-3', 'm-5']);
      assert.deepEqual(await ids({ prefix: `${q}/m-`, order: '-created' }), ['m-3', 'm-1', 'm-5']);
      assert.deepEqual(await ids({ prefix: `${q}/q` }), []);
      const pages = [];
      let after;
      let afterCreated;
      for (;;) {
        const page = await c.list({ queue: q, order: '-created', limit: 2, after, afterCreated,
          now: t + 10 });
        if (page.length === 0) break;
        pages.push(page.map((r) => r.id.slice(q.length + 1)));
        after = page[page.length - 1].id;
        afterCreated = page[page.length - 1].created;
      }
      assert.deepEqual(pages, [['m-3', 'm-1'], ['a-9', 'z-1'], ['m-5']]);
      await rejectsWith(c.list({ order: 'created', after: `${q}/m-5`, now: t }),
        'invalid_argument', /after_created/);
      await rejectsWith(c.list({ order: 'age', now: t }), 'invalid_argument', /order/);
      await rejectsWith(c.list({ prefix: 5, now: t }), 'bad_request', /prefix/);
    });

    it('list refuses bad filters', async () => {
      const t = epoch();
      await rejectsWith(c.list({ limit: 0, now: t }), 'invalid_argument', /limit/);
      await rejectsWith(c.list({ limit: 1001, now: t }), 'invalid_argument', /limit/);
      await rejectsWith(c.list({ limit: 2.5, now: t }), 'bad_request', /limit/);
      await rejectsWith(c.list({ state: 'running', now: t }), 'invalid_argument', /state/);
      await rejectsWith(c.list({ state: 1, now: t }), 'bad_request', /state/);
      await rejectsWith(c.list({ queue: '', now: t }), 'invalid_argument', /queue/);
      await rejectsWith(c.list({ after: 5, now: t }), 'bad_request', /after/);
    });

    it('metrics gives the stats figures in the Prometheus text format', async () => {
      const t = epoch();
      const q = uniqueId('q');
      await c.enqueue(`${q}-1`, { queue: q, now: t });
      await c.enqueue(`${q}-2`, { queue: q, delay: 50, now: t });
      const text = await c.metrics({ now: t + 10 });
      assert.equal(typeof text, 'string');
      assert.match(text, /^# HELP fenceq_jobs /m);
      assert.match(text, /^# TYPE fenceq_jobs gauge$/m);
      assert.match(text, new RegExp(`^fenceq_jobs\\{queue="${q}",state="ready"\\} 1$`, 'm'));
      assert.match(text, new RegExp(`^fenceq_jobs\\{queue="${q}",state="delayed"\\} 1$`, 'm'));
      assert.match(text, new RegExp(`^fenceq_oldest_ready_age_seconds\\{queue="${q}"\\} 10$`, 'm'));
      assert.match(text, /^fenceq_requests_total \d+$/m);
      assert.match(text, /^fenceq_waiting_claims \d+$/m);
      assert.match(text, /^fenceq_uptime_seconds [\d.e+-]+$/m);
      // Every sample line is `name{labels} value` or `name value`.
      for (const line of text.split('\n')) {
        if (line === '' || line.startsWith('#')) continue;
        assert.match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? \S+$/, line);
      }
    });
  });

  describe('workNext with the client clock', () => {
    it('runs the next job with its payload and completes it with the fence', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, payload: Buffer.from('{"n":2}'), now: t });
      const outcome = await c.workNext(q, 'w', 10, async (job) => {
        assert.equal(job.id, id);
        assert.equal(job.owner, 'w');
        assert.equal(job.fence, 1);
        assert.equal(job.attempts, 1);
        assert.ok(Buffer.isBuffer(job.payload));
        assert.equal(job.signal.aborted, false);
        return String(JSON.parse(job.payload).n * 2);
      }, { clock: () => t, wait: 0 });
      assert.deepEqual(outcome, { id, fence: 1, attempts: 1, completed: true, result: '4' });
      assert.equal((await c.state(id)).result, '4');
    });

    it('a throw is reported with fail (error text, retryIn), then rethrown; null on an empty queue', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, maxAttempts: 2, now: t });
      const boom = new Error('upstream said 503');
      await assert.rejects(c.workNext(q, 'w', 10, () => { throw boom; },
        { clock: () => t, wait: 0, retryIn: 7 }), (err) => err === boom);
      const r = await row(c, id, { now: t });
      assert.equal(r.error, 'upstream said 503');
      assert.equal(r.not_before, t + 7);
      assert.equal(r.owner, null);
      assert.equal(await c.workNext(q, 'w', 10, () => 'never', { clock: () => t, wait: 0 }), null);
      // The second and last attempt throws a non-Error: dead.
      await assert.rejects(c.workNext(q, 'w', 10, async () => { throw 'plain string'; }, // eslint-disable-line no-throw-literal
        { clock: () => t + 7, wait: 0 }), (err) => err === 'plain string');
      const dead = await row(c, id, { now: t + 7 });
      assert.equal(dead.state, 'dead');
      assert.equal(dead.error, 'plain string');
    });

    it('a lost lease aborts the job and neither its result nor its failure is stored', async () => {
      const t = epoch();
      const q = uniqueId('q');
      const id = uniqueId();
      await c.enqueue(id, { queue: q, now: t });
      let now = t;
      const outcome = await c.workNext(q, 'A', 10, async ({ fence, signal }) => {
        assert.equal(fence, 1);
        now = t + 11; // A stalls past its lease; B takes the job over
        assert.equal((await other.claimNext(q, 'B', 10, { now })).fence, 2);
        for (let i = 0; i < 100 && !signal.aborted; i++) await sleep(20);
        assert.equal(signal.reason.code, 'lease_lost');
        return 'A did it';
      }, { clock: () => now, wait: 0, renewEveryMs: 20 });
      assert.deepEqual(outcome, { id, fence: 1, attempts: 1, completed: false, result: 'A did it' });
      assert.equal(await other.check(id, 'B', 2, { now }), true);
    });

    it('refuses unknown options before claiming anything', async () => {
      const t = epoch();
      const q = uniqueId('q');
      await c.enqueue(uniqueId(), { queue: q, now: t });
      let ran = false;
      await rejectsWith(c.workNext(q, 'w', 10, () => { ran = true; }, { retry_in: 5, clock: () => t }),
        'invalid_argument', /retry_in/);
      await rejectsWith(c.workNext(q, 'w', 10, () => { ran = true; }, 5), 'invalid_argument', /object/);
      assert.equal(ran, false);
      assert.equal((await c.list({ queue: q, now: t }))[0].state, 'ready');
    });

    it('the job\'s error text is cut to what fail accepts, on a character boundary', () => {
      assert.equal(errorText(new Error('short')), 'short');
      assert.equal(errorText(new TypeError('')), 'TypeError');
      assert.equal(errorText(42), '42');
      const long = errorText(new Error('€'.repeat(30000))); // 3 bytes each
      assert.equal(Buffer.byteLength(long), 64 * 1024 - 1);
      assert.equal(long, '€'.repeat(21845));
      assert.equal(errorText({ toString() { throw new Error('no'); } }),
        'the job threw a value that cannot be printed');
    });
  });
});

describe('work queue, server clock', () => {
  let daemon, c, other;
  withDaemon({ clock: 'server' }, 2, (...f) => { [daemon, c, other] = f; });

  it('C2.3 the new ops take no now', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    assert.equal(await c.enqueue(id, { queue: q, payload: 'x' }), true);
    const job = await c.claimNext(q, 'w', 30);
    assert.deepEqual(job, { id, fence: 1, payload: 'x', attempts: 1 });
    assert.equal(await c.check(id, 'w', 1), true);
    assert.ok(await c.stats());
    assert.ok(Array.isArray(await c.list({ queue: q })));
    assert.equal(typeof await c.metrics(), 'string');
    assert.equal(await c.purge(3600, { queue: q }), 0);
    for (const call of [
      c.enqueue(uniqueId(), { now: 1 }), c.claimNext(q, 'w', 30, { now: 1 }),
      c.check(id, 'w', 1, { now: 1 }), c.fail(id, 'w', 1, 'e', { now: 1 }),
      c.stats({ now: 1 }), c.list({ now: 1 }), c.purge(0, { now: 1 }), c.metrics({ now: 1 }),
    ]) {
      await rejectsWith(call, 'invalid_argument', /now/);
    }
    assert.equal(await c.fail(id, 'w', 1, 'e'), true);
  });

  it('stats counts fenced writes per op, a stale one refused', async () => {
    const q = uniqueId('q');
    const [a, b] = [uniqueId(), uniqueId()];
    const before = (await c.stats()).writes;
    assert.deepEqual(Object.keys(before).sort(), ['complete', 'fail', 'release', 'renew']);
    await c.enqueue(a, { queue: q });
    await c.enqueue(b, { queue: q });
    const fa = await c.claim(a, 'w', 30);
    const fb = await c.claim(b, 'w', 30);
    assert.equal(await c.release(a, 'w', fa + 1), false);
    assert.deepEqual(await c.completeMany([{ id: a, owner: 'w', fence: fa },
      { id: b, owner: 'other', fence: fb }]), [true, false]);
    const after = (await c.stats()).writes;
    assert.deepEqual(after.release, { applied: before.release.applied,
      refused: before.release.refused + 1 });
    assert.deepEqual(after.complete, { applied: before.complete.applied + 1,
      refused: before.complete.refused + 1 });
    assert.match(await c.metrics(),
      new RegExp(`fenceq_fenced_writes_total\\{op="release",outcome="refused"\\} ${after.release.refused}\n`));
  });

  it('stats counts a stale write per queue, in the job\'s queue, and /metrics with it', async () => {
    const [q, q2] = [uniqueId('q'), uniqueId('q')];
    const [a, b] = [uniqueId(), uniqueId()];
    await c.enqueue(a, { queue: q });
    await c.enqueue(b, { queue: q2 });
    const fa = await c.claim(a, 'w', 30);
    assert.equal(await c.renew(a, 'w', fa + 1, 30), false);
    assert.equal(await c.release(a, 'other', fa), false);
    assert.equal(await c.complete(a, 'w', fa, 'ok'), true);
    const { queues } = await c.stats();
    assert.deepEqual(queues[q].totals, { claimed: 1, completed: 1, failed: 0, retried: 0, dead: 0,
      expired: 0, removed: 0, refused: { renew: 1, complete: 0, release: 1, fail: 0 } });
    assert.equal(queues[q2].totals.refused.renew, 0);
    const text = await c.metrics();
    assert.match(text, /^# TYPE fenceq_stale_writes_refused_total counter$/m);
    assert.ok(text.includes(`\nfenceq_stale_writes_refused_total{queue="${q}",op="renew"} 1\n`), text);
    assert.ok(text.includes(`\nfenceq_jobs_completed_total{queue="${q}"} 1\n`), text);
  });

  it('a held claimNext is answered by an enqueue from another client', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    const started = Date.now();
    const claimed = c.claimNext(q, 'w', 30, { wait: 10 });
    await waitForParked(other, 1);
    await other.enqueue(id, { queue: q, payload: 'go' });
    assert.deepEqual(await claimed, { id, fence: 1, payload: 'go', attempts: 1 });
    assert.ok(Date.now() - started < 5000);
  });

  it('a held claimNext is answered when a lease expires, and when a delay ends', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    await c.enqueue(id, { queue: q });
    assert.equal((await c.claimNext(q, 'holder', 0.3)).fence, 1);
    const started = Date.now();
    assert.deepEqual(await other.claimNext(q, 'next', 30, { wait: 5 }),
      { id, fence: 2, payload: null, attempts: 2 });
    assert.ok(Date.now() - started < 2500, 'answered by the expiry');

    const delayed = uniqueId();
    await c.enqueue(delayed, { queue: q, delay: 0.3 });
    assert.equal((await other.claimNext(q, 'next', 30, { wait: 5 })).id, delayed);
  });

  it('workNext long-polls, renews while the job outlives its ttl, then completes', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    const running = c.workNext(q, 'w', 0.45, async ({ fence, payload, signal }) => {
      for (let i = 0; i < 3; i++) { // 0.75 s: well past the ttl
        await sleep(250);
        assert.equal(await other.check(id, 'w', fence), true, 'still ours past the ttl');
      }
      assert.equal(signal.aborted, false);
      return `done ${payload}`;
    }, { wait: 5 });
    await waitForParked(other, 1);
    await other.enqueue(id, { queue: q, payload: 'p' });
    assert.deepEqual(await running, { id, fence: 1, attempts: 1, completed: true, result: 'done p' });
    assert.equal((await c.state(id)).done, true);
    assert.equal(await c.workNext(q, 'w', 5, () => 'never', { wait: 0.2 }), null);
  });

  it('a result the protocol cannot carry fails the job instead of leaving it leased', async () => {
    const q = uniqueId('q');
    const id = uniqueId();
    await c.enqueue(id, { queue: q });
    await rejectsWith(c.workNext(q, 'w', 30, () => ({ not: 'a string' }), { wait: 0 }),
      'bad_request', /result/);
    const [r] = await c.list({ queue: q });
    assert.equal(r.owner, null);
    assert.equal(r.state, 'delayed');
    assert.match(r.error, /result/);
  });

  it('held claims are answered unavailable when the daemon stops', async () => {
    const own = await startDaemon({ clock: 'server' });
    const client = new Client(own.endpoint, { timeoutMs: 5000 });
    try {
      const held = [1, 2, 3].map((i) => client.claimNext('q', `w${i}`, 30, { wait: 30 }));
      await waitForParked(client, 3);
      const stopped = own.stop();
      // Every handler attached at once: the three rejections arrive together.
      await Promise.all(held.map((call) => assert.rejects(call,
        (err) => err instanceof FenceqError && err.code === 'unavailable')));
      assert.deepEqual(await stopped, { code: 0, signal: null });
    } finally {
      await client.close();
      await own.stop();
    }
  });
});
