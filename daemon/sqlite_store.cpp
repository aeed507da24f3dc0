#include "sqlite_store.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <utility>

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

// Schema version 2, the work queue: columns added with defaults (C1.1), the
// index claim_next walks, and the fences of purged ids (C1.2).
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE jobs ADD COLUMN queue        TEXT    NOT NULL DEFAULT 'default';
ALTER TABLE jobs ADD COLUMN payload      BLOB;
ALTER TABLE jobs ADD COLUMN priority     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN not_before   REAL    NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN attempts     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN dead         INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN error        TEXT;
ALTER TABLE jobs ADD COLUMN seq          INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN created      REAL    NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN finished     REAL    NOT NULL DEFAULT 0;
-- claim_next: the open jobs of a queue, most urgent first. Leased and delayed
-- jobs stay in it and are stepped over; done and dead ones leave it.
CREATE INDEX jobs_next ON jobs(queue, priority DESC, seq) WHERE done = 0 AND dead = 0;
-- Jobs on their last allowed attempt, by lease end, for reap_exhausted().
CREATE INDEX jobs_last_attempt ON jobs(until)
  WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts;
-- Finished jobs by finishing time, for purge.
CREATE INDEX jobs_finished ON jobs(finished) WHERE done = 1 OR dead = 1;
CREATE TABLE purged_fences(
  id    TEXT PRIMARY KEY,
  fence INTEGER NOT NULL
);
PRAGMA user_version = 2;
)sql";

// A job's state at ?now (the parameter named :now), as list and stats report it.
#define FENCEQ_STATUS_SQL                                                              \
  "CASE WHEN done = 1 THEN 'done' "                                                    \
  "WHEN dead = 1 OR (max_attempts > 0 AND attempts >= max_attempts AND until <= :now) " \
  "THEN 'dead' "                                                                       \
  "WHEN until > :now THEN 'leased' "                                                   \
  "WHEN not_before > :now THEN 'delayed' ELSE 'ready' END"

// Claimable at :now: open, lease ended (C3.3), delay passed, attempts left.
#define FENCEQ_CLAIMABLE_SQL                                                            \
  "done = 0 AND dead = 0 AND until <= :now AND not_before <= :now "                     \
  "AND (max_attempts = 0 OR attempts < max_attempts) AND fence < 9223372036854775807"

// claim_next: claim as claim_ does, the most urgent claimable job of :queue.
constexpr const char* kClaimNextSql =
    "UPDATE jobs SET owner = :owner, until = :until, fence = fence + 1, "
    "attempts = attempts + 1 WHERE rowid = (SELECT rowid FROM jobs WHERE queue = :queue AND "
    FENCEQ_CLAIMABLE_SQL " ORDER BY priority DESC, seq LIMIT 1) "
    "RETURNING id, fence, payload, attempts";

// A lease that is current at :now (C3.4, C3.5).
#define FENCEQ_CURRENT_SQL \
  "id = :id AND owner = :owner AND fence = :fence AND done = 0 AND dead = 0 AND until > :now"

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
  Use& blob(int i, std::string_view v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  // The index of a named parameter (":now"); statements are ours, so a
  // missing name is a programming error caught by the tests.
  int at(const char* name) const { return sqlite3_bind_parameter_index(s_, name); }

 private:
  sqlite3_stmt* s_;
};

std::optional<std::string> column_text(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}

}  // namespace

SqliteStore::SqliteStore(const std::string& path, SyncMode sync, bool read_only) : path_(path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           (read_only ? SQLITE_OPEN_READONLY
                                      : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                               SQLITE_OPEN_NOMUTEX,
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
  if (!read_only) migrate();

  begin_.reset(prepare("BEGIN IMMEDIATE"));
  commit_.reset(prepare("COMMIT"));
  rollback_.reset(prepare("ROLLBACK"));
  // C3.1: INSERT OR IGNORE, so a repeated enqueue never touches a lease. An
  // id purged before continues from its kept fence (C1.2).
  enqueue_.reset(prepare(
      "INSERT OR IGNORE INTO jobs(id, queue, payload, priority, not_before, max_attempts, seq, "
      "created, fence) VALUES(:id, :queue, :payload, :priority, :not_before, :max_attempts, "
      ":seq, :now, COALESCE((SELECT fence FROM purged_fences WHERE id = :id), 0))"));
  unpurge_.reset(prepare("DELETE FROM purged_fences WHERE id = ?1"));
  state_.reset(prepare("SELECT id, owner, until, fence, result, done FROM jobs WHERE id = ?1"));
  // C3.3: claimable when not done and the lease ended (until <= now: at the
  // boundary now == until it can be claimed again). The fence only grows; the
  // guard on its maximum keeps SQLite from turning fence+1 into a REAL.
  claim_.reset(prepare(
      "UPDATE jobs SET owner = :owner, until = :until, fence = fence + 1, "
      "attempts = attempts + 1 WHERE id = :id AND " FENCEQ_CLAIMABLE_SQL " RETURNING fence"));
  // The same claim on the most urgent claimable job of a queue, found through
  // jobs_next (EXPLAIN QUERY PLAN is checked by a test).
  claim_next_.reset(prepare(kClaimNextSql));
  // C3.4: only the current, unexpired lease; an expired lease is never revived.
  renew_.reset(prepare("UPDATE jobs SET until = :until WHERE " FENCEQ_CURRENT_SQL
                       " RETURNING queue"));
  // C3.5: same guard as renew; the stored result is kept otherwise.
  complete_.reset(prepare(
      "UPDATE jobs SET result = :result, done = 1, finished = :now WHERE " FENCEQ_CURRENT_SQL));
  // C3.6: the fence is kept, never reset (C1.2).
  release_.reset(prepare(
      "UPDATE jobs SET owner = NULL, until = 0 "
      "WHERE id = :id AND owner = :owner AND fence = :fence AND done = 0 AND dead = 0 "
      "RETURNING queue"));
  // Same guard as complete. Out of attempts: dead; else claimable after the backoff.
  fail_.reset(prepare(
      "UPDATE jobs SET error = :error, owner = NULL, until = 0, "
      "dead = (max_attempts > 0 AND attempts >= max_attempts), "
      "finished = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN :now "
      "ELSE finished END, "
      "not_before = :now + COALESCE(:retry_in, MIN(3600.0, 1 << MIN(MAX(attempts - 1, 0), 12))) "
      "WHERE " FENCEQ_CURRENT_SQL " RETURNING CASE WHEN dead = 0 THEN queue END"));
  check_.reset(prepare("SELECT 1 FROM jobs WHERE " FENCEQ_CURRENT_SQL));
  unclaim_.reset(prepare(
      "UPDATE jobs SET owner = NULL, until = 0, attempts = MAX(attempts - 1, 0) "
      "WHERE id = :id AND owner = :owner AND fence = :fence AND done = 0 AND dead = 0 "
      "RETURNING queue"));
  retry_.reset(prepare(
      "UPDATE jobs SET dead = 0, attempts = 0, not_before = 0, finished = 0, owner = NULL, "
      "until = 0 WHERE id = :id AND done = 0 AND (dead = 1 OR (max_attempts > 0 AND "
      "attempts >= max_attempts AND until <= :now)) RETURNING queue"));
  reap_.reset(prepare(
      "UPDATE jobs SET dead = 1, finished = :now, "
      "error = COALESCE(error, 'the last allowed attempt ended without a complete') "
      "WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts "
      "AND until <= :now"));
  purge_keep_.reset(prepare(
      "INSERT INTO purged_fences(id, fence) SELECT id, fence FROM jobs "
      "WHERE (done = 1 OR dead = 1) AND finished <= :cutoff AND (:queue IS NULL OR queue = :queue) "
      "ON CONFLICT(id) DO UPDATE SET fence = MAX(fence, excluded.fence)"));
  purge_delete_.reset(prepare(
      "DELETE FROM jobs WHERE (done = 1 OR dead = 1) AND finished <= :cutoff "
      "AND (:queue IS NULL OR queue = :queue)"));
  list_.reset(prepare(
      "SELECT id, queue, " FENCEQ_STATUS_SQL " AS st, priority, attempts, max_attempts, fence, "
      "owner, until, not_before, error FROM jobs WHERE id > :after "
      "AND (:queue IS NULL OR queue = :queue) AND (:st IS NULL OR st = :st) "
      "ORDER BY id LIMIT :limit"));
  stats_.reset(prepare(
      "SELECT queue, st, COUNT(*), MIN(ready_since) FROM (SELECT queue, " FENCEQ_STATUS_SQL
      " AS st, MAX(created, not_before) AS ready_since FROM jobs) GROUP BY queue, st "
      "ORDER BY queue"));
  // When a job of the queue becomes claimable by time alone: its lease or
  // delay ends (through jobs_next: the queue's open jobs only).
  next_claimable_.reset(prepare(
      "SELECT MIN(MAX(until, not_before)) FROM jobs WHERE queue = :queue AND done = 0 AND "
      "dead = 0 AND (max_attempts = 0 OR attempts < max_attempts) AND "
      "MAX(until, not_before) > :now"));
  get_meta_.reset(prepare("SELECT value FROM fenceq_meta WHERE key = ?1"));
  set_meta_.reset(prepare(
      "INSERT INTO fenceq_meta(key, value) VALUES(?1, ?2) "
      "ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)"));
}

void SqliteStore::migrate() {
  exec("BEGIN IMMEDIATE");
  try {
    exec(kSchema);
    Statement v(prepare("PRAGMA user_version"));
    int version = sqlite3_step(v.get()) == SQLITE_ROW ? sqlite3_column_int(v.get(), 0) : 0;
    v.reset();
    if (version < 2) exec(kSchemaV2);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  Statement seq(prepare("SELECT COALESCE(MAX(seq), 0), EXISTS(SELECT 1 FROM purged_fences) "
                        "FROM jobs"));
  if (sqlite3_step(seq.get()) != SQLITE_ROW) fail("read seq", sqlite3_errcode(db_.get()));
  seq_ = sqlite3_column_int64(seq.get(), 0);
  any_purged_ = sqlite3_column_int(seq.get(), 1) != 0;
}

SqliteStore::~SqliteStore() {
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
  for (auto* st : {&claim_next_, &fail_, &check_, &retry_, &reap_, &unpurge_, &unclaim_, &purge_keep_,
                   &purge_delete_, &list_, &stats_, &next_claimable_}) {
    st->reset();
  }
  get_meta_.reset();
  set_meta_.reset();
}

std::unique_ptr<Store> SqliteStore::open_reader() const {
  if (path_.empty() || path_ == ":memory:" || path_.starts_with("file::memory:")) return nullptr;
  return std::make_unique<SqliteStore>(path_, SyncMode::off, true);
}

sqlite3_stmt* SqliteStore::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) fail("prepare", rc);
  return s;
}

void SqliteStore::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw StoreError(std::string("sqlite: ") + msg, rc);
  }
}

void SqliteStore::fail(const char* what, int rc) {
  const char* msg = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
  throw StoreError(std::string("sqlite ") + what + ": " + msg, rc);
}

int SqliteStore::step_done(sqlite3_stmt* s, const char* what) {
  int rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) fail(what, rc);
  return sqlite3_changes(db_.get());
}

bool SqliteStore::step_freeing(sqlite3_stmt* s, const char* what) {
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return false;
  if (rc != SQLITE_ROW) fail(what, rc);
  if (sqlite3_column_type(s, 0) != SQLITE_NULL) {
    freed(std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                           static_cast<std::size_t>(sqlite3_column_bytes(s, 0))));
  }
  if (sqlite3_step(s) != SQLITE_DONE) fail(what, sqlite3_errcode(db_.get()));
  return true;
}

void SqliteStore::freed(std::string_view queue) {
  auto& f = changes_.freed;
  if (std::find(f.begin(), f.end(), queue) == f.end()) f.emplace_back(queue);
}

Store::QueueChanges SqliteStore::take_queue_changes() { return std::exchange(changes_, {}); }

std::optional<double> SqliteStore::next_claimable_at(std::string_view queue, double now) {
  auto* s = next_claimable_.get();
  Use u(s);
  u.text(u.at(":queue"), queue).real(u.at(":now"), now);
  int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW) fail("next_claimable_at", rc);
  if (sqlite3_column_type(s, 0) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, 0);
}

void SqliteStore::begin() {
  changes_ = {};
  Use u(begin_.get());
  step_done(begin_.get(), "begin");
}

void SqliteStore::commit() {
  Use u(commit_.get());
  int rc = sqlite3_step(commit_.get());
  if (rc != SQLITE_DONE) {
    // A failed COMMIT may leave the transaction open (SQLITE_BUSY): end it so
    // that nothing of the batch is applied (C1.4).
    int code = rc;
    std::string msg = sqlite3_errmsg(db_.get());
    rollback();
    // A failed fsync at COMMIT (--sync full): the WAL frames, commit frame
    // included, were written and may reach the disk all the same, and a
    // failed fsync cannot be retried (the kernel may have dropped the dirty
    // pages). A failed write is not that: without its commit frame a
    // transaction is never replayed.
    const bool fsync_failed = code == SQLITE_IOERR_FSYNC || code == SQLITE_IOERR_DIR_FSYNC;
    throw StoreError("sqlite commit: " + msg, code,
                     fsync_failed ? StoreError::Kind::fatal : StoreError::Kind::internal);
  }
}

void SqliteStore::rollback() noexcept {
  changes_ = {};
  if (!db_) return;
  if (!sqlite3_get_autocommit(db_.get()) && rollback_) {
    sqlite3_step(rollback_.get());
    sqlite3_reset(rollback_.get());
  }
}

bool SqliteStore::enqueue(const protocol::Request& r, double now) {
  auto* s = enqueue_.get();
  Use u(s);
  u.text(u.at(":id"), r.id).text(u.at(":queue"), r.queue);
  if (r.payload) {
    // TEXT or BLOB as sent, so claim_next gives back the same msgpack type.
    if (r.payload->binary) {
      u.blob(u.at(":payload"), r.payload->bytes);
    } else {
      u.text(u.at(":payload"), r.payload->bytes);
    }
  }
  u.integer(u.at(":priority"), r.priority)
      .real(u.at(":not_before"), r.delay > 0 ? now + r.delay : 0.0)
      .integer(u.at(":max_attempts"), r.max_attempts)
      .integer(u.at(":seq"), seq_ + 1)
      .real(u.at(":now"), now);
  bool inserted = step_done(s, "enqueue") == 1;
  if (inserted) {
    ++seq_;
    freed(r.queue);
    if (any_purged_) {
      Use d(unpurge_.get());
      d.text(1, r.id);
      step_done(unpurge_.get(), "enqueue");
    }
  }
  return inserted;
}

std::optional<JobState> SqliteStore::state(std::string_view id) {
  auto* s = state_.get();
  Use u(s);
  u.text(1, id);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail("state", rc);
  JobState row;
  row.id = column_text(s, 0).value_or("");
  row.owner = column_text(s, 1);
  row.until = sqlite3_column_double(s, 2);
  row.fence = sqlite3_column_int64(s, 3);
  row.result = column_text(s, 4);
  row.done = sqlite3_column_int64(s, 5) != 0;
  return row;
}

std::optional<std::int64_t> SqliteStore::claim(std::string_view id, std::string_view owner, double now,
                                         double ttl) {
  auto* s = claim_.get();
  Use u(s);
  u.text(u.at(":id"), id).text(u.at(":owner"), owner).real(u.at(":until"), now + ttl)
      .real(u.at(":now"), now);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail("claim", rc);
  std::int64_t fence = sqlite3_column_int64(s, 0);
  if (sqlite3_step(s) != SQLITE_DONE) fail("claim", sqlite3_errcode(db_.get()));
  return fence;
}

std::optional<ClaimedJob> SqliteStore::claim_next(std::string_view queue, std::string_view owner,
                                                   double now, double ttl) {
  auto* s = claim_next_.get();
  Use u(s);
  u.text(u.at(":queue"), queue).text(u.at(":owner"), owner).real(u.at(":until"), now + ttl)
      .real(u.at(":now"), now);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail("claim_next", rc);
  ClaimedJob job;
  job.id = column_text(s, 0).value_or("");
  job.fence = sqlite3_column_int64(s, 1);
  int type = sqlite3_column_type(s, 2);
  if (type != SQLITE_NULL) {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(s, 2));
    job.payload = protocol::Payload{
        std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, 2))),
        type == SQLITE_BLOB};
  }
  job.attempts = sqlite3_column_int64(s, 3);
  if (sqlite3_step(s) != SQLITE_DONE) fail("claim_next", sqlite3_errcode(db_.get()));
  return job;
}

namespace {
// Binds the (id, owner, fence, now) of a lease check.
void bind_lease(Use& u, std::string_view id, std::string_view owner, std::int64_t fence,
                double now) {
  u.text(u.at(":id"), id).text(u.at(":owner"), owner).integer(u.at(":fence"), fence)
      .real(u.at(":now"), now);
}
}  // namespace

bool SqliteStore::renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
                  double ttl) {
  auto* s = renew_.get();
  Use u(s);
  bind_lease(u, id, owner, fence, now);
  u.real(u.at(":until"), now + ttl);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return false;
  if (rc != SQLITE_ROW) fail("renew", rc);
  changes_.lease_ends.emplace_back(column_text(s, 0).value_or(""), now + ttl);
  if (sqlite3_step(s) != SQLITE_DONE) fail("renew", sqlite3_errcode(db_.get()));
  return true;
}

bool SqliteStore::complete(std::string_view id, std::string_view owner, std::int64_t fence,
                     const std::optional<std::string>& result, double now) {
  Use u(complete_.get());
  bind_lease(u, id, owner, fence, now);
  u.opt_text(u.at(":result"), result);
  return step_done(complete_.get(), "complete") == 1;
}

bool SqliteStore::release(std::string_view id, std::string_view owner, std::int64_t fence) {
  Use u(release_.get());
  u.text(u.at(":id"), id).text(u.at(":owner"), owner).integer(u.at(":fence"), fence);
  return step_freeing(release_.get(), "release");
}

bool SqliteStore::fail(std::string_view id, std::string_view owner, std::int64_t fence,
                 std::string_view error, std::optional<double> retry_in, double now) {
  Use u(fail_.get());
  bind_lease(u, id, owner, fence, now);
  u.text(u.at(":error"), error);
  if (retry_in) u.real(u.at(":retry_in"), *retry_in);
  return step_freeing(fail_.get(), "fail");
}

bool SqliteStore::unclaim(std::string_view id, std::string_view owner, std::int64_t fence) {
  Use u(unclaim_.get());
  u.text(u.at(":id"), id).text(u.at(":owner"), owner).integer(u.at(":fence"), fence);
  return step_freeing(unclaim_.get(), "unclaim");
}

bool SqliteStore::check(std::string_view id, std::string_view owner, std::int64_t fence, double now) {
  auto* s = check_.get();
  Use u(s);
  bind_lease(u, id, owner, fence, now);
  int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail("check", rc);
  return rc == SQLITE_ROW;
}

bool SqliteStore::retry(std::string_view id, double now) {
  Use u(retry_.get());
  u.text(u.at(":id"), id).real(u.at(":now"), now);
  return step_freeing(retry_.get(), "retry");
}

void SqliteStore::reap_exhausted(double now) {
  Use u(reap_.get());
  u.real(u.at(":now"), now);
  step_done(reap_.get(), "reap");
}

std::int64_t SqliteStore::purge(const std::optional<std::string>& queue, double older_than,
                          double now) {
  for (auto* st : {purge_keep_.get(), purge_delete_.get()}) {
    Use u(st);
    u.real(u.at(":cutoff"), now - older_than).opt_text(u.at(":queue"), queue);
    int n = step_done(st, "purge");
    if (st == purge_keep_.get() && n > 0) any_purged_ = true;
    if (st == purge_delete_.get()) return n;
  }
  return 0;
}

protocol::JobList SqliteStore::list(const protocol::Request& r, double now) {
  auto* s = list_.get();
  Use u(s);
  u.text(u.at(":after"), r.after).real(u.at(":now"), now).integer(u.at(":limit"), r.limit);
  std::optional<std::string> queue, status;
  if (!r.all_queues) queue = r.queue;
  if (r.status) status = std::string(protocol::status_name(*r.status));
  u.opt_text(u.at(":queue"), queue).opt_text(u.at(":st"), status);
  protocol::JobList out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    protocol::JobInfo j;
    j.id = column_text(s, 0).value_or("");
    j.queue = column_text(s, 1).value_or("");
    j.status = protocol::status_from_name(column_text(s, 2).value_or(""))
                   .value_or(protocol::JobStatus::ready);
    j.priority = sqlite3_column_int64(s, 3);
    j.attempts = sqlite3_column_int64(s, 4);
    j.max_attempts = sqlite3_column_int64(s, 5);
    j.fence = sqlite3_column_int64(s, 6);
    j.owner = column_text(s, 7);
    j.until = sqlite3_column_double(s, 8);
    j.not_before = sqlite3_column_double(s, 9);
    j.error = column_text(s, 10);
    out.push_back(std::move(j));
  }
  if (rc != SQLITE_DONE) fail("list", rc);
  return out;
}

std::vector<protocol::QueueStats> SqliteStore::queue_stats(double now) {
  auto* s = stats_.get();
  Use u(s);
  u.real(u.at(":now"), now);
  std::vector<protocol::QueueStats> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    auto queue = column_text(s, 0).value_or("");
    if (out.empty() || out.back().queue != queue) out.push_back({queue});
    auto& q = out.back();
    auto n = sqlite3_column_int64(s, 2);
    switch (protocol::status_from_name(column_text(s, 1).value_or(""))
                .value_or(protocol::JobStatus::ready)) {
      case protocol::JobStatus::ready:
        q.ready = n;
        q.oldest_ready_age = std::max(0.0, now - sqlite3_column_double(s, 3));
        break;
      case protocol::JobStatus::delayed: q.delayed = n; break;
      case protocol::JobStatus::leased: q.leased = n; break;
      case protocol::JobStatus::done: q.done = n; break;
      case protocol::JobStatus::dead: q.dead = n; break;
    }
  }
  if (rc != SQLITE_DONE) fail("stats", rc);
  return out;
}

std::optional<std::vector<protocol::QueueStats>> SqliteStore::queue_stats_within(double now,
                                                                              int budget_ms) {
  // SQLite itself stops the count after the budget (a progress handler).
  using std::chrono::steady_clock;
  auto deadline = steady_clock::now() + std::chrono::milliseconds(budget_ms);
  sqlite3_progress_handler(
      db_.get(), 1000,
      [](void* d) {
        return steady_clock::now() > *static_cast<steady_clock::time_point*>(d) ? 1 : 0;
      },
      &deadline);
  std::optional<std::vector<protocol::QueueStats>> out;
  try {
    out = queue_stats(now);
  } catch (const StoreError&) {
    // interrupted: too large to count within the budget
  }
  sqlite3_progress_handler(db_.get(), 0, nullptr, nullptr);
  return out;
}

std::string SqliteStore::claim_next_plan() {
  Statement s(prepare((std::string("EXPLAIN QUERY PLAN ") + kClaimNextSql).c_str()));
  std::string plan;
  while (sqlite3_step(s.get()) == SQLITE_ROW) {
    plan += reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 3));
    plan += "\n";
  }
  return plan;
}

double SqliteStore::clock_high_water() {
  auto* s = get_meta_.get();
  Use u(s);
  u.text(1, "clock_high_water");
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) fail("read clock", rc);
  return sqlite3_column_double(s, 0);
}

void SqliteStore::set_clock_high_water(double t) {
  Use u(set_meta_.get());
  u.text(1, "clock_high_water").real(2, t);
  step_done(set_meta_.get(), "write clock");
}

}  // namespace fenceq::daemon
