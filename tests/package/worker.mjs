// A consumer's ES module worker for the package checks: worker.cjs with
// `import` (the package's "import" export, index.mjs).
// Usage: node worker.mjs ENDPOINT JOB
import assert from 'node:assert/strict';
import { Client } from 'fenceq';

console.log('module:', import.meta.resolve('fenceq'));
const job = process.argv[3];
const client = new Client(process.argv[2], { timeoutMs: 5000 });
try {
  assert.equal(await client.enqueue(job), true);
  assert.equal(await client.enqueue(job), false); // exists (C3.1)
  const fence = await client.claim(job, 'worker-a', 30);
  assert.ok(Number.isInteger(fence) && fence > 0, String(fence));
  assert.equal(await client.claim(job, 'worker-b', 30), null); // leased (C3.3)
  assert.equal(await client.complete(job, 'worker-b', fence, 'stolen'), false); // C3.5
  assert.equal(await client.complete(job, 'worker-a', fence, 'paid'), true);
  const state = await client.state(job);
  console.log('state:', JSON.stringify(state, Object.keys(state).sort()));
} finally {
  await client.close();
}
