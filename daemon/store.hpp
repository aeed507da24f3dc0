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
  bool enqueue(std::string_view id);
  // C3.2: the row, or nullopt when the id does not exist.
  std::optional<protocol::JobRow> state(std::string_view id);
  // C3.3: the new fence, or nullopt (missing, done, or leased with until > now).
  // `ttl` > 0 and `now + ttl` finite are the caller's to check.
  std::optional<std::int64_t> claim(std::string_view id, std::string_view owner, double now,
                                    double ttl);
  // C3.4: true when the current lease (owner, fence, not done, until > now) was extended.
  bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
             double ttl);
  // C3.5: true when the current lease stored `result` and marked the job done.
  bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                const std::optional<std::string>& result, double now);
  // C3.6: true when owner and fence match on a job not done; the fence is kept.
  bool release(std::string_view id, std::string_view owner, std::int64_t fence);

  // The highest server-clock time ever used (C2.3), 0 when none was stored.
  double clock_high_water();
  void set_clock_high_water(double t);

  sqlite3* raw() { return db_.get(); }  // for tests and diagnostics only

 private:
  sqlite3_stmt* prepare(const char* sql);
  void exec(const char* sql);
  [[noreturn]] void fail(const char* what, int rc);
  int step_done(sqlite3_stmt* s, const char* what);  // runs to SQLITE_DONE, returns changes

  SqliteHandle db_;
  Statement begin_, commit_, rollback_;
  Statement enqueue_, state_, claim_, renew_, complete_, release_;
  Statement get_meta_, set_meta_;
};

}  // namespace fenceq::daemon
