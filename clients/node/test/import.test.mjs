// The package works from ESM (`import`) and CommonJS (`require`), and both
// give the same classes: an error thrown by one is instanceof the other's.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fenceqDefault, { Client, FenceqError, DEFAULT_ENDPOINT } from 'fenceq';
import helpers from './helpers.js';

const require = createRequire(import.meta.url);

describe('module formats', () => {
  let daemon;
  before(async () => {
    daemon = await helpers.startDaemon({ clock: 'server' });
  });
  after(async () => {
    await daemon?.stop();
  });

  it('import { Client } from "fenceq" talks to the daemon', async () => {
    const c = new Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      assert.equal((await c.ping()).protocol, 1);
      assert.equal(await c.enqueue('esm'), true);
      assert.equal(await c.claim('esm', 'w', 30), 1);
    } finally {
      await c.close();
    }
  });

  it('require("fenceq") and import give the same module', async () => {
    const cjs = require('fenceq');
    assert.equal(cjs.Client, Client);
    assert.equal(cjs.FenceqError, FenceqError);
    assert.equal(cjs.DEFAULT_ENDPOINT, DEFAULT_ENDPOINT);
    assert.equal(fenceqDefault, cjs);
    const c = new cjs.Client(daemon.endpoint, { timeoutMs: 5000 });
    try {
      await assert.rejects(c.claim('esm-missing', 'w', 0), (err) =>
        err instanceof FenceqError && err.code === 'invalid_argument');
    } finally {
      await c.close();
    }
  });

  it('the package entry points resolve through the exports map', () => {
    assert.match(require.resolve('fenceq'), /clients\/node\/index\.js$/);
    assert.match(import.meta.resolve('fenceq'), /clients\/node\/index\.mjs$/);
    assert.equal(require('fenceq/package.json').name, 'fenceq');
  });
});
