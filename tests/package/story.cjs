// The story both Node consumer workers play (worker.cjs with require,
// worker.mjs with import): with the Client their module system loaded, it
// enqueues, claims, completes and reads the state of the job JOB (a new id)
// on the daemon at ENDPOINT, asserting each answer.
'use strict';
const assert = require('node:assert/strict');

async function story(Client, endpoint, job) {
  const client = new Client(endpoint, { timeoutMs: 5000 });
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
}

module.exports = { story };
