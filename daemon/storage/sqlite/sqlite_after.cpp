// The SQLite store's jobs that wait for other jobs
// (docs/contract.md C3.13): `after` on enqueue, the unblocking done in the
// transaction of a parent's fenced complete, and the cancelling of blocked
// children when a parent becomes dead or is cancelled.
//
// A child's edge to each parent is a row of job_after (schema v9), `met`
// once the parent no longer holds the child back: done (or purged after it
// was done), or dead or cancelled with after_failure "run". job_waits.blocked
// counts the edges not met; while it is above 0 the job's not_before is
// rules::kBlockedUntil, so every claim path steps over it as over a
// delayed job, and its own delay waits in job_waits.wait. Each edge is met once,
// so a parent retried and completed after it died never counts twice.
//
// Bounded (C3.13, "When"): a transaction settles at most kSettlePage edges, its
// parents' and those of the children it cancels, each parent's in child id
// order. A parent whose edges are not all settled then waits in
// settle_pending (schema v15) with the last child settled, and the
// executor's steps (settle_step, a few milliseconds each in a transaction
// of its own) go on from there, judging the parent by its state at the
// step: a parent revived meanwhile leaves its children blocked until it
// ends again, a purged one counts as it ended.
//
// Purged (C3.13, "Purged parents"): purged_fences.ended (schema 16) keeps how a
// purged job ended, so a parent purged after it died or was cancelled still
// counts as failed: a child enqueued after it is cancelled at once, the
// retry of a child that waits for it is refused (rules::no_lost_parent)
// unless its after_failure is "run", and the purge itself settles the
// children it still held back (retried while it was dead) as its end did.
#include <algorithm>
#include <chrono>
#include <limits>

#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {

using sqlite::Use;
using sqlite::kNoUndo;

void SqliteStore::prepare_after_statements() {
  savepoint_.reset(prepare("SAVEPOINT fenceq_request"));
  rollback_to_.reset(prepare("ROLLBACK TO fenceq_request"));
  release_savepoint_.reset(prepare("RELEASE fenceq_request"));
  // A parent's state: 0 unfinished, 1 done, 2 dead, 3 cancelled; a purged
  // id (kept in purged_fences) as it ended (schema 16: a failed parent
  // purged still cancels a child enqueued after it, C3.13).
  parent_state_.reset(prepare(std::string("SELECT ") + rules::kEndedAs + " FROM jobs WHERE id = "
                              "?1 UNION ALL SELECT ended FROM purged_fences WHERE id = ?1 LIMIT 1"));
  add_edge_.reset(prepare("INSERT OR IGNORE INTO job_after(parent, child, met) VALUES(?1, ?2, ?3)"));
  // kids: bit 1, others wait for it; bit 2, it waits for others.
  mark_kids_.reset(prepare("UPDATE " + kNoUndo + "jobs SET kids = kids | ?2 WHERE id = ?1 AND "
                           "kids & ?2 = 0"));
  add_wait_.reset(prepare("INSERT OR REPLACE INTO job_waits(child, blocked, after_run, wait) "
                          "VALUES(:id, :blocked, :run, :wait)"));
  block_child_.reset(prepare("UPDATE " + kNoUndo + "jobs SET not_before = :until WHERE id = :id"));
  // Run for every parent settled: plain statements (a SELECT, then the
  // UPDATE) rather than UPDATE ... RETURNING, which SQLite runs through
  // temporary tables (3x the instructions of a parent's complete, callgrind).
  // A page: the next ?3 edges after child ?2, met or not (each read counts
  // against the budget), then those of them not met.
  edges_page_.reset(prepare("SELECT child, met FROM job_after WHERE parent = ?1 AND child > ?2 "
                            "ORDER BY child LIMIT ?3"));
  meet_page_.reset(prepare("UPDATE " + kNoUndo + "job_after SET met = 1 WHERE parent = ?1 AND "
                           "child > ?2 AND child <= ?3 AND met = 0"));
  unblock_.reset(prepare("UPDATE " + kNoUndo + "job_waits SET blocked = blocked - 1 WHERE "
                         "child = ?1 AND blocked > 0"));
  waits_of_.reset(prepare("SELECT blocked, wait FROM job_waits WHERE child = ?1"));
  ready_child_.reset(prepare("UPDATE " + kNoUndo + "jobs SET not_before = :now + :wait WHERE id = "
                             ":id AND done = 0 AND dead = 0 RETURNING queue"));
  child_state_.reset(prepare(
      "SELECT w.after_run, w.blocked FROM job_waits w, jobs j WHERE w.child = ?1 AND j.id = "
      "w.child AND j.done = 0 AND j.dead = 0"));
  cancel_child_.reset(
      prepare("UPDATE " + kNoUndo + "jobs SET " +
              rules::end_lease_set(rules::kSqlite, rules::LeaseEnd::cancelled, {.now = ":now"}) +
              ", error = :error WHERE id = :id AND done = 0 AND dead = 0 "
              "RETURNING " +
              rules::kHasChildren));
  // A retried child's edges, from its parents as they are; a purged parent
  // as it ended (purged_fences.ended): one that failed still holds back a
  // child without after_failure "run", whose retry rules::no_lost_parent
  // refuses anyway.
  recount_edges_.reset(prepare(
      "UPDATE job_after SET met = COALESCE((SELECT p.done = 1 OR (p.dead = 1 AND w.after_run = 1) "
      "FROM jobs p, job_waits w WHERE p.id = job_after.parent AND w.child = job_after.child), "
      "(SELECT f.ended = 1 OR (f.ended >= 2 AND w.after_run = 1) FROM purged_fences f, job_waits "
      "w WHERE f.id = job_after.parent AND w.child = job_after.child), 1) WHERE child = ?1"));
  // settle_pending: a parent left, again (its place kept), taken first in, dropped.
  pending_put_.reset(prepare(
      "INSERT INTO settle_pending(parent, how, settled_to) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(parent) DO UPDATE SET how = excluded.how, settled_to = excluded.settled_to"));
  pending_take_.reset(prepare("SELECT parent, how, settled_to FROM settle_pending ORDER BY n "
                              "LIMIT 1"));
  pending_drop_.reset(prepare("DELETE FROM settle_pending WHERE parent = ?1"));
  // A parent's state as a step judges it: Settled + 1, or 0 unfinished; no row: purged.
  ended_as_.reset(prepare("SELECT CASE WHEN done = 1 THEN 1 WHEN cancelled = 1 THEN 3 WHEN dead = "
                          "1 THEN 2 ELSE 0 END FROM jobs WHERE id = ?1"));
  recount_blocked_.reset(prepare(
      "UPDATE job_waits SET blocked = (SELECT count(*) FROM job_after WHERE child = ?1 AND met = 0) "
      "WHERE child = ?1 RETURNING blocked"));
}

bool SqliteStore::names_parents(const std::vector<Call>& calls, std::size_t from, std::size_t to) {
  for (std::size_t k = from; k < to; ++k) {
    const auto* e = std::get_if<EnqueueParams>(&calls[k].params);
    if (e && e->job.parents && !e->job.parents->empty()) return true;
  }
  return false;
}

void SqliteStore::run_guarded(const std::vector<Call>& calls, std::vector<CallResult>& out,
                              std::size_t from, std::size_t to) {
  step_done(savepoint_.get(), "savepoint");
  sqlite3_reset(savepoint_.get());
  const std::size_t keys_mark = keys_.mark();
  parents_seen_.clear();
  guarded_ = true;
  std::string why;
  for (std::size_t k = from; k < to && why.empty(); ++k) {
    apply_call(calls[k], out[k]);
    if (out[k].refused) why = out[k].why;
  }
  if (!why.empty()) {
    step_done(rollback_to_.get(), "savepoint");
    sqlite3_reset(rollback_to_.get());
    keys_.undo_to(keys_mark);
    maybe_parked_ = true;  // as rollback() says
    for (std::size_t k = from; k < to; ++k) out[k] = CallResult{false, "", {}, {}, true, why};
  }
  step_done(release_savepoint_.get(), "savepoint");
  sqlite3_reset(release_savepoint_.get());
  parents_seen_.clear();
  guarded_ = false;
}

bool SqliteStore::parents_known(const NewJob& job, CallResult& r, Parents& parents) {
  for (const auto& parent : *job.parents) {
    int state = 0;
    if (auto seen = guarded_ ? parents_seen_.find(parent) : parents_seen_.end();
        seen != parents_seen_.end()) {
      state = seen->second.state;
    } else {
      Use u(parent_state_.get());
      u.text(1, parent);
      if (!step_row(parent_state_.get(), "enqueue")) {
        r.refused = true;
        r.why = rules::unknown_parent(parent);
        return false;
      }
      state = sqlite3_column_int(parent_state_.get(), 0);
      end_row(parent_state_.get(), "enqueue");
      if (guarded_) parents_seen_.emplace(parent, ParentSeen{state, false});
    }
    parents.states.push_back(state);
    const bool met = state == 1 || (state >= 2 && job.after_run);
    if (!met && state == 0) ++parents.waiting;
    if (!met && state >= 2 && parents.failed.empty()) {
      parents.failed = "parent " + parent + (state == 3 ? " cancelled" : " dead");
    }
  }
  return true;
}

void SqliteStore::wait_for_parents(const NewJob& job, const Parents& parents, double now) {
  for (std::size_t i = 0; i < job.parents->size(); ++i) {
    const auto& parent = (*job.parents)[i];
    const int state = parents.states[i];
    const bool met = state == 1 || (state >= 2 && job.after_run);
    {
      Use u(add_edge_.get());
      u.text(1, parent).text(2, job.id).integer(3, met ? 1 : 0);
      step_done(add_edge_.get(), "enqueue");
    }
    // Once: a parent marked is left alone, and one this request marked is
    // not looked up again (only its entries run between the clears).
    auto seen = guarded_ ? parents_seen_.find(parent) : parents_seen_.end();
    if (seen == parents_seen_.end() || !seen->second.marked) {
      mark(parent, rules::kKidsParent);
      if (seen != parents_seen_.end()) seen->second.marked = true;
    }
  }
  {
    Use u(add_wait_.get());
    u.text(u.at(":id"), job.id).integer(u.at(":blocked"), parents.waiting)
        .integer(u.at(":run"), job.after_run ? 1 : 0).real(u.at(":wait"), job.delay);
    step_done(add_wait_.get(), "enqueue");
  }
  if (parents.failed.empty()) return;
  Use u(cancel_child_.get());
  u.text(u.at(":id"), job.id).real(u.at(":now"), now).text(u.at(":error"), parents.failed);
  if (step_row(cancel_child_.get(), "enqueue")) end_row(cancel_child_.get(), "enqueue");
}

void SqliteStore::settle_noted(double now) {
  std::vector<SettleWork> work;
  work.reserve(settled_.size());
  for (auto& [parent, how] : settled_) work.push_back({std::move(parent), how, {}});
  settled_.clear();
  settle(std::move(work), now);
}

void SqliteStore::settle(std::vector<SettleWork> work, double now) {
  // Depth first: a cancelled child's own children come before its parent's
  // next page, so the jobs left waiting stay few (each was reached through
  // an edge the budget counted).
  std::vector<SettleWork> cancelled;
  while (!work.empty() && budget_ > 0 && std::chrono::steady_clock::now() < settle_until_) {
    SettleWork w = std::move(work.back());
    work.pop_back();
    cancelled.clear();
    const bool finished = settle_page(w, now, cancelled);
    if (!finished) work.push_back(std::move(w));
    for (auto& c : cancelled) work.push_back(std::move(c));
  }
  for (const auto& w : work) {
    Use u(pending_put_.get());
    u.text(1, w.parent).integer(2, w.how).text(3, w.to);
    step_done(pending_put_.get(), "settle");
    settle_left_ = true;
  }
}

bool SqliteStore::settle_page(SettleWork& w, double now, std::vector<SettleWork>& cancelled) {
  const std::int64_t take = std::min(budget_, kWalkPage);
  std::vector<std::string> children;  // not met yet
  std::string last;
  std::int64_t read = 0;
  {
    Use u(edges_page_.get());
    u.text(1, w.parent).text(2, w.to).integer(3, take);
    int rc;
    while ((rc = sqlite3_step(edges_page_.get())) == SQLITE_ROW) {
      ++read;
      last = column_view(edges_page_.get(), 0);
      if (sqlite3_column_int(edges_page_.get(), 1) == 0) children.push_back(last);
    }
    if (rc != SQLITE_DONE) fail_with("settle", rc);
  }
  budget_ -= read;
  const bool finished = read < take;
  if (children.empty()) {
    w.to = std::move(last);
    return finished;
  }
  {
    Use u(meet_page_.get());
    u.text(1, w.parent).text(2, w.to).text(3, last);
    step_done(meet_page_.get(), "settle");
  }
  w.to = std::move(last);
  for (const auto& child : children) {
    if (w.how == kSettledDone) {
      unblock(child, now);
      continue;
    }
    bool run = false, blocked = false;
    {
      Use u(child_state_.get());
      u.text(1, child);
      if (!step_row(child_state_.get(), "settle")) continue;  // finished already
      run = sqlite3_column_int(child_state_.get(), 0) != 0;
      blocked = sqlite3_column_int64(child_state_.get(), 1) > 0;
      end_row(child_state_.get(), "settle");
    }
    if (run) {
      unblock(child, now);
      continue;
    }
    if (!blocked) continue;
    // Bound as a view: the text must outlive the step.
    const std::string error =
        "parent " + w.parent + (w.how == kSettledDead ? " dead" : " cancelled");
    Use u(cancel_child_.get());
    u.text(u.at(":id"), child).real(u.at(":now"), now).text(u.at(":error"), error);
    if (!step_row(cancel_child_.get(), "settle")) continue;
    const bool kids = sqlite3_column_int64(cancel_child_.get(), 0) != 0;
    end_row(cancel_child_.get(), "settle");
    if (kids) cancelled.push_back({child, kSettledCancelled, {}});
  }
  return finished;
}

Store::SettleStep SqliteStore::settle_step(double now) {
  // Pages of kWalkPage edges until kStepTime: a ping that comes meanwhile
  // waits for one step, never for the whole of it.
  constexpr std::chrono::microseconds kStepTime{3000};
  SettleStep out;
  settle_until_ = std::chrono::steady_clock::now() + kStepTime;
  struct Until {
    std::chrono::steady_clock::time_point& t;
    ~Until() { t = std::chrono::steady_clock::time_point::max(); }
  } until{settle_until_};
  budget_ = std::numeric_limits<std::int64_t>::max();
  // Leases to mark held first (queue_config, sqlite_control.cpp): claims wait for them.
  if (!marking_.empty()) out.changed = mark_step(settle_until_);
  while (settle_left_ && std::chrono::steady_clock::now() < settle_until_) {
    SettleWork w;
    int state = 0;
    {
      Use u(pending_take_.get());
      if (!step_row(pending_take_.get(), "settle")) {
        settle_left_ = false;
        break;
      }
      w.parent = column_view(pending_take_.get(), 0);
      w.how = static_cast<Settled>(sqlite3_column_int(pending_take_.get(), 1));
      w.to = column_view(pending_take_.get(), 2);
      end_row(pending_take_.get(), "settle");
    }
    out.changed = settle_taken_ = true;
    {
      Use u(pending_drop_.get());
      u.text(1, w.parent);
      step_done(pending_drop_.get(), "settle");
    }
    {
      Use u(ended_as_.get());
      u.text(1, w.parent);
      state = w.how + 1;  // purged: as it ended
      if (step_row(ended_as_.get(), "settle")) {
        state = sqlite3_column_int(ended_as_.get(), 0);
        end_row(ended_as_.get(), "settle");
      }
    }
    // Revived since: its children wait for its next end, which settles them.
    if (state == 0) continue;
    w.how = static_cast<Settled>(state - 1);
    // Back in at the end when not finished: parents left take turns.
    settle({std::move(w)}, now);
  }
  out.left = settle_left_ || !marking_.empty();
  return out;
}

void SqliteStore::mark(std::string_view id, int bit) {
  Use u(mark_kids_.get());
  u.text(1, id).integer(2, bit);
  step_done(mark_kids_.get(), "enqueue");
}

void SqliteStore::block(std::string_view id) {
  Use u(block_child_.get());
  u.text(u.at(":id"), id).real(u.at(":until"), rules::kBlockedUntil);
  step_done(block_child_.get(), "block");
}

void SqliteStore::unblock(const std::string& child, double now) {
  double wait = 0;
  {
    Use u(unblock_.get());
    u.text(1, child);
    if (step_done(unblock_.get(), "settle") == 0) return;
  }
  {
    Use u(waits_of_.get());
    u.text(1, child);
    if (!step_row(waits_of_.get(), "settle")) return;
    const bool ready = sqlite3_column_int64(waits_of_.get(), 0) == 0;
    wait = sqlite3_column_double(waits_of_.get(), 1);
    end_row(waits_of_.get(), "settle");
    if (!ready) return;
  }
  Use u(ready_child_.get());
  u.text(u.at(":id"), child).real(u.at(":now"), now).real(u.at(":wait"), wait);
  if (!step_row(ready_child_.get(), "settle")) return;  // cancelled meanwhile
  const std::string queue(column_view(ready_child_.get(), 0));
  end_row(ready_child_.get(), "settle");
  freed(queue);  // parked claims of its queue look again
}

void SqliteStore::recount(std::string_view id) {
  // A job that waits for none has no job_waits row: nothing changes.
  {
    Use u(recount_edges_.get());
    u.text(1, id);
    step_done(recount_edges_.get(), "retry");
  }
  bool blocked = false;
  {
    Use u(recount_blocked_.get());
    u.text(1, id);
    if (!step_row(recount_blocked_.get(), "retry")) return;
    blocked = sqlite3_column_int64(recount_blocked_.get(), 0) > 0;
    end_row(recount_blocked_.get(), "retry");
  }
  if (blocked) block(id);
}

}  // namespace fenceq::daemon
