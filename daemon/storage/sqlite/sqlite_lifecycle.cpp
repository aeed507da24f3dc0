// The SQLite store's lifecycle ops (docs/contract.md C3.14,
// C3.15): max_runtime, beside the job ops of sqlite_store.cpp (snooze, a
// declared write, is sqlite_writes.cpp's).
//
// A job's max_runtime lives in job_runtimes (schema 11), with the deadline
// of its current attempt, and jobs.kids's bit rules::kKidsRuntime says it
// has one: no column of jobs, which every write of every job would pay for
// (two columns cost `batch` 32 about 4% of its instructions, callgrind). A
// claim of such a job caps its lease at the deadline and notes it
// (fenceq_deadline, kClaimUntil in sqlite_store.cpp); start_deadlines()
// stores it after the claim. A renew caps the lease at it. The reap ends
// the attempts that ran to their deadline (end_overruns).
//
// And the parked jobs (schema 19, rules::kKidsParked): a snooze, a fail with
// a retry_in and an enqueue with a delay park the job out of claim_next's
// walk; wake_parked brings back the ones whose delay is over.
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {

using sqlite::Use;
using sqlite::kNoUndo;

namespace {

// The parked jobs of :queue of no group whose delay is over, through
// jobs_wake (schema 19): whether there is one (an index seek), and a page
// of them back in the claims' walk. The probe first, as the page's `rowid
// IN (...)` fills a temporary B-tree (tens of thousands of instructions) on
// every claim_next that had nothing to wake.
std::string parked() {
  return "(kids & " + std::to_string(rules::kKidsParked) + ") <> 0 AND done = 0 AND dead = 0 AND " +
         std::string(rules::kNoGroup);
}
std::string parked_due() {
  return "FROM jobs WHERE queue = :queue AND " + parked() + " AND MAX(until, not_before) <= :now";
}
std::string wake_probe_sql() { return "SELECT 1 " + parked_due() + " LIMIT 1"; }
std::string wake_parked_sql() {
  return "UPDATE " + kNoUndo + "jobs SET kids = " + rules::kUnparkedKids +
         " WHERE rowid IN (SELECT rowid " + parked_due() + " LIMIT " +
         std::to_string(rules::kWakePage) + ")";
}

// The leased jobs among the first kParkWalkPage of :queue's walk (jobs_next's
// head, as claim_next reads it), parked (rules::kLongWalkSteps).
std::string park_walked_sql() {
  return "UPDATE " + kNoUndo + "jobs SET kids = " + rules::kParkedKids +
         " WHERE rowid IN (SELECT rowid FROM (SELECT rowid, until FROM jobs WHERE queue = :queue "
         "AND done = 0 AND dead = 0 AND " +
         rules::kNoGroup + " AND " + rules::kUnblockedSqlite + " ORDER BY " + rules::urgency() +
         " LIMIT " + std::to_string(rules::kParkWalkPage) + ") WHERE until > :now)";
}

}  // namespace

void SqliteStore::prepare_lifecycle_statements() {
  park_walked_.reset(prepare(park_walked_sql()));
  wake_parked_.reset(prepare(wake_parked_sql()));
  wake_probe_.reset(prepare(wake_probe_sql()));
  any_parked_.reset(prepare("SELECT 1 FROM jobs WHERE " + parked() + " LIMIT 1"));
  add_headers_.reset(prepare("INSERT OR REPLACE INTO job_headers(id, headers) VALUES(?1, ?2)"));
  spill_payload_.reset(prepare("INSERT OR REPLACE INTO job_payloads(id, payload) VALUES(?1, ?2)"));
  drop_payload_.reset(prepare("DELETE FROM job_payloads WHERE id = ?1"));
  spill_result_.reset(prepare("INSERT OR REPLACE INTO job_results(id, result) VALUES(?1, ?2)"));
  add_runtime_.reset(prepare("INSERT OR REPLACE INTO job_runtimes(id, max_runtime, deadline) "
                             "VALUES(?1, ?2, 0)"));
  start_deadline_.reset(prepare("UPDATE OR FAIL job_runtimes SET deadline = ?2 WHERE id = ?1"));
  // An attempt ran to its deadline when its lease was renewed up to it
  // (a lease that ended sooner ended by its ttl, as any lease).
  overrun_.reset(prepare(
      "UPDATE OR FAIL jobs SET " +
      rules::end_lease_set(rules::kSqlite, rules::LeaseEnd::overrun, {.now = ":now"}) +
      " WHERE id IN (SELECT r.id FROM job_runtimes r WHERE r.deadline > 0 AND r.deadline <= :now)"
      " AND until >= (SELECT r.deadline FROM job_runtimes r WHERE r.id = jobs.id) AND done = 0 "
      "AND dead = 0 RETURNING id, queue, dead, " +
      rules::kHasChildren));
  deadline_passed_.reset(prepare("UPDATE OR FAIL job_runtimes SET deadline = 0 WHERE deadline > 0 "
                                 "AND deadline <= ?1"));
  Statement any(prepare("SELECT 1 FROM job_runtimes LIMIT 1"));
  runtimes_seen_ = sqlite3_step(any.get()) == SQLITE_ROW;
  prepare_suspend_statements();
}

void SqliteStore::add_runtime(const NewJob& job) {
  Use u(add_runtime_.get());
  u.text(1, job.id).real(2, job.max_runtime);
  step_done(add_runtime_.get(), "enqueue");  // kKidsRuntime: set by the enqueue itself
  runtimes_seen_ = true;
}

void SqliteStore::add_headers(const NewJob& job) {
  const std::string text = rows::headers_text(*job.headers);  // bound, not copied: kept to the step
  Use u(add_headers_.get());
  u.text(1, job.id).text(2, text);
  step_done(add_headers_.get(), "enqueue");  // kKidsHeaders: set by the enqueue itself
}

bool SqliteStore::spills(const Payload* p) { return p && p->bytes.size() > rules::kSpillBytes; }

void SqliteStore::spill_payload(std::string_view id, const Payload* p) {
  if (!spills(p)) {
    Use u(drop_payload_.get());
    u.text(1, id);
    step_done(drop_payload_.get(), "enqueue");
    return;
  }
  Use u(spill_payload_.get());
  u.text(1, id).payload(2, p);
  step_done(spill_payload_.get(), "enqueue");  // kKidsPayload: set by the enqueue itself
}

void SqliteStore::spill_result(std::string_view id, std::string_view result) {
  Use u(spill_result_.get());
  u.text(1, id).text(2, result);
  step_done(spill_result_.get(), "complete");  // kKidsResult: set by the complete itself
}

void SqliteStore::note_deadline(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  auto* self = static_cast<SqliteStore*>(sqlite3_user_data(ctx));
  const auto* id = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const double deadline = sqlite3_value_double(argv[1]);
  self->deadlines_.emplace_back(
      std::string(id ? id : "", static_cast<std::size_t>(sqlite3_value_bytes(argv[0]))), deadline);
  sqlite3_result_double(ctx, deadline);
}

void SqliteStore::start_deadlines() {
  auto started = std::move(deadlines_);
  deadlines_.clear();
  for (const auto& [id, deadline] : started) {
    Use u(start_deadline_.get());
    u.text(1, id).real(2, deadline);
    step_done(start_deadline_.get(), "claim");
  }
}

void SqliteStore::end_overruns(double now) {
  if (!runtimes_seen_) return;  // no job has had a max_runtime: nothing to look at
  // A cut is a failed attempt for the events (JobEventCall::fail).
  const auto call = std::exchange(event_call_, JobEventCall::fail);
  struct Restore {
    JobEventCall& to;
    JobEventCall was;
    ~Restore() { to = was; }
  } restore{event_call_, call};
  // Counted as fail counts (a failed attempt, then retried or dead); its
  // dead jobs' children settled by the caller (settle_noted).
  {
    Use u(overrun_.get());
    u.real(u.at(":now"), now);
    int rc;
    while ((rc = sqlite3_step(overrun_.get())) == SQLITE_ROW) {
      const auto queue = column_view(overrun_.get(), 1);
      auto& t = tally_.at(queue);
      t.failed++;
      if (sqlite3_column_int64(overrun_.get(), 2) != 0) {
        t.dead++;
        if (sqlite3_column_int64(overrun_.get(), 3) != 0) {
          settled_.emplace_back(std::string(column_view(overrun_.get(), 0)), kSettledDead);
        }
      } else {
        t.retried++;
        freed(queue);
      }
    }
    if (rc != SQLITE_DONE) fail_with("reap", rc);
  }
  // Every deadline passed is done with: overrun, or the attempt ended sooner.
  Use p(deadline_passed_.get());
  p.real(1, now);
  step_done(deadline_passed_.get(), "reap");
}

bool SqliteStore::parked_exist() {
  Use u(any_parked_.get());
  const int rc = sqlite3_step(any_parked_.get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_with("claim_next", rc);
  return rc == SQLITE_ROW;
}

void SqliteStore::park_walked(sqlite3_stmt* walk, std::size_t claimed, std::string_view queue,
                              double now) {
  const long long steps = sqlite3_stmt_status(walk, SQLITE_STMTSTATUS_VM_STEP, 1);
  if (steps - static_cast<long long>(claimed) * rules::kClaimSteps <= rules::kLongWalkSteps) return;
  Use u(park_walked_.get());
  u.text(u.at(":queue"), queue).real(u.at(":now"), now);
  if (step_done(park_walked_.get(), "claim_next") > 0) maybe_parked_ = true;
}

void SqliteStore::wake_parked(std::string_view queue, double now) {
  if (!maybe_parked_) return;  // no job is parked: no probe
  {
    Use u(wake_probe_.get());
    u.text(u.at(":queue"), queue).real(u.at(":now"), now);
    const int rc = sqlite3_step(wake_probe_.get());
    if (rc == SQLITE_DONE) return;  // none due: the usual case
    if (rc != SQLITE_ROW) fail_with("claim_next", rc);
  }
  Use w(wake_parked_.get());
  w.text(w.at(":queue"), queue).real(w.at(":now"), now);
  if (step_done(wake_parked_.get(), "claim_next") < rules::kWakePage) maybe_parked_ = parked_exist();
}

}  // namespace fenceq::daemon
