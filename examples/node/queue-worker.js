#!/usr/bin/env node
'use strict';

// A fenceq queue in Node: a producer enqueues jobs with payloads into a named
// queue, then two workers drain it with Client#workNext, which claims the
// next job (long-polling while the queue is empty), renews the lease while
// the job runs, completes with the fence, and reports a thrown error with
// `fail` so the daemon retries the job later (or marks it dead). With
// `takeNext`, completing a job also claims the next one in the same round
// trip: the worker passes it back as `job`. Ctrl-C stops the workers after
// the jobs in hand (a job claimed ahead is released untouched).
//
//   fenceqd --db var/fenceq.db --listen ipc://var/fenceqd.sock &
//   (cd clients/node && npm ci)
//   node examples/node/queue-worker.js [COUNT]
//
// The endpoint: the order every fenceq client follows (FENCEQ_ENDPOINT, else the
// installed service's socket, else ipc://var/fenceqd.sock; docs/operating.md,
// "Which endpoint a client uses"). Each worker stops once no job came for half
// a second.

const { Client } = require('../../clients/node'); // in your project: require('fenceq')

const QUEUE = 'thumbnails';

async function produce(count) {
  const client = new Client();
  try {
    let fresh = 0;
    for (let i = 1; i <= count; i++) {
      // The payload is the job's input; a Buffer would travel as bytes.
      const payload = JSON.stringify({ image: `photo-${i}.jpg`, width: 100 * i });
      // The last job waits for the others: priority 1 is claimed first.
      const priority = i === count ? 0 : 1;
      if (await client.enqueue(`thumb-${i}`, { queue: QUEUE, payload, priority, maxAttempts: 3 })) {
        fresh += 1;
      }
    }
    console.log(`producer: ${fresh} new jobs in queue ${QUEUE}`);
  } finally {
    await client.close();
  }
}

async function worker(name, failOnce, stopSignal) {
  const client = new Client();
  let next = null; // the job the last completion claimed ahead, if any
  try {
    // No stop check here: once stopped, workNext releases `job` untouched and
    // resolves null, so a job claimed ahead is never left behind.
    for (;;) {
      const job = next;
      next = null; // whatever happens below, this job is not passed back twice
      try {
        const outcome = await client.workNext(QUEUE, name, 30, async ({ id, payload, attempts, fence }) => {
          // Anything this job writes outside fenceq should carry `fence` (C2.4).
          const { image, width } = JSON.parse(payload);
          if (failOnce.has(id) && attempts === 1) throw new Error(`${image}: decoder crashed`);
          return `${image} -> ${width}px (fence ${fence})`;
        }, { wait: 0.5, retryIn: 0, takeNext: true, job, stopSignal });
        if (outcome === null) return; // nothing for half a second (drained), or stopped
        console.log(`${name}: ${outcome.id} ${outcome.completed ? 'done' : 'lease lost'}: ${outcome.result}`);
        next = outcome.next; // null: the next call long-polls with claimNext
      } catch (err) {
        console.log(`${name}: job failed, will be retried: ${err.message}`);
      }
    }
  } finally {
    await client.close();
  }
}

async function main(count) {
  await produce(count);
  const failOnce = new Set(['thumb-2']);
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  await Promise.all([worker('worker-a', failOnce, stop.signal), worker('worker-b', failOnce, stop.signal)]);

  const client = new Client();
  try {
    const jobs = await client.list({ queue: QUEUE });
    const done = jobs.filter((job) => job.state === 'done').length;
    console.log(`drained: ${done} of ${jobs.length} jobs done`);
  } finally {
    await client.close();
  }
}

const count = Number(process.argv[2] ?? 4);
main(Number.isInteger(count) && count > 0 ? count : 4).catch((err) => {
  console.error(`queue example failed: ${err.code ?? ''} ${err.message}`);
  process.exitCode = 1;
});
