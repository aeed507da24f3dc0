// Compiled (not run) by types.test.js: the declarations must accept real use
// from CommonJS TypeScript and reject misuse.
import fenceq = require('fenceq');
import { Client, FenceqError, type JobState, type PingResult } from 'fenceq';

async function main(): Promise<void> {
  const c = new Client('ipc:///tmp/x.sock', { timeoutMs: 100 });
  const c2: fenceq.Client = new fenceq.Client({ timeoutMs: 100 });
  const info: PingResult = await c.ping();
  const clock: 'server' | 'client' = info.clock;
  const fresh: boolean = await c.enqueue('a');
  const row: JobState | null = await c.state('a');
  const owner: string | null | undefined = row?.owner;
  const fence: number | null = await c.claim('a', 'w', 30, { now: 1 });
  if (fence !== null) {
    const renewed: boolean = await c.renew('a', 'w', fence, 30);
    const done: boolean = await c.complete('a', 'w', fence, null, { now: 2 });
    const released: boolean = await c.release('a', 'w', fence);
    void [renewed, done, released];
  }
  const outcome = await c.work('a', 'w', 30, async ({ fence: f, signal }) => {
    if (signal.aborted) return null;
    return `fence ${f}`;
  }, { renewEveryMs: 1000, clock: () => Date.now() / 1000 });
  if (outcome !== null) {
    const completed: boolean = outcome.completed;
    void completed;
  }
  try {
    await c.request('later_op', { x: 1 });
  } catch (err) {
    if (err instanceof FenceqError) {
      const code: string = err.code;
      void code;
    }
  }
  // @ts-expect-error fence is a number
  await c.renew('a', 'w', '1', 30);
  // @ts-expect-error a claim answers number | null, not a boolean
  const wrong: boolean = await c.claim('a', 'w', 30);
  void [c2, clock, fresh, owner, wrong];
  await c.close();
}
void main;
