// Compiled (not run) by types.test.js: the ESM view of the declarations.
import fenceq, { Client, FenceqError, DEFAULT_ENDPOINT, type WorkOutcome } from 'fenceq';

const c: Client = new fenceq.Client(DEFAULT_ENDPOINT);
const err: FenceqError = new FenceqError('timeout', 'x');
const outcome: WorkOutcome<string> | null = await c.work('a', 'w', 30, () => 'r');
// @ts-expect-error state needs an id
await c.state();
void [err, outcome];
await c.close();
