// The job store interface: what the executor asks of whichever database holds
// the jobs. Two implementations: SqliteStore (sqlite_store.hpp), one SQLite
// file opened by exactly one fenceqd (C1.3), the default; and PgStore
// (pg_store.hpp), one PostgreSQL database shared by the fenceqd sidecars of
// many hosts. fenceqd picks one from --db / --store (options.cpp, main.cpp).
//
// The store does not start transactions by itself: the caller brackets a batch
// of operations with begin()/commit() so that many requests share one commit
// (group commit, C1.4), and calls rollback() when anything in the batch failed.
//
// Every operation is one conditional statement, so each read-and-update is
// atomic by construction (C3.3), also against other sidecars on the same
// database. Failures of the database throw StoreError; a refusal by the
// contract (a lost claim, a stale fence) is a return value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fenceq_protocol/codec.hpp"

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
  };
  StoreError(const std::string& what, int code, Kind kind = Kind::internal)
      : std::runtime_error(what), code(code), kind(kind) {}
  int code;  // the SQLite result code; for PostgreSQL 0
  Kind kind;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual void begin() = 0;
  virtual void commit() = 0;  // throws StoreError; the transaction is then rolled back
  virtual void rollback() noexcept = 0;

  // C3.1: true when inserted, false when the id existed (nothing changes).
  // A job whose id was purged before starts from the purged fence (C1.2).
  // `now` stamps the job (creation, and the end of `delay`).
  virtual bool enqueue(const protocol::Request& r, double now) = 0;
  // C3.2: the row, or nullopt when the id does not exist.
  virtual std::optional<JobState> state(std::string_view id) = 0;
  // C3.3: the new fence, or nullopt (missing, done, dead, leased with
  // until > now, delayed, or out of attempts). Counts an attempt.
  // `ttl` > 0 and `now + ttl` finite are the caller's to check.
  virtual std::optional<std::int64_t> claim(std::string_view id, std::string_view owner,
                                            double now, double ttl) = 0;
  // Claims the most urgent claimable job of `queue` (priority, then enqueue
  // order) exactly as claim() would; nullopt when there is none.
  virtual std::optional<ClaimedJob> claim_next(std::string_view queue,
                                                      std::string_view owner, double now,
                                                      double ttl) = 0;
  // C3.4: true when the current lease (owner, fence, not done, until > now) was extended.
  virtual bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
                     double ttl) = 0;
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
  // Marks dead the jobs whose last allowed attempt's lease ended by `now`.
  virtual void reap_exhausted(double now) = 0;
  // Removes done and dead jobs finished at or before now - older_than (of
  // `queue` when given), keeping each id's fence for a later enqueue (C1.2).
  virtual std::int64_t purge(const std::optional<std::string>& queue, double older_than,
                             double now) = 0;
  // One page of jobs ordered by id, after `after`; optional queue and state filters.
  virtual protocol::JobList list(const protocol::Request& r, double now) = 0;
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
  // The earliest time after `now` at which a job of `queue` becomes claimable
  // by time alone (a lease or a delay ending); nullopt when none will.
  virtual std::optional<double> next_claimable_at(std::string_view queue, double now) = 0;
  // Counts per queue and state, and the age of each queue's oldest ready job.
  virtual std::vector<protocol::QueueStats> queue_stats(double now) = 0;
  // queue_stats() for a status line: gives up (nullopt) rather than take
  // longer than about `budget_ms` on a large store.
  virtual std::optional<std::vector<protocol::QueueStats>> queue_stats_within(double now,
                                                                              int budget_ms) = 0;

  // A second connection to the same database, for reads only, to be used by
  // another thread (StatsReader); nullptr when the database cannot have one
  // (an in-memory SQLite database).
  virtual std::unique_ptr<Store> open_reader() const = 0;

  // Rows changed through this store since it opened; a transaction that did
  // not move it can be rolled back instead of committed (no fsync).
  virtual std::int64_t total_changes() = 0;

  // The highest server-clock time ever used (C2.3), 0 when none was stored.
  virtual double clock_high_water() = 0;
  // Stores the mark; never lowers one already stored (other sidecars may have
  // stored a higher one).
  virtual void set_clock_high_water(double t) = 0;

  // The database's own clock, for stores shared by several hosts: the
  // difference (database clock - this host's wall clock) in seconds, measured
  // by the last begin(). nullopt: the store has no clock of its own and the
  // server clock is this host's (SQLite).
  virtual std::optional<double> clock_offset() const { return std::nullopt; }

  // A file descriptor that becomes readable when another writer of the same
  // database may have made jobs claimable (PostgreSQL LISTEN/NOTIFY); -1 when
  // this daemon is the only writer. take_wakeups() clears it and says whether
  // anything arrived. A lost wake-up only delays: parked claims are retried
  // periodically all the same.
  virtual int wakeup_fd() { return -1; }
  struct Wakeups {
    bool all = false;                 // any queue (a reconnect, a sender with many queues)
    std::vector<std::string> queues;  // the queues another writer freed a job in
    bool any() const { return all || !queues.empty(); }
  };
  virtual Wakeups take_wakeups() { return {}; }
  // True when other processes write the same jobs: parked claims must then be
  // retried even in client clock mode.
  virtual bool shared() const { return false; }
  // Grows with every (re)connection to the database; the executor re-reads
  // the clock's high-water mark when it changes (another server may have
  // stored a higher one, or the database failed over to a slower clock).
  virtual std::uint64_t connection_epoch() const { return 0; }

  // The field of `r` this store cannot hold (PostgreSQL text: U+0000), so
  // that the request alone is refused `invalid_argument` before it is
  // applied; nullopt when the store takes it.
  virtual std::optional<std::string> unstorable(const protocol::Request&) const {
    return std::nullopt;
  }

  // How claim_next finds the next job, one step a line (for tests and
  // diagnostics: through an index, never a scan).
  virtual std::string claim_next_plan() = 0;
  // For logs: the database, without any password.
  virtual std::string describe() const = 0;
};

// True when `db` names a PostgreSQL database (a postgresql:// or postgres://
// URI) rather than a SQLite file.
bool is_postgres_uri(std::string_view db);

}  // namespace fenceq::daemon
