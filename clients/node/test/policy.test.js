'use strict';

// Queue settings, await and periodic jobs (issue 18) through the Node client,
// against a real fenceqd: pause/resume, maxLeased and rate, awaitJob and
// enqueueAndWait, scheduleSet/List/Delete, and their bad inputs.

const { describe, it } = require('node:test');
const zmq = require('zeromq');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const { withDaemon, rejectsWith, uniqueId, sleep, tempDir } = require('./helpers');

/** Unix seconds of a UTC time. */
function utc(year, month, day, hour, minute) {
  return Date.UTC(year, month - 1, day, hour, minute) / 1000;
}

/** The settings keys of `queue` in stats ({} when it has none). */
async function settingsOf(client, queue) {
  const row = (await client.stats()).queues[queue] ?? {};
  const out = {};
  for (const key of ['paused', 'max_leased', 'rate', 'per']) if (key in row) out[key] = row[key];
  return out;
}

describe('queue settings and await (server clock)', () => {
  let daemon;
  let c;
  withDaemon({ clock: 'server' }, 1, (...f) => { [daemon, c] = f; });

  it('pause holds claimNext back; resume lets a parked claim through', async () => {
    const q = uniqueId('paused');
    const other = uniqueId('other');
    assert.equal(await c.enqueue('p1', { queue: q }), true);
    assert.deepEqual(await settingsOf(c, q), {});
    assert.equal(await c.pause(q), true);
    assert.deepEqual(await settingsOf(c, q), { paused: true, max_leased: 0, rate: 0, per: 1 });
    assert.equal(await c.claimNext(q, 'w', 30), null);
    assert.equal(await c.claim('p1', 'w', 30), null);           // by id too
    assert.equal(await c.enqueue('o1', { queue: other }), true);
    assert.equal((await c.claimNext(other, 'w', 30)).id, 'o1');  // other queues go on

    const waiter = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      const parked = waiter.claimNext(q, 'parked', 30, { wait: 5 });
      for (let i = 0; i < 250 && (await c.stats()).waiting_claims !== 1; i++) await sleep(10);
      assert.equal((await c.stats()).waiting_claims, 1);
      const resumed = Date.now();
      assert.equal(await c.resume(q), true);
      const job = await parked;
      assert.equal(job.id, 'p1');
      assert.ok(Date.now() - resumed < 1000, `served ${Date.now() - resumed} ms after the resume`);
    } finally {
      await waiter.close();
    }
    assert.deepEqual(await settingsOf(c, q), {});               // defaults again: no keys
  });

  it('awaitJob is woken by a complete from another client, well before its wait ends', async () => {
    const id = uniqueId('await');
    assert.equal(await c.enqueue(id, { queue: 'aw', payload: Buffer.from([0, 1]) }), true);
    const fence = await c.claim(id, 'w', 60);
    const waiter = new Client(daemon.endpoint, { timeoutMs: 1000 });
    try {
      const start = Date.now();
      const awaited = waiter.awaitJob(id, { wait: 10 });        // its timeout: 1 s + 10 s
      await sleep(300);
      assert.equal(await c.complete(id, 'w', fence, '42'), true);
      const record = await awaited;
      const waited = Date.now() - start;
      assert.ok(waited >= 250 && waited < 2000, `waited ${waited} ms`);
      assert.equal(record.state, 'done');
      assert.equal(record.result, '42');
      assert.deepEqual(Buffer.from(record.payload), Buffer.from([0, 1]));
      assert.deepEqual(record, await c.job(id));                // the record job() answers
      assert.deepEqual(await c.awaitJob(id), record);           // finished: at once, no wait
    } finally {
      await waiter.close();
    }
  });

  it('awaitJob: null when the wait passes (its timeout extended), invalid_argument for an unknown id', async () => {
    const id = uniqueId('slow');
    assert.equal(await c.enqueue(id), true);
    const short = new Client(daemon.endpoint, { timeoutMs: 1000 });
    try {
      const start = Date.now();
      assert.equal(await short.awaitJob(id), null);             // wait 0: at once
      assert.equal(await short.awaitJob(id, { wait: 0.4 }), null);
      const took = Date.now() - start;
      assert.ok(took >= 350 && took < 1500, `took ${took} ms`);
    } finally {
      await short.close();
    }
    await rejectsWith(c.awaitJob(uniqueId('never')), 'invalid_argument', /never/);
    await rejectsWith(c.awaitJob(id, { wait: -1 }), 'invalid_argument');
    await rejectsWith(c.awaitJob(id, { wait: 3601 }), 'invalid_argument');
    await rejectsWith(c.awaitJob(id, { wait: '1' }), 'bad_request');
    await rejectsWith(c.awaitJob(id, { timeout: 1 }), 'invalid_argument', /unknown await option 'timeout'/);
  });

  it('enqueueAndWait resolves the record a worker finished', async () => {
    const q = uniqueId('ew');
    const id = uniqueId('ew');
    const worker = new Client(daemon.endpoint);
    try {
      const working = worker.claimNext(q, 'worker', 30, { wait: 5 }).then((job) =>
        worker.complete(job.id, 'worker', job.fence, `done: ${job.payload}`));
      const record = await c.enqueueAndWait(id, { queue: q, payload: 'input', priority: 3, wait: 5 });
      assert.equal(await working, true);
      assert.equal(record.state, 'done');
      assert.equal(record.result, 'done: input');
      assert.equal(record.queue, q);
      assert.equal(record.priority, 3);
      assert.equal(record.payload, 'input');
      // Again with the same id: nothing enqueued, the finished record at once.
      assert.deepEqual(await c.enqueueAndWait(id, { queue: q, wait: 5 }), record);
    } finally {
      await worker.close();
    }
    // Nobody works this queue: null once the wait passes; the job is there.
    const idle = uniqueId('idle');
    assert.equal(await c.enqueueAndWait(idle, { queue: uniqueId('idle'), wait: 0.2 }), null);
    assert.equal((await c.job(idle)).state, 'ready');
    // An unknown option: nothing is sent, not even the enqueue.
    const unsent = uniqueId('unsent');
    await rejectsWith(c.enqueueAndWait(unsent, { max_attempts: 3 }), 'invalid_argument');
    assert.equal(await c.job(unsent), null);
  });
});

describe('queue settings and schedules (client clock)', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [, c] = f; });

  it('maxLeased 2 with 5 jobs: the third claim gets none until a complete', async () => {
    const q = uniqueId('lim');
    for (let i = 0; i < 5; i++) assert.equal(await c.enqueue(`${q}-${i}`, { queue: q, now: 10 }), true);
    assert.equal(await c.queueConfig(q, { maxLeased: 2 }), true);
    assert.deepEqual(await settingsOf(c, q), { paused: false, max_leased: 2, rate: 0, per: 1 });
    const first = await c.claimNext(q, 'w', 60, { now: 10 });
    const second = await c.claimNext(q, 'w', 60, { now: 10 });
    assert.deepEqual([first.id, second.id], [`${q}-0`, `${q}-1`]);
    assert.equal(await c.claimNext(q, 'w', 60, { now: 11 }), null);
    assert.deepEqual(await c.claimNext(q, 'w', 60, { now: 11, max: 3 }), []);
    assert.equal(await c.claim(`${q}-4`, 'v', 60, { now: 11 }), null);  // by id too
    assert.equal(await c.complete(first.id, 'w', first.fence, 'ok', { now: 12 }), true);
    assert.deepEqual((await c.claimNext(q, 'w', 60, { now: 12, max: 3 })).map((j) => j.id), [`${q}-2`]);
    assert.equal(await c.claimNext(q, 'w', 60, { now: 12 }), null);
    // A setting left out keeps its value; all back at the defaults: the settings go.
    assert.equal(await c.queueConfig(q, { rate: 0 }), true);
    assert.equal((await settingsOf(c, q)).max_leased, 2);
    assert.equal(await c.queueConfig(q, { maxLeased: 0 }), true);
    assert.deepEqual(await settingsOf(c, q), {});
    assert.deepEqual((await c.claimNext(q, 'w', 60, { now: 13, max: 5 })).map((j) => j.id),
      [`${q}-3`, `${q}-4`]);
  });

  it('rate 2 per 60 s, by the client clock', async () => {
    const q = uniqueId('rated');
    for (let i = 0; i < 3; i++) assert.equal(await c.enqueue(`${q}-${i}`, { queue: q, now: 100 }), true);
    assert.equal(await c.queueConfig(q, { rate: 2, per: 60 }), true);
    assert.deepEqual(await settingsOf(c, q), { paused: false, max_leased: 0, rate: 2, per: 60 });
    assert.equal((await c.claimNext(q, 'w', 600, { now: 100 })).id, `${q}-0`);
    assert.equal((await c.claimNext(q, 'w', 600, { now: 130 })).id, `${q}-1`);
    assert.equal(await c.claimNext(q, 'w', 600, { now: 159 }), null);     // two in (99, 159]
    assert.equal((await c.claimNext(q, 'w', 600, { now: 160.5 })).id, `${q}-2`);
  });

  it('scheduleSet / scheduleList / scheduleDelete round trip with tz and payload, and a tick', async () => {
    // Later than the other tests' times (the client clock only moves forward).
    const t0 = utc(2026, 6, 1, 12, 0);
    assert.deepEqual(await c.scheduleList({ now: t0 }), []);
    assert.equal(await c.scheduleSet('nightly', '0 3 * * *', {
      tz: 'Europe/Berlin', queue: 'reports', payload: Buffer.from([1, 2]), priority: 5, maxAttempts: 2,
      now: t0,
    }), true);
    assert.equal(await c.scheduleSet('quarter', '*/15 * * * *', { payload: 'q', now: t0 }), true);
    const listed = await c.scheduleList({ now: t0 });
    const bytes = (payload) => (payload instanceof Uint8Array ? [...payload] : payload);
    assert.deepEqual(listed.map((s) => ({ ...s, payload: bytes(s.payload) })), [
      // 03:00 in Berlin in June (CEST, UTC+2) is 01:00 UTC.
      { name: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlin', queue: 'reports', payload: [1, 2],
        priority: 5, max_attempts: 2, next: utc(2026, 6, 2, 1, 0), last: null },
      { name: 'quarter', cron: '*/15 * * * *', tz: 'UTC', queue: 'default', payload: 'q',
        priority: 0, max_attempts: 25, next: utc(2026, 6, 1, 12, 15), last: null },
    ]);
    // The client clock passes 12:15: the tick's job is enqueued once, named by its tick.
    const tick = 'quarter@2026-06-01T12:15Z';
    let job = null;
    for (let i = 0; i < 250 && job === null; i++) {
      job = await c.job(tick, { now: t0 + 960 });
      if (job === null) await sleep(10);
    }
    assert.ok(job !== null, 'the 12:15 tick was not enqueued');
    assert.equal(job.payload, 'q');
    const quarter = (await c.scheduleList()).find((s) => s.name === 'quarter');
    assert.equal(quarter.last, utc(2026, 6, 1, 12, 15));
    assert.equal(quarter.next, utc(2026, 6, 1, 12, 30));
    // Set again: replaced.
    assert.equal(await c.scheduleSet('nightly', '@weekly'), true);
    const nightly = (await c.scheduleList()).find((s) => s.name === 'nightly');
    assert.deepEqual([nightly.cron, nightly.tz, nightly.queue, nightly.payload],
      ['@weekly', 'UTC', 'default', null]);
    assert.equal(await c.scheduleDelete('nightly'), true);
    assert.equal(await c.scheduleDelete('nightly'), false);
    assert.deepEqual((await c.scheduleList()).map((s) => s.name), ['quarter']);
    assert.equal(await c.scheduleDelete('quarter'), true);
  });

  it('bad inputs reject with the right codes and change nothing', async () => {
    const q = uniqueId('bad');
    assert.equal(await c.queueConfig(q, { maxLeased: 2 }), true);
    await rejectsWith(c.queueConfig('', { paused: true }), 'invalid_argument', /queue/);
    await rejectsWith(c.queueConfig(q, { paused: 1 }), 'bad_request', /paused/);
    await rejectsWith(c.queueConfig(q, { maxLeased: -1 }), 'invalid_argument', /max_leased/);
    await rejectsWith(c.queueConfig(q, { maxLeased: 1.5 }), 'bad_request', /max_leased/);
    await rejectsWith(c.queueConfig(q, { rate: 100001 }), 'invalid_argument', /rate/);
    await rejectsWith(c.queueConfig(q, { rate: 5, per: 0 }), 'invalid_argument', /per/);
    await rejectsWith(c.queueConfig(q, { per: 86401 }), 'invalid_argument', /per/);
    await rejectsWith(c.queueConfig(q, { per: '1' }), 'bad_request', /per/);
    // The client's own refusal: an unknown key (the wire spelling), nothing sent.
    await rejectsWith(c.queueConfig(q, { max_leased: 1 }), 'invalid_argument',
      /unknown queue_config option 'max_leased'/);
    assert.deepEqual(await settingsOf(c, q), { paused: false, max_leased: 2, rate: 0, per: 1 });

    await rejectsWith(c.scheduleSet('n', '61 * * * *'), 'invalid_argument', /cron.*minute/);
    await rejectsWith(c.scheduleSet('n', '0 25 * * *'), 'invalid_argument', /hour/);
    await rejectsWith(c.scheduleSet('n', '* * * * *', { tz: 'Mars/Base' }), 'invalid_argument',
      /time zone 'Mars\/Base'/);
    await rejectsWith(c.scheduleSet('n', '@reboot'), 'invalid_argument');
    await rejectsWith(c.scheduleSet('', '* * * * *'), 'invalid_argument', /name/);
    await rejectsWith(c.scheduleSet('n'.repeat(201), '* * * * *'), 'invalid_argument', /name/);
    await rejectsWith(c.scheduleSet('n', '*'.repeat(257)), 'invalid_argument', /cron/);
    await rejectsWith(c.scheduleSet('n', '* * * * *', { queue: '' }), 'invalid_argument', /queue/);
    await rejectsWith(c.scheduleSet('n', 5), 'bad_request', /cron/);
    await rejectsWith(c.scheduleSet('n', '* * * * *', { priority: 'high' }), 'bad_request', /priority/);
    await rejectsWith(c.scheduleSet('n', '* * * * *', { max_attempts: 3 }), 'invalid_argument',
      /unknown schedule_set option 'max_attempts'/);
    await rejectsWith(c.scheduleDelete(3), 'bad_request', /name/);
    assert.deepEqual(await c.scheduleList(), []);
  });
});

describe('enqueueAndWait against a daemon without enqueue_and_wait', () => {
  it('sends enqueue_and_wait, then enqueue and await on unknown_op', async () => {
    const dir = tempDir();
    const endpoint = `ipc://${dir}/fake.sock`;
    const router = new zmq.Router({ linger: 0 });
    await router.bind(endpoint);
    const client = new Client(endpoint, { timeoutMs: 5000 });
    try {
      const pending = client.enqueueAndWait('j', { queue: 'q', payload: 'p', wait: 0.5 });
      const replies = {
        enqueue_and_wait: { ok: false, error: { code: 'unknown_op', message: 'unknown op' } },
        enqueue: { ok: true, result: true },
        await: { ok: true, result: null },
      };
      const seen = [];
      for (let i = 0; i < 3; i++) {
        const [identity, payload] = await router.receive();
        const request = codec.decode(payload);
        seen.push(request);
        await router.send([identity, codec.encode({ ...replies[request.op], rid: request.rid })]);
      }
      assert.equal(await pending, null);
      assert.deepEqual(seen.map((r) => r.op), ['enqueue_and_wait', 'enqueue', 'await']);
      assert.equal(seen[0].queue, 'q');
      assert.equal(seen[0].wait, 0.5);
      assert.equal(seen[1].queue, 'q');
      assert.equal(seen[2].wait, 0.5);
    } finally {
      await client.close();
      router.close();
      require('node:fs').rmSync(dir, { recursive: true, force: true });
    }
  });
});
