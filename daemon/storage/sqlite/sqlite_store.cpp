#include "storage/sqlite/sqlite_store.hpp"

#include "fenceq_protocol/limits.hpp"
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_file_check.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/store_rows.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

namespace fenceq::daemon {
namespace {

using sqlite::column_payload;
using sqlite::column_text;
using sqlite::kNoUndo;
using sqlite::SqliteRow;
using sqlite::Use;

using rules::kSqlite;

// Per-queue counts (QueueTotals) without a statement or a RETURNING of
// their own: the SQL function fenceq_count(queue, event, value), called in
// the SET of the row it counts, notes `event` for the job's queue
// (SqliteStore::count) and returns `value`. A RETURNING clause would do, but
// SQLite runs an UPDATE ... RETURNING as it runs one with a trigger, and
// complete with `RETURNING queue` made fenceq-ceiling (claim_next of 32 and
// their completes) 2.5 times slower: 150k jobs/s to 60k. The function, about
// 1%. And RETURNING sees only the new row, not the lease a claim took over.
enum CountEvent : int {
  kCountCompleted = 1,      // a complete applied
  kCountExpired = 2,        // a claim took over a lease that ran out
  kCountReaped = 3,         // a job written down dead: its last attempt ended
  kCountReapedExpired = 4,  // ... by running out
  kCountRenewed = 5,        // a renew applied: its queue's lease ends at `value`
};
std::string counted(std::string_view value, CountEvent event) {
  return "fenceq_count(queue, " + std::to_string(event) + ", " + std::string(value) + ")";
}
// The same for a write that finishes the job (a complete, a reap): its
// 5-argument form also notes a job others wait for (kids, C3.13) for
// settle_noted(), so that no finishing write has a term of its own for it.
std::string counted_settling(std::string_view value, CountEvent event) {
  return "fenceq_count(queue, " + std::to_string(event) + ", " + std::string(value) +
         ", " + rules::kHasChildren + ", id)";
}

// The new lease end of a claim (:until), through fenceq_count when the claim
// takes over a lease that ran out (rules::lease_expired); the CASE leaves
// every other claim without the call.
const std::string kLeaseUntil = "CASE WHEN " + rules::lease_expired() + " THEN " +
                                counted(":until", kCountExpired) + " ELSE :until END";
// ... no later than the attempt's deadline for a job with a max_runtime
// (C3.15; kids bit rules::kKidsRuntime, its row of job_runtimes):
// fenceq_deadline notes each deadline started, for start_deadlines().
// Either branch evaluates kLeaseUntil once (it counts).
// A fail with a retry_in: the job parked (rules::kKidsParked, schema 19)
// out of the claims' walk until its delay is over. A retry: claimable at
// once, so not parked (a bit kept from before it ended would leave it out
// of the walk, and out of every wake once no other job is parked).
const std::string kParkDelayed = ", kids = CASE WHEN :retry_in > 0 THEN " +
                                 std::string(rules::kParkedKids) + " ELSE kids END";
const std::string kUnpark = std::string(", kids = ") + rules::kUnparkedKids;
const std::string kClaimUntil =
    "CASE WHEN kids & 4 <> 0 THEN MIN(" + kLeaseUntil + ", COALESCE(fenceq_deadline(id, :now + "
    "(SELECT r.max_runtime FROM job_runtimes r WHERE r.id = jobs.id)), 1e300)) ELSE " +
    kLeaseUntil + " END";


// claim_next: claim as claim_ does the :max most urgent claimable jobs of
// :queue, through jobs_next (EXPLAIN QUERY PLAN is checked by a test), of a
// queue none of whose jobs has a group (others: claim_fair); past its
// blocked jobs (kUnblockedSqlite, schema 17). The
// rows come back in no set order: with their priority and seq to sort by.
// With `limited`, of a queue with settings: no more than its allowance
// (rules::allowance).
std::string claim_next_sql(bool limited = false) {
  return "UPDATE " + kNoUndo + "jobs SET " + rules::claim_set(":owner", kClaimUntil, limited) +
         " WHERE rowid IN (SELECT rowid FROM jobs WHERE queue = :queue AND " +
         rules::kNoGroup + " AND " + rules::kUnblockedSqlite + " AND " + rules::claimable(":now") +
         " ORDER BY " + rules::urgency() + " LIMIT " +
         (limited ? rules::allowance(kSqlite, ":queue", ":now", ":max") : std::string(":max")) +
         ") RETURNING " + rows::claimed_sqlite();
}

// claim_next of one job from a queue without settings, the usual request,
// in two statements that need no temporary table: the most urgent claimable
// job read in the columns of claim_next_sql's RETURNING (rows::claimed_job's
// order; fence and attempts as the claim leaves them) and its rowid (column
// kPickedRowid), then that row claimed as claim_next_sql claims. The
// `rowid IN (...)` and the RETURNING of claim_next_sql each fill a temporary
// B-tree, which SQLite creates, zeroes and frees per statement: a
// complete_next cost the daemon's serving thread 254,000 instructions with
// them and 147,000 without (and without reap_'s, below; callgrind,
// 2026-12-04, K=1, enqueue included).
constexpr int kPickedRowid = 9;
std::string pick_next_sql() {
  return std::string("SELECT id, fence + 1, attempts + 1, priority, seq, ") +
         rows::parents_sql(false, "jobs.id") + ", " + rows::headers_sql(false, "jobs.id") +
         ", " + rows::steps_sql(false, "jobs.id") + ", " +
         rows::payload_sql(false, "jobs.id") +
         ", rowid FROM jobs WHERE queue = :queue AND " +
         rules::kNoGroup + " AND " +
         rules::kUnblockedSqlite + " AND " + rules::claimable(":now") + " ORDER BY " +
         rules::urgency() + " LIMIT 1";
}

const std::string kCurrent = rules::current_lease(":id", ":owner", ":fence", ":now");

}  // namespace

SqliteStore::SqliteStore(const std::string& path, SyncMode sync, bool read_only, bool restored)
    : path_(path), read_only_(read_only) {
  if (!read_only) {
    // Nothing is written (PRAGMA journal_mode=WAL rewrites the header of a
    // file in another mode, migrate() adds tables) before the file is known
    // to be whole and fenceq's, or new (docs/operating.md, "What fenceqd
    // refuses to open").
    check_db_file(path);
    check_db_contents(path);
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           (read_only ? SQLITE_OPEN_READONLY
                                      : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                               SQLITE_OPEN_NOMUTEX,
                           nullptr);
  db_.reset(raw);  // sqlite3_open_v2 hands out a handle even on failure
  if (rc != SQLITE_OK) fail_with("open", rc);
  sqlite3_extended_result_codes(db_.get(), 1);
  // fenceq_count(queue, event, value): see CountEvent. Not deterministic
  // (it counts), and usable only by this connection's own statements.
  for (int args : {3, 5}) {
    rc = sqlite3_create_function_v2(db_.get(), "fenceq_count", args,
                                    SQLITE_UTF8 | SQLITE_DIRECTONLY, this, &SqliteStore::count,
                                    nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) fail_with("register fenceq_count", rc);
  }
  // fenceq_deadline(id, deadline): a claim notes the deadline of the
  // attempt it starts (C3.15); answers the deadline.
  rc = sqlite3_create_function_v2(db_.get(), "fenceq_deadline", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY,
                                  this, &SqliteStore::note_deadline, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail_with("register fenceq_deadline", rc);
  rc = sqlite3_create_function_v2(db_.get(), "fenceq_khash", 2,
                                  SQLITE_UTF8 | SQLITE_DIRECTONLY | SQLITE_DETERMINISTIC, nullptr,
                                  &SqliteStore::khash_function, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail_with("register fenceq_khash", rc);
  rc = sqlite3_create_function_v2(db_.get(), "fenceq_step_fits", 4,
                                  SQLITE_UTF8 | SQLITE_DIRECTONLY | SQLITE_DETERMINISTIC, nullptr,
                                  &SqliteStore::step_fits, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail_with("register fenceq_step_fits", rc);
  // Readers (the sqlite3 shell, backups) may hold the file briefly; a writer
  // waits this long for them before the batch fails with `internal`.
  sqlite3_busy_timeout(db_.get(), 2000);

  {
    Statement wal(prepare("PRAGMA journal_mode=WAL"));
    if (sqlite3_step(wal.get()) != SQLITE_ROW) {
      fail_with("set WAL journaling", sqlite3_errcode(raw));
    }
    std::string mode = reinterpret_cast<const char*>(sqlite3_column_text(wal.get(), 0));
    if (mode != "wal" && mode != "memory") {
      throw StoreError("cannot switch " + path + " to WAL journaling (got " + mode + ")");
    }
    // --sync normal and off: checkpoints off the serving thread. With full
    // they stay SQLite's own (sqlite_checkpointer.hpp says why).
    if (mode == "wal" && !read_only && sync != SyncMode::full) {
      checkpointer_ = std::make_unique<SqliteCheckpointer>(raw, path, sync);
    }
  }
  if (!read_only) {
    migrate();
    guard_fences(sync, restored);
  }
  // --sync off runs as normal: commits are not fsynced, checkpoints are.
  // SQLite's OFF would skip those too, and a power cut during a checkpoint
  // could then leave a corrupt file (docs/operating.md, "Durability").
  exec(sync == SyncMode::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  sync_full_ = sync == SyncMode::full;
  // Deleted content is zeroed only where that costs no write of its own
  // (docs/operating.md, "Deleted data"). Debian's SQLite is built with
  // secure_delete on: each page a delete freed was zeroed and written, so a
  // retention chunk with 32 results of 900 KiB wrote 29 MiB of zeros and held
  // the serving thread ~0.5 s; an update of a row with a large payload zeroed
  // its old pages too.
  exec("PRAGMA secure_delete=FAST");

  prepare_statements();
  if (!read_only) {
    maybe_parked_ = parked_exist();  // schema 19: no probe by claim_next while none is
    load_configs();
    load_marking();  // sqlite_control.cpp
    load_groups();
    hook_if_grouped();  // sqlite_groups.cpp
    load_keys();  // sqlite_keys.cpp
    // A copy taken now is told apart from the database once the run's next
    // beat is on disk (C1.5).
    if (run_state_) {
      beat_stmt_.reset(prepare("INSERT INTO fenceq_meta(key, value) VALUES('beat', ?1) "
                               "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
      beat_ = std::make_unique<RunBeat>(path_, *run_state_, std::chrono::seconds(1));
    }
  }
}

// Every statement the store keeps, prepared once (SQLITE_PREPARE_PERSISTENT).
void SqliteStore::prepare_statements() {
  begin_.reset(prepare("BEGIN IMMEDIATE"));
  commit_.reset(prepare("COMMIT"));
  rollback_.reset(prepare("ROLLBACK"));
  // C3.1: INSERT OR IGNORE, so a repeated enqueue never touches a lease. An
  // id purged before continues from its kept fence (C1.2).
  enqueue_.reset(prepare(
      "INSERT OR IGNORE INTO jobs(id, queue, payload, priority, not_before, max_attempts, seq, "
      "created, fence, ukey, grp, kseq, kids, expires) VALUES(:id, :queue, :payload, :priority, "
      ":not_before, :max_attempts, :seq, :now, MAX(COALESCE((SELECT fence FROM purged_fences "
      "WHERE id = :id), 0), :floor), :key, :grp, :kseq, :kids, :expires)"));
  prepare_key_statements();
  id_exists_.reset(prepare("SELECT 1 FROM jobs WHERE id = ?1"));
  unpurge_.reset(prepare("DELETE FROM purged_fences WHERE id = ?1"));
  state_.reset(prepare("SELECT id, owner, until, fence, " + rows::result_sql("jobs.id") +
                       ", done, progress FROM jobs WHERE id = ?1"));  // rows::kJobState's
  claim_next_.reset(prepare(claim_next_sql()));
  pick_next_.reset(prepare(pick_next_sql()));
  claim_picked_.reset(prepare("UPDATE " + kNoUndo + "jobs SET " +
                              rules::claim_set(":owner", kClaimUntil, false) +
                              " WHERE rowid = :rowid"));
  // A claim by id, held or not; and a grouped queue's claim of one job
  // (claim_fair, sqlite_groups.cpp), returning what claim_next returns.
  for (bool held : {false, true}) {
    const std::string claim = "UPDATE " + kNoUndo + "jobs SET " +
                              rules::claim_set(":owner", kClaimUntil, held) +
                              " WHERE id = :id AND " + rules::claimable(":now") + " RETURNING ";
    (held ? claim_held_ : claim_).reset(prepare(claim + "fence, queue"));
    (held ? claim_row_held_ : claim_row_).reset(prepare(claim + rows::claimed_sqlite()));
  }
  claim_next_limited_.reset(prepare(claim_next_sql(true)));
  allowance_.reset(prepare("SELECT " + rules::allowance(kSqlite, ":queue", ":now", "1")));
  log_claims_.reset(prepare("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                            "WHERE i < :n) INSERT OR FAIL INTO queue_claims(queue, at) "
                            "SELECT :queue, :now FROM n"));
  prune_claims_.reset(prepare("DELETE FROM queue_claims WHERE queue = ?1 AND at <= ?2"));
  set_config_.reset(prepare(
      "INSERT INTO queue_config(queue, paused, max_leased, rate, per, group_max_leased, "
      "group_rate, group_per) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
      "ON CONFLICT(queue) DO UPDATE SET paused = excluded.paused, max_leased = "
      "excluded.max_leased, rate = excluded.rate, per = excluded.per, group_max_leased = "
      "excluded.group_max_leased, group_rate = excluded.group_rate, group_per = "
      "excluded.group_per"));
  delete_config_.reset(prepare("DELETE FROM queue_config WHERE queue = ?1"));
  configs_stmt_.reset(prepare(std::string("SELECT ") + rows::kQueueConfig +
                              " FROM queue_config ORDER BY queue"));
  schedule_set_.reset(prepare(
      "INSERT INTO schedules(name, cron, tz, queue, payload, priority, max_attempts, created) "
      "VALUES(:name, :cron, :tz, :queue, :payload, :priority, :max_attempts, :now) "
      "ON CONFLICT(name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz, queue = "
      "excluded.queue, payload = excluded.payload, priority = excluded.priority, max_attempts = "
      "excluded.max_attempts"));
  schedule_delete_.reset(prepare("DELETE FROM schedules WHERE name = ?1"));
  schedules_stmt_.reset(prepare(std::string("SELECT ") + rows::kSchedule +
                                " FROM schedules ORDER BY name"));
  take_tick_.reset(prepare("UPDATE " + kNoUndo + "schedules SET last = :tick WHERE name = :name AND "
                           "created < :tick AND (last IS NULL OR last < :tick)"));
  // The new lease end noted for its queue by fenceq_count, not a RETURNING
  // (above; fenceq-ceiling --renews 3: 510k renews/s against 277k).
  // No later than the attempt's deadline (C3.15), for a job with a
  // max_runtime only.
  renew_.reset(prepare("UPDATE " + kNoUndo + "jobs SET until = " +
                       counted("CASE WHEN kids & 4 <> 0 THEN MIN(:until, COALESCE((SELECT "
                               "NULLIF(r.deadline, 0) FROM job_runtimes r WHERE r.id = jobs.id), "
                               ":until)) ELSE :until END",
                               kCountRenewed) +
                       ", progress = COALESCE(:progress, progress) WHERE " + kCurrent));
  const std::string complete = "UPDATE " + kNoUndo + "jobs SET " +
      rules::complete_set(":result", counted_settling(":now", kCountCompleted));
  complete_[0].reset(prepare(complete + " WHERE " + kCurrent));
  // A long result, kept in job_results (kKidsResult).
  complete_[1].reset(prepare(complete + ", kids = kids | " + std::to_string(rules::kKidsResult) +
                             " WHERE " + kCurrent));
  // The lease-ending writes: one transition (rules::end_lease_set), each its target.
  using rules::LeaseEnd;
  auto ending = [&](LeaseEnd to, const rules::LeaseEndArgs& a) {
    return "UPDATE " + kNoUndo + "jobs SET " + rules::end_lease_set(kSqlite, to, a);
  };
  const std::string own = rules::own_lease(":id", ":owner", ":fence");
  release_.reset(prepare(ending(LeaseEnd::released, {}) + " WHERE " + own + " RETURNING queue"));
  fail_.reset(prepare(
      ending(LeaseEnd::failed, {.now = ":now", .error = ":error", .retry_in = ":retry_in"}) +
      kParkDelayed + " WHERE " + kCurrent + " RETURNING queue, dead, " + rules::kHasChildren));
  check_.reset(prepare("SELECT 1 FROM jobs WHERE " + kCurrent));
  unclaim_.reset(prepare(ending(LeaseEnd::unclaimed, {}) + " WHERE " + own + " RETURNING queue"));
  // A revived keyed job becomes its key's newest: its kseq the next seq,
  // past every kseq there is (seq_ is never below one, load_keys()), when
  // the key's newest is not unfinished already (key_allows_retry).
  retry_.reset(prepare(
      "UPDATE " + kNoUndo + "jobs SET " + rules::revive_set() + kUnpark +
      ", kseq = CASE WHEN ukey IS NULL THEN NULL ELSE :kseq END WHERE id = :id AND " +
      rules::revivable(":now") + " AND " + rules::no_lost_parent() + " RETURNING queue, grp"));
  cancel_.reset(prepare(ending(LeaseEnd::cancelled, {.now = ":now"}) + " WHERE id = :id AND " +
                        rules::cancellable() + " RETURNING queue, " + rules::kHasChildren));
  prepare_group_statements();
  prepare_after_statements();
  prepare_lifecycle_statements();  // and the suspends' (sqlite_suspends.cpp)
  prepare_control_statements();
  prepare_reads();
}

// The rest: reap, purge, the reads, and the clock's mark.
void SqliteStore::prepare_reads() {
  // Written down dead by its last attempt's lease end: expired unless that
  // lease was released.
  reap_.reset(prepare("UPDATE " + kNoUndo + "jobs SET " +
                      rules::reap_set("CASE WHEN " + rules::lease_expired() + " THEN " +
                                      counted_settling(":now", kCountReapedExpired) +
                                      " ELSE " + counted_settling(":now", kCountReaped) + " END") +
                      " WHERE done = 0 AND dead = 0 AND " + rules::exhausted(":now")));
  // Whether reap_ has anything to do: the same index, without the UPDATE's
  // temporary table of row ids, which SQLite opens even for no row (about
  // 28,000 instructions a batch with nothing to reap).
  reap_probe_.reset(prepare("SELECT 1 FROM jobs WHERE done = 0 AND dead = 0 AND " +
                            rules::exhausted(":now") + " LIMIT 1"));
  queue_of_.reset(prepare("SELECT queue, grp FROM jobs WHERE id = ?1"));
  const std::string purgeable = rules::finished() +
                                " AND finished <= :cutoff AND (:queue IS NULL OR queue = :queue)";
  // Each id's fence kept (C1.2), and how it ended (schema 16: C3.13).
  purge_keep_.reset(prepare("INSERT INTO purged_fences(id, fence, ended) SELECT id, fence, " +
                            std::string(rules::kEndedAs) + " FROM jobs WHERE " + purgeable +
                            " ON CONFLICT(id) DO UPDATE SET fence = MAX(fence, excluded.fence), "
                            "ended = excluded.ended"));
  // The failed parents it removes, whose children it settles (C3.13, "Purged parents").
  purge_parents_.reset(prepare("SELECT id, cancelled FROM jobs WHERE " + purgeable +
                               " AND dead = 1 AND done = 0 AND " + rules::kHasChildren +
                               " <> 0"));
  purge_delete_.reset(prepare("DELETE FROM jobs WHERE " + purgeable));
  prepare_job_reads();  // sqlite_reads.cpp
  next_claimable_.reset(prepare(rules::next_claimable_sql(kSqlite, ":queue", ":now")));
  get_meta_.reset(prepare("SELECT value FROM fenceq_meta WHERE key = ?1"));
  set_meta_.reset(prepare(
      "INSERT INTO fenceq_meta(key, value) VALUES(?1, ?2) "
      "ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)"));
}

SqliteStore::~SqliteStore() {
  beat_.reset();  // the last beat's state file written
  rollback();
  checkpointer_.reset();  // closing last, this connection checkpoints all of the log
  // A clean stop, noted durably (FULL: the marker's fsync covers every commit
  // before it, and the last checkpoint at close fsyncs too): the next start
  // needs no new fence epoch. Not after a failed fsync: what the kernel
  // dropped then is not brought back by a later one.
  if (!read_only_ && !fsync_failed_ && db_) {
    try {
      exec("PRAGMA synchronous=FULL");
      exec("BEGIN IMMEDIATE; "
           "INSERT INTO fenceq_meta(key, value) VALUES('last_run', 'clean') "
           "ON CONFLICT(key) DO UPDATE SET value = excluded.value; COMMIT");
    } catch (const StoreError&) {
      rollback();  // the next start treats the run as unclean: safe
    }
  }
  // Statements are finalized before the connection closes: they are
  // declared after it.
}

std::unique_ptr<StoreReads> SqliteStore::open_reader() const {
  if (path_.empty() || path_ == ":memory:" || path_.starts_with("file::memory:")) return nullptr;
  return std::make_unique<SqliteStore>(path_, SyncMode::off, true);
}

sqlite3_stmt* SqliteStore::prepare(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_.get(), sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) fail_with("prepare", rc);
  return s;
}

void SqliteStore::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw StoreError(std::string("sqlite: ") + msg);
  }
}

void SqliteStore::fail_with(const char* what, int rc) {
  const char* msg = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
  throw StoreError(std::string("sqlite ") + what + ": " + msg + " (" + sqlite3_errstr(rc) + ")");
}

int SqliteStore::step_done(sqlite3_stmt* s, const char* what) {
  int rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) fail_with(what, rc);
  return sqlite3_changes(db_.get());
}

bool SqliteStore::step_row(sqlite3_stmt* s, const char* what) {
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return false;
  if (rc != SQLITE_ROW) fail_with(what, rc);
  return true;
}

void SqliteStore::end_row(sqlite3_stmt* s, const char* what) {
  if (sqlite3_step(s) != SQLITE_DONE) fail_with(what, sqlite3_errcode(db_.get()));
}

bool SqliteStore::step_freeing(sqlite3_stmt* s, const char* what) {
  if (!step_row(s, what)) return false;
  if (sqlite3_column_type(s, 0) != SQLITE_NULL) {
    freed(std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                           static_cast<std::size_t>(sqlite3_column_bytes(s, 0))));
  }
  end_row(s, what);
  return true;
}

void SqliteStore::count(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (argc == 5 && sqlite3_value_int64(argv[3]) != 0) {
    // fenceq_count(queue, event, value, kids, id): a job others wait for,
    // done (a complete) or dead (a reap).
    auto* self = static_cast<SqliteStore*>(sqlite3_user_data(ctx));
    const auto* id = reinterpret_cast<const char*>(sqlite3_value_text(argv[4]));
    self->settled_.emplace_back(
        std::string(id ? id : "", static_cast<std::size_t>(sqlite3_value_bytes(argv[4]))),
        sqlite3_value_int(argv[1]) == kCountCompleted ? kSettledDone : kSettledDead);
  }
  auto* self = static_cast<SqliteStore*>(sqlite3_user_data(ctx));
  const auto* q = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  auto& t = self->tally_.at(
      std::string_view(q ? q : "", static_cast<std::size_t>(sqlite3_value_bytes(argv[0]))));
  switch (sqlite3_value_int(argv[1])) {
    case kCountCompleted: t.completed++; break;
    case kCountExpired: t.expired++; break;
    case kCountReapedExpired: t.expired++; [[fallthrough]];
    case kCountReaped: t.dead++; break;
    case kCountRenewed:
      self->changes_.lease_ends.emplace_back(q ? q : "", sqlite3_value_double(argv[2]));
      break;
    default: break;
  }
  sqlite3_result_value(ctx, argv[2]);
}

void SqliteStore::refused(std::string_view id, std::uint64_t QueueTotals::Refused::*op) {
  // Refusals are rare: one lookup of the job's queue. An id that does not
  // exist has none, and counts only in the executor's global counts.
  auto* s = queue_of_.get();
  Use u(s);
  u.text(1, id);
  if (!step_row(s, "queue of a refused write")) return;
  tally_.at(std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                             static_cast<std::size_t>(sqlite3_column_bytes(s, 0))))
      .refused.*op += 1;
  end_row(s, "queue of a refused write");
}

std::string_view SqliteStore::column_view(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return std::string_view(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}

void SqliteStore::freed(std::string_view queue) {
  auto& f = changes_.freed;
  if (std::find(f.begin(), f.end(), queue) == f.end()) f.emplace_back(queue);
}

Store::QueueChanges SqliteStore::take_queue_changes() { return std::exchange(changes_, {}); }

QueueTally::Entries SqliteStore::take_queue_totals() { return tally_.take(); }

std::optional<double> SqliteStore::next_claimable_at(std::string_view queue, double now) {
  auto* s = next_claimable_.get();
  Use u(s);
  u.text(u.at(":queue"), queue).real(u.at(":now"), now);
  int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW) fail_with("next_claimable_at", rc);
  if (sqlite3_column_type(s, 0) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, 0);
}

void SqliteStore::begin() {
  budget_ = kSettlePage;  // edges this transaction may settle (sqlite_after.cpp)
  settle_taken_ = false;
  if (relax_next_ && !relaxed_) {
    exec("PRAGMA synchronous=NORMAL");  // SqliteStore::commit
    relaxed_ = true;
  }
  relax_next_ = false;
  guarded_ = false;  // a run_guarded that threw left it set
  parents_seen_.clear();
  changes_ = {};
  tally_.clear();
  events_.clear();
  configs_dirty_ = false;
  groups_dirty_ = false;
  keys_.settle();
  if (!marking_.empty() || !marking_begin_.empty()) marking_begin_ = marking_;
  Use u(begin_.get());
  step_done(begin_.get(), "begin");
}

void SqliteStore::commit() {
  // About once a second the commit also stores the run's beat (C1.5,
  // run_state.hpp): one row more in this transaction.
  // Not in a settle step's COMMIT, which does not fsync (below).
  const auto beat = beat_ && !relaxed_ ? beat_->due() : std::nullopt;
  if (beat) {
    Use b(beat_stmt_.get());
    sqlite3_bind_int64(beat_stmt_.get(), 1, *beat);
    step_done(beat_stmt_.get(), "store the run's beat");
  }
  // A settle step's COMMIT writes its WAL frames without an fsync
  // (synchronous=NORMAL for its transaction alone, relax_next_commit()):
  // under --sync full that fsync held the serving thread 20-40 ms at times
  // on this VM (test_settle_bounded's fan-out, p99 31.9 ms). No reply waits
  // on the step (parked claims are served after it, in a transaction of
  // their own), a crash before the next synced COMMIT loses it and its
  // work is done again from the pending rows the synced commits kept, and
  // that next COMMIT's fsync takes its frames to the disk (one WAL file,
  // written in order).
  struct Restore {
    SqliteStore& s;
    ~Restore() { s.unrelax(); }
  } restore{*this};
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
    fsync_failed_ = fsync_failed_ || fsync_failed;
    throw StoreError("sqlite commit: " + msg,
                     fsync_failed ? StoreError::Kind::fatal : StoreError::Kind::internal);
  }
  if (beat) {
    beat_->committed(*beat);
  } else if (beat_) {
    beat_->owed();
  }
  keys_.settle();
}

void SqliteStore::unrelax() noexcept {
  if (!relaxed_ || !db_ || !sqlite3_get_autocommit(db_.get())) return;
  sqlite3_exec(db_.get(), "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
  relaxed_ = false;
}

void SqliteStore::rollback() noexcept {
  if (settle_taken_) settle_left_ = true;  // the rows a step took are back
  if (marking_ != marking_begin_) marking_ = marking_begin_;  // its pages are unmarked again
  changes_ = {};
  tally_.clear();
  events_.clear();
  if (!db_) return;
  if (!sqlite3_get_autocommit(db_.get()) && rollback_) {
    sqlite3_step(rollback_.get());
    sqlite3_reset(rollback_.get());
  }
  unrelax();
  relax_next_ = false;  // a step whose begin() never came
  keys_.undo_to(0);  // the keys the rolled-back transaction added, revived or purged
  maybe_parked_ = true;  // the jobs a wake of it brought back are parked again
  if (groups_dirty_) {
    // Groups that joined or left in the rolled-back transaction: the jobs say again.
    try {
      load_groups();
    } catch (const StoreError& e) {
      spdlog::error("{}: re-reading the groups after a rollback: {}", path_, e.what());
    }
  }
  ++overrides_gen_;  // a rolled-back group_config's held groups look again
  if (configs_dirty_) {
    // A queue_config of the rolled-back transaction: the table says again.
    try {
      load_configs();
    } catch (const StoreError& e) {
      spdlog::error("{}: re-reading queue settings after a rollback: {}", path_, e.what());
    }
  }
}

bool SqliteStore::run(const std::vector<Call>& calls, std::vector<CallResult>& out, bool) {
  out.assign(calls.size(), {});
  for (std::size_t i = 0; i < calls.size();) {
    std::size_t end = i + 1;
    while (end < calls.size() && calls[end].group == calls[i].group) ++end;
    if (names_parents(calls, i, end)) {
      // A parent that does not exist refuses it all: ROLLBACK TO undoes the
      // rows, and what this connection noted of them goes too (C3.19:
      // else subscribers heard of jobs that never were).
      const std::size_t events_mark = events_.size();
      QueueTally tally_mark = tally_;
      run_guarded(calls, out, i, end);
      if (out[i].refused) {
        events_.resize(events_mark);
        tally_ = std::move(tally_mark);
      }
    } else {
      for (std::size_t k = i; k < end; ++k) {
        apply_call(calls[k], out[k]);
        if (!deadlines_.empty()) start_deadlines();  // its claims' (C3.15)
      }
    }
    i = end;
  }
  return false;
}


void SqliteStore::apply(const EnqueueParams& p, CallResult& r) {
  const NewJob& job = p.job;
  const double now = p.now;
  const bool waits = job.parents && !job.parents->empty();
  Parents parents;
  if (waits && !parents_known(job, r, parents)) return;  // refused (C3.13)
  if (job.key && key_taken(p, r)) return;  // sqlite_keys.cpp
  auto* s = enqueue_.get();
  Use u(s);
  u.text(u.at(":id"), job.id).text(u.at(":queue"), job.queue);
  if (job.key) {
    u.text(u.at(":key"), *job.key).integer(u.at(":kseq"), seq_ + 1);
  }
  if (job.group) {
    if (!hooked_) mark_grouped(true);  // the first grouped job: the hook, before its INSERT
    u.text(u.at(":grp"), *job.group);
  }
  bind_job_fields(u, job, now);
  // Its bits of kids written with it (an UPDATE of the new row for each was
  // most of an enqueue with `after` or headers): it waits for others, has a
  // max_runtime, has headers. Blocked while a parent is unfinished.
  const bool headers = job.headers && !job.headers->empty();
  u.integer(u.at(":kids"), (waits ? rules::kKidsChild : 0) |
                               (job.max_runtime > 0 ? rules::kKidsRuntime : 0) |
                               (headers ? rules::kKidsHeaders : 0) |
                               (spills(job.payload) ? rules::kKidsPayload : 0) |
                               (job.delay > 0 ? rules::kKidsParked : 0));
  if (job.delay > 0) maybe_parked_ = true;
  if (job.deadline > 0) {  // C3.24
    u.real(u.at(":expires"), job.deadline);
    deadlines_seen_ = true;
  }
  if (waits && parents.waiting > 0) u.real(u.at(":not_before"), rules::kBlockedUntil);
  u.integer(u.at(":seq"), seq_ + 1)
      .integer(u.at(":floor"), fence_floor_)
      .real(u.at(":now"), now);
  const bool inserted = step_done(s, "enqueue") == 1;
  r.ok = inserted;
  if (job.key) r.id = std::string(job.id);
  if (inserted) {
    ++seq_;
    if (job.key) keys_.added(job.queue, *job.key, sqlite3_last_insert_rowid(db_.get()), now);
    if (waits) wait_for_parents(job, parents, now);
    if (job.max_runtime > 0) add_runtime(job);
    if (job.deadline > 0) add_deadline(job);  // sqlite_suspends.cpp
    if (headers) add_headers(job);  // sqlite_lifecycle.cpp
    if (spills(job.payload)) spill_payload(job.id, job.payload);
    if (job.group) {
      join_group(job.queue, *job.group);
    } else if (!grouped_.empty() && grouped_.contains(job.queue)) {
      join_group(job.queue, kNoGroupTurn);
    }
    freed(job.queue);
    if (any_purged_) {
      Use d(unpurge_.get());
      d.text(1, job.id);
      step_done(unpurge_.get(), "enqueue");
    }
  }
}

std::optional<JobState> SqliteStore::state(std::string_view id) {
  auto* s = state_.get();
  Use u(s);
  u.text(1, id);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail_with("state", rc);
  return rows::job_state(SqliteRow{s});
}

void SqliteStore::apply(const ClaimParams& p, CallResult& r) {
  const auto [id, owner, now, ttl] = p;
  // A claim by id follows its queue's settings as claim_next does.
  std::optional<std::string> queue, group;
  const QueueConfig* limits = nullptr;
  if (!configs_.empty() || !grouped_.empty()) {
    Use q(queue_of_.get());
    q.text(1, id);
    if (step_row(queue_of_.get(), "claim")) {
      queue = column_text(queue_of_.get(), 0);
      group = column_text(queue_of_.get(), 1);
      end_row(queue_of_.get(), "claim");
    }
    if (queue) limits = limits_of(*queue);
    if (limits && marking(*queue)) return;  // its leases not all counted yet
    // Its group's settings too, and its claim is the group's turn (C3.11).
    if (group && limits && !group_allowed(*queue, *group, now)) return;
    if (limits) {
      Use a(allowance_.get());
      a.text(a.at(":queue"), *queue).real(a.at(":now"), now);
      if (!step_row(allowance_.get(), "claim")) return;
      const auto allowed = sqlite3_column_int64(allowance_.get(), 0);
      end_row(allowance_.get(), "claim");
      if (allowed < 1) return;
    }
  }
  auto claimed = claim_one(limits ? claim_held_.get() : claim_.get(), id, owner, now, ttl);
  if (claimed && limits) log_claims(*queue, *limits, now, 1);
  if (claimed && group) served(*queue, *group, limits, now, false);  // no turn taken
  r.number = claimed;
}

std::optional<std::int64_t> SqliteStore::claim_one(sqlite3_stmt* s, std::string_view id,
                                                   std::string_view owner, double now,
                                                   double ttl) {
  Use u(s);
  u.text(u.at(":id"), id).text(u.at(":owner"), owner).real(u.at(":until"), now + ttl)
      .real(u.at(":now"), now);
  if (!step_row(s, "claim")) return std::nullopt;
  std::int64_t fence = sqlite3_column_int64(s, 0);
  tally_.at(column_view(s, 1)).claimed++;
  end_row(s, "claim");
  return fence;
}

void SqliteStore::apply(const ClaimNextParams& p, CallResult& r) {
  const auto [queue, owner, now, ttl, max] = p;
  const QueueConfig* limits = limits_of(queue);
  if (limits && marking(queue)) return;  // its leases not all counted yet
  wake_parked(queue, now);
  if (grouped_.contains(queue)) return claim_fair(p, limits, r);
  if (!limits && max == 1) return claim_one_next(p, r);
  auto* s = limits ? claim_next_limited_.get() : claim_next_.get();
  Use u(s);
  u.text(u.at(":queue"), queue).text(u.at(":owner"), owner).real(u.at(":until"), now + ttl)
      .real(u.at(":now"), now).integer(u.at(":max"), max);
  std::vector<ClaimedJob> jobs;
  std::vector<std::pair<std::int64_t, std::int64_t>> order;  // (priority, seq) of each
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    jobs.push_back(rows::claimed_job(SqliteRow{s}, order));
  }
  if (rc != SQLITE_DONE) fail_with("claim_next", rc);
  park_walked(s, jobs.size(), queue, now);
  if (!jobs.empty()) tally_.at(queue).claimed += jobs.size();
  if (limits) log_claims(queue, *limits, now, static_cast<std::int64_t>(jobs.size()));
  r.jobs = rules::most_urgent_first(std::move(jobs), order);
}

void SqliteStore::claim_one_next(const ClaimNextParams& p, CallResult& r) {
  std::int64_t rowid = 0;
  {
    Use u(pick_next_.get());
    u.text(u.at(":queue"), p.queue).real(u.at(":now"), p.now);
    if (!step_row(pick_next_.get(), "claim_next")) {
      park_walked(pick_next_.get(), 0, p.queue, p.now);
      return;
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> order;
    r.jobs.push_back(rows::claimed_job(SqliteRow{pick_next_.get()}, order));
    rowid = sqlite3_column_int64(pick_next_.get(), kPickedRowid);
    end_row(pick_next_.get(), "claim_next");
  }
  Use u(claim_picked_.get());
  u.text(u.at(":owner"), p.owner).real(u.at(":until"), p.now + p.ttl).real(u.at(":now"), p.now)
      .integer(u.at(":rowid"), rowid);
  if (step_done(claim_picked_.get(), "claim_next") != 1) fail_with("claim_next", SQLITE_INTERNAL);
  tally_.at(p.queue).claimed++;
  park_walked(pick_next_.get(), 1, p.queue, p.now);
}

void SqliteStore::apply(const ReapParams& p, CallResult&) {
  if (p.waits_only) {
    end_suspends(p.now);
    expire_deadlines(p.now);
    if (!settled_.empty()) settle_noted(p.now);
    return;
  }
  end_overruns(p.now);  // first: an overrun last attempt is dead of that, not of its lease
  bool due = false;
  {
    Use probe(reap_probe_.get());
    probe.real(probe.at(":now"), p.now);
    due = step_row(reap_probe_.get(), "reap");
    if (due) end_row(reap_probe_.get(), "reap");
  }
  if (due) {
    Use u(reap_.get());
    u.real(u.at(":now"), p.now);
    step_done(reap_.get(), "reap");  // counted by fenceq_count in its SET
  }
  end_suspends(p.now);      // waits that timed out (C3.23)
  expire_deadlines(p.now);  // deadlines that passed (C3.24)
  if (!settled_.empty()) settle_noted(p.now);  // the children of jobs it made dead (C3.13)
}

void SqliteStore::apply(const PurgeParams& p, CallResult& r) {
  if (p.limit > 0) return purge_page(p, r);  // sqlite_control.cpp
  {
    // A failed parent's children it still holds back (retried while it was
    // dead) are settled as its end did (C3.13, "Purged parents").
    auto* st = purge_parents_.get();
    Use u(st);
    u.real(u.at(":cutoff"), p.now - p.older_than).opt_text(u.at(":queue"), p.queue);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      settled_.emplace_back(std::string(column_view(st, 0)),
                            sqlite3_column_int(st, 1) != 0 ? kSettledCancelled : kSettledDead);
    }
    if (rc != SQLITE_DONE) fail_with("purge", rc);
  }
  for (auto* st : {purge_keep_.get(), purge_delete_.get()}) {
    Use u(st);
    u.real(u.at(":cutoff"), p.now - p.older_than).opt_text(u.at(":queue"), p.queue);
    int n = step_done(st, "purge");
    if (st == purge_keep_.get() && n > 0) any_purged_ = true;
    if (st == purge_delete_.get()) r.number = n;
  }
  if (!settled_.empty()) settle_noted(p.now);
}

std::string SqliteStore::claim_next_plan() { return plan_of(claim_next_sql()); }
std::string SqliteStore::pick_next_plan() { return plan_of(pick_next_sql()); }

double SqliteStore::clock_high_water() {
  auto* s = get_meta_.get();
  Use u(s);
  u.text(1, "clock_high_water");
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) fail_with("read clock", rc);
  return sqlite3_column_double(s, 0);
}

void SqliteStore::apply(const ClockMarkParams& p, CallResult&) {
  Use u(set_meta_.get());
  u.text(1, "clock_high_water").real(2, p.mark);
  step_done(set_meta_.get(), "write clock");
}

}  // namespace fenceq::daemon
