// Type declarations for the fenceq Node.js client (protocol v1).
// Semantics of every operation: the project's contract (docs/contract.md), clauses C1-C4.

/**
 * Stable error codes.
 * From the daemon: bad_request, unknown_op, invalid_argument,
 * unsupported_version, unavailable, internal, outcome_unknown.
 * From the client, the same in every fenceq client (protocol/PROTOCOL.md,
 * "Client errors"): timeout (no reply in time; the request may have been
 * applied), unreachable (no daemon's socket file; nothing sent), transport
 * (socket failure), bad_reply (not a protocol v1 reply), misuse (a call on a
 * closed client; nothing sent), closed (client closed before the reply),
 * lease_lost (the abort reason of a worker's signal, and what `Job.step` and
 * `Job.suspend` reject with when the daemon refuses their save or suspend, or
 * once the job was suspended).
 */
export type FenceqErrorCode =
  | 'bad_request'
  | 'unknown_op'
  | 'invalid_argument'
  | 'unsupported_version'
  | 'unavailable'
  | 'internal'
  | 'outcome_unknown'
  | 'timeout'
  | 'unreachable'
  | 'misuse'
  | 'closed'
  | 'transport'
  | 'bad_reply'
  | 'lease_lost';

/** Every failure is a FenceqError. A refusal is a value (null / false), never one. */
export class FenceqError extends Error {
  constructor(code: FenceqErrorCode | string, message: string);
  readonly name: 'FenceqError';
  /** Stable, machine-readable; daemon codes may grow in later protocol versions. */
  code: FenceqErrorCode | string;
}

/**
 * Thrown by a job function of `work` / `workNext` that cannot work on its job
 * yet (someone else's rate limit, a resource that is not there): the helper
 * snoozes the job (C3.14) instead of failing or releasing it: its attempt is
 * given back, no error is recorded, and it can be claimed again `delay`
 * seconds from now. Not a FenceqError: nothing failed.
 */
export class Snooze extends Error {
  /**
   * @param delay seconds, 0..1e9
   * @param reason only for the message
   * @throws FenceqError invalid_argument for a delay that is not a number in
   *   0..1e9, or a reason that is not a string
   */
  constructor(delay: number, reason?: string | null);
  readonly name: 'Snooze';
  readonly delay: number;
  readonly reason: string | null;
}

/** The result of `ping()`. */
export interface PingResult {
  protocol: number;
  version: string;
  clock: 'server' | 'client';
  /** With `ping({describe: true})`: each op's name, mapped to the fields the daemon takes. */
  ops?: Record<string, string[]>;
}

/** A job's committed row (C3.2). */
export interface JobState {
  id: string;
  owner: string | null;
  /** Lease end, seconds (C2.1); 0 when not leased. */
  until: number;
  /** Generation of the latest lease; never goes back (C1.2). */
  fence: number;
  result: string | null;
  done: boolean;
  /** What the lease's last renew reported (issue 18); absent until one did. */
  progress?: string;
}

/** `now` (seconds) is required with `--clock client` and refused with `--clock server`. */
export interface TimeOptions {
  now?: number;
}

/**
 * Node's Buffer when the Node type declarations (@types/node) are loaded, else
 * Uint8Array (which Buffer extends): this package needs no @types/node.
 */
export type NodeBuffer = typeof globalThis extends { Buffer: { prototype: infer B } } ? B : Uint8Array;

/** A job's payload as `claimNext` gives it back: bin as a Buffer, str as a string. */
export type Payload = NodeBuffer | string | null;

/**
 * What a job's step saves (`stepSave`, `Job.step`; C3.22): a payload. A
 * Buffer/Uint8Array travels as msgpack bin and comes back as a Buffer, a
 * string as str; null too. A step function's undefined (or no return) is
 * saved as null.
 */
export type StepValue = Uint8Array | string | null;

/** What `Job.step` resolves to for a step function that returns T: as a later attempt gets it back. */
export type StepResult<T> = T extends Uint8Array ? NodeBuffer : T extends string | null ? T : null;

export interface EnqueueOptions {
  /** The queue, 1..256 bytes; default 'default'. */
  queue?: string;
  /**
   * At most 256 KiB. A Buffer/Uint8Array travels as msgpack bin and comes back
   * as a Buffer; a string travels as str and comes back as a string.
   */
  payload?: Uint8Array | string | null;
  /** A 32-bit integer; higher is claimed first, equal ones in enqueue order. Default 0. */
  priority?: number;
  /** Seconds (>= 0) before the job can be claimed, by claim too. Default 0. */
  delay?: number;
  /** Claims allowed (an integer >= 0) before the job is dead; 0 (default): no limit. */
  maxAttempts?: number;
  /**
   * The job's group within its queue (issue 31), 1..256 bytes, such as a
   * customer: claimNext serves the groups of a priority in turn (the least
   * recently served first; jobs without a group are one group of their own),
   * and the queue's group settings (QueueSettings.groupMaxLeased, groupRate)
   * limit each group. The answer's shape does not change.
   */
  group?: string;
  /**
   * The jobs this one waits for (issue 32): 1..1000 distinct ids, each an
   * existing job (or, in enqueueMany, an earlier entry) other than this
   * one. The job is created 'blocked' (listed and counted, never claimed)
   * until every parent is done; then it is ready, or delayed when it has a
   * `delay` (counted from then). Its code reads the parents' results with
   * `results`. An unknown parent rejects with invalid_argument and nothing
   * is created. The answer's shape does not change.
   */
  after?: readonly string[];
  /**
   * Only with `after`: when a parent becomes dead or is cancelled, 'cancel'
   * (default) cancels the blocked job (error 'parent ID dead' / 'parent ID
   * cancelled'), and its blocked descendants; 'run': that parent no longer
   * holds it back.
   */
  afterFailure?: AfterFailure;
  /**
   * A hard cap on each attempt (issue 33, C3.15), in seconds from its claim
   * (0 < x <= 1e9; absent: no cap, not sent). No claim and no renew sets the
   * lease end past claim time + maxRuntime (the renew still resolves true);
   * from then on the holder's renew, complete, fail, release and check are
   * refused, and the daemon writes the attempt down as a failure
   * ('max_runtime exceeded', the fence raised by one): retried after the
   * backoff, or dead when its attempts are used up. Out of range rejects
   * with invalid_argument, not a number with bad_request.
   */
  maxRuntime?: number;
  /**
   * Headers kept with the job (issue 33, C3.18), string to string, such as a
   * W3C `traceparent`: keys not empty, at most 4,096 bytes of keys and values
   * in all ({} is none). Every claim of the job hands them back
   * (`NextJob.headers`, `QueueJob.headers`), and so does `job`. When the
   * application has @opentelemetry/api with a propagator registered, the
   * active context's trace context is added (unless they have a
   * `traceparent`, or ClientOptions.traceContext is false). A value that is
   * not a string rejects with bad_request; an empty key or more than 4,096
   * bytes with invalid_argument.
   */
  headers?: Readonly<Record<string, string>> | null;
  /**
   * Unix seconds (0 < x <= 1e11; absent: none, not sent) by which the job is
   * claimed or never (issue 60, C3.24): from then on no claim takes it,
   * whatever held it back (a delay, its parents, a paused queue, a
   * suspension); it reads as 'dead' and is written down dead with the error
   * 'deadline passed' at the daemon's next reap, counted in its queue's
   * `totals.deadline_passed`. A job leased at its deadline keeps its lease.
   * Out of range rejects with invalid_argument, not a number with bad_request.
   */
  deadline?: number;
  /** Client clock only, optional: default the latest `now` the daemon saw. */
  now?: number;
  /** With a key, `enqueue` resolves `{id, created}`: see UniqueEnqueueOptions. */
  key?: undefined;
  /** Only with `key` (UniqueEnqueueOptions). */
  uniqueFor?: undefined;
  /** Only with `key` (UniqueEnqueueOptions). */
  onConflict?: undefined;
}

/** What a keyed job's enqueue does when a job of its queue and key holds the key. */
export type OnConflict = 'skip' | 'replace';

/** What a blocked job does when one of its `after` parents becomes dead or is cancelled. */
export type AfterFailure = 'cancel' | 'run';

/**
 * `enqueue` with a unique key (issue 31): it resolves `{id, created}` (Enqueued).
 * While a job of the same queue and key is unfinished (ready, delayed or
 * leased), or with `uniqueFor` was enqueued within the last `uniqueFor`
 * seconds (finished or not), no job is created.
 */
export interface UniqueEnqueueOptions extends Omit<EnqueueOptions, 'key' | 'uniqueFor' | 'onConflict'> {
  /** The job's unique key within its queue, 1..1024 bytes. */
  key: string;
  /**
   * Seconds (0 < x <= 1e9): a job of this queue and key enqueued within the
   * last `uniqueFor` seconds holds the key too, even finished.
   */
  uniqueFor?: number;
  /**
   * 'skip' (default): leave the holder as it is. 'replace' (debounce): a
   * holder that is ready or delayed takes this request's payload, priority,
   * maxAttempts and delay (counted from now), keeping its id, fence and
   * attempts; a leased or finished holder is never changed.
   */
  onConflict?: OnConflict;
}

/** `enqueue` options whose key may or may not be there: it resolves either shape. */
export interface MaybeUniqueEnqueueOptions extends Omit<UniqueEnqueueOptions, 'key'> {
  key?: string;
}

/** What `enqueue` with a key resolves to (and `enqueueMany` for each keyed job). */
export interface Enqueued {
  /**
   * The new job's id (created); else the id of the job that holds the key,
   * or the request's own id when that id existed already.
   */
  id: string;
  /** true: a job was created with the request's id. */
  created: boolean;
}

export interface ClaimNextOptions {
  /**
   * Seconds (0..3600) the daemon may hold the request until a job of the queue
   * becomes claimable; the call's timeout is extended by as much. Default 0.
   */
  wait?: number;
  now?: number;
  /** Given: claimNext answers an array (see ClaimNextManyOptions). */
  max?: undefined;
}

/** claimNext with `max`: up to `max` jobs at once, always an array. */
export interface ClaimNextManyOptions {
  /**
   * At most this many jobs (an integer, 1..1000), most urgent first, each
   * claimed as a single claimNext would (its own fence, lease and attempt).
   * `max: 1` still answers an array.
   */
  max: number;
  /**
   * Seconds (0..3600) the daemon may hold the request until at least one job
   * is claimable; the call's timeout is extended by as much. Default 0.
   */
  wait?: number;
  now?: number;
}

/** One job of `enqueueMany`: its id and enqueue's options (`now` is the request's). */
export interface EnqueueManyJob extends Omit<EnqueueOptions, 'now'> {
  id: string;
}

/** One job of `enqueueMany` with a unique key: its answer is `{id, created}` (Enqueued). */
export interface UniqueEnqueueManyJob extends Omit<MaybeUniqueEnqueueOptions, 'now'> {
  id: string;
}

/** `enqueueFanIn`'s options. */
export interface EnqueueFanInOptions {
  /** The queue of every job (the parts and the child) that names none; default the daemon's. */
  queue?: string;
  /** Client clock only, optional: the request's `now`. */
  now?: number;
}

/** A lease, as `renewMany` (and `completeMany`) name one. */
export interface LeaseItem {
  id: string;
  owner: string;
  fence: number;
  /** renewMany: kept with the lease when renewed (a string, at most 4 KiB). */
  progress?: string;
}

/** One item of `completeMany`. */
export interface CompleteItem extends LeaseItem {
  /** The result to store; absent: null. */
  result?: string | null;
}

/** `completeMany`'s `next`: what to claim after the completes, in the same round trip. */
export interface CompleteManyNext {
  queue: string;
  /** The next jobs' lease, seconds (> 0). */
  ttl: number;
  /** At most this many jobs (an integer, 1..1000). */
  max: number;
}

export interface CompleteManyOptions {
  /** Absent or null: completeMany answers only the booleans. */
  next?: null;
  now?: number;
}

export interface CompleteManyNextOptions {
  /** Then claim up to `max` jobs of `queue` (no wait) for the owner of the last item. */
  next: CompleteManyNext;
  now?: number;
}

/** What `completeMany` with `next` resolves to. */
export interface CompleteManyResult {
  /** One per item, in order: what `complete` would answer. */
  completed: boolean[];
  /** The jobs claimed afterwards (leased to the last item's owner: run or release them); [] when none. */
  next: NextJob[];
}

/** The job `claimNext` claimed for you. */
export interface NextJob {
  id: string;
  /** The fence of your new lease: pass it to renew/complete/fail/check. */
  fence: number;
  payload: Payload;
  /** Claims of this job so far, this one included. */
  attempts: number;
  /**
   * The ids of the jobs it waited for (enqueued with `after`, issue 32), in
   * id order: read their results with `results`. Absent for a job without
   * parents (`job.after ?? []` reads every job alike).
   */
  after?: string[];
  /**
   * The headers it was enqueued with (issue 33), such as the W3C
   * `traceparent` of the code that enqueued it. Absent for a job without
   * headers (`job.headers ?? {}` reads every job alike).
   */
  headers?: Record<string, string>;
  /**
   * Its saved steps (C3.22, `stepSave`): each step's name to its value, a
   * bin as a Buffer. Absent for a job that saved none (`job.steps ?? {}`
   * reads every job alike).
   */
  steps?: Record<string, Payload>;
  /**
   * The value of the signal that woke the job since it last suspended
   * (C3.23, `signal`): a bin as a Buffer, a string, or null (a signal of
   * nil: `'signal' in job` tells it from none). Absent for a job never
   * signalled, or woken by its wait's timeout.
   */
  signal?: Payload;
}

/** What `completeAndClaimNext` resolves to. */
export interface CompleteAndClaimNextResult {
  /** What `complete` would answer: false when the lease was not current (nothing stored). */
  completed: boolean;
  /**
   * The job `claimNext` would have claimed, whatever `completed` is (leased to
   * you: run it or release it); null when the queue had none (no wait).
   */
  next: NextJob | null;
}

export interface FailOptions {
  /**
   * Seconds (>= 0) before the job can be claimed again; default
   * min(2^(attempts-1), 3600).
   */
  retryIn?: number;
  now?: number;
}

/**
 * A job's state as `list` and `stats` report it. 'blocked': enqueued with
 * `after`, waiting for its parents (issue 32). 'suspended': waiting for its
 * signal or its wait's timeout (C3.23).
 */
export type JobStatus = 'ready' | 'delayed' | 'leased' | 'done' | 'dead' | 'cancelled' | 'blocked' | 'suspended';

/** What a suspended job becomes when its wait times out with no signal (C3.23): ready again, or dead. */
export type OnTimeout = 'retry' | 'fail';

/** `suspend`'s options. */
export interface SuspendOptions {
  /** 'retry' (the default, not sent): ready again with the error 'suspend timed out'; 'fail': dead with it. */
  onTimeout?: OnTimeout;
  /** Client clock: required. */
  now?: number;
}

/** `signal`'s options. */
export interface SignalOptions {
  /**
   * What the job's next claims carry as `signal` (at most 256 KiB): a
   * Buffer/Uint8Array travels as bin and comes back as a Buffer, a string as
   * str; null, or left out, is a signal of nil.
   */
  value?: Uint8Array | string | null;
  /** Client clock only, optional. */
  now?: number;
}

/** A suspended job's wait, as `job` shows it (C3.23). */
export interface Suspension {
  /** When the wait ends, Unix seconds. */
  timeout: number;
  on_timeout: OnTimeout;
}

export interface ListOptions {
  queue?: string;
  state?: JobStatus;
  /** 1..1000, default 100. */
  limit?: number;
  /** Paging: the last row's id of the previous page (ids after it, by id). */
  after?: string;
  /** 'id' (default), 'created' (oldest first) or '-created' (newest first); ties by id. */
  order?: 'id' | 'created' | '-created';
  /** Paging in created order: the last row's `created`, with `after`. */
  afterCreated?: number;
  /** Only ids that start with this. */
  prefix?: string;
  /** Only the jobs of this unique key (exact). */
  key?: string;
  /** Only the jobs of this group (exact, issue 31). */
  group?: string;
  /** Client clock only, optional. */
  now?: number;
}

/** One row of `list`; field names as on the wire. */
/** What `job` answers: a job's list row with its result and payload. */
export interface JobDetail extends JobInfo {
  result: string | null;
  payload: string | Uint8Array | null;
  /** Its parents' ids in id order (issue 32); absent for a job enqueued without `after`. */
  after?: string[];
  /**
   * The ids of its children (jobs with it in their `after`) still blocked, by
   * it or by another parent: the first 1000 in id order (issue 32); absent
   * when none is.
   */
  blocked_children?: string[];
  /** The headers it was enqueued with (issue 33); absent for a job without headers. */
  headers?: Record<string, string>;
  /** Its saved steps (C3.22), as `NextJob.steps`; absent for a job that saved none. */
  steps?: Record<string, Payload>;
  /** The signal that woke it since it last suspended (C3.23), as `NextJob.signal`; absent when none did. */
  signal?: Payload;
  /** Its wait (C3.23), only while it is suspended. */
  suspended?: Suspension;
}

export interface JobInfo {
  id: string;
  queue: string;
  state: JobStatus;
  priority: number;
  attempts: number;
  max_attempts: number;
  fence: number;
  owner: string | null;
  until: number;
  /** When the job becomes claimable (delay, or a fail's backoff); 0: no delay. */
  not_before: number;
  /** The text of the latest fail, or why the job died. */
  error: string | null;
  /** As JobState's: absent until a renew of the lease reported one. */
  progress?: string;
  /** When the job was enqueued (Unix seconds; 0 for a job of a database older than the column). */
  created: number;
  /** The job's unique key (issue 31); absent for a job enqueued without one. */
  key?: string;
  /** The job's group (issue 31); absent for a job enqueued without one. */
  group?: string;
}

/** One job's entry in `results` (issue 32): its state and the result `complete` stored. */
export interface JobOutcome {
  state: JobStatus;
  /** What `complete` stored; null until then (and for a job completed with null). */
  result: string | null;
  /** The job has a result this reply left out (issue 56: past its 1 MiB, or `statesOnly`). */
  omitted?: true;
}

export interface QueueStats {
  ready: number;
  delayed: number;
  leased: number;
  done: number;
  dead: number;
  /** Cancelled jobs (issue 18); absent from older daemons. */
  cancelled?: number;
  /** Seconds the oldest claimable job has waited; 0 when none is ready. */
  oldest_ready_age: number;
  /**
   * What happened to the queue's jobs since the daemon started (on PostgreSQL:
   * through this sidecar). A queue with counters and no job left is listed
   * with zero counts by state. Absent from daemons older than this client.
   */
  totals?: QueueTotals;
  /**
   * The queue's settings (`queueConfig`, issue 18): present only for a queue
   * that has some (or whose groups have settings of their own, `groupConfig`).
   */
  paused?: boolean;
  /** At most this many jobs leased at once; 0: no limit. Only with settings. */
  max_leased?: number;
  /** At most `rate` claims in any `per` seconds; 0: no limit. Only with settings. */
  rate?: number;
  /** Seconds of the rate's window. Only with settings. */
  per?: number;
  /**
   * At most this many jobs of any one group leased at once; 0: no limit.
   * Present (with group_rate and group_per) only for a queue with group
   * settings: group_max_leased or group_rate > 0 (issue 31), or a group with
   * settings of its own (`groupConfig`, C3.25).
   */
  group_max_leased?: number;
  /** At most `group_rate` claims of any one group in any `group_per` seconds; 0: no limit. */
  group_rate?: number;
  /** Seconds of the group rate's window. */
  group_per?: number;
  /**
   * How many groups of the queue have a ready job (issue 31); present only
   * when above 0, so other queues keep their shape.
   */
  groups_waiting?: number;
  /**
   * Jobs waiting for their `after` parents (issue 32); present only when
   * above 0, so other queues keep their shape.
   */
  blocked?: number;
  /** Jobs suspended, waiting for their signal (C3.23); present only when above 0. */
  suspended?: number;
  /**
   * The queue's retention (`queueConfig`'s keepDone, issue 33): seconds for
   * which its done jobs are kept once finished; present only when set.
   */
  keep_done?: number;
  /** Seconds for which its dead jobs are kept; present only when set. */
  keep_dead?: number;
  /** Seconds for which its cancelled jobs are kept; present only when set. */
  keep_cancelled?: number;
  /**
   * How many of the queue's groups have settings of their own (`groupConfig`,
   * C3.25); present only when above 0, so other queues keep their shape.
   */
  group_overrides?: number;
  /**
   * The groups' own settings (`groupConfig`, C3.25), group -> the overrides
   * it has: the first 100 by group name (`group_overrides` counts them all);
   * present only when the queue has some.
   */
  group_config?: Record<string, GroupOverride>;
}

/** One group's own settings as `stats` shows them (`QueueStats.group_config`): each only when set. */
export interface GroupOverride {
  /** This group's group_max_leased; 0: no cap for this group. */
  max_leased?: number;
  /** This group's group_rate; 0: no rate for this group. */
  rate?: number;
  /** This group's group_per (seconds). */
  per?: number;
}

/** A queue's counters since the daemon started (`stats().queues[name].totals`). */
export interface QueueTotals {
  /** Jobs claimed: claim, claimNext, the next jobs of completeNext and completeMany. */
  claimed: number;
  /** Completes applied. */
  completed: number;
  /** Fails applied. */
  failed: number;
  /** Jobs made claimable again: a fail with attempts left, or retry of a dead job. */
  retried: number;
  /** Jobs that became dead: a fail on the last attempt, or the last attempt's lease ran out. */
  dead: number;
  /** Leases that ran out unfinished: taken over by a claim, or the job died of it. */
  expired: number;
  /**
   * Finished jobs the queue's retention removed (issue 33); 0 also from a
   * daemon before retention (the client fills it in).
   */
  removed: number;
  /** Jobs whose deadline passed before a claim took them (C3.24): dead; present only when above 0. */
  deadline_passed?: number;
  /**
   * Fenced writes refused because the lease was not the job's current one, by
   * op (batch items one each); a write on a missing id counts only in `writes`.
   */
  refused: Record<'renew' | 'complete' | 'release' | 'fail', number>;
}

/** The result of `stats()`; field names as on the wire. */
export interface Stats {
  queues: Record<string, QueueStats>;
  requests: number;
  commits: number;
  batches: number;
  failed_commits: number;
  mean_batch: number;
  /** claimNext requests parked by the daemon right now. */
  waiting_claims: number;
  /** Seconds since the daemon started. */
  uptime: number;
  /**
   * The fenced writes since the daemon started, by op (batch items one each):
   * applied, or refused because the lease was not the job's current one.
   * Absent from daemons older than this client.
   */
  writes?: Record<'renew' | 'complete' | 'release' | 'fail', WriteCounts>;
}

export interface WriteCounts {
  applied: number;
  /** Stale, expired, released or never-held leases. */
  refused: number;
}

/**
 * `queueConfig`'s changes (issue 18): a setting left out keeps its stored
 * value. Settings that hold nothing back (not paused, no limit; `per` alone) go.
 */
export interface QueueSettings {
  /** true: no job of the queue is handed out, by claimNext or claim, until false. */
  paused?: boolean;
  /** At most this many jobs of the queue leased at once (an integer, 0..1e9); 0: no limit. */
  maxLeased?: number;
  /** At most this many claims (an integer, 0..100000) in any `per` seconds; 0: no limit. */
  rate?: number;
  /** The rate's window in seconds (0 < per <= 86400); the daemon's default 1. */
  per?: number;
  /**
   * At most this many jobs of any one group of the queue leased at once (an
   * integer, 0..1e9; issue 31); 0: no limit. Jobs without a group are not limited.
   */
  groupMaxLeased?: number;
  /** At most this many claims of any one group (an integer, 0..100000) in any `groupPer` seconds; 0: no limit. */
  groupRate?: number;
  /** The group rate's window in seconds (0 < groupPer <= 86400); the daemon's default 1. */
  groupPer?: number;
  /**
   * Retention (issue 33): the queue's done jobs are removed by the daemon
   * this many seconds (0..1e10) after they finished, as purge would (fences
   * kept), and counted in `totals.removed`. null (or Infinity) removes the
   * retention (kept until purged, the default); undefined keeps the stored one.
   */
  keepDone?: number | null;
  /** Retention of the queue's dead jobs, as keepDone. */
  keepDead?: number | null;
  /** Retention of the queue's cancelled jobs, as keepDone. */
  keepCancelled?: number | null;
}

/**
 * `groupConfig`'s changes (C3.25): one group's own settings, each replacing
 * the queue's (QueueSettings.groupMaxLeased, groupRate, groupPer) for that
 * group. A setting left out (undefined) keeps the group's stored override;
 * null removes it (sent as nil): the group follows the queue's setting again.
 */
export interface GroupSettings {
  /**
   * At most this many jobs of the group leased at once (an integer, 0..1e9);
   * 0: no limit for this group, even where the queue sets one.
   */
  maxLeased?: number | null;
  /**
   * At most this many claims of the group (an integer, 0..100000) in any
   * `per` seconds; 0: no limit for this group, even where the queue sets one.
   */
  rate?: number | null;
  /** The group rate's window in seconds (0 < per <= 86400). */
  per?: number | null;
}

export interface AwaitOptions {
  /**
   * Seconds (0..3600) the daemon may hold the request until the job is
   * finished; the call's timeout is extended by as much. Default 0.
   */
  wait?: number;
  /** Client clock only, optional: the time the job's state is judged at. */
  now?: number;
}

/**
 * `enqueueAndWait`: enqueue's options and awaitJob's `wait` (`now` goes with
 * both), `group`, `maxRuntime` and `headers` included. No `key`: enqueue with the key, then
 * awaitJob the id it answers.
 */
export interface EnqueueAndWaitOptions
  extends Omit<EnqueueOptions, 'key' | 'uniqueFor' | 'onConflict' | 'after' | 'afterFailure'> {
  /** Seconds (0..3600) to await the job once enqueued. Default 0. */
  wait?: number;
}

/** `scheduleSet`'s options: the zone its cron is read in, and the job each tick enqueues. */
export interface ScheduleOptions {
  /** An IANA time zone such as 'Europe/Berlin'; default 'UTC'. */
  tz?: string;
  /** The queue of the jobs; default 'default'. */
  queue?: string;
  /** Each job's payload, as enqueue takes it. */
  payload?: Uint8Array | string | null;
  /** Each job's priority (a 32-bit integer); default 0. */
  priority?: number;
  /** Each job's maxAttempts; default the daemon's, 25 (0: no limit). */
  maxAttempts?: number;
  /** Client clock only, optional: the time the schedule counts from. */
  now?: number;
}

/** One row of `scheduleList`; field names as on the wire. */
export interface Schedule {
  name: string;
  /** The cron expression as it was set (5 fields, or a macro such as '@daily'). */
  cron: string;
  tz: string;
  queue: string;
  payload: string | Uint8Array | null;
  priority: number;
  max_attempts: number;
  /** The next tick, Unix seconds; null when none is due within five years. */
  next: number | null;
  /** The last tick enqueued, Unix seconds; null: none yet. */
  last: number | null;
}

export interface PurgeOptions {
  /** Only this queue; default every queue. */
  queue?: string;
  now?: number;
}

/** What a page of a bulk action resolves (issue 33). */
export interface BulkResult {
  /** How many jobs this request acted on. */
  count: number;
  /** Whether jobs that pass the filter are left: ask again (the *All helpers do). */
  more: boolean;
}

/** A bulk action's filter (issue 33): each only when given. */
export interface BulkFilter<S extends JobStatus> {
  /** One state the action changes; default all of them. */
  state?: S;
  /** Only ids that start with this. */
  prefix?: string;
  /** Only the jobs of this group (exact). */
  group?: string;
  /** Most jobs one request acts on, 1..10000; the daemon's default 1000. */
  limit?: number;
  /** Client clock only, optional. */
  now?: number;
}

/** `retryMany`'s options: dead or cancelled jobs (default both). */
export type RetryManyOptions = BulkFilter<'dead' | 'cancelled'>;
/** `cancelMany`'s options: ready, delayed, leased, blocked, suspended or dead jobs (default all six). */
export type CancelManyOptions = BulkFilter<'ready' | 'delayed' | 'leased' | 'blocked' | 'suspended' | 'dead'>;
/** `purgeMany`'s options: done, dead or cancelled jobs (default all three). */
export interface PurgeManyOptions extends BulkFilter<'done' | 'dead' | 'cancelled'> {
  /** Only this queue; default every queue. */
  queue?: string;
  /** Only jobs that finished at least this many seconds ago; default 0. */
  olderThan?: number;
}

/** The *All helpers' bound: at most this many requests (an integer >= 1); default 10000. */
export interface PagesOption {
  maxPages?: number;
}

export interface RequestOptions {
  /** This call's timeout in milliseconds; default the client's. */
  timeoutMs?: number;
}

/**
 * ZeroMQ CURVE keys for a tcp:// endpoint (fenceqd serves TCP only with
 * CURVE), each as its 40 Z85 characters. `curveKeys` reads them from files.
 */
export interface CurveKeys {
  /** The daemon's public key (what `fenceqd --curve-keygen` printed for its key file). */
  serverPublic: string;
  /** This client's public key: the one listed in the daemon's --curve-allowed-clients. */
  publicKey: string;
  /** This client's secret key. */
  secretKey: string;
}

export interface ClientOptions {
  /** Per-call timeout in milliseconds; default 5000; Infinity waits forever. */
  timeoutMs?: number;
  /**
   * Encrypt and authenticate the connection with CURVE (needed for tcp://).
   * Each key must be 40 Z85 characters, else the constructor throws
   * invalid_argument. A handshake the daemon refuses (a key not on its list,
   * the wrong server key) is never answered: calls time out.
   */
  curve?: CurveKeys | null;
  /**
   * W3C trace context through OpenTelemetry (issue 33), when the application
   * has @opentelemetry/api (an optional peer dependency): enqueues add the
   * active context's trace context to the job's headers (unless they have a
   * `traceparent`), and workNext runs each job function in the context
   * extracted from its headers, in a span `fenceq.process <queue>`. Default
   * true; false turns both off. Not a boolean: invalid_argument.
   */
  traceContext?: boolean;
}

/**
 * This client's CURVE key pair from a file written by `fenceqd --curve-keygen
 * FILE` (its `public-key = "..."` and `secret-key = "..."` lines; whole `#`
 * lines are comments), paired with the daemon's public key, bare (40 Z85
 * characters) or as the line keygen printed (`public-key = "KEY"`).
 * @throws FenceqError invalid_argument naming the file (and line): unreadable,
 *   a key missing, twice or not 40 Z85 characters, a public key that is not
 *   the secret key's; or a malformed `serverPublic`
 */
export function curveKeys(keyFile: string, serverPublic: string): CurveKeys;

export interface Job {
  id: string;
  owner: string;
  fence: number;
  /**
   * Aborts (reason: FenceqError code `lease_lost`) once a renew is refused,
   * or a `step`'s save.
   */
  signal: AbortSignal;
  /**
   * The job's saved steps (C3.22), as `NextJob.steps`: those its claim
   * handed out, and those `step` saved since. Absent while there are none
   * (and, for `work`'s job claimed by id, until its first `step` read them).
   */
  steps?: Record<string, Payload>;
  /**
   * Runs one step of the job at most once per job, across attempts (C3.22).
   * When `name` is in the job's steps (saved by an earlier attempt, or by
   * this one), resolves its saved value without calling `fn`. Else awaits
   * `fn()` and saves its result (a Buffer/Uint8Array, a string, or null;
   * undefined is saved as null) with `stepSave` under the job's lease, adds
   * it to `steps` and resolves it (a Uint8Array as a Buffer, as a later
   * attempt gets it). When the daemon refuses the save (the lease is no
   * longer this worker's: it ran out and another worker may hold the job,
   * or the job was cancelled), rejects with a FenceqError `lease_lost` and
   * aborts `signal`: nothing further of the job should run (and its result
   * will not be stored). `fn`'s own error rejects as it is, nothing saved:
   * the next attempt runs it again. A step of a job whose signal was
   * aborted rejects with the signal's reason, `fn` not called.
   * `work`'s job (claimed by id: a claim hands no steps out) reads its steps
   * with `job` at its first step. A bad name (not a non-empty string) or a
   * result that is not a StepValue rejects with invalid_argument; the
   * daemon's limits (names of at most 256 bytes, 64 steps and 256 KiB of
   * values a job) with its invalid_argument.
   */
  step<T extends StepValue | undefined | void>(name: string, fn: () => T | Promise<T>): Promise<StepResult<T>>;
  /**
   * Suspends the job until a signal wakes it or `timeout` seconds (1..30
   * days) pass (C3.23): the daemon ends the lease (the attempt given back)
   * and this resolves the signal token, to hand to whoever will answer
   * (`Client.signal(token, {value})`). The attempt ends there: the renewals
   * stop, a later `step` or `suspend` rejects with `lease_lost` (nothing
   * sent), and once the function returns nothing is completed, failed or
   * released: the outcome has `suspended: true` and the `token` (a round's
   * job: status 'suspended'). A throw of the function after it is rethrown
   * (a round's: its `error`), nothing sent. When the daemon refuses (the
   * lease is no longer this worker's), rejects with a FenceqError
   * `lease_lost` and aborts `signal`, as a refused step does. A bad timeout
   * or onTimeout rejects with the daemon's invalid_argument or bad_request
   * (the lease is kept); an unknown option with invalid_argument.
   */
  suspend(timeout: number, options?: JobSuspendOptions): Promise<string>;
}

/** `Job.suspend`'s options (its `now` is the worker's clock). */
export interface JobSuspendOptions {
  /** 'retry' (the default): ready again when the wait times out; 'fail': dead. */
  onTimeout?: OnTimeout;
}

export interface WorkOptions {
  /** How often to renew; default ttl / 3. */
  renewEveryMs?: number;
  /** Seconds for `now`; only for a daemon running `--clock client`. */
  clock?: () => number;
  /** Where a refused renew (cancelled, or the lease lost) is reported; default console.warn. */
  log?: (message: string) => void;
}

/** What `workNext` hands the job function. */
export interface QueueJob extends Job {
  payload: Payload;
  attempts: number;
  /** Its parents' ids (issue 32), as `NextJob.after`; absent for a job without parents. */
  after?: string[];
  /**
   * Its headers (issue 33), as `NextJob.headers`; absent for a job without
   * headers. With @opentelemetry/api the function runs in the trace context
   * extracted from them (ClientOptions.traceContext).
   */
  headers?: Record<string, string>;
  /**
   * Whether a signal woke the job since it last suspended (C3.23): its
   * claim carried `signal`. false for a job never signalled, or woken by its
   * wait's timeout. (`work`'s job, claimed by id, has neither this nor
   * `signalValue`: read `Client.job(id)`'s `signal`.)
   */
  signalled: boolean;
  /** That signal's value, as `NextJob.signal`; null when not signalled. */
  signalValue: Payload;
}

export interface WorkNextOptions extends WorkOptions {
  /** Seconds to long-poll for a job (0..3600); default 20. Unused when `job` is given. */
  wait?: number;
  /** Passed to `fail` when the job throws; default the daemon's backoff. */
  retryIn?: number;
  /**
   * Complete a successful job with `completeAndClaimNext`: the next job of the
   * queue is claimed in the same round trip and resolved as the outcome's
   * `next` (pass it back as `job`). Default false.
   */
  takeNext?: boolean;
  /**
   * A job already leased to `owner` (a previous outcome's `next`): run it
   * instead of claiming one. null/absent: claim with `claimNext` (long-poll).
   */
  job?: NextJob | null;
  /**
   * Stop: once aborted, nothing more is claimed; the job in progress is
   * completed without taking a next one, and a job that arrives afterwards
   * (or is passed as `job`) is released untouched. Does not abort the job's
   * own `signal`.
   */
  stopSignal?: AbortSignal;
  /** Given: workNext works in rounds (see WorkNextPrefetchOptions). */
  prefetch?: undefined;
}

/** workNext with `prefetch`: one round of up to `prefetch` jobs. */
export interface WorkNextPrefetchOptions extends WorkOptions {
  /**
   * Hold up to this many jobs (an integer, 1..1000): claimNext with `max`,
   * one renewMany for every held lease, one completeMany (with `next`) for
   * the round's results. Given, workNext resolves a round, even for 1.
   */
  prefetch: number;
  /**
   * Jobs already leased to `owner` (the previous round's `next`, at most
   * `prefetch`): run them instead of claiming. Empty/absent: claim (long-poll).
   */
  jobs?: readonly NextJob[] | null;
  /** Seconds to long-poll for jobs (0..3600); default 20. Unused when `jobs` has some. */
  wait?: number;
  /** Passed to `fail` when a job throws; default the daemon's backoff. */
  retryIn?: number;
  /**
   * Stop: once aborted, nothing more is claimed; the job running is still
   * stored, the jobs not started (and any that arrive) are released untouched.
   */
  stopSignal?: AbortSignal;
  /** Where a dropped job (its renew or complete answered false) is reported; default console.warn. */
  log?: (message: string) => void;
  /** Not with prefetch: a round always takes the next jobs. */
  takeNext?: undefined;
  /** Not with prefetch: pass held jobs as `jobs`. */
  job?: undefined;
}

/**
 * What became of one job of a round:
 * completed: its result is stored;
 * lost: a renew, its complete or its snooze answered false (no longer ours; logged);
 * failed: `fn` threw (or returned something other than a string or null), reported with `fail`;
 * snoozed: `fn` threw a Snooze and the job was snoozed (its attempt given back, no error kept);
 * suspended: `fn`'s `job.suspend` suspended the job (C3.23; nothing stored, `token` its token);
 * released: untouched, given back after a stop.
 */
export type RoundJobStatus = 'completed' | 'lost' | 'failed' | 'snoozed' | 'suspended' | 'released';

export interface RoundJobOutcome<R> {
  id: string;
  fence: number;
  attempts: number;
  status: RoundJobStatus;
  /** status === 'completed'. */
  completed: boolean;
  /** What `fn` returned; undefined when it did not run (or threw). */
  result: R | undefined;
  /**
   * With status 'failed' or 'snoozed' (the Snooze), and 'lost' or
   * 'suspended' if `fn` threw after its lease was lost or it suspended: what
   * `fn` threw.
   */
  error?: unknown;
  /** With status 'suspended' only: the job's signal token. */
  token?: string;
}

/** What a prefetching `workNext` round resolves to. */
export interface WorkRound<R> {
  /** One per job of the round, in the order they were taken. */
  outcomes: RoundJobOutcome<R>[];
  /** Jobs the round's completion claimed (leased to you): pass them back as `jobs`. [] when none. */
  next: NextJob[];
}

export interface WorkNextOutcome<R> extends WorkOutcome<R> {
  id: string;
  attempts: number;
  /** With `takeNext` only: the job the completion claimed (pass it as `job`), or null. */
  next?: NextJob | null;
}

/** A `workNext` outcome with `takeNext: true`: `next` is always there. */
export interface WorkNextTakeOutcome<R> extends WorkNextOutcome<R> {
  next: NextJob | null;
}

export interface WorkOutcome<R> {
  fence: number;
  /**
   * false: the lease was lost before complete (or `fn` threw a Snooze, or
   * suspended the job); the result was not stored.
   */
  completed: boolean;
  /**
   * Only when `fn` threw a Snooze: true when the job was snoozed (its attempt
   * given back, claimable again after the delay), false when the lease was
   * lost first (nothing stored).
   */
  snoozed?: boolean;
  /** Only when `fn`'s `job.suspend` suspended the job (C3.23): true; nothing was completed. */
  suspended?: true;
  /** With `suspended` only: the token `job.suspend` resolved. */
  token?: string;
  /** What `fn` returned; undefined when it threw a Snooze. */
  result: R;
}

/** The development default, 'ipc://var/fenceqd.sock': step 4 of resolveEndpoint. */
export const DEFAULT_ENDPOINT: string;
/** The installed service's socket, 'ipc:///run/fenceq/fenceqd.sock': step 3 of resolveEndpoint. */
export const SERVICE_ENDPOINT: string;

/** The step of resolveEndpoint's order that chose an endpoint. */
export type EndpointSource = 'given' | 'environment' | 'service' | 'development';

/**
 * The endpoint a Client connects to, the first of: 1. `endpoint`, when given
 * and not empty; 2. env FENCEQ_ENDPOINT, when set and not empty; 3.
 * SERVICE_ENDPOINT, when its socket file exists; 4. DEFAULT_ENDPOINT.
 * `inputs` replaces process.env and the look at the file (for tests).
 */
export function resolveEndpoint(
  endpoint?: string | null,
  inputs?: { env?: Record<string, string | undefined>; serviceSocketExists?: boolean },
): { endpoint: string; source: EndpointSource };

/**
 * One connection to one fenceqd endpoint, safe for many concurrent calls
 * (replies are matched by request id). Every method rejects with a
 * FenceqError on failure. Call close() when done, or the process stays alive.
 */
export class Client {
  /**
   * @param endpoint default (also for ''): resolveEndpoint's order
   * @throws FenceqError invalid_argument for a malformed endpoint, timeoutMs,
   *   curve key or traceContext
   */
  constructor(endpoint?: string, options?: ClientOptions);
  constructor(options: ClientOptions);

  readonly endpoint: string;
  /** Which step of resolveEndpoint's order chose `endpoint`. */
  readonly endpointSource: EndpointSource;
  readonly timeoutMs: number;
  /** ClientOptions.traceContext: whether trace context is injected and extracted (default true). */
  readonly traceContext: boolean;
  readonly closed: boolean;

  ping(options?: { describe?: boolean }): Promise<PingResult>;
  /**
   * With a unique key: `{id, created}`: created (the new job's id), or not,
   * with the id of the job of the same queue and key that holds the key (or
   * this id, when it existed already). With `onConflict: 'replace'`, a
   * holder that is ready or delayed takes this request's payload, priority,
   * maxAttempts and delay.
   */
  enqueue(id: string, options: UniqueEnqueueOptions): Promise<Enqueued>;
  /**
   * C3.1: true if inserted, false if the id already existed (nothing changed,
   * the options are ignored). An unknown option key rejects with invalid_argument.
   */
  enqueue(id: string, options?: EnqueueOptions): Promise<boolean>;
  /** A key that may be undefined: `{id, created}` when it is given, else a boolean. */
  enqueue(id: string, options?: MaybeUniqueEnqueueOptions): Promise<boolean | Enqueued>;
  /** C3.2: the row, or null when the id does not exist. */
  state(id: string): Promise<JobState | null>;
  /** C3.3: the new fence, or null when missing, done, or leased. ttl <= 0 rejects. */
  claim(id: string, owner: string, ttl: number, options?: TimeOptions): Promise<number | null>;
  /** C3.4: true when the current lease was extended; false otherwise. */
  renew(
    id: string,
    owner: string,
    fence: number,
    ttl: number,
    options?: TimeOptions & { progress?: string },
  ): Promise<boolean>;
  /** C3.5: true when stored under a current lease; false otherwise (stored result kept). */
  complete(
    id: string,
    owner: string,
    fence: number,
    result: string | null,
    options?: TimeOptions,
  ): Promise<boolean>;
  /** C3.6: true when the lease was dropped (fence kept); false otherwise. */
  release(id: string, owner: string, fence: number): Promise<boolean>;

  /**
   * Claims up to `max` (1..1000) of the most urgent claimable jobs of `queue`,
   * each as `claim` would; always an array ([]: none within `wait`).
   */
  claimNext(queue: string, owner: string, ttl: number, options: ClaimNextManyOptions): Promise<NextJob[]>;
  /**
   * Claims the most urgent claimable job of `queue` (priority, then enqueue
   * order) as `claim` would; null when there is none (within `wait`).
   */
  claimNext(queue: string, owner: string, ttl: number, options?: ClaimNextOptions): Promise<NextJob | null>;
  /**
   * `complete` then `claimNext` (no wait) in one round trip: `completed` is what
   * `complete` would answer (C3.5); `next` the job claimed from `queue` with
   * `ttl`, whatever the completion's outcome, or null.
   */
  completeAndClaimNext(
    id: string,
    owner: string,
    fence: number,
    result: string | null,
    queue: string,
    ttl: number,
    options?: TimeOptions,
  ): Promise<CompleteAndClaimNextResult>;
  /**
   * Batch: `enqueue` for each job (1..1000) in one request and one commit;
   * one boolean per job, in order (false: the id existed, nothing changed).
   * One bad entry refuses the whole request (invalid_argument or bad_request
   * naming `jobs[i]`) and nothing is applied.
   */
  enqueueMany(jobs: readonly EnqueueManyJob[], options?: TimeOptions): Promise<boolean[]>;
  /**
   * Batch with unique keys: per job, in order, what `enqueue` would answer:
   * `{id, created}` for a job with a key, a boolean for one without.
   */
  enqueueMany(
    jobs: readonly (EnqueueManyJob | UniqueEnqueueManyJob)[],
    options?: TimeOptions,
  ): Promise<Array<boolean | Enqueued>>;
  /**
   * Fan-out/fan-in in one enqueueMany request (issue 32): every part, then
   * `then` with `after` set to the parts' ids (followed by its own `after`);
   * enqueueMany's answer, the child's last. A part or the child may be a
   * bare id. The child reads its parents' results with `results`.
   */
  enqueueFanIn(
    parts: readonly (EnqueueManyJob | string)[],
    then: EnqueueManyJob | string,
    options?: EnqueueFanInOptions,
  ): Promise<boolean[]>;
  /** Fan-in with keyed jobs: per job, a boolean or `{id, created}`, as enqueueMany. */
  enqueueFanIn(
    parts: readonly (EnqueueManyJob | UniqueEnqueueManyJob | string)[],
    then: EnqueueManyJob | UniqueEnqueueManyJob | string,
    options?: EnqueueFanInOptions,
  ): Promise<Array<boolean | Enqueued>>;
  /**
   * Batch: `complete` for each item (1..1000), in order, in one request; one
   * boolean per item, each judged alone (C3.5: a stale one is false, the
   * others are stored). With `next`, then claims up to `next.max` jobs for the
   * last item's owner: `{completed, next}`.
   */
  completeMany(items: readonly CompleteItem[], options: CompleteManyNextOptions): Promise<CompleteManyResult>;
  completeMany(items: readonly CompleteItem[], options?: CompleteManyOptions): Promise<boolean[]>;
  /**
   * Batch: `renew` for each item (1..1000) to now + ttl, in one request; one
   * boolean per item, each judged alone (C3.4).
   */
  renewMany(items: readonly LeaseItem[], ttl: number, options?: TimeOptions): Promise<boolean[]>;
  /**
   * The current owner reports a failure: true when the lease was current (the
   * error is kept; the job is claimable again after `retryIn`, or dead once its
   * attempts are used up); false otherwise. `error` is at most 64 KiB.
   */
  fail(id: string, owner: string, fence: number, error: string, options?: FailOptions): Promise<boolean>;
  /**
   * C3.14: the current owner puts the job off. True when the lease was
   * current: it ends, its attempt is given back (attempts - 1), the fence is
   * kept, no error is recorded, and the job can be claimed again `delay`
   * seconds (0..1e9) from now; false otherwise (nothing changes). A delay
   * out of range rejects with invalid_argument, one that is not a number
   * with bad_request.
   */
  snooze(id: string, owner: string, fence: number, delay: number, options?: TimeOptions): Promise<boolean>;
  /**
   * C3.22: the current owner saves a step of its job (the result of one part
   * of the work), at most once per job: true when the lease was current and
   * the job had no step of that name (every later claim of the job, and
   * `job`, then carry it in `steps`); false otherwise, nothing changed (a
   * stale, expired or released lease saves nothing; a saved step is never
   * overwritten). `step` is 1..256 bytes; past a job's 64 steps or 256 KiB
   * of values the daemon answers invalid_argument. `Job.step` is built on it.
   */
  stepSave(id: string, owner: string, fence: number, step: string, value: StepValue,
    options?: TimeOptions): Promise<boolean>;
  /**
   * C3.23: the current owner suspends the job until a signal wakes it or
   * `timeout` seconds (1..2592000: 30 days) pass. When the lease was current
   * (as for `complete`) it ends, the attempt is given back, the fence is
   * kept and the job is 'suspended' (no claim takes it): resolves its signal
   * token (32 hex digits; each suspend a new one). null otherwise, nothing
   * changed (a stale, expired or released lease). On timeout the job is
   * ready again with the error 'suspend timed out' and no signal
   * (`onTimeout: 'retry'`, the default) or dead (`'fail'`), at the daemon's
   * next reap. A timeout out of range or another onTimeout rejects with
   * invalid_argument, a timeout that is not a number with bad_request.
   */
  suspend(id: string, owner: string, fence: number, timeout: number,
    options?: SuspendOptions): Promise<string | null>;
  /**
   * C3.23: wakes the job `token` suspended, once: true when its job is
   * suspended and its wait has not timed out (the job is ready at once, and
   * its claims and `job` carry `signal`, the value, until it suspends
   * again); false for a token used before (of racing signals exactly one is
   * true), unknown, or whose wait timed out. An empty token or one over 256
   * bytes rejects with invalid_argument; a value that is not a payload with
   * bad_request.
   */
  signal(token: string, options?: SignalOptions): Promise<boolean>;
  /** true when that lease is current; changes nothing. */
  check(id: string, owner: string, fence: number, options?: TimeOptions): Promise<boolean>;
  /**
   * Operator: true when a dead (or cancelled) job was revived (attempts
   * reset, fence kept); false for a keyed job while another unfinished job
   * holds its key.
   */
  retry(id: string): Promise<boolean>;
  /**
   * Operator: true when a job not done was cancelled: final (`cancelled`),
   * its lease ended and its fence went up, so the holder's writes are refused.
   */
  cancel(id: string, options?: TimeOptions): Promise<boolean>;
  /** Operator: one job's whole record (its list row, result and payload); null if missing. */
  job(id: string, options?: TimeOptions): Promise<JobDetail | null>;
  /**
   * The state and result of up to 1000 jobs in one round trip (fan-in):
   * keyed by each id asked, once; null for an id that does not exist. An
   * empty array, more than 1000 ids or an empty id rejects with
   * invalid_argument, a non-string id with bad_request.
   */
  results(ids: readonly string[], options?: TimeOptions & { statesOnly?: boolean }): Promise<Record<string, JobOutcome | null>>;
  /** Operator: counts per queue and state, and the daemon's figures. */
  stats(options?: TimeOptions): Promise<Stats>;
  /** Operator: jobs in id order, filtered and paged. */
  list(options?: ListOptions): Promise<JobInfo[]>;
  /**
   * Operator: removes done and dead jobs that finished at least `olderThan`
   * seconds ago; resolves how many. A purged id enqueued again continues its fence.
   */
  purge(olderThan: number, options?: PurgeOptions): Promise<number>;
  /**
   * Operator, bulk (issue 33): one page of `retry` by filter, up to `limit`
   * dead or cancelled jobs of `queue`; `{count, more}`. A state it cannot
   * change or a limit out of range rejects with invalid_argument, nothing changed.
   */
  retryMany(queue: string, options?: RetryManyOptions): Promise<BulkResult>;
  /** Operator, bulk: one page of `cancel` by filter (fenced: the holders' writes are refused). */
  cancelMany(queue: string, options?: CancelManyOptions): Promise<BulkResult>;
  /**
   * Operator, bulk: one page of `purge` by filter, finished jobs of `queue`
   * (or every queue), fences kept. Without a filter it sends limit 1000.
   */
  purgeMany(options?: PurgeManyOptions): Promise<BulkResult>;
  /**
   * Operator: retryMany page after page while `more`: how many in all. At
   * most `maxPages` requests; stops after a page that retried none.
   */
  retryAll(queue: string, options?: RetryManyOptions & PagesOption): Promise<number>;
  /** Operator: cancelMany page after page while `more` (bounded as retryAll): how many in all. */
  cancelAll(queue: string, options?: CancelManyOptions & PagesOption): Promise<number>;
  /** Operator: purgeMany page after page while `more` (bounded as retryAll): how many in all. */
  purgeAll(options?: PurgeManyOptions & PagesOption): Promise<number>;
  /** Operator: the stats figures in the Prometheus text format. */
  metrics(options?: TimeOptions): Promise<string>;

  /**
   * Operator: changes a queue's settings (pause, maxLeased, rate per `per`
   * seconds, and per group groupMaxLeased, groupRate per `groupPer`
   * seconds); stored, and holding back every claim of the queue; and its
   * retention (keepDone, keepDead, keepCancelled; null removes one).
   * Resolves true.
   */
  queueConfig(queue: string, settings?: QueueSettings): Promise<boolean>;
  /** Operator: `queueConfig(queue, {paused: true})`. */
  pause(queue: string): Promise<boolean>;
  /** Operator: `queueConfig(queue, {paused: false})`; parked claims are served. */
  resume(queue: string): Promise<boolean>;
  /**
   * Operator (C3.25): overrides the queue's group settings for one group (a
   * tenant): maxLeased, rate per `per` seconds; stored, and holding back every
   * claim of that group. A setting left out keeps the group's stored
   * override; null removes it (the group follows the queue's setting again);
   * 0 (maxLeased, rate) lifts that limit for this group alone. Resolves true.
   */
  groupConfig(queue: string, group: string, settings?: GroupSettings): Promise<boolean>;
  /**
   * The job's whole record (as `job`) once it is done, dead or cancelled,
   * waiting up to `wait` seconds; null when the wait passes first. An unknown
   * id rejects with invalid_argument.
   */
  awaitJob(id: string, options?: AwaitOptions): Promise<JobDetail | null>;
  /** One request (enqueue_and_wait; two against an older daemon): the record, or null when the wait passes. */
  enqueueAndWait(id: string, options?: EnqueueAndWaitOptions): Promise<JobDetail | null>;
  /**
   * Operator: a periodic job: at each tick of `cron` in `tz`, one job
   * `NAME@YYYY-MM-DDTHH:MMZ`. Replaces one of that name; resolves true. A bad
   * cron or tz rejects with invalid_argument naming the field.
   */
  scheduleSet(name: string, cron: string, options?: ScheduleOptions): Promise<boolean>;
  /** Operator: false when there was no schedule of that name. */
  scheduleDelete(name: string): Promise<boolean>;
  /** Operator: every schedule, by name, with its next and last tick. */
  scheduleList(options?: TimeOptions): Promise<Schedule[]>;

  /**
   * Claim, renew while `fn` runs, complete with the fence; release if `fn`
   * throws (then rethrow), or snooze if it throws a Snooze (then resolve with
   * `snoozed`). When `fn`'s `job.suspend` suspended the job (C3.23), nothing
   * more is sent: resolves with `suspended: true` and the `token`. Resolves
   * null when the claim is refused.
   */
  work<R extends string | null | undefined | void>(
    id: string,
    owner: string,
    ttl: number,
    fn: (job: Job) => R | Promise<R>,
    options?: WorkOptions,
  ): Promise<WorkOutcome<R> | null>;

  /**
   * The queue worker: claimNext (long-polling up to `wait`, default 20 s), renew
   * while `fn` runs, complete with the fence; if `fn` throws, `fail` with its
   * message (retried after a backoff, or dead), then rethrow; if it throws a
   * Snooze, snooze the job (its attempt given back) and resolve with
   * `snoozed`; if it suspended the job (`job.suspend`, C3.23), send nothing
   * more and resolve with `suspended: true` and the `token`. Resolves null
   * when no job came within `wait`. With `takeNext: true` the completion also
   * claims the next job (`next`, to pass back as `job`): one round trip a job.
   */
  workNext<R extends string | null | undefined | void>(
    queue: string,
    owner: string,
    ttl: number,
    fn: (job: QueueJob) => R | Promise<R>,
    options: WorkNextOptions & { takeNext: true },
  ): Promise<WorkNextTakeOutcome<R> | null>;
  /**
   * A prefetching round: up to `prefetch` jobs (the `jobs` passed back, or
   * claimNext with `max`), run one at a time while one renewMany keeps all
   * their leases, stored with one completeMany whose `next` (the round's
   * `next`) claims up to `prefetch` more. A job whose renew or complete
   * answers false is dropped alone (logged); a job that throws is `fail`ed
   * (one that throws a Snooze is snoozed) and the round goes on. Null when no job came within `wait`, or stopped.
   */
  workNext<R extends string | null | undefined | void>(
    queue: string,
    owner: string,
    ttl: number,
    fn: (job: QueueJob) => R | Promise<R>,
    options: WorkNextPrefetchOptions,
  ): Promise<WorkRound<R> | null>;
  workNext<R extends string | null | undefined | void>(
    queue: string,
    owner: string,
    ttl: number,
    fn: (job: QueueJob) => R | Promise<R>,
    options?: WorkNextOptions,
  ): Promise<WorkNextOutcome<R> | null>;

  /** Low level: sends `{op, v: 1, ...fields, rid}`, resolves with the raw result. */
  request(op: string, fields?: Record<string, unknown>, options?: RequestOptions): Promise<unknown>;

  /**
   * Rejects pending calls with code `closed` and closes the socket; later calls
   * reject with `misuse`. Idempotent.
   */
  close(): Promise<void>;
}

/** The `event` of a JobEvent (protocol v1, "Events"); a later daemon may add more. */
export type JobEventName =
  | 'enqueued'
  | 'claimed'
  | 'completed'
  | 'failed'
  | 'dead'
  | 'retried'
  | 'cancelled'
  | 'snoozed'
  | 'unblocked'
  | 'suspended'
  | 'signalled'
  | 'expired'
  | 'step_saved';

/**
 * One committed job change, as `fenceqd --events` publishes it (issue 33;
 * protocol/PROTOCOL.md, "Events: a stream of committed changes").
 */
export interface JobEvent {
  /** 1, 2, 3, ... for each event the daemon publishes (every queue's), in commit order; 1 again after a restart. */
  seq: number;
  /** The daemon's wall clock when it published the event (Unix seconds). */
  t: number;
  event: JobEventName | string;
  /** The job's id. */
  id: string;
  /** The job's queue (the message's topic). */
  queue: string;
  /** The job's fence after the change: a claim's new fence, the fence a complete or fail carried. */
  fence: number;
  /** `claimed` only: the lease's owner. */
  owner?: string;
  /** Only for a job that has a group. */
  group?: string;
}

export interface SubscriberOptions {
  /**
   * Only this queue's events (1..256 bytes of UTF-8), its topic compared
   * exactly (not "emails-eu" for "emails"); absent or null: every queue.
   */
  queue?: string | null;
  /** CURVE keys for a tcp:// events endpoint, as Client's `curve` option. */
  curve?: CurveKeys | null;
}

export interface NextEventOptions {
  /** At most this many milliseconds; default: wait until an event comes. */
  timeout?: number;
}

/**
 * A ZeroMQ SUB socket on a daemon's `--events` endpoint. Connects lazily;
 * events published before its subscription reached the daemon are not
 * delivered (no replay). `for await (const ev of sub)` reads it; leaving
 * the loop closes it.
 */
export class Subscriber implements AsyncIterable<JobEvent> {
  /**
   * @throws FenceqError invalid_argument: a malformed endpoint, queue, curve
   *   key or option (before any socket is made)
   */
  constructor(endpoint: string, options?: SubscriberOptions | null);
  /** The endpoint connected to. */
  readonly endpoint: string;
  /** The queue subscribed to; null: every queue. */
  readonly queue: string | null;
  /** The `seq` of the last event received (any queue the socket got), null before the first. */
  readonly lastSeq: number | null;
  /**
   * Events skipped by gaps in `seq` (a restarted daemon's seq starting over
   * is not one). `seq` counts every queue's events: with a `queue`, the other
   * queues' events are gaps too.
   */
  readonly missed: number;
  /** true after close(). */
  readonly closed: boolean;
  /**
   * The next event of the queue (any queue without one); null when `timeout`
   * passed first or close() was called while waiting.
   * @throws FenceqError bad_reply (a malformed message, consumed), misuse
   *   (after close()), transport, invalid_argument (a bad timeout)
   */
  next(options?: NextEventOptions | null): Promise<JobEvent | null>;
  [Symbol.asyncIterator](): AsyncGenerator<JobEvent, void, undefined>;
  /** Closes the socket; idempotent. A waiting next() resolves null. */
  close(): void;
}

/** `new Subscriber(endpoint, options)`. */
export function subscribe(endpoint: string, options?: SubscriberOptions | null): Subscriber;

// Fenced writes to the application's own tables (lib/fenced.js, issue 34):
// the row keeps the job's fence; the write applies when the row's fence is
// NULL or <= the writer's, and is refused (false) when a later claim wrote it.

/** The SQL the statements are written in. */
export type FencedDialect = 'postgresql' | 'sqlite';

/** One fenced write of one row. */
export interface FencedWrite {
  /** The table (quoted), or [schema, table]. */
  table: string | readonly [string, string];
  /** The row's key columns (for an upsert, a PRIMARY KEY or UNIQUE constraint's); no null. */
  key: Readonly<Record<string, unknown>>;
  /** The columns to set (every NOT NULL one without a default, for an upsert). */
  values?: Readonly<Record<string, unknown>>;
  /** The job's fence, from claim / claimNext / a worker's job. */
  fence: number | bigint;
  /** Default 'fence': a BIGINT (PostgreSQL) / INTEGER (SQLite) column, NULL until fenced. */
  fenceColumn?: string;
  /** Needed with a query function; otherwise taken from the driver (pg: postgresql, else sqlite). */
  dialect?: FencedDialect;
}

/**
 * A query function for any driver: runs `text` with positional `values`
 * ($1.. for PostgreSQL, ? for SQLite) and returns (or resolves to) the
 * driver's result: for a write a number of rows, {rowCount} or {changes};
 * for the existence check (fencedUpdate's, after a refusal) rows, {rows} or a row / undefined.
 */
export type FencedQuery = (text: string, values: unknown[]) => unknown;

/**
 * What runs the statements: a pg Client, Pool or PoolClient (`query`), a
 * node-sqlite3-wasm Database (`run`/`get`), a better-sqlite3 or node:sqlite
 * database (`prepare`), or a FencedQuery with `dialect` in the write.
 */
export type FencedDb =
  | FencedQuery
  | { query(text: string, values: unknown[]): Promise<unknown> }
  | { run(text: string, values: unknown[]): unknown; get(text: string, values: unknown[]): unknown }
  | { prepare(text: string): { run(...values: any[]): unknown; get(...values: any[]): unknown } };

/**
 * INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE the row's fence is NULL or <= fence.
 * @returns true: applied (inserted or updated); false: refused, a higher fence wrote the row.
 * @throws FenceqError invalid_argument (before any SQL); the driver's own errors.
 */
export function fencedUpsert(db: FencedDb, write: FencedWrite): Promise<boolean>;

/**
 * UPDATE ... WHERE key AND the row's fence is NULL or <= fence: an existing row only.
 * @returns true: applied; false: refused, a higher fence wrote the row.
 * @throws RowMissing no row has the key (nothing written); FenceqError invalid_argument.
 */
export function fencedUpdate(db: FencedDb, write: FencedWrite): Promise<boolean>;

/** The statement of a fenced write ('exists': SELECT 1 of the row by its key) and its values. */
export function fencedStatement(
  kind: 'upsert' | 'update' | 'exists',
  dialect: FencedDialect,
  write: FencedWrite,
): { text: string; values: unknown[] };

/** `name` as one quoted SQL identifier: we"ird -> "we""ird". */
export function quoteIdentifier(name: string): string;

/** fencedUpdate found no row with the key; nothing was written. */
export class RowMissing extends Error {
  constructor(message: string);
  readonly name: 'RowMissing';
  readonly code: 'row_missing';
}
