// The SQLite store's suspend and signal (C3.23) and deadlines (C3.24).
//
// A suspended job keeps no lease (LeaseEnd::suspended: its attempt given
// back) and its not_before is rules::kSuspendedUntil, so every claim path
// steps over it as over a blocked job; its row of job_suspends holds the one
// token that wakes it, when its wait ends and what then. A signal takes the
// row (the token is used up with it), makes the job claimable at its `now`
// and keeps its value as the job's step named rules::kSignalStep, which
// every claim path reads with the steps. The reap (end_suspends) ends the
// waits that timed out, a page at a time, soonest first.
//
// A deadline is jobs.expires: rules::claimable() refuses a claim from then
// on, on every path; the reap (expire_deadlines) writes such a job down dead,
// a page of job_deadlines at a time, soonest first, and takes every job it
// meets finished (or gone) out of it. A job leased or suspended at its
// deadline keeps its row until that ends.
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {

using sqlite::Use;

namespace {

// How many waits or deadlines one reap ends at most (the rest at the next).
constexpr int kTimeoutPage = 256;

std::string suspend_sql() {
  return "UPDATE jobs SET " + rules::end_lease_set(rules::kSqlite, rules::LeaseEnd::suspended) +
         " WHERE " + rules::current_lease(":id", ":owner", ":fence", ":now") + " RETURNING queue";
}
std::string forget_signal_sql() {
  return "DELETE FROM job_steps WHERE id = ?1 AND step = ''";
}
std::string add_suspend_sql() {
  return "INSERT OR REPLACE INTO job_suspends(id, token, timeout, fail) VALUES(?1, ?2, ?3, ?4)";
}
// The job a token wakes at :now: suspended, its wait not timed out.
std::string signalled_sql() {
  return std::string("SELECT s.id FROM job_suspends s, jobs j WHERE s.token = :token AND "
                     "s.timeout > :now AND j.id = s.id AND j.done = 0 AND j.dead = 0 AND "
                     "j.not_before >= ") +
         rules::kSuspendedUntilSql;
}
std::string wake_sql() {
  return "UPDATE jobs SET not_before = ?2, kids = kids | " + std::to_string(rules::kKidsSteps) +
         " WHERE id = ?1 RETURNING queue";
}
std::string drop_suspend_sql() { return "DELETE FROM job_suspends WHERE id = ?1"; }
std::string keep_signal_sql() {
  return "INSERT OR REPLACE INTO job_steps(id, step, value, is_bin) VALUES(?1, '', ?2, ?3)";
}
std::string timed_out_sql() {
  return "SELECT id, fail FROM job_suspends WHERE timeout <= ?1 ORDER BY timeout LIMIT " +
         std::to_string(kTimeoutPage);
}
// A wait that timed out: ready again at `now`, or dead (fail).
std::string time_out_sql() {
  return std::string("UPDATE jobs SET error = '") + rules::kSuspendTimedOut +
         "', dead = ?3, finished = CASE WHEN ?3 THEN ?2 ELSE finished END, not_before = CASE "
         "WHEN ?3 THEN not_before ELSE ?2 END WHERE id = ?1 AND done = 0 AND dead = 0 AND "
         "not_before >= " + rules::kSuspendedUntilSql + " RETURNING queue, dead, " +
         rules::kHasChildren;
}
std::string add_deadline_sql() { return "INSERT OR IGNORE INTO job_deadlines(at, id) VALUES(?1, ?2)"; }
// A page of the deadlines that came, each with whether its job is done
// with it: finished or gone (1), still leased or suspended (0: kept).
std::string deadlines_due_sql() {
  return std::string("SELECT d.at, d.id, j.id IS NULL OR j.done = 1 OR j.dead = 1 FROM "
                     "job_deadlines d LEFT JOIN jobs j ON j.id = d.id WHERE d.at <= ?1 ORDER BY "
                     "d.at LIMIT ") +
         std::to_string(kTimeoutPage);
}
std::string expire_sql() {
  return std::string("UPDATE jobs SET dead = 1, finished = :now, error = '") +
         rules::kDeadlinePassed + "', expires = NULL WHERE id = :id AND done = 0 AND dead = 0 AND " +
         rules::deadline_missed(":now") + " RETURNING queue, " + rules::kHasChildren;
}
std::string drop_deadline_sql() { return "DELETE FROM job_deadlines WHERE at = ?1 AND id = ?2"; }

}  // namespace

void SqliteStore::prepare_suspend_statements() {
  Statement any(prepare("SELECT 1 FROM job_suspends LIMIT 1"));
  suspends_seen_ = sqlite3_step(any.get()) == SQLITE_ROW;
  Statement expiring(prepare("SELECT 1 FROM job_deadlines LIMIT 1"));
  deadlines_seen_ = sqlite3_step(expiring.get()) == SQLITE_ROW;
}

void SqliteStore::apply(const SuspendParams& p, CallResult& r) {
  {
    auto* s = cached("suspend", suspend_sql);
    Use u(s);
    u.text(u.at(":id"), p.id).text(u.at(":owner"), p.owner).integer(u.at(":fence"), p.fence)
        .real(u.at(":now"), p.now);
    if (!step_row(s, "suspend")) return;  // not the current lease
    end_row(s, "suspend");
  }
  {
    auto* s = cached("forget_signal", forget_signal_sql);
    Use u(s);
    u.text(1, p.id);
    step_done(s, "suspend");
  }
  auto* s = cached("add_suspend", add_suspend_sql);
  Use u(s);
  u.text(1, p.id).text(2, p.token).real(3, p.now + p.timeout).integer(4, p.fail ? 1 : 0);
  step_done(s, "suspend");
  suspends_seen_ = true;
  r.ok = true;
  r.id = p.token;
}

void SqliteStore::apply(const SignalParams& p, CallResult& r) {
  std::string id;
  {
    auto* s = cached("signalled", signalled_sql);
    Use u(s);
    u.text(u.at(":token"), p.token).real(u.at(":now"), p.now);
    if (!step_row(s, "signal")) return;  // unknown, used, timed out, or the job moved on
    id = std::string(column_view(s, 0));
    end_row(s, "signal");
  }
  {
    auto* s = cached("wake", wake_sql);
    Use u(s);
    u.text(1, id).real(2, p.now);
    step_freeing(s, "signal");
  }
  {
    auto* s = cached("drop_suspend", drop_suspend_sql);
    Use u(s);
    u.text(1, id);
    step_done(s, "signal");
  }
  auto* s = cached("keep_signal", keep_signal_sql);
  Use u(s);
  u.text(1, id);
  if (*p.value) {
    u.blob(2, (*p.value)->bytes).integer(3, (*p.value)->binary ? 1 : 0);
  } else {
    sqlite3_bind_null(s, 2);
    u.integer(3, 0);
  }
  step_done(s, "signal");
  r.ok = true;
}

void SqliteStore::end_suspends(double now) {
  if (!suspends_seen_) return;
  std::vector<std::pair<std::string, bool>> due;
  {
    auto* s = cached("timed_out", timed_out_sql);
    Use u(s);
    u.real(1, now);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      due.emplace_back(std::string(column_view(s, 0)), sqlite3_column_int(s, 1) != 0);
    }
    if (rc != SQLITE_DONE) fail_with("reap", rc);
  }
  if (due.empty()) return;
  // A wait that timed out is a failed attempt for the events and the counts.
  const auto call = std::exchange(event_call_, JobEventCall::fail);
  struct Restore {
    JobEventCall& to;
    JobEventCall was;
    ~Restore() { to = was; }
  } restore{event_call_, call};
  for (const auto& [id, fail] : due) {
    {
      auto* s = cached("time_out", time_out_sql);
      Use u(s);
      u.text(1, id).real(2, now).integer(3, fail ? 1 : 0);
      if (step_row(s, "reap")) {
        const auto queue = column_view(s, 0);
        auto& t = tally_.at(queue);
        t.failed++;
        if (sqlite3_column_int(s, 1) != 0) {
          t.dead++;
          if (sqlite3_column_int(s, 2) != 0) settled_.emplace_back(id, kSettledDead);
        } else {
          t.retried++;
          freed(queue);
        }
        end_row(s, "reap");
      }
    }
    auto* s = cached("drop_suspend", drop_suspend_sql);
    Use u(s);
    u.text(1, id);
    step_done(s, "reap");
  }
}

void SqliteStore::add_deadline(const NewJob& job) {
  auto* s = cached("add_deadline", add_deadline_sql);
  Use u(s);
  u.real(1, job.deadline).text(2, job.id);
  step_done(s, "enqueue");
}

void SqliteStore::expire_deadlines(double now) {
  if (!deadlines_seen_) return;
  struct Due {
    double at;
    std::string id;
    bool over;  // the job finished or went: its row goes
  };
  std::vector<Due> due;
  {
    auto* s = cached("deadlines_due", deadlines_due_sql);
    Use u(s);
    u.real(1, now);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      due.push_back({sqlite3_column_double(s, 0), std::string(column_view(s, 1)),
                     sqlite3_column_int(s, 2) != 0});
    }
    if (rc != SQLITE_DONE) fail_with("reap", rc);
  }
  if (due.empty()) return;
  const auto call = std::exchange(event_call_, JobEventCall::expire);
  struct Restore {
    JobEventCall& to;
    JobEventCall was;
    ~Restore() { to = was; }
  } restore{event_call_, call};
  for (const auto& d : due) {
    bool ended = d.over;
    if (!ended) {
      auto* s = cached("expire", expire_sql);
      Use u(s);
      u.text(u.at(":id"), d.id).real(u.at(":now"), now);
      if (step_row(s, "reap")) {  // else leased or suspended: looked at again
        auto& t = tally_.at(column_view(s, 0));
        t.dead++;
        t.deadline_passed++;
        if (sqlite3_column_int(s, 1) != 0) settled_.emplace_back(d.id, kSettledDead);
        end_row(s, "reap");
        ended = true;
      }
    }
    if (!ended) continue;
    auto* s = cached("drop_deadline", drop_deadline_sql);
    Use u(s);
    u.real(1, d.at).text(2, d.id);
    step_done(s, "reap");
  }
}

}  // namespace fenceq::daemon
