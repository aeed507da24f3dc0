#include "service/migrate_to_pg.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_connection.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/sqlite/db_lock.hpp"
#include "storage/sqlite/sqlite_file_check.hpp"
#include "storage/sqlite/sqlite_store.hpp"
#include "storage/store_error.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {
namespace {

constexpr const char* kWhat = "migrate to PostgreSQL";
// fenceq_meta's key that says a run committed (its value: the jobs moved).
constexpr const char* kMigratedKey = "migrated_from_sqlite";
constexpr std::size_t kCopyChunk = 1 << 20;  // bytes handed to libpq at once

// One column of a copied table: its PostgreSQL name(s), how its value is
// written, and the SQLite expression that reads it.
//   t text, i integer, r real, f a fence (the new floor: C1.5),
//   p a payload (bytea and payload_binary: SQLite keeps BLOB or TEXT),
//   x a step's value (bytea and is_bin, from a kind letter and hex).
struct Column {
  const char* pg;
  char kind;
  const char* sqlite;
};

struct Table {
  const char* name;
  std::vector<Column> columns;
  const char* from;  // the SQLite FROM (and ORDER BY) clause
  const char* count = nullptr;  // SQLite's count of them, when not of the table named
};

// Every step of every job (C3.22) as (id, step, kv): kv is its kind letter
// (n: nil, b: bin, s: str) and its value in hex. SQLite keeps a job's first
// steps in its row (jobs.steps: rules::kInlineStepsBytes, rows::StepText),
// read here a step at a time by a recursive walk over the text's bytes
// (lengths count bytes), the others and signals in job_steps.
const std::string& all_steps_sqlite() {
  static const std::string sql = [] {
    const std::string c = "instr(rest, X'3A')";
    const std::string n = "CAST(CAST(substr(rest, 1, " + c + " - 1) AS TEXT) AS INTEGER)";
    const std::string at = "(" + c + " + 1 + " + n + ")";  // its kind letter
    const std::string kind = "CAST(substr(rest, " + at + ", 1) AS TEXT)";
    // A value's length, and where it starts (after the kind, its digits, ':').
    const std::string c2 = "instr(substr(rest, " + at + " + 1), X'3A')";
    const std::string len =
        "CAST(CAST(substr(rest, " + at + " + 1, " + c2 + " - 1) AS TEXT) AS INTEGER)";
    const std::string from = "(" + at + " + 1 + " + c2 + ")";
    return "(WITH RECURSIVE s(id, rest, step, kv) AS (SELECT id, CAST(steps AS BLOB), NULL, NULL "
           "FROM jobs WHERE steps IS NOT NULL UNION ALL SELECT id, CASE " + kind + " WHEN 'n' THEN "
           "substr(rest, " + at + " + 2) ELSE substr(rest, " + from + " + " + len + " + 1) END, "
           "CAST(substr(rest, " + c + " + 1, " + n + ") AS TEXT), CASE " + kind + " WHEN 'n' THEN "
           "'n' ELSE lower(" + kind + ") || hex(substr(rest, " + from + ", " + len + ")) END FROM s "
           "WHERE length(rest) > 0) SELECT id, step, kv FROM s WHERE step IS NOT NULL UNION ALL "
           "SELECT id, step, " + rows::kStepValueSqlite + " FROM job_steps)";
  }();
  return sql;
}

// The columns of jobs, each as PostgreSQL takes it from SQLite's row. A
// job's lease ends (C1.5): the fence moves on, so no worker could write
// with it again, and the job is claimable at once.
std::vector<Column> job_columns() {
  return {{"id", 't', "j.id"},
          {"owner", 't', "CASE WHEN (j.done = 0 AND j.dead = 0) THEN NULL ELSE j.owner END"},
          {"until", 'r', "CASE WHEN (j.done = 0 AND j.dead = 0) THEN 0 ELSE j.until END"},
          {"fence", 'f', "j.fence"},
          {"result", 't', "CASE WHEN j.kids & 32 THEN r.result ELSE j.result END"},
          {"done", 'i', "j.done"},
          {"queue", 't', "j.queue"},
          {"payload, payload_binary", 'p',
           "CASE WHEN j.kids & 16 THEN p.payload ELSE j.payload END"},
          {"priority", 'i', "j.priority"},
          {"not_before", 'r', "j.not_before"},
          {"attempts", 'i', "j.attempts"},
          {"max_attempts", 'i', "j.max_attempts"},
          {"dead", 'i', "j.dead"},
          {"error", 't', "j.error"},
          {"seq", 'i', "j.seq"},
          {"created", 'r', "j.created"},
          {"finished", 'r', "j.finished"},
          {"cancelled", 'i', "j.cancelled"},
          {"progress", 't', "j.progress"},
          {"held", 'i', "CASE WHEN (j.done = 0 AND j.dead = 0) THEN 0 ELSE j.held END"},
          {"ukey", 't', "j.ukey"},
          {"grp", 't', "j.grp"},
          // PostgreSQL keeps the edges' two bits, kKidsSteps and kKidsSuspend;
          // the others say where SQLite keeps a value (its own tables, joined
          // here) or that a job is parked. PostgreSQL keeps every step in
          // job_steps: kKidsSteps for the steps of SQLite's row too, and for
          // its rows of job_steps (a bit that outlived them does not count).
          {"kids", 'i',
           "(j.kids & 259) | CASE WHEN j.steps IS NOT NULL OR (j.kids & 128 AND EXISTS (SELECT "
           "1 FROM job_steps s WHERE s.id = j.id)) THEN 128 ELSE 0 END"},
          {"max_runtime", 'r', "COALESCE(t.max_runtime, 0)"},
          {"deadline", 'r', "0"},
          {"headers", 't', "h.headers"},
          {"expires", 'r', "j.expires"}};
}

const std::string& all_steps_from() {
  static const std::string from = all_steps_sqlite() + " ORDER BY id, step";
  return from;
}
const std::string kCountSteps = "SELECT count(*) FROM " + all_steps_sqlite();
const std::string kCountWithSteps = "SELECT count(DISTINCT id) FROM " + all_steps_sqlite();

const std::vector<Table>& tables() {
  static const std::vector<Table> t = {
      {"jobs",
       job_columns(),
       "jobs j LEFT JOIN job_payloads p ON p.id = j.id LEFT JOIN job_results r ON r.id = j.id "
       "LEFT JOIN job_runtimes t ON t.id = j.id LEFT JOIN job_headers h ON h.id = j.id "
       "ORDER BY j.rowid"},
      {"purged_fences",
       {{"id", 't', "id"}, {"fence", 'f', "fence"}, {"ended", 'i', "ended"}},
       "purged_fences"},
      {"job_waits",
       {{"child", 't', "child"},
        {"blocked", 'i', "blocked"},
        {"after_run", 'i', "after_run"},
        {"wait", 'r', "wait"}},
       "job_waits"},
      {"job_after",
       {{"parent", 't', "parent"}, {"child", 't', "child"}, {"met", 'i', "met"}},
       "job_after"},
      // A step's value as sent, from its kind and hex (the 'x' kind).
      {"job_steps",
       {{"id", 't', "id"}, {"step", 't', "step"}, {"value, is_bin", 'x', "kv"}},
       all_steps_from().c_str(), kCountSteps.c_str()},
      // A suspended job's token, timeout and on_timeout (C3.23).
      {"job_suspends",
       {{"id", 't', "id"}, {"token", 't', "token"}, {"timeout", 'r', "timeout"},
        {"fail", 't', "CASE WHEN fail THEN 't' ELSE 'f' END"}},
       "job_suspends ORDER BY id"},
      // SQLite's `how` is SqliteStore::Settled (how it ended - 1); n keeps the
      // order (PostgreSQL numbers them again, in this order).
      {"settle_pending",
       {{"parent", 't', "parent"}, {"how", 'i', "how + 1"}, {"settled_to", 't', "settled_to"}},
       "settle_pending ORDER BY n"},
      {"queue_config",
       {{"queue", 't', "queue"},
        {"paused", 'i', "paused"},
        {"max_leased", 'i', "max_leased"},
        {"rate", 'i', "rate"},
        {"per", 'r', "per"},
        {"group_max_leased", 'i', "group_max_leased"},
        {"group_rate", 'i', "group_rate"},
        {"group_per", 'r', "group_per"},
        {"group_overrides", 'i', "group_overrides"}},
       "queue_config"},
      // The groups' own settings (C3.25; NULL: the queue's).
      {"group_config",
       {{"queue", 't', "queue"},
        {"grp", 't', "grp"},
        {"max_leased", 'i', "max_leased"},
        {"rate", 'i', "rate"},
        {"per", 'r', "per"}},
       "group_config"},
      {"queue_claims", {{"queue", 't', "queue"}, {"at", 'r', "at"}}, "queue_claims"},
      {"group_claims",
       {{"queue", 't', "queue"}, {"grp", 't', "grp"}, {"at", 'r', "at"}},
       "group_claims"},
      {"schedules",
       {{"name", 't', "name"},
        {"cron", 't', "cron"},
        {"tz", 't', "tz"},
        {"queue", 't', "queue"},
        {"payload, payload_binary", 'p', "payload"},
        {"priority", 'i', "priority"},
        {"max_attempts", 'i', "max_attempts"},
        {"created", 'r', "created"},
        {"last", 'r', "last"}},
       "schedules"},
      {"queue_retention",
       {{"queue", 't', "queue"},
        {"keep_done", 'r', "keep_done"},
        {"keep_dead", 'r', "keep_dead"},
        {"keep_cancelled", 'r', "keep_cancelled"}},
       "queue_retention"},
  };
  return t;
}

// What both stores must agree on once the rows are in: each table's rows,
// and the jobs by state, key, group, attempts and bytes; `pg` null: the
// same SQL on both.
struct Check {
  const char* name;
  const char* sqlite;
  const char* pg = nullptr;
};
const std::vector<Check> kChecks = {
    {"done", "SELECT coalesce(sum(done), 0) FROM jobs"},
    {"dead", "SELECT coalesce(sum(dead), 0) FROM jobs"},
    {"cancelled", "SELECT coalesce(sum(cancelled), 0) FROM jobs"},
    {"blocked", "SELECT count(*) FROM jobs WHERE not_before >= 1e15"},
    {"keyed", "SELECT count(ukey) FROM jobs"},
    {"grouped", "SELECT count(grp) FROM jobs"},
    {"attempts", "SELECT coalesce(sum(attempts), 0) FROM jobs"},
    {"with_headers", "SELECT count(*) FROM job_headers", "SELECT count(headers) FROM jobs"},
    {"with_steps", kCountWithSteps.c_str(), "SELECT count(*) FROM jobs WHERE kids & 128 <> 0"},
    {"suspends", "SELECT count(*) FROM job_suspends"},
    {"group_overrides", "SELECT count(*) FROM group_config"},
    {"with_deadlines", "SELECT count(expires) FROM jobs"},
    {"payload_bytes",
     "SELECT coalesce(sum(length(CAST(CASE WHEN j.kids & 16 THEN p.payload ELSE j.payload END "
     "AS BLOB))), 0) FROM jobs j LEFT JOIN job_payloads p ON p.id = j.id",
     "SELECT coalesce(sum(octet_length(payload)), 0) FROM jobs"},
    {"result_bytes",
     "SELECT coalesce(sum(length(CAST(CASE WHEN j.kids & 32 THEN r.result ELSE j.result END "
     "AS BLOB))), 0) FROM jobs j LEFT JOIN job_results r ON r.id = j.id",
     "SELECT coalesce(sum(octet_length(result)), 0) FROM jobs"},
};

using SqliteDb = SqliteHandle;  // sqlite_store.hpp's
using Stmt = Statement;

Stmt prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    sqlite3_finalize(st);
    throw std::runtime_error("SQLite: " + std::string(sqlite3_errmsg(db)) + " (in: " + sql + ")");
  }
  return Stmt(st);
}

long long sqlite_scalar(sqlite3* db, const std::string& sql) {
  Stmt st = prepare(db, sql);
  if (sqlite3_step(st.get()) != SQLITE_ROW) return 0;
  return sqlite3_column_int64(st.get(), 0);
}

long long pg_scalar(PgConnection& c, const std::string& sql) {
  auto r = c.exec(sql.c_str(), kWhat);
  return PQntuples(r.get()) > 0 ? std::atoll(PQgetvalue(r.get(), 0, 0)) : 0;
}

// COPY's text format: tab between fields, \N for NULL, a backslash before
// the bytes that would end a field or a row.
void put_text(std::string& out, const char* p, std::size_t n, const Table& t, const Column& c,
              sqlite3_stmt* row) {
  if (std::memchr(p, 0, n)) {
    const auto* id = sqlite3_column_text(row, 0);  // the row's first column names it
    throw std::runtime_error(fmt::format(
        "{} '{}': its {} holds U+0000, which PostgreSQL's text cannot hold; change or purge "
        "it (fenceq purge) and run again",
        t.name, id ? reinterpret_cast<const char*>(id) : "?", c.pg));
  }
  for (std::size_t i = 0; i < n; ++i) {
    switch (p[i]) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += p[i];
    }
  }
}

void put_field(std::string& out, sqlite3_stmt* st, int i, const Table& t, const Column& c,
               long long floor) {
  const int type = sqlite3_column_type(st, i);
  if (c.kind == 'f') {
    out += std::to_string(std::max<long long>(sqlite3_column_int64(st, i), floor));
    return;
  }
  if (c.kind == 'x') {  // a step's kind letter and hex: bytea, is_bin
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
    const std::string_view kv =
        p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st, i))) : "n";
    if (kv[0] == 'n') {
      out += "\\N\tt";
      return;
    }
    out += "\\\\x";
    out += kv.substr(1);
    out += kv[0] == 'b' ? "\tt" : "\tf";
    return;
  }
  if (c.kind == 'p') {
    if (type == SQLITE_NULL) {
      out += "\\N\tt";
      return;
    }
    // bytea's hex form (its backslash doubled for COPY), and whether it
    // was sent as msgpack bin (BLOB) or str (TEXT).
    const auto* b = static_cast<const unsigned char*>(sqlite3_column_blob(st, i));
    const int n = sqlite3_column_bytes(st, i);
    static const char* hex = "0123456789abcdef";
    out += "\\\\x";
    for (int k = 0; k < n; ++k) {
      out += hex[b[k] >> 4];
      out += hex[b[k] & 15];
    }
    out += type == SQLITE_BLOB ? "\tt" : "\tf";
    return;
  }
  if (type == SQLITE_NULL) {
    out += "\\N";
  } else if (c.kind == 'i') {
    out += std::to_string(sqlite3_column_int64(st, i));
  } else if (c.kind == 'r') {
    out += fmt::format("{:.17g}", sqlite3_column_double(st, i));
  } else {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
    put_text(out, p, static_cast<std::size_t>(sqlite3_column_bytes(st, i)), t, c, st);
  }
}

void put_copy(PGconn* pg, std::string& buf) {
  if (buf.empty()) return;
  if (PQputCopyData(pg, buf.data(), static_cast<int>(buf.size())) != 1) {
    throw std::runtime_error("PostgreSQL: " + trim(PQerrorMessage(pg)));
  }
  buf.clear();
}

// One table, SQLite's rows into PostgreSQL by COPY; returns the rows.
long long copy_table(sqlite3* db, PgConnection& c, const Table& t, long long floor) {
  std::string pg_cols, select;
  for (const auto& col : t.columns) {
    pg_cols += (pg_cols.empty() ? "" : ", ") + std::string(col.pg);
    select += (select.empty() ? "" : ", ") + std::string(col.sqlite);
  }
  Stmt st = prepare(db, "SELECT " + select + " FROM " + t.from);
  PGconn* pg = c.raw();
  if (!pg) throw std::runtime_error("PostgreSQL: the connection was lost");
  PgResult begin(PQexec(pg, fmt::format("COPY {}({}) FROM STDIN", t.name, pg_cols).c_str()));
  if (PQresultStatus(begin.get()) != PGRES_COPY_IN) {
    throw std::runtime_error("PostgreSQL: " + trim(PQresultErrorMessage(begin.get())));
  }
  const auto started = std::chrono::steady_clock::now();
  const bool tty = ::isatty(2) == 1;
  const long long total =
      t.name == std::string("jobs") ? sqlite_scalar(db, "SELECT count(*) FROM jobs") : 0;
  std::string buf;
  long long rows = 0;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    for (int i = 0; i < static_cast<int>(t.columns.size()); ++i) {
      if (i) buf += '\t';
      put_field(buf, st.get(), i, t, t.columns[i], floor);
    }
    buf += '\n';
    if (buf.size() >= kCopyChunk) put_copy(pg, buf);
    if (++rows % 65536 == 0 && tty && total) {
      std::cerr << fmt::format("\rfenceqd: migrate: {} {}/{}", t.name, rows, total) << std::flush;
    }
  }
  if (rc != SQLITE_DONE) throw std::runtime_error("SQLite: " + std::string(sqlite3_errmsg(db)));
  put_copy(pg, buf);
  if (PQputCopyEnd(pg, nullptr) != 1) {
    throw std::runtime_error("PostgreSQL: " + trim(PQerrorMessage(pg)));
  }
  while (PGresult* r = PQgetResult(pg)) {
    PgResult res(r);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      throw std::runtime_error(
          fmt::format("PostgreSQL refused {}'s rows: {}", t.name, trim(PQresultErrorMessage(r))));
    }
  }
  if (tty && total) std::cerr << "\r";
  std::cerr << fmt::format(
      "fenceqd: migrate: {}: {} rows in {:.1f} s\n", t.name, rows,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return rows;
}

// Every table by COPY. jobs' indexes are built once its rows are in, not a
// row at a time (10^6 jobs: the COPY took 33 s with them kept up to date),
// and its triggers are off meanwhile (the move writes queue_groups itself;
// events are off); the indexes that back a constraint (the primary key) stay.
void copy_all(sqlite3* db, PgConnection& c, long long floor) {
  auto defs = c.exec(
      "SELECT string_agg(pg_get_indexdef(i.indexrelid), '; '), string_agg("
      "'DROP INDEX ' || i.indexrelid::regclass::text, '; ') FROM pg_index i WHERE "
      "i.indrelid = 'jobs'::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE "
      "k.conindid = i.indexrelid)",
      kWhat);
  const std::string rebuild = PQgetvalue(defs.get(), 0, 0);
  if (!rebuild.empty()) c.exec(PQgetvalue(defs.get(), 0, 1), kWhat);
  c.exec("ALTER TABLE jobs DISABLE TRIGGER USER", kWhat);
  for (const auto& t : tables()) copy_table(db, c, t, floor);
  c.exec("ALTER TABLE jobs ENABLE TRIGGER USER", kWhat);
  if (rebuild.empty()) return;
  const auto building = std::chrono::steady_clock::now();
  c.exec(rebuild.c_str(), kWhat);
  std::cerr << fmt::format(
      "fenceqd: migrate: jobs' indexes built in {:.1f} s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - building).count());
}

// Each table's rows and kChecks' figures on both sides, as JSON members
// ("name": n); `differs` lists those that differ.
std::string compare(sqlite3* db, PgConnection& c, std::string& differs) {
  std::string out;
  auto one = [&](const std::string& name, long long a, long long b) {
    out += fmt::format("{}\"{}\":{}", out.empty() ? "" : ",", name, a);
    if (a != b)
      differs += fmt::format("{}{} {} (SQLite) against {} (PostgreSQL)",
                             differs.empty() ? "" : "; ", name, a, b);
  };
  for (const auto& t : tables()) {
    const std::string sql = std::string("SELECT count(*) FROM ") + t.name;
    one(t.name, sqlite_scalar(db, t.count ? t.count : sql), pg_scalar(c, sql));
  }
  for (const auto& k : kChecks) {
    one(k.name, sqlite_scalar(db, k.sqlite), pg_scalar(c, k.pg ? k.pg : k.sqlite));
  }
  return out;
}

// The source: no fenceqd may hold it (its lock), and a file of an older
// schema is upgraded as a start of today's fenceqd would (C1.2: every job
// and fence kept), so that one list of columns reads every file.
SqliteDb open_source(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": no such file");
  check_db_file(path);
  {
    SqliteDb probe;
    sqlite3* d = nullptr;
    sqlite3_open_v2(path.c_str(), &d, SQLITE_OPEN_READONLY, nullptr);
    probe.reset(d);
    const long long version = sqlite_scalar(d, "PRAGMA user_version");
    if (version < rules::kSchemaVersion) {
      probe.reset();
      spdlog::info("{}: schema version {}: upgraded to {} first", path, version,
                   rules::kSchemaVersion);
      SqliteStore upgrade(path, SyncMode::full);
    }
  }
  sqlite3* d = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &d, SQLITE_OPEN_READONLY, nullptr);
  SqliteDb db(d);
  if (rc != SQLITE_OK) throw std::runtime_error(path + ": " + sqlite3_errmsg(d));
  sqlite3_busy_timeout(d, 5000);
  // One read transaction: every table as of one commit.
  if (sqlite3_exec(d, "BEGIN; SELECT count(*) FROM jobs", nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw std::runtime_error(path + ": " + sqlite3_errmsg(d));
  }
  return db;
}

// The epoch past every fence of the file (and the target's own): as
// --restored raises it (C1.5).
long long next_epoch(sqlite3* db, PgConnection& c) {
  const long long recorded =
      sqlite_scalar(db,
                    "SELECT coalesce(max(CAST(value AS INTEGER)), 0) FROM fenceq_meta "
                    "WHERE key = 'fence_epoch'");
  const long long fences = std::max(sqlite_scalar(db, "SELECT coalesce(max(fence), 0) FROM jobs"),
                                    sqlite_scalar(db,
                                                  "SELECT coalesce(max(fence), 0) FROM "
                                                  "purged_fences"));
  return std::max({recorded + 1, (fences >> 32) + 1, pg::fence_epoch_past_all(c, kWhat)});
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out + "\"";
}

int run(const std::string& path, const std::string& uri) {
  const auto started = std::chrono::steady_clock::now();
  DbLock lock(path, "database");
  SqliteDb db = open_source(path);
  PgConnection c(uri, {}, &pg::migrate, false);
  c.exec("BEGIN ISOLATION LEVEL READ COMMITTED", kWhat);
  try {
    // A copy of any size: no statement or idle bound for this transaction,
    // and it waits for the schema's lock as long as it takes (a run killed
    // during a long statement holds it until that statement ends); events
    // off (no subscriber is told of moved jobs as new ones).
    c.exec(
        "SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0; "
        "SET LOCAL lock_timeout = 0; SET LOCAL fenceq.events = 'off'; SELECT "
        "pg_advisory_xact_lock(hashtext('fenceq "
        "schema'), hashtext(COALESCE(current_schema()::text, '')))",
        kWhat);
    std::string differs;
    if (pg_scalar(c, std::string("SELECT count(*) FROM fenceq_meta WHERE key = '") + kMigratedKey +
                         "'") > 0) {
      const std::string counts = compare(db.get(), c, differs);
      c.rollback();
      if (!differs.empty()) {
        std::cerr << "fenceqd: migrate: " << c.described() << " holds a migration already, and "
                  << "the stores differ now: " << differs << "\n";
        return 1;
      }
      std::cout << "{\"migrated\":\"already\",\"from\":" << quoted(path) << "," << counts
                << ",\"check\":\"agree\"}\n";
      return 0;
    }
    const long long there =
        pg_scalar(c,
                  "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM purged_fences) + "
                  "(SELECT count(*) FROM schedules) + (SELECT count(*) FROM queue_config) + "
                  "(SELECT count(*) FROM queue_retention)");
    if (there > 0) {
      c.rollback();
      std::cerr << "fenceqd: migrate: " << c.described() << " already holds fenceq jobs, "
                << "schedules or settings (" << there << " rows): migrate into a new "
                << "database or schema\n";
      return 1;
    }
    const long long epoch = next_epoch(db.get(), c);
    copy_all(db.get(), c, epoch << 32);
    // What PostgreSQL keeps that SQLite's single writer keeps in memory:
    // enqueue order's sequence, and each group's turn (its row).
    c.exec(
        "SELECT setval('jobs_seq', GREATEST((SELECT max(seq) FROM jobs), 1)); "
        "INSERT INTO queue_groups(queue, grp, wake) SELECT DISTINCT queue, grp, 0 FROM jobs "
        "WHERE grp IS NOT NULL AND done = 0 AND dead = 0 ON CONFLICT DO NOTHING",
        kWhat);
    pg::keep_fence_floor(c, epoch, kWhat);
    const auto checking = std::chrono::steady_clock::now();
    const std::string counts = compare(db.get(), c, differs);
    std::cerr << fmt::format(
        "fenceqd: migrate: compared in {:.1f} s\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - checking).count());
    if (!differs.empty()) {
      c.rollback();
      std::cerr << "fenceqd: migrate: the stores do not agree, nothing was committed: " << differs
                << "\n";
      return 1;
    }
    c.exec(fmt::format("INSERT INTO fenceq_meta(key, value) VALUES('{}', "
                       "(SELECT count(*) FROM jobs)); COMMIT",
                       kMigratedKey)
               .c_str(),
           kWhat);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << fmt::format(
        "{{\"migrated\":true,\"from\":{},{},\"fence_epoch\":{},"
        "\"seconds\":{:.2f},\"check\":\"agree\"}}\n",
        quoted(path), counts, epoch, secs);
    return 0;
  } catch (...) {
    c.rollback();
    throw;
  }
}

}  // namespace

int migrate_to_pg(const std::string& db, const std::string& uri) {
  try {
    return run(db, uri);
  } catch (const std::exception& e) {
    std::cerr << "fenceqd: migrate: " << e.what() << " (nothing was committed)\n";
    return 1;
  }
}

}  // namespace fenceq::daemon
