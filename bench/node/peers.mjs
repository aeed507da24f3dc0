#!/usr/bin/env node
// bench/node/peers.mjs: the Node workload of `make bench`, for fenceq (its
// Node client, clients/node) and the peers users would pick instead: BullMQ
// on Redis and graphile-worker on PostgreSQL.
//
//   node peers.mjs --system fenceq   --endpoint ipc:///tmp/x/s --jobs 20000 --workers 8 [--variant next|combined]
//                  [--mode batch --batch-size 32]
//   node peers.mjs --system bullmq   --redis-port 6390 --jobs 20000 --workers 8
//   node peers.mjs --system graphile --pg-uri postgresql:///db?host=/tmp/x --pg-schema gw1 \
//                  --jobs 5000 --workers 8 --mode single|batch
//
// The same workload for every system: N no-op jobs are enqueued first with
// the system's bulk enqueue (BullMQ addBulk, graphile-worker addJobs; fenceq
// has no bulk enqueue yet: one enqueue a job, 64 in flight), which is timed on
// its own (enqueue_jobs_per_s). Then K workers in this process, each taking
// one job at a time, run every job (the job does nothing) until the queue is
// drained; `seconds` is from the workers' start to the last completion that
// the system has stored:
//   fenceq     K clients (one DEALER socket each); `next`: claim_next +
//              complete, `combined`: complete_next (completeAndClaimNext), one
//              round trip a job. The daemon answers once the write is stored
//              (fsynced with --sync full).
//   bullmq     one Worker with concurrency K (BullMQ's way to run K jobs at a
//              time in one process); its completion also fetches the next job.
//              Done when the Worker has emitted N `completed` events (each
//              after Redis answered the move to the completed set).
//   graphile   `run` with concurrency K (its pool of K workers); done when its
//              jobs table is empty (graphile-worker deletes a job once it has
//              completed it; its workers do not wait for that delete), polled
//              once all N jobs have run.
// --mode batch: graphile-worker with its batching on (the local queue,
// `preset.worker.localQueue.size`, and batched completion,
// `preset.worker.completeJobBatchDelay` / `failJobBatchDelay`, as in its
// performance docs). fenceq: claimNext with max --batch-size (default 32) and
// completeMany with next, the Node client's batch ops. BullMQ: batches
// are a BullMQ Pro feature, not in the open-source package.
//
// Prints one JSON line: {system, mode, variant, jobs, workers, seconds,
// jobs_per_s, enqueue_seconds, enqueue_jobs_per_s, client_cpu_s (this Node
// process's CPU over the drain), ...}, or {system, mode,
// skipped} for a combination that cannot run. Every loop is bounded in count,
// and the whole run by --timeout seconds (exit 3). Connections go to
// 127.0.0.1 or a Unix socket only.
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..', '..');
const require = createRequire(import.meta.url);

const { values: opt } = parseArgs({
  options: {
    system: { type: 'string' },
    mode: { type: 'string', default: 'single' },
    variant: { type: 'string' },
    jobs: { type: 'string', default: '2000' },
    workers: { type: 'string', default: '8' },
    timeout: { type: 'string', default: '300' },
    label: { type: 'string' },
    'batch-size': { type: 'string', default: '32' },
    // fenceq
    endpoint: { type: 'string' },
    // Clients (ZeroMQ sockets) the workers share, worker w on client w % N;
    // default: one each.
    clients: { type: 'string' },
    // bullmq
    'redis-host': { type: 'string', default: '127.0.0.1' },
    'redis-port': { type: 'string', default: '6379' },
    // graphile
    'pg-uri': { type: 'string' },
    'pg-schema': { type: 'string', default: 'graphile_worker' },
    'local-queue-size': { type: 'string', default: '500' },
    'complete-batch-delay': { type: 'string', default: '0' },
  },
  strict: true,
});

const SYSTEMS = ['fenceq', 'bullmq', 'graphile'];
const JOBS = Number(opt.jobs);
const WORKERS = Number(opt.workers);
const TIMEOUT_S = Number(opt.timeout);
const ENQUEUE_CHUNK = 1000;      // jobs per bulk enqueue call
const FENCEQ_IN_FLIGHT = 4;      // fenceq enqueueMany calls in flight
const BATCH = Number(opt['batch-size']);

function fail(message) {
  process.stderr.write(`peers: ${message}\n`);
  process.exit(2);
}
if (!SYSTEMS.includes(opt.system)) fail(`--system must be one of ${SYSTEMS.join(', ')}`);
if (!['single', 'batch'].includes(opt.mode)) fail('--mode must be single or batch');
if (!Number.isInteger(JOBS) || JOBS < 1) fail('--jobs must be a positive integer');
if (!Number.isInteger(WORKERS) || WORKERS < 1) fail('--workers must be a positive integer');
if (!(TIMEOUT_S > 0)) fail('--timeout must be positive seconds');
if (!Number.isInteger(BATCH) || BATCH < 1 || BATCH > 1000) fail('--batch-size must be an integer 1..1000');

// The hard limit on the whole run, whatever hangs.
const DEADLINE = Date.now() + TIMEOUT_S * 1000;
setTimeout(() => {
  process.stderr.write(`peers: ${opt.system} ${opt.mode}: no result within ${TIMEOUT_S} s\n`);
  process.exit(3);
}, TIMEOUT_S * 1000).unref();

function checkDeadline(what) {
  if (Date.now() > DEADLINE) throw new Error(`${what}: past the ${TIMEOUT_S} s limit`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now() / 1000;

/** Starts the clock of the drain: wall time and this (client) process's CPU. */
function drainClock() {
  const t = now();
  const cpu = process.cpuUsage();
  return {
    t,
    /** {seconds, client_cpu_s} since the start. */
    stop() {
      const used = process.cpuUsage(cpu);
      return { seconds: now() - t, client_cpu_s: (used.user + used.system) / 1e6 };
    },
  };
}

/** A promise that rejects after `ms`, for waits on another system's events. */
function within(promise, ms, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no end within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function result(fields) {
  const { seconds, enqueueSeconds, client_cpu_s: cpu, ...rest } = fields;
  return {
    system: opt.system,
    mode: opt.mode,
    ...rest,
    jobs: JOBS,
    workers: WORKERS,
    seconds,
    jobs_per_s: JOBS / seconds,
    enqueue_seconds: enqueueSeconds,
    enqueue_jobs_per_s: JOBS / enqueueSeconds,
    // CPU of this Node process (the workers and the client library) over the drain.
    client_cpu_s: cpu,
    ...(opt.label ? { label: opt.label } : {}),
  };
}

// ---------------------------------------------------------------- fenceq ---

function fenceqClient() {
  // The repository's own Node client, with its own node_modules (npm ci in
  // clients/node; `make bench` does it).
  return require(resolve(REPO, 'clients', 'node'));
}

/** enqueueMany in chunks of ENQUEUE_CHUNK, FENCEQ_IN_FLIGHT chunks in flight. */
async function fenceqEnqueue(client, queue, n) {
  let next = 0;
  const lane = async () => {
    while (next < n) {
      const from = next;
      const to = Math.min(n, from + ENQUEUE_CHUNK);
      next = to;
      const jobs = [];
      for (let i = from; i < to; i++) jobs.push({ id: `j${i}`, queue });
      const created = await client.enqueueMany(jobs);
      const dup = created.indexOf(false);
      if (dup >= 0) throw new Error(`fenceq: ${jobs[dup].id} exists`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(FENCEQ_IN_FLIGHT, Math.ceil(n / ENQUEUE_CHUNK)) }, lane));
}

const FENCEQ_QUEUE = 'bench';
const FENCEQ_TTL = 30;

/**
 * The fenceq harness: K clients, N jobs enqueued (timed apart), then
 * `worker(client, owner)` on each client at once, resolving to the jobs it
 * completed; checks that all N are done, by count and by stats.
 */
async function fenceqRun(variant, worker, extra = {}) {
  if (!opt.endpoint) fail('fenceq needs --endpoint');
  const { Client } = fenceqClient();
  const sockets = Math.max(1, Math.min(WORKERS, Number(opt.clients ?? WORKERS)));
  const clients = Array.from({ length: sockets }, () => new Client(opt.endpoint));
  try {
    await Promise.all(clients.map((c) => c.ping()));
    const t = now();
    await fenceqEnqueue(clients[0], FENCEQ_QUEUE, JOBS);
    const enqueueSeconds = now() - t;
    const clock = drainClock();
    const counts = await Promise.all(Array.from({ length: WORKERS },
      (_, w) => worker(clients[w % sockets], `w${w}`)));
    const timed = clock.stop();
    const total = counts.reduce((a, b) => a + b, 0);
    if (total !== JOBS) throw new Error(`fenceq: ${total} jobs completed, expected ${JOBS}`);
    const left = (await clients[0].stats()).queues[FENCEQ_QUEUE];
    if (left.ready + left.leased + left.delayed !== 0 || left.done !== JOBS) {
      throw new Error(`fenceq: after the run: ${JSON.stringify(left)}`);
    }
    return result({ variant, ...timed, enqueueSeconds, ...extra });
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

/** One job at a time each: claim_next + complete, or complete_next. */
async function fenceqSingle() {
  const variant = opt.variant ?? 'combined';
  if (!['next', 'combined'].includes(variant)) fail('fenceq --variant must be next or combined');
  const [queue, ttl] = [FENCEQ_QUEUE, FENCEQ_TTL];
  return fenceqRun(variant, async (client, owner) => {
    let done = 0;
    let job = await client.claimNext(queue, owner, ttl);
    // At most JOBS jobs for one worker: the bound on the loop.
    for (let iter = 0; job !== null && iter < JOBS; iter++) {
      if (iter % 256 === 0) checkDeadline('fenceq worker');
      // The job: nothing.
      if (variant === 'combined') {
        const r = await client.completeAndClaimNext(job.id, owner, job.fence, null, queue, ttl);
        if (!r.completed) throw new Error(`fenceq: completing ${job.id} was refused`);
        job = r.next;
      } else {
        if (!(await client.complete(job.id, owner, job.fence, null))) {
          throw new Error(`fenceq: completing ${job.id} was refused`);
        }
        job = await client.claimNext(queue, owner, ttl);
      }
      done++;
    }
    if (job !== null) throw new Error('fenceq: a worker ran more jobs than were enqueued');
    return done;
  });
}

/**
 * Batches: each worker claims up to B (--batch-size) jobs with one
 * claimNext({max}), runs them (nothing), and completes them with one
 * completeMany whose `next` claims the following B in the same round trip.
 * Every job still carries its own fence; a refused one fails the run.
 */
async function fenceqBatch() {
  const [queue, ttl] = [FENCEQ_QUEUE, FENCEQ_TTL];
  return fenceqRun('batch', async (client, owner) => {
    let done = 0;
    let jobs = await client.claimNext(queue, owner, ttl, { max: BATCH });
    // Every round completes at least one job: at most JOBS rounds.
    for (let iter = 0; jobs.length > 0 && iter < JOBS; iter++) {
      if (iter % 64 === 0) checkDeadline('fenceq worker');
      // The jobs: nothing.
      const items = jobs.map((j) => ({ id: j.id, owner, fence: j.fence }));
      const r = await client.completeMany(items, { next: { queue, ttl, max: BATCH } });
      const refused = r.completed.indexOf(false);
      if (refused >= 0) throw new Error(`fenceq: completing ${items[refused].id} was refused`);
      done += items.length;
      jobs = r.next;
    }
    if (jobs.length > 0) throw new Error('fenceq: a worker ran more rounds than there were jobs');
    return done;
  }, { batch: BATCH });
}

// ---------------------------------------------------------------- BullMQ ---

async function bullmq() {
  if (opt.mode === 'batch') {
    return {
      system: 'bullmq', mode: 'batch',
      skipped: 'batches are a BullMQ Pro feature, not in the open-source bullmq package',
    };
  }
  const { Queue, Worker } = await import('bullmq');
  const port = Number(opt['redis-port']);
  // maxRetriesPerRequest: null, as BullMQ requires for a Worker's connection.
  const connection = { host: opt['redis-host'], port, maxRetriesPerRequest: null };
  const name = 'bench';
  const queue = new Queue(name, { connection });
  let worker = null;
  try {
    await queue.waitUntilReady();
    const t = now();
    for (let i = 0; i < JOBS; i += ENQUEUE_CHUNK) {
      checkDeadline('bullmq enqueue');
      const chunk = [];
      for (let j = i; j < Math.min(JOBS, i + ENQUEUE_CHUNK); j++) chunk.push({ name: 'noop', data: {} });
      await queue.addBulk(chunk);
    }
    const enqueueSeconds = now() - t;

    // The job: nothing. Default job and worker options (completed jobs are
    // kept, as BullMQ does unless told to remove them).
    worker = new Worker(name, async () => {}, { connection, concurrency: WORKERS, autorun: false });
    let completed = 0;
    const drained = new Promise((resolveAll, reject) => {
      worker.on('completed', () => {
        if (++completed === JOBS) resolveAll();
      });
      worker.on('failed', (job, err) => reject(new Error(`bullmq: job ${job?.id} failed: ${err}`)));
      worker.on('error', (err) => reject(err));
    });
    await worker.waitUntilReady();
    const clock = drainClock();
    worker.run().catch(() => {});
    await within(drained, DEADLINE - Date.now(), 'bullmq workers');
    const timed = clock.stop();
    const counts = await queue.getJobCounts('completed', 'wait', 'active', 'failed', 'delayed');
    if (counts.completed !== JOBS || counts.wait + counts.active + counts.failed + counts.delayed !== 0) {
      throw new Error(`bullmq: after the run: ${JSON.stringify(counts)}`);
    }
    return result({ variant: 'worker', ...timed, enqueueSeconds });
  } finally {
    if (worker) await within(worker.close(), 10000, 'bullmq worker close').catch(() => {});
    await within(queue.close(), 10000, 'bullmq queue close').catch(() => {});
  }
}

// ------------------------------------------------------- graphile-worker ---

async function graphile() {
  if (!opt['pg-uri']) fail('graphile needs --pg-uri');
  const { run, makeWorkerUtils, Logger } = await import('graphile-worker');
  const schema = opt['pg-schema'];
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) fail('--pg-schema must be a plain lower-case identifier');
  // Warnings and errors only: its default logger prints a line a job.
  const logger = new Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning') process.stderr.write(`graphile: ${level}: ${message}\n`);
  });
  const batch = opt.mode === 'batch';
  const localQueueSize = Number(opt['local-queue-size']);
  const completeBatchDelay = Number(opt['complete-batch-delay']);
  // Only the batching options are set; everything else is graphile-worker's
  // default (maxPoolSize 10, pollInterval 2000, ...).
  const preset = batch
    ? {
      worker: {
        localQueue: { size: localQueueSize },
        completeJobBatchDelay: completeBatchDelay,
        failJobBatchDelay: completeBatchDelay,
      },
    }
    : { worker: {} };
  const common = { connectionString: opt['pg-uri'], schema, logger };
  const utils = await makeWorkerUtils(common);
  let runner = null;
  try {
    await utils.migrate();
    const t = now();
    for (let i = 0; i < JOBS; i += ENQUEUE_CHUNK) {
      checkDeadline('graphile enqueue');
      const specs = [];
      for (let j = i; j < Math.min(JOBS, i + ENQUEUE_CHUNK); j++) specs.push({ identifier: 'noop', payload: {} });
      await utils.addJobs(specs);
    }
    const enqueueSeconds = now() - t;

    const remaining = async () => utils.withPgClient(async (pg) =>
      Number((await pg.query(`SELECT count(*) AS n FROM ${schema}.jobs`)).rows[0].n));
    if ((await remaining()) !== JOBS) throw new Error('graphile: the jobs were not all enqueued');

    let ran = 0;
    let firstStart = null;
    let allRan;
    const allRanPromise = new Promise((r) => { allRan = r; });
    // The job: nothing (counted).
    const taskList = {
      noop: async () => {
        if (firstStart === null) firstStart = now();
        if (++ran === JOBS) allRan();
      },
    };
    const clock = drainClock();
    runner = await run({
      ...common, concurrency: WORKERS, noHandleSignals: true, taskList, crontab: '', preset,
    });
    await within(allRanPromise, DEADLINE - Date.now(), 'graphile workers');
    // Every job has run; graphile-worker completes (deletes) them behind the
    // workers' backs: done once none is left.
    let left = JOBS;
    for (let polls = 0; polls < 1_000_000; polls++) {
      left = await remaining();
      if (left === 0) break;
      checkDeadline('graphile completions');
      await sleep(1);
    }
    const timed = clock.stop();
    if (left !== 0) throw new Error(`graphile: ${left} jobs left`);
    if (ran !== JOBS) throw new Error(`graphile: ${ran} jobs ran, expected ${JOBS}`);
    return result({
      variant: batch ? `localQueue ${localQueueSize}, completeJobBatchDelay ${completeBatchDelay}` : 'run',
      ...timed, enqueueSeconds, startup_seconds: firstStart - clock.t,
    });
  } finally {
    if (runner) await within(runner.stop(), 30000, 'graphile stop').catch(() => {});
    await within(utils.release(), 10000, 'graphile release').catch(() => {});
  }
}

// ------------------------------------------------------------------ main ---

async function main() {
  let out;
  if (opt.system === 'fenceq') out = opt.mode === 'batch' ? await fenceqBatch() : await fenceqSingle();
  else if (opt.system === 'bullmq') out = await bullmq();
  else out = await graphile();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`peers: ${opt.system} ${opt.mode}: ${err?.stack ?? err}\n`);
  process.exit(1);
});
