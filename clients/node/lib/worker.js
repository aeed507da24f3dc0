'use strict';

// The worker pattern in one call: claim, keep the lease alive while the job
// runs, complete with the fence; when the job throws, release the lease
// (`work`, a job claimed by id) or report the failure (`workNext`, the next
// job of a queue: the daemon keeps the error and retries the job after a
// backoff, or marks it dead).
//
// The helpers never decide whether a write is stale: every renew and the
// final complete/fail carry the fence, and the daemon refuses them once
// another worker holds a newer lease (C3.4, C3.5). A lost lease is a value
// (`completed: false`), not an error, like every other refusal.
//
// `workNext` with `takeNext` completes a successful job with complete_next,
// which claims the following job of the queue in the same round trip; the
// caller runs it by passing it back as `job`. A loop:
//
//   let next = null;
//   for (;;) {
//     const job = next;
//     next = null;                      // never pass a job back twice (fn may throw)
//     const outcome = await client.workNext(queue, owner, ttl, fn,
//       { takeNext: true, job, stopSignal: stop.signal });
//     next = outcome?.next ?? null;     // null: the next call long-polls with claimNext
//     if (stop.signal.aborted && next === null) break;
//   }
//
// Once stopped, workNext releases a `job` passed back untouched, so the loop
// leaves nothing claimed even if the stop came just after a `next` was taken.

const { FenceqError } = require('./errors');

/** Longest `error` text `fail` accepts (protocol v1, the work queue). */
const MAX_ERROR_BYTES = 64 * 1024;
/** How long workNext long-polls by default, in seconds. */
const DEFAULT_WAIT = 20;
const WORK_NEXT_OPTIONS = ['wait', 'retryIn', 'renewEveryMs', 'clock', 'takeNext', 'job', 'stopSignal'];

/**
 * @param {import('./client').Client} client
 * @param {string} id
 * @param {string} owner
 * @param {number} ttl   lease length in seconds (> 0)
 * @param {(job: {id: string, owner: string, fence: number, signal: AbortSignal}) => any} fn
 *   the job; may be async. Its return value (a string, or null/undefined) is
 *   the stored result. `signal` aborts, with a FenceqError of code
 *   `lease_lost`, once a renew is refused: the job should stop and its result
 *   will not be stored.
 * @param {{renewEveryMs?: number, clock?: () => number}} [options]
 *   renewEveryMs: default ttl/3; clock: seconds for `now`, needed only when the
 *   daemon runs with --clock client
 * @returns {Promise<null | {fence: number, completed: boolean, result: any}>}
 *   null when the claim was refused (missing, done, or leased elsewhere);
 *   completed is false when the lease was lost before complete.
 * @throws whatever `fn` threw (after releasing the lease), or a FenceqError
 *   from claim/complete (after a best-effort release)
 */
async function work(client, id, owner, ttl, fn, options) {
  const now = timeOf(options?.clock);
  const fence = await client.claim(id, owner, ttl, now());
  if (fence === null) return null;
  const { completed, result } = await runLeased(client, { id, owner, fence, ttl }, fn,
    { id, owner, fence }, options, () => client.release(id, owner, fence));
  return { fence, completed, result };
}

/**
 * The queue worker: claims the next job of `queue` with claimNext (holding
 * the request up to `wait` seconds), runs `fn` while renewing the lease,
 * completes with the fence on success; on a throw, calls `fail` with the
 * error's message (the daemon retries the job after `retryIn` seconds or its
 * backoff, or marks it dead once its attempts are used up) and rethrows.
 *
 * One round trip a job: with `takeNext: true` a successful job is completed
 * with completeAndClaimNext, and the job it claimed (leased to `owner`, not
 * run) is the outcome's `next` (null when the queue had none). Pass it as
 * `job` to the next workNext call, which runs it without claiming; with
 * `job` null or absent, that call long-polls with claimNext as usual. A job
 * in `next` that is never passed back stays leased until its ttl ends (and
 * its attempt is used): release it, or pass `stopSignal`.
 *
 * `stopSignal` (an AbortSignal): once aborted, workNext claims nothing more.
 * The job in progress still runs and is completed, but without claiming a
 * next one; a job that arrives afterwards (a long-poll answering, a
 * completion's `next`) or that is passed as `job` is released untouched
 * (its attempt stays used), and then workNext resolves null (or `next` is
 * null). It does not abort the job's own `signal`.
 *
 * @param {import('./client').Client} client
 * @param {string} queue
 * @param {string} owner
 * @param {number} ttl
 * @param {(job: {id: string, owner: string, fence: number, attempts: number,
 *   payload: Buffer|string|null, signal: AbortSignal}) => any} fn
 * @param {{wait?: number, retryIn?: number, renewEveryMs?: number,
 *   clock?: () => number, takeNext?: boolean, job?: object|null,
 *   stopSignal?: AbortSignal}} [options] wait: seconds to long-poll, default 20
 *   (0: answer at once); retryIn: passed to fail (default: the daemon's
 *   backoff); takeNext, job, stopSignal: see above
 * @returns {Promise<null | {id: string, fence: number, attempts: number,
 *   completed: boolean, result: any, next?: object|null}>} null when no job
 *   came within `wait` (or a stop released it); `next` only with takeNext
 * @throws whatever `fn` threw (after the fail), or a FenceqError from
 *   claimNext/complete/completeAndClaimNext (after a best-effort fail), or
 *   from the release of a job received after a stop
 */
async function workNext(client, queue, owner, ttl, fn, options) {
  if (options !== undefined && options !== null) {
    const unknown = Object.keys(options).filter((key) => !WORK_NEXT_OPTIONS.includes(key));
    if (typeof options !== 'object' || unknown.length > 0) {
      throw new FenceqError('invalid_argument', typeof options !== 'object'
        ? 'fenceq: workNext options must be an object'
        : `fenceq: unknown workNext option '${unknown[0]}' (expected one of: ${WORK_NEXT_OPTIONS.join(', ')})`);
    }
  }
  const takeNext = options?.takeNext ?? false;
  if (typeof takeNext !== 'boolean') {
    throw new FenceqError('invalid_argument', 'fenceq: workNext option takeNext must be a boolean');
  }
  const stopSignal = options?.stopSignal;
  if (stopSignal !== undefined && typeof stopSignal?.aborted !== 'boolean') {
    throw new FenceqError('invalid_argument', 'fenceq: workNext option stopSignal must be an AbortSignal');
  }
  const held = options?.job ?? null;
  if (held !== null && !isJob(held)) {
    throw new FenceqError('invalid_argument',
      'fenceq: workNext option job must be a job from a previous outcome\'s next ({id, fence, payload, attempts})');
  }
  const stopped = () => stopSignal?.aborted === true;
  const now = timeOf(options?.clock);
  let job = held;
  if (job === null) {
    if (stopped()) return null;
    job = await client.claimNext(queue, owner, ttl, { wait: options?.wait ?? DEFAULT_WAIT, ...now() });
    if (job === null) return null;
  }
  if (stopped()) {
    await client.release(job.id, owner, job.fence); // untouched: the stop came first
    return null;
  }
  const { id, fence, attempts, payload } = job;
  const { completed, result, next } = await runLeased(client, { id, owner, fence, ttl }, fn,
    { id, owner, fence, attempts, payload }, options,
    (err) => client.fail(id, owner, fence, errorText(err), { retryIn: options?.retryIn, ...now() })
      // Not recorded (the daemon is away, or refused the text): at least let
      // the lease go, else the job waits for it to expire.
      .catch(() => client.release(id, owner, fence)),
    takeNext ? { queue, stopped } : null);
  return takeNext
    ? { id, fence, attempts, completed, result, next }
    : { id, fence, attempts, completed, result };
}

/** The shape of a job claimNext / completeAndClaimNext hand out. */
function isJob(job) {
  return job !== null && typeof job === 'object' && typeof job.id === 'string' &&
    Number.isInteger(job.fence) && Number.isInteger(job.attempts);
}

/**
 * Runs `fn(jobArg)` under the lease, renewing it, then completes. On a throw
 * from `fn` or from complete, calls `onThrow(err)` (errors ignored) and
 * rethrows. Resolves `{completed, result, next}`: with `takeNext`
 * (`{queue, stopped}`) the completion claims the next job of `queue` in the
 * same round trip, unless `stopped()`; a job it claims after a stop is
 * released untouched (next: null).
 */
async function runLeased(client, lease, fn, jobArg, options, onThrow, takeNext = null) {
  const { id, owner, fence, ttl } = lease;
  const now = timeOf(options?.clock);
  const renewEveryMs = options?.renewEveryMs ?? (ttl * 1000) / 3;
  const controller = new AbortController();
  let running = true;
  let timer = null;

  // One renew at a time, each scheduled after the previous one settled, so a
  // slow daemon never piles up renewals. A renew that fails (timeout, daemon
  // restarting) is retried on the next tick: the lease may still be current.
  const scheduleRenew = () => {
    timer = setTimeout(async () => {
      let renewed = true;
      try {
        renewed = await client.renew(id, owner, fence, ttl, now());
      } catch {
        renewed = true; // unknown, not refused: try again next tick
      }
      if (!running) return;
      if (!renewed) {
        controller.abort(new FenceqError('lease_lost',
          `fenceq: lease on ${id} (fence ${fence}) was lost; the result will not be stored`));
        return;
      }
      scheduleRenew();
    }, renewEveryMs);
  };
  scheduleRenew();

  let result;
  try {
    result = await fn({ ...jobArg, signal: controller.signal });
  } catch (err) {
    running = false;
    clearTimeout(timer);
    await Promise.resolve().then(() => onThrow(err)).catch(() => {}); // else it expires
    throw err;
  }
  running = false;
  clearTimeout(timer);

  let completed;
  let next = null;
  try {
    if (takeNext !== null && !takeNext.stopped()) {
      ({ completed, next } = await client.completeAndClaimNext(id, owner, fence, result ?? null,
        takeNext.queue, ttl, now()));
    } else {
      completed = await client.complete(id, owner, fence, result ?? null, now());
    }
  } catch (err) {
    // The complete may or may not have been applied (timeout); a release or
    // fail after a successful complete answers false and changes nothing.
    await Promise.resolve().then(() => onThrow(err)).catch(() => {});
    throw err;
  }
  if (next !== null && takeNext.stopped()) {
    // The stop came while the completion was on its way: the job it claimed
    // goes back untouched (best effort: else its lease ends by itself).
    await client.release(next.id, owner, next.fence).catch(() => {});
    next = null;
  }
  return { completed, result, next };
}

/** `() => {now}` from the clock option, or `() => undefined` without one. */
function timeOf(clock) {
  return () => (clock ? { now: clock() } : undefined);
}

/**
 * The text `fail` stores for a thrown value: an Error's message (its name
 * when the message is empty), else String(value); cut to what fail accepts,
 * on a UTF-8 character boundary.
 */
function errorText(err) {
  let text;
  try {
    text = err instanceof Error ? (err.message || err.name) : String(err);
  } catch {
    text = 'the job threw a value that cannot be printed';
  }
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= MAX_ERROR_BYTES) return text;
  let end = MAX_ERROR_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end -= 1; // not inside a character
  return bytes.subarray(0, end).toString('utf8');
}

module.exports = { work, workNext, errorText };
