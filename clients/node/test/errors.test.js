'use strict';

// Failures: the daemon's error codes (C4), and the client's own: timeout,
// closed, late replies, a dropped connection, shutdown.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Client, FenceqError, DEFAULT_ENDPOINT, SERVICE_ENDPOINT, resolveEndpoint } = require('fenceq');
const { RawPeer, startDaemon, deadDaemon, withDaemon, rejectsWith, uniqueId, tempDir, sleep } = require('./helpers');
const zmq = require('zeromq');
const codec = require('../lib/codec');

describe('daemon error codes (C4)', () => {
  let daemon, c;
  withDaemon({ clock: 'client' }, 1, (...f) => { [daemon, c] = f; });

  it('C4.2 an error carries a stable code and a message naming the field', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    await assert.rejects(c.claim(id, 'w1', 0, { now: 1 }), (err) => {
      assert.ok(err instanceof FenceqError);
      assert.ok(err instanceof Error);
      assert.equal(err.name, 'FenceqError');
      assert.equal(err.code, 'invalid_argument');
      assert.match(err.message, /ttl/);
      return true;
    });
  });

  it('C4.1 a float where an int is required is bad_request and changes nothing', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    assert.equal(await c.claim(id, 'w1', 10, { now: 100 }), 1);
    await rejectsWith(c.renew(id, 'w1', 1.5, 10, { now: 101 }), 'bad_request', /fence/);
    await rejectsWith(c.complete(id, 'w1', 1.5, 'x', { now: 101 }), 'bad_request', /fence/);
    await rejectsWith(c.release(id, 'w1', 1.5), 'bad_request', /fence/);
    assert.deepEqual(await c.state(id),
      { id, owner: 'w1', until: 110, fence: 1, result: null, done: false });
  });

  it('C4.1 a field of the wrong type is bad_request', async () => {
    await rejectsWith(c.enqueue(42), 'bad_request', /id/);
    await rejectsWith(c.state(null), 'bad_request', /id/);
    await rejectsWith(c.claim(uniqueId(), 7, 10, { now: 1 }), 'bad_request', /owner/);
    await rejectsWith(c.claim(uniqueId(), 'w1', '10', { now: 1 }), 'bad_request', /ttl/);
    await rejectsWith(c.complete(uniqueId(), 'w1', 1, 12, { now: 1 }), 'bad_request', /result/);
  });

  it('C4.1 a missing field is bad_request', async () => {
    await rejectsWith(c.enqueue(), 'bad_request', /id/);
    await rejectsWith(c.request('claim', { id: uniqueId(), ttl: 10, now: 1 }), 'bad_request', /owner/);
    await rejectsWith(c.request('complete', { id: uniqueId(), owner: 'w', fence: 1, now: 1 }),
      'bad_request', /result/);
  });

  it('C4.1 NaN and infinite numbers are invalid_argument', async () => {
    const id = uniqueId();
    await c.enqueue(id);
    await rejectsWith(c.claim(id, 'w1', NaN, { now: 1 }), 'invalid_argument', /ttl/);
    await rejectsWith(c.claim(id, 'w1', Infinity, { now: 1 }), 'invalid_argument', /ttl/);
    await rejectsWith(c.claim(id, 'w1', 10, { now: NaN }), 'invalid_argument', /now/);
    await rejectsWith(c.claim(id, 'w1', 10, { now: -Infinity }), 'invalid_argument', /now/);
    assert.equal((await c.state(id)).fence, 0);
  });

  it('C4.1 id and owner are limited to 1024 bytes of UTF-8', async () => {
    const ascii = 'a'.repeat(1024);
    const wide = 'é'.repeat(512); // 2 bytes each: 1024 bytes
    assert.equal(await c.enqueue(ascii), true);
    assert.equal(await c.enqueue(wide), true);
    await rejectsWith(c.enqueue(`${ascii}b`), 'invalid_argument', /id/);
    await rejectsWith(c.enqueue(`${wide}b`), 'invalid_argument', /id/);
    await rejectsWith(c.state(`${ascii}b`), 'invalid_argument', /id/);
    assert.equal(await c.claim(ascii, 'o'.repeat(1024), 10, { now: 1 }), 1);
    await rejectsWith(c.claim(wide, 'o'.repeat(1025), 10, { now: 1 }), 'invalid_argument', /owner/);
    assert.equal((await c.state(wide)).fence, 0);
  });

  it('C4.1 an unknown op is unknown_op', async () => {
    await rejectsWith(c.request('frobnicate', { id: 'x' }), 'unknown_op');
  });

  it('request() sends its own op and rid whatever the fields say', async () => {
    const info = await c.request('ping', { op: 'frobnicate', rid: 'not-mine' });
    assert.equal(info.protocol, 1);
    assert.equal(c._pending.size, 0);
  });

  it('C4.1 a protocol version other than 1 is unsupported_version', async () => {
    await rejectsWith(c.request('ping', { v: 2 }), 'unsupported_version');
    await rejectsWith(c.request('enqueue', { v: 0, id: uniqueId() }), 'unsupported_version');
  });

  it('C4.1 bytes that are not msgpack, or not a map, get bad_request and the daemon goes on', async () => {
    const raw = new RawPeer(daemon.endpoint);
    try {
      for (const bytes of [Buffer.from([0xc1]), Buffer.from('hello'), Buffer.alloc(0),
        codec.encode([1, 2, 3]), codec.encode('ping'), Buffer.from([0x81, 0xa2, 0x6f, 0x70])]) {
        const reply = await raw.request(bytes);
        assert.equal(reply.ok, false, bytes.toString('hex'));
        assert.equal(reply.error.code, 'bad_request', bytes.toString('hex'));
        assert.ok(reply.error.message.length > 0);
      }
    } finally {
      raw.close();
    }
    assert.equal((await c.ping()).protocol, 1);
  });

  it('C4.1 string and int rids are echoed unchanged', async () => {
    const raw = new RawPeer(daemon.endpoint);
    try {
      for (const rid of ['abc', 7, 2 ** 40, -3, null]) {
        const reply = await raw.request(codec.encode({ op: 'ping', rid }));
        assert.equal(reply.ok, true);
        assert.deepEqual(reply.rid, rid);
      }
    } finally {
      raw.close();
    }
  });
});

describe('client-side failures', () => {
  it('a call to an ipc:// socket file that does not exist rejects at once, naming it', async () => {
    const dir = tempDir();
    const c = new Client(`ipc://${dir}/nobody.sock`, { timeoutMs: 5000 });
    try {
      const t0 = Date.now();
      await rejectsWith(c.ping(), 'unreachable',
        new RegExp(`there is no socket at ${dir}/nobody\\.sock .*make run`));
      assert.ok(Date.now() - t0 < 1000, `rejected after ${Date.now() - t0} ms`);
      // Every call says so on its own; nothing is left pending or queued.
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => c.enqueue(`job-${i}`)));
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        assert.equal(r.reason.code, 'unreachable');
      }
      assert.equal(c._pending.size, 0);
      // A plain file where the socket should be.
      fs.writeFileSync(`${dir}/plain`, 'x');
      const p = new Client(`ipc://${dir}/plain`);
      await rejectsWith(p.ping(), 'unreachable', new RegExp(`${dir}/plain is not a socket`));
      await p.close();
    } finally {
      await c.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a socket file nobody accepts on (a daemon killed with -9) rejects with timeout', async () => {
    const dead = await deadDaemon();
    const c = new Client(dead.endpoint, { timeoutMs: 200 });
    try {
      const t0 = Date.now();
      await rejectsWith(c.ping(), 'timeout', /200 ms/);
      const elapsed = Date.now() - t0;
      assert.ok(elapsed >= 150 && elapsed < 3000, `timed out after ${elapsed} ms`);
      // Every call times out on its own, none is lost.
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => c.enqueue(`job-${i}`)));
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        assert.equal(r.reason.code, 'timeout');
      }
      assert.equal(c._pending.size, 0);
    } finally {
      await c.close();
      fs.rmSync(dead.dir, { recursive: true, force: true });
    }
  });

  it('a call that timed out while the daemon was gone is never applied by the one that comes back', async () => {
    // ZMQ_IMMEDIATE (issue 57): the enqueue made while no daemon is there is
    // not queued in ZeroMQ, and the client drops it once its call timed out,
    // so the daemon that comes up never applies it (without immediate it
    // did, after its call had timed out). The client had its answer from a
    // daemon that then stopped (a restart): it waits for the socket to come
    // back instead of failing at once, and then goes on with its own answers.
    const dir = tempDir();
    const endpoint = `ipc://${dir}/fenceqd.sock`;
    const c = new Client(endpoint, { timeoutMs: 300 });
    let daemon = await startDaemon({ clock: 'client', dir, endpoint });
    try {
      await c.ping();
      await daemon.stop();
      assert.equal(fs.existsSync(`${dir}/fenceqd.sock`), false);
      await rejectsWith(c.enqueue('late'), 'timeout', /the request was not sent/);
      // One more, still waiting for room while the daemon comes up: it is
      // sent to the new daemon only if its call still waits then; one that
      // timed out unsent is never applied.
      const racing = c.enqueue('racing').then(() => 'answered',
        (err) => (err.code === 'timeout' && /not sent/.test(err.message) ? 'unsent' : err.code));
      daemon = await startDaemon({ clock: 'client', dir, endpoint });
      const raced = await racing;
      const probe = new Client(endpoint, { timeoutMs: 1000 });
      try {
        for (let i = 0; i < 15; i++) {
          assert.equal(await probe.state('late'), null, 'the timed-out enqueue was delivered late');
          if (raced === 'unsent') {
            assert.equal(await probe.state('racing'), null, 'a timed-out enqueue was delivered late');
          }
          await sleep(100);
        }
      } finally {
        await probe.close();
      }
      const answers = await Promise.all([c.enqueue('late'), c.state('late'), c.enqueue('other')]);
      assert.equal(answers[0], true);
      assert.equal(answers[1].id, 'late');
      assert.equal(answers[2], true);
      assert.equal(c._pending.size, 0);
    } finally {
      await c.close();
      await daemon?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('close() rejects every pending call with closed, and later calls with misuse', async () => {
    const { dir, endpoint } = await deadDaemon();
    const c = new Client(endpoint, { timeoutMs: 60000 });
    try {
      const pending = Array.from({ length: 10 }, (_, i) => c.claim(`job-${i}`, 'w', 10));
      const settled = Promise.allSettled(pending);
      await sleep(50);
      const t0 = Date.now();
      await c.close();
      const results = await settled;
      assert.ok(Date.now() - t0 < 1000);
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        assert.ok(r.reason instanceof FenceqError);
        assert.equal(r.reason.code, 'closed');
      }
      assert.equal(c.closed, true);
      await rejectsWith(c.ping(), 'misuse', /closed client/);
      await c.close(); // idempotent
      await rejectsWith(c.request('ping', {}), 'misuse');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('close() with calls in flight to a live daemon settles every call', async () => {
    const daemon = await startDaemon({ clock: 'server' });
    const c = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      await c.ping();
      const calls = Array.from({ length: 300 }, (_, i) => c.enqueue(uniqueId(`inflight-${i}`)));
      const settled = Promise.allSettled(calls);
      await c.close();
      for (const r of await settled) {
        if (r.status === 'fulfilled') assert.equal(r.value, true);
        else assert.equal(r.reason.code, 'closed');
      }
    } finally {
      await c.close();
      await daemon.stop();
    }
  });

  it('a burst larger than the pipe waits for room and is answered; a pipe that stays full times out', { timeout: 60000 }, async () => {
    // The client sends without asking ZeroMQ first whether there is room
    // (lib/client.js _send): a full pipe answers EAGAIN, and that send must
    // then wait for room (up to a call timeout), not fail. A fake daemon that
    // does not read for a while fills the pipe: a high-water mark of one
    // message on both sides and requests of 100 KiB (the kernel's buffer
    // holds a few).
    const dir = tempDir();
    const endpoint = `ipc://${dir}/fake.sock`;
    const router = new zmq.Router({ linger: 0, receiveHighWaterMark: 1 });
    await router.bind(endpoint);
    // With ZMQ_IMMEDIATE a connection's pipe is made when it completes, with
    // the options the socket had at connect(): a high-water mark set after
    // connect() would not apply to it (nor would disconnecting and connecting
    // again: a send may go to the old pipe on its way out, and be lost). So
    // the client's socket is made with it, as with every option it sets.
    const { Dealer } = zmq;
    zmq.Dealer = class extends Dealer {
      constructor(options) {
        super({ ...options, sendHighWaterMark: 1 });
      }
    };
    let c;
    try {
      c = new Client(endpoint, { timeoutMs: 5000 });
    } finally {
      zmq.Dealer = Dealer;
    }
    assert.equal(c._socket.sendHighWaterMark, 1);
    assert.equal(c._socket.immediate, true);
    let full = 0; // sends that found the pipe full
    const socket = c._socket;
    const send = async (frames) => {
      try {
        return await socket.send(frames);
      } catch (err) {
        if (err.code === 'EAGAIN') full++;
        throw err;
      }
    };
    c._socket = new Proxy(socket, {
      get: (target, key) => (key === 'send' ? send
        : typeof target[key] === 'function' ? target[key].bind(target) : target[key]),
    });
    const answer = async (count) => {
      for (let i = 0; i < count; i++) {
        const [identity, payload] = await router.receive();
        const { rid } = codec.decode(payload);
        await router.send([identity, codec.encode({ rid, ok: true, result: true })]);
      }
    };
    try {
      // Connected first (a send before that also finds no room: not a full pipe).
      const first = c.enqueue('first');
      await answer(1);
      assert.equal(await first, true);
      full = 0;
      const big = 'x'.repeat(100 * 1024);
      const calls = Array.from({ length: 30 }, (_, i) => c.enqueue(`burst-${i}`, { payload: big }));
      await sleep(300);
      assert.ok(full >= 1, 'the pipe never filled');
      await answer(30);
      assert.deepEqual(await Promise.all(calls), Array(30).fill(true));
      // Nobody reads now: with a short timeout every call times out, none is
      // lost, and the client goes on once the daemon reads again.
      c.timeoutMs = 300;
      const t0 = Date.now();
      const stuck = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) => c.enqueue(`stuck-${i}`, { payload: big })));
      assert.ok(Date.now() - t0 < 5000, `settled after ${Date.now() - t0} ms`);
      assert.deepEqual(stuck.map((r) => r.reason?.code), Array(30).fill('timeout'));
      assert.equal(c._pending.size, 0);
      c.timeoutMs = 5000;
      const late = c.enqueue('after', { payload: 'y' });
      const drained = (async () => {
        for (;;) {
          const [identity, payload] = await router.receive();
          const { rid, id } = codec.decode(payload);
          if (id === 'after') return router.send([identity, codec.encode({ rid, ok: true, result: true })]);
        }
      })();
      await drained;
      assert.equal(await late, true);
    } finally {
      await c.close();
      router.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the constructor refuses a malformed endpoint or timeout with invalid_argument', () => {
    assert.throws(() => new Client('nonsense://x'), (err) =>
      err instanceof FenceqError && err.code === 'invalid_argument');
    assert.throws(() => new Client('ipc:///tmp/x', { timeoutMs: 0 }), (err) =>
      err instanceof FenceqError && err.code === 'invalid_argument');
    assert.throws(() => new Client('ipc:///tmp/x', { timeoutMs: 'soon' }), (err) =>
      err instanceof FenceqError && err.code === 'invalid_argument');
  });
});

/**
 * Runs `fn` with env FENCEQ_ENDPOINT set to `value` (undefined: unset) and,
 * when given, `cwd` as the current folder; both are restored after.
 */
async function withEndpointEnv(value, cwd, fn) {
  const saved = process.env.FENCEQ_ENDPOINT;
  const savedCwd = process.cwd();
  try {
    if (value === undefined) delete process.env.FENCEQ_ENDPOINT;
    else process.env.FENCEQ_ENDPOINT = value;
    if (cwd !== undefined) process.chdir(cwd);
    return await fn();
  } finally {
    process.chdir(savedCwd);
    if (saved === undefined) delete process.env.FENCEQ_ENDPOINT;
    else process.env.FENCEQ_ENDPOINT = saved;
  }
}

// On a host with the service's socket, step 3 takes it over the development
// default; tests create no files under /run.
const serviceThere = resolveEndpoint(undefined, { env: {} }).source === 'service' &&
  `the fenceqd service's socket (${SERVICE_ENDPOINT}) exists on this host: step 4 cannot be reached`;

/** `promise` rejects with code unreachable, its message holding every one of `parts`. */
async function rejectsUnreachable(promise, ...parts) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof FenceqError, `expected a FenceqError, got ${err}`);
    assert.equal(err.code, 'unreachable', err.message);
    for (const part of parts) assert.ok(err.message.includes(part), `${part}\nnot in: ${err.message}`);
    return true;
  });
}

describe('which endpoint: given, FENCEQ_ENDPOINT, the service, the development default', () => {
  it('resolveEndpoint takes the first step that applies', () => {
    const env = { FENCEQ_ENDPOINT: 'ipc:///env.sock' };
    for (const serviceSocketExists of [false, true]) {
      assert.deepEqual(resolveEndpoint('ipc:///a.sock', { env, serviceSocketExists }),
        { endpoint: 'ipc:///a.sock', source: 'given' });
      assert.deepEqual(resolveEndpoint('ipc:///a.sock', { env: {}, serviceSocketExists }),
        { endpoint: 'ipc:///a.sock', source: 'given' });
      for (const given of [undefined, null, '']) {
        assert.deepEqual(resolveEndpoint(given, { env, serviceSocketExists }),
          { endpoint: 'ipc:///env.sock', source: 'environment' });
      }
    }
    for (const env of [{}, { FENCEQ_ENDPOINT: '' }]) {
      assert.deepEqual(resolveEndpoint(undefined, { env, serviceSocketExists: true }),
        { endpoint: 'ipc:///run/fenceq/fenceqd.sock', source: 'service' });
      assert.deepEqual(resolveEndpoint(undefined, { env, serviceSocketExists: false }),
        { endpoint: 'ipc://var/fenceqd.sock', source: 'development' });
    }
    assert.equal(SERVICE_ENDPOINT, 'ipc:///run/fenceq/fenceqd.sock');
    assert.equal(DEFAULT_ENDPOINT, 'ipc://var/fenceqd.sock');
    // The packaged service's socket is the one step 3 looks for.
    const conf = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'systemd', 'fenceqd.conf'), 'utf8');
    assert.ok(conf.includes(`\nlisten = ${SERVICE_ENDPOINT}\n`));
  });

  it('FENCEQ_ENDPOINT is used when no endpoint is given', async () => {
    const daemon = await startDaemon({ clock: 'server' });
    try {
      await withEndpointEnv(daemon.endpoint, undefined, async () => {
        const c = new Client();
        try {
          assert.equal(c.endpoint, daemon.endpoint);
          assert.equal(c.endpointSource, 'environment');
          assert.equal(await c.enqueue('from-env'), true);
        } finally {
          await c.close();
        }
      });
      const check = new Client(daemon.endpoint);
      assert.notEqual(await check.state('from-env'), null);
      await check.close();
    } finally {
      await daemon.stop();
    }
  });

  it('an endpoint given to new Client beats FENCEQ_ENDPOINT', async () => {
    const byEnv = await startDaemon({ clock: 'server' });
    const given = await startDaemon({ clock: 'server' });
    try {
      await withEndpointEnv(byEnv.endpoint, undefined, async () => {
        const c = new Client(given.endpoint, { timeoutMs: 2000 });
        try {
          assert.equal(c.endpoint, given.endpoint);
          assert.equal(c.endpointSource, 'given');
          assert.equal(await c.enqueue('given-job'), true);
        } finally {
          await c.close();
        }
      });
      for (const [daemon, has] of [[given, true], [byEnv, false]]) {
        const check = new Client(daemon.endpoint);
        assert.equal((await check.state('given-job')) !== null, has);
        await check.close();
      }
    } finally {
      await byEnv.stop();
      await given.stop();
    }
  });

  it('the development default ipc://var/fenceqd.sock when neither', { skip: serviceThere }, async () => {
    const daemon = await startDaemon({ clock: 'server' });
    const repo = tempDir();
    try {
      // A folder laid out as `make run` leaves the repository: var/fenceqd.sock.
      fs.mkdirSync(path.join(repo, 'var'));
      fs.symlinkSync(daemon.endpoint.slice('ipc://'.length), path.join(repo, 'var', 'fenceqd.sock'));
      for (const env of [undefined, '']) {
        await withEndpointEnv(env, repo, async () => {
          const c = new Client({ timeoutMs: 2000 });
          try {
            assert.equal(c.endpoint, 'ipc://var/fenceqd.sock');
            assert.equal(c.endpointSource, 'development');
            assert.equal((await c.ping()).protocol, 1);
          } finally {
            await c.close();
          }
        });
      }
    } finally {
      await daemon.stop();
      fs.rmSync(repo, { recursive: true, force: true });
    }
  });

  it('nothing served: the error names the step and new Client(endpoint) or FENCEQ_ENDPOINT',
    { skip: serviceThere }, async () => {
      const dir = fs.realpathSync(tempDir());
      const choose = '; to use another endpoint, pass it as new Client(endpoint) or set FENCEQ_ENDPOINT';
      try {
        await withEndpointEnv(undefined, dir, async () => {
          const c = new Client();
          await rejectsUnreachable(c.ping(), choose,
            'nothing serves ipc://var/fenceqd.sock (the development default): there is ' +
              `no socket at ${dir}/var/fenceqd.sock`);
          await c.close();
        });
        await withEndpointEnv(`ipc://${dir}/env.sock`, undefined, async () => {
          const c = new Client();
          await rejectsUnreachable(c.ping(), choose,
            `nothing serves ipc://${dir}/env.sock (from FENCEQ_ENDPOINT)`);
          await c.close();
          const given = new Client(`ipc://${dir}/given.sock`);
          await rejectsUnreachable(given.ping(),
            `nothing serves ipc://${dir}/given.sock (given explicitly)`,
            '; to use another endpoint, pass it as new Client(endpoint) ' +
              '(FENCEQ_ENDPOINT is read only when none is given)');
          await given.close();
        });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
});

describe('transport limits and shutdown', () => {
  it('C4.1 a frame over --max-message drops the connection, changes nothing, and the daemon goes on', async () => {
    const daemon = await startDaemon({ clock: 'server', args: ['--max-message', '4096'] });
    const c = new Client(daemon.endpoint, { timeoutMs: 500 });
    try {
      const id = uniqueId();
      await c.enqueue(id);
      const fence = await c.claim(id, 'w1', 60);
      await rejectsWith(c.complete(id, 'w1', fence, 'x'.repeat(16384)), 'timeout');

      const other = new Client(daemon.endpoint, { timeoutMs: 2000 });
      try {
        const row = await other.state(id);
        assert.equal(row.done, false);
        assert.equal(row.result, null);
      } finally {
        await other.close();
      }
      // The same client reconnects by itself; a few calls may be lost meanwhile.
      let pong = null;
      for (let i = 0; i < 20 && pong === null; i++) {
        pong = await c.ping().catch((err) => {
          if (err.code !== 'timeout') throw err;
          return null;
        });
      }
      assert.notEqual(pong, null, 'the client got its connection back');
      assert.equal(await c.complete(id, 'w1', fence, 'x'.repeat(1000)), true);
    } finally {
      await c.close();
      await daemon.stop();
    }
  });

  it('C1.2 the same client goes on after fenceqd restarts, and the fence is not reset', async () => {
    const dir = tempDir();
    const endpoint = `ipc://${dir}/fenceqd.sock`;
    let daemon = await startDaemon({ clock: 'client', dir, endpoint });
    const c = new Client(endpoint, { timeoutMs: 500 });
    try {
      const id = uniqueId();
      await c.enqueue(id);
      assert.equal(await c.claim(id, 'w1', 10, { now: 100 }), 1);
      const { code } = await daemon.stop();
      assert.equal(code, 0, daemon.stderr);
      await rejectsWith(c.state(id), 'timeout');

      daemon = await startDaemon({ clock: 'client', dir, endpoint });
      let row = null;
      for (let i = 0; i < 20 && row === null; i++) {
        row = await c.state(id).catch((err) => {
          if (err.code !== 'timeout') throw err;
          return null;
        });
      }
      assert.deepEqual(row, { id, owner: 'w1', until: 110, fence: 1, result: null, done: false });
      assert.equal(await c.release(id, 'w1', 1), true);
      assert.equal(await c.enqueue(id), false);
      assert.equal(await c.claim(id, 'w2', 10, { now: 101 }), 2);
    } finally {
      await c.close();
      await daemon.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('SIGTERM: calls end as results or unavailable (or timeout once it is gone); exit 0', async (t) => {
    const daemon = await startDaemon({ clock: 'server' });
    const c = new Client(daemon.endpoint, { timeoutMs: 2000 });
    try {
      await c.ping();
      const calls = Array.from({ length: 2000 }, (_, i) => c.enqueue(uniqueId(`term-${i}`)));
      await calls[0];
      daemon.proc.kill('SIGTERM');
      const outcomes = { ok: 0, unavailable: 0, timeout: 0 };
      for (const r of await Promise.allSettled(calls)) {
        if (r.status === 'fulfilled') {
          assert.equal(r.value, true);
          outcomes.ok += 1;
        } else {
          assert.ok(['unavailable', 'timeout'].includes(r.reason.code), r.reason.message);
          outcomes[r.reason.code] += 1;
        }
      }
      const { code, signal } = await daemon.exited;
      assert.equal(signal, null);
      assert.equal(code, 0, daemon.stderr);
      assert.ok(outcomes.ok >= 1);
      t.diagnostic(`SIGTERM outcomes: ${JSON.stringify(outcomes)}`); // which paths the race took
    } finally {
      await c.close();
      await daemon.stop();
    }
  });
});
