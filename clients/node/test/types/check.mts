// Compiled (not run) by types.test.js: the ESM view of the declarations.
import fenceq, {
  Client, FenceqError, DEFAULT_ENDPOINT, type WorkOutcome, type WorkNextOutcome, type EnqueueOptions,
  type CompleteAndClaimNextResult, type WorkNextTakeOutcome, curveKeys, type CurveKeys,
} from 'fenceq';

const c: Client = new fenceq.Client(DEFAULT_ENDPOINT);
const err: FenceqError = new FenceqError('timeout', 'x');
const outcome: WorkOutcome<string> | null = await c.work('a', 'w', 30, () => 'r');
const options: EnqueueOptions = { queue: 'q', payload: 'x', priority: 1 };
await c.enqueue('b', options);
const next: WorkNextOutcome<string> | null = await c.workNext('q', 'w', 30, ({ payload }) => String(payload));
const both: CompleteAndClaimNextResult = await c.completeAndClaimNext('a', 'w', 1, 'r', 'q', 30);
const taken: WorkNextTakeOutcome<string> | null =
  await c.workNext('q', 'w', 30, () => 'r', { takeNext: true, job: both.next });
const keys: CurveKeys = curveKeys('client.key', 'public-key = "..."');
const secure = new Client('tcp://127.0.0.1:7411', { curve: keys });
const sameFunction: typeof curveKeys = fenceq.curveKeys;
void sameFunction;
await secure.close();
// @ts-expect-error curveKeys answers the keys, not a promise
await curveKeys('client.key', 'k').then(() => 0);
// @ts-expect-error state needs an id
await c.state();
// @ts-expect-error stats takes no queue
await c.stats({ queue: 'q' });
void [err, outcome, next, taken];
await c.close();
