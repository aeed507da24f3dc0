// The job store: one SQLite file, opened by exactly one fenceqd (C1.3).
//
// Every SQL statement of fenceq lives in store.cpp. Statements are prepared once
// and kept for the store's life. The store does not start transactions by
// itself: the caller brackets a batch of operations with begin()/commit() so that
// many requests share one fsync (group commit, C1.4), and calls rollback() when
// anything in the batch failed.
//
// Every operation is one conditional statement, so each read-and-update is
// atomic by construction (C3.3). Failures of SQLite throw StoreError; a refusal
// by the contract (a lost claim, a stale fence) is a return value.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {

enum class SyncMode { full, normal, off };

struct StoreError : std::runtime_error {
  StoreError(const std::string& what, int sqlite_code)
      : std::runtime_error(what), code(sqlite_code) {}
  int code;  // the SQLite result code
};

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using SqliteHandle = std::unique_ptr<sqlite3, SqliteCloser>;
using Statement = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

class Store {
 public:
  // Opens or creates the database at `path` (":memory:" works too), switches it
  // to WAL with the given sync level and creates the schema if it is missing.
  // Opening an existing file changes no row (C1.2). Throws StoreError.
  Store(const std::string& path, SyncMode sync);
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store();

  void begin();            // BEGIN IMMEDIATE
  void commit();           // throws StoreError; the transaction is then rolled back
  void rollback() noexcept;

  // C3.1: true when inserted, false when the id existed (nothing changes).
  // A job whose id was purged before starts from the purged fence (C1.2).
  // `now` stamps the job (creation, and the end of `delay`).
  bool enqueue(const protocol::Request& r, double now);
  // C3.2: the row, or nullopt when the id does not exist.
  std::optional<protocol::JobRow> state(std::string_view id);
  // C3.3: the new fence, or nullopt (missing, done, dead, leased with
  // until > now, delayed, or out of attempts). Counts an attempt.
  // `ttl` > 0 and `now + ttl` finite are the caller's to check.
  std::optional<std::int64_t> claim(std::string_view id, std::string_view owner, double now,
                                    double ttl);
  // Claims the most urgent claimable job of `queue` (priority, then enqueue
  // order) exactly as claim() would; nullopt when there is none.
  std::optional<protocol::NextJob> claim_next(std::string_view queue, std::string_view owner,
                                              double now, double ttl);
  // C3.4: true when the current lease (owner, fence, not done, until > now) was extended.
  bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
             double ttl);
  // C3.5: true when the current lease stored `result` and marked the job done.
  bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                const std::optional<std::string>& result, double now);
  // C3.6: true when owner and fence match on a job not done; the fence is kept.
  bool release(std::string_view id, std::string_view owner, std::int64_t fence);
  // The current lease reports a failure: the lease ends, `error` is kept, and
  // the job is claimable again at now + backoff (`retry_in`, or 2^(attempts-1)
  // seconds capped at an hour), or dead when its attempts are used up.
  bool fail(std::string_view id, std::string_view owner, std::int64_t fence,
            std::string_view error, std::optional<double> retry_in, double now);
  // Gives a claimed job back when its claimant never got the answer: the lease
  // ends and the attempt is not counted; the fence stays (C1.2).
  bool unclaim(std::string_view id, std::string_view owner, std::int64_t fence);
  // True when (owner, fence) is the job's current lease at `now`. Reads only.
  bool check(std::string_view id, std::string_view owner, std::int64_t fence, double now);
  // Revives a dead job: attempts start over, claimable at once, fence kept.
  bool retry(std::string_view id, double now);
  // Marks dead the jobs whose last allowed attempt's lease ended by `now`.
  void reap_exhausted(double now);
  // Removes done and dead jobs finished at or before now - older_than (of
  // `queue` when given), keeping each id's fence for a later enqueue (C1.2).
  std::int64_t purge(const std::optional<std::string>& queue, double older_than, double now);
  // One page of jobs ordered by id, after `after`; optional queue and state filters.
  protocol::JobList list(const protocol::Request& r, double now);
  // Counts per queue and state, and the age of each queue's oldest ready job.
  std::vector<protocol::QueueStats> queue_stats(double now);

  // Rows changed through this connection since it opened; a transaction that
  // did not move it can be rolled back instead of committed (no fsync).
  std::int64_t total_changes() { return sqlite3_total_changes64(db_.get()); }

  // The highest server-clock time ever used (C2.3), 0 when none was stored.
  double clock_high_water();
  void set_clock_high_water(double t);

  // EXPLAIN QUERY PLAN of claim_next's statement, one step a line: how it
  // finds the next job (through the jobs_next index, never a scan).
  std::string claim_next_plan();

  sqlite3* raw() { return db_.get(); }  // for tests and diagnostics only

 private:
  sqlite3_stmt* prepare(const char* sql);
  void exec(const char* sql);
  [[noreturn]] void fail(const char* what, int rc);
  int step_done(sqlite3_stmt* s, const char* what);  // runs to SQLITE_DONE, returns changes

  SqliteHandle db_;
  Statement begin_, commit_, rollback_;
  void migrate();

  Statement enqueue_, state_, claim_, renew_, complete_, release_;
  Statement claim_next_, fail_, check_, retry_, reap_, unpurge_, unclaim_;
  Statement purge_keep_, purge_delete_, list_, stats_;
  Statement get_meta_, set_meta_;
  std::int64_t seq_ = 0;         // enqueue order, for FIFO among equal priorities
  bool any_purged_ = false;      // purged_fences has rows: enqueue must look there
};

}  // namespace fenceq::daemon
