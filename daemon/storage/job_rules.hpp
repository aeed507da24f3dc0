// The rules of a job's state, written once for both stores: when a job can be
// claimed, when a lease is current, what state a job is in, how long a failed
// job waits, when a job becomes claimable by time alone, and the schema's
// versions. sqlite_store.cpp and pg_store.cpp build their statements from
// these fragments, so a rule changes in one place.
//
// Each fragment is an SQL condition or expression over the columns of `jobs`
// (docs/contract.md, C1.1) and takes the spelling of its parameters, which
// differs between the databases (":now" for SQLite, "$4" for PostgreSQL);
// where the two SQL dialects differ, a Dialect says how.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fenceq/types.hpp"
#include "fenceq_protocol/limits.hpp"

namespace fenceq::daemon::rules {

struct Dialect {
  const char* greatest;  // of two values: MAX(a, b) in SQLite, GREATEST(a, b) in PostgreSQL
  const char* least;
  // 2^n for an integer expression n in 0..12: the text before n and after it.
  const char* pow2_before;
  const char* pow2_after;
};
extern const Dialect kSqlite;
extern const Dialect kPostgres;

// A suspended job's not_before (C3.23), above kBlockedUntil: every rule that
// steps over a blocked job steps over it; status() reads it as suspended.
// The name of the step (C3.22) its waking signal's value is kept under:
// empty, which no step_save can name, so every claim path that reads the
// steps reads it (rows::steps_of takes it out as ClaimedJob::signal).
inline constexpr double kSuspendedUntil = 2e15;
inline constexpr const char* kSuspendedUntilSql = "2e15";
inline constexpr const char* kSignalStep = "";
// jobs.kids, both stores (schema 22): the job was suspended (C3.23) and may have a row
// of job_suspends; the bit stays (the row goes when the job is woken).
inline constexpr int kKidsSuspend = 256;

// The job's attempts are not used up (max_attempts 0: no limit).
std::string attempts_left();
// Its last allowed attempt's lease has ended by `now`: the job is dead, even
// before reap_exhausted() writes it down.
std::string exhausted(std::string_view now);

// C3.24: the job's deadline (jobs.expires, NULL for none; schema 22) has
// not come at `now`: a claim may still take it.
inline std::string before_deadline(std::string_view now) {
  return "(expires IS NULL OR expires > " + std::string(now) + ")";
}
// Its deadline came and it is neither leased nor suspended: it can never be
// claimed again, and the reap writes it down dead ("deadline passed");
// status() says dead. (A suspended job's deadline waits for its wake: it
// cannot be claimed before either.)
inline std::string deadline_missed(std::string_view now) {
  return "expires <= " + std::string(now) + " AND until <= " + std::string(now) +
         " AND not_before < " + kSuspendedUntilSql;
}
// The error a job whose deadline passed is dead with, and a suspended job's
// whose signal did not come in time (C3.24, C3.23).
inline constexpr const char* kDeadlinePassed = "deadline passed";
inline constexpr const char* kSuspendTimedOut = "suspend timed out";

// C3.3: claimable at `now`: not done, not dead, the lease ended (until <= now:
// at the boundary now == until it can be claimed again), the delay passed,
// attempts left, its deadline (if any) not come. The guard on the fence's maximum keeps fence + 1 from
// overflowing (SQLite would turn it into a REAL).
std::string claimable(std::string_view now);
// The SET of a claim: a new lease for `owner` until `until`, the fence one
// higher, one attempt more, no progress reported yet. `held`: also marks the
// job as one whose lease a queue's max_leased counts (leased_in).
std::string claim_set(std::string_view owner, std::string_view until, bool held = false);
// PostgreSQL's, with max_runtime (C3.15) in jobs' columns: the
// lease ends no later than `now` + max_runtime, the attempt's deadline.
// (SQLite keeps them in job_runtimes, sqlite_lifecycle.cpp.)
std::string runtime_claim_set(std::string_view owner, std::string_view until,
                              std::string_view now, bool held = false);
// PostgreSQL's renew's lease end `until`, no later than the deadline.
std::string renewed_until(std::string_view until);
// PostgreSQL's attempts whose max_runtime ran out at `now` (their lease
// renewed up to the deadline and ended there); the other jobs whose deadline
// passed (finished, or the attempt ended another way), whose deadline is
// cleared (jobs_deadline's entry goes).
std::string overrun(std::string_view now);
std::string deadline_passed(std::string_view now);
// (Such an attempt ends by end_lease_set(LeaseEnd::overrun), below.)

// C3.4, C3.5: (owner, fence) is the current lease at `now`: it matches, the
// job is neither done nor dead, and until > now (an expired lease is never
// current again). `prefix` qualifies the columns ("j." for a join).
std::string current_lease(std::string_view id, std::string_view owner, std::string_view fence,
                          std::string_view now, std::string_view prefix = "");
// C3.6: (owner, fence) is the job's lease, expired or not, on a job neither
// done nor dead (release, and giving back an undelivered claim).
std::string own_lease(std::string_view id, std::string_view owner, std::string_view fence);

// Said of a job whose lease ended (claimable, or exhausted): that lease ran
// out by time, unfinished. Releasing, failing, giving back a claim, retry and
// the fence epoch's recovery set `until` to 0, a job never claimed has 0, and
// a completed job is never claimed again; so a lease end left in `until` is
// one that expired. Counted as an expired lease (QueueTotals::expired).
std::string lease_expired();

// The order claim_next takes a queue's claimable jobs in: priority, higher
// first, then enqueue order (jobs_next's order).
std::string urgency();

// The jobs one claim_next took, most urgent first, given each one's
// (priority, seq): a multi-row UPDATE ... RETURNING gives them in no order.
std::vector<ClaimedJob> most_urgent_first(
    std::vector<ClaimedJob> jobs, const std::vector<std::pair<std::int64_t, std::int64_t>>& order);

// C3.5: the SET of a complete: the result stored, the job done at `now`.
std::string complete_set(std::string_view result, std::string_view now);
// --- The end of a lease: one transition, to a target state -------------------
// Every write that ends a lease (a worker's release, unclaim, snooze and fail,
// cancel by id, and the daemon's max_runtime overrun) is this one transition:
// the lease is cleared the same way (owner NULL, until 0: C1.2, the fence
// kept unless the target raises it) and the job takes the target's columns.
// Its guard is the caller's: current_lease() for a worker's write (C3.5),
// cancellable() for cancel, overrun() for the overrun. A new lease-ending
// write is a target here (its arguments in LeaseEndArgs), not a SET of its
// own.
enum class LeaseEnd {
  released,   // C3.6: claimable again at once, the attempt counted
  unclaimed,  // a claim whose reply never reached its claimant: the attempt given back
  snoozed,    // C3.14: as unclaimed, and claimable again at `at`
  failed,     // C3.8: `error` kept; dead when the attempts are used up (finished at
              // `now`), else claimable after `retry_in` (NULL: 2^(attempts-1) s,
              // at most an hour)
  overrun,    // C3.12: failed by the daemon at `now` ('max_runtime exceeded'), the
              // fence raised so that the holder's writes are refused
  suspended,  // C3.23: as unclaimed, and waiting for a signal (kSuspendedUntil: no
              // clock reaches it, and every claim path steps over it as over a blocked
              // job), marked kKidsSuspend (its row of job_suspends)
  cancelled,  // C3.8: dead (so every rule that excludes dead jobs excludes it: no
              // claim, no current lease, purge may remove it, retry revives it) and
              // cancelled at `now`, the fence raised (unless at its maximum, where
              // dead = 1 alone refuses every write)
};
// The target's arguments, as SQL expressions (parameters or columns).
struct LeaseEndArgs {
  std::string_view now = {};       // failed, overrun, cancelled
  std::string_view at = {};        // snoozed
  std::string_view error = {};     // failed
  std::string_view retry_in = {};  // failed
};
// failed's columns (beside the cleared lease).
std::string failed_set(const Dialect& d, std::string_view error, std::string_view now,
                       std::string_view retry_in);
// The fence one higher, unless at its maximum (where dead = 1 alone refuses
// every write).
inline constexpr const char* kFenceRaised =
    "fence = CASE WHEN fence < 9223372036854775807 THEN fence + 1 ELSE fence END";
// The SET of the transition. (Inline: a new target is written here alone,
// docs/architecture.md "Adding an op".)
inline std::string end_lease_set(const Dialect& d, LeaseEnd to, const LeaseEndArgs& a = {}) {
  const std::string set = "owner = NULL, until = 0";
  const std::string attempt_back = std::string(", attempts = ") + d.greatest + "(attempts - 1, 0)";
  switch (to) {
    case LeaseEnd::released:
      return set;
    case LeaseEnd::unclaimed:
      return set + attempt_back;
    case LeaseEnd::snoozed:
      return set + attempt_back + ", not_before = " + std::string(a.at);
    case LeaseEnd::suspended:
      return set + attempt_back + ", not_before = " + kSuspendedUntilSql + ", kids = kids | " +
             std::to_string(kKidsSuspend);
    case LeaseEnd::failed:
      return set + ", " + failed_set(d, a.error, a.now, a.retry_in);
    case LeaseEnd::overrun:
      return set + ", " + failed_set(d, "'max_runtime exceeded'", a.now, "NULL") + ", " +
             kFenceRaised;
    case LeaseEnd::cancelled:
      return set + ", dead = 1, cancelled = 1, finished = " + std::string(a.now) + ", " +
             kFenceRaised;
  }
  return set;
}

// C3.5: the SET of a complete: the result stored, the job done at `now`.
std::string complete_set(std::string_view result, std::string_view now);
// retry: the job is dead (written down, or exhausted by `now`) and not done.
std::string revivable(std::string_view now);
// A job that holds its unique key against any new one (C3.10): unfinished,
// by its columns (a job whose last attempt ran out holds it until reaped).
inline constexpr const char* kKeyOpen = "done = 0 AND dead = 0";
// retry's condition beside revivable: a job with a unique key comes back
// only while no other job of its queue and key is unfinished (C3.10).
std::string key_free();
// retry's condition beside revivable (C3.13, "Purged parents"): a job that
// waits for others comes back only while none of its parents was purged
// after it failed (purged_fences.ended, schema 16), unless its
// after_failure is "run": such a parent can never be done, so the child
// could only be cancelled again (retry answers false instead).
std::string no_lost_parent();
// How a finished job ended, as purged_fences.ended keeps it once purged
// (schema 16): 1 done, 2 dead, 3 cancelled (0: unfinished).
inline constexpr const char* kEndedAs =
    "CASE WHEN done = 1 THEN 1 WHEN cancelled = 1 THEN 3 WHEN dead = 1 THEN 2 ELSE 0 END";
// retry's SET: attempts start over, claimable at once, the fence kept.
std::string revive_set();
// cancel: the job is not done and not cancelled already (a dead job can be
// cancelled: it then shows as cancelled).
std::string cancellable();
// reap_exhausted: an exhausted job written down dead at `now`.
std::string reap_set(std::string_view now);
// Done or dead: finished, and purge may remove it (its fence kept, C1.2).
std::string finished();

// A job's state at `now`, as list and stats report it: 'done', 'cancelled',
// 'dead' (also a job whose deadline came, before the reap writes it down),
// 'suspended', 'blocked', 'leased', 'delayed' or 'ready'.
std::string status(std::string_view now);
// The names status() gives, and back.
std::string_view status_text(JobStatus s);
std::optional<JobStatus> parse_status(std::string_view text);
// How long a ready job has waited counts from here (stats' oldest_ready_age).
std::string ready_since(const Dialect& d);

// list: the rows of one page in `order` (ListOrder) after the cursor:
// in id order :after (an id) with :from, the greater of :after and :lo; in
// enqueue-time order (:after_created, :after) (from the start: -inf or +inf
// and ''); of the ids in [:lo, :hi), which are exactly those that start with
// a prefix (id_prefix_end); without :hi when not `bounded`. The caller adds
// the filters. By id a page walks the primary key from its cursor and reads
// the rows up to its last one; by age it reads every job that passes the
// filters (the ids with the prefix, by the primary key) and sorts them: no
// index on `created`, which would cost every enqueue.
// PostgreSQL renames the parameters.
std::string list_where(ListOrder order, bool bounded);
std::string list_order(ListOrder order);
// The least string above every string that starts with `prefix` (bytewise,
// which is code point order for UTF-8): its last code point stepped up one
// (past the surrogates), the code points U+10FFFF at its end dropped first.
// nullopt when there is none (every string from `prefix` up starts with it).
std::optional<std::string> id_prefix_end(std::string_view prefix);

// When the job becomes claimable by time alone: its lease or its delay ends.
std::string claimable_from(const Dialect& d);

// The open jobs of a queue that will become claimable by time alone after
// `now` (Store::next_claimable_at): MIN(claimable_from) over these; the
// caller adds kNoGroup or kInGroup (one index each).
std::string becomes_claimable(const Dialect& d, std::string_view queue, std::string_view now);
// MIN(claimable_from) over both, as one scalar query.
std::string next_claimable_sql(const Dialect& d, std::string_view queue, std::string_view now);

// queue_config (docs/contract.md, "Queue settings"). A job of `queue` leased
// at `now`, as max_leased counts them: through the index jobs_held, so
// counting costs the leased jobs, not the backlog. Only jobs marked `held`
// are in that index: every claim a queue's settings allow marks its job
// (claim_set's `held`), and setting a max_leased marks the queue's jobs
// leased then; a claim of a queue without settings leaves the mark alone, so
// the index costs such claims nothing (SQLite; a PostgreSQL claim always
// marks).
std::string leased_in(std::string_view queue, std::string_view now);
// How many jobs of `queue` may be claimed at `now`, at most `max`: `max`
// for a queue without settings; 0 while it is paused; else `max` capped by
// max_leased minus its leased jobs and by rate minus its claims logged after
// now - per (queue_claims; later ones too: a claim's `now` can be behind one
// logged before it, below). A scalar expression over the tables
// queue_config, jobs and queue_claims.
std::string allowance(const Dialect& d, std::string_view queue, std::string_view now,
                      std::string_view max);
// How long a rate-limited queue's claims stay logged after their window
// (per) has passed: a claim is pruned only once it is older than
// now - per - kClaimLogKeep. A claim's `now` can be behind a claim logged
// before it: on PostgreSQL a sidecar reads the clock when its transaction
// begins and then waits for the queue's lock, and a client-clock request
// carries its own time. Pruning at now - per dropped claims that such a
// claim still had to count (21 claims in one second under a rate of 20,
// across three sidecars). Kept a minute, they count for any claim whose
// time is less than a minute behind; the count reads only the window's
// part of the index.
inline constexpr double kClaimLogKeep = 60;

// Groups (docs/contract.md C3.11). A job of group `grp` of `queue`
// leased at `now`, as group_max_leased counts them: through jobs_group_leased,
// which holds only `held` jobs (leased_in) by (queue, grp), so the claims
// and renews of a queue without settings leave it alone (SQLite); `until` is
// read from each (a group holds few).
std::string group_leased(std::string_view queue, std::string_view grp, std::string_view now);
// Whether group `grp` of `queue` may take one more claim at `now` under its
// queue's group settings (a scalar, 1 or 0; 1 without settings): fewer than
// group_max_leased of its jobs leased, and fewer than group_rate claims
// logged in group_claims after now - group_per.
std::string group_allowed(std::string_view queue, std::string_view grp, std::string_view now);
// Group `grp` of `queue`'s settings (C3.25: its own in group_config over the
// queue's): one row (ml, rt, pr: max leased, rate, per), none for a queue
// without settings.
std::string group_settings(std::string_view queue, std::string_view grp);
// The jobs of a queue's `grp` that claim_next reads, by index: the group's
// jobs through jobs_group, or (grp NULL: the jobs of no group) through
// jobs_next. Each index holds only its own jobs (`grp IS [NOT] NULL` is in
// its predicate), so a queue whose jobs have no group costs what it did
// before groups existed.
inline constexpr const char* kNoGroup = "grp IS NULL";
inline constexpr const char* kInGroup = "grp IS NOT NULL";

// Schema versions, one sequence for both stores (PRAGMA user_version in
// SQLite, the table fenceq_schema_version in PostgreSQL):
//   1  the contract's six columns (C1.1);
//   2  the work queue: queue, payload, priority, not_before, attempts,
//      max_attempts, dead, error, seq, created, finished; the indexes
//      jobs_next, jobs_last_attempt, jobs_finished; purged_fences (C1.2) and
//      fenceq_meta (C2.3);
//   3  queue control: jobs.cancelled (0/1; a cancelled job is
//      also dead = 1, so the indexes and rules of v2 hold unchanged) and
//      jobs.progress (what the lease's last renew reported; NULL);
//   4  queue settings and periodic jobs: the tables queue_config
//      (paused, max_leased, rate, per by queue), queue_claims (the claims
//      of rate-limited queues within their window), schedules, jobs.held
//      (0/1) and the index jobs_held;
//   5  unique keys (C3.10): jobs.ukey (NULL: none), the index jobs_ukey
//      by (queue, ukey, created), and jobs_ukey_open, unique on (queue, ukey)
//      among unfinished jobs (key_open);
//   6  groups (C3.11): jobs.grp (NULL: none); jobs_next holds only the
//      open jobs of no group, jobs_group (queue, grp, priority DESC, seq),
//      jobs_group_top (queue, priority DESC) and jobs_group_leased (queue,
//      grp; held ones) the open jobs of a group; the table
//      group_claims (the claims of a group within its rate window);
//      queue_config.group_max_leased, group_rate, group_per; on PostgreSQL
//      also queue_groups (each group's turn: its last claim's number, 0
//      before any; '' stands for the jobs of no group), where SQLite's
//      single writer keeps the turns in memory;
//   7  SQLite only (PostgreSQL keeps its indexes): jobs.kseq (a keyed job's
//      seq when it last became unfinished), jobs_ukey by (queue, ukey,
//      kseq) in place of jobs_ukey and jobs_ukey_open, and jobs_held by
//      (queue, grp, until) in place of jobs_held and jobs_group_leased
//      (sqlite_schema.cpp);
//   8  SQLite only: jobs.khash (a hash of a keyed job's queue and key) and
//      jobs_ukey by (khash, kseq) (sqlite_schema.cpp);
//   9  jobs that wait for others (C3.13), SQLite only yet: jobs.kids and
//      the tables job_waits and job_after (sqlite_schema.cpp);
//  10  jobs.kids as two bits (kKidsParent, kKidsChild), so that a claim of
//      a job that waits for none looks up no parents; on PostgreSQL, jobs
//      that wait for others, version 9's and this at once.
//  11  max_runtime (C3.15): on SQLite the table job_runtimes and
//      jobs.kids's bit kKidsRuntime; on PostgreSQL jobs.max_runtime,
//      jobs.deadline and jobs_deadline.
//  12  retention and headers (C3.17, C3.18): the table queue_retention; on
//      SQLite the table job_headers and jobs.kids's bit kKidsHeaders, on
//      PostgreSQL jobs.headers.
//  13  the index jobs_dead: a queue's dead and cancelled jobs by id
//      (queue, cancelled, id), for the pages of bulk actions.
//  14  SQLite only: no index by key (jobs_ukey dropped); its single writer
//      keeps the keys in memory (key_map.hpp), and jobs.khash is no longer
//      written.
//  15  the table settle_pending: the parents whose children a
//      transaction left for the daemon's steps to settle (C3.13).
//  16  purged_fences.ended: how a purged job ended, so
//      that a parent purged after it died or was cancelled still counts as
//      failed for its children (C3.13); ids purged before read as done,
//      except a parent an edge still waits for (it had failed).
//  17  SQLite only: jobs_next by (queue,
//      kBlockedKey, priority DESC, seq), so that a claim seeks past the
//      queue's blocked jobs (kUnblockedSqlite) instead of stepping over each.
//  18  SQLite only: payloads and results over kSpillBytes kept
//      in job_payloads and job_results (kKidsPayload, kKidsResult), not in
//      their rows of jobs.
//  19  SQLite only: jobs_next by (queue,
//      kNextKey, ...): a delayed job is parked (kKidsParked) out of the
//      claims' walk, and jobs_wake brings it back once its delay is over.
//  20  PostgreSQL only: jobs_next by (queue, kNextKeyPg, ...) and
//      jobs_wake, as 17 and 19 on SQLite: every claim parks its job, and
//      so does an enqueue with a delay; a claim_next takes the most urgent
//      of the unparked jobs and of the parked ones whose lease or delay is
//      over (pg_writes.cpp). Jobs leased or delayed before are parked by it.
//  21  A job's steps (C3.22): job_steps, one row a step saved, and
//      kKidsSteps on the jobs that have some, on both stores; on
//      PostgreSQL its rows go with their job (ON DELETE CASCADE), on SQLite
//      by jobs_extras_gone.
//  22  suspend and signal (C3.23), deadlines (C3.24), on both stores:
//      job_suspends (a suspended job's token, timeout and on_timeout; the
//      index job_suspends_timeout), kKidsSuspend; jobs.expires (NULL: no
//      deadline) and, for the reap, the jobs that have one by when (SQLite:
//      the table job_deadlines; PostgreSQL: the partial index jobs_expires).
//  23  the groups' own settings (C3.25), on both stores: the table
//      group_config (queue, grp, max_leased, rate, per; NULL: the queue's)
//      and queue_config.group_overrides (how many groups of the queue have
//      a row).
//  24  SQLite only: a job's steps in jobs.steps (steps_sql's text) up to
//      kInlineStepsBytes, past that in job_steps with kKidsSteps set, as
//      a signal is (C3.22, C3.23); jobs_steps_gone dropped.
inline constexpr int kSchemaVersion = 24;

// Whether a job's steps stay within their bounds (C3.22) with one more:
// `n` steps of `held` bytes saved, `bytes` more asked.
inline bool steps_fit(std::size_t n, std::size_t held, std::size_t bytes) {
  return n < protocol::kMaxSteps && held + bytes <= protocol::kMaxStepsBytes;
}
// Why a step_save is refused, when steps_fit says they would not.
inline std::optional<std::string> steps_refused(std::string_view id, std::size_t n,
                                                std::size_t held, std::size_t bytes) {
  if (steps_fit(n, held, bytes)) return std::nullopt;
  if (n >= protocol::kMaxSteps) {
    return "job '" + std::string(id) + "' has saved " + std::to_string(n) +
           " steps, the most a job may save; nothing was applied";
  }
  return "the steps of job '" + std::string(id) + "' would hold " + std::to_string(held + bytes) +
         " bytes, more than the " + std::to_string(protocol::kMaxStepsBytes) +
         " a job's steps may hold; nothing was applied";
}

// Why an enqueue naming `parent` in its `after` is refused (C3.13).
inline std::string unknown_parent(const std::string& parent) {
  return "field 'after': no job '" + parent + "' (a parent must exist, or be an earlier entry "
         "of the same enqueue_many); nothing was applied";
}

// jobs.kids (schemas 9, 10): kKidsParent once some job waits for it,
// kKidsChild when it waits for others; kHasChildren is the first in SQL.
inline constexpr int kKidsParent = 1;
inline constexpr int kKidsChild = 2;
// SQLite (schema 11): the job has a max_runtime, in job_runtimes (C3.15).
inline constexpr int kKidsRuntime = 4;
// SQLite (schema 12): the job has headers, in job_headers (C3.18).
inline constexpr int kKidsHeaders = 8;
// SQLite (schema 18): a payload or result longer than kSpillBytes is kept in
// job_payloads or job_results, and its column of jobs is NULL. A column that
// SQLite reads after a large value in a row walks that value's overflow
// pages, one by one; every column a filter reads (queue, state, group,
// finished) comes after result, which C1.1 fixes fourth, and most come after
// payload. A purge page that matched nothing took 20-40 ms over 256 jobs of
// which 32 had 900 KiB results; 0.05 ms with the values out of the way.
inline constexpr int kKidsPayload = 16;
inline constexpr int kKidsResult = 32;
inline constexpr std::size_t kSpillBytes = 1024;
// Both stores (schema 21): the job has rows in job_steps (C3.22): its steps
// and its signal (C3.23). A claim reads them only with the bit
// (rows::steps_sql). On SQLite (schema 24) a job's steps are first kept in
// its row, jobs.steps, while their text (rows::steps_sql's) stays within
// kInlineStepsBytes; the save that would pass it moves them to job_steps.
inline constexpr int kKidsSteps = 128;
inline constexpr std::size_t kInlineStepsBytes = 1024;
// The bits of jobs.kids whose tables SQLite's jobs_extras_gone cleans up
// when the job goes: runtimes, headers, payloads, results, steps, suspends.
inline constexpr int kKidsExtras = kKidsRuntime | kKidsHeaders | kKidsPayload | kKidsResult |
                                   kKidsSteps | kKidsSuspend;
inline constexpr const char* kHasChildren = "(kids & 1)";

// A blocked job's not_before (C3.13): no clock reaches it, so every
// claim path steps over the job as it steps over a delayed one, and
// status() reads it as blocked; kBlockedUntilSql is the same in SQL.
inline constexpr double kBlockedUntil = 1e15;
inline constexpr const char* kBlockedUntilSql = "1e15";
// SQLite, schema 17: jobs_next's second column is kBlockedKey (1 for a
// blocked job), so the claims of a queue whose jobs wait for parents seek to
// its unblocked ones: 10^5 blocked jobs cost a claim_next 19-26 ms of CPU
// stepped over one by one (docs/architecture.md, "Bounded work on the serving
// thread"). A statement must say kUnblockedSqlite in these words for the
// planner to seek on the column.
//
// Schema 19: the column is kNextKey, which also says whether the job is
// parked (kKidsParked: 64, or 65 when blocked too). An enqueue with a delay, a
// fail with a retry_in and a snooze park the job; a claim_next first wakes
// (SqliteStore::wake_parked) the parked jobs of its queue of no group whose
// delay is over, through jobs_wake, at most kWakePage of them, then walks
// the jobs of key 0 alone. Before, a claim_next stepped over each delayed
// job before the first claimable one: 10^5 of them, 20 ms of CPU a call for
// none (the scale sweep; 0.1 ms since). Nothing else clears the bit, so a
// wake is late by at most one claim_next (claimable() is still checked on
// every row walked: a job woken under one request's clock and not
// claimable under a later one's is stepped over, as before), but a retry,
// which brings an ended job back claimable at once. Leased jobs
// are not parked as they are claimed: moving every claim's entry of
// jobs_next and jobs_wake cost claim_next then complete 48% more
// instructions (bench/ab_instructions.py). They are parked once a claim_next
// had to step over many (kLongWalkSteps; SqliteStore::park_walked): a page of
// the leased jobs at the head of the walk (kParkWalkPage rows looked at) is
// parked, and jobs_wake brings each back when its lease ends (until 0 after
// a release or a fail, or its time passed), as it does a delayed job. Before,
// a claim_next stepped over every leased job of its queue: 10^5 of them,
// 16-20 ms of CPU a call.
inline constexpr int kKidsParked = 64;
// A SET's value of kids that parks the job, and one that brings it back.
inline constexpr const char* kParkedKids = "kids | 64";
inline constexpr const char* kUnparkedKids = "kids & ~64";
inline constexpr const char* kNextKey = "((not_before >= 1e15) + (kids & 64))";
inline constexpr const char* kUnblockedSqlite = "((not_before >= 1e15) + (kids & 64)) = 0";
// PostgreSQL's key of jobs_next (schema 20): an integer, as its planner
// rewrites a boolean one (NOT (a OR b)) so that no index matches it.
inline constexpr const char* kNextKeyPg = "((not_before >= 1e15)::int + (kids & 64))";
// A clause always true that jobs_next's predicate holds on PostgreSQL
// (schema 20), as it holds `queue IS NOT NULL`: a statement walks jobs_next
// only when it says it. Else a generic plan made while the table was small
// walked a queue's every open job through jobs_next, sorted, for the parked
// jobs whose time came, where jobs_wake has them in order (three times
// slower a complete_next over 20,000 jobs).
inline constexpr const char* kJobsNextPg = "kids >= 0";
// The jobs one claim_next wakes at most (a page; the rest at the next).
inline constexpr int kWakePage = 4096;
// PostgreSQL's (schema 20): the parked jobs whose time came that one
// claim_next looks at, soonest first, when it asks for fewer. Not woken
// there but read by every claim while more are due (a page of 4,096: 13,000
// buffers a claim_next after 20,000 leases ended at once; before schema 20
// such a claim found the first at once).
inline constexpr int kWakePagePg = 256;
// A claim_next's walk that took more SQLite VM steps than this, beyond
// kClaimSteps for each job it claimed, stepped over a few hundred jobs it
// could not claim (about 6 steps each; 55 for a claim of the first job, 160
// more for each further one: measured with SQLITE_STMTSTATUS_VM_STEP).
inline constexpr int kLongWalkSteps = 4096;
inline constexpr int kClaimSteps = 200;
// The rows of the walk's head one parking looks at (those leased are parked).
inline constexpr int kParkWalkPage = 1024;

}  // namespace fenceq::daemon::rules
