// Compiled (not run) by types.test.js: the declarations must accept real use
// from CommonJS TypeScript and reject misuse.
import fenceq = require('fenceq');
import {
  Client, FenceqError, type JobState, type PingResult, type NextJob, type JobInfo, type Stats,
  type Payload, type JobStatus, type CompleteAndClaimNextResult, type WorkNextTakeOutcome,
  curveKeys, type CurveKeys, type ClientOptions, type EnqueueManyJob, type LeaseItem,
  type CompleteItem, type CompleteManyResult, type WorkRound, type RoundJobOutcome,
  type RoundJobStatus, type ClaimNextManyOptions, type QueueTotals, type QueueSettings,
  type AwaitOptions, type EnqueueAndWaitOptions, type ScheduleOptions, type Schedule,
  type JobDetail, type QueueStats, type Enqueued, type UniqueEnqueueOptions,
  type UniqueEnqueueManyJob, type OnConflict, type JobOutcome, type AfterFailure,
  type EnqueueFanInOptions, type EnqueueOptions, Snooze, type WorkOutcome,
  type BulkResult, type RetryManyOptions, type CancelManyOptions, type PurgeManyOptions,
  type OnTimeout, type SuspendOptions, type SignalOptions, type Suspension, type JobSuspendOptions,
  type JobEventName, type GroupSettings, type GroupOverride,
} from 'fenceq';

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
  // The work queue.
  const created: boolean = await c.enqueue('b', {
    queue: 'emails', payload: new Uint8Array([1, 2]), priority: 5, delay: 10, maxAttempts: 3,
  });
  await c.enqueue('c', { payload: 'text', now: 3 });
  await c.enqueue('d', { payload: null });
  const next: NextJob | null = await c.claimNext('emails', 'w', 30, { wait: 20, now: 4 });
  if (next !== null) {
    const p: Payload = next.payload;
    const bytes: Uint8Array | string | null = p;
    const attempts: number = next.attempts;
    const failed: boolean = await c.fail(next.id, 'w', next.fence, 'boom', { retryIn: 5, now: 5 });
    const current: boolean = await c.check(next.id, 'w', next.fence, { now: 6 });
    void [bytes, attempts, failed, current];
  }
  if (next !== null) {
    const both: CompleteAndClaimNextResult =
      await c.completeAndClaimNext(next.id, 'w', next.fence, 'done', 'emails', 30, { now: 7 });
    const stored: boolean = both.completed;
    const following: NextJob | null = both.next;
    const again = await c.completeAndClaimNext('a', 'w', 1, null, 'emails', 30);
    const followingPayload: Payload | undefined = again.next?.payload;
    void [stored, following, followingPayload];
  }
  const revived: boolean = await c.retry('b');
  const stats: Stats = await c.stats();
  const ready: number | undefined = stats.queues.emails?.ready;
  const totals: QueueTotals | undefined = stats.queues.emails?.totals;
  const staleRenews: number | undefined = totals?.refused.renew;
  // @ts-expect-error claims are never refused as stale writes
  const staleClaims = totals?.refused.claim;
  void [staleRenews, staleClaims];
  const waiting: number = stats.waiting_claims;
  const rows: JobInfo[] = await c.list({ queue: 'emails', state: 'dead', limit: 10, after: 'a' });
  const st: JobStatus | undefined = rows[0]?.state;
  const maxAttempts: number | undefined = rows[0]?.max_attempts;
  const purged: number = await c.purge(3600, { queue: 'emails' });
  const text: string = await c.metrics();
  const viaRequest: unknown = await c.request('claim_next', { queue: 'q' }, { timeoutMs: 30000 });
  const polled = await c.workNext('emails', 'w', 30, async ({ id, payload, attempts: n, fence: f, signal }) => {
    if (signal.aborted) return null;
    return `${id} ${String(payload)} ${n} ${f}`;
  }, { wait: 20, retryIn: 5, renewEveryMs: 1000 });
  if (polled !== null) {
    const ok: boolean = polled.completed;
    const pid: string = polled.id;
    const result: string | null = polled.result;
    void [ok, pid, result];
  }
  // One round trip a job: takeNext hands the next job back; job runs it; stopSignal stops.
  const stop = new AbortController();
  let held: NextJob | null = null;
  for (let i = 0; i < 3 && !stop.signal.aborted; i++) {
    const taken: WorkNextTakeOutcome<string> | null = await c.workNext('emails', 'w', 30,
      ({ id }) => id, { takeNext: true, job: held, stopSignal: stop.signal, wait: 5 });
    held = taken === null ? null : taken.next;
  }
  const plain = await c.workNext('emails', 'w', 30, () => 'r', { job: null });
  const maybeNext: NextJob | null | undefined = plain?.next;
  void maybeNext;
  void [created, revived, ready, waiting, st, maxAttempts, purged, text, viaRequest];
  const fanIn: Record<string, JobOutcome | null> = await c.results(['a', 'b'], { now: 8 });
  const parentState: JobStatus | undefined = fanIn.a?.state;
  const parentResult: string | null | undefined = fanIn.a?.result;
  void [parentState, parentResult];
  // @ts-expect-error results takes an array of ids, not one id
  await c.results('a');
  // @ts-expect-error the wire spelling is not an option: maxAttempts
  await c.enqueue('e', { max_attempts: 3 });
  // @ts-expect-error a payload is bytes, a string or null
  await c.enqueue('e', { payload: 42 });
  // @ts-expect-error not a job state
  await c.list({ state: 'running' });
  // @ts-expect-error purge needs olderThan
  await c.purge();
  // @ts-expect-error retryIn, not retry_in
  await c.fail('a', 'w', 1, 'x', { retry_in: 1 });
  // @ts-expect-error claimNext answers a job or null, not a fence
  const wrongNext: number | null = await c.claimNext('q', 'w', 30);
  void wrongNext;
  // @ts-expect-error fence is a number
  await c.renew('a', 'w', '1', 30);
  // @ts-expect-error completeAndClaimNext needs the queue and the ttl of the next lease
  await c.completeAndClaimNext('a', 'w', 1, 'r');
  // @ts-expect-error completeAndClaimNext has no wait: claimNext long-polls
  await c.completeAndClaimNext('a', 'w', 1, 'r', 'q', 30, { wait: 5 });
  // @ts-expect-error completeAndClaimNext answers {completed, next}, not a boolean
  const wrongBoth: boolean = await c.completeAndClaimNext('a', 'w', 1, 'r', 'q', 30);
  // @ts-expect-error job is a claimed job, not an id
  await c.workNext('q', 'w', 30, () => 'r', { job: 'a' });
  // @ts-expect-error without takeNext, next may be absent
  const mustNext: NextJob | null = (await c.workNext('q', 'w', 30, () => 'r'))!.next;
  void [wrongBoth, mustNext];
  // Batches.
  const specs: EnqueueManyJob[] = [{ id: 'm1' }, { id: 'm2', queue: 'q', payload: 'p', priority: 2, maxAttempts: 3 }];
  const made: boolean[] = await c.enqueueMany(specs, { now: 8 });
  const madeReadonly: boolean[] = await c.enqueueMany([{ id: 'm3', payload: new Uint8Array(1) }] as const);
  const many: NextJob[] = await c.claimNext('q', 'w', 30, { max: 10, wait: 5, now: 9 });
  const manyOptions: ClaimNextManyOptions = { max: 1 };
  const one: NextJob[] = await c.claimNext('q', 'w', 30, manyOptions);
  const items: LeaseItem[] = many.map(({ id, fence: f }) => ({ id, owner: 'w', fence: f }));
  const renewedAll: boolean[] = await c.renewMany(items, 30, { now: 10 });
  const results: CompleteItem[] = items.map((item) => ({ ...item, result: 'ok' }));
  const storedAll: boolean[] = await c.completeMany(results, { now: 11 });
  const storedNoResult: boolean[] = await c.completeMany([{ id: 'a', owner: 'w', fence: 1 }], { next: null });
  const andNext: CompleteManyResult =
    await c.completeMany(results, { next: { queue: 'q', ttl: 30, max: 5 }, now: 12 });
  const nextJobs: NextJob[] = andNext.next;
  const flags: boolean[] = andNext.completed;
  void [made, madeReadonly, one, renewedAll, storedAll, storedNoResult, nextJobs, flags];
  // @ts-expect-error with max, claimNext answers an array, not one job
  const notOne: NextJob | null = await c.claimNext('q', 'w', 30, { max: 3 });
  // @ts-expect-error without max, claimNext answers one job or null, not an array
  const notMany: NextJob[] = await c.claimNext('q', 'w', 30, { wait: 1 });
  // @ts-expect-error an entry's options are camelCase: maxAttempts
  await c.enqueueMany([{ id: 'x', max_attempts: 3 }]);
  // @ts-expect-error each job needs its id
  await c.enqueueMany([{ queue: 'q' }]);
  // Unique keys: the answer's shape follows whether a key was given.
  const keyed: Enqueued = await c.enqueue('k1', { queue: 'q', key: 'user-7', uniqueFor: 60, onConflict: 'replace' });
  const holder: string = keyed.id;
  const wasCreated: boolean = keyed.created;
  const unkeyed: boolean = await c.enqueue('k2', { queue: 'q', key: undefined });
  const maybeKey: string | undefined = Math.random() > 0.5 ? 'k' : undefined;
  const either: boolean | Enqueued = await c.enqueue('k3', { key: maybeKey });
  const uniqueOptions: UniqueEnqueueOptions = { key: 'k', onConflict: 'skip' };
  const viaOptions: Enqueued = await c.enqueue('k4', uniqueOptions);
  const mixed: Array<boolean | Enqueued> = await c.enqueueMany([
    { id: 'k5', key: 'k', uniqueFor: 5 }, { id: 'k6' }, { id: 'k7', key: 'k', onConflict: 'replace' },
  ]);
  const uniqueSpecs: UniqueEnqueueManyJob[] = [{ id: 'k8', key: 'k' }];
  const uniqueMade: Array<boolean | Enqueued> = await c.enqueueMany(uniqueSpecs);
  const byKey: JobInfo[] = await c.list({ queue: 'q', key: 'user-7' });
  const rowKey: string | undefined = byKey[0]?.key;
  const conflict: OnConflict = 'replace';
  void [holder, wasCreated, unkeyed, either, viaOptions, mixed, uniqueMade, rowKey, conflict];
  // @ts-expect-error with a key, enqueue answers {id, created}, not a boolean
  const keyedBool: boolean = await c.enqueue('k9', { key: 'k' });
  // @ts-expect-error with keyed jobs, enqueueMany's answers are not all booleans
  const mixedBools: boolean[] = await c.enqueueMany([{ id: 'k10', key: 'k' }]);
  // @ts-expect-error onConflict is 'skip' or 'replace'
  await c.enqueue('k12', { key: 'k', onConflict: 'keep' });
  // @ts-expect-error the wire spelling is not an option: uniqueFor
  await c.enqueue('k13', { key: 'k', unique_for: 5 });
  // @ts-expect-error enqueueAndWait takes no key: enqueue with it, then awaitJob
  await c.enqueueAndWait('k14', { key: 'k', wait: 1 });
  void [keyedBool, mixedBools];
  // Groups (issue 31): an option of enqueue, enqueueMany's entries and enqueueAndWait; the answer's shape stays.
  const grouped: boolean = await c.enqueue('g1', { queue: 'q', group: 'customer-7' });
  const groupedKeyed: Enqueued = await c.enqueue('g2', { queue: 'q', key: 'k', group: 'customer-7' });
  const groupedMany: boolean[] = await c.enqueueMany([{ id: 'g3', group: 'customer-8' }, { id: 'g4' }]);
  const groupedWait: JobDetail | null = await c.enqueueAndWait('g5', { group: 'customer-7', wait: 1 });
  const byGroup: JobInfo[] = await c.list({ queue: 'q', group: 'customer-7' });
  const rowGroup: string | undefined = byGroup[0]?.group;
  const groupSettings: QueueSettings = { groupMaxLeased: 2, groupRate: 10, groupPer: 60 };
  await c.queueConfig('q', groupSettings);
  const groupStats: QueueStats | undefined = (await c.stats()).queues.q;
  const groupsWaiting: number | undefined = groupStats?.groups_waiting;
  const groupMax: number | undefined = groupStats?.group_max_leased;
  const groupRate: number | undefined = groupStats?.group_rate;
  const groupPer: number | undefined = groupStats?.group_per;
  void [grouped, groupedKeyed, groupedMany, groupedWait, rowGroup, groupsWaiting, groupMax, groupRate, groupPer];
  // @ts-expect-error a group is a string
  await c.enqueue('g6', { group: 7 });
  // @ts-expect-error the wire spelling is not an option: groupMaxLeased
  await c.queueConfig('q', { group_max_leased: 2 });
  // groups_waiting, like the settings, is there only when the daemon sends it.
  const waitingNow: number | undefined = (await c.stats()).queues.q!.groups_waiting;
  // @ts-expect-error the group settings are there only for a queue that has some
  const groupMaxNow: number = (await c.stats()).queues.q!.group_max_leased;
  void [waitingNow, groupMaxNow];
  // One group's own settings (C3.25): a number, null (the override goes) or left out.
  const tenant: GroupSettings = { maxLeased: 10, rate: 100, per: 60 };
  const overridden: boolean = await c.groupConfig('q', 'customer-enterprise', tenant);
  await c.groupConfig('q', 'customer-enterprise', { maxLeased: null, rate: null, per: null });
  await c.groupConfig('q', 'customer-trial', { rate: 0 });
  await c.groupConfig('q', 'customer-trial');
  const overrides: number | undefined = (await c.stats()).queues.q?.group_overrides;
  const override: GroupOverride | undefined = (await c.stats()).queues.q?.group_config?.['customer-enterprise'];
  const overrideMax: number | undefined = override?.max_leased;
  const overridePer: number | undefined = override?.per;
  void [overridden, overrides, overrideMax, overridePer];
  // @ts-expect-error options are camelCase: maxLeased, not max_leased
  await c.groupConfig('q', 'g', { max_leased: 3 });
  // @ts-expect-error the queue's settings are queueConfig's, not a group's
  await c.groupConfig('q', 'g', { groupMaxLeased: 3 });
  // @ts-expect-error groupConfig needs the group
  await c.groupConfig('q', { maxLeased: 3 });
  // @ts-expect-error a setting is a number or null
  await c.groupConfig('q', 'g', { rate: '10' });
  // @ts-expect-error the overrides are there only for a queue that has some
  const overridesNow: number = (await c.stats()).queues.q!.group_overrides;
  void overridesNow;
  // Jobs that wait for jobs (issue 32): after and afterFailure on enqueue and enqueueMany's
  // entries, the 'blocked' state, stats' blocked, and enqueueFanIn.
  const waits: boolean = await c.enqueue('w2', { queue: 'q', after: ['w1'], afterFailure: 'run', delay: 5 });
  const waitsKeyed: Enqueued = await c.enqueue('w3', { key: 'k', after: ['w1', 'w2'] });
  const parentIds: readonly string[] = ['w1'];
  const afterOptions: EnqueueOptions = { after: parentIds, afterFailure: 'cancel' };
  await c.enqueue('w4', afterOptions);
  const graph: boolean[] = await c.enqueueMany([{ id: 'p1' }, { id: 'c1', after: ['p1'], afterFailure: 'run' }]);
  const fanned: boolean[] = await c.enqueueFanIn([{ id: 'f1', payload: '1' }, 'f2'], { id: 'f3', payload: 'f1 f2' },
    { queue: 'q', now: 13 });
  const fannedBare: boolean[] = await c.enqueueFanIn(['f4'], 'f5');
  const fanInOptions: EnqueueFanInOptions = { queue: 'q' };
  const fannedKeyed: Array<boolean | Enqueued> = await c.enqueueFanIn([{ id: 'f6', key: 'k' }], 'f7', fanInOptions);
  const blockedRows: JobInfo[] = await c.list({ queue: 'q', state: 'blocked' });
  const blockedState: JobStatus = 'blocked';
  const blockedCount: number | undefined = (await c.stats()).queues.q?.blocked;
  const howFail: AfterFailure = 'run';
  const fannedParents: Record<string, JobOutcome | null> = await c.results(['f1', 'f2']);
  // A claimed child's parents (absent for a job without), and job's parents and blocked children.
  const child: NextJob | null = await c.claimNext('q', 'w', 30);
  const childParents: string[] = child?.after ?? [];
  const childResults: Record<string, JobOutcome | null> = await c.results(childParents);
  const parentRecord: JobDetail | null = await c.job('f1');
  const stillBlocked: string[] | undefined = parentRecord?.blocked_children;
  const recordParents: string[] | undefined = parentRecord?.after;
  await c.workNext('q', 'w', 30, ({ after }) => c.results(after ?? []).then(() => 'r'));
  void [waits, waitsKeyed, graph, fanned, fannedBare, fannedKeyed, blockedRows, blockedState, blockedCount,
    howFail, fannedParents, childResults, stillBlocked, recordParents];
  // Headers (issue 33): on enqueue, enqueueMany's entries and enqueueAndWait; given back
  // by every claim and by job, absent for a job without; traceContext on the client.
  const traced: boolean = await c.enqueue('h1', { queue: 'q', headers: { traceparent: '00-...' } });
  const tracedMany: boolean[] = await c.enqueueMany([{ id: 'h2', headers: { a: '1' } }, { id: 'h3' }]);
  const tracedWait: JobDetail | null = await c.enqueueAndWait('h4', { headers: { b: '2' }, wait: 1 });
  const headerOptions: EnqueueOptions = { headers: null };
  const claimedHeaders: Record<string, string> = (await c.claimNext('q', 'w', 30))?.headers ?? {};
  const recordHeaders: Record<string, string> | undefined = (await c.job('h1'))?.headers;
  await c.workNext('q', 'w', 30, ({ headers }) => headers?.traceparent ?? null);
  const untraced = new Client('ipc:///tmp/x.sock', { traceContext: false });
  const tracing: boolean = untraced.traceContext;
  void [traced, tracedMany, tracedWait, headerOptions, claimedHeaders, recordHeaders, tracing];
  // @ts-expect-error a claimed job's headers may be absent: a job without headers has none
  const mustHaveHeaders: Record<string, string> = (await c.claimNext('q', 'w', 30))!.headers;
  // @ts-expect-error header values are strings
  await c.enqueue('h5', { headers: { attempt: 1 } });
  // @ts-expect-error traceContext is a boolean
  void new Client({ traceContext: 'off' });
  void mustHaveHeaders;
  // @ts-expect-error a claimed job's after may be absent: a job without parents has none
  const mustHaveParents: string[] = (await c.claimNext('q', 'w', 30))!.after;
  // @ts-expect-error job's field is the wire's blocked_children, as its other fields
  void parentRecord?.blockedChildren;
  void mustHaveParents;
  // @ts-expect-error after is an array of ids, not one id
  await c.enqueue('w5', { after: 'w1' });
  // @ts-expect-error afterFailure is 'cancel' or 'run'
  await c.enqueue('w6', { after: ['w1'], afterFailure: 'skip' });
  // @ts-expect-error the wire spelling is not an option: afterFailure
  await c.enqueue('w7', { after: ['w1'], after_failure: 'run' });
  // @ts-expect-error enqueueAndWait takes no after: enqueue with it, then awaitJob
  await c.enqueueAndWait('w8', { after: ['w1'], wait: 1 });
  // @ts-expect-error enqueueFanIn needs the child
  await c.enqueueFanIn(['f8']);
  // @ts-expect-error enqueueFanIn's options are queue and now
  await c.enqueueFanIn(['f9'], 'f10', { wait: 1 });
  // @ts-expect-error with a keyed part, enqueueFanIn's answers are not all booleans
  const fanBools: boolean[] = await c.enqueueFanIn([{ id: 'f11', key: 'k' }], 'f12');
  // @ts-expect-error blocked, like groups_waiting, is there only when the daemon sends it
  const blockedNow: number = (await c.stats()).queues.q!.blocked;
  void [fanBools, blockedNow];
  // @ts-expect-error renewMany needs the ttl
  await c.renewMany(items);
  // @ts-expect-error a renew item has no result
  await c.renewMany([{ id: 'a', owner: 'w', fence: 1, result: 'r' }], 30);
  // @ts-expect-error completeMany without next answers booleans, not {completed, next}
  const notBoth: CompleteManyResult = await c.completeMany(results);
  // @ts-expect-error next needs max
  await c.completeMany(results, { next: { queue: 'q', ttl: 30 } });
  // @ts-expect-error completeMany with next answers {completed, next}
  const notFlags: boolean[] = await c.completeMany(results, { next: { queue: 'q', ttl: 30, max: 1 } });
  void [notOne, notMany, notBoth, notFlags];
  // A prefetching worker: rounds of up to 8 jobs.
  let pending: NextJob[] = [];
  for (let i = 0; i < 3 && !stop.signal.aborted; i++) {
    const round: WorkRound<string> | null = await c.workNext('emails', 'w', 30, ({ id, signal }) => {
      if (signal.aborted) return id;
      return `${id}!`;
    }, { prefetch: 8, jobs: pending, wait: 5, retryIn: 1, stopSignal: stop.signal,
      log: (message: string) => { void message; }, renewEveryMs: 500 });
    pending = round?.next ?? [];
    const first: RoundJobOutcome<string> | undefined = round?.outcomes[0];
    const status: RoundJobStatus | undefined = first?.status;
    const value: string | undefined = first?.result;
    const thrown: unknown = first?.error;
    void [status, value, thrown];
  }
  // @ts-expect-error a round is not a single outcome
  const notSingle: WorkNextTakeOutcome<string> | null = await c.workNext('q', 'w', 30, () => 'r', { prefetch: 2 });
  // @ts-expect-error prefetch takes the next jobs itself: no takeNext
  await c.workNext('q', 'w', 30, () => 'r', { prefetch: 2, takeNext: true });
  // @ts-expect-error jobs go with prefetch
  await c.workNext('q', 'w', 30, () => 'r', { jobs: [] });
  // @ts-expect-error with prefetch, held jobs come back as jobs, not job
  await c.workNext('q', 'w', 30, () => 'r', { prefetch: 2, job: null });
  void notSingle;
  // Queue settings, await and periodic jobs (issue 18).
  const settings: QueueSettings = { paused: false, maxLeased: 3, rate: 50, per: 1.5 };
  const configured: boolean = await c.queueConfig('emails', settings);
  const paused: boolean = await c.pause('emails');
  const resumed: boolean = await c.resume('emails');
  await c.queueConfig('emails', { maxLeased: 0 });
  const limits: QueueStats | undefined = (await c.stats()).queues.emails;
  const isPaused: boolean | undefined = limits?.paused;
  const maxLeased: number | undefined = limits?.max_leased;
  const per: number | undefined = limits?.per;
  const awaitOptions: AwaitOptions = { wait: 30 };
  const record: JobDetail | null = await c.awaitJob('a', awaitOptions);
  const finalState: JobStatus | undefined = record?.state;
  const recordResult: string | null | undefined = record?.result;
  await c.awaitJob('a', { now: 12 });
  await c.awaitJob('a');
  const waitOptions: EnqueueAndWaitOptions = { queue: 'emails', payload: 'x', maxAttempts: 2, wait: 10 };
  const awaited: JobDetail | null = await c.enqueueAndWait('f', waitOptions);
  await c.enqueueAndWait('g');
  const scheduleOptions: ScheduleOptions = {
    tz: 'Europe/Berlin', queue: 'reports', payload: new Uint8Array([1]), priority: 2, maxAttempts: 3,
  };
  const set: boolean = await c.scheduleSet('nightly', '0 3 * * *', scheduleOptions);
  await c.scheduleSet('hourly', '@hourly');
  const schedules: Schedule[] = await c.scheduleList();
  const nextTick: number | null | undefined = schedules[0]?.next;
  const lastTick: number | null | undefined = schedules[0]?.last;
  const deleted: boolean = await c.scheduleDelete('nightly');
  void [configured, paused, resumed, isPaused, maxLeased, per, finalState, recordResult, awaited, set,
    nextTick, lastTick, deleted];
  // @ts-expect-error options are camelCase: maxLeased
  await c.queueConfig('emails', { max_leased: 3 });
  // @ts-expect-error paused is a boolean
  await c.queueConfig('emails', { paused: 1 });
  // @ts-expect-error pause needs the queue
  await c.pause();
  // @ts-expect-error awaitJob's wait goes in the options
  await c.awaitJob('a', 30);
  // @ts-expect-error awaitJob answers a record or null, not a boolean
  const notRecord: boolean = await c.awaitJob('a');
  // @ts-expect-error scheduleSet needs the cron expression
  await c.scheduleSet('nightly');
  // @ts-expect-error maxAttempts, not max_attempts
  await c.scheduleSet('nightly', '0 3 * * *', { max_attempts: 3 });
  // @ts-expect-error a schedule's next tick is a number or null
  const nextText: string = schedules[0]!.next;
  void [notRecord, nextText];
  // Snooze (issue 33): the client call, and a job function that puts its job off.
  const snoozed: boolean = await c.snooze('a', 'w', 1, 60, { now: 5 });
  const putOff = new Snooze(60, 'rate limited');
  const putOffDelay: number = putOff.delay;
  const putOffReason: string | null = putOff.reason;
  const putOffIsError: Error = new fenceq.Snooze(0);
  const byId: WorkOutcome<string> | null = await c.work('a', 'w', 30, () => {
    throw new Snooze(30);
  });
  const wasSnoozed: boolean | undefined = byId?.snoozed;
  const queued = await c.workNext('q', 'w', 30, ({ attempts: n }) => {
    if (n > 0) throw new Snooze(5);
    return 'r';
  });
  const queuedSnoozed: boolean | undefined = queued?.snoozed;
  const snoozedRound = await c.workNext('q', 'w', 30, () => 'r', { prefetch: 4 });
  const roundStatus: RoundJobStatus | undefined = snoozedRound?.outcomes[0]?.status;
  const isSnoozedStatus: boolean = roundStatus === 'snoozed';
  void [snoozed, putOffDelay, putOffReason, putOffIsError, wasSnoozed, queuedSnoozed, isSnoozedStatus];
  // @ts-expect-error snooze needs its delay
  await c.snooze('a', 'w', 1);
  // @ts-expect-error the delay is a number of seconds
  await c.snooze('a', 'w', 1, '60');
  // @ts-expect-error snooze takes only now as an option
  await c.snooze('a', 'w', 1, 60, { retryIn: 5 });
  // @ts-expect-error snooze answers a boolean
  const snoozeNotFence: number = await c.snooze('a', 'w', 1, 60);
  // @ts-expect-error a Snooze needs its delay
  new Snooze();
  // @ts-expect-error a Snooze's delay is a number of seconds
  new Snooze('60');
  // @ts-expect-error not a round status
  const notStatus: RoundJobStatus = 'postponed';
  void [snoozeNotFence, notStatus];
  // Steps (C3.22): the client call, the steps claims and records carry, and job.step.
  const stepSaved: boolean = await c.stepSave('a', 'w', 1, 'charge', 'ch_1', { now: 5 });
  const binSaved: boolean = await c.stepSave('a', 'w', 1, 'blob', new Uint8Array([1]));
  const nilSaved: boolean = await c.stepSave('a', 'w', 1, 'email', null);
  const claimedSteps: Record<string, Payload> = (await c.claimNext('q', 'w', 30))?.steps ?? {};
  const recordSteps: Record<string, Payload> | undefined = (await c.job('a'))?.steps;
  const stepped = await c.workNext('q', 'w', 30, async (job) => {
    const charge: string = await job.step('charge', async () => 'ch_1');
    const blob: Payload = await job.step('blob', () => new Uint8Array([1, 2]));
    const sent: null = await job.step('email', async () => { /* nothing to keep */ });
    const saved: Record<string, Payload> = job.steps ?? {};
    void [blob, sent, saved];
    return charge;
  });
  const byIdStep = await c.work('a', 'w', 30, async ({ step }) => step('s', () => 'x'));
  void [stepSaved, binSaved, nilSaved, claimedSteps, recordSteps, stepped, byIdStep];
  // @ts-expect-error stepSave needs its value (null for none)
  await c.stepSave('a', 'w', 1, 'charge');
  // @ts-expect-error a step's value is a payload, not a number
  await c.stepSave('a', 'w', 1, 'charge', 7);
  // @ts-expect-error stepSave takes only now as an option
  await c.stepSave('a', 'w', 1, 'charge', 'x', { retryIn: 1 });
  await c.workNext('q', 'w', 30, async (job) => {
    // @ts-expect-error a step's function returns a payload, not an object
    await job.step('bad', () => ({ a: 1 }));
    // @ts-expect-error a step that returns a string resolves a string
    const notNumber: number = await job.step('n', () => 'x');
    void notNumber;
    return null;
  });
  // @ts-expect-error a claimed job's steps may be absent: a job without steps has none
  const mustHaveSteps: Record<string, Payload> = (await c.claimNext('q', 'w', 30))!.steps;
  void mustHaveSteps;
  // Suspend and signal (C3.23), deadlines (C3.24): the client calls, what
  // claims and records carry, job.suspend and the signal on a worker's job.
  const token: string | null = await c.suspend('a', 'w', 1, 3600, { now: 5 });
  const failing: string | null = await c.suspend('a', 'w', 1, 60, { onTimeout: 'fail', now: 5 });
  const suspendOptions: SuspendOptions = { onTimeout: 'retry' };
  const signalled: boolean = await c.signal(token ?? 'x', { value: 'paid' });
  const binSignal: boolean = await c.signal('t', { value: new Uint8Array([1]), now: 5 });
  const bare: boolean = await c.signal('t');
  const signalOptions: SignalOptions = { value: null };
  const claimedSignal: Payload | undefined = (await c.claimNext('q', 'w', 30))?.signal;
  const suspendRecord = await c.job('a');
  const recordSignal: Payload | undefined = suspendRecord?.signal;
  const wait: Suspension | undefined = suspendRecord?.suspended;
  const waitEnds: number | undefined = wait?.timeout;
  const onTimeout: OnTimeout | undefined = wait?.on_timeout;
  const suspendedState: JobStatus = 'suspended';
  const suspendedRows = await c.list({ state: 'suspended' });
  const suspendedCount: number | undefined = (await c.stats()).queues.q?.suspended;
  const passed: number | undefined = (await c.stats()).queues.q?.totals?.deadline_passed;
  const withDeadline: boolean = await c.enqueue('d', { queue: 'q', deadline: 1_900_000_000 });
  const manyDeadlines: boolean[] = await c.enqueueMany([{ id: 'd2', deadline: 1_900_000_000 }]);
  const awaitedDeadline = await c.enqueueAndWait('d3', { deadline: 1_900_000_000, wait: 1 });
  const eventKinds: JobEventName[] = ['suspended', 'signalled', 'expired'];
  const cancelSuspended: CancelManyOptions = { state: 'suspended' };
  void cancelSuspended;
  void [token, failing, suspendOptions, signalled, binSignal, bare, signalOptions, claimedSignal, recordSignal,
    waitEnds, onTimeout, suspendedState, suspendedRows, suspendedCount, passed, withDeadline, manyDeadlines,
    awaitedDeadline, eventKinds];
  const suspending = await c.workNext('q', 'w', 30, async (job) => {
    const wasSignalled: boolean = job.signalled;
    const value: Payload = job.signalValue;
    if (!wasSignalled) {
      const options: JobSuspendOptions = { onTimeout: 'fail' };
      const t: string = await job.suspend(3600, options);
      void t;
      return null;
    }
    return typeof value === 'string' ? value : null;
  });
  if (suspending !== null) {
    const wasSuspended: true | undefined = suspending.suspended;
    const itsToken: string | undefined = suspending.token;
    void [wasSuspended, itsToken];
  }
  const byIdSuspend = await c.work('a', 'w', 30, async (job) => { await job.suspend(60); });
  const suspendedRound = await c.workNext('q', 'w', 30, async (job) => { await job.suspend(60); }, { prefetch: 2 });
  const roundSuspended: RoundJobStatus = 'suspended';
  const roundToken: string | undefined = suspendedRound?.outcomes[0]?.token;
  void [byIdSuspend, roundSuspended, roundToken];
  // @ts-expect-error suspend needs its timeout
  await c.suspend('a', 'w', 1);
  // @ts-expect-error on_timeout is retry or fail
  await c.suspend('a', 'w', 1, 60, { onTimeout: 'later' });
  // @ts-expect-error the option is onTimeout, not on_timeout
  await c.suspend('a', 'w', 1, 60, { on_timeout: 'fail' });
  // @ts-expect-error a signal's value is a payload, not an object
  await c.signal('t', { value: { a: 1 } });
  // @ts-expect-error the value goes in the options
  await c.signal('t', 'paid');
  // @ts-expect-error a deadline is a number of Unix seconds
  await c.enqueue('d', { deadline: '2030-01-01' });
  await c.workNext('q', 'w', 30, async (job) => {
    // @ts-expect-error job.suspend's now is the worker's clock
    await job.suspend(60, { now: 5 });
    // @ts-expect-error job.signal is the lease's AbortSignal, not the signal's value
    const notValue: Payload = job.signal;
    void notValue;
    return null;
  });
  // @ts-expect-error work's job (claimed by id) has no signalled
  await c.work('a', 'w', 30, async (job) => { const s: boolean = job.signalled; void s; });
  // max_runtime (issue 33): a cap on each attempt, an option of every enqueue-like method.
  const capped: boolean = await c.enqueue('cap-1', { queue: 'q', maxRuntime: 600 });
  const cappedOptions: EnqueueOptions = { maxRuntime: 0.5, maxAttempts: 3 };
  const cappedKeyed: Enqueued = await c.enqueue('cap-2', { key: 'k', maxRuntime: 60 });
  const cappedJobs: EnqueueManyJob[] = [{ id: 'cap-3', maxRuntime: 30 }];
  const cappedUnique: UniqueEnqueueManyJob = { id: 'cap-4', key: 'k', maxRuntime: 30 };
  const cappedMany: Array<boolean | Enqueued> = await c.enqueueMany([...cappedJobs, cappedUnique]);
  const cappedFanIn: boolean[] = await c.enqueueFanIn([{ id: 'cap-5', maxRuntime: 10 }], { id: 'cap-6', maxRuntime: 20 });
  const cappedWait: EnqueueAndWaitOptions = { maxRuntime: 120, wait: 5 };
  const cappedRecord: JobDetail | null = await c.enqueueAndWait('cap-7', cappedWait);
  void [capped, cappedOptions, cappedKeyed, cappedMany, cappedFanIn, cappedRecord];
  // @ts-expect-error maxRuntime is a number of seconds
  await c.enqueue('cap-x', { maxRuntime: '600' });
  // @ts-expect-error options are camelCase: maxRuntime, not max_runtime
  await c.enqueue('cap-x', { max_runtime: 600 });
  // @ts-expect-error an entry's options are camelCase too
  await c.enqueueMany([{ id: 'cap-x', max_runtime: 600 }]);
  // @ts-expect-error enqueueAndWait's maxRuntime is a number too
  await c.enqueueAndWait('cap-x', { maxRuntime: null });
  // Bulk actions by filter and retention (issue 33).
  const page: BulkResult = await c.retryMany('q', { state: 'dead', limit: 100 });
  const pageCount: number = page.count;
  const pageMore: boolean = page.more;
  const cancelled: BulkResult = await c.cancelMany('q', { prefix: 'imp-', group: 'g', now: 9 });
  const purgedPage: BulkResult = await c.purgeMany({ queue: 'q', state: 'done', olderThan: 60 });
  const everyQueue: BulkResult = await c.purgeMany();
  const retriedAll: number = await c.retryAll('q', { state: 'cancelled', limit: 10, maxPages: 5 });
  const cancelledAll: number = await c.cancelAll('q', { state: 'blocked' });
  const purgedAll: number = await c.purgeAll({ state: 'dead', maxPages: 2 });
  const bulkOptions: RetryManyOptions = { prefix: 'x-' };
  const purgeOptions: PurgeManyOptions = { olderThan: 1 };
  const cancelOptions: CancelManyOptions = { state: 'leased' };
  const keep: QueueSettings = { keepDone: 86400, keepDead: null, keepCancelled: 0 };
  await c.queueConfig('q', keep);
  const kept: QueueStats | undefined = (await c.stats()).queues.q;
  const keepDone: number | undefined = kept?.keep_done;
  const removed: number | undefined = kept?.totals?.removed;
  void [pageCount, pageMore, cancelled, purgedPage, everyQueue, retriedAll, cancelledAll, purgedAll,
    bulkOptions, purgeOptions, cancelOptions, keepDone, removed];
  // @ts-expect-error retryMany cannot retry done jobs
  await c.retryMany('q', { state: 'done' });
  // @ts-expect-error cancelMany cannot cancel cancelled jobs
  await c.cancelMany('q', { state: 'cancelled' });
  // @ts-expect-error purgeMany removes finished jobs only
  await c.purgeMany({ state: 'ready' });
  // @ts-expect-error retryMany needs the queue
  await c.retryMany({ state: 'dead' });
  // @ts-expect-error options are camelCase: olderThan, not older_than
  await c.purgeMany({ older_than: 5 });
  // @ts-expect-error maxPages is the *All helpers' only
  await c.retryMany('q', { maxPages: 2 });
  // @ts-expect-error options are camelCase: keepDone, not keep_done
  await c.queueConfig('q', { keep_done: 5 });
  // @ts-expect-error a retention is seconds or null
  await c.queueConfig('q', { keepDone: '1d' });
  // CURVE over tcp://.
  const keys: CurveKeys = curveKeys('/etc/fenceq/client.key', 'public-key = "..."');
  const viaNamespace: CurveKeys = fenceq.curveKeys('/etc/fenceq/client.key', keys.serverPublic);
  const secure = new Client('tcp://10.0.0.5:7411', { timeoutMs: 2000, curve: keys });
  const literal: ClientOptions = {
    curve: { serverPublic: keys.serverPublic, publicKey: keys.publicKey, secretKey: keys.secretKey },
  };
  const noCurve = new Client('ipc:///tmp/x.sock', { curve: null });
  const z85: string = keys.secretKey;
  void [viaNamespace, literal, noCurve, z85];
  await secure.close();
  // @ts-expect-error curveKeys needs the daemon's public key too
  curveKeys('/etc/fenceq/client.key');
  // @ts-expect-error the curve option needs all three keys
  new Client('tcp://h:1', { curve: { serverPublic: 'x', publicKey: 'y' } });
  // @ts-expect-error serverPublic, not serverKey
  new Client('tcp://h:1', { curve: { serverKey: 'x', publicKey: 'y', secretKey: 'z' } });
  // @ts-expect-error keys are Z85 strings, not bytes
  new Client('tcp://h:1', { curve: { serverPublic: new Uint8Array(32), publicKey: 'y', secretKey: 'z' } });
  // @ts-expect-error a claim answers number | null, not a boolean
  const wrong: boolean = await c.claim('a', 'w', 30);
  void [c2, clock, fresh, owner, wrong];
  await c.close();
}
void main;
