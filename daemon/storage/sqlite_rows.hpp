// The SQLite store's statement helpers, shared by its files (sqlite_store.cpp,
// sqlite_control.cpp): binding a call's parameters (Use) and reading a row's
// columns (SqliteRow, for the shared row readers of store_rows.hpp).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fenceq/types.hpp"

namespace fenceq::daemon::sqlite {

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
  int at(const char* name) const { return sqlite3_bind_parameter_index(s_, name); }

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
