// The SQLite store's declared writes: the ops declared in
// protocol/ops/ops.json with a `store` section (their parameter structs are
// generated: store_calls.inc, store.hpp), each applied here by an overload
// of Declared::apply, with its statement by its name (cached(): prepared on
// its first use, then kept), beside apply_declared(), their one dispatch.
// Adding such an op to the SQLite store (docs/architecture.md, "Adding an
// op: every file it touches") is adding its section here, and nothing to
// sqlite_store.hpp: an op declared without its apply here is a compile error
// in apply_declared(). The PostgreSQL side is pg_writes.cpp. Below them,
// the writes of a lease (renew, complete, release, fail, unclaim, check)
// and of a job by its id (retry, cancel).
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {

struct SqliteStore::Declared {
  // --- snooze: SnoozeParams (C3.14) -------------------------------------------
  // The current lease only (C3.5's guard): a snooze after the lease ended,
  // or with an old fence, changes nothing.
  static std::string snooze_sql() {
    return "UPDATE OR FAIL jobs SET " +
           rules::end_lease_set(rules::kSqlite, rules::LeaseEnd::snoozed, {.at = ":now + :delay"}) +
           ", kids = " + rules::kParkedKids +  // schema 19: parked until wake_parked
           " WHERE " + rules::current_lease(":id", ":owner", ":fence", ":now") + " RETURNING queue";
  }
  static void apply(SqliteStore& s, const SnoozeParams& p, CallResult& r) {
    s.maybe_parked_ = true;
    sqlite3_stmt* st = s.cached("snooze", snooze_sql);
    sqlite::Use u(st);
    u.text(u.at(":id"), p.id).text(u.at(":owner"), p.owner).integer(u.at(":fence"), p.fence)
        .real(u.at(":now"), p.now).real(u.at(":delay"), p.delay);
    r.ok = s.step_freeing(st, "snooze");
  }
};

// --- every declared write -----------------------------------------------------

void SqliteStore::apply_declared(const Call::Params& params, CallResult& r) {
  std::visit(
      [&](const auto& p) {
        if constexpr (kDeclaredCall<std::decay_t<decltype(p)>>) Declared::apply(*this, p, r);
      },
      params);
}

sqlite3_stmt* SqliteStore::cached(std::string_view name, std::string (*sql)()) {
  for (auto& [n, st] : cached_) {
    if (n == name) return st.get();
  }
  cached_.emplace_back(name, Statement(prepare(sql())));
  return cached_.back().second.get();
}

// The writes of a lease, and of a job by its id (C3.4-C3.6, C3.8's retry
// and cancel): each its statement, judged by the lease it names.
namespace {
// Binds the (id, owner, fence, now) of a lease check.
void bind_lease(Use& u, const LeaseParams& l, double now) {
  u.text(u.at(":id"), l.id).text(u.at(":owner"), l.owner).integer(u.at(":fence"), l.fence)
      .real(u.at(":now"), now);
}
}  // namespace

void SqliteStore::apply(const RenewParams& p, CallResult& r) {
  auto* s = renew_.get();
  Use u(s);
  bind_lease(u, p, p.now);
  u.real(u.at(":until"), p.now + p.ttl);
  if (p.progress) u.text(u.at(":progress"), *p.progress);
  // Its lease end noted for its queue by fenceq_count.
  r.ok = step_done(s, "renew") == 1;
  if (!r.ok) refused(p.id, &QueueTotals::Refused::renew);
}

void SqliteStore::apply(const CompleteParams& p, CallResult& r) {
  {
    const bool spilled = p.result && *p.result && (*p.result)->size() > rules::kSpillBytes;
    auto* s = complete_[spilled].get();
    Use u(s);
    bind_lease(u, p, p.now);
    if (p.result && !spilled) u.opt_text(u.at(":result"), *p.result);
    // Counted completed by fenceq_count in its SET.
    r.ok = step_done(s, "complete") == 1;
    if (r.ok && spilled) spill_result(p.id, **p.result);  // sqlite_lifecycle.cpp
  }
  if (!r.ok) refused(p.id, &QueueTotals::Refused::complete);
  if (!settled_.empty()) settle_noted(p.now);  // its children (C3.13)
}

void SqliteStore::apply(const ReleaseParams& p, CallResult& r) {
  {
    Use u(release_.get());
    u.text(u.at(":id"), p.id).text(u.at(":owner"), p.owner).integer(u.at(":fence"), p.fence);
    r.ok = step_freeing(release_.get(), "release");
  }
  if (!r.ok) refused(p.id, &QueueTotals::Refused::release);
}

void SqliteStore::apply(const FailParams& p, CallResult& r) {
  auto* s = fail_.get();
  {
    Use u(s);
    bind_lease(u, p, p.now);
    u.text(u.at(":error"), p.error);
    if (p.retry_in) u.real(u.at(":retry_in"), *p.retry_in);
    if (p.retry_in && *p.retry_in > 0) maybe_parked_ = true;  // kParkDelayed
    if (step_row(s, "fail")) {
      const auto queue = column_view(s, 0);
      auto& t = tally_.at(queue);
      t.failed++;
      if (sqlite3_column_int64(s, 1) != 0) {
        t.dead++;  // its attempts are used up
        if (sqlite3_column_int64(s, 2) != 0) settled_.emplace_back(std::string(p.id), kSettledDead);
      } else {
        t.retried++;  // claimable again after the backoff
        freed(queue);
      }
      end_row(s, "fail");
      r.ok = true;
      if (!settled_.empty()) settle_noted(p.now);  // its children (C3.13)
      return;
    }
  }
  refused(p.id, &QueueTotals::Refused::fail);
}

void SqliteStore::apply(const UnclaimParams& p, CallResult& r) {
  Use u(unclaim_.get());
  u.text(u.at(":id"), p.id).text(u.at(":owner"), p.owner).integer(u.at(":fence"), p.fence);
  r.ok = step_freeing(unclaim_.get(), "unclaim");
}

void SqliteStore::apply(const CheckParams& p, CallResult& r) {
  auto* s = check_.get();
  Use u(s);
  bind_lease(u, p, p.now);
  int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_with("check", rc);
  r.ok = rc == SQLITE_ROW;
}

// C3.22: a step saved once per job, by its current lease. Most saves are
// one statement, as a renew is: the step's text appended to the job's row
// (jobs.steps, schema 24) under the lease, when the job has no rows of
// job_steps and the step fits every bound and is not there (step_fits).
// Otherwise the state is read (the lease, the row's steps, job_steps'):
// not the current lease, saved before, past a bound, or the step goes to
// job_steps, as the row's steps do with the save that would take their
// text past rules::kInlineStepsBytes. A row of job_steps for every step
// was one more page for each batch's commit to write and sync; the row's
// text is mostly in a page the batch writes anyway (bench/README.md).
namespace {
std::string step_append_sql() {
  return "UPDATE jobs SET steps = COALESCE(steps, '') || :text WHERE " +
         rules::current_lease(":id", ":owner", ":fence", ":now") + " AND (kids & " +
         std::to_string(rules::kKidsSteps) +
         ") = 0 AND fenceq_step_fits(steps, :step, :bytes, :more)";
}
// The queue and group of a step_saved event (C3.19): read apart, as a
// RETURNING fills a temporary B-tree every time, events or not.
std::string step_job_sql() { return "SELECT queue, grp FROM jobs WHERE id = ?1"; }
std::string step_state_sql() {
  return "SELECT steps, kids & " + std::to_string(rules::kKidsSteps) +
         ", queue, grp, rowid FROM jobs WHERE " +
         rules::current_lease(":id", ":owner", ":fence", ":now");
}
// A job's rows of job_steps, the signal's (rules::kSignalStep, C3.23) left
// out of the bounds (it is no step): how many, their bytes, whether this
// step is among them, in one walk of job_steps' key.
std::string step_rows_sql() {
  return "SELECT count(*), COALESCE(sum(length(value)), 0), COALESCE(max(step = :step), 0) FROM "
         "job_steps WHERE id = :id AND step <> ''";
}
std::string step_text_sql() { return "UPDATE jobs SET steps = ?2 WHERE rowid = ?1"; }
std::string steps_moved_sql() {
  return "UPDATE jobs SET steps = NULL, kids = kids | " + std::to_string(rules::kKidsSteps) +
         " WHERE rowid = ?1";
}
// OR FAIL: no statement journal (the state read just now says the step is
// not there, and the batch's transaction is this thread's alone).
std::string step_insert_sql() {
  return "INSERT " + kNoUndo + "INTO job_steps(id, step, value, is_bin) VALUES(?1, ?2, ?3, ?4)";
}
}  // namespace

void SqliteStore::insert_step(std::string_view id, std::string_view step,
                              const std::optional<Payload>& value) {
  auto* s = cached("step_insert", step_insert_sql);
  Use u(s);
  u.text(1, id).text(2, step);
  if (value) {
    u.blob(3, value->bytes).integer(4, value->binary ? 1 : 0);
  } else {
    sqlite3_bind_null(s, 3);
    u.integer(4, 0);
  }
  step_done(s, "step_save");
}

// C3.19: no row of jobs tells a step saved; the job's queue and group are
// the row's columns `at` and `at` + 1.
JobEvent SqliteStore::step_saved_event(const StepSaveParams& p, sqlite3_stmt* s, int at) {
  JobEvent e{JobEventKind::step_saved, std::string(p.id), std::string(column_view(s, at)),
             p.fence, std::nullopt, std::nullopt};
  if (sqlite3_column_type(s, at + 1) != SQLITE_NULL) e.group = std::string(column_view(s, at + 1));
  return e;
}

void SqliteStore::step_fits(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const auto* t = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string_view text(t ? t : "", static_cast<std::size_t>(sqlite3_value_bytes(argv[0])));
  const auto* st = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
  const std::string_view step(st ? st : "", static_cast<std::size_t>(sqlite3_value_bytes(argv[1])));
  const auto bytes = static_cast<std::size_t>(sqlite3_value_int64(argv[2]));
  const auto more = static_cast<std::size_t>(sqlite3_value_int64(argv[3]));
  const auto held = rows::tally_steps(text, step);
  sqlite3_result_int(ctx, !held.saved && text.size() + more <= rules::kInlineStepsBytes &&
                              rules::steps_fit(held.n, held.held, bytes));
}

void SqliteStore::apply(const StepSaveParams& p, CallResult& r) {
  const std::size_t bytes = *p.value ? (*p.value)->bytes.size() : 0;
  std::string text;  // the row's steps
  rows::append_step_text(text, p.step, *p.value);
  if (text.size() <= rules::kInlineStepsBytes) {
    auto* s = cached("step_append", step_append_sql);
    Use u(s);
    bind_lease(u, p, p.now);
    u.text(u.at(":step"), p.step).integer(u.at(":bytes"), static_cast<std::int64_t>(bytes));
    u.text(u.at(":text"), text).integer(u.at(":more"), static_cast<std::int64_t>(text.size()));
    if (step_done(s, "step_save") == 1) {
      if (events_on_) {
        auto* q = cached("step_job", step_job_sql);
        Use w(q);
        w.text(1, p.id);
        if (!step_row(q, "step_save")) fail_with("step_save", SQLITE_DONE);
        events_.push_back(step_saved_event(p, q, 0));
        end_row(q, "step_save");
      }
      r.ok = true;
      return;
    }
  }
  save_step_by_state(p, r);
}

void SqliteStore::save_step_by_state(const StepSaveParams& p, CallResult& r) {
  const std::size_t bytes = *p.value ? (*p.value)->bytes.size() : 0;
  std::optional<JobEvent> step_event;
  std::string text;  // the row's steps
  bool in_row = true;  // the steps are (to be) in the row
  std::int64_t rowid = 0;
  {
    auto* s = cached("step_state", step_state_sql);
    Use u(s);
    bind_lease(u, p, p.now);
    if (!step_row(s, "step_save")) return;  // not the current lease
    const bool has_rows = sqlite3_column_int(s, 1) != 0;
    text = column_view(s, 0);
    rowid = sqlite3_column_int64(s, 4);
    auto [n, held, saved] = rows::tally_steps(text, p.step);
    if (!saved && events_on_) step_event = step_saved_event(p, s, 2);
    end_row(s, "step_save");
    if (has_rows && !saved) {  // its steps moved, or a signal
      auto* c = cached("step_rows", step_rows_sql);
      Use w(c);
      w.text(w.at(":id"), p.id).text(w.at(":step"), p.step);
      if (!step_row(c, "step_save")) fail_with("step_save", SQLITE_DONE);
      in_row = sqlite3_column_int64(c, 0) == 0;
      n += static_cast<std::size_t>(sqlite3_column_int64(c, 0));
      held += static_cast<std::size_t>(sqlite3_column_int64(c, 1));
      saved = sqlite3_column_int(c, 2) != 0;
      end_row(c, "step_save");
    }
    if (saved) return;  // saved before: kept as it is (false)
    if (auto why = rules::steps_refused(p.id, n, held, bytes)) {
      r.refused = true;
      r.why = std::move(*why);
      return;
    }
  }
  if (in_row) {
    rows::append_step_text(text, p.step, *p.value);
    if (text.size() <= rules::kInlineStepsBytes) {
      auto* s = cached("step_text", step_text_sql);
      Use u(s);
      u.integer(1, rowid).text(2, text);
      step_done(s, "step_save");
    } else {  // past the row's bound: every step to job_steps
      rows::each_step(text, [&](const rows::StepText& t) {
        insert_step(p.id, t.name, rows::step_value(t));
      });
      auto* s = cached("steps_moved", steps_moved_sql);
      Use u(s);
      u.integer(1, rowid);
      step_done(s, "step_save");
    }
  } else {
    insert_step(p.id, p.step, *p.value);
  }
  if (step_event) events_.push_back(std::move(*step_event));
  r.ok = true;
}

void SqliteStore::apply(const RetryParams& p, CallResult& r) {
  std::optional<KeyOf> key;
  if (keys_.size() > 0 && !key_allows_retry(p.id, p.now, key)) return;
  auto* s = retry_.get();
  Use u(s);
  u.text(u.at(":id"), p.id).real(u.at(":now"), p.now).integer(u.at(":kseq"), seq_ + 1);
  if (!step_row(s, "retry")) return;
  ++seq_;  // taken by its kseq if it has a key
  if (key) keys_.revived(key->queue, key->key, key->rowid);
  const std::string queue(column_view(s, 0));
  const auto group = column_text(s, 1);
  tally_.at(queue).retried++;
  freed(queue);
  end_row(s, "retry");
  r.ok = true;
  recount(p.id);  // blocked again while a parent is not done (C3.13)
  // Open again: its group takes turns again ('' in a queue with groups).
  if (group) {
    join_group(queue, *group);
  } else if (grouped_.contains(queue)) {
    join_group(queue, kNoGroupTurn);
  }
}

void SqliteStore::apply(const CancelParams& p, CallResult& r) {
  auto* s = cancel_.get();
  Use u(s);
  u.text(u.at(":id"), p.id).real(u.at(":now"), p.now);
  if (!step_row(s, "cancel")) return;
  const bool kids = sqlite3_column_int64(s, 1) != 0;
  end_row(s, "cancel");
  r.ok = true;
  if (kids) {
    settled_.emplace_back(std::string(p.id), kSettledCancelled);
    settle_noted(p.now);  // its blocked children cancelled (C3.13)
  }
}

}  // namespace fenceq::daemon
