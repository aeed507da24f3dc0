// The PostgreSQL store's write path: PgStore::run(). Every call of a batch
// becomes its statement (prepare(), one per parameter struct), all of them
// go out in one pipeline with the batch's BEGIN (and its COMMIT when asked),
// and each result is read back into its CallResult (Batch::read(), one per
// parameter struct), counting per-queue events as it goes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "fenceq_protocol/limits.hpp"
#include "job_rules.hpp"
#include "pg_statements.hpp"
#include "pg_store.hpp"
#include "store_rows.hpp"

namespace fenceq::daemon {
namespace {

using namespace pg;  // NOLINT: the statements' numbers

// What a call needs from the database: its statement(s), an answer known
// without asking (a NUL in an id: no such job can exist), or a refusal (a
// NUL in a string to store).
enum class Route { send, local, refuse };

// A call's statements: `stmt`, `stmt2` after it (enqueue's), and `pre` sent
// before it (a claim's lock) with the second parameters; `step` is where
// `stmt`'s result is in the pipeline.
struct Planned {
  Route route = Route::local;
  int stmt = -1, stmt2 = -1;
  int pre = -1;
  std::size_t step = 0;
};

// What prepare() fills for one call.
struct Prep {
  PgParams& p;
  PgParams& p2;
  Planned& plan;
  std::string& why;
  const std::unordered_set<std::string>& configured;
  Route send(int stmt) {
    plan.stmt = stmt;
    return Route::send;
  }
  Route refuse(const char* field) {
    why = std::string("PostgreSQL text cannot hold U+0000: field '") + field +
          "' contains a NUL character; nothing was applied";
    return Route::refuse;
  }
};

void lease(PgParams& p, const LeaseParams& l, double now) {
  p.text(l.id).text(l.owner).i8(l.fence).f8(now);
}

// No lease can have an id or owner with U+0000.
bool nul_lease(const LeaseParams& l) { return has_nul(l.id) || has_nul(l.owner); }

Route prepare(const EnqueueParams& c, Prep& x) {
  const NewJob& j = c.job;
  if (has_nul(j.id)) return x.refuse("id");
  if (has_nul(j.queue)) return x.refuse("queue");
  x.p.text(j.id).text(j.queue);
  if (j.payload) {
    // bytea, with whether it was sent as bin or str, so claim_next gives
    // back the same msgpack type (SQLite keeps BLOB or TEXT).
    x.p.bytea(j.payload->bytes).boolean(j.payload->binary);
  } else {
    x.p.null().boolean(true);
  }
  x.p.i8(j.priority).f8(j.delay > 0 ? c.now + j.delay : 0.0).i8(j.max_attempts).f8(c.now);
  x.p2.text(j.id);
  // The INSERT reads the kept fence of a purged id from its snapshot; a
  // purge by another sidecar that committed after that snapshot is
  // invisible to it. The second statement, with a snapshot of its own,
  // takes the kept fence out and raises the new row's fence to it, so a
  // fence never goes back (C1.2); harmless otherwise.
  x.plan.stmt2 = kUnpurge;
  return x.send(kEnqueue);
}

Route prepare(const ClaimParams& c, Prep& x) {
  if (has_nul(c.id)) return Route::local;
  if (has_nul(c.owner)) return x.refuse("owner");
  x.p.text(c.id).text(c.owner).f8(c.now + c.ttl).f8(c.now);
  if (x.configured.empty()) return x.send(kClaimFast);
  x.p2.text(c.id);
  x.plan.pre = kLockQueueOf;  // sent first, with p2
  return x.send(kClaim);
}

Route prepare(const ClaimNextParams& c, Prep& x) {
  if (has_nul(c.queue)) return Route::local;
  if (has_nul(c.owner)) return x.refuse("owner");
  x.p.text(c.queue).text(c.owner).f8(c.now + c.ttl).f8(c.now).i8(c.max);
  if (!x.configured.contains(std::string(c.queue))) return x.send(kClaimNextFast);
  x.p2.text(c.queue);
  x.plan.pre = kLockQueue;  // sent first, with p2
  return x.send(kClaimNext);
}

Route prepare(const RenewParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;  // no such lease
  if (c.progress && has_nul(*c.progress)) return x.refuse("progress");
  lease(x.p, c, c.now);
  x.p.f8(c.now + c.ttl).opt_text(c.progress);
  return x.send(kRenew);
}

Route prepare(const CompleteParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  const bool given = c.result && *c.result;
  if (given && has_nul(**c.result)) return x.refuse("result");
  lease(x.p, c, c.now);
  x.p.opt_text(given ? std::optional<std::string_view>(**c.result) : std::nullopt);
  return x.send(kComplete);
}

Route prepare(const FailParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  if (has_nul(c.error)) return x.refuse("error");
  lease(x.p, c, c.now);
  x.p.text(c.error).opt_f8(c.retry_in);
  return x.send(kFail);
}

Route prepare(const CheckParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  lease(x.p, c, c.now);
  return x.send(kCheck);
}

Route prepare(const ReleaseParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  x.p.text(c.id).text(c.owner).i8(c.fence);
  return x.send(kRelease);
}

Route prepare(const UnclaimParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  x.p.text(c.id).text(c.owner).i8(c.fence);
  return x.send(kUnclaim);
}

Route prepare(const RetryParams& c, Prep& x) {
  if (has_nul(c.id)) return Route::local;
  x.p.text(c.id).f8(c.now);
  return x.send(kRetry);
}

Route prepare(const CancelParams& c, Prep& x) {
  if (has_nul(c.id)) return Route::local;
  x.p.text(c.id).f8(c.now);
  return x.send(kCancel);
}

Route prepare(const PurgeParams& c, Prep& x) {
  if (c.queue && has_nul(*c.queue)) return Route::local;  // no such queue
  x.p.f8(c.now - c.older_than)
      .opt_text(c.queue ? std::optional<std::string_view>(*c.queue) : std::nullopt);
  return x.send(kPurge);
}

Route prepare(const ReapParams& c, Prep& x) {
  x.p.f8(c.now);
  return x.send(kReap);
}

Route prepare(const ClockMarkParams& c, Prep& x) {
  x.p.text("clock_high_water").f8(c.mark);
  return x.send(kSetMeta);
}

// Settings changed or removed: the statement notifies the other sidecars.
Route prepare(const QueueConfigParams& c, Prep& x) {
  if (has_nul(c.queue)) return x.refuse("queue");
  x.p.text(c.queue);
  if (c.config == QueueConfig{}) return x.send(kDeleteConfig);
  x.p.i8(c.config.paused ? 1 : 0).i8(c.config.max_leased).i8(c.config.rate).f8(c.config.per);
  return x.send(kSetConfig);
}

Route prepare(const ScheduleDeleteParams& c, Prep& x) {
  if (has_nul(c.name)) return Route::local;
  x.p.text(c.name);
  return x.send(kScheduleDelete);
}

Route prepare(const TakeTickParams& c, Prep& x) {
  if (has_nul(c.name)) return Route::local;
  x.p.text(c.name).f8(c.tick);
  return x.send(kTakeTick);
}

// Never reached: run() sets a batch with a schedule_set apart.
Route prepare(const ScheduleSetParams&, Prep&) { return Route::local; }

// The per-queue count a refused fenced write adds to (renew, complete,
// release, fail), or nullptr.
using RefusedCount = std::uint64_t QueueTotals::Refused::*;
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

std::int64_t command_rows(const PGresult* r) {
  const char* n = PQcmdTuples(const_cast<PGresult*>(r));
  return n && *n ? std::strtoll(n, nullptr, 10) : 0;
}

}  // namespace

struct PgStore::Batch {
  PgStore& s;
  const std::vector<Call>& calls;
  std::vector<CallResult>& out;
  std::vector<Planned> plan;
  std::deque<PgParams> params;  // two a call; stable: steps point into it
  // Consecutive completes of distinct jobs (complete_many's items) go as one
  // statement (kCompleteMany): one plan and one execution instead of one
  // per job. Each keeps its own condition, so each is judged as alone.
  std::vector<std::size_t> run_end;  // at a run's first call: one past its last
  std::vector<bool> in_run;
  std::deque<std::array<std::string, 5>> arrays;  // stable: run parameters point into it
  std::deque<PgParams> run_params;
  PgParams all_configs;
  std::vector<PgConnection::Step> steps;
  std::vector<PgResult> res;
  std::unordered_map<std::string_view, std::string_view> completed;  // of the run read: id, queue
  // The fenced writes refused, by call: counted for their job's queue.
  std::vector<std::pair<std::size_t, RefusedCount>> refusals;

  Batch(PgStore& store, const std::vector<Call>& c, std::vector<CallResult>& o)
      : s(store), calls(c), out(o), plan(c.size()), run_end(c.size(), 0), in_run(c.size(), false) {
    out.assign(calls.size(), {});
  }

  void prepare_all() {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      auto& p1 = params.emplace_back();
      auto& p2 = params.emplace_back();
      Prep x{p1, p2, plan[i], out[i].why, s.configured_};
      plan[i].route = std::visit([&](const auto& p) { return prepare(p, x); }, calls[i].params);
    }
  }

  // A refused call refuses its whole group (request): nothing of it is sent.
  void refuse_groups() {
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

  bool completes(std::size_t i) const {
    return std::holds_alternative<CompleteParams>(calls[i].params) && plan[i].route == Route::send;
  }

  void find_complete_runs() {
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
  void add_complete_run(std::size_t i) {
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

  void add_steps() {
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
  void configs_read(std::chrono::steady_clock::time_point now) {
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
  }

  // A call of a kCompleteMany run: done when the run returned its id.
  void read_run(std::size_t i, PGresult* r) {
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

  void read_all() {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (plan[i].route != Route::send) continue;
      PGresult* r = res[plan[i].step].get();
      if (in_run[i]) {
        read_run(i, r);
        continue;
      }
      std::visit([&](const auto& p) { read(p, i, r); }, calls[i].params);
      if (!out[i].ok) {
        if (auto op = refusal_of(calls[i])) refusals.emplace_back(i, op);
      }
    }
  }

  // Calls answered without the database: no job, no lease, no queue.
  void answer_local() {
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

  // --- one result each (reads and counts move no change count) ----------
  void read(const EnqueueParams& c, std::size_t i, PGresult* r) {
    s.count_changes(r);
    s.count_changes(res[plan[i].step + 1].get());
    out[i].ok = PQntuples(r) == 1;
    if (out[i].ok) s.freed(c.job.queue);
  }
  void read(const ClaimParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    if (PQntuples(r) == 0) return;
    out[i].number = int_at(r, 0, 0);
    auto& t = s.tally_.at(bytes_at(r, 0, 1));
    t.claimed++;
    if (int_at(r, 0, 2) != 0) t.expired++;
  }
  void read(const ClaimNextParams& c, std::size_t i, PGresult* r) {
    s.count_changes(r);
    // Its lock found no settings row: the queue has none any more.
    if (plan[i].pre >= 0 && PQntuples(res[plan[i].step - 1].get()) == 0) {
      s.configured_.erase(std::string(c.queue));
    }
    const int rows = PQntuples(r);
    std::vector<std::pair<std::int64_t, std::int64_t>> order;
    auto& jobs = out[i].jobs;
    for (int k = 0; k < rows; ++k) {
      jobs.push_back(rows::claimed_job(PgRow{r, k}, order));
      if (int_at(r, k, 7) != 0) s.tally_.at(c.queue).expired++;
    }
    if (rows > 0) s.tally_.at(c.queue).claimed += static_cast<std::uint64_t>(rows);
    jobs = rules::most_urgent_first(std::move(jobs), order);
  }
  void read(const RenewParams& c, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) == 1;
    if (out[i].ok) {
      s.queue_changes_.lease_ends.emplace_back(text_at(r, 0, 0).value_or(""), c.now + c.ttl);
    }
  }
  void read(const CompleteParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) == 1;
    if (out[i].ok) s.tally_.at(bytes_at(r, 0, 0)).completed++;
  }
  void read(const CheckParams&, std::size_t i, PGresult* r) { out[i].ok = PQntuples(r) > 0; }
  void read(const ReleaseParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) == 1;
    if (out[i].ok) s.freed(text_at(r, 0, 0).value_or(""));
  }
  void read(const UnclaimParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) > 0;
    if (out[i].ok) s.freed(text_at(r, 0, 0).value_or(""));
  }
  void read(const RetryParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) == 1;
    if (!out[i].ok) return;
    s.freed(text_at(r, 0, 0).value_or(""));
    s.tally_.at(bytes_at(r, 0, 0)).retried++;
  }
  void read(const CancelParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) == 1;
  }
  void read(const FailParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = PQntuples(r) == 1;
    if (!out[i].ok) return;
    auto& t = s.tally_.at(bytes_at(r, 0, 1));
    t.failed++;
    if (int_at(r, 0, 0) == 0) {
      // Claimable again after the backoff.
      t.retried++;
      s.freed(text_at(r, 0, 1).value_or(""));
    } else {
      t.dead++;  // out of attempts
    }
  }
  void read(const PurgeParams&, std::size_t i, PGresult* r) {
    const auto n = int_at(r, 0, 0);
    out[i].number = n;
    s.changes_ += 2 * n;  // deleted, and their fences kept
  }
  void read(const ReapParams&, std::size_t, PGresult* r) {
    s.count_changes(r);
    for (int k = 0; k < PQntuples(r); ++k) {
      auto& t = s.tally_.at(bytes_at(r, k, 0));
      t.dead++;
      if (int_at(r, k, 1) != 0) t.expired++;  // not released on its last attempt
    }
  }
  void read(const ClockMarkParams&, std::size_t, PGresult* r) { s.count_changes(r); }
  void read(const QueueConfigParams& c, std::size_t, PGresult*) {
    // From this transaction's next claim on: the full statement. (Rolled
    // back, the guess is merely pessimistic until the settings are read
    // again.) Removed settings: the cache learns it at the queue's next claim.
    if (!(c.config == QueueConfig{})) s.configured_.emplace(c.queue);
  }
  void read(const ScheduleDeleteParams&, std::size_t i, PGresult* r) {
    out[i].ok = command_rows(r) > 0;
  }
  void read(const TakeTickParams&, std::size_t i, PGresult* r) {
    s.count_changes(r);
    out[i].ok = command_rows(r) == 1;
  }
  void read(const ScheduleSetParams&, std::size_t, PGresult*) {}  // never sent here
};

bool PgStore::run(const std::vector<Call>& calls, std::vector<CallResult>& out,
                  bool commit_after) {
  const auto apart = [](const Call& c) {
    return std::holds_alternative<ScheduleSetParams>(c.params);
  };
  if (std::none_of(calls.begin(), calls.end(), apart)) {
    return run_batch(calls, out, commit_after);
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
  if (reread) b.steps.push_back({kConfigs, &b.all_configs, nullptr});
  b.add_steps();
  if (b.steps.empty() && !commit_after) return false;
  b.res = conn_.pipeline(b.steps, commit_after, "batch");
  if (reread) b.configs_read(now);
  b.read_all();
  b.answer_local();
  if (!b.refusals.empty()) count_refusals(calls, b.refusals, commit_after);
  return commit_after;
}

void PgStore::set_schedule(const ScheduleSetParams& p, CallResult& r) {
  const Schedule& sc = *p.schedule;
  for (auto [field, v] : {std::pair<const char*, std::string_view>{"name", sc.name},
                          {"cron", sc.cron}, {"tz", sc.tz}, {"queue", sc.queue}}) {
    if (has_nul(v)) {
      r.refused = true;
      r.why = std::string("PostgreSQL text cannot hold U+0000: field '") + field +
              "' contains a NUL character; nothing was applied";
      return;
    }
  }
  {
    PgParams n;
    n.text(sc.name);
    auto res = conn_.run(kScheduleCount, n, "schedule_set");
    const bool exists = !PQgetisnull(res.get(), 0, 1) && int_at(res.get(), 0, 1) != 0;
    if (!exists && static_cast<std::size_t>(int_at(res.get(), 0, 0)) >= protocol::kMaxSchedules) {
      return;
    }
  }
  PgParams w;
  w.text(sc.name).text(sc.cron).text(sc.tz).text(sc.queue);
  if (sc.payload) {
    w.bytea(sc.payload->bytes).boolean(sc.payload->binary);
  } else {
    w.null().boolean(true);
  }
  w.i8(sc.priority).i8(sc.max_attempts).f8(p.now);
  conn_.run(kScheduleSet, w, "schedule_set");
  r.ok = true;
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
