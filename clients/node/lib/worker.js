'use strict';

// The worker pattern in one call: claim, keep the lease alive while the job
// runs, complete with the fence, release when the job throws.
//
// The helper never decides whether a write is stale: every renew and the final
// complete carry the fence, and the daemon refuses them once another worker
// holds a newer lease (C3.4, C3.5). A lost lease is a value (`completed:
// false`), not an error, like every other refusal.

const { FenceqError } = require('./errors');

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
  const clock = options?.clock;
  const now = () => (clock ? { now: clock() } : undefined);
  const fence = await client.claim(id, owner, ttl, now());
  if (fence === null) return null;

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
    result = await fn({ id, owner, fence, signal: controller.signal });
  } catch (err) {
    running = false;
    clearTimeout(timer);
    await client.release(id, owner, fence).catch(() => {}); // else it expires
    throw err;
  }
  running = false;
  clearTimeout(timer);

  let completed;
  try {
    completed = await client.complete(id, owner, fence, result ?? null, now());
  } catch (err) {
    // The complete may or may not have been applied (timeout); a release after
    // a successful complete answers false and changes nothing (C3.6).
    await client.release(id, owner, fence).catch(() => {});
    throw err;
  }
  return { fence, completed, result };
}

module.exports = { work };
