'use strict';

// examples/node/worker.js runs as documented against a real daemon.

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
