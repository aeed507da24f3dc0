// Compiled (not run) by types.test.js: the ESM view of the declarations.
import fenceq, {
  Client, FenceqError, DEFAULT_ENDPOINT, resolveEndpoint, type EndpointSource, type WorkOutcome, type WorkNextOutcome, type EnqueueOptions,
  type CompleteAndClaimNextResult, type WorkNextTakeOutcome, curveKeys, type CurveKeys,
  type CompleteManyResult, type WorkRound, type NextJob, type JobDetail, type Schedule, type Enqueued,
  Snooze,
} from 'fenceq';

const c: Client = new fenceq.Client(DEFAULT_ENDPOINT);
const chosen: EndpointSource = c.endpointSource;
const resolved: { endpoint: string; source: EndpointSource } =
  resolveEndpoint(undefined, { env: {}, serviceSocketExists: false });
void [chosen, resolved, fenceq.SERVICE_ENDPOINT];
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
const created: boolean[] = await c.enqueueMany([{ id: 'x', queue: 'q' }]);
const unique: Enqueued = await c.enqueue('u', { queue: 'q', key: 'k', onConflict: 'replace' });
const uniqueMany: Array<boolean | Enqueued> = await c.enqueueMany([{ id: 'u2', key: 'k' }, { id: 'u3' }]);
void [unique, uniqueMany];
const batch: NextJob[] = await c.claimNext('q', 'w', 30, { max: 4 });
const renewed: boolean[] = await c.renewMany(batch.map(({ id, fence }) => ({ id, owner: 'w', fence })), 30);
const stored: CompleteManyResult = await c.completeMany(
  batch.map(({ id, fence }) => ({ id, owner: 'w', fence, result: null })), { next: { queue: 'q', ttl: 30, max: 4 } });
const round: WorkRound<string> | null =
  await c.workNext('q', 'w', 30, ({ id }) => id, { prefetch: 4, jobs: stored.next });
void [created, renewed, round];
const paused: boolean = await c.pause('q');
await c.queueConfig('q', { maxLeased: 2, rate: 10, per: 60 });
await c.queueConfig('q', { groupMaxLeased: 2, groupRate: 10, groupPer: 60 });
const fair: boolean = await c.enqueue('fair-1', { queue: 'q', group: 'customer-1' });
const waitingGroups: number | undefined = (await c.stats()).queues.q?.groups_waiting;
void [fair, waitingGroups];
const fanIn: boolean[] = await c.enqueueFanIn(['part-1', { id: 'part-2' }], { id: 'sum', afterFailure: 'run' }, { queue: 'q' });
const waits: boolean = await c.enqueue('child', { after: ['part-1'] });
const blocked: number | undefined = (await c.stats()).queues.q?.blocked;
const claimedChild: NextJob | null = await c.claimNext('q', 'w', 30);
const parentsOfChild: string[] = claimedChild?.after ?? [];
const childrenBlocked: string[] = (await c.job('part-1'))?.blocked_children ?? [];
void [fanIn, waits, blocked, parentsOfChild, childrenBlocked];
const record: JobDetail | null = await c.enqueueAndWait('w1', { queue: 'q', wait: 5 });
const again: JobDetail | null = await c.awaitJob('w1', { wait: 5 });
const made: boolean = await c.scheduleSet('every-minute', '* * * * *', { queue: 'q' });
const schedules: Schedule[] = await c.scheduleList();
void [paused, record, again, made, schedules, await c.scheduleDelete('every-minute')];
// @ts-expect-error resume answers a boolean
const notJob: JobDetail = await c.resume('q');
void notJob;
// @ts-expect-error completeMany needs an array of items
await c.completeMany({ id: 'a', owner: 'w', fence: 1 });
// @ts-expect-error curveKeys answers the keys, not a promise
await curveKeys('client.key', 'k').then(() => 0);
// @ts-expect-error state needs an id
await c.state();
// @ts-expect-error stats takes no queue
await c.stats({ queue: 'q' });
const snoozedByHand: boolean = await c.snooze('a', 'w', 1, 60);
const putOff: Snooze = new fenceq.Snooze(60);
const snoozedOutcome: WorkOutcome<string> | null = await c.work('a', 'w', 30, () => {
  throw new Snooze(putOff.delay);
});
void [snoozedByHand, snoozedOutcome?.snoozed];
const cappedByRuntime: boolean = await c.enqueue('cap', { maxRuntime: 600 });
const cappedOptions: EnqueueOptions = { maxRuntime: 60 };
const withHeaders: boolean = await c.enqueue('hdr', { headers: { traceparent: '00-...' } });
void [cappedByRuntime, cappedOptions, withHeaders];
// @ts-expect-error options are camelCase: maxRuntime
await c.enqueue('cap', { max_runtime: 600 });
void [err, outcome, next, taken];
await c.close();
