// The job store interface: what the executor asks of whichever database holds
// the jobs, in the store's own terms (no wire types). Two implementations:
// SqliteStore (sqlite_store.hpp), one SQLite file opened by exactly one
// fenceqd (C1.3), the default; and PgStore (pg_store.hpp), one PostgreSQL
// database shared by the fenceqd sidecars of many hosts, which also offers
// SharedDatabase. open_store() picks one from the options.
//
// The store does not start transactions by itself: the caller brackets a batch
// of operations with begin()/commit() so that many requests share one commit
// (group commit, C1.4), and calls rollback() when anything in the batch failed.
//
// Every operation is one conditional statement, so each read-and-update is
// atomic by construction (C3.3), also against other sidecars on the same
// database. The rules those statements share are in job_rules.hpp. Failures
// of the database throw StoreError; a refusal by the contract (a lost claim,
// a stale fence) is a return value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fenceq/types.hpp"

namespace fenceq::daemon {

enum class SyncMode { full, normal, off };

struct StoreError : std::runtime_error {
  // What the caller should make of it.
  enum class Kind {
    internal,     // a failure of the store: the batch is answered `internal`
    unavailable,  // the database cannot be reached: `unavailable`, try later
    retry,        // a transient conflict (deadlock, serialization): the batch
                  // was rolled back whole and may simply be run again
    outcome_unknown,  // the connection broke during COMMIT: the batch may or
                      // may not have been applied (`outcome_unknown`)
    fatal,  // COMMIT's fsync failed: the batch may or may not be on disk
            // (`outcome_unknown`), and nothing written since the last good
            // fsync is known durable, so the daemon stops
    refused,  // this one operation cannot be stored as asked (PostgreSQL
              // text cannot hold U+0000): refused before the database saw
              // it; the transaction goes on, the request alone gets
              // `invalid_argument`
  };
  explicit StoreError(const std::string& what, Kind kind = Kind::internal)
      : std::runtime_error(what), kind(kind) {}
  Kind kind;
};

// A job to create (C3.1). The views must outlive the call.
struct NewJob {
  std::string_view id;
  std::string_view queue = "default";
  const Payload* payload = nullptr;  // none when null
  std::int64_t priority = 0;         // higher first; ties in enqueue order
  double delay = 0;                  // seconds before it can be claimed
  std::int64_t max_attempts = 0;     // claims before it is dead; 0: no limit
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
};

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

// One write (or lease check) of a batch, in the store's terms, for
// Store::run: the fields its kind names. Views must outlive the run.
struct Call {
  enum class Kind {
    enqueue, claim, claim_next, renew, complete, release, fail, check, retry, purge, reap,
    set_clock_high_water, cancel
  };
  Kind kind = Kind::check;
  std::size_t group = 0;  // the request it belongs to: a refused call refuses its group
  double now = 0;
  NewJob job;                                          // enqueue
  std::string_view id, owner, queue, error;            // queue: claim_next's
  std::int64_t fence = 0;
  std::int64_t max = 1;                                // claim_next
  double ttl = 0;                                      // claim, claim_next, renew
  std::optional<std::string_view> progress;            // renew
  const std::optional<std::string>* result = nullptr;  // complete
  std::optional<double> retry_in;                      // fail
  std::optional<std::string> purge_queue;              // purge; older_than in `ttl`
  double mark = 0;                                     // set_clock_high_water
};

// What a Call answered: `ok` for the operations that answer a bool, `number`
// for claim (the fence) and purge (a count), `jobs` for claim_next. `refused`
// (with `why`): the store cannot hold what the call's group asked, and none
// of the group was applied (Kind::refused).
struct CallResult {
  bool ok = false;
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

class SharedDatabase;

class Store {
 public:
  virtual ~Store() = default;

  virtual void begin() = 0;
  virtual void commit() = 0;  // throws StoreError; the transaction is then rolled back
  virtual void rollback() noexcept = 0;

  // C3.1: true when inserted, false when the id existed (nothing changes).
  // A job whose id was purged before starts from the purged fence (C1.2).
  // `now` stamps the job (creation, and the end of `delay`).
  virtual bool enqueue(const NewJob& job, double now) = 0;
  // C3.2: the row, or nullopt when the id does not exist.
  virtual std::optional<JobState> state(std::string_view id) = 0;
  // C3.3: the new fence, or nullopt (missing, done, dead, leased with
  // until > now, delayed, or out of attempts). Counts an attempt.
  // `ttl` > 0 and `now + ttl` finite are the caller's to check.
  virtual std::optional<std::int64_t> claim(std::string_view id, std::string_view owner,
                                            double now, double ttl) = 0;
  // Claims the `max` most urgent claimable jobs of `queue` (priority, then
  // enqueue order), each exactly as claim() would (its own fence, lease and
  // attempt), in one statement; most urgent first, empty when there is none.
  virtual std::vector<ClaimedJob> claim_next(std::string_view queue, std::string_view owner,
                                             double now, double ttl, std::int64_t max) = 0;
  // One job, or nullopt.
  std::optional<ClaimedJob> claim_next(std::string_view queue, std::string_view owner, double now,
                                       double ttl) {
    auto jobs = claim_next(queue, owner, now, ttl, 1);
    if (jobs.empty()) return std::nullopt;
    return std::move(jobs.front());
  }
  // C3.4: true when the current lease (owner, fence, not done, until > now) was extended;
  // `progress`, when given, is stored with it (a refused renew stores nothing).
  virtual bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
                     double ttl, std::optional<std::string_view> progress = std::nullopt) = 0;
  // C3.5: true when the current lease stored `result` and marked the job done.
  virtual bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                        const std::optional<std::string>& result, double now) = 0;
  // C3.6: true when owner and fence match on a job not done; the fence is kept.
  virtual bool release(std::string_view id, std::string_view owner, std::int64_t fence) = 0;
  // The current lease reports a failure: the lease ends, `error` is kept, and
  // the job is claimable again at now + backoff (`retry_in`, or 2^(attempts-1)
  // seconds capped at an hour), or dead when its attempts are used up.
  virtual bool fail(std::string_view id, std::string_view owner, std::int64_t fence,
                    std::string_view error, std::optional<double> retry_in, double now) = 0;
  // Gives a claimed job back when its claimant never got the answer: the lease
  // ends and the attempt is not counted; the fence stays (C1.2).
  virtual bool unclaim(std::string_view id, std::string_view owner, std::int64_t fence) = 0;
  // True when (owner, fence) is the job's current lease at `now`. Reads only.
  virtual bool check(std::string_view id, std::string_view owner, std::int64_t fence,
                     double now) = 0;
  // Revives a dead job: attempts start over, claimable at once, fence kept.
  virtual bool retry(std::string_view id, double now) = 0;
  // Cancels a job not done (and not cancelled already): it becomes cancelled
  // (final; retry revives it), its lease ends and its fence goes up by one,
  // so the holder's renew, complete, fail and check are refused. False when
  // the job is missing, done or cancelled already.
  virtual bool cancel(std::string_view id, double now) = 0;
  // Marks dead the jobs whose last allowed attempt's lease ended by `now`.
  virtual void reap_exhausted(double now) = 0;
  // Removes done and dead jobs finished at or before now - older_than (of
  // `queue` when given), keeping each id's fence for a later enqueue (C1.2).
  virtual std::int64_t purge(const std::optional<std::string>& queue, double older_than,
                             double now) = 0;
  // One page of jobs ordered by id, after `after`; optional queue and state filters.
  virtual std::vector<JobInfo> list(const ListFilter& filter, double now) = 0;
  // The job's payload as it was enqueued (nullopt: none, or no such job).
  virtual std::optional<Payload> payload(std::string_view id) = 0;
  // What the open transaction changed, since begin() or the last call, that
  // a parked claim_next cares about; emptied by the call.
  struct QueueChanges {
    // The queues in which a job was added or given back (enqueue, release,
    // fail with attempts left, unclaim, retry), each once: a claim parked on
    // one of them may find a job now.
    std::vector<std::string> freed;
    // (queue, until) of every renewed lease: a renew may end a lease sooner
    // than it was going to end.
    std::vector<std::pair<std::string, double>> lease_ends;
  };
  virtual QueueChanges take_queue_changes() = 0;
  // What the transaction did to each queue's jobs (claims, completes, fails,
  // retries, deaths, expired leases, refused fenced writes), since begin();
  // emptied by the call, by begin() and by rollback(). The executor takes it
  // once the transaction committed: a rolled-back one counts nothing.
  virtual QueueTally::Entries take_queue_totals() = 0;
  // The earliest time after `now` at which a job of `queue` becomes claimable
  // by time alone (a lease or a delay ending); nullopt when none will.
  virtual std::optional<double> next_claimable_at(std::string_view queue, double now) = 0;
  // Counts per queue and state, and the age of each queue's oldest ready job;
  // with each queue's settings (a queue with settings and no job is listed).
  virtual std::vector<QueueStats> queue_stats(double now) = 0;

  // queue_config (issue 18). Stores `queue`'s settings; the defaults
  // (QueueConfig{}) remove them. From then on claim and claim_next hand out
  // no job of the queue while it is paused, none beyond max_leased leased at
  // once, none beyond `rate` claims in any `per` seconds.
  virtual void set_queue_config(std::string_view queue, const QueueConfig& config) = 0;
  // The queue's settings as stored, nullopt when it has none.
  virtual std::optional<QueueConfig> queue_config(std::string_view queue) = 0;
  // Every queue's settings, by queue name.
  virtual std::vector<std::pair<std::string, QueueConfig>> queue_configs() = 0;

  // Periodic jobs. schedule_set adds or replaces one by name (a replaced
  // one keeps its creation time and last tick, so no tick is enqueued
  // twice); false when it is new and kMaxSchedules exist already.
  virtual bool schedule_set(const Schedule& schedule, double now) = 0;
  virtual bool schedule_delete(std::string_view name) = 0;
  // Every schedule by name, with its creation time and last tick.
  struct StoredSchedule {
    Schedule schedule;  // `last` as stored; `next` not computed
    double created = 0;
  };
  virtual std::vector<StoredSchedule> schedules() = 0;
  // Takes tick `tick` of schedule `name` for this daemon: true when it is
  // later than the schedule's last tick and its creation (and is now its
  // last tick), false when it was taken before (by any sidecar) or the
  // schedule is gone. The caller then enqueues the tick's job.
  virtual bool take_tick(std::string_view name, double tick) = 0;

  // A second connection to the same database, for reads only, to be used by
  // another thread (StatsReader); nullptr when the database cannot have one
  // (an in-memory SQLite database).
  virtual std::unique_ptr<Store> open_reader() const = 0;

  // Runs `calls` in order, in the open transaction, into `out` (one result
  // each). A store that can ends the transaction with them when
  // `commit_after` (one round trip to a database for the whole batch) and
  // returns true; otherwise the caller commits. Throws StoreError as the
  // operations do. The default calls the operations above one by one.
  virtual bool run(const std::vector<Call>& calls, std::vector<CallResult>& out,
                   bool commit_after);

  // Rows changed through this store since it opened; a transaction that did
  // not move it can be rolled back instead of committed (no fsync).
  virtual std::int64_t total_changes() = 0;

  // The highest server-clock time ever used (C2.3), 0 when none was stored.
  virtual double clock_high_water() = 0;
  // Stores the mark; never lowers one already stored (other sidecars may have
  // stored a higher one).
  virtual void set_clock_high_water(double t) = 0;

  // What a database shared with other fenceqd adds (PostgreSQL); nullptr
  // when this daemon is the database's only writer (SQLite).
  virtual SharedDatabase* shared() = 0;

  // How claim_next finds the next job, one step a line (for tests and
  // diagnostics: through an index, never a scan).
  virtual std::string claim_next_plan() = 0;
  // For logs: the database, without any password.
  virtual std::string describe() const = 0;
};

// A database written by the fenceqd of several hosts. Other writers make jobs
// claimable without this daemon seeing the statement, and time is the
// database's.
class SharedDatabase {
 public:
  // The database's clock minus this host's wall clock in seconds, measured
  // by the last begin(); nullopt until measured once.
  virtual std::optional<double> clock_offset() const = 0;
  // Readable when another writer may have freed a job (LISTEN/NOTIFY); -1
  // while disconnected. take_wakeups() reads what came. A lost wake-up only
  // delays: a reconnection wakes every parked claim.
  virtual int wakeup_fd() = 0;
  struct Wakeups {
    bool all = false;                 // any queue (a reconnect, a sender with many queues)
    std::vector<std::string> queues;  // the queues another writer freed a job in
    bool any() const { return all || !queues.empty(); }
  };
  virtual Wakeups take_wakeups() = 0;
  // Grows with every (re)connection: the executor then re-reads the clock's
  // high-water mark (another server may have stored a higher one, or the
  // database failed over to a slower clock) and retries its parked claims.
  virtual std::uint64_t connection_epoch() const = 0;

 protected:
  ~SharedDatabase() = default;
};

// Adds each queue's settings to its stats (both sorted by queue name, as
// the stores' ORDER BY queue gives them); a queue with settings and no job
// gets an entry of its own.
void add_configs(std::vector<QueueStats>& stats,
                 std::vector<std::pair<std::string, QueueConfig>> configs);

// True when `db` names a PostgreSQL database (a postgresql:// or postgres://
// URI) rather than a SQLite file.
bool is_postgres_uri(std::string_view db);

// Fsyncs the directory that holds `path`, so that a name just created there
// survives a power cut.
void sync_dir_of(const std::string& path);

struct Options;
class DbLock;

// The store the options name, opened, with the locks that make this daemon
// its only writer (C1.3: the SQLite file's; with PostgreSQL, the paths of the
// daemon's ipc:// sockets). Throws with a one-line reason.
struct OpenedStore {
  std::vector<std::unique_ptr<DbLock>> locks;
  std::unique_ptr<Store> store;
  OpenedStore();
  OpenedStore(OpenedStore&&) noexcept;
  ~OpenedStore();
};
OpenedStore open_store(const Options& options);

}  // namespace fenceq::daemon
