// fenceq/fenced.hpp: fenced writes to the application's own tables
// (Kleppmann's fencing token). Header-only; no database driver is a
// dependency of fenceq.
//
// fenceqd refuses a stale worker's complete, but a worker's real side effect
// is usually a write to a table of the application, which fenceqd does not
// see (contract C2.4). The row keeps the job's fence and the write is
// conditional on it, so the application's database itself refuses the write
// of a worker whose lease was taken over, even when fenceqd is unreachable at
// that moment and even when the worker's complete never arrives.
//
// The rule, the same in every fenceq client: the write applies when the row's
// fence column is NULL (never fenced yet) or not greater than the writer's
// fence (<=: the same lease may write its row again, e.g. a retried
// statement); it is refused when the row holds a higher fence, written by a
// later claim of the job. Fences of one job only grow (C1.2); those of two
// jobs are unrelated: fence a row by the one job that writes it.
//
//   upsert  INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE fence
//           (PostgreSQL >= 9.5, SQLite >= 3.24). `key` is a PRIMARY KEY or
//           UNIQUE constraint's columns; every NOT NULL column without a
//           default must be in key or values (both databases check the
//           proposed row before they see the conflict).
//   update  UPDATE ... WHERE key AND fence: an existing row only; RowMissing
//           when no row has the key.
//
// fenced_statement() writes the statement (identifiers quoted, values as
// parameters: $1.. for PostgreSQL, ? for SQLite) for any driver. Include
// <sqlite3.h> and/or <libpq-fe.h> before this header to also get
// fenced_upsert(db, w) / fenced_update(db, w) for a sqlite3* and a PGconn*:
// true when applied, false when refused as stale; one statement, in whatever
// transaction the connection is in.
//
//   #include <sqlite3.h>
//   #include <fenceq/fenced.hpp>
//   fenceq::FencedWrite w{.table = "invoices", .key = {{"id", "invoice-42"}},
//                         .values = {{"status", "paid"}}, .fence = *fence};
//   if (!fenceq::fenced_upsert(db, w)) { /* stale: a newer lease wrote it */ }

#ifndef FENCEQ_FENCED_HPP
#define FENCEQ_FENCED_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace fenceq {

enum class SqlDialect { postgresql, sqlite };

// A parameter's value: NULL, an integer, a double or text.
using SqlValue = std::variant<std::nullptr_t, std::int64_t, double, std::string>;
// Columns and their values, in order.
using SqlColumns = std::vector<std::pair<std::string, SqlValue>>;

// One fenced write of one row.
struct FencedWrite {
  std::string table = {};              // one identifier (quoted)
  std::string schema = {};             // optional: "schema"."table" (SQLite: an attached database)
  SqlColumns key = {};                 // the row's key columns; no NULL
  SqlColumns values = {};              // the columns to set
  std::int64_t fence = 0;              // the job's fence
  std::string fence_column = "fence";  // BIGINT (PostgreSQL) / INTEGER (SQLite), NULL until fenced
};

enum class FencedKind {
  upsert,  // the statement fenced_upsert runs
  update,  // fenced_update's
  exists,  // SELECT 1 of the row by its key (fenced_update's check after a refusal)
};

struct SqlStatement {
  std::string text;
  std::vector<SqlValue> params;  // in placeholder order
};

// fenced_update found no row with the key; nothing was written.
class RowMissing : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `name` as one quoted identifier: we"ird -> "we""ird". Throws
// std::invalid_argument for an empty name or one holding NUL.
inline std::string quote_identifier(std::string_view name) {
  if (name.empty()) throw std::invalid_argument("fenced write: an empty identifier");
  if (name.find('\0') != std::string_view::npos) {
    throw std::invalid_argument("fenced write: an identifier cannot hold NUL");
  }
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

namespace fenced_detail {

inline void check(const FencedWrite& w) {
  if (w.key.empty()) throw std::invalid_argument("fenced write: key needs at least one column");
  if (w.fence < 0) throw std::invalid_argument("fenced write: a negative fence");
  auto named = [](const SqlColumns& cols, const std::string& name) {
    for (const auto& [c, v] : cols) {
      if (c == name) return true;
    }
    return false;
  };
  for (const auto& [c, v] : w.key) {
    if (std::holds_alternative<std::nullptr_t>(v)) {
      throw std::invalid_argument("fenced write: key column " + c + " is NULL: it matches no row");
    }
    if (named(w.values, c)) throw std::invalid_argument("fenced write: " + c + " in key and values");
  }
  if (named(w.key, w.fence_column) || named(w.values, w.fence_column)) {
    throw std::invalid_argument("fenced write: the fence column is set by fence, not key or values");
  }
}

}  // namespace fenced_detail

// The statement of a fenced write and its parameters. Throws
// std::invalid_argument for an empty key, a NULL key value, a column in both
// key and values, the fence column among them, a negative fence or a bad name.
inline SqlStatement fenced_statement(FencedKind kind, SqlDialect dialect, const FencedWrite& w) {
  fenced_detail::check(w);
  SqlStatement s;
  auto mark = [&](const SqlValue& v) {
    s.params.push_back(v);
    return dialect == SqlDialect::postgresql ? "$" + std::to_string(s.params.size()) : std::string("?");
  };
  const std::string t =
      (w.schema.empty() ? "" : quote_identifier(w.schema) + ".") + quote_identifier(w.table);
  const std::string f = quote_identifier(w.fence_column);
  auto where_key = [&] {
    std::string out;
    for (const auto& [c, v] : w.key) {
      out += (out.empty() ? "" : " AND ") + quote_identifier(c) + " = " + mark(v);
    }
    return out;
  };
  if (kind == FencedKind::exists) {
    s.text = "SELECT 1 FROM " + t + " WHERE " + where_key();
  } else if (kind == FencedKind::update) {
    std::string sets;
    for (const auto& [c, v] : w.values) sets += quote_identifier(c) + " = " + mark(v) + ", ";
    sets += f + " = " + mark(w.fence);
    std::string where = where_key();
    s.text = "UPDATE " + t + " SET " + sets + " WHERE " + where + " AND (" + f + " IS NULL OR " + f +
             " <= " + mark(w.fence) + ")";
  } else {
    std::string keys, columns, marks, sets;
    for (const auto& [c, v] : w.key) {
      keys += (keys.empty() ? "" : ", ") + quote_identifier(c);
      marks += (marks.empty() ? "" : ", ") + mark(v);
    }
    for (const auto& [c, v] : w.values) {
      columns += ", " + quote_identifier(c);
      marks += ", " + mark(v);
      sets += quote_identifier(c) + " = excluded." + quote_identifier(c) + ", ";
    }
    marks += ", " + mark(w.fence);
    sets += f + " = excluded." + f;
    s.text = "INSERT INTO " + t + " (" + keys + columns + ", " + f + ") VALUES (" + marks +
             ") ON CONFLICT (" + keys + ") DO UPDATE SET " + sets + " WHERE " + t + "." + f +
             " IS NULL OR " + t + "." + f + " <= excluded." + f;
  }
  return s;
}

}  // namespace fenceq

#endif  // FENCEQ_FENCED_HPP

// --- sqlite3 (when <sqlite3.h> was included first) ---
#if defined(SQLITE_VERSION) && !defined(FENCEQ_FENCED_SQLITE3)
#define FENCEQ_FENCED_SQLITE3
#include <memory>

namespace fenceq {
namespace fenced_detail {

// Runs `s` on `db`: the rows it changed, or (a query) 1 when it returned a row.
inline int run(sqlite3* db, const SqlStatement& s, bool query) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, s.text.c_str(), static_cast<int>(s.text.size()), &raw, nullptr) !=
      SQLITE_OK) {
    throw std::runtime_error(std::string("fenced write: ") + sqlite3_errmsg(db));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    const int at = static_cast<int>(i + 1);
    const SqlValue& v = s.params[i];
    int rc = SQLITE_OK;
    if (std::holds_alternative<std::nullptr_t>(v)) rc = sqlite3_bind_null(raw, at);
    if (auto* n = std::get_if<std::int64_t>(&v)) rc = sqlite3_bind_int64(raw, at, *n);
    if (auto* d = std::get_if<double>(&v)) rc = sqlite3_bind_double(raw, at, *d);
    if (auto* text = std::get_if<std::string>(&v)) {
      rc = sqlite3_bind_text64(raw, at, text->data(), text->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    }
    if (rc != SQLITE_OK) throw std::runtime_error(std::string("fenced write: ") + sqlite3_errmsg(db));
  }
  const int rc = sqlite3_step(raw);
  if (query && (rc == SQLITE_ROW || rc == SQLITE_DONE)) return rc == SQLITE_ROW ? 1 : 0;
  if (rc != SQLITE_DONE) throw std::runtime_error(std::string("fenced write: ") + sqlite3_errmsg(db));
  return sqlite3_changes(db);
}

inline bool write(sqlite3* db, FencedKind kind, const FencedWrite& w) {
  if (run(db, fenced_statement(kind, SqlDialect::sqlite, w), false) > 0) return true;
  if (kind == FencedKind::update &&
      run(db, fenced_statement(FencedKind::exists, SqlDialect::sqlite, w), true) == 0) {
    throw RowMissing("fenced write: no row of " + w.table + " has the key");
  }
  return false;
}

}  // namespace fenced_detail

// Inserts the row or updates it unless a higher fence wrote it: true when
// applied, false when refused as stale. Throws std::runtime_error with
// SQLite's message when the statement fails.
inline bool fenced_upsert(sqlite3* db, const FencedWrite& w) {
  return fenced_detail::write(db, FencedKind::upsert, w);
}

// Updates the existing row unless a higher fence wrote it: true when applied,
// false when refused as stale; throws RowMissing when no row has the key.
inline bool fenced_update(sqlite3* db, const FencedWrite& w) {
  return fenced_detail::write(db, FencedKind::update, w);
}

}  // namespace fenceq
#endif  // sqlite3

// --- libpq (when <libpq-fe.h> was included first) ---
#if defined(LIBPQ_FE_H) && !defined(FENCEQ_FENCED_LIBPQ)
#define FENCEQ_FENCED_LIBPQ
#include <charconv>
#include <cstdlib>
#include <memory>

namespace fenceq {
namespace fenced_detail {

// Runs `s` on `conn` (parameters as text, typed by the server from their
// columns): the rows it changed, or (a query) the rows it returned.
inline int run(PGconn* conn, const SqlStatement& s, bool query) {
  std::vector<std::string> text(s.params.size());
  std::vector<const char*> values(s.params.size(), nullptr);
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    const SqlValue& v = s.params[i];
    if (std::holds_alternative<std::nullptr_t>(v)) continue;
    if (auto* n = std::get_if<std::int64_t>(&v)) text[i] = std::to_string(*n);
    if (auto* d = std::get_if<double>(&v)) {
      char buf[32];
      text[i].assign(buf, std::to_chars(buf, buf + sizeof buf, *d).ptr);  // shortest round trip
    }
    if (auto* str = std::get_if<std::string>(&v)) {
      if (str->find('\0') != std::string::npos) {
        throw std::invalid_argument("fenced write: PostgreSQL text cannot hold NUL");
      }
      text[i] = *str;
    }
    values[i] = text[i].c_str();
  }
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(
      PQexecParams(conn, s.text.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                   nullptr, nullptr, 0),
      PQclear);
  const ExecStatusType want = query ? PGRES_TUPLES_OK : PGRES_COMMAND_OK;
  if (!res || PQresultStatus(res.get()) != want) {
    throw std::runtime_error(std::string("fenced write: ") + PQerrorMessage(conn));
  }
  return query ? PQntuples(res.get()) : std::atoi(PQcmdTuples(res.get()));
}

inline bool write(PGconn* conn, FencedKind kind, const FencedWrite& w) {
  if (run(conn, fenced_statement(kind, SqlDialect::postgresql, w), false) > 0) return true;
  if (kind == FencedKind::update &&
      run(conn, fenced_statement(FencedKind::exists, SqlDialect::postgresql, w), true) == 0) {
    throw RowMissing("fenced write: no row of " + w.table + " has the key");
  }
  return false;
}

}  // namespace fenced_detail

// Inserts the row or updates it unless a higher fence wrote it: true when
// applied, false when refused as stale. Throws std::runtime_error with
// PostgreSQL's message when the statement fails.
inline bool fenced_upsert(PGconn* conn, const FencedWrite& w) {
  return fenced_detail::write(conn, FencedKind::upsert, w);
}

// Updates the existing row unless a higher fence wrote it: true when applied,
// false when refused as stale; throws RowMissing when no row has the key.
inline bool fenced_update(PGconn* conn, const FencedWrite& w) {
  return fenced_detail::write(conn, FencedKind::update, w);
}

}  // namespace fenceq
#endif  // libpq
