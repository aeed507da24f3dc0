// The job store interface: what the executor asks of whichever database holds
// the jobs, in the store's own terms (no wire types). Two implementations:
// SqliteStore (sqlite_store.hpp), one SQLite file opened by exactly one
// fenceqd (C1.3), the default; and PgStore (pg_store.hpp), one PostgreSQL
// database shared by the fenceqd sidecars of many hosts, which also offers
// SharedDatabase. open_store() (open_store.hpp) picks one from the options.
//
// Every write goes through one entry point, Store::run(), as a batch of
// Calls: one parameter struct per operation (EnqueueParams, ClaimParams,
// ...), so a store implements each write once and adding a field changes
// no signature. The typed helpers at the end of Store (enqueue(), claim(),
// ...) build one Call and run it alone; they are not virtual.
//
// The store does not start transactions by itself: the caller brackets a batch
// of operations with begin()/commit() so that many requests share one commit
// (group commit, C1.4), and calls rollback() when anything in the batch failed.
//
// Every operation is one conditional statement, so each read-and-update is
// atomic by construction (C3.3), also against other sidecars on the same
// database. The rules those statements share are in job_rules.hpp, and the
// rows they read are decoded once for both stores (store_rows.hpp). Failures
// of the database throw StoreError (store_error.hpp); a refusal by the
// contract (a lost claim, a stale fence) is a return value.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "fenceq/types.hpp"
#include "storage/shared_database.hpp"
#include "storage/store_error.hpp"

namespace fenceq::daemon {

// A job to create (C3.1). The views must outlive the call.
struct NewJob {
  std::string_view id;
  std::string_view queue = "default";
  const Payload* payload = nullptr;  // none when null
  std::int64_t priority = 0;         // higher first; ties in enqueue order
  double delay = 0;                  // seconds before it can be claimed
  std::int64_t max_attempts = 0;     // claims before it is dead; 0: no limit
  // Its unique key (docs/contract.md C3.10): with one, no job is
  // created while a job of the queue and key is unfinished (done = 0 and
  // dead = 0), or was enqueued after now - unique_for (> 0); `replace` then
  // hands one that is unfinished and not leased this job's payload,
  // priority, max_attempts and not_before. CallResult::id is the job
  // created, or the one found (by id, C3.1, or by key).
  std::optional<std::string_view> key = std::nullopt;
  double unique_for = 0;
  bool replace = false;
  // Its group (C3.11): claim_next serves a queue's groups in
  // turn, and the queue's group_* settings limit each.
  std::optional<std::string_view> group = std::nullopt;
  // The jobs it waits for (C3.13): none when null or empty. With
  // after_run a parent that becomes dead or cancelled stops holding it
  // back; without, it cancels the job.
  const std::vector<std::string>* parents = nullptr;
  bool after_run = false;
  // A hard cap on one attempt from its claim (C3.15), 0: none.
  double max_runtime = 0;
  // Its headers (C3.18), given back with its claims and by `job`; none
  // when null or empty.
  const Headers* headers = nullptr;
  // C3.24: Unix seconds after which it is never claimed (0: none).
  double deadline = 0;
};

// One page of `list`: jobs in `order` after the cursor: `after` by id; by
// enqueue time (after_created, after), from the start without after_created.
struct ListFilter {
  std::optional<std::string_view> queue;  // every queue when empty
  std::optional<JobStatus> status;
  std::int64_t limit = 100;
  std::string_view after;
  ListOrder order = ListOrder::id;
  std::optional<double> after_created;
  std::string_view prefix;  // only ids that start with it
  std::optional<std::string_view> id;  // this job only (`job`)
  std::optional<std::string_view> key;  // only jobs of this unique key
  std::optional<std::string_view> group;  // only jobs of this group
  // The caller reaped the exhausted jobs at `now` (Store::reap_exhausted)
  // in this transaction, so every dead job is marked dead: a page by id of
  // one queue's dead or cancelled jobs (no id, no key) then walks the index
  // jobs_dead (schema v13), which holds those alone. Bulk actions page with
  // it: the jobs they retried or cancelled leave it, where a walk of the
  // primary key stepped over each of them again on every later page.
  bool reaped = false;
};
// Whether `list` reads a page of `f` through jobs_dead (ListFilter::reaped).
bool dead_page(const ListFilter& f);

// What a page's statement binds besides the filters (rules::list_where),
// the same on both stores: `lower` is :from by id (the later of the cursor
// and the prefix) or :lo by age (the prefix); `upper` is :hi, the prefix's
// end (none: the statement without it); `after_created` the cursor by age,
// or -inf (oldest first) or +inf (newest first) to start at the first row.
struct ListBounds {
  std::string_view lower;
  std::optional<std::string> upper;
  double after_created = 0;
};
ListBounds list_bounds(const ListFilter& f);

// --- writes: one parameter struct per operation, run by Store::run() -------
// Views and pointers must outlive the run. `now` is the server's or the
// client's clock (C2), in seconds.

// C3.1: creates the job unless its id exists (ok: inserted). A job whose id
// was purged before starts from the purged fence (C1.2); `now` stamps it.
struct EnqueueParams {
  NewJob job;
  double now = 0;
};
// C3.3: number = the new fence, or none (missing, done, dead, leased with
// until > now, delayed, out of attempts, or held back by its queue's
// settings). Counts an attempt. ttl > 0 and now + ttl finite are the caller's.
struct ClaimParams {
  std::string_view id, owner;
  double now = 0, ttl = 0;
};
// Claims the `max` most urgent claimable jobs of `queue` (priority, then
// enqueue order), each exactly as a claim would (its own fence, lease and
// attempt), in one statement: jobs, most urgent first, empty when none.
struct ClaimNextParams {
  std::string_view queue, owner;
  double now = 0, ttl = 0;
  std::int64_t max = 1;
};
// The lease a fenced write names (C1.2): owner and fence.
struct LeaseParams {
  std::string_view id, owner;
  std::int64_t fence = 0;
};
// C3.4: ok when the current lease (owner, fence, not done, until > now) was
// extended to now + ttl; `progress`, when given, is stored with it (a
// refused renew stores nothing).
struct RenewParams : LeaseParams {
  double now = 0, ttl = 0;
  std::optional<std::string_view> progress;
};
// C3.5: ok when the current lease stored `result` and marked the job done.
struct CompleteParams : LeaseParams {
  double now = 0;
  const std::optional<std::string>* result = nullptr;  // none when null
};
// C3.6: ok when owner and fence match on a job not done; the fence is kept.
struct ReleaseParams : LeaseParams {};
// The current lease reports a failure (ok): the lease ends, `error` is kept,
// and the job is claimable again at now + backoff (`retry_in`, or
// 2^(attempts-1) seconds capped at an hour), or dead when its attempts are
// used up.
struct FailParams : LeaseParams {
  double now = 0;
  std::string_view error;
  std::optional<double> retry_in;
};
// C3.22: ok when the current lease saved `step` with `value`, which no step
// of that name held before (a saved step is never overwritten). A job's
// steps past kMaxSteps or kMaxStepsBytes refuse the call (invalid_argument).
struct StepSaveParams : LeaseParams {
  double now = 0;
  std::string_view step;
  const std::optional<Payload>* value = nullptr;
};
// C3.23: ok when the current lease ended with the job suspended until a
// signal or `now` + `timeout` (then ready again with the error "suspend
// timed out", or dead when `fail`); `token` (the executor's, random) is
// stored as the one signal that wakes it, and the signal that woke it last
// is forgotten. CallResult::id answers the token.
struct SuspendParams : LeaseParams {
  double now = 0, timeout = 0;
  bool fail = false;
  std::string token;
};
// C3.23: ok when `token` is the token of a suspended job whose wait has not
// timed out at `now`: the job is ready again, its claims carry `value` as
// their `signal`, and the token is used up.
struct SignalParams {
  std::string_view token;
  double now = 0;
  const std::optional<Payload>* value = nullptr;
};
// ok when (owner, fence) is the job's current lease at `now`. Reads only.
struct CheckParams : LeaseParams {
  double now = 0;
};
// Gives a claimed job back when its claimant never got the answer (ok): the
// lease ends and the attempt is not counted; the fence stays (C1.2).
struct UnclaimParams : LeaseParams {};
// Revives a dead job (ok): attempts start over, claimable at once, fence kept.
struct RetryParams {
  std::string_view id;
  double now = 0;
};
// Cancels a job not done (and not cancelled already), ok: it becomes
// cancelled (final; retry revives it), its lease ends and its fence goes up
// by one, so the holder's renew, complete, fail and check are refused. Not
// ok when the job is missing, done or cancelled already.
struct CancelParams {
  std::string_view id;
  double now = 0;
};
// number = how many done and dead jobs finished at or before now -
// older_than (of `queue` when given) were removed, each id's fence kept for
// a later enqueue (C1.2). With a `limit` (purge's filter, C3.16, and
// retention, C3.17), at most that many, of the finished `states` (kFinished*
// bits), ids starting with `prefix`, of `group` when given; ok then: jobs
// that pass the filter are left. With `upto` too (purge's filter, C3.16:
// a page bounded by the rows it examines), only ids above `after` and up to
// `upto`, a window the caller read by id: the statement walks that range
// alone, and ok says whether one more in it passes.
inline constexpr int kFinishedDone = 1, kFinishedDead = 2, kFinishedCancelled = 4;
inline constexpr int kFinishedAll = kFinishedDone | kFinishedDead | kFinishedCancelled;
struct PurgeParams {
  std::optional<std::string> queue;
  double older_than = 0;
  double now = 0;
  int states = kFinishedAll;
  std::string_view prefix = {};
  std::optional<std::string_view> group = std::nullopt;
  std::int64_t limit = 0;  // 0: every job that passes
  bool retention = false;  // by the queue's retention: counted as removed (QueueTotals)
  std::string_view after = {};  // with upto: ids above it; with neither upto nor queue (SQLite): the queue to start in
  std::optional<std::string_view> upto = std::nullopt;  // ids up to it (with limit > 0)
  // With limit (retention, C3.17): the chunk also stops once about this
  // many bytes of payloads and results were removed, since freeing them is
  // what a chunk of large results spends; a single larger job is a chunk by
  // itself. 0: no bound but limit.
  std::int64_t max_bytes = 0;
  // With max_bytes, on SQLite: the chunk also stops at this time (after
  // one job at least), as a job's delete costs 20-40 us (its indexes, its
  // kept fence, its triggers) and 256 of them overran a 3 ms pass twofold
  // (docs/architecture.md, "Bounded work on the serving thread"). {}: none.
  std::chrono::steady_clock::time_point deadline{};
  bool past_deadline() const {
    return deadline != decltype(deadline){} && std::chrono::steady_clock::now() >= deadline;
  }
};
// queue_config's keep_* (C3.17): stores `queue`'s retention; none
// (Retention{}) removes it.
struct RetentionParams {
  std::string_view queue;
  Retention retention;
};
// Marks dead the jobs whose last allowed attempt's lease ended by `now`.
// And ends the waits of suspended jobs that timed out and the jobs whose
// deadline passed (C3.23, C3.24); with `waits_only`, those alone (the
// executor's waits pass while no batch reaps).
struct ReapParams {
  double now = 0;
  bool waits_only = false;
};
// Stores the server clock's high-water mark (C2.3); never lowers one already
// stored (other sidecars may have stored a higher one).
struct ClockMarkParams {
  double mark = 0;
};
// queue_config (docs/contract.md, "Queue settings"): stores `queue`'s
// settings; the defaults (QueueConfig{}) remove them. From then on claims
// hand out no job of the queue while it is paused, none beyond max_leased
// leased at once, none beyond `rate` claims in any `per` seconds.
struct QueueConfigParams {
  std::string_view queue;
  QueueConfig config;
};
// group_config (C3.25): `group` of `queue` gets settings of its own. Each
// set_* says whether the request names that setting; its value in `value`
// (nullopt: the override removed, the queue's setting again). A group left
// with none has no row; queue_config.group_overrides counts the queue's
// groups that have one, and a queue that has any has settings (limits_of).
struct GroupConfigParams {
  std::string_view queue;
  std::string_view group;
  bool set_max_leased = false;
  bool set_rate = false;
  bool set_per = false;
  GroupOverride value{};
};
// Adds or replaces a periodic job by name (ok); a replaced one keeps its
// creation time and last tick, so no tick is enqueued twice. Not ok when it
// is new and kMaxSchedules (fenceq_protocol/limits.hpp) exist already.
struct ScheduleSetParams {
  const Schedule* schedule = nullptr;
  double now = 0;
};
// ok when the schedule existed and is gone.
struct ScheduleDeleteParams {
  std::string_view name;
};
// Takes tick `tick` of schedule `name` for this daemon (ok): later than the
// schedule's last tick and its creation, and now its last tick. Not ok when
// it was taken before (by any sidecar) or the schedule is gone. The caller
// then enqueues the tick's job.
struct TakeTickParams {
  std::string_view name;
  double tick = 0;
};

// The writes declared in protocol/ops/ops.json with a `store` section
// (emit_store.py): their parameter structs, generated in the
// store's terms from the op's fields (what each does: its summary, and
// protocol/ops/doc/OP.md). Each is an alternative of Call::Params below,
// after the others.
#include "fenceq_protocol/store_calls.inc"

// One write (or lease check) of a batch, for Store::run.
struct Call {
  using Params = std::variant<EnqueueParams, ClaimParams, ClaimNextParams, RenewParams,
                              CompleteParams, ReleaseParams, FailParams, CheckParams,
                              UnclaimParams, RetryParams, CancelParams, PurgeParams, ReapParams,
                              ClockMarkParams, QueueConfigParams, GroupConfigParams,
                              ScheduleSetParams,
                              ScheduleDeleteParams, TakeTickParams, RetentionParams, StepSaveParams,
                              SuspendParams, SignalParams
#define FENCEQ_STORE_CALL(op, Name, P, event) , P
#include "fenceq_protocol/store_call_list.inc"
#undef FENCEQ_STORE_CALL
                              >;
  Params params;
  std::size_t group = 0;  // the request it belongs to: a refused call refuses its group
};

// The lease a call names (renew, complete, release, fail, check, unclaim),
// or nullptr.
inline const LeaseParams* lease_of(const Call& c) {
  return std::visit(
      [](const auto& p) -> const LeaseParams* {
        if constexpr (std::is_base_of_v<LeaseParams, std::decay_t<decltype(p)>>) {
          return &p;
        } else {
          return nullptr;
        }
      },
      c.params);
}

// The job a call may finish when it succeeds (complete, fail, cancel): the
// awaits parked on it look again. Empty for every other call.
inline std::string_view finishing_job(const Call& c) {
  if (const auto* p = std::get_if<CompleteParams>(&c.params)) return p->id;
  if (const auto* p = std::get_if<FailParams>(&c.params)) return p->id;
  if (const auto* p = std::get_if<CancelParams>(&c.params)) return p->id;
  return {};
}

// What a Call answered: `ok` for the operations that answer a bool, `number`
// for claim (the fence) and purge (a count), `jobs` for claim_next (each
// parameter struct above says which). `refused`
// (with `why`): the store cannot hold what the call's group asked, and none
// of the group was applied (Kind::refused).
struct CallResult {
  bool ok = false;
  std::string id;  // a keyed enqueue's: the job created, or the one found
  std::optional<std::int64_t> number;
  std::vector<ClaimedJob> jobs;
  bool refused = false;
  std::string why;
};

// The per-queue events (QueueTotals) of the open transaction, noted by the
// statements that did them from the queue they return: no statement of its
// own, except one lookup of the job's queue for a refused write. Stores keep
// one, empty it at begin() and rollback(), and hand it over with
// take_queue_totals().
class QueueTally {
 public:
  using Entries = std::vector<std::pair<std::string, QueueTotals>>;
  // The queue's entry, added when missing.
  QueueTotals& at(std::string_view queue) {
    // A batch touches a few queues, most often one: a short vector, the last
    // one used looked at first.
    if (last_ < entries_.size() && entries_[last_].first == queue) return entries_[last_].second;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == queue) {
        last_ = i;
        return entries_[i].second;
      }
    }
    last_ = entries_.size();
    return entries_.emplace_back(std::string(queue), QueueTotals{}).second;
  }
  Entries take() {
    last_ = 0;
    return std::exchange(entries_, {});
  }
  void clear() {
    entries_.clear();
    last_ = 0;
  }

 private:
  Entries entries_;
  std::size_t last_ = 0;
};

// A job change the events stream publishes (C3.19; protocol/PROTOCOL.md,
// "Events"), noted by the store in the order it made them once
// EventNotes::note() turned it on, and taken with EventNotes::take() once the
// transaction committed: a rolled-back one publishes nothing.
enum class JobEventKind {
  enqueued, claimed, completed, failed, retried, dead, cancelled, snoozed, unblocked,
  suspended, signalled, expired, step_saved
};
std::string_view job_event_name(JobEventKind k);
// What job_event() reads of a job row, before and after a change.
struct JobEventRow {
  bool done = false, dead = false, cancelled = false;
  std::int64_t fence = 0, attempts = 0;
  double not_before = 0;
  bool owned = false;  // owner IS NOT NULL
  bool error_changed = false;  // `after` only: its error differs from `before`'s
};
// The call that made a change, where the row alone does not tell: a fail or
// a max_runtime cut (failed), a snooze, a retry of a job not yet dead; or
// `infer`, when the store cannot say (PostgreSQL's trigger): then a lease
// ended with a new error, delay or fence failed, one whose attempt was given
// back with a new delay snoozed, one whose attempts start over retried.
// signal: a signal woke it (C3.23); expire: its deadline passed (C3.24).
enum class JobEventCall { other, fail, snooze, retry, infer, signal, expire };

// The JobEventCall of a call's parameters (SqliteStore's events): fail's and
// retry's here, a declared write's from its `event` in ops.json (other when
// it names none).
template <class P>
inline constexpr JobEventCall kEventCallOf = JobEventCall::other;
template <>
inline constexpr JobEventCall kEventCallOf<FailParams> = JobEventCall::fail;
template <>
inline constexpr JobEventCall kEventCallOf<RetryParams> = JobEventCall::retry;
template <>
inline constexpr JobEventCall kEventCallOf<SignalParams> = JobEventCall::signal;
#define FENCEQ_STORE_CALL(op, Name, P, event) \
  template <>                                  \
  inline constexpr JobEventCall kEventCallOf<P> = JobEventCall::event;
#include "fenceq_protocol/store_call_list.inc"
#undef FENCEQ_STORE_CALL

// Whether P is a write declared in ops.json with a `store` section: a
// store's one dispatch of them applies it (SqliteStore::apply_declared).
template <class P>
inline constexpr bool kDeclaredCall = false;
#define FENCEQ_STORE_CALL(op, Name, P, event) \
  template <>                                  \
  inline constexpr bool kDeclaredCall<P> = true;
#include "fenceq_protocol/store_call_list.inc"
#undef FENCEQ_STORE_CALL
// The event of a change to a job's row (`before` nullptr: inserted), or
// nullopt when the change publishes none (renew, release, a key's replace).
std::optional<JobEventKind> job_event(const JobEventRow* before, const JobEventRow& after,
                                      JobEventCall call);
struct JobEvent {
  JobEventKind kind = JobEventKind::enqueued;
  std::string id, queue;
  std::int64_t fence = 0;
  std::optional<std::string> owner;  // claimed only
  std::optional<std::string> group;
  bool operator==(const JobEvent&) const = default;
};

// What a store reads, and all a reader from Store::open_reader() can do:
// the reads of the executor's store (in its open transaction, or each in a
// transaction of its own) and of the stats reader's (on its own connection,
// beside the group commit). Every function may throw StoreError (the
// database failed).
class StoreReads {
 public:
  virtual ~StoreReads() = default;

  // C3.2: the job's row, or nullopt when the id does not exist.
  virtual std::optional<JobState> state(std::string_view id) = 0;
  // One page of jobs in `filter.order` after its cursor (ListFilter), at most `limit`.
  virtual std::vector<JobInfo> list(const ListFilter& filter, double now) = 0;
  // The job's payload as it was enqueued (nullopt: none, or no such job).
  virtual std::optional<Payload> payload(std::string_view id) = 0;
  // `results` (C3.12): each of `ids` once, in the order given, with its
  // state at `now` and its result, or nullopt when it does not exist.
  virtual JobResults results(const std::vector<std::string>& ids, double now) = 0;
  // `job`'s place in a graph (C3.13): the jobs it waits (or waited) for,
  // and those of its children still blocked (at most
  // protocol::kMaxBlockedChildren), each in id order (rows::links_sql).
  // With the job's headers (C3.18), read in the same statement.
  struct Links {
    std::vector<std::string> after, blocked_children;
    Headers headers;
    Steps steps;  // C3.22
    // C3.23: the signal that woke it (signalled), and while it is
    // suspended, when its wait ends and whether it then fails.
    bool signalled = false;
    std::optional<Payload> signal;
    std::optional<double> suspend_timeout;
    bool suspend_fails = false;
  };
  virtual Links links(std::string_view id) = 0;
  // When a job of `queue` next becomes claimable by time alone (a lease or a
  // delay ending), after `now`; nullopt when none will.
  virtual std::optional<double> next_claimable_at(std::string_view queue, double now) = 0;
  // Counts per queue and state, and each queue's oldest ready age, with its settings.
  virtual std::vector<QueueStats> queue_stats(double now) = 0;
  // The queue's settings as stored (QueueConfigParams), nullopt when it has none.
  virtual std::optional<QueueConfig> queue_config(std::string_view queue) = 0;
  // Every queue's settings, by queue name.
  virtual std::vector<std::pair<std::string, QueueConfig>> queue_configs() = 0;
  // Every queue's retention (RetentionParams), by queue name.
  virtual std::vector<std::pair<std::string, Retention>> retentions() = 0;
  // The groups' own settings (C3.25): (queue, group, settings), the first
  // kMaxStatsOverrides of each queue by group name (rows::kGroupConfigs).
  virtual std::vector<std::tuple<std::string, std::string, GroupOverride>> group_configs() = 0;
  // A periodic job as stored, with its creation time.
  struct StoredSchedule {
    Schedule schedule;  // `last` as stored; `next` not computed
    double created = 0;
  };
  // Every schedule by name, with its creation time and last tick.
  virtual std::vector<StoredSchedule> schedules() = 0;
  // For logs: the database, without any password. No throw.
  virtual std::string describe() const = 0;
};

// What a store may add, reached like shared(): a store that has it answers
// itself, the others nullptr.
//
// EventNotes (--events, C3.19): note() turns on, from now on, the noting of
// each job change (JobEvent) of a transaction (off by default, when a store
// notes nothing at no cost; throws StoreError when the store cannot);
// take() answers the JobEvents noted since begin(), in order, emptied (also
// by begin() and rollback()), with no database access, once the transaction
// committed.
class EventNotes {
 public:
  virtual void note() = 0;
  virtual std::vector<JobEvent> take() = 0;

 protected:
  ~EventNotes() = default;
};

// OutboxLedger (--outbox, outbox/outbox.hpp, C3.21): recorded(), outside a
// transaction, at start: every seq recorded as drained. In the open
// transaction: record() records `seq` (and raises the high-water mark to
// it), false when it was recorded already; forget() drops seqs whose rows
// are gone from the outbox for good.
class OutboxLedger {
 public:
  virtual std::vector<std::int64_t> recorded() = 0;
  virtual bool record(std::int64_t seq) = 0;
  virtual void forget(const std::vector<std::int64_t>& seqs) = 0;

 protected:
  ~OutboxLedger() = default;
};

// A store is used by one thread at a time: the executor's, and a reader from
// open_reader() by the thread it was opened for. Every function may throw
// StoreError (the database failed; the caller rolls back) unless it says
// noexcept; a refusal by the contract is a value (an empty optional, false).
// Its reads are StoreReads'; what is here writes, or tells about writes.
class Store : public StoreReads {
 public:
  // Opens the transaction the next calls run in; throws StoreError (nothing open then).
  virtual void begin() = 0;
  // Commits it; throws StoreError, and the transaction is then rolled back.
  virtual void commit() = 0;
  // Ends the open transaction, if any, undoing it; never throws.
  virtual void rollback() noexcept = 0;

  // The one write path: runs `calls` in order, in the open transaction, into
  // `out` (one result each, as each parameter struct says). A call the store
  // cannot hold is refused with its whole group (CallResult::refused), none
  // of that group applied; the others go on. When `commit_after`, a store
  // that can ends the transaction with the calls (one round trip to a
  // database) and returns true; otherwise false, and the caller commits.
  // Throws StoreError when the database fails (the caller rolls back).
  virtual bool run(const std::vector<Call>& calls, std::vector<CallResult>& out,
                   bool commit_after) = 0;

  // What the open transaction changed that a parked claim_next cares about.
  struct QueueChanges {
    // The queues in which a job was added or given back (enqueue, release,
    // fail with attempts left, unclaim, retry), each once: a claim parked on
    // one of them may find a job now.
    std::vector<std::string> freed;
    // (queue, until) of every renewed lease: a renew may end a lease sooner
    // than it was going to end.
    std::vector<std::pair<std::string, double>> lease_ends;
  };
  // The QueueChanges since begin() or the last call, emptied; no database access.
  virtual QueueChanges take_queue_changes() = 0;
  // The QueueTally since begin(), emptied (also by begin() and rollback()); no
  // database access. Taken once the transaction committed: a rolled-back one counts nothing.
  virtual QueueTally::Entries take_queue_totals() = 0;
  // --events (C3.19): the store's notes of job changes (EventNotes), or
  // nullptr when it keeps none. Never throws.
  virtual EventNotes* event_notes() { return nullptr; }
  // --outbox (C3.21): the store's ledger of drained outbox rows
  // (OutboxLedger), or nullptr when it keeps none (PostgreSQL: an
  // application calls fenceq_enqueue() in its own transaction instead).
  virtual OutboxLedger* outbox_ledger() { return nullptr; }
  // A read-only store on its own connection, for another thread (StatsReader);
  // nullptr when there cannot be one (in-memory SQLite).
  virtual std::unique_ptr<StoreReads> open_reader() const = 0;
  // Rows changed since the store opened: a transaction that did not move it
  // can be rolled back instead of committed (no fsync).
  virtual std::int64_t total_changes() = 0;
  // The highest server-clock time ever stored (C2.3; ClockMarkParams), 0 when none.
  virtual double clock_high_water() = 0;
  // What a database shared with other fenceqd adds (PostgreSQL); nullptr when
  // this daemon is its only writer (SQLite). Never throws.
  virtual SharedDatabase* shared() = 0;
  // Settling left for later (C3.13, "When"): a transaction that finishes
  // jobs others wait for settles at most a page of their edges itself and
  // leaves the rest in the store. settle_step(): in the open transaction, a
  // step of a few milliseconds of what is left; `changed`: it wrote
  // something (else nothing needs committing), `left`: some may be left.
  // settle_left(): whether some may be left now (a shared database answers
  // true: another writer may have left some).
  struct SettleStep {
    bool changed = false;
    bool left = false;
  };
  virtual SettleStep settle_step(double) { return {}; }
  virtual bool settle_left() const { return false; }
  // The next transaction (a settle step's, called before its begin()) may
  // commit without waiting for the disk: no reply waits on it, a crash that
  // loses it leaves its work to do again, and the next durable commit takes
  // it along (SQLite: one WAL; PostgreSQL's step does so in the step).
  virtual void relax_next_commit() {}
  // When the store wants a transaction of its own, committed with nothing
  // else in it, for what its commits leave to do by time (SQLite: the run's
  // beat, C1.5); nullopt for never. The executor's upkeep source commits one.
  // Whether jobs may wait on time alone for the reap: a suspended job's
  // timeout (C3.23) or a deadline (C3.24). The executor's waits pass then
  // reaps every kReapEvery even while no request comes (Executor::end_waits).
  virtual bool ends_by_time() const { return true; }
  virtual std::optional<std::chrono::steady_clock::time_point> upkeep_due() const {
    return std::nullopt;
  }

  // --- typed helpers (not virtual): one Call, run alone through run() -----
  // The daemon's own (its side transactions: schedules, retention, reaping,
  // the clock's mark, an undelivered claim given back); the tests' others are
  // tests/support/store_calls.hpp's. Each returns what its parameter struct
  // says; a refused call throws StoreError (Kind::refused) instead, nothing
  // of it applied.
  bool enqueue(const NewJob& job, double now);
  std::vector<ClaimedJob> claim_next(std::string_view queue, std::string_view owner, double now,
                                     double ttl, std::int64_t max);
  bool unclaim(std::string_view id, std::string_view owner, std::int64_t fence);
  void reap_exhausted(double now);
  void end_waits(double now);
  void set_clock_high_water(double t);
  void set_queue_config(std::string_view queue, const QueueConfig& config);
  void set_group_config(const GroupConfigParams& params);
  void set_retention(std::string_view queue, const Retention& retention);
  bool schedule_set(const Schedule& schedule, double now);
  bool schedule_delete(std::string_view name);
  bool take_tick(std::string_view name, double tick);
  // One call, run alone: what run() answered for it.
  CallResult run_one(Call::Params params);
};

// Adds each queue's settings to its stats (both sorted by queue name, as
// the stores' ORDER BY queue gives them); a queue with settings and no job
// gets an entry of its own.
void add_configs(std::vector<QueueStats>& stats,
                 std::vector<std::pair<std::string, QueueConfig>> configs);
// The same for the groups' own settings (C3.25; each queue that has some
// has settings, so its entry is there).
void add_group_configs(std::vector<QueueStats>& stats,
                       std::vector<std::tuple<std::string, std::string, GroupOverride>> rows);
// The same for each queue's retention (C3.17).
void add_retentions(std::vector<QueueStats>& stats,
                    std::vector<std::pair<std::string, Retention>> retentions);

}  // namespace fenceq::daemon
