#include "store.hpp"

#include <cstring>
#include <limits>

namespace fenceq::daemon {
namespace {

// C1.1: these columns, types, constraints and defaults exactly. Columns added
// later need defaults so that `INSERT INTO jobs(id)` keeps working.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id     TEXT PRIMARY KEY,
  owner  TEXT,
  until  REAL NOT NULL DEFAULT 0,
  fence  INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  done   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS fenceq_meta(
  key   TEXT PRIMARY KEY,
  value
);
)sql";

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
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
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

 private:
  sqlite3_stmt* s_;
};

std::optional<std::string> column_text(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}

}  // namespace

Store::Store(const std::string& path, SyncMode sync) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  db_.reset(raw);  // sqlite3_open_v2 hands out a handle even on failure
  if (rc != SQLITE_OK) fail("open", rc);
  sqlite3_extended_result_codes(db_.get(), 1);
  // Readers (the sqlite3 shell, backups) may hold the file briefly; a writer
  // waits this long for them before the batch fails with `internal`.
  sqlite3_busy_timeout(db_.get(), 2000);

  {
    Statement wal(prepare("PRAGMA journal_mode=WAL"));
    if (sqlite3_step(wal.get()) != SQLITE_ROW) fail("set WAL journaling", sqlite3_errcode(raw));
    std::string mode = reinterpret_cast<const char*>(sqlite3_column_text(wal.get(), 0));
    if (mode != "wal" && mode != "memory") {
      throw StoreError("cannot switch " + path + " to WAL journaling (got " + mode + ")",
                       SQLITE_ERROR);
    }
  }
  switch (sync) {
    case SyncMode::full: exec("PRAGMA synchronous=FULL"); break;
    case SyncMode::normal: exec("PRAGMA synchronous=NORMAL"); break;
    case SyncMode::off: exec("PRAGMA synchronous=OFF"); break;
  }
  exec("BEGIN IMMEDIATE");
  try {
    exec(kSchema);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }

  begin_.reset(prepare("BEGIN IMMEDIATE"));
  commit_.reset(prepare("COMMIT"));
  rollback_.reset(prepare("ROLLBACK"));
  // C3.1: INSERT OR IGNORE, so a repeated enqueue never touches a lease.
  enqueue_.reset(prepare("INSERT OR IGNORE INTO jobs(id) VALUES(?1)"));
  state_.reset(prepare("SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?1"));
  // C3.3: claimable when not done and the lease ended (until <= now: at the
  // boundary now == until it can be claimed again). The fence only grows; the
  // guard on its maximum keeps SQLite from turning fence+1 into a REAL.
  claim_.reset(prepare(
      "UPDATE jobs SET owner = ?2, until = ?3, fence = fence + 1 "
      "WHERE id = ?1 AND done = 0 AND until <= ?4 AND fence < 9223372036854775807 "
      "RETURNING fence"));
  // C3.4: only the current, unexpired lease; an expired lease is never revived.
  renew_.reset(prepare(
      "UPDATE jobs SET until = ?4 "
      "WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?5"));
  // C3.5: same guard as renew; the stored result is kept otherwise.
  complete_.reset(prepare(
      "UPDATE jobs SET result = ?4, done = 1 "
      "WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0 AND until > ?5"));
  // C3.6: the fence is kept, never reset (C1.2).
  release_.reset(prepare(
      "UPDATE jobs SET owner = NULL, until = 0 "
      "WHERE id = ?1 AND owner = ?2 AND fence = ?3 AND done = 0"));
  get_meta_.reset(prepare("SELECT value FROM fenceq_meta WHERE key = ?1"));
  set_meta_.reset(prepare(
      "INSERT INTO fenceq_meta(key, value) VALUES(?1, ?2) "
      "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
}

Store::~Store() {
  rollback();
  // Statements must be finalized before the connection closes.
  begin_.reset();
  commit_.reset();
  rollback_.reset();
  enqueue_.reset();
  state_.reset();
  claim_.reset();
  renew_.reset();
  complete_.reset();
  release_.reset();
  get_meta_.reset();
  set_meta_.reset();
}

sqlite3_stmt* Store::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) fail("prepare", rc);
  return s;
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw StoreError(std::string("sqlite: ") + msg, rc);
  }
}

void Store::fail(const char* what, int rc) {
  const char* msg = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
  throw StoreError(std::string("sqlite ") + what + ": " + msg, rc);
}

int Store::step_done(sqlite3_stmt* s, const char* what) {
  int rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) fail(what, rc);
  return sqlite3_changes(db_.get());
}

void Store::begin() {
  Use u(begin_.get());
  step_done(begin_.get(), "begin");
}

void Store::commit() {
  Use u(commit_.get());
  int rc = sqlite3_step(commit_.get());
  if (rc != SQLITE_DONE) {
    // A failed COMMIT may leave the transaction open (SQLITE_BUSY): end it so
    // that nothing of the batch is applied (C1.4).
    int code = rc;
    std::string msg = sqlite3_errmsg(db_.get());
    rollback();
    throw StoreError("sqlite commit: " + msg, code);
  }
}

void Store::rollback() noexcept {
  if (!db_) return;
  if (!sqlite3_get_autocommit(db_.get()) && rollback_) {
    sqlite3_step(rollback_.get());
    sqlite3_reset(rollback_.get());
  }
}

bool Store::enqueue(std::string_view id) {
  Use u(enqueue_.get());
  u.text(1, id);
  return step_done(enqueue_.get(), "enqueue") == 1;
}

std::optional<protocol::JobRow> Store::state(std::string_view id) {
  auto* s = state_.get();
  Use u(s);
  u.text(1, id);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail("state", rc);
  protocol::JobRow row;
  row.id = column_text(s, 0).value_or("");
  row.owner = column_text(s, 1);
  row.until = sqlite3_column_double(s, 2);
  row.fence = sqlite3_column_int64(s, 3);
  row.result = column_text(s, 4);
  row.done = sqlite3_column_int64(s, 5) != 0;
  return row;
}

std::optional<std::int64_t> Store::claim(std::string_view id, std::string_view owner, double now,
                                         double ttl) {
  auto* s = claim_.get();
  Use u(s);
  u.text(1, id).text(2, owner).real(3, now + ttl).real(4, now);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail("claim", rc);
  std::int64_t fence = sqlite3_column_int64(s, 0);
  if (sqlite3_step(s) != SQLITE_DONE) fail("claim", sqlite3_errcode(db_.get()));
  return fence;
}

bool Store::renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
                  double ttl) {
  Use u(renew_.get());
  u.text(1, id).text(2, owner).integer(3, fence).real(4, now + ttl).real(5, now);
  return step_done(renew_.get(), "renew") == 1;
}

bool Store::complete(std::string_view id, std::string_view owner, std::int64_t fence,
                     const std::optional<std::string>& result, double now) {
  Use u(complete_.get());
  u.text(1, id).text(2, owner).integer(3, fence).opt_text(4, result).real(5, now);
  return step_done(complete_.get(), "complete") == 1;
}

bool Store::release(std::string_view id, std::string_view owner, std::int64_t fence) {
  Use u(release_.get());
  u.text(1, id).text(2, owner).integer(3, fence);
  return step_done(release_.get(), "release") == 1;
}

double Store::clock_high_water() {
  auto* s = get_meta_.get();
  Use u(s);
  u.text(1, "clock_high_water");
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) fail("read clock", rc);
  return sqlite3_column_double(s, 0);
}

void Store::set_clock_high_water(double t) {
  Use u(set_meta_.get());
  u.text(1, "clock_high_water").real(2, t);
  step_done(set_meta_.get(), "write clock");
}

}  // namespace fenceq::daemon
