// The SQLite store's statement helpers, shared by its files (sqlite_store.cpp,
// sqlite_control.cpp): binding a call's parameters (Use) and reading a row's
// columns (SqliteRow, for the shared row readers of store_rows.hpp).
#pragma once

#include <sqlite3.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fenceq/types.hpp"

namespace fenceq::daemon::sqlite {

// Every write of a job runs `OR FAIL`, which needs no statement journal:
// with SQLite's default (ABORT) a statement that changes a page already
// changed in the batch's transaction first copies it to an undo log of its
// own, to undo that statement alone should it fail. fenceq never undoes one
// statement: a statement that fails fails its whole batch, and the
// transaction is rolled back (Executor::run). (Only a constraint error
// differs between the two, and the store's writes raise none.) SQLite keeps
// the journal all the same for a write that calls a function (the claims'
// fenceq_count, fail's max): those journals stay in memory, in small chunks
// (memory_policy.hpp).
inline const std::string kNoUndo = "OR FAIL ";

// Statements finalized so far in this process (Finalizer): the entries
// param_index remembered before are then forgotten.
inline std::atomic<std::uint64_t> finalized{0};

// Finalizes a prepared statement (Statement's deleter).
struct Finalizer {
  void operator()(sqlite3_stmt* s) const {
    finalized.fetch_add(1, std::memory_order_relaxed);
    sqlite3_finalize(s);
  }
};

// sqlite3_bind_parameter_index(s, name), remembered. SQLite finds a name by
// comparing it with each of the statement's in turn (3% of a job's
// instructions in `fenceq-bench --workload batch`, callgrind). The names are
// literals of ours, so a small per-thread table keyed by the statement's and
// the name's addresses remembers each index until any statement is
// finalized (as the store's live as long as the store, that is at its
// start and its end): a statement prepared at a freed one's address never
// gets the freed one's index.
inline int param_index(sqlite3_stmt* s, const char* name) {
  struct Entry {
    sqlite3_stmt* s = nullptr;
    const char* name = nullptr;
    std::uint64_t epoch = 0;
    int index = 0;
  };
  thread_local std::array<Entry, 1024> remembered{};
  const auto h = reinterpret_cast<std::uintptr_t>(s) * 0x9E3779B97F4A7C15ULL ^
                 reinterpret_cast<std::uintptr_t>(name);
  auto& e = remembered[(h ^ (h >> 29)) % remembered.size()];
  const auto epoch = finalized.load(std::memory_order_relaxed);
  if (e.s == s && e.name == name && e.epoch == epoch) return e.index;
  e = Entry{s, name, epoch, sqlite3_bind_parameter_index(s, name)};
  return e.index;
}

// Resets a statement when a call leaves, whatever happened, so no statement
// keeps a read transaction open or points at a caller's buffers.
class Use {
 public:
  explicit Use(sqlite3_stmt* s) : s_(s) {}
  ~Use() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

  Use& text(int i, std::string_view v) {
    // SQLITE_STATIC: the view outlives the step; bindings are cleared in ~Use.
    // An empty view may have no data: "" (a null pointer would bind NULL).
    sqlite3_bind_text(s_, i, v.empty() ? "" : v.data(), static_cast<int>(v.size()),
                      SQLITE_STATIC);
    return *this;
  }
  Use& opt_text(int i, const std::optional<std::string>& v) {
    if (v) return text(i, *v);
    sqlite3_bind_null(s_, i);
    return *this;
  }
  Use& real(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Use& integer(int i, std::int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Use& blob(int i, std::string_view v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  // A job's payload: TEXT or BLOB as sent (str or bin), so claim_next gives
  // back the same msgpack type; NULL for none.
  Use& payload(int i, const Payload* p) {
    if (!p) {
      sqlite3_bind_null(s_, i);
      return *this;
    }
    return p->binary ? blob(i, p->bytes) : text(i, p->bytes);
  }
  // The index of a named parameter (":now"); statements are ours, so a
  // missing name is a programming error caught by the tests.
  int at(const char* name) const { return param_index(s_, name); }

 private:
  sqlite3_stmt* s_;
};

// A payload column: TEXT or BLOB as the job was enqueued (str or bin), or none.
inline std::optional<Payload> column_payload(sqlite3_stmt* s, int i) {
  const int type = sqlite3_column_type(s, i);
  if (type == SQLITE_NULL) return std::nullopt;
  const auto* p = static_cast<const char*>(sqlite3_column_blob(s, i));
  return Payload{std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, i))),
                 type == SQLITE_BLOB};
}

inline std::optional<std::string> column_text(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}

// The current row of a statement, for the shared row readers (store_rows.hpp).
struct SqliteRow {
  sqlite3_stmt* s;
  bool null(int c) const { return sqlite3_column_type(s, c) == SQLITE_NULL; }
  std::optional<std::string> text(int c) const { return column_text(s, c); }
  std::int64_t integer(int c) const { return sqlite3_column_int64(s, c); }
  double real(int c) const { return sqlite3_column_double(s, c); }
  std::optional<Payload> payload(int c) const { return column_payload(s, c); }
};

}  // namespace fenceq::daemon::sqlite
