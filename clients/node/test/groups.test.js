'use strict';

// Groups (issue 31): enqueue's, enqueueMany's and enqueueAndWait's `group`,
// list's group filter and the rows' group, queueConfig's groupMaxLeased,
// groupRate and groupPer, stats' group settings and groups_waiting.
//
// First the wire, against a fake ROUTER (no daemon): the requests' bytes are
// the C++ encoder's for the same request (the wire's field order), the
// replies are handed out as the daemon sends them. Then against a real
// fenceqd (client clock: each test takes its own stretch of time from
// epoch(), later than every earlier test's).

const fs = require('node:fs');
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('fenceq');
const codec = require('../lib/codec');
const { withDaemon, rejectsWith, uniqueId, recordRequests, RawPeer, withFakeDaemon } = require('./helpers');

let clockBase = 0;
/** A start time later than any `now` an earlier test of this file used. */
function epoch() {
  clockBase += 100000;
  return clockBase;
}

// The bytes protocol::encode_request (the C++ codec, protocol/op_fields.cpp)
// writes for the requests below, rid 1: fields in the order of issue 31's
// wire for groups (`group` after the key fields, list's after `key`,
// queue_config's group settings after `per`, enqueue_and_wait's before
// `wait`), then `now`, then `rid`. This client adds `v: 1` after
// `op`; without it, its bytes must be these.
const CPP_BYTES = {
  enqueue: '8da26f70a7656e7175657565a26964a56a6f622d31a57175657565a171a77061796c6f6164a170a87072696f' +
    '7269747903a564656c6179cb3ff8000000000000ac6d61785f617474656d70747307a36b6579a16baa756e69717565' +
    '5f666f72cb4004000000000000ab6f6e5f636f6e666c696374a77265706c616365a567726f7570aa637573746f6d65' +
    '722d37a36e6f77cb408f440000000000a372696401',
  enqueueGroupOnly: '85a26f70a7656e7175657565a26964a56a6f622d32a57175657565a764656661756c74a567726f7570a1' +
    '67a372696401',
  enqueueMany: '84a26f70ac656e71756575655f6d616e79a46a6f62739383a26964a161a57175657565a171a567726f7570' +
    'a2673186a26964a162a57175657565a171a87072696f7269747902a36b6579a16baa756e697175655f666f72cb3fe0' +
    '000000000000a567726f7570a2673281a26964a163a36e6f77cb401e000000000000a372696401',
  list: '88a26f70a46c697374a57175657565a171a56c696d697464a6707265666978a170a36b6579a16ba567726f7570aa' +
    '637573746f6d65722d37a36e6f77cb4015000000000000a372696401',
  queueConfig: '8aa26f70ac71756575655f636f6e666967a57175657565a171a6706175736564c2aa6d61785f6c65617365' +
    '6404a4726174650aa3706572cb4004000000000000b067726f75705f6d61785f6c656173656402aa67726f75705f72' +
    '61746505a967726f75705f706572cb3fe0000000000000a372696401',
  queueConfigGroupOnly: '84a26f70ac71756575655f636f6e666967a57175657565a171b067726f75705f6d61785f6c65617365' +
    '6402a372696401',
  enqueueAndWait: '88a26f70b0656e71756575655f616e645f77616974a26964a56a6f622d33a57175657565a171a87072696f' +
    '7269747901a567726f7570aa637573746f6d65722d37a477616974cb4004000000000000a36e6f77cb402300000000' +
    '0000a372696401',
};

describe('groups: the wire (a fake daemon)', () => {
  let router;
  let endpoint;
  withFakeDaemon((fake) => ({ router, endpoint } = fake));

  /**
   * Makes `call` on a new client, answers its one request with `result`, and
   * resolves {request: its bytes, answer: what the call resolved}.
   */
  async function exchange(call, result) {
    const client = new Client(endpoint, { timeoutMs: 5000 });
    try {
      const pending = call(client);
      const frames = await router.receive();
      // One frame, the payload (the ROUTER puts the connection's identity before it).
      assert.equal(frames.length, 2);
      const [identity, payload] = frames;
      const request = codec.decode(payload);
      await router.send([identity, codec.encode({ ok: true, rid: request.rid, result })]);
      return { request: Buffer.from(payload), answer: await pending };
    } finally {
      await client.close();
    }
  }

  /** The request's bytes without the `v: 1` this client writes after `op` (the C++ encoder writes none). */
  function withoutVersion(bytes) {
    const request = codec.decode(bytes);
    assert.deepEqual(Object.keys(request).slice(0, 2), ['op', 'v']);
    assert.equal(request.v, 1);
    delete request.v;
    return codec.encode(request).toString('hex');
  }

  // The options in an order of their own: the bytes follow the wire's order all the same.
  const cases = [
    ['enqueue: group last, after the key fields, then now', CPP_BYTES.enqueue,
      (c) => c.enqueue('job-1', {
        now: 1000.5, group: 'customer-7', onConflict: 'replace', uniqueFor: 2.5, key: 'k',
        maxAttempts: 7, delay: 1.5, priority: 3, payload: 'p', queue: 'q',
      }), { id: 'job-1', created: true }, { id: 'job-1', created: true }],
    ['enqueue: group alone', CPP_BYTES.enqueueGroupOnly,
      (c) => c.enqueue('job-2', { group: 'g', queue: 'default' }), true, true],
    ['enqueueMany: each entry\'s group last', CPP_BYTES.enqueueMany,
      (c) => c.enqueueMany([
        { group: 'g1', queue: 'q', id: 'a' },
        { group: 'g2', uniqueFor: 0.5, key: 'k', priority: 2, queue: 'q', id: 'b' },
        { id: 'c' },
      ], { now: 7.5 }), [true, { id: 'b', created: true }, false], [true, { id: 'b', created: true }, false]],
    ['list: the group filter after key', CPP_BYTES.list,
      (c) => c.list({ now: 5.25, group: 'customer-7', key: 'k', prefix: 'p', limit: 100, queue: 'q' }), [], []],
    ['queueConfig: the group settings after per', CPP_BYTES.queueConfig,
      (c) => c.queueConfig('q', {
        groupPer: 0.5, groupRate: 5, groupMaxLeased: 2, per: 2.5, rate: 10, maxLeased: 4, paused: false,
      }), true, true],
    ['queueConfig: a group setting alone', CPP_BYTES.queueConfigGroupOnly,
      (c) => c.queueConfig('q', { groupMaxLeased: 2 }), true, true],
    ['enqueueAndWait: group before wait', CPP_BYTES.enqueueAndWait,
      (c) => c.enqueueAndWait('job-3', { now: 9.5, wait: 2.5, group: 'customer-7', priority: 1, queue: 'q' }),
      null, null],
  ];
  for (const [name, expected, call, result, answer] of cases) {
    it(`${name}: the C++ encoder's bytes`, async () => {
      const got = await exchange(call, result);
      assert.equal(withoutVersion(got.request), expected);
      assert.deepEqual(got.answer, answer);
    });
  }

  it('group is sent as given (no client-side check: the daemon judges it)', async () => {
    for (const group of ['', 'x'.repeat(257), 7, null]) {
      const got = await exchange((c) => c.enqueue('a', { group }), true);
      assert.deepEqual(codec.decode(got.request).group, group);
    }
    const got = await exchange((c) => c.enqueue('a', { group: undefined }), true);
    assert.equal('group' in codec.decode(got.request), false);
  });

  it('the wire spellings and misspellings are refused before sending', async () => {
    const client = new Client(endpoint, { timeoutMs: 5000 });
    const rec = recordRequests(client);
    try {
      await rejectsWith(client.queueConfig('q', { group_max_leased: 2 }), 'invalid_argument',
        /unknown queue_config option 'group_max_leased'.*groupMaxLeased/);
      await rejectsWith(client.queueConfig('q', { group_rate: 2 }), 'invalid_argument', /group_rate/);
      await rejectsWith(client.queueConfig('q', { group_per: 2 }), 'invalid_argument', /group_per/);
      await rejectsWith(client.list({ groups: 'g' }), 'invalid_argument', /groups/);
      await rejectsWith(client.enqueue('a', { groups: 'g' }), 'invalid_argument', /groups.*group/);
      await rejectsWith(client.enqueueMany([{ id: 'a', groupId: 'g' }]), 'invalid_argument',
        /groupId.*jobs\[0\]/);
    } finally {
      rec.restore();
      await client.close();
    }
    assert.deepEqual(rec.sent, []);
  });

  it('list rows and job records: group as sent, absent when the job has none', async () => {
    const row = {
      id: 'a', queue: 'q', state: 'ready', priority: 0, attempts: 0, max_attempts: 25, fence: 0,
      owner: null, until: 0, not_before: 0, error: null, created: 1.5,
    };
    const rows = [{ ...row, key: 'k', group: 'g' }, { ...row, id: 'b' }];
    const { answer } = await exchange((c) => c.list({ queue: 'q' }), rows);
    assert.deepEqual(answer, rows);
    assert.equal('group' in answer[1], false);
    const record = { ...row, group: 'g', result: null, payload: null };
    assert.deepEqual((await exchange((c) => c.job('a'), record)).answer, record);
  });

  it('stats: groups_waiting and the group settings only as the daemon sends them', async () => {
    const counts = { ready: 1, delayed: 0, leased: 0, done: 0, dead: 0, cancelled: 0, oldest_ready_age: 0 };
    const grouped = {
      group_max_leased: 2, group_rate: 0, group_per: 1, groups_waiting: 3,
      paused: false, max_leased: 0, rate: 0, per: 1, ...counts,
    };
    const { answer } = await exchange((c) => c.stats(), {
      queues: { plain: { ...counts }, grouped: { ...grouped } },
      requests: 1, commits: 0, batches: 0, failed_commits: 0, mean_batch: 0, waiting_claims: 0, uptime: 1,
    });
    assert.deepEqual(answer.queues.plain, counts);
    assert.deepEqual(answer.queues.grouped, grouped);
    assert.equal('group_max_leased' in answer.queues.plain, false);
  });
});

/** How many of `jobs` (claimed, each {id}) belong to each group, by `groupOf` (id -> group). */
function perGroup(jobs, groupOf) {
  const counts = {};
  for (const job of jobs) counts[groupOf.get(job.id)] = (counts[groupOf.get(job.id)] ?? 0) + 1;
  return counts;
}

describe('groups, client clock', () => {
  let daemon;
  let c;
  withDaemon({ clock: 'client' }, 1, (d, client) => { daemon = d; c = client; });

  it('a grouped job\'s row and record carry group; list filters by group (exact)', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const [a, b, d, e] = ['a', 'b', 'd', 'e'].map((p) => uniqueId(p));
    assert.equal(await c.enqueue(a, { queue: q, group: 'customer-1', now: t }), true);
    assert.deepEqual(await c.enqueue(b, { queue: q, group: 'customer-2', key: 'k', now: t }),
      { id: b, created: true });
    assert.deepEqual(await c.enqueueMany([{ id: d, queue: q }, { id: e, queue: q, group: 'customer-1' }],
      { now: t }), [true, true]);

    const rows = await c.list({ queue: q, now: t });
    assert.deepEqual(rows.map((r) => [r.id, 'group' in r, r.group]).sort(),
      [[a, true, 'customer-1'], [b, true, 'customer-2'], [d, false, undefined], [e, true, 'customer-1']].sort());
    assert.equal(rows.find((r) => r.id === b).key, 'k');

    assert.deepEqual((await c.list({ queue: q, group: 'customer-1', now: t })).map((r) => r.id).sort(),
      [a, e].sort());
    assert.deepEqual((await c.list({ group: 'customer-2', prefix: b, now: t })).map((r) => r.id), [b]);
    assert.deepEqual(await c.list({ queue: q, group: 'customer', now: t }), []);   // exact, not a prefix
    assert.deepEqual(await c.list({ queue: q, group: 'customer-1', key: 'k', now: t }), []);

    assert.equal((await c.job(a, { now: t })).group, 'customer-1');
    assert.equal('group' in (await c.job(d, { now: t })), false);
    // A claimed job keeps its group; claimNext hands out its four fields as before.
    const groupOf = new Map([[a, 'customer-1'], [b, 'customer-2'], [d, undefined], [e, 'customer-1']]);
    const job = await c.claimNext(q, 'w', 30, { now: t + 1 });
    assert.deepEqual(Object.keys(job).sort(), ['attempts', 'fence', 'id', 'payload']);
    const leased = await c.list({ queue: q, state: 'leased', now: t + 1 });
    assert.deepEqual(leased.map((r) => [r.id, r.group]), [[job.id, groupOf.get(job.id)]]);
  });

  it('enqueueAndWait takes group; the awaited record carries it', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const id = uniqueId('w');
    const rec = recordRequests(c);
    try {
      assert.equal(await c.enqueueAndWait(id, { queue: q, group: 'customer-9', now: t }), null);
    } finally {
      rec.restore();
    }
    assert.deepEqual(rec.sent, [['enqueue_and_wait', { id, queue: q, group: 'customer-9', now: t }]]);
    const job = await c.claimNext(q, 'w', 30, { now: t + 1 });
    assert.equal(await c.complete(id, 'w', job.fence, 'ok', { now: t + 2 }), true);
    const record = await c.enqueueAndWait(id, { queue: q, group: 'customer-9', now: t + 3 });
    assert.equal(record.state, 'done');
    assert.equal(record.group, 'customer-9');
    assert.equal((await c.awaitJob(id, { now: t + 3 })).group, 'customer-9');
  });

  it('groupMaxLeased 2, 3 groups x 5 jobs: never more than 2 of one group leased; stats show the settings', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const groups = ['red', 'green', 'blue'];
    const groupOf = new Map();
    const jobs = [];
    for (let i = 0; i < 5; i++) {
      for (const group of groups) {
        const id = uniqueId(`${group}-${i}`);
        groupOf.set(id, group);
        jobs.push({ id, queue: q, group });
      }
    }
    assert.deepEqual(await c.enqueueMany(jobs, { now: t }), jobs.map(() => true));
    assert.equal((await c.stats({ now: t })).queues[q].groups_waiting, 3);
    assert.equal(await c.queueConfig(q, { groupMaxLeased: 2 }), true);
    const row = (await c.stats({ now: t })).queues[q];
    assert.deepEqual([row.group_max_leased, row.group_rate, row.group_per], [2, 0, 1]);
    assert.equal(row.groups_waiting, 3);

    /** Every group's leased jobs, as the daemon lists them. */
    const leasedPerGroup = async (now) => {
      const leased = await c.list({ queue: q, state: 'leased', limit: 1000, now });
      return perGroup(leased, groupOf);
    };

    // Up to 10 at once: 2 of each group, and no more.
    const batch = await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 });
    assert.deepEqual(perGroup(batch, groupOf), { red: 2, green: 2, blue: 2 });
    assert.deepEqual(await leasedPerGroup(t + 1), { red: 2, green: 2, blue: 2 });
    assert.equal(await c.claimNext(q, 'w', 300, { now: t + 1 }), null);
    assert.deepEqual(await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 }), []);

    // Finishing one of a group lets one more of that group (only) be claimed.
    const red = batch.find((j) => groupOf.get(j.id) === 'red');
    assert.equal(await c.complete(red.id, 'w', red.fence, 'ok', { now: t + 2 }), true);
    const next = await c.claimNext(q, 'w', 300, { max: 10, now: t + 2 });
    assert.deepEqual(perGroup(next, groupOf), { red: 1 });
    assert.deepEqual(await leasedPerGroup(t + 2), { red: 2, green: 2, blue: 2 });

    // Single claims up to 10 in all, completing the oldest lease now and then:
    // after each claim, at most 2 of any group leased.
    const held = [...batch.filter((j) => j.id !== red.id), ...next];
    let claims = batch.length + next.length;
    let now = t + 3;
    while (claims < 10) {
      const done = held.shift();
      assert.equal(await c.complete(done.id, 'w', done.fence, 'ok', { now }), true);
      const job = await c.claimNext(q, 'w', 300, { now });
      assert.notEqual(job, null);
      assert.equal(groupOf.get(job.id), groupOf.get(done.id));    // the only group below its limit
      held.push(job);
      claims += 1;
      for (const [group, count] of Object.entries(await leasedPerGroup(now))) {
        assert.ok(count <= 2, `${count} jobs of ${group} leased at once`);
      }
      now += 1;
    }
    assert.ok(Object.values(perGroup(held, groupOf)).every((n) => n <= 2));

    // A setting left out keeps its value; zeros remove the group settings from stats.
    assert.equal(await c.queueConfig(q, { groupRate: 50, groupPer: 2.5 }), true);
    const both = (await c.stats({ now })).queues[q];
    assert.deepEqual([both.group_max_leased, both.group_rate, both.group_per], [2, 50, 2.5]);
    assert.equal(await c.queueConfig(q, { groupMaxLeased: 0, groupRate: 0 }), true);
    const gone = (await c.stats({ now })).queues[q];
    for (const key of ['group_max_leased', 'group_rate', 'group_per']) assert.equal(key in gone, false, key);
  });

  it('groupRate 1 per 60 s: one claim of each group per window', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const groupOf = new Map();
    const jobs = [];
    for (const group of ['x', 'y']) {
      for (let i = 0; i < 3; i++) {
        const id = uniqueId(`${group}-${i}`);
        groupOf.set(id, group);
        jobs.push({ id, queue: q, group });
      }
    }
    jobs.push({ id: uniqueId('free'), queue: q });    // no group: no group limit
    await c.enqueueMany(jobs, { now: t });
    assert.equal(await c.queueConfig(q, { groupRate: 1, groupPer: 60 }), true);
    const first = await c.claimNext(q, 'w', 300, { max: 10, now: t + 1 });
    assert.deepEqual(perGroup(first, groupOf), { x: 1, y: 1, undefined: 1 });
    assert.deepEqual(await c.claimNext(q, 'w', 300, { max: 10, now: t + 30 }), []);
    const second = await c.claimNext(q, 'w', 300, { max: 10, now: t + 62 });
    assert.deepEqual(perGroup(second, groupOf), { x: 1, y: 1 });
  });

  it('fairness: 1 group of 50 jobs and 5 of 2, same priority: the first 12 claims take all 10 light jobs', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const heavy = Array.from({ length: 50 }, (_, i) => ({ id: uniqueId(`heavy-${i}`), queue: q, group: 'heavy' }));
    const light = [];
    for (let g = 0; g < 5; g++) {
      for (let i = 0; i < 2; i++) light.push({ id: uniqueId(`light${g}-${i}`), queue: q, group: `light-${g}` });
    }
    // The heavy group first: in plain FIFO order the 12 claims would all be its.
    assert.deepEqual(await c.enqueueMany([...heavy, ...light], { now: t }), Array(60).fill(true));
    assert.equal((await c.stats({ now: t })).queues[q].groups_waiting, 6);
    const claimed = [];
    for (let i = 0; i < 12; i++) {
      const job = await c.claimNext(q, 'w', 300, { now: t + 1 + i });
      assert.notEqual(job, null);
      claimed.push(job.id);
    }
    const lightIds = light.map((j) => j.id);
    assert.deepEqual(claimed.filter((id) => lightIds.includes(id)).sort(), [...lightIds].sort());
    assert.equal(claimed.filter((id) => id.startsWith('heavy-')).length, 2);
    // The light groups are empty now: the heavy group alone is waiting.
    assert.equal((await c.stats({ now: t + 20 })).queues[q].groups_waiting, 1);
  });

  it('a priority still comes first; jobs without a group are one group of their own', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const plain = Array.from({ length: 4 }, (_, i) => ({ id: uniqueId(`plain-${i}`), queue: q }));
    const grouped = Array.from({ length: 4 }, (_, i) => ({ id: uniqueId(`grouped-${i}`), queue: q, group: 'g' }));
    const urgent = { id: uniqueId('urgent'), queue: q, group: 'g', priority: 5 };
    await c.enqueueMany([...plain, ...grouped, urgent], { now: t });
    const claimed = [];
    for (let i = 0; i < 5; i++) claimed.push((await c.claimNext(q, 'w', 300, { now: t + 1 + i })).id);
    assert.equal(claimed[0], urgent.id);
    // Then the two groups (none, g) in turn.
    const kinds = claimed.slice(1).map((id) => (id.startsWith('plain-') ? 'plain' : 'grouped'));
    assert.deepEqual(kinds.filter((k) => k === 'plain').length, 2, kinds.join(','));
    assert.notEqual(kinds[0], kinds[1]);
    assert.notEqual(kinds[2], kinds[3]);
  });

  it('bad groups and group settings: invalid_argument or bad_request from the daemon, nothing changes', async () => {
    const t = epoch();
    const q = uniqueId('q');
    const id = uniqueId('a');
    for (const [group, code] of [
      ['', 'invalid_argument'], ['x'.repeat(257), 'invalid_argument'], ['é'.repeat(129), 'invalid_argument'],
      [7, 'bad_request'], [null, 'bad_request'],
    ]) {
      await rejectsWith(c.enqueue(id, { queue: q, group, now: t }), code, /group/);
      await rejectsWith(c.enqueueMany([{ id, queue: q }, { id: uniqueId('b'), queue: q, group }], { now: t }),
        code, /jobs\[1\].*group/);
      await rejectsWith(c.enqueueAndWait(id, { queue: q, group, now: t }), code, /group/);
      await rejectsWith(c.list({ queue: q, group, now: t }), code, /group/);
    }
    assert.equal(await c.state(id), null);
    assert.deepEqual(await c.list({ queue: q, now: t }), []);
    // 256 bytes are fine, counted in bytes (128 two-byte characters).
    assert.equal(await c.enqueue(id, { queue: q, group: 'é'.repeat(128), now: t }), true);
    assert.equal((await c.job(id, { now: t })).group, 'é'.repeat(128));
    assert.equal(await c.enqueue(uniqueId('c'), { queue: q, group: 'x'.repeat(256), now: t }), true);

    for (const [settings, code, pattern] of [
      [{ groupMaxLeased: -1 }, 'invalid_argument', /group_max_leased/],
      [{ groupMaxLeased: 1e9 + 1 }, 'invalid_argument', /group_max_leased/],
      [{ groupMaxLeased: 1.5 }, 'bad_request', /group_max_leased/],
      [{ groupMaxLeased: '2' }, 'bad_request', /group_max_leased/],
      [{ groupRate: -1 }, 'invalid_argument', /group_rate/],
      [{ groupRate: 100001 }, 'invalid_argument', /group_rate/],
      [{ groupPer: 0 }, 'invalid_argument', /group_per/],
      [{ groupPer: -1 }, 'invalid_argument', /group_per/],
      [{ groupPer: 86401 }, 'invalid_argument', /group_per/],
      [{ groupPer: 'x' }, 'bad_request', /group_per/],
    ]) {
      await rejectsWith(c.queueConfig(q, settings), code, pattern);
    }
    const row = (await c.stats({ now: t })).queues[q];
    assert.equal('group_max_leased' in row, false);
    assert.equal(row.groups_waiting, 2);
    // The largest values are fine.
    assert.equal(await c.queueConfig(q, { groupMaxLeased: 1e9, groupRate: 100000, groupPer: 86400 }), true);
    const max = (await c.stats({ now: t })).queues[q];
    assert.deepEqual([max.group_max_leased, max.group_rate, max.group_per], [1e9, 100000, 86400]);
  });

  it('raw requests: an empty and a 257-byte group are invalid_argument', async () => {
    const raw = new RawPeer(daemon.endpoint);
    try {
      const t = epoch();
      for (const group of ['', 'x'.repeat(257)]) {
        for (const request of [
          { op: 'enqueue', id: uniqueId('raw'), group, now: t },
          { op: 'enqueue_many', jobs: [{ id: uniqueId('raw'), group }], now: t },
          { op: 'enqueue_and_wait', id: uniqueId('raw'), group, now: t },
          { op: 'list', group, now: t },
        ]) {
          const reply = await raw.request(codec.encode({ ...request, rid: 1 }));
          assert.equal(reply.ok, false, JSON.stringify(request).slice(0, 80));
          assert.equal(reply.error.code, 'invalid_argument', reply.error.message);
          assert.match(reply.error.message, /group/);
        }
      }
    } finally {
      raw.close();
    }
  });
});
