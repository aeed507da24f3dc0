// Type declarations for the fenceq Node.js client (protocol v1).
// Semantics of every operation: the project's contract, clauses C1-C4.

/**
 * Stable error codes.
 * From the daemon: bad_request, unknown_op, invalid_argument,
 * unsupported_version, unavailable, internal.
 * From the client: timeout (no reply in time; the request may have been
 * applied), closed (client closed before the reply), transport (socket
 * failure), bad_reply (not a protocol v1 reply), lease_lost (only as the
 * abort reason of a worker's signal).
 */
export type FenceqErrorCode =
  | 'bad_request'
  | 'unknown_op'
  | 'invalid_argument'
  | 'unsupported_version'
  | 'unavailable'
  | 'internal'
  | 'timeout'
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

/** The result of `ping()`. */
export interface PingResult {
  protocol: number;
  version: string;
  clock: 'server' | 'client';
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
}

/** `now` (seconds) is required with `--clock client` and refused with `--clock server`. */
export interface TimeOptions {
  now?: number;
}

export interface ClientOptions {
  /** Per-call timeout in milliseconds; default 5000; Infinity waits forever. */
  timeoutMs?: number;
}

export interface Job {
  id: string;
  owner: string;
  fence: number;
  /** Aborts (reason: FenceqError code `lease_lost`) once a renew is refused. */
  signal: AbortSignal;
}

export interface WorkOptions {
  /** How often to renew; default ttl / 3. */
  renewEveryMs?: number;
  /** Seconds for `now`; only for a daemon running `--clock client`. */
  clock?: () => number;
}

export interface WorkOutcome<R> {
  fence: number;
  /** false: the lease was lost before complete; the result was not stored. */
  completed: boolean;
  result: R;
}

/** Default endpoint when neither the constructor nor FENCEQ_ENDPOINT gives one. */
export const DEFAULT_ENDPOINT: string;

/**
 * One connection to one fenceqd endpoint, safe for many concurrent calls
 * (replies are matched by request id). Every method rejects with a
 * FenceqError on failure. Call close() when done, or the process stays alive.
 */
export class Client {
  /**
   * @param endpoint default: env FENCEQ_ENDPOINT, else 'ipc://var/fenceqd.sock'
   * @throws FenceqError invalid_argument for a malformed endpoint or timeoutMs
   */
  constructor(endpoint?: string, options?: ClientOptions);
  constructor(options: ClientOptions);

  readonly endpoint: string;
  readonly timeoutMs: number;
  readonly closed: boolean;

  ping(): Promise<PingResult>;
  /** C3.1: true if inserted, false if the id already existed (nothing changed). */
  enqueue(id: string): Promise<boolean>;
  /** C3.2: the row, or null when the id does not exist. */
  state(id: string): Promise<JobState | null>;
  /** C3.3: the new fence, or null when missing, done, or leased. ttl <= 0 rejects. */
  claim(id: string, owner: string, ttl: number, options?: TimeOptions): Promise<number | null>;
  /** C3.4: true when the current lease was extended; false otherwise. */
  renew(id: string, owner: string, fence: number, ttl: number, options?: TimeOptions): Promise<boolean>;
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
   * Claim, renew while `fn` runs, complete with the fence; release if `fn`
   * throws (then rethrow). Resolves null when the claim is refused.
   */
  work<R extends string | null | undefined | void>(
    id: string,
    owner: string,
    ttl: number,
    fn: (job: Job) => R | Promise<R>,
    options?: WorkOptions,
  ): Promise<WorkOutcome<R> | null>;

  /** Low level: sends `{op, v: 1, ...fields, rid}`, resolves with the raw result. */
  request(op: string, fields?: Record<string, unknown>): Promise<unknown>;

  /** Rejects pending calls with code `closed` and closes the socket. Idempotent. */
  close(): Promise<void>;
}
