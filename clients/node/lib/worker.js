'use strict';

// The worker pattern in one call: claim, keep the lease alive while the job
// runs, complete with the fence; when the job throws, release the lease
// (`work`, a job claimed by id) or report the failure (`workNext`, the next
// job of a queue: the daemon keeps the error and retries the job after a
// backoff, or marks it dead).
//
// A job function that cannot work on its job yet throws a `Snooze`
// (`throw new Snooze(60)`): the helpers then snooze the job (C3.14) instead
// of releasing or failing it: the lease ends, its attempt is given back, no
// error is recorded, and the job can be claimed again after the delay. The
// outcome says `snoozed` (a round's job: status 'snoozed'); nothing is thrown.
//
// `workNext` hands the job function the job's `headers` (issue 33; only for
// a job enqueued with some) and, when the application has
// @opentelemetry/api, runs it in the trace context extracted from them, in
// a span `fenceq.process <queue>`: the job continues the trace of the code
// that enqueued it (lib/trace.js; the Client's traceContext option).
//
// Steps (C3.22): the job function's `job.step(name, fn)` runs `fn` once per
// job, across attempts: its result is saved with step_save under the job's
// lease, and a later attempt (whose claim hands the saved steps back) gets
// the saved value without running `fn` again. A save the daemon refuses
// (the lease is no longer ours) throws a FenceqError `lease_lost` and aborts
// the job's signal: nothing further of the attempt should run.
//
// Suspend and signal (C3.23): the job function's `job.suspend(timeout)` ends
// the attempt with the job waiting for the world (a payment's webhook, a
// person's approval): the daemon ends the lease, gives the attempt back and
// answers a signal token, which the function hands to whoever will answer
// (`client.signal(token, {value})`). From then on the job is not this
// worker's: its renewals stop, and when the function returns nothing is
// completed, failed or released (the outcome says `suspended`, with the
// token). A suspend the daemon refuses (the lease is no longer ours) throws a
// FenceqError `lease_lost`, as a refused step does. A job a signal woke has
// `signalled: true` and `signalValue` (the signal's value) on its next
// claims; one woken by its timeout has `signalled: false` and the error
// 'suspend timed out' in its record.
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
//
// `workNext` with `prefetch: N` works in rounds: it takes up to N jobs at
// once (claimNext with max, or the previous round's `next` passed back as
// `jobs`), runs them one after the other while one renew_many keeps every
// held lease alive, then stores the results with one complete_many whose
// `next` claims up to N more. A job is judged alone: one whose renew or
// complete answers false is dropped (logged) and the others go on. A loop:
//
//   let held = [];
//   for (;;) {
//     const jobs = held;
//     held = [];                        // never pass jobs back twice
//     const round = await client.workNext(queue, owner, ttl, fn,
//       { prefetch: 10, jobs, stopSignal: stop.signal });
//     held = round?.next ?? [];         // []: the next call long-polls
//     if (stop.signal.aborted && held.length === 0) break;
//   }

const { FenceqError } = require('./errors');
const { runInJobContext } = require('./trace');

/** The longest delay of a Snooze, in seconds: the daemon's bound for snooze's delay. */
const MAX_SNOOZE_SECONDS = 1e9;

/**
 * Thrown by a job function that cannot work on its job yet (someone else's
 * rate limit, a resource that is not there): "not now, try again in `delay`
 * seconds". The worker helpers snooze the job (C3.14) instead of failing or
 * releasing it: its attempt is given back (a job may be snoozed any number
 * of times without becoming dead), no error is recorded, and it can be
 * claimed again `delay` seconds from now. `reason` only goes to the message.
 */
class Snooze extends Error {
  /**
   * @param {number} delay seconds, 0..1e9
   * @param {string|null} [reason]
   * @throws {FenceqError} invalid_argument for a delay that is not a number
   *   in 0..1e9 or a reason that is not a string, so that a bad Snooze fails
   *   its job with a clear error rather than reaching the daemon
   */
  constructor(delay, reason) {
    if (typeof delay !== 'number' || !(delay >= 0 && delay <= MAX_SNOOZE_SECONDS)) {
      throw new FenceqError('invalid_argument', 'fenceq: Snooze: delay must be a number of seconds ' +
        `in [0, 1e9], got ${typeof delay === 'number' ? String(delay) : typeof delay}`);
    }
    if (reason !== undefined && reason !== null && typeof reason !== 'string') {
      throw new FenceqError('invalid_argument', `fenceq: Snooze: reason must be a string, got ${typeof reason}`);
    }
    super(`snoozed for ${delay} s${reason ? `: ${reason}` : ''}`);
    this.name = 'Snooze';
    this.delay = delay;
    this.reason = reason ?? null;
  }
}

/** Longest `error` text `fail` accepts (protocol v1, the work queue). */
const MAX_ERROR_BYTES = 64 * 1024;
/** How long workNext long-polls by default, in seconds. */
const DEFAULT_WAIT = 20;
/** What a worker's `job.suspend` takes as its options. */
const SUSPEND_OPTIONS = ['onTimeout'];
const WORK_NEXT_OPTIONS = ['wait', 'retryIn', 'renewEveryMs', 'clock', 'takeNext', 'job', 'stopSignal',
  'prefetch', 'jobs', 'log'];
/** The most jobs one batch request carries (protocol v1, batches). */
const MAX_BATCH_ITEMS = 1000;
/**
 * The most bytes of ids, owners and results one complete_many or renew_many
 * of the prefetching worker carries; a larger batch goes as several requests
 * (the daemon drops a connection that sends a frame over --max-message,
 * default 1 MiB, without a reply). One larger item goes alone.
 */
const BATCH_BYTES = 256 * 1024;

/**
 * @param {import('./client').Client} client
 * @param {string} id
 * @param {string} owner
 * @param {number} ttl   lease length in seconds (> 0)
 * @param {(job: {id: string, owner: string, fence: number, signal: AbortSignal}) => any} fn
 *   the job; may be async. Its return value (a string, or null/undefined) is
 *   the stored result. `signal` aborts, with a FenceqError of code
 *   `lease_lost`, once a renew is refused: the job should stop and its result
 *   will not be stored. Throwing a `Snooze` snoozes the job instead; a
 *   successful `job.suspend(timeout)` ends the attempt (nothing completed).
 *   A job claimed by id has no `signalled`/`signalValue`: a claim answers its
 *   fence alone (read `client.job(id)`'s `signal`).
 * @param {{renewEveryMs?: number, clock?: () => number, log?: (message: string) => void}} [options]
 *   renewEveryMs: default ttl/3; clock: seconds for `now`, needed only when the
 *   daemon runs with --clock client; log: where a refused renew (the job was
 *   cancelled, or the lease lost) is reported, default console.warn
 * @returns {Promise<null | {fence: number, completed: boolean, snoozed?: boolean,
 *   suspended?: true, token?: string, result: any}>}
 *   null when the claim was refused (missing, done, or leased elsewhere);
 *   completed is false when the lease was lost before complete. `snoozed`
 *   only when `fn` threw a Snooze: true when the job was snoozed, false when
 *   the lease was lost first (nothing stored). `suspended` (true) and
 *   `token` only when `fn`'s `job.suspend` suspended the job (nothing stored)
 * @throws whatever `fn` threw (after releasing the lease; after a successful
 *   suspend, nothing sent) but a Snooze, or a FenceqError from
 *   claim/complete (after a best-effort release) or snooze
 */
async function work(client, id, owner, ttl, fn, options) {
  const now = timeOf(options?.clock);
  const fence = await client.claim(id, owner, ttl, now());
  if (fence === null) return null;
  const { completed, snoozed, token, result } = await runLeased(client, { id, owner, fence, ttl }, fn,
    { id, owner, fence }, options, () => client.release(id, owner, fence));
  return { fence, completed, ...snoozedField(snoozed), ...suspendedField(token), result };
}

/**
 * The queue worker: claims the next job of `queue` with claimNext (holding
 * the request up to `wait` seconds), runs `fn` while renewing the lease,
 * completes with the fence on success; on a throw, calls `fail` with the
 * error's message (the daemon retries the job after `retryIn` seconds or its
 * backoff, or marks it dead once its attempts are used up) and rethrows. On
 * a `Snooze`, snoozes the job instead (its attempt given back, claimable
 * again after the Snooze's delay, no error kept) and resolves an outcome with
 * `snoozed` (true; false when the lease was lost first), `completed` false
 * and `next` null. When `fn`'s `job.suspend(timeout)` suspends the job
 * (C3.23), the attempt ends there: nothing is completed, failed or released
 * once `fn` returns, and the outcome has `suspended: true` and the `token`,
 * `completed` false and `next` null (a throw of `fn` after it is rethrown,
 * nothing sent).
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
 * Prefetch: with `prefetch: N` (1..1000) a call is one **round** of up to N
 * jobs. It takes the jobs passed as `jobs` (the previous round's `next`),
 * or else claims up to N with `claimNext({max: N})`, long-polling `wait` as
 * above (the daemon answers once at least one job is there). It runs them one
 * at a time, in that order, while one `renewMany` every `renewEveryMs` keeps
 * every lease it holds alive: the jobs waiting their turn, the one running,
 * the ones finished and not yet stored. Once the last has run, one
 * `completeMany` stores the results and its `next` claims up to N more jobs
 * (the round's `next`, to pass back as `jobs`; empty: the next call
 * long-polls). It never holds more than N leases. Each job is judged alone:
 * a job whose renew or complete answers false is no longer ours and is
 * dropped (`log`ged, default console.warn; status `lost`): not run if it had
 * not started, its `signal` aborted (`lease_lost`) and no complete sent if
 * it was running, its result not stored if it had finished; the others go
 * on. A job whose `fn` throws (or returns something other than a string or
 * null) is reported with `fail` at once (status `failed`, `error` the
 * thrown value) and the round goes on: nothing is rethrown. A job that
 * `job.suspend` suspended is no longer held (status `suspended`, with its
 * `token`; `error` what `fn` threw afterwards, if it did): nothing stored.
 * A job whose `fn` throws a Snooze is snoozed at once (status `snoozed`,
 * `error` the Snooze; `lost` when the daemon refuses it or does not answer:
 * its lease then ends by itself). After a stop the job running finishes and
 * is stored, the others are released untouched (status `released`) and
 * nothing more is claimed. Resolves `{outcomes, next}` (`outcomes`: one
 * `{id, fence, attempts, status, completed, result, error?, token?}` per
 * job of the round, in order), or null when no job came within `wait` (or a
 * stop released them). The shape follows whether `prefetch` was given, as
 * claimNext's follows `max`: `prefetch: 1` works in rounds too.
 *
 * @param {import('./client').Client} client
 * @param {string} queue
 * @param {string} owner
 * @param {number} ttl
 * @param {(job: {id: string, owner: string, fence: number, attempts: number,
 *   payload: Buffer|string|null, after?: string[], headers?: Record<string, string>,
 *   steps?: Record<string, Buffer|string|null>, signalled: boolean,
 *   signalValue: Buffer|string|null, signal: AbortSignal}) => any} fn
 *   `signalled`: whether a signal woke the job since it last suspended
 *   (C3.23), `signalValue` that signal's value (null when none);
 *   `after`: the job's parents' ids (issue 32), only for a job that has some;
 *   `headers`: the job's headers (issue 33), only for a job that has some
 *   (`job.headers ?? {}`). With @opentelemetry/api, `fn` runs in the trace
 *   context extracted from them, in a span `fenceq.process <queue>` (unless
 *   the client's traceContext is false): see lib/trace.js
 * @param {{wait?: number, retryIn?: number, renewEveryMs?: number,
 *   clock?: () => number, takeNext?: boolean, job?: object|null,
 *   stopSignal?: AbortSignal, prefetch?: number, jobs?: object[]|null,
 *   log?: (message: string) => void}} [options] wait: seconds to long-poll,
 *   default 20 (0: answer at once); retryIn: passed to fail (default: the
 *   daemon's backoff); takeNext, job, stopSignal, prefetch, jobs, log: see
 *   above (takeNext and job do not go with prefetch; jobs and log only with it)
 * @returns {Promise<null | {id: string, fence: number, attempts: number,
 *   completed: boolean, snoozed?: boolean, suspended?: true, token?: string,
 *   result: any, next?: object|null}>}
 *   null when no job came within `wait` (or a stop released it); `snoozed`
 *   only when `fn` threw a Snooze; `suspended` and `token` only when it
 *   suspended the job; `next` only with takeNext.
 *   With prefetch: `{outcomes, next}` or null, see above
 * @throws whatever `fn` threw (after the fail) but a Snooze, or a FenceqError
 *   from claimNext/complete/completeAndClaimNext (after a best-effort fail)
 *   or snooze, or
 *   from the release of a job received after a stop. With prefetch, never
 *   what `fn` threw; a FenceqError from claimNext, or from completeMany
 *   other than a refusal (after a best-effort fail of the round's finished
 *   jobs: a timeout may or may not have stored them)
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
  if (options?.prefetch !== undefined) return workRound(client, queue, owner, ttl, fn, options);
  for (const key of ['jobs', 'log']) {
    if (options?.[key] !== undefined) {
      throw new FenceqError('invalid_argument', `fenceq: workNext option ${key} goes with prefetch`);
    }
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
  const { completed, snoozed, token, result, next } = await runLeased(client,
    { id, owner, fence, ttl, queue }, fn,
    { id, owner, fence, attempts, payload, ...parentsOf(job), ...headersOf(job), ...stepsOf(job),
      ...signalOf(job) }, options,
    (err) => client.fail(id, owner, fence, errorText(err), { retryIn: options?.retryIn, ...now() })
      // Not recorded (the daemon is away, or refused the text): at least let
      // the lease go, else the job waits for it to expire.
      .catch(() => client.release(id, owner, fence)),
    takeNext ? { queue, stopped } : null);
  const tail = { ...snoozedField(snoozed), ...suspendedField(token), result };
  return takeNext
    ? { id, fence, attempts, completed, ...tail, next }
    : { id, fence, attempts, completed, ...tail };
}

/** `{snoozed}` for an outcome whose job function threw a Snooze, `{}` for any other. */
function snoozedField(snoozed) {
  return snoozed === undefined ? {} : { snoozed };
}

/** `{suspended: true, token}` for an outcome whose job function suspended its job (C3.23), `{}` for any other. */
function suspendedField(token) {
  return token === undefined ? {} : { suspended: true, token };
}

/**
 * One round of a prefetching worker (`workNext` with `prefetch`): see
 * workNext. Never holds more than `prefetch` leases: the next jobs are
 * claimed only by the completion that ends the round, once every job of the
 * round is completed, failed, released or lost.
 */
async function workRound(client, queue, owner, ttl, fn, options) {
  const prefetch = options.prefetch;
  if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > MAX_BATCH_ITEMS) {
    throw new FenceqError('invalid_argument',
      `fenceq: workNext option prefetch must be an integer in 1..${MAX_BATCH_ITEMS}, got ${String(prefetch)}`);
  }
  for (const key of ['takeNext', 'job']) {
    if (options[key] !== undefined) {
      throw new FenceqError('invalid_argument',
        `fenceq: workNext option ${key} does not go with prefetch (a round always takes the next ` +
        'jobs, and they come back as jobs)');
    }
  }
  const given = options.jobs ?? [];
  if (!Array.isArray(given) || !given.every(isJob) || given.length > prefetch) {
    throw new FenceqError('invalid_argument',
      `fenceq: workNext option jobs must be an array of at most prefetch (${prefetch}) jobs from a ` +
      'previous round\'s next ({id, fence, payload, attempts})');
  }
  const log = options.log ?? ((message) => console.warn(message));
  if (typeof log !== 'function') {
    throw new FenceqError('invalid_argument', 'fenceq: workNext option log must be a function');
  }
  const stopSignal = options.stopSignal;
  const stopped = () => stopSignal?.aborted === true;
  const now = timeOf(options.clock);
  const release = (job) => client.release(job.id, owner, job.fence);
  const ownerBytes = Buffer.byteLength(String(owner));

  let claimed = given;
  if (claimed.length === 0) {
    if (stopped()) return null;
    claimed = await client.claimNext(queue, owner, ttl,
      { wait: options.wait ?? DEFAULT_WAIT, max: prefetch, ...now() });
    if (claimed.length === 0) return null;
  }
  if (stopped()) {
    await Promise.all(claimed.map(release)); // untouched: the stop came first
    return null;
  }

  // Each job's state: waiting -> running -> finished -> completed; or lost
  // (a renew or the complete answered false: no longer ours), failed (fn
  // threw, or returned what complete cannot store: reported with fail),
  // released (untouched, after a stop), or running -> suspending ->
  // suspended (its job.suspend ended the lease: nothing stored; back to
  // running when the suspend got no answer). waiting, running and finished
  // are held: their leases are renewed.
  const entries = claimed.map((job) => ({ job, state: 'waiting', result: undefined, error: undefined,
    controller: null, token: undefined }));
  const isHeld = (e) => e.state === 'waiting' || e.state === 'running' || e.state === 'finished';
  const lose = (e, why) => {
    const wasRunning = e.state === 'running' || e.state === 'suspending';
    e.state = 'lost';
    log(`fenceq: ${owner} dropped job ${e.job.id} (fence ${e.job.fence}): ${why}; it is no longer ours`);
    if (wasRunning) {
      e.controller.abort(new FenceqError('lease_lost',
        `fenceq: lease on ${e.job.id} (fence ${e.job.fence}) was lost; the result will not be stored`));
    }
  };
  const reportFailure = (e, err) => client.fail(e.job.id, owner, e.job.fence, errorText(err),
    { retryIn: options.retryIn, ...now() })
    // Not recorded (the daemon is away, or refused the text): at least let
    // the lease go, else the job waits for it to expire.
    .catch(() => release(e.job)).catch(() => {});

  // After a stop, the jobs not started go back at once (best effort: else
  // their leases end by themselves).
  const releases = [];
  const releaseWaiting = () => {
    for (const e of entries) {
      if (e.state !== 'waiting') continue;
      e.state = 'released';
      releases.push(release(e.job).catch(() => {}));
    }
  };
  stopSignal?.addEventListener?.('abort', releaseWaiting, { once: true });

  // One renew_many for every held lease, each scheduled after the previous
  // one settled. A renew that fails (timeout, daemon restarting) is retried
  // on the next tick: the leases may still be current.
  const renewEveryMs = options.renewEveryMs ?? (ttl * 1000) / 3;
  let active = true;
  let timer = null;
  const scheduleRenew = () => {
    timer = setTimeout(async () => {
      const sent = entries.filter(isHeld);
      for (const chunk of chunks(sent, () => ownerBytes)) {
        let renewed = null;
        try {
          renewed = await client.renewMany(chunk.map((e) => ({ id: e.job.id, owner, fence: e.job.fence })),
            ttl, now());
        } catch {
          renewed = null; // unknown, not refused: try again next tick
        }
        if (!active) return;
        renewed?.forEach((ok, i) => {
          if (!ok && isHeld(chunk[i])) lose(chunk[i], 'its renew was refused (cancelled, or the lease ran out)');
        });
      }
      if (active) scheduleRenew();
    }, renewEveryMs);
  };
  scheduleRenew();

  let next = [];
  try {
    for (const e of entries) {
      if (stopped()) releaseWaiting(); // whatever the signal's listeners did
      if (e.state !== 'waiting') continue; // lost or released before it ran
      const { id, fence, attempts, payload } = e.job;
      e.state = 'running';
      e.controller = new AbortController();
      let threw = false;
      const { signal } = e.controller;
      const jobArg = { id, owner, fence, attempts, payload, ...parentsOf(e.job), ...headersOf(e.job),
        ...stepsOf(e.job), ...signalOf(e.job), signal };
      // A suspend takes the job out of the renewals while it is asked (its
      // lease is ending), and for good once answered with a token.
      const lease = heldLease({
        pause: () => { if (e.state === 'running') e.state = 'suspending'; },
        resume: () => { if (e.state === 'suspending') e.state = 'running'; },
      });
      withStep(client, jobArg, now, true, (why) => {
        if (e.state === 'running' || e.state === 'suspending') lose(e, why);
      }, lease);
      try {
        e.result = await inJobContext(client, queue, e.job, () => fn(jobArg));
      } catch (err) {
        threw = true;
        e.error = err;
      }
      await lease.pending; // a suspend still on its way settles first
      if (lease.state === 'suspended' && e.state === 'suspending') {
        // Suspended (C3.23): no longer ours, nothing of it is stored.
        e.state = 'suspended';
        e.token = lease.token;
        continue;
      }
      if (e.state !== 'running') continue; // lost while it ran: nothing of it is stored
      if (!threw && e.result !== undefined && e.result !== null && typeof e.result !== 'string') {
        // One result complete cannot store would refuse the whole batch.
        threw = true;
        e.error = new FenceqError('invalid_argument',
          `fenceq: job ${id} returned a ${typeof e.result}; a result is a string or null`);
      }
      if (threw && e.error instanceof Snooze) {
        await snoozeHeld(client, owner, e, now, lose);
      } else if (threw) {
        e.state = 'failed';
        await reportFailure(e, e.error);
      } else {
        e.state = 'finished';
      }
    }
  } finally {
    active = false;
    clearTimeout(timer);
    stopSignal?.removeEventListener?.('abort', releaseWaiting);
    releaseWaiting(); // whatever happened above, no job is left leased unstarted
  }

  const finished = entries.filter((e) => e.state === 'finished');
  try {
    if (finished.length > 0) next = await completeFinished(client, owner, finished, queue, ttl,
      stopped() ? 0 : prefetch, now, lose, reportFailure);
  } finally {
    await Promise.all(releases);
  }
  if (next.length > 0 && stopped()) {
    // The stop came while the completion was on its way: the jobs it claimed
    // go back untouched.
    await Promise.all(next.map((job) => release(job).catch(() => {})));
    next = [];
  }
  return {
    outcomes: entries.map(({ job, state, result, error, token }) => {
      const outcome = { id: job.id, fence: job.fence, attempts: job.attempts, status: state,
        completed: state === 'completed', result };
      if (error !== undefined) outcome.error = error;
      if (token !== undefined) outcome.token = token;
      return outcome;
    }),
    next,
  };
}

/**
 * A round's job whose `fn` threw a Snooze (`e.error`), C3.14: put off with its
 * attempt given back (status 'snoozed'), and no longer held from then on, so
 * no renewal races the snooze. Refused, the lease was no longer ours; no
 * answer (a timeout), it ends by itself: `lose` either way, nothing stored.
 */
async function snoozeHeld(client, owner, e, now, lose) {
  e.state = 'snoozed';
  let answer;
  try {
    answer = await client.snooze(e.job.id, owner, e.job.fence, e.error.delay, now());
  } catch (err) {
    answer = err;
  }
  if (answer === true) return;
  lose(e, answer === false ? 'its snooze was refused'
    : `its snooze got no answer (${answer?.message ?? String(answer)}); its lease ends by itself`);
}

/**
 * Completes the finished jobs of a round with complete_many, the last request
 * claiming up to `max` next jobs (none when max is 0); marks each completed
 * or lost. A request refused as a whole (bad_request, invalid_argument:
 * nothing applied) is repeated job by job, so that a job the daemon cannot
 * store fails alone. Any other error (a timeout: it may have been applied)
 * reports every job of the round with a best-effort fail (false, changing
 * nothing, for a job already completed) and is thrown.
 * @returns {Promise<Array<object>>} the next jobs
 */
async function completeFinished(client, owner, finished, queue, ttl, max, now, lose, reportFailure) {
  const ownerBytes = Buffer.byteLength(String(owner));
  const parts = chunks(finished,
    (e) => ownerBytes + (typeof e.result === 'string' ? Buffer.byteLength(e.result) : 0));
  const item = (e) => ({ id: e.job.id, owner, fence: e.job.fence, result: e.result ?? null });
  const answers = await Promise.allSettled(parts.map((part, i) => {
    const withNext = max > 0 && i === parts.length - 1;
    return client.completeMany(part.map(item),
      withNext ? { next: { queue, ttl, max }, ...now() } : now());
  }));
  let next = [];
  let failure = null;
  for (let i = 0; i < parts.length; i++) {
    const answer = answers[i];
    let completed;
    if (answer.status === 'fulfilled') {
      completed = Array.isArray(answer.value) ? answer.value : answer.value.completed;
      if (!Array.isArray(answer.value)) next = answer.value.next;
    } else if (answer.reason?.code === 'bad_request' || answer.reason?.code === 'invalid_argument') {
      completed = await Promise.all(parts[i].map((e) =>
        client.complete(e.job.id, owner, e.job.fence, e.result ?? null, now()).catch((err) => err)));
    } else {
      failure ??= answer.reason;
      continue;
    }
    parts[i].forEach((e, j) => {
      if (completed[j] === true) {
        e.state = 'completed';
      } else if (completed[j] === false) {
        lose(e, 'its complete was refused (the result was not stored)');
      } else {
        e.state = 'failed';
        e.error = completed[j];
      }
    });
  }
  await Promise.all(finished.filter((e) => e.state === 'failed').map((e) => reportFailure(e, e.error)));
  if (failure !== null) {
    await Promise.all([
      ...finished.filter((e) => e.state === 'finished').map((e) => reportFailure(e, failure)),
      ...next.map((job) => client.release(job.id, owner, job.fence).catch(() => {})),
    ]);
    throw failure;
  }
  return next;
}

/**
 * `entries` cut into batches of at most MAX_BATCH_ITEMS whose ids (and
 * `extraBytes`) stay under BATCH_BYTES; an entry larger than that goes alone.
 */
function chunks(entries, extraBytes) {
  const out = [];
  let current = [];
  let bytes = 0;
  for (const e of entries) {
    const size = Buffer.byteLength(e.job.id) + extraBytes(e) + 64;
    if (current.length > 0 && (current.length >= MAX_BATCH_ITEMS || bytes + size > BATCH_BYTES)) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(e);
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/**
 * `{after}` for a job that has parents (issue 32), `{}` for one that has
 * none: the job function gets `after` as claimNext handed it out.
 */
function parentsOf(job) {
  return job.after === undefined ? {} : { after: job.after };
}

/**
 * `{headers}` for a job enqueued with headers (issue 33), `{}` for one
 * without: the job function gets `headers` as claimNext handed them out.
 */
function headersOf(job) {
  return job.headers === undefined ? {} : { headers: job.headers };
}

/**
 * `{steps}` (a copy: `job.step` adds to it) for a job that saved steps
 * (C3.22), `{}` for one without: the job function gets `steps` as the claim
 * handed them out.
 */
function stepsOf(job) {
  return job.steps === undefined ? {} : { steps: { ...job.steps } };
}

/**
 * `{signalled, signalValue}` (C3.23): whether a signal woke the job since it
 * last suspended (its claim has `signal`, null too) and that signal's value
 * (null when none): the job function gets them from the claim.
 */
function signalOf(job) {
  return job.signal === undefined
    ? { signalled: false, signalValue: null }
    : { signalled: true, signalValue: job.signal };
}

/**
 * The state of a job function's lease as `job.suspend` changes it (C3.23):
 * `state` 'held', 'suspending' (a suspend asked: the renewals pause) or
 * 'suspended' (answered with `token`: the lease is gone); `pending` the
 * suspend on its way (never rejects), for the helpers to await once the job
 * function returns. `hooks.pause()` and `hooks.resume()` stop and restart the
 * job's renewals (resume: the suspend got no answer, or was refused).
 */
function heldLease(hooks) {
  return { state: 'held', token: undefined, pending: undefined, ...hooks };
}

/** Whether `value` is what a step saves: a payload (bin as a Uint8Array, a string, or null). */
function isStepValue(value) {
  return value === null || typeof value === 'string' || value instanceof Uint8Array;
}

/**
 * Gives the job function's job (`{id, owner, fence, steps?, signal, ...}`)
 * its `step(name, fn)` (C3.22) and `suspend(timeout, {onTimeout}?)` (C3.23;
 * neither enumerable, so the job reads as before).
 *
 * `step(name, fn)`:
 *
 *  - `name` in `job.steps` (saved by this attempt or an earlier one): the
 *    saved value, `fn` not called;
 *  - else `fn()` (awaited), then its result (a Buffer/Uint8Array, a string,
 *    or null; undefined is saved as null) saved with step_save under the
 *    job's lease: true, it is added to `job.steps` and returned (as a later
 *    attempt will get it: a Uint8Array as a Buffer); false (the lease is no
 *    longer ours: it expired and another worker may hold the job, or it was
 *    cancelled) throws a FenceqError `lease_lost`, and `onLost(why)` aborts
 *    the job's signal: nothing further should run.
 *
 * A step once the signal is aborted throws its reason (`lease_lost`)
 * without calling `fn`. Two calls with one name at once share one `fn()`.
 * An error of `fn` is thrown as it is, nothing saved (the next attempt runs
 * it again); so is one of step_save (a timeout: saved or not, the next
 * attempt's claim says). `known`: whether `job.steps` holds the job's saved
 * steps (a claim by queue hands them out); a job claimed by id (`work`: a
 * claim answers its fence alone) reads them with `job` at its first step.
 *
 * `suspend(timeout, {onTimeout}?)`: suspends the job with `client.suspend`
 * under its lease (`lease`, a heldLease: its renewals paused while it is
 * asked) and resolves the signal token; from then on the lease is gone: a
 * later `step` or `suspend` throws `lease_lost` without asking the daemon,
 * and the helpers store nothing once the job function returns. Refused
 * (null: the lease is no longer ours), it throws a FenceqError `lease_lost`
 * and `onLost(why)` aborts the job's signal, as a refused step does. An
 * error of the request (a timeout: suspended or not, the next renew says)
 * is thrown as it is, the renewals resumed; so is the daemon's refusal of
 * a bad timeout or onTimeout (invalid_argument, bad_request).
 */
function withStep(client, job, now, known, onLost, lease) {
  const { id, owner, fence, signal } = job;
  const notHeld = () => new FenceqError('lease_lost', `fenceq: job ${id} (fence ${fence}) was ` +
    `${lease.state === 'suspended' ? 'suspended' : 'being suspended'}: its lease is no longer this worker's`);
  const pending = new Map();
  let loading = known ? null : undefined;
  const lost = (why, what) => {
    onLost(why);
    return new FenceqError('lease_lost', `fenceq: lease on ${id} (fence ${fence}) was lost; ${what}`);
  };
  const loadSteps = async () => {
    const record = await client.job(id, now());
    if (record === null || record.fence !== fence || record.owner !== owner) {
      throw lost('its record shows another lease (or none)', 'its steps were not read');
    }
    if (record.steps !== undefined) job.steps = { ...record.steps, ...job.steps };
  };
  const run = async (name, fn) => {
    let value = await fn();
    if (value === undefined) value = null;
    if (!isStepValue(value)) {
      throw new FenceqError('invalid_argument', `fenceq: step '${name}' of job ${id} returned a ` +
        `${typeof value}; a step's value is a Buffer/Uint8Array, a string or null (nothing was saved)`);
    }
    if (signal.aborted) throw signal.reason;
    if (lease.state !== 'held') throw notHeld();
    const saved = await client.stepSave(id, owner, fence, name, value, now());
    if (saved !== true) throw lost(`its step_save of '${name}' was refused`, `step '${name}' was not saved`);
    const kept = value instanceof Uint8Array && !Buffer.isBuffer(value) ? Buffer.from(value) : value;
    if (job.steps === undefined) job.steps = {};
    job.steps[name] = kept;
    return kept;
  };
  const step = async (name, fn) => {
    if (typeof name !== 'string' || name === '') {
      throw new FenceqError('invalid_argument', 'fenceq: job.step: name must be a non-empty string');
    }
    if (typeof fn !== 'function') {
      throw new FenceqError('invalid_argument', 'fenceq: job.step: fn must be a function');
    }
    if (signal.aborted) throw signal.reason;
    if (lease.state !== 'held') throw notHeld();
    if (loading === undefined) {
      loading = loadSteps().catch((err) => {
        if (err?.code !== 'lease_lost') loading = undefined; // not read (a timeout): the next step tries again
        throw err;
      });
    }
    if (loading !== null) await loading;
    if (job.steps !== undefined && Object.hasOwn(job.steps, name)) return job.steps[name];
    if (!pending.has(name)) {
      pending.set(name, run(name, fn).finally(() => pending.delete(name)));
    }
    return pending.get(name);
  };
  const ask = async (timeout, options) => {
    if (options !== undefined && options !== null) {
      const unknown = typeof options === 'object'
        ? Object.keys(options).filter((k) => !SUSPEND_OPTIONS.includes(k)) : [];
      if (typeof options !== 'object' || unknown.length > 0) {
        throw new FenceqError('invalid_argument', typeof options !== 'object'
          ? 'fenceq: job.suspend options must be an object'
          : `fenceq: unknown job.suspend option '${unknown[0]}' (expected one of: ${SUSPEND_OPTIONS.join(', ')})`);
      }
    }
    if (signal.aborted) throw signal.reason;
    if (lease.state !== 'held') throw notHeld();
    lease.state = 'suspending';
    lease.pause();
    let token;
    try {
      token = await client.suspend(id, owner, fence, timeout, { onTimeout: options?.onTimeout, ...now() });
    } catch (err) {
      lease.state = 'held';
      lease.resume();
      throw err;
    }
    if (token === null) {
      lease.state = 'held';
      lease.resume();
      throw lost('its suspend was refused', 'it was not suspended');
    }
    lease.state = 'suspended';
    lease.token = token;
    return token;
  };
  const suspend = (timeout, options) => {
    const asked = ask(timeout, options);
    const before = lease.pending;
    lease.pending = Promise.all([before, asked.then(() => {}, () => {})]).then(() => {});
    return asked;
  };
  Object.defineProperty(job, 'step', { value: step, enumerable: false, writable: true, configurable: true });
  Object.defineProperty(job, 'suspend', { value: suspend, enumerable: false, writable: true, configurable: true });
  return job;
}

/**
 * `call()` (a job function's run) in the trace context extracted from the
 * job's headers, in a span `fenceq.process <queue>`, when the application has
 * @opentelemetry/api and the client's traceContext is on (lib/trace.js); a
 * Snooze is not a failure of the span.
 */
function inJobContext(client, queue, job, call) {
  return runInJobContext(client.traceContext !== false, queue, job, call,
    (err) => !(err instanceof Snooze));
}

/** The shape of a job claimNext / completeAndClaimNext hand out. */
function isJob(job) {
  return job !== null && typeof job === 'object' && typeof job.id === 'string' &&
    Number.isInteger(job.fence) && Number.isInteger(job.attempts);
}

/**
 * Runs `fn(jobArg)` under the lease, renewing it, then completes. On a throw
 * from `fn` or from complete, calls `onThrow(err)` (errors ignored) and
 * rethrows; a Snooze from `fn` snoozes the job instead and resolves
 * `{completed: false, snoozed, result: undefined, next: null}` (snoozed
 * false: the lease was lost first, nothing sent, or the daemon refused it).
 * When `fn`'s `job.suspend` suspended the job (C3.23), nothing is sent once
 * `fn` returns: resolves `{completed: false, token, result, next: null}`;
 * a throw of `fn` after it is rethrown as it is, `onThrow` not called.
 * Otherwise resolves `{completed, result, next}`: with `takeNext`
 * (`{queue, stopped}`) the completion claims the next job of `queue` in the
 * same round trip, unless `stopped()`; a job it claims after a stop is
 * released untouched (next: null). With `lease.queue` (workNext), `fn` runs
 * in the job's trace context (inJobContext).
 */
async function runLeased(client, lease, fn, jobArg, options, onThrow, takeNext = null) {
  const { id, owner, fence, ttl, queue } = lease;
  const now = timeOf(options?.clock);
  const renewEveryMs = options?.renewEveryMs ?? (ttl * 1000) / 3;
  const controller = new AbortController();
  let running = true;
  let timer = null;
  // Bumped to stop the renewals (a suspend asked, the lease known lost): a
  // renew already on its way then changes nothing and schedules no other.
  let renewals = 0;
  const stopRenewals = () => {
    renewals += 1;
    clearTimeout(timer);
  };

  // One renew at a time, each scheduled after the previous one settled, so a
  // slow daemon never piles up renewals. A renew that fails (timeout, daemon
  // restarting) is retried on the next tick: the lease may still be current.
  const scheduleRenew = () => {
    const chain = renewals;
    timer = setTimeout(async () => {
      let renewed = true;
      try {
        renewed = await client.renew(id, owner, fence, ttl, now());
      } catch {
        renewed = true; // unknown, not refused: try again next tick
      }
      if (!running || chain !== renewals) return;
      if (!renewed) {
        (options?.log ?? console.warn)(`fenceq: ${owner}: the renew of job ${id} (fence ${fence}) was ` +
          'refused (cancelled, or the lease is no longer ours): the job is not this worker\'s any more');
        controller.abort(new FenceqError('lease_lost',
          `fenceq: lease on ${id} (fence ${fence}) was lost; the result will not be stored`));
        return;
      }
      scheduleRenew();
    }, renewEveryMs);
  };
  scheduleRenew();

  const held = heldLease({
    pause: stopRenewals,
    resume: () => {
      if (running && !controller.signal.aborted) scheduleRenew();
    },
  });
  const job = withStep(client, { ...jobArg, signal: controller.signal }, now, queue !== undefined, (why) => {
    if (controller.signal.aborted) return;
    stopRenewals();
    (options?.log ?? console.warn)(`fenceq: ${owner}: ${why} for job ${id} (fence ${fence}): ` +
      'the job is not this worker\'s any more');
    controller.abort(new FenceqError('lease_lost',
      `fenceq: lease on ${id} (fence ${fence}) was lost; the result will not be stored`));
  }, held);
  let result;
  try {
    const call = () => fn(job);
    result = await (queue === undefined ? call() : inJobContext(client, queue, jobArg, call));
  } catch (err) {
    running = false;
    clearTimeout(timer);
    await held.pending; // a suspend still on its way settles first
    if (held.state === 'suspended') throw err; // the lease is gone: nothing to fail or release
    if (err instanceof Snooze) {
      // Put off, not failed (C3.14): no attempt used, no error kept.
      const snoozed = !controller.signal.aborted &&
        await client.snooze(id, owner, fence, err.delay, now());
      return { completed: false, snoozed, result: undefined, next: null };
    }
    await Promise.resolve().then(() => onThrow(err)).catch(() => {}); // else it expires
    throw err;
  }
  running = false;
  clearTimeout(timer);
  await held.pending; // a suspend still on its way settles first
  if (held.state === 'suspended') {
    // Suspended (C3.23): the attempt ended there; the job is not ours to complete.
    return { completed: false, token: held.token, result, next: null };
  }

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

module.exports = { work, workNext, errorText, Snooze, MAX_SNOOZE_SECONDS };
