'use strict';

// index.d.ts / index.d.mts: compile real uses (and expected misuses) from
// CommonJS and ESM TypeScript with the TypeScript compiler.

const { it } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

it('the TypeScript declarations compile for require and import users', () => {
  const tsc = require.resolve('typescript/bin/tsc');
  const project = path.join(__dirname, 'types');
  try {
    execFileSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8', timeout: 120000 });
  } catch (err) {
    assert.fail(`tsc failed:\n${err.stdout}${err.stderr}`);
  }
});
