// The PostgreSQL store's write path: PgStore::run(). Every call of a batch
// becomes its statement(s) (its op's prepare(), pg_writes.cpp), all of them
// go out in one pipeline with the batch's BEGIN (and its COMMIT when asked),
// and each result is read back into its CallResult (its op's read()),
// counting per-queue events as it goes. Here: that machinery, the merging
// of consecutive completes into one statement, and the per-queue count of
// refused fenced writes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "storage/pg/pg_batch.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {
namespace {

using namespace pg;  // NOLINT: the statements' numbers

// The per-queue count a refused fenced write adds to (renew, complete,
// release, fail), or nullptr.
RefusedCount refusal_of(const RenewParams&) { return &QueueTotals::Refused::renew; }
RefusedCount refusal_of(const CompleteParams&) { return &QueueTotals::Refused::complete; }
RefusedCount refusal_of(const ReleaseParams&) { return &QueueTotals::Refused::release; }
RefusedCount refusal_of(const FailParams&) { return &QueueTotals::Refused::fail; }
template <class P>
RefusedCount refusal_of(const P&) {
  return nullptr;
}
RefusedCount refusal_of(const Call& c) {
  return std::visit([](const auto& p) { return refusal_of(p); }, c.params);
}

}  // namespace

using Batch = PgStore::Batch;

Batch::Batch(PgStore& store, const std::vector<Call>& c, std::vector<CallResult>& o)
    : s(store), calls(c), out(o), plan(c.size()), run_end(c.size(), 0), in_run(c.size(), false) {
  out.assign(calls.size(), {});
}

void Batch::prepare_all() {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto& p1 = params.emplace_back();
    auto& p2 = params.emplace_back();
    Prep x{p1, p2, plan[i], out[i].why, s.configured_, s.grouped_, kept};
    plan[i].route = prepare_call(i, x);
  }
}

// `after` (C3.13): each parent must exist, or be an earlier entry of the
// same request; otherwise the call is refused, and with it its request
// (refuse_groups), before anything is sent. One read, before the batch's
// pipeline, of the parents named: an id once known stays known, since a
// purge keeps it in purged_fences, so no write between the read and the
// batch makes the answer wrong.
void Batch::check_parents() {
  BinaryArray ids(kText);
  std::unordered_set<std::string_view> asked;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto* e = std::get_if<EnqueueParams>(&calls[i].params);
    if (!e || !e->job.parents || plan[i].route != Route::send) continue;
    for (const auto& parent : *e->job.parents) {
      if (asked.insert(parent).second) ids.add(parent);
    }
  }
  if (asked.empty()) return;
  const std::string bytes = ids.bytes();
  PgParams p;
  p.text(bytes);
  auto res = s.conn_.run(kKnownIds, p, "enqueue");
  std::unordered_set<std::string_view> known;
  for (int k = 0; k < PQntuples(res.get()); ++k) known.insert(bytes_at(res.get(), k, 0));
  std::unordered_map<std::size_t, std::unordered_set<std::string_view>> entries;  // by request
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto* e = std::get_if<EnqueueParams>(&calls[i].params);
    if (!e) continue;
    auto& earlier = entries[calls[i].group];
    if (e->job.parents && plan[i].route == Route::send) {
      for (const auto& parent : *e->job.parents) {
        if (known.contains(parent) || earlier.contains(parent)) continue;
        plan[i].route = Route::refuse;
        out[i].why = rules::unknown_parent(parent);
        break;
      }
    }
    earlier.insert(e->job.id);
  }
}

// A refused call refuses its whole group (request): nothing of it is sent.
void Batch::refuse_groups() {
  std::vector<std::size_t> refused_groups;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (plan[i].route == Route::refuse) refused_groups.push_back(calls[i].group);
  }
  if (refused_groups.empty()) return;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (std::find(refused_groups.begin(), refused_groups.end(), calls[i].group) ==
        refused_groups.end()) {
      continue;
    }
    out[i].refused = true;
    if (out[i].why.empty()) out[i].why = "another entry of the request cannot be stored";
    plan[i].route = Route::refuse;
  }
}

bool Batch::completes(std::size_t i) const {
  return std::holds_alternative<CompleteParams>(calls[i].params) && plan[i].route == Route::send;
}

void Batch::find_complete_runs() {
  for (std::size_t i = 0; i < calls.size();) {
    if (!completes(i)) {
      ++i;
      continue;
    }
    std::unordered_set<std::string_view> ids;
    std::size_t j = i;
    while (j < calls.size() && completes(j) &&
           ids.insert(std::get<CompleteParams>(calls[j].params).id).second) {
      ++j;
    }
    if (j - i >= 2) run_end[i] = j;
    i = j;
  }
}

// The run of completes that starts at call i, as one kCompleteMany.
void Batch::add_complete_run(std::size_t i) {
  BinaryArray id(kText), owner(kText), fence(kInt8), now(kFloat8), result(kText);
  for (std::size_t k = i; k < run_end[i]; ++k) {
    const auto& c = std::get<CompleteParams>(calls[k].params);
    id.add(c.id);
    owner.add(c.owner);
    fence.add_i8(c.fence);
    now.add_f8(c.now);
    result.add(c.result && *c.result ? std::optional<std::string_view>(**c.result)
                                     : std::nullopt);
    in_run[k] = true;
    plan[k].step = plan[i].step;
  }
  auto& a = arrays.emplace_back(std::array<std::string, 5>{
      id.bytes(), owner.bytes(), fence.bytes(), now.bytes(), result.bytes()});
  auto& p = run_params.emplace_back();
  for (const auto& v : a) p.text(v);
  steps.push_back({kCompleteMany, &p, nullptr});
}

void Batch::add_steps() {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto& pl = plan[i];
    if (pl.route != Route::send || in_run[i]) continue;
    pl.step = steps.size();
    if (run_end[i]) {
      add_complete_run(i);
      continue;
    }
    if (pl.pre >= 0) {
      steps.push_back({pl.pre, &params[2 * i + 1], nullptr});
      pl.step = steps.size();
    }
    steps.push_back({pl.stmt, &params[2 * i], nullptr});
    if (pl.stmt2 >= 0) steps.push_back({pl.stmt2, &params[2 * i + 1], nullptr});
  }
}

// The queues with settings, as just read (with a batch that claims).
void Batch::configs_read(std::chrono::steady_clock::time_point now) {
  std::unordered_set<std::string> configured;
  for (int k = 0, n = PQntuples(res[0].get()); k < n; ++k) {
    configured.insert(rows::queue_config(PgRow{res[0].get(), k}).first);
  }
  // A queue that got settings: its parked claims look again, now through
  // the full statement.
  for (const auto& q : configured) {
    if (!s.configured_.contains(q)) s.freed(q);
  }
  s.configured_ = std::move(configured);
  s.configs_read_ = now;
  // And the queues with groups (kGroupedQueues, the step after).
  std::unordered_set<std::string> grouped;
  for (int k = 0, n = PQntuples(res[1].get()); k < n; ++k) {
    grouped.emplace(bytes_at(res[1].get(), k, 0));
  }
  for (const auto& q : grouped) {
    if (!s.grouped_.contains(q)) s.freed(q);
  }
  s.grouped_ = std::move(grouped);
}

// A call of a kCompleteMany run: done when the run returned its id.
void Batch::read_run(std::size_t i, PGresult* r) {
  if (run_end[i]) {  // the run's first call: its ids, read once
    s.count_changes(r);
    completed.clear();
    for (int k = 0; k < PQntuples(r); ++k) {
      completed.emplace(bytes_at(r, k, 0), bytes_at(r, k, 1));
    }
  }
  auto done = completed.find(std::get<CompleteParams>(calls[i].params).id);
  out[i].ok = done != completed.end();
  if (out[i].ok) {
    s.tally_.at(done->second).completed++;
  } else {
    refusals.emplace_back(i, &QueueTotals::Refused::complete);
  }
}

void Batch::read_all() {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (plan[i].route != Route::send) continue;
    PGresult* r = res[plan[i].step].get();
    if (in_run[i]) {
      read_run(i, r);
      continue;
    }
    read_call(i, r);
    if (!out[i].ok) {
      if (auto op = refusal_of(calls[i])) refusals.emplace_back(i, op);
    }
  }
}

// Two enqueues of different groups or more: their rows in queue_groups are
// locked first, in one order (kLockGroups), before any call of the batch.
void Batch::lock_groups() {
  std::vector<std::pair<std::string_view, std::string_view>> groups;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto* e = std::get_if<EnqueueParams>(&calls[i].params);
    if (!e || !e->job.group || plan[i].route != Route::send) continue;
    groups.emplace_back(e->job.queue, *e->job.group);
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  if (groups.size() < 2) return;  // one row: no order to keep
  BinaryArray q(kText), g(kText);
  for (const auto& [queue, grp] : groups) {
    q.add(queue);
    g.add(grp);
  }
  group_arrays = {q.bytes(), g.bytes()};
  group_params.text(group_arrays[0]).text(group_arrays[1]);
  steps.push_back({kLockGroups, &group_params, nullptr});
}

// Calls answered without the database: no job, no lease, no queue.
void Batch::answer_local() {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (plan[i].route != Route::local) continue;
    if (std::holds_alternative<PurgeParams>(calls[i].params)) out[i].number = 0;
    // An owner no lease can have (U+0000): refused without asking; an id
    // with U+0000 names no job, and has no queue.
    if (auto op = refusal_of(calls[i]); op && !has_nul(lease_of(calls[i])->id)) {
      refusals.emplace_back(i, op);
    }
  }
}

bool PgStore::run(const std::vector<Call>& calls, std::vector<CallResult>& out,
                  bool commit_after) {
  const auto apart = [](const Call& c) {
    return std::holds_alternative<ScheduleSetParams>(c.params);
  };
  // With --events the transaction's events are read before its COMMIT
  // (PgStore::commit): none goes with the batch.
  if (events_on_) commit_after = false;
  if (std::none_of(calls.begin(), calls.end(), apart)) {
    const bool committed = run_batch(calls, out, commit_after);
    if (committed) ended();
    return committed;
  }
  // fenceqd sends a schedule_set alone; in any batch, it goes call by call.
  out.assign(calls.size(), {});
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (apart(calls[i])) {
      set_schedule(std::get<ScheduleSetParams>(calls[i].params), out[i]);
      continue;
    }
    std::vector<CallResult> one;
    run_batch({calls[i]}, one, false);
    out[i] = std::move(one[0]);
  }
  return false;
}

bool PgStore::run_batch(const std::vector<Call>& calls, std::vector<CallResult>& out,
                        bool commit_after) {
  Batch b(*this, calls, out);
  b.prepare_all();
  b.check_parents();
  b.refuse_groups();
  b.find_complete_runs();
  // The queues with settings, read again with a batch that claims.
  b.all_configs.null();
  const auto now = std::chrono::steady_clock::now();
  const bool reread = now >= configs_read_ + kConfigsReread &&
                      std::any_of(calls.begin(), calls.end(), [](const Call& c) {
                        return std::holds_alternative<ClaimParams>(c.params) ||
                               std::holds_alternative<ClaimNextParams>(c.params);
                      });
  if (reread) {
    b.steps.push_back({kConfigs, &b.all_configs, nullptr});
    b.steps.push_back({kGroupedQueues, &b.no_params, nullptr});
  }
  b.lock_groups();
  b.add_steps();
  if (b.steps.empty() && !commit_after) return false;
  // The first writes of the transaction take the sidecars' write lock before
  // any row lock (kWriteLock): its answer is dropped, so the steps' indexes hold.
  const bool lock = !write_locked_ && b.steps.size() > (reread ? 2u : 0u);
  if (lock) b.steps.insert(b.steps.begin(), {kWriteLock, &b.no_params, nullptr});
  b.res = conn_.pipeline(b.steps, commit_after, "batch");
  if (lock) {
    write_locked_ = true;
    b.res.erase(b.res.begin());
  }
  if (reread) b.configs_read(now);
  b.read_all();
  b.answer_local();
  if (!b.refusals.empty()) count_refusals(calls, b.refusals, commit_after);
  return commit_after;
}

void PgStore::count_refusals(
    const std::vector<Call>& calls,
    const std::vector<std::pair<std::size_t, std::uint64_t QueueTotals::Refused::*>>& refusals,
    bool committed) {
  // Refusals are rare: one lookup of their jobs' queues for the whole batch,
  // in the transaction; or, when the batch's COMMIT went with its statements,
  // right after it (a job's queue never changes). That late lookup failing
  // costs only the per-queue counts: the batch is committed.
  BinaryArray ids(kText);
  std::unordered_set<std::string_view> asked;
  for (const auto& [i, op] : refusals) {
    const auto id = lease_of(calls[i])->id;
    if (asked.insert(id).second) ids.add(id);
  }
  const std::string bytes = ids.bytes();
  PgParams p;
  p.text(bytes);
  PgResult res;
  try {
    res = conn_.run(kQueuesOf, p, "queues of refused writes");
  } catch (const StoreError& e) {
    if (!committed) throw;
    spdlog::debug("refused writes not counted per queue: {}", e.what());
    return;
  }
  const PGresult* r = res.get();
  std::unordered_map<std::string_view, std::string_view> queue_of;
  for (int k = 0; k < PQntuples(r); ++k) queue_of.emplace(bytes_at(r, k, 0), bytes_at(r, k, 1));
  for (const auto& [i, op] : refusals) {
    auto q = queue_of.find(lease_of(calls[i])->id);
    if (q != queue_of.end()) tally_.at(q->second).refused.*op += 1;
  }
}

}  // namespace fenceq::daemon
