#!/usr/bin/env node
'use strict';

// A fenceq worker in Node: enqueue a few jobs, then work each one under a
// lease. Client#work claims the job, renews the lease while the job runs,
// completes with the fence, and releases the lease if the job throws.
//
//   fenceqd --db var/fenceq.db --listen ipc://var/fenceqd.sock &
//   (cd clients/node && npm ci)
//   node examples/node/worker.js [JOB_ID ...]
//
// The endpoint: the order every fenceq client follows (FENCEQ_ENDPOINT, else the
// installed service's socket, else ipc://var/fenceqd.sock; docs/operating.md,
// "Which endpoint a client uses").

const { Client } = require('../../clients/node'); // in your project: require('fenceq')

async function main(ids) {
  const client = new Client();
  const owner = `node-worker-${process.pid}`;
  try {
    for (const id of ids) await client.enqueue(id);

    for (const id of ids) {
      const outcome = await client.work(id, owner, 30, async ({ fence, signal }) => {
        // The real work goes here. Anything outside fenceq that it writes to
        // should check `fence` too (C2.4); stop early when signal.aborted.
        if (signal.aborted) return null;
        return `processed by ${owner} under fence ${fence}`;
      });
      if (outcome === null) console.log(`${id}: done or leased elsewhere, skipped`);
      else if (outcome.completed) console.log(`${id}: completed under fence ${outcome.fence}`);
      else console.log(`${id}: lease lost, result discarded`);
    }
  } finally {
    await client.close();
  }
}

const ids = process.argv.slice(2);
main(ids.length > 0 ? ids : ['example-1', 'example-2', 'example-3']).catch((err) => {
  console.error(`worker failed: ${err.code ?? ''} ${err.message}`);
  process.exitCode = 1;
});
