'use strict';

// The examples in examples/node/ run as documented against a real daemon.

const { it } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');
const { promisify } = require('node:util');
const { Client } = require('fenceq');
const { startDaemon } = require('./helpers');

const EXAMPLE = path.resolve(__dirname, '..', '..', '..', 'examples', 'node', 'worker.js');

it('examples/node/worker.js completes its jobs, and skips them on a second run (C3.3)', async () => {
  const daemon = await startDaemon({ clock: 'server' });
  try {
    const env = { ...process.env, FENCEQ_ENDPOINT: daemon.endpoint };
    const run = () => promisify(execFile)(process.execPath, [EXAMPLE, 'ex-1', 'ex-2'],
      { env, timeout: 30000 });

    const first = await run();
    assert.equal(first.stdout,
      'ex-1: completed under fence 1\nex-2: completed under fence 1\n');
    const second = await run();
    assert.equal(second.stdout,
      'ex-1: done or leased elsewhere, skipped\nex-2: done or leased elsewhere, skipped\n');

    const c = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      const row = await c.state('ex-1');
      assert.equal(row.done, true);
      assert.match(row.result, /^processed by node-worker-\d+ under fence 1$/);
    } finally {
      await c.close();
    }
  } finally {
    await daemon.stop();
  }
});

const QUEUE_EXAMPLE = path.resolve(__dirname, '..', '..', '..', 'examples', 'node', 'queue-worker.js');

it('examples/node/queue-worker.js drains its queue with two workers, retrying a failed job', async () => {
  const daemon = await startDaemon({ clock: 'server' });
  try {
    const env = { ...process.env, FENCEQ_ENDPOINT: daemon.endpoint };
    const { stdout } = await promisify(execFile)(process.execPath, [QUEUE_EXAMPLE, '4'],
      { env, timeout: 30000 });
    // Which worker takes which job varies; what happens to each job does not.
    const lines = stdout.trimEnd().split('\n').map((line) => line.replace(/^worker-[ab]: /, ''));
    assert.equal(lines[0], 'producer: 4 new jobs in queue thumbnails');
    assert.equal(lines[lines.length - 1], 'drained: 4 of 4 jobs done');
    assert.deepEqual(lines.slice(1, -1).sort(), [
      'job failed, will be retried: photo-2.jpg: decoder crashed',
      'thumb-1 done: photo-1.jpg -> 100px (fence 1)',
      'thumb-2 done: photo-2.jpg -> 200px (fence 2)',
      'thumb-3 done: photo-3.jpg -> 300px (fence 1)',
      'thumb-4 done: photo-4.jpg -> 400px (fence 1)',
    ]);
    const c = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      const [failed] = await c.list({ queue: 'thumbnails', after: 'thumb-1', limit: 1 });
      assert.equal(failed.id, 'thumb-2');
      assert.equal(failed.attempts, 2);
      assert.equal(failed.error, 'photo-2.jpg: decoder crashed');
    } finally {
      await c.close();
    }
  } finally {
    await daemon.stop();
  }
});
