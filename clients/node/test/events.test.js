'use strict';

// Events (issue 33): Subscriber and subscribe() against a real fenceqd
// started with `--events ipc://<dir>/events.sock` (and over tcp:// with
// CURVE); the seq bookkeeping as a unit; malformed messages from a fake
// XPUB; the argument checks.
//
// A SUB socket's subscription reaches the daemon a moment after connect
// (ZeroMQ's slow joiner): events published before are not delivered. Every
// test against a daemon first enqueues probe jobs until one's event arrives
// (bounded, warmUp below), then makes its own.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { promisify } = require('node:util');
const zmq = require('zeromq');
const { Client, FenceqError, Subscriber, subscribe, curveKeys } = require('fenceq');
const { advanceSeq } = require('../lib/events');
const codec = require('../lib/codec');
const { FENCEQD, startDaemon, rejectsWith, uniqueId, tempDir } = require('./helpers');

const WARM_UP_MS = 5000;
const EVENT_MS = 5000; // how long an event that must come may take
const QUIET_MS = 400; // how long we listen for an event that must not come

/**
 * Enqueues probe jobs until one's event reaches `sub` (at most WARM_UP_MS):
 * the subscription is then in place at the daemon. A subscriber of one queue
 * gets probes of `<queue>.probe`, a queue its subscription matches by prefix
 * (delivered, then skipped by next(): seen in lastSeq); a subscriber of
 * every queue gets probes of a queue of their own, which next() returns.
 */
async function warmUp(sub, client) {
  const probeQueue = sub.queue === null ? `probe-${process.pid}` : `${sub.queue}.probe`;
  const deadline = Date.now() + WARM_UP_MS;
  while (Date.now() < deadline) {
    await client.enqueue(uniqueId('probe'), { queue: probeQueue });
    const event = await sub.next({ timeout: 100 });
    if (sub.queue === null) {
      if (event !== null) return probeQueue;
    } else {
      assert.equal(event, null, 'a probe of a prefix queue is never handed out');
      if (sub.lastSeq !== null) return probeQueue;
    }
  }
  throw new Error(`no event reached the subscriber within ${WARM_UP_MS} ms`);
}

/** The next event not of the queues `skip` (probes, for a subscriber of every queue), or null. */
async function nextNot(sub, skip, timeout = EVENT_MS) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const event = await sub.next({ timeout: Math.max(0, deadline - Date.now()) });
    if (event === null || !skip.includes(event.queue)) return event;
  }
}

/** An event that must come within EVENT_MS. */
async function mustNext(sub) {
  const event = await sub.next({ timeout: EVENT_MS });
  assert.notEqual(event, null, `no event within ${EVENT_MS} ms`);
  return event;
}

/** Asserts an event: `expected`'s keys equal, and `t` a recent wall-clock time. */
function assertEvent(actual, expected) {
  const { seq, t, ...rest } = actual;
  assert.ok(Number.isInteger(seq) && seq >= 1, `seq ${seq}`);
  assert.equal(typeof t, 'number');
  assert.ok(Math.abs(t - Date.now() / 1000) < 120, `t ${t} is the daemon's wall clock`);
  assert.deepEqual(rest, expected);
}

describe('events from a real daemon (--events ipc://)', () => {
  let dir;
  let daemon;
  let events; // the events endpoint
  let client;
  const open = [];

  /** A Subscriber closed after the block. */
  function sub(options) {
    const s = new Subscriber(events, options);
    open.push(s);
    return s;
  }

  before(async () => {
    dir = tempDir();
    events = `ipc://${dir}/events.sock`;
    daemon = await startDaemon({ clock: 'server', dir, args: ['--events', events] });
    client = new Client(daemon.endpoint, { timeoutMs: 5000 });
  });

  after(async () => {
    for (const s of open) s.close();
    await client?.close();
    await daemon?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('enqueue, claim and complete publish enqueued, claimed (owner, fence 1) and completed, in seq order', async () => {
    const queue = uniqueId('life');
    const id = uniqueId('job');
    const s = sub({ queue });
    await warmUp(s, client);
    const before = s.lastSeq;

    assert.equal(await client.enqueue(id, { queue }), true);
    assert.equal(await client.claim(id, 'w1', 30), 1);
    assert.equal(await client.complete(id, 'w1', 1, 'done'), true);

    const enqueued = await mustNext(s);
    const claimed = await mustNext(s);
    const completed = await mustNext(s);
    assertEvent(enqueued, { event: 'enqueued', id, queue, fence: 0 });
    assertEvent(claimed, { event: 'claimed', id, queue, fence: 1, owner: 'w1' });
    assertEvent(completed, { event: 'completed', id, queue, fence: 1 });
    assert.ok(enqueued.seq > before);
    assert.equal(claimed.seq, enqueued.seq + 1);
    assert.equal(completed.seq, claimed.seq + 1);
    assert.ok(enqueued.t <= claimed.t && claimed.t <= completed.t, 't follows the commits');
    assert.equal(s.lastSeq, completed.seq);
    assert.equal(s.missed, 0, 'nothing dropped, and every probe was seen (prefix queue)');
    assert.equal(await s.next({ timeout: QUIET_MS }), null, 'three events, no more');
  });

  it('the queue filter is exact: a queue that starts with the name is skipped; a subscriber of every queue gets both', async () => {
    const queue = uniqueId('emails');
    const longer = `${queue}-eu`;
    // `all` first: every probe of its warm-up is committed before `exact`'s
    // first one, so `exact` (whose seq counts every queue) sees no gap after.
    const all = sub();
    const probes = await warmUp(all, client);
    const exact = sub({ queue });
    const exactProbes = await warmUp(exact, client);

    const euId = uniqueId('eu');
    const id = uniqueId('mail');
    await client.enqueue(euId, { queue: longer });
    await client.enqueue(id, { queue });

    const mine = await mustNext(exact);
    assertEvent(mine, { event: 'enqueued', id, queue, fence: 0 });
    // The -eu event reached the socket (its seq is no gap) and was skipped.
    assert.equal(exact.missed, 0);
    assert.equal(exact.lastSeq, mine.seq);
    assert.equal(await exact.next({ timeout: QUIET_MS }), null, 'the -eu event is never handed out');

    const first = await nextNot(all, [probes, exactProbes]);
    const second = await nextNot(all, [probes, exactProbes]);
    assertEvent(first, { event: 'enqueued', id: euId, queue: longer, fence: 0 });
    assertEvent(second, { event: 'enqueued', id, queue, fence: 0 });
    assert.equal(second.seq, first.seq + 1);
    assert.equal(mine.seq, second.seq, 'one seq for every subscriber');
    assert.equal(all.missed, 0);

    // seq counts every queue: for a subscriber of one, another queue's event is a gap.
    await client.enqueue(uniqueId('x'), { queue: uniqueId('other') });
    const later = uniqueId('mail');
    await client.enqueue(later, { queue });
    assertEvent(await mustNext(exact), { event: 'enqueued', id: later, queue, fence: 0 });
    assert.equal(exact.missed, 1);
  });

  it('group is there only for a job that has one', async () => {
    const queue = uniqueId('groups');
    const grouped = uniqueId('g');
    const plain = uniqueId('p');
    const s = sub({ queue });
    await warmUp(s, client);

    await client.enqueue(grouped, { queue, group: 'tenant-a' });
    await client.enqueue(plain, { queue });
    assert.equal(await client.claim(grouped, 'w1', 30), 1);
    assert.equal(await client.claim(plain, 'w2', 30), 1);
    assert.equal(await client.complete(grouped, 'w1', 1, null), true);

    assertEvent(await mustNext(s), { event: 'enqueued', id: grouped, queue, fence: 0, group: 'tenant-a' });
    assertEvent(await mustNext(s), { event: 'enqueued', id: plain, queue, fence: 0 });
    assertEvent(await mustNext(s),
      { event: 'claimed', id: grouped, queue, fence: 1, owner: 'w1', group: 'tenant-a' });
    assertEvent(await mustNext(s), { event: 'claimed', id: plain, queue, fence: 1, owner: 'w2' });
    assertEvent(await mustNext(s), { event: 'completed', id: grouped, queue, fence: 1, group: 'tenant-a' });
  });

  it('a refused stale complete publishes nothing (nor does release); the fresh one does', async () => {
    const queue = uniqueId('stale');
    const id = uniqueId('job');
    const s = sub({ queue });
    await warmUp(s, client);

    await client.enqueue(id, { queue });
    assert.equal(await client.claim(id, 'w1', 30), 1);
    assert.equal(await client.release(id, 'w1', 1), true);
    assert.equal(await client.claim(id, 'w2', 30), 2);
    const enqueued = await mustNext(s);
    const first = await mustNext(s);
    const second = await mustNext(s);
    assertEvent(first, { event: 'claimed', id, queue, fence: 1, owner: 'w1' });
    assertEvent(second, { event: 'claimed', id, queue, fence: 2, owner: 'w2' });
    assert.equal(second.seq, first.seq + 1, 'release published nothing');
    assert.equal(first.seq, enqueued.seq + 1);

    assert.equal(await client.complete(id, 'w1', 1, 'stale'), false);
    assert.equal(await s.next({ timeout: QUIET_MS }), null, 'the refused complete published nothing');

    assert.equal(await client.complete(id, 'w2', 2, 'fresh'), true);
    const completed = await mustNext(s);
    assertEvent(completed, { event: 'completed', id, queue, fence: 2 });
    assert.equal(completed.seq, second.seq + 1, 'no event in between');
    assert.equal(s.missed, 0);
  });

  it('subscribe() of every queue, read with for await; leaving the loop closes it', async () => {
    const s = subscribe(events);
    open.push(s);
    assert.ok(s instanceof Subscriber);
    assert.equal(s.queue, null);
    const probes = await warmUp(s, client);
    const q1 = uniqueId('q1');
    const q2 = uniqueId('q2');
    const a = uniqueId('a');
    const b = uniqueId('b');
    await client.enqueue(a, { queue: q1 });
    await client.enqueue(b, { queue: q2 });
    const seen = [];
    const stop = setTimeout(() => s.close(), EVENT_MS); // bounded: close() ends the loop
    try {
      for await (const ev of s) {
        if (ev.queue === probes) continue;
        seen.push([ev.id, ev.queue, ev.event]);
        if (seen.length === 2) break;
      }
    } finally {
      clearTimeout(stop);
    }
    assert.deepEqual(seen, [[a, q1, 'enqueued'], [b, q2, 'enqueued']]);
    assert.equal(s.closed, true, 'break closed the subscriber');
    await rejectsWith(s.next(), 'misuse', /closed/);
  });

  it('close() while next() waits resolves it with null, and ends a for await', async () => {
    const s = sub({ queue: uniqueId('idle') });
    const waiting = s.next();
    setTimeout(() => s.close(), 50);
    assert.equal(await waiting, null);

    const t = sub({ queue: uniqueId('idle') });
    setTimeout(() => t.close(), 50);
    const got = [];
    for await (const ev of t) got.push(ev);
    assert.deepEqual(got, []);
  });

  it('concurrent next() calls get distinct events, in order', async () => {
    const queue = uniqueId('conc');
    const s = sub({ queue });
    await warmUp(s, client);
    const ids = [uniqueId('c'), uniqueId('c'), uniqueId('c')];
    const reads = ids.map(() => s.next({ timeout: EVENT_MS }));
    for (const id of ids) await client.enqueue(id, { queue });
    const got = await Promise.all(reads);
    assert.deepEqual(got.map((ev) => ev?.id), ids);
  });
});

describe('events across a daemon restart', () => {
  it('seq starts over at 1: lastSeq follows it, and missed does not count it', async () => {
    const dir = tempDir();
    const events = `ipc://${dir}/events.sock`;
    const args = ['--events', events];
    let daemon = await startDaemon({ clock: 'server', dir, args });
    const s = new Subscriber(events);
    let client = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      const probes = await warmUp(s, client);
      // More events than warmUp can probe (one each 100 ms, for 5 s) after
      // the restart: the new daemon's first seq the subscriber gets is below.
      await client.enqueueMany(Array.from({ length: 100 }, () => ({ id: uniqueId('pre'), queue: probes })));
      let last;
      while ((last = await s.next({ timeout: QUIET_MS })) !== null) assert.equal(last.queue, probes);
      const before = s.lastSeq;
      assert.ok(before >= 101, `lastSeq ${before}`);
      assert.equal(s.missed, 0);

      await client.close();
      await daemon.stop();
      daemon = await startDaemon({ clock: 'server', dir, args });
      client = new Client(daemon.endpoint, { timeoutMs: 5000 });
      // The SUB reconnects by itself; probe until the new daemon's events come.
      await warmUp(s, client);
      assert.ok(s.lastSeq < before, `lastSeq ${s.lastSeq} after the restart, ${before} before`);
      assert.equal(s.missed, 0, 'a seq that starts over is no gap');
    } finally {
      s.close();
      await client.close();
      await daemon.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('missed: the seq arithmetic', () => {
  it('counts the events gaps skip, not the first event nor a restart', () => {
    let state = { lastSeq: null, missed: 0 };
    const step = (seq, lastSeq, missed) => {
      state = advanceSeq(state, seq);
      assert.deepEqual(state, { lastSeq, missed }, `after seq ${seq}`);
    };
    step(57, 57, 0); // connected late: no replay, nothing missed
    step(58, 58, 0);
    step(59, 59, 0);
    step(62, 62, 2); // 60 and 61 dropped
    step(63, 63, 2);
    step(1000, 1000, 938); // 64..999
    step(3, 3, 938); // the daemon restarted: seq starts over, not counted
    step(4, 4, 938);
    step(6, 6, 939);
    step(6, 6, 939); // the same seq again (a restart that got as far): not a gap
    step(1, 1, 939);
    step(2, 2, 939);
  });

  it('advanceSeq does not change the state it is given', () => {
    const state = Object.freeze({ lastSeq: 1, missed: 0 });
    assert.deepEqual(advanceSeq(state, 5), { lastSeq: 5, missed: 3 });
    assert.deepEqual(state, { lastSeq: 1, missed: 0 });
  });
});

describe('malformed messages (a fake publisher)', () => {
  let dir;
  let xpub;
  let endpoint;
  before(async () => {
    dir = tempDir();
    endpoint = `ipc://${dir}/fake-events.sock`;
    xpub = new zmq.XPublisher({ linger: 0, receiveTimeout: 5000 });
    await xpub.bind(endpoint);
  });
  after(() => {
    xpub?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The next subscribe message the XPUB hears (skipping a closed subscriber's unsubscribe), as its topic. */
  async function subscription() {
    for (;;) {
      const [message] = await xpub.receive(); // receiveTimeout bounds each wait
      if (message[0] === 1) return message.subarray(1);
    }
  }

  const good = { seq: 1, t: 1764716400.25, event: 'enqueued', id: 'mail-9', queue: 'q', fence: 0 };
  const body = (over) => codec.encode({ ...good, ...over });

  it('each rejects with FenceqError bad_reply (never a TypeError) and is consumed; the next good one is read', async () => {
    const s = new Subscriber(endpoint);
    try {
      // The XPUB hears the subscription: from then on, nothing sent is lost.
      assert.equal((await subscription()).length, 0, 'every queue: the empty subscription');
      const cases = [
        [['q'], /1 frames, expected 2/],
        [['q', body({}), 'extra'], /3 frames, expected 2/],
        [['q', Buffer.from([0xc1])], /not msgpack/],
        [['q', Buffer.alloc(0)], /not msgpack/],
        [['q', codec.encode([1, 2])], /not a msgpack map/],
        [['q', codec.encode('enqueued')], /not a msgpack map/],
        [['q', body({ id: undefined })], /no 'id'/],
        [['q', body({ seq: undefined })], /no 'seq'/],
        [['q', body({ seq: '1' })], /'seq' must be an integer/],
        [['q', body({ seq: 0 })], /'seq' must be an integer >= 1/],
        [['q', body({ t: 'now' })], /'t' must be a number/],
        [['q', body({ event: 7 })], /'event' must be a string/],
        [['q', body({ fence: 1.5 })], /'fence' must be an integer/],
        [['q', body({ fence: null })], /'fence' must be an integer/],
        [['q', body({ queue: Buffer.from('q') })], /'queue' must be a string/],
        [['q', body({ owner: 5 })], /'owner' must be a string/],
        [['q', body({ group: null })], /'group' must be a string/],
        [['q', body({ queue: 'other' })], /is not its topic/],
      ];
      for (const [frames, pattern] of cases) {
        await xpub.send(frames);
        await rejectsWith(s.next({ timeout: EVENT_MS }), 'bad_reply', pattern);
      }
      assert.equal(s.lastSeq, null, 'a malformed event counts for nothing');
      await xpub.send(['q', body({ seq: 7, owner: 'w1', group: 'g', extra: 'dropped' })]);
      assert.deepEqual(await s.next({ timeout: EVENT_MS }),
        { ...good, seq: 7, owner: 'w1', group: 'g' });
      assert.equal(s.lastSeq, 7);
    } finally {
      s.close();
    }
  });

  it('a subscriber of one queue compares topics as bytes (UTF-8)', async () => {
    const queue = 'Köln';
    const s = new Subscriber(endpoint, { queue });
    try {
      assert.deepEqual(await subscription(), Buffer.from(queue, 'utf8'));
      await xpub.send([`${queue}2`, body({ seq: 1, queue: `${queue}2` })]);
      await xpub.send([queue, body({ seq: 3, queue })]);
      const ev = await s.next({ timeout: EVENT_MS });
      assert.equal(ev.queue, queue);
      assert.equal(ev.seq, 3);
      assert.equal(s.missed, 1, 'seq 2 is a gap');
    } finally {
      s.close();
    }
  });
});

describe('Subscriber arguments', () => {
  function throwsInvalid(make, pattern) {
    assert.throws(make, (err) => {
      assert.ok(err instanceof FenceqError, `expected a FenceqError, got ${err}`);
      assert.equal(err.code, 'invalid_argument', `code of: ${err.message}`);
      if (pattern) assert.match(err.message, pattern);
      return true;
    });
  }
  const keys = {
    serverPublic: 'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7',
    publicKey: 'Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID',
    secretKey: 'D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs',
  };

  it('are checked before any socket is made', () => {
    throwsInvalid(() => new Subscriber(), /endpoint/);
    throwsInvalid(() => new Subscriber(''), /endpoint/);
    throwsInvalid(() => new Subscriber('bogus://x'), /cannot connect/);
    throwsInvalid(() => new Subscriber('ipc:///tmp/x.sock', 'q'), /options must be an object/);
    throwsInvalid(() => new Subscriber('ipc:///tmp/x.sock', { queues: 'q' }), /unknown option 'queues'/);
    throwsInvalid(() => new Subscriber('ipc:///tmp/x.sock', { queue: '' }), /1\.\.256 bytes/);
    throwsInvalid(() => new Subscriber('ipc:///tmp/x.sock', { queue: 'é'.repeat(129) }), /258 bytes/);
    throwsInvalid(() => new Subscriber('ipc:///tmp/x.sock', { queue: 5 }), /number/);
    throwsInvalid(() => new Subscriber('ipc:///tmp/x.sock', { curve: keys }), /tcp:\/\//);
    throwsInvalid(() => new Subscriber('tcp://127.0.0.1:1', { curve: { ...keys, secretKey: 'short' } }),
      /curve\.secretKey/);
    throwsInvalid(() => subscribe('tcp://127.0.0.1:1', { curve: 'keys' }), /curve option/);
    const s = subscribe('tcp://127.0.0.1:1', { queue: 'é'.repeat(128), curve: keys });
    s.close();
    s.close(); // idempotent
  });

  it('next() refuses a bad timeout and any call after close()', async () => {
    const s = new Subscriber('ipc:///tmp/fqn-no-such-dir/events.sock', { queue: 'q' });
    try {
      await rejectsWith(s.next({ timeout: -1 }), 'invalid_argument', /timeout/);
      await rejectsWith(s.next({ timeout: 'soon' }), 'invalid_argument', /timeout/);
      await rejectsWith(s.next({ wait: 1 }), 'invalid_argument', /unknown option 'wait'/);
      assert.equal(await s.next({ timeout: 0 }), null);
      assert.equal(await s.next({ timeout: 50 }), null);
    } finally {
      s.close();
    }
    await rejectsWith(s.next({ timeout: 10 }), 'misuse', /closed/);
  });
});

/** A TCP port that was free a moment ago (the kernel's pick for port 0). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

describe('events over tcp:// with CURVE', () => {
  let keysDir;
  let daemon;
  let tcp;
  let client;
  let serverLine;
  const file = (name) => path.join(keysDir, name);

  before(async () => {
    keysDir = tempDir();
    const keygen = async (name) => {
      const { stdout } = await promisify(execFile)(FENCEQD, ['--curve-keygen', file(name)], { timeout: 10000 });
      return stdout.trim();
    };
    let listedLine;
    [serverLine, listedLine] = await Promise.all([keygen('server.key'), keygen('listed.key'),
      keygen('unlisted.key')]);
    fs.writeFileSync(file('clients.pub'), `${listedLine}\n`);
    tcp = `tcp://127.0.0.1:${await freePort()}`;
    daemon = await startDaemon({
      clock: 'server',
      args: ['--events', tcp, '--allow-tcp', '--curve-secret-key', file('server.key'),
        '--curve-allowed-clients', file('clients.pub')],
    });
    client = new Client(daemon.endpoint, { timeoutMs: 5000 });
  });

  after(async () => {
    await client?.close();
    await daemon?.stop();
    if (keysDir) fs.rmSync(keysDir, { recursive: true, force: true });
  });

  it('a listed key gets the events; an unlisted key and no CURVE get none', async () => {
    const queue = uniqueId('curve');
    const listed = new Subscriber(tcp, { queue, curve: curveKeys(file('listed.key'), serverLine) });
    const unlisted = new Subscriber(tcp, { queue, curve: curveKeys(file('unlisted.key'), serverLine) });
    const plain = new Subscriber(tcp, { queue });
    try {
      await warmUp(listed, client);
      const id = uniqueId('job');
      await client.enqueue(id, { queue });
      assertEvent(await mustNext(listed), { event: 'enqueued', id, queue, fence: 0 });
      assert.equal(await unlisted.next({ timeout: QUIET_MS }), null);
      assert.equal(await plain.next({ timeout: QUIET_MS }), null);
      assert.equal(unlisted.lastSeq, null, 'not even the probes');
      assert.equal(plain.lastSeq, null);
    } finally {
      listed.close();
      unlisted.close();
      plain.close();
    }
  });
});

describe('Subscriber in both module formats and in the declarations', () => {
  it('import and require give the same Subscriber and subscribe', async () => {
    const esm = await import('fenceq');
    assert.equal(esm.Subscriber, Subscriber);
    assert.equal(esm.subscribe, subscribe);
    assert.equal(esm.default.Subscriber, Subscriber);
  });

  it('index.d.ts and index.d.mts type them (tsc, CommonJS and ESM)', () => {
    // A project of its own in a temp dir, `fenceq` linked to this package
    // (test/types is types.test.js's).
    const dir = tempDir();
    try {
      fs.mkdirSync(path.join(dir, 'node_modules'));
      fs.symlinkSync(path.resolve(__dirname, '..'), path.join(dir, 'node_modules', 'fenceq'), 'dir');
      fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
        compilerOptions: {
          module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true,
          noEmit: true, skipLibCheck: false, types: [],
        },
        files: ['check.cts', 'check.mts'],
      }));
      fs.writeFileSync(path.join(dir, 'check.cts'), `
import fenceq = require('fenceq');
import { Subscriber, subscribe, type JobEvent, type JobEventName, type SubscriberOptions,
  type NextEventOptions, curveKeys } from 'fenceq';
async function main(): Promise<void> {
  const options: SubscriberOptions = { queue: 'q', curve: curveKeys('k', 'p') };
  const s = new Subscriber('tcp://127.0.0.1:1', options);
  const wait: NextEventOptions = { timeout: 10 };
  const e: JobEvent | null = await s.next(wait);
  if (e !== null) {
    const name: JobEventName | string = e.event;
    const owner: string | undefined = e.owner;
    const group: string | undefined = e.group;
    const numbers: number[] = [e.seq, e.t, e.fence];
    const strings: string[] = [e.id, e.queue];
    void [name, owner, group, numbers, strings];
  }
  for await (const ev of s) { const f: number = ev.fence; void f; break; }
  const all: fenceq.Subscriber = subscribe('ipc:///tmp/e.sock');
  const last: number | null = all.lastSeq;
  const missed: number = all.missed;
  const queue: string | null = all.queue;
  const closed: boolean = all.closed;
  void [last, missed, queue, closed];
  // @ts-expect-error queue is a string
  new Subscriber('ipc:///x', { queue: 5 });
  // @ts-expect-error lastSeq is read-only
  all.lastSeq = 3;
  // @ts-expect-error next takes { timeout }, in ms
  await all.next(10);
  all.close();
}
void main;
`);
      fs.writeFileSync(path.join(dir, 'check.mts'), `
import fenceq, { Subscriber, subscribe, type JobEvent } from 'fenceq';
const s: Subscriber = subscribe('ipc:///tmp/e.sock', { queue: 'q' });
const e: JobEvent | null = await s.next();
const t: Subscriber = new fenceq.Subscriber('ipc:///tmp/e.sock', null);
for await (const ev of t) { const id: string = ev.id; void id; }
void e;
`);
      const tsc = require.resolve('typescript/bin/tsc');
      try {
        execFileSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8', timeout: 120000 });
      } catch (err) {
        assert.fail(`tsc failed:\n${err.stdout}${err.stderr}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
