'use strict';

// CURVE over tcp:// against a real daemon: fenceqd serves tcp only with
// CURVE and answers only the clients whose public key it lists; anyone else
// (an unlisted key, the wrong server key, no CURVE at all) gets no reply and
// nothing it sends is applied. Plus curveKeys() and the `curve` option's
// checks, which need no daemon.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { promisify } = require('node:util');
const zmq = require('zeromq');
const { Client, FenceqError, curveKeys } = require('fenceq');
const { FENCEQD, startDaemon, rejectsWith, uniqueId, tempDir, sleep } = require('./helpers');

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

/** `fenceqd --curve-keygen file`: the line it printed, `public-key = "..."`. */
async function keygen(file) {
  const { stdout } = await promisify(execFile)(FENCEQD, ['--curve-keygen', file],
    { timeout: 10000 });
  const line = stdout.trim();
  assert.match(line, /^public-key = ".{40}"$/, `keygen printed: ${stdout}`);
  return line;
}

function bareKey(line) {
  return /^public-key = "(.{40})"$/.exec(line)[1];
}

/** Runs `use(client)` with a new client, and closes it whatever happens. */
async function withClient(endpoint, options, use) {
  const client = new Client(endpoint, options);
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

/** Asserts that `make()` throws a FenceqError invalid_argument matching `pattern`. */
function throwsInvalid(make, pattern) {
  assert.throws(make, (err) => {
    assert.ok(err instanceof FenceqError, `expected a FenceqError, got ${err}`);
    assert.equal(err.code, 'invalid_argument', `code of: ${err.message}`);
    if (pattern) assert.match(err.message, pattern);
    return true;
  });
}

/** new Client(...), closed at once if the constructor did not throw. */
function newClosedClient(endpoint, options) {
  const client = new Client(endpoint, options);
  void client.close();
  return client;
}

describe('CURVE over tcp://', () => {
  let keysDir;
  let daemon;
  let tcp; // the daemon's tcp endpoint
  let serverLine; // what keygen printed for the daemon's key: public-key = "..."
  let listed; // the allowed client's key file and printed line
  let unlisted;
  let allowed; // a Client with the listed key, over tcp

  before(async () => {
    keysDir = tempDir();
    const file = (name) => path.join(keysDir, name);
    [serverLine, listed, unlisted] = await Promise.all([
      keygen(file('server.key')),
      keygen(file('listed.key')).then((line) => ({ file: file('listed.key'), line })),
      keygen(file('unlisted.key')).then((line) => ({ file: file('unlisted.key'), line })),
    ]);
    // Whole-line comments and a printed line, as an operator would keep it.
    fs.writeFileSync(file('clients.pub'), `# the allowed clients\n  # indented comment\n${listed.line}\n`);
    tcp = `tcp://127.0.0.1:${await freePort()}`;
    // The daemon's default ipc endpoint stays: startDaemon pings it to know
    // the daemon is ready (a plain client gets nothing on tcp).
    daemon = await startDaemon({
      clock: 'client',
      args: ['--listen', tcp, '--allow-tcp', '--curve-secret-key', file('server.key'),
        '--curve-allowed-clients', file('clients.pub')],
    });
    allowed = new Client(tcp, { timeoutMs: 5000, curve: curveKeys(listed.file, serverLine) });
  });

  after(async () => {
    await allowed?.close();
    await daemon?.stop();
    if (keysDir) fs.rmSync(keysDir, { recursive: true, force: true });
  });

  it('a listed client (curveKeys with the printed server line) enqueues, claims and completes; a stale complete is refused', async () => {
    const keys = curveKeys(listed.file, serverLine);
    assert.equal(keys.publicKey, bareKey(listed.line));
    assert.equal(keys.serverPublic, bareKey(serverLine));
    await withClient(tcp, { timeoutMs: 5000, curve: keys }, async (c) => {
      assert.equal((await c.ping()).protocol, 1);
      const id = uniqueId('curve');
      assert.equal(await c.enqueue(id, { now: 100 }), true);
      assert.equal(await c.claim(id, 'w1', 10, { now: 100 }), 1);
      // w1's lease expires; w2 takes fence 2; w1's complete is stale (C3.5).
      assert.equal(await c.claim(id, 'w2', 10, { now: 200 }), 2);
      assert.equal(await c.complete(id, 'w1', 1, 'stale', { now: 201 }), false);
      assert.equal(await c.complete(id, 'w2', 2, 'done', { now: 202 }), true);
      const row = await c.state(id);
      assert.equal(row.done, true);
      assert.equal(row.fence, 2);
      assert.equal(row.result, 'done');
      // The same daemon through its ipc endpoint sees the tcp writes.
      await withClient(daemon.endpoint, { timeoutMs: 5000 }, async (local) => {
        assert.deepEqual(await local.state(id), row);
      });
    });
  });

  it('a client whose key is not listed gets no reply (timeout) and its enqueue is not applied', async () => {
    const id = uniqueId('unlisted');
    await withClient(tcp, { timeoutMs: 500, curve: curveKeys(unlisted.file, serverLine) },
      (c) => rejectsWith(c.enqueue(id, { now: 100 }), 'timeout'));
    await sleep(100);
    assert.equal(await allowed.state(id), null);
  });

  it('a client without CURVE gets no reply on the tcp endpoint and changes nothing', async () => {
    const id = uniqueId('plain');
    await withClient(tcp, { timeoutMs: 500 }, async (c) => {
      await rejectsWith(c.enqueue(id, { now: 100 }), 'timeout');
      await rejectsWith(c.ping(), 'timeout');
    });
    await sleep(100);
    assert.equal(await allowed.state(id), null);
  });

  it('a listed client with the wrong server public key gets no reply (timeout)', async () => {
    const id = uniqueId('wrongserver');
    // The listed key pair, but another key (the unlisted client's) as the server's.
    const keys = curveKeys(listed.file, unlisted.line);
    await withClient(tcp, { timeoutMs: 500, curve: keys },
      (c) => rejectsWith(c.enqueue(id, { now: 100 }), 'timeout'));
    await sleep(100);
    assert.equal(await allowed.state(id), null);
  });

  it('curveKeys takes the server key bare or as the printed line, and refuses bad files and keys', async () => {
    const bare = bareKey(serverLine);
    const fromLine = curveKeys(listed.file, serverLine);
    assert.deepEqual(curveKeys(listed.file, bare), fromLine);
    assert.deepEqual(curveKeys(listed.file, `${serverLine}\n`), fromLine); // as captured from stdout
    assert.deepEqual(Object.keys(fromLine).sort(), ['publicKey', 'secretKey', 'serverPublic']);
    for (const key of Object.values(fromLine)) assert.equal(key.length, 40);
    const secretLine = fs.readFileSync(listed.file, 'utf8').split('\n')
      .find((line) => line.trim().startsWith('secret-key'));
    assert.equal(fromLine.secretKey, /"(.{40})"/.exec(secretLine)[1]);
    // The ESM entry exports the same function.
    assert.equal((await import('fenceq')).curveKeys, curveKeys);

    const file = (name, text) => {
      const p = path.join(keysDir, name);
      fs.writeFileSync(p, text, { mode: 0o600 });
      return p;
    };
    const pub = `    public-key = "${fromLine.publicKey}"\n`;
    const sec = `    secret-key = "${fromLine.secretKey}"\n`;
    // Comments (whole lines only: '#' is a Z85 digit), sections and metadata are skipped.
    const withExtras = file('extras.key',
      `# a comment\nmetadata\n    name = "worker one"\ncurve\n  # another\n${pub}${sec}`);
    assert.deepEqual(curveKeys(withExtras, bare), fromLine);

    const missing = path.join(keysDir, 'no-such.key');
    throwsInvalid(() => curveKeys(missing, bare), new RegExp(`cannot read CURVE key file ${missing}`));
    const noSecret = file('nosecret.key', `# fenceq CURVE key pair\ncurve\n${pub}`);
    throwsInvalid(() => curveKeys(noSecret, bare), new RegExp(`${noSecret} has no secret-key line`));
    const noPublic = file('nopublic.key', `curve\n${sec}`);
    throwsInvalid(() => curveKeys(noPublic, bare), /has no public-key line/);
    const shortKey = file('short.key', `curve\n${pub}    secret-key = "short"\n`);
    throwsInvalid(() => curveKeys(shortKey, bare), new RegExp(`${shortKey}:3: expected secret-key`));
    const badChar = file('badchar.key', `curve\n    public-key = "${'~'.repeat(40)}"\n${sec}`);
    throwsInvalid(() => curveKeys(badChar, bare), new RegExp(`${badChar}:2: public-key is not a 40-character Z85 key`));
    // 40 Z85 digits, but '#####' is beyond 32 bits: not a key either.
    const overflow = file('overflow.key', `curve\n${pub}    secret-key = "${'#'.repeat(40)}"\n`);
    throwsInvalid(() => curveKeys(overflow, bare), new RegExp(`${overflow}:3:`));
    const twice = file('twice.key', `curve\n${pub}${sec}${pub}`);
    throwsInvalid(() => curveKeys(twice, bare), /:4: a second public-key line/);
    const junk = file('junk.key', `curve\n${pub}${sec}what is this\n`);
    throwsInvalid(() => curveKeys(junk, bare), /:4: expected public-key/);
    const mismatched = file('mismatch.key', `curve\n    public-key = "${bareKey(unlisted.line)}"\n${sec}`);
    throwsInvalid(() => curveKeys(mismatched, bare), /public-key .* does not belong to its secret-key/);

    // The server key: not 40 Z85 characters, or some other line.
    throwsInvalid(() => curveKeys(listed.file, 'short'), /server public key/);
    throwsInvalid(() => curveKeys(listed.file, `${bare}x`), /server public key/);
    throwsInvalid(() => curveKeys(listed.file, 'public-key = "short"'), /server public key/);
    throwsInvalid(() => curveKeys(listed.file, secretLine), /server public key/);
    throwsInvalid(() => curveKeys(listed.file, undefined), /server public key/);
    throwsInvalid(() => curveKeys('', bare), /keyFile/);
    // The secret key never shows in a message.
    assert.throws(() => curveKeys(listed.file, secretLine), (err) => !err.message.includes(fromLine.secretKey));
  });

  it('new Client refuses malformed curve keys before making a socket', () => {
    const good = curveKeys(listed.file, serverLine);
    // Count the sockets the client makes (it looks zmq.Dealer up at construction).
    const RealDealer = zmq.Dealer;
    const made = [];
    zmq.Dealer = class extends RealDealer {
      constructor(options) {
        super(options);
        made.push(options);
      }
    };
    try {
      refusesMalformedCurve(good);
      // Good keys, but for an endpoint fenceqd serves without CURVE.
      throwsInvalid(() => newClosedClient('ipc:///tmp/fenceqd.sock', { curve: good }), /tcp:\/\//);
      assert.equal(made.length, 0, 'a refused curve option must not make a socket');
      // A valid one makes one socket with the three keys (and null means none).
      assert.equal(newClosedClient(tcp, { curve: good }).endpoint, tcp);
      assert.equal(made.length, 1);
      assert.equal(made[0].curveServerKey, good.serverPublic);
      assert.equal(made[0].curvePublicKey, good.publicKey);
      assert.equal(made[0].curveSecretKey, good.secretKey);
      newClosedClient(tcp, { curve: null });
      assert.equal(made.length, 2);
      assert.equal(made[1].curveServerKey, undefined);
    } finally {
      zmq.Dealer = RealDealer;
    }
  });
});

/** The malformed `curve` options new Client must refuse (invalid_argument). */
function refusesMalformedCurve(good) {
  const endpoint = 'tcp://127.0.0.1:1';
  const refuses = (curve, pattern) => throwsInvalid(() => newClosedClient(endpoint, { curve }), pattern);
  refuses({ ...good, serverPublic: 'short' }, /curve\.serverPublic must be a 40-character Z85 key/);
  refuses({ ...good, publicKey: `${good.publicKey.slice(0, 39)}~` }, /curve\.publicKey/);
  refuses({ ...good, secretKey: undefined }, /curve\.secretKey/);
  refuses({ ...good, secretKey: good.secretKey.slice(1) },
    /curve\.secretKey must be a 40-character Z85 key \(got 39 characters\)$/);
  refuses({ ...good, serverKey: good.serverPublic }, /unknown curve option 'serverKey'/);
  refuses(`public-key = "${good.serverPublic}"`, /curve option must be an object/);
}
