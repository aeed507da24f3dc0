'use strict';

// Starts real fenceqd daemons for the tests: each on its own temp dir, its own
// SQLite file and its own ipc socket, killed by the test that started it (and
// by the exit hook below if a test process dies first).

const { spawn } = require('node:child_process');
const { before, after } = require('node:test');
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const zmq = require('zeromq');
const { Client, FenceqError } = require('fenceq');
const codec = require('../lib/codec');

const FENCEQD = process.env.FENCEQD ||
  path.resolve(__dirname, '..', '..', '..', 'build', 'bin', 'fenceqd');

const live = new Set();
process.on('exit', () => {
  for (const proc of live) proc.kill('SIGKILL');
});

/** A fresh temp dir with a short path (ipc paths are limited to ~107 bytes). */
function tempDir() {
  return fs.mkdtempSync('/tmp/fqn-');
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Spawns fenceqd and waits until it answers ping.
 * @param {{clock?: 'client'|'server', args?: string[], dir?: string, endpoint?: string}} [opts]
 * @returns {Promise<Daemon>}
 */
async function startDaemon(opts = {}) {
  if (!fs.existsSync(FENCEQD)) {
    throw new Error(`fenceqd not found at ${FENCEQD}: build the daemon first or set FENCEQD`);
  }
  const dir = opts.dir ?? tempDir();
  const endpoint = opts.endpoint ?? `ipc://${dir}/fenceqd.sock`;
  const args = ['--db', path.join(dir, 'jobs.db'), '--listen', endpoint,
    '--clock', opts.clock ?? 'client',
    // A safety net only: a daemon orphaned by a killed test run exits by itself.
    '--idle-exit', '120', ...(opts.args ?? [])];
  const proc = spawn(FENCEQD, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  live.add(proc);
  const daemon = new Daemon(proc, dir, endpoint, opts.dir === undefined);
  await daemon.waitReady();
  return daemon;
}

/**
 * A daemon killed with SIGKILL: its socket file stays, and nothing accepts on
 * it (connections are refused), as after a crash.
 * @returns {Promise<{dir: string, endpoint: string}>}
 */
async function deadDaemon() {
  const daemon = await startDaemon({ dir: tempDir() });
  daemon.proc.kill('SIGKILL');
  await daemon.exited;
  return { dir: daemon.dir, endpoint: daemon.endpoint };
}

class Daemon {
  constructor(proc, dir, endpoint, ownsDir) {
    this.proc = proc;
    this.dir = dir;
    this.endpoint = endpoint;
    this.ownsDir = ownsDir;
    this.stderr = '';
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        live.delete(proc);
        resolve({ code, signal });
      });
    });
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-8192);
    });
  }

  /** ZeroMQ connects asynchronously: ping until the daemon answers (<= ~10 s). */
  async waitReady() {
    // Bounded by time, not by tries: until the socket exists each try fails
    // at once (unreachable), and on a busy machine a daemon's start (open,
    // schema, prepared statements) took longer than 50 tries of 20 ms, which
    // cancelled a whole describe block.
    const client = new Client(this.endpoint, { timeoutMs: 200 });
    const deadline = Date.now() + 20000;
    try {
      while (Date.now() < deadline) {
        if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
          throw new Error(`fenceqd exited during start-up (${this.proc.exitCode ?? this.proc.signalCode}): ${this.stderr}`);
        }
        try {
          await client.ping();
          return;
        } catch (err) {
          if (!(err instanceof FenceqError) || !['timeout', 'unreachable'].includes(err.code)) throw err;
          if (err.code === 'unreachable') await new Promise((r) => setTimeout(r, 20));
        }
      }
      throw new Error(`fenceqd did not answer ping on ${this.endpoint}: ${this.stderr}`);
    } finally {
      await client.close();
    }
  }

  /**
   * SIGTERM, then SIGKILL after 5 s. Removes the temp dir it created.
   * @returns {Promise<{code: number|null, signal: string|null}>}
   */
  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
      await this.exited;
      clearTimeout(timer);
    }
    if (this.ownsDir) fs.rmSync(this.dir, { recursive: true, force: true });
    return this.exited;
  }
}

/** Asserts that `promise` rejects with a FenceqError of `code` and a message. */
async function rejectsWith(promise, code, messagePattern) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof FenceqError, `expected a FenceqError, got ${err}`);
    assert.equal(err.code, code, `code of: ${err.message}`);
    assert.equal(typeof err.message, 'string');
    assert.ok(err.message.length > 0, 'error message is empty');
    if (messagePattern) assert.match(err.message, messagePattern);
    return true;
  });
}

/**
 * Spies on `client.request`: every request the client sends is appended to
 * `sent` as [op, fields] (the fields as the method built them) and still goes
 * to the daemon; `restore()` stops the spying.
 */
function recordRequests(client) {
  const sent = [];
  const original = client.request.bind(client);
  client.request = (op, fields, options) => {
    sent.push([op, fields]);
    return original(op, fields, options);
  };
  return { sent, restore: () => { delete client.request; } };
}

/**
 * A raw DEALER that speaks bytes, for payloads the Client would never build
 * (not msgpack, not a map, fixed rids). One request at a time.
 */
class RawPeer {
  constructor(endpoint) {
    this.socket = new zmq.Dealer({ linger: 0, receiveTimeout: 5000 });
    this.socket.connect(endpoint);
  }

  /** Sends [empty, payload]; returns the reply payload as a Buffer. */
  async exchange(payload) {
    await this.socket.send([Buffer.alloc(0), payload]);
    const frames = await this.socket.receive();
    assert.equal(frames.length, 2, 'reply = [empty delimiter, payload]');
    assert.equal(frames[0].length, 0);
    return frames[1];
  }

  /** Sends raw bytes and decodes the reply with the client's codec. */
  async request(payload) {
    return codec.decode(await this.exchange(payload));
  }

  close() {
    this.socket.close();
  }
}

/** A job id no other test uses. */
let idCounter = 0;
function uniqueId(prefix = 'job') {
  idCounter += 1;
  return `${prefix}-${process.pid}-${idCounter}`;
}

/**
 * The fixture of most describe blocks: registers before/after hooks that
 * start a daemon (startDaemon `options`; `timeoutMs`, default 5000, is the
 * clients') with `clients` Clients on it, hand them to
 * `use(daemon, ...clients)`, and close and stop them after the block's tests.
 */
function withDaemon(options, clients, use) {
  const { timeoutMs = 5000, ...daemonOptions } = options;
  let daemon;
  let open = [];
  before(async () => {
    daemon = await startDaemon(daemonOptions);
    open = Array.from({ length: clients }, () => new Client(daemon.endpoint, { timeoutMs }));
    use(daemon, ...open);
  });
  after(async () => {
    for (const client of open) await client.close();
    await daemon?.stop();
  });
}

/**
 * A fake daemon, for the tests of how replies are checked: registers
 * before/after hooks that bind a ROUTER on a fresh IPC endpoint, hand
 * `use({ router, endpoint })` both, and close and remove it after the block.
 */
function withFakeDaemon(use) {
  let dir;
  let router;
  before(async () => {
    dir = tempDir();
    const endpoint = `ipc://${dir}/fake.sock`;
    router = new zmq.Router({ linger: 0 });
    await router.bind(endpoint);
    use({ router, endpoint });
  });
  after(() => {
    router?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
}

module.exports = {
  FENCEQD, RawPeer, startDaemon, deadDaemon, withDaemon, withFakeDaemon, rejectsWith,
  recordRequests, uniqueId, tempDir, sleep,
};
