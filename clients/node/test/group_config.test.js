'use strict';

// One group's own settings (C3.25): groupConfig(queue, group, {maxLeased,
// rate, per}), the op group_config, and stats' group_overrides and
// group_config.
//
// First the wire, against a fake ROUTER (no daemon): the request's fields in
// the wire's order, null sent as nil, undefined left out, misspellings
// refused before sending. Then against a real fenceqd (client clock: each
// test takes its own stretch of time from epoch(), later than every earlier
// test's).

const fs = require('node:fs');
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const {
  withDaemon, withFakeDaemon, startDaemon, rejectsWith, recordRequests, uniqueId, tempDir,
} = require('./helpers');

let clockBase = 0;
/** A start time later than any `now` an earlier test of this file used. */
function epoch() {
  clockBase += 100000;
  return clockBase;
}

// The bytes of protocol::encode_request (protocol/op_fields.cpp, ops.json's
// field order: queue, group, max_leased, rate, per), rid 1; this client
// adds `v: 1` after `op`, without it its bytes must be these.
const WIRE = {
  // {op: 'group_config', queue: 'q', group: 'g', max_leased: 3, rate: 10, per: 2.5, rid: 1}
  all: '87a26f70ac67726f75705f636f6e666967a57175657565a171a567726f7570a167aa6d61785f6c6561736564' +
    '03a4726174650aa3706572cb4004000000000000a372696401',
  // {op: 'group_config', queue: 'q', group: 'g', max_leased: nil, per: nil, rid: 1}
  nils: '86a26f70ac67726f75705f636f6e666967a57175657565a171a567726f7570a167aa6d61785f6c6561736564' +
    'c0a3706572c0a372696401',
  // {op: 'group_config', queue: 'q', group: 'g', rid: 1}
  bare: '84a26f70ac67726f75705f636f6e666967a57175657565a171a567726f7570a167a372696401',
};

describe('groupConfig: the wire (a fake daemon)', () => {
  let router;
  let endpoint;
  withFakeDaemon((fake) => ({ router, endpoint } = fake));

  /** Makes `call` on a new client, answers its one request with `result`: {request bytes, answer}. */
  async function exchange(call, result) {
    const client = new Client(endpoint, { timeoutMs: 5000 });
    try {
      const pending = call(client);
      const [identity, payload] = await router.receive();
      const request = codec.decode(payload);
      await router.send([identity, codec.encode({ ok: true, rid: request.rid, result })]);
      return { request: Buffer.from(payload), answer: await pending };
    } finally {
      await client.close();
    }
  }

  /** The request's bytes without the `v: 1` this client writes after `op`. */
  function withoutVersion(bytes) {
    const request = codec.decode(bytes);
    assert.deepEqual(Object.keys(request).slice(0, 2), ['op', 'v']);
    assert.equal(request.v, 1);
    delete request.v;
    return codec.encode(request).toString('hex');
  }

  it('the settings in the wire\'s order, whatever the order of the object', async () => {
    const got = await exchange((c) => c.groupConfig('q', 'g', { per: 2.5, rate: 10, maxLeased: 3 }), true);
    assert.equal(withoutVersion(got.request), WIRE.all);
    assert.equal(got.answer, true);
  });

  it('null is sent as nil (the override goes), undefined is left out (it stays)', async () => {
    const got = await exchange((c) => c.groupConfig('q', 'g', { maxLeased: null, rate: undefined, per: null }), true);
    assert.equal(withoutVersion(got.request), WIRE.nils);
    const decoded = codec.decode(got.request);
    assert.equal(decoded.max_leased, null);
    assert.equal('rate' in decoded, false);
    for (const settings of [undefined, null, {}]) {
      const bare = await exchange((c) => c.groupConfig('q', 'g', settings), true);
      assert.equal(withoutVersion(bare.request), WIRE.bare);
    }
  });

  it('queue, group and the values are sent as given (the daemon judges them)', async () => {
    for (const [queue, group, maxLeased] of [['', '', -1], ['q', 7, '3'], [null, 'x'.repeat(257), 1.5]]) {
      const got = await exchange((c) => c.groupConfig(queue, group, { maxLeased }), true);
      const decoded = codec.decode(got.request);
      assert.deepEqual([decoded.queue, decoded.group, decoded.max_leased], [queue, group, maxLeased]);
    }
  });

  it('an answer other than true or false is a bad_reply', async () => {
    await rejectsWith(exchange((c) => c.groupConfig('q', 'g', { rate: 1 }), 'yes'), 'bad_reply', /group_config/);
  });

  it('wire spellings, the queue\'s setting names and a non-object are refused before sending', async () => {
    const client = new Client(endpoint, { timeoutMs: 5000 });
    const rec = recordRequests(client);
    try {
      await rejectsWith(client.groupConfig('q', 'g', { max_leased: 2 }), 'invalid_argument',
        /unknown group_config option 'max_leased'.*maxLeased, rate, per/);
      await rejectsWith(client.groupConfig('q', 'g', { groupMaxLeased: 2 }), 'invalid_argument', /groupMaxLeased/);
      await rejectsWith(client.groupConfig('q', 'g', { groupRate: 2 }), 'invalid_argument', /groupRate/);
      await rejectsWith(client.groupConfig('q', 'g', { now: 5 }), 'invalid_argument', /'now'/);
      await rejectsWith(client.groupConfig('q', 'g', 3), 'invalid_argument', /group_config options must be an object/);
      await rejectsWith(client.groupConfig('q', 'g', [1]), 'invalid_argument', /must be an object/);
    } finally {
      rec.restore();
      await client.close();
    }
    assert.deepEqual(rec.sent, []);
  });

  it('stats: group_overrides and group_config handed on as the daemon sends them', async () => {
    const counts = { ready: 1, delayed: 0, leased: 0, done: 0, dead: 0, cancelled: 0, oldest_ready_age: 0 };
    const tenant = {
      group_max_leased: 1, group_rate: 0, group_per: 1, paused: false, max_leased: 0, rate: 0, per: 1,
      group_overrides: 2, group_config: { a: { max_leased: 3 }, b: { rate: 0, per: 2.5 } }, ...counts,
    };
    const { answer } = await exchange((c) => c.stats(), {
      queues: { plain: { ...counts }, tenant: { ...tenant } },
      requests: 1, commits: 0, batches: 0, failed_commits: 0, mean_batch: 0, waiting_claims: 0, uptime: 1,
    });
    assert.deepEqual(answer.queues.tenant, tenant);
    assert.deepEqual(answer.queues.tenant.group_config, { a: { max_leased: 3 }, b: { rate: 0, per: 2.5 } });
    assert.equal(answer.queues.tenant.group_overrides, 2);
    assert.equal('group_overrides' in answer.queues.plain, false);
    assert.equal('group_config' in answer.queues.plain, false);
  });
});

/** How many of `jobs` (each {id}) belong to each group, by `groupOf` (id -> group). */
function perGroup(jobs, groupOf) {
  const counts = {};
  for (const job of jobs) counts[groupOf.get(job.id)] = (counts[groupOf.get(job.id)] ?? 0) + 1;
  return counts;
}

/** `count` jobs of `group` in `queue`, recorded in `groupOf`. */
function jobsOf(queue, group, count, groupOf) {
  return Array.from({ length: count }, (_, i) => {
    const id = uniqueId(`${group}-${i}`);
    groupOf.set(id, group);
    return { id, queue, group };
  });
}

describe('groupConfig, client clock', () => {
  let c;
  withDaemon({ clock: 'client' }, 1, (d, client) => { c = client; });

  /** The leased jobs of `queue` per group, as the daemon lists them. */
  async function leasedPerGroup(queue, groupOf, now) {
    return perGroup(await c.list({ queue, state: 'leased', limit: 1000, now }), groupOf);
  }

  it('maxLeased 3 for one group over the queue\'s groupMaxLeased 1; null gives it back the queue\'s 1', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const groupOf = new Map();
    const jobs = [...jobsOf(q, 'big', 5, groupOf), ...jobsOf(q, 'small', 5, groupOf)];
    assert.deepEqual(await c.enqueueMany(jobs, { now: t }), jobs.map(() => true));
    assert.equal(await c.queueConfig(q, { groupMaxLeased: 1 }), true);
    assert.equal(await c.groupConfig(q, 'big', { maxLeased: 3 }), true);

    // As many as asked for: 3 of big, 1 of small, and no more.
    const batch = await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 });
    assert.deepEqual(perGroup(batch, groupOf), { big: 3, small: 1 });
    assert.deepEqual(await leasedPerGroup(q, groupOf, t + 1), { big: 3, small: 1 });
    assert.equal(await c.claimNext(q, 'w', 300, { now: t + 1 }), null);
    assert.deepEqual(await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 }), []);
    // claim by id is held back alike.
    const claimedIds = new Set(batch.map((j) => j.id));
    for (const group of ['big', 'small']) {
      const ready = jobs.find((j) => j.group === group && !claimedIds.has(j.id));
      assert.equal(await c.claim(ready.id, 'w', 300, { now: t + 1 }), null, group);
    }

    // Completing a lease lets one more of that group (only) be claimed:
    // never more than 3 big and 1 small leased.
    const held = [...batch];
    let now = t + 2;
    for (const group of ['big', 'small']) {
      const done = held.find((j) => groupOf.get(j.id) === group);
      held.splice(held.indexOf(done), 1);
      assert.equal(await c.complete(done.id, 'w', done.fence, 'ok', { now }), true);
      const next = await c.claimNext(q, 'w', 300, { max: 10, now });
      assert.deepEqual(perGroup(next, groupOf), { [group]: 1 });
      held.push(...next);
      assert.deepEqual(await leasedPerGroup(q, groupOf, now), { big: 3, small: 1 });
      assert.equal(await c.claimNext(q, 'w', 300, { now }), null);
      now += 1;
    }

    // The override removed: big follows the queue's 1 again. Its leases stay,
    // but no big job is claimed until fewer than 1 is leased.
    assert.equal(await c.groupConfig(q, 'big', { maxLeased: null }), true);
    const bigHeld = held.filter((j) => groupOf.get(j.id) === 'big');
    assert.equal(bigHeld.length, 3);
    for (const [i, job] of bigHeld.entries()) {
      assert.equal(await c.complete(job.id, 'w', job.fence, 'ok', { now }), true);
      const next = await c.claimNext(q, 'w', 300, { max: 10, now });
      // Only once the last of the three is done: one big job, and that is all.
      assert.deepEqual(perGroup(next, groupOf), i < 2 ? {} : { big: 1 }, `after ${i + 1} completes`);
    }
    assert.deepEqual(await leasedPerGroup(q, groupOf, now), { big: 1, small: 1 });
    assert.deepEqual(await c.claimNext(q, 'w', 300, { max: 10, now }), []);
    assert.equal('group_overrides' in (await c.stats({ now })).queues[q], false);
  });

  it('maxLeased 0 lifts the queue\'s group cap for that group alone', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const groupOf = new Map();
    const jobs = [...jobsOf(q, 'free', 4, groupOf), ...jobsOf(q, 'capped', 4, groupOf)];
    await c.enqueueMany(jobs, { now: t });
    assert.equal(await c.queueConfig(q, { groupMaxLeased: 1 }), true);
    assert.equal(await c.groupConfig(q, 'free', { maxLeased: 0 }), true);
    const batch = await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 });
    assert.deepEqual(perGroup(batch, groupOf), { free: 4, capped: 1 });
  });

  it('rate: 0 lifts the queue\'s group rate for one group; rate and per of its own for another', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const groupOf = new Map();
    const jobs = [
      ...jobsOf(q, 'vip', 4, groupOf), ...jobsOf(q, 'std', 4, groupOf), ...jobsOf(q, 'bulk', 4, groupOf),
    ];
    await c.enqueueMany(jobs, { now: t });
    assert.equal(await c.queueConfig(q, { groupRate: 1, groupPer: 60 }), true);
    assert.equal(await c.groupConfig(q, 'vip', { rate: 0 }), true);
    assert.equal(await c.groupConfig(q, 'bulk', { rate: 2, per: 10 }), true);
    const first = await c.claimNext(q, 'w', 300, { max: 20, now: t + 1 });
    assert.deepEqual(perGroup(first, groupOf), { vip: 4, std: 1, bulk: 2 });
    // bulk's window is 10 s, std's the queue's 60 s.
    const second = await c.claimNext(q, 'w', 300, { max: 20, now: t + 12 });
    assert.deepEqual(perGroup(second, groupOf), { bulk: 2 });
    const third = await c.claimNext(q, 'w', 300, { max: 20, now: t + 62 });
    assert.deepEqual(perGroup(third, groupOf), { std: 1 });
  });

  it('bad values: invalid_argument or bad_request from the daemon, nothing changes', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const groupOf = new Map();
    await c.enqueueMany(jobsOf(q, 'g', 3, groupOf), { now: t });
    assert.equal(await c.queueConfig(q, { groupMaxLeased: 1 }), true);
    const before = (await c.stats({ now: t })).queues[q];
    assert.equal('group_overrides' in before, false);
    assert.equal('group_config' in before, false);

    for (const [queue, group, settings, code, pattern] of [
      [q, '', { maxLeased: 3 }, 'invalid_argument', /group/],
      [q, 'x'.repeat(257), { maxLeased: 3 }, 'invalid_argument', /group/],
      ['', 'g', { maxLeased: 3 }, 'invalid_argument', /queue/],
      [q, 'g', { maxLeased: -1 }, 'invalid_argument', /max_leased/],
      [q, 'g', { maxLeased: 1e9 + 1 }, 'invalid_argument', /max_leased/],
      [q, 'g', { rate: 100001 }, 'invalid_argument', /rate/],
      [q, 'g', { rate: -1 }, 'invalid_argument', /rate/],
      [q, 'g', { per: 0 }, 'invalid_argument', /per/],
      [q, 'g', { per: -1 }, 'invalid_argument', /per/],
      [q, 'g', { per: 86401 }, 'invalid_argument', /per/],
      // One bad value among good ones: none of them is stored.
      [q, 'g', { maxLeased: 3, rate: 5, per: 0 }, 'invalid_argument', /per/],
      [q, 'g', { maxLeased: 1.5 }, 'bad_request', /max_leased/],
      [q, 'g', { maxLeased: '3' }, 'bad_request', /max_leased/],
      [q, 'g', { rate: true }, 'bad_request', /rate/],
      [q, 'g', { per: 'x' }, 'bad_request', /per/],
      [q, 7, { maxLeased: 3 }, 'bad_request', /group/],
      [q, null, { maxLeased: 3 }, 'bad_request', /group/],
    ]) {
      await rejectsWith(c.groupConfig(queue, group, settings), code, pattern);
    }
    const after = (await c.stats({ now: t })).queues[q];
    assert.equal('group_overrides' in after, false);
    assert.equal('group_config' in after, false);
    assert.deepEqual([after.group_max_leased, after.group_rate, after.group_per], [1, 0, 1]);
    // And the queue's cap still holds g to 1.
    assert.equal((await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 })).length, 1);

    // The bounds themselves are fine: 256 bytes of group (counted in bytes), the largest values.
    assert.equal(await c.groupConfig(q, 'é'.repeat(128), { maxLeased: 1e9, rate: 100000, per: 86400 }), true);
    assert.equal(await c.groupConfig(q, 'x'.repeat(256), { maxLeased: 0, rate: 0, per: 0.001 }), true);
    const max = (await c.stats({ now: t })).queues[q];
    assert.equal(max.group_overrides, 2);
    assert.deepEqual(max.group_config['é'.repeat(128)], { max_leased: 1e9, rate: 100000, per: 86400 });
    assert.deepEqual(max.group_config['x'.repeat(256)], { max_leased: 0, rate: 0, per: 0.001 });
  });

  it('stats: group_overrides and group_config; left out keeps, null removes, all removed: none', async () => {
    const t = epoch();
    const q = uniqueId('q');
    await c.enqueue(uniqueId('a'), { queue: q, group: 'a', now: t });
    assert.equal((await c.stats({ now: t })).queues[q].group_overrides, undefined);

    assert.equal(await c.groupConfig(q, 'b', { maxLeased: 10, rate: 100, per: 60 }), true);
    assert.equal(await c.groupConfig(q, 'a', { rate: 5 }), true);
    let row = (await c.stats({ now: t })).queues[q];
    assert.equal(row.group_overrides, 2);
    assert.deepEqual(row.group_config, { a: { rate: 5 }, b: { max_leased: 10, rate: 100, per: 60 } });
    assert.deepEqual(Object.keys(row.group_config), ['a', 'b']);   // by group name

    // Left out: kept. null: that one override goes, the others stay.
    assert.equal(await c.groupConfig(q, 'b', { rate: null }), true);
    assert.equal(await c.groupConfig(q, 'a', { per: 2.5 }), true);
    row = (await c.stats({ now: t })).queues[q];
    assert.equal(row.group_overrides, 2);
    assert.deepEqual(row.group_config, { a: { rate: 5, per: 2.5 }, b: { max_leased: 10, per: 60 } });

    // No settings at all: nothing changes.
    assert.equal(await c.groupConfig(q, 'b'), true);
    assert.deepEqual((await c.stats({ now: t })).queues[q].group_config.b, { max_leased: 10, per: 60 });

    // A group whose overrides are all removed has none.
    assert.equal(await c.groupConfig(q, 'b', { maxLeased: null, per: null }), true);
    row = (await c.stats({ now: t })).queues[q];
    assert.equal(row.group_overrides, 1);
    assert.deepEqual(row.group_config, { a: { rate: 5, per: 2.5 } });
    assert.equal(await c.groupConfig(q, 'a', { maxLeased: null, rate: null, per: null }), true);
    row = (await c.stats({ now: t })).queues[q];
    assert.equal('group_overrides' in row, false);
    assert.equal('group_config' in row, false);
    // Removing what is not there is fine too.
    assert.equal(await c.groupConfig(q, 'never', { maxLeased: null }), true);
    assert.equal('group_overrides' in (await c.stats({ now: t })).queues[q], false);
  });

  it('stats lists the first 100 overrides by group name; group_overrides counts them all', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const names = Array.from({ length: 105 }, (_, i) => `g${String(i).padStart(3, '0')}`);
    // Set in an order of their own: the list is by name all the same.
    for (const name of [...names].reverse()) {
      assert.equal(await c.groupConfig(q, name, { maxLeased: 2 }), true);
    }
    const row = (await c.stats({ now: t })).queues[q];
    assert.ok(row !== undefined, 'a queue with overrides only is in stats');
    assert.equal(row.group_overrides, 105);
    assert.deepEqual(Object.keys(row.group_config), names.slice(0, 100));
    assert.deepEqual(row.group_config.g000, { max_leased: 2 });
  });
});

describe('groupConfig: overrides survive a restart', () => {
  it('stored: a new daemon on the same database has them and honours them', async () => {
    const dir = tempDir();
    const q = uniqueId('q');
    const groupOf = new Map();
    let daemon = await startDaemon({ dir, clock: 'client' });
    let c = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      await c.enqueueMany(jobsOf(q, 'big', 4, groupOf), { now: 10 });
      assert.equal(await c.queueConfig(q, { groupMaxLeased: 1 }), true);
      assert.equal(await c.groupConfig(q, 'big', { maxLeased: 3, per: 5 }), true);
      await c.close();
      await daemon.stop();
      daemon = await startDaemon({ dir, clock: 'client' });
      c = new Client(daemon.endpoint, { timeoutMs: 5000 });
      const row = (await c.stats({ now: 11 })).queues[q];
      assert.equal(row.group_overrides, 1);
      assert.deepEqual(row.group_config, { big: { max_leased: 3, per: 5 } });
      assert.equal((await c.claimNext(q, 'w', 300, { max: 10, now: 11 })).length, 3);
    } finally {
      await c.close();
      await daemon.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
